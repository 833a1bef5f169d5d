//! The flow scheduler: when each template opens its next client flow on this core.
//!
//! Rates: a template's `cps` times the run multiplier is the whole run's rate; each of
//! `n_cores` cores opens `1/n_cores` of it (and of `limit`). With a ramp-up of `T`, the
//! rate rises linearly from 0 to full over `T`. Arrivals are placed in *operational time*
//! `s` (expected number of flows so far, `N(t) = R * A(t)` with `A(t) = t^2 / 2T` during the
//! ramp and `T/2 + (t - T)` after): even spacing puts the k-th flow at `s = k + phase`,
//! Poisson spacing at `s_k = s_(k-1) + Exp(1)` — an exact inhomogeneous Poisson process.
//! The phase `(core + template/templates) / n_cores` staggers cores and templates so their
//! flows interleave instead of starting in bursts.
//!
//! The scheduler is a pure function of virtual time: [`Scheduler::poll`] hands out every
//! start due at `now` with its *scheduled* time (latency is measured from it, so a stalled
//! generator cannot hide latency). No flow starts at or after the stop time (run duration,
//! or [`Scheduler::stop_at`], which a controller sends to every core with the same instant).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::model::{Profile, Spacing, TemplateIdx};
use crate::rng::Rng;

/// Run-time scheduler settings for one core.
#[derive(Clone, Debug, PartialEq)]
pub struct SchedConfig {
    /// Rate multiplier (> 0): every template runs at `cps * mult`.
    pub mult: f64,
    /// Time origin (ns on the engine clock).
    pub start_ns: u64,
    /// No flow starts at or after `start_ns + duration_ns`; `None`: until [`Scheduler::stop_at`].
    pub duration_ns: Option<u64>,
    /// Linear ramp-up time.
    pub rampup_ns: u64,
    pub spacing: Spacing,
    pub seed: u64,
    /// This core's index in `0..n_cores`.
    pub core: u32,
    pub n_cores: u32,
}

impl SchedConfig {
    /// Settings from the profile's `global.scheduler` for a run of `duration_ns` at `mult`.
    pub fn from_profile(
        p: &Profile,
        mult: f64,
        duration_ns: Option<u64>,
        core: u32,
        n_cores: u32,
    ) -> Self {
        SchedConfig {
            mult,
            start_ns: 0,
            duration_ns,
            rampup_ns: u64::from(p.scheduler.rampup_sec) * 1_000_000_000,
            spacing: p.scheduler.spacing,
            seed: p.scheduler.seed,
            core,
            n_cores,
        }
    }
}

/// One flow to open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowStart {
    pub template: TemplateIdx,
    /// Scheduled start time (ns). `poll` may hand it out later than this if called late.
    pub at_ns: u64,
    /// Index of this flow among the template's flows on this core (0, 1, ...).
    pub seq: u64,
}

#[derive(Clone, Debug)]
struct TplState {
    /// Flows per ns on this core at multiplier 1 and full ramp.
    base_rate: f64,
    /// `base_rate * mult`.
    rate: f64,
    /// Operational time of the next arrival.
    s_next: f64,
    /// Rate epoch: operational time and ramp integral `A` at the last rate change.
    base_s: f64,
    base_a: f64,
    limit: Option<u64>,
    emitted: u64,
    rng: Rng,
    next_ns: Option<u64>,
}

/// Per-core flow start generator. See the module documentation.
#[derive(Clone, Debug)]
pub struct Scheduler {
    tpl: Vec<TplState>,
    heap: BinaryHeap<Reverse<(u64, u16)>>,
    start_ns: u64,
    stop_ns: u64,
    ramp_ns: f64,
    spacing: Spacing,
    mult: f64,
}

impl Scheduler {
    /// A scheduler for `profile`'s templates on one core.
    pub fn new(profile: &Profile, cfg: &SchedConfig) -> Self {
        let n = cfg.n_cores.max(1);
        let nt = profile.templates.len().max(1) as f64;
        let mult = if cfg.mult.is_finite() && cfg.mult > 0.0 {
            cfg.mult
        } else {
            0.0
        };
        let tpl = profile
            .templates
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let limit = t.limit.map(|l| {
                    let l = u64::from(l);
                    l / u64::from(n) + u64::from(u64::from(cfg.core) < l % u64::from(n))
                });
                let mut rng = Rng::derive(cfg.seed, (u64::from(cfg.core) << 16) | i as u64);
                let s_next = match cfg.spacing {
                    Spacing::Even => (f64::from(cfg.core) + i as f64 / nt) / f64::from(n),
                    Spacing::Poisson => rng.exp1(),
                };
                TplState {
                    base_rate: t.cps / f64::from(n) / 1e9,
                    rate: t.cps * mult / f64::from(n) / 1e9,
                    s_next,
                    base_s: 0.0,
                    base_a: 0.0,
                    limit,
                    emitted: 0,
                    rng,
                    next_ns: None,
                }
            })
            .collect();
        let mut s = Scheduler {
            tpl,
            heap: BinaryHeap::new(),
            start_ns: cfg.start_ns,
            stop_ns: cfg
                .duration_ns
                .map_or(u64::MAX, |d| cfg.start_ns.saturating_add(d)),
            ramp_ns: cfg.rampup_ns as f64,
            spacing: cfg.spacing,
            mult,
        };
        s.rebuild();
        s
    }

    /// Ramp integral: expected flows at unit rate after `t` ns.
    fn a_of(&self, t: f64) -> f64 {
        let r = self.ramp_ns;
        if t <= 0.0 {
            0.0
        } else if t < r {
            t * t / (2.0 * r)
        } else {
            t - r / 2.0
        }
    }

    fn t_of_a(&self, a: f64) -> f64 {
        let r = self.ramp_ns;
        if a < r / 2.0 {
            (2.0 * r * a).sqrt()
        } else {
            a + r / 2.0
        }
    }

    /// Scheduled time of template `i`'s next flow, if any.
    fn compute_next(&self, i: usize) -> Option<u64> {
        let t = &self.tpl[i];
        if t.rate <= 0.0 || t.limit.is_some_and(|l| t.emitted >= l) {
            return None;
        }
        let a = t.base_a + (t.s_next - t.base_s) / t.rate;
        let ns = self.t_of_a(a).round();
        if !ns.is_finite() || ns >= u64::MAX as f64 {
            return None;
        }
        let at = self.start_ns.saturating_add(ns as u64);
        (at < self.stop_ns).then_some(at)
    }

    fn rebuild(&mut self) {
        self.heap.clear();
        for i in 0..self.tpl.len() {
            let next = self.compute_next(i);
            self.tpl[i].next_ns = next;
            if let Some(at) = next {
                self.heap.push(Reverse((at, i as u16)));
            }
        }
    }

    /// The earliest scheduled start still to come (`None`: this core will open no more flows).
    pub fn next_due(&self) -> Option<u64> {
        self.heap.peek().map(|Reverse((at, _))| *at)
    }

    /// Has every template finished (limit reached, stopped, or zero rate)?
    pub fn is_finished(&self) -> bool {
        self.heap.is_empty()
    }

    /// Appends every flow due at or before `now_ns`, in order of scheduled time.
    pub fn poll(&mut self, now_ns: u64, out: &mut Vec<FlowStart>) {
        self.poll_max(now_ns, out, usize::MAX);
    }

    /// Like [`Scheduler::poll`] but hands out at most `max` flows (the rest stay due, with
    /// their scheduled times, for the next call). Returns how many were appended.
    pub fn poll_max(&mut self, now_ns: u64, out: &mut Vec<FlowStart>, max: usize) -> usize {
        let mut n = 0;
        while let Some(&Reverse((at, i))) = self.heap.peek() {
            if at > now_ns || n >= max {
                break;
            }
            n += 1;
            self.heap.pop();
            let i = i as usize;
            let t = &mut self.tpl[i];
            out.push(FlowStart {
                template: TemplateIdx(i as u16),
                at_ns: at,
                seq: t.emitted,
            });
            t.emitted += 1;
            t.s_next += match self.spacing {
                Spacing::Even => 1.0,
                Spacing::Poisson => t.rng.exp1(),
            };
            let next = self.compute_next(i);
            self.tpl[i].next_ns = next;
            if let Some(at) = next {
                self.heap.push(Reverse((at, i as u16)));
            }
        }
        n
    }

    /// Takes every flow due at or before `now_ns` off the schedule without handing them
    /// out, and returns how many each template had (by template index): those of a
    /// generator that fell behind and stops. The first `exact` are taken one by one; any
    /// beyond (a backlog too large to walk) are counted from the arrival curve, exactly
    /// for even spacing and by their expected number for Poisson arrivals. The templates
    /// so counted open nothing more.
    pub fn drain_due(&mut self, now_ns: u64, exact: usize) -> Vec<u64> {
        let mut counts = vec![0u64; self.tpl.len()];
        // One by one through a batch buffer (nothing held beyond a batch).
        let (mut out, mut taken) = (Vec::new(), 0);
        while taken < exact {
            out.clear();
            let n = self.poll_max(now_ns, &mut out, (exact - taken).min(4096));
            if n == 0 {
                break;
            }
            taken += n;
            for f in &out {
                counts[f.template.0 as usize] += 1;
            }
        }
        let now = now_ns.min(self.stop_ns.saturating_sub(1));
        let a_now = self.a_of(now.saturating_sub(self.start_ns) as f64);
        while let Some(&Reverse((at, i))) = self.heap.peek() {
            if at > now_ns {
                break;
            }
            self.heap.pop();
            let t = &mut self.tpl[i as usize];
            // Arrivals s_next, s_next + 1, ... up to the operational time of `now`.
            let s_now = t.base_s + (a_now - t.base_a) * t.rate;
            let mut n = if s_now >= t.s_next {
                ((s_now - t.s_next).floor() as u64).saturating_add(1)
            } else {
                1
            };
            if let Some(l) = t.limit {
                n = n.min(l.saturating_sub(t.emitted));
            }
            t.emitted = t.emitted.saturating_add(n);
            t.next_ns = None;
            counts[i as usize] += n;
        }
        counts
    }

    /// Stops opening flows at `stop_ns` (or earlier if already set): no flow is scheduled
    /// at or after it. Give every core the same instant for a synchronised stop.
    pub fn stop_at(&mut self, stop_ns: u64) {
        self.stop_ns = self.stop_ns.min(stop_ns);
        self.rebuild();
    }

    /// When opening stops (`u64::MAX`: never): the end of the duration, or an earlier
    /// [`stop_at`](Self::stop_at).
    pub fn stop_ns(&self) -> u64 {
        self.stop_ns
    }

    /// Changes the rate multiplier from `now_ns` on (flows already handed out are not
    /// affected; the next ones follow the new rate). A multiplier <= 0 pauses opening.
    pub fn set_mult(&mut self, now_ns: u64, mult: f64) {
        let mult = if mult.is_finite() && mult > 0.0 {
            mult
        } else {
            0.0
        };
        let a_now = self.a_of(now_ns.saturating_sub(self.start_ns) as f64);
        for t in &mut self.tpl {
            let s_now = t.base_s + t.rate * (a_now - t.base_a);
            t.base_s = s_now;
            t.base_a = a_now;
            t.rate = t.base_rate * mult;
            // The next arrival cannot fall before the change.
            if t.s_next < s_now {
                t.s_next = s_now;
            }
        }
        self.mult = mult;
        self.rebuild();
    }

    /// The current rate multiplier.
    pub fn mult(&self) -> f64 {
        self.mult
    }

    /// Flows handed out so far for a template on this core.
    pub fn emitted(&self, t: TemplateIdx) -> u64 {
        self.tpl.get(t.0 as usize).map_or(0, |t| t.emitted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sched(ramp_ns: f64) -> Scheduler {
        Scheduler {
            tpl: Vec::new(),
            heap: BinaryHeap::new(),
            start_ns: 0,
            stop_ns: u64::MAX,
            ramp_ns,
            spacing: Spacing::Even,
            mult: 1.0,
        }
    }

    #[test]
    fn ramp_integral_and_inverse_agree() {
        for ramp in [0.0, 1e9, 7.5e9] {
            let s = sched(ramp);
            for t in [0.0, 1.0, 1e6, 5e8, 1e9, 3e9, 1e10] {
                let a = s.a_of(t);
                assert!(
                    (s.t_of_a(a) - t).abs() <= 1e-3 * t.max(1.0),
                    "ramp {ramp} t {t}"
                );
            }
            // Full rate after the ramp: A grows 1 per ns.
            assert!((s.a_of(ramp + 2e9) - s.a_of(ramp + 1e9) - 1e9).abs() < 1.0);
        }
    }
}
