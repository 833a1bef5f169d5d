//! A small, fast, seedable pseudo-random generator: the workspace's one seeded generator,
//! `rand_xoshiro::SplitMix64`, and the draws the profiles need (ranges, floats,
//! exponential). Deterministic runs and golden pcaps need reproducible randomness;
//! cryptographic quality is not a goal.

use rand_core::{Rng as _, SeedableRng};
use rand_xoshiro::SplitMix64;

/// SplitMix64 (Steele, Lea, Flood 2014): passes BigCrush, one add and a few mixes per draw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rng {
    g: SplitMix64,
}

impl Rng {
    /// The generator whose state is `seed` (the first draw advances it once).
    pub fn new(seed: u64) -> Self {
        Rng {
            g: SplitMix64::seed_from_u64(seed),
        }
    }
    /// A generator for a sub-stream (core, template, ...) derived from a seed.
    pub fn derive(seed: u64, stream: u64) -> Self {
        let mut r = Rng::new(seed ^ stream.wrapping_mul(0xd1b5_4a32_d192_ed03));
        r.next_u64();
        r
    }
    /// Next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.g.next_u64()
    }
    /// The high 32 bits of the next draw (not `SplitMix64::next_u32`, which mixes
    /// differently: the sequences must stay those of the golden runs).
    pub fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }
    /// Uniform in [0, n) (n > 0), without modulo bias worth mentioning (multiply-shift).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
    /// Uniform in (0, 1].
    pub fn unit_open0(&mut self) -> f64 {
        ((self.next_u64() >> 11) + 1) as f64 / (1u64 << 53) as f64
    }
    /// Exponentially distributed with mean 1.
    pub fn exp1(&mut self) -> f64 {
        -self.unit_open0().ln()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The SplitMix64 this module carried before it used `rand_xoshiro`'s (Vigna's
    /// `splitmix64.c`), to prove the sequences did not change.
    fn splitmix64_reference(state: &mut u64) -> u64 {
        *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    #[test]
    fn same_sequence_as_the_former_splitmix64() {
        for seed in [
            0,
            1,
            7,
            42,
            u64::MAX,
            0x0123_4567_89ab_cdef,
            0x9e37_79b9_7f4a_7c15,
        ] {
            let mut r = Rng::new(seed);
            let mut state = seed;
            for _ in 0..1000 {
                assert_eq!(
                    r.next_u64(),
                    splitmix64_reference(&mut state),
                    "seed {seed}"
                );
            }
            let mut r = Rng::new(seed);
            let mut state = seed;
            assert_eq!(
                r.next_u32(),
                (splitmix64_reference(&mut state) >> 32) as u32
            );
        }
        // Vigna's reference output for seed 1477776061723855037 (as in rand_xoshiro's own
        // test), first three draws.
        let mut r = Rng::new(1_477_776_061_723_855_037);
        assert_eq!(
            [r.next_u64(), r.next_u64(), r.next_u64()],
            [
                1_985_237_415_132_408_290,
                2_979_275_885_539_914_483,
                13_511_426_838_097_143_398
            ]
        );
    }

    #[test]
    fn deterministic_and_distinct_streams() {
        let a: Vec<u64> = (0..4)
            .map({
                let mut r = Rng::new(7);
                move |_| r.next_u64()
            })
            .collect();
        let mut r = Rng::new(7);
        assert_eq!(a, (0..4).map(|_| r.next_u64()).collect::<Vec<_>>());
        assert_ne!(Rng::derive(7, 0).next_u64(), Rng::derive(7, 1).next_u64());
    }

    #[test]
    fn below_and_exp_are_plausible() {
        let mut r = Rng::new(1);
        let mut counts = [0u32; 10];
        for _ in 0..100_000 {
            counts[r.below(10) as usize] += 1;
        }
        assert!(
            counts.iter().all(|&c| (9_000..11_000).contains(&c)),
            "{counts:?}"
        );
        let mean: f64 = (0..100_000).map(|_| r.exp1()).sum::<f64>() / 100_000.0;
        assert!((mean - 1.0).abs() < 0.02, "{mean}");
    }
}
