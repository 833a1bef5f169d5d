//! T-loop smoke test: the kernel over 127.0.0.1 (host loopback, so ignored by default;
//! run with `cargo test -p squall-bench --test kernel_loop -- --ignored`).

use squall_bench::kernel::{run_loop, LoopCfg, LoopWorkload};

#[test]
#[ignore = "uses the host's loopback and pins threads to cores 0 and 1"]
fn kernel_w1_and_w2_run_clean() {
    for wl in [LoopWorkload::W1, LoopWorkload::W2] {
        let mut cfg = LoopCfg::new(wl, 10, 0.5);
        cfg.warmup = 0.1;
        let r = run_loop(&cfg).expect("loopback run");
        assert_eq!(r.errors, 0, "{r:?}");
        assert!(r.cps.or(r.rps).unwrap() > 0.0, "{r:?}");
        assert!(r.thread_us_per_op.unwrap() > 0.0);
        assert_eq!(r.topology, "T-loop");
    }
}
