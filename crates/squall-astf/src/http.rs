//! HTTP requests of the `http_request` instruction, compiled: a request is a list of
//! [`Part`]s, each one or several immutable buffers of the profile (the request line of
//! each URL, fixed header lines, each value of a varying header, the body). Sending a
//! request queues one buffer of each part by reference: nothing is copied or formatted
//! per flow. [`HttpReq::pieces`] chooses the buffer of each part (round robin, random,
//! weighted, or by flow).

use crate::model::BufIdx;

/// Most parts of one request (request line, header groups, body).
pub const MAX_HTTP_PARTS: usize = 32;
/// Most alternatives of one part (URLs of a list, values of a header).
pub const MAX_HTTP_CHOICES: usize = 65_535;

/// How a part chooses among its buffers on each request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pick {
    /// One buffer.
    Fixed,
    /// In turn, with one cursor per part on each side of each core.
    RoundRobin,
    /// Uniformly at random on each request.
    Random,
    /// At random with the part's weights.
    Weighted,
    /// By the flow: every request of one flow uses the same buffer, flows spread evenly.
    Flow,
}

/// One part of a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Part {
    /// The alternatives (one for [`Pick::Fixed`]).
    pub bufs: Box<[BufIdx]>,
    pub pick: Pick,
    /// [`Pick::Weighted`]: cumulative weights (the last is the total, < 2^32).
    pub cum: Box<[u32]>,
    /// [`Pick::RoundRobin`]: index of the part's cursor (`0..Profile::http_cursors`).
    pub cursor: u32,
}

impl Part {
    /// The buffer chosen for one request. `rnd` is a uniform random number, `flow` a
    /// number identifying the flow (the same for all its requests).
    pub fn choose(&self, cursors: &mut [u32], rnd: u32, flow: u32) -> BufIdx {
        self.bufs[self.choose_index(cursors, rnd, flow)]
    }

    /// The index of the alternative [`Part::choose`] takes.
    pub fn choose_index(&self, cursors: &mut [u32], rnd: u32, flow: u32) -> usize {
        let n = self.bufs.len() as u64;
        let k = match self.pick {
            Pick::Fixed => 0,
            Pick::RoundRobin => match cursors.get_mut(self.cursor as usize) {
                Some(c) => {
                    let k = *c as u64 % n;
                    *c = ((k + 1) % n) as u32;
                    k
                }
                None => 0,
            },
            Pick::Random => (u64::from(rnd) * n) >> 32,
            Pick::Weighted => {
                let total = u64::from(self.cum.last().copied().unwrap_or(1).max(1));
                let r = ((u64::from(rnd) * total) >> 32) as u32;
                self.cum.partition_point(|&c| c <= r) as u64
            }
            // Fibonacci hashing spreads consecutive flow numbers over the list.
            Pick::Flow => (u64::from(flow.wrapping_mul(0x9E37_79B9)) * n) >> 32,
        };
        k.min(n - 1) as usize
    }
}

/// A compiled request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpReq {
    /// The method is HEAD: the response has no body whatever its headers say.
    pub head: bool,
    /// The method token (statistics, messages).
    pub method: String,
    pub parts: Vec<Part>,
    /// When the head's parts have few combinations: every whole head, one buffer each,
    /// indexed by the parts' choices (the first part's index varies slowest). A request
    /// is then one buffer (plus the body), still chosen part by part.
    pub heads: Option<Box<[BufIdx]>>,
    /// The body buffer, sent after the head.
    pub body: Option<BufIdx>,
}

impl HttpReq {
    /// The buffers of one request, in order (see [`Part::choose`]); `rnd` draws a random
    /// number for each part that needs one.
    pub fn pieces(
        &self,
        cursors: &mut [u32],
        mut rnd: impl FnMut() -> u32,
        flow: u32,
        mut out: impl FnMut(BufIdx),
    ) {
        let mut combo = 0usize;
        for (pos, p) in self.parts.iter().enumerate() {
            let r = if matches!(p.pick, Pick::Random | Pick::Weighted) {
                rnd()
            } else {
                0
            };
            // Each part picks by its own mix of the flow number, so that the choices of
            // two parts (a URL and a User-Agent, say) are independent of each other.
            let k = p.choose_index(cursors, r, part_flow(flow, pos));
            if self.heads.is_some() {
                combo = combo * p.bufs.len() + k;
            } else {
                out(p.bufs[k]);
            }
        }
        if let Some(h) = &self.heads {
            out(h[combo.min(h.len() - 1)]);
        }
        if let Some(b) = self.body {
            out(b);
        }
    }
}

/// The flow number part `pos` of a request picks by: the first part takes the flow's
/// number as it is, the others a mix of it with their position (a 32-bit finalizer,
/// MurmurHash3's), so that parts of equal length do not pair index i with index i.
#[inline]
fn part_flow(flow: u32, pos: usize) -> u32 {
    if pos == 0 {
        return flow;
    }
    let mut h = flow ^ (pos as u32).wrapping_mul(0x632B_E5AB);
    h ^= h >> 16;
    h = h.wrapping_mul(0x85EB_CA6B);
    h ^= h >> 13;
    h = h.wrapping_mul(0xC2B2_AE35);
    h ^ (h >> 16)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(n: u32, pick: Pick, cum: &[u32]) -> Part {
        Part {
            bufs: (0..n).map(BufIdx).collect(),
            pick,
            cum: cum.into(),
            cursor: 1,
        }
    }

    #[test]
    fn round_robin_cycles_per_cursor() {
        let p = part(3, Pick::RoundRobin, &[]);
        let mut c = [7, 0];
        let v: Vec<u32> = (0..7).map(|_| p.choose(&mut c, 0, 0).0).collect();
        assert_eq!(v, [0, 1, 2, 0, 1, 2, 0]);
        assert_eq!(c[0], 7, "other cursors untouched");
    }

    #[test]
    fn weighted_follows_the_weights() {
        // Weights 1, 0, 3: the middle one is never chosen, the last three times as often.
        let p = part(3, Pick::Weighted, &[1, 1, 4]);
        let mut n = [0u32; 3];
        let mut r = 12345u32;
        for _ in 0..40_000 {
            r = r.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            n[p.choose(&mut [], r, 0).0 as usize] += 1;
        }
        assert_eq!(n[1], 0);
        let ratio = f64::from(n[2]) / f64::from(n[0]);
        assert!((2.8..3.2).contains(&ratio), "{n:?}");
    }

    #[test]
    fn random_and_flow_stay_in_range_and_spread() {
        let p = part(5, Pick::Random, &[]);
        assert_eq!(p.choose(&mut [], u32::MAX, 0), BufIdx(4));
        assert_eq!(p.choose(&mut [], 0, 0), BufIdx(0));
        let f = part(4, Pick::Flow, &[]);
        let mut seen = [0u32; 4];
        for flow in 0..400 {
            let b = f.choose(&mut [], 0, flow);
            assert_eq!(b, f.choose(&mut [], 99, flow), "stable per flow");
            seen[b.0 as usize] += 1;
        }
        assert!(seen.iter().all(|&s| (60..=140).contains(&s)), "{seen:?}");
    }

    /// Three parts chosen by flow (3 URLs, 3 User-Agents, 4 languages): over many flows
    /// every one of the 36 combinations comes, each about as often.
    #[test]
    fn parts_chosen_by_flow_are_independent() {
        let r = HttpReq {
            head: false,
            method: "GET".into(),
            parts: vec![
                part(3, Pick::Flow, &[]),
                part(3, Pick::Flow, &[]),
                part(4, Pick::Flow, &[]),
            ],
            heads: Some((0..36).map(BufIdx).collect()),
            body: None,
        };
        let mut seen = [0u32; 36];
        for k in 0..36_000u32 {
            // Flow numbers as the generator makes them: a hash of address and port.
            let flow = (0x1000_0001 + k % 200).wrapping_mul(0x0101_0101) ^ (1024 + k / 200);
            r.pieces(&mut [], || 0, flow, |b| seen[b.0 as usize] += 1);
        }
        assert!(seen.iter().all(|&n| (800..=1200).contains(&n)), "{seen:?}");
    }

    #[test]
    fn pieces_take_one_buffer_per_part() {
        let r = HttpReq {
            head: false,
            method: "GET".into(),
            parts: vec![
                part(2, Pick::RoundRobin, &[]),
                Part {
                    bufs: [BufIdx(9)].into(),
                    pick: Pick::Fixed,
                    cum: [].into(),
                    cursor: 0,
                },
            ],
            heads: None,
            body: Some(BufIdx(5)),
        };
        let mut c = [0, 0];
        let mut got = Vec::new();
        r.pieces(&mut c, || 0, 0, |b| got.push(b.0));
        r.pieces(&mut c, || 0, 0, |b| got.push(b.0));
        assert_eq!(got, [0, 9, 5, 1, 9, 5]);
        // With the table of whole heads: one buffer per request, chosen the same way.
        let r = HttpReq {
            heads: Some([BufIdx(20), BufIdx(21)].into()),
            ..r
        };
        got.clear();
        r.pieces(&mut c, || 0, 0, |b| got.push(b.0));
        r.pieces(&mut c, || 0, 0, |b| got.push(b.0));
        assert_eq!(got, [20, 5, 21, 5]);
    }
}
