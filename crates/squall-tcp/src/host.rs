//! The per-core TCP host: receives Ethernet/IPv4/TCP frames, demultiplexes them to flows
//! through the 4-tuple table, runs the RFC 9293 state machine and the application
//! callbacks, and writes complete frames straight into caller-provided buffers
//! ([`TxSink`]). Timers live in one `squall_engine::TimerWheel` (token = slab index).

use squall_engine::TimerWheel;

use crate::api::{CloseReason, ConnectError, Ctl, FlowId, Op, SendError, TcpApp, TxSink};
use crate::cc::{DupAck, NewAck, NewReno};
use crate::counters::TcpCounters;
use crate::flowtable::{FlowKey, FlowTable};
use crate::isn::IsnKey;
use crate::ooo::{OooInsert, OooQueue};
use crate::opts::{FlowOpts, OptsId, MAX_OPTS};
use crate::pkt::{self, Segment, TxHdr, ACK, FIN, HDRS_LEN, PSH, RST, SYN, URG};
use crate::rtt::{RtoConfig, Rtt};
use crate::sack::Scoreboard;
use crate::sendq::{BufId, BufRegistry, ChunkPool, SendQueue};
use crate::seq;
use crate::tcb::*;
use std::collections::VecDeque;

/// Host and TCP configuration.
#[derive(Clone, Debug)]
pub struct TcpConfig {
    /// Our MAC address.
    pub mac: [u8; 6],
    /// Static next-hop MAC for every outgoing frame.
    pub gateway_mac: [u8; 6],
    /// Maximum number of flows (slab and table size).
    pub max_flows: u32,
    /// Our MSS (advertised and upper bound for sending).
    pub mss: u16,
    /// Initial congestion window in segments (1..=20).
    pub init_cwnd: u8,
    /// Receive window we advertise (the application consumes data as it arrives).
    pub rcv_wnd: u32,
    /// Offer window scaling with this shift (RFC 7323 §2); None = do not offer.
    pub wscale: Option<u8>,
    /// Offer/accept timestamps (RFC 7323 §3: RTTM and PAWS).
    pub timestamps: bool,
    /// Offer/accept SACK (RFC 2018; loss recovery per RFC 6675).
    pub sack: bool,
    /// Nagle's algorithm (RFC 9293 §3.7.4) on new flows.
    pub nagle: bool,
    /// Delayed-ACK timeout (RFC 9293 §3.8.6.3), ns; 0 = ACK every segment immediately.
    pub delack_ns: u64,
    pub rto: RtoConfig,
    /// Retransmissions of a SYN / SYN-ACK before giving up.
    pub max_syn_retries: u8,
    /// Retransmissions of data/FIN before giving up.
    pub max_retries: u8,
    /// TIME_WAIT period (2*MSL; short by default for a generator), ns.
    pub time_wait_ns: u64,
    /// How long FIN_WAIT_2 waits for the peer's FIN before the flow is dropped, ns.
    pub fin_wait2_ns: u64,
    /// Keepalive: (idle ns, interval ns, probes); None = off.
    pub keepalive: Option<(u64, u64, u8)>,
    /// Maximum half-open (SYN_RECEIVED) flows; beyond it SYNs get SYN cookies (or are
    /// dropped and counted when `syn_cookies` is off).
    pub max_half_open: u32,
    /// Challenge ACKs per second per host (RFC 5961 §7 rate limit).
    pub challenge_ack_limit: u32,
    /// Answer SYNs with stateless SYN cookies when the half-open table is full (RFC 4987 §3.6).
    pub syn_cookies: bool,
    /// Capacity of a flow's out-of-order queue in bytes.
    pub ooo_bytes: u32,
    /// Secret for ISNs and the table hash.
    pub seed: u64,
    /// Compute the TCP checksum of outgoing frames (false: the port offloads it and the
    /// field is left as the pseudo-header sum, as for CHECKSUM_PARTIAL).
    pub tx_checksum: bool,
    /// Verify the TCP checksum of received frames (false: the port already did).
    pub rx_checksum: bool,
}

impl Default for TcpConfig {
    fn default() -> Self {
        TcpConfig {
            mac: [2, 0, 0, 0, 0, 1],
            gateway_mac: [2, 0, 0, 0, 0, 2],
            max_flows: 65_536,
            mss: 1460,
            init_cwnd: 2,
            rcv_wnd: 65_535,
            wscale: None,
            timestamps: false,
            sack: false,
            nagle: false,
            delack_ns: 100_000_000,
            rto: RtoConfig::default(),
            max_syn_retries: 6,
            max_retries: 12,
            time_wait_ns: 1_000_000_000,
            fin_wait2_ns: 60_000_000_000,
            keepalive: None,
            max_half_open: 16_384,
            syn_cookies: true,
            challenge_ack_limit: 1000,
            ooo_bytes: 65_536,
            seed: 0x5157_4c4c_7463_7031,
            tx_checksum: true,
            rx_checksum: true,
        }
    }
}

/// A per-core TCP endpoint set.
pub struct TcpHost {
    cfg: TcpConfig,
    flows: Vec<Tcb>,
    free: Vec<u32>,
    table: FlowTable,
    wheel: TimerWheel,
    expired: Vec<u32>,
    /// Flows whose output stopped on a full TX sink (flag `F_TX_BLOCKED`), oldest
    /// first; resumed by [`TcpHost::tx_resume`] (and at every [`TcpHost::poll`]).
    tx_blocked: VecDeque<u32>,
    chunks: ChunkPool,
    bufs: BufRegistry,
    ooo: Vec<Option<Box<OooQueue>>>,
    ooo_free: Vec<u32>,
    sboards: Vec<Scoreboard>,
    sb_free: Vec<u32>,
    listen: Vec<u64>,
    /// Option set of flows accepted on a port (sorted by port); ports not listed use
    /// the default set.
    listen_opts: Vec<(u16, u8)>,
    /// Per-flow option sets; index 0 is derived from `cfg`.
    opts: Vec<FlowOpts>,
    half_open: u32,
    isn_key: IsnKey,
    ip_id: u16,
    counters: TcpCounters,
    ctl: Ctl,
    now: u64,
    challenge_sec: u64,
    challenge_count: u32,
    active: u32,
}

/// Bytes per token of `squall_engine::TimerWheel` (deadline u64, next/prev u32, slot u16,
/// padded).
pub const TIMER_NODE_BYTES: usize = 24;

/// MSS values encodable in a SYN cookie (3 bits).
const COOKIE_MSS: [u16; 8] = [216, 536, 1024, 1200, 1360, 1440, 1452, 1460];

/// What `segment` processing should do after a callback.
type Gone = bool;

impl TcpHost {
    /// A host at time `now_ns` (the host never reads a clock; callers pass time).
    pub fn new(mut cfg: TcpConfig, now_ns: u64) -> Self {
        // Sanitise values that would make no sense on the wire.
        cfg.mss = cfg.mss.clamp(64, 65_495);
        cfg.init_cwnd = cfg.init_cwnd.clamp(1, 20);
        cfg.rcv_wnd = cfg.rcv_wnd.clamp(1, 1 << 30);
        cfg.wscale = cfg.wscale.map(|w| w.min(14));
        let max = cfg.max_flows.max(1) as usize;
        let k0 = cfg.seed ^ 0x736f_6d65;
        let k1 = cfg.seed.rotate_left(17) ^ 0x646f_7261;
        TcpHost {
            table: FlowTable::new(max, cfg.seed.rotate_left(7)),
            wheel: TimerWheel::new(max, now_ns),
            flows: squall_engine::hugemem::with_capacity_huge(max),
            free: Vec::new(),
            expired: Vec::with_capacity(256),
            tx_blocked: VecDeque::with_capacity(256),
            chunks: ChunkPool::new(),
            bufs: BufRegistry::new(),
            ooo: Vec::new(),
            ooo_free: Vec::new(),
            sboards: Vec::new(),
            sb_free: Vec::new(),
            listen: vec![0u64; 1024],
            listen_opts: Vec::new(),
            opts: vec![FlowOpts::from_config(&cfg)],
            half_open: 0,
            isn_key: IsnKey { k0, k1 },
            ip_id: 0,
            counters: TcpCounters::default(),
            ctl: Ctl::default(),
            now: now_ns,
            challenge_sec: u64::MAX,
            challenge_count: 0,
            active: 0,
            cfg,
        }
    }

    pub fn config(&self) -> &TcpConfig {
        &self.cfg
    }
    /// Sets the MAC every frame is sent to (the next hop, once resolved).
    pub fn set_gateway_mac(&mut self, mac: [u8; 6]) {
        self.cfg.gateway_mac = mac;
    }
    pub fn counters(&self) -> &TcpCounters {
        &self.counters
    }
    /// The registry of immutable send buffers (register templates here once).
    pub fn buffers(&mut self) -> &mut BufRegistry {
        &mut self.bufs
    }
    /// Flows currently allocated (including TIME_WAIT).
    pub fn flow_count(&self) -> usize {
        self.active as usize
    }
    /// State of a flow (Closed if the id is free or out of range).
    pub fn state(&self, f: FlowId) -> State {
        self.flows
            .get(f.0 as usize)
            .map_or(State::Closed, |t| t.state)
    }
    /// The 4-tuple of a live flow.
    pub fn flow_key(&self, f: FlowId) -> Option<FlowKey> {
        self.flows
            .get(f.0 as usize)
            .filter(|t| t.state != State::Closed)
            .map(|t| t.key)
    }
    /// Read-only view of a flow's TCB (tests, diagnostics).
    pub fn tcb(&self, f: FlowId) -> Option<&Tcb> {
        self.flows
            .get(f.0 as usize)
            .filter(|t| t.state != State::Closed)
    }
    /// Heap bytes held by this host's flow structures: TCB slab (capacity), flow table,
    /// timer wheel nodes, send-queue chunk pool, side tables (out-of-order queues, SACK
    /// scoreboards). Registered application buffers are not included.
    pub fn memory_bytes(&self) -> usize {
        use std::mem::size_of;
        let ooo_each =
            self.cfg.ooo_bytes.max(16).next_power_of_two() as usize + size_of::<OooQueue>();
        let ooo_live = self.ooo.iter().filter(|q| q.is_some()).count();
        self.flows.capacity() * size_of::<Tcb>()
            + self.free.capacity() * 4
            + self.tx_blocked.capacity() * 4
            + self.table.slots() * FlowTable::SLOT_BYTES
            + self.wheel.capacity() * TIMER_NODE_BYTES
            + self.chunks.allocated() * 16
            + ooo_live * ooo_each
            + self.sboards.capacity() * size_of::<Scoreboard>()
            + (self.ooo_free.capacity() + self.sb_free.capacity()) * 4
            + self.listen.len() * 8
            + self.listen_opts.capacity() * 4
            + self.opts.capacity() * size_of::<FlowOpts>()
    }

    /// Earliest pending timer (lower bound), for virtual-clock drivers.
    pub fn next_timer(&self) -> Option<u64> {
        self.wheel.next_deadline()
    }

    /// Accept connections on `port` (any local address).
    pub fn listen(&mut self, port: u16) {
        self.listen[port as usize / 64] |= 1 << (port % 64);
    }
    /// Accept connections on `port`; flows accepted there get option set `opts`
    /// (an id from [`TcpHost::add_flow_opts`]; unknown ids mean the default set).
    pub fn listen_with(&mut self, port: u16, opts: OptsId) {
        self.listen(port);
        let o = self.valid_opts(opts);
        match self.listen_opts.binary_search_by_key(&port, |e| e.0) {
            Ok(k) => self.listen_opts[k].1 = o,
            Err(k) => self.listen_opts.insert(k, (port, o)),
        }
    }
    /// Stop accepting on `port`.
    pub fn unlisten(&mut self, port: u16) {
        self.listen[port as usize / 64] &= !(1 << (port % 64));
        if let Ok(k) = self.listen_opts.binary_search_by_key(&port, |e| e.0) {
            self.listen_opts.remove(k);
        }
    }
    /// Option set of flows accepted on `port`.
    #[inline]
    fn port_opts(&self, port: u16) -> u8 {
        if self.listen_opts.is_empty() {
            return 0;
        }
        self.listen_opts
            .binary_search_by_key(&port, |e| e.0)
            .map_or(0, |k| self.listen_opts[k].1)
    }
    #[inline]
    fn valid_opts(&self, o: OptsId) -> u8 {
        if (o.0 as usize) < self.opts.len() {
            o.0
        } else {
            0
        }
    }
    /// Adds an option set for [`TcpHost::connect_with`] / [`TcpHost::listen_with`]
    /// (values are sanitised, see [`FlowOpts::sanitised`]). An identical set already
    /// present is reused. None when the table holds 256 sets.
    pub fn add_flow_opts(&mut self, o: FlowOpts) -> Option<OptsId> {
        let o = o.sanitised();
        if let Some(k) = self.opts.iter().position(|e| *e == o) {
            return Some(OptsId(k as u8));
        }
        if self.opts.len() >= MAX_OPTS {
            return None;
        }
        self.opts.push(o);
        Some(OptsId((self.opts.len() - 1) as u8))
    }
    /// The option set `id` (the default set for unknown ids).
    pub fn flow_opts(&self, id: OptsId) -> &FlowOpts {
        &self.opts[self.valid_opts(id) as usize]
    }
    /// Options of a flow's set.
    #[inline(always)]
    fn fo(&self, i: u32) -> &FlowOpts {
        &self.opts[self.flows[i as usize].opt as usize]
    }
    #[inline]
    fn listening(&self, port: u16) -> bool {
        self.listen[port as usize / 64] & (1 << (port % 64)) != 0
    }

    // ------------------------------------------------------------------ flow slab

    fn alloc_flow(&mut self, key: FlowKey, h: u64, opt: u8) -> Option<u32> {
        let i = if let Some(i) = self.free.pop() {
            i
        } else if self.flows.len() < self.cfg.max_flows as usize {
            self.flows.push(Tcb::default());
            self.flows.len() as u32 - 1
        } else {
            self.counters.tcps_flowfull += 1;
            return None;
        };
        if self.table.insert(key, h, i).is_err() {
            self.free.push(i);
            self.counters.tcps_flowfull += 1;
            return None;
        }
        let o = self.opts[opt as usize];
        self.flows[i as usize] = Tcb {
            key,
            flags: if o.nagle { F_NAGLE } else { 0 },
            mss: o.mss,
            opt,
            ooo: NO_SIDE,
            sb: NO_SIDE,
            rtt: Rtt::new(&self.cfg.rto),
            cc: NewReno::new(o.init_cwnd, o.mss as u32, 0),
            ..Tcb::default()
        };
        self.active += 1;
        Some(i)
    }

    /// Releases a flow; reports `reason` to the app unless already reported.
    fn close_flow<A: TcpApp>(&mut self, i: u32, reason: CloseReason, app: &mut A) {
        let t = &mut self.flows[i as usize];
        if t.state == State::Closed {
            return;
        }
        let report = !t.has(F_REPORTED) && !t.has(F_HALF_OPEN);
        if t.has(F_HALF_OPEN) {
            self.half_open -= 1;
        }
        let key = t.key;
        let mut sq = t.sq;
        let ooo = t.ooo;
        let sb = t.sb;
        t.state = State::Closed;
        t.sq = SendQueue::default();
        t.ooo = NO_SIDE;
        t.sb = NO_SIDE;
        self.chunks.clear(&mut sq, &mut self.bufs);
        self.release_ooo(ooo);
        self.release_sb(sb);
        let h = self.table.hash(&key);
        self.table.remove(&key, h);
        self.wheel.cancel(i);
        self.free.push(i);
        self.active -= 1;
        self.counters.tcps_closed += 1;
        if report {
            app.on_closed(FlowId(i), reason);
        }
    }

    fn release_ooo(&mut self, o: u32) {
        if o != NO_SIDE {
            if let Some(q) = self.ooo[o as usize].as_mut() {
                q.clear();
            }
            self.ooo_free.push(o);
        }
    }

    fn release_sb(&mut self, b: u32) {
        if b != NO_SIDE {
            self.sboards[b as usize].clear();
            self.sb_free.push(b);
        }
    }

    fn get_sb(&mut self) -> u32 {
        if let Some(b) = self.sb_free.pop() {
            return b;
        }
        self.sboards.push(Scoreboard::default());
        self.sboards.len() as u32 - 1
    }

    fn get_ooo(&mut self) -> u32 {
        if let Some(o) = self.ooo_free.pop() {
            return o;
        }
        self.ooo
            .push(Some(Box::new(OooQueue::new(self.cfg.ooo_bytes as usize))));
        self.ooo.len() as u32 - 1
    }

    // ------------------------------------------------------------------ timers

    #[inline]
    fn rto_ns(&self, t: &Tcb) -> u64 {
        t.rtt.backed_off(t.backoff, &self.cfg.rto) as u64 * 1000
    }

    /// Arms the wheel with the earliest of the flow's deadlines, lazily: the wheel is only
    /// re-armed when a deadline moves earlier; later deadlines are found at expiry.
    #[inline]
    fn schedule(&mut self, i: u32) {
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

    fn set_idle_timer(&mut self, i: u32) {
        let now = self.now;
        let ka = self.cfg.keepalive;
        let t = &mut self.flows[i as usize];
        if t.snd_una != t.snd_max {
            return;
        }
        if t.sq.len > 0 && t.snd_wnd == 0 && !t.fin_pending() {
            return; // persist timer stays
        }
        t.rexmt_at = match (ka, t.state) {
            (Some((idle, _, _)), State::Established) => now + idle,
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
        for &i in &exp {
            self.on_timer(i, app, tx);
        }
        self.expired = exp;
    }

    /// Resumes output of flows that stopped on a full TX sink (oldest first), until
    /// the sink is full again. [`TcpHost::poll`] does this too; a driver whose TX ring
    /// drains between polls can call it directly. Returns how many flows remain blocked.
    pub fn tx_resume<S: TxSink>(&mut self, now: u64, tx: &mut S) -> usize {
        self.now = now;
        self.resume_blocked(tx);
        self.tx_blocked.len()
    }

    fn resume_blocked<S: TxSink>(&mut self, tx: &mut S) {
        // At most one pass over the entries present now: a flow that blocks again is
        // re-queued at the back and ends the pass (the sink is full).
        for _ in 0..self.tx_blocked.len() {
            let Some(i) = self.tx_blocked.pop_front() else {
                break;
            };
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
    fn mark_tx_blocked(&mut self, i: u32) {
        let t = &mut self.flows[i as usize];
        if !t.has(F_TX_BLOCKED) {
            t.flags |= F_TX_BLOCKED;
            self.tx_blocked.push_back(i);
        }
    }

    fn on_timer<A: TcpApp, S: TxSink>(&mut self, i: u32, app: &mut A, tx: &mut S) {
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
    }

    /// Retransmission-class timer; returns true if the flow is gone.
    fn on_rexmt_timer<A: TcpApp, S: TxSink>(&mut self, i: u32, app: &mut A, tx: &mut S) -> Gone {
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
                t.backoff += 1;
                if t.backoff > self.cfg.max_syn_retries {
                    self.counters.tcps_conndrops += 1;
                    self.counters.tcps_rexmttimeo += 1;
                    self.close_flow(i, CloseReason::Timeout, app);
                    return true;
                }
                t.flags &= !F_TIMING;
                self.counters.tcps_rexmttimeo += 1;
                self.send_syn(i, tx);
                let t = &self.flows[i as usize];
                let rto = self.rto_ns(t);
                self.flows[i as usize].rexmt_at = now + rto;
            }
            _ if t.snd_una != t.snd_max => {
                // RFC 6298 §5.4-5.6: retransmit, back off, restart.
                t.backoff += 1;
                self.counters.tcps_rexmttimeo += 1;
                if t.backoff > cfg_retries {
                    self.counters.tcps_timeoutdrop += 1;
                    self.send_rst_for(i, tx);
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
                let t = &mut self.flows[i as usize];
                t.snd_nxt = t.snd_una;
                t.flags &= !F_TIMING; // Karn
                let rto = self.rto_ns(&self.flows[i as usize]);
                self.flows[i as usize].rexmt_at = now + rto;
                self.output(i, tx);
            }
            _ if t.sq.len > 0 && t.snd_wnd == 0 => {
                // Persist: probe the zero window with one byte (RFC 9293 §3.8.6.1).
                self.counters.tcps_persisttimeo += 1;
                t.backoff = t.backoff.saturating_add(1).min(cfg_retries);
                t.flags |= F_FORCE;
                self.counters.tcps_sndprobe += 1;
                self.output(i, tx);
                let t = &self.flows[i as usize];
                let rto = self.rto_ns(t);
                let t = &mut self.flows[i as usize];
                if t.rexmt_at == 0 {
                    t.rexmt_at = now + rto;
                }
            }
            State::Established => {
                if let Some((_, intvl, probes)) = self.cfg.keepalive {
                    self.counters.tcps_keeptimeo += 1;
                    if t.backoff >= probes {
                        self.counters.tcps_keepdrops += 1;
                        self.send_rst_for(i, tx);
                        self.close_flow(i, CloseReason::Timeout, app);
                        return true;
                    }
                    t.backoff += 1;
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

    // ------------------------------------------------------------------ output

    /// Our timestamp clock: milliseconds (RFC 7323 §5.4 allows 1 ms - 1 s per tick).
    #[inline]
    fn ts_now(&self) -> u32 {
        (self.now / 1_000_000) as u32 | 1
    }

    /// Timestamp option block (NOP, NOP, TS) for flow `i`.
    #[inline]
    fn ts_opts(&self, i: u32) -> [u8; 12] {
        let t = &self.flows[i as usize];
        let mut o = [1, 1, 8, 10, 0, 0, 0, 0, 0, 0, 0, 0];
        o[4..8].copy_from_slice(&self.ts_now().to_be_bytes());
        o[8..12].copy_from_slice(&t.ts_recent.to_be_bytes());
        o
    }

    /// Options for a non-SYN segment of flow `i`: timestamps (RFC 7323) and, while we hold
    /// out-of-order data, SACK blocks (RFC 2018 §4). Returns the length used in `buf`.
    #[inline(always)]
    fn seg_opts(&self, i: u32, buf: &mut [u8; 40]) -> usize {
        if self.flows[i as usize].flags & (F_TS | F_SACK) == 0 {
            return 0;
        }
        self.seg_opts_negotiated(i, buf)
    }

    fn seg_opts_negotiated(&self, i: u32, buf: &mut [u8; 40]) -> usize {
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

    #[inline]
    fn adv_wnd(&self, i: u32) -> u16 {
        let t = &self.flows[i as usize];
        let rcv_wnd = self.opts[t.opt as usize].rcv_wnd;
        let w = if t.has(F_WSCALE) {
            rcv_wnd >> t.rcv_wscale
        } else {
            rcv_wnd
        };
        w.min(65_535) as u16
    }

    /// Writes one segment into a frame from `tx`. Payload, if any, is copied once from the
    /// flow's referenced buffers into the frame. Returns false if no buffer was available.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn write_seg<S: TxSink>(
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
        let plen = data.map_or(0, |d| d.2 as usize);
        let flen = HDRS_LEN + opts.len() + plen;
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
        let Some(buf) = tx.alloc(flen) else {
            self.counters.tcps_txfull += 1;
            return false;
        };
        if buf.len() < flen {
            self.counters.tcps_txfull += 1;
            return false;
        }
        let (off, hdr_sum) = pkt::write_headers_sum(buf, &h, opts, plen);
        let mut psum = 0u64;
        if let Some((sq, qoff, len)) = data {
            let dst = &mut buf[off..off + len as usize];
            if self.cfg.tx_checksum {
                psum = self.chunks.copy_out_sum(&sq, qoff, dst, &self.bufs).1;
            } else {
                self.chunks.copy_out(&sq, qoff, dst, &self.bufs);
            }
        }
        if self.cfg.tx_checksum {
            pkt::store_tcp_checksum(buf, hdr_sum, psum);
        } else {
            pkt::partial_tcp_checksum(buf, key.local_ip, key.remote_ip, flen);
        }
        tx.commit(flen);
        self.counters.tcps_sndtotal += 1;
        true
    }

    fn send_syn<S: TxSink>(&mut self, i: u32, tx: &mut S) {
        let tso = self.ts_opts(i);
        let t = &self.flows[i as usize];
        let fo = self.opts[t.opt as usize];
        let passive = t.state == State::SynReceived;
        let mut opts = [0u8; 24];
        opts[..4].copy_from_slice(&[2, 4, (fo.mss >> 8) as u8, fo.mss as u8]);
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

    fn send_rst_for<S: TxSink>(&mut self, i: u32, tx: &mut S) {
        let t = &self.flows[i as usize];
        if matches!(t.state, State::SynSent | State::TimeWait | State::Closed) {
            return;
        }
        let (key, seq, ack, o) = (t.key, t.snd_nxt, t.rcv_nxt, t.opt);
        self.counters.tcps_sndrst += 1;
        self.counters.tcps_sndctrl += 1;
        self.write_seg(tx, &key, o, seq, ack, RST | ACK, 0, &[], None);
    }

    /// Sends whatever the windows allow plus a pending ACK (BSD `tcp_output`).
    fn output<S: TxSink>(&mut self, i: u32, tx: &mut S) {
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

    /// [`TcpHost::output`] without the queue check (the resume pass: the flow's turn).
    fn output_now<S: TxSink>(&mut self, i: u32, tx: &mut S) {
        let now = self.now;
        loop {
            let wnd_adv = self.adv_wnd(i);
            let t = &mut self.flows[i as usize];
            let can_data = matches!(
                t.state,
                State::Established
                    | State::CloseWait
                    | State::FinWait1
                    | State::Closing
                    | State::LastAck
            );
            if !can_data {
                if t.has(F_ACKNOW) && t.state != State::Closed && t.state != State::SynSent {
                    t.flags &= !F_ACKNOW;
                    t.rcv_unacked = 0;
                    t.delack_at = 0;
                    let (key, seq, ack, o) = (t.key, t.snd_nxt, t.rcv_nxt, t.opt);
                    self.counters.tcps_sndacks += 1;
                    let mut ob = [0u8; 40];
                    let ol = self.seg_opts(i, &mut ob);
                    if !self.write_seg(tx, &key, o, seq, ack, ACK, wnd_adv, &ob[..ol], None) {
                        self.counters.tcps_sndacks -= 1;
                        self.flows[i as usize].flags |= F_ACKNOW;
                        self.mark_tx_blocked(i);
                    }
                }
                break;
            }
            let off = t.snd_nxt.wrapping_sub(t.snd_una);
            let qlen = t.sq.len;
            let avail = qlen.saturating_sub(off);
            let mss = t.mss as u32;
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
            let mut len = avail.min(usable).min(mss);
            // Nagle (RFC 9293 §3.7.4): hold a small segment while data is unacknowledged.
            if t.has(F_NAGLE) && len < mss && len < avail.max(1) && in_flight > 0 {
                len = 0;
            }
            if t.has(F_NAGLE)
                && len > 0
                && len < mss
                && len == avail
                && in_flight > 0
                && !t.has(F_FORCE)
            {
                len = 0;
            }
            let send_fin =
                t.fin_pending() && t.snd_nxt.wrapping_add(len) == t.fin_seq() && (len == avail);
            if len == 0 && !send_fin && !t.has(F_ACKNOW) {
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
            if len > 0 && !rexmit && !t.has(F_TIMING) {
                t.flags |= F_TIMING;
                t.rtt_seq = seqno;
                t.rtt_ts = (now / 1000) as u32;
                self.counters.tcps_segstimed += 1;
            }
            let data = if len > 0 { Some((sq, off, len)) } else { None };
            let mut ob = [0u8; 40];
            let ol = self.seg_opts(i, &mut ob);
            if !self.write_seg(tx, &key, o, seqno, ack, flags, wnd_adv, &ob[..ol], data) {
                self.mark_tx_blocked(i);
                break;
            }
            if len > 0 {
                if rexmit {
                    self.counters.tcps_sndrexmitpack += 1;
                    self.counters.tcps_sndrexmitbyte += len as u64;
                } else {
                    self.counters.tcps_sndpack += 1;
                    self.counters.tcps_sndbyte += len as u64;
                }
            } else if send_fin {
                self.counters.tcps_sndctrl += 1;
            } else {
                self.counters.tcps_sndacks += 1;
            }
            let rto = self.rto_ns(&self.flows[i as usize]);
            let t = &mut self.flows[i as usize];
            let was_idle = t.snd_una == t.snd_max;
            let used = len + send_fin as u32;
            t.snd_nxt = t.snd_nxt.wrapping_add(used);
            t.snd_max = seq::max(t.snd_max, t.snd_nxt);
            t.flags &= !(F_ACKNOW | F_ONE_SEG | F_FORCE);
            t.rcv_unacked = 0;
            t.delack_at = 0;
            // RFC 6298 §5.1: start the timer if not running (replacing an idle/persist timer).
            if used > 0 && (was_idle || t.rexmt_at == 0) {
                t.rexmt_at = now + rto;
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
        // Persist timer: data queued, window closed, nothing in flight.
        let rto = self.rto_ns(&self.flows[i as usize]);
        let t = &mut self.flows[i as usize];
        if t.snd_wnd == 0 && t.snd_una == t.snd_max && t.sq.len > 0 && t.rexmt_at == 0 {
            t.rexmt_at = now + rto;
        }
        self.schedule(i);
    }

    /// RFC 6675 §5 loss recovery transmission: while `cwnd - pipe >= SMSS`, send the next
    /// hole (NextSeg rule 1) or new data (rule 2).
    fn sack_output<S: TxSink>(&mut self, i: u32, tx: &mut S) {
        for _ in 0..64 {
            let t = &self.flows[i as usize];
            if t.sb == NO_SIDE {
                break;
            }
            let sb = &self.sboards[t.sb as usize];
            let mss = t.mss as u32;
            let pipe = sb.pipe(t.snd_una, t.snd_max, mss);
            if pipe + mss > t.cc.cwnd {
                break;
            }
            if let Some((x, len)) = sb.next_hole(t.snd_una, mss) {
                let sent = self.send_at(i, x, len.min(mss), tx);
                if sent == 0 {
                    break;
                }
                let t = &self.flows[i as usize];
                let b = t.sb as usize;
                let hr = &mut self.sboards[b].high_rxt;
                *hr = seq::max(*hr, x.wrapping_add(sent));
            } else {
                // New data, if the receive window allows.
                let t = &mut self.flows[i as usize];
                let una = t.snd_una;
                if t.snd_max.wrapping_sub(una) >= t.snd_wnd
                    || t.snd_max.wrapping_sub(una) >= t.sq.len + t.fin_pending() as u32
                {
                    break;
                }
                let x = t.snd_max;
                let sent = self.send_at(i, x, mss, tx);
                if sent == 0 {
                    break;
                }
                let t = &mut self.flows[i as usize];
                t.snd_max = x.wrapping_add(sent);
                t.snd_nxt = t.snd_max;
            }
        }
        self.schedule(i);
    }

    /// Sends one segment at `seqno` (at most `max_len` bytes, plus FIN if it ends there)
    /// without moving SND.NXT; returns the sequence space used.
    fn send_at<S: TxSink>(&mut self, i: u32, seqno: u32, max_len: u32, tx: &mut S) -> u32 {
        let now = self.now;
        let wnd_adv = self.adv_wnd(i);
        let t = &self.flows[i as usize];
        let off = seqno.wrapping_sub(t.snd_una);
        let avail = t.sq.len.saturating_sub(off);
        let len = avail.min(max_len).min(t.mss as u32);
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
    fn retransmit_one<S: TxSink>(&mut self, i: u32, tx: &mut S) {
        let t = &mut self.flows[i as usize];
        let saved = t.snd_nxt;
        t.snd_nxt = t.snd_una;
        t.flags |= F_ONE_SEG;
        t.flags &= !F_TIMING; // Karn's rule
        self.output(i, tx);
        let t = &mut self.flows[i as usize];
        t.flags &= !F_ONE_SEG;
        t.snd_nxt = seq::max(saved, t.snd_nxt);
    }

    // ------------------------------------------------------------------ app calls

    /// Opens a connection (active open, RFC 9293 §3.10.1) with the default options. A
    /// flow in TIME_WAIT on the same 4-tuple is recycled (the new ISN comes from the
    /// RFC 6528 clock).
    #[allow(clippy::too_many_arguments)]
    pub fn connect<S: TxSink>(
        &mut self,
        now: u64,
        tx: &mut S,
        local_ip: u32,
        local_port: u16,
        remote_ip: u32,
        remote_port: u16,
    ) -> Result<FlowId, ConnectError> {
        let d = OptsId::DEFAULT;
        self.connect_with(now, tx, local_ip, local_port, remote_ip, remote_port, d)
    }

    /// [`TcpHost::connect`] with option set `opts` (an id from
    /// [`TcpHost::add_flow_opts`]; unknown ids mean the default set).
    #[allow(clippy::too_many_arguments)]
    pub fn connect_with<S: TxSink>(
        &mut self,
        now: u64,
        tx: &mut S,
        local_ip: u32,
        local_port: u16,
        remote_ip: u32,
        remote_port: u16,
        opts: OptsId,
    ) -> Result<FlowId, ConnectError> {
        let opt = self.valid_opts(opts);
        self.now = now;
        let key = FlowKey {
            local_ip,
            remote_ip,
            local_port,
            remote_port,
        };
        let h = self.table.hash(&key);
        if let Some(old) = self.table.find(&key, h) {
            if self.flows[old as usize].state == State::TimeWait {
                self.counters.tcps_twrecycled += 1;
                self.close_flow(old, CloseReason::Normal, &mut NoApp);
            } else {
                return Err(ConnectError::InUse);
            }
        }
        let i = self
            .alloc_flow(key, h, opt)
            .ok_or(ConnectError::NoResources)?;
        let iss = self
            .isn_key
            .isn(now, local_ip, local_port, remote_ip, remote_port);
        let t = &mut self.flows[i as usize];
        t.state = State::SynSent;
        t.snd_una = iss;
        t.snd_nxt = iss;
        t.snd_max = iss;
        t.cc.recover = iss;
        t.flags |= F_TIMING;
        t.rtt_seq = iss;
        t.rtt_ts = (now / 1000) as u32;
        self.counters.tcps_connattempt += 1;
        self.send_syn(i, tx);
        let rto = self.rto_ns(&self.flows[i as usize]);
        self.flows[i as usize].rexmt_at = now + rto;
        self.schedule(i);
        Ok(FlowId(i))
    }

    fn check_sendable(&self, f: FlowId) -> Result<u32, SendError> {
        let t = self.flows.get(f.0 as usize).ok_or(SendError::NoFlow)?;
        match t.state {
            State::Established | State::CloseWait | State::SynSent | State::SynReceived => {
                if t.has(F_FIN_QUEUED) {
                    Err(SendError::Closed)
                } else {
                    Ok(f.0)
                }
            }
            State::Closed => Err(SendError::NoFlow),
            _ => Err(SendError::Closed),
        }
    }

    fn queue(&mut self, i: u32, buf: BufId, off: u32, len: u32) -> Result<(), SendError> {
        let blen = self.bufs.get(buf).len() as u64;
        if off as u64 + len as u64 > blen {
            return Err(SendError::BadRange);
        }
        let t = &mut self.flows[i as usize];
        self.chunks
            .push(&mut t.sq, buf, off, len)
            .map_err(|_| SendError::QueueFull)
    }

    /// Queues `len` bytes of registered buffer `buf` at `off` and sends what the windows allow.
    pub fn send<S: TxSink>(
        &mut self,
        now: u64,
        tx: &mut S,
        f: FlowId,
        buf: BufId,
        off: u32,
        len: u32,
    ) -> Result<(), SendError> {
        self.now = now;
        let i = self.check_sendable(f)?;
        self.queue(i, buf, off, len)?;
        self.output(i, tx);
        Ok(())
    }

    /// Queues owned bytes (freed once acknowledged) and sends what the windows allow.
    pub fn send_owned<S: TxSink>(
        &mut self,
        now: u64,
        tx: &mut S,
        f: FlowId,
        data: Box<[u8]>,
    ) -> Result<(), SendError> {
        self.now = now;
        let i = self.check_sendable(f)?;
        let len = data.len() as u32;
        let id = self.bufs.register_owned(data);
        if let Err(e) = self.queue(i, id, 0, len) {
            self.bufs.unregister(id);
            return Err(e);
        }
        self.output(i, tx);
        Ok(())
    }

    fn do_close(&mut self, i: u32) -> bool {
        let t = &mut self.flows[i as usize];
        if t.has(F_FIN_QUEUED) {
            return false;
        }
        let next = match t.state {
            State::Established | State::SynReceived => State::FinWait1,
            State::CloseWait => State::LastAck,
            _ => return false,
        };
        if t.state == State::SynReceived {
            return false; // FIN after the handshake completes: unsupported edge, ignored
        }
        t.flags |= F_FIN_QUEUED;
        t.state = next;
        true
    }

    /// Closes the send side (FIN after the queued data; RFC 9293 §3.10.4). Closing a flow
    /// still in SYN_SENT releases it.
    pub fn close<A: TcpApp, S: TxSink>(&mut self, now: u64, app: &mut A, tx: &mut S, f: FlowId) {
        self.now = now;
        let Some(t) = self.flows.get(f.0 as usize) else {
            return;
        };
        if t.state == State::SynSent {
            self.close_flow(f.0, CloseReason::Aborted, app);
            return;
        }
        if self.do_close(f.0) {
            self.output(f.0, tx);
        }
    }

    /// Aborts a flow with a RST (RFC 9293 §3.10.5).
    pub fn abort<A: TcpApp, S: TxSink>(&mut self, now: u64, app: &mut A, tx: &mut S, f: FlowId) {
        self.now = now;
        if self.state(f) == State::Closed {
            return;
        }
        self.send_rst_for(f.0, tx);
        self.counters.tcps_drops += 1;
        self.close_flow(f.0, CloseReason::Aborted, app);
    }

    /// Applies the operations queued by a callback; returns true if the flow is gone.
    fn apply_ops<A: TcpApp, S: TxSink>(&mut self, i: u32, app: &mut A, tx: &mut S) -> Gone {
        match self.ctl.ops.as_slice() {
            [] => return false,
            // The common case (a callback queued one send): no queue juggling.
            &[Op::Send(b, off, len)] => {
                self.ctl.ops.clear();
                if self.check_sendable(FlowId(i)).is_ok() && self.queue(i, b, off, len).is_err() {
                    self.ctl.errors += 1;
                }
                return false;
            }
            _ => {}
        }
        let mut ops = std::mem::take(&mut self.ctl.ops);
        let mut gone = false;
        for op in ops.drain(..) {
            if gone {
                continue;
            }
            match op {
                Op::Send(b, off, len) => {
                    if self.check_sendable(FlowId(i)).is_ok() && self.queue(i, b, off, len).is_err()
                    {
                        self.ctl.errors += 1;
                    }
                }
                Op::SendOwned(data) => {
                    let len = data.len() as u32;
                    let id = self.bufs.register_owned(data);
                    if self.check_sendable(FlowId(i)).is_err() || self.queue(i, id, 0, len).is_err()
                    {
                        self.bufs.unregister(id);
                        self.ctl.errors += 1;
                    }
                }
                Op::Close => {
                    self.do_close(i);
                }
                Op::Abort => {
                    self.send_rst_for(i, tx);
                    self.counters.tcps_drops += 1;
                    self.close_flow(i, CloseReason::Aborted, app);
                    gone = true;
                }
            }
        }
        self.ctl.ops = ops;
        gone
    }

    #[inline]
    fn set_ctl(&mut self, i: u32) {
        let t = &self.flows[i as usize];
        self.ctl.flow = FlowId(i);
        self.ctl.key = t.key;
        self.ctl.passive = t.has(F_PASSIVE);
    }

    // ------------------------------------------------------------------ input

    /// Processes one received frame (Ethernet + IPv4 + TCP).
    pub fn rx<A: TcpApp, S: TxSink>(&mut self, now: u64, frame: &[u8], app: &mut A, tx: &mut S) {
        self.now = now;
        self.resume_first(tx);
        self.rx_one(now, frame, None, app, tx);
    }

    /// Flows that stopped on a full TX sink get the frames that came back before the
    /// segments this receive triggers do (FIFO fairness: otherwise busy flows would keep
    /// taking every freed frame and a blocked SYN could wait forever).
    #[inline]
    fn resume_first<S: TxSink>(&mut self, tx: &mut S) {
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
        for chunk in frames.chunks(B) {
            // Each frame's 4-tuple is read once and kept with its hash.
            let mut keys = [None::<(FlowKey, u64)>; B];
            for (k, f) in chunk.iter().enumerate() {
                if let Some(key) = pkt::peek_key(f) {
                    let h = self.table.hash(&key);
                    self.table.prefetch(h);
                    keys[k] = Some((key, h));
                }
            }
            for (key, h) in keys[..chunk.len()].iter().flatten() {
                if let Some(i) = self.table.find(key, *h) {
                    prefetch_lines(&self.flows[i as usize]);
                }
            }
            for (k, f) in chunk.iter().enumerate() {
                self.rx_one(now, f, keys[k].map(|(_, h)| h), app, tx);
            }
        }
    }

    #[inline]
    fn rx_one<A: TcpApp, S: TxSink>(
        &mut self,
        now: u64,
        frame: &[u8],
        hash: Option<u64>,
        app: &mut A,
        tx: &mut S,
    ) {
        self.now = now;
        self.counters.tcps_rcvtotal += 1;
        let seg = match pkt::parse_opt(frame, self.cfg.rx_checksum) {
            Ok(s) => s,
            Err(e) => {
                match e {
                    pkt::RxError::BadSum => self.counters.tcps_rcvbadsum += 1,
                    pkt::RxError::BadOff => self.counters.tcps_rcvbadoff += 1,
                    pkt::RxError::Short => self.counters.tcps_rcvshort += 1,
                    _ => self.counters.tcps_rcvnottcp += 1,
                }
                return;
            }
        };
        let key = FlowKey {
            local_ip: seg.dst_ip,
            remote_ip: seg.src_ip,
            local_port: seg.dst_port,
            remote_port: seg.src_port,
        };
        let h = match hash {
            Some(h) => h,
            None => self.table.hash(&key),
        };
        match self.table.find(&key, h) {
            Some(i) => self.segment(i, &seg, h, app, tx),
            None => {
                if seg.flags & (SYN | RST | ACK) == ACK
                    && self.cfg.syn_cookies
                    && self.listening(seg.dst_port)
                {
                    if let Some(i) = self.accept_cookie(&seg, key, h) {
                        self.segment(i, &seg, h, app, tx);
                        return;
                    }
                }
                self.no_flow(&seg, key, h, tx)
            }
        }
    }

    fn send_rst_reply<S: TxSink>(&mut self, seg: &Segment, key: &FlowKey, opt: u8, tx: &mut S) {
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

    fn no_flow<S: TxSink>(&mut self, seg: &Segment, key: FlowKey, h: u64, tx: &mut S) {
        if seg.flags & RST != 0 {
            return;
        }
        if seg.flags & (SYN | ACK | FIN) == SYN && self.listening(seg.dst_port) {
            self.passive_open(seg, key, h, tx);
            return;
        }
        self.counters.tcps_noconn += 1;
        self.send_rst_reply(seg, &key, 0, tx);
    }

    /// SYN cookie (RFC 4987 §3.6): 5 bits of a 64 s counter, 3 bits of MSS index and 24 bits
    /// of a keyed hash of the 4-tuple, the peer's ISN and the counter.
    fn cookie(&self, key: &FlowKey, peer_isn: u32, t: u32, mss_idx: u32) -> u32 {
        let m0 = (key.local_ip as u64) << 32 | key.remote_ip as u64;
        let m1 = ((key.local_port as u64) << 16 | key.remote_port as u64) << 32 | peer_isn as u64;
        let h = crate::isn::siphash24(
            self.isn_key.k0 ^ 0xc00c_1e00 ^ t as u64,
            self.isn_key.k1,
            m0,
            m1,
        ) as u32;
        (t & 31) << 27 | (mss_idx & 7) << 24 | (h & 0x00ff_ffff)
    }

    fn cookie_clock(&self) -> u32 {
        (self.now / 64_000_000_000) as u32
    }

    fn send_cookie<S: TxSink>(&mut self, seg: &Segment, key: FlowKey, tx: &mut S) {
        let o = pkt::parse_opts(seg.opts);
        let opt = self.port_opts(key.local_port);
        let fo = self.opts[opt as usize];
        let peer_mss = if o.mss == 0 { 536 } else { o.mss };
        let idx = COOKIE_MSS
            .iter()
            .rposition(|&m| m <= peer_mss.min(fo.mss))
            .unwrap_or(0) as u32;
        let c = self.cookie(&key, seg.seq, self.cookie_clock(), idx);
        let m = fo.mss;
        let opts = [2, 4, (m >> 8) as u8, m as u8];
        let wnd = fo.rcv_wnd.min(65_535) as u16;
        self.counters.tcps_sc_sendcookie += 1;
        self.counters.tcps_sndctrl += 1;
        self.write_seg(
            tx,
            &key,
            opt,
            c,
            seg.seq.wrapping_add(1),
            SYN | ACK,
            wnd,
            &opts,
            None,
        );
    }

    /// Validates the ACK of a SYN cookie; on success creates the flow (in SYN-RECEIVED,
    /// completed by the normal ACK processing) and returns its index.
    fn accept_cookie(&mut self, seg: &Segment, key: FlowKey, h: u64) -> Option<u32> {
        let c = seg.ack.wrapping_sub(1);
        let peer_isn = seg.seq.wrapping_sub(1);
        let now_t = self.cookie_clock();
        let t = c >> 27;
        let age = (now_t & 31).wrapping_sub(t) & 31;
        if age > 1 {
            return None;
        }
        let idx = (c >> 24) & 7;
        if self.cookie(&key, peer_isn, now_t.wrapping_sub(age), idx) != c {
            return None;
        }
        let opt = self.port_opts(key.local_port);
        let i = self.alloc_flow(key, h, opt)?;
        self.counters.tcps_sc_recvcookie += 1;
        let fo = self.opts[opt as usize];
        let mss = COOKIE_MSS[idx as usize].min(fo.mss);
        let init = fo.init_cwnd;
        let t = &mut self.flows[i as usize];
        t.state = State::SynReceived;
        t.flags |= F_PASSIVE;
        t.rcv_nxt = seg.seq;
        t.snd_una = c;
        t.snd_nxt = c.wrapping_add(1);
        t.snd_max = c.wrapping_add(1);
        t.mss = mss;
        t.cc = NewReno::new(init, mss as u32, c);
        t.snd_wl1 = peer_isn;
        t.snd_wl2 = c;
        Some(i)
    }

    /// LISTEN state, SYN arrival (RFC 9293 §3.10.7.2).
    fn passive_open<S: TxSink>(&mut self, seg: &Segment, key: FlowKey, h: u64, tx: &mut S) {
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
        let iss = self.isn_key.isn(
            self.now,
            key.local_ip,
            key.local_port,
            key.remote_ip,
            key.remote_port,
        );
        let o = pkt::parse_opts(seg.opts);
        let cfg_ws = fo.wscale;
        let cfg_ts = fo.timestamps;
        let ts_now = self.ts_now();
        let mss = if o.mss == 0 { 536 } else { o.mss }.min(fo.mss).max(64);
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
        t.mss = mss;
        t.snd_wnd = seg.wnd as u32;
        t.snd_wl1 = seg.seq;
        t.snd_wl2 = iss;
        if let (Some(peer), Some(ours)) = (o.wscale, cfg_ws) {
            t.flags |= F_WSCALE;
            t.snd_wscale = peer;
            t.rcv_wscale = ours.min(14);
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
        self.send_syn(i, tx);
        let rto = self.rto_ns(&self.flows[i as usize]);
        self.flows[i as usize].rexmt_at = now + rto;
        self.schedule(i);
    }

    /// SYN-SENT state processing (RFC 9293 §3.10.7.3).
    fn syn_sent<A: TcpApp, S: TxSink>(&mut self, i: u32, seg: &Segment, app: &mut A, tx: &mut S) {
        let now = self.now;
        let fo = *self.fo(i);
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
                self.close_flow(i, CloseReason::Refused, app);
            }
            return;
        }
        if seg.flags & SYN == 0 {
            return;
        }
        let o = pkt::parse_opts(seg.opts);
        let mss = if o.mss == 0 { 536 } else { o.mss }.min(fo.mss).max(64);
        t.rcv_nxt = seg.seq.wrapping_add(1);
        t.mss = mss;
        if let (Some(peer), Some(ours)) = (o.wscale, fo.wscale) {
            t.flags |= F_WSCALE;
            t.snd_wscale = peer;
            t.rcv_wscale = ours.min(14);
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
        t.snd_wnd = seg.wnd as u32; // never scaled in a SYN
        t.snd_wl1 = seg.seq;
        t.snd_wl2 = seg.ack;
        if has_ack {
            t.snd_una = seg.ack;
            if t.has(F_TIMING) && t.backoff == 0 {
                let r = ((now / 1000) as u32).wrapping_sub(t.rtt_ts);
                t.rtt.sample(r, &self.cfg.rto);
                self.counters.tcps_rttupdated += 1;
            }
            t.flags &= !F_TIMING;
            t.backoff = 0;
            t.rexmt_at = 0;
            t.state = State::Established;
            t.flags |= F_ACKNOW;
            self.counters.tcps_connects += 1;
            self.set_idle_timer(i);
            self.set_ctl(i);
            app.on_connected(&mut self.ctl, FlowId(i));
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

    fn send_syn_ack_simultaneous<S: TxSink>(&mut self, i: u32, tx: &mut S) {
        // Same segment as a passive SYN-ACK (seq = ISS, ack = RCV.NXT).
        self.send_syn(i, tx);
    }

    /// Processing for every synchronized state plus SYN-RECEIVED (RFC 9293 §3.10.7.4).
    /// TS.Recent update of the header-prediction path (RFC 7323 §4.3 / §5.3): the segment
    /// is in order (SEG.SEQ = RCV.NXT) and its TSval >= TS.Recent, so the slow path would
    /// record it; nothing to do without a timestamp.
    #[inline]
    fn fast_ts_recent(&mut self, i: u32, o: &pkt::TcpOpts) {
        if let Some((tsval, _)) = o.ts {
            let now_ms = (self.now / 1_000_000) as u32;
            let t = &mut self.flows[i as usize];
            t.ts_recent = tsval;
            t.ts_recent_age = now_ms;
        }
    }

    fn segment<A: TcpApp, S: TxSink>(
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
                && ((seg.wnd as u32) << t.snd_wscale) == t.snd_wnd
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
                        self.output(i, tx);
                    }
                    return;
                }
                if !seg.payload.is_empty()
                    && seg.ack == t.snd_una
                    && seg.payload.len() as u32 <= self.opts[t.opt as usize].rcv_wnd
                {
                    self.counters.tcps_preddat += 1;
                    self.fast_ts_recent(i, &fast_opts);
                    if !self.deliver_in_order(i, seg.payload, app, tx) {
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
                    if !self.deliver_in_order(i, seg.payload, app, tx) {
                        self.output(i, tx);
                    }
                    return;
                }
            }
        }
        let listening = self.listening(seg.dst_port);
        let t = &mut self.flows[i as usize];
        // TIME_WAIT reuse: a new SYN above RCV.NXT may reopen the 4-tuple (RFC 9293 §3.6.1 / RFC 6191 spirit).
        if state == State::TimeWait
            && flags & (SYN | ACK | RST) == SYN
            && seq::gt(seg.seq, t.rcv_nxt)
            && listening
        {
            self.counters.tcps_twrecycled += 1;
            let key = t.key;
            self.close_flow(i, CloseReason::Normal, app);
            self.passive_open(seg, key, h, tx);
            return;
        }
        // Retransmitted SYN in SYN-RECEIVED: resend the SYN-ACK.
        if state == State::SynReceived
            && flags & (SYN | ACK | RST) == SYN
            && seg.seq.wrapping_add(1) == t.rcv_nxt
        {
            self.send_syn(i, tx);
            return;
        }

        // RFC 7323 §5.3: PAWS, and TS.Recent update.
        let opts = if t.flags & (F_TS | F_SACK) != 0 && !seg.opts.is_empty() {
            pkt::parse_opts(seg.opts)
        } else {
            pkt::TcpOpts::default()
        };
        if t.has(F_TS) {
            if let Some((tsval, _)) = opts.ts {
                let now_ms = (now / 1_000_000) as u32;
                let idle_24d = now_ms.wrapping_sub(t.ts_recent_age) > 24 * 86_400_000;
                if flags & RST == 0 && seq::lt(tsval, t.ts_recent) && !idle_24d {
                    self.counters.tcps_pawsdrop += 1;
                    self.counters.tcps_rcvduppack += 1;
                    t.flags |= F_ACKNOW;
                    self.output(i, tx);
                    return;
                }
                if seq::le(seg.seq, t.rcv_nxt) && seq::ge(tsval, t.ts_recent) || idle_24d {
                    t.ts_recent = tsval;
                    t.ts_recent_age = now_ms;
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
                t.flags |= F_ACKNOW;
                self.output(i, tx);
            }
            return;
        }

        // 2. RST (RFC 5961 §3.2: exact match resets, otherwise challenge ACK).
        if flags & RST != 0 {
            if seg.seq == t.rcv_nxt {
                self.counters.tcps_rcvrst += 1;
                let reason = match state {
                    State::SynReceived => {
                        self.counters.tcps_conndrops += 1;
                        CloseReason::Refused
                    }
                    State::Closing | State::LastAck | State::TimeWait => CloseReason::Normal,
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

        // 5. ACK field.
        if flags & ACK == 0 {
            return;
        }
        let t = &mut self.flows[i as usize];
        if state == State::SynReceived {
            if seq::le(seg.ack, t.snd_una) || seq::gt(seg.ack, t.snd_max) {
                let (key, o) = (t.key, t.opt);
                self.send_rst_reply(seg, &key, o, tx);
                return;
            }
            // SYN acked: ESTABLISHED.
            t.state = State::Established;
            if t.has(F_HALF_OPEN) {
                t.flags &= !F_HALF_OPEN;
                self.half_open -= 1;
            }
            if t.has(F_TIMING) && t.backoff == 0 {
                let r = ((now / 1000) as u32).wrapping_sub(t.rtt_ts);
                t.rtt.sample(r, &self.cfg.rto);
                self.counters.tcps_rttupdated += 1;
            }
            t.flags &= !F_TIMING;
            t.backoff = 0;
            t.snd_una = t.snd_una.wrapping_add(1);
            t.rexmt_at = 0;
            t.snd_wnd = (seg.wnd as u32) << t.snd_wscale;
            t.snd_wl1 = seg.seq;
            t.snd_wl2 = seg.ack;
            if t.has(F_PASSIVE) {
                self.counters.tcps_accepts += 1;
            }
            self.counters.tcps_connects += 1;
            self.set_idle_timer(i);
            self.set_ctl(i);
            app.on_connected(&mut self.ctl, FlowId(i));
            if self.apply_ops(i, app, tx) {
                return;
            }
        }
        if self.process_ack(i, seg, &opts, app, tx) {
            return;
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
                if self.deliver_in_order(i, payload, app, tx) {
                    return;
                }
            } else {
                // Out of order: queue and send an immediate duplicate ACK (RFC 5681 §4.2).
                self.counters.tcps_rcvoopack += 1;
                self.counters.tcps_rcvoobyte += payload.len() as u64;
                let t = &mut self.flows[i as usize];
                if t.ooo == NO_SIDE {
                    let o = self.get_ooo();
                    self.flows[i as usize].ooo = o;
                }
                let t = &mut self.flows[i as usize];
                // Slots are never emptied (pooled), so the None arm is unreachable in practice.
                let empty = match self.ooo[t.ooo as usize].as_mut() {
                    Some(q) => {
                        match q.insert(t.rcv_nxt, sseq, payload) {
                            OooInsert::Full => self.counters.tcps_rcvoopackdrop += 1,
                            OooInsert::Duplicate => self.counters.tcps_rcvduppack += 1,
                            OooInsert::Stored => {}
                        }
                        q.is_empty()
                    }
                    None => true,
                };
                if empty {
                    let o = t.ooo;
                    t.ooo = NO_SIDE;
                    self.release_ooo(o);
                }
                self.flows[i as usize].flags |= F_ACKNOW;
            }
        }

        // 8. FIN (in sequence, or an earlier out-of-order FIN now reached).
        let t = &mut self.flows[i as usize];
        let fin_end = seg.seq.wrapping_add(seg.payload.len() as u32);
        if flags & FIN != 0 && seq::gt(fin_end, t.rcv_nxt) && t.ooo != NO_SIDE && data_state {
            if let Some(q) = self.ooo[t.ooo as usize].as_mut() {
                q.fin = Some(fin_end);
            }
        }
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
        self.output(i, tx);
    }

    /// Delivers in-order bytes (and then any out-of-order bytes they unblock). Returns true
    /// if the flow is gone.
    fn deliver_in_order<A: TcpApp, S: TxSink>(
        &mut self,
        i: u32,
        payload: &[u8],
        app: &mut A,
        tx: &mut S,
    ) -> Gone {
        let now = self.now;
        let t = &mut self.flows[i as usize];
        let len = payload.len() as u32;
        t.rcv_nxt = t.rcv_nxt.wrapping_add(len);
        t.rcv_unacked += len;
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
                if q.is_empty() {
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
            if !b.is_empty() {
                app.on_data(&mut self.ctl, FlowId(i), b);
            }
            if self.apply_ops(i, app, tx) {
                return true;
            }
        }
        // Delayed ACK (RFC 9293 §3.8.6.3, RFC 5681 §4.2): ACK at least every second full
        // segment, immediately when a gap was filled, otherwise within the delack timeout.
        let (delack, our_mss) = (self.fo(i).delack_ns, self.fo(i).mss);
        let t = &mut self.flows[i as usize];
        // A full-sized segment from the peer: our advertised MSS less the timestamp option.
        let rcv_mss = (our_mss as u32).saturating_sub(if t.has(F_TS) { 12 } else { 0 });
        if filled_gap || t.ooo != NO_SIDE || delack == 0 || t.rcv_unacked >= 2 * rcv_mss {
            t.flags |= F_ACKNOW;
        } else if t.delack_at == 0 {
            t.delack_at = now + delack;
        }
        false
    }

    /// Challenge ACK (RFC 5961 §3.2, §4.2, §5.2), rate limited per host (§7).
    fn challenge_ack<S: TxSink>(&mut self, i: u32, tx: &mut S) {
        let sec = self.now / 1_000_000_000;
        if sec != self.challenge_sec {
            self.challenge_sec = sec;
            self.challenge_count = 0;
        }
        if self.challenge_count >= self.cfg.challenge_ack_limit {
            self.counters.tcps_challengeack_limited += 1;
            return;
        }
        self.challenge_count += 1;
        self.counters.tcps_challengeack += 1;
        self.flows[i as usize].flags |= F_ACKNOW;
        self.output(i, tx);
    }

    fn enter_time_wait<A: TcpApp>(&mut self, i: u32, app: &mut A) {
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
        if report {
            app.on_closed(FlowId(i), CloseReason::Normal);
        }
    }

    /// ACK processing (RFC 9293 §3.10.7.4 fifth check, RFC 5961 §5, RFC 6298, RFC 6582).
    /// Returns true if processing of this segment must stop (flow gone or segment dropped).
    fn process_ack<A: TcpApp, S: TxSink>(
        &mut self,
        i: u32,
        seg: &Segment,
        opts: &pkt::TcpOpts,
        app: &mut A,
        tx: &mut S,
    ) -> Gone {
        let now = self.now;
        let thresh = self.fo(i).rexmt_thresh;
        let ts_ecr = if self.flows[i as usize].has(F_TS) {
            opts.ts.map_or(0, |x| x.1)
        } else {
            0
        };
        // RFC 2018 §3: record SACK blocks in the scoreboard.
        if opts.sack_n > 0 && self.flows[i as usize].has(F_SACK) {
            if self.flows[i as usize].sb == NO_SIDE {
                let b = self.get_sb();
                let t = &mut self.flows[i as usize];
                t.sb = b;
                self.sboards[b as usize].high_rxt = t.snd_una;
            }
            let t = &self.flows[i as usize];
            let (una, max) = (seq::max(t.snd_una, seg.ack), t.snd_max);
            let sb = &mut self.sboards[t.sb as usize];
            for &(a, b) in &opts.sack[..opts.sack_n as usize] {
                sb.add(una, max, a, b);
            }
        }
        let t = &mut self.flows[i as usize];
        let ack = seg.ack;
        if seq::gt(ack, t.snd_max) {
            // Acks something not yet sent: ACK and drop (RFC 9293 / RFC 5961 §5.2).
            self.counters.tcps_rcvacktoomuch += 1;
            t.flags |= F_ACKNOW;
            self.output(i, tx);
            return true; // segment dropped (flow remains)
        }
        // RFC 5961 §5.2: an ACK older than SND.UNA - MAX.SND.WND is not acceptable.
        let max_wnd = t.snd_wnd.max(65_535);
        if seq::lt(ack, t.snd_una.wrapping_sub(max_wnd)) {
            self.challenge_ack(i, tx);
            return true;
        }
        let t = &mut self.flows[i as usize];
        let wnd = (seg.wnd as u32) << t.snd_wscale;
        if seq::le(ack, t.snd_una) {
            // Duplicate ACK per RFC 5681 §2: no data, no window change, outstanding data.
            if ack == t.snd_una
                && seg.payload.is_empty()
                && seg.flags & FIN == 0
                && wnd == t.snd_wnd
                && t.snd_una != t.snd_max
            {
                self.counters.tcps_rcvdupack += 1;
                let (una, max, mss, fl) = (t.snd_una, t.snd_max, t.mss as u32, t.flight());
                let sack = t.sb != NO_SIDE;
                match t.cc.on_dupack_thresh(una, max, mss, fl, thresh) {
                    DupAck::FastRetransmit if sack => {
                        // RFC 6675 §5 step 4: cwnd = ssthresh, then send by pipe.
                        self.counters.tcps_fastrexmt += 1;
                        t.cc.cwnd = t.cc.ssthresh;
                        self.sboards[t.sb as usize].high_rxt = una;
                        self.sack_output(i, tx);
                    }
                    DupAck::FastRetransmit => {
                        self.counters.tcps_fastrexmt += 1;
                        t.rexmt_at = 0;
                        self.retransmit_one(i, tx);
                    }
                    DupAck::Inflate if sack => {
                        t.cc.cwnd = t.cc.cwnd.saturating_sub(mss); // no inflation with SACK
                        self.sack_output(i, tx);
                    }
                    DupAck::Inflate => self.output(i, tx),
                    DupAck::Nothing => {}
                }
            } else if ack == t.snd_una && seg.payload.is_empty() && wnd != t.snd_wnd {
                self.counters.tcps_rcvwinupd += 1;
            }
        } else {
            // New data acknowledged.
            let acked = ack.wrapping_sub(t.snd_una);
            self.counters.tcps_rcvackpack += 1;
            if ts_ecr != 0 {
                // RFC 7323 §4.1: RTT from the echoed timestamp (valid for retransmissions too).
                let r_ms = ((now / 1_000_000) as u32).wrapping_sub(ts_ecr);
                if r_ms < 3_600_000 {
                    t.rtt.sample(r_ms.max(1) * 1000, &self.cfg.rto);
                    self.counters.tcps_rttupdated += 1;
                }
                t.flags &= !F_TIMING;
            } else if t.has(F_TIMING) && seq::gt(ack, t.rtt_seq) {
                let r = ((now / 1000) as u32).wrapping_sub(t.rtt_ts);
                t.rtt.sample(r, &self.cfg.rto);
                t.flags &= !F_TIMING;
                self.counters.tcps_rttupdated += 1;
            }
            let fin_acked = t.fin_pending() && seq::gt(ack, t.fin_seq());
            let data_acked = (acked - fin_acked as u32).min(t.sq.len);
            self.counters.tcps_rcvackbyte += data_acked as u64;
            let mut sq = t.sq;
            self.chunks.consume(&mut sq, data_acked, &mut self.bufs);
            let t = &mut self.flows[i as usize];
            t.sq = sq;
            t.snd_una = ack;
            if seq::lt(t.snd_nxt, ack) {
                t.snd_nxt = ack;
            }
            t.backoff = 0;
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
            // RFC 6298 §5.2/5.3: stop or restart the retransmission timer.
            if t.snd_una == t.snd_max {
                t.rexmt_at = 0;
                self.set_idle_timer(i);
            } else {
                let rto = self.rto_ns(&self.flows[i as usize]);
                self.flows[i as usize].rexmt_at = now + rto;
            }
            if r == NewAck::PartialRetransmit {
                if self.flows[i as usize].sb != NO_SIDE {
                    self.sack_output(i, tx);
                } else {
                    self.retransmit_one(i, tx);
                }
            }
            let t = &mut self.flows[i as usize];
            // Window update before callbacks so app sends see the new window.
            if seq::lt(t.snd_wl1, seg.seq) || (t.snd_wl1 == seg.seq && seq::le(t.snd_wl2, ack)) {
                t.snd_wnd = wnd;
                t.snd_wl1 = seg.seq;
                t.snd_wl2 = ack;
            }
            if data_acked > 0 {
                self.set_ctl(i);
                app.on_acked(&mut self.ctl, FlowId(i), data_acked);
                if self.apply_ops(i, app, tx) {
                    return true;
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
            t.snd_wnd = wnd;
            t.snd_wl1 = seg.seq;
            t.snd_wl2 = ack;
            if opened && t.sq.len > t.snd_nxt.wrapping_sub(t.snd_una) {
                if t.snd_una == t.snd_max {
                    t.rexmt_at = 0;
                    t.backoff = 0;
                }
                self.output(i, tx);
            }
        }
        false
    }
}

/// Prefetches the cache lines of `v` (a hint; never faults).
#[inline(always)]
fn prefetch_lines<T>(v: &T) {
    #[cfg(target_arch = "x86_64")]
    {
        let p = v as *const T as *const i8;
        let n = std::mem::size_of::<T>().div_ceil(64);
        for k in 0..n {
            // SAFETY: prefetch is a hint that never faults; the address lies inside `v`.
            #[allow(unused_unsafe)]
            unsafe {
                std::arch::x86_64::_mm_prefetch(
                    p.wrapping_add(k * 64),
                    std::arch::x86_64::_MM_HINT_T0,
                );
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = v;
}

/// An application that ignores every event (used internally when recycling flows).
struct NoApp;
impl TcpApp for NoApp {}
