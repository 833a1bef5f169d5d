//! IPv4 headers (RFC 791): the [`Ipv4Packet`] view (options skipped by IHL,
//! total length checked against the buffer, fragment fields, checksum
//! verify/fill), [`IpProtocol`] and the [`Ipv4Repr`] builder.

use crate::checksum;
use crate::field::{get_u16, set_u16};
use crate::{Error, Ipv4Address, Result};

/// An IP protocol number (a newtype so unknown values stay representable).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IpProtocol(pub u8);

impl IpProtocol {
    /// ICMP, 1.
    pub const ICMP: IpProtocol = IpProtocol(1);
    /// TCP, 6.
    pub const TCP: IpProtocol = IpProtocol(6);
    /// UDP, 17.
    pub const UDP: IpProtocol = IpProtocol(17);
    /// ICMPv6, 58.
    pub const ICMPV6: IpProtocol = IpProtocol(58);
}

mod field {
    pub const VER_IHL: usize = 0;
    pub const TOS: usize = 1;
    pub const LENGTH: usize = 2;
    pub const IDENT: usize = 4;
    pub const FLG_OFF: usize = 6;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: usize = 10;
    pub const SRC: usize = 12;
    pub const DST: usize = 16;
}

/// Length of an IPv4 header without options.
pub const IPV4_HEADER_LEN: usize = 20;
/// Longest IPv4 header (IHL = 15).
pub const IPV4_MAX_HEADER_LEN: usize = 60;

/// Whether IPv4 header options `opts` (the bytes after the fixed 20) carry a loose or
/// strict source route (LSRR 131, SSRR 137), or options that cannot be walked (a length
/// below 2 or past their end: a source route could hide behind it). The walk stops at
/// the end marker. A node drops such packets (RFC 7126 §4.3-4.4): a reply would owe the
/// reversed route (RFC 1122 §3.2.2.6).
pub fn source_routed(mut opts: &[u8]) -> bool {
    while let [kind, rest @ ..] = opts {
        match kind {
            0 => return false,
            1 => opts = rest,
            131 | 137 => return true,
            _ => match rest.first() {
                Some(&len) if len >= 2 && usize::from(len) <= opts.len() => {
                    opts = &opts[usize::from(len)..];
                }
                _ => return true,
            },
        }
    }
    false
}

/// A read/write view of an IPv4 packet.
///
/// `new_checked` guarantees: buffer >= 20 bytes, version 4, IHL >= 5, the
/// whole header (with options) is in the buffer, and header length <= total
/// length <= buffer length. The buffer may be longer than the total length
/// (Ethernet padding); [`payload`](Self::payload) stops at the total length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    /// Wrap without validation (accessors may panic on short buffers).
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Self {
        Ipv4Packet { buffer }
    }

    /// Wrap after validating lengths and version (see the type docs).
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Ipv4Packet { buffer };
        p.check_len()?;
        Ok(p)
    }

    /// The checks behind [`new_checked`](Self::new_checked).
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        let b = self.buffer.as_ref();
        if b.len() < IPV4_HEADER_LEN {
            return Err(Error::Truncated);
        }
        if b[field::VER_IHL] >> 4 != 4 {
            return Err(Error::Unsupported);
        }
        let hl = self.header_len();
        if hl < IPV4_HEADER_LEN {
            return Err(Error::Malformed);
        }
        if b.len() < hl {
            return Err(Error::Truncated);
        }
        let tl = self.total_len() as usize;
        if tl < hl {
            return Err(Error::Malformed);
        }
        if b.len() < tl {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Give back the wrapped buffer.
    #[inline]
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The version field (4 on checked packets).
    #[inline]
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] >> 4
    }

    /// Header length in bytes (IHL * 4), options included.
    #[inline]
    pub fn header_len(&self) -> usize {
        ((self.buffer.as_ref()[field::VER_IHL] & 0x0f) as usize) * 4
    }

    /// The whole TOS byte (DSCP << 2 | ECN).
    #[inline]
    pub fn tos(&self) -> u8 {
        self.buffer.as_ref()[field::TOS]
    }

    /// Differentiated services code point (upper 6 bits of TOS).
    #[inline]
    pub fn dscp(&self) -> u8 {
        self.tos() >> 2
    }

    /// ECN bits (lower 2 bits of TOS).
    #[inline]
    pub fn ecn(&self) -> u8 {
        self.tos() & 3
    }

    /// Total length (header + payload) from the header.
    #[inline]
    pub fn total_len(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::LENGTH)
    }

    /// Identification.
    #[inline]
    pub fn ident(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::IDENT)
    }

    /// The reserved (evil) bit.
    #[inline]
    pub fn reserved_flag(&self) -> bool {
        get_u16(self.buffer.as_ref(), field::FLG_OFF) & 0x8000 != 0
    }

    /// Don't Fragment.
    #[inline]
    pub fn dont_frag(&self) -> bool {
        get_u16(self.buffer.as_ref(), field::FLG_OFF) & 0x4000 != 0
    }

    /// More Fragments.
    #[inline]
    pub fn more_frags(&self) -> bool {
        get_u16(self.buffer.as_ref(), field::FLG_OFF) & 0x2000 != 0
    }

    /// Fragment offset in 8-byte units, as on the wire.
    #[inline]
    pub fn frag_offset_units(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::FLG_OFF) & 0x1fff
    }

    /// Fragment offset in bytes.
    #[inline]
    pub fn frag_offset(&self) -> u32 {
        self.frag_offset_units() as u32 * 8
    }

    /// True if this packet is a fragment (MF set or non-zero offset).
    #[inline]
    pub fn is_fragment(&self) -> bool {
        get_u16(self.buffer.as_ref(), field::FLG_OFF) & 0x3fff != 0
    }

    /// Time to live.
    #[inline]
    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[field::TTL]
    }

    /// Upper-layer protocol.
    #[inline]
    pub fn protocol(&self) -> IpProtocol {
        IpProtocol(self.buffer.as_ref()[field::PROTOCOL])
    }

    /// Header checksum field.
    #[inline]
    pub fn checksum(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// Source address.
    #[inline]
    pub fn src(&self) -> Ipv4Address {
        let b = self.buffer.as_ref();
        Ipv4Address([
            b[field::SRC],
            b[field::SRC + 1],
            b[field::SRC + 2],
            b[field::SRC + 3],
        ])
    }

    /// Destination address.
    #[inline]
    pub fn dst(&self) -> Ipv4Address {
        let b = self.buffer.as_ref();
        Ipv4Address([
            b[field::DST],
            b[field::DST + 1],
            b[field::DST + 2],
            b[field::DST + 3],
        ])
    }

    /// The raw options (between byte 20 and the header length); not parsed.
    #[inline]
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[IPV4_HEADER_LEN..self.header_len()]
    }

    /// The whole header, options included.
    #[inline]
    pub fn header(&self) -> &[u8] {
        &self.buffer.as_ref()[..self.header_len()]
    }

    /// The payload: from the header length to the total length.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        &b[self.header_len()..self.total_len() as usize]
    }

    /// Payload length (total length - header length).
    #[inline]
    pub fn payload_len(&self) -> usize {
        self.total_len() as usize - self.header_len()
    }

    /// True if the header checksum verifies.
    #[inline]
    pub fn verify_checksum(&self) -> bool {
        let h = self.header();
        let s = if let Ok(a) = <&[u8; 20]>::try_from(h) {
            checksum::sum20(a)
        } else {
            checksum::sum(h)
        };
        s == 0xffff
    }

    /// The pseudo-header sum for this packet's upper-layer payload.
    #[inline]
    pub fn pseudo_header_sum(&self) -> u16 {
        checksum::pseudo_header_ipv4(
            &self.src(),
            &self.dst(),
            self.protocol().0,
            self.payload_len() as u32,
        )
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    /// Set version 4 and the header length in bytes (rounded down to 4).
    #[inline]
    pub fn set_header_len(&mut self, len: usize) {
        self.buffer.as_mut()[field::VER_IHL] = 0x40 | ((len / 4) as u8 & 0x0f);
    }

    /// Set the TOS byte.
    #[inline]
    pub fn set_tos(&mut self, tos: u8) {
        self.buffer.as_mut()[field::TOS] = tos;
    }

    /// Set the total length.
    #[inline]
    pub fn set_total_len(&mut self, len: u16) {
        set_u16(self.buffer.as_mut(), field::LENGTH, len);
    }

    /// Set the identification.
    #[inline]
    pub fn set_ident(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::IDENT, v);
    }

    /// Set flags and fragment offset (offset in 8-byte units).
    #[inline]
    pub fn set_frag(&mut self, dont_frag: bool, more_frags: bool, offset_units: u16) {
        let v = ((dont_frag as u16) << 14) | ((more_frags as u16) << 13) | (offset_units & 0x1fff);
        set_u16(self.buffer.as_mut(), field::FLG_OFF, v);
    }

    /// Set the TTL.
    #[inline]
    pub fn set_ttl(&mut self, ttl: u8) {
        self.buffer.as_mut()[field::TTL] = ttl;
    }

    /// Decrement the TTL and patch the checksum incrementally (RFC 1624).
    /// Returns the new TTL; saturates at 0.
    #[inline]
    pub fn decrement_ttl(&mut self) -> u8 {
        let b = self.buffer.as_mut();
        let old = get_u16(b, field::TTL);
        let ttl = b[field::TTL].saturating_sub(1);
        b[field::TTL] = ttl;
        let new = get_u16(b, field::TTL);
        let hc = get_u16(b, field::CHECKSUM);
        set_u16(b, field::CHECKSUM, checksum::update16(hc, old, new));
        ttl
    }

    /// Set the protocol.
    #[inline]
    pub fn set_protocol(&mut self, p: IpProtocol) {
        self.buffer.as_mut()[field::PROTOCOL] = p.0;
    }

    /// Set the checksum field.
    #[inline]
    pub fn set_checksum(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::CHECKSUM, v);
    }

    /// Set the source address.
    #[inline]
    pub fn set_src(&mut self, a: Ipv4Address) {
        self.buffer.as_mut()[field::SRC..field::SRC + 4].copy_from_slice(&a.0);
    }

    /// Set the destination address.
    #[inline]
    pub fn set_dst(&mut self, a: Ipv4Address) {
        self.buffer.as_mut()[field::DST..field::DST + 4].copy_from_slice(&a.0);
    }

    /// Compute and store the header checksum.
    #[inline]
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let h = self.header();
        let c = if let Ok(a) = <&[u8; 20]>::try_from(h) {
            !checksum::sum20(a)
        } else {
            checksum::checksum(h)
        };
        self.set_checksum(c);
    }

    /// Mutable payload (header length .. total length).
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let (h, t) = (self.header_len(), self.total_len() as usize);
        &mut self.buffer.as_mut()[h..t]
    }
}

/// A high-level description of an IPv4 header, for emitting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv4Repr {
    /// Source address.
    pub src: Ipv4Address,
    /// Destination address.
    pub dst: Ipv4Address,
    /// Upper-layer protocol.
    pub protocol: IpProtocol,
    /// Upper-layer length in bytes (total length = header + this).
    pub payload_len: usize,
    /// Time to live.
    pub ttl: u8,
    /// TOS byte (DSCP << 2 | ECN).
    pub tos: u8,
    /// Identification.
    pub ident: u16,
    /// Don't Fragment.
    pub dont_frag: bool,
}

impl Ipv4Repr {
    /// A DF, TTL 64, TOS 0, ident 0 header.
    pub const fn new(
        src: Ipv4Address,
        dst: Ipv4Address,
        protocol: IpProtocol,
        payload_len: usize,
    ) -> Ipv4Repr {
        Ipv4Repr {
            src,
            dst,
            protocol,
            payload_len,
            ttl: 64,
            tos: 0,
            ident: 0,
            dont_frag: true,
        }
    }

    /// Read the fields out of a checked packet (options are not kept).
    pub fn parse<T: AsRef<[u8]>>(p: &Ipv4Packet<T>) -> Ipv4Repr {
        Ipv4Repr {
            src: p.src(),
            dst: p.dst(),
            protocol: p.protocol(),
            payload_len: p.payload_len(),
            ttl: p.ttl(),
            tos: p.tos(),
            ident: p.ident(),
            dont_frag: p.dont_frag(),
        }
    }

    /// Write a 20-byte header with a correct checksum; returns 20.
    #[inline]
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        self.emit_with_options(buf, &[])
    }

    /// Write a header followed by `options`, zero-padded (EOL) to a multiple
    /// of 4 bytes, with a correct checksum. Returns the header length.
    /// Fails with [`Error::NoSpace`] if the options exceed 40 bytes, the
    /// buffer is too small, or the total length would exceed 65535.
    pub fn emit_with_options(&self, buf: &mut [u8], options: &[u8]) -> Result<usize> {
        let hl = IPV4_HEADER_LEN + options.len().div_ceil(4) * 4;
        if hl > IPV4_MAX_HEADER_LEN {
            return Err(Error::NoSpace);
        }
        let total = hl + self.payload_len;
        if total > u16::MAX as usize {
            return Err(Error::NoSpace);
        }
        let b = buf.get_mut(..hl).ok_or(Error::NoSpace)?;
        b[IPV4_HEADER_LEN..IPV4_HEADER_LEN + options.len()].copy_from_slice(options);
        b[IPV4_HEADER_LEN + options.len()..].fill(0);
        let mut p = Ipv4Packet::new_unchecked(b);
        p.set_header_len(hl);
        p.set_tos(self.tos);
        p.set_total_len(total as u16);
        p.set_ident(self.ident);
        p.set_frag(self.dont_frag, false, 0);
        p.set_ttl(self.ttl);
        p.set_protocol(self.protocol);
        p.set_src(self.src);
        p.set_dst(self.dst);
        p.fill_checksum();
        Ok(hl)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<u8> {
        // 20-byte header, UDP, total length 28 (8 payload) + 2 pad bytes.
        let mut v = vec![
            0x45, 0x00, 0x00, 0x1c, 0x12, 0x34, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 198, 18, 0, 1,
            198, 18, 0, 2,
        ];
        v.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8, 0xee, 0xee]);
        let c = checksum::checksum(&v[..20]);
        v[10..12].copy_from_slice(&c.to_be_bytes());
        v
    }

    #[test]
    fn parse_fields() {
        let v = sample();
        let p = Ipv4Packet::new_checked(&v[..]).unwrap();
        assert_eq!(p.version(), 4);
        assert_eq!(p.header_len(), 20);
        assert_eq!(p.total_len(), 28);
        assert_eq!(p.ident(), 0x1234);
        assert!(p.dont_frag() && !p.more_frags() && !p.is_fragment());
        assert_eq!(p.ttl(), 64);
        assert_eq!(p.protocol(), IpProtocol::UDP);
        assert_eq!(p.src(), Ipv4Address::new(198, 18, 0, 1));
        assert_eq!(p.dst(), Ipv4Address::new(198, 18, 0, 2));
        assert_eq!(p.payload(), &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert!(p.verify_checksum());
    }

    #[test]
    fn rejects_bad_lengths() {
        let v = sample();
        assert_eq!(Ipv4Packet::new_checked(&v[..19]), Err(Error::Truncated));
        assert_eq!(Ipv4Packet::new_checked(&v[..27]), Err(Error::Truncated));
        let mut w = v.clone();
        w[0] = 0x44; // IHL 4
        assert_eq!(Ipv4Packet::new_checked(&w[..]), Err(Error::Malformed));
        let mut w = v.clone();
        w[0] = 0x65;
        assert_eq!(Ipv4Packet::new_checked(&w[..]), Err(Error::Unsupported));
        let mut w = v.clone();
        w[0] = 0x4f; // IHL 15 = 60 bytes > buffer
        assert_eq!(Ipv4Packet::new_checked(&w[..]), Err(Error::Truncated));
        let mut w = v.clone();
        w[0] = 0x46; // 24 byte header, total 28: fine
        assert!(Ipv4Packet::new_checked(&w[..]).is_ok());
        w[3] = 0x10; // total 16 < header
        assert_eq!(Ipv4Packet::new_checked(&w[..]), Err(Error::Malformed));
    }

    #[test]
    fn options_skipped_by_ihl() {
        let r = Ipv4Repr::new(
            Ipv4Address::new(10, 0, 0, 1),
            Ipv4Address::new(10, 0, 0, 2),
            IpProtocol::TCP,
            4,
        );
        let mut buf = [0u8; 64];
        // Router alert (4 bytes) + NOP + 1 byte that will be padded.
        let opts = [0x94, 0x04, 0x00, 0x00, 0x01];
        let hl = r.emit_with_options(&mut buf, &opts).unwrap();
        assert_eq!(hl, 28);
        buf[hl..hl + 4].copy_from_slice(b"abcd");
        let p = Ipv4Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(p.header_len(), 28);
        assert_eq!(p.options(), &[0x94, 4, 0, 0, 1, 0, 0, 0]);
        assert_eq!(p.payload(), b"abcd");
        assert!(p.verify_checksum());
        assert_eq!(Ipv4Repr::parse(&p), r);
        assert_eq!(
            r.emit_with_options(&mut buf, &[1u8; 41]),
            Err(Error::NoSpace)
        );
        assert_eq!(r.emit(&mut buf[..19]), Err(Error::NoSpace));
    }

    #[test]
    fn fragment_fields_and_ttl_update() {
        let mut v = sample();
        let mut p = Ipv4Packet::new_checked(&mut v[..]).unwrap();
        p.set_frag(false, true, 185);
        p.fill_checksum();
        assert!(p.more_frags() && !p.dont_frag() && p.is_fragment());
        assert_eq!(p.frag_offset(), 1480);
        for _ in 0..70 {
            p.decrement_ttl();
            assert!(p.verify_checksum());
        }
        assert_eq!(p.ttl(), 0);
    }

    #[test]
    fn bad_checksum_detected() {
        let mut v = sample();
        v[8] ^= 1;
        assert!(!Ipv4Packet::new_checked(&v[..]).unwrap().verify_checksum());
    }
}
