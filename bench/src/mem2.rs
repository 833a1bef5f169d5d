//! T-mem2 (and the T-mem1 initial-window rows) for Squall: a client node
//! (`squall_stack::Node`, the node `squall run` runs on) with the W1/W2 client app and a
//! server node with the server app, joined by squall-port's mem wire. With [`Placement::TwoThreads`] each side runs on its own thread (client
//! pinned to core 0, server to core 1) and the wire crosses cores; with
//! [`Placement::OneThread`] one loop polls both sides (T-mem1, virtual clock that skips
//! idle gaps, as `squall.rs` does).
//!
//! CPU accounting: each thread reads its own CPU time (`measure::thread_cpu`, the thread CPU clock) at the
//! start and end of the measured window and also times every loop iteration on the
//! monotonic clock, splitting them into busy iterations (a frame received or sent, a
//! connection opened) and idle ones (polled, found nothing). The CPU billed to a side is
//! its thread CPU times the busy share of its wall time; idle spins are not billed. The raw
//! CPU of both threads (idle spins included) goes into `thread_us_per_op`.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use squall_tcp::TcpConfig;

use crate::measure::{self, Histogram};
use crate::report::Record;
use crate::squall_apps::{self, ClientApp, Endpoint, ServerApp, Wl};

/// The two request workloads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// astf-http: a new connection per 100-byte GET / 32 KiB answer.
    W1,
    /// keepalive-tiny: persistent connections looping a tiny request/response.
    W2,
}

impl Workload {
    pub fn name(self) -> &'static str {
        self.apps().name()
    }

    /// What the shared apps play.
    fn apps(self) -> Wl {
        match self {
            Workload::W1 => Wl::W1,
            Workload::W2 => Wl::W2,
        }
    }

    /// `"W1"` / `"W2"` (any case).
    pub fn parse(s: &str) -> Option<Self> {
        match s.to_ascii_uppercase().as_str() {
            "W1" => Some(Workload::W1),
            "W2" => Some(Workload::W2),
            _ => None,
        }
    }
}

/// Where the two stacks run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// T-mem1: one thread polls both hosts.
    OneThread,
    /// T-mem2: client thread on `client_core`, server thread on `server_core`.
    TwoThreads {
        client_core: usize,
        server_core: usize,
    },
}

/// One cell's configuration.
#[derive(Clone, Debug)]
pub struct Mem2Cfg {
    pub workload: Workload,
    pub placement: Placement,
    pub conns: usize,
    /// Measured wall time.
    pub seconds: f64,
    /// Unmeasured warm-up before it.
    pub warmup: f64,
    /// Initial congestion window in segments (the spec's default is 2).
    pub init_cwnd: u8,
}

impl Mem2Cfg {
    /// T-mem2 defaults: cores 0 and 1, initial window 2.
    pub fn new(workload: Workload, conns: usize, seconds: f64) -> Self {
        Mem2Cfg {
            workload,
            placement: Placement::TwoThreads {
                client_core: 0,
                server_core: 1,
            },
            conns,
            seconds,
            warmup: (seconds / 4.0).clamp(0.05, 0.5),
            init_cwnd: 2,
        }
    }
}

/// The client side: node, app (opening the connections it owes in each turn's poll) and
/// its end of the wire.
type ClientSide = Endpoint<ClientApp>;

/// The server side.
type ServerSide = Endpoint<ServerApp>;

fn build(cfg: &Mem2Cfg) -> Result<(ClientSide, ServerSide), String> {
    // Room for the live flows plus one second of TIME_WAIT at a generous rate.
    let max_flows = (cfg.conns as u32 * 4 + 4096).max(1 << 18);
    let frames = (cfg.conns * 24 + 64).next_power_of_two().clamp(128, 32_768) as u32;
    let base = TcpConfig {
        max_flows,
        opts: crate::squall::w1_opts(squall_tcp::FlowOpts {
            init_cwnd: cfg.init_cwnd,
            ..squall_tcp::FlowOpts::default()
        }),
        ..TcpConfig::default()
    };
    let (mut client, server) = squall_apps::build(
        cfg.workload.apps(),
        cfg.conns,
        base,
        frames,
        false,
        squall_stack::node::MAX_RX_BURSTS,
        false,
    )?;
    // Up to 4096 owed connections per turn, 2 x 4096 address/port pairs tried.
    client.app.open_in_poll = Some((4096, 2 * 4096));
    Ok((client, server))
}

/// Run phases, driven by the coordinating thread.
const WARMUP: u8 = 0;
const MEASURE: u8 = 1;
const STOP: u8 = 2;

/// Busy/idle bookkeeping of one thread over the measured window.
#[derive(Clone, Copy, Debug, Default)]
struct Meter {
    cpu: Duration,
    wall_ns: u64,
    busy_ns: u64,
}

impl Meter {
    /// Thread CPU billed to work: raw CPU times the busy share of wall time.
    fn busy_cpu_us(&self) -> f64 {
        if self.wall_ns == 0 {
            return 0.0;
        }
        let share = (self.busy_ns as f64 / self.wall_ns as f64).min(1.0);
        self.cpu.as_secs_f64() * 1e6 * share
    }
}

/// Times loop iterations inside the window.
struct IterClock {
    last: Instant,
    in_window: bool,
    cpu0: Duration,
    t0: Instant,
    busy_ns: u64,
}

impl IterClock {
    fn new() -> Self {
        let now = Instant::now();
        IterClock {
            last: now,
            in_window: false,
            cpu0: Duration::ZERO,
            t0: now,
            busy_ns: 0,
        }
    }

    fn open(&mut self) {
        self.in_window = true;
        self.cpu0 = measure::thread_cpu();
        self.t0 = Instant::now();
        self.last = self.t0;
        self.busy_ns = 0;
    }

    /// Ends an iteration; `busy` says whether it did anything.
    #[inline]
    fn tick(&mut self, busy: bool) {
        let t = Instant::now();
        if self.in_window && busy {
            self.busy_ns += t.duration_since(self.last).as_nanos() as u64;
        }
        self.last = t;
    }

    fn close(&self) -> Meter {
        Meter {
            cpu: measure::thread_cpu().saturating_sub(self.cpu0),
            wall_ns: self.t0.elapsed().as_nanos() as u64,
            busy_ns: self.busy_ns,
        }
    }
}

/// What a side reports at the end.
struct ClientOut {
    meter: Meter,
    ops: u64,
    l7_bytes: u64,
    frames: u64,
    errors: u64,
    secs: f64,
    hist: Option<Histogram>,
    refused: u64,
    alloc_fail: u64,
    pinned: bool,
}

struct ServerOut {
    meter: Meter,
    frames: u64,
    errors: u64,
    alloc_fail: u64,
    pinned: bool,
}

/// The client's counters when the measured window opened.
struct ClientMark {
    ops: u64,
    l7_bytes: u64,
    frames: u64,
    t0: Instant,
}

impl ClientMark {
    /// Before the window: zero counters, `t0` as given.
    fn before(t0: Instant) -> Self {
        ClientMark {
            ops: 0,
            l7_bytes: 0,
            frames: 0,
            t0,
        }
    }

    /// Opens the window on the client: W2 starts recording latencies, counters are read.
    fn open(c: &mut ClientSide) -> Self {
        if c.app.wl == Wl::W2 {
            c.app.hist = Some(Histogram::new());
        }
        ClientMark {
            ops: c.app.ops,
            l7_bytes: c.app.l7_bytes,
            frames: c.sent(),
            t0: Instant::now(),
        }
    }

    /// What the client did since the mark.
    fn out(&self, c: &mut ClientSide, meter: Meter, in_window: bool, pinned: bool) -> ClientOut {
        ClientOut {
            meter,
            ops: if in_window { c.app.ops - self.ops } else { 0 },
            l7_bytes: c.app.l7_bytes - self.l7_bytes,
            frames: c.sent() - self.frames,
            errors: c.app.errors,
            secs: self.t0.elapsed().as_secs_f64(),
            hist: c.app.hist.take(),
            refused: c.app.refused,
            alloc_fail: c.tx_full(),
            pinned,
        }
    }
}

/// One side as its own thread runs it (T-mem2).
trait Threaded: Send {
    type Out;
    /// The measured window opens: snapshot the counters.
    fn open(&mut self);
    /// One loop iteration; true if it did anything.
    fn turn(&mut self, now: u64) -> bool;
    /// What the side did in the window.
    fn out(self, meter: Meter, in_window: bool, pinned: bool) -> Self::Out;
}

/// The client thread's state: the side and its counters at the window's start.
struct ClientRun(ClientSide, ClientMark);

impl Threaded for ClientRun {
    type Out = ClientOut;

    fn open(&mut self) {
        self.1 = ClientMark::open(&mut self.0);
    }

    fn turn(&mut self, now: u64) -> bool {
        self.0.turn(now)
    }

    fn out(mut self, meter: Meter, in_window: bool, pinned: bool) -> ClientOut {
        self.1.out(&mut self.0, meter, in_window, pinned)
    }
}

/// The server thread's state: the side and its frames sent at the window's start.
struct ServerRun(ServerSide, u64);

impl Threaded for ServerRun {
    type Out = ServerOut;

    fn open(&mut self) {
        self.1 = self.0.sent();
    }

    fn turn(&mut self, now: u64) -> bool {
        self.0.turn(now)
    }

    fn out(self, meter: Meter, _in_window: bool, pinned: bool) -> ServerOut {
        let s = self.0;
        ServerOut {
            meter,
            frames: s.sent() - self.1,
            errors: s.app.errors,
            alloc_fail: s.tx_full(),
            pinned,
        }
    }
}

/// A side's thread: pinned to `core` if given, it turns until [`STOP`]; when [`MEASURE`]
/// begins the side snapshots its counters and the clock's window opens. Idle turns spin.
fn side_loop<T: Threaded>(
    mut side: T,
    phase: &AtomicU8,
    origin: Instant,
    core: Option<usize>,
) -> T::Out {
    let pinned = core.map(measure::pin_to_core).unwrap_or(false);
    let mut clock = IterClock::new();
    loop {
        let p = phase.load(Ordering::Relaxed);
        if p == STOP {
            break;
        }
        if p == MEASURE && !clock.in_window {
            side.open();
            clock.open();
        }
        let now = origin.elapsed().as_nanos() as u64 + 1;
        let busy = side.turn(now);
        clock.tick(busy);
        if !busy {
            std::hint::spin_loop();
        }
    }
    side.out(clock.close(), clock.in_window, pinned)
}

/// T-mem1 variant: one loop polls both sides; the clock skips idle gaps to the next timer
/// (as the T-mem1 Squall driver does), so idle spins hardly occur; those that do are
/// still excluded the same way.
fn one_thread(cfg: &Mem2Cfg, mut c: ClientSide, mut s: ServerSide) -> (ClientOut, ServerOut) {
    let start = Instant::now();
    let warmup = Duration::from_secs_f64(cfg.warmup);
    let end = warmup + Duration::from_secs_f64(cfg.seconds);
    let mut clock = IterClock::new();
    let mut skipped = 0u64;
    let mut mark = ClientMark::before(start);
    let mut sf0 = 0;
    loop {
        let real = start.elapsed();
        if real >= end {
            break;
        }
        if real >= warmup && !clock.in_window {
            mark = ClientMark::open(&mut c);
            sf0 = s.sent();
            clock.open();
        }
        let now = real.as_nanos() as u64 + skipped + 1;
        let mut busy = false;
        // Deliver until quiet, as one stack pair on one core would.
        for _ in 0..256 {
            let a = c.turn(now);
            let b = s.turn(now);
            busy |= a | b;
            if !(a | b) {
                break;
            }
        }
        clock.tick(busy);
        if !busy && c.app.to_open == 0 {
            skipped += squall_apps::idle_skip(&c.node.tcp, &s.node.tcp, now);
        }
    }
    // One thread: its CPU is not split between the sides (the record gives the total
    // only); the whole meter goes with the client.
    let m = clock.close();
    let sf = s.sent() - sf0;
    (
        mark.out(&mut c, m, clock.in_window, false),
        ServerOut {
            meter: Meter::default(),
            frames: sf,
            errors: s.app.errors,
            alloc_fail: s.tx_full(),
            pinned: false,
        },
    )
}

/// Runs one cell; one record (`topology` T-mem2 or T-mem1 by placement).
pub fn run(cfg: &Mem2Cfg) -> Result<Record, String> {
    if cfg.conns == 0 {
        return Err("conns must be at least 1".into());
    }
    let (client, server) = build(cfg)?;
    let (co, so) = match cfg.placement {
        Placement::OneThread => one_thread(cfg, client, server),
        Placement::TwoThreads {
            client_core,
            server_core,
        } => {
            let phase = Arc::new(AtomicU8::new(WARMUP));
            let origin = Instant::now();
            let (pc, ps) = (phase.clone(), phase.clone());
            let ct = std::thread::Builder::new()
                .name("mem2-client".into())
                .spawn(move || {
                    let run = ClientRun(client, ClientMark::before(Instant::now()));
                    side_loop(run, &pc, origin, Some(client_core))
                })
                .map_err(|e| e.to_string())?;
            let st = std::thread::Builder::new()
                .name("mem2-server".into())
                .spawn(move || side_loop(ServerRun(server, 0), &ps, origin, Some(server_core)));
            let st = match st {
                Ok(t) => t,
                Err(e) => {
                    phase.store(STOP, Ordering::Relaxed);
                    let _ = ct.join();
                    return Err(e.to_string());
                }
            };
            std::thread::sleep(Duration::from_secs_f64(cfg.warmup));
            phase.store(MEASURE, Ordering::Relaxed);
            std::thread::sleep(Duration::from_secs_f64(cfg.seconds));
            phase.store(STOP, Ordering::Relaxed);
            let co = ct
                .join()
                .map_err(|_| "client thread panicked".to_string())?;
            let so = st
                .join()
                .map_err(|_| "server thread panicked".to_string())?;
            (co, so)
        }
    };
    Ok(record(cfg, co, so))
}

fn record(cfg: &Mem2Cfg, co: ClientOut, so: ServerOut) -> Record {
    let secs = co.secs.max(1e-9);
    let ops = co.ops;
    let per_op = |x: f64| if ops > 0 { Some(x / ops as f64) } else { None };
    let cu = co.meter.busy_cpu_us();
    let su = so.meter.busy_cpu_us();
    let raw = (co.meter.cpu + so.meter.cpu).as_secs_f64() * 1e6;
    let frames = co.frames + so.frames;
    let rate = Some(ops as f64 / secs);
    let two = matches!(cfg.placement, Placement::TwoThreads { .. });
    let mut note = String::from("driver=mem2");
    if two {
        let pct = |m: &Meter| {
            if m.wall_ns > 0 {
                100.0 * m.busy_ns as f64 / m.wall_ns as f64
            } else {
                0.0
            }
        };
        note.push_str(&format!(
            "; CPU billed = thread CPU x busy share (client {:.0}%, server {:.0}%)",
            pct(&co.meter),
            pct(&so.meter)
        ));
        if !(co.pinned && so.pinned) {
            note.push_str("; pinning refused (threads unpinned)");
        }
    } else {
        note.push_str("; one thread, virtual clock skips idle gaps");
    }
    if cfg.init_cwnd != 2 {
        note.push_str(&format!("; initial window {} segments", cfg.init_cwnd));
    }
    if co.refused > 0 {
        note.push_str(&format!(
            "; connect refused (flow table full) {} times",
            co.refused
        ));
    }
    if co.alloc_fail + so.alloc_fail > 0 {
        note.push_str(&format!(
            "; tx pool empty {} times",
            co.alloc_fail + so.alloc_fail
        ));
    }
    let hist = co.hist.as_ref();
    Record {
        workload: cfg.workload.name().into(),
        topology: if two { "T-mem2" } else { "T-mem1" }.into(),
        client: "squall".into(),
        server: "squall".into(),
        conns: Some(cfg.conns as u64),
        initwnd: Some(cfg.init_cwnd as u64),
        cps: if cfg.workload == Workload::W1 {
            rate
        } else {
            None
        },
        rps: if cfg.workload == Workload::W2 {
            rate
        } else {
            None
        },
        gbps: Some(co.l7_bytes as f64 * 8.0 / secs / 1e9),
        mpps: Some(frames as f64 / secs / 1e6),
        p50_us: hist.and_then(|h| h.quantile(0.5)),
        p99_us: hist.and_then(|h| h.quantile(0.99)),
        frames_per_op: per_op(frames as f64),
        cpu_us_per_op: per_op(cu + su),
        // One thread cannot tell the sides' CPU apart: only the total is given.
        client_us_per_op: if two { per_op(cu) } else { None },
        server_us_per_op: if two { per_op(su) } else { None },
        thread_us_per_op: per_op(raw),
        errors: co.errors + so.errors,
        seconds: secs,
        note: Some(note),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_share_scales_cpu() {
        let m = Meter {
            cpu: Duration::from_millis(100),
            wall_ns: 1_000_000_000,
            busy_ns: 250_000_000,
        };
        assert!((m.busy_cpu_us() - 25_000.0).abs() < 1e-6);
        let idle = Meter::default();
        assert_eq!(idle.busy_cpu_us(), 0.0);
    }

    #[test]
    fn workload_names_round_trip() {
        for w in [Workload::W1, Workload::W2] {
            assert_eq!(Workload::parse(w.name()), Some(w));
        }
        assert_eq!(Workload::parse("w2"), Some(Workload::W2));
        assert_eq!(Workload::parse("W3"), None);
    }

    #[test]
    fn one_thread_w2_verifies_bytes() {
        let mut cfg = Mem2Cfg::new(Workload::W2, 4, 0.05);
        cfg.placement = Placement::OneThread;
        cfg.warmup = 0.02;
        let r = run(&cfg).unwrap();
        assert_eq!(r.topology, "T-mem1");
        assert_eq!(r.errors, 0);
        assert!(r.rps.unwrap() > 0.0);
    }
}
