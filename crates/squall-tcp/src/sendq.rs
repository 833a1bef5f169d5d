//! Pull-based send side. Applications register immutable buffers (`Arc<[u8]>` or
//! `&'static [u8]`) once in a per-core [`BufRegistry`] and queue *references* to them
//! (buffer id, offset, length). A flow's [`SendQueue`] is a linked list of such chunks in a
//! shared, index-linked [`ChunkPool`]; segments (and retransmissions) copy bytes straight
//! from the registered buffer into the outgoing frame. Owned, dynamic data is registered as
//! an owned buffer that is freed when its last byte is acknowledged.

use std::sync::Arc;

/// Identifier of a registered buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BufId(pub u32);

enum BufData {
    Free,
    /// Shared bytes, their per-32-byte-block prefix checksum sums and their registration
    /// stamp (the key of their entries in the [`SumMemo`]).
    Shared(Arc<[u8]>, Box<[u32]>, u32),
    Static(&'static [u8], Box<[u32]>, u32),
    Owned(Box<[u8]>),
}

/// Slots of the registry's payload-sum memo (16 bytes each).
const MEMO_SLOTS: usize = 256;

/// One remembered payload sum: `sum` of bytes `start..start + len` of the shared or static
/// buffer registered with `stamp` (0: empty slot).
#[derive(Clone, Copy, Default)]
struct SumMemo {
    stamp: u32,
    start: u32,
    len: u32,
    sum: u32,
}

/// The memo slot of a range: consecutive segments of one buffer (starts a multiple of an
/// MSS apart, the MSS not a multiple of 2 KiB) land in different slots.
#[inline(always)]
fn memo_slot(stamp: u32, start: u32) -> usize {
    ((start >> 3).wrapping_add(stamp.wrapping_mul(0x9e37_79b9) >> 16)) as usize & (MEMO_SLOTS - 1)
}

/// Block size of the precomputed checksum sums.
const CSUM_BLOCK: usize = 32;

/// Most blocks a prefix difference may span: each block adds at most 0xffff, so the
/// difference of two wrapping u32 prefix sums is exact below 65,537 blocks (2 MiB).
const MAX_PREFIX_BLOCKS: usize = 65_536;

/// Prefix sums of the big-endian ones'-complement sums of each full 32-byte block
/// (`p[k]` = sum of blocks `0..k`, unfolded, wrapping in u32: 4 bytes per 32, and a
/// difference of two entries is exact for ranges up to [`MAX_PREFIX_BLOCKS`]). Lets a
/// segment's payload sum be taken from the immutable buffer in O(1) + at most two
/// partial blocks (< 32 bytes each).
fn prefix_sums(d: &[u8]) -> Box<[u32]> {
    let mut p = Vec::with_capacity(d.len() / CSUM_BLOCK + 1);
    let mut acc = 0u32;
    p.push(0);
    for b in d.chunks_exact(CSUM_BLOCK) {
        acc = acc.wrapping_add(squall_wire::checksum::sum(b) as u32);
        p.push(acc);
    }
    p.into_boxed_slice()
}

/// Ones'-complement sum (folded, big-endian words counted from `a`) of `d[a..b]`, using the
/// block prefix sums `p` of `d` for the aligned middle part.
#[inline]
fn range_sum(d: &[u8], p: &[u32], a: usize, b: usize) -> u16 {
    let ba = a.div_ceil(CSUM_BLOCK);
    let bb = b / CSUM_BLOCK;
    if b - a < 4 * CSUM_BLOCK {
        return squall_wire::checksum::sum_short(&d[a..b]);
    }
    if ba >= bb || bb >= p.len() || bb - ba > MAX_PREFIX_BLOCKS {
        return squall_wire::checksum::sum(&d[a..b]);
    }
    let odd = a % 2 == 1;
    if !odd {
        // Head, middle and tail all counted from even positions (the usual segment: a
        // payload offset that is a multiple of an even MSS): head and tail share one
        // fold, and nothing is swapped.
        let ends =
            squall_wire::checksum::sum_short2(&d[a..ba * CSUM_BLOCK], &d[bb * CSUM_BLOCK..b]);
        return squall_wire::checksum::fold(ends as u64 + p[bb].wrapping_sub(p[ba]) as u64);
    }
    // Head, counted from `a`; re-expressed counted from the buffer start (swap if odd).
    // Head and tail are each shorter than one block.
    let head = squall_wire::checksum::sum_short(&d[a..ba * CSUM_BLOCK]);
    let head0 = if odd { head.swap_bytes() } else { head };
    let mid = p[bb].wrapping_sub(p[ba]) as u64;
    let tail = squall_wire::checksum::sum_short(&d[bb * CSUM_BLOCK..b]);
    let s0 = squall_wire::checksum::fold(head0 as u64 + mid + tail as u64);
    if odd {
        s0.swap_bytes()
    } else {
        s0
    }
}

/// Per-core registry of immutable send buffers.
///
/// The payload sums of segments cut from shared and static buffers are remembered in a
/// small direct-mapped memo keyed by (registration, start, length): a server that sends
/// the same file to many clients cuts it at the same offsets every time, and then takes
/// each segment's sum from the memo instead of summing its bytes again.
pub struct BufRegistry {
    bufs: Vec<BufData>,
    free: Vec<u32>,
    /// Stamp of the next shared/static registration (never 0).
    stamp: u32,
    memo: Box<[SumMemo; MEMO_SLOTS]>,
}

impl Default for BufRegistry {
    fn default() -> Self {
        Self::new()
    }
}

impl BufRegistry {
    pub fn new() -> Self {
        BufRegistry {
            bufs: Vec::new(),
            free: Vec::new(),
            stamp: 1,
            memo: Box::new([SumMemo::default(); MEMO_SLOTS]),
        }
    }
    /// A fresh stamp for a shared/static registration. When the counter wraps, the memo is
    /// emptied and the live buffers are stamped again from 1, so no two live buffers (and
    /// no remembered sum of a buffer gone) ever share a stamp.
    fn next_stamp(&mut self) -> u32 {
        if self.stamp == u32::MAX {
            self.restamp();
        }
        let s = self.stamp;
        self.stamp += 1;
        s
    }
    #[cold]
    fn restamp(&mut self) {
        *self.memo = [SumMemo::default(); MEMO_SLOTS];
        let mut n = 1;
        for b in &mut self.bufs {
            if let BufData::Shared(_, _, s) | BufData::Static(_, _, s) = b {
                *s = n;
                n += 1;
            }
        }
        self.stamp = n;
    }
    fn put(&mut self, d: BufData) -> BufId {
        if let Some(i) = self.free.pop() {
            self.bufs[i as usize] = d;
            BufId(i)
        } else {
            self.bufs.push(d);
            BufId(self.bufs.len() as u32 - 1)
        }
    }
    /// Registers a shared immutable buffer (e.g. a template's bytes).
    pub fn register(&mut self, data: Arc<[u8]>) -> BufId {
        let p = prefix_sums(&data);
        let st = self.next_stamp();
        self.put(BufData::Shared(data, p, st))
    }
    /// Registers a static buffer.
    pub fn register_static(&mut self, data: &'static [u8]) -> BufId {
        let st = self.next_stamp();
        self.put(BufData::Static(data, prefix_sums(data), st))
    }
    /// Registers owned bytes; freed by the stack once fully acknowledged.
    pub fn register_owned(&mut self, data: Box<[u8]>) -> BufId {
        self.put(BufData::Owned(data))
    }
    /// Removes a shared/static buffer (the caller guarantees no queued chunk refers to it).
    pub fn unregister(&mut self, id: BufId) {
        if let Some(slot) = self.bufs.get_mut(id.0 as usize) {
            if !matches!(slot, BufData::Free) {
                *slot = BufData::Free;
                self.free.push(id.0);
            }
        }
    }
    fn is_owned(&self, id: u32) -> bool {
        matches!(self.bufs.get(id as usize), Some(BufData::Owned(_)))
    }
    /// Bytes of a buffer (empty if unknown).
    #[inline]
    pub fn get(&self, id: BufId) -> &[u8] {
        match self.bufs.get(id.0 as usize) {
            Some(BufData::Shared(a, _, _)) => a,
            Some(BufData::Static(s, _, _)) => s,
            Some(BufData::Owned(b)) => b,
            _ => &[],
        }
    }
    /// Copies `d.len()` bytes of buffer `id` from `start` into `dst` and returns their
    /// folded sum (words counted from `start`), or None if the range is invalid. The sum
    /// of a range of a shared or static buffer comes from the memo when it was taken
    /// before.
    #[inline]
    fn copy_sum(&mut self, id: BufId, start: usize, dst: &mut [u8]) -> Option<u16> {
        let end = start + dst.len();
        let (d, p, stamp): (&[u8], &[u32], u32) = match self.bufs.get(id.0 as usize) {
            Some(BufData::Shared(a, p, s)) => (a, p, *s),
            Some(BufData::Static(s, p, st)) => (s, p, *st),
            Some(BufData::Owned(b)) => (b, &[], 0),
            _ => return None,
        };
        let src = d.get(start..end)?;
        dst.copy_from_slice(src);
        if stamp == 0 {
            return Some(range_sum(d, p, start, end));
        }
        // Buffers are below 4 GiB (chunk offsets are u32).
        let (s32, l32) = (start as u32, dst.len() as u32);
        let m = &mut self.memo[memo_slot(stamp, s32)];
        if m.stamp == stamp && m.start == s32 && m.len == l32 {
            return Some(m.sum as u16);
        }
        let sum = range_sum(d, p, start, end);
        *m = SumMemo {
            stamp,
            start: s32,
            len: l32,
            sum: sum as u32,
        };
        Some(sum)
    }

    /// Number of live buffers.
    pub fn live(&self) -> usize {
        self.bufs.len() - self.free.len()
    }
}

const NIL: u32 = u32::MAX;

#[derive(Clone, Copy)]
struct Chunk {
    buf: u32,
    off: u32,
    len: u32,
    next: u32,
}

/// Index-linked pool of queued chunks shared by all flows of a core.
pub struct ChunkPool {
    nodes: Vec<Chunk>,
    free: u32,
}

impl Default for ChunkPool {
    fn default() -> Self {
        Self::new()
    }
}

/// A flow's send queue: bytes from SND.UNA onwards (unacknowledged then unsent), 12 bytes.
#[derive(Clone, Copy, Debug)]
pub struct SendQueue {
    head: u32,
    tail: u32,
    /// Total queued bytes.
    pub len: u32,
}

impl Default for SendQueue {
    fn default() -> Self {
        SendQueue {
            head: NIL,
            tail: NIL,
            len: 0,
        }
    }
}

/// Error: the chunk would not fit (queue length limited to 2^31 bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueFull;

impl ChunkPool {
    pub fn new() -> Self {
        ChunkPool {
            nodes: Vec::new(),
            free: NIL,
        }
    }
    fn alloc(&mut self, c: Chunk) -> u32 {
        if self.free != NIL {
            let i = self.free;
            self.free = self.nodes[i as usize].next;
            self.nodes[i as usize] = c;
            i
        } else {
            self.nodes.push(c);
            self.nodes.len() as u32 - 1
        }
    }
    fn release(&mut self, i: u32) {
        self.nodes[i as usize].next = self.free;
        self.free = i;
    }

    /// Appends `len` bytes of buffer `buf` at `off` to `q`. Out-of-range references are
    /// clamped to the buffer by the registry check of the caller.
    pub fn push(
        &mut self,
        q: &mut SendQueue,
        buf: BufId,
        off: u32,
        len: u32,
    ) -> Result<(), QueueFull> {
        if len == 0 {
            return Ok(());
        }
        if q.len as u64 + len as u64 > i32::MAX as u64 {
            return Err(QueueFull);
        }
        // Coalesce with the tail when contiguous in the same buffer.
        if q.tail != NIL {
            let t = &mut self.nodes[q.tail as usize];
            if t.buf == buf.0 && t.off + t.len == off {
                t.len += len;
                q.len += len;
                return Ok(());
            }
        }
        let i = self.alloc(Chunk {
            buf: buf.0,
            off,
            len,
            next: NIL,
        });
        if q.tail == NIL {
            q.head = i;
        } else {
            self.nodes[q.tail as usize].next = i;
        }
        q.tail = i;
        q.len += len;
        Ok(())
    }

    /// Drops `n` acknowledged bytes from the front; frees chunks and owned buffers.
    pub fn consume(&mut self, q: &mut SendQueue, mut n: u32, reg: &mut BufRegistry) {
        n = n.min(q.len);
        q.len -= n;
        while n > 0 {
            let h = q.head;
            let c = &mut self.nodes[h as usize];
            if c.len > n {
                c.off += n;
                c.len -= n;
                return;
            }
            n -= c.len;
            let (next, buf) = (c.next, c.buf);
            self.drop_chunk(h, buf, reg);
            q.head = next;
            if next == NIL {
                q.tail = NIL;
            }
        }
    }

    fn drop_chunk(&mut self, i: u32, buf: u32, reg: &mut BufRegistry) {
        if reg.is_owned(buf) {
            reg.unregister(BufId(buf));
        }
        self.release(i);
    }

    /// Frees the whole queue.
    pub fn clear(&mut self, q: &mut SendQueue, reg: &mut BufRegistry) {
        let mut h = q.head;
        while h != NIL {
            let c = self.nodes[h as usize];
            self.drop_chunk(h, c.buf, reg);
            h = c.next;
        }
        *q = SendQueue::default();
    }

    /// Copies `dst.len()` bytes starting `offset` bytes after the queue head into `dst`.
    /// Returns the number copied (short only if the queue is shorter).
    #[inline]
    pub fn copy_out(
        &self,
        q: &SendQueue,
        mut offset: u32,
        dst: &mut [u8],
        reg: &BufRegistry,
    ) -> usize {
        let mut h = q.head;
        let mut done = 0usize;
        while h != NIL && done < dst.len() {
            let c = &self.nodes[h as usize];
            if offset >= c.len {
                offset -= c.len;
                h = c.next;
                continue;
            }
            let src = reg.get(BufId(c.buf));
            let start = (c.off + offset) as usize;
            let avail = (c.len - offset) as usize;
            let take = avail.min(dst.len() - done);
            match src.get(start..start + take) {
                Some(s) => dst[done..done + take].copy_from_slice(s),
                None => dst[done..done + take].fill(0), // buffer vanished: never panic
            }
            done += take;
            offset = 0;
            h = c.next;
        }
        done
    }

    /// Like [`ChunkPool::copy_out`], also returning the ones'-complement sum (unfolded, as
    /// big-endian 16-bit words, the first copied byte at an even position) of the copied
    /// bytes. The sum is taken over the (immutable, cache-hot) source, never re-reading the
    /// freshly written frame.
    #[inline]
    pub fn copy_out_sum(
        &self,
        q: &SendQueue,
        mut offset: u32,
        dst: &mut [u8],
        reg: &mut BufRegistry,
    ) -> (usize, u64) {
        let mut h = q.head;
        let mut done = 0usize;
        let mut sum = 0u64;
        while h != NIL && done < dst.len() {
            let c = &self.nodes[h as usize];
            if offset >= c.len {
                offset -= c.len;
                h = c.next;
                continue;
            }
            let start = (c.off + offset) as usize;
            let avail = (c.len - offset) as usize;
            let take = avail.min(dst.len() - done);
            let part = match reg.copy_sum(BufId(c.buf), start, &mut dst[done..done + take]) {
                Some(sum) => sum,
                None => {
                    dst[done..done + take].fill(0);
                    0
                }
            };
            // A piece starting at an odd position contributes its byte-swapped sum (RFC 1071 §2(B)).
            sum += if done % 2 == 1 {
                part.swap_bytes()
            } else {
                part
            } as u64;
            done += take;
            offset = 0;
            h = c.next;
        }
        (done, sum)
    }

    /// Chunk nodes currently allocated (pool size, for memory accounting).
    pub fn allocated(&self) -> usize {
        self.nodes.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_references_and_copies_from_shared_buffers() {
        let mut reg = BufRegistry::new();
        let a = reg.register(Arc::from(&b"hello world"[..]));
        let b = reg.register_static(b"0123456789");
        let mut pool = ChunkPool::new();
        let mut q = SendQueue::default();
        pool.push(&mut q, a, 0, 5).unwrap();
        pool.push(&mut q, a, 5, 6).unwrap(); // coalesces
        pool.push(&mut q, b, 2, 4).unwrap();
        assert_eq!(q.len, 15);
        let mut out = [0u8; 8];
        assert_eq!(pool.copy_out(&q, 8, &mut out, &reg), 7);
        assert_eq!(&out[..7], b"rld2345");
        pool.consume(&mut q, 12, &mut reg);
        assert_eq!(q.len, 3);
        let mut out = [0u8; 3];
        pool.copy_out(&q, 0, &mut out, &reg);
        assert_eq!(&out, b"345");
        // The fused sum matches a plain sum of the copied bytes, also across an odd split.
        let mut q2 = SendQueue::default();
        pool.push(&mut q2, a, 0, 3).unwrap();
        pool.push(&mut q2, b, 0, 10).unwrap();
        let mut buf = [0u8; 13];
        let (n, s) = pool.copy_out_sum(&q2, 0, &mut buf, &mut reg);
        assert_eq!(n, 13);
        assert_eq!(
            squall_wire::checksum::fold(s),
            squall_wire::checksum::sum(&buf)
        );
        // Retransmission rebuilds from the same bytes.
        let mut again = [0u8; 3];
        pool.copy_out(&q, 0, &mut again, &reg);
        assert_eq!(out, again);
    }

    // RFC 1071 §2: sums from the block prefix table equal direct sums for every range,
    // both parities of start and length.
    #[test]
    fn rfc1071_prefix_range_sums_match_direct_sums() {
        let data: Vec<u8> = (0..5000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        let p = prefix_sums(&data);
        let mut seed = 7u64;
        for _ in 0..5000 {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            let a = (seed >> 33) as usize % 5000;
            let b = a + (seed >> 17) as usize % (5000 - a + 1);
            assert_eq!(
                range_sum(&data, &p, a, b),
                squall_wire::checksum::sum(&data[a..b]),
                "{a}..{b}"
            );
        }
        let ones = vec![0xffu8; 4096];
        let p = prefix_sums(&ones);
        // Both parities of the start (the even one folds head and tail together).
        for (a, b) in [(1, 4001), (2, 4002), (0, 4096), (6, 1454)] {
            assert_eq!(
                range_sum(&ones, &p, a, b),
                squall_wire::checksum::sum(&ones[a..b]),
                "{a}..{b}"
            );
        }
        // Zero data sums to 0 (never 0xffff), whatever the path.
        let zeros = vec![0u8; 4096];
        let p = prefix_sums(&zeros);
        for (a, b) in [(1, 4001), (2, 4002), (0, 4096)] {
            assert_eq!(range_sum(&zeros, &p, a, b), 0, "{a}..{b}");
        }
        // Ranges around the exactness limit of the wrapping u32 prefix sums (all ones is
        // the largest sum per block); the prefix sums themselves wrap several times.
        let big = vec![0xffu8; 5 << 20];
        let p = prefix_sums(&big);
        let lim = MAX_PREFIX_BLOCKS * CSUM_BLOCK;
        for (a, b) in [
            (0, lim),
            (1, lim + 1),
            (0, lim + CSUM_BLOCK),
            (3, 5 << 20),
            (64, lim + 64),
        ] {
            assert_eq!(
                range_sum(&big, &p, a, b),
                squall_wire::checksum::sum(&big[a..b]),
                "{a}..{b}"
            );
        }
    }

    /// Sum of `len` bytes `off` bytes into `q`, copied out through the memo.
    fn memo_sum(
        pool: &ChunkPool,
        q: &SendQueue,
        off: u32,
        len: usize,
        reg: &mut BufRegistry,
    ) -> u16 {
        let mut out = vec![0u8; len];
        let (n, s) = pool.copy_out_sum(q, off, &mut out, reg);
        assert_eq!(n, len);
        assert_eq!(
            squall_wire::checksum::fold(s),
            squall_wire::checksum::sum(&out)
        );
        squall_wire::checksum::fold(s)
    }

    // A remembered sum belongs to one registration: a buffer registered later in the same
    // registry slot, cut at the same offsets, gets its own sums.
    #[test]
    fn the_sum_memo_never_answers_for_a_buffer_gone() {
        let mut reg = BufRegistry::new();
        let mut pool = ChunkPool::new();
        let a = reg.register(Arc::from(vec![0x11u8; 32_768]));
        let mut q = SendQueue::default();
        pool.push(&mut q, a, 0, 32_768).unwrap();
        let first: Vec<u16> = (0..22)
            .map(|k| memo_sum(&pool, &q, k * 1448, 1448, &mut reg))
            .collect();
        // The second pass is answered from the memo, with the same sums.
        let again: Vec<u16> = (0..22)
            .map(|k| memo_sum(&pool, &q, k * 1448, 1448, &mut reg))
            .collect();
        assert_eq!(first, again);
        pool.clear(&mut q, &mut reg);
        reg.unregister(a);
        let b = reg.register(Arc::from(vec![0x22u8; 32_768]));
        assert_eq!(a, b, "the slot is reused");
        pool.push(&mut q, b, 0, 32_768).unwrap();
        for k in 0..22 {
            let s = memo_sum(&pool, &q, k * 1448, 1448, &mut reg);
            assert_ne!(s, first[k as usize], "segment {k}: the old buffer's sum");
        }
        // Another length at the same start is another range.
        assert_eq!(
            memo_sum(&pool, &q, 0, 1000, &mut reg),
            squall_wire::checksum::sum(&[0x22u8; 1000])
        );
    }

    // When the stamp counter wraps, the live buffers are stamped again and the memo is
    // emptied: sums stay right for buffers registered before and after.
    #[test]
    fn the_sum_memo_survives_the_stamp_counter_wrapping() {
        let mut reg = BufRegistry::new();
        let mut pool = ChunkPool::new();
        reg.stamp = u32::MAX - 2;
        let bufs: Vec<(BufId, u8)> = (1..=6u8)
            .map(|v| (reg.register(Arc::from(vec![v; 4096])), v))
            .collect();
        let mut stamps: Vec<u32> = reg
            .bufs
            .iter()
            .filter_map(|b| match b {
                BufData::Shared(_, _, s) => Some(*s),
                _ => None,
            })
            .collect();
        stamps.sort_unstable();
        stamps.dedup();
        assert_eq!(stamps.len(), 6, "stamps unique across the wrap");
        assert!(!stamps.contains(&0));
        for _ in 0..2 {
            for &(id, v) in &bufs {
                let mut q = SendQueue::default();
                pool.push(&mut q, id, 0, 4096).unwrap();
                for off in [0u32, 1448, 2896] {
                    let len = (4096 - off as usize).min(1448);
                    assert_eq!(
                        memo_sum(&pool, &q, off, len, &mut reg),
                        squall_wire::checksum::sum(&vec![v; len])
                    );
                }
                pool.clear(&mut q, &mut reg);
            }
        }
    }

    #[test]
    fn owned_buffers_are_freed_when_acked() {
        let mut reg = BufRegistry::new();
        let mut pool = ChunkPool::new();
        let mut q = SendQueue::default();
        let o = reg.register_owned(b"dynamic"[..].into());
        pool.push(&mut q, o, 0, 7).unwrap();
        assert_eq!(reg.live(), 1);
        pool.consume(&mut q, 3, &mut reg);
        assert_eq!(reg.live(), 1);
        pool.consume(&mut q, 4, &mut reg);
        assert_eq!(reg.live(), 0);
        assert_eq!(q.len, 0);
        // Chunk node is reused.
        let s = reg.register_static(b"x");
        pool.push(&mut q, s, 0, 1).unwrap();
        assert_eq!(pool.allocated(), 1);
        pool.clear(&mut q, &mut reg);
        assert_eq!(q.len, 0);
    }
}
