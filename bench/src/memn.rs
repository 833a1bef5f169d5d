//! T-memN (BENCHMARKS.md): N per-core shards in one process, each pinned to its own core
//! and running both ends of its own connections over its own in-memory wire, shared
//! nothing — the T-mem1 cell of [`crate::squall`] (the same node, sink and port; the
//! generator's own server, or `squall serve`'s app with `serve`) on N cores at once.
//! The line sums the shards' rates and takes CPU per operation over all of them (total
//! CPU / total operations), with `"cores": N`.

use crate::report::Record;
use crate::squall;
use crate::workload::RunCfg;

/// Runs `cores` shards of W1 or W2 (`requests`) at once, `cfg.conns` connections each;
/// with `serve` each shard's server is `squall serve`'s app (HTTP parsed on both ends).
pub fn run(
    requests: bool,
    serve: bool,
    cfg: &RunCfg,
    offload: bool,
    cores: usize,
) -> Result<Record, String> {
    let avail = squall_engine::affinity::available_cores();
    if cores == 0 || cores > avail.len().max(1) {
        return Err(format!(
            "T-memN: {cores} cores asked, {} available",
            avail.len()
        ));
    }
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(cores));
    let shards: Vec<_> = (0..cores)
        .map(|k| {
            let (cfg, b, core) = (*cfg, barrier.clone(), avail[k]);
            std::thread::Builder::new()
                .name(format!("memn-{k}"))
                .spawn(move || {
                    let _ = squall_engine::affinity::pin_current_thread(core);
                    b.wait();
                    let w = if requests { "W2" } else { "W1" };
                    squall::run_cell(w, false, serve, &cfg, offload)
                })
                .map_err(|e| e.to_string())
        })
        .collect::<Result<_, _>>()?;
    let mut recs = Vec::with_capacity(cores);
    for (k, h) in shards.into_iter().enumerate() {
        recs.push(h.join().map_err(|_| format!("shard {k} panicked"))??);
    }
    Ok(combine(&recs))
}

/// One line for the shards together: rates summed, CPU per op weighted by each shard's
/// operations, the longest measured window.
pub fn combine(recs: &[Record]) -> Record {
    let ops = |r: &Record| r.cps.or(r.rps).unwrap_or(0.0) * r.seconds;
    let total_ops: f64 = recs.iter().map(ops).sum();
    let sum =
        |f: fn(&Record) -> Option<f64>| -> Option<f64> { recs.iter().map(f).sum::<Option<f64>>() };
    let weighted = |f: fn(&Record) -> Option<f64>| -> Option<f64> {
        if total_ops <= 0.0 {
            return None;
        }
        let s: Option<f64> = recs.iter().map(|r| f(r).map(|v| v * ops(r))).sum();
        s.map(|s| s / total_ops)
    };
    let first = recs.first().cloned().unwrap_or_default();
    Record {
        topology: "T-memN".into(),
        cores: Some(recs.len() as u64),
        cps: sum(|r| r.cps),
        rps: sum(|r| r.rps),
        gbps: sum(|r| r.gbps),
        mpps: sum(|r| r.mpps),
        frames_per_op: weighted(|r| r.frames_per_op),
        cpu_us_per_op: weighted(|r| r.cpu_us_per_op),
        p50_us: None,
        p99_us: None,
        errors: recs.iter().map(|r| r.errors).sum(),
        seconds: recs.iter().map(|r| r.seconds).fold(0.0, f64::max),
        ..first
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_add_rates_and_weigh_cpu_by_operations() {
        let a = Record {
            workload: "W1".into(),
            cps: Some(100.0),
            cpu_us_per_op: Some(10.0),
            seconds: 2.0,
            errors: 1,
            ..Default::default()
        };
        let b = Record {
            cps: Some(300.0),
            cpu_us_per_op: Some(20.0),
            seconds: 1.0,
            ..a.clone()
        };
        let c = combine(&[a, b]);
        assert_eq!(c.cps, Some(400.0));
        // 200 ops at 10 us + 300 ops at 20 us over 500 ops.
        assert_eq!(c.cpu_us_per_op, Some(16.0));
        assert_eq!(c.cores, Some(2));
        assert_eq!(c.topology, "T-memN");
        assert_eq!(c.errors, 2);
        assert_eq!(c.seconds, 2.0);
        assert_eq!(c.rps, None);
    }

    // Shards of `squall serve`'s app start at once (each loads the benchmark site) and
    // all answer: a line for the shards together, every answer checked, no errors.
    #[test]
    fn serve_shards_run_side_by_side() {
        let cores = squall_engine::affinity::available_cores().len().clamp(1, 2);
        let mut cfg = RunCfg::new(50, 0.3);
        cfg.max_ops = 2_000;
        for requests in [false, true, false, true] {
            let r = run(requests, true, &cfg, false, cores).expect("shards ran");
            assert_eq!(r.server, "squall-serve");
            assert_eq!(r.cores, Some(cores as u64));
            assert_eq!(r.errors, 0, "{r:?}");
            assert!(r.cps.or(r.rps).unwrap_or(0.0) > 0.0, "{r:?}");
        }
    }
}
