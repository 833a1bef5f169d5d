//! The per-second time series of `squall serve` (`series` in `squall serve --json`, the
//! live view, the metrics endpoint): readings of the workers' published figures
//! ([`crate::servelive`]) once a second, two consecutive readings making one
//! [`ServeSample`] (the shape of `squall run`'s samples where the figures mean the same:
//! `t`, `dt`, `cps`, `active`, `tx_gbps`, `rx_gbps`, `wire_gbps`, `mpps`, `errors`,
//! `errors_total`, `errors_by_kind`, `retransmits`, `latency_us`, `cores`), and the
//! errors by kind.

use crate::series::round3;
use serde_json::{json, Map, Value};

use crate::series::LatSummary;
use crate::servelive::WorkerFigures;
use squall_serve::lathist::ReqLat;

/// The error kinds of the server: (name, value). `resets_received` is listed but not
/// counted in `errors` (a client's choice to reset is not the server's failure).
pub fn error_kinds(f: &WorkerFigures) -> [(&'static str, u64); 7] {
    [
        ("parse_errors", f.stats.parse_errors),
        ("refused_503", f.stats.refused),
        ("header_timeouts", f.stats.header_timeouts),
        ("send_errors", f.stats.send_errors),
        ("timeout_drops", f.tcp.timeout_drops),
        ("syn_dropped", f.tcp.syn_dropped),
        ("resets_received", f.tcp.resets_received),
    ]
}

/// The server's errors: every kind of [`error_kinds`] but the resets received.
pub fn errors(f: &WorkerFigures) -> u64 {
    error_kinds(f)
        .iter()
        .filter(|(k, _)| *k != "resets_received")
        .map(|(_, v)| v)
        .sum()
}

/// The cumulative figures of the server at one instant.
#[derive(Clone, Debug, Default)]
pub struct ServeReading {
    /// Seconds since the server started.
    pub t: f64,
    /// Every worker's figures summed.
    pub total: WorkerFigures,
    /// Each worker's (one per core), in worker order.
    pub workers: Vec<WorkerFigures>,
}

impl ServeReading {
    pub fn of(t: f64, workers: Vec<WorkerFigures>) -> ServeReading {
        let mut total = WorkerFigures::default();
        for w in &workers {
            total.add(w);
        }
        ServeReading { t, total, workers }
    }
}

/// Percentiles of a request-latency histogram (us).
pub fn lat_summary(h: &ReqLat) -> LatSummary {
    LatSummary {
        count: h.count(),
        p50: h.quantile(0.5),
        p90: h.quantile(0.9),
        p99: h.quantile(0.99),
        p99_9: h.quantile(0.999),
        max: h.quantile(1.0),
    }
}

/// One worker (core) during one interval.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ServeCore {
    pub core: usize,
    pub rps: f64,
    pub active: u64,
    pub wire_gbps: f64,
    /// Share of the worker's loop time spent in turns that did work (0..1).
    pub load: f64,
}

/// The figures of one interval (about a second) of the server.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ServeSample {
    pub t: f64,
    pub dt: f64,
    /// Requests answered per second.
    pub rps: f64,
    /// Connections accepted per second.
    pub cps: f64,
    /// Answers per second by status class: 1xx .. 5xx (index 1..=5).
    pub by_class: [f64; 6],
    /// Open connections at the end, and the idle ones among them.
    pub active: u64,
    pub idle: u64,
    /// Requests answered since the start.
    pub requests: u64,
    /// Wire Gbit/s sent by the server / received from the clients (Ethernet bytes).
    pub tx_gbps: f64,
    pub rx_gbps: f64,
    /// Million frames per second, both directions.
    pub mpps: f64,
    pub errors: u64,
    pub errors_total: u64,
    /// Errors of the interval by kind (non-zero ones).
    pub errors_by_kind: Vec<(String, u64)>,
    pub retransmits: u64,
    /// Request latency of the interval.
    pub latency: LatSummary,
    pub cores: Vec<ServeCore>,
}

fn gbps(d: u64, dt: f64) -> f64 {
    d as f64 * 8.0 / dt / 1e9
}

fn load(busy: u64, all: u64) -> f64 {
    if all == 0 {
        0.0
    } else {
        busy as f64 / all as f64
    }
}

/// The interval between two readings.
pub fn sample(prev: &ServeReading, cur: &ServeReading) -> ServeSample {
    let dt = (cur.t - prev.t).max(1e-3);
    let d = |a: u64, b: u64| a.saturating_sub(b);
    let (c, p) = (&cur.total, &prev.total);
    let mut by_class = [0.0; 6];
    for (k, x) in by_class.iter_mut().enumerate() {
        *x = d(c.stats.by_class[k], p.stats.by_class[k]) as f64 / dt;
    }
    let errors_by_kind = error_kinds(c)
        .iter()
        .zip(error_kinds(p).iter())
        .filter(|(a, b)| a.1 > b.1)
        .map(|(a, b)| (a.0.to_string(), a.1 - b.1))
        .collect();
    let cores = cur
        .workers
        .iter()
        .enumerate()
        .map(|(k, w)| {
            let pw = prev.workers.get(k).copied().unwrap_or_default();
            ServeCore {
                core: k,
                rps: d(w.stats.requests, pw.stats.requests) as f64 / dt,
                active: w.open,
                wire_gbps: gbps(
                    d(
                        w.port.tx_bytes + w.port.rx_bytes,
                        pw.port.tx_bytes + pw.port.rx_bytes,
                    ),
                    dt,
                ),
                load: load(d(w.busy_ns, pw.busy_ns), d(w.loop_ns, pw.loop_ns)),
            }
        })
        .collect();
    ServeSample {
        t: cur.t,
        dt,
        rps: d(c.stats.requests, p.stats.requests) as f64 / dt,
        cps: d(
            c.stats.accepted + c.stats.refused,
            p.stats.accepted + p.stats.refused,
        ) as f64
            / dt,
        by_class,
        active: c.open,
        idle: c.idle,
        requests: c.stats.requests,
        tx_gbps: gbps(d(c.port.tx_bytes, p.port.tx_bytes), dt),
        rx_gbps: gbps(d(c.port.rx_bytes, p.port.rx_bytes), dt),
        mpps: d(
            c.port.tx_frames + c.port.rx_frames,
            p.port.tx_frames + p.port.rx_frames,
        ) as f64
            / dt
            / 1e6,
        errors: d(errors(c), errors(p)),
        errors_total: errors(c),
        errors_by_kind,
        retransmits: d(c.tcp.retransmits, p.tcp.retransmits),
        latency: lat_summary(&c.req_lat.since(&p.req_lat)),
        cores,
    }
}

impl ServeSample {
    pub fn wire_gbps(&self) -> f64 {
        self.tx_gbps + self.rx_gbps
    }
    /// Answers per second by status class (`1xx` .. `5xx`).
    pub fn status_json(&self) -> Value {
        let mut m = Map::new();
        for k in 1..=5 {
            m.insert(format!("{k}xx"), round3(self.by_class[k]).into());
        }
        Value::Object(m)
    }
    /// The sample as one element of `series` (docs/OPERATING.md, *squall serve*).
    pub fn to_json(&self) -> Value {
        let mut kinds = Map::new();
        for (k, v) in &self.errors_by_kind {
            kinds.insert(k.clone(), (*v).into());
        }
        let cores: Vec<Value> = self
            .cores
            .iter()
            .map(|c| {
                json!({"core": c.core, "rps": round3(c.rps), "active": c.active,
                       "wire_gbps": c.wire_gbps, "load": round3(c.load)})
            })
            .collect();
        json!({
            "t": round3(self.t),
            "dt": round3(self.dt),
            "rps": round3(self.rps),
            "cps": round3(self.cps),
            "status_per_s": self.status_json(),
            "active": self.active,
            "idle": self.idle,
            "requests": self.requests,
            "tx_gbps": self.tx_gbps,
            "rx_gbps": self.rx_gbps,
            "wire_gbps": self.wire_gbps(),
            "mpps": self.mpps,
            "errors": self.errors,
            "errors_total": self.errors_total,
            "errors_by_kind": kinds,
            "retransmits": self.retransmits,
            "latency_us": {"request": self.latency.to_json()},
            "cores": cores,
        })
    }
}

/// The samples of a server's run, one per [`ServeSeries::push`].
#[derive(Debug, Default)]
pub struct ServeSeries {
    /// The first reading (the start) and the latest one.
    pub first: ServeReading,
    pub last: ServeReading,
    /// The reading before the latest.
    prev: ServeReading,
    pub samples: Vec<ServeSample>,
}

impl ServeSeries {
    /// Adds the interval from the last reading to `r`; returns its sample.
    pub fn push(&mut self, r: ServeReading) -> &ServeSample {
        let s = sample(&self.last, &r);
        self.prev = std::mem::replace(&mut self.last, r);
        self.samples.push(s);
        self.samples.last().expect("just pushed")
    }
    /// Adds the final reading (the workers' figures at their end): a sample of its own,
    /// or, within 50 ms of the last one, folded into it (no tiny last interval).
    pub fn finish(&mut self, r: ServeReading) {
        if self.samples.is_empty() || r.t - self.last.t > 0.05 {
            self.push(r);
            return;
        }
        let cur = ServeReading {
            t: self.last.t,
            ..r
        };
        let s = sample(&self.prev, &cur);
        self.last = cur;
        if let Some(l) = self.samples.last_mut() {
            *l = s;
        }
    }
    /// The `series` array of the JSON results.
    pub fn to_json(&self) -> Value {
        Value::Array(self.samples.iter().map(ServeSample::to_json).collect())
    }
    /// The whole run as one interval (the `rates` and `latency_us` of the results).
    pub fn whole(&self) -> ServeSample {
        sample(&self.first, &self.last)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fig(requests: u64, parse: u64, tx: u64, lat_us: &[u64]) -> WorkerFigures {
        let mut f = WorkerFigures::default();
        f.stats.requests = requests;
        f.stats.accepted = requests / 10;
        f.stats.by_class[2] = requests;
        f.stats.parse_errors = parse;
        f.port.tx_bytes = tx;
        f.port.tx_frames = requests;
        f.port.rx_frames = requests;
        f.busy_ns = requests;
        f.loop_ns = 4 * requests;
        f.open = 7;
        f.idle = 3;
        for &us in lat_us {
            f.req_lat.record_ns(us * 1000);
        }
        f
    }

    #[test]
    fn a_sample_is_the_difference_of_two_readings() {
        let a = ServeReading::of(1.0, vec![fig(1_000, 1, 0, &[100]), fig(1_000, 0, 0, &[])]);
        let mut b1 = fig(3_000, 4, 250_000_000, &[100, 2_000, 2_000]);
        b1.tcp.resets_received = 9;
        let b = ServeReading::of(3.0, vec![b1, fig(5_000, 0, 0, &[])]);
        let s = sample(&a, &b);
        assert_eq!(s.dt, 2.0);
        assert_eq!(s.rps, (2_000.0 + 4_000.0) / 2.0);
        assert_eq!(s.cps, 600.0 / 2.0);
        assert_eq!(s.by_class[2], s.rps);
        assert_eq!((s.active, s.idle, s.requests), (14, 6, 8_000));
        assert_eq!(s.tx_gbps, 1.0);
        assert_eq!(s.mpps, 2.0 * 6_000.0 / 2.0 / 1e6);
        // Resets are listed by kind, not counted as the server's errors.
        assert_eq!((s.errors, s.errors_total), (3, 4));
        assert_eq!(
            s.errors_by_kind,
            vec![
                ("parse_errors".to_string(), 3),
                ("resets_received".to_string(), 9)
            ]
        );
        assert_eq!(s.latency.count, 2, "only the interval's latencies");
        assert!((2_000..=2_500).contains(&s.latency.p50), "{:?}", s.latency);
        assert_eq!(s.cores.len(), 2);
        assert_eq!(s.cores[1].rps, 2_000.0);
        assert_eq!(s.cores[0].load, 0.25);
        let j = s.to_json();
        assert_eq!(j["errors_by_kind"]["parse_errors"], 3);
        assert_eq!(j["latency_us"]["request"]["count"], 2);
        assert_eq!(j["status_per_s"]["2xx"], 3_000.0);
        assert_eq!(j["cores"][0]["load"], 0.25);
    }

    #[test]
    fn the_series_adds_up_to_the_whole() {
        let mut s = ServeSeries::default();
        s.push(ServeReading::of(1.0, vec![fig(100, 0, 0, &[10])]));
        s.push(ServeReading::of(2.0, vec![fig(300, 0, 0, &[10, 20])]));
        assert_eq!(s.samples.len(), 2);
        assert_eq!(s.samples[0].rps + s.samples[1].rps, 300.0);
        assert_eq!(s.samples[0].cores.len(), 1, "one worker: one core row");
        let w = s.whole();
        assert_eq!(w.rps, 150.0);
        assert_eq!(w.latency.count, 2);
        assert_eq!(s.to_json().as_array().unwrap().len(), 2);
        // A final reading just after the last one is folded into it.
        s.finish(ServeReading::of(2.01, vec![fig(310, 0, 0, &[10, 20])]));
        assert_eq!(s.samples.len(), 2);
        assert_eq!(s.samples[1].rps, 210.0);
        assert_eq!(s.whole().requests, 310);
        s.finish(ServeReading::of(3.0, vec![fig(400, 0, 0, &[10, 20])]));
        assert_eq!(s.samples.len(), 3);
    }
}
