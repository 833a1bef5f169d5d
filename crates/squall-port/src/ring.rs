//! Lock-free single-producer single-consumer ring of `Copy` values, built for bursts.
//!
//! The producer writes any number of values with [`Producer::push`] and makes them visible
//! with one release store in [`Producer::publish`]; the consumer reads with
//! [`Consumer::pop`] / [`Consumer::peek`] and hands the slots back with one release store in
//! [`Consumer::publish`]. Each side keeps a private copy of its own index and a cached copy
//! of the other's, so the shared cache lines are touched once per burst, not per value.
//! Head and tail sit on separate 128-byte lines (adjacent-line prefetch) to avoid false
//! sharing.

use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Pads and aligns a value to 128 bytes.
#[repr(align(128))]
#[derive(Debug, Default)]
pub struct CachePadded<T>(pub T);

struct Shared<T> {
    /// Count of values ever published by the producer.
    head: CachePadded<AtomicUsize>,
    /// Count of values ever consumed.
    tail: CachePadded<AtomicUsize>,
    mask: usize,
    slots: Box<[UnsafeCell<MaybeUninit<T>>]>,
}

// SAFETY: a slot is written only by the producer while it is outside [tail, head) and read
// only by the consumer while inside it; the release/acquire pairs on head and tail order
// those accesses. T: Send makes moving the values across threads fine.
unsafe impl<T: Send> Sync for Shared<T> {}
// SAFETY: as above; the buffer is owned by the Arc.
unsafe impl<T: Send> Send for Shared<T> {}

/// Creates a ring of `capacity` slots (rounded up to a power of two, at least 2).
pub fn ring<T: Copy + Send>(capacity: usize) -> (Producer<T>, Consumer<T>) {
    let cap = capacity.max(2).next_power_of_two();
    let slots = (0..cap)
        .map(|_| UnsafeCell::new(MaybeUninit::uninit()))
        .collect::<Vec<_>>()
        .into_boxed_slice();
    let shared = Arc::new(Shared {
        head: CachePadded(AtomicUsize::new(0)),
        tail: CachePadded(AtomicUsize::new(0)),
        mask: cap - 1,
        slots,
    });
    (
        Producer {
            shared: shared.clone(),
            head: 0,
            cached_tail: 0,
            cap,
        },
        Consumer {
            shared,
            tail: 0,
            cached_head: 0,
        },
    )
}

/// The writing end.
pub struct Producer<T> {
    shared: Arc<Shared<T>>,
    /// Local head (values pushed, published or not).
    head: usize,
    cached_tail: usize,
    cap: usize,
}

impl<T: Copy + Send> Producer<T> {
    /// Slots free for `push`, refreshing the consumer's position if needed.
    #[inline]
    pub fn space(&mut self) -> usize {
        let mut free = self.cap - self.head.wrapping_sub(self.cached_tail);
        if free == 0 {
            self.cached_tail = self.shared.tail.0.load(Ordering::Acquire);
            free = self.cap - self.head.wrapping_sub(self.cached_tail);
        }
        free
    }

    /// Slots free, always reading the consumer's position.
    #[inline]
    pub fn space_fresh(&mut self) -> usize {
        self.cached_tail = self.shared.tail.0.load(Ordering::Acquire);
        self.cap - self.head.wrapping_sub(self.cached_tail)
    }

    /// Writes a value (invisible to the consumer until `publish`). Gives it back if full.
    #[inline]
    pub fn push(&mut self, v: T) -> Result<(), T> {
        if self.space() == 0 {
            return Err(v);
        }
        let slot = &self.shared.slots[self.head & self.shared.mask];
        // SAFETY: the slot is outside [tail, head) (space() > 0), so the consumer does not
        // read it, and only this producer writes slots.
        unsafe { (*slot.get()).write(v) };
        self.head = self.head.wrapping_add(1);
        Ok(())
    }

    /// Makes every pushed value visible to the consumer.
    #[inline]
    pub fn publish(&mut self) {
        self.shared.head.0.store(self.head, Ordering::Release);
    }

    /// Capacity of the ring.
    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// Writes one value per item of `src` while slots are known free (call `space_fresh`
    /// first to see every free slot), keeping those for which `make` says `true`: a value
    /// not kept is overwritten by the next one. Returns `(looked at, kept)`; the items
    /// looked at are a prefix of `src`. Branch-free per item, so a burst that may hold a
    /// rare bad item costs no more than one that cannot.
    #[inline]
    pub fn push_filtered<S>(
        &mut self,
        src: &[S],
        mut make: impl FnMut(&S) -> (T, bool),
    ) -> (usize, usize) {
        let room = self.cap - self.head.wrapping_sub(self.cached_tail);
        let n = room.min(src.len());
        let slots = self.shared.slots.as_ptr() as *mut MaybeUninit<T>;
        let mask = self.shared.mask;
        let start = self.head;
        let mut pos = start;
        for s in &src[..n] {
            let (v, keep) = make(s);
            // SAFETY: before item i, pos - start <= i < n <= free slots, so the slot is
            // outside [tail, head) (the consumer does not read it; `&mut self` makes this
            // the only writer) and `pos & mask` < capacity = length of the slot array.
            unsafe { (*slots.add(pos & mask)).write(v) };
            pos = pos.wrapping_add(keep as usize);
        }
        self.head = pos;
        (n, pos.wrapping_sub(start))
    }

    /// A writer over the free slots known now (call `space_fresh` first to see every
    /// free slot): its pushes check one counter and touch no shared state; the values
    /// count as pushed when it is dropped (visible to the consumer at `publish`).
    #[inline]
    pub fn writer(&mut self) -> Writer<'_, T> {
        let room = self.cap - self.head.wrapping_sub(self.cached_tail);
        let head = self.head;
        Writer {
            slots: self.shared.slots.as_ptr() as *mut MaybeUninit<T>,
            mask: self.shared.mask,
            pos: head,
            end: head.wrapping_add(room),
            head: &mut self.head,
        }
    }
}

/// Burst writer of a [`Producer`] (see [`Producer::writer`]).
pub struct Writer<'a, T> {
    /// The producer's local head, updated on drop.
    head: &'a mut usize,
    slots: *mut MaybeUninit<T>,
    mask: usize,
    pos: usize,
    end: usize,
}

impl<T: Copy> Writer<'_, T> {
    /// Writes a value. Gives it back if the slots known free are used up.
    #[inline]
    pub fn push(&mut self, v: T) -> Result<(), T> {
        if self.pos == self.end {
            return Err(v);
        }
        // SAFETY: `pos` is in [head, head + free) of the producer, which borrows mutably:
        // the slot is outside [tail, head) so the consumer does not read it, and
        // `pos & mask` < capacity = length of the slot array.
        unsafe { (*self.slots.add(self.pos & self.mask)).write(v) };
        self.pos = self.pos.wrapping_add(1);
        Ok(())
    }

    /// Writes a value into the next free slot and takes the slot only if `keep` (else the
    /// next write reuses it): lets a burst loop filter without a branch. Returns `false`
    /// (nothing written) if the slots known free are used up.
    #[inline]
    pub fn put(&mut self, v: T, keep: bool) -> bool {
        if self.pos == self.end {
            return false;
        }
        // SAFETY: as in `push`.
        unsafe { (*self.slots.add(self.pos & self.mask)).write(v) };
        self.pos = self.pos.wrapping_add(keep as usize);
        true
    }

    /// Slots still free for `push`.
    #[inline]
    pub fn room(&self) -> usize {
        self.end.wrapping_sub(self.pos)
    }
}

impl<T> Drop for Writer<'_, T> {
    #[inline]
    fn drop(&mut self) {
        *self.head = self.pos;
    }
}

/// The reading end.
pub struct Consumer<T> {
    shared: Arc<Shared<T>>,
    /// Local tail (values popped, handed back or not).
    tail: usize,
    cached_head: usize,
}

impl<T: Copy + Send> Consumer<T> {
    /// Values readable now, refreshing the producer's position if needed.
    #[inline]
    pub fn available(&mut self) -> usize {
        let mut n = self.cached_head.wrapping_sub(self.tail);
        if n == 0 {
            self.cached_head = self.shared.head.0.load(Ordering::Acquire);
            n = self.cached_head.wrapping_sub(self.tail);
        }
        n
    }

    /// The next value without consuming it.
    #[inline]
    pub fn peek(&mut self) -> Option<T> {
        if self.available() == 0 {
            return None;
        }
        let slot = &self.shared.slots[self.tail & self.shared.mask];
        // SAFETY: the slot is inside [tail, head) as published with release by the
        // producer and read after an acquire load, so it is initialised and not written.
        Some(unsafe { (*slot.get()).assume_init() })
    }

    /// The next value without consuming it, reading the producer's position (for `&self`
    /// callers that must not update the cached position).
    #[inline]
    pub fn peek_shared(&self) -> Option<T> {
        let head = self.shared.head.0.load(Ordering::Acquire);
        if head == self.tail {
            return None;
        }
        let slot = &self.shared.slots[self.tail & self.shared.mask];
        // SAFETY: as in `peek`: tail < head as published with release.
        Some(unsafe { (*slot.get()).assume_init() })
    }

    /// Takes the next value (its slot is handed back at `publish`).
    #[inline]
    pub fn pop(&mut self) -> Option<T> {
        let v = self.peek()?;
        self.tail = self.tail.wrapping_add(1);
        Some(v)
    }

    /// Pops up to `max` values while `take` accepts the next one, giving each to `sink`;
    /// returns how many. (Slots go back to the producer at `publish`.)
    #[inline]
    pub fn pop_burst(
        &mut self,
        max: usize,
        mut take: impl FnMut(&T) -> bool,
        mut sink: impl FnMut(T),
    ) -> usize {
        let avail = self.available().min(max);
        let mut n = 0;
        while n < avail {
            let slot = &self.shared.slots[self.tail.wrapping_add(n) & self.shared.mask];
            // SAFETY: tail + n < head as published with release (n < available), so the
            // slot is initialised and the producer does not write it.
            let v = unsafe { (*slot.get()).assume_init() };
            if !take(&v) {
                break;
            }
            sink(v);
            n += 1;
        }
        self.tail = self.tail.wrapping_add(n);
        n
    }

    /// The values readable now, at most `max` (the producer's position is read again if
    /// fewer than `max` are known), as two slices in ring order (the second is the part
    /// that wrapped around). Nothing is consumed: call `consume` with how many were used.
    #[inline]
    pub fn readable(&mut self, max: usize) -> (&[T], &[T]) {
        let mut n = self.cached_head.wrapping_sub(self.tail);
        if n < max {
            self.cached_head = self.shared.head.0.load(Ordering::Acquire);
            n = self.cached_head.wrapping_sub(self.tail);
        }
        let n = n.min(max);
        let cap = self.shared.mask + 1;
        let start = self.tail & self.shared.mask;
        let first = n.min(cap - start);
        let base = self.shared.slots.as_ptr() as *const T;
        // SAFETY: [tail, tail + n) is inside [tail, head) as published with release and
        // read after an acquire load, so those slots are initialised and the producer
        // does not write them until the consumer publishes a tail past them, which needs
        // `&mut self` (the slices borrow `self`). `UnsafeCell<MaybeUninit<T>>` has the
        // layout of `T`; start + first <= cap and n - first <= start keep both slices in
        // the slot array.
        unsafe {
            (
                std::slice::from_raw_parts(base.add(start), first),
                std::slice::from_raw_parts(base, n - first),
            )
        }
    }

    /// Consumes `n` values seen with `readable` (at most as many as it gave); their slots
    /// go back to the producer at `publish`.
    #[inline]
    pub fn consume(&mut self, n: usize) {
        let n = n.min(self.cached_head.wrapping_sub(self.tail));
        self.tail = self.tail.wrapping_add(n);
    }

    /// Hands the slots of popped values back to the producer.
    #[inline]
    pub fn publish(&mut self) {
        self.shared.tail.0.store(self.tail, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_and_capacity() {
        let (mut p, mut c) = ring::<u32>(5);
        assert_eq!(p.capacity(), 8);
        for i in 0..8 {
            p.push(i).unwrap();
        }
        assert_eq!(p.push(99), Err(99));
        assert_eq!(c.pop(), None, "nothing visible before publish");
        p.publish();
        for i in 0..8 {
            assert_eq!(c.pop(), Some(i));
        }
        assert_eq!(c.pop(), None);
        assert_eq!(p.push(1), Err(1), "slots not handed back yet");
        c.publish();
        assert_eq!(p.push(1), Ok(()));
    }

    #[test]
    fn pop_burst_stops_at_max_and_predicate() {
        let (mut p, mut c) = ring::<u32>(16);
        for i in 0..10 {
            p.push(i).unwrap();
        }
        p.publish();
        let mut got = Vec::new();
        assert_eq!(c.pop_burst(3, |_| true, |v| got.push(v)), 3);
        assert_eq!(c.pop_burst(100, |&v| v < 6, |v| got.push(v)), 3);
        assert_eq!(got, vec![0, 1, 2, 3, 4, 5]);
        assert_eq!(c.pop(), Some(6));
        c.publish();
        assert_eq!(c.pop_burst(100, |_| true, |_| {}), 3);
        assert_eq!(c.pop_burst(100, |_| true, |_| {}), 0);
    }

    #[test]
    fn writer_stops_at_free_slots_and_counts_on_drop() {
        let (mut p, mut c) = ring::<u32>(4);
        p.push(100).unwrap();
        {
            let mut w = p.writer();
            assert_eq!(w.room(), 3);
            for i in 0..3 {
                w.push(i).unwrap();
            }
            assert_eq!(w.push(9), Err(9));
            assert_eq!(w.room(), 0);
        }
        assert_eq!(p.space(), 0);
        p.publish();
        assert!(!p.writer().put(5, true), "no room: nothing written");
        let mut got = Vec::new();
        while let Some(v) = c.pop() {
            got.push(v);
        }
        assert_eq!(got, vec![100, 0, 1, 2]);
        c.publish();
        assert_eq!(p.writer().room(), 0, "writer uses the cached tail");
        assert_eq!(p.space_fresh(), 4);
        assert_eq!(p.writer().room(), 4);
        {
            let mut w = p.writer();
            assert!(w.put(7, false));
            assert!(w.put(8, true));
            assert!(w.put(9, false));
            assert_eq!(w.room(), 3);
        }
        p.publish();
        assert_eq!((c.pop(), c.pop()), (Some(8), None));
    }

    #[test]
    fn push_filtered_keeps_chosen_values_and_stops_at_room() {
        let (mut p, mut c) = ring::<u32>(4);
        // Odd items are not kept; the free slots (4) bound the items looked at.
        let src: Vec<u32> = (0..10).collect();
        assert_eq!(p.push_filtered(&src[..3], |&v| (v, v % 2 == 0)), (3, 2));
        assert_eq!(p.space(), 2);
        assert_eq!(p.push_filtered(&src[3..], |&v| (v * 10, true)), (2, 2));
        assert_eq!(p.push_filtered(&src, |&v| (v, true)), (0, 0));
        p.publish();
        let mut got = Vec::new();
        while let Some(v) = c.pop() {
            got.push(v);
        }
        assert_eq!(got, vec![0, 2, 30, 40]);
        c.publish();
        // Wraps around the end of the slot array.
        assert_eq!(p.space_fresh(), 4);
        assert_eq!(p.push_filtered(&src[5..8], |&v| (v, v != 6)), (3, 2));
        p.publish();
        assert_eq!((c.pop(), c.pop(), c.pop()), (Some(5), Some(7), None));
    }

    #[test]
    fn readable_wraps_into_two_slices_and_consume_advances() {
        let (mut p, mut c) = ring::<u32>(8);
        for i in 0..6 {
            p.push(i).unwrap();
        }
        p.publish();
        c.consume(0);
        assert_eq!(c.readable(4), (&[0, 1, 2, 3][..], &[][..]));
        c.consume(5);
        c.publish();
        for i in 6..12 {
            p.push(i).unwrap();
        }
        p.publish();
        // tail = 5: slots 5, 6, 7 then 0..4 after the wrap.
        let (a, b) = c.readable(usize::MAX);
        assert_eq!((a, b), (&[5, 6, 7][..], &[8, 9, 10, 11][..]));
        c.consume(100);
        assert_eq!(c.readable(usize::MAX), (&[][..], &[][..]));
        c.publish();
        assert_eq!(p.space_fresh(), 8);
    }

    #[test]
    fn cross_thread_order() {
        let (mut p, mut c) = ring::<u64>(64);
        const N: u64 = 200_000;
        let t = std::thread::spawn(move || {
            let mut i = 0;
            while i < N {
                while i < N && p.push(i).is_ok() {
                    i += 1;
                }
                p.publish();
                std::hint::spin_loop();
            }
        });
        let mut want = 0;
        while want < N {
            while let Some(v) = c.pop() {
                assert_eq!(v, want);
                want += 1;
            }
            c.publish();
        }
        t.join().unwrap();
    }
}
