//! IPv4 in: the one check of a received frame's Ethernet and IPv4 headers that decides
//! where it goes (ARP, TCP, UDP, ICMP, IPv6, or dropped and counted). TCP frames are passed on
//! whole: the TCP host verifies its own headers on its fast path.

use squall_wire::checksum;

use crate::neigh::{BROADCAST, ETHERTYPE_ARP, ETHERTYPE_IPV4, ETHERTYPE_IPV6, ETH_HLEN};

pub(crate) const IP_PROTO_ICMP: u8 = 1;
pub(crate) const IP_PROTO_TCP: u8 = 6;
pub(crate) const IP_PROTO_UDP: u8 = 17;

/// Where a received frame goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    Tcp,
    Udp,
    Icmp,
    Arp,
    /// IPv6 (checked by [`crate::ipv6`]).
    Ipv6,
    /// IPv4 with another protocol, or not for us.
    OtherIp,
    /// Neither IPv4, IPv6 nor ARP (LLDP...).
    OtherEther,
    /// An IPv4 fragment (to [`crate::reasm`]).
    Fragment,
    /// Too short or malformed.
    Bad,
}

/// The first look at a frame: ethertype and IPv4 protocol, nothing verified. Inlined on
/// the receive path (two byte compares for the common TCP frame).
#[inline(always)]
pub fn classify(d: &[u8]) -> Class {
    if d.len() < ETH_HLEN + 20 {
        return if d.len() >= ETH_HLEN && u16::from_be_bytes([d[12], d[13]]) == ETHERTYPE_ARP {
            Class::Arp
        } else {
            Class::Bad
        };
    }
    match u16::from_be_bytes([d[12], d[13]]) {
        // More fragments or an offset: a fragment, whatever its protocol.
        ETHERTYPE_IPV4 if d[20] & 0x3f != 0 || d[21] != 0 => Class::Fragment,
        ETHERTYPE_IPV4 => match d[23] {
            IP_PROTO_TCP => Class::Tcp,
            IP_PROTO_UDP => Class::Udp,
            IP_PROTO_ICMP => Class::Icmp,
            _ => Class::OtherIp,
        },
        ETHERTYPE_ARP => Class::Arp,
        // TCP right after the fixed header: the host's own parser checks the rest.
        ETHERTYPE_IPV6 if d[20] == IP_PROTO_TCP => Class::Tcp,
        ETHERTYPE_IPV6 => Class::Ipv6,
        _ => Class::OtherEther,
    }
}

/// A checked IPv4 header (for the cold protocols: UDP, ICMP).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ipv4In {
    pub src: u32,
    pub dst: u32,
    pub proto: u8,
    /// Header length in bytes.
    pub ihl: usize,
    /// Total length (header + payload) in bytes.
    pub total: usize,
}

/// Why an IPv4 packet was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ipv4Error {
    /// Version, header length, total length, or (where not asked for) a fragment.
    Header,
    /// Header checksum.
    Checksum,
    /// A source route option (LSRR, SSRR): dropped, RFC 7126 §4.3-4.4.
    SourceRoute,
}

/// Checks the IPv4 header of Ethernet frame `d` (version, lengths, no fragment,
/// checksum).
pub fn check(d: &[u8]) -> Result<Ipv4In, Ipv4Error> {
    check_header(d, false)
}

/// [`check`] of a fragment (or a whole packet) for the reassembly.
pub fn check_fragment(d: &[u8]) -> Result<Ipv4In, Ipv4Error> {
    check_header(d, true)
}

fn check_header(d: &[u8], fragment_ok: bool) -> Result<Ipv4In, Ipv4Error> {
    let h = d.get(ETH_HLEN..).ok_or(Ipv4Error::Header)?;
    if h.len() < 20 || h[0] >> 4 != 4 {
        return Err(Ipv4Error::Header);
    }
    let ihl = usize::from(h[0] & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([h[2], h[3]]));
    if ihl < 20 || total < ihl || total > h.len() {
        return Err(Ipv4Error::Header);
    }
    if !fragment_ok && u16::from_be_bytes([h[6], h[7]]) & 0x3fff != 0 {
        return Err(Ipv4Error::Header);
    }
    if checksum::sum(&h[..ihl]) != 0xffff {
        return Err(Ipv4Error::Checksum);
    }
    if ihl > 20 && squall_wire::ipv4::source_routed(&h[20..ihl]) {
        return Err(Ipv4Error::SourceRoute);
    }
    Ok(Ipv4In {
        src: u32::from_be_bytes([h[12], h[13], h[14], h[15]]),
        dst: u32::from_be_bytes([h[16], h[17], h[18], h[19]]),
        proto: h[9],
        ihl,
        total,
    })
}

/// Is the frame addressed to `mac` or broadcast?
#[inline]
pub fn for_mac(d: &[u8], mac: &[u8; 6]) -> bool {
    d.get(..6).is_some_and(|m| m == mac || m == BROADCAST)
}
