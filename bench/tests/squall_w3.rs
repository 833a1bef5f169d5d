//! W3 memory per flow for Squall (alone in its test binary so RSS is not shared with other
//! tests' threads: run beside the W1/W2 tests, a rig they free during the measurement
//! could cancel the growth and make the figure 0).
#![cfg(feature = "squall")]

use squall_bench::squall::SquallIdle;
use squall_bench::workload::run_w3;

#[test]
fn w3_squall_establishes_idle_flows() {
    let r = run_w3(SquallIdle::new, 2000, 60.0);
    assert_eq!(r.errors, 0, "{r:?}");
    assert_eq!(r.conns, Some(2000));
    assert!(r.bytes_per_flow.unwrap() > 0.0, "{r:?}");
}
