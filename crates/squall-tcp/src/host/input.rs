//! Input: `rx` / `rx_burst` (parse, demultiplex, prefetch), replies for segments without
//! a flow, LISTEN (passive open) and SYN-SENT processing.

use super::*;

impl TcpHost {
    /// Processes one received frame (Ethernet + IPv4 + TCP, or Ethernet + IPv6 + TCP).
    pub fn rx<A: TcpApp, S: TxSink>(&mut self, now: u64, frame: &[u8], app: &mut A, tx: &mut S) {
        self.now = now;
        self.resume_first(tx);
        self.rx_one(now, frame, None, app, tx);
    }

    /// Flows that stopped on a full TX sink get the frames that came back before the
    /// segments this receive triggers do (FIFO fairness: otherwise busy flows would keep
    /// taking every freed frame and a blocked SYN could wait forever).
    #[inline]
    pub(super) fn resume_first<S: TxSink>(&mut self, tx: &mut S) {
        if !self.tx_blocked.is_empty() {
            self.resume_blocked(tx);
        }
    }

    /// Processes a burst of received frames. The 4-tuples of the whole burst are read and
    /// their flow-table slots and TCBs prefetched before any frame is processed, hiding the
    /// cache misses that dominate when flows are many; each frame is hashed once.
    pub fn rx_burst<A: TcpApp, S: TxSink>(
        &mut self,
        now: u64,
        frames: &[&[u8]],
        app: &mut A,
        tx: &mut S,
    ) {
        const B: usize = 32;
        self.now = now;
        self.resume_first(tx);
        self.in_burst = true;
        for chunk in frames.chunks(B) {
            // Each frame's 4-tuple is read once and kept with its hash; IPv6 ids read
            // here stand for the same addresses as long as none is freed.
            self.hint_frees = self.addr6.frees();
            let mut keys = [None::<(FlowKey, u64)>; B];
            for (k, f) in chunk.iter().enumerate() {
                let key = if f.get(12) == Some(&0x86) {
                    self.peek_key6(f)
                } else {
                    pkt::peek_key(f)
                };
                if let Some(key) = key {
                    let h = self.table.hash(&key);
                    self.table.prefetch(h);
                    keys[k] = Some((key, h));
                }
            }
            let nodes = self.node_hints();
            for (key, h) in keys[..chunk.len()].iter().flatten() {
                if let Some(i) = self.table.find(key, *h) {
                    self.prefetch_flow(i, nodes);
                }
            }
            let verify = self.cfg.rx_checksum;
            // Where the host verifies checksums the sum is the first touch of a frame's
            // bytes past its headers: frames a few ahead are prefetched whole, so their
            // loads overlap the work on this one (frames that crossed cores, or left the
            // cache while queued, otherwise stall the sum line by line).
            if verify {
                chunk
                    .iter()
                    .take(RX_PREFETCH_AHEAD)
                    .for_each(|f| prefetch_bytes(f));
            }
            for (k, f) in chunk.iter().enumerate() {
                if verify {
                    if let Some(next) = chunk.get(k + RX_PREFETCH_AHEAD) {
                        prefetch_bytes(next);
                    }
                }
                self.rx_one(now, f, keys[k], app, tx);
            }
        }
        self.in_burst = false;
        self.flush_deferred(tx);
    }

    /// Whether prefetching flows should take their timer nodes too: where there are more
    /// flows than the cache keeps nodes of (below, the hint only costs: the nodes stay
    /// in L1/L2).
    #[inline(always)]
    pub(super) fn node_hints(&self) -> bool {
        self.active as usize > WHEEL_PREFETCH_MIN_FLOWS
    }

    /// Prefetches flow `i`'s control block, and with `node` its timer node (a hint: an
    /// index past the slab is ignored). Callers that know their flows a few places ahead
    /// (the receive burst, the expired timers, the flows waiting for the TX sink) issue
    /// it early, so that with more flows than the cache holds each one's lines are on
    /// their way while the one before is handled.
    #[inline(always)]
    pub(super) fn prefetch_flow(&self, i: u32, node: bool) {
        if let Some(t) = self.flows.get(i as usize) {
            prefetch_lines(t);
            if node {
                self.wheel.prefetch(i);
            }
        }
    }

    #[inline]
    pub(super) fn rx_one<A: TcpApp, S: TxSink>(
        &mut self,
        now: u64,
        frame: &[u8],
        hint: Option<(FlowKey, u64)>,
        app: &mut A,
        tx: &mut S,
    ) {
        self.now = now;
        self.counters.tcps_rcvtotal += 1;
        if frame.get(12) == Some(&0x86) {
            // IPv6 (0x86dd; other 0x86.. types are refused by its parser)
            return self.rx6_one(frame, hint, app, tx);
        }
        let seg = match pkt::parse_opt(frame, self.cfg.rx_checksum) {
            Ok(s) => s,
            Err(e) => {
                self.count_rx_error(e);
                return;
            }
        };
        // 0.0.0.0/8 is never our address (RFC 1122 §3.2.1.3); here it would alias the
        // ids of IPv6 flows (whose local id is below 2^24). A source in it is refused
        // where a flow would be made (`demux`).
        if addr6::is_id(seg.dst_ip) {
            self.counters.tcps_rcvnottcp += 1;
            return;
        }
        let key = FlowKey {
            local_ip: seg.dst_ip,
            remote_ip: seg.src_ip,
            local_port: seg.dst_port,
            remote_port: seg.src_port,
        };
        let h = match hint {
            Some((_, h)) => h,
            None => self.table.hash(&key),
        };
        self.demux(&seg, key, h, app, tx);
    }

    /// Whether a segment for no connection from `remote` to `local` (IPv4) may be
    /// answered: both unicast and not loopback (a SYN to a broadcast or multicast
    /// address is discarded, RFC 1122 §4.2.3.10; such sources are invalid, §3.2.1.3),
    /// and `local` owned when the host was told its addresses.
    #[cold]
    fn v4_answerable(&self, local: u32, remote: u32) -> bool {
        let unicast = |a: u32| a >> 24 != 127 && a < 0xe000_0000;
        unicast(local)
            && unicast(remote)
            && (!self.owned_set || self.owned4.iter().any(|&(a, b)| a <= local && local <= b))
    }

    /// [`v4_answerable`](Self::v4_answerable) over IPv6: neither address unspecified or
    /// loopback, `local` owned when the host knows its addresses, else not multicast
    /// (TRex's IPv6 profiles map flows under `ff02::`-style prefixes: such addresses are
    /// answered where they are owned).
    #[cold]
    fn v6_answerable(&self, local: &[u8; 16], remote: &[u8; 16]) -> bool {
        let (l, r) = (u128::from_be_bytes(*local), u128::from_be_bytes(*remote));
        let usable = |a: u128| a > 1;
        usable(l)
            && usable(r)
            && if self.owned_set {
                self.owned6.iter().any(|&(a, b)| a <= l && l <= b)
            } else {
                l >> 120 != 0xff && r >> 120 != 0xff
            }
    }

    fn count_rx_error(&mut self, e: pkt::RxError) {
        match e {
            pkt::RxError::BadSum => self.counters.tcps_rcvbadsum += 1,
            pkt::RxError::BadOff => self.counters.tcps_rcvbadoff += 1,
            pkt::RxError::Short => self.counters.tcps_rcvshort += 1,
            _ => self.counters.tcps_rcvnottcp += 1,
        }
    }

    /// The flow key of an IPv6/TCP frame (TCP right after the fixed header) whose
    /// addresses already have ids, read without verification for the burst's prefetch;
    /// None otherwise (no flow can have it, or full parsing decides).
    #[inline(always)]
    fn peek_key6(&mut self, f: &[u8]) -> Option<FlowKey> {
        let h = f.get(..pkt::HDRS6_LEN)?;
        if h[12..14] != [0x86, 0xdd] || h[20] != 6 {
            return None;
        }
        let src: &[u8; 16] = h[22..38].try_into().ok()?;
        let dst: &[u8; 16] = h[38..54].try_into().ok()?;
        Some(FlowKey {
            local_ip: self.addr6.peek(dst)?,
            remote_ip: self.addr6.peek(src)?,
            local_port: u16::from_be_bytes([h[56], h[57]]),
            remote_port: u16::from_be_bytes([h[54], h[55]]),
        })
    }

    /// An IPv6 frame: the addresses become ids of the address table (the key of an IPv6
    /// flow); ids no flow took are given back after the segment is processed. `hint`: the
    /// key and hash the burst's prefetch pass read from this frame's bytes (TCP right
    /// after the fixed header, as the parser found it), used as they are when no id was
    /// freed since, else when its ids still stand for this frame's addresses (frames
    /// before it may have freed them).
    fn rx6_one<A: TcpApp, S: TxSink>(
        &mut self,
        frame: &[u8],
        hint: Option<(FlowKey, u64)>,
        app: &mut A,
        tx: &mut S,
    ) {
        let (seg, src, dst) = match pkt::parse6_opt(frame, self.cfg.rx_checksum) {
            Ok(s) => s,
            Err(e) => {
                self.count_rx_error(e);
                return;
            }
        };
        if let Some((k, h)) = hint {
            if self.addr6.frees() == self.hint_frees {
                debug_assert!(
                    self.addr6.holds(k.local_ip, &dst) && self.addr6.holds(k.remote_ip, &src)
                );
                return self.demux(&seg, k, h, app, tx);
            }
            if k.local_port == seg.dst_port
                && k.remote_port == seg.src_port
                && self.addr6.holds(k.local_ip, &dst)
                && self.addr6.holds(k.remote_ip, &src)
            {
                // ids in use: nothing to give back
                return self.demux(&seg, k, h, app, tx);
            }
        }
        let (Some((local, new_l)), Some((remote, new_r))) =
            (self.addr6.lookup(&dst), self.addr6.lookup(&src))
        else {
            // every id taken (2^24 addresses): no flow can be made
            self.counters.tcps_flowfull += 1;
            if let Some(l) = self.addr6.get(&dst) {
                self.addr6.release_unused(l);
            }
            return;
        };
        let key = FlowKey {
            local_ip: local,
            remote_ip: remote,
            local_port: seg.dst_port,
            remote_port: seg.src_port,
        };
        // Hashed again: the burst's prefetch pass read ids that frames before this one
        // may have freed and given to other addresses.
        let h = self.table.hash(&key);
        self.demux(&seg, key, h, app, tx);
        // ids given for this segment that no flow took (ids in use have a count)
        if new_l {
            self.addr6.release_unused(local);
        }
        if new_r {
            self.addr6.release_unused(remote);
        }
    }

    /// The flow of `key` (hash `h`) takes the segment; without one, a SYN cookie's ACK,
    /// a listener or a reset does.
    #[inline(always)]
    fn demux<A: TcpApp, S: TxSink>(
        &mut self,
        seg: &Segment,
        key: FlowKey,
        h: u64,
        app: &mut A,
        tx: &mut S,
    ) {
        match self.table.find(&key, h) {
            Some(i) => {
                let r = self.rexmit_events();
                self.segment(i, seg, h, app, tx);
                if self.traced(i) {
                    self.trace_sync(i);
                }
                self.report_rexmit(i, r, app);
            }
            None => {
                if !key.is_ipv6() && addr6::is_id(key.remote_ip) {
                    // an IPv4 peer in 0.0.0.0/8: no flow, no answer
                    self.counters.tcps_rcvnottcp += 1;
                    return;
                }
                let answerable = if key.is_ipv6() {
                    let l = *self.addr6.addr(key.local_ip);
                    let r = *self.addr6.addr(key.remote_ip);
                    self.v6_answerable(&l, &r)
                } else {
                    self.v4_answerable(key.local_ip, key.remote_ip)
                };
                if !answerable {
                    self.counters.tcps_rcvnotours += 1;
                    return;
                }
                if seg.flags & (SYN | RST | ACK) == ACK
                    && self.cfg.syn_cookies
                    && self.listens(&key)
                {
                    if let Some(i) = self.accept_cookie(seg, key, h) {
                        self.segment(i, seg, h, app, tx);
                        return;
                    }
                }
                self.no_flow(seg, key, h, tx)
            }
        }
    }

    pub(super) fn send_rst_reply<S: TxSink>(
        &mut self,
        seg: &Segment,
        key: &FlowKey,
        opt: u8,
        tx: &mut S,
    ) {
        if seg.flags & RST != 0 {
            return;
        }
        // RFC 9293 §3.10.7.1: reply to a segment for a nonexistent connection.
        let (seqno, ack, flags) = if seg.flags & ACK != 0 {
            (seg.ack, 0, RST)
        } else {
            (0, seg.seq.wrapping_add(seg.seg_len()), RST | ACK)
        };
        self.counters.tcps_sndrst += 1;
        self.counters.tcps_sndctrl += 1;
        self.write_seg(tx, key, opt, seqno, ack, flags, 0, &[], None);
    }

    pub(super) fn no_flow<S: TxSink>(&mut self, seg: &Segment, key: FlowKey, h: u64, tx: &mut S) {
        if seg.flags & RST != 0 {
            return;
        }
        if seg.flags & (SYN | ACK | FIN) == SYN && self.listens(&key) {
            self.passive_open(seg, key, h, tx);
            return;
        }
        self.counters.tcps_noconn += 1;
        self.send_rst_reply(seg, &key, 0, tx);
    }

    /// LISTEN state, SYN arrival (RFC 9293 §3.10.7.2).
    pub(super) fn passive_open<S: TxSink>(
        &mut self,
        seg: &Segment,
        key: FlowKey,
        h: u64,
        tx: &mut S,
    ) {
        if self.half_open >= self.cfg.max_half_open {
            if self.cfg.syn_cookies {
                self.send_cookie(seg, key, tx);
            } else {
                self.counters.tcps_synfull += 1;
            }
            return;
        }
        let opt = self.port_opts(key.local_port);
        let Some(i) = self.alloc_flow(key, h, opt) else {
            return;
        };
        let fo = self.opts[opt as usize];
        let fo_mss = self.fo_mss(opt, &key);
        let (la, ra) = self.hash_addrs(&key);
        let iss = self
            .isn_key
            .isn(self.now, la, key.local_port, ra, key.remote_port);
        let o = pkt::parse_opts(seg.opts);
        let cfg_ws = fo.wscale;
        let cfg_ts = fo.timestamps;
        let ts_now = self.ts_now();
        let mss = peer_mss(o.mss, &key)
            .min(fo_mss)
            .min(self.pmtu_mss(&key))
            .max(64);
        let init = fo.init_cwnd;
        let now = self.now;
        let t = &mut self.flows[i as usize];
        t.state = State::SynReceived;
        t.flags |= F_PASSIVE | F_HALF_OPEN;
        t.rcv_nxt = seg.seq.wrapping_add(1);
        t.snd_una = iss;
        t.snd_nxt = iss;
        t.snd_max = iss;
        t.cc = NewReno::new(init, mss as u32, iss);
        t.snd_sml = iss as u16;
        t.mss = mss;
        t.set_snd_wnd(seg.wnd as u32);
        t.snd_wl1 = seg.seq;
        t.snd_wl2 = iss;
        if let (Some(peer), Some(ours)) = (o.wscale, cfg_ws) {
            t.flags |= F_WSCALE;
            t.set_wscales(peer, ours);
        }
        if o.sack_ok && fo.sack {
            t.flags |= F_SACK;
        }
        if let (Some((tsval, _)), true) = (o.ts, cfg_ts) {
            t.flags |= F_TS;
            t.ts_recent = tsval;
            t.ts_recent_age = ts_now;
            t.mss -= 12;
        }
        t.flags |= F_TIMING;
        t.rtt_seq = iss;
        t.rtt_ts = (now / 1000) as u32;
        self.half_open += 1;
        self.trace_passive(i);
        self.send_syn(i, tx);
        let rto = self.rto_ns(&self.flows[i as usize]);
        self.flows[i as usize].rexmt_at = now + rto;
        self.schedule(i);
    }

    /// SYN-SENT state processing (RFC 9293 §3.10.7.3).
    pub(super) fn syn_sent<A: TcpApp, S: TxSink>(
        &mut self,
        i: u32,
        seg: &Segment,
        app: &mut A,
        tx: &mut S,
    ) {
        let now = self.now;
        let fo = *self.fo(i);
        let fo_mss = self
            .fo_mss(self.flows[i as usize].opt, &self.flows[i as usize].key)
            .min(self.pmtu_mss(&self.flows[i as usize].key));
        let t = &mut self.flows[i as usize];
        let iss = t.snd_una;
        let has_ack = seg.flags & ACK != 0;
        if has_ack && (seq::le(seg.ack, iss) || seq::gt(seg.ack, t.snd_max)) {
            if seg.flags & RST == 0 {
                let (key, o) = (t.key, t.opt);
                self.send_rst_reply(seg, &key, o, tx);
            }
            return;
        }
        if seg.flags & RST != 0 {
            if has_ack {
                self.counters.tcps_conndrops += 1;
                self.counters.tcps_rcvrst += 1;
                if self.traced(i) {
                    self.trace_ev(i, crate::trace::TraceKind::RstReceived);
                }
                self.close_flow(i, CloseReason::Refused, app);
            }
            return;
        }
        if seg.flags & SYN == 0 {
            return;
        }
        let o = pkt::parse_opts(seg.opts);
        let mss = peer_mss(o.mss, &t.key).min(fo_mss).max(64);
        t.rcv_nxt = seg.seq.wrapping_add(1);
        t.mss = mss;
        if let (Some(peer), Some(ours)) = (o.wscale, fo.wscale) {
            t.flags |= F_WSCALE;
            t.set_wscales(peer, ours);
        }
        if o.sack_ok && fo.sack {
            t.flags |= F_SACK;
        }
        if let (Some((tsval, _)), true) = (o.ts, fo.timestamps) {
            t.flags |= F_TS;
            t.ts_recent = tsval;
            t.ts_recent_age = (now / 1_000_000) as u32;
            t.mss -= 12;
        }
        let mss = t.mss;
        t.cc.set_initial(fo.init_cwnd, mss as u32);
        t.set_snd_wnd(seg.wnd as u32); // never scaled in a SYN
        t.snd_wl1 = seg.seq;
        t.snd_wl2 = seg.ack;
        if has_ack {
            t.snd_una = seg.ack;
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
            t.rexmt_at = 0;
            t.state = State::Established;
            t.flags |= F_ACKNOW;
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
            // Any data on the SYN-ACK is processed as ESTABLISHED text would be; rare, so
            // it is dropped here and the peer retransmits it.
            self.output(i, tx);
        } else {
            // Simultaneous open (RFC 9293 §3.10.7.3, fourth check): SYN-RECEIVED, send SYN-ACK.
            t.state = State::SynReceived;
            t.backoff = 0;
            t.flags &= !F_TIMING;
            self.send_syn_ack_simultaneous(i, tx);
            let rto = self.rto_ns(&self.flows[i as usize]);
            self.flows[i as usize].rexmt_at = now + rto;
            self.schedule(i);
        }
    }

    pub(super) fn send_syn_ack_simultaneous<S: TxSink>(&mut self, i: u32, tx: &mut S) {
        // Same segment as a passive SYN-ACK (seq = ISS, ack = RCV.NXT).
        self.send_syn(i, tx);
    }
}

/// How many frames ahead of the one being processed a burst prefetches whole (where the
/// host verifies checksums, the sum's loads are the first touch of each frame's bytes).
const RX_PREFETCH_AHEAD: usize = 2;

/// Flows above which a receive burst prefetches its flows' timer nodes (20 bytes each:
/// 4,096 of them fill L1's 48 KiB about twice).
const WHEEL_PREFETCH_MIN_FLOWS: usize = 4096;

/// The bytes of a frame the burst prefetches at most.
const RX_PREFETCH_MAX: usize = 4096;

/// Prefetches the cache lines of `b` after the one it starts in, within its first
/// [`RX_PREFETCH_MAX`] bytes (a super-frame's tail would only push this frame's lines out
/// of L1 before its sum gets to them).
#[inline(always)]
fn prefetch_bytes(b: &[u8]) {
    let first = 64 - (b.as_ptr() as usize & 63);
    prefetch_span(b.as_ptr(), first, b.len().min(RX_PREFETCH_MAX));
}

/// Prefetches the cache lines of `v` (a hint; never faults).
#[inline(always)]
fn prefetch_lines<T>(v: &T) {
    prefetch_span((v as *const T).cast(), 0, std::mem::size_of::<T>());
}

/// Prefetches the lines at `p + from`, `p + from + 64`, ... below `p + to` (a hint; never
/// faults). The callers keep the span inside one object.
#[inline(always)]
fn prefetch_span(p: *const u8, from: usize, to: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        let mut off = from;
        while off < to {
            // SAFETY: prefetch is a hint that never faults; the address lies inside the
            // caller's object.
            #[allow(unused_unsafe)]
            unsafe {
                std::arch::x86_64::_mm_prefetch(
                    p.wrapping_add(off).cast::<i8>(),
                    std::arch::x86_64::_MM_HINT_T0,
                );
            }
            off += 64;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (p, from, to);
}

/// The peer's MSS: its option's, else the default of the flow's family (RFC 9293
/// §3.7.1: 536 over IPv4, 1220 over IPv6, RFC 8200 §5's 1280 less 60 bytes of headers).
fn peer_mss(opt: u16, key: &FlowKey) -> u16 {
    match opt {
        0 if crate::addr6::is_id(key.local_ip) => 1220,
        0 => 536,
        m => m,
    }
}
