//! The frame abstraction every port hands out: [`FrameBuf`] and its offload metadata.
//!
//! A frame is a *handle* to a packet buffer owned by the port's pool (a UMEM slot for
//! AF_XDP, an `rte_mbuf` for DPDK, a ring block slot for AF_PACKET, a pool slot for the
//! in-memory wire). It never borrows the port, so a burst of frames can sit in a `Vec`
//! while the port is used again; it must go back to the port through `tx_burst` or
//! `release` (a frame that is merely dropped leaks its buffer until the port is dropped).

/// Offload flags carried by a frame (bit set; mirrors the DPDK `RTE_MBUF_F_*` subset we use).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct OffloadFlags(pub u16);

impl OffloadFlags {
    /// Rx: the IPv4 header checksum was verified good by the device.
    pub const RX_IP_CSUM_GOOD: Self = Self(1 << 0);
    /// Rx: the L4 (TCP/UDP) checksum was verified good by the device.
    pub const RX_L4_CSUM_GOOD: Self = Self(1 << 1);
    /// Rx: the device found a bad IP or L4 checksum (the frame must be dropped).
    pub const RX_CSUM_BAD: Self = Self(1 << 2);
    /// Capability only: the port marks, frame by frame, the frames whose L4 checksum it
    /// vouches for ([`Self::RX_L4_CSUM_GOOD`]); the others are the stack's to verify.
    pub const RX_CSUM_PER_FRAME: Self = Self(1 << 3);
    /// Tx: ask the device to fill the IPv4 header checksum.
    pub const TX_IP_CSUM: Self = Self(1 << 8);
    /// Tx: ask the device to fill the TCP checksum (pseudo-header sum pre-filled, as DPDK wants).
    pub const TX_TCP_CSUM: Self = Self(1 << 9);
    /// Tx: ask the device to fill the UDP checksum (pseudo-header sum pre-filled).
    pub const TX_UDP_CSUM: Self = Self(1 << 10);
    /// Tx: segment this TCP frame into `Offload::tso_mss`-byte segments (TSO; the
    /// kernel's GSO on AF_PACKET). The TCP checksum field carries the pseudo-header sum
    /// over the whole frame's TCP length, folded and not inverted, as for `TX_TCP_CSUM`.
    pub const TX_TCP_SEG: Self = Self(1 << 11);
    /// No flag.
    pub const NONE: Self = Self(0);
    /// All rx flags.
    pub const RX_MASK: Self = Self(0x00ff);
    /// All tx flags.
    pub const TX_MASK: Self = Self(0xff00);

    /// Whether every flag of `other` is set.
    #[inline]
    pub fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }
    /// Whether any flag of `other` is set.
    #[inline]
    pub fn intersects(self, other: Self) -> bool {
        self.0 & other.0 != 0
    }
    /// Union.
    #[inline]
    pub fn union(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }
    /// `self` without the flags of `other`.
    #[inline]
    pub fn without(self, other: Self) -> Self {
        Self(self.0 & !other.0)
    }
}

impl core::ops::BitOr for OffloadFlags {
    type Output = Self;
    fn bitor(self, rhs: Self) -> Self {
        self.union(rhs)
    }
}

/// Per-frame offload metadata: flags plus the header lengths a NIC needs for tx checksum
/// offload (DPDK's `l2_len`/`l3_len`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Offload {
    /// Rx results and tx requests.
    pub flags: OffloadFlags,
    /// Length of the L2 header (Ethernet, VLAN included) in bytes, for tx offload.
    pub l2_len: u8,
    /// Length of the L3 header (IPv4 with options) in bytes, for tx offload.
    pub l3_len: u8,
    /// Payload bytes per segment, for `TX_TCP_SEG` (the TCP header length is read from the
    /// frame).
    pub tso_mss: u16,
}

/// Error of a frame length operation (never a panic).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// The requested length does not fit the buffer (tailroom or headroom exhausted).
    NoRoom,
}

impl core::fmt::Display for FrameError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            FrameError::NoRoom => f.write_str("frame buffer has no room for that length"),
        }
    }
}

impl std::error::Error for FrameError {}

/// A packet buffer handed out by a [`crate::Port`].
///
/// The bytes of the packet are `data()`: they start `headroom()` bytes into the buffer and
/// can grow up to `capacity()` bytes (tailroom) or towards the front (`prepend`, to add a
/// header without moving the payload). For a chained buffer (a DPDK multi-segment mbuf)
/// `data()` is the first segment and `segment(i)` gives the others; every port can be
/// configured so that frames up to the MTU fit one segment, which is what the stack emits.
pub trait FrameBuf {
    /// The packet bytes (first segment).
    fn data(&self) -> &[u8];
    /// The packet bytes, writable (first segment).
    fn data_mut(&mut self) -> &mut [u8];
    /// Length of `data()`.
    fn len(&self) -> usize;
    /// Whether the frame holds no bytes.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Sets the packet length (bytes past the old length are whatever the buffer held).
    fn set_len(&mut self, len: usize) -> Result<(), FrameError>;
    /// Largest `len` possible at the current data offset (headroom excluded).
    fn capacity(&self) -> usize;
    /// Free bytes in front of `data()`.
    fn headroom(&self) -> usize;
    /// Extends the packet by `n` bytes at the front (uses headroom).
    fn prepend(&mut self, n: usize) -> Result<(), FrameError>;
    /// Removes `n` bytes from the front of the packet (they become headroom).
    fn adjust(&mut self, n: usize) -> Result<(), FrameError>;
    /// Offload metadata (rx results, tx requests).
    fn offload(&self) -> Offload;
    /// Sets the offload metadata (tx requests).
    fn set_offload(&mut self, o: Offload);
    /// Number of segments (1 unless the port delivers chained buffers).
    fn segments(&self) -> usize {
        1
    }
    /// Segment `i` (`0` is `data()`); empty past the last segment.
    fn segment(&self, i: usize) -> &[u8] {
        if i == 0 {
            self.data()
        } else {
            &[]
        }
    }
    /// Total packet length over all segments.
    fn pkt_len(&self) -> usize {
        (0..self.segments()).map(|i| self.segment(i).len()).sum()
    }
    /// Copies `bytes` into the frame as its whole content.
    fn fill(&mut self, bytes: &[u8]) -> Result<(), FrameError> {
        self.set_len(bytes.len())?;
        self.data_mut().copy_from_slice(bytes);
        Ok(())
    }
}

/// A frame that is a slot of a port's memory (an AF_PACKET pool slot or rx-ring frame, an
/// AF_XDP UMEM chunk): `len` bytes at `slot + off`, `off + len <= cap`. The port that made
/// it knows the slot by `idx` and checks `slot` against its memory when it comes back.
#[derive(Debug)]
pub struct SlotFrame {
    /// Start of the slot (headroom included).
    pub(crate) slot: *mut u8,
    /// The port's name for the slot (pool index, tagged ring block, UMEM chunk index).
    pub(crate) idx: u32,
    /// Bytes of the slot.
    pub(crate) cap: u32,
    /// Offset of the packet in the slot (the headroom).
    pub(crate) off: u32,
    /// Packet length.
    pub(crate) len: u32,
    /// Offload metadata.
    pub(crate) offload: Offload,
}

// SAFETY: a frame is a handle to a slot of a pool that is never freed while frames are
// out (the port leaks the pool instead); only the holder of the handle touches the slot.
unsafe impl Send for SlotFrame {}

impl FrameBuf for SlotFrame {
    fn data(&self) -> &[u8] {
        // SAFETY: `slot` points to `cap` bytes owned by this handle (see `SlotFrame`'s Send
        // note), and `off + len <= cap` is kept by every setter.
        unsafe { std::slice::from_raw_parts(self.slot.add(self.off as usize), self.len as usize) }
    }
    fn data_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `data`; `&mut self` makes the access exclusive.
        unsafe {
            std::slice::from_raw_parts_mut(self.slot.add(self.off as usize), self.len as usize)
        }
    }
    fn len(&self) -> usize {
        self.len as usize
    }
    fn set_len(&mut self, len: usize) -> Result<(), FrameError> {
        if len > self.capacity() {
            return Err(FrameError::NoRoom);
        }
        self.len = len as u32;
        Ok(())
    }
    fn capacity(&self) -> usize {
        (self.cap - self.off) as usize
    }
    fn headroom(&self) -> usize {
        self.off as usize
    }
    fn prepend(&mut self, n: usize) -> Result<(), FrameError> {
        if n > self.off as usize {
            return Err(FrameError::NoRoom);
        }
        self.off -= n as u32;
        self.len += n as u32;
        Ok(())
    }
    fn adjust(&mut self, n: usize) -> Result<(), FrameError> {
        if n > self.len as usize {
            return Err(FrameError::NoRoom);
        }
        self.off += n as u32;
        self.len -= n as u32;
        Ok(())
    }
    fn offload(&self) -> Offload {
        self.offload
    }
    fn set_offload(&mut self, o: Offload) {
        self.offload = o;
    }
}
