//! The port sink: frames for the TCP host, the UDP layer, ARP and ICMP are allocated from
//! the port's TX pool in bursts, written in place, committed to an output queue (shown to
//! the tap, checksum-offload flags set where the TCP host left the checksum to the port)
//! and handed to the port in bursts.

use squall_port::{FrameBuf, Offload, OffloadFlags, Port};
use squall_tcp::TxSink;

use crate::tap::TapRef;

/// TX frames taken from the port's pool at once.
pub const TX_BURST: usize = 64;

/// The frames a node holds between port calls: spare (allocated, unused), the one being
/// written, and the output queue.
pub struct TxFrames<F> {
    pub(crate) spare: Vec<F>,
    pub(crate) out: Vec<F>,
    pub(crate) cur: Option<F>,
}

impl<F> TxFrames<F> {
    pub(crate) fn new() -> Self {
        TxFrames {
            spare: Vec::with_capacity(TX_BURST),
            out: Vec::with_capacity(4 * TX_BURST),
            cur: None,
        }
    }
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
    }
}

impl<P: Port> TxSink for PortSink<'_, P> {
    #[inline]
    fn alloc(&mut self, len: usize) -> Option<&mut [u8]> {
        if self.tx.cur.is_none() {
            if self.tx.spare.is_empty() {
                self.port.alloc_tx(&mut self.tx.spare, TX_BURST);
            }
            self.tx.cur = self.tx.spare.pop();
        }
        let f = self.tx.cur.as_mut()?;
        f.set_len(len).ok()?;
        Some(f.data_mut())
    }

    #[inline]
    fn commit(&mut self, len: usize) {
        if let Some(mut f) = self.tx.cur.take() {
            if f.set_len(len).is_err() {
                self.tx.spare.push(f);
                return;
            }
            if let Some(o) = self.tcp_offload {
                if f.data().get(23) == Some(&6) {
                    f.set_offload(o);
                }
            }
            if let Some(t) = self.tap.as_deref_mut() {
                t.frame(self.now, f.data());
            }
            self.tx.out.push(f);
        }
    }
}
