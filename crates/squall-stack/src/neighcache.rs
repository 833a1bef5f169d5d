//! The neighbour cache both address families keep (ARP's IPv4 entries, neighbour
//! discovery's IPv6 ones): entries by address, the addresses being resolved, and the
//! bound on what other hosts can make it hold.

use std::collections::HashMap;
use std::hash::Hash;

/// Most entries a cache holds (Linux's `gc_thresh3` default). Every host on the link
/// can make a node learn its address (an ARP request or a neighbour solicitation for
/// one of ours, RFC 826's merge, RFC 4861 §7.2.3): without a bound a flood of them from
/// made-up addresses grows the cache without end. At the bound a new entry is made
/// only for an address the node itself resolves (its next hop, a router it follows),
/// in the place of one it did not ask for; other hosts' go unlearned (counted).
pub const MAX_NEIGHBOURS: usize = 1024;

/// One neighbour entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) mac: [u8; 6],
    /// Configured, never replaced by what the link says.
    pub(crate) fixed: bool,
    /// Resolved by this node (or another worker of its port): never given up for
    /// another host's entry.
    pub(crate) asked: bool,
}

/// What [`NeighCache::learn`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Learn {
    /// A new entry, or a known one's MAC set again.
    Taken,
    /// A configured entry: left as it is.
    Fixed,
    /// The cache is full and no one asked for this address: not learned.
    Full,
}

/// Neighbour entries by address `K`, and the addresses being resolved.
#[derive(Debug)]
pub(crate) struct NeighCache<K> {
    map: HashMap<K, Entry>,
    /// Addresses being resolved: learned from whatever message names them.
    wanted: Vec<K>,
}

impl<K> Default for NeighCache<K> {
    fn default() -> Self {
        NeighCache {
            map: HashMap::new(),
            wanted: Vec::new(),
        }
    }
}

impl<K: Copy + Eq + Hash> NeighCache<K> {
    pub(crate) fn get(&self, k: &K) -> Option<&Entry> {
        self.map.get(k)
    }

    pub(crate) fn contains(&self, k: &K) -> bool {
        self.map.contains_key(k)
    }

    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    /// A configured entry (also above the bound: the operator's entries are few).
    pub(crate) fn fix(&mut self, k: K, mac: [u8; 6]) {
        let e = Entry {
            mac,
            fixed: true,
            asked: true,
        };
        self.map.insert(k, e);
    }

    /// Marks a known `k` as a neighbour the node chose (its next hop, found in the cache
    /// where another host's message put it): never given up for another's entry.
    pub(crate) fn ask(&mut self, k: &K) {
        if let Some(e) = self.map.get_mut(k) {
            e.asked = true;
        }
    }

    /// Marks `k` as being resolved.
    pub(crate) fn want(&mut self, k: K) {
        if !self.wanted.contains(&k) {
            self.wanted.push(k);
        }
    }

    pub(crate) fn is_wanted(&self, k: &K) -> bool {
        self.wanted.contains(k)
    }

    /// Learns `k` at `mac`; `asked`: the node chose this neighbour (else it counts as
    /// asked only while being resolved, [`want`](Self::want)).
    pub(crate) fn learn(&mut self, k: K, mac: [u8; 6], asked: bool) -> Learn {
        let asked = asked || self.wanted.contains(&k);
        self.wanted.retain(|w| *w != k);
        match self.map.get_mut(&k) {
            Some(e) if e.fixed => return Learn::Fixed,
            Some(e) => {
                e.mac = mac;
                e.asked |= asked;
                return Learn::Taken;
            }
            None => {}
        }
        if self.map.len() >= MAX_NEIGHBOURS {
            if !asked {
                return Learn::Full;
            }
            // (the node's own resolutions are few: a scan is rare)
            let spare = self.map.iter().find(|(_, e)| !e.fixed && !e.asked);
            if let Some(v) = spare.map(|(v, _)| *v) {
                self.map.remove(&v);
            }
        }
        let fixed = false;
        self.map.insert(k, Entry { mac, fixed, asked });
        Learn::Taken
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const M: [u8; 6] = [2, 0, 0, 0, 0, 1];

    #[test]
    fn other_hosts_fill_it_to_the_bound_and_the_nodes_own_still_get_in() {
        let mut c = NeighCache::<u32>::default();
        c.fix(1, M);
        c.learn(2, M, true);
        c.want(3);
        for k in 10..10 + 2 * MAX_NEIGHBOURS as u32 {
            c.learn(k, M, false);
        }
        assert_eq!(c.len(), MAX_NEIGHBOURS);
        assert_eq!(c.learn(5_000_000, M, false), Learn::Full);
        // A resolution of the node's own takes another host's place.
        assert_eq!(c.learn(3, [2, 0, 0, 0, 0, 3], false), Learn::Taken);
        assert_eq!(c.len(), MAX_NEIGHBOURS);
        assert!(c.get(&3).is_some_and(|e| e.asked) && !c.is_wanted(&3));
        // The configured and the asked entries stay; a known host is updated.
        assert!(c.contains(&1) && c.contains(&2));
        assert_eq!(c.learn(1, [2, 0, 0, 0, 0, 9], false), Learn::Fixed);
        assert_eq!(c.get(&1).map(|e| e.mac), Some(M));
        let known = (10..).find(|k| c.contains(k)).unwrap();
        assert_eq!(c.learn(known, [2, 0, 0, 0, 0, 7], false), Learn::Taken);
        assert_eq!(c.get(&known).map(|e| e.mac), Some([2, 0, 0, 0, 0, 7]));
    }

    /// The next hop's entry learned first from its own message (not asked), then taken as
    /// the next hop (`ask`): a flood of other hosts never gives it up.
    #[test]
    fn an_entry_asked_for_later_is_kept() {
        let mut c = NeighCache::<u32>::default();
        c.learn(7, M, false);
        c.ask(&7);
        for k in 100..100 + 2 * MAX_NEIGHBOURS as u32 {
            c.learn(k, M, false);
        }
        for k in 10_000..10_000 + MAX_NEIGHBOURS as u32 {
            c.learn(k, M, true);
        }
        assert!(c.get(&7).is_some_and(|e| e.asked));
    }

    #[test]
    fn a_full_cache_of_asked_entries_still_takes_the_nodes_own() {
        let mut c = NeighCache::<u32>::default();
        for k in 0..MAX_NEIGHBOURS as u32 {
            c.learn(k, M, true);
        }
        assert_eq!(c.learn(99_999, M, true), Learn::Taken);
        assert_eq!(c.len(), MAX_NEIGHBOURS + 1);
        assert_eq!(c.learn(100_000, M, false), Learn::Full);
    }
}
