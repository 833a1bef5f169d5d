//! The per-side generator: [`app::GenApp`] runs astf programs over TCP flows,
//! [`udp::UdpFlows`] over UDP flows, [`side::GenSide`] joins them with (client side) the
//! scheduler as one application of a `squall_stack::Node`, [`side::Side`] is that app on
//! its node. [`http::HttpSide`] follows the HTTP responses of `http_request` programs.

pub mod app;
pub mod http;
pub mod side;
pub mod udp;

pub use app::{GenApp, DEFAULT_STALL_NS};
pub use side::{
    flow_opts, owned_ranges, owned_ranges6, tcp_config, ClientGen, GenSide, Side, LATE_START_NS,
};
