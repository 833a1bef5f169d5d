//! The reporting thread of `squall serve`: reads the workers' published figures
//! ([`crate::servelive`]) once a second into the time series ([`crate::serveseries`]),
//! shows them (the live view on a terminal, else a progress line on stderr unless
//! `--quiet`), updates the metrics endpoint; and the results document of the server
//! (`--json FILE`, the line on stdout) that `--assert` reads.

use crate::series::round3;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

use crate::liveview::{Action, Screen, ViewState};
use crate::serve::ServeReport;
use crate::servelive::{ServeLive, WorkerFigures};
use crate::serveseries::{error_kinds, errors, lat_summary, ServeReading, ServeSeries};
use crate::serveview::{self, ServeHeader};

/// What the watcher does besides sampling.
#[derive(Clone, Debug, Default)]
pub struct ServeWatchOptions {
    /// No progress line.
    pub quiet: bool,
    /// The Prometheus endpoint, updated at every sample.
    pub metrics: Option<crate::metrics::Exporter>,
    /// Show the live view (a terminal) instead of the progress line.
    pub live_view: Option<ServeHeader>,
}

fn reading(live: &ServeLive, t0: Instant) -> ServeReading {
    ServeReading::of(t0.elapsed().as_secs_f64(), live.read())
}

/// Samples `live` once a second until `finished()`, then once more (the workers'
/// final figures); `q` in the live view sets `stop` (the graceful stop).
pub fn watch(
    live: &ServeLive,
    stop: &AtomicBool,
    finished: &dyn Fn() -> bool,
    o: &ServeWatchOptions,
) -> ServeSeries {
    let t0 = Instant::now();
    let mut series = ServeSeries::default();
    let mut next = t0 + Duration::from_secs(1);
    // Opened at the first sample: the server's start lines (site loaded, listening)
    // stay on the terminal above it.
    let mut screen: Option<Screen> = None;
    let header = o.live_view.clone().unwrap_or_default();
    let mut view = ViewState::default();
    while !finished() {
        match screen.as_mut() {
            None => std::thread::sleep(Duration::from_millis(20)),
            Some(sc) => {
                if let Some((code, mods)) = sc.key(Duration::from_millis(20)) {
                    if matches!(view.key(code, mods), Action::Stop | Action::Cut) {
                        stop.store(true, Ordering::Relaxed);
                    }
                    sc.draw_with(|f| serveview::draw(f, &header, &view, &series));
                }
            }
        }
        if Instant::now() < next {
            continue;
        }
        next += Duration::from_secs(1);
        if screen.is_none() && o.live_view.is_some() && series.samples.is_empty() {
            screen = Screen::open().ok();
        }
        let s = series.push(reading(live, t0)).clone();
        if let Some(m) = &o.metrics {
            m.update(crate::servemetrics::render(&series, true));
        }
        if let Some(sc) = screen.as_mut() {
            sc.draw_with(|f| serveview::draw(f, &header, &view, &series));
        } else if !o.quiet {
            eprintln!("{}", serveview::progress_line(&s));
        }
    }
    drop(screen);
    series.finish(reading(live, t0));
    if let Some(m) = &o.metrics {
        m.update(crate::servemetrics::render(&series, false));
    }
    series
}

/// What the results say about the server besides its figures.
#[derive(Clone, Debug, Default)]
pub struct ServeInfo {
    /// `ADDR:PORT`.
    pub listen: String,
    /// The port (`afpacket:IF`, ...).
    pub iface: String,
    pub cores: u32,
}

/// The results document of a server's run: its totals (the fields of the stdout line),
/// rates and latency over the whole run, errors by kind, the per-second `series`.
pub fn results(info: &ServeInfo, r: &ServeReport, series: &ServeSeries) -> Value {
    let s = r.stats;
    // The totals are the workers' final counters; the rates cover the series' span.
    let fig = WorkerFigures {
        stats: s,
        ..series.last.total
    };
    let whole = series.whole();
    let mut kinds = Map::new();
    for (k, v) in error_kinds(&fig) {
        kinds.insert(k.into(), v.into());
    }
    let errs = errors(&fig);
    let mut v = json!({
        "kind": "serve",
        "listen": info.listen,
        "mode": info.iface,
        "cores": info.cores,
        "duration_sec": round3(series.last.t),
        "accepted": s.accepted,
        "refused": s.refused,
        "requests": s.requests,
        "status_1xx": s.by_class[1],
        "status_2xx": s.by_class[2],
        "status_3xx": s.by_class[3],
        "status_4xx": s.by_class[4],
        "status_5xx": s.by_class[5],
        "parse_errors": s.parse_errors,
        "header_timeouts": s.header_timeouts,
        "idle_closed": s.idle_closed,
        "body_bytes": s.body_bytes,
        "send_errors": s.send_errors,
        "cut_at_stop": r.cut,
        "cpu_ns": r.cpu_ns,
        "busy_cpu_ns": r.busy_cpu_ns,
        "sleep_cpu_ns": r.sleep_cpu_ns,
        "cpu_us_per_request": if s.requests > 0 {
            round3(r.cpu_ns as f64 / 1e3 / s.requests as f64)
        } else {
            0.0
        },
        "access_log_dropped": r.log_dropped,
        "workers": r.worker_requests.len(),
        "worker_requests": r.worker_requests,
        "rx_redirected": r.redirected,
        "arp_answered": r.arp_answered,
        "icmp_echo_answered": r.echo_answered,
        "nd_answered": r.ns_answered,
        "icmp6_echo_answered": r.echo6_answered,
        "errors": errs,
        "errors_by_kind": kinds,
        "retransmits": fig.tcp.retransmits,
        "rates": {
            "rps": round3(whole.rps),
            "cps": round3(whole.cps),
            "tx_gbps": whole.tx_gbps,
            "rx_gbps": whole.rx_gbps,
            "wire_gbps": whole.wire_gbps(),
            "mpps": whole.mpps,
        },
        "latency_us": {"request": lat_summary(&fig.req_lat).to_json()},
        "clean": errs == 0,
        "series": series.to_json(),
    });
    // (beside the node's other counters; one json! literal this long passes the macro's
    // recursion limit)
    v["ip_fragments"] = r.ip_fragments.into();
    v["ip_reassembled"] = r.ip_reassembled.into();
    v["next_hop_moved"] = r.next_hop_moved.into();
    v["next_hop_probes"] = r.next_hop_probes.into();
    v["next_hop_unreachable"] = r.next_hop_unreachable.into();
    v
}

/// A results document of the right shape (every figure zero) to check `--assert`
/// names against before the server starts.
pub fn skeleton(info: &ServeInfo) -> Value {
    let mut s = ServeSeries::default();
    s.push(ServeReading::of(1.0, vec![WorkerFigures::default()]));
    results(info, &ServeReport::default(), &s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::assertion::{check_all, Assertion};

    fn doc(requests: u64, parse_errors: u64) -> Value {
        let mut s = ServeSeries::default();
        let mut w = WorkerFigures::default();
        w.stats.requests = requests;
        w.stats.parse_errors = parse_errors;
        w.req_lat.record_ns(300_000);
        s.push(ServeReading::of(2.0, vec![w]));
        let r = ServeReport {
            stats: w.stats,
            worker_requests: vec![requests],
            ..ServeReport::default()
        };
        results(&ServeInfo::default(), &r, &s)
    }

    #[test]
    fn the_results_carry_totals_rates_and_the_series_and_assertions_read_them() {
        let d = doc(4_000, 0);
        assert_eq!(d["kind"], "serve");
        assert_eq!(d["requests"], 4_000);
        assert_eq!(d["rates"]["rps"], 2_000.0);
        assert_eq!(d["series"].as_array().unwrap().len(), 1);
        assert_eq!(d["latency_us"]["request"]["count"], 1);
        assert_eq!(d["clean"], true);
        let a: Vec<Assertion> = ["errors == 0", "rps >= 1000", "request.p99 < 1ms"]
            .iter()
            .map(|e| Assertion::parse(e).unwrap())
            .collect();
        for x in &a {
            x.check_names(&skeleton(&ServeInfo::default())).unwrap();
        }
        assert!(check_all(&a, &d).unwrap().iter().all(|o| o.ok));
        let bad = doc(500, 3);
        let o = check_all(&a, &bad).unwrap();
        assert!(!o[0].ok && !o[1].ok && o[2].ok, "{o:?}");
        assert!(o[1].message.contains("rps = 250"), "{}", o[1].message);
        assert_eq!(bad["errors_by_kind"]["parse_errors"], 3);
        assert_eq!(bad["clean"], false);
    }
}
