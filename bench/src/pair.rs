//! The adapter point for stacks on the in-memory wire: a *pair* of stacks (client and
//! server) driven by one thread. The workload drivers in [`crate::workload`] are generic
//! over [`MemPair`]; a stack plugs in by implementing it (see `smol.rs` for smoltcp).
//!
//! Connections are named by slot ids. Client ids are `0..conns` and chosen by the driver;
//! server ids are chosen by the stack (a listening socket, a flow index) and reported
//! through the ready list. A slot stays in its final state (`Done`/`Failed`) until the
//! driver calls [`MemPair::release`].

/// Which stack of the pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Client,
    Server,
}

/// The application-visible state of one slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SockState {
    /// Nothing here: a client slot may `open`, a server slot waits for a peer.
    Idle,
    /// Handshake in progress.
    Opening,
    /// Established: data may flow both ways.
    Open,
    /// The peer sent FIN (data before it may still be readable); we may still send.
    PeerClosed,
    /// We closed; the close handshake is in progress.
    Closing,
    /// Closed cleanly (TIME_WAIT or CLOSED after our close): call `release`.
    Done,
    /// Reset, refused or timed out: call `release`.
    Failed,
}

/// Counters a pair reports after a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PairStats {
    /// Frames carried by the wire, both directions.
    pub frames: u64,
    /// Bytes carried by the wire (whole frames), both directions.
    pub wire_bytes: u64,
}

/// A client stack and a server stack joined by an in-memory wire, run by one thread.
pub trait MemPair {
    /// Who plays the client side (the `client` field of the result line).
    fn client_name(&self) -> &'static str;
    /// Who plays the server side.
    fn server_name(&self) -> &'static str;
    /// Starts a connection from client slot `id` to the server. False if refused locally.
    fn open(&mut self, id: usize) -> bool;
    /// Runs both stacks (receive, timers, transmit) at time `now` (elapsed since the run
    /// began, never decreasing) and appends to `ready` the slots that may need the
    /// application. Returns true if any frame moved or is pending.
    fn poll(&mut self, now: std::time::Duration, ready: &mut Vec<(Side, usize)>) -> bool;
    /// Nothing moved and the application had nothing to do: advance the stacks' clock to
    /// their next timer instead of spinning. False if no timer is pending.
    fn idle(&mut self) -> bool;
    fn state(&self, side: Side, id: usize) -> SockState;
    /// Queues up to `data.len()` bytes for sending; returns how many were taken.
    fn send(&mut self, side: Side, id: usize, data: &[u8]) -> usize;
    /// Hands the readable in-order bytes to `f` (possibly in several slices); returns the count.
    fn recv<F: FnMut(&[u8])>(&mut self, side: Side, id: usize, f: F) -> usize;
    /// Closes our sending direction (FIN after queued data).
    fn close(&mut self, side: Side, id: usize);
    /// The application is done with a `Done`/`Failed` slot: a client slot becomes `Idle`,
    /// a server slot is re-armed for a new peer.
    fn release(&mut self, side: Side, id: usize);
    fn stats(&self) -> PairStats;
}
