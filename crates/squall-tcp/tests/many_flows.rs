//! Many flows at once through `rx_burst`, as a node's receive loop hands frames over:
//! above 4,096 flows the burst also prefetches the flows' timer nodes, and expired
//! timers are walked with the flows ahead prefetched. Every flow completes, every byte
//! verified (the W1 apps check them), over a clean wire and over a lossy, reordering one
//! whose retransmission timers fire, on IPv4 and IPv6.

mod common;
use common::*;

fn check(r: &W1Result) {
    assert_every_flow_done(r);
    assert!(
        r.server_failed.is_empty(),
        "{:?}",
        &r.server_failed[..r.server_failed.len().min(5)]
    );
}

per_family!(w1_in_bursts_above_the_node_prefetch_floor);
fn w1_in_bursts_above_the_node_prefetch_floor(fam: Family) {
    // 6,000 flows open at once: more than the 4,096 above which the burst prefetches
    // timer nodes.
    let r = run_w1_sinks(
        fam,
        9_000,
        6_000,
        Impair::default(),
        7,
        w1_config(),
        false,
        0,
        true,
    )
    .0;
    check(&r);
    assert!(
        r.client.tcps_rcvtotal > 9_000 * 20,
        "{}",
        r.client.tcps_rcvtotal
    );
}

per_family!(w1_in_bursts_with_loss_and_reordering);
fn w1_in_bursts_with_loss_and_reordering(fam: Family) {
    let imp = Impair {
        loss: 0.02,
        reorder: 0.02,
        reorder_extra_ns: 200_000,
        delay_ns: 20_000,
        ..Impair::default()
    };
    let r = run_w1_sinks(fam, 6_000, 5_000, imp, 11, w1_config(), false, 0, true).0;
    check(&r);
    // The lost frames were recovered, some by the retransmission timer.
    assert!(r.wire.lost > 0);
    assert!(r.client.tcps_rexmttimeo + r.server.tcps_rexmttimeo > 0);
}
