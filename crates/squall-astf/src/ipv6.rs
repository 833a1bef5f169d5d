//! IPv6 addressing of profiles: the 96-bit high part ("most significant bits", TRex's
//! `ipv6.src_msb` / `ipv6.dst_msb`) that turns a pool's 32-bit values into IPv6
//! addresses, the `ipv6.*` tunables as resolved per side, and the per-template map
//! ([`Ipv6Map`]) the generator addresses a template's flows with.
//!
//! TRex's model, kept as is: address pools are 32-bit ranges; with `ipv6.enable` a
//! client address is `src_msb` with its low 32 bits replaced by the pool value, a server
//! address `dst_msb` likewise. A native IPv6 pool (`["2001:db8::1", "2001:db8::ff"]`) is
//! the same thing written out: its first and last address share their high 96 bits.

use std::net::Ipv6Addr;

/// The high 96 bits of an IPv6 address.
pub type Msb = [u8; 12];

/// The address `msb` + `low` (the low 32 bits, host order).
#[inline]
pub fn join(msb: &Msb, low: u32) -> [u8; 16] {
    let mut a = [0u8; 16];
    a[..12].copy_from_slice(msb);
    a[12..].copy_from_slice(&low.to_be_bytes());
    a
}

/// An address split into its high 96 bits and its low 32 bits (host order).
#[inline]
pub fn split(a: &[u8; 16]) -> (Msb, u32) {
    let mut m = [0u8; 12];
    m.copy_from_slice(&a[..12]);
    (m, u32::from_be_bytes([a[12], a[13], a[14], a[15]]))
}

/// Parses an `ipv6.src_msb`/`dst_msb` value: an IPv6 address whose high 96 bits are
/// taken (TRex overwrites the low 32 bits with the pool's value, so they are ignored).
pub fn parse_msb(s: &str) -> Result<Msb, String> {
    s.parse::<Ipv6Addr>()
        .map(|a| split(&a.octets()).0)
        .map_err(|_| format!("invalid IPv6 address {s:?} (e.g. \"2001:db8::\")"))
}

/// The `ipv6.*` tunables of one side, resolved (TRex's defaults: off, `::` both ways).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ipv6Tunables {
    /// `ipv6.enable`: the side's flows over IPv6.
    pub enable: bool,
    /// `ipv6.src_msb`: the high 96 bits of client (source) addresses.
    pub src_msb: Msb,
    /// `ipv6.dst_msb`: the high 96 bits of server (destination) addresses.
    pub dst_msb: Msb,
}

/// How the flows of one template are addressed over IPv6: pool values (low 32 bits)
/// under these high bits. A template without one runs over IPv4.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ipv6Map {
    pub client: Msb,
    pub server: Msb,
}

impl Ipv6Map {
    /// The IPv6 address of client pool value `low`.
    #[inline]
    pub fn client_addr(&self, low: u32) -> [u8; 16] {
        join(&self.client, low)
    }
    /// The IPv6 address of server pool value `low`.
    #[inline]
    pub fn server_addr(&self, low: u32) -> [u8; 16] {
        join(&self.server, low)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn join_and_split_invert() {
        let m = parse_msb("2001:db8:0:2222::").unwrap();
        let a = join(&m, 0x1000_0001);
        assert_eq!(
            Ipv6Addr::from(a),
            "2001:db8:0:2222::1000:1".parse::<Ipv6Addr>().unwrap()
        );
        assert_eq!(split(&a), (m, 0x1000_0001));
    }

    #[test]
    fn msb_ignores_the_low_bits_and_refuses_non_addresses() {
        assert_eq!(
            parse_msb("ff02::1:2").unwrap(),
            parse_msb("ff02::").unwrap()
        );
        assert!(parse_msb("16.0.0.1").unwrap_err().contains("invalid IPv6"));
        assert!(parse_msb("2001:db8::/64").is_err());
    }

    #[test]
    fn map_puts_pool_values_under_each_side_prefix() {
        let map = Ipv6Map {
            client: parse_msb("2001:db8:1::").unwrap(),
            server: parse_msb("2001:db8:2::").unwrap(),
        };
        assert_eq!(
            Ipv6Addr::from(map.client_addr(0x1000_0002)),
            "2001:db8:1::1000:2".parse::<Ipv6Addr>().unwrap()
        );
        assert_eq!(
            Ipv6Addr::from(map.server_addr(0x3000_0001)),
            "2001:db8:2::3000:1".parse::<Ipv6Addr>().unwrap()
        );
    }
}
