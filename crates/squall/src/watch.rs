//! The watcher of a real-time `squall run`: the thread that waits for the run, reading
//! the workers' published figures once a second into the time series
//! ([`crate::series`]), and showing them: the live view on a terminal
//! ([`crate::liveview`]), else the progress line on stderr; the metrics endpoint too.
//! And the run's stop on SIGINT / SIGTERM ([`stop_on_signals`]), as the live view's keys.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::liveview::{Action, ViewState};

use crate::report;
use crate::run::Live;
use crate::series::{Reading, Series};

/// Stops the run on SIGINT or SIGTERM as the live view's keys do: the first signal stops
/// new flows and lets those in flight drain (at most `drain_sec`), the second cuts them
/// (the report follows either way), the third ends the process at once (exit 130, the
/// terminal restored). Signals are counted in the handler, so several sent back to back
/// count as several.
pub fn stop_on_signals(live: std::sync::Arc<Live>, drain_sec: f64) -> Result<(), String> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    use std::sync::atomic::AtomicUsize;
    let count = std::sync::Arc::new(AtomicUsize::new(0));
    for sig in [SIGINT, SIGTERM] {
        let c = count.clone();
        // SAFETY: the action only adds to an atomic counter (no allocation, no lock, no
        // I/O), which is async-signal-safe; signal-hook runs it from its handler.
        unsafe {
            signal_hook::low_level::register(sig, move || {
                c.fetch_add(1, Ordering::SeqCst);
            })
        }
        .map_err(|e| format!("signal handler: {e}"))?;
    }
    std::thread::Builder::new()
        .name("squall-signals".into())
        .spawn(move || {
            let mut acted = 0;
            loop {
                std::thread::sleep(Duration::from_millis(20));
                while acted < count.load(Ordering::SeqCst) {
                    acted += 1;
                    match acted {
                        1 => {
                            eprintln!(
                                "squall: stopping: no new flows, those in flight drain (at \
                                 most {drain_sec} s); again to cut them now"
                            );
                            live.ctl.request_stop(false);
                        }
                        2 => {
                            eprintln!("squall: cutting the flows in flight; again to exit at once");
                            live.ctl.request_stop(true);
                        }
                        _ => {
                            crate::liveview::restore_terminal();
                            std::process::exit(130);
                        }
                    }
                }
            }
        })
        .map_err(|e| format!("signal thread: {e}"))?;
    Ok(())
}

/// What the watcher does besides sampling.
#[derive(Clone, Debug, Default)]
pub struct WatchOptions {
    /// No progress line.
    pub quiet: bool,
    /// The Prometheus endpoint, updated at every sample.
    pub metrics: Option<crate::metrics::Exporter>,
    /// Show the live view (a terminal) instead of the progress line.
    pub live_view: Option<crate::liveview::Header>,
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
        match screen.as_mut() {
            None => std::thread::sleep(Duration::from_millis(20)),
            Some(sc) => {
                if let Some((code, mods)) = sc.key(Duration::from_millis(20)) {
                    match view.key(code, mods) {
                        Action::Stop => live.ctl.request_stop(false),
                        Action::Cut => live.ctl.request_stop(true),
                        Action::Redraw | Action::None => {}
                    }
                    sc.draw(&header, &view, &series);
                }
            }
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
