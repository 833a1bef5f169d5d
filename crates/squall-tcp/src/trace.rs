//! Flow tracing: the timeline of selected flows (state changes, RTT samples, congestion
//! window, retransmissions and their cause, the peer's window, RSTs, the close), kept in
//! a per-host buffer ([`FlowTracer`]) that the host fills only for flows whose TCB
//! carries the traced bit (`tcb::F_TRACED`). An untraced flow pays one test of a flag it
//! already has in cache at each hook; a host without a tracer pays one test of an
//! `Option` per passive open.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::api::CloseReason;
use crate::flowtable::FlowKey;
use crate::tcb::{State, Tcb};

/// Why a segment was sent again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RexmitCause {
    /// A retransmission timeout (RFC 6298 §5.4), the SYN's or SYN-ACK's included.
    Rto,
    /// Fast retransmit after the duplicate-ACK threshold (RFC 5681 §3.2).
    FastRetransmit,
    /// A partial ACK during NewReno recovery (RFC 6582 §3.2 step 5).
    PartialAck,
    /// A hole the SACK scoreboard marks lost (RFC 6675 §5 NextSeg).
    Sack,
    /// The peer's SYN came again in SYN-RECEIVED: our SYN-ACK is sent again in reply.
    DupSyn,
    /// An ICMP error said the path's MTU is smaller than our segments: the flight goes
    /// again from SND.UNA in segments that fit (RFC 1191 §6.5, RFC 8201).
    PathMtu,
}

impl RexmitCause {
    /// The name the timeline uses.
    pub fn name(self) -> &'static str {
        match self {
            RexmitCause::Rto => "rto",
            RexmitCause::FastRetransmit => "fast_retransmit",
            RexmitCause::PartialAck => "partial_ack",
            RexmitCause::Sack => "sack",
            RexmitCause::DupSyn => "dup_syn",
            RexmitCause::PathMtu => "path_mtu",
        }
    }
}

/// What happened to a traced flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceKind {
    /// Tracing started (at the SYN for active flows, at the SYN's arrival for passive).
    Open,
    /// The flow entered a state.
    State(State),
    /// An RTT measurement (us) and the estimator after it (RFC 6298).
    Rtt {
        sample_us: u32,
        srtt_us: u32,
        rttvar_us: u32,
        rto_us: u32,
    },
    /// The congestion window or slow-start threshold changed (bytes).
    Cwnd { cwnd: u32, ssthresh: u32 },
    /// The retransmission timer expired (`backoff` doublings so far, the RTO in us
    /// before backoff).
    Timeout { backoff: u8, rto_us: u32 },
    /// Loss recovery started on duplicate ACKs (`sack`: with a SACK scoreboard).
    Recovery { sack: bool },
    /// A segment was sent again: sequence number, payload bytes (0 for a SYN, SYN-ACK
    /// or FIN alone), cause.
    Retransmit {
        seq: u32,
        len: u32,
        syn: bool,
        cause: RexmitCause,
    },
    /// The peer's receive window changed (bytes, scaled; 0 = zero window).
    Window { wnd: u32 },
    /// A zero-window probe was sent (persist timer).
    WindowProbe,
    /// We sent a RST.
    RstSent,
    /// The peer's RST was accepted.
    RstReceived,
    /// The flow ended.
    Closed(CloseReason),
}

/// One event of a traced flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceEvent {
    /// Host time, ns.
    pub t_ns: u64,
    /// The traced flow ([`TracedFlow::id`]).
    pub flow: u32,
    pub kind: TraceKind,
}

/// A flow the tracer follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TracedFlow {
    /// Index in [`FlowTracer::flows`] (events refer to it).
    pub id: u32,
    /// Local and remote address and port (IPv6 flows: ids, see `addrs6`).
    pub key: FlowKey,
    /// The IPv6 addresses (local, remote) of an IPv6 flow.
    pub addrs6: Option<([u8; 16], [u8; 16])>,
    /// Accepted from a listener.
    pub passive: bool,
    /// Our initial sequence number.
    pub iss: u32,
    /// When tracing started, ns.
    pub start_ns: u64,
}

impl TracedFlow {
    /// The local address, family and all (an IPv6 flow's key holds ids).
    pub fn local_addr(&self) -> IpAddr {
        match self.addrs6 {
            Some((l, _)) => IpAddr::V6(Ipv6Addr::from(l)),
            None => IpAddr::V4(Ipv4Addr::from(self.key.local_ip)),
        }
    }
    /// The remote address, family and all.
    pub fn remote_addr(&self) -> IpAddr {
        match self.addrs6 {
            Some((_, r)) => IpAddr::V6(Ipv6Addr::from(r)),
            None => IpAddr::V4(Ipv4Addr::from(self.key.remote_ip)),
        }
    }
}

/// Client endpoints (address with its family, port) whose flows a passive host traces
/// when their SYN arrives: the client side of a run names the flows it samples here, the
/// server side of the same run (another host, maybe another thread) picks them up.
/// Also the other way: a server host's tracer names the flows it chose to a capture.
/// Endpoints are full addresses, not the hosts' flow keys: a host keeps IPv6 addresses
/// as ids of its own, which mean nothing to another host.
#[derive(Clone, Debug, Default)]
pub struct TraceWatch(Arc<WatchInner>);

#[derive(Debug, Default)]
struct WatchInner {
    list: Mutex<Vec<(IpAddr, u16)>>,
    /// Entries listed (read without the lock).
    len: AtomicUsize,
}

impl TraceWatch {
    /// Adds a client endpoint.
    pub fn add(&self, ip: IpAddr, port: u16) {
        if let Ok(mut v) = self.0.list.lock() {
            v.push((ip, port));
            self.0.len.store(v.len(), Ordering::Release);
        }
    }
    /// Anything listed? (One atomic load.)
    pub fn pending(&self) -> bool {
        self.0.len.load(Ordering::Acquire) > 0
    }
    /// Takes every listed endpoint.
    pub fn drain(&self) -> Vec<(IpAddr, u16)> {
        let Ok(mut v) = self.0.list.lock() else {
            return Vec::new();
        };
        self.0.len.store(0, Ordering::Release);
        std::mem::take(&mut *v)
    }
    /// Takes the endpoint if listed (each is picked up once).
    pub fn take(&self, ip: IpAddr, port: u16) -> bool {
        if !self.pending() {
            return false;
        }
        let Ok(mut v) = self.0.list.lock() else {
            return false;
        };
        match v.iter().position(|e| *e == (ip, port)) {
            Some(k) => {
                v.swap_remove(k);
                self.0.len.store(v.len(), Ordering::Release);
                true
            }
            None => false,
        }
    }
}

/// Chooses passive flows to trace by their ends (address/port filters on a server):
/// called with the client's (remote) address and port, then the server's (local).
pub type PassiveSelect = Box<dyn FnMut(IpAddr, u16, IpAddr, u16) -> bool + Send>;

/// What the host last recorded of a traced flow (to record changes only).
#[derive(Clone, Copy, Debug, Default)]
struct Snap {
    state: State,
    cwnd: u32,
    ssthresh: u32,
    wnd: u32,
}

#[derive(Clone, Copy, Debug)]
struct Live {
    id: u32,
    snap: Snap,
    cause: RexmitCause,
}

/// The per-host record of traced flows. Bounded: beyond `max_events` events are
/// counted ([`FlowTracer::dropped`]) and not kept.
pub struct FlowTracer {
    flows: Vec<TracedFlow>,
    events: Vec<TraceEvent>,
    live: HashMap<u32, Live>,
    max_events: usize,
    dropped: u64,
    watch: Option<TraceWatch>,
    select: Option<PassiveSelect>,
    max_passive: usize,
    /// Where the passive flows chosen are named (a capture that follows them).
    announce: Option<TraceWatch>,
}

impl FlowTracer {
    /// A tracer keeping at most `max_events` events.
    pub fn new(max_events: usize) -> Self {
        FlowTracer {
            flows: Vec::new(),
            events: Vec::new(),
            live: HashMap::new(),
            max_events,
            dropped: 0,
            watch: None,
            select: None,
            max_passive: 0,
            announce: None,
        }
    }
    /// Every passive flow chosen is named in `w` (its client endpoint): a capture of the
    /// server's frames learns there which flows to record.
    pub fn with_announce(mut self, w: TraceWatch) -> Self {
        self.announce = Some(w);
        self
    }
    /// Passive flows from the endpoints listed in `w` are traced.
    pub fn with_watch(mut self, w: TraceWatch) -> Self {
        self.watch = Some(w);
        self
    }
    /// Passive flows `select` chooses are traced, at most `max` of them.
    pub fn with_select(mut self, max: usize, select: PassiveSelect) -> Self {
        self.select = Some(select);
        self.max_passive = max;
        self
    }
    /// The flows traced so far.
    pub fn flows(&self) -> &[TracedFlow] {
        &self.flows
    }
    /// Their events, in time order.
    pub fn events(&self) -> &[TraceEvent] {
        &self.events
    }
    /// Events not kept (the buffer was full).
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Should the passive flow of `key` (a SYN just arrived) be traced? `addrs6`: its
    /// IPv6 addresses (local, remote) when it is an IPv6 flow.
    pub(crate) fn wants_passive(
        &mut self,
        key: &FlowKey,
        addrs6: Option<([u8; 16], [u8; 16])>,
    ) -> bool {
        let (local, remote) = match addrs6 {
            Some((l, r)) => (Ipv6Addr::from(l).into(), Ipv6Addr::from(r).into()),
            None => (
                Ipv4Addr::from(key.local_ip).into(),
                Ipv4Addr::from(key.remote_ip).into(),
            ),
        };
        let named = self
            .watch
            .as_ref()
            .is_some_and(|w| w.take(remote, key.remote_port));
        let chosen = named
            || match self.select.as_mut() {
                Some(s) if self.flows.len() < self.max_passive => {
                    s(remote, key.remote_port, local, key.local_port)
                }
                _ => false,
            };
        if chosen {
            if let Some(a) = &self.announce {
                a.add(remote, key.remote_port);
            }
        }
        chosen
    }

    /// Starts following slab entry `i`.
    pub(crate) fn open(&mut self, now: u64, i: u32, t: &Tcb, addrs6: Option<([u8; 16], [u8; 16])>) {
        let id = self.flows.len() as u32;
        self.flows.push(TracedFlow {
            id,
            key: t.key,
            addrs6,
            passive: t.has(crate::tcb::F_PASSIVE),
            iss: t.snd_una,
            start_ns: now,
        });
        self.live.insert(
            i,
            Live {
                id,
                snap: Snap::default(),
                cause: RexmitCause::Rto,
            },
        );
        self.push(now, id, TraceKind::Open);
        self.sync(now, i, t);
    }

    fn push(&mut self, t_ns: u64, flow: u32, kind: TraceKind) {
        if self.events.len() < self.max_events {
            self.events.push(TraceEvent { t_ns, flow, kind });
        } else {
            self.dropped += 1;
        }
    }

    /// Records an event of slab entry `i`.
    pub(crate) fn event(&mut self, now: u64, i: u32, kind: TraceKind) {
        if let Some(l) = self.live.get(&i) {
            let id = l.id;
            self.push(now, id, kind);
        }
    }

    /// Sets what the next retransmissions of `i` are for.
    pub(crate) fn cause(&mut self, i: u32, c: RexmitCause) {
        if let Some(l) = self.live.get_mut(&i) {
            l.cause = c;
        }
    }

    /// A segment of `i` was sent again, for the current cause or for `why`.
    pub(crate) fn rexmit(
        &mut self,
        now: u64,
        i: u32,
        seq: u32,
        len: u32,
        syn: bool,
        why: Option<RexmitCause>,
    ) {
        if let Some(l) = self.live.get(&i) {
            let (id, cause) = (l.id, why.unwrap_or(l.cause));
            self.push(
                now,
                id,
                TraceKind::Retransmit {
                    seq,
                    len,
                    syn,
                    cause,
                },
            );
        }
    }

    /// Records what changed in `t` (state, cwnd/ssthresh, the peer's window) since the
    /// last record.
    pub(crate) fn sync(&mut self, now: u64, i: u32, t: &Tcb) {
        let Some(l) = self.live.get_mut(&i) else {
            return;
        };
        let (id, old) = (l.id, l.snap);
        let new = Snap {
            state: t.state,
            cwnd: t.cc.cwnd,
            ssthresh: t.cc.ssthresh,
            wnd: t.snd_wnd,
        };
        l.snap = new;
        if new.state != old.state {
            self.push(now, id, TraceKind::State(new.state));
        }
        if (new.cwnd, new.ssthresh) != (old.cwnd, old.ssthresh) {
            self.push(
                now,
                id,
                TraceKind::Cwnd {
                    cwnd: new.cwnd,
                    ssthresh: new.ssthresh,
                },
            );
        }
        // The window the peer offered: from the SYN on (not in SYN_SENT, where it is 0).
        if new.wnd != old.wnd && new.state != State::SynSent {
            self.push(now, id, TraceKind::Window { wnd: new.wnd });
        }
    }

    /// Slab entry `i` ended: its last record.
    pub(crate) fn close(&mut self, now: u64, i: u32, t: &Tcb, reason: CloseReason) {
        self.sync(now, i, t);
        if let Some(l) = self.live.remove(&i) {
            self.push(now, l.id, TraceKind::Closed(reason));
        }
    }
}
