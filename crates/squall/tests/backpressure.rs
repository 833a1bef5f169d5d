//! TX backpressure in the engine loop: with a wire whose frame pools are far smaller than
//! the frames the flows in flight want, flows wait for frames (the host's resume list,
//! `tx_resume` after every RX burst and turn) instead of losing them: every flow
//! completes and nothing is retransmitted.

mod common;
use common::*;

use squall::gen::{tcp_config, ClientGen, Side};
use squall_astf::sched::SchedConfig;
use squall_port::mem::{self, MemConfig};
use squall_port::Port;

#[test]
fn tiny_frame_pool_completes_every_flow_without_retransmission() {
    let p = w1();
    let delay = squall::impair::parse_impair("delay_us=50").unwrap();
    let mc = MemConfig {
        frames: 64,
        ring_size: 256,
        a_to_b: delay.clone(),
        b_to_a: delay,
        ..MemConfig::default()
    };
    let (pa, pb) = mem::pair(mc.clone()).unwrap();
    let t0 = 1_000_000_000u64;
    // 300 flows within 3 ms: ~50 W1 flows (up to 23 data segments each) in flight.
    let mut sc = SchedConfig::from_profile(&p, 100_000.0, Some(3_000_000), 0, 1);
    sc.start_ns = t0;
    let cg = ClientGen::new(&p, &sc).unwrap();
    let t = &p.templates[0];
    let ccfg = tcp_config(&t.client, mc.mac_a, mc.mac_b, 4096, 1);
    let scfg = tcp_config(&t.server, mc.mac_b, mc.mac_a, 4096, 2);
    let mut c = Side::new(p.clone(), pa, ccfg, Some(cg), t0, 3);
    let mut s = Side::new(p.clone(), pb, scfg, None, t0, 4);
    let mut now = t0;
    let mut waited_turns = 0u64;
    for _ in 0..10_000_000u64 {
        c.iterate(now, None);
        s.iterate(now, None);
        waited_turns += u64::from(c.node.tx_waiting() > 0 || s.node.tx_waiting() > 0);
        if c.is_idle() && s.is_idle() {
            break;
        }
        let next = [c.next_event(now), s.next_event(now)]
            .into_iter()
            .flatten()
            .min()
            .expect("a side has work");
        now = next.max(now);
        assert!(now < t0 + 60_000_000_000, "no progress");
    }
    assert!(
        c.is_idle() && s.is_idle(),
        "stuck at {now}: waiting {} / {}, next {:?} / {:?}, free {} / {}, client {:?}, c tcp {:?}",
        c.node.tx_waiting(),
        s.node.tx_waiting(),
        c.next_event(now),
        s.next_event(now),
        c.node.port.free_frames(),
        s.node.port.free_frames(),
        c.gen.app.stats.total(),
        c.node.tcp.counters()
    );
    let tot = c.gen.app.stats.total();
    assert_eq!(tot.started, 300);
    assert_eq!(tot.completed, 300, "{tot:?}");
    assert_eq!(tot.errors(), 0, "{tot:?}");
    assert_eq!(s.gen.app.stats.total().errors(), 0);
    let (cc, sc) = (c.node.tcp.counters(), s.node.tcp.counters());
    // The pools ran dry (flows waited for frames) ...
    assert!(cc.tcps_txfull + sc.tcps_txfull > 0, "pool never ran dry");
    assert!(waited_turns > 0);
    // ... yet nothing was lost: no retransmission of any kind.
    assert_eq!(cc.tcps_rexmttimeo + sc.tcps_rexmttimeo, 0);
    assert_eq!(cc.tcps_sndrexmitpack + sc.tcps_sndrexmitpack, 0);
    assert_eq!(c.node.port.stats().dropped + s.node.port.stats().dropped, 0);
}
