//! The configuration of a mem wire ([`MemConfig`]: pool, ring, MTU, MACs, offload
//! emulation, impairment per direction) and why one could not be built ([`MemError`]).

use super::Impairment;

/// Configuration of a mem wire.
#[derive(Clone, Debug, PartialEq)]
pub struct MemConfig {
    /// Frames in each side's pool.
    pub frames: u32,
    /// Bytes per frame buffer (headroom included), 256..=16384.
    pub frame_size: u32,
    /// Headroom of a fresh tx frame.
    pub headroom: u16,
    /// Descriptors per direction ring (rounded up to a power of two).
    pub ring_size: u32,
    /// IP MTU reported by `caps`.
    pub mtu: u16,
    /// Enforce the MTU as a real link does: a frame sent with more than `mtu` bytes after
    /// its Ethernet header (14 bytes, 18 with an 802.1Q tag) is dropped and counted
    /// ([`super::MemPort::oversized_frames`], and in `PortStats::dropped`). Off by default
    /// (the wire carries any frame that fits its buffers).
    pub enforce_mtu: bool,
    /// MAC address of side A.
    pub mac_a: [u8; 6],
    /// MAC address of side B.
    pub mac_b: [u8; 6],
    /// Emulate checksum offload: `caps` offers tx IPv4/TCP/UDP checksum and rx checksum
    /// results; received frames are flagged "checksum good", or "bad" if corrupted on the
    /// wire. The wire itself computes nothing (like a NIC capture, bytes on the wire carry
    /// what the sender wrote).
    pub offload: bool,
    /// Impairment from A to B.
    pub a_to_b: Impairment,
    /// Impairment from B to A.
    pub b_to_a: Impairment,
}

impl Default for MemConfig {
    fn default() -> Self {
        MemConfig {
            frames: 4096,
            frame_size: 2048,
            headroom: 128,
            ring_size: 1024,
            mtu: 1500,
            enforce_mtu: false,
            mac_a: [0x02, 0, 0, 0, 0, 0x0a],
            mac_b: [0x02, 0, 0, 0, 0, 0x0b],
            offload: false,
            a_to_b: Impairment::default(),
            b_to_a: Impairment::default(),
        }
    }
}

/// Why a mem wire could not be built.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MemError {
    /// A configuration field is out of range (named).
    Config(&'static str),
    /// The pool memory could not be allocated.
    NoMemory,
}

impl core::fmt::Display for MemError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            MemError::Config(field) => write!(f, "mem wire config: bad value for `{field}`"),
            MemError::NoMemory => f.write_str("mem wire: cannot allocate the frame pools"),
        }
    }
}

impl std::error::Error for MemError {}
