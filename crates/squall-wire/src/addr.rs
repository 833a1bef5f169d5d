//! Link and network address types: [`MacAddress`], [`Ipv4Address`] and [`Ipv6Address`].

use core::fmt;

/// A 48-bit Ethernet MAC address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct MacAddress(pub [u8; 6]);

impl MacAddress {
    /// ff:ff:ff:ff:ff:ff
    pub const BROADCAST: MacAddress = MacAddress([0xff; 6]);
    /// 00:00:00:00:00:00
    pub const UNSPECIFIED: MacAddress = MacAddress([0; 6]);

    /// Build from the first 6 bytes of `b`; `None` if `b` is shorter.
    #[inline]
    pub fn from_bytes(b: &[u8]) -> Option<MacAddress> {
        let a: [u8; 6] = b.get(..6)?.try_into().ok()?;
        Some(MacAddress(a))
    }

    /// The raw octets.
    #[inline]
    pub const fn as_bytes(&self) -> &[u8; 6] {
        &self.0
    }

    /// True for ff:ff:ff:ff:ff:ff.
    #[inline]
    pub fn is_broadcast(&self) -> bool {
        self.0 == [0xff; 6]
    }

    /// True if the group bit (I/G, lowest bit of the first octet) is set.
    #[inline]
    pub fn is_multicast(&self) -> bool {
        self.0[0] & 1 != 0
    }

    /// True if unicast (group bit clear).
    #[inline]
    pub fn is_unicast(&self) -> bool {
        !self.is_multicast()
    }

    /// True if the locally-administered bit is set.
    #[inline]
    pub fn is_local(&self) -> bool {
        self.0[0] & 2 != 0
    }
}

impl fmt::Display for MacAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

impl core::str::FromStr for MacAddress {
    type Err = crate::Error;
    /// Parses `aa:bb:cc:dd:ee:ff` (or with `-` separators).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut out = [0u8; 6];
        let mut n = 0;
        for part in s.split([':', '-']) {
            if n == 6 || part.is_empty() || part.len() > 2 {
                return Err(crate::Error::Malformed);
            }
            out[n] = u8::from_str_radix(part, 16).map_err(|_| crate::Error::Malformed)?;
            n += 1;
        }
        if n != 6 {
            return Err(crate::Error::Malformed);
        }
        Ok(MacAddress(out))
    }
}

impl From<[u8; 6]> for MacAddress {
    fn from(a: [u8; 6]) -> Self {
        MacAddress(a)
    }
}

/// An IPv4 address, stored in network byte order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Ipv4Address(pub [u8; 4]);

impl Ipv4Address {
    /// 0.0.0.0
    pub const UNSPECIFIED: Ipv4Address = Ipv4Address([0; 4]);
    /// 255.255.255.255
    pub const BROADCAST: Ipv4Address = Ipv4Address([255; 4]);

    /// From four octets, `a.b.c.d`.
    #[inline]
    pub const fn new(a: u8, b: u8, c: u8, d: u8) -> Ipv4Address {
        Ipv4Address([a, b, c, d])
    }

    /// From a host-order u32 (`0xc0a80001` is 192.168.0.1).
    #[inline]
    pub const fn from_u32(v: u32) -> Ipv4Address {
        Ipv4Address(v.to_be_bytes())
    }

    /// As a host-order u32 (192.168.0.1 is `0xc0a80001`).
    #[inline]
    pub const fn to_u32(self) -> u32 {
        u32::from_be_bytes(self.0)
    }

    /// Build from the first 4 bytes of `b`; `None` if `b` is shorter.
    #[inline]
    pub fn from_bytes(b: &[u8]) -> Option<Ipv4Address> {
        let a: [u8; 4] = b.get(..4)?.try_into().ok()?;
        Some(Ipv4Address(a))
    }

    /// The raw octets.
    #[inline]
    pub const fn as_bytes(&self) -> &[u8; 4] {
        &self.0
    }

    /// True for 0.0.0.0.
    #[inline]
    pub fn is_unspecified(&self) -> bool {
        self.0 == [0; 4]
    }

    /// True for 255.255.255.255.
    #[inline]
    pub fn is_broadcast(&self) -> bool {
        self.0 == [255; 4]
    }

    /// True for 224.0.0.0/4.
    #[inline]
    pub fn is_multicast(&self) -> bool {
        self.0[0] & 0xf0 == 0xe0
    }
}

impl fmt::Display for Ipv4Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        write!(f, "{}.{}.{}.{}", b[0], b[1], b[2], b[3])
    }
}

impl core::str::FromStr for Ipv4Address {
    type Err = crate::Error;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let a: std::net::Ipv4Addr = s.parse().map_err(|_| crate::Error::Malformed)?;
        Ok(a.into())
    }
}

impl From<std::net::Ipv4Addr> for Ipv4Address {
    fn from(a: std::net::Ipv4Addr) -> Self {
        Ipv4Address(a.octets())
    }
}

impl From<Ipv4Address> for std::net::Ipv4Addr {
    fn from(a: Ipv4Address) -> Self {
        std::net::Ipv4Addr::from(a.0)
    }
}

impl From<[u8; 4]> for Ipv4Address {
    fn from(a: [u8; 4]) -> Self {
        Ipv4Address(a)
    }
}

impl From<u32> for Ipv4Address {
    fn from(v: u32) -> Self {
        Ipv4Address::from_u32(v)
    }
}

/// An IPv6 address, stored in network byte order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Ipv6Address(pub [u8; 16]);

impl Ipv6Address {
    /// `::`
    pub const UNSPECIFIED: Ipv6Address = Ipv6Address([0; 16]);
    /// `ff02::1`, all nodes on the link.
    pub const LINK_LOCAL_ALL_NODES: Ipv6Address =
        Ipv6Address([0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    /// `ff02::2`, all routers on the link.
    pub const LINK_LOCAL_ALL_ROUTERS: Ipv6Address =
        Ipv6Address([0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);

    /// From eight 16-bit groups, `a:b:c:d:e:f:g:h`.
    #[allow(clippy::too_many_arguments)]
    pub const fn new(a: u16, b: u16, c: u16, d: u16, e: u16, f: u16, g: u16, h: u16) -> Self {
        let w = [a, b, c, d, e, f, g, h];
        let mut o = [0u8; 16];
        let mut i = 0;
        while i < 8 {
            o[2 * i] = (w[i] >> 8) as u8;
            o[2 * i + 1] = w[i] as u8;
            i += 1;
        }
        Ipv6Address(o)
    }

    /// From a host-order u128.
    #[inline]
    pub const fn from_u128(v: u128) -> Ipv6Address {
        Ipv6Address(v.to_be_bytes())
    }

    /// As a host-order u128.
    #[inline]
    pub const fn to_u128(self) -> u128 {
        u128::from_be_bytes(self.0)
    }

    /// Build from the first 16 bytes of `b`; `None` if `b` is shorter.
    #[inline]
    pub fn from_bytes(b: &[u8]) -> Option<Ipv6Address> {
        let a: [u8; 16] = b.get(..16)?.try_into().ok()?;
        Some(Ipv6Address(a))
    }

    /// The raw octets.
    #[inline]
    pub const fn as_bytes(&self) -> &[u8; 16] {
        &self.0
    }

    /// True for `::`.
    #[inline]
    pub fn is_unspecified(&self) -> bool {
        self.0 == [0; 16]
    }

    /// True for ff00::/8.
    #[inline]
    pub fn is_multicast(&self) -> bool {
        self.0[0] == 0xff
    }

    /// True for fe80::/10.
    #[inline]
    pub fn is_link_local(&self) -> bool {
        self.0[0] == 0xfe && self.0[1] & 0xc0 == 0x80
    }

    /// The solicited-node multicast address of this address, `ff02::1:ffXX:XXXX`
    /// (RFC 4291 §2.7.1), where neighbour solicitations for it are sent.
    pub fn solicited_node(&self) -> Ipv6Address {
        let mut o = [0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0, 0, 0];
        o[13..].copy_from_slice(&self.0[13..]);
        Ipv6Address(o)
    }

    /// The Ethernet multicast address a multicast IPv6 address maps to,
    /// `33:33:` and its low 32 bits (RFC 2464 §7).
    pub fn multicast_mac(&self) -> MacAddress {
        let b = self.0;
        MacAddress([0x33, 0x33, b[12], b[13], b[14], b[15]])
    }

    /// The link-local address with a modified EUI-64 interface identifier made from
    /// `mac` (RFC 4291 appendix A): `fe80::` + mac with the U/L bit flipped and
    /// `ff:fe` in the middle.
    pub fn link_local_from_mac(mac: MacAddress) -> Ipv6Address {
        let m = mac.0;
        Ipv6Address([
            0xfe,
            0x80,
            0,
            0,
            0,
            0,
            0,
            0,
            m[0] ^ 2,
            m[1],
            m[2],
            0xff,
            0xfe,
            m[3],
            m[4],
            m[5],
        ])
    }
}

impl fmt::Display for Ipv6Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // RFC 5952 text form (the standard library's formatter implements it).
        fmt::Display::fmt(&std::net::Ipv6Addr::from(self.0), f)
    }
}

impl core::str::FromStr for Ipv6Address {
    type Err = crate::Error;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let a: std::net::Ipv6Addr = s.parse().map_err(|_| crate::Error::Malformed)?;
        Ok(a.into())
    }
}

impl From<std::net::Ipv6Addr> for Ipv6Address {
    fn from(a: std::net::Ipv6Addr) -> Self {
        Ipv6Address(a.octets())
    }
}

impl From<Ipv6Address> for std::net::Ipv6Addr {
    fn from(a: Ipv6Address) -> Self {
        std::net::Ipv6Addr::from(a.0)
    }
}

impl From<[u8; 16]> for Ipv6Address {
    fn from(a: [u8; 16]) -> Self {
        Ipv6Address(a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mac_parse_display_roundtrip() {
        let m: MacAddress = "02:00:5e:10:00:ff".parse().unwrap();
        assert_eq!(m.0, [2, 0, 0x5e, 0x10, 0, 0xff]);
        assert_eq!(m.to_string(), "02:00:5e:10:00:ff");
        assert!(m.is_local() && m.is_unicast());
        assert!(MacAddress::BROADCAST.is_broadcast() && MacAddress::BROADCAST.is_multicast());
        assert!("02:00:5e:10:00".parse::<MacAddress>().is_err());
        assert!("02:00:5e:10:00:ff:01".parse::<MacAddress>().is_err());
        assert!("02:00:5e:10:00:fg".parse::<MacAddress>().is_err());
        assert_eq!(MacAddress::from_bytes(&[1, 2, 3]), None);
    }

    #[test]
    fn ipv4_conversions() {
        let a = Ipv4Address::new(198, 18, 0, 1);
        assert_eq!(a.to_u32(), 0xc612_0001);
        assert_eq!(Ipv4Address::from_u32(0xc612_0001), a);
        assert_eq!(a.to_string(), "198.18.0.1");
        assert_eq!("198.18.0.1".parse::<Ipv4Address>().unwrap(), a);
        assert!("198.18.0".parse::<Ipv4Address>().is_err());
        assert!(Ipv4Address::new(224, 0, 0, 1).is_multicast());
        assert!(!a.is_multicast());
        let s: std::net::Ipv4Addr = a.into();
        assert_eq!(Ipv4Address::from(s), a);
    }

    #[test]
    fn ipv6_conversions() {
        let a: Ipv6Address = "2001:db8::1".parse().unwrap();
        assert_eq!(a, Ipv6Address::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1));
        assert_eq!(a.to_string(), "2001:db8::1");
        assert_eq!(Ipv6Address::from_u128(a.to_u128()), a);
        assert!("2001:db8::1::2".parse::<Ipv6Address>().is_err());
        assert_eq!(a.solicited_node().to_string(), "ff02::1:ff00:1");
        assert!(a.solicited_node().is_multicast() && !a.is_multicast());
        assert_eq!(
            a.solicited_node().multicast_mac(),
            MacAddress([0x33, 0x33, 0xff, 0, 0, 1])
        );
        let ll = Ipv6Address::link_local_from_mac(MacAddress([0, 0x1b, 0x21, 1, 2, 3]));
        assert_eq!(ll.to_string(), "fe80::21b:21ff:fe01:203");
        assert!(ll.is_link_local() && !a.is_link_local());
        assert_eq!(Ipv6Address::from_bytes(&[0; 15]), None);
        let s: std::net::Ipv6Addr = a.into();
        assert_eq!(Ipv6Address::from(s), a);
    }
}
