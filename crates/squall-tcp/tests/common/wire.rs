//! Frames for the tests, built and parsed with `squall-wire` (the host's own frame code is
//! internal): the segments a test's peer sends, and a checked view of what a host sent.

use squall_wire::{
    parse_frame, EtherType, EthernetFrame, IpProtocol, Ipv4Address, Ipv4Repr, Ipv6Address,
    Ipv6Repr, MacAddress, TcpFlags, TcpOptions, TcpPacket, ETHERNET_HEADER_LEN, IPV6_HEADER_LEN,
    L3, L4, TCP_HEADER_LEN,
};

use super::Family;

/// TCP control bits and the header fields of a segment a test sends to a host (Ethernet,
/// IPv4 with DF and no options, TCP): squall-wire's, the frame itself is built below with
/// the general builders.
#[allow(unused_imports)] // each test binary uses some of them
pub use squall_wire::segment::{TxHdr as FrameHdr, ACK, FIN, PSH, RST, SYN, URG};

/// The IPv6 address that stands for IPv4 address `a` in the tests over IPv6: `a` as the
/// low 32 bits under 2001:db8::/96 (as TRex's `ipv6.src_msb` maps a pool), so that a test
/// names its hosts by one `u32` in either family and [`parse`] gives it back.
pub fn ip6_of(a: u32) -> [u8; 16] {
    let mut v = [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    v[12..].copy_from_slice(&a.to_be_bytes());
    v
}

/// An Ethernet/IPv4/TCP frame with the raw TCP option bytes `opts` (a multiple of 4, at
/// most 40: written as given, so tests can send any layout or malformed lists) and
/// `payload`; IPv4 and TCP checksums filled.
pub fn frame(h: &FrameHdr, opts: &[u8], payload: &[u8]) -> Vec<u8> {
    frame_in(Family::V4, h, opts, payload)
}

/// [`frame`] over `fam`: over IPv6 the addresses are [`ip6_of`] the header's, the hop
/// limit its TTL, the traffic class its TOS (the IPv4 id is not used), TCP right after
/// the fixed header.
pub fn frame_in(fam: Family, h: &FrameHdr, opts: &[u8], payload: &[u8]) -> Vec<u8> {
    assert!(
        opts.len().is_multiple_of(4) && opts.len() <= 40,
        "TCP option block"
    );
    let tcp_len = TCP_HEADER_LEN + opts.len() + payload.len();
    let l3 = fam.ip_len();
    let mut buf = vec![0u8; ETHERNET_HEADER_LEN + l3 + tcp_len];
    let mut eth = EthernetFrame::new_unchecked(&mut buf[..]);
    eth.set_dst(MacAddress(h.dst_mac));
    eth.set_src(MacAddress(h.src_mac));
    match fam {
        Family::V4 => eth.set_ethertype(EtherType::IPV4),
        Family::V6 => eth.set_ethertype(EtherType::IPV6),
    }
    let (src, dst) = (
        Ipv4Address::from_u32(h.src_ip),
        Ipv4Address::from_u32(h.dst_ip),
    );
    let (src6, dst6) = (Ipv6Address(ip6_of(h.src_ip)), Ipv6Address(ip6_of(h.dst_ip)));
    match fam {
        Family::V4 => Ipv4Repr {
            ttl: h.ttl,
            tos: h.tos,
            ident: h.ip_id,
            ..Ipv4Repr::new(src, dst, IpProtocol::TCP, tcp_len)
        }
        .emit(&mut buf[ETHERNET_HEADER_LEN..]),
        Family::V6 => Ipv6Repr {
            hop_limit: h.ttl,
            traffic_class: h.tos,
            ..Ipv6Repr::new(src6, dst6, IpProtocol::TCP, tcp_len)
        }
        .emit(&mut buf[ETHERNET_HEADER_LEN..]),
    }
    .expect("room for the IP header");
    let mut tcp = TcpPacket::new_unchecked(&mut buf[ETHERNET_HEADER_LEN + l3..]);
    tcp.set_src_port(h.src_port);
    tcp.set_dst_port(h.dst_port);
    tcp.set_seq_number(h.seq);
    tcp.set_ack_number(h.ack);
    tcp.set_header_len(TCP_HEADER_LEN + opts.len());
    tcp.set_flags(TcpFlags(h.flags as u16));
    tcp.set_window_len(h.wnd);
    tcp.set_urgent_at(0);
    tcp.options_mut().copy_from_slice(opts);
    tcp.payload_mut().copy_from_slice(payload);
    match fam {
        Family::V4 => tcp.fill_checksum(&src, &dst),
        Family::V6 => tcp.fill_checksum(&src6, &dst6),
    }
    buf
}

/// Sets the urgent pointer of segment frame `f` (over `fam`, as [`frame_in`] built it)
/// to `up`, its TCP checksum filled again.
#[allow(dead_code)] // used by some test binaries
pub fn set_urgent(fam: Family, f: &mut [u8], up: u16) {
    let at = fam.tcp_at();
    let mut tcp = TcpPacket::new_unchecked(&mut f[at..]);
    tcp.set_urgent_at(up);
    match fam {
        Family::V4 => {
            let a = |o: usize| Ipv4Address([f[o], f[o + 1], f[o + 2], f[o + 3]]);
            let (src, dst) = (a(26), a(30));
            TcpPacket::new_unchecked(&mut f[at..]).fill_checksum(&src, &dst);
        }
        Family::V6 => {
            let a = |o: usize| Ipv6Address(f[o..o + 16].try_into().unwrap());
            let (src, dst) = (a(22), a(38));
            TcpPacket::new_unchecked(&mut f[at..]).fill_checksum(&src, &dst);
        }
    }
}

/// A segment from a test's peer (MAC ...:09, `src` address and port) to a host (MAC
/// ...:01, `dst`) over `fam`: TTL 64, TOS 0, IPv4 id 1; `opts` as [`frame`] takes them.
#[allow(clippy::too_many_arguments)]
pub fn peer_frame(
    fam: Family,
    src: (u32, u16),
    dst: (u32, u16),
    seq: u32,
    ack: u32,
    flags: u8,
    wnd: u16,
    opts: &[u8],
    payload: &[u8],
) -> Vec<u8> {
    let h = FrameHdr {
        src_mac: [2, 0, 0, 0, 0, 9],
        dst_mac: [2, 0, 0, 0, 0, 1],
        src_ip: src.0,
        dst_ip: dst.0,
        ip_id: 1,
        src_port: src.1,
        dst_port: dst.1,
        seq,
        ack,
        flags,
        wnd,
        ttl: 64,
        tos: 0,
    };
    frame_in(fam, &h, opts, payload)
}

/// A segment a host sent, parsed and owned (tests keep them).
#[derive(Debug, Clone)]
pub struct Out {
    pub family: Family,
    pub seq: u32,
    pub ack: u32,
    pub flags: u8,
    pub wnd: u16,
    pub opts: Opts,
    pub payload: Vec<u8>,
}

impl Out {
    /// Parses a frame a host emitted (it must be valid).
    pub fn of(f: &[u8]) -> Out {
        let s = parse(f).expect("host emitted a valid frame");
        Out {
            family: s.family,
            seq: s.seq,
            ack: s.ack,
            flags: s.flags,
            wnd: s.wnd,
            opts: parse_opts(s.opts),
            payload: s.payload.to_vec(),
        }
    }
}

/// A frame a host sent, parsed by `squall-wire` with both checksums verified.
#[derive(Clone, Copy, Debug)]
pub struct Seg<'a> {
    pub family: Family,
    pub src_mac: [u8; 6],
    pub src_ip: u32,
    pub dst_ip: u32,
    pub ttl: u8,
    pub tos: u8,
    pub src_port: u16,
    pub dst_port: u16,
    pub seq: u32,
    pub ack: u32,
    pub flags: u8,
    pub wnd: u16,
    /// Raw option bytes.
    pub opts: &'a [u8],
    pub payload: &'a [u8],
}

/// Parses an Ethernet/IPv4/TCP or Ethernet/IPv6/TCP frame; None unless every layer is
/// well formed and the checksums verify. Over IPv6 the addresses are their low 32 bits
/// (what [`ip6_of`] put there), the TTL the hop limit, the TOS the traffic class.
pub fn parse(f: &[u8]) -> Option<Seg<'_>> {
    let fr = parse_frame(f).ok()?;
    if !fr.checksums_ok() {
        return None;
    }
    let low32 = |a: Ipv6Address| u32::from_be_bytes([a.0[12], a.0[13], a.0[14], a.0[15]]);
    let eh = fr.eth.header_len();
    let (family, src_ip, dst_ip, ttl, tos, tcp, seg) = match fr.l3 {
        L3::Ipv4(ip, L4::Tcp(tcp)) => {
            let seg = &f[eh + ip.header_len()..eh + ip.total_len() as usize];
            let (s, d) = (ip.src().to_u32(), ip.dst().to_u32());
            (Family::V4, s, d, ip.ttl(), ip.tos(), tcp, seg)
        }
        L3::Ipv6(ip, L4::Tcp(tcp)) => {
            let end = eh + IPV6_HEADER_LEN + ip.payload_len() as usize;
            let seg = &f[end - tcp.header_len() - tcp.payload().len()..end];
            let (s, d) = (low32(ip.src()), low32(ip.dst()));
            (
                Family::V6,
                s,
                d,
                ip.hop_limit(),
                ip.traffic_class(),
                tcp,
                seg,
            )
        }
        _ => return None,
    };
    let hl = tcp.header_len();
    Some(Seg {
        family,
        src_mac: fr.eth.src().0,
        src_ip,
        dst_ip,
        ttl,
        tos,
        src_port: tcp.src_port(),
        dst_port: tcp.dst_port(),
        seq: tcp.seq_number(),
        ack: tcp.ack_number(),
        flags: tcp.flags().0 as u8,
        wnd: tcp.window_len(),
        opts: &seg[TCP_HEADER_LEN..hl],
        payload: &seg[hl..],
    })
}

/// The options of a host's segment: the fast path's option type, filled here by
/// `squall-wire`'s total parser (a host only sends well formed option lists: anything
/// else fails the test).
pub use squall_wire::segment::TcpOpts as Opts;

pub fn parse_opts(o: &[u8]) -> Opts {
    let p = TcpOptions::parse(o).expect("a host sends well-formed TCP options");
    let mut sack = [(0, 0); 4];
    for (d, b) in sack.iter_mut().zip(p.sack.as_slice()) {
        *d = (b.left, b.right);
    }
    Opts {
        mss: p.mss.unwrap_or(0),
        wscale: p.window_scale,
        sack_ok: p.sack_permitted,
        ts: p.timestamps.map(|t| (t.tsval, t.tsecr)),
        sack,
        sack_n: p.sack.len() as u8,
    }
}
