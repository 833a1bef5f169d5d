//! The [`Port`] trait: burst rx/tx of [`FrameBuf`] handles, plus capabilities and stats.

use crate::frame::{FrameBuf, OffloadFlags};

/// What a port can do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortCaps {
    /// MAC address of this port.
    pub mac: [u8; 6],
    /// IP MTU (the largest L3 packet; frames are up to MTU + 14 (+4 with a VLAN tag)).
    pub mtu: u16,
    /// Largest frame (`len`) a tx buffer can hold.
    pub max_frame: u16,
    /// Headroom of a fresh tx buffer.
    pub headroom: u16,
    /// Tx offload requests honoured (`TX_*` flags) and rx checksum results delivered (`RX_*`).
    pub offloads: OffloadFlags,
}

/// Port counters (kept by the owning core; snapshot by value).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortStats {
    /// Frames handed to the user by `rx_burst`.
    pub rx_frames: u64,
    /// Bytes of those frames.
    pub rx_bytes: u64,
    /// Frames accepted by `tx_burst`.
    pub tx_frames: u64,
    /// Bytes of those frames.
    pub tx_bytes: u64,
    /// Frames `tx_burst` could not accept (queue full); they stayed with the caller.
    pub tx_full: u64,
    /// `alloc_tx` requests that found the pool empty (frames not given).
    pub alloc_fail: u64,
    /// Frames lost by the port or the medium (impairment, queue overflow, bad frame).
    pub dropped: u64,
}

impl PortStats {
    /// Adds `o`'s counters (several queues or workers summed).
    pub fn add(&mut self, o: &PortStats) {
        let PortStats {
            rx_frames,
            rx_bytes,
            tx_frames,
            tx_bytes,
            tx_full,
            alloc_fail,
            dropped,
        } = *o;
        self.rx_frames += rx_frames;
        self.rx_bytes += rx_bytes;
        self.tx_frames += tx_frames;
        self.tx_bytes += tx_bytes;
        self.tx_full += tx_full;
        self.alloc_fail += alloc_fail;
        self.dropped += dropped;
    }
}

/// A network port: a queue pair polled by one core.
///
/// All calls are non-blocking and allocation-free on the data path: the `Vec`s passed in
/// are reused by the caller (keep their capacity at the burst size).
///
/// Frame life cycle: a frame comes from `rx_burst` (received) or `alloc_tx` (empty tx
/// buffer) and goes back through exactly one of `tx_burst` (sent; the port frees it once
/// the device is done) or `release` (not needed). A received frame may be modified and
/// sent (echo, forwarding) without a copy.
pub trait Port {
    /// The frame handle of this port.
    type Frame: FrameBuf;

    /// Appends up to `max` received frames to `out`; returns how many.
    fn rx_burst(&mut self, out: &mut Vec<Self::Frame>, max: usize) -> usize;

    /// Appends up to `n` empty tx frames (len 0, default headroom) to `out`; returns how many.
    fn alloc_tx(&mut self, out: &mut Vec<Self::Frame>, n: usize) -> usize;

    /// Queues frames from the front of `frames` for transmission; the accepted ones are
    /// removed from `frames` (in order), the rest stay for a retry. Returns how many
    /// were accepted.
    fn tx_burst(&mut self, frames: &mut Vec<Self::Frame>) -> usize;

    /// Gives a frame back to its pool without sending it.
    fn release(&mut self, frame: Self::Frame);

    /// Gives every frame of `frames` back (empties it).
    fn release_all(&mut self, frames: &mut Vec<Self::Frame>) {
        for f in frames.drain(..) {
            self.release(f);
        }
    }

    /// Capabilities (MAC, MTU, offloads).
    fn caps(&self) -> PortCaps;

    /// Counters.
    fn stats(&self) -> PortStats;

    /// Binds the port to the calling thread, the one that polls it from now on (a worker
    /// calls it once, on its own thread, before its first burst). A port whose library
    /// keeps per-thread state sets it up here: DPDK makes the thread an lcore, so that the
    /// mbuf pools' per-core caches serve it. An error is a note for the run's report: the
    /// port still works, slower.
    fn bind_thread(&mut self) -> Result<(), String> {
        Ok(())
    }

    /// Tells the port the current time (ns, engine clock; called once per burst by the
    /// worker). Ports that need time (impairment delay, rate limit) use it; others ignore it.
    fn set_time(&mut self, _now_ns: u64) {}

    /// Earliest time at which something will happen on this port without any new input
    /// (e.g. a delayed frame becomes deliverable), if known; lets simulations on a virtual
    /// clock jump time. `None` means nothing is pending.
    fn next_event_ns(&self) -> Option<u64> {
        None
    }

    /// Largest TCP super-frame (bytes, Ethernet header included) this port segments
    /// itself ([`OffloadFlags::TX_TCP_SEG`](crate::OffloadFlags::TX_TCP_SEG)); 0 when it
    /// does not.
    fn tso_max(&self) -> usize {
        0
    }

    /// An empty tx frame of [`Port::tso_max`] bytes for a TCP super-frame, if one is free
    /// (give it back like any frame).
    fn alloc_tso(&mut self) -> Option<Self::Frame> {
        None
    }
}
