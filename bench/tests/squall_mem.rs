//! Squall (squall-tcp) on squall-port's mem wire: short, bounded W1/W2 runs are error free
//! (W3 is in `squall_w3.rs`, alone in its binary).
#![cfg(feature = "squall")]

use squall_bench::squall::run;
use squall_bench::workload::RunCfg;

fn cfg(conns: usize, max_ops: u64) -> RunCfg {
    // Long bound, small op count: runs end on `max_ops`.
    let mut c = RunCfg::new(conns, 20.0);
    c.warmup = 0.05;
    c.max_ops = max_ops;
    c
}

#[test]
fn w1_squall_pair_is_error_free() {
    let r = run(false, &cfg(20, 500), false).expect("rig");
    assert_eq!(r.errors, 0, "{r:?}");
    assert!(r.cps.unwrap() > 0.0, "{r:?}");
    assert_eq!(r.client, "squall");
    let f = r.frames_per_op.unwrap();
    assert!((25.0..80.0).contains(&f), "frames per op {f}");
}

#[test]
fn w2_squall_pair_is_error_free() {
    let r = run(true, &cfg(10, 5000), false).expect("rig");
    assert_eq!(r.errors, 0, "{r:?}");
    assert!(r.rps.unwrap() > 0.0, "{r:?}");
    let f = r.frames_per_op.unwrap();
    assert!((1.9..2.5).contains(&f), "frames per op {f}");
}

#[test]
fn w1_squall_with_emulated_offload_is_error_free() {
    let r = run(false, &cfg(10, 200), true).expect("rig");
    assert_eq!(r.errors, 0, "{r:?}");
    assert!(r.note.unwrap().contains("offload"));
}
