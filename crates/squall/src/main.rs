//! The `squall` command: `squall run PROFILE ...` generates the profile's traffic over the
//! in-memory wire and reports; `squall validate PROFILE` only loads and checks it;
//! `squall daemon` runs the engine under a JSON-RPC 2.0 control API (`docs/API.md`).
//! Exit status: 0 clean run, 1 errors or invariant violations, 2 invalid profile/usage.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{CommandFactory, Parser, Subcommand};

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
    #[command(args_override_self = true)]
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
    /// Worker cores. 1: both sides in one thread (T-mem1); N: N shards, each core running
    /// both sides of its own share of the flows over its own wire (T-memN). On a real
    /// interface: N workers, each owning one queue of the port (docs/SCALING.md).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=256))]
    cores: u32,
    /// With --cores 2: the client side on core 0 and the server side on core 1 over one
    /// wire (T-mem2) instead of two shards.
    #[arg(long)]
    split: bool,
    /// Interface: `mem` (the in-memory wire, both sides), `afpacket:IFNAME[,ring]`,
    /// `afxdp:IFNAME[:QUEUE][,copy|,zerocopy]` or `dpdk[:PORTNAME]` (a real interface, one
    /// side: needs --mode client|server and root; dpdk needs the `dpdk` cargo feature and
    /// takes --eal).
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
    /// Both sides on real ports, the device under test between them (TRex's topology):
    /// the port of the client side (`afpacket:IFNAME`); needs --server-iface.
    #[arg(long, value_name = "KIND:NAME")]
    client_iface: Option<String>,
    /// The port of the server side (with --client-iface).
    #[arg(long, value_name = "KIND:NAME")]
    server_iface: Option<String>,
    /// With --client-iface: the DUT's address on the client link, resolved by ARP as the
    /// client side's next hop (default: the server address, for a DUT that bridges).
    #[arg(long, value_name = "IP")]
    client_gw: Option<String>,
    /// With --server-iface: the DUT's address on the server link (default: the first
    /// client address).
    #[arg(long, value_name = "IP")]
    server_gw: Option<String>,
    /// With --cores N on a real interface: do not steer replies to the worker owning their
    /// flow (AF_PACKET fanout by the kernel's flow hash, DPDK source ports not chosen by
    /// RSS); the software redirect forwards them instead, counted (rx_redirected).
    #[arg(long)]
    no_steering: bool,
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
    /// Derive the TCP secrets (ISN and SYN-cookie key, flow-table hash seed) from the seed,
    /// as --sim always does, so runs are reproducible. Default outside --sim: fresh
    /// secrets from the OS random source at every run (a known key lets anyone on the
    /// path predict ISNs and forge SYN cookies; keep this for links you control).
    #[arg(long)]
    fixed_keys: bool,
    /// Seconds in-flight flows may take to finish after the duration before being cut.
    #[arg(long, default_value_t = 5.0)]
    drain_sec: f64,
    /// A flow cut at the end with no payload byte moved for this many seconds (and not
    /// sleeping in its program) is `stalled`, an error; other cut flows are not errors.
    #[arg(long, default_value_t = 5.0)]
    stall_sec: f64,
    /// Wire impairment, both directions: loss=P,dup=P,reorder=P,corrupt=P,delay_us=N,jitter_us=N,rate_mbps=N
    #[arg(long, value_name = "SPEC")]
    impair: Option<String>,
    /// 802.1Q VLAN id: every frame Squall sends is tagged, only frames with the tag are
    /// taken (the others are counted and dropped).
    #[arg(long, value_name = "ID", value_parser = clap::value_parser!(u16).range(1..=4094))]
    vlan: Option<u16>,
    /// Flow table size of each TCP host.
    #[arg(long, default_value_t = 262_144)]
    max_flows: u32,
    /// Profile tunable for `.py` profiles (repeatable).
    #[arg(short = 't', value_name = "KEY=VALUE")]
    tunables: Vec<String>,
    /// No progress line on stderr.
    #[arg(short = 'q', long)]
    quiet: bool,
    /// Options from this file's [run] table (default: $SQUALL_CONFIG, else ./squall.toml
    /// if present); the command line wins.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
}

fn load(path: &std::path::Path, t: &[String]) -> Result<squall_astf::Profile, ExitCode> {
    source::load(path, t).map_err(|e| {
        eprintln!("squall: {}: {e}", path.display());
        ExitCode::from(2)
    })
}

fn main() -> ExitCode {
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let cmd = Cli::command();
    if let Some(run) = cmd.find_subcommand("run") {
        match squall::config::apply(&mut args, run) {
            Ok(Some(p)) => eprintln!("squall: options from {}", p.display()),
            Ok(None) => {}
            Err(e) => return usage(&e),
        }
    }
    let cli = Cli::parse_from(args);
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
    let dut = match squall::dut::parse(
        a.client_iface.as_deref(),
        a.server_iface.as_deref(),
        a.client_gw.as_deref(),
        a.server_gw.as_deref(),
    ) {
        Ok(d) => d,
        Err(e) => return usage(&e),
    };
    if dut.is_some() && (real.is_some() || a.mode.is_some()) {
        return usage("--client-iface/--server-iface play both sides: no --iface or --mode");
    }
    if (real.is_some() || dut.is_some())
        && (a.sim || a.split || a.pcap.is_some() || a.impair.is_some())
    {
        return usage("real interfaces: no --sim, --split, --pcap or --impair");
    }
    if dut.is_some() {
        if let Err(e) = squall::cores::check_cores(a.cores) {
            return usage(&e);
        }
    }
    if a.no_steering && (real.is_none() || a.cores < 2) {
        return usage("--no-steering is for --cores N (N > 1) on a real interface (--iface)");
    }
    if let Some(rc) = real.as_mut() {
        rc.steering = !a.no_steering;
        if let Err(e) = squall::cores::check_cores(a.cores) {
            return usage(&e);
        }
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
    if a.split && a.cores != 2 {
        return usage("--split needs --cores 2 (client on one core, server on the other)");
    }
    if !(a.stall_sec.is_finite() && a.stall_sec >= 0.0 && a.stall_sec <= 1e6) {
        return usage("--stall-sec must be >= 0");
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
        split: a.split && !a.sim,
        sim: a.sim,
        seed: a.seed,
        fixed_keys: a.fixed_keys,
        drain_ns: (a.drain_sec * 1e9) as u64,
        stall_ns: (a.stall_sec * 1e9) as u64,
        pcap_flows: a.pcap.as_ref().map(|_| a.pcap_flows),
        impair,
        max_flows: a.max_flows.max(16),
        vlan: a.vlan,
    };
    let live = Arc::new(Live::default());
    let (p2, c2, l2) = (profile.clone(), cfg.clone(), live.clone());
    let (r2, d2) = (real.clone(), dut.clone());
    let h = std::thread::spawn(move || match (r2, d2) {
        (_, Some(dc)) => squall::dut::run_dut(p2, &c2, &dc, l2),
        (Some(rc), None) => squall::iface::run_real(p2, &c2, &rc, l2),
        (None, None) => run::run(p2, &c2, l2),
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
    let real_mode = match (&real, &dut) {
        (_, Some(dc)) => Some(format!(
            "real time, afpacket:{} (client) and afpacket:{} (server), DUT between{}",
            dc.client.ifname,
            dc.server.ifname,
            if cfg.cores > 1 {
                format!(", {} workers (fanout steering)", cfg.cores)
            } else {
                String::new()
            }
        )),
        (Some(rc), None) => Some(format!(
            "real time, {}, {} only{}",
            rc.label(),
            rc.mode.name(),
            squall::cores::plan(rc, cfg.cores)
        )),
        (None, None) => None,
    };
    let path = a.profile.display().to_string();
    let shards_mode = format!("real time, {} shards (T-memN)", cfg.cores);
    let info = RunInfo {
        profile_path: &path,
        mode: if let Some(m) = &real_mode {
            m
        } else if a.sim {
            "simulation (virtual clock)"
        } else if cfg.split {
            "real time, 2 threads (T-mem2)"
        } else if cfg.cores > 1 {
            &shards_mode
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
