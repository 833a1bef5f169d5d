//! Frames any host on the link can send that the node must refuse, bound or not
//! misread: UDP and echo requests from or to addresses no answer may use, floods of new
//! neighbours, neighbour discovery in fragments, a router withdrawing, overlapping
//! fragments, zero IPv6 UDP checksums, ARP conflicts, source routes and priority tags.

use squall_port::mem::{pair, MemConfig, MemPort};
use squall_port::Port;
use squall_stack::neighcache::MAX_NEIGHBOURS;
use squall_stack::udp::Datagram;
use squall_stack::{NoApp, Node, NodeApp, NodeConfig, NodeIo, Owned, Owned6, UdpFlowId};
use squall_tcp::{TcpApp, TcpConfig};
use squall_wire::{ArpRepr, Icmpv6Repr, Ipv4Address, Ipv6Address, MacAddress};

mod common;
use common::{
    arp_request_from, icmp6_frame, ip6, raw_frame, raw_rx, router_advert_from, udp_frame, IP6_A,
    IP_A, IP_B, MA, MB,
};

/// The MAC of the router of the tests that follow one.
const MR: [u8; 6] = [2, 0, 0, 0, 0, 0x99];
const S: u64 = 1_000_000_000;

fn node(port: MemPort, ip: u32) -> Node<MemPort> {
    let tcp = TcpConfig {
        mac: MA,
        gateway_mac: MB,
        ..TcpConfig::default()
    };
    let a6 = ip6(IP6_A).to_u128();
    let cfg = NodeConfig {
        owned: Owned(vec![(ip, ip)]),
        owned6: Owned6(vec![(a6, a6)]),
        max_udp_flows: 16,
        ..NodeConfig::default()
    };
    Node::new(port, tcp, cfg, 0)
}

/// Every frame on the wire.
fn drain(port: &mut MemPort) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let got = raw_rx(port);
        if got.is_empty() {
            return out;
        }
        out.extend(got);
    }
}

/// A UDP echo server on every port (as the generator's server side with an
/// association rule without an address range): opens a flow for the datagram's key
/// and answers on it.
#[derive(Default)]
struct Echo {
    got: u32,
}
impl TcpApp for Echo {}
impl NodeApp for Echo {
    fn on_udp<P: Port>(
        &mut self,
        io: &mut NodeIo<'_, P>,
        flow: Option<UdpFlowId>,
        d: &Datagram<'_>,
    ) -> bool {
        self.got += 1;
        let f = flow.or_else(|| io.udp_open(d.key()));
        if let Some(f) = f {
            io.udp_send(f, d.payload, 64, 0);
            io.udp_close(f);
        }
        true
    }
}

/// RFC 1122 §3.2.1.3 / §4.1.3.6 / §3.3.6, RFC 4291 §2.7: datagrams not addressed to one of
/// the node's addresses, from a broadcast/multicast source, or to a group, must not reach
/// an application (and no answer may come from a broadcast or multicast source address).
#[test]
fn udp_not_for_us_is_not_delivered() {
    let data = [1u8; 8];
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "v4 to another host's address",
            udp_frame(
                MA,
                &IP_B.to_be_bytes(),
                &0xc612_0009u32.to_be_bytes(),
                53,
                &data,
            ),
        ),
        (
            "v4 to 255.255.255.255",
            udp_frame([0xff; 6], &IP_B.to_be_bytes(), &[255; 4], 53, &data),
        ),
        (
            "v4 from 224.0.0.1",
            udp_frame(MA, &[224, 0, 0, 1], &IP_A.to_be_bytes(), 53, &data),
        ),
        (
            "v6 to ff02::1",
            udp_frame(
                [0x33, 0x33, 0, 0, 0, 1],
                &ip6("2001:db8::2").0,
                &ip6("ff02::1").0,
                53,
                &data,
            ),
        ),
        (
            "v6 from ff02::1",
            udp_frame(MA, &ip6("ff02::1").0, &ip6(IP6_A).0, 53, &data),
        ),
    ];
    let mut bad = Vec::new();
    for (what, f) in cases {
        let (pa, mut raw) = pair(MemConfig::default()).unwrap();
        let mut a = node(pa, IP_A);
        let mut app = Echo::default();
        raw_frame(&mut raw, &f);
        a.turn(1_000, &mut app, None);
        let out = drain(&mut raw);
        if app.got != 0 {
            let src: Vec<u8> = out
                .first()
                .map(|o| {
                    if o[12] == 0x86 {
                        o[22..38].to_vec()
                    } else {
                        o[26..30].to_vec()
                    }
                })
                .unwrap_or_default();
            bad.push(format!("{what}: delivered, answer from {src:?}"));
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

/// Every request for our address from a new sender address would add an entry (RFC
/// 826's merge): the cache stops at its bound (Linux: gc_thresh3 = 1024), the requests
/// still answered.
#[test]
fn arp_cache_is_bounded() {
    let (pa, mut raw) = pair(MemConfig::default()).unwrap();
    let mut a = node(pa, IP_A);
    let mut t = 1_000;
    for k in 0..20_000u32 {
        raw_frame(&mut raw, &arp_request_from(MB, 0x0a00_0000 + k, IP_A));
        if k % 128 == 127 {
            t += 1_000;
            a.turn(t, &mut NoApp, None);
            drain(&mut raw);
        }
    }
    a.turn(t + 1_000, &mut NoApp, None);
    assert_eq!(a.neigh.len(), MAX_NEIGHBOURS, "the ARP cache's entries");
    let unlearned = 20_000 - MAX_NEIGHBOURS as u64;
    assert_eq!(a.neigh.stats.cache_full, unlearned);
    // Every request was answered all the same.
    assert_eq!(a.neigh.stats.requests_answered, 20_000);
}

/// Same for IPv6: solicitations for our address from new sources.
#[test]
fn ndp_cache_is_bounded() {
    let (pa, mut raw) = pair(MemConfig::default()).unwrap();
    let mut a = node(pa, IP_A);
    let me = ip6(IP6_A);
    let mut t = 1_000;
    for k in 0..20_000u128 {
        let src = Ipv6Address::from_u128(ip6("2001:db8:1::").to_u128() + k);
        let ns = Icmpv6Repr::NeighborSolicit {
            target: me,
            source_mac: Some(MacAddress(MB)),
        };
        raw_frame(
            &mut raw,
            &icmp6_frame(
                me.solicited_node().multicast_mac().0,
                src,
                me.solicited_node(),
                255,
                &ns,
            ),
        );
        if k % 128 == 127 {
            t += 1_000;
            a.turn(t, &mut NoApp, None);
            drain(&mut raw);
        }
    }
    a.turn(t + 1_000, &mut NoApp, None);
    assert_eq!(
        a.neigh6.len(),
        MAX_NEIGHBOURS,
        "the neighbour cache's entries"
    );
    assert_eq!(a.neigh6.stats.cache_full, 20_000 - MAX_NEIGHBOURS as u64);
    assert_eq!(a.neigh6.stats.ns_answered, 20_000);
}

/// A node whose IPv6 next hop is the default router fe80::1 at MR, as its advertisement
/// made it; and the wire's other end.
fn following_router() -> (Node<MemPort>, MemPort) {
    let (pa, mut raw) = pair(MemConfig::default()).unwrap();
    let mut a = node(pa, IP_A);
    raw_frame(&mut raw, &router_advert_from("fe80::1", MR, 1800));
    a.turn(1_000, &mut NoApp, None);
    drain(&mut raw);
    a.set_next_hop(MR);
    a.follow_resolved_next_hop6(None, MR);
    (a, raw)
}

/// RFC 4861 §6.3.4/§6.3.6: a router advertising lifetime 0 is no longer a default
/// router; with another router advertising, traffic must move to it.
#[test]
fn default_router_with_lifetime_zero_is_left() {
    let mc = [2, 0, 0, 0, 0, 0xc];
    let (mut a, mut raw) = following_router();
    a.probe_next_hop(S, 30 * S, None, Some(ip6(IP6_A)));
    raw_frame(&mut raw, &router_advert_from("fe80::2", mc, 1800));
    a.turn(2 * S, &mut NoApp, None);
    // fe80::1 stops being a default router (lifetime 0), and keeps advertising so.
    for t in 3..200u64 {
        if t % 10 == 3 {
            raw_frame(&mut raw, &router_advert_from("fe80::1", MR, 0));
            raw_frame(&mut raw, &router_advert_from("fe80::2", mc, 1800));
        }
        a.turn(t * S, &mut NoApp, None);
        drain(&mut raw);
    }
    assert_eq!(a.neigh6.router().map(|r| r.1), Some(mc));
    assert_eq!(
        a.next_hop(),
        mc,
        "still sending everything to the router that withdrew"
    );
}

/// An IPv6 fragment of datagram `id` from 2000::1 to 2000::1 (UDP): `data` at byte
/// `off`, more to come if `more`.
fn frag6(id: u32, off: usize, more: bool, data: &[u8]) -> Vec<u8> {
    let mut f = vec![0u8; 54];
    f[12..14].copy_from_slice(&[0x86, 0xdd]);
    f[14] = 0x60;
    f[18..20].copy_from_slice(&((8 + data.len()) as u16).to_be_bytes());
    f[20] = 44;
    f[21] = 64;
    f[22] = 0x20;
    f[38] = 0x20;
    f[53] = 1;
    f.extend_from_slice(&[17, 0]);
    f.extend_from_slice(&((off as u16) | u16::from(more)).to_be_bytes());
    f.extend_from_slice(&id.to_be_bytes());
    f.extend_from_slice(data);
    f
}

/// RFC 4861 §6.3.4: the followed router withdraws before any other router is known, and
/// no reachability watch runs: the first router advertised after it takes its place
/// (while the withdrawn one, still answering, would have kept it for good).
#[test]
fn a_router_that_withdrew_gives_way_to_the_next_one_advertised() {
    let mc = [2, 0, 0, 0, 0, 0xc];
    let (mut a, mut raw) = following_router();
    raw_frame(&mut raw, &router_advert_from("fe80::1", MR, 0));
    a.turn(S, &mut NoApp, None);
    assert_eq!(a.next_hop(), MR, "no other router known yet");
    raw_frame(&mut raw, &router_advert_from("fe80::2", mc, 1800));
    a.turn(2 * S, &mut NoApp, None);
    drain(&mut raw);
    assert_eq!(a.next_hop(), mc);
    assert_eq!(a.neigh6.stats.next_hop_moved, 1);
    // A router that withdrew and advertises itself again before any other keeps its place.
    let (mut a, mut raw) = following_router();
    raw_frame(&mut raw, &router_advert_from("fe80::1", MR, 0));
    raw_frame(&mut raw, &router_advert_from("fe80::1", MR, 1800));
    a.turn(S, &mut NoApp, None);
    raw_frame(&mut raw, &router_advert_from("fe80::2", mc, 1800));
    a.turn(2 * S, &mut NoApp, None);
    assert_eq!(a.next_hop(), MR);
}

/// RFC 5722 §4: after an overlap, the datagram "and any constituent fragments,
/// including those not yet received" are discarded (until the datagram's timeout: a
/// datagram of that id after it is reassembled).
#[test]
fn fragments_after_an_overlap_are_discarded() {
    use squall_stack::reasm::Reassembly;
    let mut r = Reassembly::default();
    let push = |r: &mut Reassembly, f: &[u8], now: u64| r.push6(f, 54, f.len(), now);
    assert!(push(&mut r, &frag6(7, 0, true, &[1; 16]), 1).is_none());
    assert!(push(&mut r, &frag6(7, 8, true, &[2; 16]), 1).is_none()); // overlaps
    assert_eq!(r.stats.overlaps, 1);
    // more fragments of the same datagram (same src, dst, id)
    assert!(push(&mut r, &frag6(7, 0, true, &[3; 16]), 2).is_none());
    let whole = push(&mut r, &frag6(7, 16, false, &[4; 8]), 3);
    assert!(whole.is_none(), "reassembled after the overlap");
    assert_eq!(r.stats.after_overlap, 2);
    // Another id is not affected; the same one after the 60 s timeout is a new datagram.
    assert!(push(&mut r, &frag6(8, 0, true, &[3; 16]), 4).is_none());
    assert!(push(&mut r, &frag6(8, 16, false, &[4; 8]), 5).is_some());
    let later = 61 * S;
    assert!(push(&mut r, &frag6(7, 0, true, &[3; 16]), later).is_none());
    assert!(push(&mut r, &frag6(7, 16, false, &[4; 8]), later).is_some());
    assert_eq!(r.stats.after_overlap, 2);
}

/// RFC 8200 §4.5 / RFC 5722: only an *exact* duplicate may be ignored; a fragment with
/// the same offset and length but other bytes is an overlap.
#[test]
fn same_range_other_bytes_is_an_overlap() {
    use squall_stack::reasm::Reassembly;
    let mut r = Reassembly::default();
    let mut push = |f: Vec<u8>| r.push6(&f, 54, f.len(), 1);
    assert!(push(frag6(9, 0, true, &[1; 16])).is_none());
    assert!(push(frag6(9, 0, true, &[1; 16])).is_none()); // the same bytes: a duplicate
    assert!(push(frag6(9, 0, true, &[0xee; 16])).is_none());
    assert!(push(frag6(9, 16, false, &[4; 8])).is_none());
    assert_eq!((r.stats.duplicates, r.stats.overlaps), (1, 1));
}

/// RFC 8200 §8.1: a zero UDP checksum over IPv6 is refused even where the port says
/// the L4 checksum is good (UdpLayer::parse6_checked with verify=false).
#[test]
fn zero_udp6_checksum_refused_when_port_vouches() {
    let data = [1u8; 8];
    let mut f = udp_frame(MA, &ip6("2001:db8::2").0, &ip6(IP6_A).0, 53, &data);
    f[60..62].copy_from_slice(&[0, 0]);
    let i = squall_stack::ipv6::check(&f).unwrap();
    let mut l = squall_stack::UdpLayer::new(
        4,
        0,
        squall_stack::udp::UdpTx {
            mac: MA,
            next_hop: MB,
            mtu: 1500,
        },
    );
    assert!(l.parse6_checked(&f, &i, false).is_err());
}

/// RFC 6980 §5: neighbour discovery carried in a fragment (here the first fragment of a
/// "datagram" whose first fragment is itself a complete, correctly summed RA) must be
/// ignored. The run's demux ignores it; the resolution before the run takes it.
#[test]
fn fragmented_ra_does_not_pick_the_next_hop_during_resolution() {
    let evil = [2, 0, 0, 0, 0, 0x66];
    for more in [true, false] {
        let (pa, mut raw) = pair(MemConfig::default()).unwrap();
        let mut a = node(pa, IP_A);
        let mut f = router_advert_from("fe80::6", evil, 1800);
        // splice a fragment header (offset 0, M = `more`) after the fixed header
        f.splice(54..54, [58u8, 0, 0, u8::from(more), 0, 0, 0, 9]);
        f[20] = 44;
        let plen = u16::from_be_bytes([f[18], f[19]]) + 8;
        f[18..20].copy_from_slice(&plen.to_be_bytes());
        raw_frame(&mut raw, &f);
        let got = a.next_hop6_shared(
            ip6(IP6_A),
            None,
            std::time::Duration::from_millis(500),
            true,
            &squall_stack::SharedMac::default(),
        );
        assert!(
            got.is_err(),
            "M={more}: next hop taken from a fragmented RA: {got:?}"
        );
    }
}

/// RFC 4291 §2.7 / RFC 4443 §4.2: an echo request from a multicast or unspecified
/// source is not answered (its "reply" would go to a group, or to ::).
#[test]
fn echo6_from_invalid_source_not_answered() {
    let me = ip6(IP6_A);
    let mut bad = Vec::new();
    for src in ["ff02::1", "::"] {
        let (pa, mut raw) = pair(MemConfig::default()).unwrap();
        let mut a = node(pa, IP_A);
        let e = Icmpv6Repr::Echo {
            is_reply: false,
            ident: 1,
            seq: 1,
            data: &[1, 2, 3],
        };
        raw_frame(&mut raw, &icmp6_frame(MA, ip6(src), me, 64, &e));
        a.turn(1_000, &mut NoApp, None);
        for o in drain(&mut raw) {
            bad.push(format!(
                "from {src}: reply to {:?}",
                Ipv6Address(o[38..54].try_into().unwrap())
            ));
        }
    }
    assert!(bad.is_empty(), "{bad:?}");
}

/// RFC 5227 §2.4: any ARP packet (request or reply) whose sender IP is ours from another
/// MAC is a conflict.
#[test]
fn arp_reply_claiming_our_address_is_a_conflict() {
    let (pa, mut raw) = pair(MemConfig::default()).unwrap();
    let mut a = node(pa, IP_A);
    let r = ArpRepr {
        operation: squall_wire::ArpOperation::REPLY,
        sender_mac: MacAddress(MB),
        sender_ip: Ipv4Address(IP_A.to_be_bytes()),
        target_mac: MacAddress(MA),
        target_ip: Ipv4Address(IP_B.to_be_bytes()),
    };
    let mut buf = [0u8; 60];
    squall_stack::neigh::emit_frame(&r, MB, &mut buf).unwrap();
    raw_frame(&mut raw, &buf);
    // and a request from us-the-address for someone else
    raw_frame(&mut raw, &arp_request_from(MB, IP_A, IP_B));
    a.turn(1_000, &mut NoApp, None);
    assert_eq!(
        a.neigh.stats.conflicts, 2,
        "ignored={}",
        a.neigh.stats.ignored
    );
}

/// RFC 7126 §4.3/4.4 (and RFC 1122 §3.2.2.6, which requires the reply to carry the
/// reversed route): a loose-source-routed echo request is dropped, not answered as a
/// plain one with its options left out.
#[test]
fn lsrr_echo_not_answered_as_plain() {
    // (LSRR, pointer 4: next hop 10.0.0.9 pending; EOL pad), SSRR, a NOP then record route
    let lsrr = [131u8, 7, 4, 10, 0, 0, 9, 0];
    let ssrr = [137u8, 7, 4, 10, 0, 0, 9, 0];
    let rr = [1u8, 7, 7, 4, 0, 0, 0, 0];
    for (opts, answered) in [(lsrr, false), (ssrr, false), (rr, true)] {
        let (pa, mut raw) = pair(MemConfig::default()).unwrap();
        let mut a = node(pa, IP_A);
        let data = [7u8; 8];
        let mut f = vec![0u8; 14 + 28 + 8 + data.len()];
        f[0..6].copy_from_slice(&MA);
        f[6..12].copy_from_slice(&MB);
        f[12..14].copy_from_slice(&[8, 0]);
        {
            let ip = &mut f[14..42];
            ip[0] = 0x47;
            ip[2..4].copy_from_slice(&((28 + 8 + data.len()) as u16).to_be_bytes());
            ip[8] = 64;
            ip[9] = 1;
            ip[12..16].copy_from_slice(&IP_B.to_be_bytes());
            ip[16..20].copy_from_slice(&IP_A.to_be_bytes());
            ip[20..28].copy_from_slice(&opts);
            let c = squall_wire::checksum::checksum(ip);
            ip[10..12].copy_from_slice(&c.to_be_bytes());
        }
        {
            let m = &mut f[42..];
            m[0] = 8;
            m[8..].copy_from_slice(&data);
            let c = squall_wire::checksum::checksum(m);
            m[2..4].copy_from_slice(&c.to_be_bytes());
        }
        raw_frame(&mut raw, &f);
        a.turn(1_000, &mut NoApp, None);
        let out = drain(&mut raw);
        assert_eq!(out.len(), usize::from(answered), "option {}", opts[0]);
        assert_eq!(a.counters.rx_other_ip, u64::from(!answered));
    }
}

/// IEEE 802.1Q: a priority-tagged frame (VID 0) is an untagged frame with a priority:
/// ARP and neighbour discovery in such frames are answered in the run (a neighbour
/// solicitation untagged and received again is not "neighbour discovery in fragments").
#[test]
fn priority_tagged_arp_and_ndp_are_answered() {
    let tag = |f: &[u8]| {
        let mut t = f[..12].to_vec();
        t.extend_from_slice(&[0x81, 0x00, 0xa0, 0x00]); // PCP 5, VID 0
        t.extend_from_slice(&f[12..]);
        t
    };
    let (pa, mut raw) = pair(MemConfig::default()).unwrap();
    let mut a = node(pa, IP_A);
    raw_frame(&mut raw, &tag(&arp_request_from(MB, IP_B, IP_A)));
    let me = ip6(IP6_A);
    let ns = Icmpv6Repr::NeighborSolicit {
        target: me,
        source_mac: Some(MacAddress(MB)),
    };
    let group = me.solicited_node();
    let src = ip6("2001:db8::2");
    raw_frame(
        &mut raw,
        &tag(&icmp6_frame(group.multicast_mac().0, src, group, 255, &ns)),
    );
    a.turn(1_000, &mut NoApp, None);
    let out = drain(&mut raw);
    assert_eq!(out.len(), 2, "other_ether={}", a.counters.rx_other_ether);
    assert_eq!(
        (a.neigh.stats.requests_answered, a.neigh6.stats.ns_answered),
        (1, 1)
    );
    assert_eq!(a.icmp6.ndp_fragmented, 0);
}
