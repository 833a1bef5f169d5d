//! Squall on T-mem1: a client node and a server node (`squall_stack::Node`, the node
//! `squall run` runs on) on one thread, joined by squall-port's mem wire (the wire smoltcp
//! runs on with `--wire port`). Squall's API is event-driven (a `TcpApp` per node,
//! pull-based sends from registered buffers), so W1/W2 are written as node apps
//! (`squall_apps.rs`, shared with `mem2.rs`) rather than through the socket-style
//! [`crate::pair::MemPair`]; the rules are the same: every byte verified, errors counted,
//! the figure is the thread's CPU time per completed operation.

use std::time::{Duration, Instant};

use squall_tcp::TcpConfig;

use crate::measure::{self, Histogram};
use crate::report::Record;
use crate::squall_apps::{build, idle_skip, ClientApp, Endpoint, OpenStop, ServerApp, Wl};
use crate::workload::RunCfg;

/// Two nodes, their apps and the wire.
struct Rig {
    c: Endpoint<ClientApp>,
    s: Endpoint<ServerApp>,
    /// The clock: `start.elapsed()` plus the idle gaps skipped.
    start: Instant,
    skipped_ns: u64,
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
    ) -> Result<Self, String> {
        let base = TcpConfig {
            max_flows,
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
        })
    }

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
                now = now.max(self.start.elapsed().as_nanos() as u64 + self.skipped_ns + 1);
            }
            let moved = self.s.turn(now);
            let moved = self.c.turn(now) | moved;
            if !moved {
                break;
            }
        }
        self.frames() != before
    }

    fn frames(&self) -> u64 {
        self.c.sent() + self.s.sent()
    }

    /// Jumps the clock to the next timer when nothing is happening.
    fn idle(&mut self, now: u64) {
        self.skipped_ns += idle_skip(&self.c.node.tcp, &self.s.node.tcp, now);
    }
}

/// Runs W1 or W2 (`requests == true`) between two Squall nodes; one line. `offload`
/// emulates checksum offload on the mem wire: both ports offer it, so neither host
/// computes or verifies TCP checksums (and the wire does not either).
pub fn run(requests: bool, cfg: &RunCfg, offload: bool) -> Result<Record, String> {
    let wl = if requests { Wl::W2 } else { Wl::W1 };
    // Room for the live flows plus one second of TIME_WAIT at a generous rate.
    let max_flows = (cfg.conns as u32 * 4 + 4096).max(1 << 18);
    // A bounded pool, like a NIC ring: when it is full the hosts stop building frames
    // (`tcps_txfull`) and resume when frames come back (`TcpHost::tx_resume`, blocked
    // flows first), so the frames in flight stay few and cache-hot whatever C is (a pool
    // sized to C x the window put tens of MB in flight at C = 1000). Room for one frame
    // per connection and direction (a W2 exchange never waits for a slot), at least 256
    // and at most 2048 frames (4 MiB) per side.
    let frames = if cfg.pool > 0 {
        cfg.pool
    } else {
        (cfg.conns + 64).next_power_of_two().clamp(256, 2048) as u32
    };
    let mut rig = Rig::new(wl, cfg.conns, max_flows, offload, frames, cfg.ipv6)?;
    let start = Instant::now();
    let warmup = Duration::from_secs_f64(cfg.warmup);
    let measured = Duration::from_secs_f64(cfg.seconds);
    // W1 with many connections reaches its steady state only once every connection of
    // the first wave has completed (until then all C are in their first round trips):
    // the warm-up lasts until C connections are done (at most 60 s).
    let steady_ops = if requests { 0 } else { cfg.conns as u64 };
    let mut window: Option<(Instant, Duration, u64, u64, u64)> = None;
    let mut refused = 0u64;
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
        let now = rig.start.elapsed().as_nanos() as u64 + rig.skipped_ns + 1;
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
    let mut note = String::from("wire=squall-port");
    if offload {
        note.push_str("; checksum offload emulated (no TCP checksums)");
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
    Ok(Record {
        workload: wl.name().into(),
        topology: "T-mem1".into(),
        client: "squall".into(),
        server: "squall".into(),
        conns: Some(cfg.conns as u64),
        family: cfg.ipv6.then(|| "ipv6".into()),
        cps: if requests { None } else { rate },
        rps: if requests { rate } else { None },
        gbps: Some((rig.c.app.l7_bytes - bytes0) as f64 * 8.0 / secs / 1e9),
        mpps: Some(frames as f64 / secs / 1e6),
        p50_us: hist.as_ref().and_then(|h| h.quantile(0.5)),
        p99_us: hist.as_ref().and_then(|h| h.quantile(0.99)),
        frames_per_op: per_op(frames as f64),
        cpu_us_per_op: per_op(cpu_us),
        errors: rig.c.app.errors + rig.s.app.errors,
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
        let mut rig = Rig::new(Wl::Idle, 0, n as u32 + 1024, false, 1024, false)?;
        rig.c.app.to_open = n;
        while (rig.c.app.connected as usize) < n || (rig.s.app.accepted as usize) < n {
            if Instant::now() >= deadline {
                break;
            }
            let now = rig.start.elapsed().as_nanos() as u64 + rig.skipped_ns + 1;
            if !rig.open_owed(now, 256) {
                return Err("flow table full".into());
            }
            if !rig.step(now) && rig.c.app.to_open == 0 {
                rig.idle(now);
            }
            if rig.c.app.errors + rig.s.app.errors > 0 {
                return Err(format!(
                    "{} flows failed while opening",
                    rig.c.app.errors + rig.s.app.errors
                ));
            }
        }
        let got = (rig.c.app.connected as usize).min(rig.s.app.accepted as usize);
        self.rig = Some(rig);
        Ok(got)
    }
}
