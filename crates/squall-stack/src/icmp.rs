//! ICMP in: echo requests to an owned address are answered with a reply carrying the
//! same identifier, sequence number and data (RFC 792); errors quoting a TCP segment
//! (destination unreachable, fragmentation needed, time exceeded, parameter problem) are
//! handed to the TCP host ([`squall_tcp::TcpHost::icmp_error`]); everything else is
//! counted and dropped. Out: "port unreachable" for a UDP datagram no app took and
//! "fragment reassembly time exceeded" for a datagram whose fragments did not all come
//! ([`send_error`], [`ErrorKind`]), within the node's error budget ([`ErrorBudget`], both
//! families).

use std::ops::Range;

use squall_tcp::{IcmpError, TxSink};
use squall_wire::checksum;

use crate::ipv4::{Ipv4In, IP_PROTO_ICMP};
use crate::neigh::ETH_HLEN;

const ECHO_REQUEST: u8 = 8;
const ECHO_REPLY: u8 = 0;
const DEST_UNREACHABLE: u8 = 3;
const TIME_EXCEEDED: u8 = 11;
const PARAMETER_PROBLEM: u8 = 12;
/// Destination unreachable: fragmentation needed and DF set (RFC 1191).
const FRAG_NEEDED: u8 = 4;
/// Destination unreachable: port unreachable.
const PORT_UNREACHABLE: u8 = 3;
/// Time exceeded: fragment reassembly time exceeded.
const REASSEMBLY_EXCEEDED: u8 = 1;
/// TTL of replies.
const REPLY_TTL: u8 = 64;
/// Most bytes of the offending datagram an IPv4 error quotes: the error stays within the
/// 576 bytes every host takes (RFC 1812 §4.3.2.3, as Linux).
const QUOTE_MAX: usize = 576 - 20 - 8;

/// An ICMP error the node sends about a datagram it received (both families).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// Destination unreachable, port unreachable: a UDP datagram no app took (RFC 1122
    /// §4.1.3.1, RFC 4443 §3.1).
    PortUnreachable,
    /// Time exceeded, fragment reassembly time exceeded: a datagram whose fragments did
    /// not all come in time, its first one did (RFC 1122 §3.3.2, RFC 8200 §4.5).
    ReassemblyTimeout,
}

impl ErrorKind {
    /// The counters of this kind's errors sent and not sent.
    pub(crate) fn counters<'a>(
        self,
        sent: [&'a mut u64; 2],
        held: [&'a mut u64; 2],
    ) -> (&'a mut u64, &'a mut u64) {
        let [s0, s1] = sent;
        let [h0, h1] = held;
        match self {
            ErrorKind::PortUnreachable => (s0, h0),
            ErrorKind::ReassemblyTimeout => (s1, h1),
        }
    }
}

/// The rate of the ICMP errors a node sends, both families, as Linux limits its own: a
/// token bucket of [`ErrorBudget::BURST`] refilled at [`ErrorBudget::PER_SEC`] a second
/// for all (the global `net.ipv4.icmp_msgs_burst` and `icmp_msgs_per_sec` defaults), and
/// one per peer (`inet_peer_xrlim_allow`): a burst of [`PEER_BURST`] errors, then one an
/// interval (IPv4 `icmp_ratelimit`, 1 s; IPv6 `icmpv6 ratelimit` 1 s, which Linux
/// shortens by the route's prefix: 250 ms for an on-link /64, used here for every peer;
/// 62.5 ms through a default route). One per node, so per worker: a peer whose flows
/// several workers serve gets each worker's. A node answering a flood of datagrams to
/// closed ports sends no flood back.
#[derive(Debug, Default)]
pub struct ErrorBudget {
    tokens: u64,
    /// When `tokens` was last refilled (0: never used; full then).
    at_ns: u64,
    /// The peers' buckets (allocated at the first error).
    peers: Vec<PeerSlot>,
    /// The key of the peers' hash (random, set at the first error).
    key: Option<std::collections::hash_map::RandomState>,
}

/// Errors one peer may get at once (Linux's `XRLIM_BURST_FACTOR`).
pub const PEER_BURST: u64 = 6;
/// The per-peer interval over IPv4 and over IPv6 (ns).
pub const PEER_INTERVAL4_NS: u64 = 1_000_000_000;
pub const PEER_INTERVAL6_NS: u64 = 250_000_000;
/// Slots of the per-peer table, in sets of [`PEER_WAYS`] chosen by a keyed hash of the
/// address: a peer evicts the set's longest-idle one, and starts afresh if evicted itself
/// (bounded memory; the global bucket still holds). The key is random, so that which
/// addresses share a set cannot be worked out from outside.
const PEER_SLOTS: usize = 1024;
const PEER_WAYS: usize = 4;

/// One peer's bucket: its credit of time (one error costs one interval).
#[derive(Clone, Copy, Debug, Default)]
struct PeerSlot {
    addr: u128,
    credit_ns: u64,
    at_ns: u64,
    used: bool,
}

impl ErrorBudget {
    pub const PER_SEC: u64 = 1_000;
    pub const BURST: u64 = 50;
    const NS_PER_TOKEN: u64 = 1_000_000_000 / Self::PER_SEC;

    /// Takes one error's token for `peer` (an IPv4 address as a number, or an IPv6 one)
    /// at `now`, its per-peer bucket refilled one error each `interval_ns`: false when
    /// the peer or the node has none left (a refused error costs the node nothing).
    pub fn take_for(&mut self, peer: u128, interval_ns: u64, now: u64) -> bool {
        if !self.global_has(now) || !self.peer_allows(peer, interval_ns, now) {
            return false;
        }
        self.tokens -= 1;
        true
    }

    /// Refills the global bucket; whether it holds a token.
    fn global_has(&mut self, now: u64) -> bool {
        if self.at_ns == 0 {
            (self.tokens, self.at_ns) = (Self::BURST, now.max(1));
        }
        let add = now.saturating_sub(self.at_ns) / Self::NS_PER_TOKEN;
        if add > 0 {
            self.tokens = (self.tokens + add).min(Self::BURST);
            self.at_ns += add * Self::NS_PER_TOKEN;
        }
        self.tokens > 0
    }

    /// Linux's `inet_peer_xrlim_allow`: the peer's credit grows with the time since its
    /// last error, up to the burst's; an error costs one interval of it. A peer first
    /// seen has the whole burst.
    fn peer_allows(&mut self, peer: u128, interval_ns: u64, now: u64) -> bool {
        use std::hash::BuildHasher;
        if self.peers.is_empty() {
            self.peers = vec![PeerSlot::default(); PEER_SLOTS];
        }
        let key = self.key.get_or_insert_with(Default::default);
        let set = (key.hash_one(peer) as usize % (PEER_SLOTS / PEER_WAYS)) * PEER_WAYS;
        let ways = &mut self.peers[set..set + PEER_WAYS];
        let k = match ways.iter().position(|w| w.used && w.addr == peer) {
            Some(k) => k,
            // (an unused slot's `at_ns` is 0: the oldest)
            None => (0..PEER_WAYS).min_by_key(|&k| ways[k].at_ns).unwrap_or(0),
        };
        let s = &mut ways[k];
        let cap = PEER_BURST * interval_ns;
        if !s.used || s.addr != peer {
            *s = PeerSlot {
                addr: peer,
                credit_ns: cap,
                at_ns: now,
                used: true,
            };
        } else {
            s.credit_ns = (s.credit_ns + now.saturating_sub(s.at_ns)).min(cap);
            s.at_ns = now;
        }
        if s.credit_ns < interval_ns {
            return false;
        }
        s.credit_ns -= interval_ns;
        true
    }
}

/// ICMP counters of a node.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IcmpStats {
    /// Echo requests answered.
    pub echo_answered: u64,
    /// ICMP messages other than echo requests to us (counted, dropped).
    pub other: u64,
    /// Messages with a bad checksum or length.
    pub bad: u64,
    /// Replies that could not be sent (no TX frame).
    pub tx_failed: u64,
    /// Echo requests from an invalid source or sent to the link's broadcast address
    /// (dropped unanswered).
    pub invalid_src: u64,
    /// Errors quoting a TCP segment, handed to the TCP host (its `tcps_icmp_*` counters
    /// say what it made of them).
    pub errors_to_tcp: u64,
    /// Port unreachables sent (UDP datagrams no app took).
    pub unreach_sent: u64,
    /// Port unreachables not sent: over the error budget, or the datagram came from an
    /// invalid source or to a broadcast or multicast MAC (RFC 1122 §3.2.2).
    pub unreach_suppressed: u64,
    /// Fragment reassembly time exceeded sent (datagrams whose first fragment came, not
    /// all the others).
    pub reasm_exceeded_sent: u64,
    /// Of those, not sent (as `unreach_suppressed`).
    pub reasm_exceeded_suppressed: u64,
}

impl IcmpStats {
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

/// What an IPv4 "destination unreachable" code means for a connection: hard errors
/// (protocol or port unreachable, unknown or isolated host or network, administratively
/// prohibited, precedence: RFC 1122 §4.2.3.9, the codes Linux takes as fatal) or soft
/// (network or host unreachable, source route failed, for a type of service).
fn unreachable(code: u8) -> IcmpError {
    match code {
        2 | 3 | 6..=10 | 13..=15 => IcmpError::Unreachable { hard: true },
        _ => IcmpError::Unreachable { hard: false },
    }
}

/// The highest destination-unreachable code defined (RFC 1812 §5.2.7.1); Linux ignores
/// errors with a higher one.
const MAX_UNREACHABLE_CODE: u8 = 15;

/// Where an ICMP or ICMPv6 error message quotes the packet it is about (RFC 792, RFC 4443
/// §2.1: after the type, code, checksum and four bytes).
pub const QUOTED_AT: usize = 8;

/// The error an ICMP message `msg` (checksum verified) reports about a TCP segment it
/// quotes (at [`QUOTED_AT`]); None for anything else.
pub fn tcp_error(msg: &[u8]) -> Option<IcmpError> {
    let [typ, code, _, _, _, _, m0, m1] = *msg.get(..8)? else {
        return None;
    };
    let err = match typ {
        DEST_UNREACHABLE if code == FRAG_NEEDED => IcmpError::PacketTooBig {
            mtu: u32::from(u16::from_be_bytes([m0, m1])),
        },
        DEST_UNREACHABLE if code <= MAX_UNREACHABLE_CODE => unreachable(code),
        TIME_EXCEEDED => IcmpError::Unreachable { hard: false },
        PARAMETER_PROBLEM => IcmpError::Other,
        _ => return None,
    };
    // The quoted IPv4 header and at least 8 bytes of what followed it (RFC 792).
    let q = msg.get(QUOTED_AT..)?;
    let ihl = usize::from(*q.first()? & 0x0f) * 4;
    if q[0] >> 4 != 4 || ihl < 20 || q.len() < ihl + 8 || q[9] != 6 {
        return None;
    }
    Some(err)
}

/// Handles the ICMP message of frame `d` (IPv4 already checked: `ip`): answers an echo
/// request with `mac` as the source MAC; for an error quoting a TCP segment, returns
/// where the quoted packet lies in `d` and what the error says, for the TCP host.
pub fn on_icmp<S: TxSink>(
    d: &[u8],
    ip: &Ipv4In,
    mac: [u8; 6],
    st: &mut IcmpStats,
    tx: &mut S,
) -> Option<(Range<usize>, IcmpError)> {
    debug_assert_eq!(ip.proto, IP_PROTO_ICMP);
    let (l4, end) = (ETH_HLEN + ip.ihl, ETH_HLEN + ip.total);
    let Some(msg) = d.get(l4..end) else {
        st.bad += 1;
        return None;
    };
    if msg.len() < 8 || checksum::sum(msg) != 0xffff {
        st.bad += 1;
        return None;
    }
    if msg[0] != ECHO_REQUEST || msg[1] != 0 {
        // An error sent to the link's broadcast address is nobody's (RFC 1122 §3.2.2).
        let unicast = d[..6] != [0xff; 6];
        return match tcp_error(msg).filter(|_| unicast) {
            Some(e) => {
                st.errors_to_tcp += 1;
                Some((l4 + QUOTED_AT..end, e))
            }
            None => {
                st.other += 1;
                None
            }
        };
    }
    // RFC 1122 §3.2.1.3: an invalid source (this network, loopback, multicast, broadcast,
    // class E) is discarded; §3.3.6: so is a link-layer broadcast to a unicast address.
    let invalid_src = matches!(ip.src >> 24, 0 | 127) || ip.src >= 0xe000_0000;
    if invalid_src || d[..6] == [0xff; 6] {
        st.invalid_src += 1;
        return None;
    }
    // The reply: Ethernet and IPv4 (options dropped) rebuilt, the ICMP message copied.
    let len = ETH_HLEN + 20 + msg.len();
    let Some(f) = tx.alloc(len).and_then(|b| b.get_mut(..len)) else {
        st.tx_failed += 1;
        return None;
    };
    let id = [d[ETH_HLEN + 4], d[ETH_HLEN + 5]];
    reply_headers(f, d, mac, ip, d[ETH_HLEN + 1], id, 0x40);
    let m = &mut f[ETH_HLEN + 20..];
    m.copy_from_slice(msg);
    m[0] = ECHO_REPLY;
    m[2..4].copy_from_slice(&[0, 0]);
    let c = checksum::checksum(m);
    m[2..4].copy_from_slice(&c.to_be_bytes());
    tx.commit(len);
    st.echo_answered += 1;
    None
}

/// Writes the Ethernet and IPv4 headers of an ICMP message answering frame `d` (IPv4
/// `ip`) into `f`, sized to the whole answer: back to the sender's MAC from `mac`, from
/// the address `d` was sent to, with `tos`, identification `id` and the flags byte
/// `flags` (0x40: DF).
fn reply_headers(
    f: &mut [u8],
    d: &[u8],
    mac: [u8; 6],
    ip: &Ipv4In,
    tos: u8,
    id: [u8; 2],
    flags: u8,
) {
    let total = (f.len() - ETH_HLEN) as u16;
    f[0..6].copy_from_slice(&d[6..12]);
    f[6..12].copy_from_slice(&mac);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let h = &mut f[ETH_HLEN..ETH_HLEN + 20];
    h[0] = 0x45;
    h[1] = tos;
    h[2..4].copy_from_slice(&total.to_be_bytes());
    h[4..6].copy_from_slice(&id);
    h[6..8].copy_from_slice(&[flags, 0]);
    h[8] = REPLY_TTL;
    h[9] = IP_PROTO_ICMP;
    h[10..12].copy_from_slice(&[0, 0]);
    h[12..16].copy_from_slice(&ip.dst.to_be_bytes());
    h[16..20].copy_from_slice(&ip.src.to_be_bytes());
    let c = checksum::checksum(h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
}

/// Answers the datagram of frame `d` (IPv4 `ip`, sent to one of the node's addresses)
/// with the error `kind` (RFC 1122 §3.2.2) quoting its IP header and first bytes (at most
/// [`QUOTE_MAX`]), within `budget`. Not to a datagram from an invalid source or the
/// node's own (`from_us`), nor to one sent to a multicast, class E or broadcast address
/// or MAC (RFC 1122 §3.2.2).
#[allow(clippy::too_many_arguments)]
pub fn send_error<S: TxSink>(
    kind: ErrorKind,
    d: &[u8],
    ip: &Ipv4In,
    from_us: bool,
    mac: [u8; 6],
    st: &mut IcmpStats,
    budget: &mut ErrorBudget,
    now: u64,
    tx: &mut S,
) {
    let invalid_src = matches!(ip.src >> 24, 0 | 127) || ip.src >= 0xe000_0000;
    // Multicast, class E and the limited broadcast are no host's own address.
    let group_dst = ip.dst >= 0xe000_0000;
    // Never an error about an ICMP error (RFC 1122 §3.2.2): only the queries and
    // replies (echo, timestamp, information, address mask) may have one.
    let query = |t: &u8| matches!(t, 0 | 8 | 13..=18);
    let about_error = ip.proto == IP_PROTO_ICMP && !d.get(ETH_HLEN + ip.ihl).is_some_and(query);
    if from_us
        || invalid_src
        || group_dst
        || about_error
        || d[0] & 1 != 0
        || !budget.take_for(u128::from(ip.src), PEER_INTERVAL4_NS, now)
    {
        *st.sent_held(kind).1 += 1;
        return;
    }
    let Some(q) = d.get(ETH_HLEN..ETH_HLEN + ip.total.min(QUOTE_MAX)) else {
        st.bad += 1;
        return;
    };
    let len = ETH_HLEN + 20 + 8 + q.len();
    let Some(f) = tx.alloc(len).and_then(|b| b.get_mut(..len)) else {
        st.tx_failed += 1;
        return;
    };
    // DF with identification 0: an atomic datagram (RFC 6864 §4.1; the error is at most
    // 576 bytes, which every link carries).
    reply_headers(f, d, mac, ip, 0, [0, 0], 0x40);
    let m = &mut f[ETH_HLEN + 20..];
    let (typ, code) = match kind {
        ErrorKind::PortUnreachable => (DEST_UNREACHABLE, PORT_UNREACHABLE),
        ErrorKind::ReassemblyTimeout => (TIME_EXCEEDED, REASSEMBLY_EXCEEDED),
    };
    m[..8].copy_from_slice(&[typ, code, 0, 0, 0, 0, 0, 0]);
    m[8..].copy_from_slice(q);
    let c = checksum::checksum(m);
    m[2..4].copy_from_slice(&c.to_be_bytes());
    tx.commit(len);
    *st.sent_held(kind).0 += 1;
}

#[cfg(test)]
mod budget_tests {
    use super::{ErrorBudget, PEER_BURST, PEER_INTERVAL4_NS};

    /// Linux's limits: a peer gets 6 at once, then one a second; the node 50 at once,
    /// then one a millisecond, whoever the peers.
    #[test]
    fn each_peer_and_the_node_have_their_budget() {
        let mut b = ErrorBudget::default();
        let t = 1_000;
        let one = (0..10)
            .filter(|_| b.take_for(7, PEER_INTERVAL4_NS, t))
            .count();
        assert_eq!(one as u64, PEER_BURST);
        assert!(!b.take_for(7, PEER_INTERVAL4_NS, t + 999_000_000));
        assert!(b.take_for(7, PEER_INTERVAL4_NS, t + 1_000_000_000));
        let others = (100..200u128)
            .filter(|&p| b.take_for(p, PEER_INTERVAL4_NS, t + 1_000_000_000))
            .count();
        assert_eq!(others, 49, "the node's 50, less peer 7's");
    }

    /// Two peers taking turns are each limited (neither resets the other's bucket), every
    /// 10 ms for 10 s: each its burst and one a second, as Linux gives them.
    #[test]
    fn peers_taking_turns_keep_their_buckets() {
        let mut b = ErrorBudget::default();
        let mut got = [0u32; 2];
        for k in 0..1_000u64 {
            let now = 1 + k * 10_000_000;
            let p = (k % 2) as usize;
            got[p] += u32::from(b.take_for(0xc612_0002 + p as u128, PEER_INTERVAL4_NS, now));
        }
        assert!(got.iter().all(|&g| (15..=17).contains(&g)), "{got:?}");
    }
}
