//! The application interface: the event trait [`TcpApp`], the per-callback control handle
//! [`Ctl`] (queue sends, close, abort on the current flow), the frame sink [`TxSink`] and
//! the small value types shared with callers.

use crate::flowtable::FlowKey;
use crate::sendq::BufId;

/// A flow: its index in the host's slab. Valid from `connect`/`on_connected` until
/// `on_closed`; after that the index may be reused by a new flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct FlowId(pub u32);

/// Why a flow ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CloseReason {
    /// Orderly close: both FINs exchanged (reported on entering TIME_WAIT for the active
    /// closer, on the last ACK for the passive closer).
    Normal,
    /// The peer reset an established connection.
    Reset,
    /// Connection refused (RST in reply to our SYN) or reset while half-open.
    Refused,
    /// Retransmissions (or keepalive probes) exhausted.
    Timeout,
    /// Aborted locally (`abort`, or `close` before the handshake completed).
    Aborted,
    /// The connection attempt was answered by an ICMP or ICMPv6 destination unreachable
    /// or time exceeded (a firewall's REJECT, a host or network with no route): RFC 1122
    /// §4.2.3.9, as Linux reports it (`TcpHost::icmp_error`).
    Unreachable,
}

/// Errors of `connect`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnectError {
    /// The 4-tuple is in use by a live (non-TIME_WAIT) flow.
    InUse,
    /// Flow slab or table full.
    NoResources,
}

/// Errors of `send`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendError {
    NoFlow,
    /// The send side is closed.
    Closed,
    /// Offset/length outside the registered buffer.
    BadRange,
    /// Send queue limit reached.
    QueueFull,
}

/// Where the host writes outgoing frames: typically a port's TX pool. `alloc` hands out a
/// buffer for one frame of `len` bytes (the host writes Ethernet+IPv4+TCP and the payload
/// directly into it), `commit` queues that frame with its final length.
pub trait TxSink {
    fn alloc(&mut self, len: usize) -> Option<&mut [u8]>;
    fn commit(&mut self, len: usize);
    /// Frames the sink can still queue now (a bound: a frame pool may run dry sooner);
    /// unbounded by default.
    fn room(&self) -> usize {
        usize::MAX
    }
    /// Largest TCP super-frame (bytes of the frame, headers included) the sink takes now
    /// for its port to cut into segments (TSO); 0 when it takes none (no support, or no
    /// super-frame buffer free).
    fn tso_max(&self) -> usize {
        0
    }
    /// Like [`TxSink::alloc`], for a super-frame of `len` bytes (at most `tso_max`).
    fn alloc_tso(&mut self, _len: usize) -> Option<&mut [u8]> {
        None
    }
    /// Commits the super-frame being written: `len` bytes with an IP header of `l3_len`
    /// bytes, to be sent as segments of `mss` payload bytes. Its TCP checksum field holds
    /// the pseudo-header sum over its whole TCP length (folded, not inverted).
    fn commit_tso(&mut self, _len: usize, _l3_len: u8, _mss: u16) {}
}

pub(crate) enum Op {
    Send(BufId, u32, u32),
    SendOwned(Box<[u8]>),
    Close,
    Abort,
}

/// Handle passed to callbacks: acts on the flow the event is about. Operations are applied
/// by the host right after the callback returns.
#[derive(Default)]
pub struct Ctl {
    pub(crate) flow: FlowId,
    pub(crate) key: FlowKey,
    pub(crate) passive: bool,
    /// The (local, remote) IPv6 addresses of an IPv6 flow, set for `on_connected` only.
    pub(crate) addr6: ([u8; 16], [u8; 16]),
    pub(crate) ops: Vec<Op>,
    /// Operations that failed (bad range, queue full) since the host was created.
    pub errors: u64,
}

impl Ctl {
    /// The app asked to reset the flow in this callback.
    pub(crate) fn aborting(&self) -> bool {
        self.ops.iter().any(|o| matches!(o, Op::Abort))
    }
    /// The flow this event is about.
    pub fn flow(&self) -> FlowId {
        self.flow
    }
    /// Its 4-tuple.
    pub fn key(&self) -> FlowKey {
        self.key
    }
    /// In `on_connected` of an IPv6 flow, the peer's address (the key holds address ids);
    /// None for IPv4 flows and in other callbacks (as [`Ctl::ipv6`]).
    pub fn remote_ipv6(&self) -> Option<[u8; 16]> {
        self.ipv6().map(|(_, remote)| remote)
    }
    /// True for flows accepted from a listener.
    pub fn passive(&self) -> bool {
        self.passive
    }
    /// In `on_connected` of an IPv6 flow, its (local, remote) addresses (the key holds
    /// address ids); None for IPv4 flows and in other callbacks (use
    /// [`TcpHost::flow_ipv6`](crate::TcpHost::flow_ipv6) there).
    pub fn ipv6(&self) -> Option<([u8; 16], [u8; 16])> {
        (self.key.is_ipv6() && self.addr6 != ([0; 16], [0; 16])).then_some(self.addr6)
    }
    /// Queue `len` bytes of registered buffer `buf` from `off` (no copy; pulled when the
    /// window opens).
    pub fn send(&mut self, buf: BufId, off: u32, len: u32) {
        self.ops.push(Op::Send(buf, off, len));
    }
    /// Queue owned bytes (freed once acknowledged).
    pub fn send_owned(&mut self, data: Box<[u8]>) {
        self.ops.push(Op::SendOwned(data));
    }
    /// Close the send side (FIN after queued data).
    pub fn close(&mut self) {
        self.ops.push(Op::Close);
    }
    /// Reset the connection.
    pub fn abort(&mut self) {
        self.ops.push(Op::Abort);
    }
}

/// Application callbacks. All have empty defaults.
pub trait TcpApp {
    /// Handshake complete (active or passive open; see [`Ctl::passive`]).
    fn on_connected(&mut self, _ctl: &mut Ctl, _flow: FlowId) {}
    /// In-order bytes, pointing into the received frame (or the out-of-order store).
    fn on_data(&mut self, _ctl: &mut Ctl, _flow: FlowId, _data: &[u8]) {}
    /// `bytes` of our data were acknowledged (send space freed). When the acknowledging
    /// segment also carries the peer's FIN (and no data), the FIN has already taken
    /// effect (CLOSE_WAIT), as it would have before an app on a kernel ran: a close here
    /// answers the peer's (LAST_ACK); `on_peer_closed` follows unless the app closed.
    fn on_acked(&mut self, _ctl: &mut Ctl, _flow: FlowId, _bytes: u32) {}
    /// The peer sent FIN: no more data will arrive.
    fn on_peer_closed(&mut self, _ctl: &mut Ctl, _flow: FlowId) {}
    /// The flow ended; its id is no longer valid.
    fn on_closed(&mut self, _flow: FlowId, _reason: CloseReason) {}
    /// The flow started a retransmission: a retransmission timeout (SYN, SYN-ACK, data or
    /// FIN) or a fast retransmit; once per event, not per segment (`tcps_rexmttimeo` +
    /// `tcps_fastrexmt`). On a path that loses nothing, each one is a stall. Not called
    /// when the timeout ends the flow (`on_closed` reports that).
    fn on_retransmit(&mut self, _flow: FlowId) {}
    /// The peer marked urgent data (RFC 9293 §3.8.5): `pending` bytes still to come
    /// through `on_data` end with the last urgent byte (the data is delivered inline, as
    /// RFC 6093 recommends; this is the notice RFC 9293's MUST-31 asks for, with how much
    /// remains, MUST-32). Called when urgent data becomes pending and whenever the urgent
    /// pointer moves further, before the segment's bytes are delivered.
    fn on_urgent(&mut self, _flow: FlowId, _pending: u32) {}
}

/// What a flow negotiated and where its send side stands ([`crate::TcpHost::flow_info`];
/// tests, diagnostics).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowInfo {
    pub state: crate::State,
    /// MSS used for sending: the smaller of the peer's MSS option (536 without one) and
    /// ours, less 12 bytes when timestamps are on.
    pub mss: u16,
    /// The peer's window (SND.WND), bytes, scaled.
    pub snd_wnd: u32,
    /// Window scaling negotiated (RFC 7323 §2).
    pub wscale: bool,
    /// Timestamps negotiated (RFC 7323 §3).
    pub timestamps: bool,
    /// TS.Recent: the timestamp to echo (RFC 7323 §4.3).
    pub ts_recent: u32,
    /// SACK negotiated (RFC 2018).
    pub sack: bool,
    /// The flow holds a SACK scoreboard (RFC 6675 loss recovery state).
    pub sack_scoreboard: bool,
    /// In fast recovery (RFC 6582 / RFC 6675).
    pub in_recovery: bool,
    /// Smoothed RTT, us (0 before the first sample; RFC 6298).
    pub srtt_us: u32,
    /// RTT variation, us.
    pub rttvar_us: u32,
    /// Base RTO (before backoff), us.
    pub rto_us: u32,
    /// Congestion window and slow-start threshold, bytes (RFC 5681).
    pub cwnd: u32,
    pub ssthresh: u32,
}
