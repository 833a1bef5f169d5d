//! The node: one core's port, TCP host, UDP layer, neighbours and counters, and the loop
//! turn that runs them: rx bursts -> demux (TCP runs to the host's prefetching burst
//! path; UDP, ARP, ICMP, IPv6 neighbour discovery and ICMPv6 to their handlers) -> TX flush and resume after each burst ->
//! TCP timers -> the apps' poll (their timers, new flows) -> TX flush and resume.

use std::time::{Duration, Instant};

use squall_port::{FrameBuf, Offload, OffloadFlags, Port};
use squall_tcp::{FlowId, TcpApp, TcpConfig, TcpHost, TxSink};
use squall_wire::{IpProtocol, Ipv4Address, Ipv6Address};

use crate::app::{NodeApp, NodeIo};
use crate::icmp::{on_icmp, send_error, ErrorBudget, ErrorKind, IcmpStats};
use crate::icmp6::{on_icmpv6, send_error6, Icmp6Stats};
use crate::ipv4::{self, Class, Ipv4Error};
use crate::ipv6::{self as ip6, Ipv6Error, Ipv6Stats};
use crate::neigh::{Neighbours, Owned, SharedMac};
use crate::neigh6::{Neighbours6, Owned6};
use crate::nud::{Nud, NudStats, Probe};
use crate::reasm::Reassembly;
use crate::redirect::{self, Redirect, RedirectStats};
use crate::sink::{tcp_offload, PortSink, TxFrames};
use crate::tap::TapRef;
use crate::udp::{self, UdpError, UdpLayer, UdpTx};

/// Rx frames taken per burst; the replies they cause are flushed after each burst.
pub const RX_BURST: usize = 32;
/// Runs of fewer received TCP frames than this skip the host's prefetching burst path.
const PREFETCH_MIN: usize = 4;
/// How often a worker tells the others of the port that it heard the next hop.
const HOP_PUBLISH_NS: u64 = 100_000_000;
/// Most rx bursts handled per turn, by default.
pub const MAX_RX_BURSTS: usize = 128;

/// What a node is besides its TCP host.
#[derive(Clone, Debug)]
pub struct NodeConfig {
    /// Addresses the node answers ARP and ICMP echo for.
    pub owned: Owned,
    /// Static neighbour entries (ip in host order, MAC).
    pub neighbours: Vec<(u32, [u8; 6])>,
    /// IPv6 addresses the node answers neighbour solicitations and ICMPv6 echo for.
    pub owned6: Owned6,
    /// Static IPv6 neighbour entries.
    pub neighbours6: Vec<(Ipv6Address, [u8; 6])>,
    /// Most UDP flows at once.
    pub max_udp_flows: usize,
    /// UDP flow-table entries allocated at start.
    pub udp_prealloc: usize,
    /// Most rx bursts of 32 frames handled per turn. Draining many amortises the timer
    /// check and the apps' poll over more frames (a node with a core of its own); one
    /// burst per turn keeps the frames and flows of a turn in cache when several nodes
    /// share one thread (both ends of a T-mem1 run).
    pub rx_bursts: usize,
    /// 802.1Q VLAN id: every frame sent carries the tag, and only frames received with
    /// it are taken (the tag is removed); others are counted in `rx_vlan_other`.
    pub vlan: Option<u16>,
}

impl Default for NodeConfig {
    fn default() -> Self {
        NodeConfig {
            owned: Owned::default(),
            neighbours: Vec::new(),
            owned6: Owned6::default(),
            neighbours6: Vec::new(),
            max_udp_flows: 0,
            udp_prealloc: 0,
            rx_bursts: MAX_RX_BURSTS,
            vlan: None,
        }
    }
}

/// Frame counters of a node (what the demux saw and dropped).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NodeCounters {
    /// Frames received.
    pub rx_frames: u64,
    /// IPv4/TCP frames handed to the TCP host.
    pub rx_tcp: u64,
    /// IPv4/UDP frames.
    pub rx_udp: u64,
    /// ICMP messages.
    pub rx_icmp: u64,
    /// ARP frames.
    pub rx_arp: u64,
    /// IPv6 frames (details in the node's `ip6` counters).
    pub rx_ipv6: u64,
    /// ICMPv6 messages (neighbour discovery included).
    pub rx_icmpv6: u64,
    /// IP frames to an address the node does not own (ICMP, UDP, IPv6), or to another
    /// MAC.
    pub rx_not_ours: u64,
    /// IP packets with a protocol the node does not carry, ICMP and fragments in IPv4
    /// packets with a source route (RFC 7126 §4.3-4.4), and IPv6 extension headers to
    /// discard.
    pub rx_other_ip: u64,
    /// Neither IPv4, IPv6 nor ARP (LLDP, ...).
    pub rx_other_ether: u64,
    /// Truncated or malformed frames, and frames the port flagged with a bad checksum.
    pub rx_bad: u64,
    /// IP fragments (both families) for the node, handed to the reassembly (what became
    /// of them: the node's `reasm` counters).
    pub rx_fragments: u64,
    /// With a VLAN id configured: frames untagged or tagged with another id (dropped).
    pub rx_vlan_other: u64,
    /// Frames taken in from other workers (software redirect; also in `rx_frames`).
    pub rx_redirected: u64,
    /// Moves of the next hop another worker of the port heard, followed here
    /// (`share_next_hop`; the ones heard here are the neighbour caches' `next_hop_moved`).
    pub next_hop_followed: u64,
    /// Turns that did something.
    pub busy_turns: u64,
    /// Turns.
    pub turns: u64,
}

/// One core's network node over port `P`.
pub struct Node<P: Port> {
    pub port: P,
    pub tcp: TcpHost,
    pub udp: UdpLayer,
    pub neigh: Neighbours,
    pub neigh6: Neighbours6,
    pub icmp: IcmpStats,
    pub icmp6: Icmp6Stats,
    /// The rate of the ICMP errors the node sends (both families).
    icmp_budget: ErrorBudget,
    pub ip6: Ipv6Stats,
    /// The reassembly of the fragments of IPv4 and IPv6 datagrams.
    pub reasm: Reassembly,
    pub counters: NodeCounters,
    mac: [u8; 6],
    tx: TxFrames<P::Frame>,
    rxq: Vec<P::Frame>,
    opened: Vec<FlowId>,
    offload: Option<Offload>,
    /// The port reports receive checksum results (frames it found bad are dropped here).
    rx_csum: bool,
    /// Whether the port vouches for checksums frame by frame
    /// ([`OffloadFlags::RX_CSUM_PER_FRAME`]): the host then skips the frames it marked
    /// good ([`OffloadFlags::RX_L4_CSUM_GOOD`]).
    rx_per_frame: bool,
    /// Datagrams reassembled in the current receive burst, received after it.
    rebuilt: Vec<Vec<u8>>,
    /// Priority-tagged frames of the current burst with their tag removed, received
    /// after it as the port's own (`other_ether`).
    untagged: Vec<Vec<u8>>,
    /// The host's receive checksum setting as configured (before the port's offloads),
    /// for reassembled datagrams (no port vouched for them).
    rebuilt_verify: bool,
    /// The host's receive checksum setting after the port's offloads.
    rx_verify: bool,
    /// TCP flows still waiting for TX frames after the last resume.
    tx_waiting: usize,
    rx_bursts: usize,
    vlan: Option<u16>,
    /// Software redirect of other workers' frames (ports without steering).
    redirect: Option<Redirect>,
    /// The device's RSS, on a port that steers every flow to its queue: the port's frames
    /// are not redirected, only reassembled datagrams (their fragments are hashed on the
    /// address pair), to the worker of the queue their 4-tuple names.
    rss_owner: Option<squall_port::rss::RssSteer>,
    /// The last turn did something.
    progressed: bool,
    /// The IPv4 next hop whose ARP entry the next-hop MAC follows (`follow_next_hop`).
    next_hop4: Option<u32>,
    /// The IPv6 next hop whose neighbour entry the next-hop MAC follows
    /// (`follow_next_hop6`).
    next_hop6: Option<Ipv6Address>,
    /// The next-hop MAC the workers of the port share, and the generation of it this
    /// node sends to (`share_next_hop`).
    shared_hop: SharedHop,
    /// The followed next hop's reachability, where this node probes it
    /// (`probe_next_hop`), and the addresses it asks from.
    nud: Option<Nud>,
    nud_from: (Option<u32>, Option<Ipv6Address>),
    /// When this node last heard the followed next hop (a frame from its MAC, its ARP or
    /// neighbour discovery), and the last such time published to the workers sharing it.
    hop_seen: u64,
    hop_published: u64,
    /// The IPv6 next hop is the default router of a router advertisement: unreachable,
    /// another advertised router takes its place.
    next_hop6_router: bool,
    /// The followed IPv6 router withdrew (advertised router lifetime 0) and has not
    /// advertised itself again: the next router advertised takes its place.
    hop6_withdrew: bool,
    /// The count of the routers advertised to the workers sharing the next hop
    /// ([`SharedMac::adverts`]) this node last looked at.
    adverts_seen: u32,
}

impl<P: Port> Drop for Node<P> {
    /// Every frame the node still holds goes back to its port before the port itself is
    /// dropped: a port whose frames are still out must keep its memory (the mem wire's
    /// pools, DPDK's mempools), which a long-lived process that drops nodes (the daemon,
    /// one run after another) would otherwise never get back.
    fn drop(&mut self) {
        self.release_frames();
    }
}

/// The next hop the workers of a port share, and the generation of it a node sends to.
type SharedHop = Option<(std::sync::Arc<SharedMac>, u8)>;

/// Sends every frame to `mac` from now on if it is another MAC than the next hop's
/// (the followed next hop moved), and tells the workers sharing it; whether it did.
fn move_next_hop(
    mac: Option<[u8; 6]>,
    udp: &mut UdpLayer,
    tcp: &mut TcpHost,
    shared: &mut SharedHop,
) -> bool {
    match mac {
        Some(m) if m != udp.tx.next_hop => {
            udp.tx.next_hop = m;
            tcp.set_gateway_mac(m);
            if let Some((s, gen)) = shared.as_mut() {
                *gen = s.moved(m);
            }
            true
        }
        _ => false,
    }
}

/// [`move_next_hop`] when the followed next hop's own entry changed from one MAC to
/// another (`before` -> `after`): learning a first entry is no move, nor holding an old
/// one that a move heard by another worker left behind.
fn entry_moved(
    before: Option<[u8; 6]>,
    after: Option<[u8; 6]>,
    udp: &mut UdpLayer,
    tcp: &mut TcpHost,
    shared: &mut SharedHop,
) -> bool {
    before.is_some() && after != before && move_next_hop(after, udp, tcp, shared)
}

/// Records in `seen` that the followed next hop was heard at `now` when the neighbour
/// frame `d` (ARP, neighbour discovery) comes from its MAC `hop`, or `says` it is at
/// that MAC (an ARP sender, or an advertisement from its address, whose link-layer
/// address may differ from the frame's source: a virtual router's).
#[inline]
fn heard_hop(seen: &mut u64, d: &[u8], hop: [u8; 6], says: bool, now: u64) {
    if says || d.get(6..12) == Some(&hop[..]) {
        *seen = now;
    }
}

/// When the next hop was last heard: here (`seen`), or by another worker sharing it.
fn heard_last(seen: u64, shared: &SharedHop) -> u64 {
    seen.max(shared.as_ref().map_or(0, |s| s.0.seen()))
}

/// The router just advertised (`advert`: address, MAC), where it takes the place of the
/// followed IPv6 default router `hop6` because that one is lost (every unicast probe
/// unanswered, not heard since `heard`) or `withdrew` (it advertised router lifetime 0,
/// RFC 4861 §6.3.4-6.3.6): it becomes the followed one (its entry noted), its
/// reachability starts afresh, and its MAC is returned (a replaced router comes with
/// another link-local address).
fn router_taking_over(
    nud: &mut Option<Nud>,
    hop6: &mut Option<Ipv6Address>,
    neigh6: &mut Neighbours6,
    advert: Option<(Ipv6Address, [u8; 6])>,
    (heard, withdrew): (u64, bool),
    now: u64,
) -> Option<[u8; 6]> {
    // (a withdrawal needs no reachability watch to be heard)
    if !withdrew && !nud.as_ref().is_some_and(|n| n.lost(heard)) {
        return None;
    }
    let (r, mac) = advert.filter(|r| Some(r.0) != *hop6)?;
    *hop6 = Some(r);
    neigh6.note(r, mac);
    if let Some(n) = nud.as_mut() {
        n.restart(now);
    }
    Some(mac)
}

/// Marks the path that calls it as rarely taken: the compiler lays it out of the hot
/// code (reassembled datagrams, moves of the next hop, reassembly timeouts).
#[cold]
#[inline(never)]
fn cold() {}

/// A frame neither IPv4, IPv6 nor ARP: a priority-tagged one (802.1Q, VLAN id 0: an
/// untagged frame with a priority, as DCB links send them; a node with a VLAN of its own
/// dropped it before) is received again without the tag, a copy (rare); others counted.
#[cold]
#[inline(never)]
fn other_ether(d: &[u8], counters: &mut NodeCounters, untagged: &mut Vec<Vec<u8>>) {
    if !priority_tagged(d) {
        counters.rx_other_ether += 1;
        return;
    }
    let mut f = Vec::with_capacity(d.len() - 4);
    f.extend_from_slice(&d[..12]);
    f.extend_from_slice(&d[16..]);
    untagged.push(f);
}

/// Whether an IPv4 datagram is kept from every app (counted): RFC 1122 §3.2.1.3, none
/// from a group, broadcast or loopback source or to such an address (a reply would come
/// from it); §3.3.6, none to a unicast address that came as a link-layer broadcast
/// (`link_broadcast`); and on a node with addresses of its own none to another.
#[inline(never)]
fn udp4_refused(
    dg: &udp::Datagram<'_>,
    link_broadcast: bool,
    neigh: &Neighbours,
    neigh6: &Neighbours6,
    counters: &mut NodeCounters,
    stats: &mut udp::UdpStats,
) -> bool {
    if !udp::v4_deliverable(dg.src, dg.dst) || link_broadcast {
        stats.rx_bad_addr += 1;
        return true;
    }
    if !neigh.owns(dg.dst) && owns_any(neigh, neigh6) {
        counters.rx_not_ours += 1;
        return true;
    }
    false
}

/// Whether frame `d` carries an 802.1Q tag of VLAN id 0 (a priority tag) and more.
fn priority_tagged(d: &[u8]) -> bool {
    d.len() > 18 && d[12..14] == [0x81, 0x00] && u16::from_be_bytes([d[14], d[15]]) & 0x0fff == 0
}

/// Whether the node was given addresses of its own (either family): only then is a
/// datagram to another unicast address not its (without any, it takes every address its
/// apps serve, as the TCP host does).
fn owns_any(n: &Neighbours, n6: &Neighbours6) -> bool {
    !n.owned().0.is_empty() || !n6.owned().0.is_empty()
}

/// Whether an app of the node accepts flows on local `port` of protocol `proto` (TCP 6,
/// UDP 17): the redirect's rule for whose flow a frame is.
fn serves<A: NodeApp>(app: &A, proto: u8, port: u16) -> bool {
    if proto == 6 {
        app.owns_tcp_port(port)
    } else {
        app.owns_udp_port(port)
    }
}

/// Hands received TCP frames to the host: a few one by one, more as a burst (prefetching
/// pays off only when there are frames to overlap).
#[inline]
fn tcp_rx<A: TcpApp, S: TxSink>(
    host: &mut TcpHost,
    now: u64,
    frames: &[&[u8]],
    app: &mut A,
    tx: &mut S,
) {
    if frames.len() >= PREFETCH_MIN {
        host.rx_burst(now, frames, app, tx);
    } else {
        for f in frames {
            host.rx(now, f, app, tx);
        }
    }
}

impl<P: Port> Node<P> {
    /// A node over `port` with a TCP host built from `tcp`. Where the port offloads TCP
    /// checksums (its capabilities say so) the host leaves them to it and each TCP frame
    /// carries the offload request; where it verifies them on receive, the host does not.
    pub fn new(port: P, mut tcp: TcpConfig, cfg: NodeConfig, now: u64) -> Self {
        let mtu = port.caps().mtu;
        let caps = port.caps().offloads;
        let rebuilt_verify = tcp.rx_checksum;
        if caps.contains(OffloadFlags::TX_TCP_CSUM) {
            tcp.tx_checksum = false;
        }
        if caps.contains(OffloadFlags::RX_L4_CSUM_GOOD) {
            tcp.rx_checksum = false;
        }
        let offload = (!tcp.tx_checksum).then(tcp_offload);
        let rx_verify = tcp.rx_checksum;
        let (mac, next_hop) = (tcp.mac, tcp.gateway_mac);
        let mut host = TcpHost::new(tcp, now);
        // A segment for no connection is answered only on our addresses.
        host.set_owned(&cfg.owned.0, &cfg.owned6.0);
        let mut neigh = Neighbours::new(mac, cfg.owned);
        for &(ip, m) in &cfg.neighbours {
            neigh.add_static(ip, m);
        }
        let mut neigh6 = Neighbours6::new(mac, cfg.owned6);
        for &(ip, m) in &cfg.neighbours6 {
            neigh6.add_static(ip, m);
        }
        Node {
            port,
            tcp: host,
            udp: UdpLayer::new(
                cfg.max_udp_flows,
                cfg.udp_prealloc,
                UdpTx {
                    mac,
                    next_hop,
                    mtu: usize::from(mtu),
                },
            ),
            neigh,
            neigh6,
            icmp: IcmpStats::default(),
            icmp6: Icmp6Stats::default(),
            icmp_budget: ErrorBudget::default(),
            ip6: Ipv6Stats::default(),
            reasm: Reassembly::default(),
            counters: NodeCounters::default(),
            mac,
            tx: TxFrames::new(cfg.vlan),
            rxq: Vec::with_capacity(RX_BURST),
            opened: Vec::with_capacity(64),
            offload,
            rx_csum: caps.contains(OffloadFlags::RX_L4_CSUM_GOOD)
                || caps.contains(OffloadFlags::RX_CSUM_PER_FRAME),
            // (only where the host verifies at all: not where the port verifies every
            // frame, nor where the configuration turned verification off)
            rx_per_frame: rx_verify && caps.contains(OffloadFlags::RX_CSUM_PER_FRAME),
            rebuilt: Vec::new(),
            untagged: Vec::new(),
            rebuilt_verify,
            rx_verify,
            tx_waiting: 0,
            rx_bursts: cfg.rx_bursts.max(1),
            vlan: cfg.vlan.map(|v| v & 0x0fff),
            redirect: None,
            rss_owner: None,
            progressed: false,
            next_hop4: None,
            next_hop6: None,
            shared_hop: None,
            nud: None,
            nud_from: (None, None),
            hop_seen: 0,
            hop_published: 0,
            next_hop6_router: false,
            hop6_withdrew: false,
            adverts_seen: 0,
        }
    }

    /// Sets (or clears) the 802.1Q VLAN id of the node's frames (see [`NodeConfig::vlan`]).
    pub fn set_vlan(&mut self, vlan: Option<u16>) {
        self.vlan = vlan.map(|v| v & 0x0fff);
        self.tx.vlan = self.vlan;
    }

    /// Makes this node one worker of a redirect mesh ([`crate::redirect`]): received
    /// TCP/UDP frames of flows another worker owns go to it, and frames redirected here
    /// are taken in every turn.
    pub fn set_redirect(&mut self, r: Redirect) {
        self.redirect = Some(r);
    }

    /// On a port whose device steers each flow to its worker's queue by RSS (`steer`),
    /// with the ends `r` of a mesh: only reassembled datagrams are redirected, to the
    /// worker of their RSS queue (a datagram's fragments land on the queue of its address
    /// pair, which need not be its flow's).
    pub fn set_rss_redirect(&mut self, r: Redirect, steer: squall_port::rss::RssSteer) {
        self.redirect = Some(r);
        self.rss_owner = Some(steer);
    }

    /// Redirect counters, if the node is part of a mesh.
    pub fn redirect_stats(&self) -> Option<RedirectStats> {
        self.redirect.as_ref().map(|r| r.stats)
    }

    /// TCP flows waiting for TX frames after the last turn.
    pub fn tx_waiting(&self) -> usize {
        self.tx_waiting
    }

    /// A handle for acting outside a turn (e.g. cutting every flow at the end of a run);
    /// call [`Node::flush`] afterwards.
    pub fn io<'a>(&'a mut self, now: u64, tap: Option<TapRef<'a>>) -> NodeIo<'a, P> {
        NodeIo::new(
            now,
            &mut self.tcp,
            &mut self.udp,
            PortSink::new(&mut self.port, &mut self.tx, tap, now, self.offload),
            &mut self.opened,
            self.tx_waiting,
        )
    }

    /// Hands queued frames to the port; returns how many it took.
    pub fn flush(&mut self) -> usize {
        if self.tx.out.is_empty() {
            0
        } else {
            self.port.tx_burst(&mut self.tx.out)
        }
    }

    /// Hands the queued frames to the port, then lets flows that stopped on an empty TX
    /// pool continue with the frames that came back (`TcpHost::tx_resume`). Returns true
    /// if the port took frames or a resumed flow wrote some: waiting on a port that
    /// takes nothing (its ring full) is not work.
    fn flush_resume(&mut self, now: u64, tap: Option<TapRef<'_>>) -> bool {
        let sent = self.flush();
        let mut sink = PortSink::new(&mut self.port, &mut self.tx, tap, now, self.offload);
        let queued = sink.tx.out.len();
        self.tx_waiting = self.tcp.tx_resume(now, &mut sink);
        sent > 0 || self.tx.out.len() > queued
    }

    /// One turn of the loop at time `now` for `app`; `tap` sees every frame sent.
    /// Returns true if anything happened.
    pub fn turn<A: NodeApp>(&mut self, now: u64, app: &mut A, mut tap: Option<TapRef<'_>>) -> bool {
        let mut work = false;
        self.counters.turns += 1;
        self.port.set_time(now);
        // A move of the next hop another worker of the port saw.
        if let Some((s, gen)) = self.shared_hop.as_mut() {
            if let Some((g, mac)) = s.current().filter(|c| c.0 != *gen) {
                cold();
                *gen = g;
                if move_next_hop(Some(mac), &mut self.udp, &mut self.tcp, &mut None) {
                    self.counters.next_hop_followed += 1;
                    // (heard at that MAC by another worker)
                    self.hop_seen = now;
                }
            }
        }
        app.begin_turn(now);
        for _ in 0..self.rx_bursts {
            let n = self.port.rx_burst(&mut self.rxq, RX_BURST);
            if n == 0 {
                break;
            }
            work = true;
            if let Some(vid) = self.vlan {
                self.untag_rx(vid);
            }
            // A frame from the next hop's MAC says it is there (the first of each burst
            // is looked at: where it is the only sender, every burst's is).
            if self.next_hop4.is_some() || self.next_hop6.is_some() {
                let hop = &self.udp.tx.next_hop[..];
                if self.rxq.first().and_then(|f| f.data().get(6..12)) == Some(hop) {
                    self.hop_seen = now;
                }
            }
            if self.redirect.is_some() && self.rss_owner.is_none() {
                self.redirect_out(app);
            }
            self.rx_frames(now, app, tap.as_deref_mut());
            // A capture on a real port sees the arrivals after they were processed (a
            // tracer may have chosen a flow at its SYN).
            if let Some(t) = tap.as_deref_mut() {
                if t.wants_rx() {
                    for f in self.rxq.iter() {
                        t.frame_rx(now, f.data());
                    }
                }
            }
            self.port.release_all(&mut self.rxq);
            let _ = self.flush_resume(now, tap.as_deref_mut());
            if n < RX_BURST {
                break;
            }
        }
        if self.redirect.is_some() {
            work |= self.redirect_in(now, app, tap.as_deref_mut());
            work |= self.whole_in(now, app, tap.as_deref_mut());
        }
        // The next hop heard: the other workers are told (at most every 100 ms).
        if self.hop_seen.saturating_sub(self.hop_published) >= HOP_PUBLISH_NS {
            if let Some((s, _)) = self.shared_hop.as_ref() {
                s.saw(self.hop_seen);
            }
            self.hop_published = self.hop_seen;
        }
        // A router advertised on another worker's queue, where this node probes a default
        // router: it may take the place of a lost one.
        if self.next_hop6_router && self.nud.is_some() {
            self.router_advertised_elsewhere(now);
        }
        // The next hop went unheard: probe it.
        if self.nud.as_ref().is_some_and(|n| n.due(now)) {
            cold();
            self.probe_due(now, tap.as_deref_mut());
        }
        // Datagrams whose fragments did not all come in time.
        self.reasm.expire(now);
        work |= self.reassembly_timeouts(now, tap.as_deref_mut());
        // TCP timers.
        if self.tcp.next_timer().is_some_and(|t| t <= now) {
            work = true;
            let mut sink = PortSink::new(
                &mut self.port,
                &mut self.tx,
                tap.as_deref_mut(),
                now,
                self.offload,
            );
            self.tcp.poll(now, app, &mut sink);
        }
        // The apps' own work.
        {
            let mut io = self.io(now, tap.as_deref_mut());
            work |= app.poll(&mut io);
        }
        // Transmit, then resume flows that waited for frames (and send what they wrote).
        work |= self.flush_resume(now, tap);
        work |= self.flush() > 0;
        self.progressed = work;
        self.counters.busy_turns += u64::from(work);
        work
    }

    /// Sends "fragment reassembly time exceeded" for the datagrams that timed out with
    /// their first fragment in (RFC 1122 §3.3.2, RFC 8200 §4.5), quoting it; true if any.
    fn reassembly_timeouts(&mut self, now: u64, tap: Option<TapRef<'_>>) -> bool {
        if !self.reasm.has_expired() {
            return false;
        }
        cold();
        let firsts = self.reasm.take_expired();
        let kind = ErrorKind::ReassemblyTimeout;
        let mut sink = PortSink::new(&mut self.port, &mut self.tx, tap, now, self.offload);
        let b = &mut self.icmp_budget;
        for d in &firsts {
            if let Ok(ip) = ipv4::check_fragment(d) {
                let from_us = self.neigh.owns(ip.src);
                send_error(
                    kind,
                    d,
                    &ip,
                    from_us,
                    self.mac,
                    &mut self.icmp,
                    b,
                    now,
                    &mut sink,
                );
            } else if let Ok(i) = ip6::check(d) {
                let from_us = self.neigh6.owns(&i.src);
                send_error6(
                    kind,
                    d,
                    &i,
                    from_us,
                    self.mac,
                    &mut self.icmp6,
                    b,
                    now,
                    &mut sink,
                );
            }
        }
        true
    }

    /// Removes our VLAN tag from the received burst; frames without it go back to the
    /// port, counted.
    fn untag_rx(&mut self, vid: u16) {
        let mut i = 0;
        while i < self.rxq.len() {
            if crate::sink::vlan_untag(&mut self.rxq[i], vid) {
                i += 1;
            } else {
                let f = self.rxq.remove(i);
                self.port.release(f);
                self.counters.rx_vlan_other += 1;
                self.counters.rx_frames += 1;
            }
        }
    }

    /// Without a VLAN of its own, the node takes priority-tagged frames (802.1Q tag of
    /// VLAN id 0: an untagged frame with a priority, as DCB links send them) with the tag
    /// removed; any other tag stays and the frame is not the node's. (Before the run; in
    /// it the demux takes them, off the hot path.)
    fn untag_priority(&mut self) {
        for f in self.rxq.iter_mut() {
            if priority_tagged(f.data()) {
                crate::sink::vlan_untag(f, 0);
            }
        }
    }

    /// Hands the received frames of flows other workers own to them (copies, counted);
    /// the frames go back to the port.
    fn redirect_out<A: NodeApp>(&mut self, app: &A) {
        let Some(r) = self.redirect.as_mut() else {
            return;
        };
        let (me, n) = (r.worker(), r.workers());
        let mut i = 0;
        while i < self.rxq.len() {
            match redirect::owner(self.rxq[i].data(), n, |p, l| serves(app, p, l)) {
                Some(k) if k != me => {
                    r.send(k, self.rxq[i].data(), self.rxq[i].offload().flags);
                    let f = self.rxq.remove(i);
                    self.port.release(f);
                }
                _ => i += 1,
            }
        }
        r.publish();
    }

    /// Takes in the frames other workers redirected here, a burst at a time, through the
    /// same demux as the port's own (in frames of the port's pool). True if any came.
    fn redirect_in<A: NodeApp>(
        &mut self,
        now: u64,
        app: &mut A,
        mut tap: Option<TapRef<'_>>,
    ) -> bool {
        let mut any = false;
        loop {
            let Some(r) = self.redirect.as_mut() else {
                return any;
            };
            let mut frames = std::mem::take(&mut self.rxq);
            self.port.alloc_tx(&mut frames, RX_BURST);
            let mut k = 0;
            r.receive(frames.len(), |d, flags| {
                if frames[k].fill(d).is_ok() {
                    frames[k].set_offload(Offload {
                        flags,
                        ..Offload::default()
                    });
                    k += 1;
                }
            });
            for f in frames.drain(k..) {
                self.port.release(f);
            }
            self.rxq = frames;
            if k == 0 {
                return any;
            }
            any = true;
            self.counters.rx_redirected += k as u64;
            self.rx_frames(now, app, tap.as_deref_mut());
            self.port.release_all(&mut self.rxq);
            let _ = self.flush_resume(now, tap.as_deref_mut());
            if k < RX_BURST {
                return any;
            }
        }
    }

    /// Receives the datagrams other workers reassembled for flows of this one (as
    /// datagrams reassembled here: checksums verified). True if any came.
    fn whole_in<A: NodeApp>(&mut self, now: u64, app: &mut A, tap: Option<TapRef<'_>>) -> bool {
        let Some(r) = self.redirect.as_mut() else {
            return false;
        };
        let n = r.receive_whole(&mut self.rebuilt);
        if n == 0 {
            return false;
        }
        self.counters.rx_redirected += n as u64;
        // (the port's frames of the turn are all handled: only these go through)
        debug_assert!(self.rxq.is_empty());
        self.rx_frames(now, app, tap);
        true
    }

    /// Demultiplexes the received burst in `rxq`. Runs of consecutive TCP frames go to
    /// the host as one burst; frames keep their arrival order.
    fn rx_frames<A: NodeApp>(&mut self, now: u64, app: &mut A, mut tap: Option<TapRef<'_>>) {
        let Node {
            port,
            tcp,
            udp,
            neigh,
            neigh6,
            icmp,
            icmp6,
            icmp_budget,
            ip6,
            counters,
            tx,
            rxq,
            opened,
            offload,
            rx_csum,
            rx_per_frame,
            mac,
            tx_waiting,
            next_hop4,
            next_hop6,
            shared_hop,
            nud,
            hop_seen,
            next_hop6_router,
            hop6_withdrew,
            reasm,
            rebuilt,
            untagged,
            redirect,
            rss_owner,
            rebuilt_verify,
            rx_verify,
            ..
        } = self;
        // A sink for one call (the borrows end with the call).
        macro_rules! sink {
            () => {
                PortSink::new(&mut *port, &mut *tx, tap.as_deref_mut(), now, *offload)
            };
        }
        // A parsed datagram (either family) to its flow's app or to whichever app takes it;
        // true if it was valid and none took it (its port is closed).
        macro_rules! udp_in {
            ($parsed:expr) => {{
                match $parsed {
                    Ok(dg) => {
                        let flow = udp.lookup(&dg.key());
                        let taken = {
                            let mut io = NodeIo::new(now, tcp, udp, sink!(), opened, *tx_waiting);
                            app.on_udp(&mut io, flow, &dg)
                        };
                        if taken {
                            udp.stats.rx_delivered += 1;
                        } else {
                            udp.stats.rx_no_port += 1;
                        }
                        // IPv6 ids of the datagram no flow took
                        udp.release_unused(&dg.key());
                        !taken
                    }
                    Err(UdpError::Checksum) => {
                        udp.stats.rx_bad_sum += 1;
                        false
                    }
                    Err(UdpError::Header) => {
                        udp.stats.rx_bad_hdr += 1;
                        false
                    }
                }
            }};
        }
        // Frame by frame, the port may vouch for a checksum (a local sender's frame with
        // the checksum left to an offload holds only a partial sum): a burst is a run of
        // frames of one verdict, and the host verifies the runs the port did not vouch for.
        let per_frame = *rx_per_frame;
        let trusted =
            |flags: OffloadFlags| per_frame && flags.contains(OffloadFlags::RX_L4_CSUM_GOOD);
        macro_rules! tcp_burst {
            ($frames:expr, $vouched:expr) => {{
                let frames = $frames;
                if per_frame {
                    tcp.set_rx_checksum(!$vouched);
                }
                tcp_rx(tcp, now, frames, app, &mut sink!());
                counters.rx_tcp += frames.len() as u64;
            }};
        }
        // The demux of a run of frames, each with its receive offload flags: runs of TCP
        // frames to the host's burst path, the rest one by one.
        macro_rules! demux {
            ($frames:expr, $rebuilt:expr) => {{
                let mut burst: [&[u8]; RX_BURST] = [&[]; RX_BURST];
                let mut k = 0;
                let mut vouched = false;
                for (d, flags) in $frames {
                    let flags: OffloadFlags = flags;
                    let class = ipv4::classify(d);
                    if class == Class::Tcp && ipv4::for_mac(d, mac) {
                        if *rx_csum && flags.contains(OffloadFlags::RX_CSUM_BAD) {
                            counters.rx_bad += 1;
                            continue;
                        }
                        let t = trusted(flags);
                        if t != vouched {
                            if k > 0 {
                                tcp_burst!(&burst[..k], vouched);
                                k = 0;
                            }
                            vouched = t;
                        }
                        burst[k] = d;
                        k += 1;
                        if k == RX_BURST {
                            tcp_burst!(&burst[..], vouched);
                            k = 0;
                        }
                        continue;
                    }
                    // A cold frame: the TCP frames before it go first.
                    if k > 0 {
                        tcp_burst!(&burst[..k], vouched);
                        k = 0;
                    }
                    match class {
                        Class::Arp => {
                            counters.rx_arp += 1;
                            let before = next_hop4.and_then(|ip| neigh.lookup(ip));
                            let sender = neigh.on_arp(d, &mut sink!());
                            // A next hop that announced a new MAC (a failover's gratuitous ARP):
                            // every frame goes there from now on. (Only a change of this
                            // node's entry: a worker that followed another's move may hold
                            // or learn the old one.)
                            let after = next_hop4.and_then(|ip| neigh.lookup(ip));
                            if entry_moved(before, after, udp, tcp, shared_hop) {
                                neigh.stats.next_hop_moved += 1;
                            }
                            // (an ARP whose sender is the next hop at its MAC)
                            let hop = udp.tx.next_hop;
                            let says = next_hop4.is_some_and(|ip| sender == Some((ip, hop)));
                            heard_hop(hop_seen, d, hop, says, now);
                        }
                        Class::Tcp
                        | Class::Udp
                        | Class::Icmp
                        | Class::OtherIp
                        | Class::Fragment
                            if !ipv4::for_mac(d, mac) =>
                        {
                            counters.rx_not_ours += 1;
                        }
                        Class::Udp => {
                            counters.rx_udp += 1;
                            let parsed = udp::parse_checked(d, !trusted(flags));
                            if let Ok(dg) = &parsed {
                                let bcast = d[..6] == crate::neigh::BROADCAST;
                                let (n4, n6) = (&*neigh, &*neigh6);
                                if udp4_refused(dg, bcast, n4, n6, counters, &mut udp.stats) {
                                    continue;
                                }
                            }
                            if udp_in!(parsed) {
                                // A closed port of one of our addresses: port unreachable.
                                if let Some(ip) =
                                    ipv4::check(d).ok().filter(|ip| neigh.owns(ip.dst))
                                {
                                    // (not from one of them: a looped or forged datagram)
                                    let from_us = neigh.owns(ip.src);
                                    let (b, s) = (&mut *icmp_budget, &mut sink!());
                                    let kind = ErrorKind::PortUnreachable;
                                    send_error(kind, d, &ip, from_us, *mac, icmp, b, now, s);
                                }
                            }
                        }
                        Class::Fragment => match ipv4::check_fragment(d) {
                            Ok(ip) if neigh.owns(ip.dst) => {
                                counters.rx_fragments += 1;
                                if let Some(whole) = reasm.push4(d, ip.ihl, now) {
                                    rebuilt.push(whole);
                                }
                            }
                            Ok(_) => counters.rx_not_ours += 1,
                            Err(Ipv4Error::SourceRoute) => counters.rx_other_ip += 1,
                            Err(_) => counters.rx_bad += 1,
                        },
                        Class::Icmp => {
                            counters.rx_icmp += 1;
                            match ipv4::check(d) {
                                Ok(ip) if neigh.owns(ip.dst) => {
                                    if let Some((q, e)) = on_icmp(d, &ip, *mac, icmp, &mut sink!())
                                    {
                                        tcp.icmp_error(now, false, &d[q], e, app, &mut sink!());
                                    }
                                }
                                Ok(_) => counters.rx_not_ours += 1,
                                Err(Ipv4Error::SourceRoute) => counters.rx_other_ip += 1,
                                Err(_) => icmp.bad += 1,
                            }
                        }
                        Class::Ipv6 => {
                            // (a reassembled packet's fragments were counted)
                            if !$rebuilt {
                                counters.rx_ipv6 += 1;
                                ip6.rx += 1;
                            }
                            let checked = if ip6::for_mac(d, mac) {
                                ip6::check(d)
                                    .map(|i| (ip6::for_node(&i.dst, neigh6.owned()), i))
                                    .map_err(Some)
                            } else {
                                Err(None)
                            };
                            match checked {
                                Ok((true, i)) if i.frag_at.is_some() => {
                                    counters.rx_fragments += 1;
                                    ip6.fragments += 1;
                                    let at = i.frag_at.unwrap_or_default();
                                    if let Some(whole) = reasm.push6(d, at, i.l4.1, now) {
                                        rebuilt.push(whole);
                                    }
                                }
                                Ok((true, i))
                                    if ($rebuilt || i.frag_header)
                                        && i.proto == IpProtocol::ICMPV6
                                        && d.get(i.l4.0)
                                            .is_some_and(|t| (133..=137).contains(t)) =>
                                {
                                    // Neighbour discovery in fragments, or behind an atomic
                                    // fragment header, is ignored (RFC 6980 §5): what RA-Guard
                                    // cannot see must not move the next hop.
                                    counters.rx_icmpv6 += 1;
                                    icmp6.ndp_fragmented += 1;
                                }
                                Ok((true, i)) if i.proto == IpProtocol::ICMPV6 => {
                                    counters.rx_icmpv6 += 1;
                                    let before = next_hop6.and_then(|ip| neigh6.lookup(&ip));
                                    if let Some((q, e)) =
                                        on_icmpv6(d, &i, *mac, icmp6, neigh6, &mut sink!())
                                    {
                                        tcp.icmp_error(now, true, &d[q], e, app, &mut sink!());
                                    }
                                    // The next hop advertised another MAC (a failover's
                                    // unsolicited advertisement with Override, RFC 4861 §7.2.6):
                                    // every frame goes there from now on (a change of this
                                    // node's entry, as for ARP).
                                    let after = next_hop6.and_then(|ip| neigh6.lookup(&ip));
                                    if entry_moved(before, after, udp, tcp, shared_hop) {
                                        neigh6.stats.next_hop_moved += 1;
                                    }
                                    // A default router gone (its unicast probes unanswered,
                                    // not heard since) when another router advertises
                                    // itself: the next hop becomes that one (a router
                                    // replaced comes with another link-local address).
                                    // (told to the workers sharing the next hop: the one
                                    // that probes may be another)
                                    if *next_hop6_router && d.get(i.l4.0) == Some(&134) {
                                        let heard = heard_last(*hop_seen, shared_hop);
                                        // The followed router withdrew: the default router
                                        // known (another's last advertisement, or the next
                                        // one) takes its place at once; unless it advertises
                                        // itself again first.
                                        let from_hop = *next_hop6 == Some(i.src);
                                        let current = neigh6.router();
                                        if neigh6.take_withdrawn() == Some(i.src) && from_hop {
                                            *hop6_withdrew = true;
                                        } else if from_hop && current.is_some_and(|r| r.0 == i.src)
                                        {
                                            *hop6_withdrew = false;
                                        }
                                        let withdrew = *hop6_withdrew;
                                        let advert = current.filter(|r| r.0 == i.src || withdrew);
                                        if let (Some((s, _)), Some((r, m))) =
                                            (shared_hop.as_ref(), advert)
                                        {
                                            s.advertised(r.0, m);
                                        }
                                        let taken = router_taking_over(
                                            nud,
                                            next_hop6,
                                            neigh6,
                                            advert,
                                            (heard, withdrew),
                                            now,
                                        );
                                        if taken.is_some() {
                                            *hop6_withdrew = false;
                                        }
                                        if move_next_hop(taken, udp, tcp, shared_hop) {
                                            neigh6.stats.next_hop_moved += 1;
                                        }
                                    }
                                    // (neighbour discovery from the next hop's address, its
                                    // entry at the MAC frames go to)
                                    let hop = udp.tx.next_hop;
                                    let says = *next_hop6 == Some(i.src)
                                        && neigh6.lookup(&i.src) == Some(hop);
                                    heard_hop(hop_seen, d, hop, says, now);
                                }
                                Ok((true, i)) if i.proto == IpProtocol::UDP => {
                                    counters.rx_udp += 1;
                                    // (as over IPv4: a group is no UDP destination here,
                                    // and a group, loopback or unspecified source none to
                                    // answer)
                                    if !udp::v6_deliverable(&i.src, &i.dst) {
                                        udp.stats.rx_bad_addr += 1;
                                        continue;
                                    }
                                    if udp_in!(udp.parse6_checked(d, &i, !trusted(flags)))
                                        && neigh6.owns(&i.dst)
                                    {
                                        // A closed port of one of our unicast addresses (not from
                                        // one of them: a looped or forged datagram).
                                        let from_us = neigh6.owns(&i.src);
                                        let (b, s) = (&mut *icmp_budget, &mut sink!());
                                        let kind = ErrorKind::PortUnreachable;
                                        send_error6(kind, d, &i, from_us, *mac, icmp6, b, now, s);
                                    }
                                }
                                Ok((true, i)) if i.proto == IpProtocol::TCP => {
                                    // behind extension headers (TCP right after the fixed
                                    // header took the burst path)
                                    counters.rx_tcp += 1;
                                    if per_frame {
                                        tcp.set_rx_checksum(!trusted(flags));
                                    }
                                    tcp.rx(now, d, app, &mut sink!());
                                }
                                Ok((true, _)) => {
                                    counters.rx_other_ip += 1;
                                    ip6.other_proto += 1;
                                }
                                Ok((false, _)) | Err(None) => {
                                    counters.rx_not_ours += 1;
                                    ip6.not_ours += 1;
                                }
                                Err(Some(e)) => {
                                    if e == Ipv6Error::Header {
                                        ip6.bad_header += 1;
                                        counters.rx_bad += 1;
                                    } else {
                                        ip6.ext_dropped += 1;
                                        counters.rx_other_ip += 1;
                                    }
                                }
                            }
                        }
                        Class::OtherIp => counters.rx_other_ip += 1,
                        Class::OtherEther => other_ether(d, counters, untagged),
                        Class::Bad | Class::Tcp => counters.rx_bad += 1,
                    }
                }
                if k > 0 {
                    tcp_burst!(&burst[..k], vouched);
                }
            }};
        }
        counters.rx_frames += rxq.len() as u64;
        demux!(rxq.iter().map(|f| (f.data(), f.offload().flags)), false);
        // Priority-tagged frames, untagged: the port's frames still (neighbour discovery
        // in them is taken; a tag within, a frame tagged twice, waits for the next burst).
        if !untagged.is_empty() {
            cold();
            let frames = std::mem::take(untagged);
            demux!(
                frames.iter().map(|d| (&d[..], OffloadFlags::default())),
                false
            );
        }
        // The datagrams the burst's fragments completed, received as frames of their own:
        // no port vouched for their checksums, the host verifies them (unless configured
        // not to verify at all). A whole datagram may itself be a fragment of an IPv6
        // datagram fragmented twice: a second round, no more.
        for _ in 0..2 {
            if rebuilt.is_empty() {
                break;
            }
            // (out of the burst's hot path)
            cold();
            let mut whole = std::mem::take(rebuilt);
            if let Some(r) = redirect.as_mut() {
                // (fragments stay where they arrive: the whole datagram goes to its owner)
                let (me, n) = (r.worker(), r.workers());
                let owner = |d: &[u8]| match &*rss_owner {
                    Some(s) => s.queue_of_frame(d),
                    None => redirect::owner(d, n, |p, l| serves(&*app, p, l)),
                };
                let mut mine = Vec::with_capacity(whole.len());
                for d in whole {
                    match owner(&d) {
                        Some(k) if k != me => r.send_whole(k, d),
                        _ => mine.push(d),
                    }
                }
                whole = mine;
            }
            tcp.set_rx_checksum(*rebuilt_verify);
            demux!(
                whole.iter().map(|d| (&d[..], OffloadFlags::default())),
                true
            );
            tcp.set_rx_checksum(*rx_verify);
        }
        rebuilt.clear();
        // The host's setting as configured, outside the received burst.
        if per_frame {
            tcp.set_rx_checksum(true);
        }
    }

    /// The earliest time this node or `app` has something to do (virtual-clock drivers):
    /// now if frames wait for the port, or flows wait for frames after a turn that moved.
    pub fn next_event<A: NodeApp>(&self, now: u64, app: &A) -> Option<u64> {
        if !self.tx.out.is_empty() || (self.tx_waiting > 0 && self.progressed) {
            return Some(now);
        }
        [
            self.tcp.next_timer(),
            self.port.next_event_ns(),
            app.next_event(now),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Gives every frame the node still holds back to the port.
    pub fn release_frames(&mut self) {
        self.port.release_all(&mut self.tx.spare);
        self.port.release_all(&mut self.tx.out);
        if let Some(f) = self.tx.cur.take() {
            self.port.release(f);
        }
        self.port.release_all(&mut self.rxq);
    }

    /// Sends a gratuitous ARP for the first address of every owned IPv4 range, and an
    /// unsolicited neighbour advertisement for the first of every owned IPv6 range.
    pub fn announce(&mut self, now: u64) {
        let firsts: Vec<u32> = self.neigh.owned().firsts().collect();
        let firsts6: Vec<u128> = self.neigh6.owned().firsts().collect();
        let mut sink = PortSink::new(&mut self.port, &mut self.tx, None, now, self.offload);
        for ip in firsts {
            self.neigh.announce(ip, &mut sink);
        }
        for ip in firsts6 {
            self.neigh6.announce(Ipv6Address::from_u128(ip), &mut sink);
        }
        self.flush();
    }

    /// Resolves `target`'s MAC (asking from `from`, host order), every 200 ms until
    /// `timeout`, before the run: ARP and neighbour discovery are answered meanwhile (the
    /// peer may ask first), every other frame is dropped (nothing runs yet).
    pub fn resolve(
        &mut self,
        from: u32,
        target: u32,
        timeout: Duration,
    ) -> Result<[u8; 6], String> {
        self.resolve_shared(from, target, timeout, true, &SharedMac::default())
    }

    /// [`Node::resolve`] by one of several workers of a port: the reply may reach any
    /// worker's queue, so each learns `target` from whatever ARP reaches it, publishes it
    /// in `shared`, and stops as soon as any worker has; only the worker with `ask` sends
    /// the requests.
    pub fn resolve_shared(
        &mut self,
        from: u32,
        target: u32,
        timeout: Duration,
        ask: bool,
        shared: &SharedMac,
    ) -> Result<[u8; 6], String> {
        self.neigh.want(target);
        self.resolve_with(
            timeout,
            shared,
            |n, _, sink| {
                if ask {
                    n.request(from, target, sink);
                }
            },
            |n, _| n.lookup(target).map(|m| (m, None)),
        )
        // (from another worker's queue: this node's entry too, so that a later answer
        // from another MAC is a move here as well)
        .inspect(|&m| self.neigh.note(target, m))
        .ok_or_else(|| {
            format!(
                "no ARP reply from {} within {:.1} s (give --peer-mac, or check the peer's address)",
                Ipv4Address(target.to_be_bytes()),
                timeout.as_secs_f64()
            )
        })
    }

    /// Resolves the IPv6 neighbour `target`'s MAC with neighbour solicitations from
    /// `from`, every 200 ms until `timeout` (as [`resolve`](Self::resolve)).
    pub fn resolve6(
        &mut self,
        from: Ipv6Address,
        target: Ipv6Address,
        timeout: Duration,
    ) -> Result<[u8; 6], String> {
        self.resolve6_shared(from, target, timeout, true, &SharedMac::default())
    }

    /// [`Node::resolve6`] by one of several workers of a port, as
    /// [`resolve_shared`](Self::resolve_shared): each worker learns `target` from the
    /// advertisement that reaches its queue and publishes it in `shared`; only the worker
    /// with `ask` solicits.
    pub fn resolve6_shared(
        &mut self,
        from: Ipv6Address,
        target: Ipv6Address,
        timeout: Duration,
        ask: bool,
        shared: &SharedMac,
    ) -> Result<[u8; 6], String> {
        self.neigh6.want(&target);
        self.resolve_with(
            timeout,
            shared,
            |_, n6, sink| {
                if ask {
                    n6.request(from, target, sink);
                }
            },
            |_, n6| n6.lookup(&target).map(|m| (m, None)),
        )
        .inspect(|&m| self.neigh6.note(target, m))
        .ok_or_else(|| {
            format!(
                "no neighbour advertisement from {target} within {:.1} s (give --peer-mac, or check the peer's address)",
                timeout.as_secs_f64()
            )
        })
    }

    /// The IPv6 next hop when no gateway was given, whichever answers first: `target`
    /// itself (on the link: its advertisement answers our solicitations, sent every
    /// 200 ms), or the default router of a router advertisement (RFC 4861 §6.3.7: router
    /// solicitations from `from` to all routers at once and every 4 s, at most 3; an
    /// unsolicited advertisement counts as well); until `timeout`. `target` None (a
    /// server, whose peers are anywhere) waits for the router only. Shared by the workers of a port as
    /// [`resolve6_shared`](Self::resolve6_shared) is (only the one with `ask` sends).
    /// The error says what went unanswered; the caller names its options.
    pub fn next_hop6_shared(
        &mut self,
        from: Ipv6Address,
        target: Option<Ipv6Address>,
        timeout: Duration,
        ask: bool,
        shared: &SharedMac,
    ) -> Result<[u8; 6], String> {
        /// Turns of 200 ms between router solicitations (RTR_SOLICITATION_INTERVAL, 4 s).
        const RS_EVERY: u32 = 20;
        /// MAX_RTR_SOLICITATIONS.
        const RS_MAX: u32 = 3;
        if let Some(t) = target {
            self.neigh6.want(&t);
        }
        let mut turn = 0u32;
        self.resolve_with(
            timeout,
            shared,
            |_, n6, sink| {
                if ask {
                    if let Some(t) = target {
                        n6.request(from, t, sink);
                    }
                    if turn % RS_EVERY == 0 && turn / RS_EVERY < RS_MAX {
                        n6.solicit_router(from, sink);
                    }
                }
                turn += 1;
            },
            |_, n6| {
                target
                    .and_then(|t| n6.lookup(&t))
                    .map(|m| (m, None))
                    .or_else(|| n6.router().map(|(r, m)| (m, Some(r))))
            },
        )
        .inspect(|&m| {
            // Resolved by another worker through a router's advertisement: this node
            // takes that router too (it follows it, and probes it on worker 0).
            let mine = target.and_then(|t| self.neigh6.lookup(&t)) == Some(m)
                || self.neigh6.router().is_some_and(|r| r.1 == m);
            if let Some((r, rm)) = shared.resolved_router().filter(|r| !mine && r.1 == m) {
                self.neigh6.note_router(Ipv6Address(r), rm);
            }
        })
        .ok_or_else(|| {
            let s = timeout.as_secs_f64();
            match target {
                Some(t) => format!(
                    "no neighbour advertisement from {t} and no router advertisement within {s:.1} s"
                ),
                None => format!("no router advertisement within {s:.1} s"),
            }
        })
    }

    /// The resolution loop of [`resolve_shared`](Self::resolve_shared) and
    /// [`resolve6`](Self::resolve6): `ask` every 200 ms until `found` gives a MAC (then
    /// published in `shared`), another worker published one in `shared`, or `timeout`
    /// passes.
    fn resolve_with(
        &mut self,
        timeout: Duration,
        shared: &SharedMac,
        mut ask: impl FnMut(&mut Neighbours, &mut Neighbours6, &mut PortSink<'_, P>),
        found: impl Fn(&Neighbours, &Neighbours6) -> Option<([u8; 6], Option<Ipv6Address>)>,
    ) -> Option<[u8; 6]> {
        let t0 = Instant::now();
        let mut last: Option<Instant> = None;
        loop {
            if let Some((m, router)) = found(&self.neigh, &self.neigh6) {
                shared.set_resolved(m, router.map(|r| r.0));
                return Some(m);
            }
            if let Some(m) = shared.get() {
                return Some(m);
            }
            if t0.elapsed() >= timeout {
                return None;
            }
            let now = t0.elapsed().as_nanos() as u64;
            if last.map_or(true, |l: Instant| l.elapsed() >= Duration::from_millis(200)) {
                let mut sink = PortSink::new(&mut self.port, &mut self.tx, None, now, self.offload);
                ask(&mut self.neigh, &mut self.neigh6, &mut sink);
                last = Some(Instant::now());
            }
            let n = self.port.rx_burst(&mut self.rxq, RX_BURST);
            // With a VLAN, the answers come tagged, as every frame of the run.
            match self.vlan {
                Some(vid) => self.untag_rx(vid),
                None => self.untag_priority(),
            }
            let mut sink = PortSink::new(&mut self.port, &mut self.tx, None, now, self.offload);
            for f in self.rxq.iter() {
                let d = f.data();
                match ipv4::classify(d) {
                    Class::Arp => {
                        self.neigh.on_arp(d, &mut sink);
                    }
                    Class::Ipv6 if ip6::for_mac(d, &self.mac) => {
                        if let Ok(i) = ip6::check(d) {
                            // (nothing behind a fragment header: neighbour discovery in
                            // fragments is ignored, RFC 6980 §5, as in the run)
                            if i.proto == IpProtocol::ICMPV6
                                && !i.frag_header
                                && i.frag_at.is_none()
                                && ip6::for_node(&i.dst, self.neigh6.owned())
                            {
                                on_icmpv6(
                                    d,
                                    &i,
                                    self.mac,
                                    &mut self.icmp6,
                                    &mut self.neigh6,
                                    &mut sink,
                                );
                            }
                        }
                    }
                    _ => {}
                }
            }
            self.port.release_all(&mut self.rxq);
            self.flush();
            if n == 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }

    /// The MAC every frame is sent to now.
    pub fn next_hop(&self) -> [u8; 6] {
        self.udp.tx.next_hop
    }
    /// Sets the MAC every frame is sent to (the gateway or the directly connected peer).
    pub fn set_next_hop(&mut self, mac: [u8; 6]) {
        self.udp.tx.next_hop = mac;
        self.tcp.set_gateway_mac(mac);
    }
    /// Makes the next-hop MAC follow IPv4 neighbour `ip`'s ARP entry: when the next hop
    /// announces another MAC (the gratuitous ARP of a failover, RFC 5227 §3), frames go
    /// there from then on (`ArpStats::next_hop_moved`). A static entry never moves.
    pub fn follow_next_hop(&mut self, ip: u32) {
        self.next_hop4 = Some(ip);
    }
    /// Watches the reachability of the followed next hop (RFC 4861 §7.3, as Linux's NUD
    /// does for ARP too: [`crate::nud`]) from `now`: every worker following it records
    /// when it last heard it (a frame from its MAC, its ARP or neighbour discovery) and
    /// tells the others sharing it; unheard for `reachable_ns` (0: not watched; Linux: 30
    /// s, [`crate::nud::REACHABLE_NS`]) this node probes it at its MAC, then looks for it
    /// by broadcast, asking from `from4` (its ARP entry, `follow_next_hop`) or `from6`
    /// (its neighbour entry, `follow_next_hop6`; a default router that stays silent gives
    /// way to another one a router advertisement names, router solicitations going with
    /// the broadcast probes). An answer from another MAC moves the next hop there, as an
    /// announcement does. One worker of a port probes (the others follow its moves and
    /// report what they hear through [`share_next_hop`](Self::share_next_hop)); nothing
    /// is watched without a followed next hop (a static MAC).
    pub fn probe_next_hop(
        &mut self,
        now: u64,
        reachable_ns: u64,
        from4: Option<u32>,
        from6: Option<Ipv6Address>,
    ) {
        let v4 = self.next_hop4.is_some() && from4.is_some();
        let v6 = self.next_hop6.is_some() && from6.is_some();
        if (v4 || v6) && reachable_ns > 0 {
            self.nud = Some(Nud::new(now, reachable_ns));
            self.nud_from = (from4.filter(|_| v4), from6.filter(|_| v6));
        }
    }

    /// The next hop's reachability counters, where this node watches it.
    pub fn nud_stats(&self) -> Option<NudStats> {
        self.nud.as_ref().map(|n| n.stats)
    }

    /// The moves of the next hop heard here (announcements, answers to probes; ARP and
    /// neighbour discovery).
    pub fn next_hop_moves(&self) -> u64 {
        self.neigh.stats.next_hop_moved + self.neigh6.stats.next_hop_moved
    }

    /// [`router_taking_over`] for the last router the workers sharing the next hop heard
    /// advertised, when one was published since the last look.
    fn router_advertised_elsewhere(&mut self, now: u64) {
        let Some((s, _)) = self.shared_hop.as_ref() else {
            return;
        };
        let n = s.adverts();
        if n == self.adverts_seen {
            return;
        }
        cold();
        self.adverts_seen = n;
        let advert = s.router().map(|(r, m)| (Ipv6Address(r), m));
        let heard = heard_last(self.hop_seen, &self.shared_hop);
        let (nud, hop6, n6) = (&mut self.nud, &mut self.next_hop6, &mut self.neigh6);
        let taken = router_taking_over(nud, hop6, n6, advert, (heard, false), now);
        if move_next_hop(taken, &mut self.udp, &mut self.tcp, &mut self.shared_hop) {
            self.neigh6.stats.next_hop_moved += 1;
        }
    }

    /// Looks at the next hop when its reachability is due: heard (here or by another
    /// worker) recently enough, nothing; else the probe it asks for (IPv4 first where
    /// both families are followed).
    fn probe_due(&mut self, now: u64, tap: Option<TapRef<'_>>) {
        let heard = heard_last(self.hop_seen, &self.shared_hop);
        let Some(probe) = self.nud.as_mut().and_then(|n| n.tick(now, heard)) else {
            return;
        };
        let to = match probe {
            Probe::Unicast => Some(self.udp.tx.next_hop),
            Probe::Broadcast => None,
        };
        let mut sink = PortSink::new(&mut self.port, &mut self.tx, tap, now, self.offload);
        match (self.next_hop4, self.nud_from, self.next_hop6) {
            (Some(ip), (Some(from), _), _) => {
                self.neigh.request_to(from, ip, to, &mut sink);
            }
            (_, (_, Some(from)), Some(ip)) => {
                self.neigh6.request_to(from, ip, to, &mut sink);
                if to.is_none() && self.next_hop6_router {
                    // (another router may have taken its place: its advertisement says)
                    self.neigh6.solicit_router(from, &mut sink);
                }
            }
            _ => {}
        }
        self.flush();
    }

    /// Shares the next hop with the other workers of the port (`shared`, where they
    /// resolved it): a move one of them sees (a failover's announcement reaches only its
    /// queue) is followed by all at their next turn, and a move this node sees is
    /// published to them.
    pub fn share_next_hop(&mut self, shared: std::sync::Arc<SharedMac>) {
        // A MAC published since this node set its own (a move another worker heard in
        // between) is taken at the next turn.
        let gen = match shared.current() {
            Some((g, m)) if m == self.udp.tx.next_hop => g,
            Some((g, _)) => g.wrapping_sub(1),
            None => 0,
        };
        self.shared_hop = Some((shared, gen));
    }

    /// Makes the next-hop MAC follow IPv6 neighbour `ip`'s entry (the gateway, or the
    /// default router's link-local address): when it advertises another MAC (an
    /// unsolicited advertisement with the Override flag, RFC 4861 §7.2.6, or a router
    /// advertisement from another MAC), frames go there from then on
    /// (`NdpStats::next_hop_moved`). A static entry never moves.
    pub fn follow_next_hop6(&mut self, ip: Ipv6Address) {
        self.next_hop6 = Some(ip);
        self.next_hop6_router = false;
        self.hop6_withdrew = false;
    }
    /// [`follow_next_hop6`](Self::follow_next_hop6) of whichever neighbour resolution
    /// gave `mac`: `target` if its entry holds it, else the default router if its
    /// advertisement did (nothing is followed if neither does: a static MAC).
    pub fn follow_resolved_next_hop6(&mut self, target: Option<Ipv6Address>, mac: [u8; 6]) {
        let hop = match target {
            Some(t) if self.neigh6.lookup(&t) == Some(mac) => Some((t, false)),
            _ => self
                .neigh6
                .router()
                .filter(|r| r.1 == mac)
                .map(|r| (r.0, true)),
        };
        if let Some((h, router)) = hop {
            self.follow_next_hop6(h);
            self.next_hop6_router = router;
        }
    }
}
