//! ARP for Ethernet/IPv4 (RFC 826): the [`ArpPacket`] view, [`ArpOperation`]
//! and the [`ArpRepr`] builder.

use crate::field::{get_u16, set_u16};
use crate::{Error, EtherType, Ipv4Address, MacAddress, Result};

mod field {
    pub const HTYPE: usize = 0;
    pub const PTYPE: usize = 2;
    pub const HLEN: usize = 4;
    pub const PLEN: usize = 5;
    pub const OPER: usize = 6;
    pub const SHA: usize = 8;
    pub const SPA: usize = 14;
    pub const THA: usize = 18;
    pub const TPA: usize = 24;
}

/// Length of an Ethernet/IPv4 ARP packet.
pub const ARP_LEN: usize = 28;
/// Hardware type for Ethernet.
pub const HTYPE_ETHERNET: u16 = 1;

/// ARP operation code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ArpOperation(pub u16);

impl ArpOperation {
    /// Request, 1.
    pub const REQUEST: ArpOperation = ArpOperation(1);
    /// Reply, 2.
    pub const REPLY: ArpOperation = ArpOperation(2);
}

/// A read/write view of an Ethernet/IPv4 ARP packet.
///
/// `new_checked` guarantees: at least 28 bytes, hardware type 1, protocol
/// type 0x0800, address lengths 6 and 4 (other pairs give
/// [`Error::Unsupported`]). Trailing bytes (Ethernet padding) are ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> ArpPacket<T> {
    /// Wrap without validation (accessors may panic on short buffers).
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Self {
        ArpPacket { buffer }
    }

    /// Wrap after validating length and the Ethernet/IPv4 address formats.
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self> {
        let b = buffer.as_ref();
        if b.len() < field::OPER {
            return Err(Error::Truncated);
        }
        if get_u16(b, field::HTYPE) != HTYPE_ETHERNET
            || get_u16(b, field::PTYPE) != EtherType::IPV4.0
            || b[field::HLEN] != 6
            || b[field::PLEN] != 4
        {
            return Err(Error::Unsupported);
        }
        if b.len() < ARP_LEN {
            return Err(Error::Truncated);
        }
        Ok(ArpPacket { buffer })
    }

    /// Give back the wrapped buffer.
    #[inline]
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Operation.
    #[inline]
    pub fn operation(&self) -> ArpOperation {
        ArpOperation(get_u16(self.buffer.as_ref(), field::OPER))
    }

    /// Sender hardware address.
    #[inline]
    pub fn sender_mac(&self) -> MacAddress {
        mac_at(self.buffer.as_ref(), field::SHA)
    }

    /// Sender protocol address.
    #[inline]
    pub fn sender_ip(&self) -> Ipv4Address {
        ip_at(self.buffer.as_ref(), field::SPA)
    }

    /// Target hardware address.
    #[inline]
    pub fn target_mac(&self) -> MacAddress {
        mac_at(self.buffer.as_ref(), field::THA)
    }

    /// Target protocol address.
    #[inline]
    pub fn target_ip(&self) -> Ipv4Address {
        ip_at(self.buffer.as_ref(), field::TPA)
    }
}

#[inline]
fn mac_at(b: &[u8], at: usize) -> MacAddress {
    let mut a = [0u8; 6];
    a.copy_from_slice(&b[at..at + 6]);
    MacAddress(a)
}

#[inline]
fn ip_at(b: &[u8], at: usize) -> Ipv4Address {
    Ipv4Address([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ArpPacket<T> {
    /// Set the operation.
    #[inline]
    pub fn set_operation(&mut self, op: ArpOperation) {
        set_u16(self.buffer.as_mut(), field::OPER, op.0);
    }

    /// Set the sender hardware address.
    #[inline]
    pub fn set_sender_mac(&mut self, a: MacAddress) {
        self.buffer.as_mut()[field::SHA..field::SHA + 6].copy_from_slice(&a.0);
    }

    /// Set the sender protocol address.
    #[inline]
    pub fn set_sender_ip(&mut self, a: Ipv4Address) {
        self.buffer.as_mut()[field::SPA..field::SPA + 4].copy_from_slice(&a.0);
    }

    /// Set the target hardware address.
    #[inline]
    pub fn set_target_mac(&mut self, a: MacAddress) {
        self.buffer.as_mut()[field::THA..field::THA + 6].copy_from_slice(&a.0);
    }

    /// Set the target protocol address.
    #[inline]
    pub fn set_target_ip(&mut self, a: Ipv4Address) {
        self.buffer.as_mut()[field::TPA..field::TPA + 4].copy_from_slice(&a.0);
    }
}

/// A high-level description of an Ethernet/IPv4 ARP packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ArpRepr {
    /// Operation.
    pub operation: ArpOperation,
    /// Sender hardware address.
    pub sender_mac: MacAddress,
    /// Sender protocol address.
    pub sender_ip: Ipv4Address,
    /// Target hardware address (zero in requests).
    pub target_mac: MacAddress,
    /// Target protocol address.
    pub target_ip: Ipv4Address,
}

impl ArpRepr {
    /// A who-has request for `target_ip`.
    pub const fn request(
        sender_mac: MacAddress,
        sender_ip: Ipv4Address,
        target_ip: Ipv4Address,
    ) -> ArpRepr {
        ArpRepr {
            operation: ArpOperation::REQUEST,
            sender_mac,
            sender_ip,
            target_mac: MacAddress::UNSPECIFIED,
            target_ip,
        }
    }

    /// The reply to `req`, from `my_mac` (which owns `req.target_ip`).
    pub const fn reply_to(req: &ArpRepr, my_mac: MacAddress) -> ArpRepr {
        ArpRepr {
            operation: ArpOperation::REPLY,
            sender_mac: my_mac,
            sender_ip: req.target_ip,
            target_mac: req.sender_mac,
            target_ip: req.sender_ip,
        }
    }

    /// Read the fields of a checked packet.
    pub fn parse<T: AsRef<[u8]>>(p: &ArpPacket<T>) -> ArpRepr {
        ArpRepr {
            operation: p.operation(),
            sender_mac: p.sender_mac(),
            sender_ip: p.sender_ip(),
            target_mac: p.target_mac(),
            target_ip: p.target_ip(),
        }
    }

    /// Write the 28-byte packet; returns 28.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let b = buf.get_mut(..ARP_LEN).ok_or(Error::NoSpace)?;
        set_u16(b, field::HTYPE, HTYPE_ETHERNET);
        set_u16(b, field::PTYPE, EtherType::IPV4.0);
        b[field::HLEN] = 6;
        b[field::PLEN] = 4;
        let mut p = ArpPacket::new_unchecked(b);
        p.set_operation(self.operation);
        p.set_sender_mac(self.sender_mac);
        p.set_sender_ip(self.sender_ip);
        p.set_target_mac(self.target_mac);
        p.set_target_ip(self.target_ip);
        Ok(ARP_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_reply_roundtrip() {
        let req = ArpRepr::request(
            MacAddress([2, 0, 0, 0, 0, 1]),
            Ipv4Address::new(198, 18, 0, 1),
            Ipv4Address::new(198, 18, 0, 2),
        );
        let mut buf = [0u8; 46];
        assert_eq!(req.emit(&mut buf).unwrap(), 28);
        assert_eq!(&buf[..8], &[0, 1, 8, 0, 6, 4, 0, 1]);
        let p = ArpPacket::new_checked(&buf[..]).unwrap();
        assert_eq!(ArpRepr::parse(&p), req);
        let rep = ArpRepr::reply_to(&req, MacAddress([2, 0, 0, 0, 0, 2]));
        rep.emit(&mut buf).unwrap();
        let p = ArpPacket::new_checked(&buf[..28]).unwrap();
        assert_eq!(p.operation(), ArpOperation::REPLY);
        assert_eq!(p.sender_ip(), Ipv4Address::new(198, 18, 0, 2));
        assert_eq!(p.target_mac(), MacAddress([2, 0, 0, 0, 0, 1]));
    }

    #[test]
    fn rejects() {
        let mut buf = [0u8; 28];
        ArpRepr::request(
            MacAddress::BROADCAST,
            Ipv4Address::UNSPECIFIED,
            Ipv4Address::UNSPECIFIED,
        )
        .emit(&mut buf)
        .unwrap();
        for n in 0..28 {
            assert!(ArpPacket::new_checked(&buf[..n]).is_err());
        }
        let mut b = buf;
        b[5] = 16; // IPv6-sized protocol address
        assert_eq!(ArpPacket::new_checked(&b[..]), Err(Error::Unsupported));
        let mut b = buf;
        b[1] = 6; // IEEE 802 hardware
        assert_eq!(ArpPacket::new_checked(&b[..]), Err(Error::Unsupported));
        assert_eq!(
            ArpRepr::request(
                MacAddress::BROADCAST,
                Ipv4Address::UNSPECIFIED,
                Ipv4Address::UNSPECIFIED
            )
            .emit(&mut [0u8; 27]),
            Err(Error::NoSpace)
        );
    }
}
