//! Link and network address types: [`MacAddress`] and [`Ipv4Address`].

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
}
