//! Per-core counters: written by one core without locks or atomic read-modify-writes,
//! summed on request by another thread without locks.
//!
//! A [`CounterRegistry`] maps static names (TRex-style, e.g. `tcps_connattempt`) to
//! [`CounterId`]s and owns one [`CounterBlock`] per core. A block is a cache-line aligned
//! array of `AtomicU64`; its single writer (a [`CounterWriter`], `Send` but not `Sync`
//! and not `Clone`) updates a value with a relaxed load and a relaxed store, which costs
//! what a plain `u64` increment costs. A reader (the control thread) loads the values
//! relaxed and sums blocks by name: it sees each counter at some recent value (counters
//! are monotonic or gauges; a snapshot is not atomic across counters).
//!
//! Registration takes a mutex (setup time only); the data path never does.

use std::cell::Cell;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Index of a counter in every block of a registry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CounterId(pub u16);

/// Errors of counter registration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CounterError {
    /// The registry is full (its capacity was fixed at creation).
    Full(&'static str),
}

impl core::fmt::Display for CounterError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            CounterError::Full(n) => write!(f, "counter registry full, cannot add `{n}`"),
        }
    }
}

impl std::error::Error for CounterError {}

#[repr(align(64))]
#[derive(Default)]
struct Line([AtomicU64; 8]);

/// The counters of one core.
pub struct CounterBlock {
    lines: Box<[Line]>,
    label: String,
}

impl CounterBlock {
    fn new(capacity: usize, label: String) -> Self {
        let lines = (0..capacity.div_ceil(8)).map(|_| Line::default()).collect();
        CounterBlock { lines, label }
    }

    #[inline]
    fn cell(&self, id: CounterId) -> Option<&AtomicU64> {
        let i = id.0 as usize;
        self.lines.get(i / 8).map(|l| &l.0[i % 8])
    }

    /// Current value of a counter in this block (0 for an unknown id).
    pub fn get(&self, id: CounterId) -> u64 {
        self.cell(id).map_or(0, |c| c.load(Ordering::Relaxed))
    }

    /// The block's label (e.g. `core0`).
    pub fn label(&self) -> &str {
        &self.label
    }
}

/// The single writer of a block (one per core). Not `Sync`, not `Clone`.
pub struct CounterWriter {
    block: Arc<CounterBlock>,
    _not_sync: PhantomData<Cell<()>>,
}

impl CounterWriter {
    /// Adds `n` (wrapping). An unknown id is ignored.
    #[inline]
    pub fn add(&self, id: CounterId, n: u64) {
        if let Some(c) = self.block.cell(id) {
            // Single writer: load + store is exact without an atomic RMW.
            c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
        }
    }

    /// Adds one.
    #[inline]
    pub fn inc(&self, id: CounterId) {
        self.add(id, 1)
    }

    /// Sets a gauge.
    #[inline]
    pub fn set(&self, id: CounterId, v: u64) {
        if let Some(c) = self.block.cell(id) {
            c.store(v, Ordering::Relaxed);
        }
    }

    /// Current value in this writer's block.
    #[inline]
    pub fn get(&self, id: CounterId) -> u64 {
        self.block.get(id)
    }
}

struct Inner {
    names: Vec<&'static str>,
    blocks: Vec<Arc<CounterBlock>>,
}

/// Names, ids and the blocks of every core. Clone it freely (shared handle).
#[derive(Clone)]
pub struct CounterRegistry {
    capacity: usize,
    inner: Arc<Mutex<Inner>>,
}

impl CounterRegistry {
    /// A registry for up to `capacity` counter names.
    pub fn new(capacity: usize) -> Self {
        CounterRegistry {
            capacity: capacity.min(u16::MAX as usize),
            inner: Arc::new(Mutex::new(Inner {
                names: Vec::new(),
                blocks: Vec::new(),
            })),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave the lists inconsistent.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The id of `name`, registering it if new (same name, same id).
    pub fn register(&self, name: &'static str) -> Result<CounterId, CounterError> {
        let mut g = self.lock();
        if let Some(i) = g.names.iter().position(|&n| n == name) {
            return Ok(CounterId(i as u16));
        }
        if g.names.len() >= self.capacity {
            return Err(CounterError::Full(name));
        }
        g.names.push(name);
        Ok(CounterId((g.names.len() - 1) as u16))
    }

    /// The id of an already registered name.
    pub fn id(&self, name: &str) -> Option<CounterId> {
        self.lock()
            .names
            .iter()
            .position(|&n| n == name)
            .map(|i| CounterId(i as u16))
    }

    /// A new block (for one core) and its writer.
    pub fn new_writer(&self, label: impl Into<String>) -> CounterWriter {
        let block = Arc::new(CounterBlock::new(self.capacity, label.into()));
        self.lock().blocks.push(block.clone());
        CounterWriter {
            block,
            _not_sync: PhantomData,
        }
    }

    /// Sum of a counter over every block.
    pub fn sum(&self, name: &str) -> u64 {
        let g = self.lock();
        match g.names.iter().position(|&n| n == name) {
            Some(i) => g
                .blocks
                .iter()
                .map(|b| b.get(CounterId(i as u16)))
                .fold(0u64, u64::wrapping_add),
            None => 0,
        }
    }

    /// Every registered counter with its sum over the blocks, in registration order.
    pub fn snapshot(&self) -> Vec<(&'static str, u64)> {
        let g = self.lock();
        g.names
            .iter()
            .enumerate()
            .map(|(i, &n)| {
                let s = g
                    .blocks
                    .iter()
                    .map(|b| b.get(CounterId(i as u16)))
                    .fold(0u64, u64::wrapping_add);
                (n, s)
            })
            .collect()
    }

    /// Per-block values of one counter: `(label, value)`.
    pub fn per_block(&self, name: &str) -> Vec<(String, u64)> {
        let g = self.lock();
        let Some(i) = g.names.iter().position(|&n| n == name) else {
            return Vec::new();
        };
        g.blocks
            .iter()
            .map(|b| (b.label.clone(), b.get(CounterId(i as u16))))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn register_is_idempotent_and_bounded() {
        let r = CounterRegistry::new(2);
        let a = r.register("tcps_connattempt").unwrap();
        assert_eq!(r.register("tcps_connattempt").unwrap(), a);
        let b = r.register("tcps_accepts").unwrap();
        assert_ne!(a, b);
        assert_eq!(r.register("third"), Err(CounterError::Full("third")));
        assert_eq!(r.id("tcps_accepts"), Some(b));
        assert_eq!(r.id("nope"), None);
    }

    #[test]
    fn sums_across_threads_without_locks_on_the_data_path() {
        let r = CounterRegistry::new(64);
        let pkts = r.register("rx_pkts").unwrap();
        let bytes = r.register("rx_bytes").unwrap();
        const N: u64 = 200_000;
        let handles: Vec<_> = (0..3)
            .map(|core| {
                let w = r.new_writer(format!("core{core}"));
                std::thread::spawn(move || {
                    for _ in 0..N {
                        w.inc(pkts);
                        w.add(bytes, 64);
                    }
                    w.get(pkts)
                })
            })
            .collect();
        // Read while they write: values only grow.
        let mut last = 0;
        for _ in 0..100 {
            let s = r.sum("rx_pkts");
            assert!(s >= last);
            last = s;
        }
        for h in handles {
            assert_eq!(h.join().unwrap(), N);
        }
        assert_eq!(r.sum("rx_pkts"), 3 * N);
        assert_eq!(r.sum("rx_bytes"), 3 * N * 64);
        let snap = r.snapshot();
        assert_eq!(snap, vec![("rx_pkts", 3 * N), ("rx_bytes", 3 * N * 64)]);
        let per = r.per_block("rx_pkts");
        assert_eq!(per.len(), 3);
        assert!(per.iter().all(|(_, v)| *v == N));
        assert_eq!(r.sum("unknown"), 0);
    }

    #[test]
    fn late_registration_reaches_existing_blocks() {
        let r = CounterRegistry::new(16);
        let w = r.new_writer("core0");
        let late = r.register("late").unwrap();
        w.set(late, 7);
        assert_eq!(r.sum("late"), 7);
        w.inc(CounterId(1000)); // unknown id: ignored, no panic
    }
}
