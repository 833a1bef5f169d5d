//! The daemon's state machine and methods: the loaded profile, the current run (engine
//! threads plus a monitor thread that samples rates and collects the result), live
//! statistics in the `squall run --json` shape, warnings, and blocking waits.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};
use squall_astf::{load_profile_value, LoadError, Profile, ProfileError};

use super::rpc::{self, RpcError};
use squall::ports::Ports;
use squall::report::{self, Check, RunInfo};
use squall::run::{Live, RunConfig, RunResult};
use squall::source::{self, SourceError};

/// Version of the control API (methods and result shapes).
pub const API_VERSION: &str = "1.0";

/// Longest generation a `start` may ask for, and what `duration: -1` means (seconds).
const MAX_DURATION_S: f64 = 1e6;
/// Rate sampling period of the monitor thread.
const SAMPLE: Duration = Duration::from_millis(250);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Running,
    Stopping,
    Done,
}

impl Phase {
    fn name(self) -> &'static str {
        match self {
            Phase::Running => "running",
            Phase::Stopping => "stopping",
            Phase::Done => "done",
        }
    }
}

struct Loaded {
    profile: Arc<Profile>,
    source: String,
}

struct RunSlot {
    id: u64,
    live: Arc<Live>,
    profile: Arc<Profile>,
    source: String,
    cfg: RunConfig,
    /// Seconds of generation asked for (-1: until stopped).
    duration_s: f64,
    mult: f64,
    started: Instant,
    /// When `stop` was called (ends the generation time of the statistics).
    stopped: Option<Instant>,
    /// When the run ended (`elapsed_sec` stops there).
    ended: Option<Instant>,
    /// The run's mode line (ports, threads).
    mode: String,
    phase: Phase,
    /// Interval rates from the monitor: (cps, wire Gbit/s).
    cps: f64,
    gbps: f64,
    result: Option<RunResult>,
    checks: Vec<Check>,
    failure: Option<String>,
}

#[derive(Default)]
struct State {
    loaded: Option<Loaded>,
    run: Option<RunSlot>,
    next_id: u64,
    /// Counters at the last `clear_stats` (subtracted from `get_stats`).
    baseline: Option<Value>,
}

/// Shared by every connection.
#[derive(Default)]
pub struct Service {
    st: Mutex<State>,
    ended: Condvar,
    pub shutdown: AtomicBool,
    /// The Prometheus endpoint (`squall daemon --metrics`): the current (or last) run's
    /// figures, updated once a second by its monitor thread.
    pub metrics: Option<squall::metrics::Exporter>,
    /// The ports every run plays on (`squall daemon --iface ...`; default: the in-memory
    /// wire).
    pub ports: Ports,
}

impl Service {
    /// A service whose runs play on `ports` and also feed this Prometheus endpoint.
    pub fn new(metrics: Option<squall::metrics::Exporter>, ports: Ports) -> Self {
        Service {
            metrics,
            ports,
            ..Service::default()
        }
    }
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn errors_json(v: &[ProfileError]) -> Value {
    Value::Array(
        v.iter()
            .map(|e| json!({"path": e.path, "message": e.message}))
            .collect(),
    )
}

fn profile_error(e: SourceError) -> RpcError {
    match e {
        SourceError::Load(LoadError::Invalid(v)) | SourceError::Unsupported(v) => {
            RpcError::new(rpc::INVALID_PROFILE, format!("invalid profile ({} error(s))", v.len()))
                .with_data(json!({"errors": errors_json(&v)}))
        }
        SourceError::Load(LoadError::Syntax {
            line,
            column,
            message,
        }) => RpcError::new(rpc::INVALID_PROFILE, "profile is not valid JSON").with_data(
            json!({"errors": [{"path": ".", "message": format!("line {line} column {column}: {message}")}]}),
        ),
        SourceError::Load(LoadError::Io { file, message }) => {
            RpcError::new(rpc::INVALID_PROFILE, format!("cannot read {file}: {message}"))
                .with_data(json!({"errors": [{"path": ".", "message": message}]}))
        }
        SourceError::Compile(m) => RpcError::new(rpc::INVALID_PROFILE, "profile compilation failed")
            .with_data(json!({"errors": [{"path": ".", "message": m}], "compiler_output": m})),
        e @ SourceError::Tunables => RpcError::new(rpc::INVALID_PARAMS, e.to_string())
            .with_data(json!({"errors": [{"path": "tunables", "message": e.to_string()}]})),
    }
}

/// Largest profile file `load_profile` reads by path.
const MAX_PROFILE_FILE: u64 = 256 << 20;

/// The profile file at `path` as the daemon will read (and, for `.py`, run) it: its
/// canonical path (symlinks resolved, then used for the load), if it is a regular file
/// (not a device, FIFO or directory, which would hang or exhaust the daemon) of at most
/// [`MAX_PROFILE_FILE`] bytes. A Python profile runs with the daemon's rights, and its
/// folder is first on its import path: it and every folder above it must belong to the
/// daemon's user or root and be writable by no one else (a sticky folder above the
/// profile's own, /tmp, is fine), so that no other user can swap the file, or plant a
/// module beside it, between this check and the run.
fn check_profile_path(path: &std::path::Path) -> Result<std::path::PathBuf, RpcError> {
    use std::os::unix::fs::MetadataExt;
    // (as an unreadable file: -32002, invalid profile, the reason at path ".")
    let bad = |why: String| {
        profile_error(SourceError::Load(LoadError::Io {
            file: path.display().to_string(),
            message: why,
        }))
    };
    let real = std::fs::canonicalize(path).map_err(|e| bad(e.to_string()))?;
    let m = std::fs::metadata(&real).map_err(|e| bad(e.to_string()))?;
    if !m.is_file() {
        return Err(bad("not a regular file".into()));
    }
    if m.len() > MAX_PROFILE_FILE {
        return Err(bad(format!(
            "{} bytes: a profile file may be at most {MAX_PROFILE_FILE}",
            m.len()
        )));
    }
    if real.extension().is_some_and(|e| e == "py") {
        // SAFETY: geteuid has no preconditions.
        let me = unsafe { libc::geteuid() };
        for (depth, p) in real.ancestors().enumerate() {
            let m = std::fs::metadata(p).map_err(|e| bad(e.to_string()))?;
            // Above the profile's own folder a sticky one (/tmp) is fine: others may add
            // files there but not rename or replace ours.
            let sticky_above = depth >= 2 && m.mode() & 0o1000 != 0;
            if m.uid() != me && m.uid() != 0 {
                return Err(bad(format!(
                    "a Python profile runs with the daemon's rights: {} must belong to the \
                     daemon's user ({me}) or root, not {}",
                    p.display(),
                    m.uid()
                )));
            }
            if m.mode() & 0o022 != 0 && !sticky_above {
                return Err(bad(format!(
                    "a Python profile runs with the daemon's rights: {} must not be writable \
                     by group or others (mode {:o})",
                    p.display(),
                    m.mode() & 0o7777
                )));
            }
        }
    }
    Ok(real)
}

/// The `tunables` parameter as `-t KEY=VALUE` arguments of `python3 -m squall.compile`.
/// That command splits each argument at commas (several tunables in one `-t`), so a key or
/// value of the object form holding a comma cannot pass through: it is refused here rather
/// than split into a wrong tunable.
fn tunables(p: &Map<String, Value>) -> Result<Vec<String>, RpcError> {
    match p.get("tunables") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Object(m)) => m
            .iter()
            .map(|(k, v)| {
                let v = match v {
                    Value::String(s) => s.clone(),
                    v => v.to_string(),
                };
                if k.is_empty() || k.contains(['=', ',']) {
                    return Err(RpcError::params(format!(
                        "tunables: bad key {k:?} (it may not be empty or hold '=' or ',')"
                    )));
                }
                if v.contains(',') {
                    return Err(RpcError::params(format!(
                        "tunables: the value of {k:?} holds a ',', which the profile compiler \
                         reads as a separator between tunables (not supported by the daemon; \
                         compile the profile on the client side, e.g. squall.Client)"
                    )));
                }
                Ok(format!("{k}={v}"))
            })
            .collect(),
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| {
                v.as_str()
                    .filter(|s| s.contains('='))
                    .map(str::to_string)
                    .ok_or_else(|| {
                        RpcError::params("tunables: each item must be a \"key=value\" string")
                    })
            })
            .collect(),
        Some(_) => Err(RpcError::params(
            "tunables must be an object or a list of \"key=value\"",
        )),
    }
}

fn num(p: &Map<String, Value>, k: &str, default: f64) -> Result<f64, RpcError> {
    match p.get(k) {
        None | Some(Value::Null) => Ok(default),
        Some(v) => v
            .as_f64()
            .filter(|x| x.is_finite())
            .ok_or_else(|| RpcError::params(format!("{k} must be a number"))),
    }
}

fn flag(p: &Map<String, Value>, k: &str) -> Result<bool, RpcError> {
    match p.get(k) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(RpcError::params(format!("{k} must be a boolean"))),
    }
}

fn check_mult(m: f64) -> Result<f64, RpcError> {
    if m > 0.0 && m <= 1e6 {
        Ok(m)
    } else {
        Err(RpcError::params("mult must be a number in (0, 1e6]"))
    }
}

/// Subtracts `base` from `cur` for every unsigned integer present in both (same shape).
fn sub_tree(cur: &mut Value, base: &Value) {
    match (cur, base) {
        (Value::Object(c), Value::Object(b)) => {
            for (k, v) in c.iter_mut() {
                if let Some(bv) = b.get(k) {
                    sub_tree(v, bv);
                }
            }
        }
        (c @ Value::Number(_), Value::Number(b)) => {
            if let (Some(x), Some(y)) = (c.as_u64(), b.as_u64()) {
                *c = x.saturating_sub(y).into();
            }
        }
        _ => {}
    }
}

/// Applies a `clear_stats` baseline to the counter parts of a stats document (latency
/// histograms, rates and invariants are not cleared).
fn apply_baseline(doc: &mut Value, base: &Value) {
    for side in ["client", "server"] {
        for k in [
            "flows",
            "tcp",
            "port",
            "impairment",
            "no_template",
            "send_errors",
            "errors",
        ] {
            if let (Some(c), Some(b)) = (doc[side].get_mut(k), base[side].get(k)) {
                sub_tree(c, b);
            }
        }
    }
    if let (Some(c), Some(b)) = (doc.get_mut("errors"), base.get("errors")) {
        sub_tree(c, b);
    }
    if let (Some(Value::Array(cg)), Some(Value::Array(bg))) =
        (doc.get_mut("groups"), base.get("groups"))
    {
        for (c, b) in cg.iter_mut().zip(bg) {
            for side in ["client", "server"] {
                if let (Some(c), Some(b)) = (c.get_mut(side), b.get(side)) {
                    sub_tree(c, b);
                }
            }
        }
    }
}

impl RunSlot {
    /// A run starting now.
    fn running(
        id: u64,
        live: Arc<Live>,
        profile: Arc<Profile>,
        source: String,
        cfg: RunConfig,
        duration_s: f64,
        mult: f64,
    ) -> RunSlot {
        RunSlot {
            mode: Ports::default().mode(&cfg),
            id,
            live,
            profile,
            source,
            cfg,
            duration_s,
            mult,
            started: Instant::now(),
            stopped: None,
            ended: None,
            phase: Phase::Running,
            cps: 0.0,
            gbps: 0.0,
            result: None,
            checks: Vec::new(),
            failure: None,
        }
    }

    /// Seconds since the start, up to the end of the run.
    fn elapsed_sec(&self) -> f64 {
        self.ended
            .unwrap_or_else(Instant::now)
            .saturating_duration_since(self.started)
            .as_secs_f64()
    }

    /// The run's statistics document (`squall run --json` shape plus `state` and `live`).
    fn stats(&self) -> Value {
        let snap;
        let (r, checks): (&RunResult, &[Check]) = match &self.result {
            Some(r) => (r, &self.checks),
            None => {
                // The workers' latest reports (summed over the workers of a run on real
                // ports).
                let (client, server) = squall::series::sides(&self.live).unwrap_or_default();
                let el = self.started.elapsed().as_nanos() as u64;
                snap = RunResult {
                    client,
                    server,
                    elapsed_ns: el,
                    gen_ns: self
                        .stopped
                        .map_or(el, |s| (s - self.started).as_nanos() as u64)
                        .min(self.cfg.duration_ns),
                    stall_ns: self.cfg.stall_ns,
                    ..RunResult::default()
                };
                (&snap, &[])
            }
        };
        let info = RunInfo {
            profile_path: &self.source,
            mode: &self.mode,
            duration_s: self.duration_s,
            mult: self.mult,
            cores: self.cfg.cores,
        };
        let mut doc = report::to_json(&self.profile, &info, r, checks);
        let l = &self.live;
        doc["state"] = self.phase.name().into();
        doc["run_id"] = self.id.into();
        doc["live"] = json!({
            "cps": self.cps,
            "wire_gbps": self.gbps,
            "active_flows": l.active.load(Ordering::Relaxed),
            "started": l.started.load(Ordering::Relaxed),
            "completed": l.completed.load(Ordering::Relaxed),
            "errors": l.errors.load(Ordering::Relaxed) + l.server_errors.load(Ordering::Relaxed),
            "elapsed_sec": self.elapsed_sec(),
        });
        if self.result.is_none() {
            doc["clean"] = Value::Null;
        }
        doc
    }

    fn warnings(&self) -> Vec<String> {
        let mut w = Vec::new();
        if let Some(f) = &self.failure {
            w.push(format!("run failed: {f}"));
        }
        match &self.result {
            Some(r) => {
                for c in self.checks.iter().filter(|c| !c.ok) {
                    w.push(format!("invariant {} violated: {}", c.name, c.detail));
                }
                let e = report::error_count(r);
                if e > 0 {
                    w.push(format!("{e} error(s) counted (see the flow counters)"));
                }
                w.extend(
                    report::warnings(&self.profile, r)
                        .into_iter()
                        .map(|w| w.message),
                );
            }
            None => {
                let l = &self.live;
                let e = l.errors.load(Ordering::Relaxed) + l.server_errors.load(Ordering::Relaxed);
                if e > 0 {
                    w.push(format!("{e} error(s) counted so far"));
                }
            }
        }
        w
    }
}

impl Service {
    /// Dispatches one method call.
    pub fn call(self: &Arc<Self>, method: &str, p: &Map<String, Value>) -> Result<Value, RpcError> {
        // Unknown parameters are errors (as unknown profile fields are): a misspelt
        // `duration` must not start a run that never ends.
        let known: &[&str] = match method {
            "load_profile" => &["profile", "path", "tunables"],
            "start" => &[
                "mult",
                "duration",
                "cores",
                "sim",
                "impair",
                "drain_sec",
                "seed",
                "fixed_keys",
            ],
            "update" => &["mult"],
            "stop" => &["drain"],
            "wait_on_traffic" => &["timeout"],
            "api_version" | "get_status" | "get_stats" | "clear_stats" | "get_warnings"
            | "shutdown" => &[],
            _ => {
                return Err(RpcError::new(
                    rpc::METHOD_NOT_FOUND,
                    format!("method not found: {method}"),
                ))
            }
        };
        if let Some(k) = p.keys().find(|k| !known.contains(&k.as_str())) {
            let expected = if known.is_empty() {
                "it takes none".to_string()
            } else {
                format!("expected: {}", known.join(", "))
            };
            return Err(RpcError::params(format!(
                "{method}: unknown parameter {k:?} ({expected})"
            )));
        }
        match method {
            "api_version" => Ok(
                json!({"api_version": API_VERSION, "server": "squall", "version": env!("CARGO_PKG_VERSION")}),
            ),
            "load_profile" => self.load_profile(p),
            // (after `shutdown` the process ends within seconds: a run started in that
            // wait would be cut at once)
            "start" if self.shutdown.load(Ordering::SeqCst) => Err(RpcError::new(
                rpc::INTERNAL_ERROR,
                "the daemon is shutting down: no new run",
            )),
            "start" => self.start(p),
            "update" => self.update(p),
            "stop" => self.stop(p),
            "get_status" => Ok(self.status()),
            "get_stats" => self.get_stats(),
            "clear_stats" => self.clear_stats(),
            "get_warnings" => Ok(self.get_warnings()),
            "wait_on_traffic" => self.wait(p),
            "shutdown" => {
                self.shutdown.store(true, Ordering::SeqCst);
                if let Some(r) = &lock(&self.st).run {
                    r.live.ctl.request_stop(true);
                }
                Ok(json!({"ok": true}))
            }
            m => Err(RpcError::new(
                rpc::METHOD_NOT_FOUND,
                format!("method not found: {m}"),
            )),
        }
    }

    fn busy(st: &State) -> bool {
        st.run.as_ref().is_some_and(|r| r.phase != Phase::Done)
    }

    fn load_profile(&self, p: &Map<String, Value>) -> Result<Value, RpcError> {
        let (profile, source) = match (p.get("profile"), p.get("path")) {
            (Some(v @ Value::Object(_)), None) => {
                if !tunables(p)?.is_empty() {
                    return Err(profile_error(SourceError::Tunables));
                }
                let prof = load_profile_value(v.clone())
                    .map_err(|e| profile_error(SourceError::Load(e)))?;
                let u = source::unsupported(&prof);
                if !u.is_empty() {
                    return Err(profile_error(SourceError::Unsupported(u)));
                }
                (prof, "(profile object)".to_string())
            }
            (None, Some(Value::String(path))) => {
                if lock(&self.st)
                    .run
                    .as_ref()
                    .is_some_and(|r| r.phase != Phase::Done)
                {
                    return Err(RpcError::new(rpc::ALREADY_RUNNING, "a run is in progress"));
                }
                let t = tunables(p)?;
                let real = check_profile_path(std::path::Path::new(path))?;
                let prof = source::load(&real, &t).map_err(profile_error)?;
                (prof, path.clone())
            }
            _ => {
                return Err(RpcError::params(
                    "give exactly one of profile (IR object) or path (string)",
                ))
            }
        };
        let mut st = lock(&self.st);
        if Self::busy(&st) {
            return Err(RpcError::new(rpc::ALREADY_RUNNING, "a run is in progress"));
        }
        let summary = json!({
            "source": source,
            "buffers": profile.buffers.len(),
            "programs": profile.programs.len(),
            "templates": profile.templates.len(),
            "template_groups": profile.tg_names.len(),
        });
        st.loaded = Some(Loaded {
            profile: Arc::new(profile),
            source,
        });
        Ok(summary)
    }

    fn start(self: &Arc<Self>, p: &Map<String, Value>) -> Result<Value, RpcError> {
        let mult = check_mult(num(p, "mult", 1.0)?)?;
        let dur = num(p, "duration", -1.0)?;
        let sim = flag(p, "sim")?;
        let fixed_keys = flag(p, "fixed_keys")?;
        let unbounded = dur < 0.0;
        // (at least 1 ms: a shorter one would round to a run of 0 ns)
        if !unbounded && !(1e-3..=MAX_DURATION_S).contains(&dur) {
            return Err(RpcError::params(
                "duration must be -1 (until stopped) or in [0.001, 1e6] seconds",
            ));
        }
        if unbounded && sim {
            return Err(RpcError::params(
                "a simulation (sim) needs a finite duration",
            ));
        }
        let mem = self.ports.is_mem();
        let cores = match num(p, "cores", 1.0)? {
            c if c == 1.0 || c == 2.0 => c as u32,
            // Real ports: one worker per core (each a queue of every port).
            c if !mem && c.fract() == 0.0 && (1.0..=1024.0).contains(&c) => c as u32,
            _ if mem => return Err(RpcError::params("cores must be 1 or 2")),
            _ => return Err(RpcError::params("cores must be a whole number of workers")),
        };
        if !mem {
            self.ports
                .check_cores(cores)
                .map_err(|e| RpcError::params(format!("cores: {e}")))?;
            if sim {
                return Err(RpcError::params(
                    "sim: the daemon runs on real ports (a simulation needs the in-memory wire)",
                ));
            }
        }
        let drain = num(p, "drain_sec", 5.0)?;
        if !(0.0..=1e5).contains(&drain) {
            return Err(RpcError::params("drain_sec must be in [0, 1e5]"));
        }
        let impair =
            match p.get("impair") {
                None | Some(Value::Null) => Default::default(),
                Some(_) if !mem => return Err(RpcError::params(
                    "impair: the daemon runs on real ports (impairment is the in-memory wire's)",
                )),
                Some(Value::String(s)) => squall::impair::parse_impair(s)
                    .map_err(|e| RpcError::params(format!("impair: {e}")))?,
                Some(_) => {
                    return Err(RpcError::params(
                        "impair must be a string such as \"loss=0.01\"",
                    ))
                }
            };
        let seed = match p.get("seed") {
            None | Some(Value::Null) => None,
            Some(v) => Some(
                v.as_u64()
                    .ok_or_else(|| RpcError::params("seed must be an unsigned integer"))?,
            ),
        };
        let mut st = lock(&self.st);
        if Self::busy(&st) {
            return Err(RpcError::new(rpc::ALREADY_RUNNING, "a run is in progress"));
        }
        let Some((lprof, lsrc)) = st
            .loaded
            .as_ref()
            .map(|l| (l.profile.clone(), l.source.clone()))
        else {
            return Err(RpcError::new(
                rpc::NO_PROFILE,
                "no profile loaded (call load_profile first)",
            ));
        };
        let cfg = RunConfig {
            duration_ns: ((if unbounded { MAX_DURATION_S } else { dur }) * 1e9) as u64,
            mult,
            cores: if sim { 1 } else { cores },
            // On the in-memory wire the API's `cores: 2` is the two-thread layout (client
            // core, server core); on real ports, workers.
            split: mem && !sim && cores == 2,
            sim,
            seed,
            drain_ns: (drain * 1e9) as u64,
            pcap_flows: None,
            impair,
            max_flows: 262_144,
            fixed_keys,
            ..RunConfig::default()
        };
        let live = Arc::new(Live::default());
        live.ctl.snapshots.store(true, Ordering::Relaxed);
        st.next_id += 1;
        let id = st.next_id;
        let duration_s = if unbounded { -1.0 } else { dur };
        let mut slot = RunSlot::running(
            id,
            live.clone(),
            lprof.clone(),
            lsrc,
            cfg.clone(),
            duration_s,
            mult,
        );
        slot.mode = self.ports.mode(&cfg);
        let prof = lprof;
        let me = self.clone();
        std::thread::Builder::new()
            .name("squall-monitor".into())
            .spawn(move || me.monitor(id, prof, cfg, live))
            .map_err(|e| RpcError::new(rpc::RUN_FAILED, format!("cannot start the run: {e}")))?;
        st.run = Some(slot);
        st.baseline = None;
        Ok(json!({"run_id": id, "state": "running"}))
    }

    /// Runs the engine, samples interval rates until it ends, then stores the result.
    fn monitor(self: Arc<Self>, id: u64, prof: Arc<Profile>, cfg: RunConfig, live: Arc<Live>) {
        let prof_names = prof.tg_names.clone();
        let (p2, c2, l2, ports) = (prof, cfg, live.clone(), self.ports.clone());
        let h = std::thread::Builder::new()
            .name("squall-run".into())
            .spawn(move || ports.run(p2, &c2, l2));
        let h = match h {
            Ok(h) => h,
            Err(e) => return self.finish(id, Err(format!("cannot start the engine thread: {e}"))),
        };
        let mut last = (0u64, 0u64, Instant::now());
        let t0 = Instant::now();
        let mut series = squall::series::Series::new(prof_names);
        let mut turns = 0u32;
        while !h.is_finished() {
            std::thread::sleep(SAMPLE);
            let now = Instant::now();
            turns += 1;
            if let Some(m) = self.metrics.as_ref().filter(|_| turns.is_multiple_of(4)) {
                let t = now.duration_since(t0).as_secs_f64();
                series.push(squall::series::Reading::read(&live, t));
                m.update(squall::metrics::render(&series, true));
            }
            let started = live.started.load(Ordering::Relaxed);
            let wire = live.wire_bytes.load(Ordering::Relaxed)
                + live.server_wire_bytes.load(Ordering::Relaxed);
            let dt = now.duration_since(last.2).as_secs_f64().max(1e-9);
            let cps = started.saturating_sub(last.0) as f64 / dt;
            let gbps = wire.saturating_sub(last.1) as f64 * 8.0 / dt / 1e9;
            last = (started, wire, now);
            let mut st = lock(&self.st);
            if let Some(r) = st.run.as_mut().filter(|r| r.id == id) {
                r.cps = cps;
                r.gbps = gbps;
            }
        }
        let r = match h.join() {
            Ok(r) => r,
            Err(_) => Err("engine thread panicked".into()),
        };
        if let Some(m) = &self.metrics {
            series.push(squall::series::Reading::read(
                &live,
                t0.elapsed().as_secs_f64(),
            ));
            if let Ok(res) = &r {
                series.finish(&res.client, &res.server);
            }
            m.update(squall::metrics::render(&series, false));
        }
        self.finish(id, r);
    }

    fn finish(&self, id: u64, r: Result<RunResult, String>) {
        let mut st = lock(&self.st);
        if let Some(slot) = st.run.as_mut().filter(|s| s.id == id) {
            match r {
                Ok(mut res) => {
                    // Stopped early: rates over the time flows were actually opened.
                    let gen = slot.stopped.unwrap_or_else(Instant::now) - slot.started;
                    res.gen_ns = res.gen_ns.min(gen.as_nanos() as u64).max(1);
                    slot.checks = self.ports.checks(&res);
                    slot.result = Some(res);
                }
                Err(e) => slot.failure = Some(e),
            }
            slot.phase = Phase::Done;
            slot.ended.get_or_insert_with(Instant::now);
            slot.cps = 0.0;
            slot.gbps = 0.0;
        }
        drop(st);
        self.ended.notify_all();
    }

    fn update(&self, p: &Map<String, Value>) -> Result<Value, RpcError> {
        let m = match p.get("mult") {
            Some(v) => check_mult(
                v.as_f64()
                    .ok_or_else(|| RpcError::params("mult must be a number"))?,
            )?,
            None => return Err(RpcError::params("mult is required")),
        };
        let mut st = lock(&self.st);
        match st.run.as_mut() {
            Some(r) if r.phase == Phase::Running && !r.cfg.sim => {
                r.live.ctl.set_mult(m);
                r.mult = m;
                Ok(json!({"mult": m}))
            }
            _ => Err(RpcError::new(
                rpc::NOT_RUNNING,
                "no real-time run in progress",
            )),
        }
    }

    fn stop(&self, p: &Map<String, Value>) -> Result<Value, RpcError> {
        let drain = match p.get("drain") {
            None | Some(Value::Null) => true,
            Some(Value::Bool(b)) => *b,
            Some(_) => return Err(RpcError::params("drain must be a boolean")),
        };
        let mut st = lock(&self.st);
        match st.run.as_mut() {
            Some(r) if r.phase != Phase::Done => {
                // A drain after a cut leaves the cut in place (it cannot be undone).
                r.live.ctl.request_stop(!drain);
                r.phase = Phase::Stopping;
                r.stopped.get_or_insert_with(Instant::now);
                Ok(json!({"state": "stopping", "drain": drain}))
            }
            _ => Err(RpcError::new(rpc::NOT_RUNNING, "no run in progress")),
        }
    }

    fn status(&self) -> Value {
        let st = lock(&self.st);
        let mut v = json!({
            "state": st.run.as_ref().map_or("idle", |r| r.phase.name()),
            "profile_loaded": st.loaded.is_some(),
            "profile": st.loaded.as_ref().map(|l| l.source.clone()),
            "ports": self.ports.label(),
        });
        if let Some(r) = &st.run {
            v["run_id"] = r.id.into();
            v["mult"] = r.mult.into();
            v["duration_sec"] = r.duration_s.into();
            v["elapsed_sec"] = r.elapsed_sec().into();
        }
        v
    }

    fn get_stats(&self) -> Result<Value, RpcError> {
        let st = lock(&self.st);
        let Some(r) = &st.run else {
            return Err(RpcError::new(
                rpc::NOT_RUNNING,
                "no run yet (call start first)",
            ));
        };
        let mut doc = r.stats();
        if let Some(b) = &st.baseline {
            apply_baseline(&mut doc, b);
        }
        Ok(doc)
    }

    fn clear_stats(&self) -> Result<Value, RpcError> {
        let mut st = lock(&self.st);
        let doc = st.run.as_ref().map(RunSlot::stats);
        st.baseline = doc;
        Ok(json!({"ok": true}))
    }

    fn get_warnings(&self) -> Value {
        let st = lock(&self.st);
        Value::Array(
            st.run
                .as_ref()
                .map(RunSlot::warnings)
                .unwrap_or_default()
                .into_iter()
                .map(Value::String)
                .collect(),
        )
    }

    fn wait(&self, p: &Map<String, Value>) -> Result<Value, RpcError> {
        let t = num(p, "timeout", -1.0)?;
        let deadline = (t >= 0.0).then(|| Instant::now() + Duration::from_secs_f64(t.min(1e7)));
        let mut st = lock(&self.st);
        loop {
            if !Self::busy(&st) {
                let state = st.run.as_ref().map_or("idle", |r| r.phase.name());
                return Ok(json!({"finished": true, "state": state}));
            }
            let wait = match deadline {
                None => Duration::from_secs(1),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        let state = st.run.as_ref().map_or("idle", |r| r.phase.name());
                        return Ok(json!({"finished": false, "state": state}));
                    }
                    (d - now).min(Duration::from_secs(1))
                }
            };
            st = self
                .ended
                .wait_timeout(st, wait)
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0);
        }
    }

    /// After `shutdown`: waits (bounded) for the run to end.
    pub fn wait_idle(&self, limit: Duration) {
        let mut p = Map::new();
        p.insert("timeout".into(), limit.as_secs_f64().into());
        let _ = self.wait(&p);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profile_paths_are_checked_before_they_are_read() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let refused = |p: &str| {
            check_profile_path(std::path::Path::new(p))
                .unwrap_err()
                .message
        };
        assert!(refused("/dev/zero").contains("not a regular file"));
        assert!(refused("/tmp").contains("not a regular file"));
        assert!(refused("/nonexistent/x.json").contains("/nonexistent/x.json"));
        // A folder of the daemon's user's own, below one writable by no one else (the
        // temp dir is everyone's: a Python profile there is refused, see below).
        let base = std::env::var_os("CARGO_TARGET_TMPDIR")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")));
        let dir = base.join(format!("squall-prof-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let py = dir.join("p.py");
        std::fs::write(&py, "x = 1\n").unwrap();
        let mode = |f: &std::path::Path, m: u32| {
            std::fs::set_permissions(f, std::fs::Permissions::from_mode(m)).unwrap()
        };
        mode(&py, 0o644);
        mode(&dir, 0o755);
        let dir_ok = check_profile_path(&py);
        mode(&dir, 0o777);
        let e = check_profile_path(&py).unwrap_err().message;
        assert!(e.contains("must not be writable"), "{e}");
        mode(&dir, 0o755);
        // (the folders above the test's own may be anyone's on a developer's machine)
        if dir.ancestors().skip(1).all(|p| {
            let m = std::fs::metadata(p).unwrap();
            // SAFETY: geteuid has no preconditions.
            let me = unsafe { libc::geteuid() };
            (m.mode() & 0o022 == 0 || m.mode() & 0o1000 != 0) && (m.uid() == 0 || m.uid() == me)
        }) {
            assert_eq!(dir_ok.unwrap(), std::fs::canonicalize(&py).unwrap());
        }
        // Directly in a world-writable folder (sticky or not) another user could plant
        // a module beside it; in a private folder below a sticky one it is safe.
        let tmp = std::env::temp_dir();
        if std::fs::metadata(&tmp).unwrap().mode() & 0o1022 == 0o1022 {
            let tmp_py = tmp.join(format!("squall-p-{}.py", std::process::id()));
            std::fs::write(&tmp_py, "x = 1\n").unwrap();
            mode(&tmp_py, 0o644);
            let e = check_profile_path(&tmp_py).unwrap_err().message;
            assert!(e.contains("must not be writable"), "{e}");
            std::fs::remove_file(&tmp_py).unwrap();
            let sub = tmp.join(format!("squall-pd-{}", std::process::id()));
            std::fs::create_dir_all(&sub).unwrap();
            mode(&sub, 0o755);
            let sub_py = sub.join("p.py");
            std::fs::write(&sub_py, "x = 1\n").unwrap();
            mode(&sub_py, 0o644);
            assert!(check_profile_path(&sub_py).is_ok());
            std::fs::remove_dir_all(&sub).unwrap();
        }
        // A Python profile others can write is not run; a JSON one is only read.
        mode(&py, 0o666);
        let e = check_profile_path(&py).unwrap_err().message;
        assert!(e.contains("writable by group or others"), "{e}");
        let js = dir.join("p.json");
        std::fs::write(&js, "{}").unwrap();
        mode(&js, 0o666);
        assert!(check_profile_path(&js).is_ok());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn baseline_subtracts_counters_only() {
        let mut doc = json!({"errors": 5, "client": {"tcp": {"a": 10}, "cpu_sec": 1.5},
            "groups": [{"client": {"started": 7}, "latency_us": {"connect": {"p50": 9}}}]});
        let base = json!({"errors": 2, "client": {"tcp": {"a": 4}, "cpu_sec": 1.0},
            "groups": [{"client": {"started": 3}, "latency_us": {"connect": {"p50": 8}}}]});
        apply_baseline(&mut doc, &base);
        assert_eq!(doc["errors"], 3);
        assert_eq!(doc["client"]["tcp"]["a"], 6);
        assert_eq!(doc["client"]["cpu_sec"], 1.5);
        assert_eq!(doc["groups"][0]["client"]["started"], 4);
        assert_eq!(doc["groups"][0]["latency_us"]["connect"]["p50"], 9);
    }

    #[test]
    fn no_run_starts_after_shutdown() {
        let s = Arc::new(Service::default());
        assert_eq!(
            s.call("start", &Map::new()).unwrap_err().code,
            rpc::NO_PROFILE
        );
        s.call("shutdown", &Map::new()).unwrap();
        let e = s.call("start", &Map::new()).unwrap_err();
        assert_eq!(e.code, rpc::INTERNAL_ERROR);
        assert!(e.message.contains("shutting down"), "{}", e.message);
    }

    #[test]
    fn params_are_checked() {
        let s = Arc::new(Service::default());
        let mut p = Map::new();
        assert_eq!(s.call("start", &p).unwrap_err().code, rpc::NO_PROFILE);
        p.insert("mult".into(), json!(-1));
        assert_eq!(s.call("start", &p).unwrap_err().code, rpc::INVALID_PARAMS);
        assert_eq!(
            s.call("update", &Map::new()).unwrap_err().code,
            rpc::INVALID_PARAMS
        );
        let mut p = Map::new();
        p.insert("mult".into(), json!(2));
        assert_eq!(s.call("update", &p).unwrap_err().code, rpc::NOT_RUNNING);
        assert_eq!(s.call("nope", &p).unwrap_err().code, rpc::METHOD_NOT_FOUND);
        let mut p = Map::new();
        p.insert("profile".into(), json!({"version": 1}));
        let e = s.call("load_profile", &p).unwrap_err();
        assert_eq!(e.code, rpc::INVALID_PROFILE);
        assert!(e.data.unwrap()["errors"]
            .as_array()
            .is_some_and(|a| !a.is_empty()));
        assert_eq!(s.call("get_status", &Map::new()).unwrap()["state"], "idle");
        // A misspelt parameter is an error, not a default.
        for (m, k) in [
            ("start", "duration_sec"),
            ("update", "multiplier"),
            ("get_status", "x"),
        ] {
            let mut p = Map::new();
            p.insert(k.into(), json!(1));
            let e = s.call(m, &p).unwrap_err();
            assert_eq!(e.code, rpc::INVALID_PARAMS, "{m}");
            assert!(e.message.contains(k), "{}", e.message);
        }
    }

    /// A run slot with no engine behind it (the test plays the monitor thread).
    fn fake_run(s: &Service) -> (u64, Arc<Live>) {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../examples/w1-astf-http.json");
        let profile = Arc::new(squall_astf::load_profile_file(&path).unwrap());
        let live = Arc::new(Live::default());
        let mut st = lock(&s.st);
        st.next_id += 1;
        let id = st.next_id;
        st.run = Some(RunSlot::running(
            id,
            live.clone(),
            profile,
            "w1".into(),
            RunConfig::default(),
            -1.0,
            1.0,
        ));
        (id, live)
    }

    #[test]
    fn a_drain_does_not_undo_a_cut() {
        let s = Arc::new(Service::default());
        let (_, live) = fake_run(&s);
        let stop = |drain: bool| {
            let mut p = Map::new();
            p.insert("drain".into(), drain.into());
            s.call("stop", &p).unwrap();
            live.ctl.cut.load(Ordering::Relaxed)
        };
        assert!(!stop(true), "a drain cuts");
        assert!(stop(false), "no cut");
        // Before the worker has seen the cut: a drain must not take it back.
        assert!(stop(true), "a drain undid the cut");
    }

    #[test]
    fn elapsed_stops_at_the_end_of_the_run() {
        let s = Arc::new(Service::default());
        let (id, _) = fake_run(&s);
        std::thread::sleep(Duration::from_millis(30));
        s.finish(id, Ok(RunResult::default()));
        let read = || {
            let st = s.call("get_status", &Map::new()).unwrap();
            let live = s.call("get_stats", &Map::new()).unwrap()["live"].clone();
            (
                st["elapsed_sec"].as_f64().unwrap(),
                live["elapsed_sec"].as_f64().unwrap(),
            )
        };
        let (a, la) = read();
        assert!(a >= 0.03 && la >= 0.03, "{a} {la}");
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(
            read(),
            (a, la),
            "elapsed_sec still grows after the run ended"
        );
        assert_eq!(s.call("get_status", &Map::new()).unwrap()["state"], "done");
    }

    #[test]
    fn tunables_with_commas_are_refused() {
        let s = Arc::new(Service::default());
        for t in [
            json!({"http_cps": "10,5"}),
            json!({"a,b": 1}),
            json!({"a=b": 1}),
            json!({"list": [1, 2]}),
        ] {
            let mut p = Map::new();
            p.insert("path".into(), json!("/nonexistent/p.py"));
            p.insert("tunables".into(), t.clone());
            let e = s.call("load_profile", &p).unwrap_err();
            assert_eq!(e.code, rpc::INVALID_PARAMS, "{t}: {e:?}");
        }
        let mut p = Map::new();
        p.insert(
            "tunables".into(),
            json!({"size": 10, "name": "x y", "f": 1.5}),
        );
        assert_eq!(
            tunables(&p).unwrap(),
            vec!["f=1.5".to_string(), "name=x y".into(), "size=10".into()]
        );
    }
}
