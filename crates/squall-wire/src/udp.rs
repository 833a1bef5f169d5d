//! UDP datagrams (RFC 768): the [`UdpPacket`] view (length field checked
//! against the buffer, checksum with the IPv4 pseudo-header where zero means
//! "none", or with the IPv6 pseudo-header where it is mandatory) and the
//! [`UdpRepr`] builder.

use crate::checksum::{self, PseudoHeader};
use crate::field::{get_u16, set_u16};
use crate::{Error, IpProtocol, Result};

mod field {
    pub const SRC_PORT: usize = 0;
    pub const DST_PORT: usize = 2;
    pub const LENGTH: usize = 4;
    pub const CHECKSUM: usize = 6;
}

/// Length of the UDP header.
pub const UDP_HEADER_LEN: usize = 8;

/// A read/write view of a UDP datagram (the IPv4 payload).
///
/// `new_checked` guarantees: buffer >= 8 bytes, 8 <= length field <= buffer
/// length. [`payload`](Self::payload) stops at the length field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> UdpPacket<T> {
    /// Wrap without validation (accessors may panic on short buffers).
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Self {
        UdpPacket { buffer }
    }

    /// Wrap after validating lengths (see the type docs).
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = UdpPacket { buffer };
        p.check_len()?;
        Ok(p)
    }

    /// The checks behind [`new_checked`](Self::new_checked).
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        let b = self.buffer.as_ref();
        if b.len() < UDP_HEADER_LEN {
            return Err(Error::Truncated);
        }
        let l = self.len() as usize;
        if l < UDP_HEADER_LEN {
            return Err(Error::Malformed);
        }
        if l > b.len() {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Give back the wrapped buffer.
    #[inline]
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Source port.
    #[inline]
    pub fn src_port(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::SRC_PORT)
    }

    /// Destination port.
    #[inline]
    pub fn dst_port(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::DST_PORT)
    }

    /// Length field (header + data).
    #[inline]
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::LENGTH)
    }

    /// Checksum field (0 = not computed).
    #[inline]
    pub fn checksum(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// The datagram bytes covered by the length field.
    #[inline]
    pub fn datagram(&self) -> &[u8] {
        &self.buffer.as_ref()[..self.len() as usize]
    }

    /// The data after the header, up to the length field.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[UDP_HEADER_LEN..self.len() as usize]
    }

    /// The checksum to store (with the field taken as zero); a computed 0 is
    /// sent as 0xffff (RFC 768).
    #[inline]
    pub fn compute_checksum<A: PseudoHeader>(&self, src: &A, dst: &A) -> u16 {
        let d = self.datagram();
        let ph = A::pseudo_header_sum(src, dst, IpProtocol::UDP.0, d.len() as u32);
        let s = checksum::add(ph, checksum::sum(d));
        let c = !checksum::add(s, !self.checksum());
        if c == 0 {
            0xffff
        } else {
            c
        }
    }

    /// True if the checksum verifies, or is absent (zero) over IPv4.
    #[inline]
    pub fn verify_checksum<A: PseudoHeader>(&self, src: &A, dst: &A) -> bool {
        if self.checksum() == 0 {
            return A::ZERO_UDP_CHECKSUM_OK;
        }
        let d = self.datagram();
        let ph = A::pseudo_header_sum(src, dst, IpProtocol::UDP.0, d.len() as u32);
        checksum::add(ph, checksum::sum(d)) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> UdpPacket<T> {
    /// Set the source port.
    #[inline]
    pub fn set_src_port(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::SRC_PORT, v);
    }

    /// Set the destination port.
    #[inline]
    pub fn set_dst_port(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::DST_PORT, v);
    }

    /// Set the length field.
    #[inline]
    pub fn set_len(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::LENGTH, v);
    }

    /// Set the checksum field.
    #[inline]
    pub fn set_checksum(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::CHECKSUM, v);
    }

    /// Compute and store the checksum.
    #[inline]
    pub fn fill_checksum<A: PseudoHeader>(&mut self, src: &A, dst: &A) {
        self.set_checksum(0);
        let c = self.compute_checksum(src, dst);
        self.set_checksum(c);
    }

    /// Mutable payload (up to the length field).
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let l = self.len() as usize;
        &mut self.buffer.as_mut()[UDP_HEADER_LEN..l]
    }
}

/// A high-level description of a UDP header, for emitting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UdpRepr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
}

impl UdpRepr {
    /// Read the ports of a checked packet.
    pub fn parse<T: AsRef<[u8]>>(p: &UdpPacket<T>) -> UdpRepr {
        UdpRepr {
            src_port: p.src_port(),
            dst_port: p.dst_port(),
        }
    }

    /// Write header + `payload` into `buf` with the checksum filled (or, over
    /// IPv4 only, left zero if `checksum` is false: IPv6 requires it); returns the
    /// datagram length.
    pub fn emit<A: PseudoHeader>(
        &self,
        buf: &mut [u8],
        payload: &[u8],
        src: &A,
        dst: &A,
        checksum: bool,
    ) -> Result<usize> {
        let n = UDP_HEADER_LEN + payload.len();
        if n > u16::MAX as usize {
            return Err(Error::NoSpace);
        }
        let b = buf.get_mut(..n).ok_or(Error::NoSpace)?;
        b[UDP_HEADER_LEN..].copy_from_slice(payload);
        let mut p = UdpPacket::new_unchecked(b);
        p.set_src_port(self.src_port);
        p.set_dst_port(self.dst_port);
        p.set_len(n as u16);
        p.set_checksum(0);
        if checksum || !A::ZERO_UDP_CHECKSUM_OK {
            p.fill_checksum(src, dst);
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Ipv4Address;

    const SRC: Ipv4Address = Ipv4Address::new(198, 18, 0, 1);
    const DST: Ipv4Address = Ipv4Address::new(198, 18, 0, 2);

    #[test]
    fn emit_parse_verify() {
        for plen in [0usize, 1, 7, 8, 512] {
            let payload: Vec<u8> = (0..plen).map(|i| (i * 7) as u8).collect();
            let mut buf = vec![0xaau8; 600];
            let r = UdpRepr {
                src_port: 5353,
                dst_port: 53,
            };
            let n = r.emit(&mut buf, &payload, &SRC, &DST, true).unwrap();
            // trailing garbage in the buffer is ignored
            let p = UdpPacket::new_checked(&buf[..]).unwrap();
            assert_eq!(p.len() as usize, n);
            assert_eq!(p.payload(), &payload[..]);
            assert!(p.verify_checksum(&SRC, &DST));
            assert_ne!(p.checksum(), 0);
            assert!(!p.verify_checksum(&SRC, &SRC));
            assert_eq!(UdpRepr::parse(&p), r);
            let mut ph = Vec::new();
            ph.extend_from_slice(&SRC.0);
            ph.extend_from_slice(&DST.0);
            ph.extend_from_slice(&[0, 17]);
            ph.extend_from_slice(&(n as u16).to_be_bytes());
            ph.extend_from_slice(&buf[..n]);
            assert_eq!(checksum::sum_reference(&ph), 0xffff);
        }
    }

    #[test]
    fn zero_checksum_means_none() {
        let mut buf = [0u8; 12];
        let r = UdpRepr {
            src_port: 1,
            dst_port: 2,
        };
        r.emit(&mut buf, b"abcd", &SRC, &DST, false).unwrap();
        let p = UdpPacket::new_checked(&buf[..]).unwrap();
        assert_eq!(p.checksum(), 0);
        assert!(p.verify_checksum(&SRC, &DST));
    }

    #[test]
    fn computed_zero_becomes_ffff() {
        // Find a payload whose checksum computes to 0 by adjusting two bytes.
        let mut buf = [0u8; 10];
        let r = UdpRepr {
            src_port: 1,
            dst_port: 2,
        };
        r.emit(&mut buf, &[0, 0], &SRC, &DST, true).unwrap();
        let c = UdpPacket::new_checked(&buf[..]).unwrap().checksum();
        // Adding the old checksum value to the payload word makes the sum
        // 0xffff without the checksum, i.e. a computed checksum of 0.
        buf[8..10].copy_from_slice(&c.to_be_bytes());
        let mut p = UdpPacket::new_checked(&mut buf[..]).unwrap();
        p.fill_checksum(&SRC, &DST);
        assert_eq!(p.checksum(), 0xffff);
        assert!(p.verify_checksum(&SRC, &DST));
    }

    #[test]
    fn length_checks() {
        let mut buf = [0u8; 8];
        buf[5] = 7;
        assert_eq!(UdpPacket::new_checked(&buf[..]), Err(Error::Malformed));
        buf[5] = 9;
        assert_eq!(UdpPacket::new_checked(&buf[..]), Err(Error::Truncated));
        buf[5] = 8;
        assert!(UdpPacket::new_checked(&buf[..]).is_ok());
        assert_eq!(UdpPacket::new_checked(&buf[..7]), Err(Error::Truncated));
    }
}
