//! The per-core worker loop: `rx burst -> handler -> timers -> handler poll -> tx burst`,
//! with the clock read once per iteration.
//!
//! A [`Worker`] owns one [`Port`], one [`Handler`], one [`TimerWheel`] and its burst
//! vectors (allocated once). Each iteration ([`Worker::run_once`]):
//! 1. reads the clock once (`now`) and tells the port (`Port::set_time`);
//! 2. receives up to `burst` frames and hands them to [`Handler::on_rx`], which moves the
//!    frames it answers or forwards into `ctx.tx` and releases the others (frames it
//!    leaves in the vector are released by the worker);
//! 3. advances the timer wheel to `now` and calls [`Handler::on_timer`] per expired token;
//! 4. calls [`Handler::poll`] (generators open flows or send data here);
//! 5. sends `ctx.tx` with one `tx_burst` (frames the port could not take stay queued for
//!    the next iteration, in order).
//!
//! An iteration is *busy* if it received, fired a timer, was told by `poll` that work was
//! done, or sent something; [`WorkerStats`] counts busy and idle iterations apart, so a
//! benchmark can leave idle spins out of CPU-per-operation figures.

use crate::clock::Clock;
use crate::counters::{CounterError, CounterId, CounterRegistry, CounterWriter};
use crate::timer::TimerWheel;
use squall_port::Port;
use std::sync::atomic::{AtomicBool, Ordering};

/// What a worker gives a handler on every call.
pub struct Ctx<'a, P: Port> {
    /// The port (alloc tx frames, release frames).
    pub port: &'a mut P,
    /// Frames to send at the end of this iteration (push here).
    pub tx: &'a mut Vec<P::Frame>,
    /// This core's timer wheel (tokens are the handler's own indices).
    pub timers: &'a mut TimerWheel,
    /// The time of this iteration (ns on the worker's clock).
    pub now: u64,
}

/// The application side of a worker (a TCP stack, a generator, an echo...).
pub trait Handler<P: Port> {
    /// A burst of received frames. Move the frames to keep/answer out of `frames` (e.g.
    /// into `ctx.tx`); those left in `frames` are released by the worker afterwards.
    fn on_rx(&mut self, ctx: &mut Ctx<'_, P>, frames: &mut Vec<P::Frame>);

    /// A timer armed by this handler expired.
    fn on_timer(&mut self, _ctx: &mut Ctx<'_, P>, _token: u32) {}

    /// Called once per iteration after rx and timers; return true if work was done.
    fn poll(&mut self, _ctx: &mut Ctx<'_, P>) -> bool {
        false
    }
}

/// Worker settings.
#[derive(Clone, Copy, Debug)]
pub struct WorkerConfig {
    /// Frames per rx burst (and the reserved size of the tx vector).
    pub burst: usize,
    /// Tokens of the timer wheel (grow it later through `timers_mut` if needed).
    pub timer_capacity: usize,
    /// `run` yields the core after this many idle iterations in a row (0 = never: pure
    /// busy polling). Useful when workers share cores with other work.
    pub idle_yield_after: u32,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        WorkerConfig {
            burst: 32,
            timer_capacity: 1024,
            idle_yield_after: 0,
        }
    }
}

/// Loop counters of one worker.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WorkerStats {
    /// Iterations run.
    pub iterations: u64,
    /// Iterations that did some work.
    pub busy_iterations: u64,
    /// Frames received.
    pub rx_frames: u64,
    /// Frames accepted by `tx_burst`.
    pub tx_frames: u64,
    /// Timers fired.
    pub timer_fires: u64,
}

/// Ids of the worker's counters in a registry.
struct Published {
    writer: CounterWriter,
    ids: [CounterId; 5],
}

/// Names under which workers publish their loop counters.
pub const WORKER_COUNTERS: [&str; 5] = [
    "worker_iterations",
    "worker_busy_iterations",
    "worker_rx_frames",
    "worker_tx_frames",
    "worker_timer_fires",
];

/// One core's loop.
pub struct Worker<P: Port, H: Handler<P>, C: Clock> {
    port: P,
    handler: H,
    clock: C,
    timers: TimerWheel,
    rx: Vec<P::Frame>,
    tx: Vec<P::Frame>,
    expired: Vec<u32>,
    burst: usize,
    idle_yield_after: u32,
    now: u64,
    stats: WorkerStats,
    published: Option<Published>,
}

impl<P: Port, H: Handler<P>, C: Clock> Worker<P, H, C> {
    /// A worker over `port` running `handler` on `clock`.
    pub fn new(port: P, handler: H, clock: C, cfg: WorkerConfig) -> Self {
        let burst = cfg.burst.max(1);
        let now = clock.now_ns();
        Worker {
            port,
            handler,
            clock,
            timers: TimerWheel::new(cfg.timer_capacity, now),
            rx: Vec::with_capacity(burst),
            tx: Vec::with_capacity(burst * 4),
            expired: Vec::with_capacity(burst),
            burst,
            idle_yield_after: cfg.idle_yield_after,
            now,
            stats: WorkerStats::default(),
            published: None,
        }
    }

    /// Publishes the loop counters ([`WORKER_COUNTERS`]) in `registry` under `label`
    /// (updated every iteration with plain relaxed stores).
    pub fn publish_counters(
        &mut self,
        registry: &CounterRegistry,
        label: &str,
    ) -> Result<(), CounterError> {
        let mut ids = [CounterId(0); 5];
        for (i, name) in WORKER_COUNTERS.iter().enumerate() {
            ids[i] = registry.register(name)?;
        }
        self.published = Some(Published {
            writer: registry.new_writer(label),
            ids,
        });
        Ok(())
    }

    /// Runs one iteration; returns whether it was busy.
    pub fn run_once(&mut self) -> bool {
        let now = self.clock.now_ns();
        self.now = now;
        self.port.set_time(now);
        let mut ctx = Ctx {
            port: &mut self.port,
            tx: &mut self.tx,
            timers: &mut self.timers,
            now,
        };
        let n = ctx.port.rx_burst(&mut self.rx, self.burst);
        if n > 0 {
            self.handler.on_rx(&mut ctx, &mut self.rx);
            if !self.rx.is_empty() {
                ctx.port.release_all(&mut self.rx);
            }
        }
        ctx.timers.advance(now, &mut self.expired);
        let fired = self.expired.len();
        for i in 0..fired {
            let token = self.expired[i];
            self.handler.on_timer(&mut ctx, token);
        }
        self.expired.clear();
        let polled = self.handler.poll(&mut ctx);
        let sent = if ctx.tx.is_empty() {
            0
        } else {
            ctx.port.tx_burst(ctx.tx)
        };
        let busy = n > 0 || fired > 0 || polled || sent > 0;
        let s = &mut self.stats;
        s.iterations += 1;
        s.busy_iterations += u64::from(busy);
        s.rx_frames += n as u64;
        s.tx_frames += sent as u64;
        s.timer_fires += fired as u64;
        if let Some(p) = &self.published {
            let vals = [
                s.iterations,
                s.busy_iterations,
                s.rx_frames,
                s.tx_frames,
                s.timer_fires,
            ];
            for (id, v) in p.ids.iter().zip(vals) {
                p.writer.set(*id, v);
            }
        }
        busy
    }

    /// Runs until `stop` is set (checked every iteration, relaxed). Yields the core after
    /// `idle_yield_after` idle iterations in a row, if set.
    pub fn run(&mut self, stop: &AtomicBool) {
        let mut idle = 0u32;
        while !stop.load(Ordering::Relaxed) {
            if self.run_once() {
                idle = 0;
            } else {
                idle += 1;
                if self.idle_yield_after > 0 && idle >= self.idle_yield_after {
                    std::thread::yield_now();
                    idle = 0;
                }
            }
        }
    }

    /// Runs at most `max_iterations` iterations or until `done` returns true (checked
    /// after each iteration); returns the iterations run.
    pub fn run_until(&mut self, max_iterations: u64, mut done: impl FnMut(&Self) -> bool) -> u64 {
        let mut i = 0;
        while i < max_iterations {
            self.run_once();
            i += 1;
            if done(self) {
                break;
            }
        }
        i
    }

    /// Earliest time something is due on this worker without new input (a timer or a
    /// delayed frame on the port), for virtual-clock simulations that jump time.
    pub fn next_event_ns(&self) -> Option<u64> {
        match (self.timers.next_deadline(), self.port.next_event_ns()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Loop counters.
    pub fn stats(&self) -> WorkerStats {
        self.stats
    }

    /// Time of the last iteration.
    pub fn now(&self) -> u64 {
        self.now
    }

    /// The port.
    pub fn port(&self) -> &P {
        &self.port
    }

    /// The port, mutable.
    pub fn port_mut(&mut self) -> &mut P {
        &mut self.port
    }

    /// The handler.
    pub fn handler(&self) -> &H {
        &self.handler
    }

    /// The handler, mutable.
    pub fn handler_mut(&mut self) -> &mut H {
        &mut self.handler
    }

    /// The timer wheel.
    pub fn timers(&self) -> &TimerWheel {
        &self.timers
    }

    /// The timer wheel, mutable (arm timers before the loop starts, grow it).
    pub fn timers_mut(&mut self) -> &mut TimerWheel {
        &mut self.timers
    }

    /// Frames waiting in the tx queue (not yet accepted by the port).
    pub fn tx_pending(&self) -> usize {
        self.tx.len()
    }

    /// Releases queued frames and returns the port, handler and clock.
    pub fn into_parts(mut self) -> (P, H, C) {
        let mut tx = std::mem::take(&mut self.tx);
        self.port.release_all(&mut tx);
        (self.port, self.handler, self.clock)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::VirtualClock;
    use squall_port::mem::{pair, MemConfig, MemPort};
    use squall_port::FrameBuf;

    /// Sends one frame when its timer fires; drops what it receives.
    struct OneShot {
        fired: Vec<(u32, u64)>,
    }

    impl Handler<MemPort> for OneShot {
        fn on_rx(
            &mut self,
            _ctx: &mut Ctx<'_, MemPort>,
            _frames: &mut Vec<squall_port::mem::MemFrame>,
        ) {
        }
        fn on_timer(&mut self, ctx: &mut Ctx<'_, MemPort>, token: u32) {
            self.fired.push((token, ctx.now));
            let start = ctx.tx.len();
            ctx.port.alloc_tx(ctx.tx, 1);
            for f in &mut ctx.tx[start..] {
                f.fill(&[1; 60]).unwrap();
            }
        }
    }

    #[test]
    fn idle_iterations_are_not_busy_and_timers_fire_on_time() {
        let (a, mut b) = pair(MemConfig::default()).unwrap();
        let clock = VirtualClock::new(0);
        let mut w = Worker::new(
            a,
            OneShot { fired: Vec::new() },
            &clock,
            WorkerConfig::default(),
        );
        w.timers_mut().arm(3, 5_000);
        for _ in 0..10 {
            assert!(!w.run_once());
        }
        clock.set(4_999);
        assert!(!w.run_once());
        clock.set(5_000);
        assert!(w.run_once());
        assert_eq!(w.handler().fired, vec![(3, 5_000)]);
        let s = w.stats();
        assert_eq!(s.iterations, 12);
        assert_eq!(s.busy_iterations, 1);
        assert_eq!(s.timer_fires, 1);
        assert_eq!(s.tx_frames, 1);
        // The frame crossed; leftover rx frames are released by the worker.
        let mut v = Vec::new();
        assert_eq!(b.rx_burst(&mut v, 8), 1);
        b.tx_burst(&mut v);
        assert!(w.run_once());
        assert_eq!(w.stats().rx_frames, 1);
        let (port, _, _) = w.into_parts();
        assert_eq!(port.free_frames(), MemConfig::default().frames as usize);
    }
}
