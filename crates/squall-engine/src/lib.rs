//! squall-engine: the per-core engine that every Squall worker runs.
//!
//! - [`timer`]: hierarchical timer wheel (O(1) arm/cancel, exact expiry);
//! - [`clock`]: the monotonic clock read once per burst and a virtual clock for
//!   deterministic simulation, behind one [`Clock`] trait;
//! - [`affinity`]: pinning a thread to a core;
//! - [`hugemem`]: large tables hinted into transparent huge pages.
//!
//! The loop turn itself is the node's (`squall_stack::Node::turn`): it owns the port, so
//! this crate depends on nothing of Squall's.

pub mod affinity;
pub mod clock;
pub mod hugemem;
pub mod timer;

pub use clock::{Clock, MonotonicClock, VirtualClock};
pub use timer::TimerWheel;
