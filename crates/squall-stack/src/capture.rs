//! The capture tap: the first N flows an application opens, both directions, into a pcap
//! held in memory (written to a file at the end). Frames are taken at each node's
//! transmit (as written by the sender, so frames lost on an impaired wire appear once);
//! one capture can be lent to several nodes in turn (both sides of a single-threaded
//! run). On a real port ([`PcapCap::with_rx`]) received frames are recorded too.

//! The capture tap: selected flows, both directions, into a pcap held in memory (written
//! to a file at the end): the first N flows an application opens (`--pcap`), or the
//! flows flow tracing names (`--trace`). Frames are taken at each node's transmit (as
//! written by the sender, so frames lost on an impaired wire appear once); one capture
//! can be lent to several nodes in turn (both sides of a single-threaded run). On a real
//! port ([`PcapCap::with_rx`]) received frames are recorded too, apart, and ordered
//! before the frames sent in the same turn. A watched client endpoint is followed until
//! it opens a new connection (a SYN with another sequence number): a reused address and
//! port is not captured again unless watched again.

use std::collections::HashMap;

use squall_port::pcap::{read_pcap, PcapRecord, PcapWriter};
use squall_tcp::TraceWatch;

/// A pcap capture of selected flows.
pub struct PcapCap {
    w: PcapWriter<Vec<u8>>,
    /// Received frames (real ports), kept apart so that a turn's arrivals sort before
    /// what the turn sent.
    rx: Option<PcapWriter<Vec<u8>>>,
    /// Client endpoints (ip, port) of the captured flows, with their SYN's sequence
    /// number once seen.
    keys: HashMap<(u32, u16), Option<u32>>,
    /// A bit per hash of every endpoint ever watched ([`bit`]): most frames of a run
    /// that traces a few flows are ruled out by two bit tests, without hashing.
    seen: Box<[u64; SEEN_WORDS]>,
    /// Endpoints taken so far (the first `max`).
    taken: usize,
    max: usize,
    /// More endpoints to watch, named elsewhere (a TCP host's tracer choosing passive
    /// flows).
    feed: Option<TraceWatch>,
}

impl PcapCap {
    /// Captures the first `max_flows` client flows.
    pub fn new(max_flows: usize) -> Self {
        PcapCap {
            // Writing to a Vec cannot fail.
            w: PcapWriter::new(Vec::new()).expect("pcap header into a Vec"),
            rx: None,
            keys: HashMap::new(),
            seen: Box::new([0; SEEN_WORDS]),
            taken: 0,
            max: max_flows,
            feed: None,
        }
    }

    /// Records the frames the node receives as well (a real port: the peer's frames).
    pub fn with_rx(mut self) -> Self {
        self.rx = Some(PcapWriter::new(Vec::new()).expect("pcap header into a Vec"));
        self
    }

    /// Also watches the client endpoints added to `feed` (checked at each frame by one
    /// atomic load; taken in when it changed).
    pub fn with_feed(mut self, feed: TraceWatch) -> Self {
        self.feed = Some(feed);
        self
    }

    /// A client flow from `ip:port` is about to be opened: capture it if still under N.
    pub fn want(&mut self, ip: u32, port: u16) {
        if let Some(s) = self.keys.get_mut(&(ip, port)) {
            // Watched again: a new connection from the same endpoint.
            *s = None;
        } else if self.taken < self.max {
            self.taken += 1;
            self.keys.insert((ip, port), None);
            let b = bit(ip, port);
            self.seen[b / 64] |= 1 << (b % 64);
        }
    }

    fn pull_feed(&mut self) {
        let mut got = Vec::new();
        if let Some(f) = &self.feed {
            if f.pending() {
                got = f.drain();
            }
        }
        for (ip, port) in got {
            self.want(low32(ip), port);
        }
    }

    /// Is the frame from `src:sport` to `dst:dport` (SYN without ACK when `syn`, with
    /// sequence number `seq`) one of a captured flow?
    fn wanted(&mut self, (src, sport, dst, dport): (u32, u16, u32, u16), syn: Option<u32>) -> bool {
        let seen = |b: usize| self.seen[b / 64] & (1 << (b % 64)) != 0;
        let (s_in, d_in) = (seen(bit(src, sport)), seen(bit(dst, dport)));
        if !s_in && !d_in {
            return false;
        }
        if let Some(s) = self.keys.get_mut(&(src, sport)).filter(|_| s_in) {
            match (syn, *s) {
                (Some(seq), None) => *s = Some(seq),
                // A new connection from a watched endpoint nobody watched again.
                (Some(seq), Some(old)) if seq != old => {
                    self.keys.remove(&(src, sport));
                    return false;
                }
                _ => {}
            }
            return true;
        }
        d_in && self.keys.contains_key(&(dst, dport))
    }

    /// A frame was transmitted at `now`: record it if it belongs to a captured flow.
    pub fn frame(&mut self, now: u64, f: &[u8]) {
        if self.accept(f) == Some(true) {
            self.w.record(now, f);
        }
    }

    /// A frame was received at `now` (real ports, [`PcapCap::with_rx`]).
    pub fn frame_rx(&mut self, now: u64, f: &[u8]) {
        if self.accept(f) == Some(true) {
            if let Some(w) = self.rx.as_mut() {
                w.record(now, f);
            }
        }
    }

    fn accept(&mut self, f: &[u8]) -> Option<bool> {
        if self.feed.is_some() {
            self.pull_feed();
        }
        if self.keys.is_empty() {
            return None;
        }
        let (ep, syn) = endpoints(f)?;
        Some(self.wanted(ep, syn))
    }

    /// Frames recorded so far.
    pub fn records(&self) -> u64 {
        self.w.records() + self.rx.as_ref().map_or(0, |w| w.records())
    }

    /// The pcap file bytes (the frames sent; received ones are in [`PcapCap::records_all`]).
    pub fn into_bytes(self) -> Vec<u8> {
        self.w.into_inner().unwrap_or_default()
    }

    /// Every frame recorded, in time order (received frames before the frames sent at
    /// the same time).
    pub fn records_all(self) -> Vec<PcapRecord> {
        let read = |w: PcapWriter<Vec<u8>>| {
            w.into_inner()
                .ok()
                .and_then(|b| read_pcap(&b).ok())
                .map(|(_, r)| r)
                .unwrap_or_default()
        };
        let mut all = self.rx.map(read).unwrap_or_default();
        all.extend(read(self.w));
        // Stable: equal times keep received frames first.
        all.sort_by_key(|r| r.ts_ns);
        all
    }
}

impl crate::FrameTap for PcapCap {
    fn frame(&mut self, now: u64, data: &[u8]) {
        PcapCap::frame(self, now, data)
    }
    fn watch(&mut self, ip: u32, port: u16) {
        self.want(ip, port)
    }
    fn wants_rx(&self) -> bool {
        self.rx.is_some()
    }
    fn frame_rx(&mut self, now: u64, data: &[u8]) {
        PcapCap::frame_rx(self, now, data)
    }
}

/// How the capture names an address: an IPv4 address, or an IPv6 address's low 32 bits
/// (the generator's pool value; see [`endpoints`]).
fn low32(ip: std::net::IpAddr) -> u32 {
    match ip {
        std::net::IpAddr::V4(a) => u32::from(a),
        std::net::IpAddr::V6(a) => {
            let o = a.octets();
            u32::from_be_bytes([o[12], o[13], o[14], o[15]])
        }
    }
}

/// Words of [`PcapCap::seen`] (32 Kibit).
const SEEN_WORDS: usize = 512;

/// The bit of an endpoint in [`PcapCap::seen`].
#[inline]
fn bit(ip: u32, port: u16) -> usize {
    let h = (u64::from(ip) << 16 | u64::from(port)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (h >> 49) as usize % (SEEN_WORDS * 64)
}

/// (src ip, src port, dst ip, dst port) of an Ethernet/IPv4/TCP or UDP frame (with or
/// without an 802.1Q tag); of an IPv6 one with TCP or UDP right after the fixed header,
/// the low 32 bits of its addresses (a generator's pool values, what it watches). For a
/// TCP SYN without ACK, also its sequence number.
type Endpoints = (u32, u16, u32, u16);
fn endpoints(f: &[u8]) -> Option<(Endpoints, Option<u32>)> {
    let l2 = if f.get(12..14) == Some(&[0x81, 0x00]) {
        18
    } else {
        14
    };
    let ip = |o: usize| u32::from_be_bytes([f[o], f[o + 1], f[o + 2], f[o + 3]]);
    let port = |o: usize| u16::from_be_bytes([f[o], f[o + 1]]);
    let syn = |proto: u8, l4: usize| {
        (proto == 6 && f.len() >= l4 + 14 && f[l4 + 13] & 0x12 == 0x02).then(|| ip(l4 + 4))
    };
    if f.len() >= l2 + 44 && f[l2 - 2..l2] == [0x86, 0xdd] && matches!(f[l2 + 6], 6 | 17) {
        let l4 = l2 + 40;
        let e = (ip(l2 + 20), port(l4), ip(l2 + 36), port(l4 + 2));
        return Some((e, syn(f[l2 + 6], l4)));
    }
    if f.len() < l2 + 20 || f[l2 - 2..l2] != [0x08, 0x00] || !matches!(f[l2 + 9], 6 | 17) {
        return None;
    }
    let ihl = usize::from(f[l2] & 0x0f) * 4;
    let l4 = l2 + ihl;
    if ihl < 20 || f.len() < l4 + 4 {
        return None;
    }
    let e = (ip(l2 + 12), port(l4), ip(l2 + 16), port(l4 + 2));
    Some((e, syn(f[l2 + 9], l4)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(src: u32, sport: u16, dst: u32, dport: u16) -> Vec<u8> {
        let mut f = vec![0u8; 54];
        f[12] = 8;
        f[14] = 0x45;
        f[23] = 6;
        f[26..30].copy_from_slice(&src.to_be_bytes());
        f[30..34].copy_from_slice(&dst.to_be_bytes());
        f[34..36].copy_from_slice(&sport.to_be_bytes());
        f[36..38].copy_from_slice(&dport.to_be_bytes());
        f
    }

    #[test]
    fn records_only_wanted_flows_both_directions() {
        let mut p = PcapCap::new(1);
        p.want(1, 1000);
        p.want(2, 1000); // over the limit: ignored
        p.frame(5, &frame(1, 1000, 9, 80));
        p.frame(6, &frame(9, 80, 1, 1000));
        p.frame(7, &frame(2, 1000, 9, 80));
        p.frame(8, &[0u8; 10]);
        // An 802.1Q-tagged frame of the wanted flow is recorded too.
        let f = frame(9, 80, 1, 1000);
        let mut t = f[..12].to_vec();
        t.extend_from_slice(&[0x81, 0x00, 0x00, 0x64]);
        t.extend_from_slice(&f[12..]);
        p.frame(9, &t);
        assert_eq!(p.records(), 3);
        let bytes = p.into_bytes();
        let (_, recs) = squall_port::pcap::read_pcap(&bytes).unwrap();
        assert_eq!(recs.len(), 3);
        assert_eq!(recs[1].ts_ns, 6);
        assert_eq!(recs[2].data.len(), 58);
    }

    #[test]
    fn ipv6_flows_are_watched_by_the_low_32_bits() {
        let mut f = vec![0u8; 74];
        f[12..14].copy_from_slice(&[0x86, 0xdd]);
        f[14] = 0x60;
        f[20] = 6;
        f[22..38].copy_from_slice(&[0x20, 1, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 1]);
        f[38..54].copy_from_slice(&[0x20, 1, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0x30, 0, 0, 1]);
        f[54..56].copy_from_slice(&1025u16.to_be_bytes());
        f[56..58].copy_from_slice(&80u16.to_be_bytes());
        assert_eq!(
            endpoints(&f),
            Some(((0x1000_0001, 1025, 0x3000_0001, 80), None))
        );
        let mut p = PcapCap::new(1);
        p.want(0x1000_0001, 1025);
        p.frame(1, &f);
        f[20] = 58; // ICMPv6: not a flow's
        p.frame(2, &f);
        assert_eq!(p.records(), 1);
    }

    fn syn(src: u32, sport: u16, dst: u32, dport: u16, seq: u32) -> Vec<u8> {
        let mut f = frame(src, sport, dst, dport);
        f[38..42].copy_from_slice(&seq.to_be_bytes());
        f[47] = 0x02;
        f
    }

    #[test]
    fn a_reused_endpoint_is_not_captured_unless_watched_again() {
        let mut p = PcapCap::new(usize::MAX);
        p.want(1, 1000);
        p.frame(1, &syn(1, 1000, 9, 80, 100));
        p.frame(2, &syn(1, 1000, 9, 80, 100)); // its retransmission
        p.frame(3, &frame(9, 80, 1, 1000));
        // The endpoint opens another connection nobody watched: not captured.
        p.frame(4, &syn(1, 1000, 9, 80, 5000));
        p.frame(5, &frame(9, 80, 1, 1000));
        assert_eq!(p.records(), 3);
        // Watched again: its next connection is.
        p.want(1, 1000);
        p.frame(6, &syn(1, 1000, 9, 80, 9000));
        p.frame(7, &frame(9, 80, 1, 1000));
        assert_eq!(p.records(), 5);
    }

    #[test]
    fn received_frames_sort_before_sent_ones_of_the_same_turn_and_feeds_add_flows() {
        let feed = TraceWatch::default();
        let mut p = PcapCap::new(usize::MAX).with_rx().with_feed(feed.clone());
        // Nothing watched yet: the server's tracer names the flow after its SYN arrived.
        feed.add(std::net::Ipv4Addr::from(1u32).into(), 1000);
        p.frame_rx(10, &syn(1, 1000, 9, 80, 7));
        p.frame(10, &frame(9, 80, 1, 1000));
        p.frame_rx(11, &frame(1, 1000, 9, 80));
        p.frame(12, &frame(2, 1000, 9, 80));
        let all = p.records_all();
        assert_eq!(all.len(), 3);
        assert_eq!(all[0].ts_ns, 10);
        assert_eq!(all[0].data[47], 0x02, "the SYN received first");
        assert_eq!(all[1].ts_ns, 10);
        assert_eq!(all[2].ts_ns, 11);
    }
}
