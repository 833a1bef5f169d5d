//! squall: the stateful traffic generator (TRex ASTF model) on the Squall TCP stack.
//!
//! - [`assertion`]: `--assert` expressions on the figures of the results;
//! - [`gen`]: the per-side generator (astf programs over `TcpHost` flows);
//! - [`run`]: run drivers (T-mem1 single thread, virtual-clock simulation, two threads);
//! - [`shards`]: N per-core shards over their own wires (T-memN), results merged;
//! - [`watch`]: the thread that samples a real-time run once a second (progress line);
//! - [`stats`]: per template group counters and latency histograms;
//! - [`report`]: invariants, the summary table and the JSON document;
//! - [`series`]: the per-second time series sampled from the workers' published figures;
//! - [`source`]: loading a profile from `.json` or `.py`;
//! - [`metrics`]: the Prometheus text endpoint (`--metrics ADDR`);
//! - [`outputs`]: output paths (`--json`, `--pcap`, `--trace`) checked before a run;
//! - [`htmlreport`], [`svg`]: `squall report`, the HTML page and its inline SVG charts;
//! - [`liveview`]: the live view of `squall run` on a terminal (ratatui);
//! - [`impair`]: the `--impair` option parser;
//! - [`iface`]: single-side runs on a real interface: `--iface`/`--mode` parsing, checks;
//! - [`cores`]: a real-port run with one worker per queue (`--cores N`), steering and redirect;
//! - `worker`: one worker of a real-port run (its node and generator on one queue);
//! - [`config`]: `squall.toml`, defaults for `squall run`'s options;
//! - [`dut`]: both sides on two real ports with a device under test between them;
//! - [`flowtrace`]: `--trace`: sampled flows' pcap and per-flow TCP timeline;
//! - [`serve`]: `squall serve`, the HTTP/1.1 server on a real port;
//! - [`servelive`], [`serveseries`], [`servewatch`], [`serveview`], [`servemetrics`]: what
//!   `squall serve`'s workers publish, its time series, reporting thread and results,
//!   live view and Prometheus exposition.

/// Like `println!`, but a closed or failing standard output (`squall run ... | head`) is
/// not an error: the line is dropped and the run goes on (its `--json`, `--pcap` and
/// exit status are what count).
#[macro_export]
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

/// Like `print!`, with [`outln!`]'s handling of a closed standard output.
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stdout(), $($arg)*);
    }};
}

pub mod assertion;
pub mod bridge;
pub mod config;
pub mod cores;
pub mod dut;
pub mod flowtrace;
pub mod gen;
pub mod getserver;
pub mod htmlreport;
pub mod iface;
pub mod impair;
pub mod liveview;
pub mod metrics;
pub mod outputs;
pub mod ports;
pub mod report;
pub mod run;
pub mod series;
pub mod serve;
pub mod servelive;
pub mod servemetrics;
pub mod serveseries;
pub mod serveview;
pub mod servewatch;
pub mod shards;
pub mod source;
pub mod stats;
pub mod svg;
pub mod watch;
pub(crate) mod worker;
