//! squall-bench: the benchmark harness of BENCHMARKS.md. Runs W1/W2/W3/W4 on T-mem1 for any
//! stack pair implementing [`pair::MemPair`] (smoltcp 0.12 built in) and W1/W2 on T-loop
//! for the Linux kernel, and T-veth (kernel peers and Squall over the lab's veth,
//! [`veth`]), printing one JSON line per cell.

pub mod blast;
pub mod http;
pub mod kernel;
pub mod measure;
#[cfg(feature = "squall")]
pub mod mem2;
pub mod memif;
#[cfg(feature = "squall")]
pub mod memn;
pub mod memwire;
pub mod pair;
pub mod portwire;
pub mod report;
pub mod serve_cmd;
pub mod site;
pub mod smol;
#[cfg(feature = "squall")]
pub mod squall;
#[cfg(feature = "squall")]
mod squall_apps;
pub mod veth;
pub mod workload;
