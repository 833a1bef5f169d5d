//! The per-second time series of a real-time run (`series` in `squall run --json`, the
//! live view, the metrics endpoint): the thread that prints the progress line reads what
//! the workers already publish ([`Live`]'s relaxed atomics every 10 ms and, with
//! snapshots on, each side's report every 200 ms) once a second, and turns two
//! consecutive [`Reading`]s into one [`Sample`]. Nothing is added on the data path.

use serde_json::{json, Map, Value};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::run::{Live, SideReport, Snapshot};
use crate::stats::{LatHist, Latency, TgStats};

/// The cumulative figures of one shard (one core) at one instant.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CoreReading {
    pub started: u64,
    pub completed: u64,
    pub active: u64,
    /// Wire bytes sent by both sides of the shard.
    pub wire_bytes: u64,
    pub busy_ns: u64,
    pub loop_ns: u64,
}

/// The cumulative figures of a run at one instant.
#[derive(Clone, Debug, Default)]
pub struct Reading {
    /// Seconds since the run started.
    pub t: f64,
    pub started: u64,
    pub completed: u64,
    /// Errors of both sides.
    pub errors: u64,
    pub active: u64,
    /// Wire bytes sent by the client side / the server side.
    pub tx_bytes: u64,
    pub rx_bytes: u64,
    /// Frames sent by both sides.
    pub frames: u64,
    /// The latest published reports (client, server), when snapshots are on.
    pub sides: Option<(SideReport, SideReport)>,
    /// One per shard (`--cores N`), else empty.
    pub cores: Vec<CoreReading>,
}

fn get(a: &std::sync::atomic::AtomicU64) -> u64 {
    a.load(Ordering::Relaxed)
}

fn core_reading(l: &Live) -> CoreReading {
    CoreReading {
        started: get(&l.started),
        completed: get(&l.completed),
        active: get(&l.active),
        wire_bytes: get(&l.wire_bytes) + get(&l.server_wire_bytes),
        busy_ns: get(&l.busy_ns),
        loop_ns: get(&l.loop_ns),
    }
}

/// A copy of the report in `s` (the worker only ever `try_lock`s it: never waits on us).
fn snapshot(s: &Snapshot) -> Option<SideReport> {
    s.report.lock().ok().and_then(|g| g.clone())
}

/// The latest published reports of a run (summed over its shards or workers).
pub fn sides(live: &Live) -> Option<(SideReport, SideReport)> {
    let lives: Vec<&Live> = match live.shards.get() {
        Some(v) => v.iter().map(Arc::as_ref).collect(),
        None => vec![live],
    };
    let mut out: Option<(SideReport, SideReport)> = None;
    for l in lives {
        // A side not published yet (a T-mem2 thread a moment behind the other) counts as
        // empty; a worker that published neither is skipped.
        let (c, s) = match (snapshot(&l.ctl.client), snapshot(&l.ctl.server)) {
            (None, None) => continue,
            (c, s) => (c.unwrap_or_default(), s.unwrap_or_default()),
        };
        match out.as_mut() {
            None => out = Some((c, s)),
            Some((ac, as_)) => {
                crate::shards::merge_side(ac, &c);
                crate::shards::merge_side(as_, &s);
            }
        }
    }
    out
}

/// Asks every worker of the run for fresh side reports (read by the next [`Reading::read`]).
pub fn request_snapshots(live: &Live) {
    let lives: Vec<&Live> = match live.shards.get() {
        Some(v) => v.iter().map(Arc::as_ref).collect(),
        None => vec![live],
    };
    for l in lives {
        l.ctl.client.request();
        l.ctl.server.request();
    }
}

impl Reading {
    /// Reads the run's published figures at `t` seconds.
    pub fn read(live: &Live, t: f64) -> Reading {
        let cores = live
            .shards
            .get()
            .map(|v| v.iter().map(|l| core_reading(l)).collect())
            .unwrap_or_default();
        Reading {
            t,
            started: get(&live.started),
            completed: get(&live.completed),
            errors: get(&live.errors) + get(&live.server_errors),
            active: get(&live.active),
            tx_bytes: get(&live.wire_bytes),
            rx_bytes: get(&live.server_wire_bytes),
            frames: get(&live.tx_frames) + get(&live.server_frames),
            sides: if live.ctl.snapshots.load(Ordering::Relaxed) {
                sides(live)
            } else {
                None
            },
            cores,
        }
    }
}

/// Percentiles of the latencies recorded during one interval (us).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LatSummary {
    pub count: u64,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p99_9: u64,
    pub max: u64,
}

impl LatSummary {
    pub fn of(h: &LatHist) -> LatSummary {
        let s = h.summary();
        LatSummary {
            count: h.count(),
            p50: s[0],
            p90: s[1],
            p99: s[2],
            p99_9: s[3],
            max: s[4],
        }
    }
    /// The figures as JSON; with nothing measured the percentiles are `null` (not 0,
    /// which an assertion such as `ttfb.p99 < 2ms` would take as a pass).
    pub fn to_json(&self) -> Value {
        let v = |x: u64| {
            if self.count == 0 {
                Value::Null
            } else {
                x.into()
            }
        };
        json!({"count": self.count, "p50": v(self.p50), "p90": v(self.p90), "p99": v(self.p99), "p99_9": v(self.p99_9), "max": v(self.max)})
    }
}

/// One template group during one interval.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GroupSample {
    pub name: String,
    pub cps: f64,
    pub completed: u64,
    pub errors: u64,
    /// First-byte latency of the group's flows in the interval.
    pub first_byte: Option<LatSummary>,
}

/// One shard (core) during one interval.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CoreSample {
    pub core: usize,
    pub cps: f64,
    pub active: u64,
    pub wire_gbps: f64,
    /// Share of the core's loop time spent in turns that did work (0..1).
    pub load: f64,
}

/// The figures of one interval (about a second) of a run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Sample {
    /// End of the interval, seconds since the run started.
    pub t: f64,
    /// Length of the interval (s).
    pub dt: f64,
    /// Client flows opened per second.
    pub cps: f64,
    /// Flows with a running program (client side) at the end.
    pub active: u64,
    /// Client flows completed since the start.
    pub completed: u64,
    /// Wire Gbit/s sent by the client side / by the server side (Ethernet bytes).
    pub tx_gbps: f64,
    pub rx_gbps: f64,
    /// Million frames per second sent by both sides.
    pub mpps: f64,
    /// Errors counted during the interval (both sides) and since the start.
    pub errors: u64,
    pub errors_total: u64,
    /// Errors of the interval by counter name (non-zero ones), with snapshots.
    pub errors_by_kind: Vec<(String, u64)>,
    /// TCP segments retransmitted during the interval (both sides), with snapshots.
    pub retransmits: Option<u64>,
    /// Latency of the flows measured during the interval (all groups), with snapshots:
    /// connect, first_byte, last_byte.
    pub latency: Option<[LatSummary; 3]>,
    pub groups: Vec<GroupSample>,
    pub cores: Vec<CoreSample>,
}

fn per_s(d: u64, dt: f64) -> f64 {
    d as f64 / dt
}

fn gbps(d: u64, dt: f64) -> f64 {
    d as f64 * 8.0 / dt / 1e9
}

/// Error counters of a side by name (both the per-group and the side-wide ones).
pub fn error_kinds(s: &SideReport) -> Vec<(&'static str, u64)> {
    let t = s.app.total();
    let mut v: Vec<(&'static str, u64)> = t
        .iter()
        .filter(|(_, _, e)| *e)
        .map(|(n, v, _)| (n, v))
        .collect();
    v.push(("no_template", s.app.no_template));
    v.push(("l7_no_match", s.app.l7_no_match));
    v.push(("send_errors", s.app.send_errors));
    // The HTTP-aware programs' errors (counted in `errors` too).
    let http = |f: fn(&crate::stats::HttpStats) -> u64| s.app.tg.iter().map(|g| f(&g.http)).sum();
    v.push(("http_parse_errors", http(|h| h.parse_errors)));
    v.push(("http_incomplete", http(|h| h.incomplete)));
    v.push(("http_not_sent", http(|h| h.not_sent)));
    v.extend(
        s.app
            .udp
            .iter()
            .filter(|(_, _, e)| *e)
            .map(|(n, v, _)| (n, v)),
    );
    v
}

fn rexmit_packets(s: &(SideReport, SideReport)) -> u64 {
    s.0.tcp.tcps_sndrexmitpack + s.1.tcp.tcps_sndrexmitpack
}

/// Every group's latencies merged.
fn merged_latency(s: &SideReport) -> Latency {
    let mut l = Latency::default();
    for g in &s.app.tg {
        l.merge(&g.lat);
    }
    l
}

/// `cur - prev` of a cumulative histogram: what was recorded in between.
fn hist_delta(cur: &LatHist, prev: &LatHist) -> LatHist {
    let mut d = cur.clone();
    if d.0.subtract(&prev.0).is_err() {
        // A reset or shrunk histogram (never for one run): the cumulative one stands.
        return cur.clone();
    }
    d
}

fn lat_delta(cur: &Latency, prev: &Latency) -> [LatSummary; 3] {
    [
        LatSummary::of(&hist_delta(&cur.connect, &prev.connect)),
        LatSummary::of(&hist_delta(&cur.first_byte, &prev.first_byte)),
        LatSummary::of(&hist_delta(&cur.last_byte, &prev.last_byte)),
    ]
}

/// The interval between two readings of a run. `groups`: the template group names.
pub fn sample(prev: &Reading, cur: &Reading, groups: &[String]) -> Sample {
    let dt = (cur.t - prev.t).max(1e-3);
    let d = |a: u64, b: u64| a.saturating_sub(b);
    let mut s = Sample {
        t: cur.t,
        dt,
        cps: per_s(d(cur.started, prev.started), dt),
        active: cur.active,
        completed: cur.completed,
        tx_gbps: gbps(d(cur.tx_bytes, prev.tx_bytes), dt),
        rx_gbps: gbps(d(cur.rx_bytes, prev.rx_bytes), dt),
        mpps: per_s(d(cur.frames, prev.frames), dt) / 1e6,
        errors: d(cur.errors, prev.errors),
        errors_total: cur.errors,
        ..Sample::default()
    };
    if let Some(c) = &cur.sides {
        let empty = (SideReport::default(), SideReport::default());
        let p = prev.sides.as_ref().unwrap_or(&empty);
        let mut kinds: Vec<(String, u64)> = Vec::new();
        let (ck, sk) = (error_kinds(&c.0), error_kinds(&c.1));
        let (pck, psk) = (error_kinds(&p.0), error_kinds(&p.1));
        for (i, (name, v)) in ck.iter().enumerate() {
            let now = v + sk[i].1;
            let before = pck[i].1 + psk[i].1;
            if now > before {
                kinds.push(((*name).to_string(), now - before));
            }
        }
        s.errors_by_kind = kinds;
        s.retransmits = Some(d(rexmit_packets(c), rexmit_packets(p)));
        s.latency = Some(lat_delta(&merged_latency(&c.0), &merged_latency(&p.0)));
        let n = c.0.app.tg.len().max(c.1.app.tg.len());
        for g in 0..n {
            let ctg = c.0.app.tg.get(g).cloned().unwrap_or_default();
            let stg = c.1.app.tg.get(g).cloned().unwrap_or_default();
            let pctg = p.0.app.tg.get(g).cloned().unwrap_or_default();
            let pstg = p.1.app.tg.get(g).cloned().unwrap_or_default();
            let fb = hist_delta(&ctg.lat.first_byte, &pctg.lat.first_byte);
            s.groups.push(GroupSample {
                name: group_name(groups, g),
                cps: per_s(d(ctg.c.started, pctg.c.started), dt),
                completed: d(ctg.c.completed, pctg.c.completed),
                errors: d(
                    ctg.c.errors() + stg.c.errors() + ctg.http.errors() + stg.http.errors(),
                    pctg.c.errors() + pstg.c.errors() + pctg.http.errors() + pstg.http.errors(),
                ),
                first_byte: (fb.count() > 0).then(|| LatSummary::of(&fb)),
            });
        }
    }
    for (k, c) in cur.cores.iter().enumerate() {
        let p = prev.cores.get(k).cloned().unwrap_or_default();
        let all = d(c.loop_ns, p.loop_ns);
        s.cores.push(CoreSample {
            core: k,
            cps: per_s(d(c.started, p.started), dt),
            active: c.active,
            wire_gbps: gbps(d(c.wire_bytes, p.wire_bytes), dt),
            load: if all == 0 {
                0.0
            } else {
                d(c.busy_ns, p.busy_ns) as f64 / all as f64
            },
        });
    }
    s
}

/// The name a template group is reported under.
pub fn group_name(names: &[String], g: usize) -> String {
    match names.get(g).map(String::as_str) {
        Some("") | None => "(default)".into(),
        Some(n) => n.to_string(),
    }
}

/// `x` rounded to three decimals (the figures of results and series).
pub(crate) fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

impl Sample {
    /// Wire Gbit/s sent by both sides (the progress line's figure).
    pub fn wire_gbps(&self) -> f64 {
        self.tx_gbps + self.rx_gbps
    }
    /// The sample as one element of `series` (docs/USAGE.md, *Time series*).
    pub fn to_json(&self) -> Value {
        let mut kinds = Map::new();
        for (k, v) in &self.errors_by_kind {
            kinds.insert(k.clone(), (*v).into());
        }
        let lat = self.latency.as_ref().map(|l| {
            json!({"connect": l[0].to_json(), "first_byte": l[1].to_json(), "last_byte": l[2].to_json()})
        });
        let groups: Vec<Value> = self
            .groups
            .iter()
            .map(|g| {
                json!({"name": g.name, "cps": round3(g.cps), "completed": g.completed, "errors": g.errors,
                       "first_byte_us": g.first_byte.as_ref().map(LatSummary::to_json)})
            })
            .collect();
        let cores: Vec<Value> = self
            .cores
            .iter()
            .map(|c| {
                json!({"core": c.core, "cps": round3(c.cps), "active": c.active,
                       "wire_gbps": c.wire_gbps, "load": round3(c.load)})
            })
            .collect();
        json!({
            "t": round3(self.t),
            "dt": round3(self.dt),
            "cps": round3(self.cps),
            "active": self.active,
            "completed": self.completed,
            "tx_gbps": self.tx_gbps,
            "rx_gbps": self.rx_gbps,
            "wire_gbps": self.wire_gbps(),
            "mpps": self.mpps,
            "errors": self.errors,
            "errors_total": self.errors_total,
            "errors_by_kind": kinds,
            "retransmits": self.retransmits,
            "latency_us": lat,
            "groups": groups,
            "cores": cores,
        })
    }
}

/// The `window` object of the results: `s` is the sample from `from` to `to`.
pub fn window_json(s: &Sample, from: f64, to: f64) -> Value {
    let mut v = s.to_json();
    if let Value::Object(m) = &mut v {
        for k in ["t", "dt", "completed", "active", "errors_total"] {
            m.remove(k);
        }
        m.insert("from".into(), round3(from).into());
        m.insert("to".into(), round3(to).into());
        m.insert("seconds".into(), round3(to - from).into());
    }
    v
}

/// What the window adds to its sample, for the summary (docs/USAGE.md, *Assertions and
/// measurement windows*): `l7_gbps`, and per group `started`, `l7_gbps` and every latency
/// phase measured in the window (`latency_us`; the HTTP per-request phases when any).
/// Needs the side reports at both ends (a window always has them, but for a run that
/// ended before its first report).
fn window_details(v: &mut Value, a: &Reading, b: &Reading) {
    let Some(c) = &b.sides else {
        return;
    };
    let empty = (SideReport::default(), SideReport::default());
    let p = a.sides.as_ref().unwrap_or(&empty);
    let dt = (b.t - a.t).max(1e-3);
    let l7 = |s: &(SideReport, SideReport)| {
        s.0.tcp.tcps_sndbyte
            + s.1.tcp.tcps_sndbyte
            + s.0.app.udp.udps_sndbyte
            + s.1.app.udp.udps_sndbyte
    };
    v["l7_gbps"] = gbps(l7(c).saturating_sub(l7(p)), dt).into();
    let Some(groups) = v.get_mut("groups").and_then(Value::as_array_mut) else {
        return;
    };
    let none = TgStats::default();
    for (g, out) in groups.iter_mut().enumerate() {
        fn tg<'a>(s: &'a SideReport, g: usize, none: &'a TgStats) -> &'a TgStats {
            s.app.tg.get(g).unwrap_or(none)
        }
        let (ct, st) = (tg(&c.0, g, &none), tg(&c.1, g, &none));
        let (pct, pst) = (tg(&p.0, g, &none), tg(&p.1, g, &none));
        let acked = |a: &TgStats, b: &TgStats| a.c.l7_tx_acked + b.c.l7_tx_acked;
        out["started"] = ct.c.started.saturating_sub(pct.c.started).into();
        out["l7_gbps"] = gbps(acked(ct, st).saturating_sub(acked(pct, pst)), dt).into();
        let mut lat = Map::new();
        let http = ct.lat.iter_http().into_iter().zip(pct.lat.iter_http());
        for ((name, h), (_, ph)) in ct.lat.iter().into_iter().zip(pct.lat.iter()).chain(http) {
            let d = hist_delta(h, ph);
            if d.count() > 0 || !name.starts_with("req_") {
                lat.insert(name.into(), LatSummary::of(&d).to_json());
            }
        }
        out["latency_us"] = Value::Object(lat);
    }
}

/// The samples of a run, one per call to [`Series::push`].
#[derive(Debug, Default)]
pub struct Series {
    groups: Vec<String>,
    /// The latest reading (cumulative figures, for the metrics endpoint and windows).
    pub last: Reading,
    /// The reading before it.
    prev: Reading,
    pub samples: Vec<Sample>,
    /// The measurement window asked for (s since the start) and the readings that
    /// bound it (the first at or after each end).
    window: Option<(f64, f64)>,
    win_start: Option<Reading>,
    win_end: Option<Reading>,
}

impl Series {
    pub fn new(groups: Vec<String>) -> Self {
        Series {
            groups,
            ..Series::default()
        }
    }
    /// The run's template group names.
    pub fn group_names(&self) -> &[String] {
        &self.groups
    }
    /// Measure the summary's window from `from` to `to` seconds (`--warmup`,
    /// `--cooldown`), to the nearest reading.
    pub fn set_window(&mut self, from: f64, to: f64) {
        self.window = Some((from, to));
        if from <= 0.0 {
            self.win_start = Some(Reading::default());
        }
    }
    /// Adds the interval from the last reading to `r`; returns its sample.
    pub fn push(&mut self, r: Reading) -> &Sample {
        // Readings come about 1 s apart: one within 50 ms of an end is that end.
        if let Some((from, to)) = self.window {
            if self.win_start.is_none() && r.t >= from - 0.05 {
                self.win_start = Some(r.clone());
            }
            if self.win_end.is_none() && r.t >= to - 0.05 {
                self.win_end = Some(r.clone());
            }
        }
        let s = sample(&self.last, &r, &self.groups);
        self.prev = std::mem::replace(&mut self.last, r);
        self.samples.push(s);
        self.samples.last().expect("just pushed")
    }
    /// Puts the run's final reports in the last reading (the snapshots are up to 200 ms
    /// old), so that the samples add up to the run's totals.
    pub fn finish(&mut self, client: &SideReport, server: &SideReport) {
        if self.samples.is_empty() || self.last.sides.is_none() {
            return;
        }
        self.last.sides = Some((client.clone(), server.clone()));
        if let Some(w) = self.win_end.as_mut().filter(|w| w.t == self.last.t) {
            w.sides = self.last.sides.clone();
        }
        let s = sample(&self.prev, &self.last, &self.groups);
        if let Some(l) = self.samples.last_mut() {
            *l = s;
        }
    }
    /// The figures of the measurement window (`window` in the JSON results): a sample
    /// from its first reading to its last, with `from` and `to`; None without a window
    /// or before it started. A run that ended before the window's end closes it there.
    pub fn window(&self) -> Option<Value> {
        self.window?;
        let a = self.win_start.as_ref()?;
        let b = self.win_end.as_ref().unwrap_or(&self.last);
        if b.t <= a.t {
            return None;
        }
        let mut v = window_json(&sample(a, b, &self.groups), a.t, b.t);
        window_details(&mut v, a, b);
        Some(v)
    }
    /// The `series` array of the JSON results.
    pub fn to_json(&self) -> Value {
        Value::Array(self.samples.iter().map(Sample::to_json).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn side(started: u64, aborted: u64, rexmit: u64, fb_us: &[u64]) -> SideReport {
        let mut s = SideReport {
            app: crate::stats::SideStats::new(2),
            ..SideReport::default()
        };
        s.app.tg[1].c.started = started;
        s.app.tg[1].c.aborted = aborted;
        s.tcp.tcps_sndrexmitpack = rexmit;
        for &us in fb_us {
            s.app.tg[1].lat.first_byte.record_ns(us * 1000);
        }
        s
    }

    #[test]
    fn a_sample_is_the_difference_of_two_readings() {
        let a = Reading {
            t: 1.0,
            started: 100,
            tx_bytes: 1_000,
            frames: 10,
            errors: 1,
            sides: Some((side(100, 1, 2, &[100, 200]), SideReport::default())),
            cores: vec![CoreReading {
                started: 100,
                busy_ns: 10,
                loop_ns: 100,
                ..CoreReading::default()
            }],
            ..Reading::default()
        };
        let b = Reading {
            t: 3.0,
            started: 300,
            active: 7,
            tx_bytes: 251_000,
            rx_bytes: 500_000,
            frames: 2_000_010,
            errors: 4,
            sides: Some((
                side(300, 4, 5, &[100, 200, 5_000, 5_000, 5_000]),
                SideReport::default(),
            )),
            cores: vec![CoreReading {
                started: 300,
                busy_ns: 60,
                loop_ns: 200,
                ..CoreReading::default()
            }],
            ..Reading::default()
        };
        let s = sample(&a, &b, &["".into(), "http".into()]);
        assert_eq!(s.dt, 2.0);
        assert_eq!(s.cps, 100.0);
        assert_eq!(s.active, 7);
        assert_eq!(s.tx_gbps, 250_000.0 * 8.0 / 2.0 / 1e9);
        assert_eq!(s.rx_gbps, 500_000.0 * 8.0 / 2.0 / 1e9);
        assert_eq!(s.mpps, 1.0);
        assert_eq!((s.errors, s.errors_total), (3, 4));
        assert_eq!(s.errors_by_kind, vec![("aborted".to_string(), 3)]);
        assert_eq!(s.retransmits, Some(3));
        let lat = s.latency.as_ref().unwrap();
        assert_eq!(lat[1].count, 3, "only the interval's latencies");
        assert!((4_990..=5_010).contains(&lat[1].p50), "{:?}", lat[1]);
        assert_eq!(lat[0].count, 0);
        assert_eq!(s.groups[1].name, "http");
        assert_eq!(s.groups[1].cps, 100.0);
        assert_eq!(s.groups[1].errors, 3);
        assert_eq!(s.groups[0].name, "(default)");
        assert_eq!(s.cores[0].cps, 100.0);
        assert_eq!(s.cores[0].load, 0.5);
        let j = s.to_json();
        assert_eq!(j["errors_by_kind"]["aborted"], 3);
        assert_eq!(j["latency_us"]["first_byte"]["count"], 3);
        assert_eq!(j["groups"][1]["first_byte_us"]["count"], 3);
        assert_eq!(j["cores"][0]["load"], 0.5);
    }

    #[test]
    fn without_snapshots_only_the_live_figures() {
        let mut series = Series::new(vec![]);
        let s = series
            .push(Reading {
                t: 1.0,
                started: 50,
                ..Reading::default()
            })
            .clone();
        assert_eq!(s.cps, 50.0);
        assert_eq!(s.retransmits, None);
        assert!(s.latency.is_none() && s.groups.is_empty() && s.cores.is_empty());
        let j = series.to_json();
        assert_eq!(j[0]["retransmits"], Value::Null);
        assert_eq!(j[0]["latency_us"], Value::Null);
    }
}
