//! Output: segment options, advertised window, frame writing (`write_seg`), SYN / RST
//! sends, `output` (BSD `tcp_output`), SACK recovery output and single retransmissions.

use super::*;

/// Longest run of new data written in one pass of `output_rounds` where the sink takes no
/// super-frames (as a super-frame's: 64 KiB less the largest headers).
const RUN_MAX: usize = 65_535;

impl TcpHost {
    /// Our timestamp clock: milliseconds (RFC 7323 §5.4 allows 1 ms - 1 s per tick).
    #[inline]
    pub(super) fn ts_now(&self) -> u32 {
        (self.now / 1_000_000) as u32 | 1
    }

    /// Timestamp option block (NOP, NOP, TS) for flow `i`.
    #[inline]
    pub(super) fn ts_opts(&self, i: u32) -> [u8; 12] {
        self.ts_opts_of(&self.flows[i as usize])
    }

    /// [`ts_opts`](Self::ts_opts) of the TCB `t`.
    #[inline(always)]
    fn ts_opts_of(&self, t: &Tcb) -> [u8; 12] {
        let mut o = [1, 1, 8, 10, 0, 0, 0, 0, 0, 0, 0, 0];
        o[4..8].copy_from_slice(&self.ts_now().to_be_bytes());
        o[8..12].copy_from_slice(&t.ts_recent.to_be_bytes());
        o
    }

    /// Options for a non-SYN segment of flow `i`: timestamps (RFC 7323) and, while we hold
    /// out-of-order data, SACK blocks (RFC 2018 §4). Returns the length used in `buf`.
    #[inline(always)]
    pub(super) fn seg_opts(&self, i: u32, buf: &mut [u8; 40]) -> usize {
        let t = &self.flows[i as usize];
        match t.flags & (F_TS | F_SACK) {
            0 => 0,
            // Timestamps without SACK: NOP, NOP, TS, written in place.
            F_TS => {
                buf[..12].copy_from_slice(&self.ts_opts_of(t));
                12
            }
            _ => self.seg_opts_negotiated(i, buf),
        }
    }

    /// [`seg_opts`](Self::seg_opts) of a flow that negotiated SACK (with or without
    /// timestamps). The usual segment of such a flow with timestamps (no out-of-order
    /// data, so no SACK blocks to send) is written here, a leaf call without a stack
    /// frame; SACK blocks in [`seg_opts_sack`](Self::seg_opts_sack). (Inlined into the
    /// output loop, this path cost flows without options more than it saved.)
    #[inline(never)]
    fn seg_opts_negotiated(&self, i: u32, buf: &mut [u8; 40]) -> usize {
        let t = &self.flows[i as usize];
        if t.has(F_TS) && t.ooo == NO_SIDE {
            buf[..12].copy_from_slice(&self.ts_opts_of(t));
            return 12;
        }
        self.seg_opts_sack(i, buf)
    }

    /// [`seg_opts`](Self::seg_opts) with SACK negotiated and out-of-order data held (or
    /// SACK without timestamps).
    #[inline(never)]
    fn seg_opts_sack(&self, i: u32, buf: &mut [u8; 40]) -> usize {
        let t = &self.flows[i as usize];
        let mut n = 0;
        if t.has(F_TS) {
            buf[..12].copy_from_slice(&self.ts_opts(i));
            n = 12;
        }
        if t.has(F_SACK) && t.ooo != NO_SIDE {
            if let Some(q) = self.ooo[t.ooo as usize].as_ref() {
                let mut blocks = [(0u32, 0u32); 4];
                let max = if n == 0 { 4 } else { 3 };
                let k = q.sack_blocks(&mut blocks, max);
                if k > 0 {
                    buf[n..n + 4].copy_from_slice(&[1, 1, 5, 2 + 8 * k as u8]);
                    n += 4;
                    for &(a, b) in &blocks[..k] {
                        buf[n..n + 4].copy_from_slice(&a.to_be_bytes());
                        buf[n + 4..n + 8].copy_from_slice(&b.to_be_bytes());
                        n += 8;
                    }
                }
            }
        }
        n
    }

    /// Bytes of data a segment of flow `i` may carry: the send MSS (which already leaves
    /// room for the timestamp option) less the SACK option the segment will carry while we
    /// hold out-of-order data (RFC 9293 §3.7.1, RFC 6691: the MSS counts data only, so
    /// every segment fits the MSS + 40 bytes, the peer's and our MTU).
    #[inline(always)]
    pub(super) fn seg_room(&self, i: u32) -> u32 {
        let t = &self.flows[i as usize];
        if t.ooo == NO_SIDE || !t.has(F_SACK) {
            return t.mss as u32;
        }
        self.seg_room_sack(i)
    }

    #[inline(never)]
    fn seg_room_sack(&self, i: u32) -> u32 {
        let t = &self.flows[i as usize];
        let max = if t.has(F_TS) { 3 } else { 4 };
        let k = self.ooo[t.ooo as usize]
            .as_ref()
            .map_or(0, |q| q.ranges().len().min(max) as u32);
        let opt = if k > 0 { 4 + 8 * k } else { 0 };
        (t.mss as u32).saturating_sub(opt).max(1)
    }

    #[inline]
    pub(super) fn adv_wnd(&self, i: u32) -> u16 {
        let t = &self.flows[i as usize];
        let rcv_wnd = self.opts[t.opt as usize].rcv_wnd;
        let w = if t.has(F_WSCALE) {
            rcv_wnd >> t.rcv_wscale()
        } else {
            rcv_wnd
        };
        w.min(65_535) as u16
    }

    /// Writes one segment into a frame from `tx`. Payload, if any, is copied once from the
    /// flow's referenced buffers into the frame. Returns false if no buffer was available.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub(super) fn write_seg<S: TxSink>(
        &mut self,
        tx: &mut S,
        key: &FlowKey,
        opt: u8,
        seq: u32,
        ack: u32,
        flags: u8,
        wnd: u16,
        opts: &[u8],
        data: Option<(SendQueue, u32, u32)>,
    ) -> bool {
        self.write_seg_as::<false, S>(tx, key, opt, seq, ack, flags, wnd, opts, data, 0)
    }

    /// [`write_seg`](Self::write_seg) of a super-frame: the payload (more than one
    /// segment) goes out as one frame the sink's port cuts into `tso`-byte segments, its
    /// TCP checksum left to the port.
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    pub(super) fn write_seg_tso<S: TxSink>(
        &mut self,
        tx: &mut S,
        key: &FlowKey,
        opt: u8,
        seq: u32,
        ack: u32,
        flags: u8,
        wnd: u16,
        opts: &[u8],
        data: Option<(SendQueue, u32, u32)>,
        tso: u16,
    ) -> bool {
        self.write_seg_as::<true, S>(tx, key, opt, seq, ack, flags, wnd, opts, data, tso)
    }

    /// The family dispatch of [`write_seg`](Self::write_seg) (one test per segment; each
    /// family's writer, plain or super-frame, is compiled on its own).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn write_seg_as<const TSO: bool, S: TxSink>(
        &mut self,
        tx: &mut S,
        key: &FlowKey,
        opt: u8,
        seq: u32,
        ack: u32,
        flags: u8,
        wnd: u16,
        opts: &[u8],
        data: Option<(SendQueue, u32, u32)>,
        tso: u16,
    ) -> bool {
        if key.is_ipv6() {
            self.write_seg_family::<true, TSO, S>(
                tx, key, opt, seq, ack, flags, wnd, opts, data, tso,
            )
        } else {
            self.write_seg_family::<false, TSO, S>(
                tx, key, opt, seq, ack, flags, wnd, opts, data, tso,
            )
        }
    }

    /// [`write_seg`](Self::write_seg) for IPv6 (`V6`) or IPv4 flows.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn write_seg_family<const V6: bool, const TSO: bool, S: TxSink>(
        &mut self,
        tx: &mut S,
        key: &FlowKey,
        opt: u8,
        seq: u32,
        ack: u32,
        flags: u8,
        wnd: u16,
        opts: &[u8],
        data: Option<(SendQueue, u32, u32)>,
        tso: u16,
    ) -> bool {
        let plen = data.map_or(0, |d| d.2 as usize);
        let flen = if V6 { HDRS6_LEN } else { HDRS_LEN } + opts.len() + plen;
        self.ip_id = self.ip_id.wrapping_add(1);
        let fo = &self.opts[opt as usize];
        let h = TxHdr {
            ttl: fo.ttl,
            tos: fo.tos,
            src_mac: self.cfg.mac,
            dst_mac: self.cfg.gateway_mac,
            src_ip: key.local_ip,
            dst_ip: key.remote_ip,
            ip_id: self.ip_id,
            src_port: key.local_port,
            dst_port: key.remote_port,
            seq,
            ack,
            flags,
            wnd,
        };
        let buf = if TSO {
            tx.alloc_tso(flen)
        } else {
            tx.alloc(flen)
        };
        let Some(buf) = buf else {
            self.counters.tcps_txfull += 1;
            return false;
        };
        if buf.len() < flen {
            self.counters.tcps_txfull += 1;
            return false;
        }
        let (off, hdr_sum) = if V6 {
            let (s, d) = (
                self.addr6.addr(key.local_ip),
                self.addr6.addr(key.remote_ip),
            );
            pkt::write_headers6_sum(buf, &h, s, d, opts, plen)
        } else {
            pkt::write_headers_sum(buf, &h, opts, plen)
        };
        // The TCP checksum in software, or (a port completing it; every super-frame)
        // the pseudo-header sum only.
        let sw_sum = !TSO && self.cfg.tx_checksum;
        let mut psum = 0u64;
        if let Some((sq, qoff, len)) = data {
            let dst = &mut buf[off..off + len as usize];
            if sw_sum {
                psum = self.chunks.copy_out_sum(&sq, qoff, dst, &mut self.bufs).1;
            } else {
                self.chunks.copy_out(&sq, qoff, dst, &self.bufs);
            }
        }
        match (sw_sum, V6) {
            (true, false) => pkt::store_tcp_checksum(buf, hdr_sum, psum),
            (false, false) => pkt::partial_tcp_checksum(buf, key.local_ip, key.remote_ip, flen),
            (true, true) => pkt::store_tcp6_checksum(buf, hdr_sum, psum),
            (false, true) => {
                let (s, d) = (
                    self.addr6.addr(key.local_ip),
                    self.addr6.addr(key.remote_ip),
                );
                pkt::partial_tcp6_checksum(buf, s, d, flen)
            }
        }
        if TSO {
            tx.commit_tso(flen, if V6 { 40 } else { 20 }, tso);
            self.counters.tcps_sndtotal += plen.div_ceil(usize::from(tso)) as u64;
        } else {
            tx.commit(flen);
            self.counters.tcps_sndtotal += 1;
        }
        true
    }

    pub(super) fn send_syn<S: TxSink>(&mut self, i: u32, tx: &mut S) {
        let tso = self.ts_opts(i);
        let t = &self.flows[i as usize];
        let fo = self.opts[t.opt as usize];
        let passive = t.state == State::SynReceived;
        let mss = self.fo_mss(t.opt, &t.key);
        let mut opts = [0u8; 24];
        opts[..4].copy_from_slice(&[2, 4, (mss >> 8) as u8, mss as u8]);
        let mut olen = 4;
        // Window scale: offered on SYN; on SYN-ACK only if the peer offered it (RFC 7323 §2.2).
        let ws = if passive {
            t.has(F_WSCALE)
        } else {
            fo.wscale.is_some()
        };
        if ws {
            opts[4..8].copy_from_slice(&[1, 3, 3, fo.wscale.unwrap_or(0).min(14)]);
            olen = 8;
        }
        // Timestamps: offered on SYN; on SYN-ACK only if the peer offered them (RFC 7323 §3.2).
        let ts = if passive { t.has(F_TS) } else { fo.timestamps };
        if ts {
            opts[olen..olen + 12].copy_from_slice(&tso);
            olen += 12;
        }
        // SACK permitted (RFC 2018 §2): on SYN if configured, on SYN-ACK if negotiated.
        let sack = if passive { t.has(F_SACK) } else { fo.sack };
        if sack && olen + 4 <= opts.len() {
            opts[olen..olen + 4].copy_from_slice(&[1, 1, 4, 2]);
            olen += 4;
        }
        let flags = if passive { SYN | ACK } else { SYN };
        let (key, seq, ack, o) = (t.key, t.snd_una, t.rcv_nxt, t.opt);
        // The window in a SYN segment is never scaled (RFC 7323 §2.2).
        let wnd = fo.rcv_wnd.min(65_535) as u16;
        self.counters.tcps_sndctrl += 1;
        let sent = self.write_seg(
            tx,
            &key,
            o,
            seq,
            if passive { ack } else { 0 },
            flags,
            wnd,
            &opts[..olen],
            None,
        );
        if !sent {
            // Resent by `resume_blocked` when the sink has room (the RTO stays armed).
            self.counters.tcps_sndctrl -= 1;
            self.mark_tx_blocked(i);
        }
        let t = &mut self.flows[i as usize];
        t.snd_nxt = t.snd_una.wrapping_add(1);
        t.snd_max = seq::max(t.snd_max, t.snd_nxt);
    }

    pub(super) fn send_rst_for<S: TxSink>(&mut self, i: u32, tx: &mut S) {
        let t = &self.flows[i as usize];
        if matches!(t.state, State::SynSent | State::TimeWait | State::Closed) {
            return;
        }
        // RFC 9293 §3.10.5: <SEQ=SND.NXT>, the RFC's SND.NXT being our SND.MAX (ours
        // rolls back on a timeout): a RST below what the peer has received would be
        // dropped by an RFC 5961 peer, leaving its end open.
        let (key, seq, ack, o) = (t.key, t.snd_max, t.rcv_nxt, t.opt);
        if self.traced(i) {
            self.trace_ev(i, crate::trace::TraceKind::RstSent);
        }
        self.counters.tcps_sndrst += 1;
        self.counters.tcps_sndctrl += 1;
        self.write_seg(tx, &key, o, seq, ack, RST | ACK, 0, &[], None);
    }

    /// Sends whatever the windows allow plus a pending ACK (BSD `tcp_output`).
    pub(super) fn output<S: TxSink>(&mut self, i: u32, tx: &mut S) {
        if !self.tx_blocked.is_empty() {
            // Flows are still waiting for the sink after the resume pass that ran when
            // this receive (or timer run) began: the sink is full, so join the queue
            // instead of building a segment that cannot be sent (its turn comes in order).
            self.mark_tx_blocked(i);
            self.schedule(i);
            return;
        }
        self.output_now(i, tx);
    }

    /// Output after an ACK that asks for nothing to be sent now (no ACK owed): inside a
    /// receive burst it waits for the burst's end, so that a flow the burst acknowledged
    /// several times sends what all its ACKs opened at once (one run of segments, one
    /// super-frame where the port cuts them) instead of a few segments per ACK.
    #[inline]
    pub(super) fn output_acked<S: TxSink>(&mut self, i: u32, tx: &mut S) {
        if self.in_burst && !self.flows[i as usize].has(F_ACKNOW) {
            self.defer_output(i);
            return;
        }
        self.output(i, tx);
    }

    /// Puts the flow's output off to the end of the receive burst (once on the list).
    #[inline]
    pub(super) fn defer_output(&mut self, i: u32) {
        let t = &mut self.flows[i as usize];
        if !t.has(F_OUT_DEFER) {
            t.flags |= F_OUT_DEFER;
            self.deferred.push(i);
        }
    }

    /// Runs the output that waited for the end of the receive burst.
    pub(super) fn flush_deferred<S: TxSink>(&mut self, tx: &mut S) {
        if self.deferred.is_empty() {
            return;
        }
        let mut list = std::mem::take(&mut self.deferred);
        for &i in &list {
            let ack_bytes = self.fo(i).ack_bytes;
            let t = &mut self.flows[i as usize];
            // A flow closed in the burst is skipped; a slot reused by a new flow in the
            // same burst does not carry the flag (a new TCB starts without it).
            if t.has(F_OUT_DEFER) {
                t.flags &= !F_OUT_DEFER;
                if t.state != State::Closed {
                    // An ACK the burst's in-order segments made due (`deliver_in_order`)
                    // and no segment of ours has carried since.
                    if t.rcv_unacked >= t.ack_every(ack_bytes) {
                        t.flags |= F_ACKNOW;
                    }
                    self.output(i, tx);
                }
            }
        }
        list.clear();
        self.deferred = list;
    }

    /// [`TcpHost::output`] without the queue check (the resume pass: the flow's turn).
    pub(super) fn output_now<S: TxSink>(&mut self, i: u32, tx: &mut S) {
        let now = self.now;
        // With everything out, the loop's first round would send at most a pure ACK:
        // that is sent (or nothing) without its window, MSS, Nagle and timer arithmetic.
        // A sender gets here for every ACK after its last byte went out (a W1 server ~7
        // times per connection), a receiver for every ACK it sends while it has nothing
        // to send (a W1 client ~12 times).
        if self.all_out(i) {
            if self.flows[i as usize].has(F_ACKNOW) {
                let seq = self.flows[i as usize].snd_max;
                let wnd_adv = self.adv_wnd(i);
                self.pure_ack(i, seq, wnd_adv, F_ONE_SEG | F_FORCE, tx);
            }
        } else {
            self.output_rounds(i, now, tx);
        }
        // Persist timer: data queued, window closed (or too small to use), nothing in
        // flight (the RTO is only computed then). With nothing in flight the timer can
        // only be the persist timer or the keep-alive's idle timer, which is later than
        // one RTO and is replaced (data queued into a window that closed while the flow
        // was idle would otherwise wait for the keep-alive).
        let t = &self.flows[i as usize];
        if (t.snd_wnd == 0 || t.window_too_small()) && t.snd_una == t.snd_max && t.sq.len > 0 {
            let rto = self.rto_ns(t);
            if t.rexmt_at == 0 || t.rexmt_at > now + rto {
                self.flows[i as usize].rexmt_at = now + rto;
            }
        }
        self.schedule(i);
    }

    /// The segments of [`output_now`](Self::output_now): data while the windows allow,
    /// a FIN after the last byte, a pure ACK if one is owed.
    #[inline(always)]
    fn output_rounds<S: TxSink>(&mut self, i: u32, now: u64, tx: &mut S) {
        loop {
            let wnd_adv = self.adv_wnd(i);
            let mss = self.seg_room(i);
            let t = &mut self.flows[i as usize];
            let can_data = sends_data(t.state);
            if !can_data {
                if t.has(F_ACKNOW) && t.state != State::Closed && t.state != State::SynSent {
                    let seq = t.snd_nxt;
                    self.pure_ack(i, seq, wnd_adv, 0, tx);
                }
                break;
            }
            let off = t.snd_nxt.wrapping_sub(t.snd_una);
            let qlen = t.sq.len;
            let avail = qlen.saturating_sub(off);
            let in_flight = off;
            let one_seg = t.has(F_ONE_SEG);
            let mut usable = if one_seg {
                mss
            } else {
                t.snd_wnd.min(t.cc.cwnd).saturating_sub(in_flight)
            };
            if t.has(F_FORCE) && usable == 0 && avail > 0 {
                usable = 1;
            }
            // New data of several full segments goes out as one run: one super-frame where
            // the sink's port cuts frames itself (TSO), else segment after segment from
            // one pass of this loop (`write_run`); never retransmissions, probes or the
            // one-segment sends of loss recovery.
            let tso_max = tx.tso_max();
            let run_max = if tso_max == 0 { RUN_MAX } else { tso_max };
            let run_room =
                if avail <= mss || one_seg || t.has(F_FORCE) || seq::lt(t.snd_nxt, t.snd_max) {
                    0
                } else {
                    // Room for the largest headers: Ethernet, IPv6, TCP with 40 bytes of options.
                    run_max.saturating_sub(14 + 40 + 60) as u32 / mss * mss
                };
            let mut len = avail.min(usable).min(mss.max(run_room));
            if len > mss && len < avail {
                // Whole segments, unless the super-frame ends the queue.
                len -= len % mss;
            }
            // Sender silly-window avoidance (RFC 9293 §3.8.6.2.1; BSD's tcp_output and
            // Linux apply it with or without Nagle): a segment cut short by the windows
            // waits while data is in flight (the next ACK opens them). Without it a
            // congestion window counted in bytes of the negotiated MSS sends a runt after
            // each flight of timestamped segments (10 x 1,460 = 10 x 1,448 + 120). With
            // nothing in flight, a peer window below a segment and below half its largest
            // waits for the persist timer (`Tcb::window_too_small`) — new data only: a
            // retransmission (SND.NXT rolled back below SND.MAX) goes at once, as BSD's
            // tcp_output sends it (nothing would arm the persist timer for it).
            if len < mss
                && len < avail.max(1)
                && (in_flight > 0
                    || (!t.has(F_FORCE) && !seq::lt(t.snd_nxt, t.snd_max) && t.window_too_small()))
            {
                len = 0;
            }
            // Nagle (RFC 9293 §3.7.4) in Minshall's variant, as Linux applies it
            // (tcp_nagle_test / tcp_nagle_check / tcp_minshall_check): the short last
            // segment of the queue waits only while an earlier short segment is
            // unacknowledged, and never when our FIN goes with it. (Holding it while any
            // data is in flight makes the short tail of every odd-sized burst wait for
            // the peer's delayed ACK.)
            if t.has(F_NAGLE)
                && len > 0
                && len < mss
                && len == avail
                && !t.has(F_FORCE)
                && !t.fin_pending()
                && t.short_unacked()
            {
                len = 0;
            }
            let mut send_fin =
                t.fin_pending() && t.snd_nxt.wrapping_add(len) == t.fin_seq() && (len == avail);
            if len == 0 && !send_fin {
                // A pure ACK carries SND.MAX, not SND.NXT (BSD `tcp_output`): after a
                // retransmission timeout SND.NXT is rolled back below what the peer may
                // have received, and an ACK with such a sequence number would be an
                // unacceptable old segment there, its acknowledgement ignored (RFC 9293
                // §3.10.7.4): two sides both retransmitting would never hear each other's
                // ACKs.
                if t.has(F_ACKNOW) {
                    let seq = t.snd_max;
                    self.pure_ack(i, seq, wnd_adv, F_ONE_SEG | F_FORCE, tx);
                }
                break;
            }
            let mut flags = ACK;
            if len > 0 && off + len == qlen {
                flags |= PSH;
            }
            if send_fin {
                flags |= FIN;
            }
            let key = t.key;
            let o = t.opt;
            let seqno = t.snd_nxt;
            let ack = t.rcv_nxt;
            let sq = t.sq;
            let rexmit = seq::lt(seqno, t.snd_max);
            // Not timed: retransmissions (Karn) and zero-window probes (the peer may hold
            // the answer until its window opens).
            if len > 0 && !rexmit && t.flags & (F_TIMING | F_FORCE) == 0 {
                t.flags |= F_TIMING;
                t.rtt_seq = seqno;
                t.rtt_ts = (now / 1000) as u32;
                self.counters.tcps_segstimed += 1;
            }
            let data = if len > 0 { Some((sq, off, len)) } else { None };
            let mut ob = [0u8; 40];
            let ol = self.seg_opts(i, &mut ob);
            let mut cut_short = false;
            let sent = if len > mss && tso_max > 0 {
                self.write_seg_tso(
                    tx,
                    &key,
                    o,
                    seqno,
                    ack,
                    flags,
                    wnd_adv,
                    &ob[..ol],
                    data,
                    mss as u16,
                )
            } else if len > mss {
                let n = self.write_run(
                    tx,
                    &key,
                    o,
                    (seqno, ack, flags, wnd_adv),
                    &ob[..ol],
                    (sq, off, len),
                    mss,
                );
                if n > 0 && n < len {
                    // The sink ran out of frames within the run: what went out is
                    // accounted as sent (its last segment without PSH or FIN), and the
                    // flow waits for frames.
                    len = n;
                    send_fin = false;
                    cut_short = true;
                }
                n > 0
            } else {
                self.write_seg(tx, &key, o, seqno, ack, flags, wnd_adv, &ob[..ol], data)
            };
            if !sent {
                self.mark_tx_blocked(i);
                break;
            }
            if len > 0 {
                if rexmit {
                    self.count_resent(i, seqno, len);
                } else {
                    // A forced one-byte segment is a window probe, counted by the persist
                    // timer (`tcps_sndprobe`), not as a data packet (BSD `tcp_output`);
                    // its byte is sent for the first time.
                    if len != 1 || !self.flows[i as usize].has(F_FORCE) {
                        self.counters.tcps_sndpack += if len > mss {
                            u64::from(len.div_ceil(mss))
                        } else {
                            1
                        };
                    }
                    self.counters.tcps_sndbyte += len as u64;
                }
            } else {
                // A FIN alone (a pure ACK left the loop above).
                self.counters.tcps_sndctrl += 1;
                if rexmit && self.traced(i) {
                    self.trace_rexmit(i, seqno, 0, false);
                }
            }
            let rto = self.rto_ns(&self.flows[i as usize]);
            let t = &mut self.flows[i as usize];
            let was_idle = t.snd_una == t.snd_max;
            let used = len + send_fin as u32;
            t.snd_nxt = t.snd_nxt.wrapping_add(used);
            t.snd_max = seq::max(t.snd_max, t.snd_nxt);
            // (A super-frame's last segment is short unless the length is a multiple.)
            let short = if len > mss {
                len % mss != 0
            } else {
                len > 0 && len < mss
            };
            if short && !rexmit {
                // Linux tcp_minshall_update: remember the end of the last short segment.
                t.snd_sml = t.snd_nxt as u16;
            }
            t.flags &= !(F_ACKNOW | F_ONE_SEG | F_FORCE);
            t.rcv_unacked = 0;
            t.delack_at = 0;
            // RFC 6298 §5.1: start the timer if not running (replacing an idle/persist timer).
            if used > 0 && (was_idle || t.rexmt_at == 0) {
                t.rexmt_at = now + rto;
            }
            if cut_short {
                self.mark_tx_blocked(i);
                break;
            }
            // All queued data sent and no FIN to send, or the window used up with data
            // left (the next round would find no room, and a FIN only follows the last
            // byte): the next round would send nothing, so stop here.
            if one_seg
                || len == 0
                || (len == avail && !t.fin_pending())
                || (len == usable && len < avail)
            {
                break;
            }
        }
    }

    /// A run of `len` (> `mss`) bytes of new data at offset `off` of send queue `sq`, as
    /// plain segments of `mss` bytes (the last may be shorter) written one after the other,
    /// where the sink does not cut super-frames: the windows, options and bookkeeping of
    /// [`output_rounds`](Self::output_rounds) are worked out once for the run, not once per
    /// segment. `hdr` is (sequence number, ACK, flags, window) of the first segment; PSH and
    /// FIN go on the last one only. The wire is the same as segment by segment. Returns the
    /// bytes written: fewer than `len` if the sink ran out of frames (0: none).
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    fn write_run<S: TxSink>(
        &mut self,
        tx: &mut S,
        key: &FlowKey,
        opt: u8,
        hdr: (u32, u32, u8, u16),
        opts: &[u8],
        data: (SendQueue, u32, u32),
        mss: u32,
    ) -> u32 {
        let (seq, ack, flags, wnd) = hdr;
        let (sq, off, len) = data;
        let mut done = 0;
        while done < len {
            let n = (len - done).min(mss);
            let f = if done + n == len {
                flags
            } else {
                flags & !(PSH | FIN)
            };
            let piece = Some((sq, off + done, n));
            if !self.write_seg(
                tx,
                key,
                opt,
                seq.wrapping_add(done),
                ack,
                f,
                wnd,
                opts,
                piece,
            ) {
                break;
            }
            done += n;
        }
        done
    }

    /// True when the flow has everything out: a state that sends data, every queued byte
    /// sent (so no segment of data, whatever the windows) and no FIN to send (none queued,
    /// or already sent: SND.NXT is past it). [`output_now`](Self::output_now) then sends
    /// at most a pure ACK.
    #[inline(always)]
    pub(super) fn all_out(&self, i: u32) -> bool {
        let t = &self.flows[i as usize];
        sends_data(t.state)
            && t.snd_nxt.wrapping_sub(t.snd_una) >= t.sq.len
            && !(t.fin_pending() && t.snd_nxt == t.fin_seq())
    }

    /// Sends a pure ACK (no data, no FIN) at `seq` with window `wnd_adv`. Sent: the ACK
    /// owed is paid (F_ACKNOW, the delayed-ACK state and the flags in `also` cleared) and
    /// counted. The sink full: the ACK stays owed and the flow waits for frames.
    #[inline(always)]
    fn pure_ack<S: TxSink>(&mut self, i: u32, seq: u32, wnd_adv: u16, also: u16, tx: &mut S) {
        let t = &self.flows[i as usize];
        let (key, ack, o) = (t.key, t.rcv_nxt, t.opt);
        let mut ob = [0u8; 40];
        let ol = self.seg_opts(i, &mut ob);
        if self.write_seg(tx, &key, o, seq, ack, ACK, wnd_adv, &ob[..ol], None) {
            self.counters.tcps_sndacks += 1;
            let t = &mut self.flows[i as usize];
            t.flags &= !(F_ACKNOW | also);
            t.rcv_unacked = 0;
            t.delack_at = 0;
        } else {
            self.mark_tx_blocked(i);
        }
    }

    /// RFC 6675 §5 loss recovery transmission: while `cwnd - pipe >= SMSS`, send the next
    /// hole (NextSeg rule 1) or new data (rule 2). Returns whether it sent anything.
    pub(super) fn sack_output<S: TxSink>(&mut self, i: u32, tx: &mut S) -> bool {
        if self.traced(i) {
            self.trace_cause(i, crate::trace::RexmitCause::Sack);
        }
        let thresh = self.fo(i).rexmt_thresh;
        let mut sent_any = false;
        for _ in 0..64 {
            let t = &self.flows[i as usize];
            if t.sb == NO_SIDE {
                break;
            }
            let sb = &self.sboards[t.sb as usize];
            let mss = t.mss as u32;
            let pipe = sb.pipe(t.snd_una, t.snd_max, mss, thresh);
            if pipe.saturating_add(mss) > t.cc.cwnd {
                break;
            }
            if let Some((x, len)) = sb.next_hole(t.snd_una, mss, thresh) {
                let sent = self.send_at(i, x, len.min(mss), tx);
                if sent == 0 {
                    break;
                }
                sent_any = true;
                let t = &self.flows[i as usize];
                let b = t.sb as usize;
                let hr = &mut self.sboards[b].high_rxt;
                *hr = seq::max(*hr, x.wrapping_add(sent));
            } else {
                // New data, if the receive window allows (RFC 6675 §5 NextSeg rule 2):
                // never past its right edge, and no runt while data is in flight (sender
                // silly-window avoidance, as in `output_rounds`).
                // (A segment's room: the MSS less the options it carries.)
                let seg = self.seg_room(i);
                let t = &mut self.flows[i as usize];
                let out = t.snd_max.wrapping_sub(t.snd_una);
                let left = (t.sq.len + t.fin_pending() as u32).saturating_sub(out);
                let room = t.snd_wnd.saturating_sub(out);
                if left == 0 || room == 0 || (room < seg && room < left) {
                    break;
                }
                let x = t.snd_max;
                let sent = self.send_at(i, x, seg.min(room), tx);
                if sent == 0 {
                    break;
                }
                sent_any = true;
                let t = &mut self.flows[i as usize];
                t.snd_max = x.wrapping_add(sent);
                t.snd_nxt = t.snd_max;
            }
        }
        self.schedule(i);
        sent_any
    }

    /// Counts a data segment at `seqno` below SND.MAX (not yet moved past it): a
    /// retransmission of its bytes below SND.MAX, and a first transmission of the rest
    /// (the segment crossing SND.MAX after a timeout or a probe: each byte counted once
    /// as sent); a window probe (forced, one byte) is the persist timer's `tcps_sndprobe`
    /// only.
    #[cold]
    #[inline(never)]
    fn count_resent(&mut self, i: u32, seqno: u32, len: u32) {
        let t = &self.flows[i as usize];
        let old = t.snd_max.wrapping_sub(seqno).min(len);
        let probe = len == 1 && t.has(F_FORCE);
        if !probe {
            self.counters.tcps_sndrexmitpack += 1;
            self.counters.tcps_sndrexmitbyte += u64::from(old);
        }
        self.counters.tcps_sndbyte += u64::from(len - old);
        if self.traced(i) {
            self.trace_rexmit(i, seqno, len, false);
        }
    }

    /// RFC 6675 §5 NextSeg rule 4 on a partial ACK (RFC 6582 §3.2 step 5 retransmits
    /// there too), after [`sack_output`](Self::sack_output) sent nothing: one "rescue"
    /// retransmission per recovery of the segment holding the highest outstanding
    /// un-SACKed byte — a lost tail with nothing SACKed above it, which otherwise waits
    /// for a timeout that collapses the window. HighRxt is left as it is. (Not at the
    /// entry into recovery, where it would resend the tail of every window.)
    pub(super) fn rescue_rxt<S: TxSink>(&mut self, i: u32, tx: &mut S) {
        let t = &self.flows[i as usize];
        let (una, max, mss) = (t.snd_una, t.snd_max, t.mss as u32);
        if !t.cc.in_recovery || t.sb == NO_SIDE {
            return;
        }
        let thresh = self.fo(i).rexmt_thresh;
        let sb = &self.sboards[t.sb as usize];
        if sb.pipe(una, max, mss, thresh).saturating_add(mss) > t.cc.cwnd {
            return;
        }
        let recover = t.cc.recover;
        let sb = &mut self.sboards[t.sb as usize];
        let top = sb.top(una);
        if !seq::lt(top, max) || sb.rescue_rxt.is_some_and(|r| !seq::gt(una, r)) {
            return;
        }
        let start = seq::max(top, max.wrapping_sub(mss));
        if self.send_at(i, start, max.wrapping_sub(start), tx) > 0 {
            let t = &self.flows[i as usize];
            self.sboards[t.sb as usize].rescue_rxt = Some(recover);
        }
    }

    /// Sends one segment at `seqno` (at most `max_len` bytes, plus FIN if it ends there)
    /// without moving SND.NXT; returns the sequence space used.
    pub(super) fn send_at<S: TxSink>(
        &mut self,
        i: u32,
        seqno: u32,
        max_len: u32,
        tx: &mut S,
    ) -> u32 {
        let now = self.now;
        let wnd_adv = self.adv_wnd(i);
        let room = self.seg_room(i);
        let t = &self.flows[i as usize];
        let off = seqno.wrapping_sub(t.snd_una);
        let avail = t.sq.len.saturating_sub(off);
        let len = avail.min(max_len).min(room);
        let fin = t.fin_pending() && seqno.wrapping_add(len) == t.fin_seq() && len == avail;
        if len == 0 && !fin {
            return 0;
        }
        let rexmit = seq::lt(seqno, t.snd_max);
        let (key, ack, sq, o) = (t.key, t.rcv_nxt, t.sq, t.opt);
        let mut flags = ACK;
        if fin {
            flags |= FIN;
        }
        let mut ob = [0u8; 40];
        let ol = self.seg_opts(i, &mut ob);
        let data = if len > 0 { Some((sq, off, len)) } else { None };
        if !self.write_seg(tx, &key, o, seqno, ack, flags, wnd_adv, &ob[..ol], data) {
            return 0;
        }
        if rexmit && self.traced(i) {
            self.trace_rexmit(i, seqno, len, false);
        }
        if len > 0 {
            if rexmit {
                self.counters.tcps_sndrexmitpack += 1;
                self.counters.tcps_sndrexmitbyte += len as u64;
            } else {
                self.counters.tcps_sndpack += 1;
                self.counters.tcps_sndbyte += len as u64;
            }
        }
        let rto = self.rto_ns(&self.flows[i as usize]);
        let t = &mut self.flows[i as usize];
        t.flags &= !(F_ACKNOW | F_TIMING);
        t.rcv_unacked = 0;
        t.delack_at = 0;
        if t.rexmt_at == 0 {
            t.rexmt_at = now + rto;
        }
        len + fin as u32
    }

    /// Retransmits one segment at SND.UNA (fast retransmit, partial ACK).
    pub(super) fn retransmit_one<S: TxSink>(&mut self, i: u32, tx: &mut S) {
        let t = &mut self.flows[i as usize];
        let saved = t.snd_nxt;
        t.snd_nxt = t.snd_una;
        t.flags |= F_ONE_SEG;
        t.flags &= !F_TIMING; // Karn's rule
        self.output(i, tx);
        let t = &mut self.flows[i as usize];
        t.flags &= !F_ONE_SEG;
        t.snd_nxt = seq::max(saved, t.snd_nxt);
        // Not sent (the sink was full): the timer the caller stopped for it runs again
        // while data is outstanding (RFC 6298 §5.1), so the segment goes one RTO later at
        // the latest (the resumed output only sends what was never sent).
        if t.rexmt_at == 0 && t.snd_una != t.snd_max {
            let rto = self.rto_ns(&self.flows[i as usize]);
            self.flows[i as usize].rexmt_at = self.now + rto;
            self.schedule(i);
        }
    }
}

/// States in which a flow sends data (and a FIN after it): established, or closing with
/// its send side still open or its FIN not yet acknowledged.
#[inline(always)]
fn sends_data(s: State) -> bool {
    matches!(
        s,
        State::Established | State::CloseWait | State::FinWait1 | State::Closing | State::LastAck
    )
}
