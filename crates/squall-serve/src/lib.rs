//! The HTTP/1.1 server of `squall serve` as a node application, apart from any port or
//! command line (the `squall` crate runs it on a real port; `squall-bench` on the
//! in-memory wire):
//!
//! - [`files`]: the files under the root, loaded into memory at start;
//! - [`respond`]: routes, conditional requests, ranges and the header blocks;
//! - [`app`]: the node application (connections, pipelining, timeouts, stop);
//! - [`log`]: the buffered access log;
//! - [`lathist`]: the request-latency histogram the workers publish.

pub mod app;
pub mod files;
pub mod lathist;
pub mod log;
pub mod respond;
