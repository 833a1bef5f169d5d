//! ICMPv4 (RFC 792): the [`IcmpPacket`] view with echo request/reply fields
//! and checksum, and the [`IcmpEchoRepr`] builder.

use crate::checksum;
use crate::field::{get_u16, set_u16};
use crate::{Error, Result};

mod field {
    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: usize = 2;
    pub const IDENT: usize = 4;
    pub const SEQ: usize = 6;
}

/// Length of the ICMP header (type, code, checksum, 4 bytes rest-of-header).
pub const ICMP_HEADER_LEN: usize = 8;

/// ICMP message types this crate names.
pub mod msg_type {
    /// Echo reply.
    pub const ECHO_REPLY: u8 = 0;
    /// Destination unreachable.
    pub const DEST_UNREACHABLE: u8 = 3;
    /// Echo request.
    pub const ECHO_REQUEST: u8 = 8;
    /// Time exceeded.
    pub const TIME_EXCEEDED: u8 = 11;
}

/// A read/write view of an ICMPv4 message (the IPv4 payload).
/// `new_checked` guarantees at least 8 bytes; the checksum covers the whole
/// buffer, so pass exactly the IPv4 payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IcmpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> IcmpPacket<T> {
    /// Wrap without validation (accessors may panic on short buffers).
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Self {
        IcmpPacket { buffer }
    }

    /// Wrap after checking the 8-byte header is present.
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self> {
        if buffer.as_ref().len() < ICMP_HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(IcmpPacket { buffer })
    }

    /// Give back the wrapped buffer.
    #[inline]
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Message type.
    #[inline]
    pub fn msg_type(&self) -> u8 {
        self.buffer.as_ref()[field::TYPE]
    }

    /// Message code.
    #[inline]
    pub fn code(&self) -> u8 {
        self.buffer.as_ref()[field::CODE]
    }

    /// Checksum field.
    #[inline]
    pub fn checksum(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// True for echo request or reply with code 0.
    #[inline]
    pub fn is_echo(&self) -> bool {
        matches!(
            self.msg_type(),
            msg_type::ECHO_REQUEST | msg_type::ECHO_REPLY
        ) && self.code() == 0
    }

    /// Echo identifier (meaningful for echo messages).
    #[inline]
    pub fn echo_ident(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::IDENT)
    }

    /// Echo sequence number (meaningful for echo messages).
    #[inline]
    pub fn echo_seq(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::SEQ)
    }

    /// Data after the 8-byte header.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[ICMP_HEADER_LEN..]
    }

    /// True if the checksum over the whole message verifies.
    #[inline]
    pub fn verify_checksum(&self) -> bool {
        checksum::sum(self.buffer.as_ref()) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> IcmpPacket<T> {
    /// Set the type.
    #[inline]
    pub fn set_msg_type(&mut self, v: u8) {
        self.buffer.as_mut()[field::TYPE] = v;
    }

    /// Set the code.
    #[inline]
    pub fn set_code(&mut self, v: u8) {
        self.buffer.as_mut()[field::CODE] = v;
    }

    /// Set the checksum field.
    #[inline]
    pub fn set_checksum(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::CHECKSUM, v);
    }

    /// Set the echo identifier.
    #[inline]
    pub fn set_echo_ident(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::IDENT, v);
    }

    /// Set the echo sequence number.
    #[inline]
    pub fn set_echo_seq(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::SEQ, v);
    }

    /// Compute and store the checksum over the whole buffer.
    #[inline]
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let c = checksum::checksum(self.buffer.as_ref());
        self.set_checksum(c);
    }

    /// Turn an echo request into a reply in place, patching the checksum
    /// incrementally (the type byte changes from 8 to 0).
    #[inline]
    pub fn make_echo_reply(&mut self) {
        let b = self.buffer.as_mut();
        let old = get_u16(b, field::TYPE);
        b[field::TYPE] = msg_type::ECHO_REPLY;
        let new = get_u16(b, field::TYPE);
        let hc = get_u16(b, field::CHECKSUM);
        let c = checksum::update16(hc, old, new);
        set_u16(b, field::CHECKSUM, c);
        if c == 0 {
            // possibly the all-zero case update16 cannot resolve; recompute
            self.fill_checksum();
        }
    }

    /// Mutable data after the header.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[ICMP_HEADER_LEN..]
    }
}

/// An ICMP echo request or reply, for emitting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IcmpEchoRepr {
    /// True for a reply (type 0), false for a request (type 8).
    pub is_reply: bool,
    /// Identifier.
    pub ident: u16,
    /// Sequence number.
    pub seq: u16,
}

impl IcmpEchoRepr {
    /// Parse a checked echo message; [`Error::Unsupported`] for other types.
    pub fn parse<T: AsRef<[u8]>>(p: &IcmpPacket<T>) -> Result<IcmpEchoRepr> {
        if !p.is_echo() {
            return Err(Error::Unsupported);
        }
        Ok(IcmpEchoRepr {
            is_reply: p.msg_type() == msg_type::ECHO_REPLY,
            ident: p.echo_ident(),
            seq: p.echo_seq(),
        })
    }

    /// Write the message with `data` and a filled checksum; returns its length.
    pub fn emit(&self, buf: &mut [u8], data: &[u8]) -> Result<usize> {
        let n = ICMP_HEADER_LEN + data.len();
        let b = buf.get_mut(..n).ok_or(Error::NoSpace)?;
        b[ICMP_HEADER_LEN..].copy_from_slice(data);
        let mut p = IcmpPacket::new_unchecked(b);
        p.set_msg_type(if self.is_reply {
            msg_type::ECHO_REPLY
        } else {
            msg_type::ECHO_REQUEST
        });
        p.set_code(0);
        p.set_echo_ident(self.ident);
        p.set_echo_seq(self.seq);
        p.fill_checksum();
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echo_roundtrip_and_reply() {
        let r = IcmpEchoRepr {
            is_reply: false,
            ident: 0x1234,
            seq: 7,
        };
        let mut buf = [0u8; 64];
        let n = r.emit(&mut buf, b"hello, ping").unwrap();
        assert_eq!(n, 19);
        let mut p = IcmpPacket::new_checked(&mut buf[..n]).unwrap();
        assert!(p.verify_checksum());
        assert_eq!(IcmpEchoRepr::parse(&p).unwrap(), r);
        assert_eq!(p.payload(), b"hello, ping");
        p.make_echo_reply();
        assert!(p.verify_checksum());
        assert!(IcmpEchoRepr::parse(&p).unwrap().is_reply);
        p.set_msg_type(msg_type::DEST_UNREACHABLE);
        assert_eq!(IcmpEchoRepr::parse(&p), Err(Error::Unsupported));
        assert!(!p.verify_checksum());
    }

    #[test]
    fn known_echo_checksum() {
        // Echo request, id 1, seq 1, data "abcd": by hand,
        // 0x0800+0x0001+0x0001+0x6162+0x6364 = 0xccc8, checksum !0xccc8.
        let mut b = [8u8, 0, 0, 0, 0, 1, 0, 1, b'a', b'b', b'c', b'd'];
        let mut p = IcmpPacket::new_checked(&mut b[..]).unwrap();
        p.fill_checksum();
        assert_eq!(p.checksum(), !0xccc8u16);
    }

    #[test]
    fn echo_reply_of_all_zero_request() {
        // type 8, everything else zero: after the change the message is all
        // zero, whose checksum is 0xffff (RFC 1624's degenerate case).
        let mut b = [8u8, 0, 0, 0, 0, 0, 0, 0];
        let mut p = IcmpPacket::new_checked(&mut b[..]).unwrap();
        p.fill_checksum();
        p.make_echo_reply();
        assert!(p.verify_checksum());
        assert_eq!(p.checksum(), 0xffff);
        p.make_echo_reply(); // already a reply: unchanged
        assert!(p.verify_checksum());
    }

    #[test]
    fn too_short() {
        assert_eq!(
            IcmpPacket::new_checked(&[8u8; 7][..]),
            Err(Error::Truncated)
        );
        assert_eq!(
            IcmpEchoRepr {
                is_reply: true,
                ident: 0,
                seq: 0
            }
            .emit(&mut [0u8; 9], b"ab"),
            Err(Error::NoSpace)
        );
    }
}
