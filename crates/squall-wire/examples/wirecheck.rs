//! wirecheck: a bridge for cross-checking squall-wire against independent
//! implementations (scapy, tshark; see tests/crosscheck/).
//!
//! `wirecheck parse` reads frames as hex, one per line (an empty line is an
//! empty frame), from stdin and prints one JSON object per line with every
//! field squall-wire parsed.
//! `wirecheck build OUT.pcap` writes a pcap of frames made by squall-wire's
//! builders and prints, per frame, one JSON line describing what was built.
//! `wirecheck seeds DIR` writes those frames (and each layer) as fuzz seeds.

use squall_wire::*;
use std::fmt::Write as _;
use std::io::{self, BufRead, Write};

/// A minimal JSON object writer (keys are static identifiers).
struct Obj {
    s: String,
    first: bool,
}

impl Obj {
    fn new() -> Obj {
        Obj {
            s: String::from("{"),
            first: true,
        }
    }
    fn key(&mut self, k: &str) {
        if !self.first {
            self.s.push(',');
        }
        self.first = false;
        let _ = write!(self.s, "\"{k}\":");
    }
    fn num(mut self, k: &str, v: impl Into<u64>) -> Obj {
        self.key(k);
        let _ = write!(self.s, "{}", v.into());
        self
    }
    fn bool(mut self, k: &str, v: bool) -> Obj {
        self.key(k);
        self.s.push_str(if v { "true" } else { "false" });
        self
    }
    fn str(mut self, k: &str, v: &str) -> Obj {
        self.key(k);
        self.s.push('"');
        for c in v.chars() {
            match c {
                '"' => self.s.push_str("\\\""),
                '\\' => self.s.push_str("\\\\"),
                c if (c as u32) < 0x20 => {
                    let _ = write!(self.s, "\\u{:04x}", c as u32);
                }
                c => self.s.push(c),
            }
        }
        self.s.push('"');
        self
    }
    fn raw(mut self, k: &str, json: &str) -> Obj {
        self.key(k);
        self.s.push_str(json);
        self
    }
    fn null(self, k: &str) -> Obj {
        self.raw(k, "null")
    }
    fn end(mut self) -> String {
        self.s.push('}');
        self.s
    }
}

fn hex(b: &[u8]) -> String {
    let mut s = String::with_capacity(b.len() * 2);
    for x in b {
        let _ = write!(s, "{x:02x}");
    }
    s
}

fn unhex(line: &str) -> Option<Vec<u8>> {
    let digits: Vec<u8> = line.bytes().filter(|c| !c.is_ascii_whitespace()).collect();
    if digits.len() & 1 != 0 {
        return None;
    }
    digits
        .chunks(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).ok()?, 16).ok())
        .collect()
}

fn err_name(e: Error) -> &'static str {
    match e {
        Error::Truncated => "Truncated",
        Error::Malformed => "Malformed",
        Error::BadChecksum => "BadChecksum",
        Error::Unsupported => "Unsupported",
        Error::NoSpace => "NoSpace",
    }
}

fn tcp_options_json(t: &TcpPacket<&[u8]>) -> String {
    let mut items = Vec::new();
    for o in t.options_iter() {
        let j = match o {
            Ok(TcpOption::EndOfList) => Obj::new().str("kind", "eol").end(),
            Ok(TcpOption::Nop) => Obj::new().str("kind", "nop").end(),
            Ok(TcpOption::Mss(m)) => Obj::new().str("kind", "mss").num("value", m).end(),
            Ok(TcpOption::WindowScale(s)) => Obj::new().str("kind", "wscale").num("value", s).end(),
            Ok(TcpOption::SackPermitted) => Obj::new().str("kind", "sackok").end(),
            Ok(TcpOption::Sack(b)) => {
                let blocks: Vec<String> = b
                    .as_slice()
                    .iter()
                    .map(|x| format!("[{},{}]", x.left, x.right))
                    .collect();
                Obj::new()
                    .str("kind", "sack")
                    .raw("blocks", &format!("[{}]", blocks.join(",")))
                    .end()
            }
            Ok(TcpOption::Timestamps { tsval, tsecr }) => Obj::new()
                .str("kind", "ts")
                .num("tsval", tsval)
                .num("tsecr", tsecr)
                .end(),
            Ok(TcpOption::Unknown { kind, data }) => Obj::new()
                .str("kind", "unknown")
                .num("type", kind)
                .str("data", &hex(data))
                .end(),
            Err(e) => Obj::new()
                .str("kind", "error")
                .str("error", err_name(e))
                .end(),
        };
        items.push(j);
    }
    format!("[{}]", items.join(","))
}

fn ndp_json(i: &Icmpv6Packet<&[u8]>) -> Option<String> {
    let j = match Icmpv6Repr::parse(i).ok()? {
        Icmpv6Repr::NeighborSolicit { target, source_mac } => {
            let o = Obj::new().str("target", &target.to_string());
            match source_mac {
                Some(m) => o.str("lladdr", &m.to_string()),
                None => o.null("lladdr"),
            }
        }
        Icmpv6Repr::NeighborAdvert {
            flags,
            target,
            target_mac,
        } => {
            let o = Obj::new()
                .str("target", &target.to_string())
                .bool("router", flags.router)
                .bool("solicited", flags.solicited)
                .bool("override", flags.override_);
            match target_mac {
                Some(m) => o.str("lladdr", &m.to_string()),
                None => o.null("lladdr"),
            }
        }
        Icmpv6Repr::RouterAdvert(ra) => {
            let o = Obj::new()
                .num("chlim", ra.hop_limit)
                .num("routerlifetime", ra.router_lifetime)
                .num("reachabletime", ra.reachable_time)
                .num("retranstimer", ra.retrans_timer);
            let o = match ra.source_mac {
                Some(m) => o.str("lladdr", &m.to_string()),
                None => o.null("lladdr"),
            };
            let o = match ra.mtu {
                Some(m) => o.num("mtu", m),
                None => o.null("mtu"),
            };
            match ra.prefix {
                Some(p) => o
                    .str("prefix", &p.prefix.to_string())
                    .num("prefixlen", p.prefix_len),
                None => o.null("prefix"),
            }
        }
        Icmpv6Repr::Echo { .. }
        | Icmpv6Repr::RouterSolicit { .. }
        | Icmpv6Repr::PacketTooBig { .. } => return None,
    };
    Some(j.end())
}

/// The transport layer's JSON, checksums verified between `s` and `d`.
/// `v6`: the IPv6 addresses, for the ICMPv6 checksum.
fn l4_json<A: squall_wire::checksum::PseudoHeader>(
    o: Obj,
    l4: L4<'_>,
    s: &A,
    d: &A,
    v6: Option<(Ipv6Address, Ipv6Address)>,
) -> Obj {
    match l4 {
        L4::Tcp(t) => o.raw(
            "tcp",
            &Obj::new()
                .num("sport", t.src_port())
                .num("dport", t.dst_port())
                .num("seq", t.seq_number())
                .num("ack", t.ack_number())
                .num("dataofs", (t.header_len() / 4) as u64)
                .num("flags", t.flags().0)
                .num("window", t.window_len())
                .num("checksum", t.checksum())
                .bool("checksum_ok", t.verify_checksum(s, d))
                .num("urgptr", t.urgent_at())
                .raw("options", &tcp_options_json(&t))
                .num("payload_len", t.payload().len() as u64)
                .end(),
        ),
        L4::Udp(u) => o.raw(
            "udp",
            &Obj::new()
                .num("sport", u.src_port())
                .num("dport", u.dst_port())
                .num("len", u.len())
                .num("checksum", u.checksum())
                .bool("checksum_ok", u.verify_checksum(s, d))
                .num("payload_len", u.payload().len() as u64)
                .end(),
        ),
        L4::Icmp(i) => o.raw(
            "icmp",
            &Obj::new()
                .num("type", i.msg_type())
                .num("code", i.code())
                .num("checksum", i.checksum())
                .bool("checksum_ok", i.verify_checksum())
                .num("id", i.echo_ident())
                .num("seq", i.echo_seq())
                .num("payload_len", i.payload().len() as u64)
                .end(),
        ),
        L4::Icmpv6(i) => {
            let ok = v6.is_some_and(|(s, d)| i.verify_checksum(&s, &d));
            let mut j = Obj::new()
                .num("type", i.msg_type())
                .num("code", i.code())
                .num("checksum", i.checksum())
                .bool("checksum_ok", ok)
                .num("id", i.echo_ident())
                .num("seq", i.echo_seq())
                .num("payload_len", i.payload().len() as u64);
            if let Some(n) = ndp_json(&i) {
                j = j.raw("ndp", &n);
            }
            if i.msg_type() == icmpv6::msg_type::PACKET_TOO_BIG {
                j = j.num("mtu", i.word1());
            }
            o.raw("icmpv6", &j.end())
        }
        L4::Fragment => o.bool("fragment", true),
        L4::Other(p) => o.num("other_proto", p.0),
    }
}

fn parse_one(data: &[u8]) -> String {
    let mut o = Obj::new().num("len", data.len() as u64);
    let eth = match EthernetFrame::new_checked(data) {
        Ok(e) => e,
        Err(e) => return o.str("error", err_name(e)).end(),
    };
    let mut ej = Obj::new()
        .str("src", &eth.src().to_string())
        .str("dst", &eth.dst().to_string())
        .num("ethertype", eth.ethertype().0)
        .num("header_len", eth.header_len() as u64);
    ej = match eth.vlan() {
        Some(v) => ej.raw(
            "vlan",
            &Obj::new()
                .num("pcp", v.pcp)
                .bool("dei", v.dei)
                .num("vid", v.vid)
                .end(),
        ),
        None => ej.null("vlan"),
    };
    o = o.raw("eth", &ej.end());
    let frame = match parse_frame(data) {
        Ok(f) => f,
        Err(e) => return o.str("error", err_name(e)).end(),
    };
    o = o.bool("checksums_ok", frame.checksums_ok());
    match frame.l3 {
        L3::Arp(a) => {
            o = o.raw(
                "arp",
                &Obj::new()
                    .num("op", a.operation().0)
                    .str("sha", &a.sender_mac().to_string())
                    .str("spa", &a.sender_ip().to_string())
                    .str("tha", &a.target_mac().to_string())
                    .str("tpa", &a.target_ip().to_string())
                    .end(),
            );
        }
        L3::Ipv4(ip, l4) => {
            o = o.raw(
                "ipv4",
                &Obj::new()
                    .num("version", ip.version())
                    .num("ihl", (ip.header_len() / 4) as u64)
                    .num("tos", ip.tos())
                    .num("total_len", ip.total_len())
                    .num("ident", ip.ident())
                    .bool("df", ip.dont_frag())
                    .bool("mf", ip.more_frags())
                    .num("frag", ip.frag_offset_units())
                    .num("ttl", ip.ttl())
                    .num("proto", ip.protocol().0)
                    .num("checksum", ip.checksum())
                    .bool("checksum_ok", ip.verify_checksum())
                    .str("src", &ip.src().to_string())
                    .str("dst", &ip.dst().to_string())
                    .str("options", &hex(ip.options()))
                    .end(),
            );
            o = l4_json(o, l4, &ip.src(), &ip.dst(), None);
        }
        L3::Ipv6(ip, l4) => {
            let mut j = Obj::new()
                .num("version", ip.version())
                .num("tc", ip.traffic_class())
                .num("fl", ip.flow_label())
                .num("plen", ip.payload_len())
                .num("nh", ip.next_header().0)
                .num("hlim", ip.hop_limit())
                .str("src", &ip.src().to_string())
                .str("dst", &ip.dst().to_string());
            if let Ok(u) = ip.upper_layer() {
                j = j
                    .num("upper_proto", u.protocol.0)
                    .num("ext_headers", u.ext_headers)
                    .num("upper_offset", u.offset as u64);
            }
            o = o.raw("ipv6", &j.end());
            o = l4_json(o, l4, &ip.src(), &ip.dst(), Some((ip.src(), ip.dst())));
        }
        L3::Other(t) => o = o.num("other_ethertype", t.0),
    }
    o.end()
}

fn cmd_parse() -> io::Result<()> {
    let stdin = io::stdin();
    let mut out = io::BufWriter::new(io::stdout().lock());
    for line in stdin.lock().lines() {
        // an empty line is an empty frame (one output object per line)
        let line = line?;
        let j = match unhex(&line) {
            Some(d) => parse_one(&d),
            None => Obj::new().str("error", "hex").end(),
        };
        writeln!(out, "{j}")?;
    }
    out.flush()
}

// ---------------------------------------------------------------- build mode

const MAC_A: MacAddress = MacAddress([0x02, 0x00, 0x00, 0x00, 0x00, 0x01]);
const MAC_B: MacAddress = MacAddress([0x02, 0x00, 0x00, 0x00, 0x00, 0x02]);
const IP_A: Ipv4Address = Ipv4Address::new(198, 18, 0, 1);
const IP_B: Ipv4Address = Ipv4Address::new(198, 19, 0, 2);

/// A frame under construction plus its JSON description.
struct Built {
    frame: Vec<u8>,
    desc: String,
}

fn eth_hdr(buf: &mut [u8], vlan: Option<VlanTag>, t: EtherType) -> usize {
    EthernetRepr {
        src: MAC_A,
        dst: MAC_B,
        vlan,
        ethertype: t,
    }
    .emit(buf)
    .expect("buffer sized for it")
}

fn vlan_json(vlan: Option<VlanTag>) -> String {
    match vlan {
        Some(v) => Obj::new()
            .num("pcp", v.pcp)
            .bool("dei", v.dei)
            .num("vid", v.vid)
            .end(),
        None => "null".into(),
    }
}

fn payload(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

struct TcpCase {
    name: &'static str,
    vlan: Option<VlanTag>,
    ip_opts: &'static [u8],
    flags: TcpFlags,
    /// Either a canonical option set or raw options from the writer.
    opts: TcpOptions,
    raw_opts: &'static [TcpOption<'static>],
    payload_len: usize,
}

fn build_tcp(c: &TcpCase, i: usize) -> Built {
    let mut buf = vec![0u8; 2048];
    let e = eth_hdr(&mut buf, c.vlan, EtherType::IPV4);
    let seq = 0x1000_0000u32.wrapping_mul(i as u32 + 1) ^ 0x55aa;
    let ack = if c.flags.ack() {
        0xfedc_ba98u32.wrapping_add(i as u32)
    } else {
        0
    };
    let tcp = TcpRepr {
        src_port: 40000 + i as u16,
        dst_port: 80,
        seq,
        ack,
        flags: c.flags,
        window: 29200 + i as u16,
        urgent: 0,
        options: c.opts,
    };
    // raw option lists go through the writer and replace the canonical set
    let mut raw = [0u8; MAX_OPTIONS_LEN];
    let raw_len = if c.raw_opts.is_empty() {
        None
    } else {
        let mut w = TcpOptionWriter::new(&mut raw);
        for o in c.raw_opts {
            w.push(o).expect("case fits");
        }
        Some(w.finish().expect("case fits"))
    };
    let hl = 20 + raw_len.unwrap_or_else(|| c.opts.wire_len());
    let pl = payload(c.payload_len, i as u8);
    let ip = Ipv4Repr {
        ident: 0x100 + i as u16,
        ..Ipv4Repr::new(IP_A, IP_B, IpProtocol::TCP, hl + pl.len())
    };
    let ih = ip
        .emit_with_options(&mut buf[e..], c.ip_opts)
        .expect("fits");
    let seg_at = e + ih;
    let n = match raw_len {
        None => tcp
            .emit_segment(&mut buf[seg_at..], &pl, &IP_A, &IP_B)
            .expect("fits"),
        Some(ol) => {
            let t = TcpRepr {
                options: TcpOptions::NONE,
                ..tcp
            };
            t.emit(&mut buf[seg_at..]).expect("fits");
            let seg = &mut buf[seg_at..seg_at + hl + pl.len()];
            seg[20..hl].copy_from_slice(&raw[..ol]);
            seg[hl..].copy_from_slice(&pl);
            let mut p = TcpPacket::new_unchecked(seg);
            p.set_header_len(hl);
            p.fill_checksum(&IP_A, &IP_B);
            hl + pl.len()
        }
    };
    buf.truncate(seg_at + n);
    let opts_json = {
        let p = TcpPacket::new_checked(&buf[seg_at..]).expect("just built");
        tcp_options_json(&p)
    };
    let desc = Obj::new()
        .str("name", c.name)
        .str("kind", "tcp")
        .raw("vlan", &vlan_json(c.vlan))
        .str("ip_options", &hex(c.ip_opts))
        .num("ihl", (ih / 4) as u64)
        .num("ident", ip.ident)
        .num("ttl", ip.ttl)
        .num("sport", tcp.src_port)
        .num("dport", tcp.dst_port)
        .num("seq", seq)
        .num("ack", ack)
        .num("flags", c.flags.0)
        .num("window", tcp.window)
        .num("dataofs", (hl / 4) as u64)
        .raw("options", &opts_json)
        .num("payload_len", pl.len() as u64)
        .end();
    Built { frame: buf, desc }
}

fn sack(blocks: &[(u32, u32)]) -> SackBlocks {
    let v: Vec<SackBlock> = blocks
        .iter()
        .map(|&(left, right)| SackBlock { left, right })
        .collect();
    SackBlocks::from_slice(&v).expect("<= 4 blocks")
}

fn all_frames() -> Vec<Built> {
    let syn_opts = TcpOptions {
        mss: Some(1460),
        window_scale: Some(7),
        sack_permitted: true,
        timestamps: Some(Timestamps {
            tsval: 0x1234_5678,
            tsecr: 0,
        }),
        sack: SackBlocks::new(),
    };
    let ts = Some(Timestamps {
        tsval: 1000,
        tsecr: 999,
    });
    let b4 = [(100, 200), (300, 400), (500, 600), (700, 800)];
    static RAW1: [TcpOption<'static>; 5] = [
        TcpOption::Mss(536),
        TcpOption::Nop,
        TcpOption::WindowScale(14),
        TcpOption::SackPermitted,
        TcpOption::Unknown {
            kind: 253,
            data: &[0xde, 0xad],
        },
    ];
    static RAW2: [TcpOption<'static>; 3] = [
        TcpOption::Nop,
        TcpOption::Timestamps { tsval: 7, tsecr: 8 },
        TcpOption::EndOfList,
    ];
    let mut cases = vec![
        TcpCase {
            name: "syn_all_options",
            vlan: None,
            ip_opts: &[],
            flags: TcpFlags::SYN,
            opts: syn_opts,
            raw_opts: &[],
            payload_len: 0,
        },
        TcpCase {
            name: "synack_mss_sackok_ws",
            vlan: None,
            ip_opts: &[],
            flags: TcpFlags::SYN | TcpFlags::ACK,
            opts: TcpOptions {
                timestamps: None,
                ..syn_opts
            },
            raw_opts: &[],
            payload_len: 0,
        },
        TcpCase {
            name: "data_ts",
            vlan: None,
            ip_opts: &[],
            flags: TcpFlags::ACK | TcpFlags::PSH,
            opts: TcpOptions {
                timestamps: ts,
                ..TcpOptions::NONE
            },
            raw_opts: &[],
            payload_len: 1448,
        },
        TcpCase {
            name: "fin_no_options_odd_payload",
            vlan: None,
            ip_opts: &[],
            flags: TcpFlags::FIN | TcpFlags::ACK,
            opts: TcpOptions::NONE,
            raw_opts: &[],
            payload_len: 37,
        },
        TcpCase {
            name: "rst",
            vlan: None,
            ip_opts: &[],
            flags: TcpFlags::RST | TcpFlags::ACK,
            opts: TcpOptions::NONE,
            raw_opts: &[],
            payload_len: 0,
        },
        TcpCase {
            name: "vlan_data",
            vlan: Some(VlanTag {
                pcp: 5,
                dei: false,
                vid: 100,
            }),
            ip_opts: &[],
            flags: TcpFlags::ACK,
            opts: TcpOptions {
                timestamps: ts,
                ..TcpOptions::NONE
            },
            raw_opts: &[],
            payload_len: 100,
        },
        TcpCase {
            name: "ip_options_router_alert",
            vlan: None,
            ip_opts: &[0x94, 0x04, 0x00, 0x00],
            flags: TcpFlags::ACK,
            opts: TcpOptions::NONE,
            raw_opts: &[],
            payload_len: 10,
        },
        TcpCase {
            name: "ip_options_nop_rr",
            vlan: Some(VlanTag::new(4094)),
            // NOP, record route (len 11, ptr 4, two empty slots), EOL
            ip_opts: &[1, 7, 11, 4, 0, 0, 0, 0, 0, 0, 0, 0],
            flags: TcpFlags::ACK,
            opts: TcpOptions::NONE,
            raw_opts: &[],
            payload_len: 1,
        },
        TcpCase {
            name: "raw_options_unknown_kind",
            vlan: None,
            ip_opts: &[],
            flags: TcpFlags::SYN,
            opts: TcpOptions::NONE,
            raw_opts: &RAW1,
            payload_len: 0,
        },
        TcpCase {
            name: "raw_options_eol_padding",
            vlan: None,
            ip_opts: &[],
            flags: TcpFlags::ACK,
            opts: TcpOptions::NONE,
            raw_opts: &RAW2,
            payload_len: 5,
        },
    ];
    for nb in 1..=4usize {
        // four blocks only fit without timestamps (12 + 4 + 32 > 40)
        let with_ts = nb < 4;
        cases.push(TcpCase {
            name: ["sack_1", "sack_2", "sack_3", "sack_4"][nb - 1],
            vlan: None,
            ip_opts: &[],
            flags: TcpFlags::ACK,
            opts: TcpOptions {
                timestamps: if with_ts { ts } else { None },
                sack: sack(&b4[..nb]),
                ..TcpOptions::NONE
            },
            raw_opts: &[],
            payload_len: 0,
        });
    }
    let mut out: Vec<Built> = cases
        .iter()
        .enumerate()
        .map(|(i, c)| build_tcp(c, i))
        .collect();
    out.extend(ipv6_frames());

    // UDP with and without checksum
    for (i, (csum, plen)) in [(true, 11usize), (false, 64), (true, 0)].iter().enumerate() {
        let mut buf = vec![0u8; 256];
        let e = eth_hdr(&mut buf, None, EtherType::IPV4);
        let ih = Ipv4Repr::new(IP_A, IP_B, IpProtocol::UDP, 8 + plen)
            .emit(&mut buf[e..])
            .expect("fits");
        let u = UdpRepr {
            src_port: 5000 + i as u16,
            dst_port: 5001,
        };
        let n = u
            .emit(&mut buf[e + ih..], &payload(*plen, 3), &IP_A, &IP_B, *csum)
            .expect("fits");
        buf.truncate(e + ih + n);
        out.push(Built {
            frame: buf,
            desc: Obj::new()
                .str("name", &format!("udp_{i}"))
                .str("kind", "udp")
                .num("sport", u.src_port)
                .num("dport", u.dst_port)
                .num("len", n as u64)
                .bool("has_checksum", *csum)
                .end(),
        });
    }

    // ICMP echo request and reply, one tagged
    for (i, reply) in [false, true].iter().enumerate() {
        let mut buf = vec![0u8; 256];
        let vlan = if *reply { Some(VlanTag::new(7)) } else { None };
        let e = eth_hdr(&mut buf, vlan, EtherType::IPV4);
        let data = payload(56, 9);
        let ih = Ipv4Repr::new(IP_A, IP_B, IpProtocol::ICMP, 8 + data.len())
            .emit(&mut buf[e..])
            .expect("fits");
        let r = IcmpEchoRepr {
            is_reply: *reply,
            ident: 0x4242,
            seq: 1 + i as u16,
        };
        let n = r.emit(&mut buf[e + ih..], &data).expect("fits");
        buf.truncate(e + ih + n);
        out.push(Built {
            frame: buf,
            desc: Obj::new()
                .str("name", &format!("icmp_{i}"))
                .str("kind", "icmp")
                .raw("vlan", &vlan_json(vlan))
                .num("type", if *reply { 0u8 } else { 8u8 })
                .num("id", r.ident)
                .num("seq", r.seq)
                .num("payload_len", data.len() as u64)
                .end(),
        });
    }

    // ARP request and reply (padded to the 60-byte minimum)
    let req = ArpRepr::request(MAC_A, IP_A, IP_B);
    let rep = ArpRepr::reply_to(&req, MAC_B);
    for (i, a) in [req, rep].iter().enumerate() {
        let mut buf = vec![0u8; 60];
        let e = eth_hdr(&mut buf, None, EtherType::ARP);
        a.emit(&mut buf[e..]).expect("fits");
        out.push(Built {
            frame: buf,
            desc: Obj::new()
                .str("name", &format!("arp_{i}"))
                .str("kind", "arp")
                .num("op", a.operation.0)
                .str("hwsrc", &a.sender_mac.to_string())
                .str("psrc", &a.sender_ip.to_string())
                .str("hwdst", &a.target_mac.to_string())
                .str("pdst", &a.target_ip.to_string())
                .end(),
        });
    }
    out
}

const IP6_A: Ipv6Address = Ipv6Address::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
const IP6_B: Ipv6Address = Ipv6Address::new(0x2001, 0xdb8, 0, 1, 0, 0, 0, 2);

/// An Ethernet + IPv6 frame: `ext` (extension headers, already chained to `upper`)
/// then the upper-layer bytes made by `body` (given the buffer and the addresses).
fn ipv6_frame(
    vlan: Option<VlanTag>,
    src: Ipv6Address,
    dst: Ipv6Address,
    hop_limit: u8,
    first: IpProtocol,
    ext: &[u8],
    body: impl FnOnce(&mut [u8]) -> usize,
) -> Vec<u8> {
    let mut buf = vec![0u8; 2048];
    let e = eth_hdr(&mut buf, vlan, EtherType::IPV6);
    let at = e + IPV6_HEADER_LEN;
    buf[at..at + ext.len()].copy_from_slice(ext);
    let n = body(&mut buf[at + ext.len()..]);
    Ipv6Repr {
        hop_limit,
        flow_label: 0xbeef,
        ..Ipv6Repr::new(src, dst, first, ext.len() + n)
    }
    .emit(&mut buf[e..])
    .expect("fits");
    buf.truncate(at + ext.len() + n);
    buf
}

fn ipv6_frames() -> Vec<Built> {
    let mut out = Vec::new();
    // TCP: a SYN with every option, data behind hop-by-hop + destination options
    let syn = TcpRepr {
        src_port: 40000,
        dst_port: 80,
        seq: 0x0102_0304,
        ack: 0,
        flags: TcpFlags::SYN,
        window: 64800,
        urgent: 0,
        options: TcpOptions {
            mss: Some(1440),
            window_scale: Some(7),
            sack_permitted: true,
            timestamps: Some(Timestamps {
                tsval: 77,
                tsecr: 0,
            }),
            sack: SackBlocks::new(),
        },
    };
    let data = TcpRepr {
        flags: TcpFlags::ACK | TcpFlags::PSH,
        ack: 0xa0b0_c0d0,
        options: TcpOptions {
            timestamps: Some(Timestamps {
                tsval: 1000,
                tsecr: 999,
            }),
            ..TcpOptions::NONE
        },
        ..syn
    };
    // HBH: router alert (MLD) + PadN; DestOpts: PadN of 4 + unknown skip-type option
    let ext: &[u8] = &[60, 0, 5, 2, 0, 0, 1, 0, 6, 0, 1, 2, 0, 0, 0x1e, 0];
    for (name, t, first, ext, plen) in [
        ("tcp6_syn", syn, IpProtocol::TCP, &[][..], 0usize),
        ("tcp6_data_ext_headers", data, IpProtocol(0), ext, 1000),
    ] {
        let pl = payload(plen, 5);
        let frame = ipv6_frame(None, IP6_A, IP6_B, 64, first, ext, |b| {
            t.emit_segment(b, &pl, &IP6_A, &IP6_B).expect("fits")
        });
        out.push(Built {
            frame,
            desc: Obj::new()
                .str("name", name)
                .str("kind", "tcp6")
                .str("src", &IP6_A.to_string())
                .str("dst", &IP6_B.to_string())
                .num("ext_len", ext.len() as u64)
                .num("sport", t.src_port)
                .num("dport", t.dst_port)
                .num("seq", t.seq)
                .num("ack", t.ack)
                .num("flags", t.flags.0)
                .num("window", t.window)
                .num("payload_len", plen as u64)
                .end(),
        });
    }
    // UDP, one tagged
    for (i, vlan) in [None, Some(VlanTag::new(6))].into_iter().enumerate() {
        let u = UdpRepr {
            src_port: 5300 + i as u16,
            dst_port: 5001,
        };
        let pl = payload(17 + i, 1);
        let frame = ipv6_frame(vlan, IP6_A, IP6_B, 64, IpProtocol::UDP, &[], |b| {
            u.emit(b, &pl, &IP6_A, &IP6_B, true).expect("fits")
        });
        out.push(Built {
            frame,
            desc: Obj::new()
                .str("name", &format!("udp6_{i}"))
                .str("kind", "udp6")
                .raw("vlan", &vlan_json(vlan))
                .num("sport", u.src_port)
                .num("dport", u.dst_port)
                .num("len", 8 + pl.len() as u64)
                .end(),
        });
    }
    // ICMPv6: echo, neighbour discovery, router advertisement, packet too big
    let mac_a = MAC_A;
    let ll_b = Ipv6Address::link_local_from_mac(MAC_B);
    let echo_data = payload(56, 2);
    let invoking = payload(200, 3);
    let msgs: Vec<(&str, Ipv6Address, Ipv6Address, u8, Icmpv6Repr<'_>)> = vec![
        (
            "icmp6_echo_request",
            IP6_A,
            IP6_B,
            64,
            Icmpv6Repr::Echo {
                is_reply: false,
                ident: 0x4242,
                seq: 1,
                data: &echo_data,
            },
        ),
        (
            "icmp6_echo_reply",
            IP6_B,
            IP6_A,
            64,
            Icmpv6Repr::Echo {
                is_reply: true,
                ident: 0x4242,
                seq: 1,
                data: &echo_data,
            },
        ),
        (
            "icmp6_ns",
            IP6_A,
            IP6_B.solicited_node(),
            255,
            Icmpv6Repr::NeighborSolicit {
                target: IP6_B,
                source_mac: Some(mac_a),
            },
        ),
        (
            "icmp6_na",
            IP6_B,
            IP6_A,
            255,
            Icmpv6Repr::NeighborAdvert {
                flags: NaFlags {
                    router: false,
                    solicited: true,
                    override_: true,
                },
                target: IP6_B,
                target_mac: Some(MAC_B),
            },
        ),
        (
            "icmp6_ra",
            ll_b,
            Ipv6Address::LINK_LOCAL_ALL_NODES,
            255,
            Icmpv6Repr::RouterAdvert(RouterAdvert {
                hop_limit: 64,
                flags: 0,
                router_lifetime: 1800,
                reachable_time: 0,
                retrans_timer: 0,
                source_mac: Some(MAC_B),
                mtu: Some(1500),
                prefix: Some(PrefixInfo {
                    prefix_len: 64,
                    on_link: true,
                    autonomous: true,
                    valid_lifetime: 86_400,
                    preferred_lifetime: 14_400,
                    prefix: Ipv6Address::new(0x2001, 0xdb8, 0, 1, 0, 0, 0, 0),
                }),
            }),
        ),
        (
            "icmp6_packet_too_big",
            IP6_B,
            IP6_A,
            64,
            Icmpv6Repr::PacketTooBig {
                mtu: 1400,
                invoking: &invoking,
            },
        ),
    ];
    for (name, src, dst, hl, r) in msgs {
        let frame = ipv6_frame(None, src, dst, hl, IpProtocol::ICMPV6, &[], |b| {
            r.emit(b, &src, &dst).expect("fits")
        });
        let f = parse_frame(&frame).expect("just built");
        let L3::Ipv6(_, L4::Icmpv6(i)) = f.l3 else {
            unreachable!("built as ICMPv6")
        };
        let mut d = Obj::new()
            .str("name", name)
            .str("kind", "icmpv6")
            .str("src", &src.to_string())
            .str("dst", &dst.to_string())
            .num("hlim", hl)
            .num("type", i.msg_type())
            .num("code", i.code());
        if let Icmpv6Repr::Echo {
            ident, seq, data, ..
        } = r
        {
            d = d
                .num("id", ident)
                .num("seq", seq)
                .num("payload_len", data.len() as u64);
        }
        if let Some(n) = ndp_json(&i) {
            d = d.raw("ndp", &n);
        }
        if let Icmpv6Repr::PacketTooBig { mtu, invoking } = r {
            d = d.num("mtu", mtu).num("payload_len", invoking.len() as u64);
        }
        out.push(Built {
            frame,
            desc: d.end(),
        });
    }
    out
}

fn write_pcap(path: &str, frames: &[Built]) -> io::Result<()> {
    let mut w = Vec::new();
    w.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    w.extend_from_slice(&2u16.to_le_bytes());
    w.extend_from_slice(&4u16.to_le_bytes());
    w.extend_from_slice(&0i32.to_le_bytes());
    w.extend_from_slice(&0u32.to_le_bytes());
    w.extend_from_slice(&65535u32.to_le_bytes());
    w.extend_from_slice(&1u32.to_le_bytes()); // LINKTYPE_ETHERNET
    for (i, f) in frames.iter().enumerate() {
        w.extend_from_slice(&1_700_000_000u32.to_le_bytes());
        w.extend_from_slice(&(i as u32).to_le_bytes());
        w.extend_from_slice(&(f.frame.len() as u32).to_le_bytes());
        w.extend_from_slice(&(f.frame.len() as u32).to_le_bytes());
        w.extend_from_slice(&f.frame);
    }
    std::fs::write(path, w)
}

fn cmd_build(path: &str) -> io::Result<()> {
    let frames = all_frames();
    write_pcap(path, &frames)?;
    let mut out = io::BufWriter::new(io::stdout().lock());
    for f in &frames {
        writeln!(out, "{}", f.desc)?;
    }
    out.flush()
}

/// Write every built frame, and each of its layers, as seed inputs for the
/// fuzz targets: `DIR/<target>/<frame name>`.
fn cmd_seeds(dir: &str) -> io::Result<()> {
    let root = std::path::Path::new(dir);
    let put = |target: &str, name: &str, data: &[u8]| -> io::Result<()> {
        let d = root.join(target);
        std::fs::create_dir_all(&d)?;
        std::fs::write(d.join(format!("seed_{name}")), data)
    };
    for f in all_frames() {
        let name = f
            .desc
            .split("\"name\":\"")
            .nth(1)
            .and_then(|r| r.split('"').next())
            .unwrap_or("frame")
            .to_string();
        let data = &f.frame;
        put("frame", &name, data)?;
        put("ethernet", &name, data)?;
        let Ok(p) = parse_frame(data) else { continue };
        match p.l3 {
            L3::Arp(a) => put("arp", &name, a.into_inner())?,
            L3::Ipv4(ip, l4) => {
                put("checksums", &name, ip.header())?;
                put("ipv4", &name, ip.into_inner())?;
                match l4 {
                    L4::Tcp(t) => {
                        put("tcp_options", &name, t.options())?;
                        put("tcp", &name, t.into_inner())?;
                    }
                    L4::Udp(u) => put("udp", &name, u.into_inner())?,
                    L4::Icmp(i) => put("icmp", &name, i.into_inner())?,
                    L4::Icmpv6(_) | L4::Fragment | L4::Other(_) => {}
                }
            }
            L3::Ipv6(ip, l4) => {
                put("ipv6", &name, ip.into_inner())?;
                match l4 {
                    L4::Tcp(t) => put("tcp", &name, t.into_inner())?,
                    L4::Udp(u) => put("udp", &name, u.into_inner())?,
                    L4::Icmpv6(i) => put("icmpv6", &name, i.into_inner())?,
                    L4::Icmp(_) | L4::Fragment | L4::Other(_) => {}
                }
            }
            L3::Other(_) => {}
        }
    }
    Ok(())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let r = match args.get(1).map(String::as_str) {
        Some("parse") => cmd_parse(),
        Some("build") if args.len() == 3 => cmd_build(&args[2]),
        Some("seeds") if args.len() == 3 => cmd_seeds(&args[2]),
        _ => {
            eprintln!(
                "usage: wirecheck parse < frames.hex | wirecheck build OUT.pcap \
                 | wirecheck seeds DIR"
            );
            std::process::exit(2);
        }
    };
    if let Err(e) = r {
        eprintln!("wirecheck: {e}");
        std::process::exit(1);
    }
}
