//! Squall on T-mem1: a client node and a server node (`squall_stack::Node`, the node
//! `squall run` runs on) on one thread, joined by squall-port's mem wire (the wire smoltcp
//! runs on with `--wire port`). Squall's API is event-driven (a `TcpApp` per node,
//! pull-based sends from registered buffers), so W1/W2 are written as node apps
//! (`squall_apps.rs`, shared with `mem2.rs`) rather than through the socket-style
//! [`crate::pair::MemPair`]; the rules are the same: every byte verified, errors counted,
//! the figure is the thread's CPU time per completed operation.

use std::sync::Arc;
use std::time::{Duration, Instant};

use squall_serve::app::{AppConfig, ServeApp};
use squall_serve::files::Files;
use squall_serve::respond::Route;
use squall_stack::NodeApp;
use squall_tcp::TcpConfig;

use crate::http;
use crate::measure::{self, Histogram};
use crate::report::Record;
use crate::site;
use crate::squall_apps::{build, idle_skip, ClientApp, Endpoint, OpenStop, ServerApp, Wl};
use crate::workload::RunCfg;

/// The server side's failed requests or flows.
pub(crate) trait ServerErrors {
    fn errors(&self) -> u64;
}

impl ServerErrors for ServerApp {
    fn errors(&self) -> u64 {
        self.errors
    }
}

impl ServerErrors for ServeApp {
    /// Requests answered with 4xx/5xx, parse errors, sends refused.
    fn errors(&self) -> u64 {
        let s = &self.stats;
        s.by_class[4] + s.by_class[5] + s.parse_errors + s.send_errors
    }
}

/// Two nodes, their apps and the wire.
struct Rig<S = ServerApp> {
    c: Endpoint<ClientApp>,
    s: Endpoint<S>,
    /// The clock: `start.elapsed()` plus the idle gaps skipped.
    start: Instant,
    skipped_ns: u64,
    /// A virtual clock's step per reading (`RunCfg::clock_step_ns`), 0: the real clock,
    /// and the virtual time read so far.
    clock_step_ns: u64,
    virtual_ns: u64,
}

impl Rig {
    /// `frames`: the wire's pool per side (see [`build`]).
    fn new(
        wl: Wl,
        conns: usize,
        max_flows: u32,
        offload: bool,
        frames: u32,
        ipv6: bool,
    ) -> Result<Rig, String> {
        let base = TcpConfig {
            max_flows,
            opts: w1_opts(squall_tcp::FlowOpts::default()),
            ..TcpConfig::default()
        };
        // With `offload` the ports offer checksum offload and the nodes turn the hosts'
        // software checksums off. Both nodes share this thread: one rx burst per turn
        // (`NodeConfig::rx_bursts`), so that each side's frames and flows of a turn are
        // still in cache when the other side answers them (draining every burst, the
        // default for a node with a core of its own, measured 6-11 % more CPU per
        // operation here at C = 1,000; docs/BENCHMARKS.md).
        let (c, s) = build(wl, conns, base, frames, offload, 1, ipv6)?;
        Ok(Rig {
            c,
            s,
            start: Instant::now(),
            skipped_ns: 0,
            clock_step_ns: 0,
            virtual_ns: 0,
        })
    }

    /// The same rig with `squall serve`'s app as the server, serving the benchmark site
    /// (`site.rs`: the W1 and W4 files loaded by `Files::load`, W2's `/testu` route), and
    /// the client checking each answer with squall-http against the body `wl` asks for.
    fn with_serve(self, wl: Wl) -> Result<Rig<ServeApp>, String> {
        let Rig {
            mut c,
            s,
            start,
            skipped_ns,
            clock_step_ns,
            virtual_ns,
        } = self;
        let mut node = s.node;
        let resp = http::w2_response();
        let head = resp
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .map_or(0, |p| p + 4);
        let w2_body: Arc<[u8]> = Arc::from(&resp[head..]);
        let route = Route::parse(&site::w2_route(&String::from_utf8_lossy(&w2_body)))?;
        // One directory per rig: T-memN builds several rigs at once in one process.
        static SITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let k = SITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("squall-bench-site-{}-{k}", std::process::id()));
        site::write(&dir)?;
        let files = Arc::new(Files::load(&dir)?);
        let _ = std::fs::remove_dir_all(&dir);
        let file = |p: &str| -> Result<Arc<[u8]>, String> {
            Ok(files
                .lookup(p.as_bytes())
                .ok_or_else(|| format!("site: {p} did not load"))?
                .1
                .data
                .clone())
        };
        let body = match wl {
            Wl::W1 => file(site::W1_PATH)?,
            Wl::W4 | Wl::W4Ka => file(site::W4_PATH)?,
            Wl::W2 | Wl::Idle => w2_body,
        };
        let cfg = AppConfig {
            max_conns: 1 << 20,
            idle_timeout_ns: 3_600_000_000_000,
            header_timeout_ns: 3_600_000_000_000,
            limits: squall_http::Limits::default(),
        };
        let app = ServeApp::new(cfg, files, &[route], &mut node.tcp, None);
        c.app.http_body = Some(body);
        Ok(Rig {
            c,
            s: Endpoint { node, app },
            start,
            skipped_ns,
            clock_step_ns,
            virtual_ns,
        })
    }
}

impl<S: NodeApp + ServerErrors> Rig<S> {
    /// Opens the connections owed; false if the host refused (no free flow slot).
    fn open_owed(&mut self, now: u64, limit: usize) -> bool {
        self.c.open_owed(now, limit, usize::MAX).1 == OpenStop::Done
    }

    /// Turns both nodes (server first) until neither has anything to do (TCP timers run
    /// in the turns); returns whether any frame moved.
    fn step(&mut self, mut now: u64) -> bool {
        let before = self.frames();
        for round in 0..256 {
            if round > 0 {
                // Time moves on between rounds (latency is measured on this clock).
                now = now.max(self.now());
            }
            let moved = server_turn(&mut self.s, now);
            let moved = client_turn(&mut self.c, now) | moved;
            if !moved {
                break;
            }
        }
        self.frames() != before
    }

    fn frames(&self) -> u64 {
        self.c.sent() + self.s.sent()
    }

    /// The nodes' time: the real clock plus the idle gaps skipped, or the virtual clock
    /// moved one step by each reading.
    fn now(&mut self) -> u64 {
        if self.clock_step_ns > 0 {
            self.virtual_ns += self.clock_step_ns;
            self.virtual_ns + self.skipped_ns
        } else {
            self.start.elapsed().as_nanos() as u64 + self.skipped_ns + 1
        }
    }

    /// Jumps the clock to the next timer when nothing is happening.
    fn idle(&mut self, now: u64) {
        self.skipped_ns += idle_skip(&self.c.node.tcp, &self.s.node.tcp, now);
    }
}

/// One turn of the server node, not inlined so that callgrind splits a cell's
/// instructions by side (`--toggle-collect='squall_bench::squall::server_turn*'`).
#[inline(never)]
fn server_turn<S: NodeApp>(s: &mut Endpoint<S>, now: u64) -> bool {
    s.turn(now)
}

/// One turn of the client node (see [`server_turn`]).
#[inline(never)]
fn client_turn(c: &mut Endpoint<ClientApp>, now: u64) -> bool {
    c.turn(now)
}

/// Runs W1 or W2 (`requests == true`) between two Squall nodes; one line. `offload`
/// emulates checksum offload on the mem wire: both ports offer it, so neither host
/// computes or verifies TCP checksums (and the wire does not either).
pub fn run(requests: bool, cfg: &RunCfg, offload: bool) -> Result<Record, String> {
    run_wl(if requests { Wl::W2 } else { Wl::W1 }, cfg, offload)
}

/// Runs workload `wl` (W1, W2, W4 or W4's keep-alive variant) between two Squall nodes
/// with the bench's own server (fixed answers compared byte for byte); one line.
pub(crate) fn run_wl(wl: Wl, cfg: &RunCfg, offload: bool) -> Result<Record, String> {
    let rig = Rig::new(
        wl,
        cfg.conns,
        max_flows(cfg, wl),
        offload,
        frames(cfg),
        cfg.ipv6,
    )?;
    Ok(measure_rig(rig, wl, cfg, offload, "squall"))
}

/// W2 with `squall serve`'s app as the server (`--stacks squall-serve`): the request goes
/// through squall-http's parser and the server's route on one end, the answer (with its
/// Date header) through the parser on the other; the same wire, client and rules as
/// [`run`], so the two lines of one run compare what HTTP costs on top of raw W2.
pub fn run_serve(cfg: &RunCfg, offload: bool) -> Result<Record, String> {
    run_serve_wl(Wl::W2, cfg, offload)
}

/// [`run_serve`] for any of W1, W2, W4 and W4's keep-alive variant: W1 and W4 GET the
/// site's files (`site.rs`) from `squall serve`'s app, one connection each or looped.
pub(crate) fn run_serve_wl(wl: Wl, cfg: &RunCfg, offload: bool) -> Result<Record, String> {
    let rig = Rig::new(
        wl,
        cfg.conns,
        max_flows(cfg, wl),
        offload,
        frames(cfg),
        cfg.ipv6,
    )?
    .with_serve(wl)?;
    let mut r = measure_rig(rig, wl, cfg, offload, "squall-serve");
    if let Some(n) = r.note.as_mut() {
        let what = match wl {
            Wl::W2 | Wl::Idle => "route /testu",
            Wl::W1 => "file /w1",
            Wl::W4 | Wl::W4Ka => "file /w4",
        };
        n.push_str(&format!(
            "; server: squall serve's app ({what}), client checks answers with squall-http"
        ));
    }
    Ok(r)
}

/// A T-mem1 cell by name: workload `W1`, `W2` or `W4` (`keepalive`: W4's keep-alive
/// variant), with the bench's own server or (`serve`) `squall serve`'s app.
pub fn run_cell(
    workload: &str,
    keepalive: bool,
    serve: bool,
    cfg: &RunCfg,
    offload: bool,
) -> Result<Record, String> {
    let wl = match (workload, keepalive) {
        ("W1", _) => Wl::W1,
        ("W2", _) => Wl::W2,
        ("W4", false) => Wl::W4,
        ("W4", true) => Wl::W4Ka,
        (w, _) => {
            return Err(format!(
                "workload {w} is not a Squall T-mem1 cell (W1, W2, W4)"
            ))
        }
    };
    if serve {
        run_serve_wl(wl, cfg, offload)
    } else {
        run_wl(wl, cfg, offload)
    }
}

/// Room for the live flows plus one second of TIME_WAIT at a generous rate: 262,144
/// flows, and 524,288 for W4's connections (a small answer each: over 250,000 a second
/// here, which filled the smaller table with TIME_WAIT flows and made opens wait).
fn max_flows(cfg: &RunCfg, wl: Wl) -> u32 {
    let floor = if wl == Wl::W4 { 1 << 19 } else { 1 << 18 };
    (cfg.conns as u32 * 4 + 4096).max(floor)
}

/// A bounded pool, like a NIC ring: when it is full the hosts stop building frames
/// (`tcps_txfull`) and resume when frames come back (`TcpHost::tx_resume`, blocked flows
/// first), so the frames in flight stay few and cache-hot whatever C is (a pool sized to
/// C x the window put tens of MB in flight at C = 1000). Room for one frame per
/// connection and direction (a W2 exchange never waits for a slot), at least 256 and at
/// most 2048 frames (4 MiB) per side.
fn frames(cfg: &RunCfg) -> u32 {
    if cfg.pool > 0 {
        cfg.pool
    } else {
        (cfg.conns + 64).next_power_of_two().clamp(256, 2048) as u32
    }
}

/// Runs a built rig for the measured window; the line names `server`.
fn measure_rig<S: NodeApp + ServerErrors>(
    mut rig: Rig<S>,
    wl: Wl,
    cfg: &RunCfg,
    offload: bool,
    server: &str,
) -> Record {
    let requests = wl.looping();
    let start = Instant::now();
    let warmup = Duration::from_secs_f64(cfg.warmup);
    let measured = Duration::from_secs_f64(cfg.seconds);
    // W1 with many connections reaches its steady state only once every connection of
    // the first wave has completed (until then all C are in their first round trips):
    // the warm-up lasts until C connections are done (at most 60 s).
    let steady_ops = if requests { 0 } else { cfg.conns as u64 };
    let mut window: Option<(Instant, Duration, u64, u64, u64)> = None;
    let mut refused = 0u64;
    rig.clock_step_ns = cfg.clock_step_ns;
    loop {
        let real = start.elapsed();
        match window {
            None if real >= warmup
                && (rig.c.app.ops >= steady_ops || real >= Duration::from_secs(60)) =>
            {
                if requests {
                    rig.c.app.hist = Some(Histogram::new());
                }
                window = Some((
                    Instant::now(),
                    measure::thread_cpu(),
                    rig.frames(),
                    rig.c.app.ops,
                    rig.c.app.l7_bytes,
                ));
            }
            Some((t0, _, _, ops0, _))
                if t0.elapsed() >= measured || rig.c.app.ops - ops0 >= cfg.max_ops =>
            {
                break
            }
            _ => {}
        }
        let now = rig.now();
        if !rig.open_owed(now, 4096) {
            refused += 1;
        }
        if !rig.step(now) && rig.c.app.to_open == 0 {
            rig.idle(now);
        }
    }
    let (t0, cpu0, frames0, ops0, bytes0) =
        window.unwrap_or((Instant::now(), measure::thread_cpu(), 0, 0, 0));
    let secs = t0.elapsed().as_secs_f64().max(1e-9);
    let cpu_us = (measure::thread_cpu() - cpu0).as_secs_f64() * 1e6;
    let ops = rig.c.app.ops - ops0;
    let frames = rig.frames() - frames0;
    let per_op = |x: f64| if ops > 0 { Some(x / ops as f64) } else { None };
    let rate = Some(ops as f64 / secs);
    let hist = rig.c.app.hist.take();
    // (For instruction counts per operation: callgrind's cost of `Rig::step` over this.)
    let mut note = format!("wire=squall-port; {} operations in all", rig.c.app.ops);
    if offload {
        note.push_str("; checksum offload emulated (no TCP checksums)");
    }
    if cfg.clock_step_ns > 0 {
        note.push_str(&format!(
            "; virtual clock, {} ns per reading (an instruction count, not a timing)",
            cfg.clock_step_ns
        ));
    }
    if refused > 0 {
        note.push_str(&format!(
            "; connect refused (flow table full) {refused} times"
        ));
    }
    let tx_full = rig.c.tx_full() + rig.s.tx_full();
    if tx_full > 0 {
        note.push_str(&format!("; tx pool empty {tx_full} times"));
    }
    Record {
        workload: wl.name().into(),
        topology: "T-mem1".into(),
        client: "squall".into(),
        server: server.into(),
        conns: Some(cfg.conns as u64),
        family: cfg.ipv6.then(|| "ipv6".into()),
        keepalive: wl.keepalive(),
        cps: if wl == Wl::W1 { rate } else { None },
        rps: if wl == Wl::W1 { None } else { rate },
        gbps: Some((rig.c.app.l7_bytes - bytes0) as f64 * 8.0 / secs / 1e9),
        mpps: Some(frames as f64 / secs / 1e6),
        p50_us: hist.as_ref().and_then(|h| h.quantile(0.5)),
        p99_us: hist.as_ref().and_then(|h| h.quantile(0.99)),
        frames_per_op: per_op(frames as f64),
        cpu_us_per_op: per_op(cpu_us),
        errors: rig.c.app.errors + rig.s.app.errors(),
        seconds: secs,
        note: Some(note),
        ..Default::default()
    }
}

/// W3 for Squall: hosts sized for `n` flows, `n` established idle flows; the server side
/// is the bench's own app, or with `serve` `squall serve`'s app (its per-connection state
/// counted: the memory of an idle keep-alive connection on the HTTP server).
pub struct SquallIdle {
    serve: bool,
    rig: Option<Rig>,
    serve_rig: Option<Rig<ServeApp>>,
}

impl SquallIdle {
    pub fn new() -> Self {
        SquallIdle {
            serve: false,
            rig: None,
            serve_rig: None,
        }
    }

    /// With `squall serve`'s app as the server.
    pub fn serve() -> Self {
        SquallIdle {
            serve: true,
            ..Self::new()
        }
    }
}

impl Default for SquallIdle {
    fn default() -> Self {
        Self::new()
    }
}

/// Connections the server side holds.
trait Accepted {
    fn accepted(&self) -> u64;
}

impl Accepted for ServerApp {
    fn accepted(&self) -> u64 {
        self.accepted
    }
}

impl Accepted for ServeApp {
    fn accepted(&self) -> u64 {
        self.live
    }
}

/// Opens `n` idle connections on `rig` (until `deadline`); how many both sides hold.
fn establish<S: NodeApp + ServerErrors + Accepted>(
    rig: &mut Rig<S>,
    n: usize,
    deadline: Instant,
) -> Result<usize, String> {
    rig.c.app.to_open = n;
    while (rig.c.app.connected as usize) < n || (rig.s.app.accepted() as usize) < n {
        if Instant::now() >= deadline {
            break;
        }
        let now = rig.now();
        if !rig.open_owed(now, 256) {
            return Err("flow table full".into());
        }
        if !rig.step(now) && rig.c.app.to_open == 0 {
            rig.idle(now);
        }
        let errors = rig.c.app.errors + rig.s.app.errors();
        if errors > 0 {
            return Err(format!("{errors} flows failed while opening"));
        }
    }
    Ok((rig.c.app.connected as usize).min(rig.s.app.accepted() as usize))
}

impl crate::workload::IdleFlows for SquallIdle {
    fn client_name(&self) -> &'static str {
        "squall"
    }

    fn server_name(&self) -> &'static str {
        if self.serve {
            "squall-serve"
        } else {
            "squall"
        }
    }

    fn establish_idle(&mut self, n: usize, deadline: Instant) -> Result<usize, String> {
        // 1024 frames per side (2 MiB) for 256 opens per step.
        let rig = Rig::new(Wl::Idle, 0, n as u32 + 1024, false, 1024, false)?;
        if self.serve {
            let mut rig = rig.with_serve(Wl::Idle)?;
            let got = establish(&mut rig, n, deadline)?;
            self.serve_rig = Some(rig);
            Ok(got)
        } else {
            let mut rig = rig;
            let got = establish(&mut rig, n, deadline)?;
            self.rig = Some(rig);
            Ok(got)
        }
    }
}

/// The TCP options of the workloads' definition (../shared/BENCHMARKS.md, W1: MSS 1460,
/// initial window 2, delayed ACK 100 ms) over `o`.
pub fn w1_opts(o: squall_tcp::FlowOpts) -> squall_tcp::FlowOpts {
    squall_tcp::FlowOpts {
        delack_ns: 100_000_000,
        ..o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each W1, W2 and W4 cell with `squall serve`'s app (and W4 with the bench's own
    /// server) completes operations with no error: every answer parsed and its body
    /// compared by the client, every request answered 2xx by the server. Small hosts
    /// so the test stays light (the cells size theirs from C): 4,096 flows, or 131,072
    /// where each request takes a connection (TIME_WAIT holds them for a second).
    #[test]
    fn http_cells_run_clean() {
        for (wl, serve) in [
            (Wl::W1, true),
            (Wl::W2, true),
            (Wl::W4, true),
            (Wl::W4Ka, true),
            (Wl::W4, false),
            (Wl::W4Ka, false),
        ] {
            let mut cfg = RunCfg::new(20, 0.2);
            cfg.max_ops = 300;
            let flows = if wl.one_shot() { 1 << 17 } else { 4096 };
            let rig = Rig::new(wl, cfg.conns, flows, false, frames(&cfg), false).unwrap();
            let r = if serve {
                measure_rig(rig.with_serve(wl).unwrap(), wl, &cfg, false, "squall-serve")
            } else {
                measure_rig(rig, wl, &cfg, false, "squall")
            };
            assert_eq!(r.errors, 0, "{wl:?} serve={serve}: {:?}", r.note);
            assert_eq!(r.workload, wl.name());
            assert_eq!(r.keepalive, wl.keepalive());
            assert!(r.rps.or(r.cps).unwrap_or(0.0) > 0.0, "{wl:?}: no operation");
            // One request per connection: SYN, SYN-ACK, request, answer, FINs and ACKs.
            let frames = r.frames_per_op.unwrap();
            if wl.one_shot() {
                assert!(frames >= 6.0, "{wl:?}: {frames} frames per connection");
            }
        }
    }

    /// On the virtual clock a cell does the same work however fast it runs: two runs of
    /// the same operations move the same frames and read the same latencies (a real-clock
    /// read left in the driver would make them differ).
    #[test]
    fn the_virtual_clock_makes_a_cell_repeatable() {
        for (wl, serve) in [(Wl::W2, false), (Wl::W2, true), (Wl::W1, false)] {
            let run = || {
                let mut cfg = RunCfg::new(50, 60.0);
                cfg.warmup = 0.0;
                cfg.max_ops = if wl.one_shot() { 300 } else { 3000 };
                cfg.clock_step_ns = 10_000;
                let flows = if wl.one_shot() { 1 << 17 } else { 4096 };
                let rig = Rig::new(wl, cfg.conns, flows, false, frames(&cfg), false).unwrap();
                if serve {
                    measure_rig(rig.with_serve(wl).unwrap(), wl, &cfg, false, "squall-serve")
                } else {
                    measure_rig(rig, wl, &cfg, false, "squall")
                }
            };
            let (a, b) = (run(), run());
            assert_eq!(a.errors + b.errors, 0, "{wl:?} serve={serve}");
            assert!(a.note.as_deref().unwrap_or("").contains("virtual clock"));
            assert_eq!(a.frames_per_op, b.frames_per_op, "{wl:?} serve={serve}");
            assert_eq!(a.p50_us, b.p50_us, "{wl:?} serve={serve}");
            assert_eq!(a.p99_us, b.p99_us, "{wl:?} serve={serve}");
        }
    }
}
