//! W3 (issue 3): memory per established idle flow. Opens N flows between two hosts whose
//! slabs are sized exactly N, then checks each host's flow-structure footprint per flow
//! (TCB + table slots + timer node + side tables) against the 256-byte target (320 over
//! IPv6, whose address table comes on top: with a distinct client address per flow in
//! the worst case). The full 1,000,000-flow variant is `#[ignore]`d (run with --release
//! -- --ignored).

mod common;
use common::VecSink;
use squall_tcp::{FlowId, State, TcpApp, TcpConfig, TcpHost};

struct Idle;
impl TcpApp for Idle {}

/// Client addresses of the flows: 250 shared ones, or one per flow.
#[derive(Clone, Copy, Debug)]
enum Addrs {
    V4,
    V6Shared,
    V6PerFlow,
}

fn idle_flows(n: u32, fam: Addrs, limit: f64) {
    let base = TcpConfig {
        max_flows: n,
        max_half_open: n,
        ..TcpConfig::default()
    };
    let mut now = 0u64;
    let mut c = TcpHost::new(
        TcpConfig {
            mac: [2, 0, 0, 0, 0, 1],
            gateway_mac: [2, 0, 0, 0, 0, 2],
            ..base.clone()
        },
        now,
    );
    let mut s = TcpHost::new(
        TcpConfig {
            mac: [2, 0, 0, 0, 0, 2],
            gateway_mac: [2, 0, 0, 0, 0, 1],
            ..base
        },
        now,
    );
    s.listen(80);
    let (mut cs, mut ss) = (VecSink::default(), VecSink::default());
    let (mut ca, mut sa) = (Idle, Idle);
    for k in 0..n {
        let v6 = |x: u32| {
            let mut a = [0x20, 1, 0xd, 0xb8, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
            a[12..].copy_from_slice(&x.to_be_bytes());
            a
        };
        match fam {
            Addrs::V4 => c.connect(
                now,
                &mut cs,
                0x1000_0000 + (k % 250) + 1,
                1024 + (k / 250) as u16,
                0x3000_0001,
                80,
            ),
            Addrs::V6Shared => c.connect6(
                now,
                &mut cs,
                v6(k % 250 + 1),
                1024 + (k / 250) as u16,
                v6(0x3000_0001),
                80,
            ),
            Addrs::V6PerFlow => c.connect6(now, &mut cs, v6(k + 1), 1024, v6(0x3000_0001), 80),
        }
        .unwrap();
        if k % 1024 == 1023 || k == n - 1 {
            // Exchange the handshakes of this batch (keeps the frame queues small).
            while !cs.frames.is_empty() || !ss.frames.is_empty() {
                for f in std::mem::take(&mut cs.frames) {
                    s.rx(now, &f, &mut sa, &mut ss);
                }
                for f in std::mem::take(&mut ss.frames) {
                    c.rx(now, &f, &mut ca, &mut cs);
                }
            }
            now += 1_000;
        }
    }
    assert_eq!(c.counters().tcps_connects, n as u64);
    assert_eq!(s.counters().tcps_accepts, n as u64);
    assert_eq!(c.flow_count(), n as usize);
    assert_eq!(s.flow_count(), n as usize);
    assert!((0..n).all(|i| c.state(FlowId(i)) == State::Established));
    for (name, h) in [("client", &c), ("server", &s)] {
        let per_flow = h.memory_bytes() as f64 / n as f64;
        eprintln!("W3 {fam:?} {name}: {n} idle flows, {per_flow:.1} bytes per flow");
        assert!(per_flow <= limit, "{name}: {per_flow} bytes per flow");
    }
}

#[test]
fn w3_idle_flows_memory_per_flow() {
    idle_flows(50_000, Addrs::V4, 256.0);
}

#[test]
fn w3_idle_flows_memory_per_flow_ipv6() {
    idle_flows(50_000, Addrs::V6Shared, 320.0);
    idle_flows(50_000, Addrs::V6PerFlow, 320.0);
}

#[test]
#[ignore = "1,000,000 flows: run with --release -- --ignored"]
fn w3_idle_flows_memory_per_flow_1m() {
    idle_flows(1_000_000, Addrs::V4, 256.0);
    idle_flows(1_000_000, Addrs::V6PerFlow, 320.0);
}
