//! Small deterministic random generator for seeded, reproducible impairment: the
//! workspace's one seeded generator, `rand_xoshiro::SplitMix64`, with a per-use seed
//! mix and the draws impairment needs.

use rand_core::{Rng as _, SeedableRng};
use rand_xoshiro::SplitMix64;

/// SplitMix64: fast, 64-bit state, good enough statistics for impairment decisions.
#[derive(Clone, Debug)]
pub struct Rng(SplitMix64);

impl Rng {
    /// A generator from a seed (same seed, same sequence).
    pub fn new(seed: u64) -> Self {
        Rng(SplitMix64::seed_from_u64(seed ^ 0x5DEE_CE66_D1CE_4E5B))
    }

    /// Next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// Uniform in `0..n` (`0` if `n == 0`), without modulo bias worth caring about.
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// True with the probability encoded by [`threshold`].
    #[inline]
    pub fn chance(&mut self, threshold: u64) -> bool {
        threshold != 0 && self.next_u64() < threshold
    }
}

/// Converts a probability in `[0, 1]` to a threshold for [`Rng::chance`] (`p >= 1` always).
pub fn threshold(p: f64) -> u64 {
    if p.is_nan() || p <= 0.0 {
        0
    } else if p >= 1.0 {
        u64::MAX
    } else {
        (p * 18_446_744_073_709_551_616.0) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The SplitMix64 this module carried before it used `rand_xoshiro`'s (Steele, Lea,
    /// Flood 2014; Vigna's `splitmix64.c`), to prove the sequences did not change.
    fn splitmix64_reference(state: &mut u64) -> u64 {
        *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    #[test]
    fn same_sequence_as_the_former_splitmix64() {
        for seed in [
            0,
            1,
            7,
            42,
            0x5DEE_CE66_D1CE_4E5B,
            u64::MAX,
            0x0123_4567_89ab_cdef,
        ] {
            let mut r = Rng::new(seed);
            let mut state = seed ^ 0x5DEE_CE66_D1CE_4E5B;
            for _ in 0..1000 {
                assert_eq!(
                    r.next_u64(),
                    splitmix64_reference(&mut state),
                    "seed {seed}"
                );
            }
        }
    }

    #[test]
    fn deterministic_and_roughly_fair() {
        let mut a = Rng::new(1);
        let mut b = Rng::new(1);
        for _ in 0..100 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
        let t = threshold(0.25);
        let hits = (0..100_000).filter(|_| a.chance(t)).count();
        assert!((24_000..26_000).contains(&hits), "{hits}");
        assert!((0..1000).all(|_| a.below(7) < 7));
        assert!(!a.chance(threshold(0.0)));
        assert!(a.chance(threshold(1.0)));
    }
}
