//! The per-core TCP host: receives Ethernet/IPv4/TCP and Ethernet/IPv6/TCP frames, demultiplexes them to flows
//! through the 4-tuple table, runs the RFC 9293 state machine and the application
//! callbacks, and writes complete frames straight into caller-provided buffers
//! ([`TxSink`]). Timers live in one `squall_engine::TimerWheel` (token = slab index).
//!
//! Parts: `slab` (flow allocation, side tables), `timers`, `output`, `calls` (application
//! calls), `input` (rx, LISTEN, SYN-SENT), `cookies`, `segment`, `ack`, `icmp` (ICMP
//! errors: path MTU, unreachable destinations). This file holds the
//! configuration, the host structure, its constructor and accessors.

use squall_engine::TimerWheel;

use crate::addr6::{self, Addr6Table};

use crate::api::{CloseReason, ConnectError, Ctl, FlowId, FlowInfo, Op, SendError, TcpApp, TxSink};
use crate::cc::{DupAck, NewAck, NewReno};
use crate::counters::TcpCounters;
use crate::flowtable::{FlowKey, FlowTable};
use crate::isn::IsnKey;
use crate::ooo::{OooInsert, OooQueue};
use crate::opts::{FlowOpts, OptsId, MAX_OPTS};
use crate::pkt::{self, Segment, TxHdr, ACK, FIN, HDRS6_LEN, HDRS_LEN, PSH, RST, SYN, URG};
use crate::rtt::{RtoConfig, Rtt};
use crate::sack::Scoreboard;
use crate::sendq::{BufId, BufRegistry, ChunkPool, SendQueue};
use crate::seq;
use crate::tcb::*;
use std::collections::VecDeque;

mod ack;
mod calls;
mod cookies;
mod icmp;
mod input;
mod output;
mod segment;
mod slab;
mod timers;
mod tracing;

pub use icmp::IcmpError;

/// Host and TCP configuration.
#[derive(Clone, Debug)]
pub struct TcpConfig {
    /// Our MAC address.
    pub mac: [u8; 6],
    /// Static next-hop MAC for every outgoing frame.
    pub gateway_mac: [u8; 6],
    /// Maximum number of flows (slab and table size).
    pub max_flows: u32,
    /// Default option set of every flow (MSS, initial window, receive window, RFC 7323 /
    /// SACK offers, Nagle, delayed ACK, duplicate-ACK threshold, TTL, TOS): the set
    /// [`OptsId::DEFAULT`] used by [`TcpHost::connect`] and [`TcpHost::listen`]. Sanitised
    /// by [`TcpHost::new`] ([`FlowOpts::sanitised`]).
    pub opts: FlowOpts,
    /// Retransmission timeout bounds (RFC 6298).
    pub rto: RtoConfig,
    /// Retransmissions of a SYN / SYN-ACK before giving up.
    pub max_syn_retries: u8,
    /// Unanswered expiries before giving up: retransmission timeouts of data/FIN in a
    /// row without new data acknowledged, or zero-window probes in a row without an
    /// answer (a peer that answers its probes keeps a closed window as long as it likes,
    /// RFC 1122 §4.2.2.17).
    pub max_retries: u8,
    /// TIME_WAIT period (2*MSL; short by default for a generator), ns.
    pub time_wait_ns: u64,
    /// How long a flow in FIN_WAIT_2 may go without receiving data before it is dropped,
    /// ns. After [`TcpHost::close`] (a half-close: the application still gets
    /// `on_data`), the timer starts when our FIN is acknowledged and restarts with every
    /// segment that carries data, so a peer still sending is never cut; only a silent
    /// peer is (as Linux's `tcp_fin_timeout` bounds orphaned sockets).
    pub fin_wait2_ns: u64,
    /// Keepalive (RFC 1122 §4.2.3.6): (idle ns, interval ns, probes); None = off. Probes
    /// start after `idle` without an acceptable segment from the peer (data or ACK);
    /// any such segment, an answer to a probe included, restarts the idle period and the
    /// probe count; the flow is dropped after `probes` unanswered probes.
    pub keepalive: Option<(u64, u64, u8)>,
    /// Maximum half-open (SYN_RECEIVED) flows; beyond it SYNs get SYN cookies (or are
    /// dropped and counted when `syn_cookies` is off).
    pub max_half_open: u32,
    /// Challenge ACKs per second per host (RFC 5961 §7 rate limit). As in Linux (the fix
    /// of CVE-2016-5696), each second's budget is drawn uniformly from
    /// `[limit/2, limit*3/2)` (rounded as Linux does), so an off-path observer cannot
    /// count it down exactly. 0 = no challenge ACKs.
    pub challenge_ack_limit: u32,
    /// Per-flow limit on ACKs that answer invalid segments: out-of-window segments, PAWS
    /// drops, ACKs of unsent data and challenge ACKs go out at most once per this period
    /// per flow (Linux's `tcp_invalid_ratelimit`, 500 ms). Segments carrying data or a
    /// FIN are always answered (they may be genuine retransmissions). 0 = no limit.
    pub invalid_ratelimit_ns: u64,
    /// Answer SYNs with stateless SYN cookies when the half-open table is full (RFC 4987 §3.6).
    pub syn_cookies: bool,
    /// Capacity of a flow's out-of-order queue in bytes.
    pub ooo_bytes: u32,
    /// Bytes of out-of-order queues this host may hold at once, pooled queues included
    /// (each counts `ooo_bytes` rounded up to a power of two). Beyond it a flow that
    /// needs a queue has its out-of-order segment ACKed but not kept
    /// (`tcps_rcvoomemdrop`). 0 = automatic: 1/16 of what `max_flows` queues would take,
    /// at most 256 MiB but at least 8 queues.
    pub ooo_budget: u64,
    /// Secret for ISNs (RFC 6528), SYN cookies, the flow-table hash and the challenge-ACK
    /// budget. Anyone who knows it can predict ISNs and forge cookies: a host reachable
    /// from a network it does not control needs [`TcpConfig::random_seed`]; a fixed value
    /// (the default) makes runs reproducible, as simulations and tests want.
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
            opts: FlowOpts::default(),
            rto: RtoConfig::default(),
            max_syn_retries: 6,
            max_retries: 12,
            time_wait_ns: 1_000_000_000,
            fin_wait2_ns: 60_000_000_000,
            keepalive: None,
            max_half_open: 16_384,
            syn_cookies: true,
            challenge_ack_limit: 1000,
            invalid_ratelimit_ns: 500_000_000,
            ooo_bytes: 65_536,
            ooo_budget: 0,
            seed: 0x5157_4c4c_7463_7031,
            tx_checksum: true,
            rx_checksum: true,
        }
    }
}

impl TcpConfig {
    /// A secret for [`TcpConfig::seed`] from the operating system's random source
    /// (getrandom(2) on Linux). Fails only if the OS has no random source to offer.
    pub fn random_seed() -> std::io::Result<u64> {
        let mut b = [0u8; 8];
        getrandom::getrandom(&mut b).map_err(|e| std::io::Error::other(e.to_string()))?;
        Ok(u64::from_ne_bytes(b))
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
    /// Inside `rx_burst`: output after an ACK waits for the end of the burst.
    in_burst: bool,
    /// Flows whose output waits for the end of the receive burst (`F_OUT_DEFER`).
    deferred: Vec<u32>,
    chunks: ChunkPool,
    bufs: BufRegistry,
    /// Out-of-order queues by index; None = given back (index on `ooo_vacant`).
    ooo: Vec<Option<Box<OooQueue>>>,
    /// Allocated queues not in use (the pool).
    ooo_free: Vec<u32>,
    /// Indexes of `ooo` whose queue was freed.
    ooo_vacant: Vec<u32>,
    /// Queues allocated (in use or pooled) and the most `cfg.ooo_budget` allows.
    ooo_alloc: u32,
    ooo_max: u32,
    sboards: Vec<Scoreboard>,
    sb_free: Vec<u32>,
    listen: Vec<u64>,
    /// Listeners bound to addresses (`listen_at`), sorted: (port, address). A port
    /// listed here takes connections to these addresses only; `listen` (any address)
    /// removes its entries.
    listen_at: Vec<(u16, std::net::IpAddr)>,
    /// Option set of flows accepted on a port (sorted by port); ports not listed use
    /// the default set.
    listen_opts: Vec<(u16, u8)>,
    /// Per-flow option sets; index 0 is `cfg.opts`.
    opts: Vec<FlowOpts>,
    half_open: u32,
    isn_key: IsnKey,
    ip_id: u16,
    counters: TcpCounters,
    ctl: Ctl,
    now: u64,
    challenge_sec: u64,
    /// Challenge ACKs left in the current second (drawn at its start).
    challenge_left: u32,
    /// State of the generator behind the challenge-ACK budget (SplitMix64, keyed).
    rng: rand_xoshiro::SplitMix64,
    active: u32,
    /// IPv6 addresses of live flows, by the ids their keys hold.
    addr6: Addr6Table,
    /// `addr6.frees()` when the current burst's prefetch pass read its ids.
    hint_frees: u64,
    /// Flow tracing (None: off); fed only for flows with `F_TRACED`.
    trace: Option<Box<crate::trace::FlowTracer>>,
    /// The local addresses a segment for no connection may be answered on (a listener's
    /// SYN-ACK, a RST), IPv4 and IPv6 inclusive ranges.
    owned4: Vec<(u32, u32)>,
    owned6: Vec<(u128, u128)>,
    /// `set_owned` gave some address: the lists above are the host's (an empty one: none
    /// of that family); else any unicast address is answered on.
    owned_set: bool,
    /// Path MTUs learnt from ICMP errors, by destination (`icmp`).
    pmtu: icmp::PmtuCache,
    /// RCV.UP of the flows that received an urgent pointer (by flow index; the byte
    /// after the urgent data, RFC 6093): rare, so kept beside the control blocks.
    urgent: std::collections::HashMap<u32, u32>,
}

/// Bytes per token of `squall_engine::TimerWheel` (its node: deadline, backward link and
/// slot; its forward link).
pub const TIMER_NODE_BYTES: usize = TimerWheel::BYTES_PER_TOKEN;

/// Out-of-order queues `cfg` lets a host hold at once (`TcpConfig::ooo_budget`), at
/// least one.
fn ooo_queues(cfg: &TcpConfig) -> u32 {
    let each = cfg.ooo_bytes.max(16).next_power_of_two() as u64;
    let budget = match cfg.ooo_budget {
        0 => (cfg.max_flows.max(1) as u64 * each / 16)
            .min(256 << 20)
            .max(8 * each),
        b => b,
    };
    (budget / each).clamp(1, u32::MAX as u64) as u32
}

/// What `segment` processing should do after a callback.
type Gone = bool;

impl TcpHost {
    /// A host at time `now_ns` (the host never reads a clock; callers pass time).
    pub fn new(mut cfg: TcpConfig, now_ns: u64) -> Self {
        // Sanitise values that would make no sense on the wire.
        cfg.opts = cfg.opts.sanitised();
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
            in_burst: false,
            deferred: Vec::with_capacity(64),
            chunks: ChunkPool::new(),
            bufs: BufRegistry::new(),
            ooo: Vec::new(),
            ooo_free: Vec::new(),
            ooo_vacant: Vec::new(),
            ooo_alloc: 0,
            ooo_max: ooo_queues(&cfg),
            sboards: Vec::new(),
            sb_free: Vec::new(),
            listen: vec![0u64; 1024],
            listen_at: Vec::new(),
            listen_opts: Vec::new(),
            opts: vec![cfg.opts],
            half_open: 0,
            isn_key: IsnKey { k0, k1 },
            ip_id: 0,
            counters: TcpCounters::default(),
            ctl: Ctl::default(),
            now: now_ns,
            challenge_sec: u64::MAX,
            challenge_left: 0,
            rng: rand_core::SeedableRng::seed_from_u64(k0 ^ k1.rotate_left(29)),
            active: 0,
            addr6: Addr6Table::default(),
            hint_frees: 0,
            trace: None,
            owned4: Vec::new(),
            owned6: Vec::new(),
            owned_set: false,
            pmtu: icmp::PmtuCache::default(),
            urgent: std::collections::HashMap::new(),
            cfg,
        }
    }

    pub fn config(&self) -> &TcpConfig {
        &self.cfg
    }
    /// Whether received TCP checksums are verified from here on (the node turns it off
    /// for frames whose checksum the port already vouched for).
    #[inline]
    pub fn set_rx_checksum(&mut self, verify: bool) {
        self.cfg.rx_checksum = verify;
    }
    /// The addresses this host owns, IPv4 and IPv6 inclusive ranges (both empty: any; a
    /// family left empty beside the other's: none of it): a segment for no connection
    /// addressed elsewhere gets no answer (no SYN-ACK from a listener, no RST) and counts
    /// as `tcps_rcvnotours`, as one from or to an IPv4 broadcast, multicast or loopback
    /// address, or the IPv6 unspecified or loopback address, always does (RFC 1122
    /// §4.2.3.10, §3.2.1.3).
    pub fn set_owned(&mut self, v4: &[(u32, u32)], v6: &[(u128, u128)]) {
        self.owned4 = v4.to_vec();
        self.owned6 = v6.to_vec();
        self.owned_set = !(v4.is_empty() && v6.is_empty());
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
    /// What a live flow negotiated and where its send side stands (tests, diagnostics).
    pub fn flow_info(&self, f: FlowId) -> Option<FlowInfo> {
        let t = self
            .flows
            .get(f.0 as usize)
            .filter(|t| t.state != State::Closed)?;
        Some(FlowInfo {
            state: t.state,
            mss: t.mss,
            snd_wnd: t.snd_wnd,
            wscale: t.has(F_WSCALE),
            timestamps: t.has(F_TS),
            ts_recent: t.ts_recent,
            sack: t.has(F_SACK),
            sack_scoreboard: t.sb != NO_SIDE,
            in_recovery: t.cc.in_recovery,
            srtt_us: t.rtt.srtt_us(),
            rttvar_us: t.rtt.rttvar_us(),
            rto_us: t.rtt.rto_us(),
            cwnd: t.cc.cwnd,
            ssthresh: t.cc.ssthresh,
        })
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
            + (self.ooo_free.capacity() + self.ooo_vacant.capacity() + self.sb_free.capacity()) * 4
            + self.listen.len() * 8
            + self.listen_at.capacity() * std::mem::size_of::<(u16, std::net::IpAddr)>()
            + self.listen_opts.capacity() * 4
            + self.opts.capacity() * size_of::<FlowOpts>()
            + self.addr6.memory_bytes()
    }

    /// IPv6 addresses with an id (used by live flows; tests check they are given back).
    pub fn ipv6_addresses(&self) -> usize {
        self.addr6.len()
    }

    /// The IPv6 addresses (local, remote) of a live IPv6 flow; None for IPv4 flows.
    pub fn flow_ipv6(&self, f: FlowId) -> Option<([u8; 16], [u8; 16])> {
        let k = self.flow_key(f)?;
        k.is_ipv6()
            .then(|| (*self.addr6.addr(k.local_ip), *self.addr6.addr(k.remote_ip)))
    }

    /// The MSS a flow of `key` with option set `opt` may use: the set's (IPv4) MSS, 20
    /// bytes less over IPv6 (the larger IP header; 1440 at a 1500-byte MTU).
    #[inline]
    pub(super) fn fo_mss(&self, opt: u8, key: &FlowKey) -> u16 {
        let m = self.opts[opt as usize].mss;
        if key.is_ipv6() {
            m.saturating_sub(20).max(64)
        } else {
            m
        }
    }

    /// The two address words a key stands for, for keyed hashes (ISN, SYN cookies): the
    /// IPv4 addresses, or the IPv6 addresses folded to 32 bits (ids are reused, the
    /// addresses are what the peer sees).
    #[inline]
    pub(super) fn hash_addrs(&self, key: &FlowKey) -> (u32, u32) {
        if key.is_ipv6() {
            let f = |a: &[u8; 16]| {
                let w = u128::from_be_bytes(*a);
                (w ^ (w >> 64) ^ (w >> 32) ^ (w >> 96)) as u32
            };
            (
                f(self.addr6.addr(key.local_ip)),
                f(self.addr6.addr(key.remote_ip)),
            )
        } else {
            (key.local_ip, key.remote_ip)
        }
    }

    /// Earliest pending timer (lower bound), for virtual-clock drivers.
    pub fn next_timer(&self) -> Option<u64> {
        self.wheel.next_deadline()
    }

    /// Accept connections on `port` (any local address).
    pub fn listen(&mut self, port: u16) {
        self.listen[port as usize / 64] |= 1 << (port % 64);
        self.listen_at.retain(|e| e.0 != port);
    }
    /// Accept connections on `port` to the local address `addr` only (as a socket bound
    /// to it): a SYN to another of the host's addresses on this port is refused with a
    /// RST, as for a closed port. Several addresses may be added to one port; a port
    /// also listened on with [`TcpHost::listen`] or [`TcpHost::listen_with`] takes any
    /// address; [`TcpHost::unlisten`] closes it on every one.
    pub fn listen_at(&mut self, a: std::net::IpAddr, port: u16) {
        if self.listening(port) && !self.listen_at.iter().any(|e| e.0 == port) {
            return; // already open on every address
        }
        self.listen[port as usize / 64] |= 1 << (port % 64);
        if let Err(k) = self.listen_at.binary_search(&(port, a)) {
            self.listen_at.insert(k, (port, a));
        }
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
        self.listen_at.retain(|e| e.0 != port);
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
    /// A listener takes a connection of `key` (its local port and address).
    #[inline]
    fn listens(&self, key: &FlowKey) -> bool {
        self.listening(key.local_port) && (self.listen_at.is_empty() || self.bound_takes(key))
    }
    /// No address-bound listener on the key's port, or one bound to its local address.
    fn bound_takes(&self, key: &FlowKey) -> bool {
        let port = key.local_port;
        let from = self.listen_at.partition_point(|e| e.0 < port);
        let local: std::net::IpAddr = if key.is_ipv6() {
            std::net::Ipv6Addr::from(*self.addr6.addr(key.local_ip)).into()
        } else {
            std::net::Ipv4Addr::from(key.local_ip).into()
        };
        let mut any = false;
        for e in self.listen_at[from..].iter().take_while(|e| e.0 == port) {
            if e.1 == local {
                return true;
            }
            any = true;
        }
        !any
    }
}
