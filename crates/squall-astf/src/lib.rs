//! squall-astf: Squall's stateful traffic model (TRex ASTF concepts).
//!
//! - [`load`]: JSON IR (`schema/profile-v1.schema.json`, `docs/PROFILE.md`) -> validated,
//!   compiled [`Profile`]; every error carries its JSON path.
//! - [`model`]: the compiled profile (interned buffers, instruction arrays, pools, templates).
//! - [`interp`]: the per-flow program interpreter, a pure state machine over [`interp::FlowIo`].
//! - [`http`]: compiled HTTP requests (`http_request`): pieces chosen per request.
//! - [`sched`]: flow start times per template (CPS x multiplier, even/Poisson, ramp-up, limit).
//! - [`alloc`]: client address and per-core source port allocation.
//!
//! The crate is independent of the TCP/UDP engine: the engine that runs programs on real
//! flows is `squall::gen` (the `squall` crate).

pub mod alloc;
pub mod error;
pub mod http;
pub mod interp;
pub mod ipv6;
pub mod load;
pub mod model;
mod raw;
pub mod rng;
pub mod sched;
mod tunables;

pub use error::{LoadError, ProfileError};
pub use load::{load_profile_file, load_profile_str, load_profile_value, IR_VERSION};
pub use model::*;
