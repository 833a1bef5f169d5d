//! Harness functions shared by the fuzz targets (`fuzz/`) and the random
//! input tests: each takes arbitrary bytes, runs one parser, calls every
//! accessor of a successfully parsed view, and checks round-trip invariants.
//! A panic here is a bug (either a parser that is not total, or an
//! invariant that does not hold). Not part of the stable API.

use crate::checksum;
use crate::{
    parse_frame, walk_ext_headers, ArpPacket, ArpRepr, EthernetFrame, EthernetRepr, IcmpEchoRepr,
    IcmpPacket, Icmpv6Packet, Icmpv6Repr, Ipv4Address, Ipv4Packet, Ipv4Repr, Ipv6Address,
    Ipv6Packet, Ipv6Repr, NdpOptionIter, TcpOptionIter, TcpOptions, TcpPacket, TcpRepr, UdpPacket,
    UdpRepr, IPV6_HEADER_LEN, L3, L4, MAX_OPTIONS_LEN,
};
use std::hint::black_box;

const A: Ipv4Address = Ipv4Address::new(198, 18, 0, 1);
const B: Ipv4Address = Ipv4Address::new(198, 19, 255, 254);
const A6: Ipv6Address = Ipv6Address::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
const B6: Ipv6Address = Ipv6Address::new(0x2001, 0xdb8, 0xffff, 0, 0, 0, 0xfffe, 0xffff);

/// Ethernet view: every accessor, header length consistency, repr round trip.
pub fn ethernet(data: &[u8]) {
    let Ok(f) = EthernetFrame::new_checked(data) else {
        return;
    };
    black_box((f.dst(), f.src(), f.outer_ethertype(), f.is_tagged()));
    black_box((f.vlan(), f.ethertype()));
    assert_eq!(f.header_len() + f.payload().len(), data.len());
    let r = EthernetRepr::parse(&f);
    let mut out = [0u8; 18];
    let n = r.emit(&mut out).expect("18 bytes always suffice");
    assert_eq!(&out[..n], &data[..n]);
    let g = EthernetFrame::new_checked(&out[..n]).expect("emitted header parses");
    assert_eq!(EthernetRepr::parse(&g), r);
}

/// ARP view: accessors and repr round trip.
pub fn arp(data: &[u8]) {
    let Ok(p) = ArpPacket::new_checked(data) else {
        return;
    };
    black_box((p.operation(), p.sender_mac(), p.sender_ip()));
    black_box((p.target_mac(), p.target_ip()));
    let r = ArpRepr::parse(&p);
    let mut out = [0u8; 28];
    r.emit(&mut out).expect("28 bytes");
    assert_eq!(&out[..], &data[..28]);
}

/// IPv4 view: accessors, length invariants, checksum fill/verify, repr round trip.
pub fn ipv4(data: &[u8]) {
    let Ok(p) = Ipv4Packet::new_checked(data) else {
        return;
    };
    black_box((p.version(), p.tos(), p.dscp(), p.ecn(), p.ident()));
    black_box((p.reserved_flag(), p.dont_frag(), p.more_frags()));
    black_box((p.frag_offset(), p.frag_offset_units(), p.is_fragment()));
    black_box((p.ttl(), p.protocol(), p.checksum(), p.src(), p.dst()));
    black_box((p.verify_checksum(), p.pseudo_header_sum()));
    let hl = p.header_len();
    assert!((20..=60).contains(&hl));
    assert_eq!(p.options().len(), hl - 20);
    assert_eq!(p.header().len(), hl);
    assert_eq!(p.payload().len(), p.payload_len());
    assert_eq!(hl + p.payload_len(), p.total_len() as usize);
    // fill + verify on a copy
    let mut copy = data.to_vec();
    let mut q = Ipv4Packet::new_checked(&mut copy[..]).expect("same bytes");
    q.fill_checksum();
    assert!(q.verify_checksum());
    q.decrement_ttl();
    assert!(q.verify_checksum(), "incremental TTL update");
    // repr round trip keeps every field the repr models
    let r = Ipv4Repr::parse(&p);
    let mut out = [0u8; 60];
    let n = r
        .emit_with_options(&mut out, p.options())
        .expect("options fit");
    assert_eq!(n, hl);
    let mut re = out[..n].to_vec();
    re.extend_from_slice(p.payload());
    let q = Ipv4Packet::new_checked(&re[..]).expect("emitted header parses");
    assert_eq!(Ipv4Repr::parse(&q), r);
    assert!(q.verify_checksum());
}

/// TCP options area alone: iterator terminates, agrees with the summary.
pub fn tcp_options(data: &[u8]) {
    let mut count = 0usize;
    for o in TcpOptionIter::new(data) {
        count += 1;
        if let Ok(o) = o {
            black_box(o.wire_len());
        }
    }
    assert!(count <= data.len());
    if let Ok(o) = TcpOptions::parse(data) {
        if o.wire_len() <= MAX_OPTIONS_LEN {
            let mut out = [0u8; MAX_OPTIONS_LEN];
            let n = o.emit(&mut out).expect("fits");
            assert_eq!(n % 4, 0);
            assert_eq!(TcpOptions::parse(&out[..n]), Ok(o));
        }
    }
}

/// TCP view: accessors, option iteration, checksum fill/verify, repr round trip.
pub fn tcp(data: &[u8]) {
    let Ok(p) = TcpPacket::new_checked(data) else {
        return;
    };
    black_box((p.src_port(), p.dst_port(), p.seq_number(), p.ack_number()));
    black_box((p.flags(), p.reserved(), p.window_len(), p.checksum()));
    black_box((p.urgent_at(), p.segment_len()));
    black_box((p.verify_checksum(&A, &B), p.compute_checksum(&A, &B)));
    assert_eq!(p.header_len(), 20 + p.options().len());
    assert_eq!(p.header_len() + p.payload().len(), data.len());
    tcp_options(p.options());
    let mut copy = data.to_vec();
    let mut q = TcpPacket::new_checked(&mut copy[..]).expect("same bytes");
    q.fill_checksum(&A6, &B6);
    assert!(q.verify_checksum(&A6, &B6), "IPv6 pseudo-header");
    assert_eq!(q.compute_checksum(&A6, &B6), q.checksum());
    q.fill_checksum(&A, &B);
    assert!(q.verify_checksum(&A, &B));
    assert_eq!(q.compute_checksum(&A, &B), q.checksum());
    // incremental update of the sequence number keeps it valid
    let (old, new) = (q.seq_number(), q.seq_number().wrapping_add(0x0001_0001));
    let hc = q.checksum();
    q.set_seq_number(new);
    q.set_checksum(checksum::update32(hc, old, new));
    assert!(q.verify_checksum(&A, &B), "incremental seq update");
    if let Ok(r) = TcpRepr::parse(&p) {
        let mut out = [0u8; 60];
        if let Ok(n) = r.emit(&mut out) {
            let q = TcpPacket::new_checked(&out[..n]).expect("emitted header parses");
            let mut r2 = TcpRepr::parse(&q).expect("emitted options parse");
            // the reserved bits are not modelled; everything else must match
            r2.flags = r.flags;
            assert_eq!(r2, r);
        }
    }
}

/// UDP view: accessors, checksum fill/verify, repr round trip.
pub fn udp(data: &[u8]) {
    let Ok(p) = UdpPacket::new_checked(data) else {
        return;
    };
    black_box((p.src_port(), p.dst_port(), p.len(), p.checksum()));
    black_box((p.verify_checksum(&A, &B), p.compute_checksum(&A, &B)));
    assert_eq!(p.payload().len() + 8, p.len() as usize);
    let mut copy = data.to_vec();
    let mut q = UdpPacket::new_checked(&mut copy[..]).expect("same bytes");
    q.fill_checksum(&A6, &B6);
    assert!(q.verify_checksum(&A6, &B6), "IPv6 pseudo-header");
    assert_ne!(q.checksum(), 0);
    q.fill_checksum(&A, &B);
    assert!(q.verify_checksum(&A, &B));
    assert_ne!(q.checksum(), 0);
    let r = UdpRepr::parse(&p);
    let mut out = vec![0u8; p.len() as usize];
    let n = r.emit(&mut out, p.payload(), &A, &B, true).expect("fits");
    let q = UdpPacket::new_checked(&out[..n]).expect("emitted parses");
    assert!(q.verify_checksum(&A, &B));
    assert_eq!(q.payload(), p.payload());
}

/// ICMP view: accessors, checksum fill/verify, echo round trip.
pub fn icmp(data: &[u8]) {
    let Ok(p) = IcmpPacket::new_checked(data) else {
        return;
    };
    black_box((p.msg_type(), p.code(), p.checksum(), p.is_echo()));
    black_box((
        p.echo_ident(),
        p.echo_seq(),
        p.payload(),
        p.verify_checksum(),
    ));
    let mut copy = data.to_vec();
    let mut q = IcmpPacket::new_checked(&mut copy[..]).expect("same bytes");
    q.fill_checksum();
    assert!(q.verify_checksum());
    if q.is_echo() {
        q.make_echo_reply();
        assert!(q.verify_checksum());
    }
    if let Ok(r) = IcmpEchoRepr::parse(&p) {
        let mut out = vec![0u8; data.len()];
        r.emit(&mut out, p.payload()).expect("fits");
        assert_eq!(&out[4..], &data[4..]);
        assert_eq!(
            IcmpEchoRepr::parse(&IcmpPacket::new_checked(&out[..]).unwrap()),
            Ok(r)
        );
    }
}

/// IPv6 view: accessors, length invariants, extension-header walk bounds, repr round
/// trip.
pub fn ipv6(data: &[u8]) {
    let Ok(p) = Ipv6Packet::new_checked(data) else {
        return;
    };
    black_box((p.version(), p.traffic_class(), p.flow_label()));
    black_box((p.next_header(), p.hop_limit(), p.src(), p.dst()));
    assert_eq!(p.payload().len(), p.payload_len() as usize);
    assert_eq!(p.header().len(), IPV6_HEADER_LEN);
    if let Ok(u) = p.upper_layer() {
        assert!(u.offset <= p.payload().len());
        assert!(u.ext_headers as usize <= crate::ipv6::MAX_EXT_HEADERS);
        assert_eq!(u.offset % 8, 0);
        black_box((
            u.is_fragment(),
            p.pseudo_header_sum(u.protocol, p.payload().len() - u.offset),
        ));
    }
    // the walk alone, over arbitrary bytes and every first header
    black_box(walk_ext_headers(p.next_header(), &data[IPV6_HEADER_LEN..]).ok());
    let r = Ipv6Repr::parse(&p);
    let mut out = [0u8; IPV6_HEADER_LEN];
    r.emit(&mut out).expect("40 bytes");
    assert_eq!(&out[..], &data[..IPV6_HEADER_LEN]);
}

/// ICMPv6 view: accessors, NDP options, checksum fill/verify, repr round trip.
pub fn icmpv6(data: &[u8]) {
    let Ok(p) = Icmpv6Packet::new_checked(data) else {
        return;
    };
    black_box((p.msg_type(), p.code(), p.checksum(), p.word1()));
    black_box((p.echo_ident(), p.echo_seq(), p.verify_checksum(&A6, &B6)));
    let mut n = 0usize;
    for o in NdpOptionIter::new(p.payload()) {
        n += 1;
        if let Ok(o) = o {
            black_box(o.wire_len());
        }
    }
    assert!(n <= p.payload().len());
    let mut copy = data.to_vec();
    let mut q = Icmpv6Packet::new_checked(&mut copy[..]).expect("same bytes");
    q.fill_checksum(&A6, &B6);
    assert!(q.verify_checksum(&A6, &B6));
    if let Ok(r) = Icmpv6Repr::parse(&p) {
        let mut out = vec![0u8; r.buffer_len()];
        let k = r.emit(&mut out, &A6, &B6).expect("sized by buffer_len");
        let q = Icmpv6Packet::new_checked(&out[..k]).expect("emitted parses");
        assert!(q.verify_checksum(&A6, &B6));
        match r {
            // the invoking packet is cut to the minimum MTU
            Icmpv6Repr::PacketTooBig { invoking, .. }
                if invoking.len() > crate::icmpv6::IPV6_PTB_MAX_INVOKING => {}
            _ => assert_eq!(Icmpv6Repr::parse(&q), Ok(r)),
        }
    }
}

/// Whole frame: `parse_frame`, every layer's harness, checksum summary; the IPv6 TCP
/// fast parser agrees with the general views.
pub fn frame(data: &[u8]) {
    ethernet(data);
    if let Ok((seg, src, dst)) = crate::segment::parse6_opt(data, true) {
        let f = parse_frame(data).expect("the fast parser took it");
        let L3::Ipv6(ip, L4::Tcp(t)) = f.l3 else {
            panic!("parse6_opt took a frame parse_frame does not see as IPv6/TCP")
        };
        assert_eq!((ip.src().0, ip.dst().0), (src, dst));
        assert_eq!(
            (t.src_port(), t.dst_port(), t.seq_number()),
            (seg.src_port, seg.dst_port, seg.seq)
        );
        assert_eq!(t.payload(), seg.payload);
        assert!(f.checksums_ok());
    }
    let Ok(f) = parse_frame(data) else {
        // still drive the inner parsers over the payload
        if let Ok(e) = EthernetFrame::new_checked(data) {
            ipv4(e.payload());
            ipv6(e.payload());
            arp(e.payload());
        }
        return;
    };
    black_box(f.checksums_ok());
    match f.l3 {
        L3::Arp(a) => arp(a.into_inner()),
        L3::Ipv4(ip, l4) => {
            ipv4(ip.into_inner());
            match l4 {
                L4::Tcp(t) => tcp(t.into_inner()),
                L4::Udp(u) => udp(u.into_inner()),
                L4::Icmp(i) => icmp(i.into_inner()),
                L4::Icmpv6(i) => icmpv6(i.into_inner()),
                L4::Fragment | L4::Other(_) => {}
            }
        }
        L3::Ipv6(ip, l4) => {
            ipv6(ip.into_inner());
            match l4 {
                L4::Tcp(t) => tcp(t.into_inner()),
                L4::Udp(u) => udp(u.into_inner()),
                L4::Icmp(i) => icmp(i.into_inner()),
                L4::Icmpv6(i) => icmpv6(i.into_inner()),
                L4::Fragment | L4::Other(_) => {}
            }
        }
        L3::Other(t) => {
            black_box(t);
        }
    }
}

/// Checksum: fast path equals the reference, incremental equals recompute.
pub fn checksums(data: &[u8]) {
    let (f, r) = (checksum::sum(data), checksum::sum_reference(data));
    assert!(
        f == r || (f == 0 && r == 0xffff) || (f == 0xffff && r == 0),
        "fast {f:#x} reference {r:#x}"
    );
    if data.len() >= 6 && data.len() & 1 == 0 {
        let mut d = data.to_vec();
        d[0] = 0;
        d[1] = 0;
        let hc = checksum::checksum(&d);
        d[..2].copy_from_slice(&hc.to_be_bytes());
        let old = u32::from_be_bytes([d[2], d[3], d[4], d[5]]);
        let new = old.rotate_left(7) ^ 0x5a5a_a5a5;
        d[2..6].copy_from_slice(&new.to_be_bytes());
        let hc2 = checksum::update32(hc, old, new);
        d[..2].copy_from_slice(&hc2.to_be_bytes());
        // RFC 1624's documented degenerate case: all-zero data after the change
        if d[2..].iter().any(|&b| b != 0) {
            assert_eq!(checksum::sum(&d), 0xffff);
        }
    }
}
