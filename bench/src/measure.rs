//! Measurement helpers: thread CPU time (the engine's per-thread CPU clock), per-core busy
//! time (/proc/stat),
//! process RSS (/proc/self/statm), core pinning and the open-file limit.

use std::time::Duration;

/// CPU time (user + system) consumed so far by the calling thread.
pub fn thread_cpu() -> Duration {
    Duration::from_nanos(squall_engine::clock::thread_cpu_ns())
}

/// Busy time per core since boot, from one `/proc/stat` read (user + nice + system + irq +
/// softirq + steal; idle and iowait excluded), in microseconds. Index = core number.
pub fn core_busy_us() -> Vec<u64> {
    let text = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    parse_proc_stat(&text)
}

/// Parses the `cpuN` lines of `/proc/stat` text into busy microseconds per core.
pub fn parse_proc_stat(text: &str) -> Vec<u64> {
    // SAFETY: sysconf has no memory-safety preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let hz = if hz > 0 { hz as u64 } else { 100 };
    let mut out = Vec::new();
    for line in text.lines() {
        let mut it = line.split_whitespace();
        let Some(name) = it.next() else { continue };
        let Some(idx) = name.strip_prefix("cpu") else {
            continue;
        };
        let Ok(idx) = idx.parse::<usize>() else {
            continue; // the aggregate "cpu" line
        };
        let v: Vec<u64> = it.filter_map(|x| x.parse().ok()).collect();
        if v.len() < 7 {
            continue;
        }
        // user nice system idle iowait irq softirq steal ...
        let busy = v[0] + v[1] + v[2] + v[5] + v[6] + v.get(7).copied().unwrap_or(0);
        if out.len() <= idx {
            out.resize(idx + 1, 0);
        }
        out[idx] = busy * 1_000_000 / hz;
    }
    out
}

/// Resident set size of this process in bytes (from `/proc/self/statm`).
pub fn rss_bytes() -> u64 {
    let text = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = text
        .split_whitespace()
        .nth(1)
        .and_then(|x| x.parse().ok())
        .unwrap_or(0);
    // SAFETY: sysconf has no memory-safety preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    pages * if page > 0 { page as u64 } else { 4096 }
}

/// Returns freed heap memory to the OS so RSS deltas are not hidden by the allocator.
pub fn trim_heap() {
    // SAFETY: malloc_trim only walks glibc's own heap.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Pins the calling thread to `core` (the engine's pinning). Returns false if the kernel
/// refused or the core does not exist.
pub fn pin_to_core(core: usize) -> bool {
    squall_engine::affinity::pin_current_thread(core).is_ok()
}

/// Nanoseconds per round trip of one cache line bounced between a thread pinned to core
/// `a` and one pinned to core `b` (`rounds` round trips): where the host placed the two
/// (v)CPUs — the kind of probe `scripts/xcore-pingpong.c` makes, whose loop differs (its
/// figures run about twice these: compare figures of one probe only). None if a thread
/// could not be pinned.
pub fn xcore_round_trip_ns(a: usize, b: usize, rounds: u64) -> Option<f64> {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;
    // The bounced line, and a flag either side raises when it cannot take part.
    let line = Arc::new((AtomicU64::new(0), AtomicBool::new(false)));
    // Waits until the line holds `want`; false if the other side gave up.
    fn wait(l: &(AtomicU64, AtomicBool), want: u64) -> bool {
        loop {
            if l.0.load(Ordering::Acquire) == want {
                return true;
            }
            if l.1.load(Ordering::Acquire) {
                return false;
            }
            std::hint::spin_loop();
        }
    }
    let peer = {
        let l = line.clone();
        std::thread::spawn(move || {
            if !pin_to_core(b) {
                l.1.store(true, Ordering::Release);
                return false;
            }
            // Answers each odd value with the next even one.
            for k in 0..rounds {
                if !wait(&l, 2 * k + 1) {
                    return false;
                }
                l.0.store(2 * k + 2, Ordering::Release);
            }
            true
        })
    };
    let probe = std::thread::spawn(move || {
        if !pin_to_core(a) {
            line.1.store(true, Ordering::Release);
            return None;
        }
        let t0 = std::time::Instant::now();
        for k in 0..rounds {
            line.0.store(2 * k + 1, Ordering::Release);
            if !wait(&line, 2 * k + 2) {
                return None;
            }
        }
        Some(t0.elapsed().as_nanos() as f64 / rounds.max(1) as f64)
    });
    let ns = probe.join().ok().flatten();
    let ok = peer.join().unwrap_or(false);
    ns.filter(|_| ok)
}

/// Raises the soft open-file limit to the hard limit; returns the new soft limit.
pub fn raise_nofile() -> u64 {
    // SAFETY: get/setrlimit write/read the struct we own.
    unsafe {
        let mut rl: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) != 0 {
            return 0;
        }
        rl.rlim_cur = rl.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &rl);
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl);
        rl.rlim_cur
    }
}

/// Sub-buckets per power of two in [`Histogram`] (relative precision 1/32, ~3 %).
const SUB: u64 = 32;
const SUB_BITS: u32 = 5;

/// A log-linear latency histogram over nanoseconds: exact below 32 ns, then 32 buckets
/// per power of two (values within ~3 %), up to 2^63 ns. Fixed size, no allocation when
/// recording.
pub struct Histogram {
    buckets: Vec<u64>,
    count: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

impl Histogram {
    pub fn new() -> Self {
        Histogram {
            buckets: vec![0; (SUB + (64 - SUB_BITS as u64) * SUB) as usize],
            count: 0,
        }
    }

    fn index(ns: u64) -> usize {
        if ns < SUB {
            return ns as usize;
        }
        let e = 63 - ns.leading_zeros(); // >= SUB_BITS
        let shift = e - SUB_BITS;
        let sub = (ns >> shift) & (SUB - 1);
        (SUB + (shift as u64) * SUB + sub) as usize
    }

    /// The smallest value that lands in bucket `i`.
    fn lower(i: usize) -> u64 {
        let i = i as u64;
        if i < SUB {
            return i;
        }
        let shift = (i - SUB) / SUB;
        let sub = (i - SUB) % SUB;
        (SUB + sub) << shift
    }

    #[inline]
    pub fn record_ns(&mut self, ns: u64) {
        let i = Self::index(ns).min(self.buckets.len() - 1);
        self.buckets[i] += 1;
        self.count += 1;
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    /// The value in microseconds at quantile `q` in [0, 1] (the lower bound of its
    /// bucket), or `None` if empty.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        if self.count == 0 {
            return None;
        }
        let target = ((q.clamp(0.0, 1.0) * self.count as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, &b) in self.buckets.iter().enumerate() {
            seen += b;
            if seen >= target {
                return Some(Self::lower(i) as f64 / 1000.0);
            }
        }
        None
    }

    pub fn clear(&mut self) {
        self.buckets.iter_mut().for_each(|b| *b = 0);
        self.count = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_stat_parses_cores_and_skips_aggregate() {
        let t = "cpu  10 0 10 100 0 0 0 0 0 0\n\
                 cpu0 1 2 3 1000 7 4 5 6 0 0\n\
                 cpu1 10 0 0 1000 0 0 0 0 0 0\n\
                 intr 5\n";
        let v = parse_proc_stat(t);
        assert_eq!(v.len(), 2);
        // SAFETY: no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
        assert_eq!(v[0], (1 + 2 + 3 + 4 + 5 + 6) * 1_000_000 / hz);
        assert_eq!(v[1], 10 * 1_000_000 / hz);
    }

    #[test]
    fn histogram_quantiles_within_precision() {
        let mut h = Histogram::new();
        assert_eq!(h.quantile(0.5), None);
        for us in 1..=100u64 {
            h.record_ns(us * 1000);
        }
        h.record_ns(u64::MAX); // lands in the last bucket, no panic
        assert_eq!(h.count(), 101);
        let p50 = h.quantile(0.5).unwrap();
        assert!((49.0..=51.0).contains(&p50), "{p50}");
        let p99 = h.quantile(0.99).unwrap();
        assert!((96.0..=100.0).contains(&p99), "{p99}");
        h.clear();
        assert_eq!(h.count(), 0);
        h.record_ns(7);
        assert_eq!(h.quantile(1.0), Some(0.007));
    }

    #[test]
    fn histogram_buckets_bound_their_values() {
        for v in [0u64, 31, 32, 33, 63, 64, 1000, 123_456, 1 << 40] {
            let i = Histogram::index(v);
            let lo = Histogram::lower(i);
            assert!(lo <= v, "{v}: lower {lo}");
            assert!(v - lo <= v / 32 + 1, "{v}: lower {lo}");
        }
    }

    #[test]
    fn thread_cpu_advances_and_rss_is_nonzero() {
        // The kernel may account thread CPU time in ticks: spin (bounded by 5 s of wall
        // time) until the thread's CPU clock moves, and require that it does.
        let a = thread_cpu();
        let start = std::time::Instant::now();
        let mut x = 0u64;
        let mut i = 0u64;
        while thread_cpu() <= a && start.elapsed() < std::time::Duration::from_secs(5) {
            for _ in 0..100_000 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
                i += 1;
            }
        }
        assert!(
            thread_cpu() > a,
            "thread CPU time did not advance in 5 s of spinning"
        );
        assert!(rss_bytes() > 0);
    }
}
