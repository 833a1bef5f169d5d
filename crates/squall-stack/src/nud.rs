//! Reachability of the node's next hop (neighbour unreachability detection, RFC 4861
//! §7.3, applied to ARP as Linux applies its NUD states): the timing of it only. The node
//! records when it last heard the next hop (a frame from its MAC, its ARP or neighbour
//! discovery with that MAC; on any worker of the port) and sends the probes this asks
//! for; an answer from another MAC moves the next hop as an announcement does.
//!
//! Reachable while heard within the reachable time ([`REACHABLE_NS`] by default); then
//! probed at its MAC ([`UNICAST_PROBES`] unicast requests [`RETRANS_NS`] apart, RFC 1122
//! §2.3.2.1's unicast poll); still unanswered, it is looked for by broadcast (IPv6: the
//! solicited-node group), [`BROADCAST_PROBES`] times [`RETRANS_NS`] apart, then with the
//! interval doubling up to [`MAX_RETRANS_NS`] until an answer comes (RFC 7048 §3: a
//! neighbour that is gone costs the link little). Frames keep going to the last known
//! MAC meanwhile (a generator's flows retransmit into the gap; Linux would queue or drop
//! them). Linux's defaults: `base_reachable_time` 30 s, `retrans_time` 1 s,
//! `ucast_solicit` 3, `mcast_solicit` 3.

/// Time a confirmation keeps the next hop reachable by default, ns.
pub const REACHABLE_NS: u64 = 30_000_000_000;
/// Interval between probes, ns.
pub const RETRANS_NS: u64 = 1_000_000_000;
/// Unicast probes before the next hop is looked for by broadcast.
pub const UNICAST_PROBES: u32 = 3;
/// Broadcast probes at [`RETRANS_NS`] before the interval backs off.
pub const BROADCAST_PROBES: u32 = 3;
/// Longest interval between broadcast probes, ns (RFC 7048's MAX_RETRANS_TIMER).
pub const MAX_RETRANS_NS: u64 = 60_000_000_000;

/// Counters of the next hop's reachability.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NudStats {
    /// Unicast probes sent to the next hop's MAC (it went unheard for the reachable
    /// time).
    pub unicast_probes: u64,
    /// Times every unicast probe went unanswered: the next hop was then looked for by
    /// broadcast.
    pub unreachable: u64,
    /// Broadcast (IPv4) or solicited-node multicast (IPv6) probes sent.
    pub broadcast_probes: u64,
}

impl NudStats {
    /// Probes of both kinds.
    pub fn probes(&self) -> u64 {
        self.unicast_probes + self.broadcast_probes
    }
}

/// What the node sends now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Probe {
    /// A request to the next hop's MAC.
    Unicast,
    /// A request to every host of the link.
    Broadcast,
}

/// The reachability state of one next hop.
#[derive(Clone, Debug)]
pub struct Nud {
    /// When to look again (the end of reachability, or of a probe's wait).
    due_at: u64,
    /// When the next hop was last heard (as far as this state knows).
    heard: u64,
    /// Probes sent since it was last heard.
    probes: u32,
    /// Time a confirmation keeps the next hop reachable, ns.
    reachable_ns: u64,
    pub stats: NudStats,
}

impl Nud {
    /// A next hop resolved (heard) at `now`, reachable for `reachable_ns` after it is
    /// heard.
    pub fn new(now: u64, reachable_ns: u64) -> Self {
        Nud {
            due_at: now.saturating_add(reachable_ns),
            heard: now,
            probes: 0,
            reachable_ns,
            stats: NudStats::default(),
        }
    }
    /// Time to look at the next hop again (`now` past the reachable time or a probe's
    /// wait).
    #[inline]
    pub fn due(&self, now: u64) -> bool {
        now >= self.due_at
    }
    /// At `now`, when [`due`](Self::due), the next hop last heard at `heard`: the probe to
    /// send, or None when it was heard recently enough (it is reachable until `heard`
    /// plus the reachable time, and unprobed). Probes go a retransmission interval apart
    /// (backing off after the broadcast ones) until it is heard again.
    pub fn tick(&mut self, now: u64, heard: u64) -> Option<Probe> {
        if heard > self.heard {
            self.heard = heard;
            self.probes = 0;
        }
        let until = self.heard.saturating_add(self.reachable_ns);
        if now < until {
            self.due_at = until;
            return None;
        }
        self.probes = self.probes.saturating_add(1);
        if self.probes <= UNICAST_PROBES {
            self.due_at = now.saturating_add(RETRANS_NS);
            self.stats.unicast_probes += 1;
            return Some(Probe::Unicast);
        }
        let k = self.probes - UNICAST_PROBES; // 1, 2, ...
        if k == 1 {
            self.stats.unreachable += 1;
        }
        // (after the last of the first broadcasts: 2 s, 4 s, ...)
        let wait = match (k + 1).checked_sub(BROADCAST_PROBES) {
            None | Some(0) => RETRANS_NS,
            Some(doublings) => RETRANS_NS
                .saturating_mul(1u64 << doublings.min(16))
                .min(MAX_RETRANS_NS),
        };
        self.due_at = now.saturating_add(wait);
        self.stats.broadcast_probes += 1;
        Some(Probe::Broadcast)
    }
    /// Every unicast probe went unanswered and the next hop was not heard since (last
    /// heard at `heard`, as the node knows): it is being looked for by broadcast.
    pub fn lost(&self, heard: u64) -> bool {
        self.probes > UNICAST_PROBES && heard <= self.heard
    }
    /// Starts again at `now` for a next hop just taken (another router): reachable,
    /// unprobed.
    pub fn restart(&mut self, now: u64) {
        self.heard = now;
        self.probes = 0;
        self.due_at = now.saturating_add(self.reachable_ns);
    }
    /// Probes sent since the next hop was last heard.
    pub fn probes(&self) -> u32 {
        self.probes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    /// Ticks every 100 ms from `from` to `to` with the next hop last heard at `heard`:
    /// the probes and when they went.
    fn run(n: &mut Nud, from: u64, to: u64, heard: u64) -> Vec<(u64, Probe)> {
        let mut out = Vec::new();
        let mut t = from;
        while t < to {
            if n.due(t) {
                if let Some(p) = n.tick(t, heard) {
                    out.push((t, p));
                }
            }
            t += S / 10;
        }
        out
    }

    #[test]
    fn a_next_hop_heard_is_not_probed() {
        let mut n = Nud::new(0, REACHABLE_NS);
        for k in 0..300 {
            let t = k * S;
            assert!(run(&mut n, t, t + S, t).is_empty());
        }
        assert_eq!(n.stats, NudStats::default());
    }

    #[test]
    fn unicast_probes_then_broadcast_backing_off_until_heard() {
        let mut n = Nud::new(0, REACHABLE_NS);
        assert!(!n.due(REACHABLE_NS - 1));
        let sent = run(&mut n, 0, REACHABLE_NS + 200 * S, 0);
        use Probe::*;
        let kinds: Vec<Probe> = sent.iter().map(|p| p.1).collect();
        assert_eq!(
            &kinds[..7],
            [Unicast, Unicast, Unicast, Broadcast, Broadcast, Broadcast, Broadcast]
        );
        // 1 s apart, then 2, 4, ... 60 s between broadcasts.
        let gaps: Vec<u64> = sent
            .windows(2)
            .map(|w| (w[1].0 - w[0].0 + S / 2) / S)
            .collect();
        assert_eq!(&gaps[..9], [1, 1, 1, 1, 1, 2, 4, 8, 16]);
        assert!(
            gaps.iter().all(|&g| g <= 60) && gaps.contains(&60),
            "{gaps:?}"
        );
        assert!(n.lost(0));
        assert!(!n.lost(REACHABLE_NS + 199 * S), "heard since");
        assert_eq!(n.stats.unicast_probes, 3);
        assert_eq!(n.stats.unreachable, 1);
        // Heard again (an answer): reachable for the whole time, unicast first when it
        // lapses.
        let t = REACHABLE_NS + 200 * S;
        assert_eq!(n.tick(t, t), None);
        assert!(!n.lost(t) && n.probes() == 0);
        assert!(!n.due(t + REACHABLE_NS - 1));
        assert_eq!(n.tick(t + REACHABLE_NS, t), Some(Unicast));
    }

    #[test]
    fn heard_elsewhere_in_time_defers_the_probe() {
        // Due at 30 s, but heard at 20 s (by another worker): due again at 50 s.
        let mut n = Nud::new(0, REACHABLE_NS);
        assert_eq!(n.tick(REACHABLE_NS, 20 * S), None);
        assert!(!n.due(50 * S - 1) && n.due(50 * S));
        assert_eq!(n.tick(50 * S, 20 * S), Some(Probe::Unicast));
    }
}
