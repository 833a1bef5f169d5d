//! The watcher of a real-time `squall run`: the thread that waits for the run, reading
//! the workers' published figures once a second into the time series
//! ([`crate::series`]) and printing the progress line on stderr.

use std::time::{Duration, Instant};

use crate::report;
use crate::run::Live;
use crate::series::{Reading, Series};

/// What the watcher does besides sampling.
#[derive(Clone, Debug, Default)]
pub struct WatchOptions {
    /// No progress line.
    pub quiet: bool,
    /// The Prometheus endpoint, updated at every sample.
    pub metrics: Option<crate::metrics::Exporter>,
}

/// Samples `live` into `series` once a second until `finished()`, then once more (the
/// last, shorter interval), and returns the series.
pub fn watch(
    live: &Live,
    finished: &dyn Fn() -> bool,
    o: &WatchOptions,
    mut series: Series,
) -> Series {
    let t0 = Instant::now();
    let mut next = t0 + Duration::from_secs(1);
    while !finished() {
        std::thread::sleep(Duration::from_millis(20));
        let now = Instant::now();
        if now < next {
            continue;
        }
        next += Duration::from_secs(1);
        series.push(Reading::read(live, now.duration_since(t0).as_secs_f64()));
        if let Some(m) = &o.metrics {
            m.update(crate::metrics::render(&series, true));
        }
        let Some(s) = series.samples.last() else {
            continue;
        };
        if !o.quiet {
            eprintln!(
                "{}",
                report::progress_line(
                    s.t,
                    s.cps,
                    s.active,
                    s.wire_gbps(),
                    s.completed,
                    s.errors_total
                )
            );
        }
    }
    let t = t0.elapsed().as_secs_f64();
    if t - series.last.t > 0.05 {
        series.push(Reading::read(live, t));
    }
    if let Some(m) = &o.metrics {
        m.update(crate::metrics::render(&series, false));
    }
    series
}
