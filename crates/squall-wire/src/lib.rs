//! squall-wire: zero-copy packet views and allocation-free header builders
//! for Ethernet II (+802.1Q), ARP, IPv4, IPv6 (extension headers walked),
//! TCP (all common options), UDP, ICMP echo and ICMPv6 (echo, neighbour
//! discovery, packet-too-big), plus fast full and incremental Internet checksums (run-time dispatched
//! SIMD sums on x86_64: the only `unsafe` code of the crate, in `checksum::simd`).
//!
//! Every view follows the same pattern: `Xxx::new_checked(buf)` validates
//! lengths once and returns `Result<Self, Error>`; the accessors then read
//! fields without re-validating (they cannot panic on a checked view);
//! setters exist when the buffer is `AsMut<[u8]>`. `XxxRepr` values describe
//! a header and `emit` it into a `&mut [u8]` without allocating.
//! [`parse_frame`] walks all layers of a frame at once.
//!
//! Every parser is total: any byte string yields a value or an [`Error`].

#![deny(unsafe_code)]
#![warn(missing_docs)]

mod addr;
pub mod arp;
pub mod checksum;
mod error;
pub mod ethernet;
mod field;
pub mod frame;
#[doc(hidden)]
pub mod fuzzing;
pub mod icmp;
pub mod icmpv6;
pub mod ipv4;
pub mod ipv6;
pub mod segment;
pub mod tcp;
pub mod tcp_options;
pub mod udp;

pub use addr::{Ipv4Address, Ipv6Address, MacAddress};
pub use arp::{ArpOperation, ArpPacket, ArpRepr, ARP_LEN};
pub use error::{Error, Result};
pub use ethernet::{
    EtherType, EthernetFrame, EthernetRepr, VlanTag, ETHERNET_HEADER_LEN, ETHERNET_VLAN_HEADER_LEN,
};
pub use frame::{parse_frame, Frame, L3, L4};
pub use icmp::{IcmpEchoRepr, IcmpPacket, ICMP_HEADER_LEN};
pub use icmpv6::{
    Icmpv6Packet, Icmpv6Repr, NaFlags, NdpOption, NdpOptionIter, PrefixInfo, RouterAdvert,
    ICMPV6_HEADER_LEN,
};
pub use ipv4::{IpProtocol, Ipv4Packet, Ipv4Repr, IPV4_HEADER_LEN, IPV4_MAX_HEADER_LEN};
pub use ipv6::{walk_ext_headers, FragmentInfo, Ipv6Packet, Ipv6Repr, Ipv6Upper, IPV6_HEADER_LEN};
pub use tcp::{TcpFlags, TcpPacket, TcpRepr, TCP_HEADER_LEN};
pub use tcp_options::{
    SackBlock, SackBlocks, TcpOption, TcpOptionIter, TcpOptionWriter, TcpOptions, Timestamps,
    MAX_OPTIONS_LEN, MAX_SACK_BLOCKS,
};
pub use udp::{UdpPacket, UdpRepr, UDP_HEADER_LEN};
