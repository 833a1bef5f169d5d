//! squall-engine: the per-core engine that every Squall worker runs.
//!
//! - [`timer`]: hierarchical timer wheel (O(1) arm/cancel, exact expiry);
//! - [`clock`]: the monotonic clock read once per burst and a virtual clock for
//!   deterministic simulation, behind one [`Clock`] trait;
//! - [`counters`]: per-core counters written without locks or atomic RMW and summed by
//!   name from another thread;
//! - [`affinity`]: pinning a thread to a core;
//! - [`hugemem`]: large tables hinted into transparent huge pages;
//! - [`worker`]: the loop `rx burst -> handler -> timers -> poll -> tx burst` over any
//!   `squall_port::Port`.

pub mod affinity;
pub mod clock;
pub mod counters;
pub mod hugemem;
pub mod timer;
pub mod worker;

pub use clock::{Clock, MonotonicClock, VirtualClock};
pub use counters::{CounterId, CounterRegistry, CounterWriter};
pub use timer::TimerWheel;
pub use worker::{Ctx, Handler, Worker, WorkerConfig, WorkerStats};
