//! The `squall` command: `squall run PROFILE ...` generates the profile's traffic over the
//! in-memory wire and reports; `squall validate PROFILE` only loads and checks it;
//! `squall daemon` runs the engine under a JSON-RPC 2.0 control API (`docs/API.md`).
//! Exit status: 0 clean run, 1 errors or invariant violations, 2 invalid profile/usage.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};

mod daemon;
use squall::report::{self, RunInfo};
use squall::run::{self, Live, RunConfig};
use squall::source;

#[derive(Parser)]
#[command(
    name = "squall",
    version,
    about = "Squall stateful L7 traffic generator"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Generate a profile's traffic (both sides over the in-memory wire) and report.
    Run(Box<RunArgs>),
    /// Load and validate a profile; print every error with its JSON path.
    Validate {
        /// Profile: `.json` IR or `.py` (compiled with `python3 -m squall.compile`).
        profile: PathBuf,
        /// Profile tunable for `.py` profiles (repeatable).
        #[arg(short = 't', value_name = "KEY=VALUE")]
        tunables: Vec<String>,
    },
    /// Run the engine under control: JSON-RPC 2.0 on a loopback TCP port or a unix socket.
    Daemon {
        /// Loopback address and port (newline-delimited JSON-RPC; port 0 picks one).
        #[arg(long, default_value = "127.0.0.1:4501", conflicts_with = "unix")]
        listen: std::net::SocketAddr,
        /// Listen on this unix socket path instead.
        #[arg(long, value_name = "PATH")]
        unix: Option<PathBuf>,
    },
}

#[derive(clap::Args)]
struct RunArgs {
    /// Profile: `.json` IR or `.py` (compiled with `python3 -m squall.compile`).
    profile: PathBuf,
    /// Seconds during which new flows are started.
    #[arg(short = 'd', long, default_value_t = 10.0)]
    duration: f64,
    /// Rate multiplier: every template runs at cps x M.
    #[arg(short = 'm', long, default_value_t = 1.0)]
    mult: f64,
    /// 1: both sides in one thread (T-mem1); 2: client on core 0, server on core 1.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=2))]
    cores: u32,
    /// Interface: `mem` (the in-memory wire, both sides), `afpacket:IFNAME` or `dpdk[:PORTNAME]`
    /// (a real interface, one side: needs --mode client|server and root; dpdk needs the
    /// `dpdk` cargo feature and takes --eal).
    #[arg(long, default_value = "mem")]
    iface: String,
    /// DPDK EAL arguments for --iface dpdk, passed through, e.g. "--no-huge --in-memory -l 0
    /// --vdev=net_af_packet0,iface=eth0".
    #[arg(long, value_name = "ARGS", allow_hyphen_values = true)]
    eal: Option<String>,
    /// Side(s) Squall plays: `both` (mem only), `client` or `server` (real interface).
    #[arg(long, value_name = "client|server|both")]
    mode: Option<String>,
    /// Real interface: address whose MAC is resolved by ARP (default: the profile's first
    /// server address in client mode, first client address in server mode).
    #[arg(long, value_name = "IP")]
    peer_ip: Option<String>,
    /// Real interface: the peer's MAC (skips ARP resolution).
    #[arg(long, value_name = "MAC")]
    peer_mac: Option<String>,
    /// Write every counter and histogram summary to this JSON file.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Record the first flows of the run (both directions) in this pcap file.
    #[arg(long, value_name = "FILE")]
    pcap: Option<PathBuf>,
    /// Number of flows recorded by --pcap.
    #[arg(long, default_value_t = 10)]
    pcap_flows: usize,
    /// Deterministic simulation on a virtual clock (single thread).
    #[arg(long)]
    sim: bool,
    /// Seed (scheduler, hosts, impairment); default: the profile's scheduler seed.
    #[arg(long)]
    seed: Option<u64>,
    /// Seconds in-flight flows may take to finish after the duration before being cut.
    #[arg(long, default_value_t = 5.0)]
    drain_sec: f64,
    /// Wire impairment, both directions: loss=P,dup=P,reorder=P,corrupt=P,delay_us=N,jitter_us=N,rate_mbps=N
    #[arg(long, value_name = "SPEC")]
    impair: Option<String>,
    /// Flow table size of each TCP host.
    #[arg(long, default_value_t = 262_144)]
    max_flows: u32,
    /// Profile tunable for `.py` profiles (repeatable).
    #[arg(short = 't', value_name = "KEY=VALUE")]
    tunables: Vec<String>,
    /// No progress line on stderr.
    #[arg(short = 'q', long)]
    quiet: bool,
}

fn load(path: &std::path::Path, t: &[String]) -> Result<squall_astf::Profile, ExitCode> {
    source::load(path, t).map_err(|e| {
        eprintln!("squall: {}: {e}", path.display());
        ExitCode::from(2)
    })
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Validate { profile, tunables } => match load(&profile, &tunables) {
            Ok(p) => {
                println!(
                    "{}: valid ({} buffers, {} programs, {} templates, {} template groups)",
                    profile.display(),
                    p.buffers.len(),
                    p.programs.len(),
                    p.templates.len(),
                    p.tg_names.len()
                );
                ExitCode::SUCCESS
            }
            Err(c) => c,
        },
        Cmd::Run(a) => run_cmd(*a),
        Cmd::Daemon { listen, unix } => {
            let l = match unix {
                Some(p) => daemon::Listen::Unix(p),
                None => daemon::Listen::Tcp(listen),
            };
            match daemon::serve(l) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => usage(&format!("daemon: {e}")),
            }
        }
    }
}

fn usage(msg: &str) -> ExitCode {
    eprintln!("squall: {msg}");
    ExitCode::from(2)
}

fn run_cmd(a: RunArgs) -> ExitCode {
    let mut real = match squall::iface::parse(
        &a.iface,
        a.mode.as_deref(),
        a.peer_ip.as_deref(),
        a.peer_mac.as_deref(),
    ) {
        Ok(r) => r,
        Err(e) => return usage(&e),
    };
    if let Err(e) = squall::iface::set_eal(&mut real, a.eal.as_deref()) {
        return usage(&e);
    }
    if real.is_some() && (a.sim || a.cores != 1 || a.pcap.is_some() || a.impair.is_some()) {
        return usage(
            "a real interface runs one side in one thread: no --sim, --cores, --pcap or --impair",
        );
    }
    if !(a.duration.is_finite() && a.duration > 0.0 && a.duration <= 1e6) {
        return usage("--duration must be a positive number of seconds");
    }
    if !(a.mult.is_finite() && a.mult > 0.0) {
        return usage("--mult must be positive");
    }
    if !(a.drain_sec.is_finite() && a.drain_sec >= 0.0 && a.drain_sec <= 1e5) {
        return usage("--drain-sec must be >= 0");
    }
    if a.pcap.is_some() && a.cores > 1 && !a.sim {
        return usage("--pcap needs a single-threaded run (--cores 1 or --sim)");
    }
    let impair = match a.impair.as_deref().map(squall::impair::parse_impair) {
        None => Default::default(),
        Some(Ok(i)) => i,
        Some(Err(e)) => return usage(&format!("--impair: {e}")),
    };
    let profile = match load(&a.profile, &a.tunables) {
        Ok(p) => Arc::new(p),
        Err(c) => return c,
    };
    let cfg = RunConfig {
        duration_ns: (a.duration * 1e9) as u64,
        mult: a.mult,
        cores: if a.sim { 1 } else { a.cores },
        sim: a.sim,
        seed: a.seed,
        drain_ns: (a.drain_sec * 1e9) as u64,
        pcap_flows: a.pcap.as_ref().map(|_| a.pcap_flows),
        impair,
        max_flows: a.max_flows.max(16),
    };
    let live = Arc::new(Live::default());
    let (p2, c2, l2) = (profile.clone(), cfg.clone(), live.clone());
    let r2 = real.clone();
    let h = std::thread::spawn(move || match r2 {
        None => run::run(p2, &c2, l2),
        Some(rc) => squall::iface::run_real(p2, &c2, &rc, l2),
    });
    if !a.sim && !a.quiet {
        progress(&live, &h);
    }
    let result = match h.join() {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => {
            eprintln!("squall: run failed: {e}");
            return ExitCode::from(1);
        }
        Err(_) => {
            eprintln!("squall: run thread panicked");
            return ExitCode::from(1);
        }
    };
    let checks = match &real {
        None => report::invariants(&result),
        Some(rc) => squall::iface::single_side_checks(&result, rc.mode),
    };
    let real_mode = real
        .as_ref()
        .map(|rc| format!("real time, {}, {} only", rc.label(), rc.mode.name()));
    let path = a.profile.display().to_string();
    let info = RunInfo {
        profile_path: &path,
        mode: if let Some(m) = &real_mode {
            m
        } else if a.sim {
            "simulation (virtual clock)"
        } else if cfg.cores == 2 {
            "real time, 2 threads (T-mem2)"
        } else {
            "real time, 1 thread (T-mem1)"
        },
        duration_s: a.duration,
        mult: a.mult,
        cores: cfg.cores,
    };
    print!("{}", report::summary(&profile, &info, &result, &checks));
    if let (Some(f), Some(bytes)) = (&a.pcap, &result.pcap) {
        if let Err(e) = std::fs::write(f, bytes) {
            eprintln!("squall: cannot write {}: {e}", f.display());
            return ExitCode::from(1);
        }
    }
    if let Some(f) = &a.json {
        let doc = report::to_json(&profile, &info, &result, &checks);
        let text = serde_json::to_string_pretty(&doc).unwrap_or_default();
        if let Err(e) = std::fs::write(f, text + "\n") {
            eprintln!("squall: cannot write {}: {e}", f.display());
            return ExitCode::from(1);
        }
    }
    let clean = report::error_count(&result) == 0 && checks.iter().all(|c| c.ok);
    if clean {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// Prints one progress line per second on stderr until the run ends.
fn progress<T>(live: &Live, h: &std::thread::JoinHandle<T>) {
    let t0 = Instant::now();
    let mut last = (0u64, 0u64, Instant::now());
    let mut next = t0 + Duration::from_secs(1);
    while !h.is_finished() {
        std::thread::sleep(Duration::from_millis(20));
        let now = Instant::now();
        if now < next {
            continue;
        }
        next += Duration::from_secs(1);
        let started = live.started.load(Ordering::Relaxed);
        let wire = live.wire_bytes.load(Ordering::Relaxed)
            + live.server_wire_bytes.load(Ordering::Relaxed);
        let dt = now.duration_since(last.2).as_secs_f64().max(1e-9);
        let cps = (started - last.0.min(started)) as f64 / dt;
        let gbps = (wire - last.1.min(wire)) as f64 * 8.0 / dt / 1e9;
        last = (started, wire, now);
        eprintln!(
            "{}",
            report::progress_line(
                now.duration_since(t0).as_secs_f64(),
                cps,
                live.active.load(Ordering::Relaxed),
                gbps,
                live.completed.load(Ordering::Relaxed),
                live.errors.load(Ordering::Relaxed) + live.server_errors.load(Ordering::Relaxed),
            )
        );
    }
}
