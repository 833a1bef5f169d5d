//! SACK sender scoreboard (RFC 2018 §3, loss recovery per RFC 6675): the ranges above
//! SND.UNA that the peer reported received, and HighRxt. Allocated from a side table only
//! while a flow has SACK information.

use crate::seq;

pub const MAX_BLOCKS: usize = 8;

/// Per-flow scoreboard.
#[derive(Clone, Debug, Default)]
pub struct Scoreboard {
    /// Sorted, disjoint SACKed ranges [start, end).
    ranges: [(u32, u32); MAX_BLOCKS],
    n: u8,
    /// RFC 6675 HighRxt: highest sequence retransmitted in this recovery.
    pub high_rxt: u32,
    /// RFC 6675 RescueRxt: the recovery point of the last rescue retransmission (one per
    /// recovery: another only once SND.UNA has passed it).
    pub rescue_rxt: Option<u32>,
}

impl Scoreboard {
    /// Forgets everything (the scoreboard goes back to the pool for another flow).
    pub fn clear(&mut self) {
        self.n = 0;
        self.rescue_rxt = None;
    }
    /// The end of the highest SACKed range (`una` without one).
    pub fn top(&self, una: u32) -> u32 {
        self.ranges().last().map_or(una, |r| seq::max(r.1, una))
    }
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }
    pub fn ranges(&self) -> &[(u32, u32)] {
        &self.ranges[..self.n as usize]
    }

    /// Adds a block reported by the peer, ignoring blocks outside (una, max] (RFC 2018 §3).
    /// Returns whether it told something new (bytes not SACKed before).
    pub fn add(&mut self, una: u32, max: u32, s: u32, e: u32) -> bool {
        if !seq::lt(s, e) || !seq::lt(una, e) || seq::gt(e, max) {
            return false;
        }
        let s = seq::max(s, una);
        if self
            .ranges()
            .iter()
            .any(|&(a, b)| seq::le(a, s) && seq::ge(b, e))
        {
            return false;
        }
        let (os, oe) = (s.wrapping_sub(una), e.wrapping_sub(una));
        let n = self.n as usize;
        let mut out = [(0u32, 0u32); MAX_BLOCKS + 1];
        let mut m = 0;
        let (mut ns, mut ne) = (os, oe);
        let mut placed = false;
        for k in 0..n {
            let (rs, re) = (
                self.ranges[k].0.wrapping_sub(una),
                self.ranges[k].1.wrapping_sub(una),
            );
            if re < ns {
                out[m] = (rs, re);
                m += 1;
            } else if rs > ne {
                if !placed {
                    out[m] = (ns, ne);
                    m += 1;
                    placed = true;
                }
                out[m] = (rs, re);
                m += 1;
            } else {
                ns = ns.min(rs);
                ne = ne.max(re);
            }
        }
        if !placed {
            out[m] = (ns, ne);
            m += 1;
        }
        // Keep the lowest MAX_BLOCKS ranges (the ones recovery needs first).
        let m = m.min(MAX_BLOCKS);
        for (k, r) in out[..m].iter().enumerate() {
            self.ranges[k] = (una.wrapping_add(r.0), una.wrapping_add(r.1));
        }
        self.n = m as u8;
        true
    }

    /// Length of the segment at `una` up to the first SACKed byte, at most `mss`.
    pub fn first_hole_len(&self, una: u32, mss: u32) -> u32 {
        match self.ranges().first() {
            Some(&(s, _)) if seq::gt(s, una) => s.wrapping_sub(una).min(mss),
            _ => mss,
        }
    }

    /// Forgets everything below the new SND.UNA.
    pub fn advance(&mut self, una: u32) {
        let n = self.n as usize;
        let mut m = 0;
        for k in 0..n {
            let (s, e) = self.ranges[k];
            if seq::gt(e, una) {
                self.ranges[m] = (seq::max(s, una), e);
                m += 1;
            }
        }
        self.n = m as u8;
        if seq::lt(self.high_rxt, una) {
            self.high_rxt = una;
        }
    }

    /// RFC 6675 IsLost boundary: un-SACKed bytes below the returned sequence have
    /// DupThresh discontiguous SACKed ranges, or more than (DupThresh - 1) * SMSS SACKed
    /// bytes, above them and are deemed lost.
    fn lost_limit(&self, una: u32, mss: u32, thresh: u8) -> u32 {
        let thresh = u32::from(thresh.max(1));
        let bytes = (thresh - 1) * mss;
        let mut above = 0u32;
        for (n, &(s, e)) in self.ranges().iter().rev().enumerate() {
            above = above.saturating_add(e.wrapping_sub(s));
            if n as u32 + 1 >= thresh || above > bytes {
                return s;
            }
        }
        una
    }

    /// RFC 6675 IsLost(HighACK + 1): SND.UNA is deemed lost by what is SACKed above it.
    pub fn una_is_lost(&self, una: u32, mss: u32, thresh: u8) -> bool {
        seq::gt(self.lost_limit(una, mss, thresh), una)
    }

    /// Un-SACKed bytes in [from, to).
    fn unsacked(&self, from: u32, to: u32) -> u32 {
        if !seq::lt(from, to) {
            return 0;
        }
        let mut n = to.wrapping_sub(from);
        for &(s, e) in self.ranges() {
            let (a, b) = (seq::max(s, from), seq::min(e, to));
            if seq::lt(a, b) {
                n = n.saturating_sub(b.wrapping_sub(a));
            }
        }
        n
    }

    /// RFC 6675 SetPipe (DupThresh `thresh`): un-SACKed bytes not deemed lost, plus lost bytes already
    /// retransmitted (below HighRxt).
    pub fn pipe(&self, una: u32, max: u32, mss: u32, thresh: u8) -> u32 {
        let l = self.lost_limit(una, mss, thresh);
        let rx_to = seq::min(seq::max(self.high_rxt, una), l);
        self.unsacked(l, max) + self.unsacked(una, rx_to)
    }

    /// RFC 6675 NextSeg rule 1: the first lost (IsLost) un-SACKed byte at or above
    /// max(HighRxt, una), with the length of its hole.
    pub fn next_hole(&self, una: u32, mss: u32, thresh: u8) -> Option<(u32, u32)> {
        let l = self.lost_limit(una, mss, thresh);
        let mut x = seq::max(self.high_rxt, una);
        for &(s, e) in self.ranges() {
            if !seq::lt(x, l) {
                return None;
            }
            if seq::lt(x, s) {
                return Some((x, seq::min(s, l).wrapping_sub(x)));
            }
            x = seq::max(x, e);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scoreboard back from the pool carries nothing of its last flow: no ranges, no
    /// rescue point (another flow's sequence number would deny its rescue).
    #[test]
    fn a_cleared_scoreboard_forgets_its_rescue() {
        let mut b = Scoreboard::default();
        b.add(100, 1000, 300, 400);
        b.rescue_rxt = Some(900);
        b.clear();
        assert!(b.is_empty() && b.rescue_rxt.is_none());
    }

    // RFC 2018 §3: blocks merge, out-of-window blocks are ignored.
    #[test]
    fn rfc2018_3_scoreboard_merges_blocks() {
        let mut b = Scoreboard::default();
        b.add(100, 1000, 300, 400);
        b.add(100, 1000, 500, 600);
        b.add(100, 1000, 400, 500);
        assert_eq!(b.ranges(), &[(300, 600)]);
        b.add(100, 1000, 50, 90); // below una
        b.add(100, 1000, 900, 1100); // beyond snd_max
        assert_eq!(b.ranges(), &[(300, 600)]);
        b.add(100, 1000, 700, 800);
        assert_eq!(b.ranges(), &[(300, 600), (700, 800)]);
        b.advance(350);
        assert_eq!(b.ranges(), &[(350, 600), (700, 800)]);
    }

    // RFC 6675 §4-5: holes are retransmitted in order; pipe counts the unjudged tail and
    // retransmitted bytes.
    #[test]
    fn rfc6675_next_hole_and_pipe() {
        let mut b = Scoreboard {
            high_rxt: 0,
            ..Default::default()
        };
        b.add(0, 10_000, 1000, 3000);
        b.add(0, 10_000, 4000, 8000);
        assert_eq!(b.next_hole(0, 1000, 3), Some((0, 1000)));
        assert_eq!(b.pipe(0, 10_000, 1000, 3), 2000);
        b.high_rxt = 1000;
        assert_eq!(b.next_hole(0, 1000, 3), Some((3000, 1000)));
        assert_eq!(b.pipe(0, 10_000, 1000, 3), 3000);
        b.high_rxt = 4000;
        assert_eq!(b.next_hole(0, 1000, 3), None);
        assert_eq!(b.pipe(0, 10_000, 1000, 3), 4000);
    }

    // RFC 6675 §4 IsLost: a hole with at most (DupThresh-1)*SMSS bytes SACKed above it is
    // not yet lost (reordering tolerance) and stays in the pipe.
    #[test]
    fn rfc6675_4_is_lost_needs_dupthresh_bytes_above() {
        let mut b = Scoreboard::default();
        b.add(0, 10_000, 1000, 2000);
        assert_eq!(b.next_hole(0, 1000, 3), None);
        assert_eq!(b.pipe(0, 10_000, 1000, 3), 9000);
        b.add(0, 10_000, 2000, 4500);
        assert_eq!(b.next_hole(0, 1000, 3), Some((0, 1000)));
        assert_eq!(b.pipe(0, 10_000, 1000, 3), 5500);
    }

    // RFC 6675 §4 IsLost, first rule: DupThresh discontiguous SACKed ranges above a hole
    // make it lost even when they hold few bytes (small segments).
    #[test]
    fn rfc6675_4_is_lost_by_discontiguous_ranges() {
        let mut b = Scoreboard::default();
        b.add(0, 10_000, 100, 200);
        b.add(0, 10_000, 300, 400);
        assert_eq!(b.next_hole(0, 1000, 3), None);
        b.add(0, 10_000, 500, 600);
        assert_eq!(b.next_hole(0, 1000, 3), Some((0, 100)));
        assert_eq!(
            b.next_hole(0, 1000, 4),
            None,
            "DupThresh 4 needs a fourth range"
        );
    }

    // Hostile blocks: pipe and next_hole never overflow (this runs with overflow checks),
    // whatever blocks arrive; with the SND.UNA the host passes (una <= max) the pipe never
    // exceeds the data in flight. Ranges recorded against an SND.UNA beyond SND.MAX (an
    // ACK of unsent data, which the host now drops first) must not panic either.
    #[test]
    fn arbitrary_blocks_never_overflow() {
        use rand_core::{Rng, SeedableRng};
        let mut g = rand_xoshiro::SplitMix64::seed_from_u64(5961);
        let mut r = move || g.next_u64();
        let (una, max) = (1000u32, 1000u32 + 10 * 1448);
        for k in 0..200_000 {
            let consistent = k % 2 == 0;
            let mut b = Scoreboard {
                high_rxt: una,
                ..Default::default()
            };
            for _ in 0..1 + r() % 3 {
                let u = if consistent {
                    una + (r() % (max - una + 1) as u64) as u32
                } else {
                    max.wrapping_add((r() % ((1 << 31) - 20_000)) as u32)
                };
                let s = if r() % 2 == 0 {
                    r() as u32
                } else {
                    una + (r() % 20_000) as u32
                };
                b.add(u, max, s, s.wrapping_add((r() % (1 << 31)) as u32));
            }
            let p = b.pipe(una, max, 1448, 3);
            let hole = b.next_hole(una, 1448, 3);
            if consistent {
                assert!(p <= max - una, "{:?}", b.ranges());
                if let Some((x, len)) = hole {
                    assert!(seq::le(una, x) && seq::le(x.wrapping_add(len), max));
                }
            }
        }
    }
}
