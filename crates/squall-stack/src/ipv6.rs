//! IPv6 in: the check of a received IPv6 frame (fixed header, bounded extension-header
//! walk, a fragment's header found) that finds its upper layer, whether it is addressed to the node
//! (owned unicast, all-nodes, or the solicited-node group of an owned address), and the
//! IPv6 drop counters.

use squall_wire::{Error as WireError, IpProtocol, Ipv6Address, Ipv6Packet, IPV6_HEADER_LEN};

use crate::neigh::ETH_HLEN;
use crate::neigh6::Owned6;

/// A checked IPv6 packet (for the cold protocols: ICMPv6; UDP and TCP once they carry
/// IPv6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ipv6In {
    pub src: Ipv6Address,
    pub dst: Ipv6Address,
    /// The upper-layer protocol after the extension headers.
    pub proto: IpProtocol,
    pub hop_limit: u8,
    /// Where the upper-layer packet starts and ends in the frame (of a fragment: its
    /// data).
    pub l4: (usize, usize),
    /// A fragment (not an atomic one): where its fragment header starts in the frame.
    pub frag_at: Option<usize>,
    /// A fragment header came on the way (an atomic one included).
    pub frag_header: bool,
}

/// Why an IPv6 packet was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ipv6Error {
    /// Version, payload length, truncated or malformed extension headers.
    Header,
    /// An extension header or option to discard (unknown with a discard action, a
    /// routing header with segments left, AH, ...).
    ExtHeader,
}

/// IPv6 counters of a node (each drop is also in the node's `rx_bad`, `rx_other_ip` or
/// `rx_not_ours`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ipv6Stats {
    /// IPv6 frames received.
    pub rx: u64,
    /// Bad fixed header or extension-header chain.
    pub bad_header: u64,
    /// Dropped for an extension header or option the node may not skip.
    pub ext_dropped: u64,
    /// Fragments for the node (to the reassembly: its counters say what became of them).
    pub fragments: u64,
    /// Not to an owned address or a group the node is in.
    pub not_ours: u64,
    /// Upper-layer protocols the node does not carry over IPv6.
    pub other_proto: u64,
}

/// Checks the IPv6 packet of Ethernet frame `d` and walks its extension headers.
pub fn check(d: &[u8]) -> Result<Ipv6In, Ipv6Error> {
    let h = d.get(ETH_HLEN..).ok_or(Ipv6Error::Header)?;
    let p = Ipv6Packet::new_checked(h).map_err(|_| Ipv6Error::Header)?;
    let up = p.upper_layer().map_err(|e| match e {
        WireError::Unsupported => Ipv6Error::ExtHeader,
        _ => Ipv6Error::Header,
    })?;
    let start = ETH_HLEN + IPV6_HEADER_LEN + up.offset;
    let end = ETH_HLEN + IPV6_HEADER_LEN + p.payload_len() as usize;
    Ok(Ipv6In {
        src: p.src(),
        dst: p.dst(),
        proto: up.protocol,
        hop_limit: p.hop_limit(),
        l4: (start, end),
        // (the walk stops right after the fragment header of a fragment)
        frag_at: up.is_fragment().then(|| start - 8),
        frag_header: up.fragment.is_some(),
    })
}

/// Is the frame addressed to `mac` or to an IPv6 multicast MAC (33:33:...)? The IPv6
/// destination decides the rest ([`for_node`]).
#[inline]
pub fn for_mac(d: &[u8], mac: &[u8; 6]) -> bool {
    d.get(..6)
        .is_some_and(|m| m == mac || (m[0] == 0x33 && m[1] == 0x33))
}

/// Is `dst` an address of the node: an owned unicast address, all-nodes (ff02::1), or
/// the solicited-node group of an owned address?
pub fn for_node(dst: &Ipv6Address, owned: &Owned6) -> bool {
    if !dst.is_multicast() {
        return owned.contains(dst.to_u128());
    }
    if *dst == Ipv6Address::LINK_LOCAL_ALL_NODES {
        return true;
    }
    let b = dst.0;
    let prefix = [0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff];
    b[..13] == prefix && owned.has_low24(u32::from_be_bytes([0, b[13], b[14], b[15]]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use squall_wire::{EtherType, EthernetRepr, Ipv6Repr, MacAddress};

    fn frame(next: u8, ext: &[u8], l4_len: usize) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 40 + ext.len() + l4_len];
        EthernetRepr {
            src: MacAddress([2, 0, 0, 0, 0, 1]),
            dst: MacAddress([2, 0, 0, 0, 0, 2]),
            vlan: None,
            ethertype: EtherType::IPV6,
        }
        .emit(&mut f)
        .unwrap();
        let a: Ipv6Address = "2001:db8::1".parse().unwrap();
        let b: Ipv6Address = "2001:db8::2".parse().unwrap();
        Ipv6Repr::new(a, b, IpProtocol(next), ext.len() + l4_len)
            .emit(&mut f[14..])
            .unwrap();
        f[54..54 + ext.len()].copy_from_slice(ext);
        f
    }

    #[test]
    fn finds_the_upper_layer_and_refuses_what_it_must() {
        let f = frame(60, &[58, 0, 1, 4, 0, 0, 0, 0], 8);
        let ip = check(&f).unwrap();
        assert_eq!(ip.proto, IpProtocol::ICMPV6);
        assert_eq!(ip.l4, (62, 70));
        assert_eq!(ip.hop_limit, 64);
        // a fragment (offset 8): its data after the fragment header; an atomic fragment
        // is a whole packet; a discard option, a truncated frame
        let f = frame(44, &[58, 0, 0, 8, 0, 0, 0, 1], 8);
        let ip = check(&f).unwrap();
        assert_eq!((ip.frag_at, ip.l4), (Some(54), (62, 70)));
        let f = frame(44, &[58, 0, 0, 0, 0, 0, 0, 1], 8);
        let ip = check(&f).unwrap();
        assert_eq!(
            (ip.frag_at, ip.proto, ip.l4),
            (None, IpProtocol::ICMPV6, (62, 70))
        );
        let f = frame(60, &[58, 0, 0x80, 4, 0, 0, 0, 0], 8);
        assert_eq!(check(&f), Err(Ipv6Error::ExtHeader));
        let f = frame(58, &[], 8);
        assert_eq!(check(&f[..60]), Err(Ipv6Error::Header));
        assert_eq!(check(&f[..10]), Err(Ipv6Error::Header));
    }

    #[test]
    fn addressed_to_the_node() {
        let base: Ipv6Address = "2001:db8::1:0".parse().unwrap();
        let mut owned = Owned6::default();
        owned.add(base.to_u128(), base.to_u128() + 0xff);
        let a = Ipv6Address::from_u128(base.to_u128() + 7);
        assert!(for_node(&a, &owned));
        assert!(!for_node(&"2001:db8::2:7".parse().unwrap(), &owned));
        assert!(for_node(&a.solicited_node(), &owned));
        assert!(!for_node(
            &Ipv6Address::from_u128(base.to_u128() + 0x1000).solicited_node(),
            &owned
        ));
        assert!(for_node(&Ipv6Address::LINK_LOCAL_ALL_NODES, &owned));
        assert!(!for_node(&Ipv6Address::LINK_LOCAL_ALL_ROUTERS, &owned));
        let mut f = [0u8; 14];
        f[..6].copy_from_slice(&[0x33, 0x33, 0xff, 0, 0, 7]);
        assert!(for_mac(&f, &[2, 0, 0, 0, 0, 1]));
        f[..6].copy_from_slice(&[2, 0, 0, 0, 0, 9]);
        assert!(!for_mac(&f, &[2, 0, 0, 0, 0, 1]));
    }
}
