//! T-veth (`squall-bench veth`, `make bench-veth`): W1 and W2 between the lab's two
//! namespaces (`scripts/lab.sh`: sq-cli <-> sq-srv over one veth pair, MTU 1500, offloads
//! off) for the four pairs — kernel client (ab for W1, wrk for W2) or Squall's client,
//! against nginx or Squall's server — plus the `raw-veth` floor line (raw frames through
//! the port type Squall uses, `squall-bench blast`).
//!
//! Every cell brings the lab up in the mode its pair needs (the interface of a Squall side
//! carries no address), sets cubic congestion control in both namespaces (the host's
//! allowed list gets cubic for the run and is restored after), pins the client side to
//! core 0 and the server side to core 1 (`taskset`), and runs `--runs` times; the line is
//! the median (`report::median_record`).
//!
//! Per run: `/proc/stat` busy time of both cores and sq-cli0's packet counters are read
//! before the server (if it is Squall) starts and after both sides have exited. A side's
//! `*_us_per_op` is its core's busy time (softirq included) over the operations; for a
//! Squall side, the CPU its polling loop spent in iterations that did no work (`squall
//! run`'s `cpu_sec - busy_cpu_sec`) is taken out first (`*_raw_us_per_op` keeps it).
//! Operations are counted by the client (ab's complete requests, wrk's requests,
//! Squall's completed flows or received responses); errors are every side's error
//! counters plus wrong response sizes; a line with errors carries no per-op figure.
//! Every process runs under `timeout`; the lab is torn down and the congestion control
//! restored by guards, and by a signal thread on SIGINT/SIGTERM/SIGHUP (children
//! stopped first).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::measure::core_busy_us;
pub use crate::report::median_line;
use crate::report::Record;
use crate::serve_cmd::{self, AnswerSizes, ServeOut};
use crate::site::{Site, W4_PATH};

/// The client side's core and the server side's core.
pub const CLIENT_CORE: usize = 0;
pub const SERVER_CORE: usize = 1;
const CLI_NS: &str = "sq-cli";
const SRV_NS: &str = "sq-srv";
const CLI_IF: &str = "sq-cli0";
const SRV_IF: &str = "sq-srv0";
const SERVER_IP: &str = "198.18.48.1";
/// W1: bytes of the request and of the whole response (headers + body).
pub const W1_REQ_BYTES: usize = 100;
pub const W1_RESP_BYTES: usize = 32_768;
/// W2: bytes of the request and of the response body.
pub const W2_REQ_BYTES: usize = 100;
pub const W2_BODY_BYTES: usize = 80;
/// ab's own W1 request is 81 bytes (`GET /w1 HTTP/1.0`, Host, User-Agent, Accept); this
/// header makes it 100 (checked by capture; the Squall server's `recv 100` checks it on
/// every run).
pub const AB_PAD: &str = "X-Pad: 0123456789";
/// ab's concurrency for W1 and W4.
pub const AB_CONNS: usize = 100;
/// W4: bytes of the request (the W1 request's shape, `/w4`; ab's with [`AB_PAD`]).
pub const W4_REQ_BYTES: usize = 100;

/// The port type of the Squall sides (`--iface KIND:IF`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortKind {
    AfPacket,
    /// AF_PACKET without TCP super-frames (`afpacket:IF,nogso`): every segment a frame of
    /// its own through the port, as before GSO (for before/after comparisons).
    AfPacketNoGso,
    /// AF_PACKET receiving through its TPACKET_V3 block ring (`afpacket:IF,ring`).
    AfPacketRing,
    /// AF_PACKET receiving with `recvmmsg` (`afpacket:IF,recvmmsg`; the default before
    /// the TPACKET_V2 frame ring, for before/after comparisons).
    AfPacketRecvmmsg,
    AfXdp,
}

impl PortKind {
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "afpacket" => Ok(PortKind::AfPacket),
            "afpacket-nogso" => Ok(PortKind::AfPacketNoGso),
            "afpacket-ring" => Ok(PortKind::AfPacketRing),
            "afpacket-recvmmsg" => Ok(PortKind::AfPacketRecvmmsg),
            "afxdp" => Ok(PortKind::AfXdp),
            o => Err(format!(
                "--port {o}: afpacket, afpacket-nogso, afpacket-ring, afpacket-recvmmsg or afxdp"
            )),
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            PortKind::AfPacket => "afpacket",
            PortKind::AfPacketNoGso => "afpacket-nogso",
            PortKind::AfPacketRing => "afpacket-ring",
            PortKind::AfPacketRecvmmsg => "afpacket-recvmmsg",
            PortKind::AfXdp => "afxdp",
        }
    }
    fn iface(self, ifname: &str) -> String {
        match self {
            PortKind::AfPacketNoGso => format!("afpacket:{ifname},nogso"),
            PortKind::AfPacketRing => format!("afpacket:{ifname},ring"),
            PortKind::AfPacketRecvmmsg => format!("afpacket:{ifname},recvmmsg"),
            _ => format!("{}:{ifname}", self.name()),
        }
    }
}

/// Who plays a side: the kernel peer (ab/wrk, nginx) or Squall; `SquallHttp` is Squall's
/// HTTP-aware generator as the client (`http_request` / `http_wait_response`: responses
/// parsed with squall-http and counted by status); `SquallServe` is `squall serve` as
/// the server (the site of `site.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Who {
    Kernel,
    Squall,
    SquallHttp,
    SquallServe,
}

impl Who {
    /// Is this side one of Squall's (a `squall run` process on a Squall port)?
    pub fn is_squall(self) -> bool {
        self != Who::Kernel
    }
}

/// A client/server pair, as `--pairs` names it (`kernel/squall` = ab or wrk against
/// Squall's server).
pub fn parse_pair(s: &str) -> Result<(Who, Who), String> {
    let who = |w: &str| match w {
        "kernel" => Ok(Who::Kernel),
        "squall" => Ok(Who::Squall),
        "squall-http" => Ok(Who::SquallHttp),
        "squall-serve" => Ok(Who::SquallServe),
        o => Err(format!(
            "pair side {o}: kernel, squall, squall-http (client) or squall-serve (server)"
        )),
    };
    let (c, sv) = s
        .split_once('/')
        .ok_or_else(|| format!("pair {s}: CLIENT/SERVER"))?;
    let (c, sv) = (who(c)?, who(sv)?);
    if sv == Who::SquallHttp {
        return Err(format!("pair {s}: squall-http is a client"));
    }
    if c == Who::SquallServe {
        return Err(format!("pair {s}: squall-serve is a server"));
    }
    Ok((c, sv))
}

/// Options of `squall-bench veth`.
#[derive(Clone, Debug)]
pub struct VethOpts {
    /// Seconds per run of a cell (the client's run time).
    pub seconds: f64,
    pub runs: usize,
    pub port: PortKind,
    /// `raw`, `W1`, `W2`, `W4` (W4: a line with one request per connection, then a
    /// keep-alive line).
    pub workloads: Vec<String>,
    /// W2 connection counts.
    pub conns: Vec<usize>,
    pub pairs: Vec<(Who, Who)>,
    /// W1 rate offered by Squall's client (connections/s); 0 = ab's rate against nginx
    /// in the same invocation (10,000 if that cell did not run).
    pub w1_cps: f64,
    /// TCP initial window of both servers (nginx through its routes' `initcwnd`, `squall
    /// serve` through `--initcwnd`); None: their defaults (10 segments both).
    pub initcwnd: Option<u8>,
    /// The server end of the veth keeps its transmit offloads (checksum, TSO/GSO) as a
    /// veth has them by default, for both servers alike: nginx's kernel and `squall
    /// serve`'s AF_PACKET GSO then hand a whole burst of segments to the client's kernel
    /// as one super-packet. Off: every offload off on both ends (MTU-sized frames, as a
    /// real wire carries them). A Squall client then receives with
    /// `afpacket:IF,superframes` (not over AF_XDP or `recvmmsg`).
    pub server_offloads: bool,
    /// Raw frame sizes for the raw-veth lines.
    pub frame_sizes: Vec<usize>,
    /// The project's root (scripts/lab.sh) and the `squall` binary.
    pub root: PathBuf,
    pub squall: PathBuf,
}

impl VethOpts {
    pub fn new(root: PathBuf, squall: PathBuf) -> Self {
        VethOpts {
            seconds: 5.0,
            runs: 3,
            port: PortKind::AfPacket,
            workloads: vec!["RAW".into(), "W1".into(), "W2".into(), "W4".into()],
            conns: vec![100, 1000],
            pairs: vec![
                (Who::Kernel, Who::Kernel),
                (Who::Squall, Who::Kernel),
                (Who::Kernel, Who::Squall),
                (Who::Squall, Who::Squall),
                (Who::SquallHttp, Who::Kernel),
                (Who::Kernel, Who::SquallServe),
                (Who::SquallHttp, Who::SquallServe),
            ],
            w1_cps: 0.0,
            initcwnd: None,
            server_offloads: false,
            frame_sizes: vec![64, 1514],
            root,
            squall,
        }
    }
}

// ---------------------------------------------------------------------------------------
// Output parsers (unit-tested below).

/// What ab printed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AbOut {
    pub complete: u64,
    pub failed: u64,
    pub non2xx: u64,
    pub secs: f64,
    pub doc_len: u64,
    pub p50_us: Option<f64>,
    pub p99_us: Option<f64>,
}

fn after_colon<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines()
        .map(str::trim_start)
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim())
}

fn first_num(s: &str) -> Option<f64> {
    s.split_whitespace().next()?.parse().ok()
}

/// Parses ab's report (`Complete requests`, `Failed requests`, `Non-2xx responses`,
/// `Time taken for tests`, `Document Length`, the 50 % / 99 % lines in ms).
pub fn parse_ab(text: &str) -> Option<AbOut> {
    let pct = |p: &str| -> Option<f64> {
        text.lines()
            .map(str::trim)
            .find(|l| l.starts_with(p))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<f64>().ok())
            .map(|ms| ms * 1000.0)
    };
    Some(AbOut {
        complete: first_num(after_colon(text, "Complete requests")?)? as u64,
        failed: first_num(after_colon(text, "Failed requests")?)? as u64,
        non2xx: after_colon(text, "Non-2xx responses")
            .and_then(first_num)
            .unwrap_or(0.0) as u64,
        secs: first_num(after_colon(text, "Time taken for tests")?)?,
        doc_len: first_num(after_colon(text, "Document Length")?)? as u64,
        p50_us: pct("50%"),
        p99_us: pct("99%"),
    })
}

/// What wrk printed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WrkOut {
    pub requests: u64,
    pub secs: f64,
    pub socket_errors: u64,
    pub non2xx: u64,
    pub p50_us: Option<f64>,
    pub p99_us: Option<f64>,
}

/// A wrk duration (`630.00us`, `1.20ms`, `2.00s`, `1.5m`) in microseconds.
fn wrk_time_us(s: &str) -> Option<f64> {
    let s = s.trim();
    let (v, mul) = if let Some(v) = s.strip_suffix("us") {
        (v, 1.0)
    } else if let Some(v) = s.strip_suffix("ms") {
        (v, 1e3)
    } else if let Some(v) = s.strip_suffix('s') {
        (v, 1e6)
    } else if let Some(v) = s.strip_suffix('m') {
        (v, 60e6)
    } else {
        (s, 1.0)
    };
    v.parse::<f64>().ok().map(|x| x * mul)
}

/// Parses wrk's report (`N requests in Ts`, `Socket errors: ...`, `Non-2xx or 3xx
/// responses`, the `--latency` distribution).
pub fn parse_wrk(text: &str) -> Option<WrkOut> {
    let line = text.lines().find(|l| l.contains(" requests in "))?;
    let mut w = line.split_whitespace();
    let requests = w.next()?.parse().ok()?;
    let secs = wrk_time_us(w.nth(2)?.trim_end_matches(','))? / 1e6;
    let socket_errors = after_colon(text, "Socket errors")
        .map(|v| {
            v.split(',')
                .filter_map(|p| p.split_whitespace().nth(1)?.parse::<u64>().ok())
                .sum()
        })
        .unwrap_or(0);
    let pct = |p: &str| -> Option<f64> {
        text.lines()
            .map(str::trim)
            .find(|l| l.starts_with(p))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(wrk_time_us)
    };
    Some(WrkOut {
        requests,
        secs,
        socket_errors,
        non2xx: after_colon(text, "Non-2xx or 3xx responses")
            .and_then(first_num)
            .unwrap_or(0.0) as u64,
        p50_us: pct("50%"),
        p99_us: pct("99%"),
    })
}

/// One side's figures from `squall run --json`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SquallOut {
    pub errors: u64,
    pub clean: bool,
    pub cpu_sec: f64,
    pub busy_cpu_sec: f64,
    /// Thread CPU of the loop's idle sleeps (`sleep_cpu_sec`; 0 from builds without it).
    pub sleep_cpu_sec: f64,
    pub completed: u64,
    pub accepted: u64,
    /// Client flows opened, and those opened more than 10 ms after their schedule.
    pub started: u64,
    pub started_late: u64,
    /// Median time from a flow's scheduled start to its last byte (µs, every group).
    pub last_byte_p50_us: u64,
    pub l7_rx_bytes: u64,
    pub peer_closed_early: u64,
    pub aborted: u64,
    pub bad_close: u64,
    /// HTTP-aware client: responses received to their end, and those with a 2xx status
    /// (the `http` counters of every template group).
    pub http_responses: u64,
    pub http_2xx: u64,
}

impl SquallOut {
    /// The client fell behind its schedule: more than 1 % of its flows opened over 10 ms
    /// late (a healthy paced run opens them within a few ms; the rule of `squall run`'s
    /// `behind_schedule` warning). The offered rate was not delivered, so the run measures
    /// overload, not that rate.
    pub fn behind_schedule(&self) -> bool {
        self.started_late * 100 > self.started
    }

    /// The pair did not keep up with the offered rate: the client fell behind its schedule,
    /// or half the flows took over 10 ms from their scheduled start to their last byte (a
    /// W1 flow that keeps up takes tens of microseconds; latencies count from the schedule,
    /// so a server that falls behind shows here). Why, in words, or `None`.
    pub fn overloaded(&self) -> Option<String> {
        if self.behind_schedule() {
            Some(format!(
                "client behind its schedule: {} of {} flows opened more than 10 ms late",
                self.started_late, self.started
            ))
        } else if self.last_byte_p50_us > 10_000 {
            Some(format!(
                "overloaded: half the flows took over {} ms from their scheduled start to \
                 their last byte",
                self.last_byte_p50_us / 1000
            ))
        } else {
            None
        }
    }
    /// CPU of the polling loop in iterations that did no work, microseconds: what is
    /// taken out of the core's `/proc/stat` time. The idle sleeps' thread CPU is not
    /// (the kernel's tick-sampled core time need not see it as the thread's clock does;
    /// whatever of it the core time holds stays in the figure).
    pub fn idle_us(&self) -> f64 {
        idle_turns_us(self.cpu_sec, self.busy_cpu_sec, self.sleep_cpu_sec)
    }
}

/// CPU of a Squall loop's idle turns, µs: its CPU less the turns that did work and the
/// sleeps.
pub fn idle_turns_us(cpu_sec: f64, busy_cpu_sec: f64, sleep_cpu_sec: f64) -> f64 {
    ((cpu_sec - busy_cpu_sec - sleep_cpu_sec) * 1e6).max(0.0)
}

/// Parses `squall run --json` for `side` (`client` or `server`).
pub fn parse_squall(text: &str, side: &str) -> Result<SquallOut, String> {
    let v: Value = serde_json::from_str(text).map_err(|e| format!("squall json: {e}"))?;
    let f = |p: &[&str]| -> u64 {
        let mut x = &v;
        for k in p {
            x = &x[*k];
        }
        x.as_u64().unwrap_or(0)
    };
    let num = |k: &str| v[k].as_f64().ok_or_else(|| format!("squall json: no {k}"));
    // HTTP counters, summed over the template groups (present only for HTTP groups).
    let http = |p: &[&str]| -> u64 {
        let groups = v["groups"].as_array().map(Vec::as_slice).unwrap_or(&[]);
        groups
            .iter()
            .map(|g| {
                p.iter()
                    .fold(&g["http"], |x, k| &x[*k])
                    .as_u64()
                    .unwrap_or(0)
            })
            .sum()
    };
    Ok(SquallOut {
        errors: v["errors"].as_u64().ok_or("squall json: no errors")?,
        clean: v["clean"].as_bool().unwrap_or(false),
        cpu_sec: num("cpu_sec")?,
        busy_cpu_sec: num("busy_cpu_sec")?,
        sleep_cpu_sec: v["sleep_cpu_sec"].as_f64().unwrap_or(0.0),
        completed: f(&[side, "flows", "completed"]),
        accepted: f(&[side, "flows", "accepted"]),
        started: f(&[side, "flows", "started"]),
        started_late: f(&[side, "flows", "started_late"]),
        last_byte_p50_us: f(&["latency_us", "last_byte", "p50"]),
        l7_rx_bytes: f(&[side, "flows", "l7_rx_bytes"]),
        peer_closed_early: f(&[side, "flows", "peer_closed_early"]),
        aborted: f(&[side, "flows", "aborted"]),
        bad_close: f(&[side, "flows", "bad_close"]),
        http_responses: http(&["responses"]),
        http_2xx: http(&["status_class", "2xx"]),
    })
}

/// The `SQB-CPU user system` line `/usr/bin/time -f` wrote, as microseconds.
pub fn parse_time_cpu(text: &str) -> Option<f64> {
    let l = text.lines().rev().find(|l| l.starts_with("SQB-CPU "))?;
    let mut w = l.split_whitespace().skip(1);
    let u: f64 = w.next()?.parse().ok()?;
    let s: f64 = w.next()?.parse().ok()?;
    Some((u + s) * 1e6)
}

/// utime + stime of process `pid`, microseconds.
fn proc_cpu_us(pid: u32) -> Option<f64> {
    let t = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command (which may hold spaces) start after the last ')'.
    let rest = &t[t.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    // SAFETY: no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Some(ticks * 1e6 / hz)
}

/// `key=value` pairs of a `blast` line.
pub fn parse_kv(line: &str, key: &str) -> Option<f64> {
    line.split_whitespace()
        .filter_map(|p| p.split_once('='))
        .find(|(k, _)| *k == key)
        .and_then(|(_, v)| v.parse().ok())
}

/// Parses the options of `squall-bench veth` (see `main.rs`'s usage); `root` and
/// `squall` are the defaults of `--root` and `--squall`.
pub fn parse_opts(args: &[String], root: PathBuf, squall: PathBuf) -> Result<VethOpts, String> {
    let mut o = VethOpts::new(root, squall);
    let mut it = args.iter();
    let list = |v: &str| -> Vec<String> {
        v.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect()
    };
    let nums = |v: &str, what: &str, lo: usize, hi: usize| -> Result<Vec<usize>, String> {
        list(v)
            .iter()
            .map(|x| match x.parse::<usize>() {
                Ok(n) if (lo..=hi).contains(&n) => Ok(n),
                _ => Err(format!("bad {what} value {x} ({lo}..={hi})")),
            })
            .collect()
    };
    while let Some(a) = it.next() {
        let v = it.next().ok_or_else(|| format!("{a} needs a value"))?;
        match a.as_str() {
            "--seconds" => {
                o.seconds = v.parse().map_err(|_| "bad --seconds".to_string())?;
                if !(o.seconds >= 0.5 && o.seconds <= 120.0) {
                    return Err("--seconds must be in [0.5, 120]".into());
                }
            }
            "--runs" => {
                o.runs = v.parse().map_err(|_| "bad --runs".to_string())?;
                if o.runs == 0 || o.runs > 20 {
                    return Err("--runs must be in 1..=20".into());
                }
            }
            "--port" => o.port = PortKind::parse(v)?,
            "--workloads" => {
                o.workloads = list(v).iter().map(|w| w.to_uppercase()).collect();
                if let Some(w) = o
                    .workloads
                    .iter()
                    .find(|w| !["RAW", "W1", "W2", "W4"].contains(&w.as_str()))
                {
                    return Err(format!("workload {w}: raw, W1, W2 or W4"));
                }
            }
            "--conns" => o.conns = nums(v, "--conns", 1, 4000)?,
            "--pairs" => {
                o.pairs = list(v)
                    .iter()
                    .map(|p| parse_pair(p))
                    .collect::<Result<_, _>>()?
            }
            "--w1-cps" => {
                o.w1_cps = v.parse().map_err(|_| "bad --w1-cps".to_string())?;
                if !(o.w1_cps >= 0.0 && o.w1_cps <= 1e6) {
                    return Err("--w1-cps must be in [0, 1e6]".into());
                }
            }
            "--frame-sizes" => o.frame_sizes = nums(v, "--frame-sizes", 60, 1514)?,
            "--initcwnd" => {
                let n: u8 = v.parse().map_err(|_| "bad --initcwnd".to_string())?;
                if !(1..=20).contains(&n) {
                    return Err("--initcwnd must be 1 to 20 segments".into());
                }
                o.initcwnd = Some(n);
            }
            "--server-offloads" => {
                o.server_offloads = match v.as_str() {
                    "on" => true,
                    "off" => false,
                    _ => return Err("--server-offloads on|off".into()),
                }
            }
            "--root" => o.root = PathBuf::from(v),
            "--squall" => o.squall = PathBuf::from(v),
            other => return Err(format!("unknown option {other}")),
        }
    }
    if o.server_offloads && matches!(o.port, PortKind::AfXdp | PortKind::AfPacketRecvmmsg) {
        if let Some(&(c, s)) = o.pairs.iter().find(|(c, _)| c.is_squall()) {
            let (cn, sn) = names("W1", c, s);
            return Err(format!(
                "--server-offloads on: pair {cn}/{sn}: the server's super-packets reach the \
                 client whole, which a Squall client takes only through an AF_PACKET ring \
                 (`afpacket:IF,superframes`), not with --port {}",
                o.port.name()
            ));
        }
    }
    Ok(o)
}

/// The per-op figures of one run.
#[derive(Clone, Debug, Default)]
pub struct Measured {
    /// Operations (W1 connections, W2 responses, raw frames).
    pub ops: f64,
    /// Wall seconds of the client's work (for the rates).
    pub secs: f64,
    pub errors: u64,
    /// Busy microseconds of the client and the server core over the window.
    pub busy_us: [f64; 2],
    /// Squall's idle polling CPU per side (None: a kernel side).
    pub idle_us: [Option<f64>; 2],
    /// Frames on the veth, both directions.
    pub frames: f64,
    /// Each side's own process CPU, microseconds (None: not measured).
    pub proc_us: [Option<f64>; 2],
    pub p50_us: Option<f64>,
    pub p99_us: Option<f64>,
}

/// A Squall side's figure is its core's time less its idle turns, which only its own
/// report gives: a run whose Squall side went unread is refused, not printed with the
/// idle polling in it.
pub fn squall_sides_read(client: Who, server: Who, m: &Measured) -> Result<(), String> {
    for (who, i, side) in [(client, 0, "client"), (server, 1, "server")] {
        if who.is_squall() && m.idle_us[i].is_none() {
            return Err(format!(
                "the Squall {side}'s report was not read: its idle turns cannot be taken out"
            ));
        }
    }
    Ok(())
}

/// Fills the figures of `r` from one run.
pub fn fill(r: &mut Record, m: &Measured, l7_bytes_per_op: Option<f64>) {
    r.errors = m.errors;
    if m.ops <= 0.0 {
        return;
    }
    let side = |i: usize| (m.busy_us[i] - m.idle_us[i].unwrap_or(0.0)).max(0.0) / m.ops;
    let (c, s) = (side(0), side(1));
    r.client_us_per_op = Some(c);
    r.server_us_per_op = Some(s);
    r.cpu_us_per_op = Some(c + s);
    r.client_raw_us_per_op = m.idle_us[0].map(|_| m.busy_us[0] / m.ops);
    r.server_raw_us_per_op = m.idle_us[1].map(|_| m.busy_us[1] / m.ops);
    r.frames_per_op = Some(m.frames / m.ops);
    r.client_thread_us_per_op = m.proc_us[0].map(|u| u / m.ops);
    r.server_thread_us_per_op = m.proc_us[1].map(|u| u / m.ops);
    r.thread_us_per_op = match m.proc_us {
        [Some(a), Some(b)] => Some((a + b) / m.ops),
        _ => None,
    };
    if m.secs > 0.0 {
        let rate = m.ops / m.secs;
        if r.workload == "W1" {
            r.cps = Some(rate);
        } else {
            r.rps = Some(rate);
        }
        r.mpps = Some(m.frames / m.secs / 1e6);
        r.gbps = l7_bytes_per_op.map(|b| rate * b * 8.0 / 1e9);
    }
    r.p50_us = m.p50_us;
    r.p99_us = m.p99_us;
    r.errors = m.errors;
}

// ---------------------------------------------------------------------------------------
// Processes, the lab, the congestion control.

/// `taskset -c CORE ip netns exec NS timeout LIMIT ARGS...`.
fn pinned(ns: &str, core: usize, limit_s: f64, args: &[&str]) -> Command {
    let mut c = Command::new("taskset");
    c.args(["-c", &core.to_string(), "ip", "netns", "exec", ns])
        .args(["timeout", "-k", "2", &format!("{:.0}", limit_s.ceil())])
        .args(args);
    c
}

/// Children alive now (pids of their `timeout` wrappers, each its own process group),
/// for the signal guard.
static CHILDREN: std::sync::Mutex<Vec<u32>> = std::sync::Mutex::new(Vec::new());
/// The host's allowed congestion controls to restore, for the signal guard.
static CC_ORIG: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

fn registry(add: Option<u32>, remove: Option<u32>) {
    let mut v = CHILDREN.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(p) = add {
        v.push(p);
    }
    if let Some(p) = remove {
        v.retain(|&x| x != p);
    }
}

/// Spawns `c` with every signal unblocked (the harness blocks the stop signals for its
/// guard thread) and registers it.
fn spawn(c: &mut Command) -> Result<Child, String> {
    use std::os::unix::process::CommandExt;
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        c.pre_exec(|| {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::pthread_sigmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
            Ok(())
        });
    }
    let ch = c.spawn().map_err(|e| format!("{c:?}: {e}"))?;
    registry(Some(ch.id()), None);
    Ok(ch)
}

pub(crate) fn output(mut c: Command) -> Result<Output, String> {
    c.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let ch = spawn(&mut c)?;
    let id = ch.id();
    let o = ch.wait_with_output().map_err(|e| format!("{c:?}: {e}"));
    registry(None, Some(id));
    o
}

/// SIGINT, SIGTERM or SIGHUP during a run: a thread (the only one that takes them; they
/// are blocked elsewhere) stops every child, tears the lab down, restores the host's
/// congestion-control list and exits 130. Call once, before anything is spawned.
pub fn guard_signals(root: PathBuf) {
    // SAFETY: plain sigset manipulation and a mask change of this thread (inherited by
    // the threads spawned after it).
    let set = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            libc::sigaddset(&mut set, sig);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    };
    std::thread::spawn(move || {
        let mut sig = 0;
        // SAFETY: valid set and out-pointer.
        unsafe { libc::sigwait(&set, &mut sig) };
        eprintln!("veth: signal {sig}: stopping, tearing the lab down");
        let pids = CHILDREN.lock().map(|v| v.clone()).unwrap_or_default();
        for p in &pids {
            // SAFETY: signalling our own children (and their process groups) by pid.
            unsafe {
                libc::kill(-(*p as i32), libc::SIGTERM);
                libc::kill(*p as i32, libc::SIGTERM);
            }
        }
        std::thread::sleep(Duration::from_secs(1));
        let _ = Command::new(root.join("scripts/lab.sh"))
            .arg("down")
            .stdout(Stdio::null())
            .status();
        if let Some(o) = CC_ORIG.lock().ok().and_then(|g| g.clone()) {
            let _ = std::fs::write(ALLOWED_CC, o);
        }
        std::process::exit(130);
    });
}

pub(crate) fn text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr)
}

/// A background process, stopped (SIGTERM to `timeout`, which passes it on; SIGKILL
/// after 3 s) and reaped on drop.
pub(crate) struct Bg(Child);

impl Bg {
    pub(crate) fn spawn(mut c: Command, log: &Path) -> Result<Bg, String> {
        let f = std::fs::File::create(log).map_err(|e| e.to_string())?;
        let f2 = f.try_clone().map_err(|e| e.to_string())?;
        c.stdin(Stdio::null()).stdout(f).stderr(f2);
        spawn(&mut c).map(Bg)
    }
    /// Waits for the exit (bounded by the `timeout` wrapper); true if it exited 0.
    pub(crate) fn wait(&mut self) -> bool {
        self.0.wait().map(|s| s.success()).unwrap_or(false)
    }
}

impl Drop for Bg {
    fn drop(&mut self) {
        registry(None, Some(self.0.id()));
        if let Ok(None) = self.0.try_wait() {
            // SAFETY: signalling our own child by pid.
            unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
            let t = Instant::now();
            while t.elapsed() < Duration::from_secs(3) {
                if let Ok(Some(_)) = self.0.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}

/// The lab in one mode; torn down on drop.
struct Lab<'a> {
    root: &'a Path,
}

impl<'a> Lab<'a> {
    fn up(
        root: &'a Path,
        mode: &str,
        initcwnd: Option<u8>,
        server_offloads: bool,
    ) -> Result<Lab<'a>, String> {
        let o = output({
            let mut c = Command::new(root.join("scripts/lab.sh"));
            c.args(["up", "--squall", mode]);
            if let Some(n) = initcwnd {
                c.env("SQUALL_LAB_INITCWND", n.to_string());
            }
            if server_offloads {
                c.env("SQUALL_LAB_SERVER_OFFLOADS", "1");
            }
            c
        })?;
        let lab = Lab { root };
        if !o.status.success() {
            return Err(format!("lab.sh up --squall {mode}: {}", text(&o)));
        }
        // The kernel peers' best configuration: cubic (BENCHMARKS.md), room to accept.
        for ns in [CLI_NS, SRV_NS] {
            for kv in [
                "net.ipv4.tcp_congestion_control=cubic",
                "net.core.somaxconn=4096",
                "net.ipv4.tcp_max_syn_backlog=4096",
                "net.ipv4.ip_local_port_range=1024 65535",
            ] {
                let o = output({
                    let mut c = Command::new("ip");
                    c.args(["netns", "exec", ns, "sysctl", "-qw", kv]);
                    c
                })?;
                if !o.status.success() {
                    return Err(format!("{ns}: sysctl {kv}: {}", text(&o)));
                }
            }
        }
        Ok(lab)
    }
}

impl Drop for Lab<'_> {
    fn drop(&mut self) {
        let _ = Command::new(self.root.join("scripts/lab.sh"))
            .arg("down")
            .stdout(Stdio::null())
            .status();
    }
}

const ALLOWED_CC: &str = "/proc/sys/net/ipv4/tcp_allowed_congestion_control";

/// Adds cubic to the host's allowed congestion controls (a namespace may select only
/// those); the original list is written back on drop.
pub struct CcGuard {
    orig: Option<String>,
}

impl CcGuard {
    pub fn allow_cubic() -> Result<CcGuard, String> {
        let cur = std::fs::read_to_string(ALLOWED_CC)
            .map_err(|e| format!("{ALLOWED_CC}: {e}"))?
            .trim()
            .to_string();
        if cur.split_whitespace().any(|c| c == "cubic") {
            return Ok(CcGuard { orig: None });
        }
        *CC_ORIG.lock().unwrap_or_else(|e| e.into_inner()) = Some(cur.clone());
        std::fs::write(ALLOWED_CC, format!("{cur} cubic"))
            .map_err(|e| format!("{ALLOWED_CC}: {e}"))?;
        eprintln!("veth: host tcp_allowed_congestion_control \"{cur}\" + cubic for the run");
        Ok(CcGuard { orig: Some(cur) })
    }
}

impl Drop for CcGuard {
    fn drop(&mut self) {
        if let Some(o) = &self.orig {
            let _ = std::fs::write(ALLOWED_CC, o);
            eprintln!("veth: host tcp_allowed_congestion_control restored to \"{o}\"");
        }
    }
}

/// MAC address and packets (rx + tx) of `ifname` in `ns`.
fn link(ns: &str, ifname: &str) -> Result<(String, u64), String> {
    let o = output({
        let mut c = Command::new("ip");
        c.args(["-n", ns, "-j", "-s", "link", "show", "dev", ifname]);
        c
    })?;
    let v: Value = serde_json::from_slice(&o.stdout)
        .map_err(|e| format!("ip -j link {ns}/{ifname}: {e}: {}", text(&o)))?;
    let l = &v[0];
    let st = &l["stats64"];
    let p = |d: &str| st[d]["packets"].as_u64().unwrap_or(0);
    Ok((
        l["address"].as_str().unwrap_or("").to_string(),
        p("rx") + p("tx"),
    ))
}

/// Busy time of the two cores and the veth's frames at one instant.
struct Snap {
    busy: Vec<u64>,
    frames: u64,
}

fn snap() -> Result<Snap, String> {
    let busy = core_busy_us();
    if busy.len() <= SERVER_CORE {
        return Err("/proc/stat: fewer than two cores".into());
    }
    Ok(Snap {
        busy,
        frames: link(CLI_NS, CLI_IF)?.1,
    })
}

fn delta(a: &Snap, b: &Snap) -> ([f64; 2], f64) {
    let d = |i: usize| b.busy[i].saturating_sub(a.busy[i]) as f64;
    (
        [d(CLIENT_CORE), d(SERVER_CORE)],
        b.frames.saturating_sub(a.frames) as f64,
    )
}

// ---------------------------------------------------------------------------------------
// Requests, responses, profiles.

/// `base` (request line and headers, each ending in CRLF) plus an `X-Pad` header that
/// makes the whole request `total` bytes; also returns the pad header alone (for
/// `wrk -H` / `ab -H`).
pub fn padded_request(base: &str, total: usize) -> (String, String) {
    let fixed = base.len() + "X-Pad: ".len() + 4;
    let n = total.saturating_sub(fixed).max(1);
    let pad = format!("X-Pad: {}", "x".repeat(n));
    (format!("{base}{pad}\r\n\r\n"), pad)
}

/// Squall's W1 request (HTTP/1.1, no `Connection: close`: the client closes after the
/// last byte, nginx on the client's FIN, as W1 says).
pub fn w1_request() -> String {
    padded_request(
        "GET /w1 HTTP/1.1\r\nHost: 198.18.48.1\r\nUser-Agent: squall\r\nAccept: */*\r\n",
        W1_REQ_BYTES,
    )
    .0
}

/// W4's request from Squall's HTTP-aware client: W1's shape for `/w4` (100 bytes, as
/// ab's with [`AB_PAD`]).
pub fn w4_request() -> String {
    padded_request(
        &format!(
            "GET {W4_PATH} HTTP/1.1\r\nHost: 198.18.48.1\r\nUser-Agent: squall\r\nAccept: */*\r\n"
        ),
        W4_REQ_BYTES,
    )
    .0
}

/// W2's request: the same bytes from wrk (`-H Host -H X-Pad`) and Squall.
pub fn w2_request() -> (String, String) {
    padded_request("GET /testu HTTP/1.1\r\nHost: 198.18.48.1\r\n", W2_REQ_BYTES)
}

/// The fixed W2 body (nginx `return 200`, Squall's server).
pub fn w2_body() -> String {
    "0123456789abcdef".repeat(W2_BODY_BYTES / 16)
}

/// Squall server's W1 response: 32,768 bytes, `Connection: close` (ab reads to the close).
pub fn squall_w1_response() -> String {
    let head = |n: usize| {
        format!(
            "HTTP/1.1 200 OK\r\nServer: squall\r\nContent-Type: application/octet-stream\r\n\
             Content-Length: {n}\r\nConnection: close\r\n\r\n"
        )
    };
    let body = W1_RESP_BYTES - head(30_000).len();
    let mut r = head(body);
    r.push_str(&"y".repeat(body));
    r
}

/// Squall server's W2 response.
pub fn squall_w2_response() -> String {
    format!(
        "HTTP/1.1 200 OK\r\nServer: squall\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\
         Connection: keep-alive\r\n\r\n{}",
        W2_BODY_BYTES,
        w2_body()
    )
}

/// The `http_request` command that sends `req` (a request line and header lines ending
/// in an empty line, as [`padded_request`] builds them) through the HTTP-aware client.
pub fn http_request_cmd(req: &str) -> Value {
    let mut lines = req.split("\r\n").filter(|l| !l.is_empty());
    let line: Vec<&str> = lines.next().unwrap_or("").split(' ').collect();
    let headers: Vec<Value> = lines
        .filter_map(|l| l.split_once(": "))
        .map(|(n, v)| serde_json::json!({"name": n, "value": v}))
        .collect();
    cmd(
        "http_request",
        serde_json::json!({"method": line[0], "url": line.get(1).copied().unwrap_or("/"),
                           "headers": headers}),
    )
}

/// One request per connection with the HTTP-aware client (W1, W4): `req`, wait for the
/// end of the response as HTTP frames it, then close.
pub fn w1_http_profile(req: &str, clients: (&str, &str)) -> Value {
    profile(
        "w1",
        &[],
        vec![
            http_request_cmd(req),
            cmd("http_wait_response", serde_json::json!({})),
        ],
        vec![cmd("accept", serde_json::json!({}))],
        clients,
        1,
        None,
    )
}

/// Keep-alive with the HTTP-aware client (W2, W4's keep-alive variant): `conns`
/// connections, each looping `req` and the end of its response for `secs`.
pub fn w2_http_profile(req: &str, conns: usize, secs: f64, clients: (&str, &str)) -> Value {
    let us = (secs * 1e6) as u64;
    profile(
        "w2",
        &[],
        vec![
            cmd("set_tick_var", serde_json::json!({"id": 0})),
            cmd("set_label", serde_json::json!({"label": "a"})),
            http_request_cmd(req),
            cmd("http_wait_response", serde_json::json!({})),
            cmd(
                "jmp_dp",
                serde_json::json!({"id": 0, "label": "a", "duration_usec": us}),
            ),
        ],
        vec![cmd("accept", serde_json::json!({}))],
        clients,
        (conns as u64 * 20).max(100),
        Some(conns as u64),
    )
}

fn cmd(op: &str, extra: Value) -> Value {
    let mut m = serde_json::json!({ "op": op });
    if let (Some(o), Value::Object(e)) = (m.as_object_mut(), extra) {
        o.extend(e);
    }
    m
}

/// A profile IR: one template, client `cprog` and server `sprog`, clients `clients`
/// (first..last) -> 198.18.48.1:80. W1's TCP settings (MSS 1460, delayed ACK 100 ms),
/// initial window 10 (the kernel peers' default).
pub fn profile(
    name: &str,
    bufs: &[(&str, &str)],
    cprog: Vec<Value>,
    sprog: Vec<Value>,
    clients: (&str, &str),
    cps: u64,
    limit: Option<u64>,
) -> Value {
    let mut t = serde_json::json!({
        "tg_name": name, "transport": "tcp", "client_program": "c", "server_program": "s",
        "ip_gen": "g", "port": 80, "cps": cps
    });
    if let Some(l) = limit {
        t["limit"] = l.into();
    }
    serde_json::json!({
        "version": 1,
        "meta": { "name": name, "description": "squall-bench veth (generated)" },
        "buffers": bufs.iter().map(|(n, t)| serde_json::json!({"name": n, "text": t})).collect::<Vec<_>>(),
        "ip_gens": [{ "name": "g",
            "clients": { "range": [clients.0, clients.1], "distribution": "seq" },
            "servers": { "range": [SERVER_IP, SERVER_IP], "distribution": "seq" } }],
        "programs": [ { "name": "c", "commands": cprog }, { "name": "s", "commands": sprog } ],
        "templates": [t],
        "global": { "tcp": { "mss": 1460, "initwnd": 10, "delay_ack_msec": 100 },
                    "scheduler": { "rampup_sec": 0, "spacing": "even" } }
    })
}

/// W1: the client sends the request and reads `resp` bytes, then closes; the server
/// reads the 100-byte request, answers and closes.
pub fn w1_profile(resp_total: usize, clients: (&str, &str)) -> Value {
    let (req, resp) = (w1_request(), squall_w1_response());
    profile(
        "w1",
        &[("req", &req), ("resp", &resp)],
        vec![
            cmd("send", serde_json::json!({"buf": "req"})),
            cmd("recv", serde_json::json!({"bytes": resp_total})),
        ],
        vec![
            cmd("recv", serde_json::json!({"bytes": W1_REQ_BYTES})),
            // Without waiting for the answer's ACKs, as the W2 server: the program ends
            // and its FIN leaves with the last segment (as nginx's and `squall serve`'s),
            // not a round trip later.
            cmd(
                "send",
                serde_json::json!({"buf": "resp", "blocking": false}),
            ),
        ],
        clients,
        1,
        None,
    )
}

/// W2: `conns` connections (limit), each looping request -> `resp_total`-byte response
/// for `secs`, then the client closes; the server loops recv request / send response
/// until the client closes.
pub fn w2_profile(resp_total: usize, conns: usize, secs: f64, clients: (&str, &str)) -> Value {
    let (req, _) = w2_request();
    let resp = squall_w2_response();
    let us = (secs * 1e6) as u64;
    profile(
        "w2",
        &[("req", &req), ("resp", &resp)],
        vec![
            cmd("set_tick_var", serde_json::json!({"id": 0})),
            cmd("set_label", serde_json::json!({"label": "a"})),
            cmd("send", serde_json::json!({"buf": "req", "blocking": false})),
            cmd(
                "recv",
                serde_json::json!({"bytes": resp_total, "clear": true}),
            ),
            cmd(
                "jmp_dp",
                serde_json::json!({"id": 0, "label": "a", "duration_usec": us}),
            ),
        ],
        vec![
            cmd(
                "set_var",
                serde_json::json!({"id": 0, "val": 4_000_000_000u64}),
            ),
            cmd("set_label", serde_json::json!({"label": "a"})),
            cmd(
                "recv",
                serde_json::json!({"bytes": W2_REQ_BYTES, "clear": true}),
            ),
            cmd(
                "send",
                serde_json::json!({"buf": "resp", "blocking": false}),
            ),
            cmd("jmp_nz", serde_json::json!({"id": 0, "label": "a"})),
        ],
        clients,
        (conns as u64 * 20).max(100),
        Some(conns as u64),
    )
}

// ---------------------------------------------------------------------------------------
// nginx.

/// nginx in sq-srv on core 1, its best honest configuration for W1 and W2: one worker,
/// access log off, sendfile + tcp_nopush for the 32 KiB file, keep-alive without limit
/// for W2 (`return 200` with the fixed body), open file cache.
struct Nginx {
    _proc: Bg,
    /// Whole W1 response to an HTTP/1.1 keep-alive request (Squall's), and the body.
    w1_total: usize,
    w1_body: usize,
    /// Whole W2 response.
    w2_total: usize,
    /// Whole W4 response (the 2,649-byte file) to an HTTP/1.1 request.
    w4_total: usize,
    pid_file: PathBuf,
}

fn curl_size(url: &str) -> Result<(usize, usize), String> {
    let o = output(pinned(
        SRV_NS,
        SERVER_CORE,
        5.0,
        &[
            "curl",
            "-s",
            "-m",
            "2",
            "-o",
            "/dev/null",
            "-w",
            "%{size_header} %{size_download} %{http_code}",
            url,
        ],
    ))?;
    let s = String::from_utf8_lossy(&o.stdout).to_string();
    let v: Vec<usize> = s.split(' ').filter_map(|x| x.parse().ok()).collect();
    match v.as_slice() {
        [h, b, 200] => Ok((*h, *b)),
        _ => Err(format!("curl {url}: {s:?}")),
    }
}

impl Nginx {
    /// The nginx process's CPU so far, microseconds.
    fn cpu_us(&self) -> Option<f64> {
        let pid = std::fs::read_to_string(&self.pid_file).ok()?;
        proc_cpu_us(pid.trim().parse().ok()?)
    }

    fn start(dir: &Path) -> Result<Nginx, String> {
        let www = dir.join("www");
        std::fs::create_dir_all(&www).map_err(|e| e.to_string())?;
        let write_body = |n: usize| {
            let b: Vec<u8> = (0..n).map(|i| b'a' + (i % 26) as u8).collect();
            std::fs::write(www.join("w1"), b).map_err(|e| e.to_string())
        };
        write_body(W1_RESP_BYTES - 256)?;
        std::fs::write(
            www.join(W4_PATH.trim_start_matches('/')),
            crate::http::w4_body(),
        )
        .map_err(|e| e.to_string())?;
        let d = dir.display();
        let conf = format!(
            "daemon off;\nmaster_process off;\nworker_processes 1;\nworker_rlimit_nofile 16384;\n\
             pid {d}/nginx.pid;\nerror_log {d}/error.log warn;\n\
             events {{ worker_connections 8192; }}\n\
             http {{\n access_log off;\n server_tokens off;\n sendfile on;\n tcp_nopush on;\n\
             tcp_nodelay on;\n keepalive_timeout 300s;\n keepalive_requests 1000000000;\n\
             open_file_cache max=64 inactive=300s;\n open_file_cache_valid 1s;\n client_body_temp_path {d};\n\
             proxy_temp_path {d};\n fastcgi_temp_path {d};\n uwsgi_temp_path {d};\n\
             scgi_temp_path {d};\n server {{\n  listen {SERVER_IP}:80 backlog=4096;\n\
             root {d}/www;\n  default_type application/octet-stream;\n\
             location = /testu {{ default_type text/plain; return 200 \"{}\"; }}\n }}\n}}\n",
            w2_body()
        );
        let conf_path = dir.join("nginx.conf");
        std::fs::write(&conf_path, conf).map_err(|e| e.to_string())?;
        let cp = conf_path.display().to_string();
        let prefix = d.to_string();
        let proc = Bg::spawn(
            pinned(
                SRV_NS,
                SERVER_CORE,
                3600.0,
                &["nginx", "-c", &cp, "-p", &prefix],
            ),
            &dir.join("nginx.out"),
        )?;
        let url1 = format!("http://{SERVER_IP}/w1");
        let t0 = Instant::now();
        let (h, _) = loop {
            match curl_size(&url1) {
                Ok(v) => break v,
                Err(e) if t0.elapsed() > Duration::from_secs(10) => {
                    return Err(format!("nginx did not come up: {e}"))
                }
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        };
        // Size the file so that headers + body are exactly 32,768 bytes (the headers'
        // length moves with the file's size and time: repeat until it holds).
        let (mut h, mut b) = (h, 0);
        for _ in 0..5 {
            write_body(W1_RESP_BYTES - h)?;
            // The open file cache revalidates once a second.
            std::thread::sleep(Duration::from_millis(1100));
            (h, b) = curl_size(&url1)?;
            if h + b == W1_RESP_BYTES {
                break;
            }
        }
        if h + b != W1_RESP_BYTES {
            return Err(format!("nginx W1 response is {h} + {b} bytes, not 32,768"));
        }
        let (h2, b2) = curl_size(&format!("http://{SERVER_IP}/testu"))?;
        if b2 != W2_BODY_BYTES {
            return Err(format!("nginx /testu body is {b2} bytes"));
        }
        let (h4, b4) = curl_size(&format!("http://{SERVER_IP}{W4_PATH}"))?;
        if b4 != crate::http::W4_FILE_LEN {
            return Err(format!("nginx {W4_PATH} body is {b4} bytes"));
        }
        Ok(Nginx {
            _proc: proc,
            w1_total: h + b,
            w1_body: b,
            w2_total: h2 + b2,
            w4_total: h4 + b4,
            pid_file: dir.join("nginx.pid"),
        })
    }
}

// ---------------------------------------------------------------------------------------
// Cells.

/// The names of a pair's sides in the lines.
fn names(w: &str, c: Who, s: Who) -> (&'static str, &'static str) {
    let client = match (c, w) {
        (Who::Squall, _) => "squall",
        (Who::SquallHttp, _) => "squall-http",
        (Who::Kernel, "W1" | "W4") => "ab",
        (Who::Kernel, _) => "wrk",
        (Who::SquallServe, _) => "squall-serve", // refused by parse_pair
    };
    let server = match s {
        Who::Kernel => "nginx",
        Who::SquallServe => "squall-serve",
        _ => "squall",
    };
    (client, server)
}

fn lab_mode(c: Who, s: Who) -> &'static str {
    match (c.is_squall(), s.is_squall()) {
        (false, false) => "none",
        (true, false) => "client",
        (false, true) => "server",
        (true, true) => "both",
    }
}

/// Everything a run of one cell needs.
struct Cell<'a> {
    o: &'a VethOpts,
    w: &'a str,
    c: Who,
    s: Who,
    conns: usize,
    dir: PathBuf,
    nginx: Option<&'a Nginx>,
    /// `squall serve`'s site and the sizes of its answers (server `squall-serve`).
    serve: Option<&'a (Site, AnswerSizes)>,
    /// W4: the keep-alive variant (else one request per connection).
    keepalive: bool,
    /// Rate of Squall's client in the one-request-per-connection cells (W1, W4).
    w1_cps: f64,
    cli_mac: String,
    srv_mac: String,
}

impl Cell<'_> {
    /// The `--iface` of a Squall side: with the server end's offloads on, a client takes
    /// the server's super-packets whole.
    fn squall_iface(&self, mode: &str, ifname: &str) -> String {
        let i = self.o.port.iface(ifname);
        if mode == "client" && self.o.server_offloads {
            format!("{i},superframes")
        } else {
            i
        }
    }

    fn squall_args(&self, mode: &str, prof: &Path, json: &Path, secs: f64) -> Vec<String> {
        let (ifname, peer) = if mode == "client" {
            (CLI_IF, &self.srv_mac)
        } else {
            (SRV_IF, &self.cli_mac)
        };
        let mut a: Vec<String> = vec![
            self.o.squall.display().to_string(),
            "run".into(),
            prof.display().to_string(),
            "--iface".into(),
            self.squall_iface(mode, ifname),
            "--mode".into(),
            mode.into(),
            "--duration".into(),
            format!("{secs}"),
            "-q".into(),
            "--json".into(),
            json.display().to_string(),
            "--peer-mac".into(),
            peer.clone(),
        ];
        if mode == "server" {
            a.extend(["--drain-sec".into(), "1".into()]);
        } else {
            // W2's connections loop for the cell's seconds after their 1 s of opening:
            // the drain must outlast them (the client exits as soon as all are done).
            a.extend(["--drain-sec".into(), format!("{}", self.o.seconds + 5.0)]);
        }
        a
    }

    /// The expected response size at the client.
    fn resp_total(&self) -> usize {
        match (self.w, self.nginx, self.serve) {
            ("W1", Some(n), _) => n.w1_total,
            ("W4", Some(n), _) => n.w4_total,
            (_, Some(n), _) => n.w2_total,
            ("W1", None, Some((_, z))) => z.w1,
            ("W4", None, Some((_, z))) => z.w4,
            (_, None, Some((_, z))) => z.w2,
            ("W1", None, None) => W1_RESP_BYTES,
            (_, None, None) => squall_w2_response().len(),
        }
    }

    /// One request per connection (W1, W4 without keep-alive): the client closes after
    /// the answer; an operation is a connection.
    fn one_shot(&self) -> bool {
        self.w == "W1" || (self.w == "W4" && !self.keepalive)
    }

    fn write_profile(&self, name: &str, v: &Value) -> Result<PathBuf, String> {
        let p = self.dir.join(name);
        std::fs::write(&p, v.to_string()).map_err(|e| e.to_string())?;
        Ok(p)
    }

    /// One run; returns its record.
    fn run(&self, i: usize) -> Result<Record, String> {
        let o = self.o;
        let secs = o.seconds;
        let mut notes: Vec<String> = Vec::new();
        let mut m = Measured::default();
        let s0 = snap()?;
        let nginx_cpu0 = self.nginx.and_then(Nginx::cpu_us);
        // The server, if it is Squall's: started first, for longer than the client runs.
        let mut srv = None;
        let srv_json = self.dir.join(format!("server-{i}.json"));
        let srv_log = self.dir.join(format!("server-{i}.out"));
        if let (Who::SquallServe, Some((site, _))) = (self.s, self.serve) {
            let mut args = vec![self.o.squall.display().to_string()];
            args.extend(serve_cmd::args(
                site,
                &format!("{SERVER_IP}:80"),
                &self.o.port.iface(SRV_IF),
                &self.cli_mac,
                &w2_body(),
                secs + 4.0,
            ));
            if let Some(n) = self.o.initcwnd {
                args.extend(["--initcwnd".to_string(), n.to_string()]);
            }
            let a: Vec<&str> = args.iter().map(String::as_str).collect();
            srv = Some(Bg::spawn(
                pinned(SRV_NS, SERVER_CORE, secs + 60.0, &a),
                &srv_log,
            )?);
            self.wait_server_ready()?;
        } else if self.s.is_squall() {
            let _ = std::fs::remove_file(&srv_json);
            let clients = if self.c == Who::Kernel {
                ("198.18.0.2", "198.18.0.2")
            } else {
                ("198.18.16.1", "198.18.16.200")
            };
            let prof = if self.w == "W1" {
                w1_profile(W1_RESP_BYTES, clients)
            } else {
                w2_profile(squall_w2_response().len(), self.conns, secs, clients)
            };
            let p = self.write_profile("server.json", &prof)?;
            let args = self.squall_args("server", &p, &srv_json, secs + 4.0);
            let a: Vec<&str> = args.iter().map(String::as_str).collect();
            srv = Some(Bg::spawn(
                pinned(SRV_NS, SERVER_CORE, secs + 60.0, &a),
                &srv_log,
            )?);
            self.wait_server_ready()?;
        }
        // The client, in the foreground.
        match (self.c, self.w) {
            (Who::Kernel, "W1" | "W4") => {
                let path = if self.w == "W1" { "/w1" } else { W4_PATH };
                let url = format!("http://{SERVER_IP}{path}");
                let t = format!("{secs}");
                let conc = AB_CONNS.to_string();
                let mut args = vec![
                    "/usr/bin/time",
                    "-f",
                    "SQB-CPU %U %S",
                    "ab",
                    "-q",
                    "-r",
                    "-s",
                    "10",
                    "-c",
                    &conc,
                    "-t",
                    &t,
                    "-n",
                    "100000000",
                    "-H",
                    AB_PAD,
                ];
                if self.keepalive {
                    args.push("-k");
                }
                args.push(&url);
                let out = output(pinned(CLI_NS, CLIENT_CORE, secs + 40.0, &args))?;
                let txt = text(&out);
                let ab = parse_ab(&txt).ok_or_else(|| format!("ab said: {txt}"))?;
                m.proc_us[0] = parse_time_cpu(&txt);
                let want = match (self.w, self.nginx, self.serve) {
                    ("W1", Some(n), _) => n.w1_body,
                    ("W4", _, _) => crate::http::W4_FILE_LEN,
                    (_, None, Some((_, z))) => z.w1_body,
                    _ => W1_RESP_BYTES - (squall_w1_response().find("\r\n\r\n").unwrap() + 4),
                };
                m.ops = ab.complete as f64;
                m.secs = ab.secs;
                m.errors = ab.failed + ab.non2xx + u64::from(!out.status.success());
                if ab.doc_len as usize != want {
                    notes.push(format!("ab document length {} != {want}", ab.doc_len));
                    m.errors += ab.complete;
                }
                m.p50_us = ab.p50_us;
                m.p99_us = ab.p99_us;
            }
            (Who::Kernel, _) => {
                let url = format!("http://{SERVER_IP}/testu");
                let (_, pad) = w2_request();
                let d = format!("{secs}s");
                let c = self.conns.to_string();
                let host = format!("Host: {SERVER_IP}");
                let out = output(pinned(
                    CLI_NS,
                    CLIENT_CORE,
                    secs + 40.0,
                    &[
                        "/usr/bin/time",
                        "-f",
                        "SQB-CPU %U %S",
                        "wrk",
                        "-t1",
                        "-c",
                        &c,
                        "-d",
                        &d,
                        "--latency",
                        "-H",
                        &host,
                        "-H",
                        &pad,
                        &url,
                    ],
                ))?;
                let txt = text(&out);
                let w = parse_wrk(&txt).ok_or_else(|| format!("wrk said: {txt}"))?;
                m.proc_us[0] = parse_time_cpu(&txt);
                m.ops = w.requests as f64;
                m.secs = w.secs;
                m.errors = w.socket_errors + w.non2xx + u64::from(!out.status.success());
                m.p50_us = w.p50_us;
                m.p99_us = w.p99_us;
            }
            (c, w) => {
                let total = self.resp_total();
                let clients = ("198.18.16.1", "198.18.16.200");
                let http = c == Who::SquallHttp;
                let one_shot = self.one_shot();
                let req = match w {
                    "W1" => w1_request(),
                    "W4" => w4_request(),
                    _ => w2_request().0,
                };
                let (prof, dur, mult) = match (one_shot, http) {
                    (true, false) => (w1_profile(total, clients), secs, self.w1_cps),
                    (true, true) => (w1_http_profile(&req, clients), secs, self.w1_cps),
                    (false, false) => (w2_profile(total, self.conns, secs, clients), 1.0, 1.0),
                    (false, true) => (w2_http_profile(&req, self.conns, secs, clients), 1.0, 1.0),
                };
                let p = self.write_profile("client.json", &prof)?;
                let json = self.dir.join(format!("client-{i}.json"));
                let _ = std::fs::remove_file(&json);
                let mut args = self.squall_args("client", &p, &json, dur);
                args.extend([
                    "--mult".into(),
                    format!("{mult}"),
                    "--seed".into(),
                    format!("{}", 1 + i),
                ]);
                let a: Vec<&str> = args.iter().map(String::as_str).collect();
                let out = output(pinned(CLI_NS, CLIENT_CORE, secs + 60.0, &a))?;
                let js = std::fs::read_to_string(&json)
                    .map_err(|e| format!("squall client wrote no json ({e}): {}", text(&out)))?;
                let sq = parse_squall(&js, "client")?;
                m.errors = sq.errors;
                if let Some(why) = sq.overloaded().filter(|_| one_shot) {
                    // The rate was not delivered on time: the run measures overload.
                    notes.push(why);
                    m.errors += 1;
                }
                if http {
                    // Operations are the responses the client saw end, every one a 2xx;
                    // their bytes must be whole responses of the measured size.
                    m.ops = sq.http_responses as f64;
                    m.secs = secs;
                    let want = if one_shot {
                        sq.completed
                    } else {
                        sq.http_responses
                    };
                    if sq.http_2xx != sq.http_responses
                        || sq.http_responses != want
                        || sq.l7_rx_bytes != sq.http_responses * total as u64
                    {
                        notes.push(format!(
                            "{} responses ({} 2xx, {} flows completed), {} bytes, {} x {total} expected",
                            sq.http_responses, sq.http_2xx, sq.completed, sq.l7_rx_bytes, sq.http_responses
                        ));
                        m.errors += 1;
                    }
                } else if one_shot {
                    m.ops = sq.completed as f64;
                    m.secs = secs;
                    if sq.l7_rx_bytes != sq.completed * total as u64 {
                        notes.push(format!(
                            "client received {} bytes, {} x {total} expected",
                            sq.l7_rx_bytes, sq.completed
                        ));
                        m.errors += 1;
                    }
                } else {
                    m.ops = (sq.l7_rx_bytes / total as u64) as f64;
                    m.secs = secs;
                    if sq.l7_rx_bytes % total as u64 != 0 {
                        notes.push("client bytes not a whole number of responses".into());
                        m.errors += 1;
                    }
                }
                if !out.status.success() && m.errors == 0 {
                    notes.push(format!("squall client exit {:?}", out.status.code()));
                    m.errors += 1;
                }
                m.idle_us[0] = Some(sq.idle_us());
                m.proc_us[0] = Some(sq.busy_cpu_sec * 1e6);
            }
        }
        // Only `squall serve` here: the generator's server (`squall run --mode server`) is
        // read below from its JSON. (Matching on `(srv.take(), self.s)` took the
        // generator's server out before the pattern failed, so its JSON was never read:
        // its idle turns stayed in its core's figure and its errors went uncounted.)
        if self.s == Who::SquallServe {
            let Some(mut s) = srv.take() else {
                return Err("squall serve was not started".into());
            };
            let ok = s.wait();
            let sv: ServeOut =
                serve_cmd::parse_serve(&std::fs::read_to_string(&srv_log).unwrap_or_default())?;
            m.errors += sv.errors;
            if !ok {
                notes.push("squall serve exit status not 0".into());
                m.errors += 1;
            }
            m.idle_us[1] = Some(sv.idle_us());
            m.proc_us[1] = Some(sv.busy_cpu_sec * 1e6);
        }
        if let Some(mut s) = srv {
            let ok = s.wait();
            let js = std::fs::read_to_string(&srv_json).map_err(|e| {
                format!(
                    "squall server wrote no json ({e}): {}",
                    std::fs::read_to_string(&srv_log).unwrap_or_default()
                )
            })?;
            let sq = parse_squall(&js, "server")?;
            // ab and wrk stop at their time limit with connections open: their unfinished
            // requests end as peer_closed_early / aborted / bad_close on Squall's side; at
            // most one per client connection, and the client did not count them as done.
            let unfinished = if self.c == Who::Kernel {
                let conns = if self.w == "W2" { self.conns } else { AB_CONNS };
                (sq.peer_closed_early + sq.aborted + sq.bad_close).min(conns as u64)
            } else {
                0
            };
            if unfinished > 0 {
                notes.push(format!(
                    "{unfinished} connection(s) the kernel client left unfinished at its time limit (not counted as errors)"
                ));
            }
            m.errors += sq.errors.saturating_sub(unfinished);
            if !ok && sq.errors == 0 {
                notes.push("squall server exit status not 0".into());
            }
            m.idle_us[1] = Some(sq.idle_us());
            m.proc_us[1] = Some(sq.busy_cpu_sec * 1e6);
        }
        if let (Some(a), Some(b)) = (nginx_cpu0, self.nginx.and_then(Nginx::cpu_us)) {
            m.proc_us[1] = Some(b - a);
        }
        squall_sides_read(self.c, self.s, &m)?;
        let s1 = snap()?;
        let (busy, frames) = delta(&s0, &s1);
        m.busy_us = busy;
        m.frames = frames;
        let (client, server) = names(self.w, self.c, self.s);
        let mut r = Record {
            workload: self.w.into(),
            topology: "T-veth".into(),
            client: client.into(),
            server: server.into(),
            conns: Some(if self.w != "W2" && self.c == Who::Kernel {
                AB_CONNS as u64
            } else {
                self.conns as u64
            }),
            keepalive: (self.w == "W4").then_some(self.keepalive),
            port: (self.c.is_squall() || self.s.is_squall()).then(|| o.port.name().to_string()),
            seconds: secs,
            ..Default::default()
        };
        let l7 = if self.w == "W1" {
            (W1_REQ_BYTES + self.resp_total()) as f64
        } else {
            (W2_REQ_BYTES + self.resp_total()) as f64
        };
        fill(&mut r, &m, Some(l7));
        if self.c.is_squall() && self.one_shot() {
            r.conns = None;
            notes.push(format!("squall client offered {:.0} conn/s", self.w1_cps));
        }
        if let Some(n) = o.initcwnd {
            notes.push(format!("initcwnd {n} on both servers"));
        }
        notes.push(if o.server_offloads {
            "cubic; veth offloads off but the server end's transmit (checksum, TSO/GSO)".into()
        } else {
            "cubic; veth offloads off".into()
        });
        r.note = Some(notes.join("; "));
        Ok(r)
    }

    /// A Squall server is ready when it answers ping (kernel client side) or after 1.5 s.
    fn wait_server_ready(&self) -> Result<(), String> {
        if self.c.is_squall() {
            std::thread::sleep(Duration::from_millis(1500));
            return Ok(());
        }
        let t0 = Instant::now();
        loop {
            let o = output(pinned(
                CLI_NS,
                CLIENT_CORE,
                3.0,
                &["ping", "-c", "1", "-W", "1", SERVER_IP],
            ))?;
            if o.status.success() {
                return Ok(());
            }
            if t0.elapsed() > Duration::from_secs(15) {
                return Err("squall server did not answer ping in 15 s".into());
            }
        }
    }
}

fn progress(r: &Record, i: usize, n: usize) {
    eprintln!(
        "  run {}/{}: {} {}/{} C={} ops/s={:.0} us/op client {:.2} server {:.2} frames/op {:.1} errors={}",
        i + 1,
        n,
        r.workload,
        r.client,
        r.server,
        r.conns.unwrap_or(0),
        r.cps.or(r.rps).unwrap_or(0.0),
        r.client_us_per_op.unwrap_or(f64::NAN),
        r.server_us_per_op.unwrap_or(f64::NAN),
        r.frames_per_op.unwrap_or(f64::NAN),
        r.errors
    );
}

/// The raw-veth line for one frame size: `blast rx` in sq-srv (core 1), `blast tx` in
/// sq-cli (core 0), the lab in mode `both`.
fn raw_cell(o: &VethOpts, size: usize, dir: &Path) -> Result<Record, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let exe = exe.display().to_string();
    let (srv_mac, _) = link(SRV_NS, SRV_IF)?;
    let secs = format!("{}", o.seconds);
    let sz = size.to_string();
    let mut runs = Vec::new();
    for i in 0..o.runs {
        let log = dir.join(format!("rx-{size}-{i}.out"));
        let mut rx = Bg::spawn(
            pinned(
                SRV_NS,
                SERVER_CORE,
                o.seconds + 30.0,
                &[
                    &exe,
                    "blast",
                    "rx",
                    "--port",
                    o.port.name(),
                    "--iface",
                    SRV_IF,
                    "--seconds",
                    &secs,
                    "--quiet-ms",
                    "1000",
                ],
            ),
            &log,
        )?;
        std::thread::sleep(Duration::from_millis(500));
        let s0 = snap()?;
        let tx = output(pinned(
            CLI_NS,
            CLIENT_CORE,
            o.seconds + 30.0,
            &[
                &exe,
                "blast",
                "tx",
                "--port",
                o.port.name(),
                "--iface",
                CLI_IF,
                "--seconds",
                &secs,
                "--size",
                &sz,
                "--dst",
                &srv_mac,
            ],
        ))?;
        // The window ends with the sender: the receiver's wait for more is not billed.
        let s1 = snap()?;
        let rx_ok = rx.wait();
        let (busy, _) = delta(&s0, &s1);
        let rx_line = std::fs::read_to_string(&log).unwrap_or_default();
        let tx_line = text(&tx);
        let got = parse_kv(&rx_line, "frames").unwrap_or(0.0);
        let rx_secs = parse_kv(&rx_line, "seconds").unwrap_or(0.0);
        let sent = parse_kv(&tx_line, "frames").unwrap_or(0.0);
        let lost = (sent - got).max(0.0);
        let errors = u64::from(!rx_ok || !tx.status.success() || got == 0.0);
        let r = Record {
            workload: "raw-veth".into(),
            topology: "T-veth".into(),
            client: "squall-port".into(),
            server: "squall-port".into(),
            port: Some(o.port.name().into()),
            frame_bytes: Some(size as u64),
            mpps: (rx_secs > 0.0).then(|| got / rx_secs / 1e6),
            us_per_frame: (got > 0.0).then(|| (busy[0] + busy[1]) / got),
            client_us_per_op: (got > 0.0).then(|| busy[0] / got),
            server_us_per_op: (got > 0.0).then(|| busy[1] / got),
            client_thread_us_per_op: (got > 0.0)
                .then(|| parse_kv(&tx_line, "cpu_sec").unwrap_or(0.0) * 1e6 / got),
            server_thread_us_per_op: (got > 0.0)
                .then(|| parse_kv(&rx_line, "cpu_sec").unwrap_or(0.0) * 1e6 / got),
            errors,
            seconds: o.seconds,
            note: Some(format!(
                "sender core 0, receiver core 1, one socket each; sent {sent:.0}, received \
                 {got:.0}, lost {lost:.0} (the veth's backlog drops what the receiver \
                 cannot take); us_per_op = per received frame"
            )),
            ..Default::default()
        };
        if errors > 0 {
            eprintln!("  raw-veth run failed: tx: {tx_line} rx: {rx_line}");
        }
        eprintln!(
            "  run {}/{}: raw-veth {size} B: {:.3} Mpps, {:.3} us/frame (sent {sent:.0}, lost {lost:.0})",
            i + 1,
            o.runs,
            r.mpps.unwrap_or(0.0),
            r.us_per_frame.unwrap_or(f64::NAN)
        );
        runs.push(r);
    }
    median_line(&runs).ok_or_else(|| "no run".into())
}

fn tmpdir() -> Result<PathBuf, String> {
    let d = std::env::temp_dir().join(format!("squall-bench-veth-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).map_err(|e| format!("{}: {e}", d.display()))?;
    Ok(d)
}

/// One cell: the lab in its pair's mode, nginx if it serves (or `squall serve`'s site),
/// `o.runs` runs, the median.
#[allow(clippy::too_many_arguments)]
fn run_cell(
    o: &VethOpts,
    w: &str,
    c: Who,
    s: Who,
    conns: usize,
    keepalive: bool,
    w1_cps: f64,
    dir: &Path,
) -> Result<Record, String> {
    let _lab = Lab::up(&o.root, lab_mode(c, s), o.initcwnd, o.server_offloads)?;
    let nginx = if s == Who::Kernel {
        Some(Nginx::start(dir)?)
    } else {
        None
    };
    let serve = if s == Who::SquallServe {
        Some(serve_cmd::prepare(dir, &w2_body())?)
    } else {
        None
    };
    let cell = Cell {
        o,
        w,
        c,
        s,
        conns,
        dir: dir.to_path_buf(),
        nginx: nginx.as_ref(),
        serve: serve.as_ref(),
        keepalive,
        w1_cps,
        cli_mac: link(CLI_NS, CLI_IF)?.0,
        srv_mac: link(SRV_NS, SRV_IF)?.0,
    };
    let mut runs = Vec::new();
    for i in 0..o.runs {
        let r = cell.run(i)?;
        progress(&r, i, o.runs);
        runs.push(r);
    }
    median_line(&runs).ok_or_else(|| "no run".into())
}

/// Runs every cell `o` asks for and calls `emit` with each median line.
pub fn run(o: &VethOpts, emit: &mut dyn FnMut(&Record)) -> Result<(), String> {
    // SAFETY: no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err("veth needs root (network namespaces, AF_PACKET, sysctl)".into());
    }
    for t in ["ip", "ethtool", "taskset", "timeout"] {
        if Command::new("sh")
            .args(["-c", &format!("command -v {t}")])
            .stdout(Stdio::null())
            .status()
            .map(|s| !s.success())
            .unwrap_or(true)
        {
            return Err(format!("`{t}` is not installed (scripts/deps.sh bench)"));
        }
    }
    let squall_needed = o.pairs.iter().any(|&(c, s)| c.is_squall() || s.is_squall())
        && o.workloads.iter().any(|w| w != "RAW");
    if squall_needed && !o.squall.exists() {
        return Err(format!(
            "{} not found (cargo build --release -p squall, or --squall PATH)",
            o.squall.display()
        ));
    }
    guard_signals(o.root.clone());
    let dir = tmpdir()?;
    let _cc = CcGuard::allow_cubic()?;
    // ab's rate against nginx per one-request-per-connection workload (W1, W4): the rate
    // Squall's clients offer in the same invocation.
    let mut ab_cps: Vec<(String, f64)> = Vec::new();
    for w in &o.workloads {
        if w == "RAW" {
            let _lab = Lab::up(&o.root, "both", None, false)?;
            for &size in &o.frame_sizes {
                let r = raw_cell(o, size, &dir)?;
                emit(&r);
            }
            continue;
        }
        let conns: Vec<usize> = if w == "W2" {
            o.conns.clone()
        } else {
            vec![AB_CONNS]
        };
        // W4: one request per connection, then the keep-alive variant.
        let variants: &[bool] = if w == "W4" { &[false, true] } else { &[false] };
        for &(c, s) in &o.pairs {
            if w == "W4" && (c == Who::Squall || s == Who::Squall) {
                eprintln!(
                    "W4 {}/{}: skipped (W4 pairs: ab or squall-http against nginx or squall-serve)",
                    names(w, c, s).0,
                    names(w, c, s).1
                );
                continue;
            }
            for (&cn, &keepalive) in conns
                .iter()
                .flat_map(|c| variants.iter().map(move |k| (c, k)))
            {
                let w1_cps = if o.w1_cps > 0.0 {
                    o.w1_cps
                } else {
                    ab_cps
                        .iter()
                        .find(|(k, _)| k == w)
                        .map_or(10_000.0, |x| x.1)
                        .round()
                };
                // Other users of the lab may tear it down under us (the lock is advisory):
                // a cell that fails is run again on a fresh lab (three more times at most).
                let mut tries = 0;
                let r = loop {
                    match run_cell(o, w, c, s, cn, keepalive, w1_cps, &dir) {
                        Err(e) if tries < 3 => {
                            tries += 1;
                            eprintln!("  cell failed ({}); again on a fresh lab", e.trim());
                            std::thread::sleep(Duration::from_secs(5));
                        }
                        r => break r?,
                    }
                };
                if w != "W2" && !keepalive && c == Who::Kernel && s == Who::Kernel && r.errors == 0
                {
                    if let Some(rate) = r.cps.or(r.rps) {
                        ab_cps.push((w.clone(), rate));
                    }
                }
                emit(&r);
            }
        }
    }
    // SQUALL_BENCH_KEEP=1 keeps the profiles, logs and Squall's JSON reports.
    if std::env::var_os("SQUALL_BENCH_KEEP").is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    } else {
        eprintln!("veth: files kept in {}", dir.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_whose_squall_side_went_unread_is_refused() {
        let mut m = Measured::default();
        assert!(squall_sides_read(Who::Kernel, Who::Kernel, &m).is_ok());
        let e = squall_sides_read(Who::Kernel, Who::Squall, &m).unwrap_err();
        assert!(e.contains("server"), "{e}");
        assert!(squall_sides_read(Who::SquallHttp, Who::Kernel, &m).is_err());
        m.idle_us = [Some(0.0), Some(1.0)];
        assert!(squall_sides_read(Who::Squall, Who::SquallServe, &m).is_ok());
    }

    #[test]
    fn a_client_behind_its_schedule_is_told_apart() {
        let js = |late: u64| {
            format!(
                r#"{{"errors":0,"clean":true,"cpu_sec":1.0,"busy_cpu_sec":0.5,
                "client":{{"flows":{{"started":1000,"started_late":{late},"completed":1000}}}}}}"#
            )
        };
        let on_time = parse_squall(&js(10), "client").unwrap();
        assert_eq!((on_time.started, on_time.started_late), (1000, 10));
        assert!(
            !on_time.behind_schedule(),
            "1 % late is within a paced run's bursts"
        );
        assert!(parse_squall(&js(11), "client").unwrap().behind_schedule());
        assert_eq!(on_time.overloaded(), None);
        assert!(parse_squall(&js(11), "client")
            .unwrap()
            .overloaded()
            .is_some_and(|w| w.contains("11 of 1000")));
        // On schedule, but the answers came late: half the flows over 10 ms.
        let slow = r#"{"errors":0,"cpu_sec":1,"busy_cpu_sec":1,"latency_us":{"last_byte":{"p50":272127}},
            "client":{"flows":{"started":1000,"started_late":0}}}"#;
        let slow = parse_squall(slow, "client").unwrap();
        assert!(!slow.behind_schedule());
        assert!(
            slow.overloaded().is_some_and(|w| w.contains("272 ms")),
            "{:?}",
            slow.overloaded()
        );
        // A JSON of before the counter: never behind.
        let old = r#"{"errors":0,"cpu_sec":1,"busy_cpu_sec":1,"client":{"flows":{"started":5}}}"#;
        assert!(!parse_squall(old, "client").unwrap().behind_schedule());
    }

    const AB: &str = "Server Software:        nginx
Document Path:          /w1
Document Length:        32503 bytes

Concurrency Level:      100
Time taken for tests:   5.002 seconds
Complete requests:      51234
Failed requests:        3
   (Connect: 0, Receive: 0, Length: 3, Exceptions: 0)
Non-2xx responses:      2
Requests per second:    10242.30 [#/sec] (mean)

Percentage of the requests served within a certain time (ms)
  50%      9
  66%     10
  99%     23
 100%     40 (longest request)
";

    const WRK: &str = "Running 5s test @ http://198.18.48.1/testu
  1 threads and 100 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   780.12us  200.00us   5.00ms   90.00%
  Latency Distribution
     50%  630.00us
     75%  800.00us
     90%    1.00ms
     99%    1.20ms
  612345 requests in 5.00s, 100.00MB read
  Socket errors: connect 0, read 2, write 1, timeout 4
  Non-2xx or 3xx responses: 5
Requests/sec: 122469.00
";

    #[test]
    fn ab_report_parses() {
        let a = parse_ab(AB).unwrap();
        assert_eq!(a.complete, 51234);
        assert_eq!(a.failed, 3);
        assert_eq!(a.non2xx, 2);
        assert_eq!(a.doc_len, 32503);
        assert!((a.secs - 5.002).abs() < 1e-9);
        assert_eq!(a.p50_us, Some(9000.0));
        assert_eq!(a.p99_us, Some(23000.0));
        assert!(parse_ab("apr_socket_recv: Connection refused").is_none());
    }

    #[test]
    fn wrk_report_parses() {
        let w = parse_wrk(WRK).unwrap();
        assert_eq!(w.requests, 612345);
        assert!((w.secs - 5.0).abs() < 1e-9);
        assert_eq!(w.socket_errors, 7);
        assert_eq!(w.non2xx, 5);
        assert!((w.p50_us.unwrap() - 630.0).abs() < 1e-9);
        assert!((w.p99_us.unwrap() - 1200.0).abs() < 1e-9);
        let clean = WRK
            .lines()
            .filter(|l| !l.contains("Socket") && !l.contains("Non-2xx"))
            .collect::<Vec<_>>()
            .join("\n");
        let w = parse_wrk(&clean).unwrap();
        assert_eq!((w.socket_errors, w.non2xx), (0, 0));
        assert_eq!(wrk_time_us("2.00s"), Some(2e6));
        assert_eq!(wrk_time_us("1.5m"), Some(90e6));
    }

    #[test]
    fn squall_json_and_blast_lines_parse() {
        let js = r#"{"errors":0,"clean":true,"cpu_sec":5.0,"busy_cpu_sec":3.5,
            "client":{"flows":{"completed":10,"l7_rx_bytes":327680}},
            "server":{"flows":{"accepted":0}}}"#;
        let s = parse_squall(js, "client").unwrap();
        assert_eq!(s.completed, 10);
        assert_eq!(s.l7_rx_bytes, 327_680);
        assert!((s.idle_us() - 1.5e6).abs() < 1e-3);
        // The idle sleeps' CPU is not taken out of the core's time with the idle turns.
        let js = r#"{"errors":0,"clean":true,"cpu_sec":5.0,"busy_cpu_sec":3.5,
            "sleep_cpu_sec":1.0}"#;
        let s = parse_squall(js, "client").unwrap();
        assert!((s.idle_us() - 0.5e6).abs() < 1e-3, "{}", s.idle_us());
        assert!(parse_squall("{}", "client").is_err());
        assert_eq!((s.http_responses, s.http_2xx), (0, 0));
        // HTTP counters of every group (the unnamed group 0 has none).
        let js = r#"{"errors":0,"cpu_sec":1.0,"busy_cpu_sec":1.0,"groups":[{"name":""},
            {"name":"a","http":{"responses":7,"status_class":{"2xx":5}}},
            {"name":"b","http":{"responses":3,"status_class":{"2xx":3}}}]}"#;
        let s = parse_squall(js, "client").unwrap();
        assert_eq!((s.http_responses, s.http_2xx), (10, 8));
        let l = "frames=1000 bytes=64000 seconds=0.5 cpu_sec=0.4 lost=3 tx_full=0";
        assert_eq!(parse_kv(l, "frames"), Some(1000.0));
        assert_eq!(parse_kv(l, "lost"), Some(3.0));
        assert_eq!(parse_kv(l, "nope"), None);
        assert_eq!(parse_time_cpu("x\nSQB-CPU 1.50 0.25\n"), Some(1.75e6));
        assert_eq!(parse_time_cpu("no time"), None);
        assert!(proc_cpu_us(std::process::id()).is_some());
    }

    #[test]
    fn requests_and_responses_have_the_workload_sizes() {
        assert_eq!(w1_request().len(), W1_REQ_BYTES);
        let (req, pad) = w2_request();
        assert_eq!(req.len(), W2_REQ_BYTES);
        assert!(req.contains(&pad));
        // wrk sends the request line, Host, the pad header and an empty line: 100 bytes.
        let wrk = format!("GET /testu HTTP/1.1\r\nHost: {SERVER_IP}\r\n{pad}\r\n\r\n");
        assert_eq!(wrk.len(), W2_REQ_BYTES);
        // ab's own 81 bytes + the pad header.
        assert_eq!(81 + AB_PAD.len() + 2, W1_REQ_BYTES);
        let r = squall_w1_response();
        assert_eq!(r.len(), W1_RESP_BYTES);
        let head = r.find("\r\n\r\n").unwrap() + 4;
        assert!(r.contains(&format!("Content-Length: {}\r\n", r.len() - head)));
        assert_eq!(w2_body().len(), W2_BODY_BYTES);
        assert!(squall_w2_response().ends_with(&w2_body()));
        // The HTTP-aware client's requests are the same bytes, rebuilt from parts the way
        // the profile loader joins them (request line, header lines, empty line).
        // W4's request has W1's shape and size (ab's path is as long as /w1).
        assert_eq!(w4_request().len(), W4_REQ_BYTES);
        assert!(w4_request().starts_with("GET /w4 HTTP/1.1\r\n"));
        for want in [w1_request(), req.clone(), w4_request()] {
            let c = http_request_cmd(&want);
            let mut got = format!(
                "{} {} HTTP/1.1\r\n",
                c["method"].as_str().unwrap(),
                c["url"].as_str().unwrap()
            );
            for h in c["headers"].as_array().unwrap() {
                got += &format!(
                    "{}: {}\r\n",
                    h["name"].as_str().unwrap(),
                    h["value"].as_str().unwrap()
                );
            }
            got += "\r\n";
            assert_eq!(got, want);
        }
    }

    #[test]
    fn figures_take_squall_idle_polling_out() {
        let mut r = Record {
            workload: "W2".into(),
            ..Default::default()
        };
        let m = Measured {
            ops: 1000.0,
            secs: 2.0,
            busy_us: [3000.0, 5000.0],
            idle_us: [Some(1000.0), None],
            frames: 2000.0,
            ..Default::default()
        };
        fill(&mut r, &m, Some(200.0));
        assert_eq!(r.client_us_per_op, Some(2.0));
        assert_eq!(r.client_raw_us_per_op, Some(3.0));
        assert_eq!(r.server_us_per_op, Some(5.0));
        assert_eq!(r.server_raw_us_per_op, None);
        assert_eq!(r.cpu_us_per_op, Some(7.0));
        assert_eq!(r.frames_per_op, Some(2.0));
        assert_eq!(r.rps, Some(500.0));
        assert!((r.gbps.unwrap() - 500.0 * 200.0 * 8.0 / 1e9).abs() < 1e-12);
        // A cell with errors keeps its counts but loses its figures.
        let mut bad = r.clone();
        bad.errors = 2;
        let line = median_line(&[r.clone(), bad, r]).unwrap();
        assert_eq!(line.errors, 2);
        assert!(line.cpu_us_per_op.is_none() && line.rps.is_none());
        assert_eq!(line.frames_per_op, Some(2.0));
    }

    #[test]
    fn profiles_are_valid_ir_shapes() {
        let p = w2_profile(200, 100, 2.0, ("198.18.16.1", "198.18.16.200"));
        assert_eq!(p["templates"][0]["limit"], 100);
        assert_eq!(p["programs"][0]["commands"][4]["duration_usec"], 2_000_000);
        assert_eq!(p["programs"][1]["commands"][2]["bytes"], W2_REQ_BYTES);
        let p = w1_profile(32_768, ("198.18.0.2", "198.18.0.2"));
        assert_eq!(p["programs"][0]["commands"][1]["bytes"], 32_768);
        // The server's answer does not wait for its ACKs: the FIN goes with it.
        assert_eq!(p["programs"][1]["commands"][1]["blocking"], false);
        assert_eq!(p["ip_gens"][0]["clients"]["range"][0], "198.18.0.2");
        assert_eq!(parse_pair("kernel/squall"), Ok((Who::Kernel, Who::Squall)));
        assert_eq!(
            parse_pair("squall-http/kernel"),
            Ok((Who::SquallHttp, Who::Kernel))
        );
        assert!(parse_pair("kernel/squall-http").is_err());
        assert_eq!(
            parse_pair("squall-http/squall-serve"),
            Ok((Who::SquallHttp, Who::SquallServe))
        );
        assert!(parse_pair("squall-serve/kernel").is_err());
        assert_eq!(
            names("W4", Who::Kernel, Who::SquallServe),
            ("ab", "squall-serve")
        );
        assert_eq!(
            names("W2", Who::Kernel, Who::SquallServe),
            ("wrk", "squall-serve")
        );
        assert!(parse_pair("nginx").is_err());
        assert_eq!(PortKind::parse("afxdp"), Ok(PortKind::AfXdp));
        assert_eq!(PortKind::AfPacket.iface("sq-cli0"), "afpacket:sq-cli0");
        assert_eq!(
            PortKind::parse("afpacket-nogso").map(|p| p.iface("x")),
            Ok("afpacket:x,nogso".to_string())
        );
        assert_eq!(
            PortKind::parse("afpacket-ring").map(|p| p.iface("x")),
            Ok("afpacket:x,ring".to_string())
        );
        assert_eq!(
            PortKind::parse("afpacket-recvmmsg").map(|p| p.iface("x")),
            Ok("afpacket:x,recvmmsg".to_string())
        );
    }

    #[test]
    fn options_parse_and_are_bounded() {
        let a = |s: &str| -> Vec<String> { s.split_whitespace().map(String::from).collect() };
        let p = |s: &str| parse_opts(&a(s), "/r".into(), "/r/squall".into());
        let o = p("").unwrap();
        assert_eq!((o.runs, o.port), (3, PortKind::AfPacket));
        assert_eq!(o.initcwnd, None, "the servers' defaults unless asked");
        assert_eq!(p("--initcwnd 20").unwrap().initcwnd, Some(20));
        assert!(p("--initcwnd 0").is_err() && p("--initcwnd 21").is_err());
        assert!(!o.server_offloads, "offloads off unless asked");
        let on = p("--server-offloads on --pairs kernel/kernel,kernel/squall-serve").unwrap();
        assert!(on.server_offloads);
        assert!(p("--server-offloads maybe").is_err());
        assert!(p("--server-offloads on --pairs kernel/kernel,squall/kernel").is_ok());
        let e = p("--server-offloads on --pairs squall/kernel --port afxdp").unwrap_err();
        assert!(e.contains("squall/") && e.contains("superframes"), "{e}");
        assert_eq!(o.workloads, vec!["RAW", "W1", "W2", "W4"]);
        assert_eq!(o.pairs.len(), 7);
        assert_eq!(o.pairs[4], (Who::SquallHttp, Who::Kernel));
        assert_eq!(o.pairs[6], (Who::SquallHttp, Who::SquallServe));
        let o = p(
            "--runs 1 --seconds 1 --workloads raw,w2 --conns 10 --pairs kernel/kernel --port afxdp",
        )
        .unwrap();
        assert_eq!(o.workloads, vec!["RAW", "W2"]);
        assert_eq!(o.conns, vec![10]);
        assert_eq!(o.pairs, vec![(Who::Kernel, Who::Kernel)]);
        assert_eq!(o.port, PortKind::AfXdp);
        for bad in [
            "--runs 0",
            "--seconds 1000",
            "--workloads W3",
            "--conns 0",
            "--port dpdk",
            "--pairs a/b",
            "--frame-sizes 20",
            "--bogus 1",
            "--runs",
        ] {
            assert!(p(bad).is_err(), "{bad}");
        }
    }
}
