//! End to end: workers over the mem wire, on two threads (monotonic clock) and in one
//! thread on a virtual clock with impairment (deterministic).

use squall_engine::affinity::{available_cores, pin_current_thread};
use squall_engine::{
    Clock, CounterRegistry, Ctx, Handler, MonotonicClock, VirtualClock, Worker, WorkerConfig,
};
use squall_port::mem::{pair, Impairment, MemConfig, MemPort};
use squall_port::{FrameBuf, Port};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Sends numbered frames (u64 at offset 14) paced by a timer, counts echoes in order.
struct Pinger {
    total: u64,
    sent: u64,
    echoed: u64,
    out_of_order: u64,
    interval_ns: u64,
    done: Arc<AtomicU64>,
}

impl<P: Port> Handler<P> for Pinger {
    fn on_rx(&mut self, _ctx: &mut Ctx<'_, P>, frames: &mut Vec<P::Frame>) {
        for f in frames.iter() {
            let d = f.data();
            let n = u64::from_le_bytes(d[14..22].try_into().unwrap());
            if n != self.echoed || d[22] != 0xee {
                self.out_of_order += 1;
            }
            self.echoed += 1;
        }
        self.done.store(self.echoed, Ordering::Relaxed);
        // Left in `frames`: the worker releases them.
    }

    fn on_timer(&mut self, ctx: &mut Ctx<'_, P>, token: u32) {
        assert_eq!(token, 0);
        let want = (self.total - self.sent).min(16) as usize;
        let start = ctx.tx.len();
        ctx.port.alloc_tx(ctx.tx, want);
        for f in &mut ctx.tx[start..] {
            f.set_len(64).unwrap();
            let d = f.data_mut();
            d[..14].fill(0);
            d[14..22].copy_from_slice(&self.sent.to_le_bytes());
            d[22] = 0;
            self.sent += 1;
        }
        if self.sent < self.total {
            ctx.timers.arm(0, ctx.now + self.interval_ns);
        }
    }
}

/// Answers every frame in place (marks byte 22) without copying it.
struct Echo;

impl<P: Port> Handler<P> for Echo {
    fn on_rx(&mut self, ctx: &mut Ctx<'_, P>, frames: &mut Vec<P::Frame>) {
        for mut f in frames.drain(..) {
            f.data_mut()[22] = 0xee;
            ctx.tx.push(f);
        }
    }
}

fn pinger(total: u64, interval_ns: u64, done: Arc<AtomicU64>) -> Pinger {
    Pinger {
        total,
        sent: 0,
        echoed: 0,
        out_of_order: 0,
        interval_ns,
        done,
    }
}

#[test]
fn two_threads_echo_over_the_mem_wire() {
    let (a, b) = pair(MemConfig::default()).unwrap();
    let registry = CounterRegistry::new(64);
    let done = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    const TOTAL: u64 = 50_000;
    let origin = Instant::now();
    let cores = available_cores();

    let mut wa = Worker::new(
        a,
        pinger(TOTAL, 1_000, done.clone()),
        MonotonicClock::with_origin(origin),
        WorkerConfig::default(),
    );
    wa.publish_counters(&registry, "core0").unwrap();
    let now = wa.now();
    wa.timers_mut().arm(0, now);
    let mut wb = Worker::new(
        b,
        Echo,
        MonotonicClock::with_origin(origin),
        WorkerConfig {
            idle_yield_after: 1000,
            ..WorkerConfig::default()
        },
    );
    wb.publish_counters(&registry, "core1").unwrap();

    let (s1, s2) = (stop.clone(), stop.clone());
    let (c0, c1) = (cores[0], *cores.last().unwrap());
    let ta = std::thread::spawn(move || {
        pin_current_thread(c0).unwrap();
        wa.run(&s1);
        wa
    });
    let tb = std::thread::spawn(move || {
        pin_current_thread(c1).unwrap();
        wb.run(&s2);
        wb
    });
    // Wait for completion (bounded so a bug fails instead of hanging).
    let deadline = Instant::now() + Duration::from_secs(60);
    while done.load(Ordering::Relaxed) < TOTAL && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    stop.store(true, Ordering::Relaxed);
    let wa = ta.join().unwrap();
    let wb = tb.join().unwrap();
    let p = wa.handler();
    assert_eq!(p.sent, TOTAL);
    assert_eq!(p.echoed, TOTAL, "every frame came back");
    assert_eq!(p.out_of_order, 0);
    assert_eq!(wb.stats().rx_frames, TOTAL);
    assert_eq!(wb.stats().tx_frames, TOTAL);
    assert!(wa.stats().timer_fires >= TOTAL / 16);
    assert!(wa.stats().busy_iterations <= wa.stats().iterations);
    // Counters summed from this thread match the workers' own.
    assert_eq!(registry.sum("worker_rx_frames"), 2 * TOTAL);
    assert_eq!(registry.sum("worker_tx_frames"), 2 * TOTAL);
    let per = registry.per_block("worker_iterations");
    assert_eq!(per.len(), 2);
    assert_eq!(per[0].1, wa.stats().iterations);
}

/// One thread, virtual clock, 1 ms delay and 1% loss: deterministic, and time jumps.
fn simulate(seed: u64) -> (u64, u64, u64, Vec<u64>) {
    let imp = |s| Impairment {
        delay_ns: 1_000_000,
        loss: 0.01,
        seed: s,
        ..Impairment::default()
    };
    let (a, b) = pair(MemConfig {
        a_to_b: imp(seed),
        b_to_a: imp(seed + 1),
        ..MemConfig::default()
    })
    .unwrap();
    let clock = Arc::new(VirtualClock::new(0));
    let done = Arc::new(AtomicU64::new(0));
    let mut wa: Worker<MemPort, Pinger, Arc<VirtualClock>> = Worker::new(
        a,
        pinger(2_000, 10_000, done),
        clock.clone(),
        WorkerConfig::default(),
    );
    wa.timers_mut().arm(0, 0);
    let mut wb = Worker::new(b, Echo, clock.clone(), WorkerConfig::default());
    let mut jumps = Vec::new();
    for _ in 0..100_000 {
        let busy = wa.run_once() | wb.run_once();
        if !busy {
            match (wa.next_event_ns(), wb.next_event_ns()) {
                (None, None) => break,
                (x, y) => {
                    let t = x.unwrap_or(u64::MAX).min(y.unwrap_or(u64::MAX));
                    assert!(t >= clock.now_ns(), "next event in the past");
                    clock.set(t);
                    jumps.push(t);
                }
            }
        }
    }
    let p = wa.handler();
    (p.sent, p.echoed, clock.now_ns(), jumps)
}

#[test]
fn single_thread_virtual_clock_is_deterministic() {
    let (sent, echoed, end, jumps) = simulate(5);
    assert_eq!(sent, 2_000);
    // ~2% lost over the round trip.
    assert!((1_900..2_000).contains(&echoed), "echoed {echoed}");
    // 125 timer ticks 10 us apart, then the last echoes 2 ms later.
    assert!(end >= 2_000_000 + 124 * 10_000, "end {end}");
    assert!(end < 10_000_000, "end {end}");
    assert_eq!(simulate(5), (sent, echoed, end, jumps.clone()));
    assert_ne!(simulate(6).1, 0);
}
