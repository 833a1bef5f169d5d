//! The live view of `squall serve` on a terminal (the terminal handling, keys and
//! helpers of [`crate::liveview`]): three screens over the server's time series
//! ([`crate::serveseries`]): overview (requests/s, connections, throughput, request
//! latency, errors by kind), responses (status classes, error counters since the start)
//! and cores (per-worker requests/s and load). `q` starts the graceful stop.

use ratatui::layout::{Constraint, Direction, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Row, Sparkline, Table, Tabs};
use ratatui::Frame;

use crate::liveview::{core_rows, f3, kv, ViewState};
use crate::serveseries::{error_kinds, ServeSample, ServeSeries};

/// What the view shows besides the samples.
#[derive(Clone, Debug, Default)]
pub struct ServeHeader {
    /// `ADDR:PORT over afpacket:IF`.
    pub listen: String,
    pub cores: u32,
    /// `--duration`, if given.
    pub duration_s: Option<f64>,
}

/// The screens (keys 1-3, Tab).
pub const TABS: [&str; 3] = ["1 Overview", "2 Responses and errors", "3 Cores"];

fn block(title: &str) -> Block<'_> {
    Block::default().borders(Borders::ALL).title(title)
}

/// Draws the whole view into `f`.
pub fn draw(f: &mut Frame, h: &ServeHeader, v: &ViewState, s: &ServeSeries) {
    let rows = Layout::default()
        .direction(Direction::Vertical)
        .constraints([
            Constraint::Length(1),
            Constraint::Length(1),
            Constraint::Min(5),
            Constraint::Length(1),
        ])
        .split(f.area());
    let last = s.samples.last().cloned().unwrap_or_default();
    let state = if v.stops == 0 {
        "serving"
    } else {
        "stopping: answering in-flight requests"
    };
    let till = h.duration_s.map_or(String::new(), |d| format!("/{d:.0}"));
    f.render_widget(
        Paragraph::new(Line::from(vec![
            Span::styled(
                "squall serve ",
                Style::default().add_modifier(Modifier::BOLD),
            ),
            Span::raw(format!(
                "{}  {} worker(s)  {:.0}{till} s  {state}",
                h.listen, h.cores, last.t
            )),
        ])),
        rows[0],
    );
    f.render_widget(
        Tabs::new(TABS.to_vec()).select(v.tab).highlight_style(
            Style::default()
                .fg(Color::Yellow)
                .add_modifier(Modifier::BOLD),
        ),
        rows[1],
    );
    match v.tab {
        1 => responses(f, rows[2], s, &last),
        2 => cores(f, rows[2], &last),
        _ => overview(f, rows[2], s, &last),
    }
    f.render_widget(
        Paragraph::new(
            "keys: 1/2/3 or Tab switch screens   q stop serving (in-flight answers finish)",
        )
        .style(Style::default().fg(Color::DarkGray)),
        rows[3],
    );
}

fn overview(f: &mut Frame, area: Rect, s: &ServeSeries, last: &ServeSample) {
    let cols = Layout::default()
        .direction(Direction::Horizontal)
        .constraints([Constraint::Percentage(50), Constraint::Percentage(50)])
        .split(area);
    let left = Layout::default()
        .direction(Direction::Vertical)
        .constraints([Constraint::Length(11), Constraint::Min(4)])
        .split(cols[0]);
    let lines = vec![
        kv("requests/s", format!("{:.0}", last.rps)),
        kv("connections/s", format!("{:.0}", last.cps)),
        kv(
            "connections open|idle",
            format!("{} | {}", last.active, last.idle),
        ),
        kv("requests answered", last.requests.to_string()),
        kv(
            "Gbit/s out|in",
            format!("{} | {}", f3(last.tx_gbps), f3(last.rx_gbps)),
        ),
        kv("Mpps", f3(last.mpps)),
        kv(
            "errors (last s|total)",
            format!("{} | {}", last.errors, last.errors_total),
        ),
        kv("retransmits (last s)", last.retransmits.to_string()),
    ];
    f.render_widget(
        Paragraph::new(lines).block(block("Rates (last second)")),
        left[0],
    );
    let hist: Vec<u64> = s.samples.iter().map(|x| x.rps.round() as u64).collect();
    let width = left[1].width.saturating_sub(2) as usize;
    f.render_widget(
        Sparkline::default()
            .block(block("requests/s, one bar per second"))
            .data(&hist[hist.len().saturating_sub(width)..])
            .style(Style::default().fg(Color::Cyan)),
        left[1],
    );
    let right = Layout::default()
        .direction(Direction::Vertical)
        .constraints([Constraint::Length(4), Constraint::Min(4)])
        .split(cols[1]);
    let l = &last.latency;
    let row = Row::new(vec![
        "request".to_string(),
        l.count.to_string(),
        l.p50.to_string(),
        l.p90.to_string(),
        l.p99.to_string(),
        l.max.to_string(),
    ]);
    f.render_widget(
        Table::new(
            vec![row],
            [
                Constraint::Length(10),
                Constraint::Length(8),
                Constraint::Length(7),
                Constraint::Length(7),
                Constraint::Length(7),
                Constraint::Length(8),
            ],
        )
        .header(
            Row::new(vec!["latency us", "count", "p50", "p90", "p99", "max"])
                .style(Style::default().fg(Color::Gray)),
        )
        .block(block("Request latency (last second)")),
        right[0],
    );
    f.render_widget(
        Paragraph::new(error_lines(s)).block(block("Errors by kind (since start)")),
        right[1],
    );
}

/// The non-zero error counters since the start, or a green "none".
fn error_lines(s: &ServeSeries) -> Vec<Line<'static>> {
    let mut v: Vec<Line> = error_kinds(&s.last.total)
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .map(|(k, n)| kv(k, n.to_string()))
        .collect();
    if v.is_empty() {
        v.push(Line::from(Span::styled(
            "none",
            Style::default().fg(Color::Green),
        )));
    }
    v
}

fn responses(f: &mut Frame, area: Rect, s: &ServeSeries, last: &ServeSample) {
    let cols = Layout::default()
        .direction(Direction::Horizontal)
        .constraints([Constraint::Percentage(50), Constraint::Percentage(50)])
        .split(area);
    let st = &s.last.total.stats;
    let rows: Vec<Row> = (1..=5)
        .map(|k| {
            Row::new(vec![
                format!("{k}xx"),
                format!("{:.0}", last.by_class[k]),
                st.by_class[k].to_string(),
            ])
        })
        .collect();
    f.render_widget(
        Table::new(
            rows,
            [
                Constraint::Length(8),
                Constraint::Length(12),
                Constraint::Length(14),
            ],
        )
        .header(
            Row::new(vec!["status", "per second", "since start"])
                .style(Style::default().fg(Color::Gray)),
        )
        .block(block("Responses by status class")),
        cols[0],
    );
    let t = &s.last.total;
    let mut lines = vec![
        kv("connections accepted", st.accepted.to_string()),
        kv("closed idle (timeout)", st.idle_closed.to_string()),
        kv("body bytes", st.body_bytes.to_string()),
        kv("resets sent", t.tcp.resets_sent.to_string()),
        kv("retransmits", t.tcp.retransmits.to_string()),
        Line::from(""),
    ];
    lines.extend(error_lines(s));
    f.render_widget(
        Paragraph::new(lines).block(block("Connections and errors (since start)")),
        cols[1],
    );
}

fn cores(f: &mut Frame, area: Rect, last: &ServeSample) {
    let rows = last.cores.iter().map(|c| {
        let text = format!(
            "core {:<3} {:>9.0} req/s {:>8} open {:>8.3} Gbit/s",
            c.core, c.rps, c.active, c.wire_gbps
        );
        (text, c.load)
    });
    core_rows(f, area, block("Workers (last second)"), rows);
}

/// The progress line printed once a second when the view is not shown.
pub fn progress_line(s: &ServeSample) -> String {
    format!(
        "[{:>6.1}s] {:>9.0} req/s {:>8.0} conn/s {:>7} open {:>7} idle {:>8.3} Gbit/s  errors {}  latency p99 {} us",
        s.t,
        s.rps,
        s.cps,
        s.active,
        s.idle,
        s.wire_gbps(),
        s.errors_total,
        s.latency.p99
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::liveview::{paint_to_text, Action};
    use crate::servelive::WorkerFigures;
    use crate::serveseries::ServeReading;
    use ratatui::crossterm::event::{KeyCode, KeyModifiers};

    fn series() -> ServeSeries {
        let mut s = ServeSeries::default();
        s.push(ServeReading::of(0.0, vec![WorkerFigures::default(); 2]));
        let mut w = WorkerFigures {
            open: 17,
            idle: 5,
            busy_ns: 3,
            loop_ns: 4,
            ..WorkerFigures::default()
        };
        w.stats.requests = 1234;
        w.stats.by_class[2] = 1230;
        w.stats.by_class[4] = 4;
        w.stats.parse_errors = 4;
        w.req_lat.record_ns(42_000);
        s.push(ServeReading::of(1.0, vec![w, WorkerFigures::default()]));
        s
    }

    #[test]
    fn screens_show_the_figures_and_keys_switch_them() {
        let h = ServeHeader {
            listen: "198.18.48.1:80 over afpacket:sq-srv0".into(),
            cores: 2,
            duration_s: None,
        };
        let s = series();
        let mut v = ViewState::default();
        let t = paint_to_text(|f| draw(f, &h, &v, &s), 120, 30);
        assert!(t.contains("requests/s") && t.contains("1234"), "{t}");
        assert!(t.contains("17 | 5"), "{t}");
        assert!(
            t.contains("parse_errors") && t.contains("Request latency"),
            "{t}"
        );
        assert_eq!(
            v.key(KeyCode::Char('2'), KeyModifiers::NONE),
            Action::Redraw
        );
        let t = paint_to_text(|f| draw(f, &h, &v, &s), 120, 30);
        assert!(t.contains("2xx") && t.contains("1230"), "{t}");
        v.key(KeyCode::Tab, KeyModifiers::NONE);
        let t = paint_to_text(|f| draw(f, &h, &v, &s), 120, 30);
        assert!(t.contains("core 1") && t.contains("load 75%"), "{t}");
        assert_eq!(v.key(KeyCode::Char('q'), KeyModifiers::NONE), Action::Stop);
        let t = paint_to_text(|f| draw(f, &h, &v, &s), 120, 30);
        assert!(t.contains("stopping"), "{t}");
        let _ = paint_to_text(|f| draw(f, &h, &v, &s), 10, 3);
        let p = progress_line(s.samples.last().unwrap());
        assert!(p.contains("1234 req/s") && p.contains("errors 4"), "{p}");
    }
}
