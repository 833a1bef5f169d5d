//! The TCP-over-IP-over-Ethernet fast path: one-pass parsing and verification of a
//! received segment ([`parse_opt`]: a fixed-size view of the common 54-byte
//! Ethernet + IPv4 + TCP header, options and payload as slices into the frame, no
//! allocation; [`parse6_opt`] the same over IPv6, extension headers walked) and in-place
//! writing of an outgoing segment's headers with their checksums ([`TxHdr`],
//! [`write_headers_sum`], [`write_headers6_sum`]). Used by the TCP host (squall-tcp) on every frame;
//! the general views of this crate ([`crate::parse_frame`], [`crate::TcpPacket`]) are the
//! total parsers it is tested against. Nothing here panics on malformed input: errors are
//! values.

use crate::checksum;

/// Ethernet II header length (no VLAN tag).
pub const ETH_LEN: usize = 14;
/// IPv4 header length without options.
pub const IP_LEN: usize = 20;
/// TCP header length without options.
pub const TCP_LEN: usize = 20;
/// The common header: Ethernet, IPv4 and TCP without options.
pub const HDRS_LEN: usize = ETH_LEN + IP_LEN + TCP_LEN;
/// IPv6 fixed header length.
pub const IP6_LEN: usize = 40;
/// Ethernet, IPv6 (no extension headers) and TCP without options.
pub const HDRS6_LEN: usize = ETH_LEN + IP6_LEN + TCP_LEN;

/// TCP FIN flag.
pub const FIN: u8 = 0x01;
/// TCP SYN flag.
pub const SYN: u8 = 0x02;
/// TCP RST flag.
pub const RST: u8 = 0x04;
/// TCP PSH flag.
pub const PSH: u8 = 0x08;
/// TCP ACK flag.
pub const ACK: u8 = 0x10;
/// TCP URG flag.
pub const URG: u8 = 0x20;

/// Why a received frame was not handed to TCP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RxError {
    /// Not IPv4/TCP or IPv6/TCP (or a fragment, an IPv6 extension header to discard, or
    /// an IPv4 source route, RFC 7126 §4.3-4.4).
    NotTcp,
    /// Bad IPv4 header (version, length, checksum).
    BadIp,
    /// Truncated frame.
    Short,
    /// Bad TCP data offset.
    BadOff,
    /// TCP checksum mismatch.
    BadSum,
}

/// A parsed TCP segment; slices point into the received frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment<'a> {
    /// Ethernet source address.
    pub src_mac: [u8; 6],
    /// IPv4 source address (host order).
    pub src_ip: u32,
    /// IPv4 destination address (host order).
    pub dst_ip: u32,
    /// TCP source port.
    pub src_port: u16,
    /// TCP destination port.
    pub dst_port: u16,
    /// Sequence number.
    pub seq: u32,
    /// Acknowledgment number.
    pub ack: u32,
    /// The six classic control bits (URG, ACK, PSH, RST, SYN, FIN).
    pub flags: u8,
    /// Window field (unscaled).
    pub wnd: u16,
    /// Urgent pointer field (meaningful with URG: the offset from `seq` of the byte that
    /// follows the urgent data, RFC 6093).
    pub up: u16,
    /// The TCP options (data offset beyond 20 bytes).
    pub opts: &'a [u8],
    /// The payload (up to the IPv4 total length).
    pub payload: &'a [u8],
}

impl Segment<'_> {
    /// Sequence space occupied: payload + SYN + FIN (RFC 9293 §3.4).
    #[inline]
    pub fn seg_len(&self) -> u32 {
        self.payload.len() as u32 + (self.flags & SYN != 0) as u32 + (self.flags & FIN != 0) as u32
    }
}

#[inline(always)]
fn be16(b: &[u8], o: usize) -> u16 {
    u16::from_be_bytes([b[o], b[o + 1]])
}
#[inline(always)]
fn be32(b: &[u8], o: usize) -> u32 {
    u32::from_be_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}

/// The TCP pseudo-header accumulator (protocol 6).
#[inline(always)]
fn pseudo(src: u32, dst: u32, tcp_len: usize) -> u64 {
    checksum::pseudo_header_ipv4_acc(src, dst, 6, tcp_len)
}

/// True if the IPv4 header `h` sums to 0xffff (RFC 791 header checksum). The common
/// 20-byte header is summed inline as five native-order 32-bit words: folded, that is the
/// byte-swapped big-endian sum, and 0xffff is its own byte swap.
#[inline(always)]
fn ip_header_sum_ok(h: &[u8]) -> bool {
    if let Ok(h) = <&[u8; IP_LEN]>::try_from(h) {
        let w = |k: usize| u32::from_ne_bytes([h[k], h[k + 1], h[k + 2], h[k + 3]]) as u64;
        checksum::fold(w(0) + w(4) + w(8) + w(12) + w(16)) == 0xffff
    } else {
        checksum::fold(checksum::accumulate(0, h)) == 0xffff
    }
}

/// Parses and verifies an Ethernet/IPv4/TCP frame (IPv4 and TCP checksums).
pub fn parse(frame: &[u8]) -> Result<Segment<'_>, RxError> {
    parse_opt(frame, true)
}

/// Parses a frame; `verify_tcp_csum = false` trusts a NIC that already verified the TCP
/// checksum (RX checksum offload). The IPv4 header checksum is always verified.
#[inline]
pub fn parse_opt(frame: &[u8], verify_tcp_csum: bool) -> Result<Segment<'_>, RxError> {
    // Fast path: the common frame (IPv4 without options, at least a TCP header), read
    // through a fixed-size view so no field access needs a bounds check. Exactly the
    // checks of the general path below, in the same order of precedence.
    if let Some(h) = frame.first_chunk::<HDRS_LEN>() {
        if h[14] == 0x45 && h[12] == 0x08 && h[13] == 0x00 {
            let total = u16::from_be_bytes([h[16], h[17]]) as usize;
            if total < IP_LEN || total > frame.len() - ETH_LEN {
                return Err(RxError::BadIp);
            }
            let w = |k: usize| {
                u32::from_ne_bytes([
                    h[ETH_LEN + k],
                    h[ETH_LEN + k + 1],
                    h[ETH_LEN + k + 2],
                    h[ETH_LEN + k + 3],
                ]) as u64
            };
            if checksum::fold(w(0) + w(4) + w(8) + w(12) + w(16)) != 0xffff {
                return Err(RxError::BadIp);
            }
            if h[23] != 6 || (u16::from_be_bytes([h[20], h[21]]) & 0x3fff) != 0 {
                return Err(RxError::NotTcp);
            }
            let tcp_len = total - IP_LEN;
            if tcp_len < TCP_LEN {
                return Err(RxError::Short);
            }
            let doff = ((h[46] >> 4) as usize) * 4;
            if doff < TCP_LEN || doff > tcp_len {
                return Err(RxError::BadOff);
            }
            let src_ip = u32::from_be_bytes([h[26], h[27], h[28], h[29]]);
            let dst_ip = u32::from_be_bytes([h[30], h[31], h[32], h[33]]);
            let tcp = &frame[ETH_LEN + IP_LEN..ETH_LEN + total];
            if verify_tcp_csum
                && checksum::fold(checksum::accumulate(pseudo(src_ip, dst_ip, tcp_len), tcp))
                    != 0xffff
            {
                return Err(RxError::BadSum);
            }
            return Ok(Segment {
                src_mac: [h[6], h[7], h[8], h[9], h[10], h[11]],
                src_ip,
                dst_ip,
                src_port: u16::from_be_bytes([h[34], h[35]]),
                dst_port: u16::from_be_bytes([h[36], h[37]]),
                seq: u32::from_be_bytes([h[38], h[39], h[40], h[41]]),
                ack: u32::from_be_bytes([h[42], h[43], h[44], h[45]]),
                flags: h[47] & 0x3f,
                wnd: u16::from_be_bytes([h[48], h[49]]),
                up: u16::from_be_bytes([h[52], h[53]]),
                opts: &tcp[TCP_LEN..doff],
                payload: &tcp[doff..],
            });
        }
    }
    parse_general(frame, verify_tcp_csum)
}

/// The general parser: any IHL, every check spelled out (the fast path of [`parse_opt`]
/// must agree with it on every input; tested).
fn parse_general(frame: &[u8], verify_tcp_csum: bool) -> Result<Segment<'_>, RxError> {
    if frame.len() < ETH_LEN + IP_LEN {
        return Err(RxError::Short);
    }
    if be16(frame, 12) != 0x0800 {
        return Err(RxError::NotTcp);
    }
    let ip = &frame[ETH_LEN..];
    let vihl = ip[0];
    let ihl = ((vihl & 0x0f) as usize) * 4;
    if vihl >> 4 != 4 || ihl < IP_LEN || ip.len() < ihl {
        return Err(RxError::BadIp);
    }
    let total = be16(ip, 2) as usize;
    if total < ihl || total > ip.len() {
        return Err(RxError::BadIp);
    }
    if !ip_header_sum_ok(&ip[..ihl]) {
        return Err(RxError::BadIp);
    }
    if ip[9] != 6 || be16(ip, 6) & 0x3fff != 0 {
        return Err(RxError::NotTcp);
    }
    if ihl > IP_LEN && crate::ipv4::source_routed(&ip[IP_LEN..ihl]) {
        return Err(RxError::NotTcp);
    }
    let src_ip = be32(ip, 12);
    let dst_ip = be32(ip, 16);
    let tcp = &ip[ihl..total];
    if tcp.len() < TCP_LEN {
        return Err(RxError::Short);
    }
    let doff = ((tcp[12] >> 4) as usize) * 4;
    if doff < TCP_LEN || doff > tcp.len() {
        return Err(RxError::BadOff);
    }
    if verify_tcp_csum
        && checksum::fold(checksum::accumulate(pseudo(src_ip, dst_ip, tcp.len()), tcp)) != 0xffff
    {
        return Err(RxError::BadSum);
    }
    let mut src_mac = [0u8; 6];
    src_mac.copy_from_slice(&frame[6..12]);
    Ok(Segment {
        src_mac,
        src_ip,
        dst_ip,
        src_port: be16(tcp, 0),
        dst_port: be16(tcp, 2),
        seq: be32(tcp, 4),
        ack: be32(tcp, 8),
        flags: tcp[13] & 0x3f,
        wnd: be16(tcp, 14),
        up: be16(tcp, 18),
        opts: &tcp[TCP_LEN..doff],
        payload: &tcp[doff..],
    })
}

/// An IPv6/TCP segment: the segment (its `src_ip` and `dst_ip` are 0: the host maps the
/// IPv6 addresses to its own ids) and the source and destination addresses.
pub type Segment6<'a> = (Segment<'a>, [u8; 16], [u8; 16]);

/// Parses and verifies an Ethernet/IPv6/TCP frame: version, payload length, extension
/// headers walked (bounded, [`crate::walk_ext_headers`]; fragments and headers to discard
/// are [`RxError::NotTcp`]), TCP data offset and, if `verify_tcp_csum`, the checksum with
/// the IPv6 pseudo-header.
#[inline]
pub fn parse6_opt(frame: &[u8], verify_tcp_csum: bool) -> Result<Segment6<'_>, RxError> {
    if frame.len() < ETH_LEN + IP6_LEN {
        return Err(RxError::Short);
    }
    if be16(frame, 12) != 0x86dd {
        return Err(RxError::NotTcp);
    }
    let ip = &frame[ETH_LEN..];
    if ip[0] >> 4 != 6 {
        return Err(RxError::BadIp);
    }
    let plen = be16(ip, 4) as usize;
    if IP6_LEN + plen > ip.len() {
        return Err(RxError::BadIp);
    }
    let payload = &ip[IP6_LEN..IP6_LEN + plen];
    // The common case (TCP right after the fixed header) skips the walk.
    let off = if ip[6] == 6 {
        0
    } else {
        match crate::walk_ext_headers(crate::IpProtocol(ip[6]), payload) {
            Ok(u) if u.protocol.0 == 6 && !u.is_fragment() => u.offset,
            Ok(_) | Err(crate::Error::Unsupported) => return Err(RxError::NotTcp),
            Err(_) => return Err(RxError::BadIp),
        }
    };
    let tcp = &payload[off..];
    if tcp.len() < TCP_LEN {
        return Err(RxError::Short);
    }
    let doff = ((tcp[12] >> 4) as usize) * 4;
    if doff < TCP_LEN || doff > tcp.len() {
        return Err(RxError::BadOff);
    }
    let mut src = [0u8; 16];
    let mut dst = [0u8; 16];
    src.copy_from_slice(&ip[8..24]);
    dst.copy_from_slice(&ip[24..40]);
    if verify_tcp_csum
        && checksum::fold(checksum::accumulate(
            checksum::pseudo_header_ipv6_acc(&src, &dst, 6, tcp.len()),
            tcp,
        )) != 0xffff
    {
        return Err(RxError::BadSum);
    }
    let mut src_mac = [0u8; 6];
    src_mac.copy_from_slice(&frame[6..12]);
    let seg = Segment {
        src_mac,
        src_ip: 0,
        dst_ip: 0,
        src_port: be16(tcp, 0),
        dst_port: be16(tcp, 2),
        seq: be32(tcp, 4),
        ack: be32(tcp, 8),
        flags: tcp[13] & 0x3f,
        wnd: be16(tcp, 14),
        up: be16(tcp, 18),
        opts: &tcp[TCP_LEN..doff],
        payload: &tcp[doff..],
    };
    Ok((seg, src, dst))
}

/// The addresses and ports of an IPv4/TCP frame as (source IP, destination IP, source
/// port, destination port), read without any verification, for prefetching; None for
/// anything unusual (full parsing decides later).
#[inline]
pub fn peek_addrs(f: &[u8]) -> Option<(u32, u32, u16, u16)> {
    if f.len() < HDRS_LEN || f[12] != 0x08 || f[13] != 0x00 || f[14] != 0x45 || f[23] != 6 {
        return None;
    }
    Some((be32(f, 26), be32(f, 30), be16(f, 34), be16(f, 36)))
}

/// TCP options of interest (RFC 9293 §3.2, RFC 7323, RFC 2018).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpOpts {
    /// MSS option value (0 = absent).
    pub mss: u16,
    /// Window scale shift (None = absent).
    pub wscale: Option<u8>,
    /// SACK permitted.
    pub sack_ok: bool,
    /// Timestamps (TSval, TSecr).
    pub ts: Option<(u32, u32)>,
    /// SACK blocks (RFC 2018 §3), `sack_n` of them valid.
    pub sack: [(u32, u32); 4],
    /// Number of valid entries in `sack`.
    pub sack_n: u8,
}

/// Parses options; malformed lists end the parse (never panics).
pub fn parse_opts(mut o: &[u8]) -> TcpOpts {
    let mut r = TcpOpts::default();
    while let Some(&kind) = o.first() {
        match kind {
            0 => break,
            1 => {
                o = &o[1..];
                continue;
            }
            _ => {}
        }
        if o.len() < 2 {
            break;
        }
        let len = o[1] as usize;
        if len < 2 || len > o.len() {
            break;
        }
        match (kind, len) {
            (2, 4) => r.mss = be16(o, 2),
            (3, 3) => r.wscale = Some(o[2].min(14)),
            (4, 2) => r.sack_ok = true,
            (8, 10) => r.ts = Some((be32(o, 2), be32(o, 6))),
            (5, l) if l >= 10 && (l - 2) % 8 == 0 => {
                let n = ((l - 2) / 8).min(4);
                for k in 0..n {
                    r.sack[k] = (be32(o, 2 + 8 * k), be32(o, 6 + 8 * k));
                }
                r.sack_n = n as u8;
            }
            _ => {}
        }
        o = &o[len..];
    }
    r
}

/// (TSval, TSecr) if `o` is exactly NOP, NOP, TS (the layout every stack sends on
/// non-SYN segments, RFC 7323 Appendix A); then [`parse_opts`] gives these timestamps and
/// nothing else.
#[inline]
pub fn canonical_ts(o: &[u8]) -> Option<(u32, u32)> {
    if o.len() == 12 && o[..4] == [1, 1, 8, 10] {
        Some((be32(o, 4), be32(o, 8)))
    } else {
        None
    }
}

/// Header fields of an outgoing segment.
#[derive(Clone, Copy, Debug)]
pub struct TxHdr {
    /// Ethernet source address.
    pub src_mac: [u8; 6],
    /// Ethernet destination address.
    pub dst_mac: [u8; 6],
    /// IPv4 source address (host order).
    pub src_ip: u32,
    /// IPv4 destination address (host order).
    pub dst_ip: u32,
    /// IPv4 identification.
    pub ip_id: u16,
    /// TCP source port.
    pub src_port: u16,
    /// TCP destination port.
    pub dst_port: u16,
    /// Sequence number.
    pub seq: u32,
    /// Acknowledgment number.
    pub ack: u32,
    /// Control bits (see [`FIN`] ... [`URG`]).
    pub flags: u8,
    /// Window field.
    pub wnd: u16,
    /// IPv4 time to live.
    pub ttl: u8,
    /// IPv4 type of service.
    pub tos: u8,
}

/// Writes Ethernet, IPv4 and TCP headers (with `opts`, a multiple of 4 bytes) for a segment
/// with `payload_len` bytes; returns the offset where the payload goes. `buf` must hold
/// the whole frame (checked by the caller). The IPv4 checksum is computed from the field
/// values (never read back from the frame).
#[inline]
pub fn write_headers(buf: &mut [u8], h: &TxHdr, opts: &[u8], payload_len: usize) -> usize {
    write_headers_sum(buf, h, opts, payload_len).0
}

/// Like [`write_headers`], also returning the unfolded ones'-complement sum of the TCP
/// pseudo-header and TCP header (checksum field zero) for [`store_tcp_checksum`].
#[inline(always)]
pub fn write_headers_sum(
    buf: &mut [u8],
    h: &TxHdr,
    opts: &[u8],
    payload_len: usize,
) -> (usize, u64) {
    let tcp_hlen = TCP_LEN + opts.len();
    let total = (IP_LEN + tcp_hlen + payload_len) as u16;
    let (hdr, rest) = buf
        .split_first_chunk_mut::<HDRS_LEN>()
        .expect("the caller sized the frame");
    let addr_sum = (h.src_ip >> 16) as u64
        + (h.src_ip & 0xffff) as u64
        + (h.dst_ip >> 16) as u64
        + (h.dst_ip & 0xffff) as u64;
    let ip_sum = 0x4500u64
        + h.tos as u64
        + total as u64
        + h.ip_id as u64
        + 0x4000
        + ((h.ttl as u64) << 8 | 6)
        + addr_sum;
    let ip_csum = !checksum::fold(ip_sum);
    let off_flags = (((tcp_hlen / 4) as u16) << 12) | h.flags as u16;
    // Fixed offsets into a fixed-size header: no bounds checks.
    hdr[0..6].copy_from_slice(&h.dst_mac);
    hdr[6..12].copy_from_slice(&h.src_mac);
    hdr[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    hdr[14] = 0x45;
    hdr[15] = h.tos;
    hdr[16..18].copy_from_slice(&total.to_be_bytes());
    hdr[18..20].copy_from_slice(&h.ip_id.to_be_bytes());
    hdr[20..22].copy_from_slice(&0x4000u16.to_be_bytes()); // DF
    hdr[22] = h.ttl;
    hdr[23] = 6;
    hdr[24..26].copy_from_slice(&ip_csum.to_be_bytes());
    hdr[26..30].copy_from_slice(&h.src_ip.to_be_bytes());
    hdr[30..34].copy_from_slice(&h.dst_ip.to_be_bytes());
    let tcp_hdr: &mut [u8; TCP_LEN] = (&mut hdr[ETH_LEN + IP_LEN..]).try_into().expect("20 bytes");
    let sum = write_tcp(tcp_hdr, rest, h, off_flags, opts);
    let tcp_len = tcp_hlen + payload_len;
    (
        ETH_LEN + IP_LEN + tcp_hlen,
        sum + addr_sum + 6 + tcp_len as u64,
    )
}

/// Writes the TCP header (checksum zero) and its options (into `rest`, the bytes after
/// it); returns the unfolded sum of the header and options (pseudo-header not included).
#[inline(always)]
fn write_tcp(
    hdr: &mut [u8; TCP_LEN],
    rest: &mut [u8],
    h: &TxHdr,
    off_flags: u16,
    opts: &[u8],
) -> u64 {
    hdr[0..2].copy_from_slice(&h.src_port.to_be_bytes());
    hdr[2..4].copy_from_slice(&h.dst_port.to_be_bytes());
    hdr[4..8].copy_from_slice(&h.seq.to_be_bytes());
    hdr[8..12].copy_from_slice(&h.ack.to_be_bytes());
    hdr[12..14].copy_from_slice(&off_flags.to_be_bytes());
    hdr[14..16].copy_from_slice(&h.wnd.to_be_bytes());
    hdr[16..20].copy_from_slice(&[0, 0, 0, 0]);
    // Fixed-size copies for the usual option blocks (none; NOP, NOP, timestamps).
    match (<&[u8; 12]>::try_from(opts), rest.first_chunk_mut::<12>()) {
        (Ok(o), Some(r)) => *r = *o,
        _ if opts.is_empty() => {}
        _ => rest[..opts.len()].copy_from_slice(opts),
    }
    let mut sum = h.src_port as u64 + h.dst_port as u64;
    sum += (h.seq >> 16) as u64
        + (h.seq & 0xffff) as u64
        + (h.ack >> 16) as u64
        + (h.ack & 0xffff) as u64;
    sum += off_flags as u64 + h.wnd as u64;
    if opts.len().is_multiple_of(4) {
        // Options (12 bytes of timestamps, usually): 16-bit halves of big-endian words,
        // inline (congruent to the folded sum modulo 0xffff, so the checksum is the same).
        for w in opts.chunks_exact(4) {
            let w = u32::from_be_bytes([w[0], w[1], w[2], w[3]]);
            sum += (w >> 16) as u64 + (w & 0xffff) as u64;
        }
    } else {
        sum = checksum::accumulate(sum, opts);
    }
    sum
}

/// Writes Ethernet, IPv6 (no extension headers; `h.ttl` is the hop limit, `h.tos` the
/// traffic class, `h.src_ip`/`h.dst_ip`/`h.ip_id` unused) and TCP headers between
/// `src` and `dst` for a segment with `payload_len` bytes; returns the payload offset and
/// the unfolded sum of the pseudo-header and TCP header for [`store_tcp6_checksum`].
/// Inlined into its one caller (the TCP host's IPv6 writer), as IPv4's is.
#[inline(always)]
pub fn write_headers6_sum(
    buf: &mut [u8],
    h: &TxHdr,
    src: &[u8; 16],
    dst: &[u8; 16],
    opts: &[u8],
    payload_len: usize,
) -> (usize, u64) {
    let tcp_hlen = TCP_LEN + opts.len();
    let tcp_len = tcp_hlen + payload_len;
    let (hdr, rest) = buf
        .split_first_chunk_mut::<HDRS6_LEN>()
        .expect("the caller sized the frame");
    hdr[0..6].copy_from_slice(&h.dst_mac);
    hdr[6..12].copy_from_slice(&h.src_mac);
    hdr[12..14].copy_from_slice(&0x86ddu16.to_be_bytes());
    let vtf = (6u32 << 28) | (h.tos as u32) << 20;
    hdr[14..18].copy_from_slice(&vtf.to_be_bytes());
    hdr[18..20].copy_from_slice(&(tcp_len as u16).to_be_bytes());
    hdr[20] = 6;
    hdr[21] = h.ttl;
    hdr[22..38].copy_from_slice(src);
    hdr[38..54].copy_from_slice(dst);
    let off_flags = (((tcp_hlen / 4) as u16) << 12) | h.flags as u16;
    let tcp_hdr: &mut [u8; TCP_LEN] = (&mut hdr[ETH_LEN + IP6_LEN..])
        .try_into()
        .expect("20 bytes");
    let sum = write_tcp(tcp_hdr, rest, h, off_flags, opts);
    (
        ETH_LEN + IP6_LEN + tcp_hlen,
        sum + checksum::pseudo_header_ipv6_acc(src, dst, 6, tcp_len),
    )
}

/// [`store_tcp_checksum`] for a frame written by [`write_headers6_sum`].
#[inline]
pub fn store_tcp6_checksum(buf: &mut [u8], hdr_sum: u64, payload_sum: u64) {
    let c = !checksum::fold(hdr_sum + payload_sum);
    buf[ETH_LEN + IP6_LEN + 16..ETH_LEN + IP6_LEN + 18].copy_from_slice(&c.to_be_bytes());
}

/// [`partial_tcp_checksum`] for a frame written by [`write_headers6_sum`].
#[inline]
pub fn partial_tcp6_checksum(buf: &mut [u8], src: &[u8; 16], dst: &[u8; 16], frame_len: usize) {
    let tcp_len = frame_len - ETH_LEN - IP6_LEN;
    let c = checksum::fold(checksum::pseudo_header_ipv6_acc(src, dst, 6, tcp_len));
    buf[ETH_LEN + IP6_LEN + 16..ETH_LEN + IP6_LEN + 18].copy_from_slice(&c.to_be_bytes());
}

/// Stores the TCP checksum given the header sum from [`write_headers_sum`] and the
/// payload's sum (computed while copying it).
#[inline]
pub fn store_tcp_checksum(buf: &mut [u8], hdr_sum: u64, payload_sum: u64) {
    let c = !checksum::fold(hdr_sum + payload_sum);
    buf[ETH_LEN + IP_LEN + 16..ETH_LEN + IP_LEN + 18].copy_from_slice(&c.to_be_bytes());
}

/// Computes the TCP checksum of a frame built by [`write_headers`] (payload in place).
#[inline]
pub fn finish_tcp_checksum(buf: &mut [u8], src_ip: u32, dst_ip: u32, frame_len: usize) {
    let tcp = &mut buf[ETH_LEN + IP_LEN..frame_len];
    let c = !checksum::fold(checksum::accumulate(pseudo(src_ip, dst_ip, tcp.len()), tcp));
    tcp[16..18].copy_from_slice(&c.to_be_bytes());
}

/// Stores only the pseudo-header sum in the TCP checksum field (for a NIC / port that
/// completes the checksum: TX checksum offload).
#[inline]
pub fn partial_tcp_checksum(buf: &mut [u8], src_ip: u32, dst_ip: u32, frame_len: usize) {
    let tcp_len = frame_len - ETH_LEN - IP_LEN;
    let c = checksum::fold(pseudo(src_ip, dst_ip, tcp_len));
    buf[ETH_LEN + IP_LEN + 16..ETH_LEN + IP_LEN + 18].copy_from_slice(&c.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(payload: &[u8], opts: &[u8]) -> Vec<u8> {
        let h = TxHdr {
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [2, 0, 0, 0, 0, 2],
            src_ip: 0x1000_0001,
            dst_ip: 0x3000_0001,
            ip_id: 7,
            src_port: 1025,
            dst_port: 80,
            seq: 1000,
            ack: 2000,
            flags: ACK | PSH,
            wnd: 65535,
            ttl: 64,
            tos: 0,
        };
        let mut buf = vec![0u8; 1514];
        let off = write_headers(&mut buf, &h, opts, payload.len());
        buf[off..off + payload.len()].copy_from_slice(payload);
        finish_tcp_checksum(&mut buf, h.src_ip, h.dst_ip, off + payload.len());
        buf.truncate(off + payload.len());
        buf
    }

    // RFC 9293 §3.1: checksum over pseudo-header, header and data; round trip.
    #[test]
    fn rfc9293_3_1_build_parse_roundtrip() {
        let f = build(b"hello", &[2, 4, 0x05, 0xb4]);
        let s = parse(&f).unwrap();
        assert_eq!(
            (s.src_port, s.dst_port, s.seq, s.ack),
            (1025, 80, 1000, 2000)
        );
        assert_eq!(s.flags, ACK | PSH);
        assert_eq!(s.payload, b"hello");
        assert_eq!(parse_opts(s.opts).mss, 1460);
        assert_eq!(s.seg_len(), 5);
    }

    // RFC 9293 §3.1: a segment with a bad checksum is discarded (any single-byte flip).
    #[test]
    fn rfc9293_3_1_bad_checksum_detected() {
        let f = build(b"odd-length payload!", &[]);
        for i in ETH_LEN..f.len() {
            let mut g = f.clone();
            g[i] ^= 0x5a;
            assert!(parse(&g).is_err(), "flip at {i} not detected");
        }
    }

    // RFC 791: a bad IPv4 header checksum is BadIp (20-byte and optioned headers), and
    // the inline 20-byte sum agrees with the generic one on random headers.
    #[test]
    fn ip_header_checksum_checked() {
        let f = build(b"abc", &[]);
        for i in ETH_LEN..ETH_LEN + IP_LEN {
            let mut g = f.clone();
            g[i] ^= 0x01;
            assert!(parse(&g).is_err(), "flip at {i} not detected");
        }
        let mut g = f.clone();
        g[ETH_LEN + 4] ^= 0x80; // IP ID: only the IPv4 checksum covers it
        assert_eq!(parse(&g).unwrap_err(), RxError::BadIp);
        let mut x = 0x1234_5678u32;
        for _ in 0..1000 {
            let mut h = [0u8; IP_LEN];
            for b in h.iter_mut() {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                *b = x as u8;
            }
            let generic = checksum::fold(checksum::accumulate(0, &h)) == 0xffff;
            assert_eq!(ip_header_sum_ok(&h), generic);
            // Make it valid: store the checksum over the rest.
            h[10] = 0;
            h[11] = 0;
            let c = !checksum::fold(checksum::accumulate(0, &h));
            h[10..12].copy_from_slice(&c.to_be_bytes());
            assert!(ip_header_sum_ok(&h));
            assert!(
                ip_header_sum_ok(&[h.as_slice(), &[1, 2, 3, 4]].concat())
                    == (checksum::fold(checksum::accumulate(
                        0,
                        &[h.as_slice(), &[1, 2, 3, 4]].concat()
                    )) == 0xffff)
            );
        }
    }

    // RFC 9293 §3.1: the header sum from write_headers_sum (options summed inline) plus
    // the payload sum gives a checksum the receiver verifies, for option blocks of
    // every multiple of 4 up to 40 bytes and odd/even payloads.
    #[test]
    fn header_sum_with_options_gives_valid_checksum() {
        let h = TxHdr {
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [2, 0, 0, 0, 0, 2],
            src_ip: 0xc612_0001,
            dst_ip: 0xc613_ffff,
            ip_id: 0xfffe,
            src_port: 0xffff,
            dst_port: 80,
            seq: 0xffff_fff0,
            ack: 0x8000_ffff,
            flags: ACK | PSH,
            wnd: 0xffff,
            ttl: 64,
            tos: 0,
        };
        for olen in (0..=40).step_by(4) {
            let opts: Vec<u8> = (0..olen).map(|k| (k * 37 + 255) as u8).collect();
            for payload in [&b""[..], b"x", b"\xff\xff\xff", b"hello world!"] {
                let mut buf = vec![0u8; 200];
                let (off, hs) = write_headers_sum(&mut buf, &h, &opts, payload.len());
                buf[off..off + payload.len()].copy_from_slice(payload);
                let psum = checksum::sum(payload) as u64;
                store_tcp_checksum(&mut buf, hs, psum);
                let f = &buf[..off + payload.len()];
                let s = parse(f).expect("checksum verifies");
                assert_eq!((s.opts, s.payload), (&opts[..], payload), "olen {olen}");
            }
        }
    }

    // The fast path of parse_opt agrees with the general parser on valid frames of
    // every shape and on every single-byte mutation and truncation of them.
    #[test]
    fn fast_parse_agrees_with_general_parser() {
        let mut x = 0x9e37_79b9u32;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x
        };
        for (payload, opts) in [
            (&b""[..], &[][..]),
            (b"x", &[1, 1, 8, 10, 0, 0, 0, 7, 0, 0, 0, 9][..]),
            (
                b"hello world, a longer payload of some bytes",
                &[2, 4, 5, 0xb4][..],
            ),
        ] {
            let f = build(payload, opts);
            assert_eq!(parse_opt(&f, true), parse_general(&f, true));
            assert!(parse_opt(&f, true).is_ok());
            for n in 0..=f.len() {
                assert_eq!(parse_opt(&f[..n], true), parse_general(&f[..n], true));
            }
            for _ in 0..4000 {
                let mut g = f.clone();
                let i = rnd() as usize % g.len();
                g[i] = rnd() as u8;
                if rnd() % 4 == 0 {
                    let j = rnd() as usize % g.len();
                    g[j] ^= 1 << (rnd() % 8);
                }
                for v in [true, false] {
                    assert_eq!(parse_opt(&g, v), parse_general(&g, v), "mutation at {i}");
                }
            }
        }
    }

    /// What the total parsers of this crate make of `f`: the segment if `f` is an
    /// untagged Ethernet/IPv4/TCP frame, not a fragment, whose IPv4 and TCP checksums
    /// verify.
    fn total_parse(f: &[u8]) -> Option<Segment<'_>> {
        use crate::{parse_frame, L3, L4};
        let fr = parse_frame(f).ok()?;
        if fr.eth.is_tagged() || !fr.checksums_ok() {
            return None;
        }
        let L3::Ipv4(ip, L4::Tcp(t)) = fr.l3 else {
            return None;
        };
        let (b, hl) = (t.into_inner(), t.header_len());
        Some(Segment {
            src_mac: fr.eth.src().0,
            src_ip: u32::from_be_bytes(ip.src().0),
            dst_ip: u32::from_be_bytes(ip.dst().0),
            src_port: t.src_port(),
            dst_port: t.dst_port(),
            seq: t.seq_number(),
            ack: t.ack_number(),
            flags: (t.flags().0 & 0x3f) as u8,
            wnd: t.window_len(),
            up: t.urgent_at(),
            opts: &b[TCP_LEN..hl],
            payload: &b[hl..],
        })
    }

    // The fast parser accepts exactly the frames the total parsers of this crate
    // (`parse_frame`, `Ipv4Packet`, `TcpPacket`, with checksums verified) accept as
    // untagged IPv4/TCP, and reads the same fields, on valid frames of every shape and
    // on every single-byte mutation and truncation of them.
    #[test]
    fn fast_parse_agrees_with_total_parser() {
        let mut x = 0x2545_f491u32;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x
        };
        let mut accepted = 0;
        for (payload, opts) in [
            (&b""[..], &[][..]),
            (b"x", &[1, 1, 8, 10, 0, 0, 0, 7, 0, 0, 0, 9][..]),
            (
                b"hello world, a longer payload of some bytes",
                &[2, 4, 5, 0xb4][..],
            ),
        ] {
            let f = build(payload, opts);
            let mut frames: Vec<Vec<u8>> = (0..=f.len()).map(|n| f[..n].to_vec()).collect();
            for _ in 0..4000 {
                let mut g = f.clone();
                let i = rnd() as usize % g.len();
                g[i] = rnd() as u8;
                if rnd() % 4 == 0 {
                    let j = rnd() as usize % g.len();
                    g[j] ^= 1 << (rnd() % 8);
                }
                frames.push(g);
            }
            for g in &frames {
                let fast = parse(g).ok();
                assert_eq!(fast, total_parse(g), "{g:02x?}");
                accepted += fast.is_some() as usize;
            }
        }
        assert!(accepted >= 3, "{accepted}");
    }

    #[test]
    fn canonical_ts_agrees_with_parse_opts() {
        let o = [1, 1, 8, 10, 0, 0, 0, 7, 0, 0, 0, 9];
        assert_eq!(canonical_ts(&o), Some((7, 9)));
        let p = parse_opts(&o);
        assert_eq!(
            p,
            TcpOpts {
                ts: Some((7, 9)),
                ..TcpOpts::default()
            }
        );
        assert_eq!(canonical_ts(&[]), None);
        assert_eq!(canonical_ts(&[8, 10, 0, 0, 0, 7, 0, 0, 0, 9, 1, 1]), None);
        assert_eq!(
            canonical_ts(&[1, 1, 8, 10, 0, 0, 0, 7, 0, 0, 0, 9, 1, 1, 1, 1]),
            None
        );
        assert_eq!(canonical_ts(&[1, 1, 8, 9, 0, 0, 0, 7, 0, 0, 0, 9]), None);
    }

    #[test]
    fn malformed_frames_are_errors_not_panics() {
        let f = build(b"x", &[]);
        for n in 0..f.len() {
            let _ = parse(&f[..n]);
        }
        let mut g = f.clone();
        g[ETH_LEN + IP_LEN + 12] = 0xf0; // data offset 60 > segment
        assert!(parse(&g).is_err());
        assert_eq!(parse_opts(&[2, 9, 1]), TcpOpts::default());
        assert_eq!(
            parse_opts(&[1, 1, 3, 3, 20, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2]).wscale,
            Some(14)
        );
        let o = parse_opts(&[4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2]);
        assert!(o.sack_ok);
        assert_eq!(o.ts, Some((1, 2)));
    }
}

#[cfg(test)]
mod ipv6_tests {
    use super::*;
    use crate::{parse_frame, Ipv6Address, L3, L4};

    fn hdr() -> TxHdr {
        TxHdr {
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [2, 0, 0, 0, 0, 2],
            src_ip: 0,
            dst_ip: 0,
            ip_id: 0,
            src_port: 40000,
            dst_port: 80,
            seq: 0x0102_0304,
            ack: 0xa0b0_c0d0,
            flags: ACK | PSH,
            wnd: 512,
            ttl: 64,
            tos: 0x10,
        }
    }

    /// A frame written by `write_headers6_sum` parses back through both the general
    /// views and `parse6_opt`, checksum valid; a flipped bit is caught.
    #[test]
    fn write_then_parse() {
        let src: Ipv6Address = "2001:db8::1".parse().unwrap();
        let dst: Ipv6Address = "2001:db8::2".parse().unwrap();
        let opts = [1, 1, 8, 10, 0, 0, 0, 7, 0, 0, 0, 9];
        let payload = b"hello over ipv6, odd length";
        let flen = HDRS6_LEN + opts.len() + payload.len();
        let mut buf = vec![0u8; flen];
        let (off, sum) = write_headers6_sum(&mut buf, &hdr(), &src.0, &dst.0, &opts, payload.len());
        buf[off..].copy_from_slice(payload);
        let psum = checksum::accumulate(0, payload);
        store_tcp6_checksum(&mut buf, sum, psum);
        let f = parse_frame(&buf).unwrap();
        assert!(f.checksums_ok());
        let L3::Ipv6(ip, L4::Tcp(t)) = f.l3 else {
            panic!("{f:?}")
        };
        assert_eq!(
            (ip.src(), ip.dst(), ip.hop_limit(), ip.traffic_class()),
            (src, dst, 64, 0x10)
        );
        assert_eq!(t.payload(), payload);
        let (seg, s, d) = parse6_opt(&buf, true).unwrap();
        assert_eq!((s, d), (src.0, dst.0));
        assert_eq!(
            (seg.src_port, seg.dst_port, seg.seq, seg.ack),
            (40000, 80, 0x0102_0304, 0xa0b0_c0d0)
        );
        assert_eq!(seg.flags, ACK | PSH);
        assert_eq!(seg.opts, &opts);
        assert_eq!(seg.payload, payload);
        assert_eq!(parse_opt(&buf, true), Err(RxError::NotTcp));
        let mut bad = buf.clone();
        bad[flen - 1] ^= 1;
        assert_eq!(parse6_opt(&bad, true), Err(RxError::BadSum));
        assert!(parse6_opt(&bad, false).is_ok());
        // the partial checksum a NIC completes
        let mut p = buf.clone();
        partial_tcp6_checksum(&mut p, &src.0, &dst.0, flen);
        let tcp = &mut p[ETH_LEN + IP6_LEN..];
        let c = !checksum::fold(checksum::accumulate(0, tcp));
        tcp[16..18].copy_from_slice(&c.to_be_bytes());
        assert_eq!(p, buf);
    }

    #[test]
    fn extension_headers_and_errors() {
        let src = [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
        let dst = [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];
        let mut buf = vec![0u8; HDRS6_LEN];
        let (_, sum) = write_headers6_sum(&mut buf, &hdr(), &src, &dst, &[], 0);
        store_tcp6_checksum(&mut buf, sum, 0);
        // insert a destination options header in front of TCP
        let mut e = buf.clone();
        e.splice(54..54, [6, 0, 1, 4, 0, 0, 0, 0]);
        e[20] = 60;
        e[19] += 8;
        let (seg, _, _) = parse6_opt(&e, true).unwrap();
        assert_eq!(seg.dst_port, 80);
        let mut f = e.clone();
        f[20] = 44; // a fragment header (offset 0, more fragments): not TCP for the host
        f[54..62].copy_from_slice(&[6, 0, 0, 1, 0, 0, 0, 1]);
        assert_eq!(parse6_opt(&f, true), Err(RxError::NotTcp));
        assert_eq!(parse6_opt(&buf[..60], true), Err(RxError::BadIp));
        assert_eq!(parse6_opt(&buf[..40], true), Err(RxError::Short));
        let mut v = buf.clone();
        v[14] = 0x45;
        assert_eq!(parse6_opt(&v, true), Err(RxError::BadIp));
        let mut o = buf.clone();
        o[ETH_LEN + IP6_LEN + 12] = 0x40;
        assert_eq!(parse6_opt(&o, true), Err(RxError::BadOff));
    }

    // RFC 7126 §4.3-4.4: a source-routed IPv4 segment (LSRR, SSRR) is not for the host
    // (`NotTcp`); other options (record route) are carried.
    #[test]
    fn ipv4_source_routes_are_refused() {
        let mut buf = vec![0u8; 200];
        let (off, hs) = write_headers_sum(&mut buf, &hdr(), &[], 0);
        store_tcp_checksum(&mut buf, hs, 0);
        let lsrr = [131u8, 7, 4, 10, 0, 0, 9, 0];
        let ssrr = [137u8, 7, 4, 10, 0, 0, 9, 0];
        let rr = [1u8, 7, 7, 4, 0, 0, 0, 0];
        for (opts, ok) in [(lsrr, false), (ssrr, false), (rr, true)] {
            let mut f = buf[..off].to_vec();
            f.splice(34..34, opts);
            f[14] = 0x47;
            let total = u16::from_be_bytes([f[16], f[17]]) + 8;
            f[16..18].copy_from_slice(&total.to_be_bytes());
            f[24..26].copy_from_slice(&[0, 0]);
            let c = checksum::checksum(&f[14..42]);
            f[24..26].copy_from_slice(&c.to_be_bytes());
            let want = if ok { Ok(80) } else { Err(RxError::NotTcp) };
            assert_eq!(parse(&f).map(|s| s.dst_port), want, "option {}", opts[0]);
        }
    }
}
