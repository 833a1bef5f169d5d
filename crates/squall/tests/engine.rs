//! End-to-end runs of the generator in simulation: W1 counters and latencies, an impaired
//! wire, the other program shapes, and the stop/cut path.

mod common;
use common::*;

#[test]
fn w1_sim_three_hundred_flows() {
    let p = w1();
    // W1's cps is 1: mult 300 for one second = 300 flows; 50 us one-way delay so that
    // latencies are non-zero.
    let r = sim(&p, 1.0, 300.0, |c| {
        c.impair = squall::impair::parse_impair("delay_us=50").unwrap()
    });
    assert_clean(&r);
    let n = 300u64;
    let ct = r.client.app.total();
    let st = r.server.app.total();
    assert_eq!(ct.started, n);
    assert_eq!(ct.completed, n);
    assert_eq!(st.accepted, n);
    assert_eq!(st.completed, n);
    assert_eq!(r.client.tcp.tcps_connattempt, n);
    assert_eq!(r.client.tcp.tcps_connects, n);
    assert_eq!(r.server.tcp.tcps_accepts, n);
    assert_eq!(r.client.tcp.tcps_rcvbyte, n * 32_768);
    assert_eq!(r.server.tcp.tcps_rcvbyte, n * 100);
    assert_eq!(ct.l7_rx_bytes, n * 32_768);
    assert_eq!(st.l7_tx_acked, n * 32_768);
    assert_eq!(
        r.client.tcp.tcps_sndrexmitpack + r.server.tcp.tcps_sndrexmitpack,
        0
    );
    let g = p.tg_names.iter().position(|n| n == "http").unwrap();
    let lat = &r.client.app.tg[g].lat;
    for (name, h) in lat.iter() {
        assert_eq!(h.count(), n, "{name}");
    }
    // One RTT is 100 us: connect takes one RTT, the first byte at least two.
    let c = lat.connect.summary();
    assert!((95..=110).contains(&c[0]), "connect {c:?}");
    let fb = lat.first_byte.summary();
    assert!(fb[0] >= 200, "first byte {fb:?}");
    assert!(lat.last_byte.summary()[0] >= fb[0]);
    // Generation stopped at the duration; the run ended after draining (TIME_WAIT too).
    assert_eq!(r.client.still_open, 0);
    assert_eq!(r.server.still_open, 0);
}

#[test]
fn w1_with_loss_completes_every_flow() {
    let p = w1();
    let r = sim(&p, 1.0, 100.0, |c| {
        c.impair = squall::impair::parse_impair("loss=0.01,delay_us=20").unwrap()
    });
    assert_clean(&r);
    assert_eq!(r.client.app.total().completed, 100);
    assert!(
        r.client.impair.lost + r.server.impair.lost > 0,
        "no frame was lost"
    );
    assert!(
        r.client.tcp.tcps_sndrexmitpack
            + r.server.tcp.tcps_sndrexmitpack
            + r.client.tcp.tcps_rexmttimeo
            + r.server.tcp.tcps_rexmttimeo
            > 0,
        "losses without retransmission"
    );
    assert_eq!(r.client.tcp.tcps_rcvbyte, 100 * 32_768);
}

#[test]
fn program_shapes_run_clean() {
    for (name, flows) in [("server-first", 5), ("loop", 4), ("reset", 4), ("delay", 6)] {
        let p = profile(&format!("tests/profiles/{name}.json"));
        let r = sim(&p, 1.0, 1.0, |c| {
            c.impair = squall::impair::parse_impair("delay_us=100").unwrap()
        });
        assert_clean(&r);
        assert_eq!(r.client.app.total().completed, flows, "{name}");
        assert_eq!(r.server.app.total().completed, flows, "{name}");
    }
    // The loop runs three rounds: 3 x 3000 response bytes per flow.
    let p = profile("tests/profiles/loop.json");
    let r = sim(&p, 1.0, 1.0, |_| {});
    assert_eq!(r.client.tcp.tcps_rcvbyte, 4 * 3 * 3000);
    assert_eq!(r.server.tcp.tcps_rcvbyte, 4 * 3 * 64);
    // The reset program ends with RSTs from the client, not FINs.
    let p = profile("tests/profiles/reset.json");
    let r = sim(&p, 1.0, 1.0, |_| {});
    assert_eq!(r.client.tcp.tcps_sndrst, 4);
    assert_eq!(r.server.tcp.tcps_rcvrst, 4);
}

#[test]
fn delay_program_waits_for_its_timers() {
    let p = profile("tests/profiles/delay.json");
    let r = sim(&p, 1.0, 1.0, |_| {});
    assert_clean(&r);
    let g = p.tg_names.iter().position(|n| n == "delay").unwrap();
    let s = r.client.app.tg[g].lat.last_byte.summary();
    // 2 ms + 1..3 ms of program delay before the request.
    assert!(s[0] >= 3000 && s[4] <= 5100, "{s:?}");
}

#[test]
fn flows_still_running_at_the_end_are_cut_and_reported() {
    let p = profile("tests/profiles/delay.json");
    // Generation for 3 ms, drain 1 ms: flows that wait 3-5 ms in their program are cut.
    let r = sim(&p, 0.003, 10.0, |c| c.drain_ns = 1_000_000);
    let cut = r.client.app.total().cut;
    assert!(cut > 0, "nothing was cut");
    // Cut is not an error; none of them was stalled (they wait for at most 5 ms).
    assert_eq!(
        r.client.app.total().stalled + r.server.app.total().stalled,
        0
    );
    assert_eq!(squall::report::error_count(&r), 0);
    // Accounting still holds (started = completed + cut + ...).
    let checks = squall::report::invariants(&r);
    for c in checks.iter().filter(|c| c.name.ends_with("accounted")) {
        assert!(c.ok, "{}: {}", c.name, c.detail);
    }
}

#[test]
fn sim_is_deterministic() {
    let p = w1();
    let a = sim(&p, 0.5, 40.0, |c| {
        c.impair = squall::impair::parse_impair("loss=0.02,delay_us=30,jitter_us=20").unwrap()
    });
    let b = sim(&p, 0.5, 40.0, |c| {
        c.impair = squall::impair::parse_impair("loss=0.02,delay_us=30,jitter_us=20").unwrap()
    });
    assert_eq!(a.client.tcp, b.client.tcp);
    assert_eq!(a.server.tcp, b.server.tcp);
    assert_eq!(a.elapsed_ns, b.elapsed_ns);
}

#[test]
fn two_threads_run_w1() {
    let p = w1();
    let cfg = squall::run::RunConfig {
        duration_ns: 300_000_000,
        mult: 200.0,
        cores: 2,
        split: true,
        drain_ns: 3_000_000_000,
        ..Default::default()
    };
    let r = squall::run::run(p, &cfg, std::sync::Arc::new(squall::run::Live::default())).unwrap();
    assert_clean(&r);
    assert_eq!(r.client.app.total().started, 60);
    assert_eq!(r.client.app.total().completed, 60);
}

#[test]
fn shards_split_the_flows_and_merge_their_counters() {
    let p = w1();
    for n in [2u32, 3] {
        let cfg = squall::run::RunConfig {
            duration_ns: 300_000_000,
            mult: 200.0,
            cores: n,
            drain_ns: 3_000_000_000,
            ..Default::default()
        };
        let live = std::sync::Arc::new(squall::run::Live::default());
        let r = squall::run::run(p.clone(), &cfg, live.clone()).unwrap();
        assert_clean(&r);
        // The shards' 1/n shares add up to the run's 60 flows, every one completed, and
        // the merged counters agree with each other and with the live figures.
        assert_eq!(r.client.app.total().started, 60, "{n} shards");
        assert_eq!(r.client.app.total().completed, 60);
        assert_eq!(r.server.app.total().accepted, 60);
        assert_eq!(r.client.tcp.tcps_connattempt, 60);
        assert_eq!(live.started.load(std::sync::atomic::Ordering::Relaxed), 60);
        assert!(live.done.load(std::sync::atomic::Ordering::Relaxed));
        let lat: u64 = r
            .client
            .app
            .tg
            .iter()
            .map(|g| g.lat.last_byte.count())
            .sum();
        assert_eq!(lat, 60, "histograms merged");
    }
}

#[test]
fn unmatched_connections_are_counted_and_reset() {
    let p = profile("tests/profiles/no-template.json");
    let r = sim(&p, 1.0, 1.0, |_| {});
    assert_eq!(r.server.app.no_template, 3);
    let ct = r.client.app.total();
    assert_eq!(ct.started, 3);
    assert_eq!(ct.aborted, 3);
    assert_eq!(ct.reset_by_peer, 3);
    assert_eq!(squall::report::error_count(&r), 6);
    // Still every flow is accounted for.
    for c in squall::report::invariants(&r) {
        if c.name.ends_with("accounted") {
            assert!(c.ok, "{}", c.detail);
        }
    }
}

/// A client side of the `loop` profile (4 flows at 100 CPS, from 0 ns) on a mem port; the
/// peer's end is returned to keep the wire alive.
fn loop_client(
    p: &std::sync::Arc<squall_astf::Profile>,
) -> (
    squall::gen::Side<squall_port::mem::MemPort>,
    squall_port::mem::MemPort,
) {
    use squall::gen::{tcp_config, ClientGen, Side};
    use squall_astf::sched::SchedConfig;
    let (a, b) = squall_port::mem::pair(Default::default()).unwrap();
    let mut sc = SchedConfig::from_profile(p, 1.0, Some(1_000_000_000), 0, 1);
    sc.start_ns = 0;
    let cg = ClientGen::new(p, &sc).unwrap();
    let cfg = tcp_config(
        &p.templates[0].client,
        [2, 0, 0, 0, 0, 1],
        [2, 0, 0, 0, 0, 2],
        64,
        1,
    );
    (Side::new(p.clone(), a, cfg, Some(cg), 0, 1), b)
}

#[test]
fn flows_opened_behind_their_schedule_are_counted_late() {
    use squall::gen::LATE_START_NS;
    let p = profile("tests/profiles/loop.json"); // limit 4 flows at 100 CPS
    let side = |throttled_ms: u64| {
        let (mut c, _b) = loop_client(&p);
        // Held (as when the wire's frame pool runs low) for the first `throttled_ms`.
        for t in 0..100u64 {
            c.gen.throttle = t < throttled_ms;
            c.iterate(t * 1_000_000, None);
        }
        c.gen.app.stats.total()
    };
    // On time: opened within a millisecond of their schedule (0, 10, 20, 30 ms).
    let t = side(0);
    assert_eq!((t.started, t.started_late), (4, 0));
    // Held for 35 ms, all four open at once: 35, 25, 15 and 5 ms late; three of them
    // more than LATE_START_NS (10 ms). Not an error: the latencies show it.
    assert_eq!(LATE_START_NS, 10_000_000);
    let t = side(35);
    assert_eq!((t.started, t.started_late), (4, 3));
    assert_eq!(t.errors(), 0);
}

#[test]
fn a_generator_behind_its_schedule_is_a_warning() {
    let p = profile("tests/profiles/loop.json");
    let mut r = squall::run::RunResult::default();
    r.client.app = squall::stats::SideStats::new(1);
    r.client.app.tg[0].c.started = 1000;
    // 1 % late: a paced run's bursts; more: the offered rate was not delivered on time.
    r.client.app.tg[0].c.started_late = 10;
    assert!(squall::report::warnings(&p, &r).is_empty());
    r.client.app.tg[0].c.started_late = 11;
    let w = squall::report::warnings(&p, &r);
    assert_eq!(w.len(), 1, "{w:?}");
    assert_eq!(w[0].kind, "behind_schedule");
    assert!(w[0].message.contains("11 of 1000"), "{}", w[0].message);
}

#[test]
fn throttled_flows_are_counted_as_not_opened_at_the_end() {
    let p = profile("tests/profiles/loop.json"); // limit 4 flows at 100 CPS
    let (mut c, _b) = loop_client(&p);
    c.gen.throttle = true;
    for t in 0..100u64 {
        c.iterate(t * 1_000_000, None);
    }
    assert_eq!(c.gen.app.stats.total().started, 0);
    assert!(!c.is_idle());
    c.cut_all(2_000_000_000, None);
    let t = c.gen.app.stats.total();
    assert_eq!(t.not_opened, 4);
    assert_eq!(t.errors(), 4);
    assert!(c.gen.client.as_ref().unwrap().is_finished());
}
