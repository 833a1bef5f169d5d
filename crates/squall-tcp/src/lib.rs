//! squall-tcp: a compact, fast TCP (RFC 9293) for a traffic generator and servers holding
//! millions of flows per core. See the crate README section below for the API.

pub mod api;
pub mod cc;
pub mod counters;
pub mod flowtable;
pub mod host;
pub mod isn;
pub mod ooo;
pub mod pkt;
pub mod rtt;
pub mod sendq;
pub mod seq;
pub mod tcb;

pub use api::{CloseReason, ConnectError, Ctl, FlowId, SendError, TcpApp, TxSink};
pub use flowtable::FlowKey;
pub use host::{TcpConfig, TcpHost};
pub use sendq::{BufId, BufRegistry};
pub use tcb::State;
