//! The Prometheus endpoint (`squall run --metrics ADDR`, `squall daemon --metrics ADDR`):
//! the text exposition format (version 0.0.4) of a run's figures, rendered from the
//! time series' latest reading ([`crate::series`]) by the thread that samples the run,
//! and served over HTTP (`GET /metrics`) by one thread of its own ([`crate::getserver`]:
//! bounded in time and size against any client). Names are listed in docs/OPERATING.md.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use crate::series::{error_kinds, Reading, Sample, Series};
use crate::stats::LatHist;

/// Upper bounds (seconds) of the latency histogram buckets: 50 us to 10 s, about three per
/// decade (a memory-wire flow takes tens of us, a loaded DUT milliseconds, a timeout 1 s+).
pub const LATENCY_BUCKETS_S: &[f64] = &[
    50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3, 250e-3, 500e-3,
    1.0, 2.5, 5.0, 10.0,
];

/// Escapes a label value (backslash, double quote, newline).
fn esc(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// A text exposition being written: one `# HELP`/`# TYPE` per family.
pub(crate) struct Out {
    pub(crate) s: String,
}

impl Out {
    pub(crate) fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.s, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }
    pub(crate) fn value(&mut self, name: &str, labels: &[(&str, &str)], v: f64) {
        self.s.push_str(name);
        if !labels.is_empty() {
            self.s.push('{');
            for (i, (k, val)) in labels.iter().enumerate() {
                if i > 0 {
                    self.s.push(',');
                }
                let _ = write!(self.s, "{k}=\"{}\"", esc(val));
            }
            self.s.push('}');
        }
        let _ = writeln!(self.s, " {}", fmt(v));
    }
    pub(crate) fn one(&mut self, name: &str, kind: &str, help: &str, v: f64) {
        self.family(name, kind, help);
        self.value(name, &[], v);
    }
    /// A family of one value per value of label `label`.
    pub(crate) fn by_label(
        &mut self,
        name: &str,
        kind: &str,
        help: &str,
        label: &str,
        values: &[(&str, f64)],
    ) {
        self.family(name, kind, help);
        for &(l, v) in values {
            self.value(name, &[(label, l)], v);
        }
    }
    /// One histogram series (`_bucket`, `_sum`, `_count`) of `h` (microseconds).
    fn histogram(&mut self, name: &str, labels: &[(&str, &str)], h: &LatHist) {
        let (counts, sum_us) = h.buckets(&bucket_bounds_us());
        let mut cum = 0;
        let cumulative: Vec<u64> = counts[..LATENCY_BUCKETS_S.len()]
            .iter()
            .map(|c| {
                cum += c;
                cum
            })
            .collect();
        self.histogram_of(name, labels, &cumulative, h.count(), sum_us);
    }
    /// One histogram series from the cumulative counts at each of [`LATENCY_BUCKETS_S`],
    /// the total count and the sum (us).
    pub(crate) fn histogram_of(
        &mut self,
        name: &str,
        labels: &[(&str, &str)],
        cumulative: &[u64],
        count: u64,
        sum_us: f64,
    ) {
        let bucket = format!("{name}_bucket");
        for (b, c) in LATENCY_BUCKETS_S.iter().zip(cumulative) {
            let le = fmt(*b);
            let mut l: Vec<(&str, &str)> = labels.to_vec();
            l.push(("le", &le));
            self.value(&bucket, &l, *c as f64);
        }
        let mut l: Vec<(&str, &str)> = labels.to_vec();
        l.push(("le", "+Inf"));
        self.value(&bucket, &l, count as f64);
        self.value(&format!("{name}_sum"), labels, sum_us / 1e6);
        self.value(&format!("{name}_count"), labels, count as f64);
    }
}

/// [`LATENCY_BUCKETS_S`] in microseconds.
pub(crate) fn bucket_bounds_us() -> Vec<u64> {
    LATENCY_BUCKETS_S
        .iter()
        .map(|b| (b * 1e6).round() as u64)
        .collect()
}

fn fmt(v: f64) -> String {
    if v.is_finite() && v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else if v.is_nan() {
        "NaN".into()
    } else {
        format!("{v}")
    }
}

/// Renders the exposition of a run: cumulative counters from the latest reading, gauges
/// from the latest sample. `running`: whether the run is still generating or draining.
pub fn render(series: &Series, running: bool) -> String {
    render_parts(
        &series.last,
        series.samples.last(),
        series.group_names(),
        running,
    )
}

/// [`render`] from its parts.
pub fn render_parts(r: &Reading, s: Option<&Sample>, groups: &[String], running: bool) -> String {
    let mut o = Out { s: String::new() };
    o.one(
        "squall_up",
        "gauge",
        "1 while a run is generating or draining, 0 after it ended.",
        f64::from(u8::from(running)),
    );
    o.one(
        "squall_run_seconds",
        "gauge",
        "Seconds since the run started.",
        r.t,
    );
    o.one(
        "squall_flows_started_total",
        "counter",
        "Client flows opened.",
        r.started as f64,
    );
    o.one(
        "squall_flows_completed_total",
        "counter",
        "Client flows completed.",
        r.completed as f64,
    );
    o.one(
        "squall_active_flows",
        "gauge",
        "Flows with a running program (client side).",
        r.active as f64,
    );
    o.by_label(
        "squall_wire_bytes_total",
        "counter",
        "Ethernet bytes sent, by side.",
        "side",
        &[("client", r.tx_bytes as f64), ("server", r.rx_bytes as f64)],
    );
    o.one(
        "squall_wire_frames_total",
        "counter",
        "Frames sent by both sides.",
        r.frames as f64,
    );
    o.one(
        "squall_errors_total",
        "counter",
        "Error counters of both sides, summed (squall_flow_errors_total has them by kind).",
        r.errors as f64,
    );
    if let Some(s) = s {
        o.one(
            "squall_cps",
            "gauge",
            "Client flows opened per second over the last sample (about 1 s).",
            s.cps,
        );
        o.one(
            "squall_wire_bytes_per_second",
            "gauge",
            "Wire bytes per second of both sides over the last sample.",
            s.wire_gbps() * 1e9 / 8.0,
        );
        o.one(
            "squall_packets_per_second",
            "gauge",
            "Frames per second of both sides over the last sample.",
            s.mpps * 1e6,
        );
    }
    if let Some((c, sv)) = &r.sides {
        o.family(
            "squall_flow_errors_total",
            "counter",
            "Error counters by side and kind (counter names of docs/USAGE.md).",
        );
        for (side, rep) in [("client", c), ("server", sv)] {
            for (kind, v) in error_kinds(rep) {
                o.value(
                    "squall_flow_errors_total",
                    &[("side", side), ("kind", kind)],
                    v as f64,
                );
            }
        }
        o.family(
            "squall_tcp_retransmitted_segments_total",
            "counter",
            "TCP segments retransmitted (tcps_sndrexmitpack), by side.",
        );
        for (side, rep) in [("client", c), ("server", sv)] {
            let v = rep.tcp.tcps_sndrexmitpack as f64;
            o.value(
                "squall_tcp_retransmitted_segments_total",
                &[("side", side)],
                v,
            );
        }
        o.family(
            "squall_tcp_retransmit_timeouts_total",
            "counter",
            "TCP retransmission timeouts (tcps_rexmttimeo), by side.",
        );
        for (side, rep) in [("client", c), ("server", sv)] {
            let v = rep.tcp.tcps_rexmttimeo as f64;
            o.value("squall_tcp_retransmit_timeouts_total", &[("side", side)], v);
        }
        o.family(
            "squall_group_flows_started_total",
            "counter",
            "Client flows opened, by template group.",
        );
        for (g, t) in c.app.tg.iter().enumerate() {
            let name = crate::series::group_name(groups, g);
            o.value(
                "squall_group_flows_started_total",
                &[("group", &name)],
                t.c.started as f64,
            );
        }
        o.family(
            "squall_group_flows_completed_total",
            "counter",
            "Client flows completed, by template group.",
        );
        for (g, t) in c.app.tg.iter().enumerate() {
            let name = crate::series::group_name(groups, g);
            o.value(
                "squall_group_flows_completed_total",
                &[("group", &name)],
                t.c.completed as f64,
            );
        }
        o.family(
            "squall_latency_seconds",
            "histogram",
            "Client latency from each flow's scheduled start, by template group and phase (connect, first_byte, last_byte).",
        );
        for (g, t) in c.app.tg.iter().enumerate() {
            let name = crate::series::group_name(groups, g);
            for (phase, h) in t.lat.iter() {
                o.histogram(
                    "squall_latency_seconds",
                    &[("group", &name), ("phase", phase)],
                    h,
                );
            }
        }
    }
    if let Some(s) = s.filter(|s| !s.cores.is_empty()) {
        o.family("squall_core_load_ratio", "gauge", "Share of a worker core's loop time spent in turns that did work, over the last sample.");
        for c in &s.cores {
            o.value(
                "squall_core_load_ratio",
                &[("core", &c.core.to_string())],
                c.load,
            );
        }
        o.family(
            "squall_core_active_flows",
            "gauge",
            "Flows with a running program on a worker core (client side).",
        );
        for c in &s.cores {
            o.value(
                "squall_core_active_flows",
                &[("core", &c.core.to_string())],
                c.active as f64,
            );
        }
    }
    o.s
}

/// The endpoint: the latest exposition, served to every `GET` by a thread of its own.
#[derive(Clone, Debug)]
pub struct Exporter {
    text: Arc<Mutex<String>>,
    /// The address actually bound (port 0 picks one).
    pub addr: SocketAddr,
}

impl Exporter {
    /// Binds `addr` and starts serving (an empty exposition until the first update).
    pub fn start(addr: &str) -> Result<Exporter, String> {
        let listener = std::net::TcpListener::bind(addr).map_err(|e| {
            format!("--metrics {addr}: cannot listen: {e} (give a free HOST:PORT, e.g. 127.0.0.1:9464, or port 0)")
        })?;
        let addr = listener
            .local_addr()
            .map_err(|e| format!("--metrics {addr}: {e}"))?;
        let text = Arc::new(Mutex::new(String::new()));
        let t2 = text.clone();
        std::thread::Builder::new()
            .name("squall-metrics".into())
            .spawn(move || {
                crate::getserver::serve(listener, move |path| match path {
                    "/metrics" | "/" => {
                        let body = t2.lock().map(|g| g.clone()).unwrap_or_default();
                        (200, body, "text/plain; version=0.0.4; charset=utf-8")
                    }
                    _ => (
                        404,
                        "not found: the metrics are at /metrics\n".into(),
                        "text/plain",
                    ),
                })
            })
            .map_err(|e| format!("--metrics: cannot start the server thread: {e}"))?;
        Ok(Exporter { text, addr })
    }
    /// Replaces the exposition served.
    pub fn update(&self, text: String) {
        if let Ok(mut g) = self.text.lock() {
            *g = text;
        }
    }
}

/// One sample line: name, labels (values as escaped in the text), value.
pub type MetricSample = (String, Vec<(String, String)>, f64);

/// `k="v",k2="v2"` with `\\`, `\"` and `\n` escapes (values kept escaped).
fn parse_labels(l: &str) -> Option<Vec<(String, String)>> {
    let mut out = Vec::new();
    let mut rest = l;
    while !rest.is_empty() {
        let (k, r) = rest.split_once("=\"")?;
        let mut end = None;
        let mut esc = false;
        for (i, c) in r.char_indices() {
            match (esc, c) {
                (true, _) => esc = false,
                (false, '\\') => esc = true,
                (false, '"') => {
                    end = Some(i);
                    break;
                }
                _ => {}
            }
        }
        let e = end?;
        out.push((k.to_string(), r[..e].to_string()));
        rest = &r[e + 1..];
        rest = match rest.strip_prefix(',') {
            Some(x) => x,
            None if rest.is_empty() => rest,
            None => return None,
        };
    }
    Some(out)
}

/// A strict reader of the text format (the tests check our exposition with it): every sample line belongs to the family of the
/// last `# TYPE`, names and labels are well formed, values parse, histogram buckets
/// are cumulative and end with `+Inf` equal to `_count`.
pub fn parse(text: &str) -> Result<Vec<MetricSample>, String> {
    let mut out = Vec::new();
    let mut family: Option<(String, String)> = None;
    let mut seen = std::collections::HashSet::new();
    let name_ok = |n: &str| {
        !n.is_empty()
            && n.chars().enumerate().all(|(i, c)| {
                c.is_ascii_alphabetic() || c == '_' || c == ':' || (i > 0 && c.is_ascii_digit())
            })
    };
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (n, k) = rest.split_once(' ').ok_or("TYPE without kind")?;
            if !["counter", "gauge", "histogram"].contains(&k) || !name_ok(n) {
                return Err(format!("bad TYPE line: {line}"));
            }
            if !seen.insert(n.to_string()) {
                return Err(format!("family {n} declared twice"));
            }
            family = Some((n.to_string(), k.to_string()));
            continue;
        }
        if line.starts_with("# HELP ") || line.is_empty() {
            continue;
        }
        let (head, val) = line.rsplit_once(' ').ok_or(format!("no value: {line}"))?;
        let v: f64 = match val {
            "+Inf" => f64::INFINITY,
            "NaN" => f64::NAN,
            x => x.parse().map_err(|_| format!("bad value: {line}"))?,
        };
        let (name, labels) = match head.split_once('{') {
            None => (head.to_string(), Vec::new()),
            Some((n, l)) => {
                let l = l
                    .strip_suffix('}')
                    .ok_or(format!("unclosed labels: {line}"))?;
                let labels = parse_labels(l).ok_or(format!("bad labels: {line}"))?;
                if labels.iter().any(|(k, _)| !name_ok(k)) {
                    return Err(format!("bad label name: {line}"));
                }
                (n.to_string(), labels)
            }
        };
        let (fam, kind) = family
            .as_ref()
            .ok_or(format!("sample before TYPE: {line}"))?;
        let ok = if kind == "histogram" {
            [
                format!("{fam}_bucket"),
                format!("{fam}_sum"),
                format!("{fam}_count"),
            ]
            .contains(&name)
        } else {
            &name == fam
        };
        if !ok || !name_ok(&name) {
            return Err(format!("sample {name} outside its family {fam}"));
        }
        if kind == "counter" && !name.ends_with("_total") {
            return Err(format!("counter {name} without _total"));
        }
        out.push((name, labels, v));
    }
    // Buckets: cumulative, +Inf last and equal to _count.
    let mut last: Option<(Vec<(String, String)>, f64)> = None;
    for (n, l, v) in &out {
        if n.ends_with("_bucket") {
            let key: Vec<_> = l.iter().filter(|(k, _)| k != "le").cloned().collect();
            if let Some((k, prev)) = &last {
                if *k == key && v < prev {
                    return Err(format!("bucket counts decrease in {n} {l:?}"));
                }
            }
            last = Some((key, *v));
        } else if n.ends_with("_count") {
            let key = l.clone();
            match &last {
                Some((k, inf)) if *k == key && inf == v => {}
                _ => return Err(format!("{n} {l:?} differs from its +Inf bucket")),
            }
        }
    }
    Ok(out)
}

/// The value of the first sample named `name` that has every label of `labels`.
pub fn find(m: &[MetricSample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    m.iter()
        .find(|(n, l, _)| {
            n == name
                && labels
                    .iter()
                    .all(|(k, v)| l.iter().any(|(a, b)| a == k && b == v))
        })
        .map(|x| x.2)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::SideReport;
    use crate::stats::SideStats;

    fn reading() -> Reading {
        let mut c = SideReport {
            app: SideStats::new(2),
            ..SideReport::default()
        };
        c.app.tg[1].c.started = 10;
        c.app.tg[1].c.aborted = 2;
        for us in [40, 80, 300, 2_000, 20_000_000] {
            c.app.tg[1].lat.first_byte.record_ns(us * 1000);
        }
        c.tcp.tcps_sndrexmitpack = 4;
        Reading {
            t: 2.0,
            started: 10,
            completed: 8,
            errors: 2,
            active: 1,
            tx_bytes: 1000,
            rx_bytes: 5000,
            frames: 30,
            sides: Some((c, SideReport::default())),
            cores: Vec::new(),
        }
    }

    fn get(m: &[MetricSample], name: &str, labels: &[(&str, &str)]) -> f64 {
        find(m, name, labels).unwrap_or_else(|| panic!("{name} {labels:?} missing"))
    }

    #[test]
    fn the_exposition_parses_and_carries_the_figures() {
        let groups = vec![String::new(), "web \"1\"".to_string()];
        let text = render_parts(&reading(), None, &groups, true);
        let m = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(get(&m, "squall_flows_started_total", &[]), 10.0);
        assert_eq!(
            get(&m, "squall_wire_bytes_total", &[("side", "server")]),
            5000.0
        );
        assert_eq!(
            get(
                &m,
                "squall_flow_errors_total",
                &[("side", "client"), ("kind", "aborted")]
            ),
            2.0
        );
        assert_eq!(
            get(
                &m,
                "squall_tcp_retransmitted_segments_total",
                &[("side", "client")]
            ),
            4.0
        );
        let fb = [("group", "web \\\"1\\\""), ("phase", "first_byte")];
        assert_eq!(get(&m, "squall_latency_seconds_count", &fb), 5.0);
        let le = |b: &str| {
            let mut l = fb.to_vec();
            l.push(("le", b));
            get(&m, "squall_latency_seconds_bucket", &l)
        };
        assert_eq!(le("0.00005"), 1.0);
        assert_eq!(le("0.0001"), 2.0);
        assert_eq!(le("0.0025"), 4.0);
        assert_eq!(le("10"), 4.0, "20 s is above the last bucket");
        assert_eq!(le("+Inf"), 5.0);
        let sum = get(&m, "squall_latency_seconds_sum", &fb);
        assert!((sum - 20.002420).abs() < 0.01, "{sum}");
    }

    #[test]
    fn the_parser_rejects_malformed_expositions() {
        for bad in [
            "squall_x 1\n",
            "# TYPE squall_x counter\nsquall_x 1\n",
            "# TYPE squall_x_total gauge\nsquall_x_total{a=\"1\" 1\n",
            "# TYPE squall_x_total counter\nsquall_x_total one\n",
            "# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_count 1\n",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    /// docs/grafana-squall.json and docs/OPERATING.md only name metrics we serve (`squall
    /// run`'s and `squall serve`'s), and OPERATING.md lists every family.
    #[test]
    fn the_dashboard_and_the_docs_name_served_metrics() {
        let mut r = reading();
        r.cores = vec![crate::series::CoreReading::default()];
        let mut series = Series::new(vec![String::new(), "http".into()]);
        series.push(Reading::default());
        series.push(r);
        let s = series.samples.last().cloned();
        let mut text = render_parts(&series.last, s.as_ref(), series.group_names(), true);
        // And `squall serve`'s families.
        let mut serve = crate::serveseries::ServeSeries::default();
        let w = vec![crate::servelive::WorkerFigures::default(); 2];
        serve.push(crate::serveseries::ServeReading::of(1.0, w));
        text.push_str(&crate::servemetrics::render(&serve, true));
        let families: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .filter_map(|l| l.split(' ').next())
            .collect();
        let served = |n: &str| {
            families.iter().any(|f| {
                n == *f
                    || [*f, "_bucket"].concat() == n
                    || [*f, "_count"].concat() == n
                    || [*f, "_sum"].concat() == n
            })
        };
        let names = |doc: &str| -> Vec<String> {
            let mut v = Vec::new();
            let b = doc.as_bytes();
            let mut i = 0;
            while let Some(p) = doc[i..].find("squall_") {
                let start = i + p;
                let mut e = start;
                while e < b.len() && (b[e].is_ascii_alphanumeric() || b[e] == b'_') {
                    e += 1;
                }
                v.push(doc[start..e].to_string());
                i = e;
            }
            v
        };
        let dash = std::fs::read_to_string("../../docs/grafana-squall.json").expect("dashboard");
        let used = names(&dash);
        assert!(used.len() > 10);
        for n in &used {
            assert!(served(n), "the dashboard reads {n}, not served");
        }
        let ops = std::fs::read_to_string("../../docs/OPERATING.md").expect("OPERATING.md");
        for f in &families {
            assert!(
                ops.contains(&format!("`{f}`")),
                "{f} not documented in docs/OPERATING.md"
            );
        }
        // (A name ending in `_` is a prefix: `squall_serve_*`.)
        for n in names(&ops)
            .iter()
            .filter(|n| n.len() > "squall_".len() && !n.ends_with('_'))
        {
            assert!(served(n), "OPERATING.md names {n}, not served");
        }
    }
}
