//! Flow tracing in the host: which flows carry the traced bit (`F_TRACED`), and the
//! cold paths that record their events into the host's [`FlowTracer`]. The hooks in the
//! other host files test the bit (already in cache with the TCB) and call these only
//! for traced flows.

use super::*;
use crate::trace::{FlowTracer, RexmitCause, TraceKind};

impl TcpHost {
    /// Gives the host a tracer (None: tracing off, the default). Flows are traced once
    /// named by [`TcpHost::trace_flow`] or, for passive flows, chosen by the tracer at
    /// their SYN.
    pub fn set_tracer(&mut self, t: Option<FlowTracer>) {
        self.trace = t.map(Box::new);
    }
    /// The tracer, if any.
    pub fn tracer(&self) -> Option<&FlowTracer> {
        self.trace.as_deref()
    }
    /// Takes the tracer (its flows and events) out of the host; tracing stops.
    pub fn take_tracer(&mut self) -> Option<FlowTracer> {
        for t in self.flows.iter_mut() {
            t.flags &= !F_TRACED;
        }
        self.trace.take().map(|b| *b)
    }
    /// Starts tracing live flow `f` (call right after `connect`: the SYN is recorded as
    /// sent). False without a tracer or for a flow that is not live.
    pub fn trace_flow(&mut self, f: FlowId) -> bool {
        let i = f.0;
        match self.flows.get(i as usize) {
            Some(t) if t.state != State::Closed && self.trace.is_some() => {}
            _ => return false,
        }
        self.trace_start(i);
        true
    }

    /// Sets the bit and opens the record of slab entry `i`.
    #[cold]
    pub(super) fn trace_start(&mut self, i: u32) {
        let addrs6 = self.flow_ipv6(FlowId(i));
        self.trace_start6(i, addrs6);
    }

    /// [`TcpHost::trace_start`] with the flow's IPv6 addresses already read.
    #[cold]
    fn trace_start6(&mut self, i: u32, addrs6: Option<([u8; 16], [u8; 16])>) {
        let now = self.now;
        let t = &mut self.flows[i as usize];
        t.flags |= F_TRACED;
        if let Some(tr) = self.trace.as_deref_mut() {
            tr.open(now, i, t, addrs6);
        }
    }

    /// A passive flow was created at slab entry `i`: trace it if the tracer wants it.
    #[inline]
    pub(super) fn trace_passive(&mut self, i: u32) {
        if self.trace.is_some() {
            self.trace_passive_cold(i);
        }
    }

    /// [`TcpHost::trace_passive`] with a tracer: the tracer sees the flow's addresses
    /// (an IPv6 flow's from the host's address table).
    #[cold]
    fn trace_passive_cold(&mut self, i: u32) {
        let addrs6 = self.flow_ipv6(FlowId(i));
        if let Some(tr) = self.trace.as_deref_mut() {
            if tr.wants_passive(&self.flows[i as usize].key, addrs6) {
                self.trace_start6(i, addrs6);
            }
        }
    }

    /// Is slab entry `i` traced?
    #[inline(always)]
    pub(super) fn traced(&self, i: u32) -> bool {
        self.flows[i as usize].flags & F_TRACED != 0
    }

    /// Records what changed in a traced flow (state, cwnd/ssthresh, the peer's window).
    #[cold]
    pub(super) fn trace_sync(&mut self, i: u32) {
        let now = self.now;
        if let Some(tr) = self.trace.as_deref_mut() {
            tr.sync(now, i, &self.flows[i as usize]);
        }
    }

    /// Records an event of a traced flow (after what changed before it).
    #[cold]
    pub(super) fn trace_ev(&mut self, i: u32, kind: TraceKind) {
        let now = self.now;
        if let Some(tr) = self.trace.as_deref_mut() {
            tr.sync(now, i, &self.flows[i as usize]);
            tr.event(now, i, kind);
        }
    }

    /// Records an RTT sample of a traced flow, with the estimator after it.
    #[cold]
    pub(super) fn trace_rtt(&mut self, i: u32, sample_us: u32) {
        let r = self.flows[i as usize].rtt;
        self.trace_ev(
            i,
            TraceKind::Rtt {
                sample_us,
                srtt_us: r.srtt_us(),
                rttvar_us: r.rttvar_us(),
                rto_us: r.rto_us(),
            },
        );
    }

    /// What the next retransmissions of a traced flow are for (and, for a timeout or a
    /// recovery, the event that started them, recorded before the window changes it
    /// made).
    #[cold]
    pub(super) fn trace_cause(&mut self, i: u32, c: RexmitCause) {
        let now = self.now;
        let t = &self.flows[i as usize];
        let kind = match c {
            RexmitCause::Rto => Some(TraceKind::Timeout {
                backoff: t.backoff,
                rto_us: t.rtt.rto_us(),
            }),
            RexmitCause::FastRetransmit => Some(TraceKind::Recovery {
                sack: t.sb != NO_SIDE,
            }),
            _ => None,
        };
        if let Some(tr) = self.trace.as_deref_mut() {
            if let Some(k) = kind {
                tr.event(now, i, k);
                tr.sync(now, i, t);
            }
            tr.cause(i, c);
        }
    }

    /// A segment of a traced flow went out again.
    #[cold]
    pub(super) fn trace_rexmit(&mut self, i: u32, seq: u32, len: u32, syn: bool) {
        let now = self.now;
        if let Some(tr) = self.trace.as_deref_mut() {
            tr.rexmit(now, i, seq, len, syn, None);
        }
    }

    /// Our SYN-ACK goes out again because the peer's SYN did (not a timeout of ours).
    #[cold]
    pub(super) fn trace_syn_ack_again(&mut self, i: u32) {
        let (now, iss) = (self.now, self.flows[i as usize].snd_una);
        if let Some(tr) = self.trace.as_deref_mut() {
            tr.rexmit(now, i, iss, 0, true, Some(RexmitCause::DupSyn));
        }
    }

    /// A traced flow ends: its last record; the bit is cleared (the slab entry is free).
    #[cold]
    pub(super) fn trace_close(&mut self, i: u32, reason: CloseReason) {
        let now = self.now;
        let t = &mut self.flows[i as usize];
        t.flags &= !F_TRACED;
        if let Some(tr) = self.trace.as_deref_mut() {
            tr.close(now, i, t, reason);
        }
    }
}

impl TcpHost {
    /// A traced flow reached ESTABLISHED (before `on_connected`): the state, and the
    /// handshake's RTT sample if it gave one (0: none).
    #[cold]
    pub(super) fn trace_opened(&mut self, i: u32, sampled: u32) {
        if sampled != 0 {
            self.trace_rtt(i, sampled);
        } else {
            self.trace_sync(i);
        }
    }
}
