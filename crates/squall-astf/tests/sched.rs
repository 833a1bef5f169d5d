//! Scheduler tests on virtual time: exact times for even spacing, statistical checks for
//! Poisson spacing, ramp-up, limits, duration, synchronised stop, rate changes, cores.

use serde_json::json;
use squall_astf::sched::{FlowStart, SchedConfig, Scheduler};
use squall_astf::*;

const S: u64 = 1_000_000_000;

fn profile(templates: &[(f64, Option<u32>)], rampup: u64, spacing: &str) -> Profile {
    let tpls: Vec<_> = templates
        .iter()
        .enumerate()
        .map(|(i, (cps, limit))| {
            let mut t =
                json!({"client_program": "c", "server_program": "s", "port": 80 + i, "cps": cps});
            if let Some(l) = limit {
                t["limit"] = json!(l);
            }
            t
        })
        .collect();
    let v = json!({
        "version": 1,
        "buffers": [{"name": "b", "text": "x"}],
        "ip_gens": [{"name": "g", "clients": {"range": ["16.0.0.1", "16.0.0.200"]}, "servers": {"range": ["48.0.0.1", "48.0.0.1"]}}],
        "programs": [{"name": "c", "commands": [{"op": "send", "buf": "b"}]}, {"name": "s", "commands": [{"op": "recv", "bytes": 1}]}],
        "templates": tpls,
        "global": {"scheduler": {"rampup_sec": rampup, "spacing": spacing, "seed": 42}}
    });
    load_profile_value(v).unwrap()
}

fn drain(s: &mut Scheduler, until: u64) -> Vec<FlowStart> {
    let mut out = Vec::new();
    s.poll(until, &mut out);
    out
}

#[test]
fn even_spacing_is_exact() {
    let p = profile(&[(1000.0, None)], 0, "even");
    let mut s = Scheduler::new(&p, &SchedConfig::from_profile(&p, 1.0, Some(S), 0, 1));
    assert_eq!(s.next_due(), Some(0));
    let out = drain(&mut s, u64::MAX);
    assert_eq!(out.len(), 1000);
    for (k, f) in out.iter().enumerate() {
        assert_eq!(f.at_ns, k as u64 * 1_000_000);
        assert_eq!(f.seq, k as u64);
    }
    assert!(s.is_finished());
    assert_eq!(s.next_due(), None);
}

#[test]
fn multiplier_scales_the_rate() {
    let p = profile(&[(1000.0, None)], 0, "even");
    let mut s = Scheduler::new(&p, &SchedConfig::from_profile(&p, 2.5, Some(S), 0, 1));
    let out = drain(&mut s, u64::MAX);
    assert_eq!(out.len(), 2500);
    assert!(out
        .iter()
        .enumerate()
        .all(|(k, f)| f.at_ns == k as u64 * 400_000));
}

#[test]
fn poll_is_incremental_and_keeps_scheduled_times() {
    let p = profile(&[(1000.0, None)], 0, "even");
    let mut s = Scheduler::new(&p, &SchedConfig::from_profile(&p, 1.0, Some(S), 0, 1));
    assert_eq!(drain(&mut s, 0).len(), 1);
    assert_eq!(drain(&mut s, 999_999).len(), 0);
    assert_eq!(s.next_due(), Some(1_000_000));
    // Polled late: every due flow comes out with its scheduled time.
    let late = drain(&mut s, 5_500_000);
    assert_eq!(
        late.iter().map(|f| f.at_ns).collect::<Vec<_>>(),
        vec![1_000_000, 2_000_000, 3_000_000, 4_000_000, 5_000_000]
    );
}

#[test]
fn cores_split_the_rate_and_interleave() {
    let p = profile(&[(1000.0, None)], 0, "even");
    let mut all = Vec::new();
    for core in 0..4 {
        let mut s = Scheduler::new(&p, &SchedConfig::from_profile(&p, 1.0, Some(S), core, 4));
        let out = drain(&mut s, u64::MAX);
        assert_eq!(out.len(), 250, "core {core}");
        all.extend(out.iter().map(|f| f.at_ns));
    }
    all.sort_unstable();
    // Together: one flow per millisecond, as a single core would do.
    assert_eq!(all.len(), 1000);
    assert!(
        all.iter()
            .enumerate()
            .all(|(k, &t)| t == k as u64 * 1_000_000),
        "{:?}",
        &all[..8]
    );
}

#[test]
fn limit_is_total_over_cores() {
    let p = profile(&[(1000.0, Some(10))], 0, "even");
    let counts: Vec<usize> = (0..3)
        .map(|core| {
            let mut s = Scheduler::new(&p, &SchedConfig::from_profile(&p, 1.0, None, core, 3));
            let out = drain(&mut s, u64::MAX);
            assert!(s.is_finished());
            out.len()
        })
        .collect();
    assert_eq!(counts, vec![4, 3, 3]);
}

#[test]
fn no_flow_at_or_after_the_stop() {
    let p = profile(&[(1000.0, None)], 0, "even");
    let mut s = Scheduler::new(&p, &SchedConfig::from_profile(&p, 1.0, None, 0, 1));
    assert_eq!(drain(&mut s, 100_000_000).len(), 101);
    s.stop_at(250_000_000);
    let rest = drain(&mut s, u64::MAX);
    assert_eq!(rest.len(), 149);
    assert_eq!(rest.last().unwrap().at_ns, 249_000_000);
    assert!(s.is_finished());
    // A later stop does not extend an earlier one.
    s.stop_at(S);
    assert!(s.is_finished());
}

#[test]
fn synchronised_stop_across_cores() {
    let p = profile(&[(10_000.0, None), (3_000.0, None)], 0, "poisson");
    let stop = 123_456_789;
    for core in 0..2 {
        let mut s = Scheduler::new(&p, &SchedConfig::from_profile(&p, 1.0, None, core, 2));
        s.stop_at(stop);
        let out = drain(&mut s, u64::MAX);
        assert!(!out.is_empty());
        assert!(out.iter().all(|f| f.at_ns < stop));
    }
}

#[test]
fn templates_merge_in_time_order() {
    let p = profile(&[(1000.0, None), (300.0, None), (7.0, None)], 0, "poisson");
    let mut s = Scheduler::new(&p, &SchedConfig::from_profile(&p, 1.0, Some(2 * S), 0, 1));
    let out = drain(&mut s, u64::MAX);
    assert!(out.windows(2).all(|w| w[0].at_ns <= w[1].at_ns));
    for (t, cps) in [(0u16, 1000.0), (1, 300.0), (2, 7.0)] {
        let n = out.iter().filter(|f| f.template == TemplateIdx(t)).count() as f64;
        let mean = 2.0 * cps;
        assert!(
            (n - mean).abs() < 5.0 * mean.sqrt() + 1.0,
            "template {t}: {n} vs {mean}"
        );
        assert_eq!(s.emitted(TemplateIdx(t)), n as u64);
    }
}

#[test]
fn poisson_rate_and_gaps() {
    let p = profile(&[(10_000.0, None)], 0, "poisson");
    let mut s = Scheduler::new(&p, &SchedConfig::from_profile(&p, 1.0, Some(10 * S), 0, 1));
    let out = drain(&mut s, u64::MAX);
    let n = out.len() as f64;
    // Expected 100,000 +- 4 sigma (sigma = sqrt(100000) ~ 316).
    assert!((n - 100_000.0).abs() < 1_300.0, "{n}");
    let gaps: Vec<f64> = out
        .windows(2)
        .map(|w| (w[1].at_ns - w[0].at_ns) as f64)
        .collect();
    let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
    let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64;
    assert!((mean - 100_000.0).abs() < 2_000.0, "mean gap {mean}");
    // Exponential gaps: coefficient of variation 1 (even spacing would give 0).
    let cv = var.sqrt() / mean;
    assert!((cv - 1.0).abs() < 0.03, "cv {cv}");
    // Memoryless: P(gap > mean) = 1/e.
    let over = gaps.iter().filter(|&&g| g > mean).count() as f64 / gaps.len() as f64;
    assert!((over - (-1f64).exp()).abs() < 0.01, "{over}");
}

#[test]
fn poisson_is_seeded() {
    let p = profile(&[(1000.0, None)], 0, "poisson");
    let run = |seed: u64| {
        let mut cfg = SchedConfig::from_profile(&p, 1.0, Some(S), 0, 1);
        cfg.seed = seed;
        let mut s = Scheduler::new(&p, &cfg);
        drain(&mut s, u64::MAX)
    };
    assert_eq!(run(1), run(1));
    assert_ne!(run(1), run(2));
}

#[test]
fn linear_rampup() {
    // 1000 cps, 10 s ramp, 20 s run: N(t) = 1000 * t^2 / 20 during the ramp.
    let p = profile(&[(1000.0, None)], 10, "even");
    let mut s = Scheduler::new(&p, &SchedConfig::from_profile(&p, 1.0, Some(20 * S), 0, 1));
    let out = drain(&mut s, u64::MAX);
    let count_before = |t: u64| out.iter().filter(|f| f.at_ns < t).count() as i64;
    assert!(
        (count_before(5 * S) - 1250).abs() <= 1,
        "{}",
        count_before(5 * S)
    );
    assert!((count_before(10 * S) - 5000).abs() <= 1);
    assert!((out.len() as i64 - 15_000).abs() <= 1, "{}", out.len());
    // After the ramp: full rate, one flow per millisecond.
    let after: Vec<u64> = out
        .iter()
        .map(|f| f.at_ns)
        .filter(|&t| t > 11 * S)
        .take(100)
        .collect();
    assert!(after
        .windows(2)
        .all(|w| (w[1] - w[0]).abs_diff(1_000_000) <= 1));
    // During the ramp gaps shrink.
    assert!(out[1].at_ns - out[0].at_ns > out[101].at_ns - out[100].at_ns);
}

#[test]
fn poisson_rampup_rate() {
    let p = profile(&[(20_000.0, None)], 4, "poisson");
    let mut s = Scheduler::new(&p, &SchedConfig::from_profile(&p, 1.0, Some(4 * S), 0, 1));
    let out = drain(&mut s, u64::MAX);
    // Expected 20000 * 4 / 2 = 40000 in the ramp, a quarter of them in its first half.
    let n = out.len() as f64;
    assert!((n - 40_000.0).abs() < 4.0 * 200.0, "{n}");
    let first_half = out.iter().filter(|f| f.at_ns < 2 * S).count() as f64;
    assert!((first_half - 10_000.0).abs() < 4.0 * 100.0, "{first_half}");
}

#[test]
fn rate_change_mid_run() {
    let p = profile(&[(1000.0, None)], 0, "even");
    let mut s = Scheduler::new(&p, &SchedConfig::from_profile(&p, 1.0, Some(2 * S), 0, 1));
    let first = drain(&mut s, S - 1);
    assert_eq!(first.len(), 1000);
    s.set_mult(S, 3.0);
    assert_eq!(s.mult(), 3.0);
    let second = drain(&mut s, u64::MAX);
    assert!((second.len() as i64 - 3000).abs() <= 1, "{}", second.len());
    assert!(second.iter().all(|f| f.at_ns >= S));
    // Pausing stops opening until resumed.
    let mut s = Scheduler::new(&p, &SchedConfig::from_profile(&p, 1.0, Some(2 * S), 0, 1));
    drain(&mut s, S / 2);
    s.set_mult(S / 2, 0.0);
    assert_eq!(s.next_due(), None);
    s.set_mult(S, 1.0);
    let rest = drain(&mut s, u64::MAX);
    assert!(rest.first().unwrap().at_ns >= S);
    assert!((rest.len() as i64 - 1000).abs() <= 1);
}

#[test]
fn zero_multiplier_opens_nothing() {
    let p = profile(&[(1000.0, None)], 0, "even");
    let s = Scheduler::new(&p, &SchedConfig::from_profile(&p, 0.0, Some(S), 0, 1));
    assert!(s.is_finished());
}

#[test]
fn poll_max_bounds_a_catch_up() {
    let p = profile(&[(1000.0, None)], 0, "even");
    let mut s = Scheduler::new(&p, &SchedConfig::from_profile(&p, 1.0, Some(S), 0, 1));
    let mut out = Vec::new();
    assert_eq!(s.poll_max(S, &mut out, 300), 300);
    assert_eq!(s.poll_max(S, &mut out, 300), 300);
    assert_eq!(s.poll_max(S, &mut out, 1000), 400);
    assert_eq!(out.len(), 1000);
    assert!(out
        .iter()
        .enumerate()
        .all(|(k, f)| f.at_ns == k as u64 * 1_000_000));
}

/// The flows due at a stop are counted without handing them out: one by one up to the
/// exact budget, from the arrival curve beyond it; both ways agree for even spacing
/// (with a ramp and a limit), and Poisson's count is its expectation within a few
/// standard deviations.
#[test]
fn flows_due_at_the_stop_are_counted_in_bounded_work() {
    for (tpls, ramp) in [
        (vec![(1000.0, None), (300.0, Some(120u32))], 0),
        (vec![(1000.0, None)], 1),
    ] {
        let p = profile(&tpls, ramp, "even");
        let cfg = SchedConfig::from_profile(&p, 1.0, Some(10 * S), 0, 1);
        let (mut a, mut b) = (Scheduler::new(&p, &cfg), Scheduler::new(&p, &cfg));
        let t = 2 * S + S / 2;
        let exact = a.drain_due(t, usize::MAX);
        let curve = b.drain_due(t, 10);
        assert_eq!(exact, curve, "ramp {ramp}");
        let whole: u64 = drain(&mut Scheduler::new(&p, &cfg), t).len() as u64;
        assert_eq!(exact.iter().sum::<u64>(), whole);
        assert!(a.next_due().is_none_or(|d| d > t));
    }
    let p = profile(&[(100_000.0, None)], 0, "poisson");
    let cfg = SchedConfig::from_profile(&p, 1.0, Some(10 * S), 0, 1);
    let n = Scheduler::new(&p, &cfg).drain_due(S, 0)[0];
    assert!((99_000..=101_000).contains(&n), "{n}");
}
