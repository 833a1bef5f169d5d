//! Out-of-order receive queue (RFC 9293 §3.10.7.4 "segment text", RFC 9293 §3.9 advice to
//! keep out-of-order data): a bounded ring of bytes indexed by sequence number modulo its
//! capacity, plus a short sorted list of disjoint, merged ranges. Overlapping and duplicate
//! segments are trimmed/merged; bytes are stored once. Allocated only while a flow has
//! out-of-order data (the host keeps a pool of them).

use crate::seq;

/// Maximum number of disjoint holes-separated ranges kept per flow.
pub const MAX_RANGES: usize = 8;

/// Result of [`OooQueue::insert`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OooInsert {
    /// Bytes stored (some may have overlapped stored ones).
    Stored,
    /// Every byte was already queued.
    Duplicate,
    /// No room for another disjoint range (or beyond capacity): segment dropped.
    Full,
}

/// Out-of-order byte store of one flow.
pub struct OooQueue {
    buf: Box<[u8]>,
    /// Absolute sequence ranges [start, end), sorted, disjoint and non-adjacent.
    ranges: [(u32, u32); MAX_RANGES],
    n: u8,
    /// Start of the most recently stored segment (first SACK block, RFC 2018 §4).
    last: u32,
    /// Sequence number of a FIN that arrived out of order (processed once data reaches it).
    pub fin: Option<u32>,
}

impl OooQueue {
    /// `capacity` is rounded up to a power of two.
    pub fn new(capacity: usize) -> Self {
        let cap = capacity.max(16).next_power_of_two();
        OooQueue {
            buf: vec![0u8; cap].into_boxed_slice(),
            ranges: [(0, 0); MAX_RANGES],
            n: 0,
            last: 0,
            fin: None,
        }
    }

    pub fn capacity(&self) -> u32 {
        self.buf.len() as u32
    }
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }
    pub fn clear(&mut self) {
        self.n = 0;
        self.fin = None;
    }
    /// Current ranges (for SACK blocks and tests).
    pub fn ranges(&self) -> &[(u32, u32)] {
        &self.ranges[..self.n as usize]
    }
    /// Writes up to `max` SACK blocks, the one holding the latest segment first (RFC 2018 §4).
    pub fn sack_blocks(&self, out: &mut [(u32, u32); 4], max: usize) -> usize {
        let r = self.ranges();
        let first = r
            .iter()
            .position(|&(s, e)| seq::le(s, self.last) && seq::lt(self.last, e));
        let mut n = 0;
        if let Some(f) = first {
            out[0] = r[f];
            n = 1;
        }
        for (k, &b) in r.iter().enumerate() {
            if n >= max {
                break;
            }
            if Some(k) != first {
                out[n] = b;
                n += 1;
            }
        }
        n
    }
    /// Bytes held.
    #[cfg(test)]
    pub fn bytes(&self) -> u32 {
        self.ranges().iter().map(|r| r.1.wrapping_sub(r.0)).sum()
    }

    /// Stores `data` starting at `seq`, with `rcv_nxt` the next in-order byte. The caller
    /// has already trimmed the segment to the receive window; bytes at or beyond
    /// `rcv_nxt + capacity` are dropped here.
    pub fn insert(&mut self, rcv_nxt: u32, mut seq_start: u32, mut data: &[u8]) -> OooInsert {
        // Trim anything before rcv_nxt.
        if seq::lt(seq_start, rcv_nxt) {
            let cut = rcv_nxt.wrapping_sub(seq_start) as usize;
            if cut >= data.len() {
                return OooInsert::Duplicate;
            }
            data = &data[cut..];
            seq_start = rcv_nxt;
        }
        let cap = self.capacity();
        let off = seq_start.wrapping_sub(rcv_nxt);
        if off >= cap || data.is_empty() {
            return OooInsert::Full;
        }
        let room = (cap - off) as usize;
        if data.len() > room {
            data = &data[..room];
        }
        let s = off;
        let e = off + data.len() as u32;
        // Find ranges overlapping or adjacent to [s, e) (in offsets from rcv_nxt).
        let n = self.n as usize;
        let mut first = n;
        let mut last = 0usize;
        let mut covered = false;
        for i in 0..n {
            let rs = self.ranges[i].0.wrapping_sub(rcv_nxt);
            let re = self.ranges[i].1.wrapping_sub(rcv_nxt);
            if rs <= s && e <= re {
                covered = true;
                break;
            }
            if rs <= e && s <= re {
                if first == n {
                    first = i;
                }
                last = i;
            }
        }
        if covered {
            return OooInsert::Duplicate;
        }
        if first == n && n == MAX_RANGES {
            return OooInsert::Full;
        }
        self.copy_in(seq_start, data);
        self.last = seq_start;
        if first == n {
            // New disjoint range: insert sorted.
            let mut pos = n;
            for i in 0..n {
                if self.ranges[i].0.wrapping_sub(rcv_nxt) > s {
                    pos = i;
                    break;
                }
            }
            let mut i = n;
            while i > pos {
                self.ranges[i] = self.ranges[i - 1];
                i -= 1;
            }
            self.ranges[pos] = (seq_start, seq_start.wrapping_add(data.len() as u32));
            self.n += 1;
        } else {
            let ns = s.min(self.ranges[first].0.wrapping_sub(rcv_nxt));
            let ne = e.max(self.ranges[last].1.wrapping_sub(rcv_nxt));
            self.ranges[first] = (rcv_nxt.wrapping_add(ns), rcv_nxt.wrapping_add(ne));
            let removed = last - first;
            if removed > 0 {
                for i in (last + 1)..n {
                    self.ranges[i - removed] = self.ranges[i];
                }
                self.n -= removed as u8;
            }
        }
        OooInsert::Stored
    }

    fn copy_in(&mut self, seq_start: u32, data: &[u8]) {
        let mask = self.buf.len() - 1;
        let pos = seq_start as usize & mask;
        let first = data.len().min(self.buf.len() - pos);
        self.buf[pos..pos + first].copy_from_slice(&data[..first]);
        if first < data.len() {
            let rest = data.len() - first;
            self.buf[..rest].copy_from_slice(&data[first..]);
        }
    }

    /// If the first range now starts at or before `rcv_nxt`, removes it and returns the
    /// deliverable part `[rcv_nxt, end)` as (start, len). Stale ranges are discarded.
    pub fn pop_ready(&mut self, rcv_nxt: u32) -> Option<(u32, u32)> {
        while self.n > 0 {
            let (s, e) = self.ranges[0];
            if seq::gt(s, rcv_nxt) {
                return None;
            }
            let n = self.n as usize;
            for i in 1..n {
                self.ranges[i - 1] = self.ranges[i];
            }
            self.n -= 1;
            if seq::gt(e, rcv_nxt) {
                return Some((rcv_nxt, e.wrapping_sub(rcv_nxt)));
            }
        }
        None
    }

    /// The stored bytes of `[start, start+len)` as one or two slices (ring wrap).
    pub fn slices(&self, start: u32, len: u32) -> (&[u8], &[u8]) {
        let mask = self.buf.len() - 1;
        let pos = start as usize & mask;
        let len = len as usize;
        let first = len.min(self.buf.len() - pos);
        (&self.buf[pos..pos + first], &self.buf[..len - first])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(q: &OooQueue, s: u32, l: u32) -> Vec<u8> {
        let (a, b) = q.slices(s, l);
        [a, b].concat()
    }

    // RFC 9293 §3.10.7.4: out-of-order segments are held and delivered once the gap fills.
    #[test]
    fn rfc9293_3_10_7_4_hold_and_deliver() {
        let mut q = OooQueue::new(64);
        assert_eq!(q.insert(100, 110, b"klmno"), OooInsert::Stored);
        assert_eq!(q.pop_ready(100), None);
        // The gap 100..110 arrives in order (delivered by the caller); rcv_nxt = 110.
        assert_eq!(q.pop_ready(110), Some((110, 5)));
        assert_eq!(collect(&q, 110, 5), b"klmno");
        assert!(q.is_empty());
    }

    // Overlapping and adjacent segments merge; duplicates are recognised (RFC 9293 §3.10.7.4 trimming).
    #[test]
    fn rfc9293_3_10_7_4_merge_overlap_duplicate() {
        let mut q = OooQueue::new(64);
        assert_eq!(q.insert(0, 10, b"0123"), OooInsert::Stored);
        assert_eq!(q.insert(0, 20, b"ab"), OooInsert::Stored);
        assert_eq!(q.ranges(), &[(10, 14), (20, 22)]);
        assert_eq!(q.insert(0, 12, b"23456789"), OooInsert::Stored); // 12..20 joins both
        assert_eq!(q.ranges(), &[(10, 22)]);
        assert_eq!(q.insert(0, 15, b"5678"), OooInsert::Duplicate);
        assert_eq!(q.bytes(), 12);
        assert_eq!(q.pop_ready(10), Some((10, 12)));
        assert_eq!(collect(&q, 10, 12), b"0123456789ab");
    }

    // Stale prefix (already delivered) is trimmed on pop.
    #[test]
    fn rfc9293_3_10_7_4_partial_overlap_with_delivered() {
        let mut q = OooQueue::new(64);
        q.insert(0, 5, b"56789");
        assert_eq!(q.pop_ready(7), Some((7, 3)));
        assert_eq!(collect(&q, 7, 3), b"789");
    }

    #[test]
    fn ring_wraps_and_sequence_wraps() {
        let mut q = OooQueue::new(16);
        let rcv = 0xffff_fffa;
        assert_eq!(
            q.insert(rcv, rcv.wrapping_add(4), b"ABCDEFGH"),
            OooInsert::Stored
        );
        assert_eq!(
            q.pop_ready(rcv.wrapping_add(4)),
            Some((rcv.wrapping_add(4), 8))
        );
        assert_eq!(collect(&q, rcv.wrapping_add(4), 8), b"ABCDEFGH");
    }

    #[test]
    fn bounded_by_ranges_and_capacity() {
        let mut q = OooQueue::new(256);
        for i in 0..MAX_RANGES as u32 {
            assert_eq!(q.insert(0, 10 + i * 10, b"x"), OooInsert::Stored);
        }
        assert_eq!(q.insert(0, 200, b"y"), OooInsert::Full);
        assert_eq!(q.insert(0, 11, b"z"), OooInsert::Stored); // merges with 10
        assert_eq!(q.insert(0, 300, b"w"), OooInsert::Full); // beyond capacity
    }
}
