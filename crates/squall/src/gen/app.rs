//! The generator application of one side: a [`TcpApp`] that runs an astf program per TCP
//! flow (UDP flows are in [`super::udp`], which borrows this app's counters).
//!
//! Per-flow state lives in two vectors indexed by the TCP host's flow id (slab index):
//! the interpreter's 32-byte [`ProgState`] and a small [`FlowSlot`] (template, scheduled
//! start, latency marks, byte counts, flags). The interpreter acts on the flow through
//! [`Io`], which only *records* operations ([`IoOp`]); the caller applies them through
//! the callback's `Ctl` (inside TCP callbacks) or through `TcpHost::send/close/abort`
//! (program timers, flow starts). Program timers live in this app's own timer wheel
//! (token = flow index). After each step the slot keeps what the program waits for
//! ([`Wake`]): data and ack events that cannot meet it skip the interpreter.

use std::collections::HashMap;
use std::sync::Arc;

use squall_astf::alloc::ClientAddr;
use squall_astf::interp::{Event, FlowIo, Outcome, ProgState, Status, Wake};
use squall_astf::ipv6::{split, Msb};
use squall_astf::{BufIdx, Insn, Profile, ProgIdx, ServerAssoc, TemplateIdx, Transport};
use squall_engine::TimerWheel;
use squall_tcp::{BufId, CloseReason, Ctl, FlowId, TcpApp};

use super::http::{HttpSide, RxError};
use super::udp::UdpCtx;
use crate::stats::{SideStats, TgCounters};

const F_LIVE: u8 = 1;
const F_EST: u8 = 2;
const F_PEER_CLOSED: u8 = 4;
const F_CLIENT: u8 = 8;
const F_CUT: u8 = 16;
const F_FIRST: u8 = 32;
/// The program has armed its timer at least once (else there is nothing to cancel, and
/// the flow's node of the timer wheel, a cold line, is not touched).
const F_TIMER: u8 = 64;
/// Cut while stalled (see [`GenApp::mark_cut`]).
const F_STALLED: u8 = 128;

/// Default stall time: a flow cut at the end of the run after this long without a payload
/// byte moving (and not sleeping on its own program timer) counts as `stalled`.
pub const DEFAULT_STALL_NS: u64 = 5_000_000_000;

/// Per-flow engine state beside the program state.
#[derive(Clone, Copy, Debug, Default)]
pub struct FlowSlot {
    /// Scheduled start time (client) or accept time (server), ns.
    pub sched_ns: u64,
    /// Time the last payload byte arrived, ns.
    pub last_rx_ns: u64,
    /// Payload bytes queued by the program.
    pub queued: u64,
    /// Payload bytes acknowledged by the peer.
    pub acked: u64,
    /// In-order payload bytes received.
    pub rx: u64,
    wake_arg: u64,
    /// Client endpoint (client side), to release when the flow ends.
    pub addr_ip: u32,
    /// Last time (ms, wrapping) the flow started, connected or moved a payload byte
    /// (received, or acknowledged by the peer): the stall check at a cut.
    moved_ms: u32,
    pub addr_port: u16,
    /// Template index.
    pub tpl: u16,
    flags: u8,
    /// 0 while the program runs, else 1 + outcome code.
    outcome: u8,
    /// What the program waits for after its last step ([`Wake`], packed: kind and
    /// argument): `Data` and `Acked` events that cannot meet it are not delivered.
    wake_kind: u8,
}

const W_ANY: u8 = 0;
const W_TIMER: u8 = 1;
const W_RX: u8 = 2;
const W_UNACKED: u8 = 3;
const W_PEER_CLOSED: u8 = 4;
const W_ESTABLISHED: u8 = 5;
/// An accepted server flow waiting for the client's first bytes to choose its template
/// (TRex `l7_map`): no program runs yet; `wake_arg` holds how many bytes decide.
const W_L7: u8 = 6;
/// `http_wait_response`: moved when the flow's last pending response ends (see
/// [`GenApp::step`]), or by the peer's FIN.
const W_HTTP: u8 = 7;

impl FlowSlot {
    fn has(&self, f: u8) -> bool {
        self.flags & f != 0
    }
    fn moved(&mut self, now: u64) {
        self.moved_ms = ms(now);
    }
    fn set_wake(&mut self, w: Wake) {
        (self.wake_kind, self.wake_arg) = match w {
            Wake::Any => (W_ANY, 0),
            Wake::Timer | Wake::Done => (W_TIMER, 0),
            Wake::RxBytes(n) => (W_RX, n),
            Wake::Unacked(n) => (W_UNACKED, n),
            Wake::PeerClosed => (W_PEER_CLOSED, 0),
            Wake::Established => (W_ESTABLISHED, 0),
            Wake::HttpIdle => (W_HTTP, 0),
        };
    }
    fn wake(&self) -> Wake {
        match self.wake_kind {
            W_TIMER => Wake::Timer,
            W_RX => Wake::RxBytes(self.wake_arg),
            W_UNACKED => Wake::Unacked(self.wake_arg),
            W_PEER_CLOSED => Wake::PeerClosed,
            W_ESTABLISHED => Wake::Established,
            W_HTTP => Wake::HttpIdle,
            _ => Wake::Any,
        }
    }
    /// Can a `Data` or `Acked` event move the flow's program now?
    #[inline]
    fn data_or_ack_moves(&self) -> bool {
        self.wake().met(
            self.rx,
            self.queued.saturating_sub(self.acked),
            self.has(F_PEER_CLOSED),
            self.has(F_EST),
        )
    }
}

/// `now` in wrapping milliseconds (the stall clock of [`FlowSlot`]).
fn ms(now: u64) -> u32 {
    (now / 1_000_000) as u32
}

/// An operation requested by a program, applied by the caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoOp {
    /// Queue the whole registered buffer.
    Send(BufId, u32),
    Close,
    Reset,
}

/// The interpreter's view of one flow.
struct Io<'a> {
    now: u64,
    slot: &'a mut FlowSlot,
    ops: &'a mut Vec<IoOp>,
    timers: &'a mut TimerWheel,
    token: u32,
    rng: &'a mut u64,
    bufs: &'a [(BufId, u32)],
    misuse: &'a mut u64,
    watermark: u64,
    profile: &'a Profile,
    /// The side's HTTP state when the flow's program uses HTTP.
    http: Option<&'a mut HttpSide>,
    /// HTTP requests sent, refused (too many pending), and not sent because the server
    /// ends the connection, by this step.
    http_sent: u64,
    http_refused: u64,
    http_closed: u64,
}

impl FlowIo for Io<'_> {
    fn now_ns(&self) -> u64 {
        self.now
    }
    fn send(&mut self, buf: BufIdx) -> bool {
        match self.bufs.get(buf.0 as usize) {
            Some(&(id, len)) => {
                self.slot.queued += u64::from(len);
                self.ops.push(IoOp::Send(id, len));
            }
            None => *self.misuse += 1,
        }
        true
    }
    fn tx_unacked(&self) -> u64 {
        self.slot.queued.saturating_sub(self.slot.acked)
    }
    fn send_watermark(&self) -> u64 {
        self.watermark
    }
    fn rx_bytes(&self) -> u64 {
        self.slot.rx
    }
    fn established(&self) -> bool {
        self.slot.has(F_EST)
    }
    fn peer_closed(&self) -> bool {
        self.slot.has(F_PEER_CLOSED)
    }
    fn close(&mut self) {
        self.ops.push(IoOp::Close);
    }
    fn reset(&mut self) {
        self.ops.push(IoOp::Reset);
    }
    fn send_msg(&mut self, _buf: BufIdx) {
        *self.misuse += 1;
    }
    fn rx_msgs(&self) -> u64 {
        0
    }
    fn set_keepalive(&mut self, _msec: u32, _rx_mode: bool) {}
    fn arm_timer(&mut self, deadline_ns: u64) {
        self.slot.flags |= F_TIMER;
        self.timers.arm(self.token, deadline_ns);
    }
    fn random_u32(&mut self) -> u32 {
        (splitmix(self.rng) >> 32) as u32
    }
    fn http_request(&mut self, req: u16) -> bool {
        let closing = self.http_closing();
        let (Some(h), Some(r)) = (
            self.http.as_deref_mut(),
            self.profile.http.get(req as usize),
        ) else {
            *self.misuse += 1;
            return false;
        };
        let i = self.token as usize;
        if closing {
            self.http_closed += 1;
            return false;
        }
        if !h.sent(i, r.head, self.now) {
            self.http_refused += 1;
            return false;
        }
        self.http_sent += 1;
        let flow = self.slot.addr_ip.wrapping_mul(0x0101_0101) ^ u32::from(self.slot.addr_port);
        let rng = &mut *self.rng;
        let (slot, ops, bufs, misuse) = (
            &mut *self.slot,
            &mut *self.ops,
            self.bufs,
            &mut *self.misuse,
        );
        r.pieces(
            &mut h.cursors,
            || (splitmix(rng) >> 32) as u32,
            flow,
            |b| match bufs.get(b.0 as usize) {
                Some(&(id, len)) => {
                    slot.queued += u64::from(len);
                    ops.push(IoOp::Send(id, len));
                }
                None => *misuse += 1,
            },
        );
        true
    }
    fn http_pending(&self) -> u32 {
        self.http
            .as_deref()
            .map_or(0, |h| h.pending(self.token as usize))
    }
    fn http_closing(&self) -> bool {
        self.slot.has(F_PEER_CLOSED)
            || self
                .http
                .as_deref()
                .is_some_and(|h| h.closing(self.token as usize))
    }
}

/// The next SplitMix64 draw of the generator whose state is `*s` (the workspace's one
/// seeded generator, `rand_xoshiro::SplitMix64`, on a state kept as a bare u64).
pub(crate) fn splitmix(s: &mut u64) -> u64 {
    use rand_core::{Rng, SeedableRng};
    let mut g = rand_xoshiro::SplitMix64::seed_from_u64(*s);
    let v = g.next_u64();
    *s = u64::from_le_bytes(g.state());
    v
}

fn outcome_code(o: Outcome) -> u8 {
    1 + match o {
        Outcome::Closed => 0,
        Outcome::Reset => 1,
        Outcome::Aborted => 2,
        Outcome::PeerClosedEarly => 3,
    }
}

/// Does a program contain a `reset`?
fn has_reset(p: &Profile, prog: ProgIdx) -> bool {
    p.program(prog).insns.contains(&Insn::Reset)
}

/// The generator app of one side (client or server).
pub struct GenApp {
    profile: Arc<Profile>,
    /// astf buffer index -> (registered tcp buffer, length).
    bufs: Vec<(BufId, u32)>,
    progs: Vec<ProgState>,
    flows: Vec<FlowSlot>,
    timers: TimerWheel,
    expired: Vec<u32>,
    /// Operations recorded by the last program step, not applied yet.
    pub ops: Vec<IoOp>,
    rng: u64,
    now: u64,
    /// Templates where a side may legitimately see the flow reset (a program has `reset`).
    expect_reset: Vec<bool>,
    /// Per template: (client, server) `tcp.txbufsize`, the non-blocking send watermark.
    txbuf: Vec<(u64, u64)>,
    /// Client endpoints of ended client flows, to give back to the allocators.
    pub released: Vec<(u16, ClientAddr)>,
    /// The profile's client address ranges (inclusive; with the high 96 bits of IPv6
    /// ones): an accepted flow from elsewhere went through address translation on its way.
    client_ranges: Vec<(Option<Msb>, u32, u32)>,
    /// Flows with a live program-or-connection (started, not yet ended).
    pub live: u64,
    /// Highest `live` seen.
    pub peak_live: u64,
    /// First bytes of the server flows waiting for their L7 match (`W_L7`), by flow,
    /// with the flow's family and local address (low 32 bits over IPv6) to match on.
    l7_wait: HashMap<u32, (Vec<u8>, bool, u32)>,
    /// HTTP state of the flows of HTTP programs (`None`: no program uses HTTP).
    http: Option<Box<HttpSide>>,
    /// A flow cut after this long without a payload byte moving is `stalled`.
    pub stall_ns: u64,
    pub stats: SideStats,
}

impl GenApp {
    /// An app for one side; `bufs` maps the profile's buffers to the host's registry.
    pub fn new(
        profile: Arc<Profile>,
        bufs: Vec<(BufId, u32)>,
        max_flows: usize,
        now: u64,
        seed: u64,
    ) -> Self {
        let expect_reset = profile
            .templates
            .iter()
            .map(|t| has_reset(&profile, t.client_program) || has_reset(&profile, t.server_program))
            .collect();
        let stats = SideStats::new(profile.tg_names.len());
        let client_ranges = profile
            .templates
            .iter()
            .map(|t| {
                let g = &profile.ip_gens[t.ip_gen as usize];
                (t.ipv6.map(|m| m.client), g.clients.first, g.clients.last)
            })
            .collect();
        let txbuf = profile
            .templates
            .iter()
            .map(|t| {
                (
                    u64::from(t.client.tcp.txbufsize),
                    u64::from(t.server.tcp.txbufsize),
                )
            })
            .collect();
        GenApp {
            client_ranges,
            bufs,
            progs: Vec::new(),
            flows: Vec::new(),
            timers: TimerWheel::new(max_flows.max(1), now),
            expired: Vec::with_capacity(256),
            ops: Vec::with_capacity(16),
            rng: seed,
            now,
            expect_reset,
            txbuf,
            released: Vec::new(),
            live: 0,
            peak_live: 0,
            l7_wait: HashMap::new(),
            http: HttpSide::for_profile(&profile),
            stall_ns: DEFAULT_STALL_NS,
            stats,
            profile,
        }
    }

    pub fn profile(&self) -> &Profile {
        &self.profile
    }

    /// Lends the side's profile, statistics, flow counts and random state to the UDP
    /// flows for one call.
    pub fn udp_ctx(&mut self) -> UdpCtx<'_> {
        UdpCtx {
            profile: &self.profile,
            stats: &mut self.stats,
            live: &mut self.live,
            peak_live: &mut self.peak_live,
            released: &mut self.released,
            rng: &mut self.rng,
            now: self.now,
        }
    }

    /// Sets the time used by program steps (call once per iteration and before steps).
    pub fn set_now(&mut self, now: u64) {
        self.now = now;
    }

    fn ensure(&mut self, i: usize) {
        if self.flows.len() <= i {
            self.flows.resize(i + 1, FlowSlot::default());
            self.progs.resize(i + 1, ProgState::new(ProgIdx(0)));
        }
        if self.timers.capacity() <= i {
            self.timers.grow((i + 1).next_power_of_two());
        }
    }

    fn tg(&self, tpl: u16) -> usize {
        self.profile
            .templates
            .get(tpl as usize)
            .map_or(0, |t| t.tg_id as usize)
    }

    fn tgc(&mut self, tpl: u16) -> &mut TgCounters {
        let g = self.tg(tpl);
        &mut self.stats.tg[g].c
    }

    /// A client flow was opened (`connect` succeeded): set it up and run its program from
    /// the start. The caller applies [`GenApp::ops`] afterwards.
    pub fn start_client(&mut self, f: FlowId, tpl: TemplateIdx, sched_ns: u64, addr: ClientAddr) {
        let i = f.0 as usize;
        self.ensure(i);
        self.flows[i] = FlowSlot {
            sched_ns,
            addr_ip: addr.ip,
            addr_port: addr.port,
            tpl: tpl.0,
            flags: F_LIVE | F_CLIENT,
            moved_ms: ms(self.now),
            ..FlowSlot::default()
        };
        let prog = self.profile.templates[tpl.0 as usize].client_program;
        self.progs[i] = ProgState::new(prog);
        if let Some(h) = self.http.as_deref_mut().filter(|h| h.is_http(prog.0)) {
            h.start(i);
        }
        self.live += 1;
        self.peak_live = self.peak_live.max(self.live);
        self.tgc(tpl.0).started += 1;
        self.step(f.0, Event::Start);
    }

    /// Runs the flow's program on `ev`; records operations in `ops`.
    #[inline]
    pub fn step(&mut self, f: u32, ev: Event) {
        let Some(slot) = self.flows.get(f as usize) else {
            return;
        };
        if !slot.has(F_LIVE) || slot.outcome != 0 || slot.wake_kind == W_L7 {
            return;
        }
        if matches!(ev, Event::Data | Event::Acked) {
            let moves = if matches!(ev, Event::Acked) && slot.wake_kind == W_UNACKED {
                // A blocking `send` waiting for its bytes to be acknowledged (every ACK of
                // a server's answer): `Wake::Unacked` tested here, without the call (the
                // test folds away where `step` is inlined for data).
                slot.queued.saturating_sub(slot.acked) <= slot.wake_arg
            } else if slot.wake_kind == W_HTTP {
                // Only the end of the last pending response (or the FIN) moves it.
                slot.has(F_PEER_CLOSED)
                    || self
                        .http
                        .as_deref()
                        .is_none_or(|h| h.pending(f as usize) == 0)
            } else {
                slot.data_or_ack_moves()
            };
            if !moves {
                // The program would only re-check its wait condition and keep waiting.
                return;
            }
        }
        self.run_step(f, ev);
    }

    /// [`GenApp::step`] past its checks: runs the interpreter.
    #[inline(never)]
    fn run_step(&mut self, f: u32, ev: Event) {
        let i = f as usize;
        let Some(slot) = self.flows.get_mut(i) else {
            return;
        };
        let mut misuse = 0u64;
        let (ctx, stx) = self.txbuf.get(slot.tpl as usize).copied().unwrap_or((0, 0));
        let watermark = if slot.has(F_CLIENT) { ctx } else { stx };
        let prog = self.progs[i].program().0;
        let http = self.http.as_deref_mut().filter(|h| h.is_http(prog));
        let mut io = Io {
            watermark,
            profile: &self.profile,
            http,
            http_sent: 0,
            http_refused: 0,
            http_closed: 0,
            now: self.now,
            slot,
            ops: &mut self.ops,
            timers: &mut self.timers,
            token: f,
            rng: &mut self.rng,
            bufs: &self.bufs,
            misuse: &mut misuse,
        };
        let st = self.progs[i].on_event(&self.profile, &mut io, ev);
        let (sent, refused, closed) = (io.http_sent, io.http_refused, io.http_closed);
        if sent + refused + closed > 0 {
            let g = self.tg(self.flows[i].tpl);
            self.stats.tg[g].http.requests += sent;
            self.stats.tg[g].http.not_sent += refused;
            self.stats.tg[g].http.server_closed += closed;
        }
        let wake = self.progs[i].wake(&self.profile, watermark);
        self.flows[i].set_wake(wake);
        if misuse > 0 {
            let tpl = self.flows[i].tpl;
            self.tgc(tpl).io_misuse += misuse;
        }
        if let Status::Finished(o) = st {
            self.finished(i, o);
        }
    }

    /// The program ended with `o` (the connection may still be closing).
    fn finished(&mut self, i: usize, o: Outcome) {
        let slot = self.flows[i];
        self.flows[i].outcome = outcome_code(o);
        if slot.has(F_TIMER) {
            self.timers.cancel(i as u32);
        }
        if slot.has(F_CLIENT) && slot.rx > 0 && matches!(o, Outcome::Closed | Outcome::Reset) {
            let g = self.tg(slot.tpl);
            self.stats.tg[g]
                .lat
                .last_byte
                .record_ns(slot.last_rx_ns.saturating_sub(slot.sched_ns));
        }
    }

    /// Applies recorded operations through a callback's `Ctl`.
    #[inline]
    fn apply_ctl(&mut self, ctl: &mut Ctl) {
        if !self.ops.is_empty() {
            for op in self.ops.drain(..) {
                match op {
                    IoOp::Send(id, len) => ctl.send(id, 0, len),
                    IoOp::Close => ctl.close(),
                    IoOp::Reset => {
                        ctl.abort();
                        break;
                    }
                }
            }
            self.ops.clear();
        }
        if ctl.errors > self.stats.send_errors {
            self.stats.send_errors = ctl.errors;
        }
    }

    /// Moves program timers forward to `now`; returns the flows whose timer fired (the
    /// caller steps each with [`Event::Timer`] and applies the operations).
    pub fn expire_timers(&mut self, now: u64, out: &mut Vec<u32>) {
        out.clear();
        self.timers.advance(now, out);
    }

    /// Earliest program timer.
    pub fn next_timer(&self) -> Option<u64> {
        self.timers.next_deadline()
    }

    /// Live flows (for a cut at stop).
    pub fn live_flows(&self, out: &mut Vec<u32>) {
        out.clear();
        out.extend(
            self.flows
                .iter()
                .enumerate()
                .filter(|(_, s)| s.has(F_LIVE))
                .map(|(i, _)| i as u32),
        );
    }

    /// Marks a flow as cut at stop (the caller aborts it), and as stalled when it waits
    /// on the network (not on its own program timer, and its program has not ended) and
    /// no payload byte has moved for [`GenApp::stall_ns`].
    pub fn mark_cut(&mut self, f: u32) {
        let (now, stall) = (self.now, self.stall_ns);
        if let Some(s) = self.flows.get_mut(f as usize) {
            s.flags |= F_CUT;
            let idle_ns = u64::from(ms(now).wrapping_sub(s.moved_ms)) * 1_000_000;
            let sleeping = s.outcome != 0 || s.wake_kind == W_TIMER;
            if !sleeping && idle_ns >= stall {
                s.flags |= F_STALLED;
            }
        }
    }

    /// Starts server flow `i` on template `t`: its program runs from the start (bytes
    /// already received count for its first `recv`).
    fn bind_server(&mut self, i: usize, t: TemplateIdx) {
        let slot = &mut self.flows[i];
        slot.tpl = t.0;
        slot.wake_kind = W_ANY;
        let rx = slot.rx;
        let prog = self.profile.templates[t.0 as usize].server_program;
        self.progs[i] = ProgState::new(prog);
        if let Some(h) = self.http.as_deref_mut().filter(|h| h.is_http(prog.0)) {
            h.start(i);
        }
        let c = self.tgc(t.0);
        c.accepted += 1;
        c.l7_rx_bytes += rx;
        self.step(i as u32, Event::Start);
    }

    /// A server flow waiting for its L7 match received `data` (or, with `end`, the client
    /// closed): matches once enough bytes arrived, else keeps waiting. A flow that
    /// matches no template is reset and counted (`l7_no_match`).
    fn l7_rx(&mut self, ctl: &mut Ctl, i: usize, data: &[u8], end: bool) {
        let need = self.flows[i].wake_arg as usize;
        let (buf, _, _) = self.l7_wait.entry(i as u32).or_default();
        buf.extend_from_slice(&data[..data.len().min(need.saturating_sub(buf.len()))]);
        self.flows[i].rx += data.len() as u64;
        self.flows[i].moved(self.now);
        if buf.len() < need && !end {
            return;
        }
        let (first, v6, local) = self.l7_wait.remove(&(i as u32)).unwrap_or_default();
        let key = ctl.key();
        match self
            .profile
            .server_template_l7_in(Transport::Tcp, v6, local, key.local_port, &first)
        {
            Some(t) => {
                self.bind_server(i, t);
                if end && self.flows[i].outcome == 0 {
                    self.flows[i].flags |= F_PEER_CLOSED;
                    self.step(i as u32, Event::PeerClosed);
                }
            }
            None => {
                self.stats.l7_no_match += 1;
                ctl.abort();
            }
        }
    }

    /// Per-flow engine state size (W3 accounting).
    pub const FLOW_STATE_BYTES: usize =
        std::mem::size_of::<FlowSlot>() + std::mem::size_of::<ProgState>();

    /// Takes the scratch vector of expired timers (to avoid a borrow across steps).
    pub fn take_expired(&mut self) -> Vec<u32> {
        std::mem::take(&mut self.expired)
    }
    pub fn put_expired(&mut self, v: Vec<u32>) {
        self.expired = v;
    }
}

impl TcpApp for GenApp {
    fn on_connected(&mut self, ctl: &mut Ctl, f: FlowId) {
        let i = f.0 as usize;
        if ctl.passive() {
            let key = ctl.key();
            // An IPv6 flow is associated (and its peer checked) by the low 32 bits of
            // its addresses, the pools' values.
            let (msb, local, peer) = match ctl.ipv6() {
                Some((l, r)) => {
                    let (m, peer) = split(&r);
                    (Some(m), split(&l).1, peer)
                }
                None => (None, key.local_ip, key.remote_ip),
            };
            let assoc =
                self.profile
                    .server_assoc_in(Transport::Tcp, msb.is_some(), local, key.local_port);
            if assoc == ServerAssoc::None {
                self.stats.no_template += 1;
                ctl.abort();
                return;
            }
            if !self
                .client_ranges
                .iter()
                .any(|&(m, a, b)| m == msb && (a..=b).contains(&peer))
            {
                self.stats.translated += 1;
                self.stats.translated_from.get_or_insert(peer);
            }
            self.ensure(i);
            self.flows[i] = FlowSlot {
                sched_ns: self.now,
                flags: F_LIVE | F_EST,
                moved_ms: ms(self.now),
                ..FlowSlot::default()
            };
            self.live += 1;
            self.peak_live = self.peak_live.max(self.live);
            match assoc {
                ServerAssoc::Template(t) => self.bind_server(i, t),
                ServerAssoc::L7 { need } => {
                    // Hold the flow until the client's first bytes choose the template.
                    self.flows[i].wake_kind = W_L7;
                    self.flows[i].wake_arg = need as u64;
                    self.l7_wait
                        .insert(i as u32, (Vec::new(), msb.is_some(), local));
                }
                ServerAssoc::None => {}
            }
        } else {
            let Some(slot) = self.flows.get_mut(i) else {
                return;
            };
            if !slot.has(F_LIVE) {
                return;
            }
            slot.flags |= F_EST;
            slot.moved(self.now);
            let (tpl, sched) = (slot.tpl, slot.sched_ns);
            let g = self.tg(tpl);
            self.stats.tg[g]
                .lat
                .connect
                .record_ns(self.now.saturating_sub(sched));
            if let Some(h) = self.http.as_deref_mut() {
                // Requests queued with the SYN leave now: their latencies start here.
                h.established(i, self.now);
            }
            self.step(f.0, Event::Established);
            if self.ops.contains(&IoOp::Reset) {
                // The RST leaves in this callback, before the handshake's ACK: the server
                // never completes (never accepts) this connection.
                self.tgc(tpl).reset_at_connect += 1;
            }
        }
        self.apply_ctl(ctl);
    }

    fn on_data(&mut self, ctl: &mut Ctl, f: FlowId, data: &[u8]) {
        let i = f.0 as usize;
        let now = self.now;
        let Some(slot) = self.flows.get_mut(i) else {
            return;
        };
        if !slot.has(F_LIVE) {
            return;
        }
        if slot.wake_kind == W_L7 {
            self.l7_rx(ctl, i, data, false);
            self.apply_ctl(ctl);
            return;
        }
        slot.rx += data.len() as u64;
        slot.last_rx_ns = now;
        slot.moved(now);
        let first = !slot.has(F_FIRST) && slot.has(F_CLIENT);
        slot.flags |= F_FIRST;
        let (tpl, sched) = (slot.tpl, slot.sched_ns);
        let g = self.tg(tpl);
        self.stats.tg[g].c.l7_rx_bytes += data.len() as u64;
        if first {
            self.stats.tg[g]
                .lat
                .first_byte
                .record_ns(now.saturating_sub(sched));
        }
        if let Some(h) = self.http.as_deref_mut() {
            if h.is_http(self.progs[i].program().0) {
                let t = &mut self.stats.tg[g];
                if let Err(e) = h.rx(i, data, now, &mut t.http, &mut t.lat) {
                    // The responses cannot be followed any more: count and reset (the
                    // broken response is a parse error, not also an incomplete one).
                    t.http.parse_errors += 1;
                    if let RxError::Parse(_) = e {
                        h.failed(i);
                    }
                    ctl.abort();
                    return;
                }
            }
        }
        self.step(f.0, Event::Data);
        self.apply_ctl(ctl);
    }

    fn on_acked(&mut self, ctl: &mut Ctl, f: FlowId, bytes: u32) {
        let i = f.0 as usize;
        let Some(slot) = self.flows.get_mut(i) else {
            return;
        };
        if !slot.has(F_LIVE) {
            return;
        }
        slot.acked += u64::from(bytes);
        if bytes > 0 {
            slot.moved(self.now);
        }
        let tpl = slot.tpl;
        self.tgc(tpl).l7_tx_acked += u64::from(bytes);
        self.step(f.0, Event::Acked);
        self.apply_ctl(ctl);
    }

    fn on_peer_closed(&mut self, ctl: &mut Ctl, f: FlowId) {
        let i = f.0 as usize;
        let Some(slot) = self.flows.get_mut(i) else {
            return;
        };
        if !slot.has(F_LIVE) {
            return;
        }
        if slot.wake_kind == W_L7 {
            // The client closed before sending enough bytes: decide on what arrived.
            self.l7_rx(ctl, i, &[], true);
            self.apply_ctl(ctl);
            return;
        }
        slot.flags |= F_PEER_CLOSED;
        let tpl = slot.tpl;
        let g = self.tg(tpl);
        if let Some(h) = self.http.as_deref_mut() {
            let t = &mut self.stats.tg[g];
            h.peer_closed(i, self.now, &mut t.http, &mut t.lat);
        }
        self.step(f.0, Event::PeerClosed);
        self.apply_ctl(ctl);
    }

    fn on_retransmit(&mut self, f: FlowId) {
        // Flows the program knows of (a server's half-open flow has no template yet).
        if let Some(slot) = self.flows.get(f.0 as usize).filter(|s| s.has(F_LIVE)) {
            self.stats.count_retransmit(slot.tpl as usize);
        }
    }

    fn on_closed(&mut self, f: FlowId, reason: CloseReason) {
        let i = f.0 as usize;
        let Some(slot) = self.flows.get(i).copied() else {
            return;
        };
        if !slot.has(F_LIVE) {
            return;
        }
        if slot.wake_kind == W_L7 {
            // Never bound to a template (reset, cut, or no L7 match): not accepted.
            self.l7_wait.remove(&f.0);
            self.flows[i].flags &= !F_LIVE;
            self.live = self.live.saturating_sub(1);
            return;
        }
        if slot.outcome == 0 {
            self.step(f.0, Event::Aborted);
        }
        let outcome = self.flows[i].outcome;
        let g = self.tg(slot.tpl);
        if let Some(h) = self.http.as_deref_mut() {
            if h.is_http(self.progs[i].program().0) {
                let cut = slot.has(F_CUT) && !slot.has(F_STALLED);
                h.closed(i, &mut self.stats.tg[g].http, cut);
            }
        }
        self.flows[i].flags &= !F_LIVE;
        if self.flows[i].has(F_TIMER) {
            self.timers.cancel(f.0);
        }
        self.live = self.live.saturating_sub(1);
        let expect_reset = self
            .expect_reset
            .get(slot.tpl as usize)
            .copied()
            .unwrap_or(false);
        let c = self.tgc(slot.tpl);
        if slot.has(F_CUT) {
            c.cut += 1;
            if slot.has(F_STALLED) {
                c.stalled += 1;
            }
        } else {
            match outcome {
                // Closed by the program (explicit or implicit close).
                1 if reason == CloseReason::Normal => c.completed += 1,
                1 => c.bad_close += 1,
                // The program ran `reset`.
                2 => c.completed += 1,
                // Program ended by the engine: the connection died under it.
                3 if expect_reset
                    && matches!(reason, CloseReason::Reset | CloseReason::Aborted) =>
                {
                    c.completed += 1
                }
                3 => {
                    c.aborted += 1;
                    match reason {
                        CloseReason::Timeout => c.timeouts += 1,
                        CloseReason::Refused => c.refused += 1,
                        CloseReason::Reset => c.reset_by_peer += 1,
                        CloseReason::Unreachable => c.unreachable += 1,
                        _ => {}
                    }
                }
                _ => c.peer_closed_early += 1,
            }
        }
        if slot.has(F_CLIENT) {
            self.released.push((
                slot.tpl,
                ClientAddr {
                    ip: slot.addr_ip,
                    port: slot.addr_port,
                },
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flow_state_is_small() {
        const { assert!(GenApp::FLOW_STATE_BYTES <= 96) };
    }

    /// Profiles without HTTP programs carry no HTTP state (W3 does not grow); HTTP flows
    /// add [`super::super::http::HTTP_FLOW_BYTES`] each.
    #[test]
    fn http_state_only_for_http_profiles() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../examples/w1-astf-http.json");
        let w1 = Arc::new(crate::source::load(&path, &[]).unwrap());
        let app = GenApp::new(w1, Vec::new(), 16, 0, 1);
        assert!(app.http.is_none());
        eprintln!(
            "per-flow state: {} bytes (+{} for flows of HTTP programs)",
            GenApp::FLOW_STATE_BYTES,
            super::super::http::HTTP_FLOW_BYTES
        );
    }

    #[test]
    fn outcome_codes_are_distinct_and_nonzero() {
        let v = [
            Outcome::Closed,
            Outcome::Reset,
            Outcome::Aborted,
            Outcome::PeerClosedEarly,
        ]
        .map(outcome_code);
        assert_eq!(v, [1, 2, 3, 4]);
    }
}
