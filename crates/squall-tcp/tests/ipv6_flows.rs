//! TCP over IPv6 beside IPv4 on the same hosts: the frames are IPv6 with valid checksums,
//! the MSS comes from the IPv6 MTU (1440 at 1500) and no frame exceeds it, IPv4 and IPv6
//! flows on the same ports never see each other's segments, the address ids are given
//! back when the flows end, and IPv4 addresses in 0.0.0.0/8 (where the ids live) are
//! refused.

mod common;
use common::*;

use squall_tcp::{CloseReason, ConnectError, FlowId, State, TcpHost};
use squall_wire::{parse_frame, TcpOptions, L3, L4};

/// Moves every frame between the hosts (both ways) until nothing is left, advancing to
/// each timer; returns every frame seen.
fn pump(
    now: &mut u64,
    p: &mut W1Pair,
    cs: &mut VecSink,
    ss: &mut VecSink,
    until_ns: u64,
) -> Vec<Vec<u8>> {
    let mut seen = Vec::new();
    let end = *now + until_ns;
    loop {
        let (c, s) = (
            std::mem::take(&mut cs.frames),
            std::mem::take(&mut ss.frames),
        );
        for f in &c {
            p.sh.rx(*now, f, &mut p.sapp, ss);
        }
        for f in &s {
            p.ch.rx(*now, f, &mut p.capp, cs);
        }
        let moved = !c.is_empty() || !s.is_empty();
        seen.extend(c);
        seen.extend(s);
        if moved {
            continue;
        }
        let t = [p.ch.next_timer(), p.sh.next_timer()]
            .into_iter()
            .flatten()
            .min();
        match t {
            Some(t) if t <= end => {
                *now = (*now).max(t);
                p.ch.poll(*now, &mut p.capp, cs);
                p.sh.poll(*now, &mut p.sapp, ss);
            }
            _ => return seen,
        }
    }
}

#[test]
fn ipv4_and_ipv6_flows_side_by_side() {
    let mut now = 1_000_000_000;
    let mut p = w1_pair(w1_config(), 64, 3, now);
    let (mut cs, mut ss) = (VecSink::default(), VecSink::default());
    // the same ports over both families
    let f4 =
        p.ch.connect(now, &mut cs, client_ip(0), 4000, SERVER_IP, 80)
            .unwrap();
    let f6 =
        p.ch.connect6(now, &mut cs, client_ip6(0), 4000, SERVER_IP6, 80)
            .unwrap();
    p.capp.started(f4, 0);
    p.capp.started(f6, 1);
    assert!(p.ch.flow_key(f6).unwrap().is_ipv6());
    assert!(!p.ch.flow_key(f4).unwrap().is_ipv6());
    assert_eq!(p.ch.flow_ipv6(f6), Some((client_ip6(0), SERVER_IP6)));
    assert_eq!(p.ch.flow_ipv6(f4), None);
    assert_eq!(p.ch.ipv6_addresses(), 2);
    let frames = pump(&mut now, &mut p, &mut cs, &mut ss, 10_000_000_000);
    assert_eq!(p.capp.ok, 2, "{:?}", p.capp.failed);
    assert_eq!(p.sapp.ok, 2, "{:?}", p.sapp.failed);
    let (mut v4, mut v6) = (0, 0);
    for f in &frames {
        assert!(f.len() <= 1514, "frame of {} bytes", f.len());
        let fr = parse_frame(f).unwrap();
        assert!(fr.checksums_ok());
        match fr.l3 {
            L3::Ipv4(_, L4::Tcp(_)) => v4 += 1,
            L3::Ipv6(ip, L4::Tcp(t)) => {
                v6 += 1;
                assert_eq!(ip.hop_limit(), 64);
                assert!([client_ip6(0), SERVER_IP6].contains(&ip.src().0));
                let o = TcpOptions::parse(t.options()).unwrap();
                if t.flags().syn() {
                    assert_eq!(o.mss, Some(1440), "MSS from the IPv6 MTU");
                }
                // full segments fill the IPv6 MTU exactly
                if t.payload().len() == 1440 {
                    assert_eq!(f.len(), 1514);
                }
                assert!(t.payload().len() <= 1440);
            }
            ref o => panic!("unexpected {o:?}"),
        }
    }
    assert!(v4 > 20 && v6 > 20, "{v4} IPv4 and {v6} IPv6 frames");
    // TIME_WAIT ends: every id is given back
    pump(&mut now, &mut p, &mut cs, &mut ss, 10_000_000_000);
    assert_eq!(p.ch.flow_count() + p.sh.flow_count(), 0);
    assert_eq!(p.ch.ipv6_addresses(), 0);
    assert_eq!(p.sh.ipv6_addresses(), 0);
}

#[test]
fn a_reset_answers_an_ipv6_segment_without_a_flow() {
    let mut now = 1_000_000_000;
    let mut p = w1_pair(w1_config(), 16, 4, now);
    let (mut cs, mut ss) = (VecSink::default(), VecSink::default());
    // port 81 has no listener: the SYN gets RST+ACK over IPv6
    let f =
        p.ch.connect6(now, &mut cs, client_ip6(1), 4001, SERVER_IP6, 81)
            .unwrap();
    p.capp.started(f, 0);
    let frames = pump(&mut now, &mut p, &mut cs, &mut ss, 1_000_000);
    let rst = frames
        .iter()
        .filter_map(|f| match parse_frame(f).ok()?.l3 {
            L3::Ipv6(_, L4::Tcp(t)) if t.flags().rst() => Some(t.dst_port()),
            _ => None,
        })
        .collect::<Vec<_>>();
    assert_eq!(rst, vec![4001]);
    assert_eq!(p.ch.state(FlowId(f.0)), State::Closed);
    assert_eq!(p.capp.failed[0].1, CloseReason::Refused);
    assert_eq!(p.sh.counters().tcps_noconn, 1);
    assert_eq!(p.sh.ipv6_addresses(), 0, "the reply's ids are given back");
    assert_eq!(p.ch.ipv6_addresses(), 0);
}

#[test]
fn ipv4_addresses_in_0_0_0_0_8_are_refused() {
    let mut h = TcpHost::new(w1_config(), 0);
    let mut s = VecSink::default();
    assert_eq!(
        h.connect(0, &mut s, 0x00ab_cdef, 1000, SERVER_IP, 80),
        Err(ConnectError::NoResources)
    );
    assert_eq!(
        h.connect(0, &mut s, SERVER_IP, 1000, 0x0000_0001, 80),
        Err(ConnectError::NoResources)
    );
    h.listen(80);
    // a SYN from 0.0.0.1 is dropped and counted, never answered
    let syn = wire::peer_frame(
        Family::V4,
        (1, 5000),
        (SERVER_IP, 80),
        7,
        0,
        wire::SYN,
        1000,
        &[],
        &[],
    );
    let mut app = squall_tcp_noapp::NoApp;
    h.rx(0, &syn, &mut app, &mut s);
    assert!(s.frames.is_empty());
    assert_eq!(h.counters().tcps_rcvnottcp, 1);
    assert_eq!(h.flow_count(), 0);
}

mod squall_tcp_noapp {
    /// An application that does nothing.
    pub struct NoApp;
    impl squall_tcp::TcpApp for NoApp {}
}

/// Records, per callback, what `Ctl::remote_ipv6` says about the flow.
#[derive(Default)]
struct Peers {
    seen: Vec<(&'static str, bool, Option<[u8; 16]>)>,
}

impl squall_tcp::TcpApp for Peers {
    fn on_connected(&mut self, ctl: &mut squall_tcp::Ctl, _f: FlowId) {
        let v6 = ctl.key().is_ipv6();
        self.seen.push(("connected", v6, ctl.remote_ipv6()));
        ctl.send_owned(b"hello".to_vec().into_boxed_slice());
    }
    fn on_data(&mut self, ctl: &mut squall_tcp::Ctl, _f: FlowId, _d: &[u8]) {
        let v6 = ctl.key().is_ipv6();
        self.seen.push(("data", v6, ctl.remote_ipv6()));
    }
}

#[test]
fn callbacks_name_the_ipv6_peer() {
    let now = 1_000_000_000;
    let (mut ch, mut sh) = host_pair(w1_config(), w1_config(), now);
    sh.listen(80);
    let (mut cs, mut ss) = (VecSink::default(), VecSink::default());
    let (mut capp, mut sapp) = (Peers::default(), Peers::default());
    ch.connect6(now, &mut cs, client_ip6(7), 4000, SERVER_IP6, 80)
        .unwrap();
    ch.connect(now, &mut cs, client_ip(7), 4001, SERVER_IP, 80)
        .unwrap();
    for _ in 0..20 {
        for f in std::mem::take(&mut cs.frames) {
            sh.rx(now, &f, &mut sapp, &mut ss);
        }
        for f in std::mem::take(&mut ss.frames) {
            ch.rx(now, &f, &mut capp, &mut cs);
        }
    }
    for (app, peer) in [(&sapp, client_ip6(7)), (&capp, SERVER_IP6)] {
        assert_eq!(app.seen.len(), 4, "{:?}", app.seen);
        for &(what, v6, got) in &app.seen {
            // The address is named in on_connected only (Ctl::ipv6, Ctl::remote_ipv6).
            let want = (v6 && what == "connected").then_some(peer);
            assert_eq!(got, want, "{what}");
        }
        assert_eq!(app.seen.iter().filter(|s| s.1).count(), 2);
    }
}
