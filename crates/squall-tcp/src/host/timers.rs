//! Timers: RTO arithmetic, lazy wheel arming, `poll`, the retransmission / persist /
//! keepalive / TIME_WAIT handlers, and the TX-blocked resume list (`tx_resume`).

use super::*;

/// How far ahead a walk over a list of flows (the expired timers, the flows waiting for
/// the TX sink) prefetches them (`TcpHost::prefetch_flow`).
const FLOW_PREFETCH_AHEAD: usize = 4;

/// Largest RTO backoff shift kept (the timeout is capped at `RtoConfig::max_us` long
/// before).
const MAX_BACKOFF: u8 = 20;

impl TcpHost {
    #[inline]
    pub(super) fn rto_ns(&self, t: &Tcb) -> u64 {
        t.rtt.backed_off(t.backoff, &self.cfg.rto) as u64 * 1000
    }

    /// Arms the wheel with the earliest of the flow's deadlines, lazily: the wheel is only
    /// re-armed when a deadline moves earlier; later deadlines are found at expiry.
    #[inline]
    pub(super) fn schedule(&mut self, i: u32) {
        let t = &mut self.flows[i as usize];
        let want = match (t.rexmt_at, t.delack_at) {
            (0, 0) => return,
            (0, d) | (d, 0) => d,
            (a, b) => a.min(b),
        };
        if t.wheel_at == 0 || want < t.wheel_at {
            t.wheel_at = want;
            self.wheel.arm(i, want);
        }
    }

    /// Keepalive (RFC 1122 §4.2.3.6): an acceptable segment from the peer of an idle
    /// established flow shows it is alive: the unanswered probe count starts again and
    /// the idle period restarts (the wheel finds the later deadline at expiry). Called
    /// only when keepalive is configured.
    #[inline(never)]
    pub(super) fn keepalive_heard(&mut self, i: u32, seg: &Segment) {
        let Some((idle, _, _)) = self.cfg.keepalive else {
            return;
        };
        let now = self.now;
        let t = &mut self.flows[i as usize];
        let idle_flow =
            t.snd_una == t.snd_max && !(t.sq.len > 0 && t.snd_wnd == 0) && !t.window_too_small();
        if idle_flow
            && seg.flags & (ACK | RST | SYN) == ACK
            && seq::ge(seg.ack, t.snd_una)
            && seq::le(seg.ack, t.snd_max)
        {
            t.retries = 0;
            t.rexmt_at = now + idle;
        }
    }

    pub(super) fn set_idle_timer(&mut self, i: u32) {
        let now = self.now;
        let ka = self.cfg.keepalive;
        let t = &mut self.flows[i as usize];
        if t.snd_una != t.snd_max {
            return;
        }
        if (t.sq.len > 0 && t.snd_wnd == 0 && !t.fin_pending()) || t.window_too_small() {
            return; // persist timer stays
        }
        t.rexmt_at = match (ka, t.state) {
            (Some((idle, _, _)), State::Established) => {
                t.retries = 0;
                now + idle
            }
            _ => 0,
        };
    }

    /// Runs expired timers. Call with the current time, at least as often as
    /// [`TcpHost::next_timer`] says.
    pub fn poll<A: TcpApp, S: TxSink>(&mut self, now: u64, app: &mut A, tx: &mut S) {
        self.now = now;
        self.resume_blocked(tx);
        let mut exp = std::mem::take(&mut self.expired);
        exp.clear();
        self.wheel.advance(now, &mut exp);
        let nodes = self.node_hints();
        for &n in exp.iter().take(FLOW_PREFETCH_AHEAD) {
            self.prefetch_flow(n, nodes);
        }
        for (k, &i) in exp.iter().enumerate() {
            if let Some(&n) = exp.get(k + FLOW_PREFETCH_AHEAD) {
                self.prefetch_flow(n, nodes);
            }
            let r = self.rexmit_events();
            self.on_timer(i, app, tx);
            self.report_rexmit(i, r, app);
        }
        self.expired = exp;
    }

    /// Retransmission events so far (timeouts and fast retransmits).
    #[inline(always)]
    pub(super) fn rexmit_events(&self) -> u64 {
        self.counters.tcps_rexmttimeo + self.counters.tcps_fastrexmt
    }

    /// Tells the application that flow `i` retransmitted if the event count moved past
    /// `before` while it was processed (and the flow is still there).
    #[inline(always)]
    pub(super) fn report_rexmit<A: TcpApp>(&mut self, i: u32, before: u64, app: &mut A) {
        if self.rexmit_events() != before && self.flows[i as usize].state != State::Closed {
            app.on_retransmit(FlowId(i));
        }
    }

    /// Resumes output of flows that stopped on a full TX sink (oldest first), until
    /// the sink is full again. [`TcpHost::poll`] does this too; a driver whose TX ring
    /// drains between polls can call it directly. Returns how many flows remain blocked.
    pub fn tx_resume<S: TxSink>(&mut self, now: u64, tx: &mut S) -> usize {
        self.now = now;
        self.resume_blocked(tx);
        self.tx_blocked.len()
    }

    /// Resumes the flows waiting for the TX sink, if any (every loop turn asks, twice; the
    /// empty case is inlined there).
    #[inline(always)]
    pub(super) fn resume_blocked<S: TxSink>(&mut self, tx: &mut S) {
        if !self.tx_blocked.is_empty() {
            self.resume_blocked_flows(tx);
        }
    }

    #[inline(never)]
    fn resume_blocked_flows<S: TxSink>(&mut self, tx: &mut S) {
        // At most one pass over the entries present now: a flow that blocks again is
        // re-queued at the back and ends the pass (the sink is full).
        let nodes = self.node_hints();
        for &n in self.tx_blocked.iter().take(FLOW_PREFETCH_AHEAD) {
            self.prefetch_flow(n, nodes);
        }
        for _ in 0..self.tx_blocked.len() {
            let Some(i) = self.tx_blocked.pop_front() else {
                break;
            };
            if let Some(&n) = self.tx_blocked.get(FLOW_PREFETCH_AHEAD - 1) {
                self.prefetch_flow(n, nodes);
            }
            let t = &mut self.flows[i as usize];
            if !t.has(F_TX_BLOCKED) {
                continue; // stale entry: flow closed (and maybe reused) meanwhile
            }
            t.flags &= !F_TX_BLOCKED;
            match t.state {
                State::Closed => continue,
                // The SYN or SYN-ACK itself was not sent (it is idempotent: seq = ISS).
                State::SynSent | State::SynReceived => self.send_syn(i, tx),
                _ => self.output_now(i, tx),
            }
            if self.flows[i as usize].has(F_TX_BLOCKED) {
                break;
            }
        }
    }

    /// Notes that flow `i` could not send because the TX sink was full.
    pub(super) fn mark_tx_blocked(&mut self, i: u32) {
        let t = &mut self.flows[i as usize];
        if !t.has(F_TX_BLOCKED) {
            t.flags |= F_TX_BLOCKED;
            self.tx_blocked.push_back(i);
        }
    }

    pub(super) fn on_timer<A: TcpApp, S: TxSink>(&mut self, i: u32, app: &mut A, tx: &mut S) {
        let now = self.now;
        let t = &mut self.flows[i as usize];
        if t.state == State::Closed {
            return;
        }
        t.wheel_at = 0;
        if t.delack_at != 0 && t.delack_at <= now {
            t.delack_at = 0;
            if t.rcv_unacked > 0 || t.has(F_ACKNOW) {
                t.flags |= F_ACKNOW;
                self.counters.tcps_delack += 1;
                self.output(i, tx);
            }
        }
        let t = &mut self.flows[i as usize];
        if t.rexmt_at != 0 && t.rexmt_at <= now {
            t.rexmt_at = 0;
            if self.on_rexmt_timer(i, app, tx) {
                return;
            }
        }
        self.schedule(i);
        if self.traced(i) {
            self.trace_sync(i);
        }
    }

    /// Retransmission-class timer; returns true if the flow is gone.
    pub(super) fn on_rexmt_timer<A: TcpApp, S: TxSink>(
        &mut self,
        i: u32,
        app: &mut A,
        tx: &mut S,
    ) -> Gone {
        let now = self.now;
        let cfg_retries = self.cfg.max_retries;
        let t = &mut self.flows[i as usize];
        match t.state {
            State::TimeWait => {
                self.close_flow(i, CloseReason::Normal, app);
                return true;
            }
            State::FinWait2 => {
                // The peer never closed its side (FIN_WAIT_2 timeout, as BSD/Linux do).
                self.counters.tcps_finwait2_drops += 1;
                self.close_flow(i, CloseReason::Timeout, app);
                return true;
            }
            State::SynSent | State::SynReceived => {
                // (`backoff`: the retransmissions so far; compared before it grows, so
                // that 255 retries, the most `max_syn_retries` says, cannot overflow it)
                if t.backoff >= self.cfg.max_syn_retries {
                    self.counters.tcps_conndrops += 1;
                    self.counters.tcps_rexmttimeo += 1;
                    self.close_flow(i, CloseReason::Timeout, app);
                    return true;
                }
                t.backoff += 1;
                t.flags &= !F_TIMING;
                self.counters.tcps_rexmttimeo += 1;
                if self.traced(i) {
                    self.trace_cause(i, crate::trace::RexmitCause::Rto);
                    let iss = self.flows[i as usize].snd_una;
                    self.trace_rexmit(i, iss, 0, true);
                }
                self.send_syn(i, tx);
                let t = &self.flows[i as usize];
                let rto = self.rto_ns(t);
                self.flows[i as usize].rexmt_at = now + rto;
            }
            _ if t.snd_wnd == 0 && t.sq.len > 0 => {
                // Persist (RFC 9293 §3.8.6.1, RFC 1122 §4.2.2.17): the window is closed
                // with data to send (in flight or not). Probe it with the first
                // unacknowledged byte, as BSD does, and keep probing, backed off, for as
                // long as the peer answers (an answer clears `retries`). Not a
                // retransmission timeout: cwnd and the RTT estimate are left alone.
                self.counters.tcps_persisttimeo += 1;
                t.retries = t.retries.saturating_add(1);
                if t.retries > cfg_retries {
                    self.counters.tcps_timeoutdrop += 1;
                    self.send_rst_for(i, tx);
                    self.count_drop(i);
                    self.close_flow(i, CloseReason::Timeout, app);
                    return true;
                }
                t.backoff = t.backoff.saturating_add(1).min(MAX_BACKOFF);
                t.snd_nxt = t.snd_una;
                t.flags = (t.flags | F_FORCE) & !F_TIMING;
                self.counters.tcps_sndprobe += 1;
                if self.traced(i) {
                    self.trace_ev(i, crate::trace::TraceKind::WindowProbe);
                }
                self.output(i, tx);
                let rto = self.rto_ns(&self.flows[i as usize]);
                self.flows[i as usize].rexmt_at = now + rto;
            }
            _ if t.snd_una == t.snd_max && t.window_too_small() => {
                // The silly-window rule's override timeout (RFC 9293 §3.8.6.2.1): what the
                // small window holds goes now (output then times it as data in flight).
                // Data, not a probe: no backoff, no retry counted.
                self.counters.tcps_persisttimeo += 1;
                t.flags |= F_FORCE;
                self.output(i, tx);
            }
            _ if t.snd_una != t.snd_max => {
                // RFC 6298 §5.4-5.6: retransmit, back off, restart.
                t.backoff = t.backoff.saturating_add(1).min(MAX_BACKOFF);
                t.retries = t.retries.saturating_add(1);
                self.counters.tcps_rexmttimeo += 1;
                if t.retries > cfg_retries {
                    self.counters.tcps_timeoutdrop += 1;
                    self.send_rst_for(i, tx);
                    self.count_drop(i);
                    self.close_flow(i, CloseReason::Timeout, app);
                    return true;
                }
                let mss = t.mss as u32;
                let flight = t.flight();
                let snd_max = t.snd_max;
                t.cc.on_rto(flight, mss, snd_max);
                // RFC 6675 §5.1 / RFC 2018 §8: after an RTO, SACK information may be reneged.
                let sb = t.sb;
                t.sb = NO_SIDE;
                self.release_sb(sb);
                if self.traced(i) {
                    self.trace_cause(i, crate::trace::RexmitCause::Rto);
                }
                let t = &mut self.flows[i as usize];
                t.snd_nxt = t.snd_una;
                t.flags &= !F_TIMING; // Karn
                let rto = self.rto_ns(&self.flows[i as usize]);
                self.flows[i as usize].rexmt_at = now + rto;
                self.output(i, tx);
            }
            State::Established => {
                if let Some((_, intvl, probes)) = self.cfg.keepalive {
                    self.counters.tcps_keeptimeo += 1;
                    if t.retries >= probes {
                        self.counters.tcps_keepdrops += 1;
                        self.send_rst_for(i, tx);
                        self.count_drop(i);
                        self.close_flow(i, CloseReason::Timeout, app);
                        return true;
                    }
                    t.retries += 1;
                    // Keepalive probe: SEG.SEQ = SND.NXT - 1 (RFC 9293 §3.8.4).
                    let (seq, ack) = (t.snd_una.wrapping_sub(1), t.rcv_nxt);
                    let key = t.key;
                    let wnd = self.adv_wnd(i);
                    self.counters.tcps_keepprobe += 1;
                    let mut ob = [0u8; 40];
                    let ol = self.seg_opts(i, &mut ob);
                    let o = self.flows[i as usize].opt;
                    self.write_seg(tx, &key, o, seq, ack, ACK, wnd, &ob[..ol], None);
                    self.flows[i as usize].rexmt_at = now + intvl;
                }
            }
            _ => {}
        }
        false
    }
}
