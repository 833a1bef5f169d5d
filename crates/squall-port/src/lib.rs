//! squall-port: the [`Port`] trait (burst rx/tx of [`FrameBuf`] handles), its backends
//! and taps.
//!
//! # Design
//! A port is one queue pair polled by one core. Frames are *handles* to buffers that live
//! in the port's pool (never heap objects per packet): a UMEM slot address for AF_XDP, an
//! `rte_mbuf*` for DPDK, a block slot for AF_PACKET TPACKET_V3, a pool slot for the
//! in-memory wire. The handle does not borrow the port, so bursts sit in caller-owned,
//! reused `Vec`s while the port is called again; frames go back through `tx_burst`
//! (sent) or `release` (unused), and a received frame can be rewritten and sent back
//! without a copy. Offload requests and results travel with the frame
//! ([`Offload`]), in the DPDK vocabulary that AF_XDP and AF_PACKET map onto (or do in
//! software). Time enters a port only through `set_time`, so the same code runs on a
//! monotonic clock or a virtual one. See `DESIGN.md` in this crate for how each backend
//! maps onto it.
//!
//! Modules: [`frame`] (FrameBuf, offload flags), [`port`] (Port, caps, stats),
//! [`ring`] (lock-free SPSC ring), [`mem`] (the in-memory wire with impairment),
//! [`pcap`] (pcap writer, reader and a tap that wraps any port), [`rng`] (seeded RNG),
//! [`afpacket`] (a Linux AF_PACKET socket on a real interface), [`fanout`] (several
//! workers' AF_PACKET sockets on one interface, frames steered by port), [`rss`] (the Toeplitz hash
//! and queue steering of receive-side scaling), [`afxdp`] (an AF_XDP socket on one queue of
//! a real interface, with Squall's XDP program steering its traffic), `netif` (interface
//! MAC/MTU for both), `dpdk` (a DPDK ethdev queue pair; cargo feature `dpdk`), [`lab`]
//! (what veth lab tests share: tool checks, the machine-wide lab lock), [`tap_rss`] (RSS on
//! a multi-queue tap, the lab's stand-in for a NIC that hashes with Toeplitz).

pub mod afpacket;
pub mod afxdp;
#[cfg(feature = "dpdk")]
pub mod dpdk;
pub mod fanout;
pub mod frame;
pub mod lab;
pub mod mem;
pub mod netif;
pub mod pcap;
pub mod port;
pub mod ring;
pub mod rng;
pub mod rss;
pub mod tap_rss;

pub use frame::{FrameBuf, FrameError, Offload, OffloadFlags, SlotFrame};
pub use port::{Port, PortCaps, PortStats};
