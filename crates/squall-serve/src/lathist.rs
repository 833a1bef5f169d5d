//! The server's request-latency histogram ([`ReqLat`]): a fixed array of log-linear
//! buckets (four per power of two of microseconds), recorded with a few instructions and
//! no allocation on the data path, `Copy` so that a worker can publish it whole to the
//! thread that reports. Percentiles are read to the bucket's upper bound (at most 25 % above the value).

/// Sub-buckets per power of two.
const SUB: usize = 4;
/// Buckets: values up to 2^40 us (12 days) and more saturate into the last.
pub const BUCKETS: usize = 41 * SUB;

/// Request latencies in microseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReqLat {
    pub counts: [u64; BUCKETS],
}

impl Default for ReqLat {
    fn default() -> Self {
        ReqLat {
            counts: [0; BUCKETS],
        }
    }
}

/// The bucket of `us`: 0..=3 hold 0..=3 exactly, then four per octave.
fn bucket(us: u64) -> usize {
    if us < SUB as u64 {
        return us as usize;
    }
    let msb = 63 - us.leading_zeros() as usize; // >= 2
    let sub = ((us >> (msb - 2)) & 3) as usize;
    ((msb - 1) * SUB + sub).min(BUCKETS - 1)
}

/// The largest value bucket `b` holds.
pub fn upper(b: usize) -> u64 {
    if b < SUB {
        return b as u64;
    }
    let msb = b / SUB + 1;
    let sub = (b % SUB) as u64;
    ((4 + sub + 1) << (msb - 2)) - 1
}

impl ReqLat {
    /// Records a duration given in ns.
    #[inline]
    pub fn record_ns(&mut self, ns: u64) {
        self.counts[bucket(ns / 1000)] += 1;
    }
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }
    /// Adds another histogram's counts (workers summed).
    pub fn add(&mut self, o: &ReqLat) {
        for (a, b) in self.counts.iter_mut().zip(o.counts.iter()) {
            *a += b;
        }
    }
    /// What was recorded since `prev` (an earlier copy of the same histogram).
    pub fn since(&self, prev: &ReqLat) -> ReqLat {
        let mut d = *self;
        for (a, b) in d.counts.iter_mut().zip(prev.counts.iter()) {
            *a = a.saturating_sub(*b);
        }
        d
    }
    /// The value (us, the bucket's upper bound) at quantile `q` (0..=1); 0 when empty.
    pub fn quantile(&self, q: f64) -> u64 {
        let n = self.count();
        if n == 0 {
            return 0;
        }
        let want = ((q * n as f64).ceil() as u64).clamp(1, n);
        let mut seen = 0;
        for (b, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= want {
                return upper(b);
            }
        }
        upper(BUCKETS - 1)
    }
    /// Cumulative counts at each of `bounds_us` (ascending): values in buckets whose upper
    /// bound is at most the bound (Prometheus `le` buckets), and the sum of the values
    /// (bucket upper bounds).
    pub fn cumulative(&self, bounds_us: &[u64]) -> (Vec<u64>, f64) {
        let mut out = vec![0u64; bounds_us.len()];
        let mut sum = 0f64;
        for (b, &c) in self.counts.iter().enumerate() {
            if c == 0 {
                continue;
            }
            let v = upper(b);
            sum += v as f64 * c as f64;
            for (o, &lim) in out.iter_mut().zip(bounds_us) {
                if v <= lim {
                    *o += c;
                }
            }
        }
        (out, sum)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_ordered_and_bound_their_values() {
        let mut last = 0;
        for us in 0..200_000u64 {
            let b = bucket(us);
            assert!(b >= last, "{us}");
            last = b;
            assert!(us <= upper(b), "{us} above bucket {b}'s bound {}", upper(b));
            if b > 0 {
                assert!(us > upper(b - 1), "{us} belongs below bucket {b}");
            }
            // Within 25 % above the value (log-linear, four per octave).
            assert!(upper(b) as f64 <= us as f64 * 1.25 + 1.0, "{us}");
        }
        assert_eq!(bucket(u64::MAX / 1000), BUCKETS - 1);
    }

    #[test]
    fn quantiles_and_deltas() {
        let mut h = ReqLat::default();
        for _ in 0..90 {
            h.record_ns(100_000); // 100 us
        }
        let before = h;
        for _ in 0..10 {
            h.record_ns(5_000_000); // 5 ms
        }
        assert_eq!(h.count(), 100);
        let p50 = h.quantile(0.5);
        assert!((100..=125).contains(&p50), "{p50}");
        let p99 = h.quantile(0.99);
        assert!((5_000..=6_250).contains(&p99), "{p99}");
        let d = h.since(&before);
        assert_eq!(d.count(), 10);
        assert!(d.quantile(0.5) >= 5_000);
        let (cum, sum) = h.cumulative(&[50, 1_000, 10_000]);
        assert_eq!(cum, vec![0, 90, 100]);
        assert!(sum > 90.0 * 100.0 + 10.0 * 5_000.0);
        let mut t = ReqLat::default();
        t.add(&h);
        t.add(&before);
        assert_eq!(t.count(), 190);
        assert_eq!(ReqLat::default().quantile(0.99), 0);
    }
}
