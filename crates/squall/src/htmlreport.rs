//! `squall report RESULTS.json [B.json] -o report.html`: one self-contained HTML page (inline
//! CSS and SVG, no script, nothing fetched) from the `--json` results of one run, or two
//! side by side (before/after): the headline figures, charts over time from `series`
//! (CPS, throughput, active flows, errors, retransmissions, latency percentiles, core
//! load) and a latency histogram per template group. Every figure cell carries
//! `data-key` (its JSON path) and `data-run` so that tests can read the page back.
//! `squall serve --json` results (`"kind": "serve"`) are drawn too: requests/s, responses
//! by status class, connections, errors and request latency over time.

use std::fmt::Write as _;

use serde_json::Value;

use crate::svg::{self, esc, Line, PALETTE};

/// One results file.
#[derive(Clone, Debug)]
pub struct Input {
    /// How the run is named in the page (the file name).
    pub name: String,
    pub doc: Value,
}

/// Reads a figure at a dotted path (lists by `name`, then by index:
/// [`crate::assertion::walk`]).
pub fn at<'a>(doc: &'a Value, path: &str) -> Option<&'a Value> {
    crate::assertion::walk(doc, path).ok()
}

/// How a figure is printed in the page: integers as they are, other numbers with three
/// decimals.
pub fn fmt_num(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v:.3}")
    }
}

/// The headline rows: (JSON path, label).
pub const HEADLINE: &[(&str, &str)] = &[
    ("duration_sec", "duration (s)"),
    ("mult", "rate multiplier"),
    ("cores", "cores"),
    ("target_cps", "target CPS"),
    ("rates.cps", "CPS"),
    ("rates.wire_gbps", "wire Gbit/s"),
    ("rates.l7_gbps", "L7 Gbit/s"),
    ("rates.mpps", "Mpps"),
    ("client.flows.started", "flows opened"),
    ("client.flows.completed", "flows completed"),
    ("errors", "errors"),
    ("retransmits", "retransmitted segments"),
    ("client.peak_active", "peak active flows"),
    ("cpu_us_per_flow", "CPU us per flow"),
    ("busy_cpu_us_per_flow", "CPU us per flow (busy turns)"),
    ("latency_us.connect.p50", "connect p50 (us)"),
    ("latency_us.connect.p99", "connect p99 (us)"),
    ("latency_us.first_byte.p50", "first byte p50 (us)"),
    ("latency_us.first_byte.p99", "first byte p99 (us)"),
    ("latency_us.first_byte.p99_9", "first byte p99.9 (us)"),
    ("latency_us.last_byte.p99", "last byte p99 (us)"),
    ("rates.rps", "requests/s (serve)"),
    ("requests", "requests answered (serve)"),
    ("accepted", "connections accepted (serve)"),
    ("status_2xx", "2xx answers (serve)"),
    ("status_4xx", "4xx answers (serve)"),
    ("status_5xx", "5xx answers (serve)"),
    ("cpu_us_per_request", "CPU us per request (serve)"),
    ("latency_us.request.p50", "request latency p50 (us, serve)"),
    ("latency_us.request.p99", "request latency p99 (us, serve)"),
    ("window.cps", "window CPS"),
    ("window.wire_gbps", "window wire Gbit/s"),
    (
        "window.latency_us.first_byte.p99",
        "window first byte p99 (us)",
    ),
];

const CSS: &str = "body{font-family:sans-serif;margin:24px;color:#222;max-width:1340px}\
h1{font-size:20px}h2{font-size:16px;margin-top:28px;border-bottom:1px solid #ccc}\
table{border-collapse:collapse;font-size:13px}td,th{padding:3px 10px;border-bottom:1px solid #eee;text-align:right}\
td:first-child,th:first-child{text-align:left}.ok{color:#2a7d2a;font-weight:bold}.bad{color:#c62828;font-weight:bold}\
.charts{display:flex;flex-wrap:wrap;gap:12px}.charts svg{border:1px solid #ddd}figure{margin:0}.note{color:#666;font-size:12px}";

fn series(doc: &Value) -> &[Value] {
    doc.get("series")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn num(v: Option<&Value>) -> Option<f64> {
    v.and_then(Value::as_f64)
}

/// Whether `doc` holds `squall serve --json` results.
fn is_serve(doc: &Value) -> bool {
    doc.get("kind").and_then(Value::as_str) == Some("serve")
}

/// Checks that `doc` is a `squall run --json` (or `squall serve --json`) document.
pub fn check(name: &str, doc: &Value) -> Result<(), String> {
    let keys: &[&str] = if is_serve(doc) {
        &["rates", "requests", "series", "clean"]
    } else {
        &["rates", "groups", "client", "server", "clean"]
    };
    for k in keys {
        if doc.get(k).is_none() {
            return Err(format!(
                "{name}: no '{k}': not a `squall run --json` results file (write one with `squall run PROFILE --json {name}`, or `squall serve ... --json {name}`)"
            ));
        }
    }
    Ok(())
}

/// A line per run of the figure `key` of each sample (`f` reads it).
fn per_run(
    inputs: &[Input],
    label: &str,
    color: usize,
    f: &dyn Fn(&Value) -> Option<f64>,
) -> Vec<Line> {
    inputs
        .iter()
        .enumerate()
        .map(|(r, inp)| Line {
            label: if inputs.len() > 1 {
                format!("{label} ({})", run_tag(r))
            } else {
                label.to_string()
            },
            color: PALETTE[color % PALETTE.len()].to_string(),
            dashed: r == 1,
            points: series(&inp.doc)
                .iter()
                .filter_map(|s| Some((num(s.get("t"))?, f(s)?)))
                .collect(),
        })
        .collect()
}

fn run_tag(r: usize) -> &'static str {
    if r == 0 {
        "A"
    } else {
        "B"
    }
}

/// The charts of the page: (id, SVG), in page order.
pub fn charts(inputs: &[Input]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let g = |k: &'static str| move |s: &Value| num(s.get(k));
    if inputs.iter().any(|i| is_serve(&i.doc)) {
        out.push((
            "rps".to_string(),
            svg::line_chart(
                "rps",
                "Requests per second",
                "requests/s",
                &per_run(inputs, "requests/s", 0, &g("rps")),
            ),
        ));
        let mut st = Vec::new();
        for (k, class) in ["2xx", "3xx", "4xx", "5xx"].into_iter().enumerate() {
            let f = move |s: &Value| num(s.get("status_per_s")?.get(class));
            st.extend(per_run(inputs, class, k + 1, &f));
        }
        out.push((
            "status".to_string(),
            svg::line_chart("status", "Answers by status class", "per second", &st),
        ));
        let rl =
            |p: &'static str| move |s: &Value| num(s.get("latency_us")?.get("request")?.get(p));
        let mut l = per_run(inputs, "request p50", 0, &rl("p50"));
        l.extend(per_run(inputs, "request p99", 1, &rl("p99")));
        out.push((
            "request-latency".to_string(),
            svg::line_chart("request-latency", "Request latency per second", "us", &l),
        ));
    }
    out.push((
        "cps".to_string(),
        svg::line_chart(
            "cps",
            "Connections per second",
            "flows/s",
            &per_run(inputs, "CPS", 0, &g("cps")),
        ),
    ));
    let mut tp = per_run(inputs, "client sent", 0, &g("tx_gbps"));
    tp.extend(per_run(inputs, "server sent", 2, &g("rx_gbps")));
    out.push((
        "throughput".to_string(),
        svg::line_chart("throughput", "Wire throughput", "Gbit/s", &tp),
    ));
    out.push((
        "active".to_string(),
        svg::line_chart(
            "active",
            "Active flows (serve: open connections)",
            "flows",
            &per_run(inputs, "active", 4, &g("active")),
        ),
    ));
    let mut err = per_run(inputs, "errors", 1, &g("errors"));
    err.extend(per_run(
        inputs,
        "retransmitted segments",
        3,
        &g("retransmits"),
    ));
    out.push((
        "errors".to_string(),
        svg::line_chart(
            "errors",
            "Errors and retransmissions per second",
            "per second",
            &err,
        ),
    ));
    let lat = |phase: &'static str, p: &'static str| {
        move |s: &Value| {
            num(s.get("latency_us")?.get(phase)?.get(p)).filter(|_| {
                num(s.get("latency_us").and_then(|l| l.get(phase)?.get("count"))).unwrap_or(0.0)
                    > 0.0
            })
        }
    };
    let mut l = per_run(inputs, "first byte p50", 0, &lat("first_byte", "p50"));
    l.extend(per_run(
        inputs,
        "first byte p99",
        1,
        &lat("first_byte", "p99"),
    ));
    l.extend(per_run(inputs, "connect p99", 2, &lat("connect", "p99")));
    out.push((
        "latency".to_string(),
        svg::line_chart("latency", "Latency percentiles per second", "us", &l),
    ));
    let cores = inputs
        .iter()
        .flat_map(|i| series(&i.doc))
        .filter_map(|s| s.get("cores").and_then(Value::as_array))
        .map(Vec::len)
        .max()
        .unwrap_or(0);
    if cores > 0 {
        let mut lines = Vec::new();
        for c in 0..cores {
            let f = move |s: &Value| num(s.get("cores")?.get(c)?.get("load")).map(|x| x * 100.0);
            for mut line in per_run(inputs, &format!("core {c}"), c * 2, &f) {
                line.color =
                    PALETTE[(c + 4 * usize::from(line.dashed)) % PALETTE.len()].to_string();
                lines.push(line);
            }
        }
        out.push((
            "cores".to_string(),
            svg::line_chart("cores", "Core load", "% busy", &lines),
        ));
    }
    for (gi, name) in group_names(inputs).iter().enumerate() {
        if let Some(h) = histogram_chart(inputs, name, gi) {
            out.push((format!("hist-{gi}"), h));
        }
    }
    out
}

/// Every template group with latencies, in first-seen order.
fn group_names(inputs: &[Input]) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for i in inputs {
        for g in i.doc["groups"].as_array().map_or(&[][..], Vec::as_slice) {
            let n = g["name"].as_str().unwrap_or("").to_string();
            let has = g["latency_us"]["first_byte"]["count"].as_u64().unwrap_or(0) > 0;
            if has && !v.contains(&n) {
                v.push(n);
            }
        }
    }
    v
}

fn bucket_label(le: Option<u64>) -> String {
    match le {
        None => "more".into(),
        Some(us) if us >= 1_000_000 => format!("{}s", us / 1_000_000),
        Some(us) if us >= 1_000 => format!("{}ms", us / 1_000),
        Some(us) => format!("{us}us"),
    }
}

/// The first-byte latency histogram of one group (each run's bars side by side).
fn histogram_chart(inputs: &[Input], group: &str, gi: usize) -> Option<String> {
    let hists: Vec<Vec<(Option<u64>, f64)>> = inputs
        .iter()
        .map(|i| {
            at(
                &i.doc,
                &format!("groups.{group}.latency_us.first_byte.histogram"),
            )
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .map(|b| (b["le_us"].as_u64(), b["count"].as_f64().unwrap_or(0.0)))
                    .collect()
            })
            .unwrap_or_default()
        })
        .collect();
    let n = hists.iter().map(Vec::len).max()?;
    let used = |k: usize| hists.iter().any(|h| h.get(k).is_some_and(|b| b.1 > 0.0));
    let first = (0..n).find(|&k| used(k))?;
    let last = (0..n).rev().find(|&k| used(k))?;
    let labels_from = hists.iter().find(|h| h.len() == n)?;
    let cats: Vec<String> = (first..=last)
        .map(|k| bucket_label(labels_from[k].0))
        .collect();
    let series: Vec<(String, String, Vec<f64>)> = hists
        .iter()
        .enumerate()
        .map(|(r, h)| {
            (
                if inputs.len() > 1 {
                    format!("{} {}", run_tag(r), inputs[r].name)
                } else {
                    inputs[r].name.clone()
                },
                PALETTE[r].to_string(),
                (first..=last)
                    .map(|k| h.get(k).map_or(0.0, |b| b.1))
                    .collect(),
            )
        })
        .collect();
    Some(svg::bar_chart(
        &format!("hist-{gi}"),
        &format!("First-byte latency, group {group} (flows per bucket, upper bound)"),
        "flows",
        &cats,
        &series,
    ))
}

fn cell(o: &mut String, doc: &Value, key: &str, run: usize) {
    match num(at(doc, key)) {
        Some(v) => {
            let _ = write!(
                o,
                r#"<td data-key="{}" data-run="{run}">{}</td>"#,
                esc(key),
                fmt_num(v)
            );
        }
        None => o.push_str("<td>-</td>"),
    }
}

/// The report page.
pub fn render(inputs: &[Input]) -> Result<String, String> {
    if inputs.is_empty() || inputs.len() > 2 {
        return Err("give one results file, or two to compare (before and after)".into());
    }
    for i in inputs {
        check(&i.name, &i.doc)?;
    }
    let mut o = String::new();
    let title = match inputs {
        [a] => format!("Squall run: {}", a.name),
        [a, b, ..] => format!("Squall runs: {} (A) vs {} (B)", a.name, b.name),
        _ => unreachable!("checked above"),
    };
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>{CSS}</style></head><body><h1>{}</h1>",
        esc(&title),
        esc(&title)
    );
    o.push_str(
        "<table id=\"runs\"><tr><th>run</th><th>profile</th><th>mode</th><th>result</th></tr>",
    );
    for (r, i) in inputs.iter().enumerate() {
        let clean = i.doc["clean"].as_bool().unwrap_or(false);
        let _ = write!(
            o,
            "<tr><td>{}{}</td><td>{}</td><td>{}</td><td class=\"{}\" data-key=\"clean\" data-run=\"{r}\">{}</td></tr>",
            if inputs.len() > 1 { format!("{}: ", run_tag(r)) } else { String::new() },
            esc(&i.name),
            esc(i.doc["profile"]
                .as_str()
                .or_else(|| i.doc["listen"].as_str().map(|_| "squall serve"))
                .unwrap_or("")),
            esc(i.doc["mode"].as_str().unwrap_or("")),
            if clean { "ok" } else { "bad" },
            if clean { "CLEAN" } else { "FAILED" }
        );
    }
    o.push_str("</table><h2>Figures</h2><table id=\"figures\"><tr><th>figure</th>");
    for (r, i) in inputs.iter().enumerate() {
        let _ = write!(
            o,
            "<th>{}</th>",
            if inputs.len() > 1 {
                format!("{} ({})", run_tag(r), esc(&i.name))
            } else {
                esc(&i.name)
            }
        );
    }
    if inputs.len() == 2 {
        o.push_str("<th>B vs A</th>");
    }
    o.push_str("</tr>");
    for (key, label) in HEADLINE {
        if inputs.iter().all(|i| num(at(&i.doc, key)).is_none()) {
            continue;
        }
        let _ = write!(o, "<tr><td>{}</td>", esc(label));
        for (r, i) in inputs.iter().enumerate() {
            cell(&mut o, &i.doc, key, r);
        }
        if let [a, b] = inputs {
            match (num(at(&a.doc, key)), num(at(&b.doc, key))) {
                (Some(x), Some(y)) if x != 0.0 => {
                    let _ = write!(o, "<td>{:+.1}%</td>", (y - x) / x * 100.0);
                }
                _ => o.push_str("<td>-</td>"),
            }
        }
        o.push_str("</tr>");
    }
    o.push_str("</table>");
    for (r, i) in inputs.iter().enumerate() {
        let asserts = i.doc["assertions"]
            .as_array()
            .map_or(&[][..], Vec::as_slice);
        let warns = i.doc["warnings"].as_array().map_or(&[][..], Vec::as_slice);
        let bad: Vec<&Value> = i.doc["invariants"]
            .as_array()
            .map_or(&[][..], Vec::as_slice)
            .iter()
            .filter(|c| c["ok"] == false)
            .collect();
        if asserts.is_empty() && warns.is_empty() && bad.is_empty() {
            continue;
        }
        let _ = write!(o, "<h2>Checks of {}</h2><ul>", esc(&i.name));
        for a in asserts {
            let ok = a["ok"].as_bool().unwrap_or(false);
            let _ = write!(
                o,
                "<li class=\"{}\" data-key=\"assertion\" data-run=\"{r}\">{}</li>",
                if ok { "ok" } else { "bad" },
                esc(a["message"].as_str().unwrap_or(""))
            );
        }
        for c in bad {
            let _ = write!(
                o,
                "<li class=\"bad\">invariant {}: {}</li>",
                esc(c["name"].as_str().unwrap_or("")),
                esc(c["detail"].as_str().unwrap_or(""))
            );
        }
        for w in warns {
            let _ = write!(
                o,
                "<li>warning: {}</li>",
                esc(w["message"].as_str().unwrap_or(""))
            );
        }
        o.push_str("</ul>");
    }
    o.push_str("<h2>Over time</h2>");
    if inputs.iter().all(|i| series(&i.doc).is_empty()) {
        o.push_str("<p class=\"note\">No time series: a --sim run (virtual clock) has none.</p>");
    }
    if inputs.len() == 2 {
        o.push_str("<p class=\"note\">A: solid lines, B: dashed lines.</p>");
    }
    o.push_str("<div class=\"charts\">");
    let all = charts(inputs);
    for (id, svg) in all.iter().filter(|(id, _)| !id.starts_with("hist-")) {
        let _ = write!(o, "<figure data-chart=\"{id}\">{svg}</figure>");
    }
    o.push_str("</div><h2>Latency per template group</h2><table id=\"latency\"><tr><th>group</th><th>phase</th>");
    for r in 0..inputs.len() {
        let tag = if inputs.len() > 1 {
            format!("{} ", run_tag(r))
        } else {
            String::new()
        };
        let _ = write!(
            o,
            "<th>{tag}count</th><th>{tag}p50</th><th>{tag}p99</th><th>{tag}max</th>"
        );
    }
    o.push_str("</tr>");
    for name in group_names(inputs) {
        for phase in ["connect", "first_byte", "last_byte"] {
            let _ = write!(o, "<tr><td>{}</td><td>{phase}</td>", esc(&name));
            for (r, i) in inputs.iter().enumerate() {
                for p in ["count", "p50", "p99", "max"] {
                    cell(
                        &mut o,
                        &i.doc,
                        &format!("groups.{name}.latency_us.{phase}.{p}"),
                        r,
                    );
                }
            }
            o.push_str("</tr>");
        }
    }
    o.push_str("</table><div class=\"charts\">");
    for (id, svg) in all.iter().filter(|(id, _)| id.starts_with("hist-")) {
        let _ = write!(o, "<figure data-chart=\"{id}\">{svg}</figure>");
    }
    o.push_str("</div><p class=\"note\">Latency is measured on the client from each flow's scheduled start (microseconds). Written by <code>squall report</code>.</p></body></html>\n");
    Ok(o)
}

/// The headless browser used for PNGs: `$SQUALL_CHROMIUM`, else `chromium` or
/// `chromium-browser` on PATH.
pub fn chromium() -> Option<std::path::PathBuf> {
    if let Some(p) = std::env::var_os("SQUALL_CHROMIUM") {
        return Some(p.into());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|d| [d.join("chromium"), d.join("chromium-browser")])
        .find(|p| p.is_file())
}

/// Renders `url` (a file:// page or SVG) to a PNG of `w` x `h` pixels with headless
/// Chromium.
pub fn screenshot(url: &str, png: &std::path::Path, w: u32, h: u32) -> Result<(), String> {
    let exe = chromium().ok_or(
        "PNG output needs Chromium: install Debian's `chromium` package (scripts/deps.sh test) or set SQUALL_CHROMIUM",
    )?;
    let out = std::process::Command::new(&exe)
        .args([
            "--headless",
            "--disable-gpu",
            "--no-sandbox",
            "--hide-scrollbars",
        ])
        .arg(format!("--window-size={w},{h}"))
        .arg(format!("--screenshot={}", png.display()))
        .arg(url)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", exe.display()))?;
    if !png.is_file() {
        return Err(format!(
            "{} wrote no {}: {}",
            exe.display(),
            png.display(),
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .unwrap_or("")
        ));
    }
    Ok(())
}

/// `squall report`: reads the results files, writes the page to `out` and, with `png`,
/// each chart as DIR/ID.svg and DIR/ID.png (headless Chromium). Returns what was written.
pub fn write(
    files: &[std::path::PathBuf],
    out: &std::path::Path,
    png: Option<&std::path::Path>,
) -> Result<Vec<std::path::PathBuf>, String> {
    let mut inputs = Vec::new();
    for f in files {
        let text =
            std::fs::read_to_string(f).map_err(|e| format!("cannot read {}: {e}", f.display()))?;
        let doc: Value = serde_json::from_str(&text).map_err(|e| {
            format!(
                "{}: not JSON ({e}); give the file `squall run --json FILE` wrote",
                f.display()
            )
        })?;
        let name = f.file_name().map_or_else(
            || f.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        inputs.push(Input { name, doc });
    }
    let page = render(&inputs)?;
    std::fs::write(out, page).map_err(|e| format!("cannot write {}: {e}", out.display()))?;
    let mut written = vec![out.to_path_buf()];
    if let Some(dir) = png {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let dir = dir
            .canonicalize()
            .map_err(|e| format!("{}: {e}", dir.display()))?;
        for (id, svg) in charts(&inputs) {
            let s = dir.join(format!("{id}.svg"));
            std::fs::write(&s, &svg).map_err(|e| format!("cannot write {}: {e}", s.display()))?;
            let p = dir.join(format!("{id}.png"));
            screenshot(&format!("file://{}", s.display()), &p, 640, 260)?;
            written.push(p);
        }
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc(cps: f64) -> Value {
        json!({
            "profile": "w1.json", "mode": "real time", "clean": true, "errors": 0,
            "rates": {"cps": cps, "wire_gbps": 1.5, "l7_gbps": 1.0, "mpps": 0.1},
            "client": {"flows": {"started": 10, "completed": 10}}, "server": {},
            "groups": [{"name": "http", "latency_us": {"first_byte": {"count": 3, "p50": 7, "p99": 9, "max": 9,
                "histogram": [{"le_us": 10, "count": 3}, {"le_us": 20, "count": 0}, {"le_us": null, "count": 0}]}}}],
            "series": [{"t": 1.0, "cps": cps, "tx_gbps": 0.1, "rx_gbps": 1.0, "active": 3, "errors": 0,
                        "latency_us": {"first_byte": {"count": 3, "p50": 7, "p99": 9}}, "cores": []}],
        })
    }

    #[test]
    fn one_and_two_runs() {
        let a = Input {
            name: "a.json".into(),
            doc: doc(1000.0),
        };
        let page = render(std::slice::from_ref(&a)).unwrap();
        assert!(
            page.contains(r#"<td data-key="rates.cps" data-run="0">1000</td>"#),
            "{page}"
        );
        assert!(page.contains("data-chart=\"cps\"") && page.contains("data-chart=\"hist-0\""));
        assert!(!page.contains("http://") || page.contains("xmlns=\"http://www.w3.org/2000/svg\""));
        let b = Input {
            name: "b.json".into(),
            doc: doc(1100.0),
        };
        let page = render(&[a, b]).unwrap();
        assert!(page.contains("<td>+10.0%</td>"), "B vs A column");
        assert!(page.contains(r#"data-key="rates.cps" data-run="1">1100<"#));
        assert!(page.contains("stroke-dasharray"), "B dashed");
    }

    #[test]
    fn a_cell_key_is_escaped() {
        let doc = json!({"groups": [{"name": "x\"><script>", "n": 5}]});
        let mut o = String::new();
        cell(&mut o, &doc, "groups.x\"><script>.n", 0);
        assert!(o.contains(">5</td>"), "{o}");
        assert!(!o.contains("<script>"), "{o}");
    }

    #[test]
    fn a_serve_result_is_drawn() {
        let d = json!({
            "kind": "serve", "listen": "198.18.48.1:80", "mode": "afpacket:sq-srv0", "clean": true,
            "errors": 0, "requests": 3000, "rates": {"rps": 1500.0, "cps": 10.0, "wire_gbps": 0.2, "mpps": 0.01},
            "latency_us": {"request": {"count": 2, "p50": 90, "p99": 200, "max": 200}},
            "series": [{"t": 1.0, "rps": 1400.0, "cps": 10.0, "active": 4, "errors": 0, "retransmits": 0,
                        "status_per_s": {"2xx": 1400.0, "4xx": 0.0}, "tx_gbps": 0.1, "rx_gbps": 0.01,
                        "latency_us": {"request": {"count": 2, "p50": 90, "p99": 200}},
                        "cores": [{"core": 0, "load": 0.25}]}],
        });
        let page = render(&[Input {
            name: "serve.json".into(),
            doc: d,
        }])
        .unwrap();
        assert!(
            page.contains(r#"data-key="rates.rps" data-run="0">1500<"#),
            "{page}"
        );
        for c in ["rps", "status", "request-latency", "cores", "active"] {
            assert!(page.contains(&format!("data-chart=\"{c}\"")), "{c}");
        }
    }

    #[test]
    fn not_a_results_file() {
        let e = render(&[Input {
            name: "x.json".into(),
            doc: json!({"a": 1}),
        }])
        .unwrap_err();
        assert!(e.contains("not a `squall run --json` results file"), "{e}");
        assert!(render(&[]).is_err());
    }
}
