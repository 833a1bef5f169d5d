//! The frame tap: what a node shows a capture (pcap) of the frames it transmits.

/// Sees every frame a node commits for transmission, at the time of the turn.
pub trait FrameTap {
    /// A frame was committed at `now` (ns).
    fn frame(&mut self, now: u64, data: &[u8]);
    /// An application is about to open a flow from `ip:port` (host order); taps that
    /// capture selected flows take note. The default ignores it.
    fn watch(&mut self, _ip: u32, _port: u16) {}
}

/// How a tap is lent to a node for one call.
pub type TapRef<'a> = &'a mut (dyn FrameTap + 'static);
