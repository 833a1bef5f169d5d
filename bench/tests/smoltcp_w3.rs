//! W3 memory per flow for smoltcp (alone in its test binary so RSS is not shared with
//! other tests' threads).

use squall_bench::smol::{SmolConfig, SmolPair};
use squall_bench::workload::run_w3;

#[test]
fn w3_smoltcp_counts_its_socket_buffers() {
    let r = run_w3(
        || {
            let mut c = SmolConfig::new(0);
            c.listeners = 0;
            SmolPair::new(c)
        },
        3000,
        60.0,
    );
    assert_eq!(r.errors, 0, "{r:?}");
    assert_eq!(r.conns, Some(3000));
    // Each endpoint holds 4 KiB + 4 KiB of buffers plus the socket itself.
    let per_end = r.bytes_per_endpoint.unwrap();
    assert!((8192.0..16384.0).contains(&per_end), "{per_end}");
}
