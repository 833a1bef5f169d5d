//! Whole-frame classification: one call that walks Ethernet (+VLAN) -> ARP,
//! IPv4 -> TCP/UDP/ICMP or IPv6 (extension headers) -> TCP/UDP/ICMPv6 and returns
//! checked views of every layer.

use crate::{
    ArpPacket, EtherType, EthernetFrame, IcmpPacket, Icmpv6Packet, IpProtocol, Ipv4Packet,
    Ipv6Packet, Result, TcpPacket, UdpPacket, IPV6_HEADER_LEN,
};

/// The transport layer of an IPv4 or IPv6 packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum L4<'a> {
    /// A TCP segment.
    Tcp(TcpPacket<&'a [u8]>),
    /// A UDP datagram.
    Udp(UdpPacket<&'a [u8]>),
    /// An ICMP message (IPv4).
    Icmp(IcmpPacket<&'a [u8]>),
    /// An ICMPv6 message (IPv6).
    Icmpv6(Icmpv6Packet<&'a [u8]>),
    /// A fragment (MF set or non-zero offset; over IPv6 a fragment header that is not
    /// atomic): the transport header is not
    /// parsed because its checksum covers the reassembled datagram.
    Fragment,
    /// Another protocol.
    Other(IpProtocol),
}

/// The network layer of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum L3<'a> {
    /// An Ethernet/IPv4 ARP packet.
    Arp(ArpPacket<&'a [u8]>),
    /// An IPv4 packet and its transport layer.
    Ipv4(Ipv4Packet<&'a [u8]>, L4<'a>),
    /// An IPv6 packet and its transport layer (after the extension headers:
    /// [`Ipv6Packet::upper_layer`] tells where it starts).
    Ipv6(Ipv6Packet<&'a [u8]>, L4<'a>),
    /// Another EtherType, not parsed.
    Other(EtherType),
}

/// Every layer of a parsed frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame<'a> {
    /// The Ethernet header view (the whole frame).
    pub eth: EthernetFrame<&'a [u8]>,
    /// What it carries.
    pub l3: L3<'a>,
}

/// Parse a whole frame. Errors from inner layers are returned as they are
/// (e.g. a truncated TCP header in a valid IPv4 packet gives
/// [`Error::Truncated`](crate::Error::Truncated); an IPv6 extension header to
/// discard gives the error of [`walk_ext_headers`](crate::walk_ext_headers)).
/// Checksums are not checked here; use [`Frame::checksums_ok`].
pub fn parse_frame(buf: &[u8]) -> Result<Frame<'_>> {
    let eth = EthernetFrame::new_checked(buf)?;
    let payload = &buf[eth.header_len()..];
    let l3 = match eth.ethertype() {
        EtherType::ARP => L3::Arp(ArpPacket::new_checked(payload)?),
        EtherType::IPV4 => {
            let ip = Ipv4Packet::new_checked(payload)?;
            let seg = &payload[ip.header_len()..ip.total_len() as usize];
            let l4 = if ip.is_fragment() {
                L4::Fragment
            } else {
                match ip.protocol() {
                    IpProtocol::TCP => L4::Tcp(TcpPacket::new_checked(seg)?),
                    IpProtocol::UDP => L4::Udp(UdpPacket::new_checked(seg)?),
                    IpProtocol::ICMP => L4::Icmp(IcmpPacket::new_checked(seg)?),
                    p => L4::Other(p),
                }
            };
            L3::Ipv4(ip, l4)
        }
        EtherType::IPV6 => {
            let ip = Ipv6Packet::new_checked(payload)?;
            let up = ip.upper_layer()?;
            let end = IPV6_HEADER_LEN + ip.payload_len() as usize;
            let seg = &payload[IPV6_HEADER_LEN + up.offset..end];
            let l4 = if up.is_fragment() {
                L4::Fragment
            } else {
                match up.protocol {
                    IpProtocol::TCP => L4::Tcp(TcpPacket::new_checked(seg)?),
                    IpProtocol::UDP => L4::Udp(UdpPacket::new_checked(seg)?),
                    IpProtocol::ICMPV6 => L4::Icmpv6(Icmpv6Packet::new_checked(seg)?),
                    p => L4::Other(p),
                }
            };
            L3::Ipv6(ip, l4)
        }
        t => L3::Other(t),
    };
    Ok(Frame { eth, l3 })
}

impl Frame<'_> {
    /// True if every checksum present verifies (IPv4 header and TCP/UDP/ICMP;
    /// over IPv6 TCP/UDP/ICMPv6; a zero UDP checksum counts as valid over IPv4
    /// only). Frames without checksums are ok.
    pub fn checksums_ok(&self) -> bool {
        match &self.l3 {
            L3::Ipv4(ip, l4) => {
                ip.verify_checksum()
                    && match l4 {
                        L4::Tcp(t) => t.verify_checksum(&ip.src(), &ip.dst()),
                        L4::Udp(u) => u.verify_checksum(&ip.src(), &ip.dst()),
                        L4::Icmp(i) => i.verify_checksum(),
                        L4::Icmpv6(_) | L4::Fragment | L4::Other(_) => true,
                    }
            }
            L3::Ipv6(ip, l4) => {
                let (s, d) = (ip.src(), ip.dst());
                match l4 {
                    L4::Tcp(t) => t.verify_checksum(&s, &d),
                    L4::Udp(u) => u.verify_checksum(&s, &d),
                    L4::Icmpv6(i) => i.verify_checksum(&s, &d),
                    L4::Icmp(_) | L4::Fragment | L4::Other(_) => true,
                }
            }
            L3::Arp(_) | L3::Other(_) => true,
        }
    }

    /// [`checksums_ok`](Self::checksums_ok) as a `Result`, for `?` chains:
    /// `Err(Error::BadChecksum)` if any checksum fails.
    pub fn check_checksums(&self) -> Result<()> {
        if self.checksums_ok() {
            Ok(())
        } else {
            Err(crate::Error::BadChecksum)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        Error, EthernetRepr, IcmpEchoRepr, Ipv4Address, Ipv4Repr, MacAddress, TcpFlags, TcpOptions,
        TcpRepr, VlanTag,
    };

    fn build_tcp(vlan: Option<VlanTag>, payload: &[u8]) -> Vec<u8> {
        let src = Ipv4Address::new(198, 18, 0, 1);
        let dst = Ipv4Address::new(198, 18, 0, 2);
        let mut buf = vec![0u8; 200];
        let eth = EthernetRepr {
            src: MacAddress([2, 0, 0, 0, 0, 1]),
            dst: MacAddress([2, 0, 0, 0, 0, 2]),
            vlan,
            ethertype: EtherType::IPV4,
        };
        let e = eth.emit(&mut buf).unwrap();
        let tcp = TcpRepr {
            src_port: 1000,
            dst_port: 80,
            seq: 1,
            ack: 0,
            flags: TcpFlags::SYN,
            window: 1000,
            urgent: 0,
            options: TcpOptions {
                mss: Some(1460),
                ..TcpOptions::NONE
            },
        };
        let ipr = Ipv4Repr::new(src, dst, IpProtocol::TCP, tcp.header_len() + payload.len());
        let i = ipr.emit(&mut buf[e..]).unwrap();
        let t = tcp
            .emit_segment(&mut buf[e + i..], payload, &src, &dst)
            .unwrap();
        buf.truncate(e + i + t);
        buf
    }

    #[test]
    fn tcp_frame_with_and_without_vlan() {
        for vlan in [None, Some(VlanTag::new(42))] {
            let f = build_tcp(vlan, b"GET /");
            let p = parse_frame(&f).unwrap();
            assert_eq!(p.eth.vlan(), vlan);
            match p.l3 {
                L3::Ipv4(ip, L4::Tcp(t)) => {
                    assert_eq!(ip.protocol(), IpProtocol::TCP);
                    assert_eq!(t.payload(), b"GET /");
                    assert_eq!(t.parse_options().unwrap().mss, Some(1460));
                }
                other => panic!("{other:?}"),
            }
            assert!(p.checksums_ok());
            let mut bad = f.clone();
            let last = bad.len() - 1;
            bad[last] ^= 0x40;
            assert!(!parse_frame(&bad).unwrap().checksums_ok());
            assert_eq!(
                parse_frame(&bad).unwrap().check_checksums(),
                Err(Error::BadChecksum)
            );
            assert_eq!(p.check_checksums(), Ok(()));
        }
    }

    #[test]
    fn icmp_and_truncated_inner() {
        let src = Ipv4Address::new(10, 0, 0, 1);
        let mut buf = [0u8; 64];
        let e = EthernetRepr {
            src: MacAddress::UNSPECIFIED,
            dst: MacAddress::BROADCAST,
            vlan: None,
            ethertype: EtherType::IPV4,
        }
        .emit(&mut buf)
        .unwrap();
        let i = Ipv4Repr::new(src, src, IpProtocol::ICMP, 12)
            .emit(&mut buf[e..])
            .unwrap();
        IcmpEchoRepr {
            is_reply: false,
            ident: 1,
            seq: 2,
        }
        .emit(&mut buf[e + i..], b"ping")
        .unwrap();
        let p = parse_frame(&buf).unwrap();
        assert!(matches!(p.l3, L3::Ipv4(_, L4::Icmp(_))));
        assert!(p.checksums_ok());
        // Claim TCP with a 12-byte payload: TCP header truncated.
        let mut b = buf;
        b[e + 9] = 6;
        assert_eq!(parse_frame(&b), Err(Error::Truncated));
    }

    #[test]
    fn ipv6_frames() {
        use crate::{Icmpv6Repr, Ipv6Address, Ipv6Repr, UdpRepr};
        let src: Ipv6Address = "2001:db8::1".parse().unwrap();
        let dst: Ipv6Address = "2001:db8::2".parse().unwrap();
        let eth = |buf: &mut [u8]| {
            EthernetRepr {
                src: MacAddress([2, 0, 0, 0, 0, 1]),
                dst: MacAddress([2, 0, 0, 0, 0, 2]),
                vlan: None,
                ethertype: EtherType::IPV6,
            }
            .emit(buf)
            .unwrap()
        };
        // UDP behind a destination options header
        let mut buf = [0u8; 128];
        let e = eth(&mut buf);
        let i = Ipv6Repr::new(src, dst, IpProtocol(60), 8 + 8 + 3)
            .emit(&mut buf[e..])
            .unwrap();
        buf[e + i..e + i + 8].copy_from_slice(&[17, 0, 1, 4, 0, 0, 0, 0]);
        let u = UdpRepr {
            src_port: 53,
            dst_port: 5353,
        }
        .emit(&mut buf[e + i + 8..], b"abc", &src, &dst, false)
        .unwrap();
        let n = e + i + 8 + u;
        let p = parse_frame(&buf[..n]).unwrap();
        let L3::Ipv6(ip, L4::Udp(d)) = p.l3 else {
            panic!("{:?}", p.l3)
        };
        assert_eq!(ip.src(), src);
        assert_eq!(d.payload(), b"abc");
        assert_ne!(d.checksum(), 0, "IPv6 UDP always carries a checksum");
        assert!(p.checksums_ok());
        let mut bad = buf;
        bad[n - 1] ^= 1;
        assert!(!parse_frame(&bad[..n]).unwrap().checksums_ok());
        // a zero UDP checksum is invalid over IPv6
        let mut z = buf;
        z[e + i + 8 + 6..e + i + 8 + 8].fill(0);
        assert!(!parse_frame(&z[..n]).unwrap().checksums_ok());
        // an option to discard
        let mut d = buf;
        d[e + i + 2] = 0x80;
        assert_eq!(parse_frame(&d[..n]), Err(Error::Unsupported));

        // ICMPv6 echo
        let mut buf = [0u8; 128];
        let e = eth(&mut buf);
        let r = Icmpv6Repr::Echo {
            is_reply: false,
            ident: 1,
            seq: 2,
            data: b"ping",
        };
        let i = Ipv6Repr::new(src, dst, IpProtocol::ICMPV6, r.buffer_len())
            .emit(&mut buf[e..])
            .unwrap();
        let m = r.emit(&mut buf[e + i..], &src, &dst).unwrap();
        let p = parse_frame(&buf[..e + i + m]).unwrap();
        assert!(matches!(p.l3, L3::Ipv6(_, L4::Icmpv6(_))));
        assert!(p.checksums_ok());
        // a non-atomic fragment
        let mut f = [0u8; 128];
        let e = eth(&mut f);
        let i = Ipv6Repr::new(src, dst, IpProtocol(44), 16)
            .emit(&mut f[e..])
            .unwrap();
        f[e + i..e + i + 8].copy_from_slice(&[6, 0, 0, 8, 0, 0, 0, 1]);
        let p = parse_frame(&f[..e + i + 16]).unwrap();
        assert!(matches!(p.l3, L3::Ipv6(_, L4::Fragment)));
    }
}
