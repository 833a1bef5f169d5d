//! Hierarchical timer wheel: per-core, preallocated, O(1) arm/cancel, exact expiry.
//!
//! Owns the [`TimerWheel`] whose API is the contract in `timer-api.md`: time is `u64`
//! nanoseconds on the caller's clock (the wheel never reads a clock), tokens are `u32`
//! indices chosen by the caller (e.g. a flow's slab index) and the wheel keeps one intrusive
//! link node per token in preallocated arrays (the forward links in an array of their
//! own), so arming and cancelling never allocate (only [`TimerWheel::grow`] does).
//!
//! # Structure
//! Time is cut into *ticks* of 1024 ns (`TICK_SHIFT = 10`). There are 9 levels of 64
//! slots; a slot of level `L` spans `64^L` ticks, so level 0 has ~1 us slots, level 1
//! ~65 us, level 2 ~4.2 ms, level 3 ~268 ms, level 4 ~17 s, level 5 ~18 min, level 6 ~19.5 h,
//! level 7 ~52 days, level 8 ~9 years: 9 x 6 = 54 bits of ticks cover every `u64`
//! nanosecond value, so there is no overflow list. A timer lives at the level of the highest
//! base-64 digit in which its deadline tick differs from the wheel's current tick, in the
//! slot named by that digit. Each level has a 64-bit occupancy bitmap; finding the next
//! non-empty slot is a `trailing_zeros`, so advancing over empty time is cheap whatever
//! the jump (at most one bitmap probe per level and per visited non-empty slot, never a
//! per-tick loop). When time reaches a coarse slot, its timers are *cascaded* (re-inserted
//! closer to the fine level); each timer cascades at most 8 times in its life.
//!
//! # Precision guarantee (exact)
//! The wheel keeps each timer's exact deadline and checks it when the slot being reached
//! is the current fine slot, so expiry is exact to the nanosecond, not rounded to a slot:
//! - [`TimerWheel::advance`]`(now, ..)` returns every armed token whose deadline is
//!   `<= now`, each exactly once, and disarms it;
//! - it never returns a token whose deadline is `> now`;
//! - hence an armed token is returned by the *first* `advance(now)` call with
//!   `now >= deadline`, never earlier and never later, whatever the granularity of the
//!   level it sits on. A deadline at or before the last `now` (a "past" deadline) fires on
//!   the next `advance`.
//!
//! Time is expected to be monotonic, but the contract above holds even if `advance` is
//! called with a `now` lower than a previous one (the model test steps time back).
//!
//! [`TimerWheel::next_deadline`] returns a lower bound of the earliest deadline (exact for
//! deadlines armed since the last `advance`, otherwise the start of the first non-empty
//! slot). After `advance(now)` it is always `> now`, so a virtual-clock simulation that
//! jumps to it always makes progress (a jump may land on a coarse slot start, cascade, and
//! then see a finer bound; at most one such step per level).

/// log2 of the fine-level granularity in nanoseconds (1024 ns).
pub const TICK_SHIFT: u32 = 10;
/// log2 of the number of slots per level.
const SLOT_BITS: u32 = 6;
const SLOTS: usize = 1 << SLOT_BITS;
/// Number of levels: 9 x 6 bits of ticks = 54 bits = every u64 nanosecond value >> 10.
pub const LEVELS: usize = 9;
const NIL: u32 = u32::MAX;
/// Marker for a node that is not armed.
const UNARMED: u16 = u16::MAX;

/// Node of one token (intrusive, by index); its forward link is kept apart, in
/// `TimerWheel::next`.
#[derive(Clone, Copy, Debug)]
struct Node {
    deadline: u64,
    prev: u32,
    /// `level * 64 + slot`, or [`UNARMED`].
    slot: u16,
}

const EMPTY_NODE: Node = Node {
    deadline: 0,
    prev: NIL,
    slot: UNARMED,
};

/// A hierarchical timer wheel (see the module documentation for the guarantees).
#[derive(Clone, Debug)]
pub struct TimerWheel {
    nodes: Vec<Node>,
    /// Each token's forward link, apart from its node: walking a slot's list (a cascade,
    /// an expiry) follows only these, four bytes a token, so with many tokens the walk
    /// stays in a compact array and each node's deadline is loaded off the walk's
    /// critical path (with the links inside 24-byte nodes, every step of the walk waited
    /// on a cache miss of its own).
    next: Vec<u32>,
    heads: [u32; LEVELS * SLOTS],
    occupied: [u64; LEVELS],
    /// Current tick: every slot starting before it has been processed.
    elapsed: u64,
    /// Highest `now` passed to `advance` (or given to `new`).
    now: u64,
    /// Lower bound of every armed deadline (`u64::MAX` when unknown-and-empty).
    next_bound: u64,
    len: usize,
    /// Slots visited by `advance` (tests check that long jumps stay cheap).
    #[cfg(test)]
    visits: u64,
}

impl TimerWheel {
    /// Memory per token of capacity: its node and its forward link.
    pub const BYTES_PER_TOKEN: usize = std::mem::size_of::<Node>() + std::mem::size_of::<u32>();

    /// A wheel for tokens `0..capacity`, starting at time `now_ns`.
    pub fn new(capacity: usize, now_ns: u64) -> Self {
        assert!(
            capacity <= u32::MAX as usize,
            "timer wheel capacity above u32 range"
        );
        TimerWheel {
            nodes: crate::hugemem::huge_vec(capacity, EMPTY_NODE),
            next: crate::hugemem::huge_vec(capacity, NIL),
            heads: [NIL; LEVELS * SLOTS],
            occupied: [0; LEVELS],
            elapsed: now_ns >> TICK_SHIFT,
            now: now_ns,
            next_bound: u64::MAX,
            len: 0,
            #[cfg(test)]
            visits: 0,
        }
    }

    /// Number of tokens this wheel can hold (`0..capacity`).
    pub fn capacity(&self) -> usize {
        self.nodes.len()
    }

    /// Grows the token range to `0..new_capacity`; never shrinks.
    pub fn grow(&mut self, new_capacity: usize) {
        assert!(
            new_capacity <= u32::MAX as usize,
            "timer wheel capacity above u32 range"
        );
        if new_capacity > self.nodes.len() {
            self.nodes.resize(new_capacity, EMPTY_NODE);
            self.next.resize(new_capacity, NIL);
        }
    }

    /// Arms `token` to fire at `deadline_ns`, replacing any previous deadline of it.
    /// A deadline at or before the last `advance` time fires on the next `advance`.
    ///
    /// Panics if `token >= capacity()` (a caller bug, not an input error).
    #[inline]
    pub fn arm(&mut self, token: u32, deadline_ns: u64) {
        if self.nodes[token as usize].slot != UNARMED {
            self.unlink(token);
            self.len -= 1;
        }
        self.nodes[token as usize].deadline = deadline_ns;
        self.insert(token);
        self.len += 1;
        if deadline_ns < self.next_bound {
            self.next_bound = deadline_ns;
        }
    }

    /// Hints that `token` is about to be armed or cancelled: the lines of its node and
    /// its link are prefetched (never faults; a token past the capacity is ignored). With
    /// many tokens they do not stay in the cache, and a receive burst knows its flows a
    /// few frames before it arms their timers.
    #[inline(always)]
    pub fn prefetch(&self, token: u32) {
        #[cfg(target_arch = "x86_64")]
        if let (Some(n), Some(l)) = (
            self.nodes.get(token as usize),
            self.next.get(token as usize),
        ) {
            // SAFETY: prefetch is a hint that never faults; `n` and `l` are live elements.
            unsafe {
                use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
                _mm_prefetch((n as *const Node).cast::<i8>(), _MM_HINT_T0);
                _mm_prefetch((l as *const u32).cast::<i8>(), _MM_HINT_T0);
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = token;
    }

    /// Disarms `token`; no-op if it is not armed.
    #[inline]
    pub fn cancel(&mut self, token: u32) {
        if let Some(n) = self.nodes.get(token as usize) {
            if n.slot != UNARMED {
                self.unlink(token);
                self.nodes[token as usize].slot = UNARMED;
                self.len -= 1;
            }
        }
    }

    /// Whether `token` is armed.
    #[inline]
    pub fn is_armed(&self, token: u32) -> bool {
        self.nodes
            .get(token as usize)
            .is_some_and(|n| n.slot != UNARMED)
    }

    /// The pending deadline of `token`, if armed.
    #[inline]
    pub fn deadline(&self, token: u32) -> Option<u64> {
        match self.nodes.get(token as usize) {
            Some(n) if n.slot != UNARMED => Some(n.deadline),
            _ => None,
        }
    }

    /// Number of armed timers.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no timer is armed.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The highest time passed to `advance` so far (or the creation time).
    #[inline]
    pub fn now(&self) -> u64 {
        self.now
    }

    /// A lower bound (often exact) of the earliest armed deadline; `None` if none is armed.
    /// After `advance(now)` the value is `> now`.
    #[inline]
    pub fn next_deadline(&self) -> Option<u64> {
        if self.len == 0 {
            None
        } else {
            Some(self.next_bound)
        }
    }

    /// Appends to `expired` every token whose deadline is `<= now_ns` (each once, disarmed)
    /// and never one whose deadline is `> now_ns`.
    pub fn advance(&mut self, now_ns: u64, expired: &mut Vec<u32>) {
        if self.len == 0 {
            if now_ns > self.now {
                self.now = now_ns;
                self.elapsed = now_ns >> TICK_SHIFT;
            }
            self.next_bound = u64::MAX;
            return;
        }
        if now_ns < self.next_bound {
            // Nothing can expire: O(1).
            self.now = self.now.max(now_ns);
            return;
        }
        let now_tick = now_ns >> TICK_SHIFT;
        if now_tick < self.elapsed {
            // Time went back before the wheel position: every due timer was armed with a
            // past deadline, and those sit in the current fine slot.
            let idx = (self.elapsed as usize) & (SLOTS - 1);
            self.scan_partial(idx, now_ns, expired);
            self.recompute_bound();
            return;
        }
        self.now = self.now.max(now_ns);
        while let Some((level, slot, start)) = self.next_slot() {
            if start > now_tick {
                break;
            }
            #[cfg(test)]
            {
                self.visits += 1;
            }
            if level == 0 {
                if start == now_tick {
                    // The current fine slot: fire exactly, keep the rest.
                    self.elapsed = start;
                    self.scan_partial(slot, now_ns, expired);
                    break;
                }
                // Every deadline here is < (start + 1) << TICK_SHIFT <= now_ns.
                self.elapsed = start;
                self.fire_all(slot, expired);
            } else {
                self.elapsed = start;
                self.cascade(level, slot);
            }
        }
        if now_tick > self.elapsed {
            self.elapsed = now_tick;
        }
        self.recompute_bound();
    }

    // ---- internals -------------------------------------------------------------------

    /// Level and slot for a deadline tick relative to `elapsed` (past ticks go to the
    /// current fine slot).
    #[inline]
    fn position(&self, deadline_ns: u64) -> (usize, usize) {
        let tick = (deadline_ns >> TICK_SHIFT).max(self.elapsed);
        let masked = (self.elapsed ^ tick) | (SLOTS as u64 - 1);
        let significant = 63 - masked.leading_zeros();
        let level = (significant / SLOT_BITS) as usize;
        let slot = ((tick >> (level as u32 * SLOT_BITS)) as usize) & (SLOTS - 1);
        (level, slot)
    }

    #[inline]
    fn insert(&mut self, token: u32) {
        let (level, slot) = self.position(self.nodes[token as usize].deadline);
        let idx = level * SLOTS + slot;
        let head = self.heads[idx];
        {
            let n = &mut self.nodes[token as usize];
            n.slot = idx as u16;
            n.prev = NIL;
        }
        self.next[token as usize] = head;
        if head != NIL {
            self.nodes[head as usize].prev = token;
        }
        self.heads[idx] = token;
        self.occupied[level] |= 1u64 << slot;
    }

    /// Removes an armed token from its slot list (leaves `slot` set; callers update it).
    #[inline]
    fn unlink(&mut self, token: u32) {
        let Node { prev, slot, .. } = self.nodes[token as usize];
        let next = self.next[token as usize];
        let idx = slot as usize;
        if prev != NIL {
            self.next[prev as usize] = next;
        } else {
            self.heads[idx] = next;
            if next == NIL {
                self.occupied[idx / SLOTS] &= !(1u64 << (idx % SLOTS));
            }
        }
        if next != NIL {
            self.nodes[next as usize].prev = prev;
        }
    }

    /// First non-empty slot at or after the current position: the lowest level that has
    /// one holds the earliest slot. Returns (level, slot, start tick).
    #[inline]
    fn next_slot(&self) -> Option<(usize, usize, u64)> {
        for level in 0..LEVELS {
            let occ = self.occupied[level];
            if occ == 0 {
                continue;
            }
            let shift = level as u32 * SLOT_BITS;
            let digit = ((self.elapsed >> shift) as usize) & (SLOTS - 1);
            let ahead = occ & (!0u64 << digit);
            debug_assert_eq!(ahead, occ, "timer slot behind the wheel position");
            // Slots behind the position cannot be occupied (see module docs); should one
            // be, treat it as due now rather than lose it.
            let slot = if ahead != 0 {
                ahead.trailing_zeros() as usize
            } else {
                occ.trailing_zeros() as usize
            };
            let period_bits = shift + SLOT_BITS;
            let base = if period_bits >= 64 {
                0
            } else {
                self.elapsed & !((1u64 << period_bits) - 1)
            };
            let start = (base + ((slot as u64) << shift)).max(self.elapsed);
            return Some((level, slot, start));
        }
        None
    }

    /// Detaches the whole list of slot `idx`, returning its head.
    #[inline]
    fn take_slot(&mut self, idx: usize) -> u32 {
        let head = self.heads[idx];
        self.heads[idx] = NIL;
        self.occupied[idx / SLOTS] &= !(1u64 << (idx % SLOTS));
        head
    }

    fn fire_all(&mut self, slot: usize, expired: &mut Vec<u32>) {
        let mut t = self.take_slot(slot);
        while t != NIL {
            let next = self.next[t as usize];
            self.nodes[t as usize].slot = UNARMED;
            self.len -= 1;
            expired.push(t);
            t = next;
        }
    }

    /// Moves the timers of a coarse slot to the finer slots their deadlines name.
    fn cascade(&mut self, level: usize, slot: usize) {
        let mut t = self.take_slot(level * SLOTS + slot);
        while t != NIL {
            let next = self.next[t as usize];
            self.insert(t);
            t = next;
        }
    }

    /// Fires the timers of fine slot `slot` whose deadline is `<= now_ns`; keeps the rest.
    fn scan_partial(&mut self, slot: usize, now_ns: u64, expired: &mut Vec<u32>) {
        let mut t = self.heads[slot];
        while t != NIL {
            let next = self.next[t as usize];
            if self.nodes[t as usize].deadline <= now_ns {
                self.unlink(t);
                self.nodes[t as usize].slot = UNARMED;
                self.len -= 1;
                expired.push(t);
            }
            t = next;
        }
    }

    /// Recomputes `next_bound` after an advance: the start of the first non-empty slot,
    /// or the exact minimum when that slot is the current fine slot.
    fn recompute_bound(&mut self) {
        self.next_bound = match self.next_slot() {
            None => u64::MAX,
            Some((level, slot, start)) => {
                if level == 0 && start == self.elapsed {
                    let mut min = u64::MAX;
                    let mut t = self.heads[slot];
                    while t != NIL {
                        min = min.min(self.nodes[t as usize].deadline);
                        t = self.next[t as usize];
                    }
                    min
                } else {
                    start << TICK_SHIFT
                }
            }
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeMap, BTreeSet};

    /// A small deterministic generator for tests (the workspace's SplitMix64).
    struct Rng(rand_xoshiro::SplitMix64);
    impl Rng {
        fn new(seed: u64) -> Self {
            use rand_core::SeedableRng;
            Rng(rand_xoshiro::SplitMix64::seed_from_u64(seed))
        }
        fn next(&mut self) -> u64 {
            rand_core::Rng::next_u64(&mut self.0)
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
        /// A delta at a random scale: from 0 to about 2^50 ns.
        fn delta(&mut self) -> u64 {
            let bits = self.below(51) as u32;
            if bits == 0 {
                0
            } else {
                self.next() & ((1u64 << bits) - 1)
            }
        }
    }

    fn drain(w: &mut TimerWheel, now: u64) -> Vec<u32> {
        let mut v = Vec::new();
        w.advance(now, &mut v);
        v
    }

    #[test]
    fn per_token_memory_is_20_bytes() {
        // Users (squall-tcp) budget per-flow memory with this figure.
        assert_eq!(TimerWheel::BYTES_PER_TOKEN, 20);
    }

    #[test]
    fn prefetch_is_only_a_hint() {
        let mut w = TimerWheel::new(4, 0);
        w.arm(1, 5_000);
        // Any token, armed, unarmed or past the capacity: nothing changes, nothing panics.
        for t in [0, 1, 3, 4, u32::MAX] {
            w.prefetch(t);
        }
        assert_eq!(w.len(), 1);
        assert_eq!(w.deadline(1), Some(5_000));
        assert_eq!(drain(&mut w, 5_000), vec![1]);
    }

    #[test]
    fn forward_links_grow_with_the_nodes() {
        let mut w = TimerWheel::new(2, 0);
        w.grow(300);
        // Tokens past the first capacity share slots with earlier ones: the lists they
        // make run through the grown link array.
        for t in (0..300u32).rev() {
            w.arm(t, 1_000_000 + u64::from(t % 3));
        }
        w.cancel(150);
        let mut got = drain(&mut w, 2_000_000);
        got.sort_unstable();
        let want: Vec<u32> = (0..300).filter(|&t| t != 150).collect();
        assert_eq!(got, want);
        assert!(w.is_empty());
    }

    #[test]
    fn fires_exactly_at_deadline_not_before() {
        let mut w = TimerWheel::new(4, 0);
        w.arm(1, 5_000);
        assert!(drain(&mut w, 4_999).is_empty());
        assert_eq!(drain(&mut w, 5_000), vec![1]);
        assert!(!w.is_armed(1));
        assert!(w.is_empty());
        assert!(drain(&mut w, 10_000).is_empty());
    }

    #[test]
    fn same_tick_partial_slot() {
        // Deadlines inside one 1024 ns tick fire one by one, exactly.
        let mut w = TimerWheel::new(8, 0);
        w.arm(0, 2048 + 10);
        w.arm(1, 2048 + 500);
        w.arm(2, 2048 + 1000);
        assert!(drain(&mut w, 2048 + 9).is_empty());
        assert_eq!(drain(&mut w, 2048 + 10), vec![0]);
        assert_eq!(w.next_deadline(), Some(2048 + 500));
        assert_eq!(drain(&mut w, 2048 + 999), vec![1]);
        assert_eq!(drain(&mut w, 2048 + 1000), vec![2]);
    }

    #[test]
    fn past_deadline_fires_next_advance() {
        let mut w = TimerWheel::new(4, 0);
        assert!(drain(&mut w, 1_000_000).is_empty());
        w.arm(3, 10);
        w.arm(2, 1_000_000);
        assert_eq!(w.next_deadline(), Some(10));
        let mut got = drain(&mut w, 1_000_000);
        got.sort_unstable();
        assert_eq!(got, vec![2, 3]);
    }

    #[test]
    fn rearm_replaces_deadline() {
        let mut w = TimerWheel::new(4, 0);
        w.arm(0, 1_000_000_000);
        w.arm(0, 2_000);
        assert_eq!(w.len(), 1);
        assert_eq!(w.deadline(0), Some(2_000));
        assert_eq!(drain(&mut w, 2_000), vec![0]);
        w.arm(1, 3_000);
        w.arm(1, 5_000_000_000);
        assert!(drain(&mut w, 1_000_000).is_empty());
        assert_eq!(drain(&mut w, 5_000_000_000), vec![1]);
    }

    #[test]
    fn cancel_and_noop_cancel() {
        let mut w = TimerWheel::new(4, 0);
        w.cancel(2);
        w.cancel(100); // out of range: no-op
        w.arm(2, 7_000);
        w.cancel(2);
        assert!(!w.is_armed(2));
        assert_eq!(w.deadline(2), None);
        assert_eq!(w.len(), 0);
        assert!(drain(&mut w, 1 << 40).is_empty());
    }

    #[test]
    fn long_jump_and_far_deadlines() {
        let mut w = TimerWheel::new(4, 123);
        w.arm(0, u64::MAX);
        w.arm(1, 1 << 62);
        w.arm(2, 3_600_000_000_000); // one hour
        assert!(drain(&mut w, 3_599_999_999_999).is_empty());
        assert_eq!(drain(&mut w, 3_600_000_000_000), vec![2]);
        assert!(drain(&mut w, (1 << 62) - 1).is_empty());
        assert_eq!(drain(&mut w, 1 << 62), vec![1]);
        assert!(drain(&mut w, u64::MAX - 1).is_empty());
        assert_eq!(drain(&mut w, u64::MAX), vec![0]);
    }

    #[test]
    fn long_jumps_visit_few_slots() {
        let hour = 3_600_000_000_000u64;
        let mut w = TimerWheel::new(4, 0);
        w.arm(0, 10 * hour);
        assert!(drain(&mut w, 10 * hour - 1).is_empty());
        assert_eq!(drain(&mut w, 10 * hour), vec![0]);
        // One visit per level at most on the way down, not one per tick.
        assert!(w.visits <= LEVELS as u64 + 1, "visits {}", w.visits);
        // Jumping with nothing due costs nothing.
        let before = w.visits;
        w.arm(1, 100 * hour);
        assert!(drain(&mut w, 50 * hour).is_empty());
        assert!(
            w.visits - before <= LEVELS as u64,
            "visits {}",
            w.visits - before
        );
    }

    #[test]
    fn grow_keeps_armed_timers() {
        let mut w = TimerWheel::new(2, 0);
        w.arm(1, 10_000);
        w.grow(1000);
        w.grow(10); // never shrinks
        assert_eq!(w.capacity(), 1000);
        w.arm(999, 5_000);
        assert_eq!(drain(&mut w, 10_000), vec![999, 1]);
    }

    #[test]
    fn next_deadline_makes_progress_in_virtual_time() {
        // A simulation jumping to next_deadline reaches every deadline in few steps.
        let mut rng = Rng::new(7);
        let mut w = TimerWheel::new(64, 0);
        let mut want = BTreeSet::new();
        for t in 0..64u32 {
            let d = rng.delta();
            w.arm(t, d);
            want.insert((d, t));
        }
        let mut now = 0;
        let mut got = Vec::new();
        let mut steps = 0;
        while let Some(next) = w.next_deadline() {
            assert!(next > now || steps == 0, "bound {next} not after now {now}");
            now = now.max(next);
            let before = got.len();
            w.advance(now, &mut got);
            for &t in &got[before..] {
                let d = want.iter().find(|&&(_, x)| x == t).unwrap().0;
                assert!(d <= now, "token {t} fired early");
                assert!(w.is_empty() || d <= now);
            }
            steps += 1;
            assert!(steps < 64 * (LEVELS + 2), "no progress");
        }
        assert_eq!(got.len(), 64);
    }

    /// Model test: random arm / re-arm / cancel / advance against a BTreeMap reference.
    #[test]
    fn randomized_model() {
        let mut total_fired = 0usize;
        for seed in 0..40u64 {
            let mut rng = Rng::new(seed);
            let cap = 1 + rng.below(300) as usize;
            let start = rng.delta();
            let mut w = TimerWheel::new(cap, start);
            let mut model: BTreeMap<u32, u64> = BTreeMap::new();
            let mut now = start;
            let mut cap_now = cap;
            let mut out = Vec::new();
            let mut fired = 0usize;
            for _ in 0..3000 {
                match rng.below(10) {
                    0..=4 => {
                        let t = rng.below(cap_now as u64) as u32;
                        // Mostly future deadlines at every scale; some in the past.
                        let d = if rng.below(10) == 0 {
                            now.saturating_sub(rng.delta())
                        } else {
                            now.saturating_add(rng.delta())
                        };
                        w.arm(t, d);
                        model.insert(t, d);
                    }
                    5 => {
                        let t = rng.below(cap_now as u64) as u32;
                        w.cancel(t);
                        model.remove(&t);
                    }
                    6 if cap_now < 2000 => {
                        cap_now += rng.below(50) as usize;
                        w.grow(cap_now);
                    }
                    _ => {
                        // Small steps mostly, sometimes huge jumps.
                        now = match rng.below(5) {
                            // Time may step back a little (not expected, but exact anyway).
                            4 => now.saturating_sub(rng.below(4096)),
                            0 => now.saturating_add(rng.below(2048)),
                            1 => now.saturating_add(rng.delta()),
                            2 => match model.values().min() {
                                Some(&d) => now.max(d),
                                None => now,
                            },
                            _ => now.saturating_add(rng.below(1 << 20)),
                        };
                        out.clear();
                        w.advance(now, &mut out);
                        let mut got = out.clone();
                        got.sort_unstable();
                        let before = got.len();
                        got.dedup();
                        assert_eq!(before, got.len(), "seed {seed}: token fired twice");
                        let want: Vec<u32> = model
                            .iter()
                            .filter(|&(_, &d)| d <= now)
                            .map(|(&t, _)| t)
                            .collect();
                        assert_eq!(got, want, "seed {seed} now {now}");
                        for t in &want {
                            model.remove(t);
                        }
                        fired += want.len();
                        if let (Some(nd), Some(&md)) = (w.next_deadline(), model.values().min()) {
                            assert!(nd <= md, "seed {seed}: bound {nd} above min {md}");
                            assert!(nd > now, "seed {seed}: bound {nd} not after now {now}");
                        }
                    }
                }
                assert_eq!(w.len(), model.len(), "seed {seed}");
                for (&t, &d) in model.iter().take(4) {
                    assert_eq!(w.deadline(t), Some(d));
                }
            }
            // Drain everything at the end of time.
            out.clear();
            w.advance(u64::MAX, &mut out);
            out.sort_unstable();
            let want: Vec<u32> = model.keys().copied().collect();
            assert_eq!(out, want, "seed {seed}: final drain");
            total_fired += fired + out.len();
            assert!(w.is_empty());
        }
        assert!(
            total_fired > 10_000,
            "model fired too few timers: {total_fired}"
        );
    }

    /// Dense model test: many timers within ~10 ms, small steps, heavy cascading.
    #[test]
    fn dense_model() {
        let mut rng = Rng::new(99);
        let cap = 5000;
        let mut w = TimerWheel::new(cap, 1 << 33);
        let mut by_token: BTreeMap<u32, u64> = BTreeMap::new();
        let mut by_time: BTreeSet<(u64, u32)> = BTreeSet::new();
        let mut now = 1u64 << 33;
        let mut out = Vec::new();
        let mut fired = 0usize;
        for _ in 0..200_000 {
            if rng.below(3) == 0 {
                now += rng.below(5000);
                out.clear();
                w.advance(now, &mut out);
                out.sort_unstable();
                let mut want = Vec::new();
                while let Some(&(d, t)) = by_time.first() {
                    if d > now {
                        break;
                    }
                    by_time.pop_first();
                    by_token.remove(&t);
                    want.push(t);
                }
                want.sort_unstable();
                assert_eq!(out, want, "now {now}");
                fired += want.len();
            } else {
                let t = rng.below(cap as u64) as u32;
                let d = now + rng.below(10_000_000);
                w.arm(t, d);
                if let Some(old) = by_token.insert(t, d) {
                    by_time.remove(&(old, t));
                }
                by_time.insert((d, t));
            }
        }
        assert!(fired > 10_000, "test fired too few timers: {fired}");
        assert_eq!(w.len(), by_token.len());
    }

    #[test]
    fn backwards_time_fires_nothing_late() {
        let mut w = TimerWheel::new(4, 0);
        assert!(drain(&mut w, 10_000).is_empty());
        w.arm(0, 9_500);
        w.arm(1, 20_000);
        // Time goes back: token 0 (deadline 9_500) must not fire at 9_000.
        assert!(drain(&mut w, 9_000).is_empty());
        assert_eq!(drain(&mut w, 9_500), vec![0]);
        assert_eq!(drain(&mut w, 20_000), vec![1]);
        // Fast-path advances leave the position behind `now`; a past deadline armed then
        // still fires at the first advance that reaches it, even with time going back.
        w.arm(2, 1_000_000);
        assert!(drain(&mut w, 500_000).is_empty());
        w.arm(3, 400_000);
        assert!(drain(&mut w, 399_999).is_empty());
        assert_eq!(drain(&mut w, 450_000), vec![3]);
        assert_eq!(drain(&mut w, 1_000_000), vec![2]);
    }
}
