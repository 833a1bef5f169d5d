//! The Prometheus exposition of `squall serve --metrics ADDR` (served by the same
//! endpoint as `squall run`'s, [`crate::metrics::Exporter`]): the server's cumulative
//! counters from the latest reading, rates and load from the latest sample, the request
//! latency histogram (the buckets of [`crate::metrics::LATENCY_BUCKETS_S`]). Every name
//! starts with `squall_serve_`; they are listed in docs/OPERATING.md.

use crate::metrics::{bucket_bounds_us, Out};
use crate::serveseries::{error_kinds, ServeSeries};

/// Renders the exposition; `running`: the server is serving or draining.
pub fn render(series: &ServeSeries, running: bool) -> String {
    let mut o = Out { s: String::new() };
    let r = &series.last;
    let t = &r.total;
    o.one(
        "squall_serve_up",
        "gauge",
        "1 while the server is serving or draining, 0 after it stopped.",
        f64::from(u8::from(running)),
    );
    o.one(
        "squall_serve_seconds",
        "gauge",
        "Seconds since the server started.",
        r.t,
    );
    o.one(
        "squall_serve_connections_accepted_total",
        "counter",
        "Connections accepted.",
        t.stats.accepted as f64,
    );
    o.one(
        "squall_serve_open_connections",
        "gauge",
        "Connections open.",
        t.open as f64,
    );
    o.one(
        "squall_serve_idle_connections",
        "gauge",
        "Open connections with nothing in progress (as of the last 100 ms sweep).",
        t.idle as f64,
    );
    o.one(
        "squall_serve_requests_total",
        "counter",
        "Requests answered (parse errors included).",
        t.stats.requests as f64,
    );
    o.family(
        "squall_serve_responses_total",
        "counter",
        "Answers by status class (1xx: 100 Continue).",
    );
    for k in 1..=5 {
        let class = format!("{k}xx");
        o.value(
            "squall_serve_responses_total",
            &[("class", &class)],
            t.stats.by_class[k] as f64,
        );
    }
    o.one(
        "squall_serve_body_bytes_total",
        "counter",
        "Body bytes queued (files and routes).",
        t.stats.body_bytes as f64,
    );
    let port = &t.port;
    o.by_label(
        "squall_serve_wire_bytes_total",
        "counter",
        "Ethernet bytes by direction (tx: sent by the server).",
        "direction",
        &[("tx", port.tx_bytes as f64), ("rx", port.rx_bytes as f64)],
    );
    o.by_label(
        "squall_serve_wire_frames_total",
        "counter",
        "Frames by direction.",
        "direction",
        &[("tx", port.tx_frames as f64), ("rx", port.rx_frames as f64)],
    );
    o.one(
        "squall_serve_errors_total",
        "counter",
        "The server's errors summed (every kind of squall_serve_errors_by_kind_total but resets_received).",
        crate::serveseries::errors(t) as f64,
    );
    o.family(
        "squall_serve_errors_by_kind_total",
        "counter",
        "Error counters by kind: parse_errors (requests the parser or its limits refused, answered 4xx/5xx, and bodies that broke their framing after the answer, which end the connection), refused_503 (connection limit), header_timeouts (408), send_errors, timeout_drops, syn_dropped, resets_received.",
    );
    for (kind, v) in error_kinds(t) {
        o.value(
            "squall_serve_errors_by_kind_total",
            &[("kind", kind)],
            v as f64,
        );
    }
    o.one(
        "squall_serve_tcp_retransmitted_segments_total",
        "counter",
        "TCP segments retransmitted (tcps_sndrexmitpack).",
        t.tcp.retransmits as f64,
    );
    if let Some(s) = series.samples.last() {
        o.one(
            "squall_serve_requests_per_second",
            "gauge",
            "Requests answered per second over the last sample (about 1 s).",
            s.rps,
        );
        o.one(
            "squall_serve_wire_bytes_per_second",
            "gauge",
            "Wire bytes per second of both directions over the last sample.",
            s.wire_gbps() * 1e9 / 8.0,
        );
        o.one(
            "squall_serve_packets_per_second",
            "gauge",
            "Frames per second of both directions over the last sample.",
            s.mpps * 1e6,
        );
        o.family(
            "squall_serve_core_load_ratio",
            "gauge",
            "Share of a worker's loop time spent in turns that did work, over the last sample.",
        );
        for c in &s.cores {
            o.value(
                "squall_serve_core_load_ratio",
                &[("core", &c.core.to_string())],
                c.load,
            );
        }
    }
    o.family(
        "squall_serve_core_requests_total",
        "counter",
        "Requests answered by each worker.",
    );
    for (k, w) in r.workers.iter().enumerate() {
        o.value(
            "squall_serve_core_requests_total",
            &[("core", &k.to_string())],
            w.stats.requests as f64,
        );
    }
    o.family(
        "squall_serve_request_latency_seconds",
        "histogram",
        "From the turn that read a request to the acknowledgement of its answer's last byte (one value per burst of answers).",
    );
    let (cum, sum_us) = t.req_lat.cumulative(&bucket_bounds_us());
    o.histogram_of(
        "squall_serve_request_latency_seconds",
        &[],
        &cum,
        t.req_lat.count(),
        sum_us,
    );
    o.s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::{find, parse};
    use crate::servelive::WorkerFigures;
    use crate::serveseries::ServeReading;

    pub(crate) fn series() -> ServeSeries {
        let mut s = ServeSeries::default();
        s.push(ServeReading::of(0.0, vec![WorkerFigures::default(); 2]));
        let mut w = WorkerFigures::default();
        w.stats.requests = 500;
        w.stats.accepted = 50;
        w.stats.by_class[2] = 498;
        w.stats.by_class[5] = 2;
        w.stats.refused = 2;
        w.tcp.resets_received = 1;
        w.port.tx_bytes = 125_000_000;
        w.busy_ns = 1;
        w.loop_ns = 2;
        for _ in 0..10 {
            w.req_lat.record_ns(200_000);
        }
        s.push(ServeReading::of(1.0, vec![w, WorkerFigures::default()]));
        s
    }

    #[test]
    fn the_exposition_parses_and_carries_the_figures() {
        let text = render(&series(), true);
        let m = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let get = |n: &str, l: &[(&str, &str)]| find(&m, n, l).unwrap_or_else(|| panic!("{n}"));
        assert_eq!(get("squall_serve_up", &[]), 1.0);
        assert_eq!(get("squall_serve_requests_total", &[]), 500.0);
        assert_eq!(
            get("squall_serve_responses_total", &[("class", "5xx")]),
            2.0
        );
        assert_eq!(get("squall_serve_errors_total", &[]), 2.0, "resets apart");
        assert_eq!(
            get(
                "squall_serve_errors_by_kind_total",
                &[("kind", "resets_received")]
            ),
            1.0
        );
        assert_eq!(get("squall_serve_requests_per_second", &[]), 500.0);
        assert_eq!(get("squall_serve_wire_bytes_per_second", &[]), 1e9 / 8.0);
        assert_eq!(get("squall_serve_core_load_ratio", &[("core", "0")]), 0.5);
        assert_eq!(
            get("squall_serve_core_requests_total", &[("core", "1")]),
            0.0
        );
        // 200 us is in the 250 us bucket, not in the 100 us one.
        let b = |le: &str| get("squall_serve_request_latency_seconds_bucket", &[("le", le)]);
        assert_eq!((b("0.0001"), b("0.00025"), b("+Inf")), (0.0, 10.0, 10.0));
        assert_eq!(get("squall_serve_request_latency_seconds_count", &[]), 10.0);
    }
}
