//! Clocks: the monotonic clock a worker reads once per burst, and a virtual clock for
//! deterministic simulation. Both implement [`Clock`], so the same loop runs on either.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// A source of `u64` nanoseconds that never goes backwards.
pub trait Clock {
    /// Current time in ns since the clock's origin.
    fn now_ns(&self) -> u64;
}

/// The system monotonic clock (`CLOCK_MONOTONIC` through `Instant`, a vDSO call of a few
/// tens of ns), in ns since this clock was created.
#[derive(Clone, Copy, Debug)]
pub struct MonotonicClock {
    origin: Instant,
}

impl MonotonicClock {
    /// A clock whose zero is now.
    pub fn new() -> Self {
        MonotonicClock {
            origin: Instant::now(),
        }
    }

    /// A clock sharing `origin` with others (so several workers agree on time).
    pub fn with_origin(origin: Instant) -> Self {
        MonotonicClock { origin }
    }
}

impl Default for MonotonicClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for MonotonicClock {
    #[inline]
    fn now_ns(&self) -> u64 {
        self.origin.elapsed().as_nanos() as u64
    }
}

/// A clock that moves only when told to (simulations). Shareable across threads; time
/// never goes backwards (`set` to an earlier time is ignored).
#[derive(Debug, Default)]
pub struct VirtualClock {
    now: AtomicU64,
}

impl VirtualClock {
    /// A virtual clock at `start_ns`.
    pub fn new(start_ns: u64) -> Self {
        VirtualClock {
            now: AtomicU64::new(start_ns),
        }
    }

    /// Moves time to `t` if it is later than now.
    pub fn set(&self, t: u64) {
        self.now.fetch_max(t, Ordering::Relaxed);
    }

    /// Moves time forward by `dt`.
    pub fn advance(&self, dt: u64) {
        self.now.fetch_add(dt, Ordering::Relaxed);
    }
}

impl Clock for VirtualClock {
    #[inline]
    fn now_ns(&self) -> u64 {
        self.now.load(Ordering::Relaxed)
    }
}

impl<C: Clock + ?Sized> Clock for &C {
    #[inline]
    fn now_ns(&self) -> u64 {
        (**self).now_ns()
    }
}

impl<C: Clock + ?Sized> Clock for Arc<C> {
    #[inline]
    fn now_ns(&self) -> u64 {
        (**self).now_ns()
    }
}

impl<C: Clock + ?Sized> Clock for std::rc::Rc<C> {
    #[inline]
    fn now_ns(&self) -> u64 {
        (**self).now_ns()
    }
}

/// CPU time consumed by the calling thread, in ns (`CLOCK_THREAD_CPUTIME_ID`; user +
/// system). Benchmarks divide it by operations for the "CPU us per op" figure.
pub fn thread_cpu_ns() -> u64 {
    // SAFETY: clock_gettime only writes the timespec we own.
    let (rc, ts) = unsafe {
        let mut ts: libc::timespec = std::mem::zeroed();
        let rc = libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts);
        (rc, ts)
    };
    if rc != 0 {
        return 0;
    }
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic_does_not_go_back() {
        let c = MonotonicClock::new();
        let mut last = c.now_ns();
        for _ in 0..1000 {
            let t = c.now_ns();
            assert!(t >= last);
            last = t;
        }
    }

    #[test]
    fn thread_cpu_time_grows_with_work() {
        let t0 = thread_cpu_ns();
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
        }
        assert!(thread_cpu_ns() > t0, "{x}");
    }

    #[test]
    fn virtual_moves_only_forward_when_told() {
        let c = Arc::new(VirtualClock::new(100));
        assert_eq!(c.now_ns(), 100);
        c.advance(50);
        assert_eq!(c.now_ns(), 150);
        c.set(120);
        assert_eq!(c.now_ns(), 150);
        c.set(1000);
        let r: &VirtualClock = &c;
        assert_eq!(r.now_ns(), 1000);
        assert_eq!(Clock::now_ns(&c), 1000);
    }
}
