//! Builders and parsers agree: random reprs are emitted into a frame,
//! parsed back with `parse_frame`, and must come out equal with every
//! checksum valid.

use squall_wire::*;

struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    fn u16(&mut self) -> u16 {
        self.next() as u16
    }
    fn u32(&mut self) -> u32 {
        self.next() as u32
    }
    fn chance(&mut self, pct: u64) -> bool {
        self.next() % 100 < pct
    }
    fn mac(&mut self) -> MacAddress {
        let b = self.next().to_le_bytes();
        MacAddress([b[0], b[1], b[2], b[3], b[4], b[5]])
    }
    fn ip(&mut self) -> Ipv4Address {
        Ipv4Address::from_u32(self.u32())
    }
}

fn random_options(r: &mut XorShift) -> TcpOptions {
    loop {
        let mut o = TcpOptions::NONE;
        if r.chance(50) {
            o.mss = Some(r.u16());
        }
        if r.chance(50) {
            o.window_scale = Some(r.next() as u8 % 15);
        }
        o.sack_permitted = r.chance(50);
        if r.chance(50) {
            o.timestamps = Some(Timestamps {
                tsval: r.u32(),
                tsecr: r.u32(),
            });
        }
        let nb = (r.next() % 5) as usize;
        for _ in 0..nb {
            o.sack
                .push(SackBlock {
                    left: r.u32(),
                    right: r.u32(),
                })
                .unwrap();
        }
        if o.wire_len() <= MAX_OPTIONS_LEN {
            return o;
        }
        assert_eq!(o.emit(&mut [0u8; 64]), Err(Error::NoSpace));
    }
}

#[test]
fn random_tcp_udp_icmp_frames_roundtrip() {
    let mut r = XorShift(0x5eed);
    let mut buf = vec![0u8; 2048];
    for iter in 0..3000 {
        let eth = EthernetRepr {
            src: r.mac(),
            dst: r.mac(),
            vlan: if r.chance(30) {
                Some(VlanTag::from_tci(r.u16()))
            } else {
                None
            },
            ethertype: EtherType::IPV4,
        };
        let (src, dst) = (r.ip(), r.ip());
        let payload: Vec<u8> = (0..(r.next() % 300)).map(|_| r.next() as u8).collect();
        let ip_opts: Vec<u8> = if r.chance(20) {
            let n = (r.next() % 41) as usize;
            (0..n).map(|_| r.next() as u8).collect()
        } else {
            Vec::new()
        };
        let e = eth.emit(&mut buf).unwrap();
        let kind = iter % 3;
        let (proto, l4_len) = match kind {
            0 => (IpProtocol::TCP, 0),
            1 => (IpProtocol::UDP, 8 + payload.len()),
            _ => (IpProtocol::ICMP, 8 + payload.len()),
        };
        let tcp = TcpRepr {
            src_port: r.u16(),
            dst_port: r.u16(),
            seq: r.u32(),
            ack: r.u32(),
            flags: TcpFlags(r.u16() & 0x1ff),
            window: r.u16(),
            urgent: r.u16(),
            options: random_options(&mut r),
        };
        let l4_len = if kind == 0 {
            tcp.header_len() + payload.len()
        } else {
            l4_len
        };
        let ipr = Ipv4Repr {
            ttl: r.next() as u8,
            tos: r.next() as u8,
            ident: r.u16(),
            dont_frag: r.chance(50),
            ..Ipv4Repr::new(src, dst, proto, l4_len)
        };
        let i = ipr.emit_with_options(&mut buf[e..], &ip_opts).unwrap();
        let at = e + i;
        let udp = UdpRepr {
            src_port: r.u16(),
            dst_port: r.u16(),
        };
        let icmp = IcmpEchoRepr {
            is_reply: r.chance(50),
            ident: r.u16(),
            seq: r.u16(),
        };
        let n = match kind {
            0 => tcp.emit_segment(&mut buf[at..], &payload, &src, &dst),
            1 => udp.emit(&mut buf[at..], &payload, &src, &dst, true),
            _ => icmp.emit(&mut buf[at..], &payload),
        }
        .unwrap();
        assert_eq!(n, l4_len);
        // Ethernet padding after the IP packet must not disturb anything
        let pad = (r.next() % 20) as usize;
        buf[at + n..at + n + pad].fill(0);
        let frame = &buf[..at + n + pad];

        let f = parse_frame(frame).unwrap();
        assert_eq!(EthernetRepr::parse(&f.eth), eth);
        assert!(f.checksums_ok(), "iteration {iter}");
        let L3::Ipv4(ip, l4) = f.l3 else {
            panic!("not IPv4")
        };
        assert_eq!(Ipv4Repr::parse(&ip), ipr);
        assert_eq!(ip.header_len(), 20 + ip_opts.len().div_ceil(4) * 4);
        assert_eq!(&ip.options()[..ip_opts.len()], &ip_opts[..]);
        match l4 {
            L4::Tcp(t) => {
                assert_eq!(kind, 0);
                assert_eq!(TcpRepr::parse(&t).unwrap(), tcp);
                assert_eq!(t.payload(), &payload[..]);
            }
            L4::Udp(u) => {
                assert_eq!(kind, 1);
                assert_eq!(UdpRepr::parse(&u), udp);
                assert_eq!(u.payload(), &payload[..]);
            }
            L4::Icmp(c) => {
                assert_eq!(kind, 2);
                assert_eq!(IcmpEchoRepr::parse(&c).unwrap(), icmp);
                assert_eq!(c.payload(), &payload[..]);
            }
            other => panic!("unexpected {other:?}"),
        }
    }
}

#[test]
fn random_arp_roundtrip() {
    let mut r = XorShift(99);
    for _ in 0..1000 {
        let a = ArpRepr {
            operation: ArpOperation(r.u16()),
            sender_mac: r.mac(),
            sender_ip: r.ip(),
            target_mac: r.mac(),
            target_ip: r.ip(),
        };
        let mut buf = [0u8; 60];
        let e = EthernetRepr {
            src: a.sender_mac,
            dst: MacAddress::BROADCAST,
            vlan: None,
            ethertype: EtherType::ARP,
        }
        .emit(&mut buf)
        .unwrap();
        a.emit(&mut buf[e..]).unwrap();
        let f = parse_frame(&buf).unwrap();
        let L3::Arp(p) = f.l3 else { panic!() };
        assert_eq!(ArpRepr::parse(&p), a);
    }
}

/// Random IPv6 frames: TCP, UDP and ICMPv6 (echo, neighbour discovery) behind a random
/// chain of skippable extension headers, emitted, parsed back equal, checksums valid.
#[test]
fn random_ipv6_frames_roundtrip() {
    let mut r = XorShift(0x6666);
    let mut buf = vec![0u8; 4096];
    for iter in 0..3000 {
        let eth = EthernetRepr {
            src: r.mac(),
            dst: r.mac(),
            vlan: if r.chance(30) {
                Some(VlanTag::from_tci(r.u16()))
            } else {
                None
            },
            ethertype: EtherType::IPV6,
        };
        let addr =
            |r: &mut XorShift| Ipv6Address::from_u128((r.next() as u128) << 64 | r.next() as u128);
        let (src, dst) = (addr(&mut r), addr(&mut r));
        let payload: Vec<u8> = (0..(r.next() % 300)).map(|_| r.next() as u8).collect();
        let kind = iter % 4;
        let upper = [
            IpProtocol::TCP,
            IpProtocol::UDP,
            IpProtocol::ICMPV6,
            IpProtocol::ICMPV6,
        ][kind];
        // extension headers: optional hop-by-hop first, then up to 3 of destination
        // options / routing (segments left 0) / atomic fragment, each 8..=24 bytes
        let mut ext: Vec<u8> = Vec::new();
        let mut types: Vec<u8> = Vec::new();
        if r.chance(30) {
            types.push(0);
        }
        for _ in 0..r.next() % 4 {
            types.push([60, 43, 44][(r.next() % 3) as usize]);
        }
        for (k, &t) in types.iter().enumerate() {
            let next = types.get(k + 1).copied().unwrap_or(upper.0);
            let units = if t == 44 { 0 } else { (r.next() % 3) as u8 };
            let len = (units as usize + 1) * 8;
            let mut h = vec![0u8; len];
            h[0] = next;
            match t {
                44 => {
                    h[1] = 0;
                    h[4..8].copy_from_slice(&r.u32().to_be_bytes());
                }
                43 => {
                    h[1] = units;
                    h[2] = r.next() as u8;
                }
                _ => {
                    h[1] = units;
                    // PadN over the rest
                    h[2] = 1;
                    h[3] = (len - 4) as u8;
                }
            }
            ext.extend_from_slice(&h);
        }
        let first = types.first().map_or(upper, |&t| IpProtocol(t));
        let e = eth.emit(&mut buf).unwrap();
        let at = e + IPV6_HEADER_LEN + ext.len();
        let tcp = TcpRepr {
            src_port: r.u16(),
            dst_port: r.u16(),
            seq: r.u32(),
            ack: r.u32(),
            flags: TcpFlags(r.u16() & 0x1ff),
            window: r.u16(),
            urgent: r.u16(),
            options: random_options(&mut r),
        };
        let udp = UdpRepr {
            src_port: r.u16(),
            dst_port: r.u16(),
        };
        let echo = Icmpv6Repr::Echo {
            is_reply: r.chance(50),
            ident: r.u16(),
            seq: r.u16(),
            data: &payload,
        };
        let ns = Icmpv6Repr::NeighborSolicit {
            target: Ipv6Address::from_u128(r.next() as u128),
            source_mac: if r.chance(50) { Some(r.mac()) } else { None },
        };
        let n = match kind {
            0 => tcp.emit_segment(&mut buf[at..], &payload, &src, &dst),
            1 => udp.emit(&mut buf[at..], &payload, &src, &dst, r.chance(50)),
            2 => echo.emit(&mut buf[at..], &src, &dst),
            _ => ns.emit(&mut buf[at..], &src, &dst),
        }
        .unwrap();
        let ipr = Ipv6Repr {
            hop_limit: r.next() as u8,
            traffic_class: r.next() as u8,
            flow_label: r.u32() & 0xf_ffff,
            ..Ipv6Repr::new(src, dst, first, ext.len() + n)
        };
        ipr.emit(&mut buf[e..]).unwrap();
        buf[e + IPV6_HEADER_LEN..at].copy_from_slice(&ext);
        let pad = (r.next() % 20) as usize;
        buf[at + n..at + n + pad].fill(0);
        let frame = &buf[..at + n + pad];

        let f = parse_frame(frame).unwrap();
        assert_eq!(EthernetRepr::parse(&f.eth), eth);
        assert!(f.checksums_ok(), "iteration {iter}");
        let L3::Ipv6(ip, l4) = f.l3 else {
            panic!("not IPv6")
        };
        assert_eq!(Ipv6Repr::parse(&ip), ipr);
        let up = ip.upper_layer().unwrap();
        assert_eq!(up.offset, ext.len());
        assert_eq!(up.ext_headers as usize, types.len());
        assert_eq!(up.protocol, upper);
        match l4 {
            L4::Tcp(t) => {
                assert_eq!(kind, 0);
                assert_eq!(TcpRepr::parse(&t).unwrap(), tcp);
                assert_eq!(t.payload(), &payload[..]);
            }
            L4::Udp(u) => {
                assert_eq!(kind, 1);
                assert_eq!(UdpRepr::parse(&u), udp);
                assert_eq!(u.payload(), &payload[..]);
                assert_ne!(u.checksum(), 0);
            }
            L4::Icmpv6(c) => {
                let want = if kind == 2 { echo } else { ns };
                assert_eq!(Icmpv6Repr::parse(&c).unwrap(), want);
            }
            other => panic!("unexpected {other:?}"),
        }
    }
}
