//! The watcher of a real-time `squall run`: the thread that waits for the run, reading
//! the workers' published figures once a second into the time series
//! ([`crate::series`]), and showing them: the live view on a terminal
//! ([`crate::liveview`]), else the progress line on stderr; the metrics endpoint too.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::liveview::{Action, ViewState};

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
    /// Show the live view (a terminal) instead of the progress line.
    pub live_view: Option<crate::liveview::Header>,
    /// The run obeys `q` (stop/cut through [`crate::run::Control`]: the memory-wire
    /// runs); otherwise `q` closes the live view and the progress line takes over.
    pub stoppable: bool,
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
    let mut screen = o
        .live_view
        .as_ref()
        .and_then(|_| crate::liveview::Screen::open().ok());
    let header = o.live_view.clone().unwrap_or_default();
    let mut view = ViewState::default();
    let mut requested = false;
    while !finished() {
        let mut close = false;
        match screen.as_mut() {
            None => std::thread::sleep(Duration::from_millis(20)),
            Some(sc) => {
                if let Some((code, mods)) = sc.key(Duration::from_millis(20)) {
                    match view.key(code, mods) {
                        Action::Stop | Action::Cut if !o.stoppable => close = true,
                        Action::Stop => live.ctl.stop.store(true, Ordering::Relaxed),
                        Action::Cut => {
                            live.ctl.cut.store(true, Ordering::Relaxed);
                            live.ctl.stop.store(true, Ordering::Relaxed);
                        }
                        Action::Redraw | Action::None => {}
                    }
                    sc.draw(&header, &view, &series);
                }
            }
        }
        if close {
            screen = None;
            eprintln!("squall: live view closed (this run cannot be stopped from the keyboard: Ctrl-C ends it); progress lines follow");
        }
        let now = Instant::now();
        // Fresh side reports for the sample: asked a little ahead (workers publish
        // within 10 ms of the request).
        if !requested && now + Duration::from_millis(60) >= next {
            crate::series::request_snapshots(live);
            requested = true;
        }
        if now < next {
            continue;
        }
        requested = false;
        next += Duration::from_secs(1);
        series.push(Reading::read(live, now.duration_since(t0).as_secs_f64()));
        if let Some(m) = &o.metrics {
            m.update(crate::metrics::render(&series, true));
        }
        let Some(s) = series.samples.last() else {
            continue;
        };
        if let Some(sc) = screen.as_mut() {
            sc.draw(&header, &view, &series);
        } else if !o.quiet {
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
    drop(screen);
    let t = t0.elapsed().as_secs_f64();
    if t - series.last.t > 0.05 {
        series.push(Reading::read(live, t));
    }
    if let Some(m) = &o.metrics {
        m.update(crate::metrics::render(&series, false));
    }
    series
}
