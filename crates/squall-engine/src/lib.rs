//! squall-engine: the per-core engine (timer wheel, clocks, counters, core pinning and
//! the worker loop that ties a `Port` to a handler).

pub mod timer;

pub use timer::TimerWheel;
