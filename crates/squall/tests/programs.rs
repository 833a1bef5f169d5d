//! Program shapes end to end on the engine (formerly the squall-astf adapter's tests):
//! source tuples reused across 1000 flows, a time-bounded tick loop, `reset`,
//! server-speaks-first. (W1 byte totals, latency and the cut are in `engine.rs`.)

mod common;
use common::*;

use std::sync::Arc;

use squall::gen::{tcp_config, ClientGen, Side};
use squall::stats::TgCounters;
use squall_astf::alloc::PortRange;
use squall_astf::sched::SchedConfig;
use squall_astf::Profile;
use squall_port::mem::{self, MemConfig, MemPort};

fn group(p: &Profile, name: &str) -> usize {
    p.tg_names.iter().position(|n| n == name).unwrap()
}

/// A clean simulation run over a wire with 50 us one-way delay; the run and the
/// (client, server) counters of template group `tg`.
fn run_clean(
    rel: &str,
    secs: f64,
    mult: f64,
    tg: &str,
) -> (squall::run::RunResult, TgCounters, TgCounters) {
    let p = profile(rel);
    let r = sim(&p, secs, mult, |c| {
        c.impair = squall::impair::parse_impair("delay_us=50").unwrap()
    });
    assert_clean(&r);
    let g = group(&p, tg);
    let (c, s) = (r.client.app.tg[g].c.clone(), r.server.app.tg[g].c.clone());
    (r, c, s)
}

/// Both sides on a virtual clock with client source ports from `ports`, until idle.
fn run_with_ports(
    p: &Arc<Profile>,
    mult: f64,
    duration_ns: u64,
    ports: PortRange,
) -> (Side<MemPort>, Side<MemPort>) {
    let mc = MemConfig::default();
    let (pa, pb) = mem::pair(mc.clone()).unwrap();
    let t0 = 1_000_000_000;
    let mut sc = SchedConfig::from_profile(p, mult, Some(duration_ns), 0, 1);
    sc.start_ns = t0;
    sc.seed = 7;
    let cg = ClientGen::with_ports(p, &sc, ports).unwrap();
    let t = &p.templates[0];
    let ccfg = tcp_config(&t.client, mc.mac_a, mc.mac_b, 4096, 1);
    let scfg = tcp_config(&t.server, mc.mac_b, mc.mac_a, 4096, 2);
    let mut c = Side::new(p.clone(), pa, ccfg, Some(cg), t0, 1);
    let mut s = Side::new(p.clone(), pb, scfg, None, t0, 2);
    let (mut now, end) = (t0, t0 + 60_000_000_000);
    for _ in 0..10_000_000 {
        c.iterate(now, None);
        s.iterate(now, None);
        if (c.is_idle() && s.is_idle()) || now >= end {
            break;
        }
        let next = [c.next_event(now), s.next_event(now)]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(end);
        now = next.max(now);
    }
    (c, s)
}

#[test]
fn thousand_flows_reuse_four_hundred_tuples() {
    let p = w1();
    // 200 client addresses x 2 ports = 400 tuples; 1000 flows need each several times.
    let (c, s) = run_with_ports(
        &p,
        1000.0,
        1_000_000_000,
        PortRange {
            first: 2000,
            last: 2001,
        },
    );
    let (ct, st) = (c.gen.app.stats.total(), s.gen.app.stats.total());
    assert_eq!((ct.started, ct.completed), (1000, 1000), "{ct:?}");
    assert_eq!((st.accepted, st.completed), (1000, 1000), "{st:?}");
    assert_eq!(ct.errors() + st.errors(), 0, "{ct:?} {st:?}");
    assert_eq!(ct.l7_rx_bytes, 1000 * 32_768);
    assert_eq!(st.l7_rx_bytes, 1000 * 100);
    assert_eq!(c.node.tcp.flow_count() + s.node.tcp.flow_count(), 0);
}

#[test]
fn tick_loop_is_bounded_by_time() {
    // One flow: a 6-byte request every 10 ms while less than 1 s has passed.
    let (r, c, s) = run_clean("../../examples/tick-loop.json", 1e-9, 0.1, "ticker");
    assert_eq!((c.started, c.completed, s.completed), (1, 1, 1));
    let rounds = c.l7_tx_acked / 6;
    assert!((80..=101).contains(&rounds), "{rounds} rounds");
    assert_eq!(c.l7_tx_acked, rounds * 6);
    assert_eq!(
        (c.l7_rx_bytes, s.l7_rx_bytes, s.l7_tx_acked),
        (rounds * 6, rounds * 6, rounds * 6)
    );
    assert!(r.elapsed_ns >= 1_000_000_000, "{}", r.elapsed_ns);
}

#[test]
fn reset_program_resets_after_the_response() {
    let (r, c, s) = run_clean("../../examples/reset.json", 1e-9, 0.01, "reset");
    // The client's own reset and the server's flow reset under it both count as completed
    // on a template whose program has `reset`.
    assert_eq!(
        (c.started, c.completed, c.l7_rx_bytes),
        (1, 1, 1000),
        "{c:?}"
    );
    assert_eq!(
        (s.accepted, s.completed, s.l7_rx_bytes),
        (1, 1, 35),
        "{s:?}"
    );
    assert_eq!(r.client.tcp.tcps_closed, 1);
}

#[test]
fn server_speaks_first() {
    let (_, c, s) = run_clean("../../examples/server-speaks-first.json", 1.0, 0.05, "smtp");
    let n = c.started;
    assert_eq!(n, 5);
    assert_eq!((c.completed, s.completed), (n, n), "{c:?} {s:?}");
    // banner 36 + bye 15 to the client, quit 6 to the server
    assert_eq!((c.l7_rx_bytes, s.l7_rx_bytes), (n * 51, n * 6));
}
