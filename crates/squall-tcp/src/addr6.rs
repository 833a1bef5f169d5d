//! The host's IPv6 address table: IPv6 flows keep the same 12-byte [`FlowKey`] as IPv4
//! flows (so IPv4 flows pay nothing for IPv6), with a small id in place of each address.
//! Ids are below 2^24 (0.0.0.0/8 read as IPv4, which the host never accepts as an IPv4
//! address), so an IPv6 key can never equal an IPv4 one. Each id is counted by the flows
//! that use it and reused once none does.
//!
//! [`FlowKey`]: crate::FlowKey

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Ids are below this (0.0.0.0/8); id 0 is never handed out.
pub const ID_LIMIT: u32 = 1 << 24;

/// True if a key address is an IPv6 id (in 0.0.0.0/8).
#[inline(always)]
pub fn is_id(a: u32) -> bool {
    a < ID_LIMIT
}

/// A multiply-xorshift hasher for the u128 addresses (the table is looked up on every
/// received IPv6 segment; SipHash would cost more than the rest of the lookup). The
/// addresses are the peers' own, but an attacker gains nothing from collisions here that
/// the bounded table does not already limit.
#[derive(Default)]
pub struct AddrHasher(u64);

impl Hasher for AddrHasher {
    fn finish(&self) -> u64 {
        let mut h = self.0;
        h ^= h >> 29;
        h = h.wrapping_mul(0xBF58_476D_1CE4_E5B9);
        h ^ (h >> 32)
    }
    fn write(&mut self, bytes: &[u8]) {
        for c in bytes.chunks(8) {
            let mut b = [0u8; 8];
            b[..c.len()].copy_from_slice(c);
            self.write_u64(u64::from_ne_bytes(b));
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0 ^ v)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .rotate_left(31);
    }
    fn write_u128(&mut self, v: u128) {
        self.write_u64(v as u64);
        self.write_u64((v >> 64) as u64);
    }
}

/// Entries of the direct-mapped cache in front of the map.
const CACHE: usize = 256;

/// IPv6 address <-> id, with per-id flow counts (the TCP host's, and the node's UDP
/// layer's for its flows). A small direct-mapped cache of recent ids answers most
/// lookups of the receive path without the map.
pub struct Addr6Table {
    ids: HashMap<u128, u32, BuildHasherDefault<AddrHasher>>,
    /// Index = id: the address and the number of flows using it.
    addrs: Vec<([u8; 16], u32)>,
    free: Vec<u32>,
    /// Recent ids by a hash of their address; checked against `addrs` on use.
    cache: Box<[u32; CACHE]>,
    /// Ids freed so far: while it stays the same, every id keeps its address (the
    /// receive burst's prefetch pass reads ids that its frames then use unchecked).
    frees: u64,
}

impl Default for Addr6Table {
    fn default() -> Self {
        Addr6Table {
            ids: HashMap::default(),
            addrs: Vec::new(),
            free: Vec::new(),
            cache: Box::new([0; CACHE]),
            frees: 0,
        }
    }
}

#[inline(always)]
fn cache_slot(a: &[u8; 16]) -> usize {
    let w = u128::from_ne_bytes(*a);
    let x = (w as u64) ^ ((w >> 64) as u64);
    (x.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as usize
}

impl Addr6Table {
    /// Whether `id` is in use (counted by a flow) for address `a`.
    #[inline]
    pub fn holds(&self, id: u32, a: &[u8; 16]) -> bool {
        self.addrs
            .get(id as usize)
            .is_some_and(|e| e.0 == *a && e.1 > 0)
    }

    /// The id of `a` if it has one, without giving one (the prefetch pass of a burst):
    /// the cache, then the map (whose answer goes into the cache).
    #[inline(always)]
    pub fn peek(&mut self, a: &[u8; 16]) -> Option<u32> {
        let slot = cache_slot(a);
        let c = self.cache[slot];
        if c != 0
            && self
                .addrs
                .get(c as usize)
                .is_some_and(|e| e.0 == *a && e.1 > 0)
        {
            return Some(c);
        }
        let id = self.get(a)?;
        self.cache[slot] = id;
        Some(id)
    }

    /// How many ids were freed so far: ids read while it had the same value still stand
    /// for the same addresses.
    #[inline(always)]
    pub fn frees(&self) -> u64 {
        self.frees
    }

    /// The id of `a` and whether it was just given (no flow counted yet: pair a new id
    /// with [`retain`](Self::retain) or [`release_unused`](Self::release_unused)). None
    /// when every id is taken. The receive path's lookup: the cache first.
    #[inline]
    pub fn lookup(&mut self, a: &[u8; 16]) -> Option<(u32, bool)> {
        let slot = cache_slot(a);
        let c = self.cache[slot];
        if c != 0
            && self
                .addrs
                .get(c as usize)
                .is_some_and(|e| e.0 == *a && e.1 > 0)
        {
            return Some((c, false));
        }
        let fresh = self.get(a).is_none();
        let id = self.intern(a)?;
        self.cache[slot] = id;
        Some((id, fresh))
    }

    /// The id of `a`, if it has one.
    #[inline]
    pub fn get(&self, a: &[u8; 16]) -> Option<u32> {
        self.ids.get(&u128::from_be_bytes(*a)).copied()
    }

    /// The id of `a`, given one if it has none (with no flow counted yet: pair with
    /// [`retain`](Self::retain) or [`release_unused`](Self::release_unused)). None when
    /// every id is taken.
    pub fn intern(&mut self, a: &[u8; 16]) -> Option<u32> {
        let k = u128::from_be_bytes(*a);
        if let Some(&id) = self.ids.get(&k) {
            return Some(id);
        }
        let id = match self.free.pop() {
            Some(id) => {
                self.addrs[id as usize] = (*a, 0);
                id
            }
            None => {
                if self.addrs.is_empty() {
                    self.addrs.push(([0; 16], u32::MAX)); // id 0: never used
                }
                let id = self.addrs.len() as u32;
                if id >= ID_LIMIT {
                    return None;
                }
                self.addrs.push((*a, 0));
                id
            }
        };
        self.ids.insert(k, id);
        self.cache[cache_slot(a)] = id;
        Some(id)
    }

    /// The address of `id` (unspecified for an unknown id).
    #[inline]
    pub fn addr(&self, id: u32) -> &[u8; 16] {
        self.addrs.get(id as usize).map_or(&[0; 16], |e| &e.0)
    }

    /// One more flow uses `id`.
    #[inline]
    pub fn retain(&mut self, id: u32) {
        if let Some(e) = self.addrs.get_mut(id as usize) {
            e.1 += 1;
        }
    }

    /// One flow fewer uses `id`; the id is freed when none does.
    #[inline]
    pub fn release(&mut self, id: u32) {
        if let Some(e) = self.addrs.get_mut(id as usize) {
            e.1 = e.1.saturating_sub(1);
        }
        self.release_unused(id);
    }

    /// Frees `id` if no flow uses it (after an [`intern`](Self::intern) that did not
    /// lead to a flow).
    #[inline]
    pub fn release_unused(&mut self, id: u32) {
        if let Some(&(a, 0)) = self.addrs.get(id as usize) {
            if id != 0 && self.ids.remove(&u128::from_be_bytes(a)).is_some() {
                self.free.push(id);
                self.frees += 1;
            }
        }
    }

    /// Addresses with an id.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// True when no address has an id.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Bytes held (for memory accounting): the map's entries and the id vector.
    pub fn memory_bytes(&self) -> usize {
        self.ids.capacity() * (16 + 4 + 8) + self.addrs.capacity() * 20 + self.free.capacity() * 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(i: u8) -> [u8; 16] {
        let mut x = [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        x[15] = i;
        x
    }

    #[test]
    fn ids_are_counted_and_reused() {
        let mut t = Addr6Table::default();
        let x = t.intern(&a(1)).unwrap();
        assert!(x > 0 && is_id(x));
        assert_eq!(t.intern(&a(1)), Some(x));
        assert_eq!(t.get(&a(1)), Some(x));
        assert_eq!(t.addr(x), &a(1));
        t.retain(x);
        t.retain(x);
        t.release_unused(x);
        assert_eq!(t.get(&a(1)), Some(x), "still used");
        t.release(x);
        assert_eq!(t.get(&a(1)), Some(x));
        t.release(x);
        assert_eq!(t.get(&a(1)), None, "freed with its last flow");
        let y = t.intern(&a(2)).unwrap();
        assert_eq!(y, x, "the id is reused");
        t.release_unused(y);
        assert!(t.is_empty());
        // the cached lookup: new ids say so, counted ones come from the cache, a freed
        // and reused id is never taken for its old address
        let (p, new) = t.lookup(&a(3)).unwrap();
        assert!(new);
        t.retain(p);
        assert_eq!(t.lookup(&a(3)), Some((p, false)));
        t.release(p);
        let (q, new) = t.lookup(&a(4)).unwrap();
        assert!(new);
        assert_eq!(q, p, "reused");
        t.retain(q);
        assert_eq!(t.lookup(&a(3)).map(|x| x.1), Some(true), "a(3) lost its id");
        assert_ne!(t.get(&a(3)), Some(q));
        assert_eq!(t.addr(12345), &[0; 16]);
        // peek: ids of the map come into the cache; frees are counted
        let f = t.frees();
        let r = t.intern(&a(5)).unwrap();
        t.retain(r);
        t.cache.fill(0);
        assert_eq!(t.peek(&a(5)), Some(r));
        assert_eq!(t.cache[cache_slot(&a(5))], r, "cached by peek");
        assert_eq!(t.peek(&a(6)), None);
        assert_eq!(t.frees(), f);
        t.release(r);
        assert_eq!(t.frees(), f + 1);
        assert_eq!(t.peek(&a(5)), None, "freed");
    }
}
