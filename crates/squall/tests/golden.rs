//! Golden pcaps: the simulation is deterministic, so each scenario's pcap must match the
//! one checked in under `tests/golden/` byte for byte. Regenerate after an intended
//! change with `SQUALL_BLESS=1 cargo test -p squall --test golden` (and look at the diff
//! with tshark before committing).

mod common;
use common::*;

use std::path::Path;

/// (golden file, profile, duration s, mult, impairment, flows captured).
const CASES: &[(&str, &str, f64, f64, &str, usize)] = &[
    (
        "w1",
        "../../examples/w1-astf-http.json",
        1.0,
        3.0,
        "delay_us=50",
        3,
    ),
    (
        "server-first",
        "tests/profiles/server-first.json",
        1.0,
        1.0,
        "delay_us=50",
        5,
    ),
    (
        "loop",
        "tests/profiles/loop.json",
        1.0,
        1.0,
        "delay_us=50",
        4,
    ),
    (
        "reset",
        "tests/profiles/reset.json",
        1.0,
        1.0,
        "delay_us=50",
        4,
    ),
    (
        "w1-loss",
        "../../examples/w1-astf-http.json",
        1.0,
        4.0,
        "loss=0.05,delay_us=50",
        4,
    ),
    (
        "udp",
        "../../examples/udp-dns.json",
        1.0,
        1.0,
        "delay_us=50",
        5,
    ),
];

fn generate(profile_rel: &str, secs: f64, mult: f64, imp: &str, flows: usize) -> Vec<u8> {
    let p = profile(profile_rel);
    let r = sim(&p, secs, mult, |c| {
        c.impair = squall::impair::parse_impair(imp).unwrap();
        c.pcap_flows = Some(flows);
    });
    assert_clean(&r);
    r.pcap.expect("pcap requested")
}

#[test]
fn golden_pcaps_match() {
    let bless = std::env::var_os("SQUALL_BLESS").is_some();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let mut mismatched = Vec::new();
    for &(name, prof, secs, mult, imp, flows) in CASES {
        let got = generate(prof, secs, mult, imp, flows);
        let (_, recs) = squall_port::pcap::read_pcap(&got).expect("valid pcap");
        assert!(recs.len() >= 10, "{name}: only {} frames", recs.len());
        let file = dir.join(format!("{name}.pcap"));
        if bless {
            std::fs::write(&file, &got).unwrap();
            continue;
        }
        let want = std::fs::read(&file).unwrap_or_else(|e| {
            panic!(
                "{}: {e} (run with SQUALL_BLESS=1 to create it)",
                file.display()
            )
        });
        if want != got {
            mismatched.push(format!(
                "{name}: {} bytes / {} frames generated vs {} bytes golden",
                got.len(),
                recs.len(),
                want.len()
            ));
        }
    }
    assert!(
        mismatched.is_empty(),
        "golden pcaps differ (SQUALL_BLESS=1 regenerates): {mismatched:#?}"
    );
}

#[test]
fn loss_golden_has_retransmissions_and_w1_has_whole_flows() {
    let got = generate(CASES[4].1, CASES[4].2, CASES[4].3, CASES[4].4, CASES[4].5);
    let (_, recs) = squall_port::pcap::read_pcap(&got).unwrap();
    // Count SYNs (flags byte at 14 + 20 + 13) and payload bytes from the server.
    let syn = recs
        .iter()
        .filter(|r| r.data.len() >= 54 && r.data[47] & 0x12 == 0x02)
        .count();
    assert!(syn >= 4, "SYNs: {syn}");
    let w1 = generate(CASES[0].1, CASES[0].2, CASES[0].3, CASES[0].4, CASES[0].5);
    let (_, recs) = squall_port::pcap::read_pcap(&w1).unwrap();
    // TCP payload = IPv4 total length - IPv4 header - TCP header (options included).
    let payload: usize = recs
        .iter()
        .filter(|r| r.data.len() >= 54)
        .map(|r| {
            let d = &r.data;
            let tot = usize::from(u16::from_be_bytes([d[16], d[17]]));
            tot - usize::from(d[14] & 0x0f) * 4 - usize::from(d[46] >> 4) * 4
        })
        .sum();
    // 3 flows x (100 + 32768) payload bytes, no retransmission.
    assert_eq!(payload, 3 * (100 + 32_768));
}

#[test]
fn udp_golden_holds_request_response_pairs() {
    let c = CASES[5];
    let got = generate(c.1, c.2, c.3, c.4, c.5);
    let (_, recs) = squall_port::pcap::read_pcap(&got).unwrap();
    // 5 flows x (query 32 bytes + answer 48 bytes), all IPv4/UDP.
    assert_eq!(recs.len(), 10);
    for (k, r) in recs.iter().enumerate() {
        let d = &r.data;
        assert_eq!(d[23], 17, "frame {k}: not UDP");
        let ulen = usize::from(u16::from_be_bytes([d[38], d[39]]));
        assert_eq!(ulen - 8, if k % 2 == 0 { 32 } else { 48 }, "frame {k}");
        assert_ne!(
            u16::from_be_bytes([d[40], d[41]]),
            0,
            "frame {k}: no checksum"
        );
    }
}
