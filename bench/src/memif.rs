//! T-memif (BENCHMARKS.md): two `squall run` processes, a server pinned to core 1 and a
//! client pinned to core 0, joined by DPDK's `net_memif` shared-memory device (no kernel
//! in the path, no hugepages), run W1 and W2 with the profiles of the T-veth cells. The
//! figure is each side's busy CPU per operation (`busy_cpu_sec` of `squall run --json`:
//! the polling loop's iterations that did work; idle spins are not work). Needs root and
//! a `squall` built with the `dpdk` feature (`make bench-veth` builds it).
//!
//! W1 is measured at the highest offered rate that runs clean: the search tries the
//! `--w1-cps` list from the top (a saturated loop batches best, so the figure is the
//! lowest honest one) and keeps the first rate whose probe is clean and that gives
//! `--runs` clean runs within twice as many attempts. Clean: every byte delivered, and the
//! pair keeping up with the offered rate (a run in which more than 1 % of the flows opened
//! over 10 ms late, `started_late`, or half the flows took over 10 ms from their schedule
//! to their last byte, did not deliver the rate: it measures overload, and this VM's two
//! vCPUs are sometimes placed far apart — see docs/BENCHMARKS.md). The median is of the
//! clean runs; the line's note counts the runs that were not, and names the higher rates
//! that failed.
//!
//! The server is `squall run --mode server` (`"server":"squall"`) or `squall serve`
//! (`"server":"squall-serve"`: the benchmark site of `site.rs`, W2's `/testu` route, its
//! busy CPU from `busy_cpu_ns`); the client is `squall run`, raw (`send`/`recv` of the
//! exact answer size) or HTTP-aware (`--clients squall-http`: `http_request` /
//! `http_wait_response`, every answer parsed).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::measure;
use crate::report::Record;
use crate::serve_cmd::{self, AnswerSizes};
use crate::site::Site;
use crate::veth::{
    fill, median_line, output, parse_squall, squall_w2_response, text, w1_http_profile, w1_profile,
    w1_request, w2_body, w2_http_profile, w2_profile, w2_request, Bg, Measured, W1_REQ_BYTES,
    W1_RESP_BYTES, W2_REQ_BYTES,
};

/// Options of `squall-bench memif`.
#[derive(Clone, Debug)]
pub struct MemifOpts {
    pub workloads: Vec<String>,
    /// W2 connection counts.
    pub conns: Vec<usize>,
    pub seconds: f64,
    pub runs: usize,
    /// Offered W1 rates to try, highest first.
    pub w1_cps: Vec<f64>,
    /// The client end in memif's zero-copy mode (its mbufs are the shared buffers; the
    /// server end then does the one copy each way).
    pub zero_copy: bool,
    /// Servers: `squall` (`squall run --mode server`), `squall-serve` (`squall serve`).
    pub servers: Vec<String>,
    /// Clients: `squall` (raw), `squall-http` (the HTTP-aware generator).
    pub clients: Vec<String>,
    pub squall: PathBuf,
    /// Before each run, wait (at most [`XCORE_WAIT_S`]) until the cross-core round trip
    /// between the two sides' cores is at most this many ns (None: do not wait).
    pub xcore_max_ns: Option<f64>,
}

impl MemifOpts {
    pub fn new(squall: PathBuf) -> Self {
        MemifOpts {
            workloads: vec!["W1".into(), "W2".into()],
            conns: vec![100, 1000],
            seconds: 5.0,
            runs: 3,
            w1_cps: vec![160_000.0, 130_000.0, 100_000.0, 70_000.0, 40_000.0],
            zero_copy: true,
            servers: vec!["squall".into(), "squall-serve".into()],
            clients: vec!["squall".into()],
            squall,
            xcore_max_ns: None,
        }
    }
}

/// Parses the options of `squall-bench memif` (see `main.rs`'s usage).
pub fn parse_opts(args: &[String], squall: PathBuf) -> Result<MemifOpts, String> {
    let mut o = MemifOpts::new(squall);
    let mut it = args.iter();
    let list = |v: &str| -> Vec<String> {
        v.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect()
    };
    while let Some(a) = it.next() {
        let v = it.next().ok_or_else(|| format!("{a} needs a value"))?;
        match a.as_str() {
            "--workloads" => {
                o.workloads = list(v).iter().map(|w| w.to_uppercase()).collect();
                if let Some(w) = o
                    .workloads
                    .iter()
                    .find(|w| !["W1", "W2"].contains(&w.as_str()))
                {
                    return Err(format!("workload {w}: W1 or W2"));
                }
            }
            "--conns" => {
                o.conns = list(v)
                    .iter()
                    .map(|x| match x.parse::<usize>() {
                        Ok(n) if (1..=4000).contains(&n) => Ok(n),
                        _ => Err(format!("bad --conns value {x} (1..=4000)")),
                    })
                    .collect::<Result<_, _>>()?
            }
            "--seconds" => {
                o.seconds = v.parse().map_err(|_| "bad --seconds".to_string())?;
                if !(1.0..=120.0).contains(&o.seconds) {
                    return Err("--seconds must be in [1, 120]".into());
                }
            }
            "--runs" => {
                o.runs = v.parse().map_err(|_| "bad --runs".to_string())?;
                if o.runs == 0 || o.runs > 20 {
                    return Err("--runs must be in 1..=20".into());
                }
            }
            "--w1-cps" => {
                let mut r = list(v)
                    .iter()
                    .map(|x| match x.parse::<f64>() {
                        Ok(n) if (100.0..=2e6).contains(&n) => Ok(n),
                        _ => Err(format!("bad --w1-cps value {x} (100..=2e6)")),
                    })
                    .collect::<Result<Vec<f64>, _>>()?;
                r.sort_by(|a, b| b.total_cmp(a));
                if r.is_empty() {
                    return Err("--w1-cps needs at least one rate".into());
                }
                o.w1_cps = r;
            }
            "--zero-copy" => {
                o.zero_copy = match v.as_str() {
                    "yes" => true,
                    "no" => false,
                    x => return Err(format!("--zero-copy {x}: yes or no")),
                }
            }
            "--servers" => {
                o.servers = list(v);
                if let Some(x) = o
                    .servers
                    .iter()
                    .find(|x| !["squall", "squall-serve"].contains(&x.as_str()))
                {
                    return Err(format!("server {x}: squall or squall-serve"));
                }
            }
            "--clients" => {
                o.clients = list(v);
                if let Some(x) = o
                    .clients
                    .iter()
                    .find(|x| !["squall", "squall-http"].contains(&x.as_str()))
                {
                    return Err(format!("client {x}: squall or squall-http"));
                }
            }
            "--squall" => o.squall = PathBuf::from(v),
            "--xcore-max" => match v.parse::<f64>() {
                Ok(n) if (10.0..=100_000.0).contains(&n) => o.xcore_max_ns = Some(n),
                _ => return Err(format!("bad --xcore-max {v} (ns, 10..=100000)")),
            },
            other => return Err(format!("unknown option {other}")),
        }
    }
    Ok(o)
}

const CLIENT_CORE: usize = 0;
const SERVER_CORE: usize = 1;
const CLIENTS: (&str, &str) = ("198.18.16.1", "198.18.16.200");

/// Round trips of one cross-core probe (10-50 ms on this kind of VM).
const XCORE_ROUNDS: u64 = 100_000;
/// Longest wait for a cross-core round trip under `--xcore-max`.
const XCORE_WAIT_S: u64 = 60;

/// The cross-core round trip between the two sides' cores (ns), and with `max` the
/// seconds waited for it to come down to `max` (probing twice a second, at most
/// [`XCORE_WAIT_S`]); a note for the line.
fn xcore_before(max: Option<f64>) -> (Option<f64>, String) {
    let probe = || measure::xcore_round_trip_ns(CLIENT_CORE, SERVER_CORE, XCORE_ROUNDS);
    let t0 = std::time::Instant::now();
    let mut ns = probe();
    let Some(max) = max else {
        return (ns, String::new());
    };
    while ns.is_some_and(|n| n > max) && t0.elapsed().as_secs() < XCORE_WAIT_S {
        std::thread::sleep(std::time::Duration::from_millis(500));
        ns = probe();
    }
    let waited = t0.elapsed().as_secs_f64();
    let note = match ns {
        Some(n) if n <= max => {
            format!("waited {waited:.1} s for a cross-core round trip <= {max:.0} ns")
        }
        Some(_) => {
            format!("no cross-core round trip <= {max:.0} ns in {XCORE_WAIT_S} s: ran anyway")
        }
        None => "cross-core probe could not pin its threads".into(),
    };
    (ns, note)
}

/// The memif client end's MAC (set by the `mac` devarg), `squall serve`'s `--peer-mac`.
const CLIENT_MAC: &str = "02:00:00:00:10:01";

/// The EAL arguments of one end of the memif socket `sock` (the server is the memif
/// server), its own EAL file prefix so the two processes do not meet in /var/run/dpdk.
fn eal(o: &MemifOpts, mode: &str, sock: &Path) -> String {
    let core = if mode == "client" {
        CLIENT_CORE
    } else {
        SERVER_CORE
    };
    // memif's zero-copy mode is the client role's (DPDK 22.11), and needs the EAL's
    // memory in single-file segments to share it.
    let (zc_eal, zc_dev) = if o.zero_copy && mode == "client" {
        (" --single-file-segments", ",zero-copy=yes")
    } else {
        ("", "")
    };
    let mac = if mode == "client" {
        format!(",mac={CLIENT_MAC}")
    } else {
        String::new()
    };
    format!(
        "--no-huge --in-memory -l {core} --no-pci --no-telemetry --log-level=*:warning{zc_eal} \
         --file-prefix=sqb-memif-{mode}-{pid} --vdev=net_memif0,role={mode},socket={sock}{zc_dev}{mac}",
        pid = std::process::id(),
        sock = sock.display()
    )
}

/// `timeout LIMIT taskset -c CORE squall run PROF --iface dpdk --mode MODE --eal ...`.
fn squall_cmd(
    o: &MemifOpts,
    mode: &str,
    prof: &Path,
    json: &Path,
    sock: &Path,
    secs: f64,
) -> Command {
    let core = if mode == "client" {
        CLIENT_CORE
    } else {
        SERVER_CORE
    };
    let eal = eal(o, mode, sock);
    let mut c = Command::new("timeout");
    c.args(["-k", "2", &format!("{:.0}", (secs + 60.0).ceil())])
        .args(["taskset", "-c", &core.to_string()])
        .arg(&o.squall)
        .args(["run", &prof.display().to_string(), "--iface", "dpdk"])
        .args(["--mode", mode, "--eal", &eal, "-q"])
        .args(["--json", &json.display().to_string()]);
    c
}

/// Frames both directions of one side's port (`tx_frames + rx_frames` of its JSON).
fn port_frames(js: &str, side: &str) -> f64 {
    let v: Value = serde_json::from_str(js).unwrap_or(Value::Null);
    let p = &v[side]["port"];
    (p["tx_frames"].as_u64().unwrap_or(0) + p["rx_frames"].as_u64().unwrap_or(0)) as f64
}

/// Who plays each side of a cell.
#[derive(Clone, Copy)]
struct Pair<'a> {
    /// `squall` or `squall-http`.
    client: &'a str,
    /// `squall` or `squall-serve`.
    server: &'a str,
    /// `squall serve`'s site and answer sizes (server `squall-serve`).
    site: Option<&'a (Site, AnswerSizes)>,
}

impl Pair<'_> {
    /// The whole answer the client receives per request.
    fn resp_total(&self, w: &str) -> usize {
        match (self.site, w) {
            (Some((_, z)), "W1") => z.w1,
            (Some((_, z)), _) => z.w2,
            (None, "W1") => W1_RESP_BYTES,
            (None, _) => squall_w2_response().len(),
        }
    }

    /// The client's profile (the server side of it is what `squall run --mode server`
    /// plays; `squall serve` ignores it).
    fn profile(&self, w: &str, conns: usize, secs: f64) -> Value {
        let total = self.resp_total(w);
        match (w, self.client == "squall-http") {
            ("W1", false) => w1_profile(total, CLIENTS),
            ("W1", true) => w1_http_profile(&w1_request(), CLIENTS),
            (_, false) => w2_profile(total, conns, secs, CLIENTS),
            (_, true) => w2_http_profile(&w2_request().0, conns, secs, CLIENTS),
        }
    }
}

/// The server process: `squall run --mode server` with the cell's profile, or `squall
/// serve` with the site; its output (JSON and log) under `dir`.
fn server_cmd(
    o: &MemifOpts,
    pair: Pair<'_>,
    prof: &Path,
    json: &Path,
    sock: &Path,
    secs: f64,
) -> Command {
    match pair.site {
        Some((site, _)) => {
            let mut c = Command::new("timeout");
            c.args(["-k", "2", &format!("{:.0}", (secs + 60.0).ceil())])
                .args(["taskset", "-c", &SERVER_CORE.to_string()])
                .arg(&o.squall)
                .args(serve_cmd::args(
                    site,
                    "198.18.48.1:80",
                    "dpdk",
                    CLIENT_MAC,
                    &w2_body(),
                    secs,
                ))
                .args(["--eal", &eal(o, "server", sock)]);
            c
        }
        None => {
            let mut c = squall_cmd(o, "server", prof, json, sock, secs);
            c.args(["--duration", &format!("{secs}"), "--drain-sec", "1"]);
            c
        }
    }
}

/// One run of workload `w` (`conns` for W2, `cps` offered for W1).
fn run_once(
    o: &MemifOpts,
    pair: Pair<'_>,
    w: &str,
    conns: usize,
    cps: f64,
    i: usize,
    dir: &Path,
) -> Result<Record, String> {
    let secs = o.seconds;
    let (xc_before, xc_wait) = xcore_before(o.xcore_max_ns);
    let sock = dir.join(format!("memif-{i}.sock"));
    let _ = std::fs::remove_file(&sock);
    let resp_total = pair.resp_total(w);
    let http = pair.client == "squall-http";
    let prof = pair.profile(w, conns, secs);
    let p = dir.join(format!("{w}.json"));
    std::fs::write(&p, prof.to_string()).map_err(|e| format!("{}: {e}", p.display()))?;
    let (srv_json, cli_json) = (
        dir.join(format!("server-{i}.json")),
        dir.join(format!("client-{i}.json")),
    );
    let _ = std::fs::remove_file(&srv_json);
    let _ = std::fs::remove_file(&cli_json);
    // The server generates nothing; it serves for the client's whole run and ends once idle.
    let srv_secs = if w == "W1" { secs + 8.0 } else { secs + 10.0 };
    let sc = server_cmd(o, pair, &p, &srv_json, &sock, srv_secs);
    let log = dir.join(format!("server-{i}.out"));
    let mut srv = Bg::spawn(sc, &log)?;
    // The memif client connects once, at its start: the server's socket must be there
    // (an abstract socket by default, listed in /proc/net/unix as `@PATH`).
    let t0 = std::time::Instant::now();
    let listed = format!("@{}", sock.display());
    let listening = || {
        std::fs::read_to_string("/proc/net/unix")
            .map(|t| t.lines().any(|l| l.ends_with(&listed)))
            .unwrap_or(false)
            || sock.exists()
    };
    while !listening() {
        if t0.elapsed() > std::time::Duration::from_secs(20) {
            return Err(format!(
                "the squall server made no memif socket in 20 s: {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            ));
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let mut cc = squall_cmd(o, "client", &p, &cli_json, &sock, secs);
    if w == "W1" {
        cc.args([
            "--duration",
            &format!("{secs}"),
            "--mult",
            &format!("{cps}"),
        ]);
        cc.args(["--drain-sec", "5"]);
    } else {
        // W2's connections open in the first second and loop for `secs`.
        cc.args([
            "--duration",
            "1",
            "--mult",
            "1",
            "--drain-sec",
            &format!("{}", secs + 5.0),
        ]);
    }
    cc.args(["--seed", &format!("{}", 1 + i)]);
    let out = output(cc)?;
    let cjs = std::fs::read_to_string(&cli_json)
        .map_err(|e| format!("squall client wrote no json ({e}): {}", text(&out)))?;
    let ok = srv.wait();
    let xc_after = measure::xcore_round_trip_ns(CLIENT_CORE, SERVER_CORE, XCORE_ROUNDS);
    let c = parse_squall(&cjs, "client")?;
    let mut notes = Vec::new();
    let mut m = Measured {
        secs,
        errors: c.errors,
        ..Default::default()
    };
    // Operations: completed connections (W1) or whole answers (W2), every byte counted.
    m.ops = if w == "W1" {
        c.completed as f64
    } else if http {
        c.http_responses as f64
    } else {
        (c.l7_rx_bytes / resp_total as u64) as f64
    };
    let answers = if w == "W1" { c.completed } else { m.ops as u64 };
    if c.l7_rx_bytes != answers * resp_total as u64 {
        notes.push(format!(
            "client received {} bytes, {answers} x {resp_total} expected",
            c.l7_rx_bytes
        ));
        m.errors += 1;
    }
    if http && c.http_2xx != c.http_responses {
        notes.push(format!(
            "{} of {} answers not 2xx",
            c.http_responses - c.http_2xx,
            c.http_responses
        ));
        m.errors += 1;
    }
    // The server's side of the count, and its busy CPU (idle polling already out of it).
    let (busy, thread) = if pair.site.is_some() {
        let sv = serve_cmd::parse_serve(&std::fs::read_to_string(&log).unwrap_or_default())?;
        m.errors += sv.errors;
        if sv.status_2xx != answers {
            notes.push(format!(
                "squall serve answered {} requests with 2xx, client counted {answers}",
                sv.status_2xx
            ));
            m.errors += 1;
        }
        (sv.busy_cpu_sec, sv.cpu_sec)
    } else {
        let sjs = std::fs::read_to_string(&srv_json).map_err(|e| {
            format!(
                "squall server wrote no json ({e}): {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            )
        })?;
        let s = parse_squall(&sjs, "server")?;
        m.errors += s.errors;
        if w == "W1" && s.completed != c.completed {
            notes.push(format!(
                "server completed {}, client {}",
                s.completed, c.completed
            ));
            m.errors += 1;
        }
        (s.busy_cpu_sec, s.cpu_sec)
    };
    if w == "W1" {
        notes.push(format!("offered {cps:.0} conn/s"));
        if let Some(why) = c.overloaded() {
            notes.push(why);
            m.errors += 1;
        }
    }
    if !out.status.success() && m.errors == 0 {
        notes.push(format!("squall client exit {:?}", out.status.code()));
        m.errors += 1;
    }
    if !ok && m.errors == 0 {
        notes.push(format!("{} exit status not 0", pair.server));
        m.errors += 1;
    }
    // Busy CPU of each side's loop; idle polling is already out of it.
    m.busy_us = [c.busy_cpu_sec * 1e6, busy * 1e6];
    m.proc_us = [Some(c.cpu_sec * 1e6), Some(thread * 1e6)];
    m.frames = port_frames(&cjs, "client");
    let mut r = Record {
        workload: w.into(),
        topology: "T-memif".into(),
        client: pair.client.into(),
        server: pair.server.into(),
        conns: (w == "W2").then_some(conns as u64),
        port: Some("dpdk-memif".into()),
        seconds: secs,
        ..Default::default()
    };
    let l7 = if w == "W1" {
        (W1_REQ_BYTES + resp_total) as f64
    } else {
        (W2_REQ_BYTES + resp_total) as f64
    };
    fill(&mut r, &m, Some(l7));
    // `fill` sees no idle figure (busy_us is already busy-only): no raw columns.
    r.client_raw_us_per_op = None;
    r.server_raw_us_per_op = None;
    notes.push(format!(
        "memif client (the TCP client) zero-copy {}; busy CPU of each side's polling loop; \
         *_thread_us_per_op: all its CPU, idle polling included",
        if o.zero_copy { "on" } else { "off" }
    ));
    // Where the host had the two cores: on this kind of VM ~50 ns by this probe when
    // quiet, several times that when not (docs/BENCHMARKS.md, "Runs that fall behind are
    // not clean").
    let fmt_ns = |v: Option<f64>| v.map_or("?".into(), |n| format!("{n:.0}"));
    notes.push(format!(
        "cross-core round trip {} ns before the run, {} after",
        fmt_ns(xc_before),
        fmt_ns(xc_after)
    ));
    if !xc_wait.is_empty() {
        notes.push(xc_wait);
    }
    r.note = Some(notes.join("; "));
    Ok(r)
}

fn progress(r: &Record, what: &str) {
    eprintln!(
        "memif {} {}: cps {:.0} rps {:.0} client {:.2} us/op server {:.2} us/op errors {}",
        r.workload,
        what,
        r.cps.unwrap_or(0.0),
        r.rps.unwrap_or(0.0),
        r.client_us_per_op.unwrap_or(0.0),
        r.server_us_per_op.unwrap_or(0.0),
        r.errors
    );
    if r.errors > 0 {
        eprintln!("  ({})", r.note.as_deref().unwrap_or(""));
    }
}

/// Runs every cell `o` asks for and calls `emit` with each median line.
pub fn run(o: &MemifOpts, emit: &mut dyn FnMut(&Record)) -> Result<(), String> {
    // SAFETY: no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err("memif needs root (DPDK's EAL, even without hugepages)".into());
    }
    if !o.squall.exists() {
        return Err(format!(
            "{} not found (cargo build --release -p squall --features squall/dpdk,squall-port/dpdk, or --squall PATH)",
            o.squall.display()
        ));
    }
    let help = Command::new(&o.squall)
        .args(["run", "--help"])
        .output()
        .map_err(|e| format!("{}: {e}", o.squall.display()))?;
    if !String::from_utf8_lossy(&help.stdout).contains("--eal") {
        return Err(format!(
            "{} was built without the dpdk feature (cargo build --release -p squall --features squall/dpdk,squall-port/dpdk)",
            o.squall.display()
        ));
    }
    let dir = std::env::temp_dir().join(format!("squall-bench-memif-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let res = run_cells(o, &dir, emit);
    // SQUALL_BENCH_KEEP: leave the profiles, results and logs of every run for a look.
    if std::env::var_os("SQUALL_BENCH_KEEP").is_some() {
        eprintln!("memif: runs kept in {}", dir.display());
    } else {
        let _ = std::fs::remove_dir_all(&dir);
    }
    res
}

fn run_cells(o: &MemifOpts, dir: &Path, emit: &mut dyn FnMut(&Record)) -> Result<(), String> {
    let site = if o.servers.iter().any(|s| s == "squall-serve") {
        Some(serve_cmd::prepare(dir, &w2_body())?)
    } else {
        None
    };
    for server in &o.servers {
        for client in &o.clients {
            if client == "squall-http" && server == "squall" {
                // `squall run --mode server` answers with the profile's raw bytes, not
                // framed HTTP the HTTP-aware client could parse: no such cell.
                eprintln!("memif: squall-http/squall skipped (squall-http needs squall-serve)");
                continue;
            }
            let pair = Pair {
                client,
                server,
                site: if server == "squall-serve" {
                    site.as_ref()
                } else {
                    None
                },
            };
            run_pair(o, pair, dir, emit)?;
        }
    }
    Ok(())
}

/// W1's line for one pair: the highest offered rate at which the probe is clean and
/// `runs` runs are clean within twice as many attempts (every byte, and the pair keeping
/// up: a run that falls behind delivered less than the offered rate). The median is of
/// the clean runs; the note counts the others and names the higher rates that failed.
fn w1_line(o: &MemifOpts, pair: Pair<'_>, dir: &Path, who: &str) -> Result<Record, String> {
    let mut failed = Vec::new();
    for (k, &rate) in o.w1_cps.iter().enumerate() {
        let r = run_once(o, pair, "W1", 0, rate, 100 + k, dir)?;
        progress(&r, &format!("{who} probe at {rate:.0}"));
        if r.errors != 0 {
            failed.push(format!("{rate:.0} (probe not clean)"));
            continue;
        }
        let (mut clean, mut bad) = (Vec::new(), Vec::new());
        while clean.len() < o.runs && clean.len() + bad.len() < 2 * o.runs {
            let i = clean.len() + bad.len();
            let r = run_once(o, pair, "W1", 0, rate, i, dir)?;
            progress(&r, &format!("{who} run {} (clean {})", i + 1, clean.len()));
            if r.errors > 0 {
                bad.push(r)
            } else {
                clean.push(r)
            }
        }
        let tried = clean.len() + bad.len();
        if clean.len() < o.runs && k + 1 < o.w1_cps.len() {
            failed.push(format!(
                "{rate:.0} ({} of {tried} runs not clean)",
                bad.len()
            ));
            continue;
        }
        // The last rate with no clean run: the line carries no figure.
        let runs = if clean.is_empty() {
            &bad[bad.len() - 1..]
        } else {
            &clean[..]
        };
        let mut m = median_line(runs).ok_or("no run")?;
        let mut note = vec![m.note.take().unwrap_or_default()];
        if !bad.is_empty() {
            note.push(format!(
                "{} of {tried} runs at this rate not clean (not in the median)",
                bad.len()
            ));
        }
        if !failed.is_empty() {
            note.push(format!("higher rates tried: {}", failed.join(", ")));
        }
        m.note = Some(note.join("; "));
        return Ok(m);
    }
    Err(format!(
        "W1 {who}: no clean run at any of the rates {:?}",
        o.w1_cps
    ))
}

/// Every workload of `o` for one client/server pair.
fn run_pair(
    o: &MemifOpts,
    pair: Pair<'_>,
    dir: &Path,
    emit: &mut dyn FnMut(&Record),
) -> Result<(), String> {
    let who = format!("{}/{}", pair.client, pair.server);
    for w in &o.workloads {
        if w == "W1" {
            emit(&w1_line(o, pair, dir, &who)?);
        } else {
            for &c in &o.conns {
                let mut runs = Vec::new();
                for i in 0..o.runs {
                    let r = run_once(o, pair, "W2", c, 0.0, i, dir)?;
                    progress(&r, &format!("{who} C={c} run {}/{}", i + 1, o.runs));
                    runs.push(r);
                }
                emit(&median_line(&runs).ok_or("no run")?);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn options_parse_and_check_ranges() {
        let o = parse_opts(
            &args("--workloads w2 --conns 10,100 --runs 1 --w1-cps 1000,5000"),
            "sq".into(),
        )
        .unwrap();
        assert_eq!(o.workloads, ["W2"]);
        assert_eq!(o.conns, [10, 100]);
        assert_eq!(o.runs, 1);
        // Highest first.
        assert_eq!(o.w1_cps, [5000.0, 1000.0]);
        assert!(parse_opts(&args("--workloads W3"), "sq".into()).is_err());
        assert!(parse_opts(&args("--conns 0"), "sq".into()).is_err());
        assert!(parse_opts(&args("--seconds 0.1"), "sq".into()).is_err());
        assert!(parse_opts(&args("--runs"), "sq".into()).is_err());
        assert!(parse_opts(&args("--bogus 1"), "sq".into()).is_err());
        let o = parse_opts(
            &args("--servers squall-serve --clients squall,squall-http"),
            "sq".into(),
        )
        .unwrap();
        assert_eq!(o.servers, ["squall-serve"]);
        assert_eq!(o.clients, ["squall", "squall-http"]);
        assert!(parse_opts(&args("--servers nginx"), "sq".into()).is_err());
        assert!(parse_opts(&args("--clients squall-serve"), "sq".into()).is_err());
    }

    #[test]
    fn xcore_max_is_parsed_and_checked() {
        let o = parse_opts(&args("--xcore-max 150"), PathBuf::from("squall")).unwrap();
        assert_eq!(o.xcore_max_ns, Some(150.0));
        assert!(parse_opts(&args("--xcore-max 5"), PathBuf::from("squall")).is_err());
        assert!(parse_opts(&args("--xcore-max x"), PathBuf::from("squall")).is_err());
        assert_eq!(MemifOpts::new(PathBuf::from("s")).xcore_max_ns, None);
    }

    // The probe measures a round trip between two cores, and gives up (no hang) when a
    // side cannot be pinned.
    #[test]
    fn xcore_probe_measures_or_gives_up() {
        let cores = squall_engine::affinity::available_cores();
        if cores.len() >= 2 {
            let ns = measure::xcore_round_trip_ns(cores[0], cores[1], 2_000).expect("probed");
            assert!(ns > 0.0 && ns < 1e6, "{ns}");
        }
        assert_eq!(measure::xcore_round_trip_ns(cores[0], 100_000, 2_000), None);
        assert_eq!(measure::xcore_round_trip_ns(100_000, cores[0], 2_000), None);
    }

    #[test]
    fn port_frames_sum_both_directions() {
        let js = r#"{"client":{"port":{"tx_frames":10,"rx_frames":32}}}"#;
        assert_eq!(port_frames(js, "client"), 42.0);
        assert_eq!(port_frames("not json", "client"), 0.0);
    }
}
