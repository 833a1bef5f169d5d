//! The port sink: frames for the TCP host, the UDP layer, ARP and ICMP are allocated from
//! the port's TX pool in bursts, written in place, committed to an output queue (shown to
//! the tap, checksum-offload flags set where the TCP host left the checksum to the port)
//! and handed to the port in bursts.

use squall_port::{FrameBuf, Offload, OffloadFlags, Port};
use squall_tcp::TxSink;

use crate::tap::TapRef;

/// TX frames taken from the port's pool at once, and handed to the port at once.
pub const TX_BURST: usize = 64;

/// Frames a node queues for a port that refuses them (its ring is full) before writers
/// must wait: sixteen bursts.
pub const TX_OUT_CAP: usize = 16 * TX_BURST;

/// The frames a node holds between port calls: spare (allocated, unused), the one being
/// written, and the output queue.
pub struct TxFrames<F> {
    pub(crate) spare: Vec<F>,
    pub(crate) out: Vec<F>,
    pub(crate) cur: Option<F>,
    /// 802.1Q VLAN id every committed frame is tagged with.
    pub(crate) vlan: Option<u16>,
}

impl<F> TxFrames<F> {
    pub(crate) fn new(vlan: Option<u16>) -> Self {
        TxFrames {
            spare: Vec::with_capacity(TX_BURST),
            out: Vec::with_capacity(4 * TX_BURST),
            cur: None,
            vlan,
        }
    }
}

/// Inserts an 802.1Q tag (priority 0, id `vid`) after the MAC addresses, in the frame's
/// headroom. False if the frame has no room for it.
pub(crate) fn vlan_tag<F: FrameBuf>(f: &mut F, vid: u16) -> bool {
    if f.len() < 14 || f.prepend(4).is_err() {
        return false;
    }
    let d = f.data_mut();
    d.copy_within(4..16, 0);
    d[12..14].copy_from_slice(&[0x81, 0x00]);
    d[14..16].copy_from_slice(&(vid & 0x0fff).to_be_bytes());
    true
}

/// Removes the 802.1Q tag of a received frame if it carries id `vid`; false (frame
/// untouched) if it is untagged, tagged otherwise, or too short.
pub(crate) fn vlan_untag<F: FrameBuf>(f: &mut F, vid: u16) -> bool {
    let d = f.data_mut();
    if d.len() < 18
        || d[12..14] != [0x81, 0x00]
        || u16::from_be_bytes([d[14], d[15]]) & 0x0fff != vid
    {
        return false;
    }
    d.copy_within(0..12, 4);
    f.adjust(4).is_ok()
}

/// A [`TxSink`] over a port for one call into the stack.
pub struct PortSink<'a, P: Port> {
    pub(crate) port: &'a mut P,
    pub(crate) tx: &'a mut TxFrames<P::Frame>,
    pub(crate) tap: Option<TapRef<'a>>,
    pub(crate) now: u64,
    /// Offload request set on committed TCP frames (`None`: software checksums).
    pub(crate) tcp_offload: Option<Offload>,
}

impl<'a, P: Port> PortSink<'a, P> {
    /// A sink writing into `port`'s frames through `tx`.
    pub fn new(
        port: &'a mut P,
        tx: &'a mut TxFrames<P::Frame>,
        tap: Option<TapRef<'a>>,
        now: u64,
        tcp_offload: Option<Offload>,
    ) -> Self {
        PortSink {
            port,
            tx,
            tap,
            now,
            tcp_offload,
        }
    }
}

/// The offload request for TCP frames written with the checksum left to the port.
pub(crate) fn tcp_offload() -> Offload {
    Offload {
        flags: OffloadFlags::TX_TCP_CSUM,
        l2_len: 14,
        l3_len: 20,
        ..Default::default()
    }
}

impl<P: Port> TxSink for PortSink<'_, P> {
    #[inline]
    fn alloc(&mut self, len: usize) -> Option<&mut [u8]> {
        if self.tx.cur.is_none() {
            // The port is not taking frames as fast as they come: writers wait (the TCP
            // host resumes them once the queue drains) instead of queueing more frames
            // that would only wait here past their peer's timers.
            if self.tx.out.len() >= TX_OUT_CAP {
                return None;
            }
            if self.tx.spare.is_empty() {
                self.port.alloc_tx(&mut self.tx.spare, TX_BURST);
            }
            self.tx.cur = self.tx.spare.pop();
        }
        let f = self.tx.cur.as_mut()?;
        f.set_len(len).ok()?;
        Some(f.data_mut())
    }

    fn room(&self) -> usize {
        TX_OUT_CAP.saturating_sub(self.tx.out.len())
    }

    /// None with a tap: captures and traces record frames as they leave the node, so
    /// every frame must be a wire frame.
    #[inline]
    fn tso_max(&self) -> usize {
        if self.tap.is_some() {
            0
        } else {
            self.port.tso_max()
        }
    }

    fn alloc_tso(&mut self, len: usize) -> Option<&mut [u8]> {
        if self.tx.out.len() >= TX_OUT_CAP {
            return None;
        }
        let mut f = self.port.alloc_tso()?;
        if f.set_len(len).is_err() {
            self.port.release(f);
            return None;
        }
        // A frame allocated and not committed (a writer that gave up) stays for later.
        if let Some(old) = self.tx.cur.replace(f) {
            self.tx.spare.push(old);
        }
        Some(self.tx.cur.as_mut()?.data_mut())
    }

    fn commit_tso(&mut self, len: usize, l3_len: u8, mss: u16) {
        if let Some(mut f) = self.tx.cur.take() {
            if f.set_len(len).is_err() {
                self.port.release(f);
                return;
            }
            f.set_offload(Offload {
                flags: OffloadFlags::TX_TCP_SEG,
                l2_len: if self.tx.vlan.is_some() { 18 } else { 14 },
                l3_len,
                tso_mss: mss,
            });
            self.send(f);
        }
    }

    #[inline]
    fn commit(&mut self, len: usize) {
        if let Some(mut f) = self.tx.cur.take() {
            if f.set_len(len).is_err() {
                self.tx.spare.push(f);
                return;
            }
            // The offload request is decided on the untagged frame: IPv4 protocol (at 23)
            // or IPv6 next header (at 20, TCP directly after the fixed header) is TCP.
            if let Some(mut o) = self.tcp_offload {
                let d = f.data();
                let l3_len = match d.get(12..14) {
                    Some([0x08, 0x00]) if d.get(23) == Some(&6) => Some(20),
                    Some([0x86, 0xdd]) if d.get(20) == Some(&6) => Some(40),
                    _ => None,
                };
                if let Some(l3_len) = l3_len {
                    o.l3_len = l3_len;
                    if self.tx.vlan.is_some() {
                        o.l2_len += 4;
                    }
                    f.set_offload(o);
                }
            }
            self.send(f);
        }
    }
}

impl<P: Port> PortSink<'_, P> {
    /// Queues a written frame (its offload request set): VLAN tag, tap, and a full burst
    /// goes to the port.
    #[inline(always)]
    fn send(&mut self, mut f: P::Frame) {
        if let Some(v) = self.tx.vlan {
            if !vlan_tag(&mut f, v) {
                f.set_offload(Offload::default());
                self.tx.spare.push(f);
                return;
            }
        }
        if let Some(t) = self.tap.as_deref_mut() {
            t.frame(self.now, f.data());
        }
        self.tx.out.push(f);
        // A full burst goes to the port at once, while its frames are still in the
        // cache (a turn can write thousands of frames; handing them over only at its
        // end made the port read cold headers and payloads). Once the port refuses
        // frames, the queue waits for the end of the turn (no retry per frame).
        if self.tx.out.len() == TX_BURST {
            self.port.tx_burst(&mut self.tx.out);
        }
    }
}
