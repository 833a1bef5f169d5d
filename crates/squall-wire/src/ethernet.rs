//! Ethernet II frames with an optional single 802.1Q VLAN tag: the
//! [`EthernetFrame`] view, [`EtherType`], [`VlanTag`] and [`EthernetRepr`].

use crate::field::{get_u16, set_u16};
use crate::{Error, MacAddress, Result};

/// An EtherType value (a newtype so that unknown values stay representable).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EtherType(pub u16);

impl EtherType {
    /// IPv4, 0x0800.
    pub const IPV4: EtherType = EtherType(0x0800);
    /// ARP, 0x0806.
    pub const ARP: EtherType = EtherType(0x0806);
    /// 802.1Q VLAN tag (C-tag), 0x8100.
    pub const VLAN: EtherType = EtherType(0x8100);
    /// IPv6, 0x86dd.
    pub const IPV6: EtherType = EtherType(0x86dd);
    /// 802.1ad service tag (S-tag), 0x88a8.
    pub const QINQ: EtherType = EtherType(0x88a8);
}

/// An 802.1Q tag control information: priority, drop-eligible bit, VLAN id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct VlanTag {
    /// Priority code point, 0..=7.
    pub pcp: u8,
    /// Drop eligible indicator.
    pub dei: bool,
    /// VLAN identifier, 0..=4095.
    pub vid: u16,
}

impl VlanTag {
    /// Tag with priority 0 and the given VLAN id (masked to 12 bits).
    pub const fn new(vid: u16) -> VlanTag {
        VlanTag {
            pcp: 0,
            dei: false,
            vid: vid & 0x0fff,
        }
    }

    /// Decode the 16-bit TCI.
    #[inline]
    pub const fn from_tci(tci: u16) -> VlanTag {
        VlanTag {
            pcp: (tci >> 13) as u8,
            dei: tci & 0x1000 != 0,
            vid: tci & 0x0fff,
        }
    }

    /// Encode as the 16-bit TCI (out-of-range fields are masked).
    #[inline]
    pub const fn tci(&self) -> u16 {
        ((self.pcp as u16 & 7) << 13) | ((self.dei as u16) << 12) | (self.vid & 0x0fff)
    }
}

mod field {
    pub const DST: usize = 0;
    pub const SRC: usize = 6;
    pub const TYPE: usize = 12;
    pub const TCI: usize = 14;
    pub const INNER_TYPE: usize = 16;
}

/// Length of an untagged Ethernet II header.
pub const ETHERNET_HEADER_LEN: usize = 14;
/// Length of an Ethernet II header carrying one 802.1Q tag.
pub const ETHERNET_VLAN_HEADER_LEN: usize = 18;

/// A read/write view of an Ethernet II frame (without FCS).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EthernetFrame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    /// Wrap without validation. Accessors may panic if the buffer is shorter
    /// than the header; use only on buffers you sized yourself.
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Self {
        EthernetFrame { buffer }
    }

    /// Wrap after checking that the (possibly tagged) header fits.
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self> {
        let f = EthernetFrame { buffer };
        f.check_len()?;
        Ok(f)
    }

    /// Check that the buffer holds the whole header, including a VLAN tag if
    /// the outer EtherType says there is one.
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        let b = self.buffer.as_ref();
        if b.len() < ETHERNET_HEADER_LEN {
            return Err(Error::Truncated);
        }
        if get_u16(b, field::TYPE) == EtherType::VLAN.0 && b.len() < ETHERNET_VLAN_HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Give back the wrapped buffer.
    #[inline]
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Destination MAC.
    #[inline]
    pub fn dst(&self) -> MacAddress {
        let b = self.buffer.as_ref();
        let mut a = [0u8; 6];
        a.copy_from_slice(&b[field::DST..field::DST + 6]);
        MacAddress(a)
    }

    /// Source MAC.
    #[inline]
    pub fn src(&self) -> MacAddress {
        let b = self.buffer.as_ref();
        let mut a = [0u8; 6];
        a.copy_from_slice(&b[field::SRC..field::SRC + 6]);
        MacAddress(a)
    }

    /// The EtherType in the outer position (0x8100 for tagged frames).
    #[inline]
    pub fn outer_ethertype(&self) -> EtherType {
        EtherType(get_u16(self.buffer.as_ref(), field::TYPE))
    }

    /// True if the frame carries an 802.1Q tag.
    #[inline]
    pub fn is_tagged(&self) -> bool {
        self.outer_ethertype() == EtherType::VLAN
    }

    /// The 802.1Q tag, if present.
    #[inline]
    pub fn vlan(&self) -> Option<VlanTag> {
        if self.is_tagged() {
            Some(VlanTag::from_tci(get_u16(self.buffer.as_ref(), field::TCI)))
        } else {
            None
        }
    }

    /// The EtherType of the payload (after the VLAN tag if there is one).
    #[inline]
    pub fn ethertype(&self) -> EtherType {
        let b = self.buffer.as_ref();
        if self.is_tagged() {
            EtherType(get_u16(b, field::INNER_TYPE))
        } else {
            EtherType(get_u16(b, field::TYPE))
        }
    }

    /// Header length: 14, or 18 with a VLAN tag. Also the payload offset.
    #[inline]
    pub fn header_len(&self) -> usize {
        if self.is_tagged() {
            ETHERNET_VLAN_HEADER_LEN
        } else {
            ETHERNET_HEADER_LEN
        }
    }

    /// Everything after the header (may include Ethernet padding).
    #[inline]
    pub fn payload(&self) -> &[u8] {
        let h = self.header_len();
        &self.buffer.as_ref()[h..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EthernetFrame<T> {
    /// Set the destination MAC.
    #[inline]
    pub fn set_dst(&mut self, a: MacAddress) {
        self.buffer.as_mut()[field::DST..field::DST + 6].copy_from_slice(&a.0);
    }

    /// Set the source MAC.
    #[inline]
    pub fn set_src(&mut self, a: MacAddress) {
        self.buffer.as_mut()[field::SRC..field::SRC + 6].copy_from_slice(&a.0);
    }

    /// Set the payload EtherType (the inner one on tagged frames).
    #[inline]
    pub fn set_ethertype(&mut self, t: EtherType) {
        let at = if self.is_tagged() {
            field::INNER_TYPE
        } else {
            field::TYPE
        };
        set_u16(self.buffer.as_mut(), at, t.0);
    }

    /// Rewrite the tag of a frame that already carries one. Returns
    /// [`Error::Unsupported`] on untagged frames (adding a tag moves the
    /// payload; build a new header with [`EthernetRepr`] instead).
    #[inline]
    pub fn set_vlan(&mut self, tag: VlanTag) -> Result<()> {
        if !self.is_tagged() {
            return Err(Error::Unsupported);
        }
        set_u16(self.buffer.as_mut(), field::TCI, tag.tci());
        Ok(())
    }

    /// Swap source and destination MACs (reflecting a frame).
    #[inline]
    pub fn swap_addrs(&mut self) {
        let (s, d) = (self.src(), self.dst());
        self.set_src(d);
        self.set_dst(s);
    }

    /// Mutable payload.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let h = self.header_len();
        &mut self.buffer.as_mut()[h..]
    }
}

/// A high-level description of an Ethernet header, for emitting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EthernetRepr {
    /// Source MAC.
    pub src: MacAddress,
    /// Destination MAC.
    pub dst: MacAddress,
    /// Optional 802.1Q tag.
    pub vlan: Option<VlanTag>,
    /// Payload EtherType.
    pub ethertype: EtherType,
}

impl EthernetRepr {
    /// Read the header fields out of a checked frame.
    #[inline]
    pub fn parse<T: AsRef<[u8]>>(f: &EthernetFrame<T>) -> EthernetRepr {
        EthernetRepr {
            src: f.src(),
            dst: f.dst(),
            vlan: f.vlan(),
            ethertype: f.ethertype(),
        }
    }

    /// Bytes [`emit`](Self::emit) writes: 14 or 18.
    #[inline]
    pub const fn header_len(&self) -> usize {
        if self.vlan.is_some() {
            ETHERNET_VLAN_HEADER_LEN
        } else {
            ETHERNET_HEADER_LEN
        }
    }

    /// Write the header at the start of `buf`; returns the header length.
    #[inline]
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let n = self.header_len();
        let b = buf.get_mut(..n).ok_or(Error::NoSpace)?;
        b[0..6].copy_from_slice(&self.dst.0);
        b[6..12].copy_from_slice(&self.src.0);
        match self.vlan {
            Some(tag) => {
                set_u16(b, field::TYPE, EtherType::VLAN.0);
                set_u16(b, field::TCI, tag.tci());
                set_u16(b, field::INNER_TYPE, self.ethertype.0);
            }
            None => set_u16(b, field::TYPE, self.ethertype.0),
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const UNTAGGED: [u8; 18] = [
        0x02, 0, 0, 0, 0, 0x02, // dst
        0x02, 0, 0, 0, 0, 0x01, // src
        0x08, 0x00, // IPv4
        0xde, 0xad, 0xbe, 0xef,
    ];

    const TAGGED: [u8; 20] = [
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // dst
        0x02, 0, 0, 0, 0, 0x01, // src
        0x81, 0x00, 0xa0, 0x64, // prio 5, vid 100
        0x08, 0x06, // ARP
        0x01, 0x02,
    ];

    #[test]
    fn parse_untagged() {
        let f = EthernetFrame::new_checked(&UNTAGGED[..]).unwrap();
        assert_eq!(f.dst(), MacAddress([2, 0, 0, 0, 0, 2]));
        assert_eq!(f.src(), MacAddress([2, 0, 0, 0, 0, 1]));
        assert_eq!(f.ethertype(), EtherType::IPV4);
        assert_eq!(f.vlan(), None);
        assert_eq!(f.header_len(), 14);
        assert_eq!(f.payload(), &[0xde, 0xad, 0xbe, 0xef]);
    }

    #[test]
    fn parse_tagged() {
        let f = EthernetFrame::new_checked(&TAGGED[..]).unwrap();
        assert!(f.dst().is_broadcast());
        let tag = f.vlan().unwrap();
        assert_eq!((tag.pcp, tag.dei, tag.vid), (5, false, 100));
        assert_eq!(f.ethertype(), EtherType::ARP);
        assert_eq!(f.outer_ethertype(), EtherType::VLAN);
        assert_eq!(f.header_len(), 18);
        assert_eq!(f.payload(), &[1, 2]);
    }

    #[test]
    fn truncation() {
        for n in 0..14 {
            assert_eq!(
                EthernetFrame::new_checked(&UNTAGGED[..n]),
                Err(Error::Truncated)
            );
        }
        for n in 14..18 {
            assert_eq!(
                EthernetFrame::new_checked(&TAGGED[..n]),
                Err(Error::Truncated)
            );
        }
        assert!(EthernetFrame::new_checked(&TAGGED[..18]).is_ok());
    }

    #[test]
    fn emit_roundtrip() {
        for vlan in [
            None,
            Some(VlanTag::new(4095)),
            Some(VlanTag::from_tci(0xffff)),
        ] {
            let r = EthernetRepr {
                src: MacAddress([2, 1, 2, 3, 4, 5]),
                dst: MacAddress::BROADCAST,
                vlan,
                ethertype: EtherType::IPV4,
            };
            let mut buf = [0u8; 64];
            let n = r.emit(&mut buf).unwrap();
            assert_eq!(n, r.header_len());
            let f = EthernetFrame::new_checked(&buf[..]).unwrap();
            assert_eq!(EthernetRepr::parse(&f), r);
            assert_eq!(r.emit(&mut buf[..n - 1]), Err(Error::NoSpace));
        }
    }

    #[test]
    fn setters() {
        let mut b = TAGGED;
        let mut f = EthernetFrame::new_checked(&mut b[..]).unwrap();
        f.swap_addrs();
        f.set_ethertype(EtherType::IPV4);
        f.set_vlan(VlanTag::new(7)).unwrap();
        assert_eq!(f.src(), MacAddress::BROADCAST);
        assert_eq!(f.ethertype(), EtherType::IPV4);
        assert_eq!(f.vlan().unwrap().vid, 7);
        let mut u = UNTAGGED;
        let mut f = EthernetFrame::new_checked(&mut u[..]).unwrap();
        assert_eq!(f.set_vlan(VlanTag::new(1)), Err(Error::Unsupported));
        f.payload_mut()[0] = 0;
        assert_eq!(f.payload()[0], 0);
    }
}
