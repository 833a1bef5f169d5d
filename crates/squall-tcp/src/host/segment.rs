//! Segment processing in the synchronized states (RFC 9293 §3.10.7.4): header prediction,
//! the general path, in-order delivery, challenge ACKs and TIME_WAIT entry.

use super::*;

impl TcpHost {
    /// TS.Recent update of the header-prediction path (RFC 7323 §4.3 / §5.3): the segment
    /// is in order (SEG.SEQ = RCV.NXT) and its TSval >= TS.Recent; it is recorded if it
    /// starts at Last.ACK.sent, i.e. nothing received is waiting for our ACK (a delayed
    /// ACK echoes the earliest unacknowledged segment's TSval, rule 4.3 (A), so that the
    /// peer's RTT includes the delay); nothing to do without a timestamp.
    #[inline]
    pub(super) fn fast_ts_recent(&mut self, i: u32, o: &pkt::TcpOpts) {
        if let Some((tsval, _)) = o.ts {
            let now_ms = (self.now / 1_000_000) as u32;
            let t = &mut self.flows[i as usize];
            if t.rcv_unacked == 0 {
                t.ts_recent = tsval;
                t.ts_recent_age = now_ms;
            }
        }
    }

    /// Processing for every synchronized state plus SYN-RECEIVED (RFC 9293 §3.10.7.4).
    pub(super) fn segment<A: TcpApp, S: TxSink>(
        &mut self,
        i: u32,
        seg: &Segment,
        h: u64,
        app: &mut A,
        tx: &mut S,
    ) {
        let now = self.now;
        let state = self.flows[i as usize].state;
        if state == State::SynSent {
            self.syn_sent(i, seg, app, tx);
            return;
        }
        let flags = seg.flags;
        // Keep-alive: an acceptable segment shows the peer alive (checked where the
        // segment is known acceptable: here for the in-order one of header prediction
        // and of the common slow path, after the checks below for the others; a segment
        // out of the window, a peer's own keep-alive probe among them, is not).
        let keepalive = self.cfg.keepalive.is_some() && state == State::Established;
        if keepalive && seg.seq == self.flows[i as usize].rcv_nxt {
            self.keepalive_heard(i, seg);
        }
        // Header prediction (RFC 9293 §3.10.7.4 common case, BSD tcp_input): in-order pure
        // ACK or in-order data, nothing unusual pending.
        {
            let t = &self.flows[i as usize];
            // Options: none negotiated (what the segment carries is ignored, as on the slow
            // path), or timestamps only with the segment carrying exactly NOP, NOP, TS
            // (RFC 7323 Appendix A layout) whose TSval passes PAWS and advances TS.Recent.
            let neg = t.flags & (F_TS | F_SACK);
            if state == State::Established
                && flags & (SYN | FIN | RST | URG | ACK) == ACK
                && seg.seq == t.rcv_nxt
                && (neg == 0
                    || (neg == F_TS
                        && pkt::canonical_ts(seg.opts)
                            .is_some_and(|(tsval, _)| seq::ge(tsval, t.ts_recent))))
                && t.ooo == NO_SIDE
                && t.snd_nxt == t.snd_max
                && !t.cc.in_recovery
                && ((seg.wnd as u32) << t.snd_wscale()) == t.snd_wnd
            {
                let fast_opts = pkt::TcpOpts {
                    ts: if neg == 0 {
                        None
                    } else {
                        pkt::canonical_ts(seg.opts)
                    },
                    ..pkt::TcpOpts::default()
                };
                if seg.payload.is_empty()
                    && seq::gt(seg.ack, t.snd_una)
                    && seq::le(seg.ack, t.snd_max)
                {
                    self.counters.tcps_predack += 1;
                    self.fast_ts_recent(i, &fast_opts);
                    if !self.process_ack(i, seg, &fast_opts, app, tx) {
                        self.output_acked(i, tx);
                    }
                    return;
                }
                if !seg.payload.is_empty()
                    && seg.ack == t.snd_una
                    && seg.payload.len() as u32 <= self.opts[t.opt as usize].rcv_wnd
                {
                    self.counters.tcps_preddat += 1;
                    self.fast_ts_recent(i, &fast_opts);
                    // SND.WL1 follows the segments whose (unchanged) window we take, or
                    // after 2^31 bytes it would read as newer than SEG.SEQ.
                    self.flows[i as usize].snd_wl1 = seg.seq;
                    if !self.deliver_in_order(i, seg.payload, flags & PSH != 0, app, tx) {
                        self.output(i, tx);
                    }
                    return;
                }
                // In-order data that also acknowledges new data (a request/response
                // exchange): exactly the slow path's steps for it (sequence check passes,
                // no RST/SYN/FIN, no options to parse, nothing out of order or pending FIN):
                // process the ACK, deliver the text, then output.
                if !seg.payload.is_empty()
                    && t.flags & F_FIN_READY == 0
                    && seq::gt(seg.ack, t.snd_una)
                    && seq::le(seg.ack, t.snd_max)
                    && seg.payload.len() as u32 <= self.opts[t.opt as usize].rcv_wnd
                {
                    self.fast_ts_recent(i, &fast_opts);
                    if self.process_ack(i, seg, &fast_opts, app, tx) {
                        return;
                    }
                    if !self.deliver_in_order(i, seg.payload, flags & PSH != 0, app, tx) {
                        self.output(i, tx);
                    }
                    return;
                }
            }
        }
        let listening = state == State::TimeWait
            && flags & (SYN | ACK | RST) == SYN
            && self.listens(&self.flows[i as usize].key);
        let t = &mut self.flows[i as usize];
        // TIME_WAIT reuse (RFC 9293 §3.6.1, RFC 6191 §2): a new SYN may reopen the
        // 4-tuple when its TSval is newer than TS.Recent (the old incarnation used
        // timestamps and the SYN has one: its sequence number may lie anywhere, as a
        // client's random ISN does), else when it is above RCV.NXT.
        if state == State::TimeWait
            && flags & (SYN | ACK | RST) == SYN
            && listening
            && match pkt::parse_opts(seg.opts).ts {
                Some((tsval, _)) if t.has(F_TS) => seq::gt(tsval, t.ts_recent),
                _ => seq::gt(seg.seq, t.rcv_nxt),
            }
        {
            self.counters.tcps_twrecycled += 1;
            let key = t.key;
            self.hold_ids(&key);
            self.close_flow(i, CloseReason::Normal, app);
            self.passive_open(seg, key, h, tx);
            self.release_ids(&key);
            return;
        }
        // Retransmitted SYN in SYN-RECEIVED: resend the SYN-ACK.
        if state == State::SynReceived
            && flags & (SYN | ACK | RST) == SYN
            && seg.seq.wrapping_add(1) == t.rcv_nxt
        {
            if self.traced(i) {
                self.trace_syn_ack_again(i);
            }
            // A retransmission: the ACK that completes the handshake may answer either
            // copy, so it gives no RTT sample (Karn, RFC 6298 §3).
            self.flows[i as usize].flags &= !F_TIMING;
            self.send_syn(i, tx);
            return;
        }
        // Simultaneous open (RFC 9293 §3.5 figure 7, line 6): the peer's SYN,ACK for our
        // SYN, its SYN already here. That SYN is a duplicate and the ACK completes the
        // handshake, as Linux takes it (the sequence check alone drops the segment with an
        // ACK, and this end waits in SYN-RECEIVED for its SYN-ACK's timeout).
        if state == State::SynReceived
            && flags & (SYN | ACK | RST) == SYN | ACK
            && seg.seq.wrapping_add(1) == t.rcv_nxt
            && seg.ack == t.snd_una.wrapping_add(1)
        {
            // (a SYN's window is never scaled, RFC 7323 §2.2; the ACK path scales what
            // it reads: the window goes in divided, the low bits lost, never above it)
            let rest = Segment {
                seq: seg.seq.wrapping_add(1),
                flags: flags & !SYN,
                wnd: seg.wnd >> t.snd_wscale(),
                ..*seg
            };
            return self.segment(i, &rest, h, app, tx);
        }

        // RFC 7323 §5.3 R1: PAWS. The TS.Recent update (R3) waits until the segment has
        // passed the sequence check (R2) and the RST and SYN checks: a segment with a
        // wrong sequence number must not move it (retransmissions of received data are
        // the one exception, in the sequence check).
        let opts = if t.flags & (F_TS | F_SACK) != 0 && !seg.opts.is_empty() {
            pkt::parse_opts(seg.opts)
        } else {
            pkt::TcpOpts::default()
        };
        let mut new_ts_recent = None;
        if t.has(F_TS) {
            if let Some((tsval, _)) = opts.ts {
                let now_ms = (now / 1_000_000) as u32;
                let idle_24d = now_ms.wrapping_sub(t.ts_recent_age) > 24 * 86_400_000;
                if flags & RST == 0 && seq::lt(tsval, t.ts_recent) && !idle_24d {
                    self.counters.tcps_pawsdrop += 1;
                    self.counters.tcps_rcvduppack += 1;
                    self.ack_invalid(i, seg, tx);
                    return;
                }
                if seq::ge(tsval, t.ts_recent) || idle_24d {
                    new_ts_recent = Some((tsval, now_ms));
                }
            }
        }
        let rcv_wnd = self.fo(i).rcv_wnd;
        let t = &mut self.flows[i as usize];

        // 1. Sequence number check.
        let seg_len = seg.seg_len();
        let acceptable = if seg_len == 0 {
            seq::in_window(seg.seq, t.rcv_nxt, rcv_wnd.max(1))
        } else {
            seq::in_window(seg.seq, t.rcv_nxt, rcv_wnd)
                || seq::in_window(seg.seq.wrapping_add(seg_len - 1), t.rcv_nxt, rcv_wnd)
        };
        if !acceptable {
            if flags & RST == 0 {
                if seq::le(seg.seq.wrapping_add(seg_len), t.rcv_nxt) && seg_len > 0 {
                    self.counters.tcps_rcvduppack += 1;
                    self.counters.tcps_rcvdupbyte += seg.payload.len() as u64;
                } else if seg_len > 0 {
                    self.counters.tcps_rcvpackafterwin += 1;
                }
                if state == State::TimeWait && flags & FIN != 0 {
                    // Retransmitted FIN: restart the 2*MSL timer (RFC 9293 §3.10.7.4, eighth).
                    t.rexmt_at = now + self.cfg.time_wait_ns;
                }
                // A retransmission of data we already have (its ACK was lost), starting
                // within one window below RCV.NXT, still records its TSval: otherwise we
                // would echo the original's timestamp and the peer's RTT samples (RFC 7323
                // §4.1) would grow with every lost ACK, up to the maximum RTO (the W1 runs
                // at 20 % loss showed it). Segments further off, with a sequence number no
                // retransmission can have, leave TS.Recent alone.
                if let Some((tsval, now_ms)) = new_ts_recent {
                    let below = t.rcv_nxt.wrapping_sub(seg.seq);
                    if seg_len > 0 && below <= rcv_wnd {
                        t.ts_recent = tsval;
                        t.ts_recent_age = now_ms;
                    }
                }
                self.ack_invalid(i, seg, tx);
            }
            return;
        }

        // 2. RST (RFC 5961 §3.2: exact match resets, otherwise challenge ACK).
        if flags & RST != 0 {
            if state == State::TimeWait {
                // RFC 1337 (TIME-WAIT assassination, hazard H1): a RST does not end
                // TIME_WAIT early; it is ignored and the 2*MSL period runs out. This is
                // RFC 1337's recommendation (Linux accepts such RSTs by default,
                // net.ipv4.tcp_rfc1337 = 0); TIME_WAIT here is already short and a new SYN
                // may recycle the 4-tuple, so nothing is lost by waiting.
                return;
            }
            if seg.seq == t.rcv_nxt {
                self.counters.tcps_rcvrst += 1;
                if self.traced(i) {
                    self.trace_ev(i, crate::trace::TraceKind::RstReceived);
                }
                let reason = match state {
                    State::SynReceived => {
                        self.counters.tcps_conndrops += 1;
                        CloseReason::Refused
                    }
                    State::Closing | State::LastAck => CloseReason::Normal,
                    _ => {
                        self.counters.tcps_drops += 1;
                        CloseReason::Reset
                    }
                };
                self.close_flow(i, reason, app);
            } else {
                self.challenge_ack(i, tx);
            }
            return;
        }

        // 4. SYN in a synchronized state (RFC 5961 §4): challenge ACK.
        if flags & SYN != 0 {
            self.challenge_ack(i, tx);
            return;
        }
        if keepalive && seg.seq != self.flows[i as usize].rcv_nxt {
            self.keepalive_heard(i, seg);
        }

        // RFC 7323 §5.3 R3: the segment is acceptable; record its TSval if it covers
        // Last.ACK.sent (RCV.NXT less what arrived since our last ACK).
        let t = &mut self.flows[i as usize];
        if let Some((tsval, now_ms)) = new_ts_recent {
            if seq::le(seg.seq, t.rcv_nxt.wrapping_sub(t.rcv_unacked)) {
                t.ts_recent = tsval;
                t.ts_recent_age = now_ms;
            }
        }

        // 5. ACK field.
        if flags & ACK == 0 {
            return;
        }
        if state == State::SynReceived {
            if seq::le(seg.ack, t.snd_una) || seq::gt(seg.ack, t.snd_max) {
                let (key, o) = (t.key, t.opt);
                self.send_rst_reply(seg, &key, o, tx);
                return;
            }
            // SYN acked: ESTABLISHED, or FIN-WAIT-1 if the app closed meanwhile (RFC 9293
            // §3.10.4: the FIN queued in SYN-RECEIVED goes now).
            t.state = if t.has(F_FIN_QUEUED) {
                State::FinWait1
            } else {
                State::Established
            };
            if t.has(F_HALF_OPEN) {
                t.flags &= !F_HALF_OPEN;
                self.half_open -= 1;
            }
            let mut sampled = 0;
            if t.has(F_TIMING) && t.backoff == 0 {
                let r = ((now / 1000) as u32).wrapping_sub(t.rtt_ts);
                sampled = r.max(1);
                t.rtt.sample(r, &self.cfg.rto);
                self.counters.tcps_rttupdated += 1;
            } else if t.backoff > 0 {
                t.rtt.syn_retransmitted(&self.cfg.rto);
            }
            t.flags &= !F_TIMING;
            t.backoff = 0;
            t.retries = 0;
            t.snd_una = t.snd_una.wrapping_add(1);
            t.rexmt_at = 0;
            t.set_snd_wnd((seg.wnd as u32) << t.snd_wscale());
            t.snd_wl1 = seg.seq;
            t.snd_wl2 = seg.ack;
            if t.has(F_PASSIVE) {
                self.counters.tcps_accepts += 1;
            }
            self.counters.tcps_connects += 1;
            self.set_idle_timer(i);
            if self.traced(i) {
                self.trace_opened(i, sampled);
            }
            self.set_ctl_connected(i);
            app.on_connected(&mut self.ctl, FlowId(i));
            self.clear_ctl6();
            if self.apply_ops(i, app, tx) {
                return;
            }
        }
        if self.process_ack(i, seg, &opts, app, tx) {
            return;
        }

        // 6. The urgent pointer.
        if flags & URG != 0 {
            self.urgent_pointer(i, seg.seq.wrapping_add(u32::from(seg.up)), app);
        }

        // 7. Segment text.
        let t = &mut self.flows[i as usize];
        let mut payload = seg.payload;
        let mut sseq = seg.seq;
        let data_state = matches!(
            t.state,
            State::Established | State::FinWait1 | State::FinWait2
        );
        if !payload.is_empty() && data_state {
            if t.state == State::FinWait2 {
                // The FIN_WAIT_2 timeout bounds the peer's silence, not the half-close:
                // data restarts it (the wheel finds the later deadline at expiry).
                t.rexmt_at = now + self.cfg.fin_wait2_ns;
            }
            if seq::lt(sseq, t.rcv_nxt) {
                let cut = t.rcv_nxt.wrapping_sub(sseq) as usize;
                self.counters.tcps_rcvpartduppack += 1;
                payload = payload.get(cut..).unwrap_or(&[]);
                sseq = t.rcv_nxt;
            }
            let room = (t.rcv_nxt.wrapping_add(rcv_wnd)).wrapping_sub(sseq) as usize;
            if payload.len() > room {
                payload = &payload[..room];
            }
            if payload.is_empty() {
                // nothing new
            } else if sseq == t.rcv_nxt {
                if self.deliver_in_order(i, payload, flags & PSH != 0, app, tx) {
                    return;
                }
            } else {
                // Out of order: queue and send an immediate duplicate ACK (RFC 5681 §4.2).
                self.counters.tcps_rcvoopack += 1;
                self.counters.tcps_rcvoobyte += payload.len() as u64;
                // Without a queue (the host's budget is spent) the segment is only ACKed.
                if self.ooo_queue(i) {
                    let t = &mut self.flows[i as usize];
                    // A flow's queue index always holds a queue; None is unreachable.
                    let empty = match self.ooo[t.ooo as usize].as_mut() {
                        Some(q) => {
                            match q.insert(t.rcv_nxt, sseq, payload) {
                                OooInsert::Full => self.counters.tcps_rcvoopackdrop += 1,
                                OooInsert::Duplicate => self.counters.tcps_rcvduppack += 1,
                                OooInsert::Stored => {}
                            }
                            q.is_empty() && q.fin.is_none()
                        }
                        None => true,
                    };
                    if empty {
                        let o = t.ooo;
                        t.ooo = NO_SIDE;
                        self.release_ooo(o);
                    }
                }
                self.flows[i as usize].flags |= F_ACKNOW;
            }
        }

        // 8. FIN (in sequence, or an earlier out-of-order FIN now reached). A FIN beyond
        // RCV.NXT (alone or after out-of-order data) is remembered in the out-of-order
        // queue, to take effect when the gap fills, and ACKed at once (RFC 5681 §4.2).
        let t = &mut self.flows[i as usize];
        let fin_end = seg.seq.wrapping_add(seg.payload.len() as u32);
        if flags & FIN != 0 && seq::gt(fin_end, t.rcv_nxt) && data_state {
            t.flags |= F_ACKNOW;
            if self.ooo_queue(i) {
                let t = &self.flows[i as usize];
                if let Some(q) = self.ooo[t.ooo as usize].as_mut() {
                    q.fin = Some(fin_end);
                }
            }
        }
        let t = &mut self.flows[i as usize];
        let fin_now = (flags & FIN != 0 && fin_end == t.rcv_nxt) || t.has(F_FIN_READY);
        t.flags &= !F_FIN_READY;
        if fin_now {
            match t.state {
                State::Established | State::FinWait1 | State::FinWait2 => {
                    t.rcv_nxt = t.rcv_nxt.wrapping_add(1);
                    t.flags |= F_ACKNOW;
                    match t.state {
                        State::Established => {
                            t.state = State::CloseWait;
                            if self.traced(i) {
                                self.trace_sync(i);
                            }
                            self.set_ctl(i);
                            app.on_peer_closed(&mut self.ctl, FlowId(i));
                            if self.apply_ops(i, app, tx) {
                                return;
                            }
                        }
                        State::FinWait1 => t.state = State::Closing,
                        _ => {
                            self.output(i, tx);
                            self.enter_time_wait(i, app);
                            return;
                        }
                    }
                }
                _ => {
                    // FIN retransmission in CLOSE_WAIT/CLOSING/LAST_ACK: just ACK.
                    t.flags |= F_ACKNOW;
                }
            }
        }
        self.output_acked(i, tx);
    }

    /// Delivers in-order bytes (and then any out-of-order bytes they unblock); `push`: the
    /// segment carried PSH. Returns true if the flow is gone.
    pub(super) fn deliver_in_order<A: TcpApp, S: TxSink>(
        &mut self,
        i: u32,
        payload: &[u8],
        push: bool,
        app: &mut A,
        tx: &mut S,
    ) -> Gone {
        let now = self.now;
        let t = &mut self.flows[i as usize];
        let len = payload.len() as u32;
        t.rcv_nxt = t.rcv_nxt.wrapping_add(len);
        t.rcv_unacked += len;
        if !self.urgent.is_empty() {
            self.urgent_delivered(i);
        }
        self.counters.tcps_rcvpack += 1;
        self.counters.tcps_rcvbyte += len as u64;
        let mut filled_gap = false;
        self.set_ctl(i);
        app.on_data(&mut self.ctl, FlowId(i), payload);
        if self.apply_ops(i, app, tx) {
            return true;
        }
        // Pull newly contiguous out-of-order data.
        loop {
            let t = &mut self.flows[i as usize];
            if t.ooo == NO_SIDE {
                break;
            }
            let o = t.ooo as usize;
            let Some(q) = self.ooo[o].as_mut() else { break };
            let Some((start, l)) = q.pop_ready(t.rcv_nxt) else {
                // Empty: given back, unless it holds a FIN beyond RCV.NXT.
                if q.is_empty() && !q.fin.is_some_and(|f| seq::gt(f, t.rcv_nxt)) {
                    if q.fin == Some(t.rcv_nxt) {
                        t.flags |= F_FIN_READY;
                    }
                    t.ooo = NO_SIDE;
                    self.release_ooo(o as u32);
                }
                break;
            };
            filled_gap = true;
            t.rcv_nxt = t.rcv_nxt.wrapping_add(l);
            t.rcv_unacked += l;
            self.counters.tcps_rcvbyte += l as u64;
            let (a, b) = q.slices(start, l);
            self.ctl.flow = FlowId(i);
            app.on_data(&mut self.ctl, FlowId(i), a);
            // The queue wrapped: its second slice, unless the app reset the flow on the
            // first (nothing more is delivered to a flow being aborted).
            if !b.is_empty() && !self.ctl.aborting() {
                app.on_data(&mut self.ctl, FlowId(i), b);
            }
            if self.apply_ops(i, app, tx) {
                return true;
            }
        }
        // Delayed ACK (RFC 9293 §3.8.6.3, RFC 5681 §4.2): ACK at least every second full
        // segment (or every `ack_bytes` bytes where the flow's options say so),
        // immediately when a gap was filled, otherwise within the delack timeout.
        // A segment with PSH ends what the peer had to send: it may wait for this ACK
        // (Nagle holds its next short segment, a blocking send its next step), so the ACK
        // goes at once, on the application's answer if the output sends one.
        let fo = self.fo(i);
        let (delack, burst_ack, ack_bytes) = (fo.delack_ns, fo.burst_ack, fo.ack_bytes);
        let t = &self.flows[i as usize];
        let every = t.ack_every(ack_bytes);
        let at_once = filled_gap || t.ooo != NO_SIDE || delack == 0;
        let due = t.rcv_unacked >= every || push;
        // Due, and no data of ours to carry it (everything sent): in a receive burst the
        // ACK goes at the burst's end, one for all the in-order segments the burst brought
        // (`flush_deferred`), as Linux ACKs a GRO super-packet once. A PSH makes it due as
        // two full segments do. A flow that counts its ACKs in bytes (`ack_bytes`) sends
        // each as it falls due, as TRex does.
        let wait =
            !at_once && due && burst_ack && ack_bytes == 0 && self.in_burst && self.all_out(i);
        if wait {
            let t = &mut self.flows[i as usize];
            t.rcv_unacked = t.rcv_unacked.max(every);
            self.defer_output(i);
        } else {
            let t = &mut self.flows[i as usize];
            if at_once || due {
                t.flags |= F_ACKNOW;
            } else if t.delack_at == 0 {
                t.delack_at = now + delack;
            }
        }
        false
    }

    /// In-order bytes were delivered on flow `i`: a recorded urgent pointer they
    /// reached is passed and its entry goes.
    #[cold]
    #[inline(never)]
    fn urgent_delivered(&mut self, i: u32) {
        // (before 2^31 more bytes would make the sequence comparison see it ahead again)
        let nxt = self.flows[i as usize].rcv_nxt;
        if self.urgent.get(&i).is_some_and(|&p| !seq::gt(p, nxt)) {
            self.urgent.remove(&i);
        }
    }

    /// A segment with URG pointing at `up` (the byte after the urgent data, RFC 6093;
    /// RFC 9293 §3.10.7.4 sixth: in ESTABLISHED and FIN-WAIT states, RCV.UP <-
    /// max(RCV.UP, SEG.UP)): the app is told when urgent data becomes pending (none was,
    /// RCV.UP at or before RCV.NXT) or the pointer moves further (MUST-31), with the bytes
    /// still to come up to the last urgent one (MUST-32). A pointer to bytes already
    /// delivered is old news (a retransmission, or a segment all urgent data of which came
    /// before).
    #[cold]
    #[inline(never)]
    fn urgent_pointer<A: TcpApp>(&mut self, i: u32, up: u32, app: &mut A) {
        let t = &self.flows[i as usize];
        if !matches!(
            t.state,
            State::Established | State::FinWait1 | State::FinWait2
        ) || !seq::gt(up, t.rcv_nxt)
        {
            return;
        }
        let pending = self.urgent.get(&i).filter(|&&p| seq::gt(p, t.rcv_nxt));
        if pending.is_some_and(|&p| !seq::gt(up, p)) {
            return;
        }
        let left = up.wrapping_sub(t.rcv_nxt);
        self.urgent.insert(i, up);
        self.counters.tcps_rcvurg += 1;
        app.on_urgent(FlowId(i), left);
    }

    /// Challenge ACK (RFC 5961 §3.2, §4.2, §5.2), rate limited per flow
    /// (`TcpConfig::invalid_ratelimit_ns`) and per host (§7) with a per-second budget
    /// drawn at random in `[half, limit + half)`, `half = ceil(limit / 2)`, as Linux does
    /// since CVE-2016-5696 (a fixed budget is a side channel: an off-path attacker counts
    /// the challenge ACKs it provokes to learn whether its guesses hit a flow).
    pub(super) fn challenge_ack<S: TxSink>(&mut self, i: u32, tx: &mut S) {
        if self.invalid_limited(i) {
            return;
        }
        let sec = self.now / 1_000_000_000;
        if sec != self.challenge_sec {
            self.challenge_sec = sec;
            let limit = self.cfg.challenge_ack_limit;
            let half = limit.div_ceil(2);
            self.challenge_left = if limit == 0 {
                0
            } else {
                half + (self.next_random() % limit as u64) as u32
            };
        }
        if self.challenge_left == 0 {
            self.counters.tcps_challengeack_limited += 1;
            return;
        }
        self.challenge_left -= 1;
        self.counters.tcps_challengeack += 1;
        self.flows[i as usize].flags |= F_ACKNOW;
        self.output(i, tx);
    }

    /// The next number of the host's keyed generator (SplitMix64).
    fn next_random(&mut self) -> u64 {
        rand_core::Rng::next_u64(&mut self.rng)
    }

    /// True (counted) when flow `i` answered an invalid segment less than
    /// `invalid_ratelimit_ns` ago; otherwise records now as its last answer.
    fn invalid_limited(&mut self, i: u32) -> bool {
        let period = self.cfg.invalid_ratelimit_ns;
        if period == 0 {
            return false;
        }
        // Odd, so never 0 (= no answer yet).
        let now_ms = (self.now / 1_000_000) as u16 | 1;
        let t = &mut self.flows[i as usize];
        if t.oow_ms != 0 && (now_ms.wrapping_sub(t.oow_ms) as u64) * 1_000_000 < period {
            self.counters.tcps_invalidack_limited += 1;
            return true;
        }
        t.oow_ms = now_ms;
        false
    }

    /// ACK answering an invalid segment (out of window, PAWS drop, ACK of unsent data):
    /// sent unless the segment is a pure ACK (no data, no FIN) within the flow's rate
    /// limit (Linux's `tcp_oow_rate_limited`: such ACKs can feed ACK loops and floods,
    /// while data may be a genuine retransmission waiting for our ACK).
    pub(super) fn ack_invalid<S: TxSink>(&mut self, i: u32, seg: &Segment, tx: &mut S) {
        let data = (!seg.payload.is_empty() || seg.flags & FIN != 0) && seg.flags & SYN == 0;
        if !data && self.invalid_limited(i) {
            return;
        }
        self.flows[i as usize].flags |= F_ACKNOW;
        self.output(i, tx);
    }

    /// Makes sure flow `i` has an out-of-order queue; false when the host's budget is
    /// spent (counted by `get_ooo`).
    fn ooo_queue(&mut self, i: u32) -> bool {
        if self.flows[i as usize].ooo != NO_SIDE {
            return true;
        }
        match self.get_ooo() {
            Some(o) => {
                self.flows[i as usize].ooo = o;
                true
            }
            None => false,
        }
    }

    pub(super) fn enter_time_wait<A: TcpApp>(&mut self, i: u32, app: &mut A) {
        let now = self.now;
        let tw = self.cfg.time_wait_ns;
        let t = &mut self.flows[i as usize];
        t.state = State::TimeWait;
        let mut sq = t.sq;
        let o = t.ooo;
        let sb = t.sb;
        t.sq = SendQueue::default();
        t.ooo = NO_SIDE;
        t.sb = NO_SIDE;
        t.delack_at = 0;
        t.rexmt_at = now + tw;
        let report = !t.has(F_REPORTED);
        t.flags |= F_REPORTED;
        self.chunks.clear(&mut sq, &mut self.bufs);
        self.release_ooo(o);
        self.release_sb(sb);
        self.schedule(i);
        if self.traced(i) {
            self.trace_sync(i);
        }
        if report {
            app.on_closed(FlowId(i), CloseReason::Normal);
        }
    }
}
