//! The Ethernet + IPv4 + TCP fast path (one-pass receive parser, `TxHdr` header writer),
//! now [`squall_wire::segment`], re-exported under its former path; plus the flow-table
//! key of a frame for prefetching.

pub use squall_wire::segment::*;

/// Reads the 4-tuple (as seen by the receiving host) of an IPv4/TCP frame without any
/// verification, for prefetching; None for anything unusual (full parsing decides later).
#[inline]
pub fn peek_key(f: &[u8]) -> Option<crate::flowtable::FlowKey> {
    let (src_ip, dst_ip, src_port, dst_port) = peek_addrs(f)?;
    Some(crate::flowtable::FlowKey {
        local_ip: dst_ip,
        remote_ip: src_ip,
        local_port: dst_port,
        remote_port: src_port,
    })
}
