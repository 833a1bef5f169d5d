//! Run drivers over the in-memory wire: both sides in one thread on the monotonic clock
//! (T-mem1), the deterministic simulation on a virtual clock (`--sim`), the two-thread
//! run with the client pinned to core 0 and the server to core 1 (T-mem2), and N
//! per-core shards (T-memN, [`crate::shards`]). Each returns the per-side reports;
//! progress is published through [`Live`].

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use squall_astf::sched::SchedConfig;
use squall_astf::Profile;
use squall_engine::clock::thread_cpu_ns;
use squall_engine::{Clock, MonotonicClock};
use squall_port::mem::{self, ImpairStats, Impairment, MemConfig, MemPort};
use squall_port::{Port, PortStats};
use squall_stack::PcapCap;
use squall_tcp::TcpCounters;

use crate::flowtrace::TraceRig;
use crate::gen::{tcp_config, ClientGen, Side};
use crate::stats::SideStats;

/// Run settings (already validated by the CLI).
#[derive(Clone, Debug)]
pub struct RunConfig {
    pub duration_ns: u64,
    pub mult: f64,
    /// Worker threads: 1 = both sides in one thread (T-mem1); N > 1 = N shards, each
    /// running both sides of its own flows over its own wire (T-memN), unless `split`.
    pub cores: u32,
    /// With `cores == 2`: client on core 0, server on core 1 over one wire (T-mem2).
    pub split: bool,
    /// Deterministic virtual-clock simulation (single thread).
    pub sim: bool,
    /// Overrides the profile's scheduler seed; also seeds hosts and impairment.
    pub seed: Option<u64>,
    /// In-flight flows get this long after the duration before they are cut.
    pub drain_ns: u64,
    /// A flow cut with no payload byte moved for this long (and not sleeping on its own
    /// program timer) counts as `stalled`, an error; other cut flows are not errors.
    pub stall_ns: u64,
    /// Capture the first N flows (single-threaded runs only).
    pub pcap_flows: Option<usize>,
    /// Impairment of both wire directions.
    pub impair: Impairment,
    /// Flow table size of each host.
    pub max_flows: u32,
    /// Derive the hosts' TCP secrets from the seed outside `--sim` too (`--fixed-keys`):
    /// reproducible, and predictable by anyone who knows the seed (see [`host_secret`]).
    pub fixed_keys: bool,
    /// 802.1Q VLAN id of every frame (both sides; real ports: the side(s) Squall plays).
    pub vlan: Option<u16>,
    /// Flow tracing (`--trace`).
    pub trace: Option<crate::flowtrace::TraceSpec>,
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            duration_ns: 1_000_000_000,
            mult: 1.0,
            cores: 1,
            split: false,
            sim: false,
            seed: None,
            drain_ns: 5_000_000_000,
            stall_ns: crate::gen::DEFAULT_STALL_NS,
            pcap_flows: None,
            impair: Impairment::default(),
            max_flows: 262_144,
            fixed_keys: false,
            vlan: None,
            trace: None,
        }
    }
}

/// What one side reports at the end.
#[derive(Clone, Debug, Default)]
pub struct SideReport {
    pub tcp: TcpCounters,
    pub app: SideStats,
    pub port: PortStats,
    pub impair: ImpairStats,
    /// CPU time of the thread(s) that ran this side (shared thread: both sides' total).
    pub cpu_ns: u64,
    /// Flows still held by the host at the end (TIME_WAIT included).
    pub still_open: u64,
    /// Flows with a running program at the end (should be 0: the rest were cut).
    pub live_end: u64,
    /// Of `live_end`: UDP flows.
    pub udp_live_end: u64,
    /// Most flows running at once.
    pub peak_active: u64,
    /// Loop turns in which no flow was opened because the wire's frame pools ran low
    /// (client side; the generator was over capacity then).
    pub throttled_turns: u64,
    /// Frames that reached the queue of another worker of the port and were forwarded to
    /// the one owning their flow (software redirect, `--cores N` on a real port).
    pub rx_redirected: u64,
    /// Frames the redirect dropped (ring to the owner full, frame too large).
    pub redirect_dropped: u64,
    /// The side's workers were joined by a redirect mesh.
    pub redirect_mesh: bool,
    /// IP fragments received for the side's addresses (real ports), the datagrams they
    /// made whole, and those lost (timed out, overlapping, malformed, no room).
    pub ip_fragments: u64,
    pub ip_reassembled: u64,
    pub ip_reasm_dropped: u64,
    /// The next hop's moves heard on the side's port (announcements, answers to
    /// probes), the probes sent to it, and the times every unicast probe went unanswered
    /// (real ports).
    pub next_hop_moved: u64,
    pub next_hop_probes: u64,
    pub next_hop_unreachable: u64,
}

/// Result of a run.
#[derive(Clone, Debug, Default)]
pub struct RunResult {
    pub client: SideReport,
    pub server: SideReport,
    /// Wall (or virtual) time from start to end of the drain.
    pub elapsed_ns: u64,
    /// Generation time (the duration).
    pub gen_ns: u64,
    /// The run's stall time ([`RunConfig::stall_ns`]).
    pub stall_ns: u64,
    /// CPU time of every worker thread together.
    pub cpu_ns: u64,
    /// Share of `cpu_ns` spent in loop iterations that did work (real-time modes: idle
    /// polling excluded by scaling with the busy share of the loop's wall time, the
    /// CPU of the loop's idle sleeps left out, [`Busy`]; the simulation counts
    /// everything).
    pub busy_cpu_ns: u64,
    /// The part of `cpu_ns` the loops' idle sleeps cost (their system calls, timers and
    /// wake-ups), which no turn spent.
    pub sleep_cpu_ns: u64,
    /// The pcap file, if requested.
    pub pcap: Option<Vec<u8>>,
    /// The traced flows (`--trace`).
    pub trace: Option<crate::flowtrace::TraceData>,
    /// Both sides ran over the in-memory wire with no impairment configured: nothing can
    /// be lost, so any retransmission is a stall (reported as a warning).
    pub wire_unimpaired: bool,
}

/// Live figures published by the workers (relaxed atomics, read by the progress line).
#[derive(Debug, Default)]
pub struct Live {
    pub started: AtomicU64,
    pub completed: AtomicU64,
    pub errors: AtomicU64,
    pub active: AtomicU64,
    pub wire_bytes: AtomicU64,
    /// Per-side errors/bytes for the two-thread mode.
    pub server_errors: AtomicU64,
    pub server_wire_bytes: AtomicU64,
    /// Server port counters published every turn (two-thread pressure estimate).
    pub server_tx_frames: AtomicU64,
    pub server_rx_frames: AtomicU64,
    pub server_alloc_fail: AtomicU64,
    /// Frames sent by the client / server side's port (published with the figures above;
    /// read by the time series for Mpps).
    pub tx_frames: AtomicU64,
    pub server_frames: AtomicU64,
    /// Wall time of the worker's loop turns that did work, and of all its turns (ns;
    /// single-threaded workers and shards): the core's load is their ratio.
    pub busy_ns: AtomicU64,
    pub loop_ns: AtomicU64,
    /// The shards of a `--cores N` run, each publishing its own figures (set once by
    /// [`crate::shards::run_shards`] before they start; the time series reads them).
    pub shards: OnceLock<Vec<Arc<Live>>>,
    pub done: AtomicBool,
    /// Live control of the run: stop, cut, rate (`squall daemon`; the live view's keys and
    /// SIGINT/SIGTERM in `squall run`).
    pub ctl: Control,
}

/// Live control of a run (`squall daemon`, the live view, signals): written by the
/// control thread and read by every worker once per loop turn (a stop is stored with
/// Release after its cut, read with Acquire; the rest relaxed). Per-side snapshots are
/// published every [`SNAP_NS`] with `try_lock` only, so the data path never waits.
#[derive(Debug, Default)]
pub struct Control {
    /// Stop opening flows now; in-flight flows get the run's drain time (or are cut).
    pub stop: AtomicBool,
    /// With `stop`: cut in-flight flows at once instead of draining them.
    pub cut: AtomicBool,
    mult_bits: AtomicU64,
    mult_seq: AtomicU64,
    /// Publish per-side snapshots for live statistics.
    pub snapshots: AtomicBool,
    /// With `snapshots`: publish only when a reader asks ([`Snapshot::request`]), not
    /// every [`SNAP_NS`] (`squall run` reads once a second; a report costs about a
    /// millisecond with W1's histograms).
    pub on_request: AtomicBool,
    pub client: Snapshot,
    pub server: Snapshot,
}

/// What one worker has applied of its run's [`Control`].
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct CtlSeen {
    /// The rate change last applied (`Control`'s sequence number).
    mult: u64,
    /// When a stop was applied (no new flows from then; the drain runs from there).
    pub(crate) stopped_at: Option<u64>,
    /// A cut was applied (the hard end is now).
    cut: bool,
}

/// The latest published report of one side.
#[derive(Debug, Default)]
pub struct Snapshot {
    last_ns: AtomicU64,
    requested: AtomicBool,
    pub report: Mutex<Option<SideReport>>,
}

impl Snapshot {
    /// Asks the worker for a fresh report at its next publication (within 10 ms).
    pub fn request(&self) {
        self.requested.store(true, Ordering::Relaxed);
    }
}

/// Period of the live snapshots.
pub const SNAP_NS: u64 = 200_000_000;

impl Control {
    /// Requests a new rate multiplier (applied by the client worker at its next turn).
    pub fn set_mult(&self, mult: f64) {
        self.mult_bits.store(mult.to_bits(), Ordering::Relaxed);
        self.mult_seq.fetch_add(1, Ordering::Release);
    }
    /// Stops the run: no new flows, those in flight drain, or with `cut` end at once. The
    /// cut is stored before the stop (Release), which workers read with Acquire: a worker
    /// that sees the stop sees its cut. A cut is never undone by a later drain.
    pub fn request_stop(&self, cut: bool) {
        if cut {
            self.cut.store(true, Ordering::Relaxed);
        }
        self.stop.store(true, Ordering::Release);
    }

    /// The rate change requested here since `seen` (the last one passed on), if any:
    /// the multiplier, read once, to give every shard or worker; `seen` moves on.
    pub(crate) fn new_mult(&self, seen: &mut u64) -> Option<f64> {
        let seq = self.mult_seq.load(Ordering::Acquire);
        if seq == *seen {
            return None;
        }
        *seen = seq;
        Some(f64::from_bits(self.mult_bits.load(Ordering::Relaxed)))
    }

    /// Applies pending requests to `c` (the client side: a rate change, a stop of new
    /// flows; a server side only takes the end): returns the (maybe earlier) hard end.
    /// The flags are read, not cleared, so every worker of a run sees them; `seen` keeps
    /// what this one has applied already. The common turn is two loads.
    pub(crate) fn apply<P: Port>(
        &self,
        seen: &mut CtlSeen,
        c: &mut Side<P>,
        now: u64,
        hard: u64,
        drain: u64,
    ) -> u64 {
        let seq = self.mult_seq.load(Ordering::Acquire);
        if seq != seen.mult {
            seen.mult = seq;
            let m = f64::from_bits(self.mult_bits.load(Ordering::Relaxed));
            if let Some(g) = c.gen.client.as_mut() {
                g.set_mult(now, m);
            }
        }
        // Acquire: a cut is stored before its stop (Release), so it is seen with it.
        if seen.cut || !self.stop.load(Ordering::Acquire) {
            return hard;
        }
        let at = *seen.stopped_at.get_or_insert_with(|| {
            if let Some(g) = c.gen.client.as_mut() {
                g.stop_at(now);
            }
            now
        });
        if self.cut.load(Ordering::Relaxed) {
            seen.cut = true;
            return hard.min(now);
        }
        hard.min(at.saturating_add(drain))
    }
    /// Publishes `s`'s report into `slot` if snapshots are on and one is due.
    fn publish(&self, slot: &Snapshot, s: &Side<MemPort>, cpu0: u64, now: u64) {
        self.publish_with(slot, now, |g| {
            let cpu = thread_cpu_ns().saturating_sub(cpu0);
            match g.as_mut() {
                Some(r) => report_into(r, s, cpu),
                None => *g = Some(report(s, cpu)),
            }
        });
    }
    /// Publishes into `slot` with `fill` if snapshots are on and one is due (with
    /// `try_lock` only: a slot the reader holds is filled at a later turn).
    pub(crate) fn publish_with(
        &self,
        slot: &Snapshot,
        now: u64,
        fill: impl FnOnce(&mut Option<SideReport>),
    ) {
        if !self.snapshots.load(Ordering::Relaxed) {
            return;
        }
        let asked = slot.requested.load(Ordering::Relaxed);
        let due = if self.on_request.load(Ordering::Relaxed) {
            asked
        } else {
            asked || now.saturating_sub(slot.last_ns.load(Ordering::Relaxed)) >= SNAP_NS
        };
        if !due {
            return;
        }
        if let Ok(mut g) = slot.report.try_lock() {
            fill(&mut g);
            slot.last_ns.store(now, Ordering::Relaxed);
            slot.requested.store(false, Ordering::Relaxed);
        }
    }
}

pub(crate) fn publish_client<P: Port>(live: &Live, s: &Side<P>) {
    let t = s.gen.app.stats.total();
    live.started.store(t.started, Ordering::Relaxed);
    live.completed.store(t.completed, Ordering::Relaxed);
    live.errors
        .store(s.gen.app.stats.errors(), Ordering::Relaxed);
    live.active.store(s.gen.app.live, Ordering::Relaxed);
    let ps = s.node.port.stats();
    live.wire_bytes.store(ps.tx_bytes, Ordering::Relaxed);
    live.tx_frames.store(ps.tx_frames, Ordering::Relaxed);
}

pub(crate) fn publish_server<P: Port>(live: &Live, s: &Side<P>) {
    live.server_errors
        .store(s.gen.app.stats.errors(), Ordering::Relaxed);
    let ps = s.node.port.stats();
    live.server_wire_bytes.store(ps.tx_bytes, Ordering::Relaxed);
    live.server_frames.store(ps.tx_frames, Ordering::Relaxed);
}

fn report(s: &Side<MemPort>, cpu_ns: u64) -> SideReport {
    let mut r = SideReport::default();
    report_into(&mut r, s, cpu_ns);
    r
}

/// [`report`] into `out`, reusing its histograms (the live snapshots).
fn report_into(out: &mut SideReport, s: &Side<MemPort>, cpu_ns: u64) {
    let mut app = std::mem::take(&mut out.app);
    s.stats_into(&mut app);
    *out = SideReport {
        tcp: s.node.tcp.counters().clone(),
        app,
        port: s.node.port.stats(),
        impair: s.node.port.impair_stats(),
        cpu_ns,
        still_open: s.node.tcp.flow_count() as u64,
        live_end: s.gen.app.live,
        udp_live_end: s.gen.udp.live,
        peak_active: s.gen.app.peak_live,
        ..SideReport::default()
    };
}

/// Frames in each side's pool of the wire: a bounded, cache-hot set like a NIC's TX
/// ring, whatever the number of flows. A flow that finds the pool empty waits on the
/// host's resume list (`TcpHost::tx_resume`, called after every RX burst and every
/// turn) and no new flow is opened meanwhile; nothing is lost or retransmitted.
const POOL_FRAMES: u32 = 1024;
/// The pool of a single-threaded run on an unimpaired wire. One core writes and reads
/// every frame of both pools, and the frames in flight (bounded by the pool) are its
/// cache working set: 512 frames of 2 KiB per side keep both pools in a 2 MiB L2 (W1 at
/// saturation costs ~25% less CPU per flow than with 1,024). Impaired wires (delayed
/// frames stay in the pool) and two-thread runs keep the larger pool.
const POOL_FRAMES_HOT: u32 = 512;

/// Frames in each side's pool for a run.
fn pool_frames(cfg: &RunConfig) -> u32 {
    if cfg.impair.is_active() || (cfg.split && !cfg.sim) {
        POOL_FRAMES
    } else {
        POOL_FRAMES_HOT
    }
}

/// With more frames than this waiting on either direction of the wire, no new flow is
/// opened (real-time runs).
fn high_frames(pool: u32) -> u64 {
    u64::from(pool) / 2
}

/// Wire pressure seen by a single-threaded run: frames sent but not yet received on
/// either direction (port counters), or, when impairment drops frames, any new
/// allocation failure since the last turn.
struct Pressure {
    impaired: bool,
    /// [`high_frames`] of the run's pool.
    high: u64,
    alloc_fail: u64,
}

impl Pressure {
    fn new(impaired: bool, pool: u32) -> Self {
        Pressure {
            impaired,
            high: high_frames(pool),
            alloc_fail: 0,
        }
    }
    fn high(&mut self, a: &MemPort, b: &MemPort) -> bool {
        self.high_stats(a.stats(), b.stats())
    }
    /// Two threads: the server's counters come from its last published turn.
    fn high_live(&mut self, a: &MemPort, live: &Live) -> bool {
        let sb = PortStats {
            tx_frames: live.server_tx_frames.load(Ordering::Relaxed),
            rx_frames: live.server_rx_frames.load(Ordering::Relaxed),
            alloc_fail: live.server_alloc_fail.load(Ordering::Relaxed),
            ..PortStats::default()
        };
        self.high_stats(a.stats(), sb)
    }
    fn high_stats(&mut self, sa: PortStats, sb: PortStats) -> bool {
        if self.impaired {
            let f = sa.alloc_fail + sb.alloc_fail;
            let grew = f > self.alloc_fail;
            self.alloc_fail = f;
            return grew;
        }
        sa.tx_frames.saturating_sub(sb.rx_frames) > self.high
            || sb.tx_frames.saturating_sub(sa.rx_frames) > self.high
    }
}
/// Most flows opened per loop turn in real-time runs.
const START_BUDGET: usize = 256;

/// Lead between reading the clock and the first scheduled flow (real-time runs).
pub(crate) const START_LEAD_NS: u64 = 100_000_000;

/// Sleeps (then spins the last 100 us) until the clock reaches `t`.
pub(crate) fn wait_until(clock: &MonotonicClock, t: u64) {
    loop {
        let now = clock.now_ns();
        if now >= t {
            return;
        }
        if t - now > 200_000 {
            std::thread::sleep(Duration::from_nanos(t - now - 100_000));
        } else {
            std::hint::spin_loop();
        }
    }
}

/// The time of a polling loop: the wall time of its turns and of those that did work,
/// the thread CPU it has used, and the part of that its idle sleeps cost.
///
/// A loop reads the clock once per turn ([`Busy::end_turn`]): the reading that ends a
/// turn starts the next, so every turn is timed from one reading to the next (nothing
/// between two turns goes uncounted) and the loop pays one clock call per turn, not two
/// (a vDSO `clock_gettime` is ~21 ns on this VM, and memif's W1 server turns ~9 million
/// times a second, most of them idle). A sleep between turns ([`Busy::sleep`]) is no
/// turn, and the thread CPU it costs (its system call, timer and wake-up: ~21 µs per
/// 50 µs sleep on this VM) is left out of the loop's CPU: the busy figure
/// ([`Busy::busy_cpu`]) is the loop's CPU scaled by the share of its turns' time that
/// did work.
#[derive(Default)]
pub(crate) struct Busy {
    pub(crate) busy_ns: u64,
    pub(crate) all_ns: u64,
    /// Thread CPU spent in the loop's sleeps.
    pub(crate) sleep_cpu_ns: u64,
    /// Thread CPU at the loop's start.
    cpu0: u64,
}

impl Busy {
    /// A loop starting now: its accounting and its first clock reading.
    pub(crate) fn start(clock: &impl Clock) -> (Busy, u64) {
        let b = Busy {
            cpu0: thread_cpu_ns(),
            ..Busy::default()
        };
        (b, clock.now_ns())
    }

    /// Ends a turn that started at `start`, `work` as it said: the turn's one clock
    /// reading, returned as the next turn's start.
    #[inline]
    pub(crate) fn end_turn(&mut self, clock: &impl Clock, start: u64, work: bool) -> u64 {
        let t = clock.now_ns();
        let d = t.saturating_sub(start);
        self.all_ns += d;
        if work {
            self.busy_ns += d;
        }
        t
    }

    /// Sleeps `d` between two turns; returns the clock reading after it (the next
    /// turn's start). Its thread CPU is counted apart.
    pub(crate) fn sleep(&mut self, clock: &impl Clock, d: Duration) -> u64 {
        let c = thread_cpu_ns();
        std::thread::sleep(d);
        self.sleep_cpu_ns += thread_cpu_ns().saturating_sub(c);
        clock.now_ns()
    }

    /// The thread CPU of the turns that did work so far: the loop's CPU since
    /// [`Busy::start`], its sleeps left out, scaled by the busy share of its turns' time.
    pub(crate) fn busy_cpu(&self) -> u64 {
        self.busy_cpu_at(thread_cpu_ns())
    }

    /// [`Busy::busy_cpu`] with the thread's CPU clock reading `cpu_now`.
    fn busy_cpu_at(&self, cpu_now: u64) -> u64 {
        let cpu = cpu_now
            .saturating_sub(self.cpu0)
            .saturating_sub(self.sleep_cpu_ns);
        if self.all_ns == 0 {
            return cpu;
        }
        (cpu as u128 * self.busy_ns as u128 / self.all_ns as u128) as u64
    }
}

/// Seed actually used.
fn seed_of(p: &Profile, cfg: &RunConfig) -> u64 {
    cfg.seed.unwrap_or(p.scheduler.seed)
}

/// The TCP secret of one host (`TcpConfig::seed`: ISN and SYN-cookie key, flow-table hash
/// seed). The rule: `--sim` (virtual clock) and `--fixed-keys` derive it from the run's
/// seed (`derived`), so a run repeats exactly; every other run (real time, the memory wire
/// or a real interface, client or server, and the daemon's runs) takes it from the OS
/// random source, since a known key lets an off-path attacker predict ISNs and forge SYN
/// cookies.
pub fn host_secret(cfg: &RunConfig, derived: u64) -> Result<u64, String> {
    if cfg.sim || cfg.fixed_keys {
        Ok(derived)
    } else {
        squall_tcp::TcpConfig::random_seed().map_err(|e| format!("OS random source: {e}"))
    }
}

fn mem_config(p: &Profile, cfg: &RunConfig) -> MemConfig {
    let mss = p
        .templates
        .iter()
        .flat_map(|t| [t.client.tcp.mss, t.server.tcp.mss])
        .max()
        .unwrap_or(1460);
    // The largest UDP datagram a program sends (with IPv6 and UDP headers: 48 bytes) needs an
    // MTU of its own, as the largest TCP segment does.
    let udp = p
        .programs
        .iter()
        .flat_map(|pr| pr.insns.iter())
        .filter_map(|i| match i {
            squall_astf::Insn::SendMsg { buf } => p.buffers.get(buf.0 as usize),
            _ => None,
        })
        .map(|b| b.data.len() as u32 + 48)
        .max()
        .unwrap_or(0);
    let mtu = (u32::from(mss) + 40).max(udp).clamp(1500, 9000) as u16;
    let headroom = 128u16;
    let frame_size = (u32::from(mtu) + 18 + u32::from(headroom)).next_power_of_two();
    let seed = seed_of(p, cfg);
    let mut a_to_b = cfg.impair.clone();
    a_to_b.seed = seed ^ 0xa2b;
    let mut b_to_a = cfg.impair.clone();
    b_to_a.seed = seed ^ 0xb2a;
    MemConfig {
        frames: pool_frames(cfg),
        frame_size,
        headroom,
        // Room for every frame of the pool (and duplicates): a full ring never holds up TX.
        ring_size: 2 * pool_frames(cfg),
        mtu,
        a_to_b,
        b_to_a,
        ..MemConfig::default()
    }
}

/// Which share of the run one worker plays: shard `index` of `count` (the scheduler
/// opens `1/count` of every template's flows there, from the core's own addresses and
/// ports; see `squall_astf::alloc`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Shard {
    pub index: u32,
    pub count: u32,
}

impl Shard {
    pub(crate) const ONE: Shard = Shard { index: 0, count: 1 };
    /// Mixes the shard into a seed (shard 0 of 1 keeps the seed as it was).
    fn seed(self, seed: u64) -> u64 {
        seed ^ (u64::from(self.index) << 40)
    }
}

fn sides(
    profile: &Arc<Profile>,
    cfg: &RunConfig,
    t0: u64,
    shard: Shard,
) -> Result<(Side<MemPort>, Side<MemPort>), String> {
    let mc = mem_config(profile, cfg);
    let (pa, pb) = mem::pair(mc.clone()).map_err(|e| e.to_string())?;
    let seed = seed_of(profile, cfg);
    let mut sc = SchedConfig::from_profile(
        profile,
        cfg.mult,
        Some(cfg.duration_ns),
        shard.index,
        shard.count,
    );
    sc.start_ns = t0;
    sc.seed = seed;
    let cg = ClientGen::new(profile, &sc)?;
    let t = &profile.templates[0];
    let hs = shard.seed(seed);
    let (ck, sk) = (
        host_secret(cfg, hs ^ 0xc11e)?,
        host_secret(cfg, hs ^ 0x5e4e)?,
    );
    let ccfg = tcp_config(&t.client, mc.mac_a, mc.mac_b, cfg.max_flows, ck);
    let scfg = tcp_config(&t.server, mc.mac_b, mc.mac_a, cfg.max_flows, sk);
    let mut c = Side::new(profile.clone(), pa, ccfg, Some(cg), t0, hs ^ 0x1);
    let mut s = Side::new(profile.clone(), pb, scfg, None, t0, hs ^ 0x2);
    c.node.set_vlan(cfg.vlan);
    s.node.set_vlan(cfg.vlan);
    c.gen.app.stall_ns = cfg.stall_ns;
    s.gen.app.stall_ns = cfg.stall_ns;
    Ok((c, s))
}

/// Runs a profile. `live` receives progress (real-time modes).
pub fn run(profile: Arc<Profile>, cfg: &RunConfig, live: Arc<Live>) -> Result<RunResult, String> {
    if profile.templates.is_empty() {
        return Err("the profile has no template".into());
    }
    if cfg.sim {
        run_single(&profile, cfg, None, &live, Shard::ONE, None)
    } else if cfg.cores >= 2 {
        if cfg.pcap_flows.is_some() {
            return Err("--pcap needs a single-threaded run (--cores 1 or --sim)".into());
        }
        if cfg.split {
            run_two(profile, cfg, live)
        } else {
            crate::shards::run_shards(profile, cfg, live)
        }
    } else {
        let clock = MonotonicClock::new();
        let cfg2 = cfg.clone();
        let live2 = live.clone();
        std::thread::Builder::new()
            .name("squall-w0".into())
            .spawn(move || {
                let _ = squall_engine::affinity::pin_current_thread(0);
                run_single(&profile, &cfg2, Some(&clock), &live2, Shard::ONE, None)
            })
            .map_err(|e| e.to_string())?
            .join()
            .map_err(|_| "worker thread panicked".to_string())?
    }
}

/// One turn of the client side in [`run_single`], not inlined so that callgrind splits a
/// run's instructions by side (`--toggle-collect='squall::run::client_turn*'`).
#[inline(never)]
fn client_turn(c: &mut Side<MemPort>, now: u64, pcap: Option<&mut PcapCap>) -> bool {
    c.iterate(now, pcap)
}

/// One turn of the server side in [`run_single`] (see [`client_turn`]). Its arguments
/// come in another order so that the linker does not fold the two identical bodies
/// into one symbol.
#[inline(never)]
fn server_turn(now: u64, s: &mut Side<MemPort>, pcap: Option<&mut PcapCap>) -> bool {
    s.iterate(now, pcap)
}

/// Both sides of `shard`'s flows in one thread; `clock` None = virtual time. `t0`: the
/// common start of several shards (default: a little after now).
pub(crate) fn run_single(
    profile: &Arc<Profile>,
    cfg: &RunConfig,
    clock: Option<&MonotonicClock>,
    live: &Live,
    shard: Shard,
    t0: Option<u64>,
) -> Result<RunResult, String> {
    let cpu0 = thread_cpu_ns();
    // Real time: start a little ahead so that building the sides (frame pools, flow
    // tables) does not delay the first scheduled flows.
    let t0 = t0.unwrap_or_else(|| clock.map_or(1_000_000_000, |c| c.now_ns() + START_LEAD_NS));
    let (mut c, mut s) = sides(profile, cfg, t0, shard)?;
    if let Some(ck) = clock {
        wait_until(ck, t0);
    }
    let mut pcap = cfg.pcap_flows.map(PcapCap::new);
    if let Some(spec) = &cfg.trace {
        pcap = Some(TraceRig::install(
            spec,
            profile,
            Some(&mut c),
            Some(&mut s),
            false,
        )?);
    }
    let stop = t0 + cfg.duration_ns;
    let mut hard = stop + cfg.drain_ns;
    let mut ctl_seen = CtlSeen::default();
    let mut now = t0;
    let mut last_pub = 0u64;
    let mut same_time = 0u64;
    let mut busy = clock.map(|ck| Busy::start(ck).0).unwrap_or_default();
    let mut throttled = 0u64;
    let mut pressure = Pressure::new(cfg.impair.is_active(), pool_frames(cfg));
    if clock.is_some() {
        c.gen.pace = Some(START_BUDGET);
    }
    // Real time: the reading that ended the last turn (None: read the clock).
    let mut turn_end: Option<u64> = None;
    loop {
        if let Some(ck) = clock {
            now = turn_end.take().unwrap_or_else(|| ck.now_ns());
        }
        if clock.is_some() {
            c.gen.throttle = pressure.high(&c.node.port, &s.node.port);
            throttled += u64::from(c.gen.throttle);
        }
        // A stop or a rate change from the daemon: in a simulation too (its clock is
        // virtual, the request is not).
        hard = live
            .ctl
            .apply(&mut ctl_seen, &mut c, now, hard, cfg.drain_ns);
        let w1 = client_turn(&mut c, now, pcap.as_mut());
        let w2 = server_turn(now, &mut s, pcap.as_mut());
        if let Some(ck) = clock {
            turn_end = Some(busy.end_turn(ck, now, w1 || w2));
        }
        if c.is_idle() && s.is_idle() {
            break;
        }
        if now >= hard {
            c.cut_all(now, pcap.as_mut());
            s.cut_all(now, pcap.as_mut());
            // Let each side see the other's RSTs (the flows are gone either way).
            s.iterate(now, pcap.as_mut());
            c.iterate(now, pcap.as_mut());
            break;
        }
        // Live figures and the daemon's snapshots every 10 ms (of virtual time in a
        // simulation: `get_stats` follows a simulated run too).
        if now.saturating_sub(last_pub) >= 10_000_000 {
            last_pub = now;
            publish_client(live, &c);
            publish_server(live, &s);
            if clock.is_some() {
                live.busy_ns.store(busy.busy_ns, Ordering::Relaxed);
                live.loop_ns.store(busy.all_ns, Ordering::Relaxed);
            }
            live.ctl.publish(&live.ctl.client, &c, cpu0, now);
            live.ctl.publish(&live.ctl.server, &s, cpu0, now);
        }
        match clock {
            None => {
                let next = [c.next_event(now), s.next_event(now), Some(hard)]
                    .into_iter()
                    .flatten()
                    .min()
                    .unwrap_or(hard);
                if next <= now {
                    same_time += 1;
                    if same_time > 10_000_000 {
                        return Err("simulation made no progress (stuck at one instant): the in-memory wire has no latency, so a program looping on time (jmp_dp) with sends or receives that complete at once never sees time pass; give the wire a delay (--impair delay_us=50) or run in real time (without --sim)".into());
                    }
                } else {
                    same_time = 0;
                    now = next;
                }
            }
            Some(_) => {
                if !w1 && !w2 && c.gen.app.live == 0 && s.gen.app.live == 0 {
                    let next = [c.next_event(now), s.next_event(now)]
                        .into_iter()
                        .flatten()
                        .min()
                        .unwrap_or(now + 1_000_000);
                    if let (Some(ck), true) = (clock, next > now + 1_000_000) {
                        turn_end = Some(busy.sleep(ck, Duration::from_micros(200)));
                    }
                }
            }
        }
    }
    let busy_cpu = busy.busy_cpu();
    publish_client(live, &c);
    publish_server(live, &s);
    live.done.store(true, Ordering::Relaxed);
    c.release_frames();
    s.release_frames();
    let cpu = thread_cpu_ns().saturating_sub(cpu0);
    let (pcap, trace) = match (&cfg.trace, pcap) {
        (Some(_), Some(p)) => (
            None,
            Some(TraceRig::finish(
                p,
                profile,
                shard.index,
                Some(&mut c),
                Some(&mut s),
            )),
        ),
        (_, p) => (p.map(PcapCap::into_bytes), None),
    };
    let mut client = report(&c, cpu);
    client.throttled_turns = throttled;
    Ok(RunResult {
        client,
        server: report(&s, cpu),
        elapsed_ns: now - t0,
        gen_ns: c.gen.generation_ns(t0, cfg.duration_ns),
        stall_ns: cfg.stall_ns,
        cpu_ns: cpu,
        busy_cpu_ns: if clock.is_some() { busy_cpu } else { cpu },
        sleep_cpu_ns: busy.sleep_cpu_ns,
        pcap,
        trace,
        wire_unimpaired: cfg.impair == Impairment::default(),
    })
}

/// Client on core 0, server on core 1, over the cross-thread mem wire.
fn run_two(profile: Arc<Profile>, cfg: &RunConfig, live: Arc<Live>) -> Result<RunResult, String> {
    let origin = Instant::now();
    let clock = MonotonicClock::with_origin(origin);
    // Common start a little ahead so both threads are up and the sides are built.
    let t0 = clock.now_ns() + START_LEAD_NS;
    let (mut c, mut s) = sides(&profile, cfg, t0, Shard::ONE)?;
    // Flow tracing: each thread its own capture of what its side sends.
    let (ctap, stap) = match &cfg.trace {
        Some(spec) => {
            let (a, b) = TraceRig::install_split(spec, &profile, &mut c, &mut s)?;
            (Some(a), Some(b))
        }
        None => (None, None),
    };
    let stop = t0 + cfg.duration_ns;
    let hard = stop + cfg.drain_ns;
    let impaired = cfg.impair.is_active();
    let pool = pool_frames(cfg);
    let (drain_ns, duration_ns) = (cfg.drain_ns, cfg.duration_ns);
    let client_done = Arc::new(AtomicBool::new(false));
    let cd = client_done.clone();
    // A cut (the drain's end, a second stop): both sides cut their flows as T-mem1 does
    // in one turn. The client asks, the server cuts its own and says so, then the client
    // cuts; neither reads the other's RSTs, which would count as resets by the peer.
    let (cut_asked, server_cut) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let (ca, sc) = (cut_asked.clone(), server_cut.clone());
    let live_c = live.clone();
    let ct = std::thread::Builder::new()
        .name("squall-client".into())
        .spawn(move || {
            let _ = squall_engine::affinity::pin_current_thread(0);
            let (mut c, mut tap) = (c, ctap);
            let cpu0 = thread_cpu_ns();
            wait_until(&clock, t0);
            let mut last_pub = 0;
            let mut throttled = 0u64;
            let mut pressure = Pressure::new(impaired, pool);
            let (mut hard, mut ctl_seen, drain) = (hard, CtlSeen::default(), drain_ns);
            c.gen.pace = Some(START_BUDGET);
            let (mut busy, mut now) = Busy::start(&clock);
            loop {
                c.gen.throttle = pressure.high_live(&c.node.port, &live_c);
                throttled += u64::from(c.gen.throttle);
                hard = live_c.ctl.apply(&mut ctl_seen, &mut c, now, hard, drain);
                let w = c.iterate(now, tap.as_mut());
                let turn_end = busy.end_turn(&clock, now, w);
                if c.is_idle() {
                    break;
                }
                if now >= hard {
                    ca.store(true, Ordering::Release);
                    let asked = Instant::now();
                    while !sc.load(Ordering::Acquire)
                        && asked.elapsed() < Duration::from_millis(200)
                    {
                        std::thread::sleep(Duration::from_micros(100));
                    }
                    c.cut_all(clock.now_ns(), tap.as_mut());
                    break;
                }
                if now - last_pub >= 10_000_000 {
                    last_pub = now;
                    publish_client(&live_c, &c);
                    live_c.ctl.publish(&live_c.ctl.client, &c, cpu0, now);
                }
                now = turn_end;
                if !w && c.gen.app.live == 0 {
                    let next = c.next_event(now).unwrap_or(now + 1_000_000);
                    if next > now + 1_000_000 {
                        now = busy.sleep(&clock, Duration::from_micros(200));
                    }
                }
            }
            let busy_cpu = busy.busy_cpu();
            publish_client(&live_c, &c);
            cd.store(true, Ordering::Release);
            c.release_frames();
            let cpu = thread_cpu_ns().saturating_sub(cpu0);
            let mut rep = report(&c, cpu);
            rep.throttled_turns = throttled;
            let trace = tap.map(|p| (p.records_all(), TraceRig::client_part(&mut c)));
            let gen_ns = c.gen.generation_ns(t0, duration_ns);
            (rep, now, (busy_cpu, busy.sleep_cpu_ns), trace, gen_ns)
        })
        .map_err(|e| e.to_string())?;
    let live_s = live.clone();
    let st = std::thread::Builder::new()
        .name("squall-server".into())
        .spawn(move || {
            let _ = squall_engine::affinity::pin_current_thread(1);
            let (mut s, mut tap) = (s, stap);
            wait_until(&clock, t0);
            let cpu0 = thread_cpu_ns();
            let mut last_pub = 0;
            let mut done_at = None;
            let (mut busy, mut now) = Busy::start(&clock);
            loop {
                if cut_asked.load(Ordering::Acquire) {
                    s.cut_all(now, tap.as_mut());
                    server_cut.store(true, Ordering::Release);
                    break;
                }
                let w = s.iterate(now, tap.as_mut());
                let turn_end = busy.end_turn(&clock, now, w);
                let ps = s.node.port.stats();
                live_s
                    .server_tx_frames
                    .store(ps.tx_frames, Ordering::Relaxed);
                live_s
                    .server_rx_frames
                    .store(ps.rx_frames, Ordering::Relaxed);
                live_s
                    .server_alloc_fail
                    .store(ps.alloc_fail, Ordering::Relaxed);
                if client_done.load(Ordering::Acquire) {
                    // Let the client's last frames (final ACKs, RSTs) arrive.
                    let d = *done_at.get_or_insert(now);
                    if s.is_idle() || now >= d + 50_000_000 {
                        if !s.is_idle() {
                            s.cut_all(now, tap.as_mut());
                        }
                        break;
                    }
                }
                if now >= hard + 100_000_000 {
                    s.cut_all(now, tap.as_mut());
                    break;
                }
                if now - last_pub >= 10_000_000 {
                    last_pub = now;
                    publish_server(&live_s, &s);
                    live_s.ctl.publish(&live_s.ctl.server, &s, cpu0, now);
                }
                now = turn_end;
                if !w && s.gen.app.live == 0 {
                    now = busy.sleep(&clock, Duration::from_micros(50));
                }
            }
            let busy_cpu = busy.busy_cpu();
            publish_server(&live_s, &s);
            s.release_frames();
            let cpu = thread_cpu_ns().saturating_sub(cpu0);
            let trace = tap.map(|p| (p.records_all(), s.node.tcp.take_tracer()));
            (report(&s, cpu), (busy_cpu, busy.sleep_cpu_ns), trace)
        })
        .map_err(|e| e.to_string())?;
    let (client, end, cbusy, ctrace, gen_ns) = ct.join().map_err(|_| "client thread panicked")?;
    let (server, sbusy, strace) = st.join().map_err(|_| "server thread panicked")?;
    live.done.store(true, Ordering::Relaxed);
    let trace = match (ctrace, strace) {
        (Some((mut frames, cpart)), Some((sframes, spart))) => {
            frames.extend(sframes);
            frames.sort_by_key(|r| r.ts_ns);
            Some(TraceRig::finish_parts(frames, &profile, 0, cpart, spart))
        }
        _ => None,
    };
    Ok(RunResult {
        cpu_ns: client.cpu_ns + server.cpu_ns,
        busy_cpu_ns: cbusy.0 + sbusy.0,
        sleep_cpu_ns: cbusy.1 + sbusy.1,
        client,
        server,
        elapsed_ns: end.saturating_sub(t0),
        gen_ns,
        stall_ns: cfg.stall_ns,
        pcap: None,
        trace,
        wire_unimpaired: cfg.impair == Impairment::default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    /// A clock that moves `step` ns at each reading.
    struct Steps {
        t: Cell<u64>,
        step: u64,
    }

    impl Steps {
        fn new(t: u64, step: u64) -> Self {
            Steps {
                t: Cell::new(t),
                step,
            }
        }
    }

    impl Clock for Steps {
        fn now_ns(&self) -> u64 {
            self.t.set(self.t.get() + self.step);
            self.t.get()
        }
    }

    #[test]
    fn a_loop_is_timed_with_one_reading_per_turn_and_no_gap() {
        let ck = Steps::new(1_000, 10);
        let (mut b, mut now) = Busy::start(&ck);
        assert_eq!(now, 1_010);
        for work in [true, false, false, true, true] {
            now = b.end_turn(&ck, now, work);
        }
        // Five readings for five turns, and the turns cover the loop from its first
        // reading to its last.
        assert_eq!(now, 1_060);
        assert_eq!((b.all_ns, b.busy_ns), (50, 30));
    }

    #[test]
    fn a_sleep_is_no_turn_and_its_cpu_is_not_the_loops() {
        let ck = Steps::new(0, 7);
        let (mut b, mut now) = Busy::start(&ck);
        now = b.end_turn(&ck, now, true);
        let before = now;
        now = b.sleep(&ck, Duration::from_micros(50));
        assert_eq!(
            now,
            before + 7,
            "the reading after a sleep starts the next turn"
        );
        b.end_turn(&ck, now, false);
        assert_eq!(
            (b.all_ns, b.busy_ns),
            (14, 7),
            "the sleep's wall time is no turn's"
        );
        assert!(b.sleep_cpu_ns > 0, "a sleep's system call costs thread CPU");
        // 1 ms of the loop's CPU, 400 us of it in sleeps, half of the turns' time busy:
        // 300 us busy (the sleeps' 400 us counted would make it 500).
        let b = Busy {
            busy_ns: 50,
            all_ns: 100,
            sleep_cpu_ns: 400_000,
            cpu0: 5_000_000,
        };
        assert_eq!(b.busy_cpu_at(6_000_000), 300_000);
    }

    /// The TCP secrets (`TcpConfig::seed`) of the client and server hosts `sides` builds.
    fn secrets(cfg: &RunConfig) -> [u64; 2] {
        let p = crate::source::load(
            std::path::Path::new("../../examples/w1-astf-http.json"),
            &[],
        )
        .expect("W1 profile");
        let (c, s) = sides(&Arc::new(p), cfg, 0, Shard::ONE).expect("sides");
        [c.node.tcp.config().seed, s.node.tcp.config().seed]
    }

    // Issue #10 item 6: real-time runs take their hosts' secrets (ISN and SYN-cookie key,
    // flow-table hash seed) from the OS random source; --sim and --fixed-keys derive them
    // from the seed, so two such runs have equal keys.
    /// A stop request reaches a simulation too (the daemon's `stop` of a `sim` run), and
    /// the rates then divide by the time flows were opened, not the asked duration.
    #[test]
    fn a_simulation_stops_on_request_and_rates_use_the_time_it_generated() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../examples/w1-astf-http.json"
        );
        let profile = Arc::new(squall_astf::load_profile_file(std::path::Path::new(path)).unwrap());
        let cfg = RunConfig {
            sim: true,
            duration_ns: 100_000_000_000,
            mult: 0.01,
            drain_ns: 1_000_000_000,
            ..RunConfig::default()
        };
        let live = Arc::new(Live::default());
        live.ctl.request_stop(true);
        let r = run(profile, &cfg, live).unwrap();
        assert!(r.elapsed_ns < 1_000_000_000, "ran {} ns", r.elapsed_ns);
        assert!(r.gen_ns < 1_000_000_000, "generated {} ns", r.gen_ns);
    }

    #[test]
    fn host_secrets_random_unless_sim_or_fixed_keys() {
        let real = RunConfig::default();
        let (a, b) = (secrets(&real), secrets(&real));
        assert_ne!(a, b, "two real-time runs share their secrets");
        assert_ne!(a[0], a[1], "client and server share a secret");
        let sim = RunConfig {
            sim: true,
            ..RunConfig::default()
        };
        assert_eq!(secrets(&sim), secrets(&sim));
        let fixed = RunConfig {
            fixed_keys: true,
            seed: Some(9),
            ..RunConfig::default()
        };
        assert_eq!(secrets(&fixed), [9 ^ 0xc11e, 9 ^ 0x5e4e]);
        assert_ne!(secrets(&fixed), secrets(&sim), "secrets follow the seed");
    }

    #[test]
    fn hot_pool_only_for_one_thread_on_a_clean_wire() {
        let mut cfg = RunConfig::default();
        assert_eq!(pool_frames(&cfg), POOL_FRAMES_HOT);
        cfg.sim = true;
        cfg.cores = 2; // --sim runs in one thread whatever --cores says
        cfg.split = true;
        assert_eq!(pool_frames(&cfg), POOL_FRAMES_HOT);
        cfg.sim = false;
        assert_eq!(pool_frames(&cfg), POOL_FRAMES);
        cfg.split = false; // shards: each one thread on its own wire
        assert_eq!(pool_frames(&cfg), POOL_FRAMES_HOT);
        cfg.split = true;
        cfg.cores = 1;
        cfg.impair.delay_ns = 100_000;
        assert_eq!(pool_frames(&cfg), POOL_FRAMES);
        assert_eq!(high_frames(POOL_FRAMES_HOT), 256);
    }

    #[test]
    fn pressure_is_frames_in_flight_against_the_pool() {
        let mut p = Pressure::new(false, POOL_FRAMES_HOT);
        let a = PortStats {
            tx_frames: 1000,
            rx_frames: 0,
            ..PortStats::default()
        };
        let b = PortStats {
            tx_frames: 0,
            rx_frames: 1000 - 256,
            ..PortStats::default()
        };
        assert!(!p.high_stats(a, b));
        let b = PortStats {
            rx_frames: 1000 - 257,
            ..b
        };
        assert!(p.high_stats(a, b));
        assert!(p.high_stats(b, a), "either direction");
    }
}
