//! The frame tap: what a node shows a capture (pcap) of the frames it transmits.

/// Sees every frame a node commits for transmission, at the time of the turn.
pub trait FrameTap {
    /// A frame was committed at `now` (ns).
    fn frame(&mut self, now: u64, data: &[u8]);
    /// An application is about to open a flow from `ip:port` (host order); taps that
    /// capture selected flows take note. The default ignores it.
    fn watch(&mut self, _ip: u32, _port: u16) {}
    /// Should the node also show it the frames it receives ([`FrameTap::frame_rx`])?
    /// For a capture on a real port, whose peer's frames no tap of ours sees at
    /// transmit. Asked once per received burst; the default is no.
    fn wants_rx(&self) -> bool {
        false
    }
    /// A received frame (only asked when [`FrameTap::wants_rx`]), at the time of its
    /// turn, after the node processed it. The default treats it as a sent one.
    fn frame_rx(&mut self, now: u64, data: &[u8]) {
        self.frame(now, data)
    }
}

/// How a tap is lent to a node for one call.
pub type TapRef<'a> = &'a mut (dyn FrameTap + 'static);
