//! squall-stack: one core's network node, the layer between a port and the applications.
//!
//! A [`Node`] owns a port, the TCP host (`squall-tcp`), a UDP layer, the neighbour caches
//! with ARP and IPv6 neighbour discovery, ICMP and ICMPv6 echo for the addresses it owns, its counters, and the loop turn
//! ([`Node::turn`]): rx bursts -> demux -> apps -> timers -> tx flush. Applications
//! implement [`NodeApp`] (TCP callbacks from `squall-tcp`'s `TcpApp`, UDP datagrams, and a
//! poll per turn for their own timers and new flows) and act through [`NodeIo`]. One node
//! carries one app or several ([`Pair`]: passive flows by local port, active flows by
//! who opened them). The generator (`squall run`), the benchmark apps and servers all run
//! on this node; none of them touches frames except through it.
//!
//! Modules: [`node`] (the node and its turn), [`sink`] (frames from the port, offload
//! flags, the tap), [`ipv4`] (classification and checks of received frames), [`ipv6`]
//! (checks of received IPv6 frames, extension headers, IPv6 drop counters), [`neigh`]
//! (owned addresses, neighbour cache, ARP), [`neigh6`] (owned IPv6 addresses, IPv6
//! neighbour cache, neighbour discovery), [`icmp`] (echo replies), [`icmp6`] (ICMPv6 echo
//! replies, NDP dispatch), [`udp`] (UDP flows
//! and datagrams), [`reasm`] (IPv4 and IPv6 fragments reassembled), [`app`] (the application interface), [`tap`] (what a capture sees), [`capture`]
//! (the pcap of the first N flows), [`redirect`] (frames handed between the workers of one
//! port when the hardware cannot steer them).
//!
//! Must not depend on: the generator (`squall-astf`, `squall`) or any application.

pub mod app;
pub mod capture;
pub mod fuzzing;
pub mod icmp;
pub mod icmp6;
pub mod ipv4;
pub mod ipv6;
pub mod neigh;
pub mod neigh6;
pub mod neighcache;
pub mod node;
pub mod nud;
pub mod reasm;
pub mod redirect;
pub mod sink;
pub mod tap;
#[cfg(test)]
mod testing;
pub mod udp;

pub use app::{NoApp, NodeApp, NodeIo, Pair};
pub use capture::PcapCap;
pub use neigh::{Neighbours, Owned, SharedMac};
pub use neigh6::{Neighbours6, Owned6};
pub use node::{Node, NodeConfig, NodeCounters};
pub use redirect::{Redirect, RedirectStats};
pub use sink::PortSink;
pub use tap::{FrameTap, TapRef};
pub use udp::{Datagram, UdpFlowId, UdpKey, UdpLayer};
