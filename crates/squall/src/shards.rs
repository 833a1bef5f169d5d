//! Per-core shards over the in-memory wire (T-memN, `squall run --cores N`): N worker
//! threads, each pinned to its own core and running both sides of its own share of the
//! flows over its own wire (its own flow tables, timers, frame pools and counters:
//! nothing shared on the data path). The scheduler gives shard `k` of `N` a `1/N` share
//! of every template's rate, its own client addresses (or, for small pools, its own
//! source ports). Each worker publishes its progress into its own [`Live`] (relaxed
//! stores); this thread sums them for the progress line and merges the reports at the
//! end. The result reads like a single run's (counters and histograms summed).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use squall_astf::Profile;
use squall_engine::{Clock, MonotonicClock};

use crate::run::{run_single, Live, RunConfig, RunResult, Shard, SideReport, START_LEAD_NS};

/// Most shards of one run (one per core; more threads than cores only time-share).
pub const MAX_SHARDS: u32 = 256;

/// Runs `cfg.cores` shards in parallel and returns their merged result.
pub fn run_shards(
    profile: Arc<Profile>,
    cfg: &RunConfig,
    live: Arc<Live>,
) -> Result<RunResult, String> {
    let n = cfg.cores.clamp(1, MAX_SHARDS);
    let ncpu = squall_engine::affinity::available_cores();
    let origin = Instant::now();
    let clock = MonotonicClock::with_origin(origin);
    // One start instant for every shard, far enough ahead for all of them to build
    // their sides (a frame pool and two flow tables each).
    let t0 = clock.now_ns() + START_LEAD_NS * u64::from(n.min(8));
    let lives = shard_lives(&live, n);
    let mut workers = Vec::with_capacity(n as usize);
    for k in 0..n {
        let (p, c, l) = (profile.clone(), cfg.clone(), lives[k as usize].clone());
        let h = spawn_worker(k, &ncpu, move || {
            let shard = Shard { index: k, count: n };
            run_single(&p, &c, Some(&clock), &l, shard, Some(t0))
        })?;
        workers.push(h);
    }
    join_workers(workers, &live, &lives, "shard")
}

/// The `n` workers' own [`Live`]s, with the run's snapshot settings, registered as the
/// run's shards (the time series reads each one's figures and side reports).
pub(crate) fn shard_lives(live: &Live, n: u32) -> Vec<Arc<Live>> {
    let lives: Vec<Arc<Live>> = (0..n).map(|_| Arc::new(Live::default())).collect();
    let (snapshots, on_request) = (
        live.ctl.snapshots.load(Ordering::Relaxed),
        live.ctl.on_request.load(Ordering::Relaxed),
    );
    for l in &lives {
        l.ctl.snapshots.store(snapshots, Ordering::Relaxed);
        l.ctl.on_request.store(on_request, Ordering::Relaxed);
    }
    let _ = live.shards.set(lives.clone());
    lives
}

/// Spawns worker `k` (thread `squall-wK`) pinned to the `k`-th core of `ncpu` (the cores
/// this process may use; wraps around when there are fewer).
pub(crate) fn spawn_worker<F, T>(
    k: u32,
    ncpu: &[usize],
    f: F,
) -> Result<std::thread::JoinHandle<Result<T, String>>, String>
where
    F: FnOnce() -> Result<T, String> + Send + 'static,
    T: Send + 'static,
{
    let core = if ncpu.is_empty() {
        k as usize
    } else {
        ncpu[k as usize % ncpu.len()]
    };
    std::thread::Builder::new()
        .name(format!("squall-w{k}"))
        .spawn(move || {
            let _ = squall_engine::affinity::pin_current_thread(core);
            f()
        })
        .map_err(|e| format!("worker {k}: cannot start its thread: {e}"))
}

/// Waits for `workers` (each publishing into its own entry of `lives`) while summing their
/// live figures into `live` and forwarding its stop requests; returns their merged
/// results (an error names the failed worker, `what` `k`).
pub(crate) fn join_workers(
    workers: Vec<std::thread::JoinHandle<Result<RunResult, String>>>,
    live: &Live,
    lives: &[Arc<Live>],
    what: &str,
) -> Result<RunResult, String> {
    let mut mult_seen = 0;
    while !workers.iter().all(|h| h.is_finished()) {
        std::thread::sleep(Duration::from_millis(10));
        forward_control(live, lives, &mut mult_seen);
        sum_live(live, lives);
    }
    let mut merged: Option<RunResult> = None;
    let mut failed: Vec<String> = Vec::new();
    for (k, h) in workers.into_iter().enumerate() {
        match h.join() {
            Err(_) => failed.push(format!("{what} {k} panicked")),
            Ok(Err(e)) => failed.push(format!("{what} {k}: {e}")),
            Ok(Ok(r)) => match merged.as_mut() {
                None => merged = Some(r),
                Some(m) => merge_result(m, &r),
            },
        }
    }
    sum_live(live, lives);
    live.done.store(true, Ordering::Relaxed);
    if !failed.is_empty() {
        return Err(failed.join("; "));
    }
    merged.ok_or_else(|| format!("no {what} ran"))
}

/// A stop (or cut) or a rate change requested on the run's control goes to every shard
/// (`mult_seen`: the last rate change passed on).
fn forward_control(live: &Live, lives: &[Arc<Live>], mult_seen: &mut u64) {
    if let Some(m) = live.ctl.new_mult(mult_seen) {
        for l in lives {
            l.ctl.set_mult(m);
        }
    }
    // Acquire: the stop's cut (stored before it) is seen with it.
    if live.ctl.stop.swap(false, Ordering::Acquire) {
        let cut = live.ctl.cut.load(Ordering::Relaxed);
        for l in lives {
            l.ctl.request_stop(cut);
        }
    }
}

/// The run's live figures: the sum of the shards' (read with relaxed loads).
fn sum_live(live: &Live, lives: &[Arc<Live>]) {
    let sum = |f: fn(&Live) -> &std::sync::atomic::AtomicU64| -> u64 {
        lives.iter().map(|l| f(l).load(Ordering::Relaxed)).sum()
    };
    live.started.store(sum(|l| &l.started), Ordering::Relaxed);
    live.completed
        .store(sum(|l| &l.completed), Ordering::Relaxed);
    live.errors.store(sum(|l| &l.errors), Ordering::Relaxed);
    live.active.store(sum(|l| &l.active), Ordering::Relaxed);
    live.wire_bytes
        .store(sum(|l| &l.wire_bytes), Ordering::Relaxed);
    live.server_errors
        .store(sum(|l| &l.server_errors), Ordering::Relaxed);
    live.server_wire_bytes
        .store(sum(|l| &l.server_wire_bytes), Ordering::Relaxed);
    live.tx_frames
        .store(sum(|l| &l.tx_frames), Ordering::Relaxed);
    live.server_frames
        .store(sum(|l| &l.server_frames), Ordering::Relaxed);
}

/// Adds shard result `b` into `a`: counters, histograms and CPU times summed; the run
/// lasted as long as its longest shard.
pub(crate) fn merge_result(a: &mut RunResult, b: &RunResult) {
    merge_side(&mut a.client, &b.client);
    merge_side(&mut a.server, &b.server);
    a.elapsed_ns = a.elapsed_ns.max(b.elapsed_ns);
    a.gen_ns = a.gen_ns.max(b.gen_ns);
    a.cpu_ns += b.cpu_ns;
    a.busy_cpu_ns += b.busy_cpu_ns;
    a.sleep_cpu_ns += b.sleep_cpu_ns;
    a.stall_ns = a.stall_ns.max(b.stall_ns);
    a.wire_unimpaired &= b.wire_unimpaired;
    if let Some(t) = &b.trace {
        a.trace.get_or_insert_default().merge(t.clone());
    }
}

/// Adds one side's report into another. `peak_active` becomes the sum of the shards'
/// peaks (an upper bound of the run's peak: the shards' peaks need not coincide).
pub(crate) fn merge_side(a: &mut SideReport, b: &SideReport) {
    a.tcp.add(&b.tcp);
    a.app.merge(&b.app);
    a.port.add(&b.port);
    a.impair.add(&b.impair);
    a.cpu_ns += b.cpu_ns;
    a.still_open += b.still_open;
    a.live_end += b.live_end;
    a.udp_live_end += b.udp_live_end;
    a.peak_active += b.peak_active;
    a.throttled_turns += b.throttled_turns;
    a.rx_redirected += b.rx_redirected;
    a.redirect_dropped += b.redirect_dropped;
    a.redirect_mesh |= b.redirect_mesh;
    a.ip_fragments += b.ip_fragments;
    a.ip_reassembled += b.ip_reassembled;
    a.ip_reasm_dropped += b.ip_reasm_dropped;
    a.next_hop_moved += b.next_hop_moved;
    a.next_hop_probes += b.next_hop_probes;
    a.next_hop_unreachable += b.next_hop_unreachable;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merging_sums_counters_and_keeps_the_longest_time() {
        let mut a = RunResult {
            elapsed_ns: 5,
            cpu_ns: 10,
            ..RunResult::default()
        };
        a.client.port.tx_frames = 3;
        a.client.tcp.tcps_connattempt = 1;
        a.server.peak_active = 4;
        let mut b = a.clone();
        b.elapsed_ns = 7;
        b.client.impair.lost = 2;
        merge_result(&mut a, &b);
        assert_eq!(a.elapsed_ns, 7);
        assert_eq!(a.cpu_ns, 20);
        assert_eq!(a.client.port.tx_frames, 6);
        assert_eq!(a.client.tcp.tcps_connattempt, 2);
        assert_eq!(a.client.impair.lost, 2);
        assert_eq!(a.server.peak_active, 8);
    }
}
