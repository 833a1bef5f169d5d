//! Neighbours: the addresses the node owns (whole ranges, as a generator's client pools
//! need), the neighbour cache (learned from ARP, or static entries), and ARP itself:
//! requests for owned addresses answered, requests sent to resolve a neighbour,
//! gratuitous ARP to announce owned addresses. IPv6's counterpart is [`crate::neigh6`].

use crate::neighcache::{Learn, NeighCache};

use squall_tcp::TxSink;
use squall_wire::{ArpOperation, ArpPacket, ArpRepr, Ipv4Address, MacAddress, ARP_LEN};

pub(crate) const ETH_HLEN: usize = 14;
pub(crate) const ETHERTYPE_IPV4: u16 = 0x0800;
pub(crate) const ETHERTYPE_ARP: u16 = 0x0806;
pub(crate) const ETHERTYPE_IPV6: u16 = 0x86dd;
/// The Ethernet broadcast address.
pub const BROADCAST: [u8; 6] = [0xff; 6];
/// Length of an ARP frame on the wire (padded to the Ethernet minimum).
pub const ARP_FRAME_LEN: usize = 60;

/// A MAC that the workers of one port resolve together ([`crate::Node::resolve_shared`]):
/// whichever worker's queue the ARP reply reaches publishes it here for the others; and
/// later moves of the next hop (a failover's announcement reaches one worker's queue):
/// [`SharedMac::moved`] publishes the new MAC with a new generation, which every worker
/// sharing it follows ([`crate::Node::share_next_hop`]). Layout: flag, generation, MAC.
/// Beside it, when a worker last heard the next hop ([`SharedMac::saw`]): the worker that
/// probes it ([`crate::nud`]) counts what the others heard; and the last IPv6 default
/// router a worker heard advertised ([`SharedMac::advertised`]): a router advertisement
/// reaches one worker's queue, the worker that probes takes the router from here.
#[derive(Debug, Default)]
pub struct SharedMac(
    std::sync::atomic::AtomicU64,
    std::sync::atomic::AtomicU64,
    SharedRouter,
);

/// The last default router advertised on any worker's queue (address, MAC), and how many
/// advertisements were published (read without the lock, once a turn, by the worker that
/// probes); and the router the published MAC was resolved from, if one was (set with the
/// MAC, under its own lock: the two always belong together).
#[derive(Debug, Default)]
struct SharedRouter {
    count: std::sync::atomic::AtomicU32,
    last: std::sync::Mutex<Option<([u8; 16], [u8; 6])>>,
    resolved: std::sync::Mutex<Option<([u8; 16], [u8; 6])>>,
}

impl SharedMac {
    /// Publishes `mac` (the first value set stays).
    pub fn set(&self, mac: [u8; 6]) {
        self.set_resolved(mac, None);
    }
    /// Publishes `mac` as [`set`](Self::set) does, resolved from the router advertisement
    /// of `router` if given: whichever worker publishes first publishes both.
    pub fn set_resolved(&self, mac: [u8; 6], router: Option<[u8; 16]>) {
        let mut resolved = self.2.resolved.lock().unwrap_or_else(|e| e.into_inner());
        if self.get().is_some() {
            return;
        }
        *resolved = router.map(|r| (r, mac));
        let mut v = [0u8; 8];
        v[2..].copy_from_slice(&mac);
        v[0] = 1;
        let _ = self.0.compare_exchange(
            0,
            u64::from_be_bytes(v),
            std::sync::atomic::Ordering::AcqRel,
            std::sync::atomic::Ordering::Acquire,
        );
    }
    /// The router the published MAC was resolved from (address, MAC), if it was.
    pub fn resolved_router(&self) -> Option<([u8; 16], [u8; 6])> {
        *self.2.resolved.lock().unwrap_or_else(|e| e.into_inner())
    }
    /// The MAC, once a worker has published it.
    pub fn get(&self) -> Option<[u8; 6]> {
        self.current().map(|(_, m)| m)
    }
    /// The MAC and its generation (0 for the one resolved, one more at each move).
    #[inline]
    pub fn current(&self) -> Option<(u8, [u8; 6])> {
        let v = self
            .0
            .load(std::sync::atomic::Ordering::Acquire)
            .to_be_bytes();
        (v[0] == 1).then(|| (v[1], [v[2], v[3], v[4], v[5], v[6], v[7]]))
    }
    /// A worker heard the next hop at `t` (ns of the workers' common clock).
    #[inline]
    pub fn saw(&self, t: u64) {
        self.1.fetch_max(t, std::sync::atomic::Ordering::Relaxed);
    }
    /// When a worker last heard the next hop (0: never said).
    #[inline]
    pub fn seen(&self) -> u64 {
        self.1.load(std::sync::atomic::Ordering::Relaxed)
    }
    /// A worker heard router `ip` at `mac` advertise itself as a default router, during
    /// the run (the worker that probes looks at it: another router may take the place
    /// of a lost one).
    pub fn advertised(&self, ip: [u8; 16], mac: [u8; 6]) {
        let mut last = self.2.last.lock().unwrap_or_else(|e| e.into_inner());
        *last = Some((ip, mac));
        self.2
            .count
            .fetch_add(1, std::sync::atomic::Ordering::Release);
    }
    /// How many advertisements were published: a change says to look at
    /// [`router`](Self::router) again.
    #[inline]
    pub fn adverts(&self) -> u32 {
        self.2.count.load(std::sync::atomic::Ordering::Acquire)
    }
    /// The last default router advertised (address, MAC).
    pub fn router(&self) -> Option<([u8; 16], [u8; 6])> {
        *self.2.last.lock().unwrap_or_else(|e| e.into_inner())
    }
    /// Publishes that the next hop moved to `mac`: its new generation.
    pub fn moved(&self, mac: [u8; 6]) -> u8 {
        use std::sync::atomic::Ordering;
        let mut old = self.0.load(Ordering::Acquire);
        loop {
            let gen = old.to_be_bytes()[1].wrapping_add(1);
            let mut v = [1, gen, 0, 0, 0, 0, 0, 0];
            v[2..].copy_from_slice(&mac);
            match self.0.compare_exchange_weak(
                old,
                u64::from_be_bytes(v),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return gen,
                Err(now) => old = now,
            }
        }
    }
}

/// Inclusive IPv4 ranges (host order) the node owns: it answers ARP and ICMP echo for them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Owned(pub Vec<(u32, u32)>);

impl Owned {
    /// Whether `ip` (host order) is in one of the ranges.
    pub fn contains(&self, ip: u32) -> bool {
        self.0.iter().any(|&(a, b)| a <= ip && ip <= b)
    }
    /// Adds the inclusive range `first..=last` (host order; swapped if reversed).
    pub fn add(&mut self, first: u32, last: u32) {
        self.0.push((first.min(last), first.max(last)));
    }
    /// The first address of every range (what gratuitous ARP announces).
    pub fn firsts(&self) -> impl Iterator<Item = u32> + '_ {
        self.0.iter().map(|&(a, _)| a)
    }
}

/// ARP counters of a node.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ArpStats {
    /// Requests for our addresses answered.
    pub requests_answered: u64,
    /// Requests we sent (resolution).
    pub requests_sent: u64,
    /// Gratuitous announcements sent.
    pub gratuitous_sent: u64,
    /// Neighbour entries learned or refreshed from ARP.
    pub learned: u64,
    /// ARP frames not for us (other targets, replies to others, malformed).
    pub ignored: u64,
    /// Frames that could not be sent (no TX frame).
    pub tx_failed: u64,
    /// ARP frames (requests and replies) whose sender claimed one of our addresses from
    /// another MAC (RFC 5227 §2.4: not answered, not learned).
    pub conflicts: u64,
    /// Senders not learned: the cache held `neighcache::MAX_NEIGHBOURS` entries and the
    /// node had not asked for them.
    pub cache_full: u64,
    /// Times the followed next hop announced another MAC, which frames then went to.
    pub next_hop_moved: u64,
}

/// What an ARP frame asks of the node.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// A request for an address we own: answer with this reply.
    Answer(ArpRepr),
    /// Anything else; the sender (if the packet parsed) is reported for learning.
    Other(Option<(Ipv4Address, MacAddress)>),
}

/// Classifies the ARP packet of frame `d` (Ethernet header included) for a node with
/// MAC `mac` owning `owned`.
pub fn classify(d: &[u8], mac: [u8; 6], owned: &Owned) -> Verdict {
    let Some(p) = d
        .get(ETH_HLEN..)
        .and_then(|b| ArpPacket::new_checked(b).ok())
    else {
        return Verdict::Other(None);
    };
    let a = ArpRepr::parse(&p);
    let target = u32::from_be_bytes(a.target_ip.0);
    if a.operation == ArpOperation::REQUEST && owned.contains(target) {
        Verdict::Answer(ArpRepr::reply_to(&a, MacAddress(mac)))
    } else {
        Verdict::Other(Some((a.sender_ip, a.sender_mac)))
    }
}

/// Writes an Ethernet + ARP frame for `a` from `src` into `buf` (at least 60 bytes,
/// padded); returns its length. Requests go to the broadcast address.
pub fn emit_frame(a: &ArpRepr, src: [u8; 6], buf: &mut [u8]) -> Option<usize> {
    emit_frame_to(a, src, None, buf)
}

/// [`emit_frame`] to `to` where given (a unicast request), else as `emit_frame` sends.
fn emit_frame_to(a: &ArpRepr, src: [u8; 6], to: Option<[u8; 6]>, buf: &mut [u8]) -> Option<usize> {
    let b = buf.get_mut(..ARP_FRAME_LEN)?;
    b.fill(0);
    let dst = match to {
        Some(m) => m,
        None if a.operation == ArpOperation::REQUEST => BROADCAST,
        None => a.target_mac.0,
    };
    b[..6].copy_from_slice(&dst);
    b[6..12].copy_from_slice(&src);
    b[12..14].copy_from_slice(&ETHERTYPE_ARP.to_be_bytes());
    a.emit(&mut b[ETH_HLEN..ETH_HLEN + ARP_LEN]).ok()?;
    Some(ARP_FRAME_LEN)
}

/// The owned addresses, the neighbour cache and the ARP counters of one node.
#[derive(Debug, Default)]
pub struct Neighbours {
    mac: [u8; 6],
    owned: Owned,
    cache: NeighCache<u32>,
    pub stats: ArpStats,
}

impl Neighbours {
    /// Neighbours of a node with MAC `mac` owning `owned`.
    pub fn new(mac: [u8; 6], owned: Owned) -> Self {
        Neighbours {
            mac,
            owned,
            ..Neighbours::default()
        }
    }
    /// The addresses the node owns.
    pub fn owned(&self) -> &Owned {
        &self.owned
    }
    /// Whether the node owns `ip` (host order).
    pub fn owns(&self, ip: u32) -> bool {
        self.owned.contains(ip)
    }
    /// Adds a static entry (never overwritten by ARP).
    pub fn add_static(&mut self, ip: u32, mac: [u8; 6]) {
        self.cache.fix(ip, mac);
    }
    /// Takes `ip` at `mac` where the node holds no entry for it (resolved by another
    /// worker of the port): learned as if its ARP had come here.
    pub fn note(&mut self, ip: u32, mac: [u8; 6]) {
        if self.cache.contains(&ip) {
            self.cache.ask(&ip);
        } else {
            self.learn(ip, mac, true);
        }
    }
    /// The MAC of neighbour `ip`, if known.
    pub fn lookup(&self, ip: u32) -> Option<[u8; 6]> {
        self.cache.get(&ip).map(|e| e.mac)
    }
    /// Entries in the cache.
    pub fn len(&self) -> usize {
        self.cache.len()
    }
    /// True when the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.cache.len() == 0
    }

    /// Learns `ip` at `mac` (`asked`: a neighbour this node chose, see [`NeighCache`]).
    fn learn(&mut self, ip: u32, mac: [u8; 6], asked: bool) {
        if mac == [0; 6] || mac == BROADCAST || ip == 0 {
            return;
        }
        match self.cache.learn(ip, mac, asked) {
            Learn::Taken => self.stats.learned += 1,
            Learn::Fixed => {}
            Learn::Full => self.stats.cache_full += 1,
        }
    }

    /// Handles a received ARP frame: answers requests for owned addresses, learns the
    /// sender of requests for us, of entries we hold and of addresses being resolved.
    /// Returns the sender (address, MAC) of a well-formed ARP from another host.
    pub fn on_arp<S: TxSink>(&mut self, d: &[u8], tx: &mut S) -> Option<(u32, [u8; 6])> {
        match classify(d, self.mac, &self.owned) {
            Verdict::Answer(r) if self.owned.contains(u32::from_be_bytes(r.target_ip.0)) => {
                // A request whose sender claims one of our addresses (a gratuitous ARP or
                // a probe of a host about to take it, RFC 5227 §2.4): a conflict, neither
                // answered nor learned (a cache entry for our own address would misroute).
                self.stats.conflicts += 1;
                None
            }
            Verdict::Answer(r) => {
                // The asker wants to talk to us: it is a neighbour (RFC 826's merge).
                let asker = (u32::from_be_bytes(r.target_ip.0), r.target_mac.0);
                self.learn(asker.0, asker.1, false);
                if send(tx, &r, self.mac) {
                    self.stats.requests_answered += 1;
                } else {
                    self.stats.tx_failed += 1;
                }
                Some(asker)
            }
            Verdict::Other(Some((ip, mac))) => {
                let ip = u32::from_be_bytes(ip.0);
                if self.owned.contains(ip) && mac.0 != self.mac {
                    // Any ARP, request or reply, whose sender claims one of our addresses
                    // from another MAC is a conflict (RFC 5227 §2.4), never learned.
                    self.stats.conflicts += 1;
                    return None;
                }
                if self.cache.contains(&ip) || self.cache.is_wanted(&ip) {
                    self.learn(ip, mac.0, false);
                } else {
                    self.stats.ignored += 1;
                }
                Some((ip, mac.0))
            }
            Verdict::Other(None) => {
                self.stats.ignored += 1;
                None
            }
        }
    }

    /// Learns `target` from any ARP that names it from now on (a reply to a request another
    /// worker of the port sent, for instance).
    pub fn want(&mut self, target: u32) {
        self.cache.want(target);
    }

    /// Sends a request for `target` from `from` (both host order); the reply is learned.
    pub fn request<S: TxSink>(&mut self, from: u32, target: u32, tx: &mut S) -> bool {
        self.request_to(from, target, None, tx)
    }

    /// [`request`](Self::request) to `to`'s MAC where given (a unicast poll of a known
    /// neighbour, RFC 1122 §2.3.2.1: only it answers), else broadcast.
    pub fn request_to<S: TxSink>(
        &mut self,
        from: u32,
        target: u32,
        to: Option<[u8; 6]>,
        tx: &mut S,
    ) -> bool {
        self.want(target);
        let r = ArpRepr::request(
            MacAddress(self.mac),
            Ipv4Address(from.to_be_bytes()),
            Ipv4Address(target.to_be_bytes()),
        );
        let ok = send_to(tx, &r, self.mac, to);
        if ok {
            self.stats.requests_sent += 1;
        } else {
            self.stats.tx_failed += 1;
        }
        ok
    }

    /// Announces `ip` with a gratuitous ARP request (sender and target both `ip`).
    pub fn announce<S: TxSink>(&mut self, ip: u32, tx: &mut S) -> bool {
        let a = Ipv4Address(ip.to_be_bytes());
        let r = ArpRepr::request(MacAddress(self.mac), a, a);
        let ok = send(tx, &r, self.mac);
        if ok {
            self.stats.gratuitous_sent += 1;
        } else {
            self.stats.tx_failed += 1;
        }
        ok
    }
}

/// Writes one ARP frame into a frame from `tx`.
fn send<S: TxSink>(tx: &mut S, a: &ArpRepr, mac: [u8; 6]) -> bool {
    send_to(tx, a, mac, None)
}

/// [`send`] to `to` where given.
fn send_to<S: TxSink>(tx: &mut S, a: &ArpRepr, mac: [u8; 6], to: Option<[u8; 6]>) -> bool {
    let Some(buf) = tx.alloc(ARP_FRAME_LEN) else {
        return false;
    };
    match emit_frame_to(a, mac, to, buf) {
        Some(n) => {
            tx.commit(n);
            true
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: [u8; 6] = [2, 0, 0, 0, 0, 0xa];
    const B: [u8; 6] = [2, 0, 0, 0, 0, 0xb];

    fn owned() -> Owned {
        Owned(vec![(0xc612_1000, 0xc612_10ff)]) // 198.18.16.0/24
    }

    /// Two workers resolving the next hop from two routers' advertisements: the first to
    /// publish publishes its MAC and its router together, the second changes neither
    /// (a worker that takes the MAC finds the router it came from).
    #[test]
    fn the_published_mac_and_its_router_go_together() {
        let s = SharedMac::default();
        let (r1, r2) = (
            [0xfe, 0x80, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
            [0xfe; 16],
        );
        s.set_resolved(A, Some(r1));
        s.set_resolved(B, Some(r2));
        s.set(B);
        assert_eq!(s.get(), Some(A));
        assert_eq!(s.resolved_router(), Some((r1, A)));
        let t = SharedMac::default();
        t.set(B);
        t.set_resolved(A, Some(r1));
        assert_eq!((t.get(), t.resolved_router()), (Some(B), None));
    }

    use crate::testing::Frames;

    fn frame(r: &ArpRepr, src: [u8; 6]) -> Vec<u8> {
        let mut buf = [0u8; 64];
        let n = emit_frame(r, src, &mut buf).unwrap();
        buf[..n].to_vec()
    }

    #[test]
    fn answers_only_requests_for_owned_addresses() {
        let req = ArpRepr::request(
            MacAddress(B),
            Ipv4Address([198, 18, 0, 1]),
            Ipv4Address([198, 18, 16, 7]),
        );
        let f = frame(&req, B);
        assert_eq!(f.len(), 60);
        assert_eq!(f[..6], BROADCAST);
        match classify(&f, A, &owned()) {
            Verdict::Answer(r) => {
                assert_eq!(r.operation, ArpOperation::REPLY);
                assert_eq!(r.sender_mac.0, A);
                assert_eq!(r.sender_ip.0, [198, 18, 16, 7]);
                assert_eq!(r.target_mac.0, B);
                assert_eq!(r.target_ip.0, [198, 18, 0, 1]);
            }
            v => panic!("{v:?}"),
        }
        let other = ArpRepr::request(
            MacAddress(B),
            Ipv4Address([198, 18, 0, 1]),
            Ipv4Address([198, 18, 17, 7]),
        );
        assert_eq!(
            classify(&frame(&other, B), A, &owned()),
            Verdict::Other(Some((Ipv4Address([198, 18, 0, 1]), MacAddress(B))))
        );
        assert_eq!(classify(&f[..20], A, &owned()), Verdict::Other(None));
        assert_eq!(classify(&f[..5], A, &owned()), Verdict::Other(None));
    }

    #[test]
    fn a_request_is_answered_and_its_sender_learned() {
        let mut n = Neighbours::new(A, owned());
        let req = ArpRepr::request(
            MacAddress(B),
            Ipv4Address([198, 18, 0, 1]),
            Ipv4Address([198, 18, 16, 200]),
        );
        let mut out = Frames::default();
        n.on_arp(&frame(&req, B), &mut out);
        assert_eq!(n.stats.requests_answered, 1);
        assert_eq!(out.out.len(), 1);
        let rep = ArpRepr::parse(&ArpPacket::new_checked(&out.out[0][14..]).unwrap());
        assert_eq!(rep.operation, ArpOperation::REPLY);
        assert_eq!(rep.sender_ip.0, [198, 18, 16, 200]);
        assert_eq!(out.out[0][..6], B);
        assert_eq!(n.lookup(0xc612_0001), Some(B));
        // A request for someone else is ignored and teaches nothing.
        let other = ArpRepr::request(
            MacAddress([2, 0, 0, 0, 0, 0xc]),
            Ipv4Address([198, 18, 0, 9]),
            Ipv4Address([198, 18, 99, 1]),
        );
        n.on_arp(&frame(&other, B), &mut out);
        assert_eq!(n.lookup(0xc612_0009), None);
        assert_eq!(n.stats.ignored, 1);
    }

    #[test]
    fn resolution_learns_the_reply_and_static_entries_stay() {
        let mut n = Neighbours::new(A, owned());
        let mut out = Frames::default();
        assert!(n.request(0xc612_1001, 0xc612_3001, &mut out));
        let req = ArpRepr::parse(&ArpPacket::new_checked(&out.out[0][14..]).unwrap());
        assert_eq!(req.operation, ArpOperation::REQUEST);
        assert_eq!(out.out[0][..6], BROADCAST);
        let reply = ArpRepr::reply_to(&req, MacAddress(B));
        // The reply is addressed to us but its sender is 198.18.48.1 with MAC B.
        n.on_arp(&frame(&reply, B), &mut out);
        assert_eq!(n.lookup(0xc612_3001), Some(B));
        n.add_static(0xc612_3002, [2, 0, 0, 0, 0, 0xd]);
        let spoof = ArpRepr {
            sender_ip: Ipv4Address([198, 18, 48, 2]),
            ..reply
        };
        n.on_arp(&frame(&spoof, B), &mut out);
        assert_eq!(n.lookup(0xc612_3002), Some([2, 0, 0, 0, 0, 0xd]));
        assert!(n.announce(0xc612_1001, &mut out));
        let g = ArpRepr::parse(&ArpPacket::new_checked(&out.out[1][14..]).unwrap());
        assert_eq!(g.sender_ip, g.target_ip);
        assert_eq!(n.stats.gratuitous_sent, 1);
    }
}
