//! The `squall` command: `squall run PROFILE ...` generates the profile's traffic over the
//! in-memory wire and reports; `squall validate PROFILE` only loads and checks it;
//! `squall serve` serves files and fixed routes over HTTP/1.1 on a real port;
//! `squall daemon` runs the engine under a JSON-RPC 2.0 control API (`docs/API.md`).
//! Exit status: 0 clean run, 1 errors or invariant violations, 2 invalid profile/usage.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use clap::{CommandFactory, Parser, Subcommand};

mod daemon;
mod help;
use squall::assertion::{self, Assertion};
use squall::report::{self, RunInfo};
use squall::run::{Live, RunConfig};
use squall::source;

#[derive(Parser)]
#[command(
    name = "squall",
    version,
    about = "Squall stateful L7 traffic generator",
    after_help = help::MAIN
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Generate a profile's traffic (both sides over the in-memory wire) and report.
    #[command(args_override_self = true, after_help = help::RUN)]
    Run(Box<RunArgs>),
    /// Load and validate a profile; print every error with its JSON path.
    #[command(after_help = help::VALIDATE)]
    Validate {
        /// Profile: `.json` IR or `.py` (compiled with `python3 -m squall.compile`).
        profile: PathBuf,
        /// Profile tunable for `.py` profiles (repeatable).
        #[arg(short = 't', value_name = "KEY=VALUE")]
        tunables: Vec<String>,
    },
    /// Serve static files and fixed routes over HTTP/1.1 on a real port (docs/HTTP.md).
    #[command(args_override_self = true, after_help = help::SERVE)]
    Serve(Box<ServeArgs>),
    /// Join two interfaces at layer 2 through an impaired wire (loss, reordering, delay,
    /// jitter, duplication, corruption, a rate limit; each direction its own): a software
    /// netem box.
    #[command(after_help = help::BRIDGE)]
    Bridge {
        /// The first interface (`afpacket:IF` or `IF`).
        a: String,
        /// The second interface.
        b: String,
        /// Impairment of frames from A to B: loss=P,dup=P,reorder=P,corrupt=P,
        /// delay_us=N,jitter_us=N,rate_mbps=N (as `squall run --impair`).
        #[arg(long, value_name = "SPEC")]
        impair: Option<String>,
        /// Impairment of frames from B to A (default: the same as A to B).
        #[arg(long, value_name = "SPEC")]
        impair_back: Option<String>,
        /// Stop after this many seconds (default: run until SIGINT/SIGTERM).
        #[arg(short = 'd', long, value_name = "SECONDS")]
        duration: Option<f64>,
        /// Seed of the impairment's draws (each direction its own stream).
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// Draw `squall run --json` results: a self-contained HTML report with charts (two files:
    /// before/after side by side).
    #[command(after_help = help::REPORT)]
    Report {
        /// The results file (`squall run ... --json FILE`).
        results: PathBuf,
        /// A second results file, compared with the first (B vs A).
        compare: Option<PathBuf>,
        /// The HTML file to write.
        #[arg(short = 'o', long, default_value = "report.html", value_name = "FILE")]
        output: PathBuf,
        /// Also write every chart as DIR/ID.svg and DIR/ID.png (PNG through headless Chromium).
        #[arg(long, value_name = "DIR")]
        png: Option<PathBuf>,
    },
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    #[command(after_help = help::COMPLETIONS)]
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff), or write one page per command into a directory.
    #[command(after_help = help::MAN)]
    Man {
        /// Write squall.1, squall-run.1, ... into this directory instead.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// Run the engine under control: JSON-RPC 2.0 on a loopback TCP port or a unix socket.
    #[command(after_help = help::DAEMON)]
    Daemon {
        /// Loopback address and port (newline-delimited JSON-RPC; port 0 picks one).
        #[arg(long, default_value = "127.0.0.1:4501", conflicts_with = "unix")]
        listen: std::net::SocketAddr,
        /// Listen on this unix socket path instead.
        #[arg(long, value_name = "PATH")]
        unix: Option<PathBuf>,
        /// Serve Prometheus metrics of the current (or last) run at http://ADDR/metrics.
        #[arg(long, value_name = "ADDR")]
        metrics: Option<String>,
        /// The ports every run plays on (as `squall run`'s; default: the in-memory wire).
        #[command(flatten)]
        ports: Box<PortArgs>,
    },
}

/// The ports a run plays on (`squall run`, `squall daemon`): the in-memory wire, one side
/// on a real interface, or both sides on two with the device under test between.
#[derive(clap::Args, Clone, Debug)]
struct PortArgs {
    /// Interface: `mem` (the in-memory wire, both sides), `afpacket:IFNAME[,recvmmsg|,ring][,nogso][,superframes]`,
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
    /// Real interface: address whose MAC is resolved by ARP, or neighbour discovery for an
    /// IPv6 one (default: the profile's first server address in client mode, first client
    /// address in server mode).
    #[arg(long, value_name = "IP")]
    peer_ip: Option<String>,
    /// Both sides on real ports, the device under test between them (TRex's topology):
    /// the port of the client side (`afpacket:IFNAME`, `afxdp:IFNAME[:QUEUE]` or
    /// `dpdk:NAME` with --eal naming both DPDK devices); needs --server-iface.
    #[arg(long, value_name = "KIND:NAME")]
    client_iface: Option<String>,
    /// The port of the server side (with --client-iface).
    #[arg(long, value_name = "KIND:NAME")]
    server_iface: Option<String>,
    /// With --client-iface: the DUT's address on the client link (IPv4 or IPv6), resolved as
    /// the client side's next hop (default: the server address, for a DUT that bridges).
    #[arg(long, value_name = "IP")]
    client_gw: Option<String>,
    /// With --server-iface: the DUT's address on the server link (default: the first
    /// client address).
    #[arg(long, value_name = "IP")]
    server_gw: Option<String>,
    /// Real interface: the peer's MAC (skips ARP resolution).
    #[arg(long, value_name = "MAC")]
    peer_mac: Option<String>,
    /// Real interface: seconds the next hop (the peer, gateway or DUT resolved by ARP or
    /// neighbour discovery) stays confirmed without a frame from its MAC before it is
    /// probed at its MAC, then looked for by broadcast if unanswered (a replaced device
    /// is found at its new MAC). 0: never probed. Default 30 (Linux's).
    #[arg(long, value_name = "SECONDS")]
    reachable_sec: Option<u32>,
}

impl PortArgs {
    /// The ports these options name (checked: interfaces, EAL, exclusive options).
    fn ports(&self) -> Result<squall::ports::Ports, String> {
        squall::ports::Ports::parse(&squall::ports::PortSpec {
            iface: &self.iface,
            mode: self.mode.as_deref(),
            peer_ip: self.peer_ip.as_deref(),
            peer_mac: self.peer_mac.as_deref(),
            client_iface: self.client_iface.as_deref(),
            server_iface: self.server_iface.as_deref(),
            client_gw: self.client_gw.as_deref(),
            server_gw: self.server_gw.as_deref(),
            eal: self.eal.as_deref(),
            reachable_sec: self.reachable_sec,
        })
    }
}

#[derive(clap::Args)]
struct RunArgs {
    /// Profile: `.json` IR or `.py` (compiled with `python3 -m squall.compile`).
    profile: PathBuf,
    /// Seconds during which new flows are started (Ctrl-C/SIGTERM stops earlier: in-flight
    /// flows drain, the summary follows; a second signal cuts them, a third exits).
    #[arg(
        short = 'd',
        long,
        default_value_t = 10.0,
        allow_negative_numbers = true
    )]
    duration: f64,
    /// Rate multiplier: every template runs at cps x M (above 0, at most 1,000,000).
    #[arg(
        short = 'm',
        long,
        default_value_t = 1.0,
        allow_negative_numbers = true
    )]
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
    #[command(flatten)]
    ports: PortArgs,
    /// With --cores N on a real interface: do not steer replies to the worker owning their
    /// flow (AF_PACKET fanout by the kernel's flow hash, DPDK source ports not chosen by
    /// RSS); the software redirect forwards them instead, counted (rx_redirected).
    #[arg(long)]
    no_steering: bool,
    /// Write every counter and histogram summary to this JSON file.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Record the first flows of the run (both directions) in this pcap file.
    #[arg(long, value_name = "FILE")]
    pcap: Option<PathBuf>,
    /// Number of flows recorded by --pcap.
    #[arg(long, default_value_t = 10)]
    pcap_flows: usize,
    /// Trace sampled flows into this directory: flows.pcap (their frames, both
    /// directions) and timeline.jsonl (per flow: 5-tuple, template, TCP events: states,
    /// RTT, cwnd, retransmissions and their cause, windows, RSTs, close). Works with
    /// --cores N and on real interfaces (docs/OPERATING.md, Flow tracing)
    #[arg(long, value_name = "DIR")]
    trace: Option<PathBuf>,
    /// Most flows --trace records (the first ones opened that match --trace-filter)
    #[arg(long, value_name = "N", default_value_t = 10)]
    trace_flows: usize,
    /// Which flows --trace may sample: comma-separated terms, all must match:
    /// template=NAME|INDEX, client=IP[/PREFIX], server=IP[/PREFIX], port=N (repeatable)
    #[arg(long, value_name = "TERMS")]
    trace_filter: Vec<String>,
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
    /// Flow table size of each TCP host (16 to 67,108,864; ~220 bytes a flow).
    #[arg(long, default_value_t = 262_144,
          value_parser = clap::value_parser!(u32).range(16..=(1 << 26)))]
    max_flows: u32,
    /// Profile tunable for `.py` profiles (repeatable).
    #[arg(short = 't', value_name = "KEY=VALUE")]
    tunables: Vec<String>,
    /// No progress line (nor live view) on stderr.
    #[arg(short = 'q', long)]
    quiet: bool,
    /// The one-line progress on stderr even on a terminal (no live view).
    #[arg(long)]
    plain: bool,
    /// Seconds at the start left out of the measurement window (`window` in the JSON,
    /// the figures --assert reads); real-time runs.
    #[arg(long, value_name = "SECS", default_value_t = 0.0)]
    warmup: f64,
    /// Seconds at the end of the generation left out of the measurement window.
    #[arg(long, value_name = "SECS", default_value_t = 0.0)]
    cooldown: f64,
    /// Threshold on a figure of the results, deciding the exit status (repeatable), e.g.
    /// 'errors == 0', 'ttfb.p99 < 2ms', 'cps >= 0.95 * target' (docs/USAGE.md, Assertions).
    #[arg(long = "assert", value_name = "EXPR")]
    asserts: Vec<String>,
    /// Serve Prometheus metrics of the run at http://ADDR/metrics (e.g. 127.0.0.1:9464;
    /// port 0 picks one, printed on stderr); real-time runs.
    #[arg(long, value_name = "ADDR")]
    metrics: Option<String>,
    /// Options from this file's [run] table (default: $SQUALL_CONFIG, else ./squall.toml
    /// if present); the command line wins.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
}

#[derive(clap::Args)]
struct ServeArgs {
    /// Directory whose files are served (all loaded into memory at start).
    #[arg(long, value_name = "DIR")]
    root: Option<PathBuf>,
    /// Address and port to listen on, IPv4 (`198.18.48.1:80`) or IPv6
    /// (`[2001:db8::1]:80`); repeat for several (dual stack). Squall's node owns the
    /// addresses (answers ARP / neighbour discovery and ping for them); each port is open
    /// on its own address only (a SYN to another listen address on it gets a RST).
    #[arg(long, value_name = "ADDR:PORT")]
    listen: Vec<std::net::SocketAddr>,
    /// Port: `afpacket:IFNAME[,recvmmsg|,ring][,nogso][,superframes]`, `afxdp:IFNAME[:QUEUE][,copy|,zerocopy]` or
    /// `dpdk[:PORTNAME]` (with --eal; needs the `dpdk` cargo feature). Needs root.
    #[arg(long, value_name = "KIND:NAME")]
    iface: Option<String>,
    /// DPDK EAL arguments for --iface dpdk, passed through.
    #[arg(long, value_name = "ARGS", allow_hyphen_values = true)]
    eal: Option<String>,
    /// Server workers: N queues of the port (AF_PACKET fanout members, AF_XDP queues
    /// Q..Q+N, DPDK queue pairs), each worker on its own core with its own node, app and
    /// counters; the report sums them.
    #[arg(long, default_value_t = 1)]
    cores: u32,
    /// With --cores N: do not steer frames to the worker owning their flow (AF_PACKET
    /// fanout by the kernel's flow hash, DPDK without RSS); the software redirect forwards
    /// them instead, counted (rx_redirected).
    #[arg(long)]
    no_steering: bool,
    /// The peer's (or gateway's) address, IPv4 or IPv6: every answer (of either family)
    /// goes to its MAC, resolved by ARP or neighbour discovery.
    #[arg(long, value_name = "IP")]
    peer_ip: Option<String>,
    /// The peer's (or gateway's) MAC (no ARP resolution).
    #[arg(long, value_name = "MAC")]
    peer_mac: Option<String>,
    /// Seconds the next hop (resolved by ARP or neighbour discovery) stays confirmed
    /// without a frame from its MAC before it is probed at its MAC, then looked for by
    /// broadcast if unanswered (a replaced router is found at its new MAC). 0: never
    /// probed. Default 30 (Linux's).
    #[arg(long, value_name = "SECONDS")]
    reachable_sec: Option<u32>,
    /// A fixed answer, checked before files: `PATH return CODE "TEXT"` (repeatable), e.g.
    /// --route '/ping return 200 "pong"'.
    #[arg(long, value_name = "ROUTE")]
    route: Vec<String>,
    /// Most open connections (1 to 16,777,216); more are answered 503 and closed.
    #[arg(long, default_value_t = 10_000,
          value_parser = clap::value_parser!(u32).range(1..=(1 << 24)))]
    max_conns: u32,
    /// TCP initial congestion window, in segments (1 to 20; 10 as Linux, RFC 6928).
    #[arg(long, default_value_t = 10, value_name = "SEGMENTS",
          value_parser = clap::value_parser!(u8).range(1..=20))]
    initcwnd: u8,
    /// 802.1Q VLAN id: every frame the server sends is tagged, only frames with the tag
    /// are taken (the others are counted and dropped).
    #[arg(long, value_name = "ID", value_parser = clap::value_parser!(u16).range(1..=4094))]
    vlan: Option<u16>,
    /// Seconds a keep-alive connection may wait for its next request.
    #[arg(long, default_value_t = 60.0)]
    idle_timeout: f64,
    /// Seconds a request head may take to arrive once begun (else 408 and close).
    #[arg(long, default_value_t = 10.0)]
    header_timeout: f64,
    /// Longest request line, bytes (else 414); also the longest header field line (at
    /// least 256, at most --max-head; else 431).
    #[arg(long, default_value_t = 8192)]
    max_line: usize,
    /// Most header fields in a request (else 431; at most 64).
    #[arg(long, default_value_t = 64)]
    max_headers: usize,
    /// Largest request head (request line and headers), bytes (else 431).
    #[arg(long, default_value_t = 16_384)]
    max_head: usize,
    /// Largest request body, bytes (else 413).
    #[arg(long, default_value_t = 1 << 20)]
    max_body: u64,
    /// Append one line per answer to this file (nginx `combined` format); off by default.
    #[arg(long, value_name = "FILE")]
    access_log: Option<PathBuf>,
    /// After SIGINT/SIGTERM: seconds in-flight answers may take before the rest is reset.
    #[arg(long, default_value_t = 5.0)]
    drain_sec: f64,
    /// Stop by itself after this many seconds (default: run until SIGINT/SIGTERM).
    #[arg(long, value_name = "SECS")]
    duration: Option<f64>,
    /// Derive the TCP secrets from a fixed value (reproducible; links you control only).
    #[arg(long)]
    fixed_keys: bool,
    /// Also write the results (totals, rates, errors by kind, request latency and the
    /// per-second `series`) to this JSON file.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Threshold on a figure of the results, deciding the exit status (repeatable), e.g.
    /// 'errors == 0', 'rps >= 1000', 'request.p99 < 5ms' (docs/OPERATING.md).
    #[arg(long = "assert", value_name = "EXPR")]
    asserts: Vec<String>,
    /// Serve Prometheus metrics of the server at http://ADDR/metrics (e.g.
    /// 127.0.0.1:9465; port 0 picks one, printed on stderr).
    #[arg(long, value_name = "ADDR")]
    metrics: Option<String>,
    /// No progress line (nor live view) on stderr.
    #[arg(short = 'q', long)]
    quiet: bool,
    /// The one-line progress on stderr even on a terminal (no live view).
    #[arg(long)]
    plain: bool,
    /// Trace connections into this directory: flows.pcap (their frames, both directions)
    /// and timeline.jsonl (per connection: its TCP events), as `squall run --trace`
    /// (docs/OPERATING.md, Flow tracing)
    #[arg(long, value_name = "DIR")]
    trace: Option<PathBuf>,
    /// Most connections --trace records (the first ones that match --trace-filter)
    #[arg(long, value_name = "N", default_value_t = 10)]
    trace_flows: usize,
    /// Which connections --trace may take: client=IP[/PREFIX], server=IP[/PREFIX],
    /// port=N, comma-separated, all must match (repeatable)
    #[arg(long, value_name = "TERMS")]
    trace_filter: Vec<String>,
    /// Options from this file's [serve] table (default: $SQUALL_CONFIG, else
    /// ./squall.toml if present); the command line wins.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
}

fn load(path: &std::path::Path, t: &[String]) -> Result<squall_astf::Profile, ExitCode> {
    source::load(path, t).map_err(|e| {
        eprintln!("squall: {}: {e}", path.display());
        match e {
            // (the Python compiler names the profile's lines itself)
            source::SourceError::Compile(_) => eprintln!(
                "(fix the profile at the lines above; docs/PYTHON.md describes Python profiles)"
            ),
            _ => eprintln!(
                "(fix the profile at the JSON paths above, or the path; docs/PROFILE.md describes profiles)"
            ),
        }
        ExitCode::from(2)
    })
}

fn main() -> ExitCode {
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let cmd = Cli::command();
    let mut from_file = None;
    for name in squall::config::TABLES {
        if let Some(sub) = cmd.find_subcommand(name) {
            match squall::config::apply(&mut args, sub) {
                Ok(Some(p)) => {
                    eprintln!("squall: options from {}", p.display());
                    from_file = Some(p);
                }
                Ok(None) => {}
                Err(e) => return usage(&e),
            }
        }
    }
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        // A value the parser refuses may come from the file: say which file.
        Err(e) if e.use_stderr() && from_file.is_some() => {
            let _ = e.print();
            if let Some(p) = &from_file {
                eprintln!(
                    "squall: the options of {} come before the command line's: the value refused may be there",
                    p.display()
                );
            }
            return ExitCode::from(2);
        }
        Err(e) => e.exit(),
    };
    match cli.cmd {
        Cmd::Validate { profile, tunables } => match load(&profile, &tunables) {
            Ok(p) => {
                squall::outln!(
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
        Cmd::Serve(a) => serve_cmd(*a),
        Cmd::Bridge {
            a,
            b,
            impair,
            impair_back,
            duration,
            seed,
        } => bridge_cmd(
            &a,
            &b,
            impair.as_deref(),
            impair_back.as_deref(),
            duration,
            seed,
        ),
        Cmd::Completions { shell } => {
            // Into memory first: clap_complete panics on a write error, a full or closed
            // standard output is an error here.
            let mut buf = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "squall", &mut buf);
            use std::io::Write as _;
            match std::io::stdout()
                .write_all(&buf)
                .and_then(|_| std::io::stdout().flush())
            {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("squall: completions: {e}");
                    ExitCode::from(1)
                }
            }
        }
        Cmd::Man { dir } => match help::man(Cli::command(), dir.as_deref()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("squall: man: {e}");
                ExitCode::from(1)
            }
        },
        Cmd::Report {
            results,
            compare,
            output,
            png,
        } => {
            let files: Vec<PathBuf> = std::iter::once(results).chain(compare).collect();
            match squall::htmlreport::write(&files, &output, png.as_deref()) {
                Ok(w) => {
                    for f in w {
                        squall::outln!("wrote {}", f.display());
                    }
                    ExitCode::SUCCESS
                }
                Err(e) => usage(&format!("report: {e}")),
            }
        }
        Cmd::Daemon {
            listen,
            unix,
            metrics,
            ports,
        } => {
            let ports = match ports.ports() {
                Ok(p) => p,
                Err(e) => return usage(&format!("daemon: {e}")),
            };
            let l = match unix {
                Some(p) => daemon::Listen::Unix(p),
                None => daemon::Listen::Tcp(listen),
            };
            let metrics = match metrics.as_deref().map(squall::metrics::Exporter::start) {
                None => None,
                Some(Ok(m)) => {
                    eprintln!("squall: metrics at http://{}/metrics", m.addr);
                    Some(m)
                }
                Some(Err(e)) => return usage(&e),
            };
            match daemon::serve(l, metrics, ports) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => usage(&format!("daemon: {e}")),
            }
        }
    }
}

/// The `squall serve` configuration of the command line.
fn serve_config(a: &ServeArgs) -> Result<squall::serve::ServeConfig, String> {
    use squall::serve::{app::AppConfig, respond::Route, ServeConfig};
    if a.cores == 0 {
        return Err("--cores 0: expected at least one worker".into());
    }
    // (as `squall run`'s; checked before anything is sized by it)
    if a.cores > 256 {
        return Err(format!("--cores {}: at most 256 workers", a.cores));
    }
    if a.listen.is_empty() {
        return Err("squall serve needs --listen ADDR:PORT (IPv4, or [IPv6]:PORT)".into());
    }
    let mut listen: Vec<std::net::SocketAddr> = Vec::with_capacity(a.listen.len());
    for l in &a.listen {
        if !listen.contains(l) {
            listen.push(*l);
        }
    }
    // An IPv6 peer is resolved by neighbour discovery (RealConfig's peer is IPv4).
    let (peer_ip, peer_ip6) = match a.peer_ip.as_deref().map(str::parse::<std::net::IpAddr>) {
        Some(Ok(std::net::IpAddr::V6(p))) => (None, Some(squall_wire::Ipv6Address(p.octets()))),
        _ => (a.peer_ip.as_deref(), None),
    };
    let iface = a
        .iface
        .as_deref()
        .ok_or("squall serve needs --iface KIND:NAME (afpacket:IF, afxdp:IF, dpdk)")?;
    if iface == "mem" {
        return Err("squall serve needs a real interface (--iface afpacket:IFNAME, ...)".into());
    }
    let mut real = squall::iface::parse(iface, Some("server"), peer_ip, a.peer_mac.as_deref())?;
    squall::iface::set_eal(&mut real, a.eal.as_deref())?;
    let mut iface = real.ok_or("squall serve needs a real interface")?;
    if a.no_steering && a.cores < 2 {
        return Err("--no-steering: only with --cores N (N > 1)".into());
    }
    iface.steering = !a.no_steering;
    if let Some(sec) = a.reachable_sec {
        iface.reachable = squall::iface::reachable(sec, a.peer_mac.is_some())?;
    }
    if a.root.is_none() && a.route.is_empty() {
        return Err("nothing to serve: give --root DIR and/or --route".into());
    }
    if let Some(r) = &a.root {
        squall_serve::files::check_root(r)?;
    }
    let routes = a
        .route
        .iter()
        .map(|r| Route::parse(r))
        .collect::<Result<Vec<_>, _>>()?;
    let secs = |name: &str, v: f64| -> Result<std::time::Duration, String> {
        std::time::Duration::try_from_secs_f64(v)
            .ok()
            .filter(|d| !d.is_zero() && d.as_secs() <= 10_000_000)
            .ok_or_else(|| {
                format!("--{name} {v}: expected a positive number of seconds, at most 10,000,000")
            })
    };
    if !(16..=(1 << 20)).contains(&a.max_line) || !(32..=(1 << 20)).contains(&a.max_head) {
        return Err(format!(
            "--max-line {} / --max-head {}: expected 16 to 1,048,576 and 32 to 1,048,576 bytes (the shortest request line, `GET / HTTP/1.1`, is 14)",
            a.max_line, a.max_head
        ));
    }
    if a.max_line > a.max_head {
        return Err(format!(
            "--max-line {} / --max-head {}: the request line is part of the head, so --max-line may not exceed --max-head",
            a.max_line, a.max_head
        ));
    }
    if a.max_headers == 0 || a.max_headers > squall::serve::app::MAX_HEADERS {
        return Err(format!(
            "--max-headers {}: expected 1 to {}",
            a.max_headers,
            squall::serve::app::MAX_HEADERS
        ));
    }
    if a.max_conns == 0 {
        return Err("--max-conns 0: expected at least 1".into());
    }
    let cfg = ServeConfig {
        root: a.root.clone(),
        listen,
        iface,
        peer_ip6,
        routes,
        app: AppConfig {
            max_conns: a.max_conns,
            idle_timeout_ns: secs("idle-timeout", a.idle_timeout)?.as_nanos() as u64,
            header_timeout_ns: secs("header-timeout", a.header_timeout)?.as_nanos() as u64,
            limits: squall_http::Limits {
                max_start_line: a.max_line,
                max_header_line: a.max_head.min(a.max_line.max(256)),
                max_headers: a.max_headers,
                max_head: a.max_head,
                max_body: a.max_body,
                ..squall_http::Limits::default()
            },
        },
        access_log: a.access_log.clone(),
        drain: secs("drain-sec", a.drain_sec)?,
        duration: a.duration.map(|d| secs("duration", d)).transpose()?,
        fixed_keys: a.fixed_keys,
        cores: a.cores,
        init_cwnd: a.initcwnd,
        vlan: a.vlan,
        trace: serve_trace(a)?,
    };
    squall::serve::check_listen(&cfg)?;
    Ok(cfg)
}

/// `squall serve --trace ...` checked: the filter's terms, no templates.
fn serve_trace(a: &ServeArgs) -> Result<Option<squall::flowtrace::TraceSpec>, String> {
    let spec = checked_trace(
        a.trace.as_ref(),
        a.trace_flows,
        &a.trace_filter,
        "connections",
    )?;
    if spec
        .as_ref()
        .is_some_and(|s| !s.filter.templates.is_empty())
    {
        return Err("--trace-filter template=...: squall serve has no templates; use client=, server= or port=".into());
    }
    Ok(spec)
}

/// `--trace DIR --trace-flows N --trace-filter TERMS` checked (run and serve alike): a
/// filter needs a directory, at least one flow, terms that parse. `what` names the traced
/// things in the messages.
/// Most flows `--trace-flows` and `--pcap-flows` record: their frames are held in memory
/// until the run ends (a W1 flow's ~35 frames: ~50 KB each).
const MAX_RECORDED_FLOWS: usize = 100_000;

fn checked_trace(
    dir: Option<&PathBuf>,
    flows: usize,
    terms: &[String],
    what: &str,
) -> Result<Option<squall::flowtrace::TraceSpec>, String> {
    let Some(dir) = dir else {
        if !terms.is_empty() {
            return Err(format!(
                "--trace-filter selects {what} for --trace DIR: add --trace"
            ));
        }
        return Ok(None);
    };
    if flows == 0 {
        return Err("--trace-flows must be at least 1".into());
    }
    // (every traced flow's frames and events are held in memory until the end)
    if flows > MAX_RECORDED_FLOWS {
        return Err(format!(
            "--trace-flows {flows}: at most {MAX_RECORDED_FLOWS} (the flows are held in memory until the end)"
        ));
    }
    let filter = squall::flowtrace::TraceFilter::parse(terms)?;
    Ok(Some(squall::flowtrace::TraceSpec::new(
        dir.clone(),
        flows,
        filter,
    )))
}

/// The output paths of a run or of the server (`--json`, `--pcap`, `--trace DIR`),
/// checked writable before anything starts: the last checks before the run. The trace
/// directory first: it is created here, and the other files may be in it.
fn check_outputs(
    json: Option<&std::path::Path>,
    pcap: Option<&std::path::Path>,
    trace: Option<&std::path::Path>,
) -> Result<(), String> {
    use squall::outputs::{check_dir, check_file};
    trace.map_or(Ok(()), |d| check_dir("--trace", d))?;
    json.map_or(Ok(()), |p| check_file("--json", p))?;
    pcap.map_or(Ok(()), |p| check_file("--pcap", p))
}

/// Writes a run's trace into `dir` and says so on stderr; None if it could not.
fn write_trace(
    dir: &std::path::Path,
    t: &squall::flowtrace::TraceData,
    templates: &[String],
) -> Option<squall::flowtrace::TraceFiles> {
    match squall::flowtrace::write(dir, t, templates) {
        Ok(w) => {
            eprintln!(
                "squall: traced {} flow timeline(s), {} events, {} frames: {} and {}{}",
                w.flows,
                w.events,
                w.frames,
                w.timeline.display(),
                w.pcap.display(),
                if t.dropped_events > 0 {
                    format!(
                        " ({} events dropped: buffers full; trace fewer flows)",
                        t.dropped_events
                    )
                } else {
                    String::new()
                }
            );
            Some(w)
        }
        Err(e) => {
            eprintln!("squall: {e}");
            None
        }
    }
}

fn serve_cmd(a: ServeArgs) -> ExitCode {
    use squall::servewatch::{self, ServeInfo, ServeWatchOptions};
    let cfg = match serve_config(&a) {
        Ok(c) => c,
        Err(e) => return usage(&e),
    };
    let info = ServeInfo {
        // One address as before ("198.18.48.1:80"); dual stack joined with commas.
        listen: cfg
            .listen
            .iter()
            .map(|l| l.to_string())
            .collect::<Vec<_>>()
            .join(","),
        iface: cfg.iface.label(),
        cores: cfg.cores,
    };
    let asserts = match a
        .asserts
        .iter()
        .map(|e| Assertion::parse(e))
        .collect::<Result<Vec<_>, _>>()
    {
        Ok(v) => v,
        Err(e) => return usage(&e),
    };
    let skel = servewatch::skeleton(&info);
    if let Some(e) = asserts.iter().find_map(|x| x.check_names(&skel).err()) {
        return usage(&e);
    }
    if let Err(e) = check_outputs(a.json.as_deref(), None, a.trace.as_deref()) {
        return usage(&e);
    }
    let metrics = match a.metrics.as_deref().map(squall::metrics::Exporter::start) {
        None => None,
        Some(Ok(m)) => {
            eprintln!("squall serve: metrics at http://{}/metrics", m.addr);
            Some(m)
        }
        Some(Err(e)) => return usage(&e),
    };
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        // A second signal while stopping ends the process at once.
        let r = signal_hook::flag::register_conditional_shutdown(sig, 1, stop.clone())
            .and_then(|_| signal_hook::flag::register(sig, stop.clone()));
        if let Err(e) = r {
            return usage(&format!("signal handler: {e}"));
        }
    }
    let live = Arc::new(squall::servelive::ServeLive::new(cfg.cores));
    let show_view = !a.quiet && !a.plain && squall::liveview::available();
    let o = ServeWatchOptions {
        quiet: a.quiet,
        metrics,
        live_view: show_view.then(|| squall::serveview::ServeHeader {
            listen: format!("{} over {}", info.listen, info.iface),
            cores: cfg.cores,
            duration_s: a.duration,
        }),
    };
    let (c2, s2, l2) = (cfg.clone(), stop.clone(), live.clone());
    let h = std::thread::spawn(move || squall::serve::serve(&c2, s2, l2));
    let series = servewatch::watch(&live, &stop, &|| h.is_finished(), &o);
    let r = match h.join() {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => {
            eprintln!("squall serve: {e}");
            return ExitCode::from(1);
        }
        Err(_) => {
            eprintln!("squall serve: the server thread panicked");
            return ExitCode::from(1);
        }
    };
    for n in &r.notes {
        eprintln!("{n}");
    }
    if let (Some(dir), Some(t)) = (&a.trace, &r.trace) {
        if write_trace(dir, t, &[]).is_none() {
            return ExitCode::from(1);
        }
    }
    let mut doc = servewatch::results(&info, &r, &series);
    let outcomes = match assertion::check_all(&asserts, &doc) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("squall serve: {e}");
            return ExitCode::from(2);
        }
    };
    for o in &outcomes {
        eprintln!("squall serve: assert {}", o.message);
    }
    let failed = outcomes.iter().filter(|o| !o.ok).count();
    if !outcomes.is_empty() {
        doc["assertions"] = outcomes
            .iter()
            .map(|o| serde_json::json!({"expr": o.text, "ok": o.ok, "left": o.left, "right": o.right, "message": o.message}))
            .collect();
        doc["clean"] = (failed == 0).into();
    }
    if let Some(f) = &a.json {
        let text = serde_json::to_string_pretty(&doc).unwrap_or_default();
        if let Err(e) = std::fs::write(f, text + "\n") {
            eprintln!("squall serve: cannot write {}: {e}", f.display());
            return ExitCode::from(1);
        }
    }
    // The line on stdout: the results without the series (in --json FILE).
    if let Some(m) = doc.as_object_mut() {
        m.remove("series");
    }
    squall::outln!("{doc}");
    if failed > 0 {
        eprintln!(
            "squall serve: {failed} of {} assertion(s) failed (exit 1); each FAILED line above shows the values read",
            outcomes.len()
        );
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}

/// A usage error: the message, then where the options and examples are (exit 2).
/// `--trace`, `--trace-flows`, `--trace-filter` checked (template names are checked
/// against the profile when the run starts).
fn trace_spec(a: &RunArgs) -> Result<Option<squall::flowtrace::TraceSpec>, String> {
    if let (Some(dir), Some(_)) = (&a.trace, &a.pcap) {
        return Err(format!(
            "--trace writes its own pcap ({}/flows.pcap): leave out --pcap",
            dir.display()
        ));
    }
    checked_trace(a.trace.as_ref(), a.trace_flows, &a.trace_filter, "flows")
}

fn bridge_cmd(
    a: &str,
    b: &str,
    impair: Option<&str>,
    back: Option<&str>,
    duration: Option<f64>,
    seed: u64,
) -> ExitCode {
    let spec = |s: Option<&str>, opt: &str| {
        s.map(squall::impair::parse_impair)
            .transpose()
            .map_err(|e| format!("{opt}: {e}"))
    };
    let parsed = (|| -> Result<squall::bridge::BridgeConfig, String> {
        let fwd = spec(impair, "--impair")?.unwrap_or_default();
        let mut a_to_b = fwd.clone();
        let mut b_to_a = spec(back, "--impair-back")?.unwrap_or(fwd);
        a_to_b.seed = seed;
        b_to_a.seed = seed ^ 0x5eed_b0c4;
        let duration = match duration {
            Some(d) => match std::time::Duration::try_from_secs_f64(d) {
                Ok(x) if !x.is_zero() && x.as_secs() <= 10_000_000 => Some(x),
                _ => {
                    return Err(format!(
                        "--duration {d}: a positive number of seconds, at most 10,000,000"
                    ))
                }
            },
            None => None,
        };
        let (a, b) = (
            squall::bridge::parse_port(a)?,
            squall::bridge::parse_port(b)?,
        );
        if a == b {
            return Err(format!("bridge: {a} twice: two interfaces are needed"));
        }
        Ok(squall::bridge::BridgeConfig {
            a,
            b,
            a_to_b,
            b_to_a,
            duration,
        })
    })();
    let cfg = match parsed {
        Ok(c) => c,
        Err(e) => return usage(&e),
    };
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        if let Err(e) = signal_hook::flag::register(sig, stop.clone()) {
            return usage(&format!("signal handler: {e}"));
        }
    }
    eprintln!("squall bridge: {} <-> {}", cfg.a, cfg.b);
    match squall::bridge::run_bridge(&cfg, stop) {
        Ok(r) => {
            squall::outln!(
                "squall bridge: {:.1} s; {}; {}",
                r.elapsed.as_secs_f64(),
                squall::bridge::describe(&format!("{} -> {}", cfg.a, cfg.b), &r.a_to_b),
                squall::bridge::describe(&format!("{} -> {}", cfg.b, cfg.a), &r.b_to_a)
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("squall bridge: {e}");
            ExitCode::from(1)
        }
    }
}

fn usage(msg: &str) -> ExitCode {
    eprintln!("squall: {msg}");
    eprintln!("(options and examples: `squall help COMMAND`; the manual: docs/USAGE.md)");
    ExitCode::from(2)
}

fn run_cmd(a: RunArgs) -> ExitCode {
    let mut ports = match a.ports.ports() {
        Ok(p) => p,
        Err(e) => return usage(&e),
    };
    if !ports.is_mem() && (a.sim || a.split || a.pcap.is_some() || a.impair.is_some()) {
        return usage("real interfaces: no --sim, --split, --pcap or --impair");
    }
    if let Err(e) = ports.check_cores(a.cores) {
        return usage(&e);
    }
    if a.no_steering && (ports.real.is_none() || a.cores < 2) {
        return usage("--no-steering is for --cores N (N > 1) on a real interface (--iface)");
    }
    if let Some(rc) = ports.real.as_mut() {
        rc.steering = !a.no_steering;
    }
    // (at least 1 ms: a shorter one would round to a run of 0 ns)
    if !(a.duration.is_finite() && a.duration >= 1e-3 && a.duration <= 1e6) {
        return usage("--duration must be a positive number of seconds (0.001 to 1000000)");
    }
    if !(a.mult.is_finite() && a.mult > 0.0 && a.mult <= 1e6) {
        return usage("--mult must be in (0, 1000000]");
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
    if a.pcap.is_some() && a.pcap_flows > MAX_RECORDED_FLOWS {
        return usage(&format!(
            "--pcap-flows {}: at most {MAX_RECORDED_FLOWS} (the flows are held in memory until the end)",
            a.pcap_flows
        ));
    }
    if a.pcap.is_some() && a.cores > 1 && !a.sim {
        return usage("--pcap needs a single-threaded run (--cores 1 or --sim)");
    }
    let trace = match trace_spec(&a) {
        Ok(t) => t,
        Err(e) => return usage(&e),
    };
    let windowed = a.warmup != 0.0 || a.cooldown != 0.0;
    if !(a.warmup.is_finite() && a.cooldown.is_finite() && a.warmup >= 0.0 && a.cooldown >= 0.0)
        || a.warmup + a.cooldown >= a.duration
    {
        return usage("--warmup and --cooldown must be >= 0 and leave part of --duration to measure (warmup + cooldown < duration)");
    }
    if windowed && a.sim {
        return usage("--warmup/--cooldown need a real-time run (no --sim: the window is measured on the wall clock)");
    }
    let asserts = match a
        .asserts
        .iter()
        .map(|e| Assertion::parse(e))
        .collect::<Result<Vec<_>, _>>()
    {
        Ok(v) => v,
        Err(e) => return usage(&e),
    };
    let impair = match a.impair.as_deref().map(squall::impair::parse_impair) {
        None => Default::default(),
        Some(Ok(i)) => i,
        Some(Err(e)) => return usage(&format!("--impair: {e}")),
    };
    let profile = match load(&a.profile, &a.tunables) {
        Ok(p) => Arc::new(p),
        Err(c) => return c,
    };
    if let Some(Err(e)) = trace.as_ref().map(|t| t.filter.templates(&profile)) {
        return usage(&e);
    }
    if a.metrics.is_some() && a.sim {
        return usage("--metrics needs a real-time run (no --sim)");
    }
    let metrics = match a.metrics.as_deref().map(squall::metrics::Exporter::start) {
        None => None,
        Some(Ok(m)) => {
            eprintln!("squall: metrics at http://{}/metrics", m.addr);
            Some(m)
        }
        Some(Err(e)) => return usage(&e),
    };
    if ports.is_mem() && !a.sim {
        if let Some(note) = squall::cores::shared_cores_note(a.cores) {
            eprintln!("squall: note: {note}");
        }
    }
    if a.sim && (a.cores > 1 || a.split) {
        // The simulation is one thread on a virtual clock: say so rather than drop it.
        eprintln!(
            "squall: note: --sim runs one thread on a virtual clock; --cores {}{} ignored",
            a.cores,
            if a.split { " --split" } else { "" }
        );
    }
    let pre = RunInfo {
        profile_path: "",
        mode: "",
        duration_s: a.duration,
        mult: a.mult,
        cores: a.cores,
    };
    let skel = assertion::skeleton(&profile, &pre, windowed);
    if let Some(e) = asserts.iter().find_map(|x| x.check_names(&skel).err()) {
        return usage(&e);
    }
    if let Err(e) = check_outputs(a.json.as_deref(), a.pcap.as_deref(), a.trace.as_deref()) {
        return usage(&e);
    }
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
        trace,
    };
    let live = Arc::new(Live::default());
    // Per-side reports every 200 ms for what reads them: the time series (errors by kind,
    // latency) of --json and of the window, the metrics, the live view.
    let show_view = !a.sim && !a.quiet && !a.plain && squall::liveview::available();
    let snapshots = a.json.is_some() || a.metrics.is_some() || windowed || show_view;
    live.ctl
        .snapshots
        .store(!a.sim && snapshots, Ordering::Relaxed);
    if let Err(e) = squall::watch::stop_on_signals(live.clone(), a.drain_sec) {
        return usage(&e);
    }
    let (p2, c2, l2) = (profile.clone(), cfg.clone(), live.clone());
    let p3 = ports.clone();
    let h = std::thread::spawn(move || p3.run(p2, &c2, l2));
    let mut series = (!a.sim).then(|| {
        let o = squall::watch::WatchOptions {
            quiet: a.quiet,
            metrics,
            live_view: show_view.then(|| squall::liveview::Header {
                profile: a.profile.display().to_string(),
                mode: format!("{} core(s), mult {}", cfg.cores, a.mult),
                duration_s: a.duration,
                target_cps: profile.templates.iter().map(|t| t.cps).sum::<f64>() * a.mult,
            }),
        };
        let mut s = squall::series::Series::new(profile.tg_names.clone());
        if windowed {
            s.set_window(a.warmup, a.duration - a.cooldown);
        }
        squall::watch::watch(&live, &|| h.is_finished(), &o, s)
    });
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
    if let Some(s) = series.as_mut() {
        s.finish(&result.client, &result.server);
    }
    let checks = ports.checks(&result);
    let path = a.profile.display().to_string();
    let mode = ports.mode(&cfg);
    let info = RunInfo {
        profile_path: &path,
        mode: &mode,
        duration_s: a.duration,
        mult: a.mult,
        cores: cfg.cores,
    };
    let window = series
        .as_ref()
        .filter(|_| windowed)
        .and_then(|s| s.window());
    squall::out!(
        "{}",
        report::summary(&profile, &info, &result, &checks, window.as_ref())
    );
    let mut doc = report::to_json(&profile, &info, &result, &checks);
    doc["series"] = series
        .as_ref()
        .map_or(serde_json::json!([]), |s| s.to_json());
    if windowed {
        match &window {
            Some(w) => squall::outln!("{}", report::window_line(w)),
            None => squall::outln!(
                "measurement window: the run ended before the window had two readings; every figure above is whole-run"
            ),
        }
        doc["window"] = window.unwrap_or(serde_json::Value::Null);
    }
    let outcomes = match assertion::check_all(&asserts, &doc) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("squall: {e}");
            return ExitCode::from(2);
        }
    };
    for o in &outcomes {
        squall::outln!("assert {}", o.message);
    }
    if !outcomes.is_empty() {
        doc["assertions"] = outcomes
            .iter()
            .map(|o| serde_json::json!({"expr": o.text, "ok": o.ok, "left": o.left, "right": o.right, "message": o.message}))
            .collect();
    }
    if let (Some(dir), Some(t)) = (&a.trace, &result.trace) {
        match write_trace(dir, t, &squall::flowtrace::template_names(&profile)) {
            Some(w) => {
                doc["trace"] = serde_json::json!({
                    "timeline": w.timeline, "pcap": w.pcap, "flows": w.flows,
                    "events": w.events, "frames": w.frames, "dropped_events": t.dropped_events,
                })
            }
            None => return ExitCode::from(1),
        }
    }
    if let (Some(f), Some(bytes)) = (&a.pcap, &result.pcap) {
        if let Err(e) = std::fs::write(f, bytes) {
            eprintln!("squall: cannot write {}: {e}", f.display());
            return ExitCode::from(1);
        }
    }
    if let Some(f) = &a.json {
        let text = serde_json::to_string_pretty(&doc).unwrap_or_default();
        if let Err(e) = std::fs::write(f, text + "\n") {
            eprintln!("squall: cannot write {}: {e}", f.display());
            return ExitCode::from(1);
        }
    }
    // With --assert the assertions judge the figures (errors included: 'errors == 0');
    // the invariants still hold the run to account.
    let clean = if asserts.is_empty() {
        report::error_count(&result) == 0 && checks.iter().all(|c| c.ok)
    } else {
        let failed = outcomes.iter().filter(|o| !o.ok).count();
        if failed > 0 {
            eprintln!(
                "squall: {failed} of {} assertion(s) failed (exit 1); each FAILED line above shows the values read",
                outcomes.len()
            );
        }
        failed == 0 && checks.iter().all(|c| c.ok)
    };
    if clean {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
