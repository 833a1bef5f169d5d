//! Inline SVG charts of our own for `squall report`: line charts over time and grouped bar
//! charts (latency histograms), with axes, ticks and a legend; no script, no external
//! resource, so a report is one self-contained file.

use std::fmt::Write as _;

/// Colours of the series of a chart, in order (A/B runs use the first two).
pub const PALETTE: &[&str] = &[
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

/// One line of a chart.
#[derive(Clone, Debug)]
pub struct Line {
    pub label: String,
    pub color: String,
    pub dashed: bool,
    pub points: Vec<(f64, f64)>,
}

/// Escapes text for SVG/HTML.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A "nice" tick step for a span (1, 2 or 5 times a power of ten).
fn nice_step(span: f64, ticks: f64) -> f64 {
    if span <= 0.0 || !span.is_finite() {
        return 1.0;
    }
    let raw = span / ticks;
    let p = 10f64.powf(raw.log10().floor());
    let m = raw / p;
    let k = if m <= 1.0 {
        1.0
    } else if m <= 2.0 {
        2.0
    } else if m <= 5.0 {
        5.0
    } else {
        10.0
    };
    k * p
}

/// A tick label: short, without trailing zeros (1.5K, 2M, 0.25).
pub fn short(v: f64) -> String {
    let a = v.abs();
    let (x, suffix) = if a >= 1e9 {
        (v / 1e9, "G")
    } else if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e4 {
        (v / 1e3, "K")
    } else {
        (v, "")
    };
    let s = format!("{x:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s}{suffix}")
}

const W: f64 = 640.0;
const H: f64 = 260.0;
const L: f64 = 62.0;
const R: f64 = 12.0;
const T: f64 = 30.0;
const B: f64 = 60.0;

fn frame(o: &mut String, id: &str, title: &str) {
    let _ = write!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" id="{}" class="chart" viewBox="0 0 {W} {H}" width="{W}" height="{H}" font-family="sans-serif" font-size="11"><rect width="{W}" height="{H}" fill="white"/><text x="{}" y="18" font-size="13" font-weight="bold">{}</text>"#,
        esc(id),
        L,
        esc(title)
    );
}

/// The legend under the plot: up to two rows.
fn legend(o: &mut String, items: &[(String, String, bool)]) {
    let mut x = L;
    let mut row = 0.0;
    for (label, color, dashed) in items {
        let wid = 30.0 + 6.5 * label.chars().count() as f64;
        if x + wid > W && x > L && row == 0.0 {
            x = L;
            row = 14.0;
        }
        let dash = if *dashed {
            r#" stroke-dasharray="5,3""#
        } else {
            ""
        };
        let _ = write!(
            o,
            r#"<line x1="{x}" y1="{y}" x2="{}" y2="{y}" stroke="{color}" stroke-width="2"{dash}/><text x="{}" y="{}">{}</text>"#,
            x + 18.0,
            x + 22.0,
            H - 22.0 + row + 4.0,
            esc(label),
            y = H - 22.0 + row
        );
        x += wid;
    }
}

fn y_axis(o: &mut String, ymax: f64, unit: &str) -> f64 {
    // A bound no real figure reaches (a hand-edited results file may hold 1e308): the
    // axis stays finite and has a bounded number of ticks.
    let ymax = if ymax.is_finite() {
        ymax.clamp(0.0, 1e300)
    } else {
        1.0
    };
    let step = nice_step(ymax, 4.0);
    let ticks = (ymax / step).ceil().clamp(1.0, 20.0) as u32;
    let top = f64::from(ticks) * step;
    let ph = H - T - B;
    for i in 0..=ticks {
        let v = f64::from(i) * step;
        let y = T + ph - v / top * ph;
        let _ = write!(
            o,
            r##"<line x1="{L}" y1="{y:.1}" x2="{}" y2="{y:.1}" stroke="#e5e5e5"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            W - R,
            L - 4.0,
            y + 4.0,
            short(v)
        );
    }
    let _ = write!(
        o,
        r#"<text x="12" y="{}" transform="rotate(-90 12 {})" text-anchor="middle">{}</text>"#,
        T + ph / 2.0,
        T + ph / 2.0,
        esc(unit)
    );
    top
}

/// A line chart of `lines` over x (seconds); `unit`: the y axis label.
pub fn line_chart(id: &str, title: &str, unit: &str, lines: &[Line]) -> String {
    let mut o = String::new();
    frame(&mut o, id, title);
    let pts = lines.iter().flat_map(|l| l.points.iter());
    let xmax = pts
        .clone()
        .map(|p| p.0)
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max)
        .clamp(1.0, 1e300);
    let ymax = pts
        .map(|p| p.1)
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    let ymax = if ymax <= 0.0 { 1.0 } else { ymax };
    let top = y_axis(&mut o, ymax, unit);
    let (pw, ph) = (W - L - R, H - T - B);
    let xstep = nice_step(xmax, 8.0);
    let xticks = ((xmax + xstep * 0.01) / xstep).floor().clamp(0.0, 40.0) as u32;
    for i in 0..=xticks {
        let x = f64::from(i) * xstep;
        let px = L + x / xmax * pw;
        let _ = write!(
            o,
            r#"<text x="{px:.1}" y="{}" text-anchor="middle">{}</text>"#,
            T + ph + 14.0,
            short(x)
        );
    }
    let _ = write!(
        o,
        r##"<line x1="{L}" y1="{y}" x2="{}" y2="{y}" stroke="#888"/><text x="{}" y="{}" text-anchor="end">seconds</text>"##,
        W - R,
        W - R,
        T + ph + 28.0,
        y = T + ph
    );
    for l in lines {
        if l.points.is_empty() {
            continue;
        }
        let mut d = String::new();
        for (i, (x, y)) in l.points.iter().enumerate() {
            let px = L + x / xmax * pw;
            let py = T + ph - y.max(0.0) / top * ph;
            let _ = write!(d, "{}{px:.1},{py:.1} ", if i == 0 { "M" } else { "L" });
        }
        let dash = if l.dashed {
            r#" stroke-dasharray="5,3""#
        } else {
            ""
        };
        let _ = write!(
            o,
            r#"<path d="{}" fill="none" stroke="{}" stroke-width="1.8"{dash}><title>{}</title></path>"#,
            d.trim_end(),
            l.color,
            esc(&l.label)
        );
    }
    let items: Vec<_> = lines
        .iter()
        .map(|l| (l.label.clone(), l.color.clone(), l.dashed))
        .collect();
    legend(&mut o, &items);
    o.push_str("</svg>");
    o
}

/// A grouped bar chart: one group of bars per category, one bar per series.
pub fn bar_chart(
    id: &str,
    title: &str,
    unit: &str,
    categories: &[String],
    series: &[(String, String, Vec<f64>)],
) -> String {
    let mut o = String::new();
    frame(&mut o, id, title);
    let ymax = series
        .iter()
        .flat_map(|s| s.2.iter().copied())
        .fold(0.0, f64::max);
    let top = y_axis(&mut o, if ymax <= 0.0 { 1.0 } else { ymax }, unit);
    let (pw, ph) = (W - L - R, H - T - B);
    let n = categories.len().max(1) as f64;
    let cw = pw / n;
    let bw = (cw * 0.8) / series.len().max(1) as f64;
    for (c, cat) in categories.iter().enumerate() {
        let cx = L + c as f64 * cw;
        let _ = write!(
            o,
            r#"<text x="{:.1}" y="{}" text-anchor="middle" font-size="9">{}</text>"#,
            cx + cw / 2.0,
            T + ph + 12.0,
            esc(cat)
        );
        for (k, (label, color, vals)) in series.iter().enumerate() {
            let v = vals.get(c).copied().unwrap_or(0.0);
            let h = v / top * ph;
            let _ = write!(
                o,
                r#"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{h:.1}" fill="{color}"><title>{}: {} {}</title></rect>"#,
                cx + cw * 0.1 + k as f64 * bw,
                T + ph - h,
                bw.max(1.0),
                esc(label),
                esc(cat),
                short(v)
            );
        }
    }
    let _ = write!(
        o,
        r##"<line x1="{L}" y1="{y}" x2="{}" y2="{y}" stroke="#888"/>"##,
        W - R,
        y = T + ph
    );
    let items: Vec<_> = series
        .iter()
        .map(|s| (s.0.clone(), s.1.clone(), false))
        .collect();
    legend(&mut o, &items);
    o.push_str("</svg>");
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_and_labels() {
        assert_eq!(nice_step(10.0, 4.0), 5.0);
        assert_eq!(nice_step(1000.0, 4.0), 500.0);
        assert_eq!(nice_step(0.3, 4.0), 0.1);
        assert_eq!(short(1500.0), "1500");
        assert_eq!(short(25_000.0), "25K");
        assert_eq!(short(2_500_000.0), "2.5M");
        assert_eq!(short(0.25), "0.25");
    }

    #[test]
    fn an_absurd_value_gives_a_bounded_axis() {
        for ymax in [1.7e308, f64::MAX, f64::INFINITY, f64::NAN, -5.0, 0.0] {
            let mut o = String::new();
            let top = y_axis(&mut o, ymax, "x");
            assert!(top.is_finite() && top > 0.0, "{ymax}: {top}");
            assert!(o.matches("<line").count() <= 21, "{ymax}");
        }
        let l = Line {
            label: "a".into(),
            color: "#000".into(),
            dashed: false,
            points: vec![
                (1.0, 1.7e308),
                (2.0, 1.0),
                (1e308, 3.0),
                (f64::INFINITY, 2.0),
            ],
        };
        assert!(line_chart("c", "t", "u", &[l]).ends_with("</svg>"));
    }

    #[test]
    fn charts_are_svg_with_one_path_per_line_and_escaped_text() {
        let l = |c: &str| Line {
            label: "a<b".into(),
            color: c.into(),
            dashed: false,
            points: vec![(1.0, 10.0), (2.0, 20.0)],
        };
        let s = line_chart("cps", "CPS & more", "flows/s", &[l("#000"), l("#111")]);
        assert!(s.starts_with("<svg") && s.ends_with("</svg>"));
        assert_eq!(s.matches("<path").count(), 2);
        assert!(s.contains("CPS &amp; more") && s.contains("a&lt;b"));
        assert!(!s.contains("NaN"));
        let b = bar_chart(
            "h",
            "hist",
            "flows",
            &["<10us".into(), "20us".into()],
            &[("A".into(), "#000".into(), vec![3.0, 0.0])],
        );
        assert_eq!(b.matches("<rect").count(), 3, "background and two bars");
        let empty = line_chart("e", "empty", "", &[]);
        assert!(!empty.contains("NaN") && !empty.contains("inf"));
    }
}
