//! ICMPv6 in: echo requests to an owned address answered (RFC 4443 §4.2: same
//! identifier, sequence number and data), neighbour discovery handed to
//! [`crate::neigh6`], packet-too-big counted, everything else counted and dropped.

use squall_tcp::TxSink;
use squall_wire::{Icmpv6Packet, Icmpv6Repr};

use crate::ipv6::Ipv6In;
use crate::neigh6::{send_icmpv6, Neighbours6};

/// Hop limit of echo replies.
const REPLY_HOP_LIMIT: u8 = 64;

/// ICMPv6 counters of a node.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Icmp6Stats {
    /// Echo requests answered.
    pub echo_answered: u64,
    /// Neighbour discovery messages (see the node's `neigh6.stats`).
    pub ndp: u64,
    /// Packet-too-big messages received.
    pub packet_too_big: u64,
    /// Other messages, and echo requests to a group (counted, dropped).
    pub other: u64,
    /// Messages with a bad checksum, length or fields.
    pub bad: u64,
    /// Replies that could not be sent (no TX frame).
    pub tx_failed: u64,
}

/// Handles the ICMPv6 message of frame `d` (IPv6 checked and addressed to the node:
/// `ip`), with `mac` as the node's MAC.
pub fn on_icmpv6<S: TxSink>(
    d: &[u8],
    ip: &Ipv6In,
    mac: [u8; 6],
    st: &mut Icmp6Stats,
    neigh: &mut Neighbours6,
    tx: &mut S,
) {
    let Some(p) = d
        .get(ip.l4.0..ip.l4.1)
        .and_then(|m| Icmpv6Packet::new_checked(m).ok())
    else {
        st.bad += 1;
        return;
    };
    if !p.verify_checksum(&ip.src, &ip.dst) {
        st.bad += 1;
        return;
    }
    let m = match Icmpv6Repr::parse(&p) {
        Ok(m) => m,
        Err(squall_wire::Error::Unsupported) => {
            st.other += 1;
            return;
        }
        Err(_) => {
            st.bad += 1;
            if (133..=137).contains(&p.msg_type()) {
                neigh.stats.invalid += 1;
            }
            return;
        }
    };
    match m {
        Icmpv6Repr::Echo {
            is_reply: false,
            ident,
            seq,
            data,
        } if neigh.owns(&ip.dst) => {
            let reply = Icmpv6Repr::Echo {
                is_reply: true,
                ident,
                seq,
                data,
            };
            let mut to = [0u8; 6];
            to.copy_from_slice(&d[6..12]);
            if send_icmpv6(tx, to, mac, ip.dst, ip.src, REPLY_HOP_LIMIT, &reply) {
                st.echo_answered += 1;
            } else {
                st.tx_failed += 1;
            }
        }
        Icmpv6Repr::NeighborSolicit { .. }
        | Icmpv6Repr::NeighborAdvert { .. }
        | Icmpv6Repr::RouterAdvert(_) => {
            st.ndp += 1;
            neigh.on_ndp(d, ip, &m, tx);
        }
        Icmpv6Repr::PacketTooBig { .. } => st.packet_too_big += 1,
        Icmpv6Repr::Echo { .. } | Icmpv6Repr::RouterSolicit { .. } => st.other += 1,
    }
}
