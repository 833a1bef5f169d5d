//! `squall-bench`: command line of the benchmark harness. `mem` runs T-mem1 cells
//! (smoltcp, and other stacks as they plug in), `loop` runs T-loop (kernel). One JSON line
//! per cell on stdout (median of `--runs`), progress on stderr. `veth` runs T-veth (the
//! lab's namespaces, kernel peers and Squall over AF_PACKET, `squall_bench::veth`).

use std::process::ExitCode;

use squall_bench::kernel::{self, LoopCfg, LoopWorkload};
#[cfg(feature = "squall")]
use squall_bench::mem2::{self, Mem2Cfg, Placement};
use squall_bench::memif;
use squall_bench::pair as workload_pair;
use squall_bench::report::{median_line, Record};
use squall_bench::smol::{SmolConfig, SmolPair};
#[cfg(feature = "squall")]
use squall_bench::squall;
use squall_bench::veth;
use squall_bench::workload::{self, RunCfg};

const USAGE: &str = "usage:
  squall-bench mem  [--workloads W1,W2,W3,W4] [--conns 1,100,1000] [--seconds S] [--runs N]
                    [--stacks smoltcp,squall,squall-serve] [--flows 100000,1000000] [--max-ops N] [--warmup S] [--wire port|harness]
                    [--clock-step NS]  (mem's Squall W1/W2/W4 cells on a virtual clock moving
                                        NS per reading: exact instruction counts under
                                        callgrind with --warmup 0 --max-ops N; not a timing;
                                        smoltcp, W3, --initwnd rows and the other drivers
                                        keep the real clock)
                    (squall-serve: `squall serve`'s app as the server: W1/W4 files and the
                     W2 route with the answers parsed by squall-http, W3 idle connections;
                     W4: a line per connection, then a keep-alive line (\"keepalive\":true);
                     Squall's stacks only)
                    [--pool N]  (frames per side of Squall's wire; default sized from C)
                    [--offload]   (emulate checksum offload on both sides: a second row)
                    [--initwnd 2,10]  (W1 Squall rows per initial window, mem2 driver on one
                                       thread; smoltcp has no initial-window knob: row omitted)
                    [--family ipv4|ipv6]  (ipv6: Squall's W1/W2 flows over IPv6, 2001:2::/48;
                                           lines carry \"family\":\"ipv6\")
  squall-bench mem2 [--workloads W1,W2] [--conns 100,1000] [--seconds S] [--runs N] [--initwnd 2]
                    (T-mem2: Squall client thread on core 0, server thread on core 1)
  squall-bench memn [--cores 1,2] [--workloads W1,W2] [--conns 1000] [--seconds S] [--runs N]
                    [--stacks squall,squall-serve] (default squall; squall-serve: each
                     shard's server is `squall serve`'s app, as in T-mem1)
                    (T-memN: N Squall shards at once, one per core, each both ends of its
                     own connections over its own wire; C connections per shard)
  squall-bench loop [--workloads W1,W2] [--conns 1,100,1000] [--seconds S] [--runs N]
  squall-bench veth [--workloads raw,W1,W2,W4] [--pairs kernel/kernel,squall/kernel,kernel/squall,squall/squall,
                     squall-http/kernel,kernel/squall-serve,squall-http/squall-serve]
                    [--conns 100,1000] (W2) [--seconds 5] [--runs 3] [--port afpacket|afpacket-nogso|afpacket-ring|afpacket-recvmmsg|afxdp]
                    [--w1-cps N] (Squall client's W1 and W4 rate; default ab's rate vs nginx in this run)
                    [--frame-sizes 64,1514] [--root DIR] [--squall PATH]
                    [--initcwnd N] (both servers' TCP initial window: nginx's route initcwnd,
                     squall serve --initcwnd; default 10 both)
                    [--server-offloads on|off] (on: the server end of the veth keeps its
                     transmit offloads, checksum and TSO/GSO, for both servers alike;
                     a Squall client then takes super-frames, afpacket:IF,superframes;
                     default off: every offload off on both ends)
                    (T-veth, root: the lab of scripts/lab.sh; run it under
                     `flock /tmp/squall-lab.lock`; client core 0, server core 1)
  squall-bench memif [--workloads W1,W2] [--conns 100,1000] (W2) [--seconds 5] [--runs 3]
                    [--servers squall,squall-serve] [--clients squall,squall-http]
                    [--w1-cps 160000,130000,100000,70000,40000] (W1 rates tried, highest first;
                     the first clean one is measured) [--zero-copy yes|no] (memif client end)
                    [--squall PATH] (built with the dpdk feature)
                    [--xcore-max NS] (before each run wait, at most 60 s, until a cache
                     line bounces between the two cores within NS ns; every line's note
                     gives that round trip before and after its run)
                    (T-memif, root: two squall processes over DPDK net_memif, client core 0,
                     server core 1, busy CPU of each side's loop per op)
  squall-bench blast tx|rx --iface IF [--seconds S] [--size 64] [--dst MAC]  (internal: raw-veth)
  squall-bench w3-child --stack smoltcp|squall|squall-serve --flows N [--max-seconds S]   (internal)";

#[derive(Debug)]
struct Opts {
    /// Run Squall's W1/W2 flows over IPv6.
    ipv6: bool,
    workloads: Vec<String>,
    conns: Vec<usize>,
    seconds: f64,
    runs: usize,
    stacks: Vec<String>,
    /// `--stacks` given (T-memN's default is Squall's generator only).
    stacks_set: bool,
    /// W3 flow counts (the child gets one).
    flows: Vec<usize>,
    max_ops: u64,
    /// Warm-up before the measured window, seconds (default a quarter of --seconds, at
    /// most 0.5): 0 with --max-ops makes an instruction count under callgrind
    /// deterministic (a timed warm-up runs as many operations as the tool's speed allows).
    warmup: Option<f64>,
    clock_step_ns: u64,
    /// Frames per side of Squall's wire (0 = sized from C).
    pool: u32,
    max_seconds: f64,
    /// `port` (squall-port's mem wire, default) or `harness` (the harness's own queues).
    wire: String,
    /// Emulated checksum offload on both sides.
    offload: bool,
    /// Initial congestion windows (segments) for the initwnd rows; empty = not asked.
    initwnd: Vec<u8>,
    /// Shard counts of the T-memN cells.
    cores: Vec<usize>,
    /// Whether `--workloads` / `--conns` were given (mem2 has its own defaults).
    workloads_set: bool,
    conns_set: bool,
}

fn parse(args: &[String]) -> Result<Opts, String> {
    let mut o = Opts {
        ipv6: false,
        workloads: vec!["W1".into(), "W2".into(), "W3".into()],
        conns: vec![1, 100, 1000],
        seconds: 2.0,
        runs: 3,
        stacks: vec!["smoltcp".into(), "squall".into()],
        stacks_set: false,
        flows: vec![100_000, 1_000_000],
        max_ops: u64::MAX,
        warmup: None,
        clock_step_ns: 0,
        pool: 0,
        max_seconds: 120.0,
        wire: "port".into(),
        offload: false,
        initwnd: Vec::new(),
        cores: vec![1, 2],
        workloads_set: false,
        conns_set: false,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--offload" {
            o.offload = true;
            continue;
        }
        let mut val = || {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{a} needs a value"))
        };
        let list = |v: String| -> Vec<String> {
            v.split(',')
                .filter(|s| !s.is_empty())
                .map(|s| s.trim().to_string())
                .collect()
        };
        match a.as_str() {
            "--workloads" => {
                o.workloads = list(val()?).iter().map(|w| w.to_uppercase()).collect();
                o.workloads_set = true;
            }
            "--initwnd" => {
                o.initwnd = list(val()?)
                    .iter()
                    .map(|c| match c.parse::<u8>() {
                        Ok(k) if (1..=20).contains(&k) => Ok(k),
                        _ => Err(format!("bad --initwnd value {c} (1..=20 segments)")),
                    })
                    .collect::<Result<_, _>>()?
            }
            "--conns" => {
                o.conns_set = true;
                o.conns = list(val()?)
                    .iter()
                    .map(|c| c.parse().map_err(|_| format!("bad --conns value {c}")))
                    .collect::<Result<_, _>>()?
            }
            "--seconds" => {
                o.seconds = val()?.parse().map_err(|_| "bad --seconds".to_string())?;
                if !(o.seconds > 0.0 && o.seconds <= 600.0) {
                    return Err("--seconds must be in (0, 600]".into());
                }
            }
            "--runs" => {
                o.runs = val()?.parse().map_err(|_| "bad --runs".to_string())?;
                if o.runs == 0 || o.runs > 100 {
                    return Err("--runs must be in 1..=100".into());
                }
            }
            "--stacks" | "--stack" => {
                o.stacks = list(val()?);
                o.stacks_set = true;
            }
            "--family" => {
                o.ipv6 = match val()?.as_str() {
                    "ipv4" => false,
                    "ipv6" => true,
                    f => return Err(format!("bad --family {f} (ipv4 or ipv6)")),
                }
            }
            "--cores" => {
                o.cores = list(val()?)
                    .iter()
                    .map(|c| match c.parse::<usize>() {
                        Ok(n @ 1..=256) => Ok(n),
                        _ => Err(format!("bad --cores value {c} (1..=256)")),
                    })
                    .collect::<Result<_, _>>()?
            }
            "--flows" => {
                o.flows = list(val()?)
                    .iter()
                    .map(|c| c.parse().map_err(|_| format!("bad --flows value {c}")))
                    .collect::<Result<_, _>>()?
            }
            "--max-ops" => o.max_ops = val()?.parse().map_err(|_| "bad --max-ops".to_string())?,
            "--warmup" => {
                o.warmup = Some(
                    val()?
                        .parse::<f64>()
                        .ok()
                        .filter(|s| (0.0..=60.0).contains(s))
                        .ok_or("bad --warmup (0 to 60 seconds)")?,
                )
            }
            "--clock-step" => {
                o.clock_step_ns = val()?
                    .parse::<u64>()
                    .ok()
                    .filter(|n| (1..=1_000_000_000).contains(n))
                    .ok_or("bad --clock-step (1 to 1000000000 ns)")?
            }
            "--pool" => {
                o.pool = match val()?.parse() {
                    Ok(n @ 16..=65_536) => n,
                    _ => return Err("bad --pool value (16..=65536 frames per side)".into()),
                }
            }
            "--max-seconds" => {
                o.max_seconds = val()?
                    .parse()
                    .map_err(|_| "bad --max-seconds".to_string())?
            }
            "--wire" => {
                o.wire = val()?;
                if o.wire != "port" && o.wire != "harness" {
                    return Err("--wire must be port or harness".into());
                }
            }
            other => return Err(format!("unknown option {other}")),
        }
    }
    Ok(o)
}

fn emit(runs: &[Record]) {
    if let Some(r) = median_line(runs) {
        println!("{}", r.to_json());
    }
}

fn progress(r: &Record, i: usize, n: usize) {
    eprintln!(
        "  run {}/{}: {} {} {}/{} C={} cpu_us/op={:.3} ops/s={:.0} errors={}",
        i + 1,
        n,
        r.workload,
        r.topology,
        r.client,
        r.server,
        r.conns.unwrap_or(0),
        r.cpu_us_per_op.unwrap_or(f64::NAN),
        r.cps.or(r.rps).unwrap_or(0.0),
        r.errors
    );
}

/// W3 runs in a child process so the RSS baseline is not polluted by earlier cells.
fn w3_in_child(stack: &str, flows: usize, o: &Opts) -> Result<Record, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let out = std::process::Command::new(exe)
        .args([
            "w3-child",
            "--stack",
            stack,
            "--flows",
            &flows.to_string(),
            "--max-seconds",
            &o.max_seconds.to_string(),
            "--wire",
            &o.wire,
        ])
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| e.to_string())?;
    let line = String::from_utf8_lossy(&out.stdout);
    let line = line.lines().last().unwrap_or("").to_string();
    parse_w3_line(&line).ok_or_else(|| format!("w3 child said {line:?} ({})", out.status))
}

/// Reads back the few fields of a W3 line the parent needs for the median.
fn parse_w3_line(line: &str) -> Option<Record> {
    let field = |k: &str| -> Option<f64> {
        let key = format!("\"{k}\":");
        let i = line.find(&key)? + key.len();
        let rest = &line[i..];
        let end = rest.find([',', '}'])?;
        rest[..end].parse().ok()
    };
    let text = |k: &str| -> Option<String> {
        let key = format!("\"{k}\":\"");
        let i = line.find(&key)? + key.len();
        let end = line[i..].find('"')?;
        Some(line[i..i + end].to_string())
    };
    Some(Record {
        workload: "W3".into(),
        topology: "T-mem1".into(),
        client: text("client")?,
        server: text("server")?,
        conns: field("conns").map(|c| c as u64),
        bytes_per_flow: field("bytes_per_flow"),
        bytes_per_endpoint: field("bytes_per_endpoint"),
        errors: field("errors")? as u64,
        seconds: field("seconds")?,
        note: text("note"),
        ..Default::default()
    })
}

fn run_cell<P: workload_pair::MemPair>(pair: &mut P, w: &str, cfg: &RunCfg) -> Record {
    if w == "W1" {
        workload::run_w1(pair, cfg)
    } else {
        workload::run_w2(pair, cfg)
    }
}

/// A Squall T-mem1 cell: the bench's own server, or (`serve`) `squall serve`'s app.
#[cfg(feature = "squall")]
fn run_squall(
    w: &str,
    keepalive: bool,
    serve: bool,
    cfg: &RunCfg,
    offload: bool,
) -> Result<Record, String> {
    squall::run_cell(w, keepalive, serve, cfg, offload)
}

#[cfg(not(feature = "squall"))]
fn run_squall(
    _w: &str,
    _keepalive: bool,
    _serve: bool,
    _cfg: &RunCfg,
    _offload: bool,
) -> Result<Record, String> {
    Err("built without the `squall` feature (squall-tcp)".into())
}

fn run_mem(o: &Opts) -> Result<(), String> {
    // T-mem1 is one thread: keep it on one core (caches, no migrations), the same for
    // every stack. Core 1: the kernel tends to put its own work on core 0.
    if !squall_bench::measure::pin_to_core(1) {
        eprintln!("note: could not pin the T-mem1 thread to core 1; running unpinned");
    }
    for stack in &o.stacks {
        if !["smoltcp", "squall", "squall-serve"].contains(&stack.as_str()) {
            return Err(format!(
                "stack {stack:?} is not wired into the harness (adapter points: \
                 squall_bench::pair::MemPair, squall_bench::workload::IdleFlows)"
            ));
        }
        if o.ipv6 && stack != "squall" {
            eprintln!("{stack}: --family ipv6 runs Squall only: rows omitted");
            continue;
        }
        for w in &o.workloads {
            if stack == "smoltcp" && w == "W4" {
                eprintln!(
                    "W4 smoltcp: row omitted (W4 runs on Squall's stacks: squall, squall-serve)"
                );
                continue;
            }
            match w.as_str() {
                "W1" | "W3" if o.ipv6 && (w == "W3" || !o.initwnd.is_empty()) => {
                    eprintln!(
                        "{w} --family ipv6: row omitted (IPv6 W3 per flow: \
                         crates/squall-tcp/tests/w3_idle_flows.rs; no --initwnd rows)"
                    );
                }
                "W1" if !o.initwnd.is_empty() => {
                    if stack == "smoltcp" {
                        eprintln!(
                            "W1 smoltcp --initwnd: row omitted (smoltcp 0.12 has no \
                             initial-window knob)"
                        );
                        continue;
                    }
                    for &c in &o.conns {
                        for &k in &o.initwnd {
                            run_mem2_cell("W1", c, k, false, o)?;
                        }
                    }
                }
                "W1" | "W2" | "W4" => {
                    // W4: one request per connection, then its keep-alive variant.
                    let variants: &[bool] = if w == "W4" { &[false, true] } else { &[false] };
                    for (&c, &keepalive) in o
                        .conns
                        .iter()
                        .flat_map(|c| variants.iter().map(move |k| (c, k)))
                    {
                        let mut runs = Vec::new();
                        for i in 0..o.runs {
                            let mut cfg = RunCfg::new(c, o.seconds);
                            cfg.max_ops = o.max_ops;
                            if let Some(w) = o.warmup {
                                cfg.warmup = w;
                            }
                            cfg.pool = o.pool;
                            cfg.ipv6 = o.ipv6;
                            cfg.clock_step_ns = o.clock_step_ns;
                            let mut sc = SmolConfig::new(c);
                            sc.offload = o.offload;
                            let mut r = if stack == "squall" || stack == "squall-serve" {
                                run_squall(w, keepalive, stack == "squall-serve", &cfg, o.offload)?
                            } else if o.wire == "port" {
                                run_cell(&mut SmolPair::on_port(sc)?, w, &cfg)
                            } else {
                                run_cell(&mut SmolPair::new(sc), w, &cfg)
                            };
                            if stack == "smoltcp" {
                                let off = if o.offload {
                                    "; checksum offload emulated (no checksums)"
                                } else {
                                    ""
                                };
                                r.note = Some(format!("wire={}{off}", o.wire));
                            }
                            progress(&r, i, o.runs);
                            runs.push(r);
                        }
                        emit(&runs);
                    }
                }
                "W3" => {
                    for &n in &o.flows {
                        if let Some(why) = w3_skip(stack, n) {
                            eprintln!("W3 {stack} N={n} skipped: {why}");
                            continue;
                        }
                        let mut runs = Vec::new();
                        for i in 0..o.runs {
                            let r = w3_in_child(stack, n, o)?;
                            eprintln!(
                                "  run {}/{}: W3 {} flows={} bytes/flow={:.0} bytes/endpoint={:.0}",
                                i + 1,
                                o.runs,
                                stack,
                                r.conns.unwrap_or(0),
                                r.bytes_per_flow.unwrap_or(f64::NAN),
                                r.bytes_per_endpoint.unwrap_or(f64::NAN)
                            );
                            runs.push(r);
                        }
                        emit(&runs);
                    }
                }
                other => return Err(format!("unknown workload {other} for mem")),
            }
        }
    }
    Ok(())
}

/// Why a W3 cell cannot run here, if it cannot: smoltcp keeps two addresses per
/// interface (2 x 64,512 client ports) and needs ~17 KB per flow (4 KiB + 4 KiB buffers at
/// each end); nothing may take more than half the available memory.
fn w3_skip(stack: &str, n: usize) -> Option<String> {
    let per_flow = if stack == "smoltcp" { 18_000 } else { 2_000 };
    if stack == "smoltcp" && n > 2 * 64_512 {
        return Some("smoltcp: two client addresses give at most 129,024 4-tuples".into());
    }
    let avail = mem_available();
    if (n as u64) * per_flow > avail / 2 {
        return Some(format!(
            "needs ~{} MB, half of MemAvailable is {} MB",
            (n as u64 * per_flow) >> 20,
            avail >> 21
        ));
    }
    None
}

/// MemAvailable from /proc/meminfo, bytes (0 if unknown).
fn mem_available() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("MemAvailable:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map(|kb| kb * 1024)
        .unwrap_or(0)
}

fn run_w3_child(o: &Opts) -> Result<(), String> {
    let stack = o.stacks.first().map(String::as_str).unwrap_or("smoltcp");
    let flows = o.flows.first().copied().unwrap_or(100_000);
    if stack == "squall" || stack == "squall-serve" {
        #[cfg(feature = "squall")]
        {
            let make = if stack == "squall" {
                squall::SquallIdle::new
            } else {
                squall::SquallIdle::serve
            };
            let r = workload::run_w3(make, flows, o.max_seconds);
            println!("{}", r.to_json());
            return Ok(());
        }
        #[cfg(not(feature = "squall"))]
        return Err("built without the `squall` feature".into());
    }
    if stack != "smoltcp" {
        return Err(format!("W3: stack {stack:?} not wired in"));
    }
    let mut sc = SmolConfig::new(0);
    sc.listeners = 0;
    let mut r = if o.wire == "port" {
        let pair = SmolPair::on_port(sc)?;
        workload::run_w3(|| pair, flows, o.max_seconds)
    } else {
        workload::run_w3(|| SmolPair::new(sc), flows, o.max_seconds)
    };
    let wire = format!("wire={}", o.wire);
    r.note = Some(match r.note {
        Some(n) => format!("{wire}; {n}"),
        None => wire,
    });
    println!("{}", r.to_json());
    Ok(())
}

/// One Squall cell through the mem2 driver (`two_threads`: T-mem2, else T-mem1), median
/// of `--runs`, printed.
#[cfg(feature = "squall")]
fn run_mem2_cell(
    w: &str,
    conns: usize,
    initwnd: u8,
    two_threads: bool,
    o: &Opts,
) -> Result<(), String> {
    let wl = mem2::Workload::parse(w).ok_or_else(|| format!("workload {w} is not run by mem2"))?;
    let mut runs = Vec::new();
    for i in 0..o.runs {
        let mut cfg = Mem2Cfg::new(wl, conns, o.seconds);
        cfg.init_cwnd = initwnd;
        if !two_threads {
            cfg.placement = Placement::OneThread;
        }
        let r = mem2::run(&cfg)?;
        progress(&r, i, o.runs);
        runs.push(r);
    }
    emit(&runs);
    Ok(())
}

#[cfg(not(feature = "squall"))]
fn run_mem2_cell(_w: &str, _c: usize, _k: u8, _two: bool, _o: &Opts) -> Result<(), String> {
    Err("built without the `squall` feature (squall-tcp)".into())
}

/// T-mem2: Squall client on core 0, server on core 1 (W1, W2; C = 100, 1000 by default).
fn run_mem2(o: &Opts) -> Result<(), String> {
    let workloads: Vec<String> = if o.workloads_set {
        o.workloads.clone()
    } else {
        vec!["W1".into(), "W2".into()]
    };
    let conns = if o.conns_set {
        o.conns.clone()
    } else {
        vec![100, 1000]
    };
    let initwnd = if o.initwnd.is_empty() {
        vec![2]
    } else {
        o.initwnd.clone()
    };
    for w in &workloads {
        if w != "W1" && w != "W2" {
            return Err(format!("workload {w} is not run on T-mem2 (W1, W2)"));
        }
        for &c in &conns {
            for &k in &initwnd {
                run_mem2_cell(w, c, k, true, o)?;
            }
        }
    }
    Ok(())
}

/// T-memN: W1/W2 on N shards for each N of `--cores` (W1, C = 1000 by default).
#[cfg(feature = "squall")]
fn run_memn(o: &Opts) -> Result<(), String> {
    let workloads: Vec<String> = if o.workloads_set {
        o.workloads.clone()
    } else {
        vec!["W1".into()]
    };
    let conns = if o.conns_set {
        o.conns.clone()
    } else {
        vec![1000]
    };
    let stacks: Vec<String> = if o.stacks_set {
        o.stacks.clone()
    } else {
        vec!["squall".into()]
    };
    if let Some(s) = stacks
        .iter()
        .find(|s| *s != "squall" && *s != "squall-serve")
    {
        return Err(format!(
            "stack {s:?} is not run on T-memN (squall, squall-serve: Squall's shards)"
        ));
    }
    for w in &workloads {
        if w != "W1" && w != "W2" {
            return Err(format!("workload {w} is not run on T-memN (W1, W2)"));
        }
        for stack in &stacks {
            let serve = stack == "squall-serve";
            for &c in &conns {
                for &n in &o.cores {
                    let mut runs = Vec::new();
                    for i in 0..o.runs {
                        let mut cfg = RunCfg::new(c, o.seconds);
                        cfg.max_ops = o.max_ops;
                        cfg.pool = o.pool;
                        let r = squall_bench::memn::run(w == "W2", serve, &cfg, o.offload, n)?;
                        progress(&r, i, o.runs);
                        runs.push(r);
                    }
                    emit(&runs);
                }
            }
        }
    }
    Ok(())
}

#[cfg(not(feature = "squall"))]
fn run_memn(_o: &Opts) -> Result<(), String> {
    Err("built without the `squall` feature (squall-tcp)".into())
}

fn run_kernel(o: &Opts) -> Result<(), String> {
    // The kernel runs with cubic, as on T-veth (the host's allowed list gets it for the
    // run, restored after).
    let _cc = squall_bench::veth::CcGuard::allow_cubic()?;
    for w in &o.workloads {
        let wl = match w.as_str() {
            "W1" => LoopWorkload::W1,
            "W2" => LoopWorkload::W2,
            "W3" => {
                eprintln!("W3 is not run on T-loop (kernel W3 is measured with nginx on T-veth)");
                continue;
            }
            other => return Err(format!("workload {other} is not run on T-loop")),
        };
        for &c in &o.conns {
            let mut runs = Vec::new();
            for i in 0..o.runs {
                let cfg = LoopCfg::new(wl, c, o.seconds);
                let r = kernel::run_loop(&cfg).map_err(|e| format!("T-loop: {e}"))?;
                progress(&r, i, o.runs);
                runs.push(r);
            }
            emit(&runs);
        }
    }
    Ok(())
}

/// `squall-bench veth`: T-veth cells (`squall_bench::veth`), one JSON line per cell.
fn run_veth(args: &[String]) -> ExitCode {
    let exe = std::env::current_exe().unwrap_or_default();
    let dir = exe
        .parent()
        .map(std::path::Path::to_path_buf)
        .unwrap_or_default();
    // The project root: the nearest directory above the binary that holds the lab script
    // (target/release/squall-bench, or target/pgo-release/<host>/release/squall-bench).
    let root = project_root(&dir);
    let o = match veth::parse_opts(args, root, dir.join("squall")) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("error: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match veth::run(&o, &mut |r| println!("{}", r.to_json())) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The nearest directory at or above `dir` holding `scripts/lab.sh` (the project root:
/// `--root`'s default), else `dir`'s grandparent (target/<profile>/..).
fn project_root(dir: &std::path::Path) -> std::path::PathBuf {
    dir.ancestors()
        .find(|d| d.join("scripts/lab.sh").is_file())
        .or_else(|| dir.parent().and_then(std::path::Path::parent))
        .map(std::path::Path::to_path_buf)
        .unwrap_or_default()
}

/// `squall-bench memif`: T-memif cells (`squall_bench::memif`), one JSON line per cell.
fn run_memif(args: &[String]) -> ExitCode {
    let exe = std::env::current_exe().unwrap_or_default();
    let dir = exe
        .parent()
        .map(std::path::Path::to_path_buf)
        .unwrap_or_default();
    let o = match memif::parse_opts(args, dir.join("squall")) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("error: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match memif::run(&o, &mut |r| println!("{}", r.to_json())) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(cmd) = args.first() else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    match cmd.as_str() {
        "veth" => return run_veth(&args[1..]),
        "memif" => return run_memif(&args[1..]),
        "blast" => {
            return match squall_bench::blast::run(&args[1..]) {
                Ok(line) => {
                    println!("{line}");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("blast: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        _ => {}
    }
    let opts = match parse(&args[1..]) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("error: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let res = match cmd.as_str() {
        "mem" => run_mem(&opts),
        "loop" => run_kernel(&opts),
        "mem2" => run_mem2(&opts),
        "memn" => run_memn(&opts),
        "w3-child" => run_w3_child(&opts),
        "-h" | "--help" | "help" => {
            println!("{USAGE}");
            Ok(())
        }
        other => Err(format!("unknown command {other}")),
    };
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn the_project_root_is_found_from_any_target_layout() {
        let top = std::env::temp_dir().join(format!("squall-root-{}", std::process::id()));
        let deep = top.join("target/pgo-release/x86_64-unknown-linux-gnu/release");
        std::fs::create_dir_all(&deep).unwrap();
        // No lab script anywhere above: target/<profile>/.. as before.
        assert_eq!(project_root(&deep), top.join("target/pgo-release"));
        std::fs::create_dir_all(top.join("scripts")).unwrap();
        std::fs::write(top.join("scripts/lab.sh"), "").unwrap();
        assert_eq!(project_root(&deep), top);
        assert_eq!(project_root(&top.join("target/release")), top);
        std::fs::remove_dir_all(&top).unwrap();
    }

    #[test]
    fn parses_lists_and_bounds() {
        let o = parse(&args(
            "--workloads w1,W2 --conns 1,1000 --seconds 1.5 --runs 5",
        ))
        .unwrap();
        assert_eq!(o.workloads, vec!["W1", "W2"]);
        assert_eq!(o.conns, vec![1, 1000]);
        assert_eq!(o.seconds, 1.5);
        assert_eq!(o.runs, 5);
        assert!(parse(&args("--seconds 0")).is_err());
        assert!(parse(&args("--runs 0")).is_err());
        assert!(parse(&args("--conns x")).is_err());
        assert!(parse(&args("--bogus")).is_err());
        assert!(parse(&args("--runs")).is_err());
    }

    #[test]
    fn parses_initwnd_and_marks_explicit_lists() {
        let o = parse(&args("--initwnd 2,10 --conns 100")).unwrap();
        assert_eq!(o.initwnd, vec![2, 10]);
        assert!(o.conns_set);
        assert!(!o.workloads_set);
        assert!(parse(&args("--initwnd 0")).is_err());
        assert!(parse(&args("--initwnd 21")).is_err());
        assert!(parse(&args("--initwnd x")).is_err());
        assert!(parse(&[]).unwrap().initwnd.is_empty());
    }

    #[test]
    fn clock_step_is_a_bounded_number_of_ns() {
        assert_eq!(
            parse(&args("--clock-step 10000")).unwrap().clock_step_ns,
            10_000
        );
        assert_eq!(
            parse(&[]).unwrap().clock_step_ns,
            0,
            "the real clock by default"
        );
        for bad in ["0", "x", "-5", "1000000001"] {
            let e = parse(&args(&format!("--clock-step {bad}"))).err().unwrap();
            assert!(e.contains("bad --clock-step"), "{bad}: {e}");
        }
    }

    #[test]
    fn defaults_are_bounded() {
        let o = parse(&[]).unwrap();
        assert_eq!(o.runs, 3);
        assert!(o.seconds <= 3.0);
        assert_eq!(o.conns, vec![1, 100, 1000]);
    }

    #[test]
    fn w3_line_round_trips() {
        let r = Record {
            workload: "W3".into(),
            topology: "T-mem1".into(),
            client: "smoltcp".into(),
            server: "smoltcp".into(),
            conns: Some(100_000),
            bytes_per_flow: Some(17_349.0),
            bytes_per_endpoint: Some(8_674.5),
            errors: 0,
            seconds: 3.5,
            ..Default::default()
        };
        let back = parse_w3_line(&r.to_json()).unwrap();
        assert_eq!(back.conns, Some(100_000));
        assert_eq!(back.bytes_per_flow, Some(17_349.0));
        assert_eq!(back.client, "smoltcp");
        assert!(parse_w3_line("garbage").is_none());
    }
}
