//! ICMPv6 in: echo requests to an owned address answered (RFC 4443 §4.2: same
//! identifier, sequence number and data), neighbour discovery handed to
//! [`crate::neigh6`], errors quoting a TCP segment (destination unreachable, packet too
//! big, time exceeded, parameter problem) returned for the TCP host
//! ([`squall_tcp::TcpHost::icmp_error`]), everything else counted and dropped. Out:
//! "port unreachable" for a UDP datagram no app took and "fragment reassembly time exceeded" ([`send_error6`]), within the
//! node's error budget.

use std::ops::Range;

use squall_tcp::{IcmpError, TxSink};
use squall_wire::{
    EtherType, EthernetRepr, Icmpv6Packet, Icmpv6Repr, IpProtocol, Ipv6Repr, MacAddress,
    IPV6_HEADER_LEN,
};

use crate::icmp::{ErrorBudget, ErrorKind, PEER_INTERVAL6_NS, QUOTED_AT};
use crate::ipv6::Ipv6In;
use crate::neigh::ETH_HLEN;
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
    /// Errors quoting a TCP segment, handed to the TCP host (packet-too-big included).
    pub errors_to_tcp: u64,
    /// Other messages, and echo requests to a group (counted, dropped).
    pub other: u64,
    /// Messages with a bad checksum, length or fields.
    pub bad: u64,
    /// Echo requests from a source no reply may go to (a group, the unspecified address,
    /// loopback: RFC 4291 §2.5.2-2.7), dropped.
    pub invalid_src: u64,
    /// Replies that could not be sent (no TX frame).
    pub tx_failed: u64,
    /// Port unreachables sent (UDP datagrams no app took).
    pub unreach_sent: u64,
    /// Port unreachables not sent: over the error budget, or the datagram came from a
    /// source that is not unicast or to a multicast MAC (RFC 4443 §2.4 e).
    pub unreach_suppressed: u64,
    /// Neighbour discovery messages that came in fragments (ignored, RFC 6980 §5).
    pub ndp_fragmented: u64,
    /// Fragment reassembly time exceeded sent (packets whose first fragment came, not all
    /// the others).
    pub reasm_exceeded_sent: u64,
    /// Of those, not sent (as `unreach_suppressed`).
    pub reasm_exceeded_suppressed: u64,
}

impl Icmp6Stats {
    /// The counters of `kind`'s errors sent and not sent.
    fn sent_held(&mut self, kind: ErrorKind) -> (&mut u64, &mut u64) {
        kind.counters(
            [&mut self.unreach_sent, &mut self.reasm_exceeded_sent],
            [
                &mut self.unreach_suppressed,
                &mut self.reasm_exceeded_suppressed,
            ],
        )
    }
}

/// Most bytes of the offending packet an ICMPv6 error quotes: the error stays within the
/// minimum MTU (RFC 4443 §2.4 c).
const QUOTE_MAX6: usize = 1280 - 40 - 8;

/// Answers the packet of frame `d` (IPv6 `ip`, sent to one of the node's unicast
/// addresses) with the error `kind` ("destination unreachable: port unreachable", RFC 4443
/// §3.1 code 4, for a UDP datagram no app took; "time exceeded: fragment reassembly time
/// exceeded", §3.3 code 1) quoting as much of it as fits the minimum MTU, within
/// `budget`. Not to a source that is not unicast or is the node's own (`from_us`), nor to
/// a packet sent to a multicast address or MAC (RFC 4443 §2.4 e).
#[allow(clippy::too_many_arguments)]
pub fn send_error6<S: TxSink>(
    kind: ErrorKind,
    d: &[u8],
    ip: &Ipv6In,
    from_us: bool,
    mac: [u8; 6],
    st: &mut Icmp6Stats,
    budget: &mut ErrorBudget,
    now: u64,
    tx: &mut S,
) {
    // Not unicast: unspecified, multicast, loopback, an IPv4-mapped address (RFC 4291
    // §2.5.3, §2.5.5.2).
    let s = ip.src.0;
    let not_unicast = ip.src.is_unspecified()
        || ip.src.is_multicast()
        || s == 1u128.to_be_bytes()
        || (s[..10] == [0; 10] && s[10..12] == [0xff, 0xff]);
    // Never about an ICMPv6 error or a redirect (RFC 4443 §2.4 e.1, e.2).
    let about_error =
        ip.proto == IpProtocol::ICMPV6 && !d.get(ip.l4.0).is_some_and(|&t| t >= 128 && t != 137);
    if from_us
        || not_unicast
        || ip.dst.is_multicast()
        || about_error
        || d[0] & 1 != 0
        || !budget.take_for(ip.src.to_u128(), PEER_INTERVAL6_NS, now)
    {
        *st.sent_held(kind).1 += 1;
        return;
    }
    let Some(q) = d.get(ETH_HLEN..ip.l4.1.min(ETH_HLEN + QUOTE_MAX6)) else {
        st.bad += 1;
        return;
    };
    let mlen = 8 + q.len();
    let len = ETH_HLEN + IPV6_HEADER_LEN + mlen;
    let Some(f) = tx.alloc(len).and_then(|b| b.get_mut(..len)) else {
        st.tx_failed += 1;
        return;
    };
    let eth = EthernetRepr {
        src: MacAddress(mac),
        dst: MacAddress(d[6..12].try_into().unwrap_or_default()),
        vlan: None,
        ethertype: EtherType::IPV6,
    };
    let hdr = Ipv6Repr {
        hop_limit: REPLY_HOP_LIMIT,
        ..Ipv6Repr::new(ip.dst, ip.src, IpProtocol::ICMPV6, mlen)
    };
    if eth.emit(&mut f[..]).is_err() || hdr.emit(&mut f[ETH_HLEN..]).is_err() {
        st.tx_failed += 1;
        return;
    }
    let m = &mut f[ETH_HLEN + IPV6_HEADER_LEN..];
    // destination unreachable / port unreachable; time exceeded / reassembly
    let (typ, code) = match kind {
        ErrorKind::PortUnreachable => (1, 4),
        ErrorKind::ReassemblyTimeout => (3, 1),
    };
    m[..8].copy_from_slice(&[typ, code, 0, 0, 0, 0, 0, 0]);
    m[8..].copy_from_slice(q);
    Icmpv6Packet::new_unchecked(m).fill_checksum(&ip.dst, &ip.src);
    tx.commit(len);
    *st.sent_held(kind).0 += 1;
}

/// What an ICMPv6 error `msg` (checksum verified) reports about a TCP segment it
/// quotes (at [`QUOTED_AT`]); None for any other message.
/// Destination unreachable codes (RFC 4443 §3.1): no route, beyond the source's scope
/// and address unreachable are soft, administratively prohibited, port unreachable,
/// failed policy and reject route hard (as Linux takes them).
pub fn tcp_error6(msg: &[u8]) -> Option<IcmpError> {
    let err = match *msg.first()? {
        1 => IcmpError::Unreachable {
            hard: matches!(msg.get(1)?, 1 | 4 | 5 | 6),
        },
        2 => IcmpError::PacketTooBig {
            mtu: u32::from_be_bytes(msg.get(4..8)?.try_into().ok()?),
        },
        3 => IcmpError::Unreachable { hard: false },
        4 => IcmpError::Other,
        _ => return None,
    };
    // The invoking packet as far as it fits (RFC 4443 §2.4 c): the fixed header and
    // TCP's first 8 bytes at least, TCP right after the header.
    let q = msg.get(QUOTED_AT..)?;
    if q.len() < 48 || q[0] >> 4 != 6 || q[6] != 6 {
        return None;
    }
    Some(err)
}

/// Handles the ICMPv6 message of frame `d` (IPv6 checked and addressed to the node:
/// `ip`), with `mac` as the node's MAC; for an error quoting a TCP segment, returns
/// where the quoted packet lies in `d` and what the error says, for the TCP host.
pub fn on_icmpv6<S: TxSink>(
    d: &[u8],
    ip: &Ipv6In,
    mac: [u8; 6],
    st: &mut Icmp6Stats,
    neigh: &mut Neighbours6,
    tx: &mut S,
) -> Option<(Range<usize>, IcmpError)> {
    let Some(p) = d
        .get(ip.l4.0..ip.l4.1)
        .and_then(|m| Icmpv6Packet::new_checked(m).ok())
    else {
        st.bad += 1;
        return None;
    };
    if !p.verify_checksum(&ip.src, &ip.dst) {
        st.bad += 1;
        return None;
    }
    if p.msg_type() == 2 {
        st.packet_too_big += 1;
    }
    if let Some(e) = tcp_error6(&d[ip.l4.0..ip.l4.1]) {
        st.errors_to_tcp += 1;
        return Some((ip.l4.0 + QUOTED_AT..ip.l4.1, e));
    }
    let m = match Icmpv6Repr::parse(&p) {
        Ok(m) => m,
        Err(squall_wire::Error::Unsupported) => {
            st.other += 1;
            return None;
        }
        Err(_) => {
            st.bad += 1;
            if (133..=137).contains(&p.msg_type()) {
                neigh.stats.invalid += 1;
            }
            return None;
        }
    };
    match m {
        Icmpv6Repr::Echo {
            is_reply: false,
            ident,
            seq,
            data,
        } if neigh.owns(&ip.dst) => {
            let src = ip.src.to_u128();
            if ip.src.is_multicast() || src <= 1 {
                st.invalid_src += 1;
                return None;
            }
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
        // Counted above; one quoting no TCP segment goes no further.
        Icmpv6Repr::PacketTooBig { .. } => {}
        Icmpv6Repr::Echo { .. } | Icmpv6Repr::RouterSolicit { .. } => st.other += 1,
    }
    None
}
