//! Workload drivers W1, W2 (and the W3 memory measurement) for any [`MemPair`] on T-mem1.
//! One thread runs both stacks and both applications; the figure is that thread's CPU
//! time per completed operation. Every byte is verified; wrong or failed flows count as
//! errors. Runs are bounded in wall time and in operations.

use std::time::{Duration, Instant};

use crate::http::{self, matches_at};
use crate::measure::{self, Histogram};
use crate::pair::{MemPair, Side, SockState};
use crate::report::Record;

/// Bounds of one run.
#[derive(Clone, Copy, Debug)]
pub struct RunCfg {
    /// Concurrent connections.
    pub conns: usize,
    /// Measured wall time.
    pub seconds: f64,
    /// Unmeasured warm-up before it (connections open, ARP, caches).
    pub warmup: f64,
    /// Stop early after this many measured operations.
    pub max_ops: u64,
    /// Frames per side of the in-memory wire (0 = sized from `conns`).
    pub pool: u32,
    /// Run the flows over IPv6 (Squall only; addresses in 2001:2::/48).
    pub ipv6: bool,
    /// A virtual clock for Squall's mem-wire rigs (W1/W2/W4 cells): every reading moves
    /// the nodes' time this many ns (idle gaps skipped as with the real clock), so that
    /// the work done per operation — timers, sweeps — no longer depends on how fast
    /// the machine (or valgrind) runs: instruction counts become exact. 0: the real
    /// clock. Time figures of such a run are not a benchmark's.
    pub clock_step_ns: u64,
}

impl RunCfg {
    pub fn new(conns: usize, seconds: f64) -> Self {
        RunCfg {
            conns,
            seconds,
            warmup: (seconds / 4.0).clamp(0.05, 0.5),
            max_ops: u64::MAX,
            pool: 0,
            ipv6: false,
            clock_step_ns: 0,
        }
    }
}

/// Counters shared by the drivers.
#[derive(Default)]
struct Tally {
    /// Driver loop iterations so far.
    iters: u64,
    ops: u64,
    errors: u64,
    l7_bytes: u64,
}

/// A snapshot at the start of the measured window.
struct Window {
    t: Instant,
    /// Run time (since the driver started) when the window opened.
    start_elapsed: Duration,
    cpu: Duration,
    frames: u64,
    ops: u64,
    l7_bytes: u64,
}

impl Window {
    fn take<P: MemPair>(pair: &P, tally: &Tally, start_elapsed: Duration) -> Self {
        Window {
            t: Instant::now(),
            start_elapsed,
            cpu: measure::thread_cpu(),
            frames: pair.stats().frames,
            ops: tally.ops,
            l7_bytes: tally.l7_bytes,
        }
    }

    /// The result line of the window; `requests` selects `rps` (else `cps`).
    fn record<P: MemPair>(
        &self,
        pair: &P,
        tally: &Tally,
        workload: &str,
        conns: usize,
        requests: bool,
    ) -> Record {
        let secs = self.t.elapsed().as_secs_f64().max(1e-9);
        let cpu_us = (measure::thread_cpu() - self.cpu).as_secs_f64() * 1e6;
        let ops = tally.ops - self.ops;
        let frames = pair.stats().frames - self.frames;
        let per_op = |x: f64| if ops > 0 { Some(x / ops as f64) } else { None };
        let rate = Some(ops as f64 / secs);
        Record {
            cps: if requests { None } else { rate },
            rps: if requests { rate } else { None },
            workload: workload.into(),
            topology: "T-mem1".into(),
            client: pair.client_name().into(),
            server: pair.server_name().into(),
            conns: Some(conns as u64),
            gbps: Some((tally.l7_bytes - self.l7_bytes) as f64 * 8.0 / secs / 1e9),
            mpps: Some(frames as f64 / secs / 1e6),
            frames_per_op: per_op(frames as f64),
            cpu_us_per_op: per_op(cpu_us),
            errors: tally.errors,
            seconds: secs,
            ..Default::default()
        }
    }
}

/// Per-client-slot application state.
#[derive(Clone, Copy, Default)]
struct ClientApp {
    sent: usize,
    got: usize,
    closed: bool,
    bad: bool,
    in_flight: bool,
    t_sent: Duration,
    /// Last time this slot moved a byte or changed state (stall detection).
    last_progress: Duration,
    /// Driver iteration of that progress.
    last_iter: u64,
}

impl ClientApp {
    /// Records progress at `now` (iteration `iter`) if the slot `acted`; returns `acted`.
    fn note_progress(&mut self, acted: bool, now: Duration, iter: u64) -> bool {
        if acted {
            self.last_progress = now;
            self.last_iter = iter;
        }
        acted
    }
}

/// Resets the client slot and opens a new connection on it (a refused open counts as an
/// error); always "acted".
fn reopen<P: MemPair>(pair: &mut P, id: usize, c: &mut ClientApp, tally: &mut Tally) -> bool {
    *c = ClientApp::default();
    if !pair.open(id) {
        tally.errors += 1;
    }
    true
}

/// Receives on `(side, id)`, checking every byte against `expect` at offset `*got`
/// (advanced; `*bad` set on a mismatch); returns the bytes received.
fn recv_verified<P: MemPair>(
    pair: &mut P,
    side: Side,
    id: usize,
    expect: &[u8],
    got: &mut usize,
    bad: &mut bool,
) -> usize {
    pair.recv(side, id, |b| {
        if !matches_at(expect, *got, b) {
            *bad = true;
        }
        *got += b.len();
    })
}

/// A flow with no progress for this long at the end of a run is counted as an error...
pub const STALL: Duration = Duration::from_secs(1);
/// ...if the driver also went round this many times meanwhile (a thread starved by other
/// load on a shared machine is not a stalled flow).
pub const STALL_ITERS: u64 = 100_000;

/// Counts client slots that are mid-flow but have not moved for [`STALL`] and
/// [`STALL_ITERS`]: every flow must end in success or a counted failure, never hang unseen.
fn count_stalled<P: MemPair>(pair: &P, capps: &[ClientApp], w: &Window, tally: &mut Tally) {
    let end = w.start_elapsed + w.t.elapsed();
    for (id, c) in capps.iter().enumerate() {
        if pair.state(Side::Client, id) != SockState::Idle
            && end.saturating_sub(c.last_progress) > STALL
            && tally.iters - c.last_iter > STALL_ITERS
        {
            tally.errors += 1;
        }
    }
}

/// Per-server-slot application state.
#[derive(Clone, Copy, Default)]
struct ServerApp {
    got: usize,
    sent: usize,
    responding: bool,
    closed: bool,
    bad: bool,
}

fn server_app(apps: &mut Vec<ServerApp>, id: usize) -> &mut ServerApp {
    if id >= apps.len() {
        apps.resize(id + 1, ServerApp::default());
    }
    &mut apps[id]
}

/// The main loop shared by the workloads: poll, hand ready slots to `handle`, jump over
/// idle gaps; stop at the deadline or after `max_ops` measured operations.
fn drive<P: MemPair>(
    pair: &mut P,
    cfg: &RunCfg,
    tally: &mut Tally,
    mut handle: impl FnMut(&mut P, Side, usize, Duration, bool, &mut Tally) -> bool,
) -> Window {
    let start = Instant::now();
    let warmup = Duration::from_secs_f64(cfg.warmup);
    let end = warmup + Duration::from_secs_f64(cfg.seconds);
    let mut ready = Vec::with_capacity(cfg.conns * 3 + 16);
    let mut window: Option<Window> = None;
    loop {
        let now = start.elapsed();
        match &window {
            None if now >= warmup => {
                window = Some(Window::take(pair, tally, now));
            }
            Some(w) if now >= end || tally.ops - w.ops >= cfg.max_ops => break,
            _ => {}
        }
        ready.clear();
        tally.iters += 1;
        let moved = pair.poll(now, &mut ready);
        let mut acted = false;
        for &(side, id) in &ready {
            acted |= handle(pair, side, id, now, window.is_some(), tally);
        }
        if !moved && !acted {
            pair.idle();
        }
    }
    window.unwrap_or_else(|| Window::take(pair, tally, start.elapsed()))
}

/// W1 (astf-http): `conns` concurrent connections, each one 100-byte request and a
/// 32,768-byte response, client closes after the last byte, server closes on FIN.
pub fn run_w1<P: MemPair>(pair: &mut P, cfg: &RunCfg) -> Record {
    let req = http::w1_request();
    let resp = http::w1_response();
    let mut tally = Tally::default();
    let window = drive_slots(
        pair,
        cfg,
        &mut tally,
        |pair, id, c, _, _, tally| w1_client(pair, id, c, &req, &resp, tally),
        |pair, id, s, tally| w1_server(pair, id, s, &req, &resp, tally),
    );
    window.record(pair, &tally, "W1", cfg.conns, false)
}

/// [`drive`] with per-slot app state: `client` / `server` handle one ready slot with
/// its state; client progress is noted for stall detection, and stalled client slots
/// are counted as errors at the end.
fn drive_slots<P: MemPair>(
    pair: &mut P,
    cfg: &RunCfg,
    tally: &mut Tally,
    mut client: impl FnMut(&mut P, usize, &mut ClientApp, Duration, bool, &mut Tally) -> bool,
    mut server: impl FnMut(&mut P, usize, &mut ServerApp, &mut Tally) -> bool,
) -> Window {
    let mut capps = vec![ClientApp::default(); cfg.conns];
    let mut sapps: Vec<ServerApp> = Vec::new();
    let window = drive(
        pair,
        cfg,
        tally,
        |pair, side, id, now, measuring, tally| match side {
            Side::Client => {
                let c = &mut capps[id];
                let acted = client(pair, id, c, now, measuring, tally);
                c.note_progress(acted, now, tally.iters)
            }
            Side::Server => server(pair, id, server_app(&mut sapps, id), tally),
        },
    );
    count_stalled(pair, &capps, &window, tally);
    window
}

fn w1_client<P: MemPair>(
    pair: &mut P,
    id: usize,
    c: &mut ClientApp,
    req: &[u8],
    resp: &[u8],
    tally: &mut Tally,
) -> bool {
    let st = pair.state(Side::Client, id);
    match st {
        SockState::Idle => reopen(pair, id, c, tally),
        SockState::Opening => false,
        SockState::Open | SockState::PeerClosed | SockState::Closing => {
            // After our close (possibly early, on bad data) keep draining so the server
            // can finish and close: a stalled flow would never be counted.
            let mut acted = false;
            if c.sent < req.len() && st != SockState::Closing {
                let n = pair.send(Side::Client, id, &req[c.sent..]);
                c.sent += n;
                acted |= n > 0;
            }
            let n = recv_verified(pair, Side::Client, id, resp, &mut c.got, &mut c.bad);
            acted |= n > 0;
            if !c.closed && (c.got >= resp.len() || st == SockState::PeerClosed || c.bad) {
                pair.close(Side::Client, id);
                c.closed = true;
                acted = true;
            }
            acted
        }
        SockState::Done | SockState::Failed => {
            let ok = st == SockState::Done && !c.bad && c.got == resp.len() && c.sent == req.len();
            if ok {
                tally.ops += 1;
                tally.l7_bytes += (req.len() + resp.len()) as u64;
            } else {
                tally.errors += 1;
            }
            pair.release(Side::Client, id);
            reopen(pair, id, c, tally)
        }
    }
}

fn w1_server<P: MemPair>(
    pair: &mut P,
    id: usize,
    s: &mut ServerApp,
    req: &[u8],
    resp: &[u8],
    tally: &mut Tally,
) -> bool {
    let st = pair.state(Side::Server, id);
    match st {
        SockState::Idle | SockState::Opening | SockState::Closing => false,
        SockState::Open | SockState::PeerClosed => {
            let mut acted = false;
            let n = recv_verified(pair, Side::Server, id, req, &mut s.got, &mut s.bad);
            acted |= n > 0;
            if s.got >= req.len() && s.sent < resp.len() && !s.bad {
                let n = pair.send(Side::Server, id, &resp[s.sent..]);
                s.sent += n;
                acted |= n > 0;
            }
            let finished = s.sent == resp.len() || s.got < req.len() || s.bad;
            if st == SockState::PeerClosed && !s.closed && finished {
                pair.close(Side::Server, id);
                s.closed = true;
                acted = true;
            }
            acted
        }
        SockState::Done | SockState::Failed => {
            let ok = st == SockState::Done && !s.bad && s.got == req.len() && s.sent == resp.len();
            if !ok {
                tally.errors += 1;
            }
            pair.release(Side::Server, id);
            *s = ServerApp::default();
            true
        }
    }
}

/// W2 (keepalive-tiny): `conns` persistent connections, each looping one request and
/// one verified response, one request in flight per connection.
pub fn run_w2<P: MemPair>(pair: &mut P, cfg: &RunCfg) -> Record {
    let req = http::w2_request();
    let resp = http::w2_response();
    let mut tally = Tally::default();
    let mut hist = Histogram::new();
    let window = drive_slots(
        pair,
        cfg,
        &mut tally,
        |pair, id, c, now, measuring, tally| {
            let h = if measuring { Some(&mut hist) } else { None };
            w2_client(pair, id, c, &req, &resp, now, h, tally)
        },
        |pair, id, s, tally| w2_server(pair, id, s, &req, &resp, tally),
    );
    let mut r = window.record(pair, &tally, "W2", cfg.conns, true);
    r.p50_us = hist.quantile(0.5);
    r.p99_us = hist.quantile(0.99);
    r
}

#[allow(clippy::too_many_arguments)]
fn w2_client<P: MemPair>(
    pair: &mut P,
    id: usize,
    c: &mut ClientApp,
    req: &[u8],
    resp: &[u8],
    now: Duration,
    hist: Option<&mut Histogram>,
    tally: &mut Tally,
) -> bool {
    let st = pair.state(Side::Client, id);
    match st {
        SockState::Idle => reopen(pair, id, c, tally),
        SockState::Opening | SockState::Closing => false,
        SockState::Open => {
            let mut acted = false;
            if !c.in_flight {
                c.in_flight = true;
                c.sent = 0;
                c.got = 0;
                c.t_sent = now;
            }
            if c.sent < req.len() {
                let n = pair.send(Side::Client, id, &req[c.sent..]);
                c.sent += n;
                acted |= n > 0;
            }
            let n = recv_verified(pair, Side::Client, id, resp, &mut c.got, &mut c.bad);
            acted |= n > 0;
            if c.bad {
                tally.errors += 1;
                pair.close(Side::Client, id);
                c.closed = true;
                return true;
            }
            if c.got == resp.len() {
                tally.ops += 1;
                tally.l7_bytes += (req.len() + resp.len()) as u64;
                if let Some(h) = hist {
                    h.record_ns(now.saturating_sub(c.t_sent).as_nanos() as u64);
                }
                // Next request right away.
                c.t_sent = now;
                c.got = 0;
                c.sent = pair.send(Side::Client, id, req);
            }
            acted
        }
        SockState::PeerClosed => {
            // The server never closes in W2.
            tally.errors += 1;
            pair.close(Side::Client, id);
            c.closed = true;
            true
        }
        SockState::Done | SockState::Failed => {
            // A connection that ended without our close (reset, timed out) is an error,
            // as Squall's W2 client counts it; one we closed was counted then.
            if !c.closed {
                tally.errors += 1;
            }
            pair.release(Side::Client, id);
            *c = ClientApp::default();
            true
        }
    }
}

fn w2_server<P: MemPair>(
    pair: &mut P,
    id: usize,
    s: &mut ServerApp,
    req: &[u8],
    resp: &[u8],
    tally: &mut Tally,
) -> bool {
    let st = pair.state(Side::Server, id);
    match st {
        SockState::Idle | SockState::Opening | SockState::Closing => false,
        SockState::Open => {
            let mut acted = false;
            let n = recv_verified(pair, Side::Server, id, req, &mut s.got, &mut s.bad);
            acted |= n > 0;
            if s.bad {
                tally.errors += 1;
                pair.close(Side::Server, id);
                s.closed = true;
                return true;
            }
            if s.got == req.len() {
                s.got = 0;
                s.responding = true;
                s.sent = 0;
            }
            if s.responding {
                let n = pair.send(Side::Server, id, &resp[s.sent..]);
                s.sent += n;
                acted |= n > 0;
                if s.sent == resp.len() {
                    s.responding = false;
                }
            }
            acted
        }
        SockState::PeerClosed => {
            if !s.closed {
                pair.close(Side::Server, id);
                s.closed = true;
                return true;
            }
            false
        }
        SockState::Done | SockState::Failed => {
            pair.release(Side::Server, id);
            *s = ServerApp::default();
            true
        }
    }
}

/// A stack that can hold `n` established idle flows for the W3 memory figure.
pub trait IdleFlows {
    fn client_name(&self) -> &'static str;
    fn server_name(&self) -> &'static str;
    /// Establishes `n` flows (both ends in this process); returns how many were.
    fn establish_idle(&mut self, n: usize, deadline: Instant) -> Result<usize, String>;
}

/// W3 (idle-flows): RSS of the whole process with `n` flows minus RSS with none, per flow.
/// The baseline is taken before `make` builds the stack, so whatever a stack preallocates
/// for its flows counts (the wire's frame pools, a few MB, count too).
pub fn run_w3<P: IdleFlows>(make: impl FnOnce() -> P, n: usize, max_seconds: f64) -> Record {
    let t = Instant::now();
    // Baseline before the stack exists: preallocated flow tables count as flow memory.
    measure::trim_heap();
    let rss0 = measure::rss_bytes();
    let mut pair = make();
    let deadline = t + Duration::from_secs_f64(max_seconds);
    let (got, err) = match pair.establish_idle(n, deadline) {
        Ok(k) => (k, None),
        Err(e) => (0, Some(e)),
    };
    measure::trim_heap();
    let rss1 = measure::rss_bytes();
    let per = |d: f64| if got > 0 { Some(d / got as f64) } else { None };
    let delta = rss1.saturating_sub(rss0) as f64;
    let mut note = None;
    if got < n {
        note = Some(format!(
            "only {got} of {n} flows established in {max_seconds} s{}",
            err.map(|e| format!(": {e}")).unwrap_or_default()
        ));
    }
    let r = Record {
        workload: "W3".into(),
        topology: "T-mem1".into(),
        client: pair.client_name().into(),
        server: pair.server_name().into(),
        conns: Some(got as u64),
        bytes_per_flow: per(delta),
        bytes_per_endpoint: per(delta / 2.0),
        errors: (n - got.min(n)) as u64,
        seconds: t.elapsed().as_secs_f64(),
        note,
        ..Default::default()
    };
    drop(pair);
    r
}
