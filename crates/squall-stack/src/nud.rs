//! Reachability of the node's next hop (neighbour unreachability detection, RFC 4861
//! §7.3, applied to ARP as Linux applies its NUD states): the timing of it only. The node
//! feeds the confirmations (a frame from the next hop's MAC) and sends the probes this
//! asks for; a reply from another MAC moves the next hop as an announcement does.
//!
//! Reachable while confirmed within the reachable time ([`REACHABLE_NS`] by default);
//! then probed at its MAC
//! ([`UNICAST_PROBES`] unicast requests [`RETRANS_NS`] apart, RFC 1122 §2.3.2.1's unicast
//! poll); still unanswered, it is looked for by broadcast (IPv6: the solicited-node
//! group) every [`RETRANS_NS`] until an answer comes. Frames keep going to the last known
//! MAC meanwhile (a generator's flows retransmit into the gap; Linux would queue or drop
//! them). Linux's defaults: `base_reachable_time` 30 s, `retrans_time` 1 s,
//! `ucast_solicit` 3.

/// Time a confirmation keeps the next hop reachable by default, ns.
pub const REACHABLE_NS: u64 = 30_000_000_000;
/// Interval between probes, ns.
pub const RETRANS_NS: u64 = 1_000_000_000;
/// Unicast probes before the next hop is looked for by broadcast.
pub const UNICAST_PROBES: u32 = 3;

/// Counters of the next hop's reachability.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NudStats {
    /// Unicast probes sent to the next hop's MAC (it went unconfirmed for the reachable
    /// time).
    pub unicast_probes: u64,
    /// Times every unicast probe went unanswered: the next hop was then looked for by
    /// broadcast.
    pub unreachable: u64,
    /// Broadcast (IPv4) or solicited-node multicast (IPv6) probes sent.
    pub broadcast_probes: u64,
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
    /// When the next probe is due (the end of reachability, or of a probe's wait).
    due_at: u64,
    /// Probes sent since the last confirmation.
    probes: u32,
    /// Time a confirmation keeps the next hop reachable, ns.
    reachable_ns: u64,
    pub stats: NudStats,
}

impl Nud {
    /// A next hop resolved (confirmed) at `now`, reachable for `reachable_ns` after each
    /// confirmation.
    pub fn new(now: u64, reachable_ns: u64) -> Self {
        Nud {
            due_at: now.saturating_add(reachable_ns),
            probes: 0,
            reachable_ns,
            stats: NudStats::default(),
        }
    }
    /// The next hop showed itself at `now` (a frame from its MAC).
    #[inline]
    pub fn confirm(&mut self, now: u64) {
        self.due_at = now.saturating_add(self.reachable_ns);
        self.probes = 0;
    }
    /// A probe is due at `now`.
    #[inline]
    pub fn due(&self, now: u64) -> bool {
        now >= self.due_at
    }
    /// The probe to send now (when [`due`](Self::due)); the next is due a retransmission
    /// interval later unless a confirmation comes first.
    pub fn probe(&mut self, now: u64) -> Probe {
        self.probes = self.probes.saturating_add(1);
        self.due_at = now.saturating_add(RETRANS_NS);
        if self.probes <= UNICAST_PROBES {
            self.stats.unicast_probes += 1;
            Probe::Unicast
        } else {
            if self.probes == UNICAST_PROBES + 1 {
                self.stats.unreachable += 1;
            }
            self.stats.broadcast_probes += 1;
            Probe::Broadcast
        }
    }
    /// Probes sent since the last confirmation.
    pub fn probes(&self) -> u32 {
        self.probes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    #[test]
    fn confirmed_next_hops_are_not_probed() {
        let mut n = Nud::new(0, REACHABLE_NS);
        for t in (0..300).map(|k| k * S) {
            assert!(!n.due(t));
            n.confirm(t);
        }
        assert_eq!(n.stats, NudStats::default());
    }

    #[test]
    fn unicast_probes_then_broadcast_until_confirmed() {
        let mut n = Nud::new(0, REACHABLE_NS);
        assert!(!n.due(REACHABLE_NS - 1));
        let mut t = REACHABLE_NS;
        let mut sent = Vec::new();
        while sent.len() < 6 {
            if n.due(t) {
                sent.push(n.probe(t));
            }
            t += S / 10;
        }
        use Probe::*;
        assert_eq!(
            sent,
            [Unicast, Unicast, Unicast, Broadcast, Broadcast, Broadcast]
        );
        // One retransmission interval apart: the sixth 5 s after the first.
        assert!((REACHABLE_NS + 5 * RETRANS_NS..REACHABLE_NS + 6 * RETRANS_NS).contains(&t));
        assert_eq!(
            n.stats,
            NudStats {
                unicast_probes: 3,
                unreachable: 1,
                broadcast_probes: 3
            }
        );
        // An answer: reachable again for the whole time, unicast first when it lapses.
        n.confirm(t);
        assert_eq!(n.probes(), 0);
        assert!(!n.due(t + REACHABLE_NS - 1));
        assert_eq!(n.probe(t + REACHABLE_NS), Unicast);
    }
}
