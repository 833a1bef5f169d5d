//! IP reassembly: the fragments of IPv4 (RFC 791, RFC 815) and IPv6 (RFC 8200 §4.5)
//! datagrams addressed to the node, kept per datagram within limits (datagrams at once,
//! bytes held, time), and rebuilt into one whole frame (Ethernet and IP headers of the
//! first fragment, the fragment fields cleared or the IPv6 fragment header removed) that
//! the node then receives as any other frame. A fragment overlapping another (but an exact
//! duplicate, ignored) drops its datagram (RFC 5722; Linux does the same for IPv4); a
//! datagram not complete in time is dropped. Fragments are rare and this is the cold path:
//! a hash map of datagrams, each fragment's bytes kept as they came (what is held is what
//! was received, each fragment charged a little more for its keeping) and copied once
//! into the whole frame. The whole frame takes the first fragment's headers, whose
//! length may differ from the others' (IPv4 options copied into the first only, IPv6
//! extension headers).

use std::collections::HashMap;

use squall_wire::checksum;

use crate::neigh::ETH_HLEN;

const IP6_LEN: usize = 40;
/// IPv6's fragment header is eight bytes.
const FRAG6_LEN: usize = 8;
/// Most bytes of an IP packet (IPv4 total length, IPv6 payload length).
const MAX_IP: usize = 65_535;
/// What keeping one fragment costs beyond its bytes, charged to the bytes limit (so that
/// a flood of tiny fragments runs into it too).
const PIECE_COST: usize = 64;
/// Most first fragments of timed-out datagrams kept for their ICMP errors between two
/// turns (the error budget sends fewer).
const MAX_EXPIRED: usize = 64;

/// Limits of the reassembly of one node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReasmConfig {
    /// Datagrams in reassembly at once; a fragment of another is dropped (`no_room`).
    pub max_datagrams: usize,
    /// Bytes held by datagrams in reassembly; a fragment beyond it is dropped (`no_room`).
    pub max_bytes: usize,
    /// How long an IPv4 datagram may take to arrive whole (Linux's `ipfrag_time`: 30 s).
    pub timeout4_ns: u64,
    /// How long an IPv6 datagram may take (RFC 8200 §4.5: 60 s).
    pub timeout6_ns: u64,
}

impl Default for ReasmConfig {
    fn default() -> Self {
        ReasmConfig {
            max_datagrams: 1024,
            // Linux's ipfrag_high_thresh
            max_bytes: 4 << 20,
            timeout4_ns: 30_000_000_000,
            timeout6_ns: 60_000_000_000,
        }
    }
}

/// Reassembly counters of a node (both families).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReasmStats {
    /// Fragments received for the node.
    pub fragments: u64,
    /// Datagrams rebuilt whole (and received).
    pub reassembled: u64,
    /// Datagrams dropped incomplete at their timeout.
    pub timed_out: u64,
    /// Datagrams dropped for a fragment overlapping another (RFC 5722).
    pub overlaps: u64,
    /// Fragments refused as malformed: a non-last fragment whose length is not a
    /// multiple of 8 or is zero, a datagram beyond 65,535 bytes, fragments past its end
    /// or a second, different end (the datagram is dropped with the last three).
    pub malformed: u64,
    /// Fragments dropped for want of room (too many datagrams or bytes in reassembly; a
    /// fragment of a datagram held that passes the bytes limit drops the datagram).
    pub no_room: u64,
    /// Exact duplicates of a fragment already held (same range, same bytes: ignored).
    pub duplicates: u64,
    /// IPv6 fragments of a datagram dropped for an overlap, discarded until its timeout
    /// (RFC 5722 §4: "including those not yet received").
    pub after_overlap: u64,
}

impl ReasmStats {
    /// Fragments and datagrams lost: timeouts, overlaps (and the fragments that came
    /// after one), malformed, no room.
    pub fn dropped(&self) -> u64 {
        self.timed_out + self.overlaps + self.after_overlap + self.malformed + self.no_room
    }
}

/// A datagram's identity (RFC 791: source, destination, protocol, id; RFC 8200: source,
/// destination, id).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Key {
    V4 {
        src: u32,
        dst: u32,
        id: u16,
        proto: u8,
    },
    V6 {
        src: [u8; 16],
        dst: [u8; 16],
        id: u32,
    },
}

/// One datagram in reassembly.
struct Partial {
    deadline: u64,
    /// Ethernet and IP headers of the first fragment (offset 0) once it came (IPv6: the
    /// unfragmentable part, without the fragment header).
    head: Vec<u8>,
    /// IPv6: where in `head` the next-header byte naming the fragment header is, and the
    /// value it takes (the fragment header's next header).
    next_header: Option<(usize, u8)>,
    /// The fragments' data by offset in the fragmentable part: sorted, disjoint.
    pieces: Vec<(usize, Vec<u8>)>,
    /// Bytes received (the sum of the pieces' lengths).
    got: usize,
    /// The fragmentable part's length, once the last fragment came.
    total: Option<usize>,
    /// Bytes charged to the limit: the headers, and each piece with its keeping.
    charged: usize,
}

impl Partial {
    fn held(&self) -> usize {
        self.charged
    }

    /// The fragmentable part, whole (the pieces cover it).
    fn data(&self) -> Vec<u8> {
        let mut d = Vec::with_capacity(self.got);
        for (_, b) in &self.pieces {
            d.extend_from_slice(b);
        }
        d
    }
}

/// One fragment, as the node found it.
struct Fragment<'a> {
    /// The whole frame.
    frame: &'a [u8],
    /// Where the fragment's data starts and ends in the frame.
    data: (usize, usize),
    /// Offset of the data in the datagram, in bytes.
    offset: usize,
    /// More fragments follow.
    more: bool,
}

/// The reassembly of one node.
pub struct Reassembly {
    cfg: ReasmConfig,
    partial: HashMap<Key, Partial>,
    /// The first fragments (as received) of datagrams that timed out, for the node's
    /// "reassembly time exceeded" errors ([`Reassembly::take_expired`]).
    expired: Vec<Vec<u8>>,
    held: usize,
    /// The earliest deadline of a datagram in reassembly.
    next_deadline: u64,
    /// IPv6 datagrams dropped for an overlap, until their deadline: their later
    /// fragments are discarded (at most `max_datagrams` remembered).
    overlapped: HashMap<Key, u64>,
    pub stats: ReasmStats,
}

impl Default for Reassembly {
    fn default() -> Self {
        Reassembly::new(ReasmConfig::default())
    }
}

/// Why a fragment could not join its datagram.
enum Refused {
    /// Malformed; the datagram stays.
    Fragment,
    /// Malformed; the datagram goes (its counter).
    Datagram(fn(&mut ReasmStats) -> &mut u64),
    /// Overlapping another fragment (not an exact duplicate); the datagram goes.
    Overlap,
    /// An exact duplicate.
    Duplicate,
}

impl Reassembly {
    pub fn new(cfg: ReasmConfig) -> Self {
        Reassembly {
            cfg,
            partial: HashMap::new(),
            expired: Vec::new(),
            held: 0,
            next_deadline: u64::MAX,
            overlapped: HashMap::new(),
            stats: ReasmStats::default(),
        }
    }

    /// Datagrams in reassembly.
    pub fn pending(&self) -> usize {
        self.partial.len()
    }

    /// Bytes held by datagrams in reassembly.
    pub fn held(&self) -> usize {
        self.held
    }

    /// The earliest time a datagram in reassembly times out.
    pub fn next_deadline(&self) -> Option<u64> {
        (!self.partial.is_empty()).then_some(self.next_deadline)
    }

    /// Drops the datagrams whose time is up at `now`; those whose first fragment came
    /// leave it for an ICMP error ([`Reassembly::take_expired`]).
    pub fn expire(&mut self, now: u64) {
        if now < self.next_deadline || self.partial.is_empty() {
            return;
        }
        let mut gone = 0;
        let mut freed = 0;
        let mut next = u64::MAX;
        let expired = &mut self.expired;
        self.partial.retain(|key, p| {
            if p.deadline <= now {
                gone += 1;
                freed += p.held();
                if expired.len() < MAX_EXPIRED {
                    expired.extend(first_fragment(key, p));
                }
                false
            } else {
                next = next.min(p.deadline);
                true
            }
        });
        self.stats.timed_out += gone;
        self.held -= freed;
        self.next_deadline = next;
    }

    /// An IPv4 fragment (its header checked, addressed to the node; `ihl` its header
    /// length): the whole datagram's frame once the fragment completed it.
    pub fn push4(&mut self, frame: &[u8], ihl: usize, now: u64) -> Option<Vec<u8>> {
        let h = &frame[ETH_HLEN..];
        let total = usize::from(u16::from_be_bytes([h[2], h[3]]));
        let fo = u16::from_be_bytes([h[6], h[7]]);
        let key = Key::V4 {
            src: u32::from_be_bytes([h[12], h[13], h[14], h[15]]),
            dst: u32::from_be_bytes([h[16], h[17], h[18], h[19]]),
            id: u16::from_be_bytes([h[4], h[5]]),
            proto: h[9],
        };
        let frag = Fragment {
            frame,
            data: (ETH_HLEN + ihl, ETH_HLEN + total),
            offset: usize::from(fo & 0x1fff) * 8,
            more: fo & 0x2000 != 0,
        };
        // The whole datagram's header and data fit an IPv4 packet (checked again whole,
        // with the first fragment's header).
        let room = MAX_IP - ihl;
        let deadline = now.saturating_add(self.cfg.timeout4_ns);
        let p = self.push(key, &frag, room, ETH_HLEN, deadline, now, |head| {
            head.extend_from_slice(&frame[..ETH_HLEN + ihl]);
            Some(None)
        })?;
        let data = p.data();
        let mut f = p.head;
        // The first fragment's header length (options copied or not into the others).
        let ihl = f.len() - ETH_HLEN;
        f.extend_from_slice(&data);
        let ip = &mut f[ETH_HLEN..];
        let len = (ihl + data.len()) as u16;
        ip[2..4].copy_from_slice(&len.to_be_bytes());
        ip[6..8].copy_from_slice(&[0, 0]);
        ip[10..12].copy_from_slice(&[0, 0]);
        let sum = !checksum::sum(&ip[..ihl]);
        ip[10..12].copy_from_slice(&sum.to_be_bytes());
        Some(f)
    }

    /// An IPv6 fragment (its headers checked, addressed to the node): `frag_at`, where
    /// its fragment header starts in the frame, `data` where the fragment's data starts
    /// and ends; the whole datagram's frame once the fragment completed it.
    pub fn push6(
        &mut self,
        frame: &[u8],
        frag_at: usize,
        data_end: usize,
        now: u64,
    ) -> Option<Vec<u8>> {
        let h = &frame[ETH_HLEN..];
        let fh = &frame[frag_at..frag_at + FRAG6_LEN];
        let fo = u16::from_be_bytes([fh[2], fh[3]]);
        let mut src = [0; 16];
        let mut dst = [0; 16];
        src.copy_from_slice(&h[8..24]);
        dst.copy_from_slice(&h[24..40]);
        let key = Key::V6 {
            src,
            dst,
            id: u32::from_be_bytes([fh[4], fh[5], fh[6], fh[7]]),
        };
        let frag = Fragment {
            frame,
            data: (frag_at + FRAG6_LEN, data_end),
            offset: usize::from(fo >> 3) * 8,
            more: fo & 1 != 0,
        };
        // The payload length counts the unfragmentable extension headers too.
        let room = MAX_IP - (frag_at - ETH_HLEN - IP6_LEN);
        let deadline = now.saturating_add(self.cfg.timeout6_ns);
        let p = self.push(
            key,
            &frag,
            room,
            ETH_HLEN + IP6_LEN,
            deadline,
            now,
            |head| {
                head.extend_from_slice(&frame[..frag_at]);
                // The header before the fragment header (the fixed header, or the last
                // extension header before it) names the fragment's next header instead.
                // (an atomic fragment header before it is 8 bytes whatever its second)
                let mut at = ETH_HLEN + 6;
                let mut next = ETH_HLEN + IP6_LEN;
                while next < frag_at {
                    let atomic = *frame.get(at)? == 44;
                    at = next;
                    next += if atomic {
                        8
                    } else {
                        (usize::from(*frame.get(next + 1)?) + 1) * 8
                    };
                }
                (next == frag_at).then_some(Some((at, fh[0])))
            },
        )?;
        let (at, nh) = p.next_header?;
        let data = p.data();
        let mut f = p.head;
        f[at] = nh;
        let plen = (f.len() - ETH_HLEN - IP6_LEN + data.len()) as u16;
        f[ETH_HLEN + 4..ETH_HLEN + 6].copy_from_slice(&plen.to_be_bytes());
        f.extend_from_slice(&data);
        Some(f)
    }

    /// Adds `frag` to datagram `key` (its data may end at most at `room`); the datagram,
    /// taken out, once whole. `head` keeps the first fragment's headers, of which all but
    /// the first `fixed` bytes count in the IP length field with the data (65,535 at
    /// most).
    #[allow(clippy::too_many_arguments)]
    fn push(
        &mut self,
        key: Key,
        frag: &Fragment<'_>,
        room: usize,
        fixed: usize,
        deadline: u64,
        now: u64,
        head: impl FnOnce(&mut Vec<u8>) -> Option<Option<(usize, u8)>>,
    ) -> Option<Partial> {
        self.stats.fragments += 1;
        self.expire(now);
        let bytes = frag.frame.get(frag.data.0..frag.data.1)?;
        let (start, end) = (frag.offset, frag.offset + bytes.len());
        if end > room || (frag.more && (bytes.is_empty() || bytes.len() % 8 != 0)) {
            self.stats.malformed += 1;
            return None;
        }
        if !self.overlapped.is_empty() {
            if let Some(&until) = self.overlapped.get(&key) {
                if now < until {
                    self.stats.after_overlap += 1;
                    return None;
                }
                self.overlapped.remove(&key);
            }
        }
        if !self.partial.contains_key(&key) {
            if self.partial.len() >= self.cfg.max_datagrams
                || self.held + bytes.len() > self.cfg.max_bytes
            {
                self.stats.no_room += 1;
                return None;
            }
            self.partial.insert(
                key,
                Partial {
                    deadline,
                    head: Vec::new(),
                    next_header: None,
                    pieces: Vec::new(),
                    got: 0,
                    total: None,
                    charged: 0,
                },
            );
            self.next_deadline = self.next_deadline.min(deadline);
        }
        let p = self.partial.get_mut(&key)?;
        let verdict = admit(p, start, bytes, frag.more);
        match verdict {
            Ok(()) => {}
            Err(Refused::Duplicate) => {
                self.stats.duplicates += 1;
                return None;
            }
            Err(Refused::Fragment) => {
                self.stats.malformed += 1;
                return None;
            }
            Err(Refused::Datagram(counter)) => {
                *counter(&mut self.stats) += 1;
                self.drop_datagram(&key);
                return None;
            }
            Err(Refused::Overlap) => {
                self.stats.overlaps += 1;
                let until = p.deadline;
                self.drop_datagram(&key);
                if let Key::V6 { .. } = key {
                    self.remember_overlap(key, until, now);
                }
                return None;
            }
        }
        // (the first fragment's headers are at most where its data starts)
        let cost = bytes.len() + PIECE_COST + if start == 0 { frag.data.0 } else { 0 };
        if self.held + cost > self.cfg.max_bytes {
            self.stats.no_room += 1;
            self.drop_datagram(&key);
            return None;
        }
        let before = p.held();
        if !bytes.is_empty() {
            let i = p.pieces.partition_point(|r| r.0 < start);
            p.pieces.insert(i, (start, bytes.to_vec()));
            p.charged += bytes.len() + PIECE_COST;
        }
        p.got += end - start;
        if !frag.more {
            p.total = Some(end);
        }
        if start == 0 {
            // (headers that do not lead to the fragment header: the datagram cannot be
            // rebuilt)
            let Some(nh) = head(&mut p.head) else {
                self.stats.malformed += 1;
                self.drop_datagram(&key);
                return None;
            };
            p.next_header = nh;
            p.charged += p.head.len();
        }
        self.held += p.held() - before;
        // Disjoint pieces inside 0..total whose lengths sum to total cover it.
        let whole = p.total == Some(p.got) && !p.head.is_empty();
        if !whole {
            return None;
        }
        let p = self.partial.remove(&key)?;
        self.held -= p.held();
        // The first fragment's headers with the whole data: still an IP packet?
        if p.head.len() - fixed + p.got > MAX_IP {
            self.stats.malformed += 1;
            return None;
        }
        self.stats.reassembled += 1;
        Some(p)
    }

    /// The first fragments of the datagrams that timed out since the last call, as they
    /// were received (Ethernet frames), to quote in "fragment reassembly time exceeded"
    /// (RFC 1122 §3.3.2, RFC 8200 §4.5: sent only where the first fragment came).
    pub fn take_expired(&mut self) -> Vec<Vec<u8>> {
        std::mem::take(&mut self.expired)
    }

    /// Whether first fragments of timed-out datagrams wait for [`take_expired`](Self::take_expired).
    pub fn has_expired(&self) -> bool {
        !self.expired.is_empty()
    }

    /// Remembers datagram `key`, dropped for an overlap, until `deadline` (its later
    /// fragments are then discarded). Bounded: at `max_datagrams` the ones past their
    /// deadline go, and if none has, this one is not remembered.
    fn remember_overlap(&mut self, key: Key, deadline: u64, now: u64) {
        if self.overlapped.len() >= self.cfg.max_datagrams {
            self.overlapped.retain(|_, until| *until > now);
            if self.overlapped.len() >= self.cfg.max_datagrams {
                return;
            }
        }
        self.overlapped.insert(key, deadline);
    }

    fn drop_datagram(&mut self, key: &Key) {
        if let Some(p) = self.partial.remove(key) {
            self.held -= p.held();
        }
    }
}

/// The first fragment of `p` (datagram `key`) as it was received, if it came: its headers
/// (over IPv6 the fragment header put back: offset 0, more fragments) and its data.
fn first_fragment(key: &Key, p: &Partial) -> Option<Vec<u8>> {
    let (0, first) = p.pieces.first()? else {
        return None;
    };
    if p.head.is_empty() {
        return None;
    }
    let mut f = p.head.clone();
    if let (Key::V6 { id, .. }, Some((_, nh))) = (key, p.next_header) {
        f.extend_from_slice(&[nh, 0, 0, 1]);
        f.extend_from_slice(&id.to_be_bytes());
    }
    f.extend_from_slice(first);
    Some(f)
}

/// Whether `bytes` at `start` (the last fragment's if not `more`) may join `p`.
fn admit(p: &Partial, start: usize, bytes: &[u8], more: bool) -> Result<(), Refused> {
    let end = start + bytes.len();
    if !more {
        // A second, different end, or data already past this one (RFC 8200 §4.5; Linux
        // drops the datagram for both).
        let last_end = p.pieces.last().map(|(o, b)| o + b.len());
        if p.total.is_some_and(|t| t != end) || last_end.is_some_and(|e| e > end) {
            return Err(Refused::Datagram(|s| &mut s.malformed));
        }
    } else if p.total.is_some_and(|t| end > t) {
        return Err(Refused::Datagram(|s| &mut s.malformed));
    }
    if start == end {
        // (an empty last fragment: nothing to overlap)
        return if more { Err(Refused::Fragment) } else { Ok(()) };
    }
    // The pieces are sorted and disjoint: only the two around `start` can meet it.
    let i = p.pieces.partition_point(|r| r.0 < start);
    let range = |k: usize| p.pieces.get(k).map(|(o, b)| (*o, o + b.len()));
    // An exact duplicate has the same bytes too (RFC 8200 §4.5: other data in the same
    // range is an overlap).
    if range(i) == Some((start, end)) && p.pieces[i].1 == bytes {
        return Err(Refused::Duplicate);
    }
    let before = i > 0 && range(i - 1).is_some_and(|r| r.1 > start);
    let after = range(i).is_some_and(|r| r.0 < end);
    if before || after {
        return Err(Refused::Overlap);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An IPv4 frame of `data` at byte `offset` of datagram `id` (header checksum right).
    fn frag4(id: u16, offset: usize, more: bool, data: &[u8]) -> Vec<u8> {
        frag4_opts(id, offset, more, data, &[])
    }

    /// [`frag4`] with IP options `opts` (a multiple of 4 bytes).
    fn frag4_opts(id: u16, offset: usize, more: bool, data: &[u8], opts: &[u8]) -> Vec<u8> {
        let hl = 20 + opts.len();
        let mut f = vec![0u8; ETH_HLEN + hl];
        f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        f[ETH_HLEN + 20..].copy_from_slice(opts);
        let ip = &mut f[ETH_HLEN..];
        ip[0] = 0x40 | (hl / 4) as u8;
        ip[2..4].copy_from_slice(&((hl + data.len()) as u16).to_be_bytes());
        ip[4..6].copy_from_slice(&id.to_be_bytes());
        let fo = (offset / 8) as u16 | if more { 0x2000 } else { 0 };
        ip[6..8].copy_from_slice(&fo.to_be_bytes());
        ip[8] = 64;
        ip[9] = 17;
        ip[12..16].copy_from_slice(&[198, 18, 0, 2]);
        ip[16..20].copy_from_slice(&[198, 18, 0, 1]);
        let sum = !checksum::sum(&ip[..hl]);
        ip[10..12].copy_from_slice(&sum.to_be_bytes());
        f.extend_from_slice(data);
        f
    }

    fn push4(r: &mut Reassembly, f: &[u8], now: u64) -> Option<Vec<u8>> {
        r.push4(f, usize::from(f[ETH_HLEN] & 0x0f) * 4, now)
    }

    /// RFC 791: options not copied are in the first fragment only, so the fragments'
    /// header lengths differ; the whole datagram has the first one's header, its length
    /// and checksum right, whichever fragment completes it.
    #[test]
    fn the_first_fragments_header_makes_the_datagrams() {
        let d = payload(1600);
        // record route (not copied) in the first; a copied option (40 bytes) in the last
        let rr = [7, 7, 4, 0, 0, 0, 0, 1];
        let copied = [[0x94, 4, 0, 0]; 10].concat();
        for last_first in [false, true] {
            let mut r = Reassembly::default();
            let a = frag4_opts(5, 0, true, &d[..800], &rr);
            let b = frag4_opts(5, 800, false, &d[800..], &copied);
            let got = if last_first {
                assert!(push4(&mut r, &b, 0).is_none());
                push4(&mut r, &a, 0)
            } else {
                assert!(push4(&mut r, &a, 0).is_none());
                push4(&mut r, &b, 0)
            };
            let f = got.unwrap();
            let ip = &f[ETH_HLEN..];
            assert_eq!(ip[0], 0x47, "the first fragment's header (28 bytes)");
            assert_eq!(&ip[20..28], &rr);
            assert_eq!(u16::from_be_bytes([ip[2], ip[3]]), 28 + 1600);
            assert_eq!(checksum::sum(&ip[..28]), 0xffff);
            assert_eq!(&ip[28..], &d[..]);
            assert_eq!((r.pending(), r.held()), (0, 0));
        }
        // whole past 65,535 bytes with the first fragment's longer header: malformed
        let mut r = Reassembly::default();
        let big = payload(1480);
        let mut off = 0;
        let last = 65_515 - 1480 * 44;
        while off < 1480 * 44 {
            let opts: &[u8] = if off == 0 { &rr } else { &[] };
            assert!(push4(&mut r, &frag4_opts(6, off, true, &big, opts), 0).is_none());
            off += 1480;
        }
        assert!(push4(&mut r, &frag4(6, off, false, &big[..last]), 0).is_none());
        assert_eq!(
            (r.stats.malformed, r.stats.reassembled, r.pending()),
            (1, 0, 0)
        );
        assert_eq!(r.held(), 0);
    }

    /// Bytes held are bytes received: tiny fragments far into a datagram do not take
    /// the room of 64 KiB each.
    #[test]
    fn what_is_held_is_what_came() {
        let mut r = Reassembly::new(ReasmConfig {
            max_bytes: 16 << 10,
            ..ReasmConfig::default()
        });
        for id in 0..64 {
            push4(&mut r, &frag4(id, 65_488, false, &[1; 8]), 0);
        }
        assert_eq!((r.pending(), r.held()), (64, 64 * (8 + PIECE_COST)));
        let d = payload(4000);
        assert!(push4(&mut r, &frag4(99, 0, true, &d[..2000]), 0).is_none());
        assert!(push4(&mut r, &frag4(99, 2000, false, &d[2000..]), 0).is_some());
        assert_eq!(r.stats.no_room, 0);
    }

    fn payload(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 7 + i / 251) as u8).collect()
    }

    #[test]
    fn ipv4_fragments_in_any_order_make_the_datagram() {
        let d = payload(3000);
        for order in [[0, 1, 2], [2, 1, 0], [1, 2, 0], [2, 0, 1]] {
            let mut r = Reassembly::default();
            let parts = [
                frag4(7, 0, true, &d[..1480]),
                frag4(7, 1480, true, &d[1480..2960]),
                frag4(7, 2960, false, &d[2960..]),
            ];
            let mut out = None;
            for (k, &i) in order.iter().enumerate() {
                let got = push4(&mut r, &parts[i], 10);
                assert_eq!(got.is_some(), k == 2, "whole only with the last one");
                out = out.or(got);
            }
            let f = out.unwrap();
            assert_eq!(&f[ETH_HLEN + 20..], &d[..]);
            let ip = &f[ETH_HLEN..ETH_HLEN + 20];
            assert_eq!(u16::from_be_bytes([ip[2], ip[3]]), 3020);
            assert_eq!(u16::from_be_bytes([ip[6], ip[7]]), 0, "no fragment fields");
            assert_eq!(checksum::sum(ip), 0xffff, "header checksum");
            assert_eq!((r.pending(), r.held()), (0, 0));
            assert_eq!((r.stats.fragments, r.stats.reassembled), (3, 1));
        }
    }

    #[test]
    fn duplicates_are_ignored_and_overlaps_drop_the_datagram() {
        let d = payload(2000);
        let mut r = Reassembly::default();
        assert!(push4(&mut r, &frag4(1, 0, true, &d[..1000]), 0).is_none());
        assert!(push4(&mut r, &frag4(1, 0, true, &d[..1000]), 0).is_none());
        assert_eq!(r.stats.duplicates, 1);
        let f = push4(&mut r, &frag4(1, 1000, false, &d[1000..]), 0).unwrap();
        assert_eq!(&f[ETH_HLEN + 20..], &d[..]);
        // overlapping: 0..1000 then 992..2000
        assert!(push4(&mut r, &frag4(2, 0, true, &d[..1000]), 0).is_none());
        assert!(push4(&mut r, &frag4(2, 992, false, &d[992..]), 0).is_none());
        assert_eq!((r.stats.overlaps, r.pending(), r.held()), (1, 0, 0));
        // a fragment covering two received ones
        push4(&mut r, &frag4(3, 0, true, &d[..8]), 0);
        push4(&mut r, &frag4(3, 8, true, &d[8..16]), 0);
        push4(&mut r, &frag4(3, 0, true, &d[..16]), 0);
        assert_eq!((r.stats.overlaps, r.pending()), (2, 0));
    }

    #[test]
    fn malformed_fragments_are_refused() {
        let d = payload(2000);
        let mut r = Reassembly::default();
        // not a multiple of 8 before the last; empty before the last
        assert!(push4(&mut r, &frag4(1, 0, true, &d[..1001]), 0).is_none());
        assert!(push4(&mut r, &frag4(1, 8, true, &[]), 0).is_none());
        // beyond 65,535 bytes (ping of death)
        assert!(push4(&mut r, &frag4(1, 65_528, false, &d[..16]), 0).is_none());
        assert_eq!(r.stats.malformed, 3);
        assert_eq!(r.pending(), 0);
        // two different ends drop the datagram; so does data past the end
        push4(&mut r, &frag4(2, 800, false, &d[..8]), 0);
        push4(&mut r, &frag4(2, 1600, false, &d[..8]), 0);
        assert_eq!((r.stats.malformed, r.pending()), (4, 0));
        push4(&mut r, &frag4(3, 800, false, &d[..8]), 0);
        push4(&mut r, &frag4(3, 1600, true, &d[..8]), 0);
        assert_eq!((r.stats.malformed, r.pending()), (5, 0));
    }

    #[test]
    fn incomplete_datagrams_time_out_and_room_is_bounded() {
        let d = payload(2000);
        let mut r = Reassembly::new(ReasmConfig {
            max_datagrams: 2,
            max_bytes: 3000,
            timeout4_ns: 1_000,
            timeout6_ns: 1_000,
        });
        push4(&mut r, &frag4(1, 0, true, &d[..1000]), 0);
        push4(&mut r, &frag4(2, 0, true, &d[..1000]), 10);
        assert_eq!(r.next_deadline(), Some(1_000));
        // a third datagram: no room
        push4(&mut r, &frag4(3, 0, true, &d[..8]), 20);
        assert_eq!((r.stats.no_room, r.pending()), (1, 2));
        // bytes: the second's rest would pass 3000
        push4(&mut r, &frag4(2, 1000, true, &d[..1000]), 30);
        assert_eq!((r.stats.no_room, r.pending()), (2, 1));
        // the first times out; the third then fits
        push4(&mut r, &frag4(3, 0, true, &d[..8]), 1_000);
        assert_eq!((r.stats.timed_out, r.pending()), (1, 1));
        r.expire(2_000);
        assert_eq!((r.stats.timed_out, r.pending(), r.held()), (2, 0, 0));
        assert_eq!(r.next_deadline(), None);
    }

    /// An IPv6 frame with `ext` (hop-by-hop then destination options, 8 bytes each)
    /// before a fragment header of datagram `id`.
    fn frag6(id: u32, ext: usize, offset: usize, more: bool, data: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; ETH_HLEN + IP6_LEN];
        f[12..14].copy_from_slice(&0x86ddu16.to_be_bytes());
        let plen = ext * 8 + FRAG6_LEN + data.len();
        f[ETH_HLEN] = 0x60;
        f[ETH_HLEN + 4..ETH_HLEN + 6].copy_from_slice(&(plen as u16).to_be_bytes());
        f[ETH_HLEN + 6] = if ext > 0 { 0 } else { 44 };
        f[ETH_HLEN + 7] = 64;
        f[ETH_HLEN + 8] = 0x20;
        f[ETH_HLEN + 24] = 0x20;
        f[ETH_HLEN + 39] = 1;
        for k in 0..ext {
            let nh = if k + 1 < ext { 60 } else { 44 };
            f.extend_from_slice(&[nh, 0, 1, 4, 0, 0, 0, 0]);
        }
        let fo = (offset as u16) | u16::from(more);
        f.extend_from_slice(&[17, 0]);
        f.extend_from_slice(&fo.to_be_bytes());
        f.extend_from_slice(&id.to_be_bytes());
        f.extend_from_slice(data);
        f
    }

    /// An atomic fragment header (8 bytes whatever its second byte) before the real one:
    /// the rebuilt packet keeps it, its next header then names what followed the real one.
    #[test]
    fn an_atomic_fragment_header_before_the_fragment_header_is_kept() {
        let d = payload(2000);
        let mut r = Reassembly::default();
        let with_atomic = |f: Vec<u8>| {
            let mut f = f;
            f.splice(54..54, [44, 3, 0, 0, 0, 0, 0, 1]);
            f[20] = 44;
            let plen = u16::from_be_bytes([f[18], f[19]]) + 8;
            f[18..20].copy_from_slice(&plen.to_be_bytes());
            f
        };
        let a = with_atomic(frag6(4, 0, 1000, false, &d[1000..]));
        let b = with_atomic(frag6(4, 0, 0, true, &d[..1000]));
        let at = ETH_HLEN + IP6_LEN + 8;
        assert!(r.push6(&a, at, a.len(), 0).is_none());
        let f = r.push6(&b, at, b.len(), 0).unwrap();
        assert_eq!(&f[at..], &d[..]);
        assert_eq!((f[ETH_HLEN + 6], f[ETH_HLEN + IP6_LEN]), (44, 17));
        assert_eq!(r.stats.reassembled, 1);
    }

    #[test]
    fn ipv6_fragments_lose_their_header_and_keep_the_others() {
        let d = payload(2500);
        for ext in [0, 2] {
            let mut r = Reassembly::default();
            let at = ETH_HLEN + IP6_LEN + ext * 8;
            let a = frag6(9, ext, 1232, false, &d[1232..]);
            let b = frag6(9, ext, 0, true, &d[..1232]);
            assert!(r.push6(&a, at, a.len(), 0).is_none());
            let f = r.push6(&b, at, b.len(), 0).unwrap();
            assert_eq!(&f[at..], &d[..]);
            let plen = u16::from_be_bytes([f[ETH_HLEN + 4], f[ETH_HLEN + 5]]);
            assert_eq!(usize::from(plen), ext * 8 + d.len());
            let nh_at = if ext == 0 { ETH_HLEN + 6 } else { at - 8 };
            assert_eq!(f[nh_at], 17, "the fragment header's next header");
            // the rest of the headers as the first fragment had them
            let hdrs = b[..at].to_vec();
            assert_eq!(&f[..ETH_HLEN + 4], &hdrs[..ETH_HLEN + 4]);
            assert_eq!(&f[ETH_HLEN + 6..nh_at], &hdrs[ETH_HLEN + 6..nh_at]);
            assert_eq!((r.pending(), r.held()), (0, 0));
        }
    }
}
