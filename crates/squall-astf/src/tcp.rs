//! Adapter between the program interpreter and squall-tcp: [`AstfTcpApp`] is a
//! `squall_tcp::TcpApp` that runs each flow's client or server program. It keeps, per flow,
//! the interpreter state plus the counters the interpreter reads (bytes received, bytes
//! unacknowledged, established / peer-closed), one program timer per flow in a
//! `squall_engine::TimerWheel`, and per-template-group outcome counters.
//!
//! Driving it: register the profile's buffers with [`AstfTcpApp::new`], `listen` for the
//! server side, open client flows with [`AstfTcpApp::open`], pass every received frame to
//! [`AstfTcpApp::rx`] and call [`AstfTcpApp::poll`] at least as often as
//! [`AstfTcpApp::next_timer`] says. Client programs start when the handshake completes;
//! server programs when a connection to an associated address and port is accepted.
//! UDP templates are not handled here.

use std::sync::Arc;

use squall_engine::TimerWheel;
use squall_tcp::{
    BufId, CloseReason, ConnectError, Ctl, FlowId, TcpApp, TcpConfig, TcpHost, TxSink,
};

use crate::alloc::ClientAddr;
use crate::interp::{Event, FlowIo, Outcome, ProgState, Status};
use crate::model::{BufIdx, Profile, SideTunables, TemplateIdx, Transport};
use crate::rng::Rng;
use crate::sched::FlowStart;

/// Outcome counters of one template group.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupStats {
    /// Programs started.
    pub started: u64,
    pub closed: u64,
    pub reset: u64,
    pub aborted: u64,
    pub peer_closed_early: u64,
    /// Cut by [`AstfTcpApp::abort_all`] at the end of a run.
    pub cut: u64,
    /// Payload bytes received / queued for sending by programs.
    pub rx_bytes: u64,
    pub tx_bytes: u64,
}

const ESTABLISHED: u8 = 1;
const PEER_CLOSED: u8 = 2;
const COUNTED: u8 = 4;
const SERVER: u8 = 8;

/// Latency of one completed client flow, in microseconds from its *scheduled* start
/// (open-loop: a generator that falls behind shows it as latency).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LatencySample {
    pub tg_id: u16,
    /// Scheduled start to handshake complete (SYN -> SYN-ACK seen).
    pub connect_us: u32,
    /// Scheduled start to the first response byte (`None`: nothing was received).
    pub first_byte_us: Option<u32>,
    /// Scheduled start to the last response byte.
    pub last_byte_us: Option<u32>,
}

const NO_TIME: u32 = u32::MAX;

#[derive(Clone, Debug)]
struct Slot {
    st: Option<ProgState>,
    tpl: u16,
    flags: u8,
    rx: u64,
    unacked: u64,
    /// Scheduled start and source address (client flows).
    t0_ns: u64,
    src: ClientAddr,
    connect_us: u32,
    first_us: u32,
    last_us: u32,
}

impl Default for Slot {
    fn default() -> Self {
        Slot {
            st: None,
            tpl: 0,
            flags: 0,
            rx: 0,
            unacked: 0,
            t0_ns: 0,
            src: ClientAddr { ip: 0, port: 0 },
            connect_us: NO_TIME,
            first_us: NO_TIME,
            last_us: NO_TIME,
        }
    }
}

fn since_us(now: u64, t0: u64) -> u32 {
    (now.saturating_sub(t0) / 1000).min(u64::from(NO_TIME - 1)) as u32
}

/// Runs profile programs on the flows of one `TcpHost`. See the module documentation.
pub struct AstfTcpApp {
    profile: Arc<Profile>,
    bufs: Vec<BufId>,
    slots: Vec<Slot>,
    timers: TimerWheel,
    expired: Vec<u32>,
    rng: Rng,
    now: u64,
    /// Per template group (index = `tg_id`).
    pub groups: Vec<GroupStats>,
    /// Accepted connections no template's association matched (reset).
    pub no_template: u64,
    latency: Vec<LatencySample>,
    closed: Vec<(TemplateIdx, ClientAddr)>,
}

/// A TCP configuration carrying one side's tunables.
pub fn tcp_config(side: &SideTunables, base: TcpConfig) -> TcpConfig {
    let t = &side.tcp;
    let wscale = (t.do_rfc1323 && t.rxbufsize > 65_535).then(|| {
        let mut s = 0u8;
        while (65_535u64 << s) < u64::from(t.rxbufsize) && s < 14 {
            s += 1;
        }
        s
    });
    TcpConfig {
        mss: t.mss,
        init_cwnd: t.initwnd,
        delack_ns: u64::from(t.delay_ack_msec) * 1_000_000,
        nagle: !t.no_delay,
        rcv_wnd: t.rxbufsize,
        wscale,
        ..base
    }
}

impl AstfTcpApp {
    /// Registers the profile's buffers in `host` and sizes per-flow state for its flows.
    pub fn new(profile: Arc<Profile>, host: &mut TcpHost, now_ns: u64, seed: u64) -> Self {
        let bufs = profile
            .buffers
            .iter()
            .map(|b| host.buffers().register(b.data.clone()))
            .collect();
        let n = host.config().max_flows.max(1) as usize;
        AstfTcpApp {
            groups: vec![GroupStats::default(); profile.tg_names.len()],
            profile,
            bufs,
            slots: vec![Slot::default(); n],
            timers: TimerWheel::new(n, now_ns),
            expired: Vec::new(),
            rng: Rng::derive(seed, 0xa5f0),
            now: now_ns,
            no_template: 0,
            latency: Vec::new(),
            closed: Vec::new(),
        }
    }

    /// Listens on every TCP template's association ports (server side).
    pub fn listen_all(&self, host: &mut TcpHost) {
        for t in self
            .profile
            .templates
            .iter()
            .filter(|t| t.transport == Transport::Tcp)
        {
            for r in &t.assoc {
                host.listen(r.port);
            }
        }
    }

    /// Opens the client flow `start` (from the scheduler) from `src` to `dst_ip` (port
    /// from the template). Its program starts when the handshake completes; latency is
    /// measured from `start.at_ns`.
    pub fn open<S: TxSink>(
        &mut self,
        host: &mut TcpHost,
        tx: &mut S,
        now: u64,
        start: &FlowStart,
        src: ClientAddr,
        dst_ip: u32,
    ) -> Result<FlowId, ConnectError> {
        self.now = now;
        let tpl = start.template;
        let t = &self.profile.templates[tpl.0 as usize];
        let (port, prog) = (t.port, t.client_program);
        let f = host.connect(now, tx, src.ip, src.port, dst_ip, port)?;
        *self.slot(f) = Slot {
            st: Some(ProgState::new(prog)),
            tpl: tpl.0,
            t0_ns: start.at_ns,
            src,
            ..Slot::default()
        };
        Ok(f)
    }

    /// Ends every flow whose program still runs, with RST (the "cut" way to stop a run;
    /// the other is to let them drain). They are counted as `cut`, not as errors.
    pub fn abort_all<S: TxSink>(&mut self, host: &mut TcpHost, tx: &mut S, now: u64) {
        self.now = now;
        for i in 0..self.slots.len() {
            let slot = &mut self.slots[i];
            let running = matches!(&slot.st, Some(st) if !st.is_done());
            if !running {
                continue;
            }
            slot.flags |= COUNTED;
            let tg = self.profile.templates[slot.tpl as usize].tg_id as usize;
            self.groups[tg].cut += 1;
            host.abort(now, self, tx, FlowId(i as u32));
        }
    }

    /// Moves the (template, source address) of client flows that ended since the last call
    /// into `out`: give them back to the template's `ClientAlloc::release`.
    pub fn take_closed(&mut self, out: &mut Vec<(TemplateIdx, ClientAddr)>) {
        out.append(&mut self.closed);
    }

    /// Moves the latency samples of client flows completed so far into `out`.
    pub fn take_latency(&mut self, out: &mut Vec<LatencySample>) {
        out.append(&mut self.latency);
    }

    /// Processes a received frame.
    pub fn rx<S: TxSink>(&mut self, host: &mut TcpHost, tx: &mut S, now: u64, frame: &[u8]) {
        self.now = now;
        host.rx(now, frame, self, tx);
    }

    /// Runs TCP timers and program timers due at `now`.
    pub fn poll<S: TxSink>(&mut self, host: &mut TcpHost, tx: &mut S, now: u64) {
        self.now = now;
        host.poll(now, self, tx);
        let mut exp = std::mem::take(&mut self.expired);
        exp.clear();
        self.timers.advance(now, &mut exp);
        for &tok in &exp {
            self.timer_event(host, tx, FlowId(tok));
        }
        self.expired = exp;
    }

    /// The earliest time `poll` has work.
    pub fn next_timer(&self, host: &TcpHost) -> Option<u64> {
        match (host.next_timer(), self.timers.next_deadline()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Flows whose program has not finished yet.
    pub fn running(&self) -> usize {
        self.slots
            .iter()
            .filter(|s| s.st.as_ref().is_some_and(|st| !st.is_done()))
            .count()
    }

    fn slot(&mut self, f: FlowId) -> &mut Slot {
        let i = f.0 as usize;
        if i >= self.slots.len() {
            self.slots.resize(i + 1, Slot::default());
            self.timers.grow(i + 1);
        }
        &mut self.slots[i]
    }

    fn count(&mut self, i: usize, status: Status) {
        let Status::Finished(o) = status else { return };
        let slot = &mut self.slots[i];
        if slot.flags & COUNTED != 0 {
            return;
        }
        slot.flags |= COUNTED;
        let tg = self.profile.templates[slot.tpl as usize].tg_id as usize;
        if o == Outcome::Closed && slot.flags & SERVER == 0 && slot.connect_us != NO_TIME {
            let opt = |v: u32| (v != NO_TIME).then_some(v);
            self.latency.push(LatencySample {
                tg_id: tg as u16,
                connect_us: slot.connect_us,
                first_byte_us: opt(slot.first_us),
                last_byte_us: opt(slot.last_us),
            });
        }
        let g = &mut self.groups[tg];
        match o {
            Outcome::Closed => g.closed += 1,
            Outcome::Reset => g.reset += 1,
            Outcome::Aborted => g.aborted += 1,
            Outcome::PeerClosedEarly => g.peer_closed_early += 1,
        }
    }

    /// Feeds an event from inside a TCP callback (operations go through `ctl`).
    fn feed(&mut self, ctl: &mut Ctl, f: FlowId, ev: Event) {
        let i = f.0 as usize;
        let Some(mut st) = self.slots.get_mut(i).and_then(|s| s.st.take()) else {
            return;
        };
        let profile = self.profile.clone();
        let tg = profile.templates[self.slots[i].tpl as usize].tg_id as usize;
        let mut io = CtlIo {
            ctl,
            slot: &mut self.slots[i],
            bufs: &self.bufs,
            profile: &profile,
            now: self.now,
            timers: &mut self.timers,
            token: f.0,
            rng: &mut self.rng,
            tx_bytes: &mut self.groups[tg].tx_bytes,
        };
        let status = st.on_event(&profile, &mut io, ev);
        self.slots[i].st = Some(st);
        self.count(i, status);
    }

    /// Feeds a program-timer event (outside callbacks: operations go to the host).
    fn timer_event<S: TxSink>(&mut self, host: &mut TcpHost, tx: &mut S, f: FlowId) {
        let i = f.0 as usize;
        let Some(mut st) = self.slots.get_mut(i).and_then(|s| s.st.take()) else {
            return;
        };
        let profile = self.profile.clone();
        let tg = profile.templates[self.slots[i].tpl as usize].tg_id as usize;
        let mut io = HostIo {
            host,
            tx,
            f,
            slot: &mut self.slots[i],
            bufs: &self.bufs,
            profile: &profile,
            now: self.now,
            timers: &mut self.timers,
            rng: &mut self.rng,
            tx_bytes: &mut self.groups[tg].tx_bytes,
            close: false,
            abort: false,
        };
        let status = st.on_event(&profile, &mut io, Event::Timer);
        let (close, abort) = (io.close, io.abort);
        self.slots[i].st = Some(st);
        self.count(i, status);
        let now = self.now;
        if abort {
            host.abort(now, self, tx, f);
        } else if close {
            host.close(now, self, tx, f);
        }
    }
}

impl TcpApp for AstfTcpApp {
    fn on_connected(&mut self, ctl: &mut Ctl, f: FlowId) {
        if ctl.passive() {
            let key = ctl.key();
            match self
                .profile
                .server_template_for(Transport::Tcp, key.local_ip, key.local_port)
            {
                Some(t) => {
                    let prog = self.profile.templates[t.0 as usize].server_program;
                    *self.slot(f) = Slot {
                        st: Some(ProgState::new(prog)),
                        tpl: t.0,
                        ..Slot::default()
                    };
                }
                None => {
                    self.no_template += 1;
                    ctl.abort();
                    return;
                }
            }
        }
        let now = self.now;
        let slot = self.slot(f);
        if slot.st.is_none() {
            return;
        }
        slot.flags |= ESTABLISHED;
        if slot.flags & SERVER == 0 {
            slot.connect_us = since_us(now, slot.t0_ns);
        }
        let tpl = slot.tpl as usize;
        let tg = self.profile.templates[tpl].tg_id as usize;
        self.groups[tg].started += 1;
        self.feed(ctl, f, Event::Start);
        self.feed(ctl, f, Event::Established);
    }

    fn on_data(&mut self, ctl: &mut Ctl, f: FlowId, data: &[u8]) {
        let Some(slot) = self.slots.get_mut(f.0 as usize) else {
            return;
        };
        if slot.st.is_none() {
            return;
        }
        slot.rx += data.len() as u64;
        if slot.flags & SERVER == 0 {
            let t = since_us(self.now, slot.t0_ns);
            if slot.first_us == NO_TIME {
                slot.first_us = t;
            }
            slot.last_us = t;
        }
        let tg = self.profile.templates[slot.tpl as usize].tg_id as usize;
        self.groups[tg].rx_bytes += data.len() as u64;
        self.feed(ctl, f, Event::Data);
    }

    fn on_acked(&mut self, ctl: &mut Ctl, f: FlowId, bytes: u32) {
        let Some(slot) = self.slots.get_mut(f.0 as usize) else {
            return;
        };
        slot.unacked = slot.unacked.saturating_sub(u64::from(bytes));
        self.feed(ctl, f, Event::Acked);
    }

    fn on_peer_closed(&mut self, ctl: &mut Ctl, f: FlowId) {
        let Some(slot) = self.slots.get_mut(f.0 as usize) else {
            return;
        };
        slot.flags |= PEER_CLOSED;
        self.feed(ctl, f, Event::PeerClosed);
    }

    fn on_closed(&mut self, f: FlowId, _reason: CloseReason) {
        let i = f.0 as usize;
        if i >= self.slots.len() {
            return;
        }
        self.timers.cancel(f.0);
        let slot = &self.slots[i];
        if slot.st.is_some() && slot.flags & SERVER == 0 {
            self.closed.push((TemplateIdx(slot.tpl), slot.src));
        }
        if let Some(mut st) = self.slots[i].st.take() {
            let status = st.on_event(&self.profile.clone(), &mut DeadIo, Event::Aborted);
            self.slots[i].st = Some(st);
            self.count(i, status);
        }
        self.slots[i] = Slot::default();
    }
}

/// The side's `tcp.txbufsize`: how much a non-blocking send may leave unacknowledged.
fn watermark(profile: &Profile, slot: &Slot) -> u64 {
    let t = &profile.templates[slot.tpl as usize];
    let side = if slot.flags & SERVER != 0 {
        &t.server
    } else {
        &t.client
    };
    u64::from(side.tcp.txbufsize)
}

/// FlowIo inside a TCP callback: operations are queued on `Ctl`.
struct CtlIo<'a> {
    ctl: &'a mut Ctl,
    slot: &'a mut Slot,
    bufs: &'a [BufId],
    profile: &'a Profile,
    now: u64,
    timers: &'a mut TimerWheel,
    token: u32,
    rng: &'a mut Rng,
    tx_bytes: &'a mut u64,
}

impl FlowIo for CtlIo<'_> {
    fn now_ns(&self) -> u64 {
        self.now
    }
    fn send(&mut self, buf: BufIdx) -> bool {
        let len = self.profile.buffer(buf).len() as u32;
        self.ctl.send(self.bufs[buf.0 as usize], 0, len);
        self.slot.unacked += u64::from(len);
        *self.tx_bytes += u64::from(len);
        true
    }
    fn tx_unacked(&self) -> u64 {
        self.slot.unacked
    }
    fn send_watermark(&self) -> u64 {
        watermark(self.profile, self.slot)
    }
    fn rx_bytes(&self) -> u64 {
        self.slot.rx
    }
    fn established(&self) -> bool {
        self.slot.flags & ESTABLISHED != 0
    }
    fn peer_closed(&self) -> bool {
        self.slot.flags & PEER_CLOSED != 0
    }
    fn close(&mut self) {
        self.ctl.close();
    }
    fn reset(&mut self) {
        self.ctl.abort();
    }
    fn send_msg(&mut self, _buf: BufIdx) {}
    fn rx_msgs(&self) -> u64 {
        0
    }
    fn set_keepalive(&mut self, _msec: u32, _rx_mode: bool) {}
    fn arm_timer(&mut self, deadline_ns: u64) {
        self.timers.arm(self.token, deadline_ns);
    }
    fn random_u32(&mut self) -> u32 {
        self.rng.next_u32()
    }
}

/// FlowIo for program timers: sends go straight to the host; close/reset are applied
/// after the interpreter returns (they may call back into the app).
struct HostIo<'a, S: TxSink> {
    host: &'a mut TcpHost,
    tx: &'a mut S,
    f: FlowId,
    slot: &'a mut Slot,
    bufs: &'a [BufId],
    profile: &'a Profile,
    now: u64,
    timers: &'a mut TimerWheel,
    rng: &'a mut Rng,
    tx_bytes: &'a mut u64,
    close: bool,
    abort: bool,
}

impl<S: TxSink> FlowIo for HostIo<'_, S> {
    fn now_ns(&self) -> u64 {
        self.now
    }
    fn send(&mut self, buf: BufIdx) -> bool {
        let len = self.profile.buffer(buf).len() as u32;
        if self
            .host
            .send(self.now, self.tx, self.f, self.bufs[buf.0 as usize], 0, len)
            .is_err()
        {
            return false;
        }
        self.slot.unacked += u64::from(len);
        *self.tx_bytes += u64::from(len);
        true
    }
    fn tx_unacked(&self) -> u64 {
        self.slot.unacked
    }
    fn send_watermark(&self) -> u64 {
        watermark(self.profile, self.slot)
    }
    fn rx_bytes(&self) -> u64 {
        self.slot.rx
    }
    fn established(&self) -> bool {
        self.slot.flags & ESTABLISHED != 0
    }
    fn peer_closed(&self) -> bool {
        self.slot.flags & PEER_CLOSED != 0
    }
    fn close(&mut self) {
        self.close = true;
    }
    fn reset(&mut self) {
        self.abort = true;
    }
    fn send_msg(&mut self, _buf: BufIdx) {}
    fn rx_msgs(&self) -> u64 {
        0
    }
    fn set_keepalive(&mut self, _msec: u32, _rx_mode: bool) {}
    fn arm_timer(&mut self, deadline_ns: u64) {
        self.timers.arm(self.f.0, deadline_ns);
    }
    fn random_u32(&mut self) -> u32 {
        self.rng.next_u32()
    }
}

/// FlowIo of a flow that no longer exists (only used to deliver `Aborted`).
struct DeadIo;

impl FlowIo for DeadIo {
    fn now_ns(&self) -> u64 {
        0
    }
    fn send(&mut self, _buf: BufIdx) -> bool {
        false
    }
    fn tx_unacked(&self) -> u64 {
        0
    }
    fn send_watermark(&self) -> u64 {
        0
    }
    fn rx_bytes(&self) -> u64 {
        0
    }
    fn established(&self) -> bool {
        false
    }
    fn peer_closed(&self) -> bool {
        true
    }
    fn close(&mut self) {}
    fn reset(&mut self) {}
    fn send_msg(&mut self, _buf: BufIdx) {}
    fn rx_msgs(&self) -> u64 {
        0
    }
    fn set_keepalive(&mut self, _msec: u32, _rx_mode: bool) {}
    fn arm_timer(&mut self, _deadline_ns: u64) {}
    fn random_u32(&mut self) -> u32 {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_flow_state_is_small() {
        // Interpreter state (32 B), the counters it reads, latency timestamps, source: 80 B.
        assert_eq!(std::mem::size_of::<ProgState>(), 32);
        assert!(
            std::mem::size_of::<Slot>() <= 80,
            "{}",
            std::mem::size_of::<Slot>()
        );
    }

    #[test]
    fn tcp_config_maps_tunables() {
        let mut side = SideTunables::default();
        side.tcp.mss = 1400;
        side.tcp.initwnd = 2;
        side.tcp.delay_ack_msec = 100;
        side.tcp.no_delay = true;
        side.tcp.rxbufsize = 262_144;
        let c = tcp_config(&side, TcpConfig::default());
        assert_eq!(
            (c.mss, c.init_cwnd, c.delack_ns, c.nagle, c.rcv_wnd),
            (1400, 2, 100_000_000, false, 262_144)
        );
        assert_eq!(c.wscale, Some(3));
        side.tcp.rxbufsize = 32768;
        assert_eq!(tcp_config(&side, TcpConfig::default()).wscale, None);
    }
}
