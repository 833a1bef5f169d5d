//! `Ctl::ipv6`: in `on_connected` of an IPv6 flow (active and passive) the application
//! sees the flow's real addresses (its key holds address ids); IPv4 flows and other
//! callbacks see None.

mod common;
use common::*;

use squall_tcp::{Ctl, FlowId, TcpApp};

type Seen = Vec<(&'static str, bool, Option<([u8; 16], [u8; 16])>)>;

#[derive(Default)]
struct Rec(Seen);

impl TcpApp for Rec {
    fn on_connected(&mut self, ctl: &mut Ctl, _f: FlowId) {
        self.0.push(("connected", ctl.passive(), ctl.ipv6()));
        if !ctl.passive() {
            ctl.close();
        }
    }
    fn on_peer_closed(&mut self, ctl: &mut Ctl, _f: FlowId) {
        self.0.push(("peer_closed", ctl.passive(), ctl.ipv6()));
        ctl.close();
    }
}

#[test]
fn on_connected_sees_the_ipv6_addresses() {
    let mut now = 1_000_000_000;
    let (mut ch, mut sh) = host_pair(w1_config(), w1_config(), now);
    sh.listen(80);
    let (mut ca, mut sa) = (Rec::default(), Rec::default());
    let (mut cs, mut ss) = (VecSink::default(), VecSink::default());
    ch.connect6(now, &mut cs, client_ip6(0), 4000, SERVER_IP6, 80)
        .unwrap();
    ch.connect(now, &mut cs, client_ip(0), 4001, SERVER_IP, 80)
        .unwrap();
    for _ in 0..20 {
        now += 1_000;
        for f in std::mem::take(&mut cs.frames) {
            sh.rx(now, &f, &mut sa, &mut ss);
        }
        for f in std::mem::take(&mut ss.frames) {
            ch.rx(now, &f, &mut ca, &mut cs);
        }
    }
    let v6 = Some((client_ip6(0), SERVER_IP6));
    let v6_srv = Some((SERVER_IP6, client_ip6(0)));
    assert!(ca.0.contains(&("connected", false, v6)), "{:?}", ca.0);
    assert!(ca.0.contains(&("connected", false, None)), "the IPv4 flow");
    assert!(sa.0.contains(&("connected", true, v6_srv)), "{:?}", sa.0);
    assert!(sa.0.contains(&("connected", true, None)));
    // Other callbacks: None (TcpHost::flow_ipv6 answers there).
    let closes: Vec<_> = sa.0.iter().filter(|e| e.0 == "peer_closed").collect();
    assert_eq!(closes.len(), 2, "{:?}", sa.0);
    assert!(closes.iter().all(|e| e.2.is_none()));
}
