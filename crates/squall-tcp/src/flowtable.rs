//! Flow table: open addressing (linear probing, backward-shift deletion, no tombstones)
//! keyed by the 4-tuple; values are u32 indices into the host's preallocated flow slab.
//! One 16-byte slot per entry; the table is sized to at most 50 % load.

/// The 4-tuple, from the local host's point of view. For an IPv6 flow the two addresses
/// are ids of the host's IPv6 address table (below 2^24, see [`FlowKey::is_ipv6`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[repr(C)]
pub struct FlowKey {
    pub local_ip: u32,
    pub remote_ip: u32,
    pub local_port: u16,
    pub remote_port: u16,
}

impl FlowKey {
    /// True for an IPv6 flow (its addresses are address-table ids in 0.0.0.0/8, which no
    /// IPv4 flow may use).
    #[inline(always)]
    pub fn is_ipv6(&self) -> bool {
        crate::addr6::is_id(self.local_ip)
    }
    /// Fast keyed hash of the 4-tuple (multiply-xorshift), computed once per packet.
    #[inline(always)]
    pub fn hash(&self, seed: u64) -> u64 {
        let a = ((self.local_ip as u64) << 32 | self.remote_ip as u64) ^ seed;
        let b = ((self.local_port as u64) << 16 | self.remote_port as u64) ^ seed.rotate_left(29);
        let mut h = a.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ b.wrapping_mul(0xC2B2_AE3D_27D4_EB4F);
        h ^= h >> 29;
        h = h.wrapping_mul(0xBF58_476D_1CE4_E5B9);
        h ^ (h >> 32)
    }
}

const EMPTY: u32 = u32::MAX;

#[derive(Clone, Copy)]
#[repr(C)]
struct Slot {
    key: FlowKey,
    idx: u32,
}

/// Open-addressing 4-tuple -> flow index map with a fixed capacity.
pub struct FlowTable {
    slots: Vec<Slot>,
    mask: usize,
    len: usize,
    max_len: usize,
    seed: u64,
}

/// The table holds its maximum number of entries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableFull;

impl FlowTable {
    /// A table for up to `max_entries` flows (2x slots, power of two).
    pub fn new(max_entries: usize, seed: u64) -> Self {
        let n = (max_entries.max(4) * 2).next_power_of_two();
        FlowTable {
            slots: squall_engine::hugemem::huge_vec(
                n,
                Slot {
                    key: FlowKey::default(),
                    idx: EMPTY,
                },
            ),
            mask: n - 1,
            len: 0,
            max_len: max_entries.max(4),
            seed,
        }
    }
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.len
    }
    /// Bytes per slot (for memory accounting).
    pub const SLOT_BYTES: usize = std::mem::size_of::<Slot>();
    /// Slots allocated.
    pub fn slots(&self) -> usize {
        self.slots.len()
    }
    #[inline(always)]
    pub fn hash(&self, k: &FlowKey) -> u64 {
        k.hash(self.seed)
    }

    /// Prefetches the slot where a key with hash `h` starts probing.
    #[inline(always)]
    pub fn prefetch(&self, h: u64) {
        #[cfg(target_arch = "x86_64")]
        {
            let p = &self.slots[h as usize & self.mask] as *const Slot as *const i8;
            // SAFETY: prefetch is a hint that never faults; `p` points into `self.slots`.
            #[allow(unused_unsafe)]
            unsafe {
                std::arch::x86_64::_mm_prefetch(p, std::arch::x86_64::_MM_HINT_T0);
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = h;
    }

    /// Looks up `k` whose hash is `h` (inlined in both families' receive paths).
    #[inline(always)]
    pub fn find(&self, k: &FlowKey, h: u64) -> Option<u32> {
        let mut i = h as usize & self.mask;
        loop {
            let s = &self.slots[i];
            if s.idx == EMPTY {
                return None;
            }
            if s.key == *k {
                return Some(s.idx);
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Inserts `k -> idx` (the caller ensures `k` is absent).
    pub fn insert(&mut self, k: FlowKey, h: u64, idx: u32) -> Result<(), TableFull> {
        if self.len >= self.max_len {
            return Err(TableFull);
        }
        let mut i = h as usize & self.mask;
        while self.slots[i].idx != EMPTY {
            i = (i + 1) & self.mask;
        }
        self.slots[i] = Slot { key: k, idx };
        self.len += 1;
        Ok(())
    }

    /// Removes `k`; returns its index.
    pub fn remove(&mut self, k: &FlowKey, h: u64) -> Option<u32> {
        let mut i = h as usize & self.mask;
        loop {
            let s = self.slots[i];
            if s.idx == EMPTY {
                return None;
            }
            if s.key == *k {
                break;
            }
            i = (i + 1) & self.mask;
        }
        let removed = self.slots[i].idx;
        // Backward-shift deletion.
        let mut hole = i;
        let mut j = (i + 1) & self.mask;
        loop {
            let s = self.slots[j];
            if s.idx == EMPTY {
                break;
            }
            let home = self.hash(&s.key) as usize & self.mask;
            // Move s into the hole if its home is not in (hole, j] cyclically.
            let dist_home = j.wrapping_sub(home) & self.mask;
            let dist_hole = j.wrapping_sub(hole) & self.mask;
            if dist_home >= dist_hole {
                self.slots[hole] = s;
                hole = j;
            }
            j = (j + 1) & self.mask;
        }
        self.slots[hole].idx = EMPTY;
        self.len -= 1;
        Some(removed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(i: u32) -> FlowKey {
        FlowKey {
            local_ip: 0x3000_0001,
            remote_ip: 0x1000_0000 + (i % 200),
            local_port: 80,
            remote_port: (1024 + i / 200) as u16,
        }
    }

    #[test]
    fn insert_find_remove_many() {
        let mut t = FlowTable::new(10_000, 7);
        for i in 0..10_000 {
            let k = key(i);
            t.insert(k, t.hash(&k), i).unwrap();
        }
        assert_eq!(t.insert(key(99_999), 1, 1), Err(TableFull));
        for i in 0..10_000 {
            let k = key(i);
            assert_eq!(t.find(&k, t.hash(&k)), Some(i));
        }
        for i in (0..10_000).step_by(2) {
            let k = key(i);
            assert_eq!(t.remove(&k, t.hash(&k)), Some(i));
        }
        for i in 0..10_000 {
            let k = key(i);
            let want = if i % 2 == 0 { None } else { Some(i) };
            assert_eq!(t.find(&k, t.hash(&k)), want, "key {i}");
        }
        assert_eq!(t.len(), 5_000);
    }

    #[test]
    fn slot_is_16_bytes() {
        assert_eq!(FlowTable::SLOT_BYTES, 16);
    }
}
