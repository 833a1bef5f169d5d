//! The per-side generator: [`app::GenApp`] runs astf programs over TCP flows,
//! [`udp::UdpFlows`] over UDP flows, [`side::Side`] joins them with a `TcpHost`, a port
//! and (client side) the scheduler,
//! [`pcap::PcapCap`] records the first flows of a run.

pub mod app;
pub mod pcap;
pub mod side;
pub mod udp;

pub use app::GenApp;
pub use pcap::PcapCap;
pub use side::{flow_opts, tcp_config, ClientGen, Side};
