//! smoltcp on the harness wire: short, bounded W1 and W2 runs complete with every byte
//! verified and the frame counts TCP implies.

use squall_bench::smol::{SmolConfig, SmolPair};
use squall_bench::workload::{run_w1, run_w2, RunCfg};

fn cfg(conns: usize, max_ops: u64) -> RunCfg {
    // Long bound, small op count: runs end on `max_ops`, so a thread starved by other
    // load still completes its operations.
    let mut c = RunCfg::new(conns, 20.0);
    c.warmup = 0.05;
    c.max_ops = max_ops;
    c
}

#[test]
fn w1_smoltcp_pair_is_error_free() {
    let mut p = SmolPair::new(SmolConfig::new(20));
    let r = run_w1(&mut p, &cfg(20, 500));
    assert_eq!(r.errors, 0, "{r:?}");
    assert!(r.cps.unwrap() > 0.0);
    // 32 KiB in 1460-byte segments is 23 data frames plus handshake, FINs and ACKs.
    let f = r.frames_per_op.unwrap();
    assert!((30.0..80.0).contains(&f), "frames per op {f}");
    assert_eq!(r.client, "smoltcp");
}

#[test]
fn w2_smoltcp_pair_is_error_free_with_two_frames_per_request() {
    let mut p = SmolPair::new(SmolConfig::new(10));
    let r = run_w2(&mut p, &cfg(10, 5000));
    assert_eq!(r.errors, 0, "{r:?}");
    let f = r.frames_per_op.unwrap();
    assert!((1.9..2.5).contains(&f), "frames per op {f}");
    assert!(r.p99_us.is_some());
}

#[test]
fn smoltcp_runs_clean_on_squall_port_mem_wire() {
    let mut p = SmolPair::on_port(SmolConfig::new(50)).expect("mem wire");
    assert_eq!(p.wire_name(), "squall-port");
    let r = run_w1(&mut p, &cfg(50, 300));
    assert_eq!(r.errors, 0, "{r:?}");
    assert!(r.cps.unwrap() > 0.0, "{r:?}");
    let mut p = SmolPair::on_port(SmolConfig::new(50)).expect("mem wire");
    let r = run_w2(&mut p, &cfg(50, 3000));
    assert_eq!(r.errors, 0, "{r:?}");
    assert!((1.9..2.5).contains(&r.frames_per_op.unwrap()));
}

#[test]
fn smoltcp_with_emulated_offload_is_error_free() {
    let mut c = SmolConfig::new(10);
    c.offload = true;
    let mut p = SmolPair::new(c);
    let r = run_w1(&mut p, &cfg(10, 200));
    assert_eq!(r.errors, 0, "{r:?}");
}
