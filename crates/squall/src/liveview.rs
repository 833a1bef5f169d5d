//! The live view of `squall run` on a terminal (ratatui on crossterm, drawn on stderr so
//! stdout keeps the summary): three screens over the time series (overview, template
//! groups, cores), switched with keys; `q` stops the generation (flows drain), a second
//! `q` cuts them. It reads the samples the watcher thread takes: the workers never know
//! it is there.

use std::io::{IsTerminal, Stderr};
use std::time::Duration;

use ratatui::backend::{Backend, CrosstermBackend};
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::crossterm::{execute, terminal};
use ratatui::layout::{Constraint, Direction, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Gauge, Paragraph, Row, Sparkline, Table, Tabs};
use ratatui::{Frame, Terminal};

use crate::series::{error_kinds, Sample, Series};

/// What the view shows besides the samples.
#[derive(Clone, Debug, Default)]
pub struct Header {
    pub profile: String,
    pub mode: String,
    pub duration_s: f64,
    /// The profile's scheduled CPS (templates' cps x mult).
    pub target_cps: f64,
}

/// The screens.
pub const TABS: [&str; 3] = ["1 Overview", "2 Template groups", "3 Cores"];

/// The view's state: the screen shown and whether a stop was asked.
#[derive(Clone, Debug, Default)]
pub struct ViewState {
    pub tab: usize,
    /// 0: running; 1: stop asked (draining); 2: cut asked.
    pub stops: u8,
}

/// What a key asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    None,
    Redraw,
    Stop,
    Cut,
}

impl ViewState {
    /// Applies a key press.
    pub fn key(&mut self, code: KeyCode, mods: KeyModifiers) -> Action {
        let ctrl_c = code == KeyCode::Char('c') && mods.contains(KeyModifiers::CONTROL);
        match code {
            _ if ctrl_c || matches!(code, KeyCode::Char('q') | KeyCode::Esc) => {
                self.stops = (self.stops + 1).min(2);
                if self.stops == 1 {
                    Action::Stop
                } else {
                    Action::Cut
                }
            }
            KeyCode::Char(c @ '1'..='3') => {
                self.tab = (c as u8 - b'1') as usize;
                Action::Redraw
            }
            KeyCode::Tab | KeyCode::Right => {
                self.tab = (self.tab + 1) % TABS.len();
                Action::Redraw
            }
            KeyCode::BackTab | KeyCode::Left => {
                self.tab = (self.tab + TABS.len() - 1) % TABS.len();
                Action::Redraw
            }
            _ => Action::None,
        }
    }
}

/// Whether the live view can be shown: stderr is a terminal (and TERM is not `dumb`).
pub fn available() -> bool {
    std::io::stderr().is_terminal() && std::env::var("TERM").map_or(true, |t| t != "dumb")
}

/// The terminal, restored (raw mode off, main screen back) when dropped.
pub struct Screen {
    term: Terminal<CrosstermBackend<Stderr>>,
}

impl Screen {
    pub fn open() -> std::io::Result<Screen> {
        terminal::enable_raw_mode()?;
        let mut err = std::io::stderr();
        if let Err(e) = execute!(err, terminal::EnterAlternateScreen) {
            let _ = terminal::disable_raw_mode();
            return Err(e);
        }
        let mut term = Terminal::new(CrosstermBackend::new(err))?;
        // A clean screen: text another thread printed meanwhile is not left in the
        // cells the first frame leaves blank.
        let _ = term.clear();
        Ok(Screen { term })
    }
    pub fn draw(&mut self, h: &Header, v: &ViewState, s: &Series) {
        self.draw_with(|f| draw(f, h, v, s));
    }
    /// Draws a frame with `paint` (the screens of another command: `squall serve`).
    pub fn draw_with(&mut self, paint: impl FnOnce(&mut Frame)) {
        let _ = self.term.draw(paint);
    }
    /// Waits up to `d` for a key press.
    pub fn key(&mut self, d: Duration) -> Option<(KeyCode, KeyModifiers)> {
        if !event::poll(d).ok()? {
            return None;
        }
        match event::read().ok()? {
            Event::Key(k) if k.kind == KeyEventKind::Press => Some((k.code, k.modifiers)),
            Event::Resize(..) => Some((KeyCode::Null, KeyModifiers::NONE)),
            _ => None,
        }
    }
}

/// Leaves the live view's terminal modes (raw mode, the alternate screen, the hidden
/// cursor) for a process about to exit without dropping its [`Screen`]; harmless when no
/// view is open.
pub fn restore_terminal() {
    if !available() {
        return;
    }
    let mut err = std::io::stderr();
    let _ = terminal::disable_raw_mode();
    let _ = execute!(
        err,
        terminal::LeaveAlternateScreen,
        ratatui::crossterm::cursor::Show
    );
}

impl Drop for Screen {
    fn drop(&mut self) {
        let _ = terminal::disable_raw_mode();
        let _ = execute!(self.term.backend_mut(), terminal::LeaveAlternateScreen);
        let _ = self.term.show_cursor();
    }
}

pub(crate) fn f3(v: f64) -> String {
    format!("{v:.3}")
}

pub(crate) fn kv<'a>(k: &'a str, v: String) -> Line<'a> {
    Line::from(vec![
        Span::styled(format!("{k:<22}"), Style::default().fg(Color::Gray)),
        Span::styled(v, Style::default().add_modifier(Modifier::BOLD)),
    ])
}

/// Draws the whole view into `f`.
pub fn draw(f: &mut Frame, h: &Header, v: &ViewState, s: &Series) {
    let area = f.area();
    let rows = Layout::default()
        .direction(Direction::Vertical)
        .constraints([
            Constraint::Length(1),
            Constraint::Length(1),
            Constraint::Min(5),
            Constraint::Length(1),
        ])
        .split(area);
    let last = s.samples.last().cloned().unwrap_or_default();
    let state = match v.stops {
        0 => "running",
        1 => "stopping: draining flows",
        _ => "stopping: cutting flows",
    };
    f.render_widget(
        Paragraph::new(Line::from(vec![
            Span::styled("squall run ", Style::default().add_modifier(Modifier::BOLD)),
            Span::raw(format!(
                "{}  {}  {:.0}/{:.0} s  {state}",
                h.profile, h.mode, last.t, h.duration_s
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
        1 => groups(f, rows[2], &last),
        2 => cores(f, rows[2], &last),
        _ => overview(f, rows[2], h, s, &last),
    }
    f.render_widget(
        Paragraph::new("keys: 1/2/3 or Tab switch screens   q stop the generation (flows drain)   q again cut the flows")
            .style(Style::default().fg(Color::DarkGray)),
        rows[3],
    );
}

fn overview(f: &mut Frame, area: Rect, h: &Header, s: &Series, last: &Sample) {
    let cols = Layout::default()
        .direction(Direction::Horizontal)
        .constraints([Constraint::Percentage(50), Constraint::Percentage(50)])
        .split(area);
    let left = Layout::default()
        .direction(Direction::Vertical)
        .constraints([Constraint::Length(11), Constraint::Min(4)])
        .split(cols[0]);
    let lines = vec![
        kv(
            "CPS",
            format!("{:.0}  (target {:.0})", last.cps, h.target_cps),
        ),
        kv("active flows", last.active.to_string()),
        kv("completed", last.completed.to_string()),
        kv(
            "Gbit/s client|server",
            format!("{} | {}", f3(last.tx_gbps), f3(last.rx_gbps)),
        ),
        kv("Mpps", f3(last.mpps)),
        kv(
            "errors (last s|total)",
            format!("{} | {}", last.errors, last.errors_total),
        ),
        kv(
            "retransmits (last s)",
            last.retransmits.map_or("-".into(), |r| r.to_string()),
        ),
    ];
    f.render_widget(
        Paragraph::new(lines).block(
            Block::default()
                .borders(Borders::ALL)
                .title("Rates (last second)"),
        ),
        left[0],
    );
    let hist: Vec<u64> = s.samples.iter().map(|x| x.cps.round() as u64).collect();
    let width = left[1].width.saturating_sub(2) as usize;
    let tail = &hist[hist.len().saturating_sub(width)..];
    f.render_widget(
        Sparkline::default()
            .block(
                Block::default()
                    .borders(Borders::ALL)
                    .title("CPS, one bar per second"),
            )
            .data(tail)
            .style(Style::default().fg(Color::Cyan)),
        left[1],
    );
    let right = Layout::default()
        .direction(Direction::Vertical)
        .constraints([Constraint::Length(6), Constraint::Min(4)])
        .split(cols[1]);
    let mut rows = Vec::new();
    if let Some(l) = &last.latency {
        for (name, x) in ["connect", "first_byte", "last_byte"].iter().zip(l.iter()) {
            rows.push(Row::new(vec![
                name.to_string(),
                x.count.to_string(),
                x.p50.to_string(),
                x.p90.to_string(),
                x.p99.to_string(),
                x.max.to_string(),
            ]));
        }
    }
    f.render_widget(
        Table::new(
            rows,
            [
                Constraint::Length(10),
                Constraint::Length(7),
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
        .block(
            Block::default()
                .borders(Borders::ALL)
                .title("Latency (last second)"),
        ),
        right[0],
    );
    let mut errs: Vec<Line> = Vec::new();
    if let Some((c, sv)) = &s.last.sides {
        for ((name, a), (_, b)) in error_kinds(c).into_iter().zip(error_kinds(sv)) {
            if a + b > 0 {
                errs.push(kv(name, format!("{a} client, {b} server")));
            }
        }
    }
    if errs.is_empty() {
        errs.push(Line::from(Span::styled(
            "none",
            Style::default().fg(Color::Green),
        )));
    }
    f.render_widget(
        Paragraph::new(errs).block(
            Block::default()
                .borders(Borders::ALL)
                .title("Errors by kind (since start)"),
        ),
        right[1],
    );
}

fn groups(f: &mut Frame, area: Rect, last: &Sample) {
    let rows: Vec<Row> = last
        .groups
        .iter()
        .filter(|g| g.name != "(default)" || g.cps > 0.0 || g.completed + g.errors > 0)
        .map(|g| {
            let fb = g.first_byte.clone().unwrap_or_default();
            Row::new(vec![
                Cell::from(g.name.clone()),
                Cell::from(format!("{:.0}", g.cps)),
                Cell::from(g.completed.to_string()),
                Cell::from(g.errors.to_string()),
                Cell::from(fb.p50.to_string()),
                Cell::from(fb.p99.to_string()),
                Cell::from(fb.max.to_string()),
            ])
        })
        .collect();
    let widths = [
        Constraint::Min(16),
        Constraint::Length(10),
        Constraint::Length(10),
        Constraint::Length(8),
        Constraint::Length(12),
        Constraint::Length(12),
        Constraint::Length(12),
    ];
    f.render_widget(
        Table::new(rows, widths)
            .header(
                Row::new(vec![
                    "group",
                    "CPS",
                    "completed",
                    "errors",
                    "ttfb p50 us",
                    "ttfb p99 us",
                    "ttfb max us",
                ])
                .style(Style::default().fg(Color::Gray)),
            )
            .block(
                Block::default()
                    .borders(Borders::ALL)
                    .title("Template groups (last second)"),
            ),
        area,
    );
}

fn cores(f: &mut Frame, area: Rect, last: &Sample) {
    let block = Block::default()
        .borders(Borders::ALL)
        .title("Cores (last second)");
    if last.cores.is_empty() {
        f.render_widget(
            Paragraph::new("one worker thread: per-core figures come with --cores N").block(block),
            area,
        );
        return;
    }
    let rows = last.cores.iter().map(|c| {
        let text = format!(
            "core {:<3} {:>9.0} CPS {:>8} active {:>8.3} Gbit/s",
            c.core, c.cps, c.active, c.wire_gbps
        );
        (text, c.load)
    });
    core_rows(f, area, block, rows);
}

/// Draws `block` over `area` and in it one line per core: its figures, then a gauge of its
/// load (0 to 1); as many cores as the height holds. Shared with `squall serve`'s view.
pub(crate) fn core_rows(
    f: &mut Frame,
    area: Rect,
    block: Block<'_>,
    cores: impl ExactSizeIterator<Item = (String, f64)>,
) {
    let inner = block.inner(area);
    f.render_widget(block, area);
    let n = cores.len().min(inner.height as usize);
    let rows = Layout::default()
        .direction(Direction::Vertical)
        .constraints(vec![Constraint::Length(1); n])
        .split(inner);
    for ((text, load), r) in cores.zip(rows.iter()) {
        let parts = Layout::default()
            .direction(Direction::Horizontal)
            .constraints([Constraint::Length(58), Constraint::Min(10)])
            .split(*r);
        f.render_widget(Paragraph::new(text), parts[0]);
        f.render_widget(
            Gauge::default()
                .ratio(load.clamp(0.0, 1.0))
                .label(format!("load {:.0}%", load * 100.0))
                .gauge_style(Style::default().fg(Color::Green)),
            parts[1],
        );
    }
}

/// Draws one frame of the view into a buffer of `w` x `h` cells (tests, no terminal).
pub fn render_to_text(h: &Header, v: &ViewState, s: &Series, w: u16, hgt: u16) -> String {
    paint_to_text(|f| draw(f, h, v, s), w, hgt)
}

/// Paints one frame with `paint` into a buffer of `w` x `hgt` cells, as text.
pub fn paint_to_text(paint: impl FnOnce(&mut Frame), w: u16, hgt: u16) -> String {
    let backend = ratatui::backend::TestBackend::new(w, hgt);
    let mut t = match Terminal::new(backend) {
        Ok(t) => t,
        Err(_) => return String::new(),
    };
    let _ = t.draw(paint);
    let buf = t.backend().buffer().clone();
    let mut out = String::new();
    for y in 0..buf.area.height {
        for x in 0..buf.area.width {
            out.push_str(buf[(x, y)].symbol());
        }
        out.push('\n');
    }
    let _ = t.backend_mut().flush();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::series::{CoreReading, Reading};

    fn series() -> Series {
        let mut s = Series::new(vec![String::new(), "http".into()]);
        s.push(Reading::default());
        let mut c = crate::run::SideReport {
            app: crate::stats::SideStats::new(2),
            ..Default::default()
        };
        c.app.tg[1].c.started = 1234;
        c.app.tg[1].c.aborted = 3;
        c.app.tg[1].lat.first_byte.record_ns(42_000);
        s.push(Reading {
            t: 1.0,
            started: 1234,
            active: 17,
            errors: 3,
            sides: Some((c, Default::default())),
            cores: vec![CoreReading {
                started: 600,
                busy_ns: 3,
                loop_ns: 4,
                ..Default::default()
            }],
            ..Default::default()
        });
        s
    }

    #[test]
    fn screens_show_the_figures_and_keys_switch_them() {
        let h = Header {
            profile: "w1.json".into(),
            mode: "T-mem1".into(),
            duration_s: 10.0,
            target_cps: 1000.0,
        };
        let s = series();
        let mut v = ViewState::default();
        let t = render_to_text(&h, &v, &s, 120, 30);
        assert!(t.contains("1234  (target 1000)"), "{t}");
        assert!(t.contains("aborted") && t.contains("3 client"), "{t}");
        assert!(t.contains("first_byte"), "{t}");
        assert_eq!(
            v.key(KeyCode::Char('2'), KeyModifiers::NONE),
            Action::Redraw
        );
        let t = render_to_text(&h, &v, &s, 120, 30);
        assert!(t.contains("http") && t.contains("ttfb p99 us"), "{t}");
        assert_eq!(v.key(KeyCode::Tab, KeyModifiers::NONE), Action::Redraw);
        let t = render_to_text(&h, &v, &s, 120, 30);
        assert!(t.contains("core 0") && t.contains("load 75%"), "{t}");
        assert_eq!(v.key(KeyCode::Char('q'), KeyModifiers::NONE), Action::Stop);
        let t = render_to_text(&h, &v, &s, 120, 30);
        assert!(t.contains("stopping: draining flows"), "{t}");
        assert_eq!(
            v.key(KeyCode::Char('c'), KeyModifiers::CONTROL),
            Action::Cut
        );
        assert_eq!(v.key(KeyCode::Char('x'), KeyModifiers::NONE), Action::None);
        // A tiny terminal does not panic.
        let _ = render_to_text(&h, &v, &s, 10, 3);
    }
}
