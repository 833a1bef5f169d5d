//! Impairment settings of one direction of the in-memory wire, and their counters.
//!
//! Every decision is drawn from a seeded generator in frame order, so a run with the same
//! seed, the same frames and the same times is the same run. Time comes from the port's
//! `set_time` (a virtual clock in simulations), never from a clock read here.

use crate::rng::{threshold, Rng};

/// Impairment of one direction (all off by default).
#[derive(Clone, Debug, PartialEq)]
pub struct Impairment {
    /// Probability that a frame is lost.
    pub loss: f64,
    /// Probability that a frame is duplicated (the copy follows the original).
    pub duplicate: f64,
    /// Probability that a frame is held back and overtaken by later frames.
    pub reorder: f64,
    /// A held frame is sent after 1..=`reorder_depth` later frames (uniform).
    pub reorder_depth: u32,
    /// A held frame is sent anyway once it has waited this long (no later frame came).
    pub reorder_timeout_ns: u64,
    /// Fixed one-way delay.
    pub delay_ns: u64,
    /// Extra delay, uniform in `0..=jitter_ns`. The wire stays FIFO (a frame never
    /// overtakes an earlier one because of jitter; use `reorder` for that).
    pub jitter_ns: u64,
    /// Probability that a frame has bits flipped.
    pub corrupt: f64,
    /// Bits flipped in a corrupted frame (random positions in the frame).
    pub corrupt_bits: u32,
    /// Rate limit in bits per second on the wire (0 = none). Each frame costs
    /// `(len + rate_overhead_bytes) * 8` bits.
    pub rate_bps: u64,
    /// Rate limit in frames per second (0 = none).
    pub rate_fps: u64,
    /// Per-frame overhead counted by `rate_bps` (preamble, SFD, FCS, IFG: 24 bytes).
    pub rate_overhead_bytes: u32,
    /// A frame that would wait longer than this for the rate limit is dropped (tail drop).
    pub queue_limit_ns: u64,
    /// Seed of this direction's generator.
    pub seed: u64,
}

impl Default for Impairment {
    fn default() -> Self {
        Impairment {
            loss: 0.0,
            duplicate: 0.0,
            reorder: 0.0,
            reorder_depth: 3,
            reorder_timeout_ns: 1_000_000,
            delay_ns: 0,
            jitter_ns: 0,
            corrupt: 0.0,
            corrupt_bits: 1,
            rate_bps: 0,
            rate_fps: 0,
            rate_overhead_bytes: 24,
            queue_limit_ns: 50_000_000,
            seed: 1,
        }
    }
}

impl Impairment {
    /// Whether any impairment is on (otherwise the fast path is used).
    pub fn is_active(&self) -> bool {
        self.loss > 0.0
            || self.duplicate > 0.0
            || self.reorder > 0.0
            || self.delay_ns > 0
            || self.jitter_ns > 0
            || self.corrupt > 0.0
            || self.rate_bps > 0
            || self.rate_fps > 0
    }
}

/// Counters of one direction's impairment (kept by the sending port).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ImpairStats {
    /// Frames lost on purpose.
    pub lost: u64,
    /// Copies made.
    pub duplicated: u64,
    /// Frames held back to be overtaken.
    pub reordered: u64,
    /// Frames with flipped bits.
    pub corrupted: u64,
    /// Frames that got a non-zero delay (delay, jitter or rate limit).
    pub delayed: u64,
    /// Frames dropped because the rate-limit queue was over `queue_limit_ns`.
    pub rate_dropped: u64,
    /// Copies not made because the pool was empty.
    pub dup_no_frame: u64,
}

impl ImpairStats {
    /// Adds `o`'s counters (several wires summed).
    pub fn add(&mut self, o: &ImpairStats) {
        let ImpairStats {
            lost,
            duplicated,
            reordered,
            corrupted,
            delayed,
            rate_dropped,
            dup_no_frame,
        } = *o;
        self.lost += lost;
        self.duplicated += duplicated;
        self.reordered += reordered;
        self.corrupted += corrupted;
        self.delayed += delayed;
        self.rate_dropped += rate_dropped;
        self.dup_no_frame += dup_no_frame;
    }
}

/// Working state of one direction's impairment.
pub(crate) struct ImpairState {
    pub(crate) cfg: Impairment,
    pub(crate) rng: Rng,
    pub(crate) t_loss: u64,
    pub(crate) t_dup: u64,
    pub(crate) t_reorder: u64,
    pub(crate) t_corrupt: u64,
    /// When the rate-limited link is free again.
    pub(crate) link_free_at: u64,
    pub(crate) stats: ImpairStats,
}

impl ImpairState {
    pub(crate) fn new(cfg: Impairment) -> Self {
        ImpairState {
            rng: Rng::new(cfg.seed),
            t_loss: threshold(cfg.loss),
            t_dup: threshold(cfg.duplicate),
            t_reorder: threshold(cfg.reorder),
            t_corrupt: threshold(cfg.corrupt),
            link_free_at: 0,
            stats: ImpairStats::default(),
            cfg,
        }
    }

    /// Serialisation time of a frame of `len` bytes under the rate limits (0 if none).
    pub(crate) fn frame_cost_ns(&self, len: usize) -> u64 {
        let mut cost = 0u64;
        if self.cfg.rate_bps > 0 {
            let bits = (len as u128 + self.cfg.rate_overhead_bytes as u128) * 8;
            cost = (bits * 1_000_000_000 / self.cfg.rate_bps as u128).min(u64::MAX as u128) as u64;
        }
        if let Some(per_frame) = 1_000_000_000u64.checked_div(self.cfg.rate_fps) {
            cost = cost.max(per_frame);
        }
        cost
    }
}
