//! Totality: random byte strings (seeded xorshift) and mutated valid frames
//! go through every parser and every accessor of every parsed view, via the
//! same harness functions the fuzz targets use. Any panic fails the test.

use squall_wire::fuzzing;
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
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn fill(&mut self, b: &mut [u8]) {
        for x in b {
            *x = self.next() as u8;
        }
    }
}

fn all(data: &[u8]) {
    fuzzing::frame(data);
    fuzzing::ethernet(data);
    fuzzing::arp(data);
    fuzzing::ipv4(data);
    fuzzing::tcp(data);
    fuzzing::tcp_options(data);
    fuzzing::udp(data);
    fuzzing::icmp(data);
    fuzzing::ipv6(data);
    fuzzing::icmpv6(data);
    fuzzing::checksums(data);
}

const SRC6: Ipv6Address = Ipv6Address::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
const DST6: Ipv6Address = Ipv6Address::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2);

/// Ethernet + IPv6 (+ `ext`, already chained to the upper layer) + what `body` writes.
fn ipv6_frame(first: IpProtocol, ext: &[u8], body: impl FnOnce(&mut [u8]) -> usize) -> Vec<u8> {
    let mut buf = vec![0u8; 2048];
    let e = eth(None, EtherType::IPV6, &mut buf);
    let at = e + IPV6_HEADER_LEN;
    buf[at..at + ext.len()].copy_from_slice(ext);
    let n = body(&mut buf[at + ext.len()..]);
    Ipv6Repr::new(SRC6, DST6, first, ext.len() + n)
        .emit(&mut buf[e..])
        .unwrap();
    buf.truncate(at + ext.len() + n);
    buf
}

fn ipv6_corpus() -> Vec<Vec<u8>> {
    let t = TcpRepr {
        src_port: 40000,
        dst_port: 80,
        seq: 1,
        ack: 2,
        flags: TcpFlags::ACK,
        window: 1000,
        urgent: 0,
        options: TcpOptions {
            timestamps: Some(Timestamps { tsval: 1, tsecr: 2 }),
            ..TcpOptions::NONE
        },
    };
    let hbh_dst: &[u8] = &[60, 0, 5, 2, 0, 0, 1, 0, 6, 0, 1, 2, 0, 0, 0x1e, 0];
    let frag: &[u8] = &[17, 0, 0, 0, 0, 0, 0, 9]; // atomic fragment
    vec![
        ipv6_frame(IpProtocol(0), hbh_dst, |b| {
            t.emit_segment(b, b"hello6", &SRC6, &DST6).unwrap()
        }),
        ipv6_frame(IpProtocol(44), frag, |b| {
            UdpRepr {
                src_port: 53,
                dst_port: 5353,
            }
            .emit(b, b"udp6", &SRC6, &DST6, true)
            .unwrap()
        }),
        ipv6_frame(IpProtocol::ICMPV6, &[], |b| {
            Icmpv6Repr::NeighborSolicit {
                target: DST6,
                source_mac: Some(MacAddress([2, 0, 0, 0, 0, 1])),
            }
            .emit(b, &SRC6, &DST6)
            .unwrap()
        }),
        ipv6_frame(IpProtocol::ICMPV6, &[], |b| {
            Icmpv6Repr::Echo {
                is_reply: true,
                ident: 7,
                seq: 8,
                data: b"ping6",
            }
            .emit(b, &SRC6, &DST6)
            .unwrap()
        }),
    ]
}

const SRC: Ipv4Address = Ipv4Address::new(198, 18, 0, 1);
const DST: Ipv4Address = Ipv4Address::new(198, 18, 0, 2);

fn eth(vlan: Option<VlanTag>, t: EtherType, buf: &mut [u8]) -> usize {
    EthernetRepr {
        src: MacAddress([2, 0, 0, 0, 0, 1]),
        dst: MacAddress([2, 0, 0, 0, 0, 2]),
        vlan,
        ethertype: t,
    }
    .emit(buf)
    .unwrap()
}

fn tcp_frame(vlan: Option<VlanTag>, opts: TcpOptions, ip_opts: &[u8], payload: &[u8]) -> Vec<u8> {
    let mut buf = vec![0u8; 2048];
    let e = eth(vlan, EtherType::IPV4, &mut buf);
    let t = TcpRepr {
        src_port: 40000,
        dst_port: 80,
        seq: 0xdead_beef,
        ack: 0x0102_0304,
        flags: TcpFlags::ACK | TcpFlags::PSH,
        window: 502,
        urgent: 0,
        options: opts,
    };
    let i = Ipv4Repr::new(SRC, DST, IpProtocol::TCP, t.header_len() + payload.len())
        .emit_with_options(&mut buf[e..], ip_opts)
        .unwrap();
    let n = t
        .emit_segment(&mut buf[e + i..], payload, &SRC, &DST)
        .unwrap();
    buf.truncate(e + i + n);
    buf
}

fn corpus() -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    let sack = SackBlocks::from_slice(&[
        SackBlock {
            left: 1,
            right: 100,
        },
        SackBlock {
            left: 200,
            right: 300,
        },
    ])
    .unwrap();
    let syn_opts = TcpOptions {
        mss: Some(1460),
        window_scale: Some(7),
        sack_permitted: true,
        timestamps: Some(Timestamps {
            tsval: 12345,
            tsecr: 0,
        }),
        sack: SackBlocks::new(),
    };
    let data_opts = TcpOptions {
        timestamps: Some(Timestamps { tsval: 1, tsecr: 2 }),
        sack,
        ..TcpOptions::NONE
    };
    v.push(tcp_frame(None, syn_opts, &[], &[]));
    v.push(tcp_frame(Some(VlanTag::new(100)), data_opts, &[], b"hello"));
    v.push(tcp_frame(
        None,
        TcpOptions::NONE,
        &[0x94, 4, 0, 0],
        &[7; 100],
    ));
    // UDP
    let mut buf = vec![0u8; 256];
    let e = eth(None, EtherType::IPV4, &mut buf);
    let i = Ipv4Repr::new(SRC, DST, IpProtocol::UDP, 8 + 11)
        .emit(&mut buf[e..])
        .unwrap();
    let u = UdpRepr {
        src_port: 53,
        dst_port: 5353,
    }
    .emit(&mut buf[e + i..], b"udp payload", &SRC, &DST, true)
    .unwrap();
    buf.truncate(e + i + u);
    v.push(buf);
    // ICMP echo
    let mut buf = vec![0u8; 256];
    let e = eth(Some(VlanTag::new(5)), EtherType::IPV4, &mut buf);
    let i = Ipv4Repr::new(SRC, DST, IpProtocol::ICMP, 8 + 4)
        .emit(&mut buf[e..])
        .unwrap();
    let c = IcmpEchoRepr {
        is_reply: false,
        ident: 9,
        seq: 1,
    }
    .emit(&mut buf[e + i..], b"ping")
    .unwrap();
    buf.truncate(e + i + c);
    v.push(buf);
    // ARP (padded to 60 bytes like on the wire)
    let mut buf = vec![0u8; 60];
    let e = eth(None, EtherType::ARP, &mut buf);
    ArpRepr::request(MacAddress([2, 0, 0, 0, 0, 1]), SRC, DST)
        .emit(&mut buf[e..])
        .unwrap();
    v.push(buf);
    v.extend(ipv6_corpus());
    v
}

#[test]
fn corpus_is_valid() {
    for f in corpus() {
        let p = parse_frame(&f).unwrap();
        assert!(p.checksums_ok(), "{f:02x?}");
        all(&f);
    }
}

#[test]
fn random_byte_strings() {
    let mut r = XorShift(0x0123_4567_89ab_cdef);
    let mut buf = [0u8; 256];
    for _ in 0..100_000 {
        let n = r.below(buf.len() + 1);
        r.fill(&mut buf[..n]);
        all(&buf[..n]);
    }
}

/// Random bytes behind plausible headers, so the inner layers are reached.
#[test]
fn random_payloads_behind_valid_prefixes() {
    let mut r = XorShift(42);
    let prefixes: [&[u8]; 7] = [
        &[0x45],                                            // IPv4, IHL 5
        &[0x4f],                                            // IPv4, IHL 15
        &[0x60],                                            // IPv6
        &[0x60, 0, 0, 0, 0, 0, 0],                          // IPv6, hop-by-hop first
        &[0x87, 0],                                         // ICMPv6 neighbour solicitation
        &[0, 1, 8, 0, 6, 4],                                // ARP Ethernet/IPv4
        &[0x12, 0x34, 0, 80, 0, 0, 0, 1, 0, 0, 0, 0, 0xf0], // TCP, offset 15
    ];
    let mut buf = [0u8; 128];
    let mut reached = [0usize; 4];
    for _ in 0..50_000 {
        let p = prefixes[r.below(prefixes.len())];
        let n = p.len() + r.below(buf.len() - p.len() + 1);
        r.fill(&mut buf[..n]);
        buf[..p.len()].copy_from_slice(p);
        if p[0] >> 4 == 4 && n >= 4 && r.below(2) == 0 {
            // make the IPv4 total length consistent half of the time
            buf[2..4].copy_from_slice(&(n as u16).to_be_bytes());
        }
        if p[0] == 0x60 && n >= 40 && r.below(2) == 0 {
            // and the IPv6 payload length
            buf[4..6].copy_from_slice(&(n as u16 - 40).to_be_bytes());
            if r.below(2) == 0 {
                buf[6] = [0, 43, 44, 60, 6, 17, 58][r.below(7)];
            }
        }
        all(&buf[..n]);
        reached[0] += Ipv4Packet::new_checked(&buf[..n]).is_ok() as usize;
        reached[1] += ArpPacket::new_checked(&buf[..n]).is_ok() as usize;
        reached[2] += TcpPacket::new_checked(&buf[..n])
            .map(|t| t.header_len() == 60)
            .unwrap_or(false) as usize;
        reached[3] += Ipv6Packet::new_checked(&buf[..n])
            .map(|p| p.upper_layer().is_ok())
            .unwrap_or(false) as usize;
        // and the same behind an Ethernet header
        let mut f = vec![0u8; 14 + n];
        (f[12], f[13]) = match p[0] {
            0x60 => (0x86, 0xdd),
            _ if p.len() == 6 => (0x08, 0x06),
            _ => (0x08, 0x00),
        };
        f[14..].copy_from_slice(&buf[..n]);
        all(&f);
    }
    // the harness really got past the header checks of each parser
    assert!(reached.iter().all(|&c| c > 1000), "{reached:?}");
}

#[test]
fn mutated_valid_frames() {
    let corpus = corpus();
    let mut r = XorShift(0xfeed_f00d);
    for _ in 0..60_000 {
        let mut f = corpus[r.below(corpus.len())].clone();
        let edits = 1 + r.below(4);
        for _ in 0..edits {
            match r.below(5) {
                0 | 1 => {
                    let i = r.below(f.len());
                    f[i] ^= 1 << r.below(8);
                }
                2 => {
                    let i = r.below(f.len());
                    f[i] = [0, 1, 2, 0x7f, 0x80, 0xff][r.below(6)];
                }
                3 => {
                    let n = r.below(f.len() + 1);
                    f.truncate(n);
                }
                _ => {
                    let extra = r.below(32);
                    for _ in 0..extra {
                        f.push(r.next() as u8);
                    }
                }
            }
            if f.is_empty() {
                break;
            }
        }
        all(&f);
        // also drive the layers directly at every offset a layer may start at
        for off in [14usize, 18, 34, 38, 54, 62, 70] {
            if let Some(rest) = f.get(off..) {
                all(rest);
            }
        }
    }
}

/// Single bit flips anywhere in a valid frame must never pass all checksums
/// undetected when they land in a checksummed region.
#[test]
fn bit_flips_are_caught_by_checksums() {
    for f in corpus() {
        let p = parse_frame(&f).unwrap();
        let (start, end) = match p.l3 {
            L3::Ipv4(ip, _) => {
                let s = p.eth.header_len();
                (s, s + ip.total_len() as usize)
            }
            _ => continue,
        };
        for byte in start..end {
            for bit in 0..8 {
                let mut g = f.clone();
                g[byte] ^= 1 << bit;
                if let Ok(q) = parse_frame(&g) {
                    assert!(!q.checksums_ok(), "flip at {byte}.{bit} undetected");
                }
            }
        }
    }
}

/// Over IPv6 (no header checksum) a single bit flip in the addresses or the upper
/// layer must be caught by the pseudo-header checksum.
#[test]
fn ipv6_bit_flips_are_caught_by_checksums() {
    for f in ipv6_corpus() {
        let p = parse_frame(&f).unwrap();
        let L3::Ipv6(ip, _) = p.l3 else { panic!() };
        let s = p.eth.header_len();
        let upper = s + IPV6_HEADER_LEN + ip.upper_layer().unwrap().offset;
        for byte in (s + 8..s + IPV6_HEADER_LEN).chain(upper..f.len()) {
            for bit in 0..8 {
                let mut g = f.clone();
                g[byte] ^= 1 << bit;
                if let Ok(q) = parse_frame(&g) {
                    assert!(!q.checksums_ok(), "flip at {byte}.{bit} undetected");
                }
            }
        }
    }
}
