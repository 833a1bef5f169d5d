//! IPv6 neighbours, beside ARP ([`crate::neigh`]): the IPv6 address ranges the node
//! owns, the IPv6 neighbour cache, and neighbour discovery (RFC 4861): solicitations for
//! owned addresses answered, solicitations sent to resolve a neighbour (the gateway),
//! unsolicited advertisements announcing owned addresses, and router advertisements read
//! for the default gateway. Also the one writer of Ethernet + IPv6 + ICMPv6 frames.

use crate::neighcache::{Entry, Learn, NeighCache};

use squall_tcp::TxSink;
use squall_wire::icmpv6::NDP_HOP_LIMIT;
use squall_wire::{
    EtherType, EthernetRepr, Icmpv6Repr, IpProtocol, Ipv6Address, Ipv6Repr, MacAddress, NaFlags,
    IPV6_HEADER_LEN,
};

use crate::ipv6::Ipv6In;
use crate::neigh::ETH_HLEN;

/// Inclusive IPv6 ranges (host-order u128) the node owns: it answers neighbour
/// solicitations and ICMPv6 echo for them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Owned6(pub Vec<(u128, u128)>);

impl Owned6 {
    /// Whether `ip` is in one of the ranges.
    pub fn contains(&self, ip: u128) -> bool {
        self.0.iter().any(|&(a, b)| a <= ip && ip <= b)
    }
    /// Adds the inclusive range `first..=last` (swapped if reversed).
    pub fn add(&mut self, first: u128, last: u128) {
        self.0.push((first.min(last), first.max(last)));
    }
    /// The first address of every range (what unsolicited advertisements announce).
    pub fn firsts(&self) -> impl Iterator<Item = u128> + '_ {
        self.0.iter().map(|&(a, _)| a)
    }
    /// Whether an owned address ends in the 24 bits `low` (the solicited-node group
    /// `ff02::1:ffXX:XXXX` it joins).
    pub fn has_low24(&self, low: u32) -> bool {
        let low = u128::from(low & 0xff_ffff);
        self.0.iter().any(|&(a, b)| {
            if b - a >= 0xff_ffff {
                return true;
            }
            // the first address at or above `a` ending in `low`
            let c = (a & !0xff_ffff) | low;
            let c = if c < a { c.wrapping_add(0x100_0000) } else { c };
            c >= a && c <= b
        })
    }
}

/// Neighbour discovery counters of a node.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NdpStats {
    /// Solicitations for our addresses answered.
    pub ns_answered: u64,
    /// Solicitations we sent (resolution).
    pub ns_sent: u64,
    /// Unsolicited advertisements sent (announcements).
    pub na_unsolicited_sent: u64,
    /// Router solicitations sent (looking for the default router: RFC 4861 §6.3.7).
    pub rs_sent: u64,
    /// Neighbour entries learned or refreshed.
    pub learned: u64,
    /// Router advertisements read (a default gateway taken from those with a lifetime).
    pub ra_seen: u64,
    /// Neighbour discovery messages not for us or teaching nothing.
    pub ignored: u64,
    /// Invalid messages (hop limit not 255, bad fields or options: RFC 4861 §7.1).
    pub invalid: u64,
    /// Frames that could not be sent (no TX frame).
    pub tx_failed: u64,
    /// Neighbours not learned: the cache held `neighcache::MAX_NEIGHBOURS` entries and
    /// the node had not asked for them.
    pub cache_full: u64,
    /// Times the followed IPv6 next hop advertised another MAC (an advertisement with the
    /// Override flag, a router's new advertisement), which frames then went to.
    pub next_hop_moved: u64,
}

/// The owned IPv6 addresses, the IPv6 neighbour cache, the default router and the NDP
/// counters of one node.
#[derive(Debug, Default)]
pub struct Neighbours6 {
    mac: [u8; 6],
    owned: Owned6,
    cache: NeighCache<u128>,
    router: Option<(Ipv6Address, [u8; 6])>,
    /// The last router that withdrew as a default router (an advertisement with router
    /// lifetime 0, RFC 4861 §6.3.4), until the node looks ([`take_withdrawn`]).
    ///
    /// [`take_withdrawn`]: Self::take_withdrawn
    withdrawn: Option<Ipv6Address>,
    pub stats: NdpStats,
}

/// Writes Ethernet + IPv6 + the ICMPv6 message `m` into `buf`; returns the frame length.
#[allow(clippy::too_many_arguments)]
pub fn emit_icmpv6_frame(
    buf: &mut [u8],
    dst_mac: [u8; 6],
    src_mac: [u8; 6],
    src: Ipv6Address,
    dst: Ipv6Address,
    hop_limit: u8,
    m: &Icmpv6Repr<'_>,
) -> Option<usize> {
    let n = m.buffer_len();
    let len = ETH_HLEN + IPV6_HEADER_LEN + n;
    let b = buf.get_mut(..len)?;
    EthernetRepr {
        src: MacAddress(src_mac),
        dst: MacAddress(dst_mac),
        vlan: None,
        ethertype: EtherType::IPV6,
    }
    .emit(b)
    .ok()?;
    Ipv6Repr {
        hop_limit,
        ..Ipv6Repr::new(src, dst, IpProtocol::ICMPV6, n)
    }
    .emit(&mut b[ETH_HLEN..])
    .ok()?;
    m.emit(&mut b[ETH_HLEN + IPV6_HEADER_LEN..], &src, &dst)
        .ok()?;
    Some(len)
}

/// Sends one ICMPv6 frame through `tx`.
#[allow(clippy::too_many_arguments)]
pub fn send_icmpv6<S: TxSink>(
    tx: &mut S,
    dst_mac: [u8; 6],
    src_mac: [u8; 6],
    src: Ipv6Address,
    dst: Ipv6Address,
    hop_limit: u8,
    m: &Icmpv6Repr<'_>,
) -> bool {
    let len = ETH_HLEN + IPV6_HEADER_LEN + m.buffer_len();
    let Some(buf) = tx.alloc(len) else {
        return false;
    };
    match emit_icmpv6_frame(buf, dst_mac, src_mac, src, dst, hop_limit, m) {
        Some(n) => {
            tx.commit(n);
            true
        }
        None => false,
    }
}

impl Neighbours6 {
    /// IPv6 neighbours of a node with MAC `mac` owning `owned`.
    pub fn new(mac: [u8; 6], owned: Owned6) -> Self {
        Neighbours6 {
            mac,
            owned,
            ..Neighbours6::default()
        }
    }
    /// The addresses the node owns.
    pub fn owned(&self) -> &Owned6 {
        &self.owned
    }
    /// Whether the node owns `ip`.
    pub fn owns(&self, ip: &Ipv6Address) -> bool {
        self.owned.contains(ip.to_u128())
    }
    /// Adds a static entry (never overwritten by neighbour discovery).
    pub fn add_static(&mut self, ip: Ipv6Address, mac: [u8; 6]) {
        self.cache.fix(ip.to_u128(), mac);
    }
    /// Takes `ip` at `mac` where the node holds no entry for it (resolved by another
    /// worker of the port): learned as if its advertisement had come here.
    pub fn note(&mut self, ip: Ipv6Address, mac: [u8; 6]) {
        if self.cache.contains(&ip.to_u128()) {
            self.cache.ask(&ip.to_u128());
        } else {
            self.learn(ip, MacAddress(mac), true);
        }
    }
    /// Takes router `ip` at `mac` as the default router where this node learned none
    /// (its advertisement reached another worker of the port), as [`note`](Self::note).
    pub fn note_router(&mut self, ip: Ipv6Address, mac: [u8; 6]) {
        if self.router.is_none() {
            self.note(ip, mac);
            self.router = Some((ip, mac));
        }
    }
    /// The MAC of neighbour `ip`, if known.
    pub fn lookup(&self, ip: &Ipv6Address) -> Option<[u8; 6]> {
        self.cache.get(&ip.to_u128()).map(|e| e.mac)
    }
    /// Marks `ip` as being resolved without soliciting it: an advertisement for it is
    /// learned (another worker of the port sends the solicitations).
    pub fn want(&mut self, ip: &Ipv6Address) {
        self.cache.want(ip.to_u128());
    }
    /// The router that last withdrew as a default router (lifetime 0) since the last
    /// call, if any.
    pub fn take_withdrawn(&mut self) -> Option<Ipv6Address> {
        self.withdrawn.take()
    }
    /// The default router learned from a router advertisement (address, MAC).
    pub fn router(&self) -> Option<(Ipv6Address, [u8; 6])> {
        self.router
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
    fn learn(&mut self, ip: Ipv6Address, mac: MacAddress, asked: bool) {
        if ip.is_unspecified() || ip.is_multicast() || mac.is_multicast() || mac.0 == [0; 6] {
            return;
        }
        match self.cache.learn(ip.to_u128(), mac.0, asked) {
            Learn::Taken => self.stats.learned += 1,
            Learn::Fixed => {}
            Learn::Full => self.stats.cache_full += 1,
        }
    }

    /// Handles a neighbour discovery message `m` received in frame `d` (IPv6 checked:
    /// `ip`; ICMPv6 checksum verified). Validates it as RFC 4861 §7.1 asks, answers
    /// solicitations for owned addresses, learns from advertisements for addresses it
    /// holds or resolves, and takes a router advertisement's sender as the gateway.
    pub fn on_ndp<S: TxSink>(&mut self, d: &[u8], ip: &Ipv6In, m: &Icmpv6Repr<'_>, tx: &mut S) {
        if ip.hop_limit != NDP_HOP_LIMIT {
            self.stats.invalid += 1;
            return;
        }
        let eth_src = MacAddress::from_bytes(&d[6..12]).unwrap_or_default();
        match *m {
            Icmpv6Repr::NeighborSolicit { target, source_mac } => {
                let dad = ip.src.is_unspecified();
                if dad && (source_mac.is_some() || !ip.dst.is_multicast()) {
                    self.stats.invalid += 1;
                    return;
                }
                if !self.owns(&target) {
                    self.stats.ignored += 1;
                    return;
                }
                // The asker wants to talk to us: it is a neighbour (§7.2.3).
                let reply_mac = match source_mac {
                    Some(m) if !dad => {
                        self.learn(ip.src, m, false);
                        m.0
                    }
                    _ if dad => Ipv6Address::LINK_LOCAL_ALL_NODES.multicast_mac().0,
                    _ => eth_src.0,
                };
                let (dst, solicited) = if dad {
                    (Ipv6Address::LINK_LOCAL_ALL_NODES, false)
                } else {
                    (ip.src, true)
                };
                let na = Icmpv6Repr::NeighborAdvert {
                    flags: NaFlags {
                        router: false,
                        solicited,
                        override_: true,
                    },
                    target,
                    target_mac: Some(MacAddress(self.mac)),
                };
                if send_icmpv6(tx, reply_mac, self.mac, target, dst, NDP_HOP_LIMIT, &na) {
                    self.stats.ns_answered += 1;
                } else {
                    self.stats.tx_failed += 1;
                }
            }
            Icmpv6Repr::NeighborAdvert {
                flags,
                target,
                target_mac,
            } => {
                if flags.solicited && ip.dst.is_multicast() {
                    self.stats.invalid += 1;
                    return;
                }
                let k = target.to_u128();
                // RFC 4861 §7.2.5: an advertisement without the Override flag does not
                // replace a known, different link-layer address (it fills a pending one).
                let keeps = |mac: &MacAddress, e: Option<&Entry>| {
                    !flags.override_ && e.is_some_and(|e| e.mac != mac.0)
                };
                match target_mac {
                    Some(mac) if keeps(&mac, self.cache.get(&k)) => self.stats.ignored += 1,
                    Some(mac) if self.cache.contains(&k) || self.cache.is_wanted(&k) => {
                        self.learn(target, mac, false)
                    }
                    _ => self.stats.ignored += 1,
                }
            }
            Icmpv6Repr::RouterAdvert(ra) => {
                if !ip.src.is_link_local() {
                    self.stats.invalid += 1;
                    return;
                }
                self.stats.ra_seen += 1;
                let mac = ra.source_mac.unwrap_or(eth_src);
                // (any host can advertise: its entry is the node's choice only once the
                // node follows it, `note`)
                self.learn(ip.src, mac, false);
                if ra.router_lifetime > 0 {
                    self.router = Some((ip.src, mac.0));
                } else {
                    if self.router.is_some_and(|(r, _)| r == ip.src) {
                        self.router = None;
                    }
                    self.withdrawn = Some(ip.src);
                }
            }
            _ => self.stats.ignored += 1,
        }
    }

    /// Sends a solicitation for `target` from `from` to its solicited-node group; the
    /// advertisement that answers is learned.
    pub fn request<S: TxSink>(
        &mut self,
        from: Ipv6Address,
        target: Ipv6Address,
        tx: &mut S,
    ) -> bool {
        self.request_to(from, target, None, tx)
    }

    /// [`request`](Self::request) to `to`'s MAC and `target` itself where given (RFC 4861
    /// §7.3.3's unicast probe of a known neighbour), else to the solicited-node group.
    pub fn request_to<S: TxSink>(
        &mut self,
        from: Ipv6Address,
        target: Ipv6Address,
        to: Option<[u8; 6]>,
        tx: &mut S,
    ) -> bool {
        self.want(&target);
        let ns = Icmpv6Repr::NeighborSolicit {
            target,
            source_mac: Some(MacAddress(self.mac)),
        };
        let ok = match to {
            Some(mac) => send_icmpv6(tx, mac, self.mac, from, target, NDP_HOP_LIMIT, &ns),
            None => self.send_to_group(from, target.solicited_node(), &ns, tx),
        };
        let st = &mut self.stats;
        count_tx(ok, &mut st.ns_sent, &mut st.tx_failed)
    }

    /// Sends the NDP message `m` from `from` to the multicast `group` (its Ethernet group
    /// address, hop limit 255).
    fn send_to_group<S: TxSink>(
        &self,
        from: Ipv6Address,
        group: Ipv6Address,
        m: &Icmpv6Repr<'_>,
        tx: &mut S,
    ) -> bool {
        let dmac = group.multicast_mac().0;
        send_icmpv6(tx, dmac, self.mac, from, group, NDP_HOP_LIMIT, m)
    }

    /// Sends a router solicitation from `from` to all routers (ff02::2, RFC 4861 §6.3.7,
    /// with our link-layer address); the advertisement that answers names the default
    /// router ([`router`](Self::router)).
    pub fn solicit_router<S: TxSink>(&mut self, from: Ipv6Address, tx: &mut S) -> bool {
        let rs = Icmpv6Repr::RouterSolicit {
            source_mac: Some(MacAddress(self.mac)),
        };
        let ok = self.send_to_group(from, Ipv6Address::LINK_LOCAL_ALL_ROUTERS, &rs, tx);
        let st = &mut self.stats;
        count_tx(ok, &mut st.rs_sent, &mut st.tx_failed)
    }

    /// Announces `ip` with an unsolicited advertisement to all nodes (override set, so
    /// neighbours update their caches: RFC 4861 §7.2.6).
    pub fn announce<S: TxSink>(&mut self, ip: Ipv6Address, tx: &mut S) -> bool {
        let na = Icmpv6Repr::NeighborAdvert {
            flags: NaFlags {
                router: false,
                solicited: false,
                override_: true,
            },
            target: ip,
            target_mac: Some(MacAddress(self.mac)),
        };
        let ok = self.send_to_group(ip, Ipv6Address::LINK_LOCAL_ALL_NODES, &na, tx);
        let st = &mut self.stats;
        count_tx(ok, &mut st.na_unsolicited_sent, &mut st.tx_failed)
    }
}

/// Counts a frame in `sent` if `ok` (it went out), else in `failed`; returns `ok`.
fn count_tx(ok: bool, sent: &mut u64, failed: &mut u64) -> bool {
    *if ok { sent } else { failed } += 1;
    ok
}

#[cfg(test)]
mod tests {
    use super::*;
    use squall_wire::{parse_frame, Icmpv6Packet, RouterAdvert, L3, L4};

    const A: [u8; 6] = [2, 0, 0, 0, 0, 0xa];
    const B: [u8; 6] = [2, 0, 0, 0, 0, 0xb];

    fn ip(s: &str) -> Ipv6Address {
        s.parse().unwrap()
    }

    fn owned() -> Owned6 {
        let mut o = Owned6::default();
        o.add(ip("2001:db8::100").to_u128(), ip("2001:db8::1ff").to_u128());
        o
    }

    use crate::testing::Frames;

    /// A frame from B carrying `m` between `src` and `dst`.
    fn frame(src: Ipv6Address, dst: Ipv6Address, hl: u8, m: &Icmpv6Repr<'_>) -> Vec<u8> {
        let mut b = vec![0u8; 200];
        let dmac = if dst.is_multicast() {
            dst.multicast_mac().0
        } else {
            A
        };
        let n = emit_icmpv6_frame(&mut b, dmac, B, src, dst, hl, m).unwrap();
        b.truncate(n);
        b
    }

    /// Runs `f` through the node's NDP handler as the demux would.
    fn deliver(n: &mut Neighbours6, f: &[u8], out: &mut Frames) {
        let i = crate::ipv6::check(f).unwrap();
        let p = Icmpv6Packet::new_checked(&f[i.l4.0..i.l4.1]).unwrap();
        assert!(p.verify_checksum(&i.src, &i.dst));
        let m = Icmpv6Repr::parse(&p).unwrap();
        n.on_ndp(f, &i, &m, out);
    }

    fn parsed(f: &[u8]) -> (Ipv6Address, Ipv6Address, u8, Icmpv6Repr<'_>) {
        let fr = parse_frame(f).unwrap();
        assert!(fr.checksums_ok());
        let L3::Ipv6(ip, L4::Icmpv6(p)) = fr.l3 else {
            panic!("{fr:?}")
        };
        (
            ip.src(),
            ip.dst(),
            ip.hop_limit(),
            Icmpv6Repr::parse(&p).unwrap(),
        )
    }

    #[test]
    fn solicitations_for_owned_addresses_are_answered() {
        let mut n = Neighbours6::new(A, owned());
        let mut out = Frames::default();
        let peer = ip("2001:db8::1");
        let target = ip("2001:db8::1a0");
        let ns = Icmpv6Repr::NeighborSolicit {
            target,
            source_mac: Some(MacAddress(B)),
        };
        deliver(
            &mut n,
            &frame(peer, target.solicited_node(), 255, &ns),
            &mut out,
        );
        assert_eq!(n.stats.ns_answered, 1);
        assert_eq!(out.out.len(), 1);
        let f = &out.out[0];
        assert_eq!((&f[..6], &f[6..12]), (&B[..], &A[..]));
        let (s, d, hl, m) = parsed(f);
        assert_eq!((s, d, hl), (target, peer, 255));
        assert_eq!(
            m,
            Icmpv6Repr::NeighborAdvert {
                flags: NaFlags {
                    router: false,
                    solicited: true,
                    override_: true
                },
                target,
                target_mac: Some(MacAddress(A)),
            }
        );
        assert_eq!(n.lookup(&peer), Some(B), "the asker is learned");
        // not ours; a hop limit below 255; DAD (unspecified source) answered to all nodes
        let other = Icmpv6Repr::NeighborSolicit {
            target: ip("2001:db8::2ff"),
            source_mac: Some(MacAddress(B)),
        };
        deliver(
            &mut n,
            &frame(peer, target.solicited_node(), 255, &other),
            &mut out,
        );
        deliver(
            &mut n,
            &frame(peer, target.solicited_node(), 64, &ns),
            &mut out,
        );
        assert_eq!((n.stats.ignored, n.stats.invalid), (1, 1));
        let dad = Icmpv6Repr::NeighborSolicit {
            target,
            source_mac: None,
        };
        deliver(
            &mut n,
            &frame(Ipv6Address::UNSPECIFIED, target.solicited_node(), 255, &dad),
            &mut out,
        );
        assert_eq!(out.out.len(), 2);
        let (_, d, _, m) = parsed(&out.out[1]);
        assert_eq!(d, Ipv6Address::LINK_LOCAL_ALL_NODES);
        assert!(matches!(m, Icmpv6Repr::NeighborAdvert { flags, .. } if !flags.solicited));
    }

    #[test]
    fn resolution_learns_the_advertisement_and_static_entries_stay() {
        let mut n = Neighbours6::new(A, owned());
        let mut out = Frames::default();
        let me = ip("2001:db8::100");
        let gw = ip("2001:db8::1");
        assert!(n.request(me, gw, &mut out));
        let f = &out.out[0];
        assert_eq!(&f[..6], &[0x33, 0x33, 0xff, 0, 0, 1]);
        let (s, d, hl, m) = parsed(f);
        assert_eq!((s, d, hl), (me, gw.solicited_node(), 255));
        assert!(matches!(m, Icmpv6Repr::NeighborSolicit { target, .. } if target == gw));
        // an advertisement for someone we did not ask about teaches nothing
        let na = |t: Ipv6Address, mac: [u8; 6]| Icmpv6Repr::NeighborAdvert {
            flags: NaFlags {
                router: true,
                solicited: true,
                override_: true,
            },
            target: t,
            target_mac: Some(MacAddress(mac)),
        };
        deliver(
            &mut n,
            &frame(ip("2001:db8::9"), me, 255, &na(ip("2001:db8::9"), B)),
            &mut out,
        );
        assert_eq!(n.lookup(&ip("2001:db8::9")), None);
        deliver(&mut n, &frame(gw, me, 255, &na(gw, B)), &mut out);
        assert_eq!(n.lookup(&gw), Some(B));
        n.add_static(ip("2001:db8::2"), [2, 0, 0, 0, 0, 0xd]);
        deliver(
            &mut n,
            &frame(ip("2001:db8::2"), me, 255, &na(ip("2001:db8::2"), B)),
            &mut out,
        );
        assert_eq!(n.lookup(&ip("2001:db8::2")), Some([2, 0, 0, 0, 0, 0xd]));
        // a solicited advertisement to a multicast group is invalid
        deliver(
            &mut n,
            &frame(gw, Ipv6Address::LINK_LOCAL_ALL_NODES, 255, &na(gw, B)),
            &mut out,
        );
        assert_eq!(n.stats.invalid, 1);
        assert!(n.announce(me, &mut out));
        let (s, d, _, m) = parsed(out.out.last().unwrap());
        assert_eq!((s, d), (me, Ipv6Address::LINK_LOCAL_ALL_NODES));
        assert!(
            matches!(m, Icmpv6Repr::NeighborAdvert { flags, target, .. } if target == me && flags.override_ && !flags.solicited)
        );
    }

    #[test]
    fn a_router_advertisement_gives_the_gateway() {
        let mut n = Neighbours6::new(A, owned());
        let mut out = Frames::default();
        let r = ip("fe80::1");
        let ra = |lifetime| {
            Icmpv6Repr::RouterAdvert(RouterAdvert {
                hop_limit: 64,
                flags: 0,
                router_lifetime: lifetime,
                reachable_time: 0,
                retrans_timer: 0,
                source_mac: Some(MacAddress(B)),
                mtu: Some(1500),
                prefix: None,
            })
        };
        deliver(
            &mut n,
            &frame(r, Ipv6Address::LINK_LOCAL_ALL_NODES, 255, &ra(1800)),
            &mut out,
        );
        assert_eq!(n.router(), Some((r, B)));
        assert_eq!(n.lookup(&r), Some(B));
        // from a global address: invalid; lifetime 0: no longer a default router
        deliver(
            &mut n,
            &frame(
                ip("2001:db8::1"),
                Ipv6Address::LINK_LOCAL_ALL_NODES,
                255,
                &ra(1800),
            ),
            &mut out,
        );
        assert_eq!(n.stats.invalid, 1);
        deliver(
            &mut n,
            &frame(r, Ipv6Address::LINK_LOCAL_ALL_NODES, 255, &ra(0)),
            &mut out,
        );
        assert_eq!(n.router(), None);
        assert_eq!(n.stats.ra_seen, 2);
        assert!(out.out.is_empty());
    }

    #[test]
    fn solicited_node_groups_of_ranges() {
        let mut o = Owned6::default();
        o.add(
            0x2001_0db8 << 96 | 0xfff_fff0,
            0x2001_0db8 << 96 | 0x1000_0010,
        );
        assert!(o.has_low24(0xff_fff5));
        assert!(o.has_low24(0x00_0005));
        assert!(!o.has_low24(0x00_0020));
        o.add(1 << 100, (1 << 100) + (1 << 30));
        assert!(o.has_low24(0x12_3456));
    }
}
