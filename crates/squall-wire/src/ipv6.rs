//! IPv6 headers (RFC 8200): the [`Ipv6Packet`] view of the fixed 40-byte header
//! (payload length checked against the buffer), the [`Ipv6Repr`] builder, and the
//! bounded walk over extension headers ([`walk_ext_headers`]: hop-by-hop, routing,
//! fragment and destination options; options inside hop-by-hop and destination options
//! checked by their action bits; anything this crate cannot skip safely is an error the
//! caller counts and drops).

use crate::checksum;
use crate::field::{get_u16, get_u32, set_u16, set_u32};
use crate::{Error, IpProtocol, Ipv6Address, Result};

mod field {
    pub const VER_TC_FL: usize = 0;
    pub const PAYLOAD_LEN: usize = 4;
    pub const NEXT_HEADER: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SRC: usize = 8;
    pub const DST: usize = 24;
}

/// Length of the fixed IPv6 header.
pub const IPV6_HEADER_LEN: usize = 40;
/// The minimum link MTU of IPv6 (RFC 8200 §5).
pub const IPV6_MIN_MTU: usize = 1280;
/// Most extension headers [`walk_ext_headers`] goes through before giving up
/// ([`Error::Malformed`]): a bound on the work one packet can cause.
pub const MAX_EXT_HEADERS: usize = 8;

/// Next-header values of the extension headers (RFC 8200 §4, IANA).
pub mod next_header {
    use crate::IpProtocol;
    /// Hop-by-hop options, 0 (only directly after the fixed header).
    pub const HOP_BY_HOP: IpProtocol = IpProtocol(0);
    /// Routing header, 43.
    pub const ROUTING: IpProtocol = IpProtocol(43);
    /// Fragment header, 44.
    pub const FRAGMENT: IpProtocol = IpProtocol(44);
    /// Encapsulating security payload, 50 (opaque: the walk ends there).
    pub const ESP: IpProtocol = IpProtocol(50);
    /// Authentication header, 51.
    pub const AH: IpProtocol = IpProtocol(51);
    /// No next header, 59.
    pub const NO_NEXT: IpProtocol = IpProtocol(59);
    /// Destination options, 60.
    pub const DEST_OPTS: IpProtocol = IpProtocol(60);
    /// Mobility header, 135.
    pub const MOBILITY: IpProtocol = IpProtocol(135);
    /// Host identity protocol, 139.
    pub const HIP: IpProtocol = IpProtocol(139);
    /// Shim6, 140.
    pub const SHIM6: IpProtocol = IpProtocol(140);
    /// Experimental extension headers, 253 and 254.
    pub const EXPERIMENTAL: [IpProtocol; 2] = [IpProtocol(253), IpProtocol(254)];
}

/// A read/write view of an IPv6 packet.
///
/// `new_checked` guarantees: buffer >= 40 bytes, version 6, and 40 + payload length
/// <= buffer length. The buffer may be longer (Ethernet padding);
/// [`payload`](Self::payload) stops at the payload length. Jumbograms (payload length 0
/// with a jumbo option) are not supported: their payload is empty here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    /// Wrap without validation (accessors may panic on short buffers).
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Self {
        Ipv6Packet { buffer }
    }

    /// Wrap after validating length and version (see the type docs).
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Ipv6Packet { buffer };
        p.check_len()?;
        Ok(p)
    }

    /// The checks behind [`new_checked`](Self::new_checked).
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        let b = self.buffer.as_ref();
        if b.len() < IPV6_HEADER_LEN {
            return Err(Error::Truncated);
        }
        if b[field::VER_TC_FL] >> 4 != 6 {
            return Err(Error::Unsupported);
        }
        if b.len() < IPV6_HEADER_LEN + self.payload_len() as usize {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Give back the wrapped buffer.
    #[inline]
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The version field (6 on checked packets).
    #[inline]
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_TC_FL] >> 4
    }

    /// Traffic class (DSCP << 2 | ECN).
    #[inline]
    pub fn traffic_class(&self) -> u8 {
        (get_u16(self.buffer.as_ref(), field::VER_TC_FL) >> 4) as u8
    }

    /// The 20-bit flow label.
    #[inline]
    pub fn flow_label(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::VER_TC_FL) & 0xf_ffff
    }

    /// Payload length (everything after the fixed header, extension headers included).
    #[inline]
    pub fn payload_len(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::PAYLOAD_LEN)
    }

    /// The next header of the fixed header (an extension header or the upper layer).
    #[inline]
    pub fn next_header(&self) -> IpProtocol {
        IpProtocol(self.buffer.as_ref()[field::NEXT_HEADER])
    }

    /// Hop limit.
    #[inline]
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_LIMIT]
    }

    /// Source address.
    #[inline]
    pub fn src(&self) -> Ipv6Address {
        let mut a = [0u8; 16];
        a.copy_from_slice(&self.buffer.as_ref()[field::SRC..field::SRC + 16]);
        Ipv6Address(a)
    }

    /// Destination address.
    #[inline]
    pub fn dst(&self) -> Ipv6Address {
        let mut a = [0u8; 16];
        a.copy_from_slice(&self.buffer.as_ref()[field::DST..field::DST + 16]);
        Ipv6Address(a)
    }

    /// The fixed header.
    #[inline]
    pub fn header(&self) -> &[u8] {
        &self.buffer.as_ref()[..IPV6_HEADER_LEN]
    }

    /// The payload: extension headers and upper layer, up to the payload length.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[IPV6_HEADER_LEN..IPV6_HEADER_LEN + self.payload_len() as usize]
    }

    /// Walk the extension headers of the payload (see [`walk_ext_headers`]).
    #[inline]
    pub fn upper_layer(&self) -> Result<Ipv6Upper> {
        walk_ext_headers(self.next_header(), self.payload())
    }

    /// The pseudo-header sum for an upper-layer packet of `length` bytes with
    /// `next_header` (RFC 8200 §8.1; the final destination is the destination field,
    /// this crate does not act on routing headers).
    #[inline]
    pub fn pseudo_header_sum(&self, next_header: IpProtocol, length: usize) -> u16 {
        checksum::pseudo_header_ipv6(&self.src(), &self.dst(), next_header.0, length as u32)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6Packet<T> {
    /// Set version 6, the traffic class and the flow label (low 20 bits).
    #[inline]
    pub fn set_version_tc_flow(&mut self, traffic_class: u8, flow_label: u32) {
        let v = (6u32 << 28) | ((traffic_class as u32) << 20) | (flow_label & 0xf_ffff);
        set_u32(self.buffer.as_mut(), field::VER_TC_FL, v);
    }

    /// Set the payload length.
    #[inline]
    pub fn set_payload_len(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::PAYLOAD_LEN, v);
    }

    /// Set the next header.
    #[inline]
    pub fn set_next_header(&mut self, p: IpProtocol) {
        self.buffer.as_mut()[field::NEXT_HEADER] = p.0;
    }

    /// Set the hop limit.
    #[inline]
    pub fn set_hop_limit(&mut self, v: u8) {
        self.buffer.as_mut()[field::HOP_LIMIT] = v;
    }

    /// Set the source address.
    #[inline]
    pub fn set_src(&mut self, a: Ipv6Address) {
        self.buffer.as_mut()[field::SRC..field::SRC + 16].copy_from_slice(&a.0);
    }

    /// Set the destination address.
    #[inline]
    pub fn set_dst(&mut self, a: Ipv6Address) {
        self.buffer.as_mut()[field::DST..field::DST + 16].copy_from_slice(&a.0);
    }

    /// Mutable payload (up to the payload length).
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let l = self.payload_len() as usize;
        &mut self.buffer.as_mut()[IPV6_HEADER_LEN..IPV6_HEADER_LEN + l]
    }
}

/// A high-level description of a fixed IPv6 header, for emitting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv6Repr {
    /// Source address.
    pub src: Ipv6Address,
    /// Destination address.
    pub dst: Ipv6Address,
    /// Next header.
    pub next_header: IpProtocol,
    /// Payload length in bytes (extension headers + upper layer).
    pub payload_len: usize,
    /// Hop limit.
    pub hop_limit: u8,
    /// Traffic class (DSCP << 2 | ECN).
    pub traffic_class: u8,
    /// Flow label (20 bits).
    pub flow_label: u32,
}

impl Ipv6Repr {
    /// A hop limit 64, traffic class 0, flow label 0 header.
    pub const fn new(
        src: Ipv6Address,
        dst: Ipv6Address,
        next_header: IpProtocol,
        payload_len: usize,
    ) -> Ipv6Repr {
        Ipv6Repr {
            src,
            dst,
            next_header,
            payload_len,
            hop_limit: 64,
            traffic_class: 0,
            flow_label: 0,
        }
    }

    /// Read the fields out of a checked packet.
    pub fn parse<T: AsRef<[u8]>>(p: &Ipv6Packet<T>) -> Ipv6Repr {
        Ipv6Repr {
            src: p.src(),
            dst: p.dst(),
            next_header: p.next_header(),
            payload_len: p.payload_len() as usize,
            hop_limit: p.hop_limit(),
            traffic_class: p.traffic_class(),
            flow_label: p.flow_label(),
        }
    }

    /// Write the 40-byte header; returns 40. [`Error::NoSpace`] if the buffer is
    /// shorter or the payload length exceeds 65535 (no jumbograms).
    #[inline]
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        if self.payload_len > u16::MAX as usize {
            return Err(Error::NoSpace);
        }
        let b = buf.get_mut(..IPV6_HEADER_LEN).ok_or(Error::NoSpace)?;
        let mut p = Ipv6Packet::new_unchecked(b);
        p.set_version_tc_flow(self.traffic_class, self.flow_label);
        p.set_payload_len(self.payload_len as u16);
        p.set_next_header(self.next_header);
        p.set_hop_limit(self.hop_limit);
        p.set_src(self.src);
        p.set_dst(self.dst);
        Ok(IPV6_HEADER_LEN)
    }
}

/// The fragment header's fields (RFC 8200 §4.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FragmentInfo {
    /// Fragment offset in 8-byte units.
    pub offset_units: u16,
    /// More fragments follow.
    pub more: bool,
    /// Identification.
    pub ident: u32,
}

impl FragmentInfo {
    /// True for an atomic fragment (offset 0, no more fragments: RFC 6946), which is
    /// processed as a whole packet.
    #[inline]
    pub fn is_atomic(&self) -> bool {
        self.offset_units == 0 && !self.more
    }
}

/// Where the upper layer of an IPv6 packet starts, as found by [`walk_ext_headers`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv6Upper {
    /// The upper-layer protocol (TCP, UDP, ICMPv6, ESP, no-next-header, ...), or the
    /// next header after a fragment header of a non-atomic fragment.
    pub protocol: IpProtocol,
    /// Offset of the upper-layer header from the start of the IPv6 payload.
    pub offset: usize,
    /// Number of extension headers walked.
    pub ext_headers: u8,
    /// The fragment header, if there was one.
    pub fragment: Option<FragmentInfo>,
}

impl Ipv6Upper {
    /// True if this packet is a non-atomic fragment: the upper-layer header is not
    /// parsed (its checksum covers the reassembled packet).
    #[inline]
    pub fn is_fragment(&self) -> bool {
        self.fragment.is_some_and(|f| !f.is_atomic())
    }
}

/// Check the TLV options of a hop-by-hop or destination options header (`opts`: the
/// header without its first two bytes). Pad1, PadN and router alert are known; an
/// unknown option is skipped if its action bits are 00 and otherwise makes the packet
/// one to discard ([`Error::Unsupported`], RFC 8200 §4.2).
fn check_options(mut opts: &[u8]) -> Result<()> {
    while let Some(&kind) = opts.first() {
        if kind == 0 {
            opts = &opts[1..];
            continue;
        }
        let len = *opts.get(1).ok_or(Error::Malformed)? as usize;
        if opts.len() < 2 + len {
            return Err(Error::Malformed);
        }
        match kind {
            1 | 5 => {}
            k if k >> 6 == 0 => {}
            _ => return Err(Error::Unsupported),
        }
        opts = &opts[2 + len..];
    }
    Ok(())
}

/// Walk the extension headers of an IPv6 payload whose first header is `first` (the
/// fixed header's next header), up to the upper layer. Total and bounded: at most
/// [`MAX_EXT_HEADERS`] headers, each checked against the payload.
///
/// * hop-by-hop (only as the first header) and destination options: their options are
///   checked by [`Error::Unsupported`] rules of RFC 8200 §4.2;
/// * routing: skipped when segments left is 0; otherwise [`Error::Unsupported`] (this
///   node does not forward);
/// * fragment: recorded; the walk stops at a non-atomic fragment, continues after an
///   atomic one;
/// * AH, mobility, HIP, shim6 and the experimental numbers: [`Error::Unsupported`];
/// * anything else (TCP, UDP, ICMPv6, ESP, no next header, ...) is the upper layer.
///
/// Errors: [`Error::Truncated`] if a header runs past the payload,
/// [`Error::Malformed`] for a misplaced hop-by-hop header, too many headers or bad
/// option lengths, [`Error::Unsupported`] as above.
pub fn walk_ext_headers(first: IpProtocol, payload: &[u8]) -> Result<Ipv6Upper> {
    use next_header::*;
    let mut up = Ipv6Upper {
        protocol: first,
        offset: 0,
        ext_headers: 0,
        fragment: None,
    };
    loop {
        let nh = up.protocol;
        if nh == HOP_BY_HOP && up.ext_headers != 0 {
            return Err(Error::Malformed);
        }
        let ext_len = match nh {
            HOP_BY_HOP | ROUTING | DEST_OPTS | FRAGMENT => {
                if up.ext_headers as usize == MAX_EXT_HEADERS {
                    return Err(Error::Malformed);
                }
                let h = payload.get(up.offset..).ok_or(Error::Truncated)?;
                if h.len() < 8 {
                    return Err(Error::Truncated);
                }
                let len = if nh == FRAGMENT {
                    8
                } else {
                    (h[1] as usize + 1) * 8
                };
                if h.len() < len {
                    return Err(Error::Truncated);
                }
                let h = &h[..len];
                match nh {
                    HOP_BY_HOP | DEST_OPTS => check_options(&h[2..])?,
                    ROUTING => {
                        if h[3] != 0 {
                            return Err(Error::Unsupported);
                        }
                    }
                    _ => {
                        let off = get_u16(h, 2);
                        let f = FragmentInfo {
                            offset_units: off >> 3,
                            more: off & 1 != 0,
                            ident: get_u32(h, 4),
                        };
                        up.fragment = Some(f);
                        if !f.is_atomic() {
                            up.protocol = IpProtocol(h[0]);
                            up.offset += len;
                            up.ext_headers += 1;
                            return Ok(up);
                        }
                    }
                }
                up.protocol = IpProtocol(h[0]);
                len
            }
            AH | MOBILITY | HIP | SHIM6 => return Err(Error::Unsupported),
            p if EXPERIMENTAL.contains(&p) => return Err(Error::Unsupported),
            _ => return Ok(up),
        };
        up.offset += ext_len;
        up.ext_headers += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: Ipv6Address = Ipv6Address::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
    const B: Ipv6Address = Ipv6Address::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2);

    fn packet(next: IpProtocol, payload: &[u8]) -> Vec<u8> {
        let mut v = vec![0u8; 40];
        Ipv6Repr {
            traffic_class: 0xb8,
            flow_label: 0x12345,
            ..Ipv6Repr::new(A, B, next, payload.len())
        }
        .emit(&mut v)
        .unwrap();
        v.extend_from_slice(payload);
        v.extend_from_slice(&[0xee; 3]); // padding beyond the payload length
        v
    }

    #[test]
    fn parse_fields_and_roundtrip() {
        let v = packet(IpProtocol::UDP, &[1, 2, 3, 4, 5, 6, 7, 8]);
        let p = Ipv6Packet::new_checked(&v[..]).unwrap();
        assert_eq!(p.version(), 6);
        assert_eq!(p.traffic_class(), 0xb8);
        assert_eq!(p.flow_label(), 0x12345);
        assert_eq!(p.payload_len(), 8);
        assert_eq!(p.next_header(), IpProtocol::UDP);
        assert_eq!(p.hop_limit(), 64);
        assert_eq!((p.src(), p.dst()), (A, B));
        assert_eq!(p.payload(), &[1, 2, 3, 4, 5, 6, 7, 8]);
        let r = Ipv6Repr::parse(&p);
        let mut out = [0u8; 40];
        r.emit(&mut out).unwrap();
        assert_eq!(&out[..], &v[..40]);
        let u = p.upper_layer().unwrap();
        assert_eq!(
            (u.protocol, u.offset, u.ext_headers),
            (IpProtocol::UDP, 0, 0)
        );
        assert!(!u.is_fragment());
    }

    #[test]
    fn rejects_bad_lengths() {
        let v = packet(IpProtocol::UDP, &[0; 8]);
        assert_eq!(Ipv6Packet::new_checked(&v[..39]), Err(Error::Truncated));
        assert_eq!(Ipv6Packet::new_checked(&v[..47]), Err(Error::Truncated));
        assert!(Ipv6Packet::new_checked(&v[..48]).is_ok());
        let mut w = v.clone();
        w[0] = 0x45;
        assert_eq!(Ipv6Packet::new_checked(&w[..]), Err(Error::Unsupported));
        let r = Ipv6Repr::new(A, B, IpProtocol::TCP, 70_000);
        assert_eq!(r.emit(&mut [0u8; 40]), Err(Error::NoSpace));
        let r = Ipv6Repr::new(A, B, IpProtocol::TCP, 0);
        assert_eq!(r.emit(&mut [0u8; 39]), Err(Error::NoSpace));
    }

    #[test]
    fn walks_extension_headers() {
        // HBH (router alert + PadN) -> DestOpts (PadN, unknown skip-type 0x1e) ->
        // routing (segments left 0) -> atomic fragment -> TCP
        let mut pl = vec![];
        pl.extend_from_slice(&[60, 0, 5, 2, 0, 0, 1, 0]);
        pl.extend_from_slice(&[43, 0, 1, 0, 0x1e, 2, 9, 9]);
        pl.extend_from_slice(&[44, 0, 4, 0, 0, 0, 0, 0]);
        pl.extend_from_slice(&[6, 0, 0, 0, 0, 0, 0, 42]);
        pl.extend_from_slice(&[0xaa; 20]);
        let u = walk_ext_headers(IpProtocol(0), &pl).unwrap();
        assert_eq!(u.protocol, IpProtocol::TCP);
        assert_eq!(u.offset, 32);
        assert_eq!(u.ext_headers, 4);
        let f = u.fragment.unwrap();
        assert!(f.is_atomic() && !u.is_fragment());
        assert_eq!(f.ident, 42);
        // a first fragment stops the walk
        pl[24 + 3] = 1;
        let u = walk_ext_headers(IpProtocol(0), &pl).unwrap();
        assert!(u.is_fragment());
        assert_eq!((u.protocol, u.offset), (IpProtocol::TCP, 32));
        // an unknown option whose action is "discard"
        let mut d = pl.clone();
        d[8 + 4] = 0x5e;
        assert_eq!(walk_ext_headers(IpProtocol(0), &d), Err(Error::Unsupported));
        // routing with segments left
        let mut d = pl.clone();
        d[16 + 3] = 1;
        assert_eq!(walk_ext_headers(IpProtocol(0), &d), Err(Error::Unsupported));
        // hop-by-hop not first
        assert_eq!(
            walk_ext_headers(IpProtocol(60), &[0; 16]),
            Err(Error::Malformed)
        );
        // option length past the header
        assert_eq!(
            walk_ext_headers(IpProtocol(60), &[6, 0, 1, 9, 0, 0, 0, 0]),
            Err(Error::Malformed)
        );
        // truncated headers
        assert_eq!(
            walk_ext_headers(IpProtocol(60), &[6, 1, 0, 0, 0, 0, 0, 0]),
            Err(Error::Truncated)
        );
        assert_eq!(
            walk_ext_headers(IpProtocol(44), &[6, 0, 0]),
            Err(Error::Truncated)
        );
        // AH and experimental headers are dropped, ESP is an upper layer
        assert_eq!(
            walk_ext_headers(IpProtocol(51), &[0; 16]),
            Err(Error::Unsupported)
        );
        assert_eq!(
            walk_ext_headers(IpProtocol(253), &[0; 16]),
            Err(Error::Unsupported)
        );
        assert_eq!(
            walk_ext_headers(IpProtocol(50), &[0; 16]).unwrap().protocol,
            IpProtocol(50)
        );
    }

    #[test]
    fn walk_is_bounded() {
        // a chain of destination options headers, each pointing to the next
        let pl: Vec<u8> = (0..16).flat_map(|_| [60u8, 0, 1, 4, 0, 0, 0, 0]).collect();
        assert_eq!(walk_ext_headers(IpProtocol(60), &pl), Err(Error::Malformed));
        let mut ok = pl[..8 * MAX_EXT_HEADERS].to_vec();
        ok[8 * (MAX_EXT_HEADERS - 1)] = 17;
        let u = walk_ext_headers(IpProtocol(60), &ok).unwrap();
        assert_eq!(u.ext_headers as usize, MAX_EXT_HEADERS);
        assert_eq!(u.protocol, IpProtocol::UDP);
    }
}
