//! ICMP and ICMPv6 errors about our segments (the node hands them over with the quoted
//! packet): path MTU discovery (RFC 1191, RFC 8201: the send MSS lowered, the flight sent
//! again in smaller segments without a congestion response, the path's MTU remembered per
//! destination for new connections) and unreachable destinations (RFC 1122 §4.2.3.9, RFC
//! 5927 §5.2: a connection attempt ends, as Linux ends it; a synchronized connection only
//! counts them). Every error must quote a sequence number in SND.UNA..SND.MAX of a live
//! connection (RFC 5927 §4.1), so an off-path sender cannot guess its way in.

use std::collections::HashMap;

use super::*;

/// What an ICMP or ICMPv6 error says about the segment it quotes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IcmpError {
    /// IPv4 "fragmentation needed and DF set" (type 3 code 4) or ICMPv6 "packet too big"
    /// (type 2): the next hop's MTU (0: not given, as by routers older than RFC 1191).
    PacketTooBig { mtu: u32 },
    /// Destination unreachable (any other code), or time exceeded: a connection attempt
    /// ends (Linux's behaviour; `hard`: protocol or port unreachable, administratively
    /// prohibited and the like, RFC 1122 §4.2.3.9, which also ends a half-open passive
    /// connection); a synchronized connection only counts it (RFC 5927 §5.2).
    Unreachable { hard: bool },
    /// Anything else about one of our segments (parameter problem): counted.
    Other,
}

/// The smallest path MTU we accept from an IPv4 error (Linux's `min_pmtu`: below it an
/// error is taken as reporting 552, which bounds what a forged one can do).
pub const MIN_PMTU4: u32 = 552;
/// The IPv6 minimum link MTU (RFC 8200 §5): a smaller "packet too big" is taken as 1280.
pub const MIN_PMTU6: u32 = 1280;
/// How long a destination's learnt path MTU is kept (RFC 1191 §6.3, Linux's
/// `mtu_expires`): connections opened later start with the full MSS again.
pub const PMTU_EXPIRES_NS: u64 = 600_000_000_000;
/// Destinations whose path MTU a host remembers at most.
pub const PMTU_CACHE_MAX: usize = 65_536;

/// RFC 1191 §7's plateaus, for an error that gives no MTU: the largest below the size of
/// the packet that did not fit.
const PLATEAUS: [u32; 10] = [
    32_000, 17_914, 8_166, 4_352, 2_002, 1_492, 1_006, 508, 296, 68,
];

/// A destination as the cache keys it: the family (IPv6?) and the address.
type Dst = (bool, u128);

/// Learnt path MTUs by destination: MTU and expiry.
#[derive(Default)]
pub(super) struct PmtuCache {
    map: HashMap<Dst, (u32, u64)>,
    /// The latest expiry of any entry: past it the cache holds nothing valid, and new
    /// connections skip the lookup.
    until_max: u64,
    /// No sweep of a full cache before this time (one per second at most).
    next_sweep: u64,
}

impl PmtuCache {
    /// The MTU learnt for `dst`, if still valid at `now`.
    fn get(&self, dst: Dst, now: u64) -> Option<u32> {
        self.map
            .get(&dst)
            .filter(|&&(_, until)| until > now)
            .map(|&(m, _)| m)
    }
    /// Keeps `mtu` for `dst` from `now`; false if the cache is full of valid entries.
    fn put(&mut self, dst: Dst, mtu: u32, now: u64) -> bool {
        if self.map.len() >= PMTU_CACHE_MAX && !self.map.contains_key(&dst) {
            if now < self.next_sweep {
                return false;
            }
            self.next_sweep = now + 1_000_000_000;
            self.map.retain(|_, &mut (_, until)| until > now);
            if self.map.len() >= PMTU_CACHE_MAX {
                return false;
            }
        }
        let until = now + PMTU_EXPIRES_NS;
        self.map.insert(dst, (mtu, until));
        self.until_max = self.until_max.max(until);
        true
    }
    /// Whether an entry may still be valid at `now`.
    #[inline(always)]
    fn live(&self, now: u64) -> bool {
        now < self.until_max
    }
    pub(super) fn len(&self) -> usize {
        self.map.len()
    }
}

impl TcpHost {
    /// An ICMP (`v6` false) or ICMPv6 error whose message quotes `quoted`: the IP header of
    /// a packet we sent and at least the first 8 bytes of its TCP header. Errors about no
    /// live connection of ours, or quoting a sequence number outside SND.UNA..SND.MAX, are
    /// counted (`tcps_icmp_oow`) and ignored.
    pub fn icmp_error<A: TcpApp, S: TxSink>(
        &mut self,
        now: u64,
        v6: bool,
        quoted: &[u8],
        err: IcmpError,
        app: &mut A,
        tx: &mut S,
    ) {
        self.now = now;
        let Some((key, dst, seq, sent_len)) = self.quoted_key(v6, quoted) else {
            self.counters.tcps_icmp_oow += 1;
            return;
        };
        let h = self.table.hash(&key);
        let Some(i) = self.table.find(&key, h) else {
            self.counters.tcps_icmp_oow += 1;
            return;
        };
        let t = &self.flows[i as usize];
        let in_flight = seq::ge(seq, t.snd_una) && seq::lt(seq, t.snd_max);
        if !in_flight || matches!(t.state, State::Closed | State::TimeWait) {
            self.counters.tcps_icmp_oow += 1;
            return;
        }
        self.counters.tcps_icmp_rcvd += 1;
        match err {
            IcmpError::PacketTooBig { mtu } => self.path_mtu(i, v6, dst, mtu, sent_len, tx),
            IcmpError::Unreachable { hard } => {
                let abort = match self.flows[i as usize].state {
                    State::SynSent => true,
                    State::SynReceived => hard,
                    _ => false,
                };
                if abort {
                    self.counters.tcps_conndrops += 1;
                    self.counters.tcps_icmp_drops += 1;
                    self.close_flow(i, CloseReason::Unreachable, app);
                }
            }
            IcmpError::Other => {}
        }
    }

    /// The connection a quoted packet belongs to (our address and port its source), the
    /// destination address as the path-MTU cache keys it, the quoted sequence number
    /// and the quoted packet's IP length.
    fn quoted_key(&mut self, v6: bool, q: &[u8]) -> Option<(FlowKey, Dst, u32, u32)> {
        // (our address, the peer's, the cache's key, where TCP starts, the IP length)
        let (local_ip, remote_ip, dst, tcp, len) = if v6 {
            let h = q.get(..40)?;
            // TCP right after the fixed header: every segment we send is so.
            if h[0] >> 4 != 6 || h[6] != 6 {
                return None;
            }
            let src: &[u8; 16] = h[8..24].try_into().ok()?;
            let dst: &[u8; 16] = h[24..40].try_into().ok()?;
            let len = 40 + u32::from(u16::from_be_bytes([h[4], h[5]]));
            let (l, r) = (self.addr6.get(src)?, self.addr6.get(dst)?);
            (l, r, (true, u128::from_be_bytes(*dst)), 40, len)
        } else {
            let h = q.get(..20)?;
            let ihl = usize::from(h[0] & 0x0f) * 4;
            if h[0] >> 4 != 4 || ihl < 20 || h[9] != 6 {
                return None;
            }
            let src = u32::from_be_bytes([h[12], h[13], h[14], h[15]]);
            let dst = u32::from_be_bytes([h[16], h[17], h[18], h[19]]);
            // 0.0.0.0/8 holds the ids of IPv6 flows: no IPv4 flow of ours uses it.
            if addr6::is_id(src) || addr6::is_id(dst) {
                return None;
            }
            let len = u32::from(u16::from_be_bytes([h[2], h[3]]));
            (src, dst, (false, u128::from(dst)), ihl, len)
        };
        let t = q.get(tcp..tcp + 8)?;
        let key = FlowKey {
            local_ip,
            remote_ip,
            local_port: u16::from_be_bytes([t[0], t[1]]),
            remote_port: u16::from_be_bytes([t[2], t[3]]),
        };
        Some((key, dst, u32::from_be_bytes([t[4], t[5], t[6], t[7]]), len))
    }

    /// RFC 1191 §6.4 / RFC 8201 §4: the path to flow `i`'s peer carries at most `mtu`
    /// bytes (0: unknown, the plateau below `sent_len`). A smaller MSS is taken at once
    /// and the flight is sent again from SND.UNA in segments that fit, without a
    /// congestion response (it is not a loss signal, RFC 1191 §6.5); the MTU is kept for
    /// the destination's new connections.
    fn path_mtu<S: TxSink>(
        &mut self,
        i: u32,
        v6: bool,
        dst: Dst,
        mtu: u32,
        sent_len: u32,
        tx: &mut S,
    ) {
        let mtu = if mtu == 0 && !v6 {
            PLATEAUS
                .iter()
                .copied()
                .find(|&p| p < sent_len)
                .unwrap_or(68)
        } else {
            mtu
        };
        let mtu = mtu.max(if v6 { MIN_PMTU6 } else { MIN_PMTU4 });
        let t = &self.flows[i as usize];
        let opt_len = if t.has(F_TS) { 12 } else { 0 };
        let hdrs = if v6 { 60 } else { 40 };
        let new_mss = mtu.saturating_sub(hdrs + opt_len).max(64);
        if new_mss >= u32::from(t.mss) {
            return;
        }
        let now = self.now;
        if self.pmtu.get(dst, now).is_none_or(|m| m > mtu) && !self.pmtu.put(dst, mtu, now) {
            self.counters.tcps_pmtu_nocache += 1;
        }
        self.counters.tcps_pmtu_lowered += 1;
        let t = &mut self.flows[i as usize];
        t.mss = new_mss as u16;
        if t.state == State::SynSent || t.state == State::SynReceived {
            return;
        }
        // Go back to SND.UNA (as after a timeout, RFC 1191 §6.5; the segments cut before
        // are cut again), with no congestion response: the window stays, but a recovery
        // in progress ends, as FreeBSD's tcp_mtudisc ends it (its retransmissions would
        // repeat the go-back's), and the duplicate ACKs the resent segments may cause
        // start none (RFC 6582's `recover` moves to SND.MAX).
        let sb = t.sb;
        t.sb = NO_SIDE;
        t.snd_nxt = t.snd_una;
        t.flags &= !F_TIMING; // Karn: the next ACK may be for either copy
        let cc = &mut t.cc;
        if cc.in_recovery {
            cc.in_recovery = false;
            cc.cwnd = cc.cwnd.min(cc.ssthresh);
        }
        cc.dupacks = 0;
        cc.recover = t.snd_max;
        self.release_sb(sb);
        if self.traced(i) {
            self.trace_cause(i, crate::trace::RexmitCause::PathMtu);
        }
        // The timer runs from the resent head, as after any retransmission of it.
        let rto = self.rto_ns(&self.flows[i as usize]);
        self.flows[i as usize].rexmt_at = now + rto;
        self.output(i, tx);
        self.schedule(i);
    }

    /// The largest send MSS a new connection of `key` may use by what was learnt of its
    /// destination's path MTU (`u16::MAX`: nothing learnt), before the timestamp option's
    /// share is taken off.
    #[inline]
    pub(super) fn pmtu_mss(&self, key: &FlowKey) -> u16 {
        if !self.pmtu.live(self.now) {
            return u16::MAX;
        }
        self.pmtu_mss_slow(key)
    }

    #[cold]
    fn pmtu_mss_slow(&self, key: &FlowKey) -> u16 {
        let (dst, hdrs) = if key.is_ipv6() {
            let a = u128::from_be_bytes(*self.addr6.addr(key.remote_ip));
            ((true, a), 60)
        } else {
            ((false, u128::from(key.remote_ip)), 40)
        };
        match self.pmtu.get(dst, self.now) {
            Some(m) => m.saturating_sub(hdrs).clamp(64, u32::from(u16::MAX)) as u16,
            None => u16::MAX,
        }
    }

    /// Destinations whose path MTU the host has learnt (expired ones included until
    /// the cache is full).
    pub fn pmtu_entries(&self) -> usize {
        self.pmtu.len()
    }
}
