//! ACK processing (RFC 9293 §3.10.7.4 fifth check, RFC 5961 §5, RFC 6298 RTT, NewReno /
//! RFC 6675 SACK recovery).

use super::*;

impl TcpHost {
    /// ACK processing (RFC 9293 §3.10.7.4 fifth check, RFC 5961 §5, RFC 6298, RFC 6582).
    /// Returns true if processing of this segment must stop (flow gone or segment dropped).
    pub(super) fn process_ack<A: TcpApp, S: TxSink>(
        &mut self,
        i: u32,
        seg: &Segment,
        opts: &pkt::TcpOpts,
        app: &mut A,
        tx: &mut S,
    ) -> Gone {
        let now = self.now;
        let ts_ecr = if self.flows[i as usize].has(F_TS) {
            opts.ts.map_or(0, |x| x.1)
        } else {
            0
        };
        let t = &mut self.flows[i as usize];
        let ack = seg.ack;
        if seq::gt(ack, t.snd_max) {
            // Acks something not yet sent: ACK (rate limited) and drop (RFC 9293 /
            // RFC 5961 §5.2), SACK blocks included.
            self.counters.tcps_rcvacktoomuch += 1;
            self.ack_invalid(i, seg, tx);
            return true; // segment dropped (flow remains)
        }
        // RFC 5961 §5.2: an ACK older than SND.UNA - MAX.SND.WND is not acceptable.
        let max_wnd = t.snd_wnd.max(65_535);
        if seq::lt(ack, t.snd_una.wrapping_sub(max_wnd)) {
            self.challenge_ack(i, tx);
            return true;
        }
        // RFC 2018 §3: record SACK blocks in the scoreboard, only once the ACK is known
        // to lie in [SND.UNA - MAX.SND.WND, SND.MAX]: blocks are kept within
        // (max(SND.UNA, SEG.ACK), SND.MAX], so the scoreboard never spans more than the
        // data in flight (an ACK beyond SND.MAX would have let them wrap).
        let mut new_sack = false;
        if opts.sack_n > 0 && self.flows[i as usize].has(F_SACK) {
            if self.flows[i as usize].sb == NO_SIDE {
                let b = self.get_sb();
                let t = &mut self.flows[i as usize];
                t.sb = b;
                self.sboards[b as usize].high_rxt = t.snd_una;
            }
            let t = &self.flows[i as usize];
            let (una, max) = (seq::max(t.snd_una, ack), t.snd_max);
            let sb = &mut self.sboards[t.sb as usize];
            for &(a, b) in &opts.sack[..opts.sack_n as usize] {
                new_sack |= sb.add(una, max, a, b);
            }
        }
        let t = &mut self.flows[i as usize];
        let wnd = (seg.wnd as u32) << t.snd_wscale();
        if seq::le(ack, t.snd_una) {
            if wnd == 0 && t.snd_wnd == 0 && ack == t.snd_una {
                // The window stays closed: an answer to a zero-window probe (RFC 1122
                // §4.2.2.17), not a duplicate ACK. The peer is alive: keep probing.
                t.retries = 0;
            }
            // Duplicate ACK per RFC 5681 §2: no data, no window change, outstanding data;
            // with SACK, an ACK that SACKs new data is one whatever its window says (RFC
            // 6675 §2: a receiver may open its window while it reports losses).
            else if ack == t.snd_una
                && seg.payload.is_empty()
                && seg.flags & FIN == 0
                && (wnd == t.snd_wnd || new_sack)
                && t.snd_una != t.snd_max
            {
                self.counters.tcps_rcvdupack += 1;
                let (una, max, mss, fl) = (t.snd_una, t.snd_max, t.mss as u32, t.flight());
                let sack = t.sb != NO_SIDE;
                // Read here, not for every ACK: only duplicate ACKs need it.
                let thresh = self.opts[t.opt as usize].rexmt_thresh;
                let mut verdict = t.cc.on_dupack_thresh(una, max, mss, fl, thresh);
                // RFC 6675 §5 step 2: before the thresh-th duplicate, recovery starts once
                // the scoreboard deems SND.UNA lost (a receiver coalescing its ACKs, as
                // GRO does, may send one duplicate SACKing a whole window).
                if verdict == DupAck::Nothing
                    && sack
                    && self.sboards[t.sb as usize].una_is_lost(una, mss, thresh)
                {
                    verdict = t.cc.enter_recovery(una, max, mss, fl, thresh);
                }
                match verdict {
                    DupAck::FastRetransmit if sack => {
                        // RFC 6675 §5 step 4: cwnd = ssthresh; retransmit the first
                        // segment (HighACK + 1, step 4.3) whether or not IsLost says it
                        // is lost yet; then send by pipe.
                        self.counters.tcps_fastrexmt += 1;
                        t.cc.cwnd = t.cc.ssthresh;
                        let b = t.sb as usize;
                        let hole = self.sboards[b].first_hole_len(una, mss);
                        if self.traced(i) {
                            self.trace_cause(i, crate::trace::RexmitCause::FastRetransmit);
                        }
                        let sent = self.send_at(i, una, hole, tx);
                        self.sboards[b].high_rxt = una.wrapping_add(sent);
                        self.sack_output(i, tx);
                    }
                    DupAck::FastRetransmit => {
                        self.counters.tcps_fastrexmt += 1;
                        t.rexmt_at = 0;
                        if self.traced(i) {
                            self.trace_cause(i, crate::trace::RexmitCause::FastRetransmit);
                        }
                        self.retransmit_one(i, tx);
                    }
                    DupAck::Inflate if sack => {
                        t.cc.cwnd = t.cc.cwnd.saturating_sub(mss); // no inflation with SACK
                        self.sack_output(i, tx);
                    }
                    DupAck::Inflate => self.output(i, tx),
                    // Limited Transmit (RFC 3042, RFC 5681 §3.2): on the first and second
                    // duplicate, one segment of new data, the flight then at most cwnd
                    // plus that many segments (with an initial window of two a single
                    // loss would otherwise never see three duplicates).
                    // (cwnd lent for the call: the receiver's window still bounds it; with
                    // SACK only for a duplicate that SACKs new data, RFC 3042 §2)
                    // (new data only: not after a timeout rolled SND.NXT back)
                    DupAck::Nothing
                        if fl > 0
                            && (1..=2).contains(&t.cc.dupacks)
                            && (!sack || new_sack)
                            && t.snd_nxt == t.snd_max =>
                    {
                        let cwnd = t.cc.cwnd;
                        t.cc.cwnd = cwnd.saturating_add(u32::from(t.cc.dupacks) * mss);
                        self.output(i, tx);
                        self.flows[i as usize].cc.cwnd = cwnd;
                    }
                    DupAck::Nothing => {}
                }
            } else if ack == t.snd_una && seg.payload.is_empty() && wnd != t.snd_wnd {
                self.counters.tcps_rcvwinupd += 1;
            }
        } else {
            // New data acknowledged.
            let mut sampled = 0;
            let acked = ack.wrapping_sub(t.snd_una);
            self.counters.tcps_rcvackpack += 1;
            // RFC 6298 §5 (Karn): the backoff is cleared by a valid RTT sample only (an
            // ACK of a retransmission keeps it), or when a closed window opens (the
            // backoff was the persist timer's).
            if ts_ecr != 0 {
                // RFC 7323 §4.1: RTT from the echoed timestamp (valid for retransmissions too).
                // Against our TSval clock (odd values: `ts_now`), so an echo from this
                // same millisecond is a 0 ms sample, not a wrap to 2^32 - 1.
                let r_ms = ((now / 1_000_000) as u32 | 1).wrapping_sub(ts_ecr);
                if r_ms < 3_600_000 {
                    sampled = r_ms.max(1) * 1000;
                    t.rtt.sample(sampled, &self.cfg.rto);
                    self.counters.tcps_rttupdated += 1;
                    t.backoff = 0;
                }
                t.flags &= !F_TIMING;
            } else if t.has(F_TIMING) && seq::gt(ack, t.rtt_seq) {
                let r = ((now / 1000) as u32).wrapping_sub(t.rtt_ts);
                sampled = r.max(1);
                t.rtt.sample(r, &self.cfg.rto);
                t.flags &= !F_TIMING;
                self.counters.tcps_rttupdated += 1;
                t.backoff = 0;
            } else if t.snd_wnd == 0 && wnd != 0 {
                t.backoff = 0;
            }
            let fin_acked = t.fin_pending() && seq::gt(ack, t.fin_seq());
            let data_acked = (acked - fin_acked as u32).min(t.sq.len);
            self.counters.tcps_rcvackbyte += data_acked as u64;
            let mut sq = t.sq;
            self.chunks.consume(&mut sq, data_acked, &mut self.bufs);
            if self.traced(i) && sampled != 0 {
                self.trace_rtt(i, sampled);
            }
            let t = &mut self.flows[i as usize];
            t.sq = sq;
            t.snd_una = ack;
            if seq::lt(t.snd_nxt, ack) {
                t.snd_nxt = ack;
            }
            t.retries = 0;
            let mss = t.mss as u32;
            let flight = t.flight();
            let sack = t.sb != NO_SIDE;
            let was_recovering = t.cc.in_recovery;
            let r = t.cc.on_new_ack(acked, ack, mss, flight);
            if sack {
                let b = t.sb;
                self.sboards[b as usize].advance(ack);
                if was_recovering && r == NewAck::PartialRetransmit {
                    // RFC 6675: partial ACKs keep cwnd at ssthresh; holes go by pipe.
                    let t = &mut self.flows[i as usize];
                    t.cc.cwnd = t.cc.ssthresh;
                }
                if self.sboards[b as usize].is_empty() && !self.flows[i as usize].cc.in_recovery {
                    self.flows[i as usize].sb = NO_SIDE;
                    self.release_sb(b);
                }
            }
            let t = &mut self.flows[i as usize];
            // Window update before the timers (a window closed with data queued keeps the
            // timer free for the persist timer, not the keep-alive's) and before the
            // callbacks (app sends see the new window).
            if seq::lt(t.snd_wl1, seg.seq) || (t.snd_wl1 == seg.seq && seq::le(t.snd_wl2, ack)) {
                t.set_snd_wnd(wnd);
                t.snd_wl1 = seg.seq;
                t.snd_wl2 = ack;
            }
            // RFC 6298 §5.2/5.3: stop or restart the retransmission timer.
            if t.snd_una == t.snd_max {
                t.rexmt_at = 0;
                self.set_idle_timer(i);
            } else {
                let rto = self.rto_ns(&self.flows[i as usize]);
                self.flows[i as usize].rexmt_at = now + rto;
            }
            if r == NewAck::PartialRetransmit {
                if self.traced(i) {
                    self.trace_cause(i, crate::trace::RexmitCause::PartialAck);
                }
                if self.flows[i as usize].sb != NO_SIDE {
                    if !self.sack_output(i, tx) {
                        self.rescue_rxt(i, tx);
                    }
                } else {
                    self.retransmit_one(i, tx);
                }
            }
            if data_acked > 0 {
                // The app runs after the whole segment, as it would over a kernel: a FIN
                // riding on this ACK (in sequence, no data before it) takes effect before
                // the app hears of the acknowledged bytes, so a close the app makes then
                // answers the peer's (CLOSE_WAIT -> LAST_ACK) instead of crossing it
                // (FIN_WAIT_1 -> CLOSING -> TIME_WAIT), and the peer, which closed first,
                // is the one that holds TIME_WAIT.
                let t = &mut self.flows[i as usize];
                let fin_rides = seg.flags & FIN != 0
                    && seg.payload.is_empty()
                    && seg.seq == t.rcv_nxt
                    && t.state == State::Established
                    && t.ooo == NO_SIDE;
                if fin_rides {
                    t.rcv_nxt = t.rcv_nxt.wrapping_add(1);
                    t.flags |= F_ACKNOW;
                    t.state = State::CloseWait;
                    if self.traced(i) {
                        self.trace_sync(i);
                    }
                }
                self.set_ctl(i);
                app.on_acked(&mut self.ctl, FlowId(i), data_acked);
                if self.apply_ops(i, app, tx) {
                    return true;
                }
                // The peer's close reaches an app that has not closed on its own.
                if fin_rides && self.flows[i as usize].state == State::CloseWait {
                    self.set_ctl(i);
                    app.on_peer_closed(&mut self.ctl, FlowId(i));
                    if self.apply_ops(i, app, tx) {
                        return true;
                    }
                }
            }
            if fin_acked {
                let t = &mut self.flows[i as usize];
                match t.state {
                    State::FinWait1 => {
                        // Our FIN is acked; bound the wait for the peer's FIN.
                        t.state = State::FinWait2;
                        t.rexmt_at = now + self.cfg.fin_wait2_ns;
                        self.schedule(i);
                    }
                    State::Closing => {
                        self.enter_time_wait(i, app);
                        return true;
                    }
                    State::LastAck => {
                        self.close_flow(i, CloseReason::Normal, app);
                        return true;
                    }
                    _ => {}
                }
            }
            return false;
        }
        // Window update (RFC 9293 §3.10.7.4: SND.WL1/WL2 rule).
        let t = &mut self.flows[i as usize];
        if seq::lt(t.snd_wl1, seg.seq) || (t.snd_wl1 == seg.seq && seq::le(t.snd_wl2, ack)) {
            let opened = wnd > t.snd_wnd;
            let was_closed = t.snd_wnd == 0;
            t.set_snd_wnd(wnd);
            t.snd_wl1 = seg.seq;
            t.snd_wl2 = ack;
            if opened && t.sq.len > t.snd_nxt.wrapping_sub(t.snd_una) {
                if t.snd_una == t.snd_max || was_closed {
                    // Out of persist: the probe timer and its backoff are over; output
                    // starts a fresh retransmission timer, from SND.UNA (whatever was
                    // sent past the closed window, a probe byte included, was dropped).
                    t.rexmt_at = 0;
                    t.backoff = 0;
                    t.retries = 0;
                    t.snd_nxt = t.snd_una;
                }
                self.output(i, tx);
                let rto = self.rto_ns(&self.flows[i as usize]);
                let t = &mut self.flows[i as usize];
                if t.rexmt_at == 0 && t.snd_una != t.snd_max {
                    t.rexmt_at = now + rto;
                    self.schedule(i);
                }
            }
        }
        false
    }
}
