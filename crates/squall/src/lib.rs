//! squall: the stateful traffic generator (TRex ASTF model) on the Squall TCP stack.
//!
//! - [`gen`]: the per-side generator (astf programs over `TcpHost` flows);
//! - [`run`]: run drivers (T-mem1 single thread, virtual-clock simulation, two threads);
//! - [`shards`]: N per-core shards over their own wires (T-memN), results merged;
//! - [`stats`]: per template group counters and latency histograms;
//! - [`report`]: invariants, the summary table and the JSON document;
//! - [`source`]: loading a profile from `.json` or `.py`;
//! - [`impair`]: the `--impair` option parser;
//! - [`iface`]: single-side runs on a real interface: `--iface`/`--mode` parsing, checks;
//! - [`cores`]: a real-port run with one worker per queue (`--cores N`), steering and redirect;
//! - `worker`: one worker of a real-port run (its node and generator on one queue);
//! - [`config`]: `squall.toml`, defaults for `squall run`'s options;
//! - [`dut`]: both sides on two real ports with a device under test between them.

pub mod config;
pub mod cores;
pub mod dut;
pub mod gen;
pub mod iface;
pub mod impair;
pub mod report;
pub mod run;
pub mod shards;
pub mod source;
pub mod stats;
pub(crate) mod worker;
