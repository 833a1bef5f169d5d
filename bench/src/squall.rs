//! Squall (`squall-tcp`) on T-mem1: a client `TcpHost` and a server `TcpHost` on one
//! thread, joined by squall-port's mem wire (the wire smoltcp runs on with `--wire port`).
//! Squall's API is event-driven (a [`TcpApp`] per host, pull-based sends from registered
//! buffers), so W1/W2 are written as apps here rather than through the socket-style
//! [`crate::pair::MemPair`]; the rules are the same: every byte verified, errors counted,
//! the figure is the thread's CPU time per completed operation.

use std::sync::Arc;
use std::time::{Duration, Instant};

use squall_port::mem::{pair, MemConfig, MemFrame, MemPort};
use squall_port::{FrameBuf, Port};
use squall_tcp::{BufId, CloseReason, Ctl, FlowId, TcpApp, TcpConfig, TcpHost, TxSink};

use crate::http::{self, matches_at};
use crate::measure::{self, Histogram};
use crate::report::Record;
use crate::workload::RunCfg;

const CLIENT_IP: u32 = 0x1000_0001; // 16.0.0.1 (pool of 200 addresses)
const CLIENT_ADDRS: u32 = 200;
const SERVER_IP: u32 = 0x3000_0001; // 48.0.0.1
const SERVER_PORT: u16 = 80;
const BURST: usize = 32;

/// A [`TxSink`] over a mem port: frames are written in place in the port's pool.
struct PortSink {
    port: MemPort,
    free: Vec<MemFrame>,
    out: Vec<MemFrame>,
    cur: Option<MemFrame>,
    alloc_fail: u64,
}

impl PortSink {
    fn new(port: MemPort) -> Self {
        PortSink {
            port,
            free: Vec::with_capacity(BURST),
            out: Vec::with_capacity(4 * BURST),
            cur: None,
            alloc_fail: 0,
        }
    }

    fn flush(&mut self) {
        if !self.out.is_empty() {
            self.port.tx_burst(&mut self.out);
        }
    }

    fn sent(&self) -> u64 {
        self.port.stats().tx_frames + self.out.len() as u64
    }
}

impl TxSink for PortSink {
    fn alloc(&mut self, len: usize) -> Option<&mut [u8]> {
        if self.cur.is_none() {
            if self.free.is_empty() && self.port.alloc_tx(&mut self.free, BURST) == 0 {
                self.flush();
                if self.port.alloc_tx(&mut self.free, BURST) == 0 {
                    self.alloc_fail += 1;
                    return None;
                }
            }
            self.cur = self.free.pop();
        }
        let f = self.cur.as_mut()?;
        f.set_len(len).ok()?;
        Some(f.data_mut())
    }

    fn commit(&mut self, len: usize) {
        if let Some(mut f) = self.cur.take() {
            if f.set_len(len).is_ok() {
                self.out.push(f);
                if self.out.len() >= BURST {
                    self.port.tx_burst(&mut self.out);
                }
            } else {
                self.port.release(f);
            }
        }
    }
}

/// Per-flow application state (indexed by `FlowId`).
#[derive(Clone, Copy, Default)]
struct FlowApp {
    got: u32,
    bad: bool,
    responding: bool,
    t_sent: u64,
}

fn flow_slot(v: &mut Vec<FlowApp>, f: FlowId) -> &mut FlowApp {
    let i = f.0 as usize;
    if i >= v.len() {
        v.resize(i + 1, FlowApp::default());
    }
    &mut v[i]
}

/// Which workload the apps play.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Wl {
    W1,
    W2,
    /// W3: connect and stay idle.
    Idle,
}

struct ClientApp {
    wl: Wl,
    req: BufId,
    req_len: u32,
    resp: Arc<[u8]>,
    flows: Vec<FlowApp>,
    ops: u64,
    errors: u64,
    l7_bytes: u64,
    /// Connections that ended and should be replaced.
    to_open: usize,
    connected: u64,
    now_ns: u64,
    hist: Option<Histogram>,
}

impl TcpApp for ClientApp {
    fn on_connected(&mut self, ctl: &mut Ctl, f: FlowId) {
        self.connected += 1;
        let now = self.now_ns;
        let s = flow_slot(&mut self.flows, f);
        *s = FlowApp {
            t_sent: now,
            ..FlowApp::default()
        };
        if self.wl != Wl::Idle {
            ctl.send(self.req, 0, self.req_len);
        }
    }

    fn on_data(&mut self, ctl: &mut Ctl, f: FlowId, data: &[u8]) {
        let resp = &self.resp;
        let s = flow_slot(&mut self.flows, f);
        if !matches_at(resp, s.got as usize, data) {
            s.bad = true;
        }
        s.got += data.len() as u32;
        if s.bad {
            ctl.abort();
            return;
        }
        if s.got as usize == resp.len() {
            match self.wl {
                Wl::W1 => ctl.close(),
                Wl::W2 => {
                    self.ops += 1;
                    self.l7_bytes += (self.req_len as usize + resp.len()) as u64;
                    if let Some(h) = self.hist.as_mut() {
                        h.record_ns(self.now_ns.saturating_sub(s.t_sent));
                    }
                    s.got = 0;
                    s.t_sent = self.now_ns;
                    ctl.send(self.req, 0, self.req_len);
                }
                Wl::Idle => {}
            }
        }
    }

    fn on_closed(&mut self, f: FlowId, reason: CloseReason) {
        let resp_len = self.resp.len();
        let s = flow_slot(&mut self.flows, f);
        let ok = self.wl == Wl::W1
            && reason == CloseReason::Normal
            && !s.bad
            && s.got as usize == resp_len;
        if ok {
            self.ops += 1;
            self.l7_bytes += (self.req_len as usize + resp_len) as u64;
        } else {
            self.errors += 1;
        }
        *s = FlowApp::default();
        self.to_open += 1;
    }
}

struct ServerApp {
    wl: Wl,
    req: Arc<[u8]>,
    resp: BufId,
    resp_len: u32,
    flows: Vec<FlowApp>,
    errors: u64,
    accepted: u64,
}

impl TcpApp for ServerApp {
    fn on_connected(&mut self, _ctl: &mut Ctl, f: FlowId) {
        self.accepted += 1;
        *flow_slot(&mut self.flows, f) = FlowApp::default();
    }

    fn on_data(&mut self, ctl: &mut Ctl, f: FlowId, data: &[u8]) {
        let req = &self.req;
        let s = flow_slot(&mut self.flows, f);
        if s.responding && self.wl == Wl::W1 {
            s.bad = true; // W1 carries one request per connection
        }
        if !matches_at(req, s.got as usize, data) {
            s.bad = true;
        }
        s.got += data.len() as u32;
        if s.bad {
            ctl.abort();
            return;
        }
        if s.got as usize == req.len() {
            ctl.send(self.resp, 0, self.resp_len);
            match self.wl {
                Wl::W1 => s.responding = true,
                _ => s.got = 0,
            }
        }
    }

    fn on_peer_closed(&mut self, ctl: &mut Ctl, _f: FlowId) {
        ctl.close();
    }

    fn on_closed(&mut self, f: FlowId, reason: CloseReason) {
        let s = flow_slot(&mut self.flows, f);
        let ok = self.wl != Wl::W1
            || (reason == CloseReason::Normal && !s.bad && s.got as usize == self.req.len());
        if !ok {
            self.errors += 1;
        }
        *s = FlowApp::default();
    }
}

/// Two hosts, their apps and the wire.
struct Rig {
    ch: TcpHost,
    sh: TcpHost,
    capp: ClientApp,
    sapp: ServerApp,
    cs: PortSink,
    ss: PortSink,
    rxv: Vec<MemFrame>,
    next_port: u32,
    /// The clock: `start.elapsed()` plus the idle gaps skipped.
    start: Instant,
    skipped_ns: u64,
}

impl Rig {
    /// `frames`: the wire's pool per side (the port cycles its whole pool, so it is the
    /// cache working set: size it to the frames in flight).
    fn new(
        wl: Wl,
        conns: usize,
        max_flows: u32,
        offload: bool,
        frames: u32,
    ) -> Result<Self, String> {
        let (a, b) = pair(MemConfig {
            frames,
            ring_size: frames,
            ..MemConfig::default()
        })
        .map_err(|e| e.to_string())?;
        let (req, resp) = match wl {
            Wl::W1 => (http::w1_request(), http::w1_response()),
            _ => (http::w2_request(), http::w2_response()),
        };
        let base = TcpConfig {
            max_flows,
            tx_checksum: !offload,
            rx_checksum: !offload,
            ..TcpConfig::default()
        };
        let mut ch = TcpHost::new(
            TcpConfig {
                mac: [2, 0, 0, 0, 0, 1],
                gateway_mac: [2, 0, 0, 0, 0, 2],
                ..base.clone()
            },
            1,
        );
        let mut sh = TcpHost::new(
            TcpConfig {
                mac: [2, 0, 0, 0, 0, 2],
                gateway_mac: [2, 0, 0, 0, 0, 1],
                ..base
            },
            1,
        );
        sh.listen(SERVER_PORT);
        let (req_len, resp_len) = (req.len() as u32, resp.len() as u32);
        let req: Arc<[u8]> = Arc::from(req);
        let resp: Arc<[u8]> = Arc::from(resp);
        let req_id = ch.buffers().register(req.clone());
        let resp_id = sh.buffers().register(resp.clone());
        Ok(Rig {
            ch,
            sh,
            capp: ClientApp {
                wl,
                req: req_id,
                req_len,
                resp,
                flows: Vec::new(),
                ops: 0,
                errors: 0,
                l7_bytes: 0,
                to_open: conns,
                connected: 0,
                now_ns: 1,
                hist: None,
            },
            sapp: ServerApp {
                wl,
                req,
                resp: resp_id,
                resp_len,
                flows: Vec::new(),
                errors: 0,
                accepted: 0,
            },
            cs: PortSink::new(a),
            ss: PortSink::new(b),
            rxv: Vec::with_capacity(BURST),
            next_port: 0,
            start: Instant::now(),
            skipped_ns: 0,
        })
    }

    /// Opens the connections owed; false if the host refused (no free flow slot).
    fn open_owed(&mut self, now: u64, limit: usize) -> bool {
        let mut opened = 0;
        while self.capp.to_open > 0 && opened < limit {
            let k = self.next_port;
            self.next_port = self.next_port.wrapping_add(1);
            let ip = CLIENT_IP + (k % CLIENT_ADDRS);
            let port = 1024 + ((k / CLIENT_ADDRS) % 64_000) as u16;
            match self
                .ch
                .connect(now, &mut self.cs, ip, port, SERVER_IP, SERVER_PORT)
            {
                Ok(_) => {
                    self.capp.to_open -= 1;
                    opened += 1;
                }
                Err(squall_tcp::ConnectError::InUse) => continue,
                Err(squall_tcp::ConnectError::NoResources) => return false,
            }
        }
        true
    }

    /// Delivers frames both ways until the wire is quiet, runs timers; returns whether
    /// any frame moved.
    fn step(&mut self, mut now: u64) -> bool {
        self.capp.now_ns = now;
        let before = self.cs.sent() + self.ss.sent();
        self.ch.poll(now, &mut self.capp, &mut self.cs);
        self.sh.poll(now, &mut self.sapp, &mut self.ss);
        for round in 0..256 {
            if round > 0 {
                // Time moves on between rounds (latency is measured on this clock).
                now = now.max(self.start.elapsed().as_nanos() as u64 + self.skipped_ns + 1);
                self.capp.now_ns = now;
            }
            self.cs.flush();
            self.ss.flush();
            let mut moved = false;
            if self.ss.port.rx_burst(&mut self.rxv, BURST) > 0 {
                moved = true;
                for f in &self.rxv {
                    self.sh.rx(now, f.data(), &mut self.sapp, &mut self.ss);
                }
                self.ss.port.release_all(&mut self.rxv);
            }
            self.ss.flush();
            if self.cs.port.rx_burst(&mut self.rxv, BURST) > 0 {
                moved = true;
                for f in &self.rxv {
                    self.ch.rx(now, f.data(), &mut self.capp, &mut self.cs);
                }
                self.cs.port.release_all(&mut self.rxv);
            }
            // Flows that stopped on a full TX pool go on now that frames came back.
            self.sh.tx_resume(now, &mut self.ss);
            self.ch.tx_resume(now, &mut self.cs);
            if !moved && self.cs.out.is_empty() && self.ss.out.is_empty() {
                break;
            }
        }
        self.cs.sent() + self.ss.sent() != before
    }

    fn frames(&self) -> u64 {
        self.cs.sent() + self.ss.sent()
    }

    /// Jumps the clock to the next timer when nothing is happening.
    fn idle(&mut self, now: u64) {
        let next = [self.ch.next_timer(), self.sh.next_timer()]
            .into_iter()
            .flatten()
            .min();
        if let Some(t) = next {
            if t > now {
                self.skipped_ns += t - now;
            }
        } else {
            self.skipped_ns += 1_000;
        }
    }
}

fn w(wl: Wl) -> &'static str {
    match wl {
        Wl::W1 => "W1",
        Wl::W2 => "W2",
        Wl::Idle => "W3",
    }
}

/// Runs W1 or W2 (`requests == true`) between two Squall hosts; one line. `offload`
/// emulates TCP checksum offload on both hosts (no TCP checksums computed or verified).
pub fn run(requests: bool, cfg: &RunCfg, offload: bool) -> Result<Record, String> {
    let wl = if requests { Wl::W2 } else { Wl::W1 };
    // Room for the live flows plus one second of TIME_WAIT at a generous rate.
    let max_flows = (cfg.conns as u32 * 4 + 4096).max(1 << 18);
    // A bounded pool, like a NIC ring: when it is full the hosts stop building frames
    // (`tcps_txfull`) and resume when frames come back (`TcpHost::tx_resume`), so the
    // frames in flight stay few and cache-hot whatever C is (a pool sized to C x the
    // window put tens of MB in flight at C = 1000).
    let frames = (cfg.conns * 24 + 64).next_power_of_two().clamp(128, 1024) as u32;
    let mut rig = Rig::new(wl, cfg.conns, max_flows, offload, frames)?;
    let start = Instant::now();
    let warmup = Duration::from_secs_f64(cfg.warmup);
    let end = warmup + Duration::from_secs_f64(cfg.seconds);
    let mut window: Option<(Instant, Duration, u64, u64, u64)> = None;
    let mut refused = 0u64;
    loop {
        let real = start.elapsed();
        match window {
            None if real >= warmup => {
                if requests {
                    rig.capp.hist = Some(Histogram::new());
                }
                window = Some((
                    Instant::now(),
                    measure::thread_cpu(),
                    rig.frames(),
                    rig.capp.ops,
                    rig.capp.l7_bytes,
                ));
            }
            Some((_, _, _, ops0, _)) if real >= end || rig.capp.ops - ops0 >= cfg.max_ops => break,
            _ => {}
        }
        let now = rig.start.elapsed().as_nanos() as u64 + rig.skipped_ns + 1;
        if !rig.open_owed(now, 4096) {
            refused += 1;
        }
        if !rig.step(now) && rig.capp.to_open == 0 {
            rig.idle(now);
        }
    }
    let (t0, cpu0, frames0, ops0, bytes0) =
        window.unwrap_or((Instant::now(), measure::thread_cpu(), 0, 0, 0));
    let secs = t0.elapsed().as_secs_f64().max(1e-9);
    let cpu_us = (measure::thread_cpu() - cpu0).as_secs_f64() * 1e6;
    let ops = rig.capp.ops - ops0;
    let frames = rig.frames() - frames0;
    let per_op = |x: f64| if ops > 0 { Some(x / ops as f64) } else { None };
    let rate = Some(ops as f64 / secs);
    let hist = rig.capp.hist.take();
    let mut note = String::from("wire=squall-port");
    if offload {
        note.push_str("; checksum offload emulated (no TCP checksums)");
    }
    if refused > 0 {
        note.push_str(&format!(
            "; connect refused (flow table full) {refused} times"
        ));
    }
    if rig.cs.alloc_fail + rig.ss.alloc_fail > 0 {
        note.push_str(&format!(
            "; tx pool empty {} times",
            rig.cs.alloc_fail + rig.ss.alloc_fail
        ));
    }
    Ok(Record {
        workload: w(wl).into(),
        topology: "T-mem1".into(),
        client: "squall".into(),
        server: "squall".into(),
        conns: Some(cfg.conns as u64),
        cps: if requests { None } else { rate },
        rps: if requests { rate } else { None },
        gbps: Some((rig.capp.l7_bytes - bytes0) as f64 * 8.0 / secs / 1e9),
        mpps: Some(frames as f64 / secs / 1e6),
        p50_us: hist.as_ref().and_then(|h| h.quantile(0.5)),
        p99_us: hist.as_ref().and_then(|h| h.quantile(0.99)),
        frames_per_op: per_op(frames as f64),
        cpu_us_per_op: per_op(cpu_us),
        errors: rig.capp.errors + rig.sapp.errors,
        seconds: secs,
        note: Some(note),
        ..Default::default()
    })
}

/// W3 for Squall: hosts sized for `n` flows, `n` established idle flows.
pub struct SquallIdle {
    rig: Option<Rig>,
}

impl SquallIdle {
    pub fn new() -> Self {
        SquallIdle { rig: None }
    }
}

impl Default for SquallIdle {
    fn default() -> Self {
        Self::new()
    }
}

impl crate::workload::IdleFlows for SquallIdle {
    fn client_name(&self) -> &'static str {
        "squall"
    }

    fn server_name(&self) -> &'static str {
        "squall"
    }

    fn establish_idle(&mut self, n: usize, deadline: Instant) -> Result<usize, String> {
        // 1024 frames per side (2 MiB) for 256 opens per step.
        let mut rig = Rig::new(Wl::Idle, 0, n as u32 + 1024, false, 1024)?;
        rig.capp.to_open = n;
        while (rig.capp.connected as usize) < n || (rig.sapp.accepted as usize) < n {
            if Instant::now() >= deadline {
                break;
            }
            let now = rig.start.elapsed().as_nanos() as u64 + rig.skipped_ns + 1;
            if !rig.open_owed(now, 256) {
                return Err("flow table full".into());
            }
            if !rig.step(now) && rig.capp.to_open == 0 {
                rig.idle(now);
            }
            if rig.capp.errors + rig.sapp.errors > 0 {
                return Err(format!(
                    "{} flows failed while opening",
                    rig.capp.errors + rig.sapp.errors
                ));
            }
        }
        let got = (rig.capp.connected as usize).min(rig.sapp.accepted as usize);
        self.rig = Some(rig);
        Ok(got)
    }
}
