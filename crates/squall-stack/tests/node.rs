//! Nodes over the in-memory wire: two apps on one node (a server on one port and a client
//! of the peer, on each side), ARP and ICMP echo answered by the node, resolution of a
//! neighbour, and frames the node does not carry counted and dropped.

use std::sync::Arc;
use std::time::Duration;

use squall_port::mem::{pair, MemConfig, MemPort};
use squall_port::Port;
use squall_stack::{
    redirect, NoApp, Node, NodeApp, NodeConfig, NodeIo, Owned, Owned6, Pair, SharedMac,
};
use squall_tcp::{BufId, CloseReason, Ctl, FlowId, OptsId, TcpApp, TcpConfig};
use squall_wire::{
    parse_frame, ArpOperation, ArpPacket, ArpRepr, Icmpv6Packet, Icmpv6Repr, Ipv4Address,
    Ipv6Address, MacAddress, NaFlags, L3, L4,
};

mod common;
use common::{
    arp_request_from, icmp6_frame, ip6, raw_frame, raw_rx, router_advert_from, udp_frame, IP6_A,
    IP_A, IP_B, MA, MB,
};

fn node(port: MemPort, mac: [u8; 6], peer: [u8; 6], ip: u32) -> Node<MemPort> {
    node_on_vlan(port, mac, peer, ip, None)
}

fn node_on_vlan(
    port: MemPort,
    mac: [u8; 6],
    peer: [u8; 6],
    ip: u32,
    vlan: Option<u16>,
) -> Node<MemPort> {
    let tcp = TcpConfig {
        mac,
        gateway_mac: peer,
        ..TcpConfig::default()
    };
    let a6 = ip6(IP6_A).to_u128();
    let cfg = NodeConfig {
        owned: Owned(vec![(ip, ip)]),
        // every node also owns 2001:db8::1 (the malformed-frame test reaches ICMPv6)
        owned6: Owned6(vec![(a6, a6)]),
        max_udp_flows: 16,
        vlan,
        ..NodeConfig::default()
    };
    Node::new(port, tcp, cfg, 0)
}

/// Answers every request on its port with one buffer; counts what it saw.
struct Server {
    port: u16,
    reply: BufId,
    len: u32,
    accepted: u32,
    requests: u32,
    closed: u32,
}

impl TcpApp for Server {
    fn on_connected(&mut self, ctl: &mut Ctl, _f: FlowId) {
        assert!(ctl.passive(), "a server got an active flow");
        assert_eq!(ctl.key().local_port, self.port, "a flow of another port");
        self.accepted += 1;
    }
    fn on_data(&mut self, ctl: &mut Ctl, _f: FlowId, _data: &[u8]) {
        self.requests += 1;
        ctl.send(self.reply, 0, self.len);
    }
    fn on_peer_closed(&mut self, ctl: &mut Ctl, _f: FlowId) {
        ctl.close();
    }
    fn on_closed(&mut self, _f: FlowId, _r: CloseReason) {
        self.closed += 1;
    }
}

impl NodeApp for Server {
    fn owns_tcp_port(&self, port: u16) -> bool {
        port == self.port
    }
}

/// Opens one connection from its poll, sends a request, checks the answer byte for byte.
struct Client {
    src: u32,
    sport: u16,
    dst: u32,
    dport: u16,
    req: BufId,
    expect: Vec<u8>,
    got: Vec<u8>,
    flow: Option<FlowId>,
    closed: Option<CloseReason>,
}

impl TcpApp for Client {
    fn on_connected(&mut self, ctl: &mut Ctl, f: FlowId) {
        assert!(!ctl.passive(), "a client got a passive flow");
        assert_eq!(Some(f), self.flow);
        assert_eq!(ctl.key().remote_port, self.dport);
        ctl.send(self.req, 0, 3);
    }
    fn on_data(&mut self, ctl: &mut Ctl, f: FlowId, data: &[u8]) {
        assert_eq!(
            Some(f),
            self.flow,
            "data of a flow this client did not open"
        );
        self.got.extend_from_slice(data);
        if self.got.len() == self.expect.len() {
            ctl.close();
        }
    }
    fn on_closed(&mut self, f: FlowId, r: CloseReason) {
        assert_eq!(Some(f), self.flow);
        self.closed = Some(r);
    }
}

impl NodeApp for Client {
    fn owns_tcp_port(&self, _port: u16) -> bool {
        false
    }
    fn poll<P: Port>(&mut self, io: &mut NodeIo<'_, P>) -> bool {
        if self.flow.is_some() {
            return false;
        }
        let f = io
            .connect(self.src, self.sport, self.dst, self.dport, OptsId::DEFAULT)
            .expect("connect");
        self.flow = Some(f);
        true
    }
}

fn server(n: &mut Node<MemPort>, port: u16, reply: &[u8]) -> Server {
    n.tcp.listen(port);
    Server {
        port,
        reply: n.tcp.buffers().register(Arc::from(reply)),
        len: reply.len() as u32,
        accepted: 0,
        requests: 0,
        closed: 0,
    }
}

fn client(n: &mut Node<MemPort>, src: u32, dst: u32, dport: u16, expect: &[u8]) -> Client {
    Client {
        src,
        sport: 40_000,
        dst,
        dport,
        req: n.tcp.buffers().register(Arc::from(&b"req"[..])),
        expect: expect.to_vec(),
        got: Vec::new(),
        flow: None,
        closed: None,
    }
}

/// Each node carries a server on its own port and a client of the other node's server:
/// every flow reaches the app it belongs to (the apps assert it), both exchanges
/// complete byte for byte and close normally.
#[test]
fn two_apps_on_one_node() {
    let (pa, pb) = pair(MemConfig::default()).unwrap();
    let (mut a, mut b) = (node(pa, MA, MB, IP_A), node(pb, MB, MA, IP_B));
    let body_a = vec![b'a'; 5_000];
    let body_b = vec![b'b'; 700];
    let mut on_a = Pair::new(
        server(&mut a, 80, &body_a),
        client(&mut a, IP_A, IP_B, 7000, &body_b),
    );
    let mut on_b = Pair::new(
        client(&mut b, IP_B, IP_A, 80, &body_a),
        server(&mut b, 7000, &body_b),
    );
    let mut now = 0;
    for _ in 0..10_000 {
        now += 10_000;
        a.turn(now, &mut on_a, None);
        b.turn(now, &mut on_b, None);
        if on_a.b.closed.is_some() && on_b.a.closed.is_some() && on_a.a.closed == 1 {
            break;
        }
    }
    assert_eq!(on_a.b.got, body_b, "A's client");
    assert_eq!(on_b.a.got, body_a, "B's client");
    assert_eq!(on_a.b.closed, Some(CloseReason::Normal));
    assert_eq!(on_b.a.closed, Some(CloseReason::Normal));
    assert_eq!((on_a.a.accepted, on_a.a.requests), (1, 1));
    assert_eq!((on_b.b.accepted, on_b.b.requests), (1, 1));
    assert_eq!(a.counters.rx_not_ours + b.counters.rx_not_ours, 0);
    assert_eq!(a.tcp.counters().tcps_connects, 2);
    // Dropped with frames in hand (spare TX frames at least), the nodes give every one
    // back to their ports first: the wire's pools are freed, not kept for lost handles.
    let watch = a.port.pools_watch();
    assert!(a.port.free_frames() < MemConfig::default().frames as usize);
    drop((a, b));
    assert_eq!(watch.frames_out(), 0, "frames the nodes never gave back");
}

/// Sends its body on connect (active or passive), checks the peer's byte for byte and
/// closes once it has all of it.
struct Bulk {
    body: BufId,
    len: u32,
    expect: Arc<[u8]>,
    got: Vec<u8>,
    connect_to: Option<(u32, u32, u16)>,
    /// Connect over IPv6 (2001:db8::/96 + the IPv4 address).
    v6: bool,
    flow: Option<FlowId>,
    closed: Option<CloseReason>,
}

/// The documentation-range IPv6 address standing for IPv4 address `a`.
fn v6_of(a: u32) -> [u8; 16] {
    let mut x = [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    x[12..].copy_from_slice(&a.to_be_bytes());
    x
}

impl TcpApp for Bulk {
    fn on_connected(&mut self, ctl: &mut Ctl, f: FlowId) {
        self.flow = Some(f);
        ctl.send(self.body, 0, self.len);
    }
    fn on_data(&mut self, ctl: &mut Ctl, _f: FlowId, data: &[u8]) {
        self.got.extend_from_slice(data);
        if self.got.len() == self.expect.len() {
            ctl.close();
        }
    }
    fn on_closed(&mut self, _f: FlowId, r: CloseReason) {
        self.closed = Some(r);
    }
}

impl NodeApp for Bulk {
    fn poll<P: Port>(&mut self, io: &mut NodeIo<'_, P>) -> bool {
        match (self.connect_to.take(), self.flow) {
            (Some((src, dst, dport)), None) => {
                let f = if self.v6 {
                    io.connect6(v6_of(src), 40_000, v6_of(dst), dport, OptsId::DEFAULT)
                } else {
                    io.connect(src, 40_000, dst, dport, OptsId::DEFAULT)
                };
                self.flow = Some(f.expect("connect"));
                true
            }
            _ => false,
        }
    }
}

/// A bulk app on `n` sending `mine` and expecting `theirs`; it connects to `to` (over
/// IPv6 with `v6`) if given.
fn bulk_app(
    n: &mut Node<MemPort>,
    mine: &Arc<[u8]>,
    theirs: &Arc<[u8]>,
    to: Option<(u32, u32, u16)>,
    v6: bool,
) -> Bulk {
    Bulk {
        body: n.tcp.buffers().register(mine.clone()),
        len: mine.len() as u32,
        expect: theirs.clone(),
        got: Vec::new(),
        connect_to: to,
        v6,
        flow: None,
        closed: None,
    }
}

/// Nodes A (IP_A, MA, on `pa`) and B (IP_B, MB, on `pb`, listening on port 80) with the
/// TCP configuration `tcp(mac, gateway)` makes, each owning its IPv4 address and the IPv6
/// one standing for it, and their bulk apps: A connects to B (over IPv6 with `v6`), each
/// sends `len` bytes of its own pattern.
#[allow(clippy::type_complexity)]
fn bulk_nodes(
    pa: MemPort,
    pb: MemPort,
    tcp: impl Fn([u8; 6], [u8; 6]) -> TcpConfig,
    v6: bool,
    len: u32,
) -> (Node<MemPort>, Node<MemPort>, Bulk, Bulk) {
    let ncfg = |ip| {
        let a6 = u128::from_be_bytes(v6_of(ip));
        NodeConfig {
            owned: Owned(vec![(ip, ip)]),
            owned6: Owned6(vec![(a6, a6)]),
            ..NodeConfig::default()
        }
    };
    let mut a = Node::new(pa, tcp(MA, MB), ncfg(IP_A), 0);
    let mut b = Node::new(pb, tcp(MB, MA), ncfg(IP_B), 0);
    b.tcp.listen(80);
    let body = |salt: u8| -> Arc<[u8]> { (0..len).map(|i| (i % 251) as u8 ^ salt).collect() };
    let (body_a, body_b) = (body(0x11), body(0x5a));
    let on_a = bulk_app(&mut a, &body_a, &body_b, Some((IP_A, IP_B, 80)), v6);
    let on_b = bulk_app(&mut b, &body_b, &body_a, None, v6);
    (a, b, on_a, on_b)
}

/// RFC 9293 §3.7.1 / RFC 6691 over a wire that enforces a 1500-byte MTU: both sides send
/// bulk data with timestamps and SACK on through loss, so data segments carry the
/// timestamp and up to three SACK blocks (40 option bytes); every frame fits the MTU
/// (none is dropped as oversized) and both bodies arrive intact.
#[test]
fn frames_fit_the_mtu_with_timestamps_and_sack_blocks() {
    bulk_through_an_mtu(false);
}

/// The same over IPv6: the MSS comes from the IPv6 MTU (1440), frames still fit.
#[test]
fn frames_fit_the_mtu_over_ipv6() {
    bulk_through_an_mtu(true);
}

fn bulk_through_an_mtu(v6: bool) {
    let loss = |seed| squall_port::mem::Impairment {
        loss: 0.03,
        seed,
        ..Default::default()
    };
    let (pa, pb) = pair(MemConfig {
        mtu: 1500,
        enforce_mtu: true,
        a_to_b: loss(1),
        b_to_a: loss(2),
        ..MemConfig::default()
    })
    .unwrap();
    let tcp = |mac, gateway_mac| TcpConfig {
        mac,
        gateway_mac,
        opts: squall_tcp::FlowOpts {
            mss: 1460,
            timestamps: true,
            sack: true,
            init_cwnd: 10,
            ..squall_tcp::FlowOpts::default()
        },
        ..TcpConfig::default()
    };
    let (mut a, mut b, mut on_a, mut on_b) = bulk_nodes(pa, pb, tcp, v6, 400_000);
    let (body_a, body_b) = (on_b.expect.clone(), on_a.expect.clone());
    let mut now = 0u64;
    for _ in 0..1_000_000 {
        a.turn(now, &mut on_a, None);
        b.turn(now, &mut on_b, None);
        if on_a.closed.is_some() && on_b.closed.is_some() {
            break;
        }
        let next = [a.next_event(now, &on_a), b.next_event(now, &on_b)]
            .into_iter()
            .flatten()
            .min();
        now = next.unwrap_or(now + 1_000_000).max(now + 1);
    }
    assert!(on_a.got == *body_b && on_b.got == *body_a, "bodies intact");
    assert_eq!(on_a.closed, Some(CloseReason::Normal));
    assert_eq!(on_b.closed, Some(CloseReason::Normal));
    if v6 {
        assert_eq!(
            a.counters.rx_ipv6 + b.counters.rx_ipv6,
            0,
            "all on the TCP path"
        );
        assert!(a.counters.rx_tcp > 100 && b.counters.rx_tcp > 100);
        assert_eq!(a.tcp.ipv6_addresses() + b.tcp.ipv6_addresses(), 4);
    }
    let sacked = a.tcp.counters().tcps_rcvoopack + b.tcp.counters().tcps_rcvoopack;
    assert!(
        sacked > 10,
        "out-of-order data held on both sides: {sacked}"
    );
    assert_eq!(a.port.oversized_frames() + b.port.oversized_frames(), 0);
}

/// The gratuitous ARP (a request for its own address) of `ip` moved to `mac`.
fn gratuitous_arp(mac: [u8; 6], ip: u32) -> [u8; 60] {
    arp_request_from(mac, ip, ip)
}

/// An ARP request from B (198.18.0.2) for `target`, as a 60-byte frame.
fn arp_request(target: u32) -> [u8; 60] {
    arp_request_from(MB, IP_B, target)
}

fn echo_request(dst_mac: [u8; 6], src: u32, dst: u32, seq: u16, data: &[u8]) -> Vec<u8> {
    let mut f = vec![0u8; 14 + 20 + 8 + data.len()];
    f[0..6].copy_from_slice(&dst_mac);
    f[6..12].copy_from_slice(&MB);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip = &mut f[14..34];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&((28 + data.len()) as u16).to_be_bytes());
    ip[8] = 64;
    ip[9] = 1;
    ip[12..16].copy_from_slice(&src.to_be_bytes());
    ip[16..20].copy_from_slice(&dst.to_be_bytes());
    let c = squall_wire::checksum::checksum(ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    let m = &mut f[34..];
    m[0] = 8;
    m[4..6].copy_from_slice(&0x1234u16.to_be_bytes());
    m[6..8].copy_from_slice(&seq.to_be_bytes());
    m[8..].copy_from_slice(data);
    let c = squall_wire::checksum::checksum(m);
    m[2..4].copy_from_slice(&c.to_be_bytes());
    f
}

/// A peer that is only a raw port: the node answers its ARP request and its ping for the
/// owned address, not for others, and counts an IPv6 frame and a bad ICMP message.
#[test]
fn arp_and_ping_are_answered_for_owned_addresses() {
    let (pa, mut raw) = pair(MemConfig::default()).unwrap();
    let mut a = node(pa, MA, MB, IP_A);
    // ARP request for 198.18.0.1 (owned) and 198.18.0.9 (not).
    for target in [IP_A, 0xc612_0009] {
        raw_frame(&mut raw, &arp_request(target));
    }
    a.turn(1_000, &mut NoApp, None);
    let got = raw_rx(&mut raw);
    assert_eq!(got.len(), 1, "one reply, for the owned address only");
    let rep = ArpRepr::parse(&ArpPacket::new_checked(&got[0][14..]).unwrap());
    assert_eq!(rep.operation, ArpOperation::REPLY);
    assert_eq!(
        (rep.sender_mac.0, rep.sender_ip.0),
        (MA, IP_A.to_be_bytes())
    );
    assert_eq!(a.neigh.lookup(IP_B), Some(MB), "the asker is learned");
    // Echo requests: to us (answered), to an address we do not own, corrupted.
    let data: Vec<u8> = (0..56u8).collect();
    raw_frame(&mut raw, &echo_request(MA, IP_B, IP_A, 7, &data));
    raw_frame(&mut raw, &echo_request(MA, IP_B, 0xc612_0009, 8, &data));
    let mut bad = echo_request(MA, IP_B, IP_A, 9, &data);
    *bad.last_mut().unwrap() ^= 1;
    raw_frame(&mut raw, &bad);
    let mut v6 = vec![0u8; 60];
    v6[12..14].copy_from_slice(&[0x86, 0xdd]);
    raw_frame(&mut raw, &v6);
    a.turn(2_000, &mut NoApp, None);
    let got = raw_rx(&mut raw);
    assert_eq!(got.len(), 1, "one echo reply");
    let r = &got[0];
    assert_eq!((&r[0..6], &r[6..12]), (&MB[..], &MA[..]));
    assert_eq!(
        squall_wire::checksum::sum(&r[14..34]),
        0xffff,
        "IPv4 checksum"
    );
    assert_eq!(&r[26..30], &IP_A.to_be_bytes());
    assert_eq!(&r[30..34], &IP_B.to_be_bytes());
    assert_eq!(r[34], 0, "echo reply");
    assert_eq!(
        squall_wire::checksum::sum(&r[34..]),
        0xffff,
        "ICMP checksum"
    );
    assert_eq!(&r[38..40], &0x1234u16.to_be_bytes());
    assert_eq!(&r[40..42], &7u16.to_be_bytes());
    assert_eq!(&r[42..], &data[..]);
    assert_eq!(a.icmp.echo_answered, 1);
    assert_eq!(a.icmp.bad, 1);
    // the all-zero IPv6 frame is to another MAC
    assert_eq!(a.counters.rx_not_ours, 2);
    assert_eq!((a.counters.rx_ipv6, a.ip6.not_ours), (1, 1));
    assert_eq!(a.counters.rx_other_ether, 0);
    assert_eq!(a.counters.rx_arp, 2);
}

/// Turns `b` in a thread (a millisecond apart, at most 2,000) until it has answered an ARP
/// request; the node comes back through the handle.
fn answer_one_arp_request(mut b: Node<MemPort>) -> std::thread::JoinHandle<Node<MemPort>> {
    std::thread::spawn(move || {
        for i in 0..2000u64 {
            b.turn(i * 1_000_000, &mut NoApp, None);
            if b.neigh.stats.requests_answered > 0 {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        b
    })
}

/// `resolve` on one node learns the other's MAC from its reply (the other node answers
/// from its turns in another thread); an unanswered resolution times out with a clear
/// error.
#[test]
fn resolve_learns_the_peer_mac_over_a_wire() {
    let (pa, pb) = pair(MemConfig::default()).unwrap();
    let mut a = node(pa, MA, [0; 6], IP_A);
    let b = node(pb, MB, MA, IP_B);
    let h = answer_one_arp_request(b);
    let got = a.resolve(IP_A, IP_B, Duration::from_secs(5));
    let st = h.join().unwrap().neigh.stats;
    assert_eq!(got, Ok(MB));
    assert_eq!(st.requests_answered, 1);
    a.set_next_hop(MB);
    assert_eq!(a.tcp.config().gateway_mac, MB);
    let (pc, _pd) = pair(MemConfig::default()).unwrap();
    let mut c = node(pc, MA, [0; 6], IP_A);
    let e = c.resolve(IP_A, IP_B, Duration::from_millis(300));
    assert!(e.unwrap_err().contains("no ARP reply from 198.18.0.2"));
}

/// With a VLAN id both ways, the ARP request and its reply carry the tag, and `resolve`
/// takes the tagged reply (it is untagged as every received frame of the node is).
#[test]
fn resolve_takes_the_tagged_reply_on_a_vlan() {
    let (pa, pb) = pair(MemConfig::default()).unwrap();
    let mut a = node(pa, MA, [0; 6], IP_A);
    let mut b = node(pb, MB, MA, IP_B);
    a.set_vlan(Some(100));
    b.set_vlan(Some(100));
    let h = answer_one_arp_request(b);
    let got = a.resolve(IP_A, IP_B, Duration::from_secs(5));
    let b = h.join().unwrap();
    let (st, other) = (b.neigh.stats, b.counters.rx_vlan_other);
    assert_eq!(got, Ok(MB));
    assert_eq!((st.requests_answered, other), (1, 0));
    assert_eq!(a.counters.rx_vlan_other, 0);
}

/// Two workers of one port resolve together: a worker that does not ask sends nothing
/// and takes the MAC another worker published; one that hears a reply (to a request it did
/// not send) learns it and publishes it.
#[test]
fn workers_resolve_the_next_hop_together() {
    let shared = SharedMac::default();
    let (pa, mut pb) = pair(MemConfig::default()).unwrap();
    let mut w1 = node(pa, MA, [0; 6], IP_A);
    // Nobody has it yet, and this worker does not ask: nothing sent, a timeout.
    let e = w1.resolve_shared(IP_A, IP_B, Duration::from_millis(100), false, &shared);
    assert!(e.is_err());
    assert_eq!(w1.neigh.stats.requests_sent, 0);
    assert!(raw_rx(&mut pb).is_empty());
    // The reply to worker 0's request reaches this worker's queue: learned, published.
    let reply = ArpRepr {
        operation: ArpOperation::REPLY,
        sender_mac: MacAddress(MB),
        sender_ip: Ipv4Address(IP_B.to_be_bytes()),
        target_mac: MacAddress(MA),
        target_ip: Ipv4Address(IP_A.to_be_bytes()),
    };
    let mut f = [0u8; 60];
    squall_stack::neigh::emit_frame(&reply, MB, &mut f).unwrap();
    raw_frame(&mut pb, &f);
    let got = w1.resolve_shared(IP_A, IP_B, Duration::from_secs(2), false, &shared);
    assert_eq!(got, Ok(MB));
    assert_eq!(shared.get(), Some(MB));
    // A third worker takes it from the shared cell at once.
    let (pc, _pd) = pair(MemConfig::default()).unwrap();
    let mut w2 = node(pc, MA, [0; 6], IP_A);
    assert_eq!(
        w2.resolve_shared(IP_A, IP_B, Duration::from_millis(10), true, &shared),
        Ok(MB)
    );
}

/// Pairs nest: node A carries two servers (ports 80 and 81) and a client, node B a
/// server and two clients; every flow reaches its own app at every level.
#[test]
fn nested_pairs_carry_three_apps() {
    let (pa, pb) = pair(MemConfig::default()).unwrap();
    let (mut a, mut b) = (node(pa, MA, MB, IP_A), node(pb, MB, MA, IP_B));
    let (r80, r81, r7) = (vec![b'x'; 3_000], vec![b'y'; 2_000], vec![b'z'; 100]);
    let mut on_a = Pair::new(
        server(&mut a, 80, &r80),
        Pair::new(
            server(&mut a, 81, &r81),
            client(&mut a, IP_A, IP_B, 7000, &r7),
        ),
    );
    let mut on_b = Pair::new(
        server(&mut b, 7000, &r7),
        Pair::new(
            client(&mut b, IP_B, IP_A, 80, &r80),
            client(&mut b, IP_B, IP_A, 81, &r81),
        ),
    );
    let mut now = 0;
    for _ in 0..10_000 {
        now += 10_000;
        a.turn(now, &mut on_a, None);
        b.turn(now, &mut on_b, None);
        let done = [&on_a.b.b, &on_b.b.a, &on_b.b.b]
            .iter()
            .all(|c| c.closed.is_some());
        if done && a.tcp.flow_count() + b.tcp.flow_count() == 0 {
            break;
        }
    }
    assert_eq!(on_b.b.a.got, r80);
    assert_eq!(on_b.b.b.got, r81);
    assert_eq!(on_a.b.b.got, r7);
    for c in [&on_a.b.b, &on_b.b.a, &on_b.b.b] {
        assert_eq!(c.closed, Some(CloseReason::Normal));
    }
    assert_eq!(
        (on_a.a.accepted, on_a.b.a.accepted, on_b.a.accepted),
        (1, 1, 1)
    );
}

/// Hostile input: random, truncated and mutated frames of every kind the node
/// classifies (TCP, UDP, ICMP, ARP, other) reach a node with a listener and a UDP-taking
/// app; nothing panics and every frame is counted as received.
#[test]
fn malformed_frames_are_counted_never_a_panic() {
    let (pa, mut raw) = pair(MemConfig::default()).unwrap();
    let mut a = node(pa, MA, MB, IP_A);
    let mut app = server(&mut a, 80, b"ok");
    let mut rng = squall_port::rng::Rng::new(9);
    let data: Vec<u8> = (0..40u8).collect();
    let arp = arp_request(IP_A).to_vec();
    let seeds = [
        echo_request(MA, IP_B, IP_A, 1, &data),
        arp,
        {
            // A UDP datagram: an echo request with protocol 17 (checksums then wrong).
            let mut f = echo_request(MA, IP_B, IP_A, 2, &data);
            f[23] = 17;
            f
        },
        {
            let mut f = echo_request(MA, IP_B, IP_A, 3, &data);
            f[23] = 6;
            f
        },
        icmp6_frame(MA, ip6(IP6_B), ip6(IP6_A), 64, &echo6(5, &data)),
        icmp6_frame(
            [0x33, 0x33, 0xff, 0, 0, 1],
            ip6(IP6_B),
            ip6(IP6_A).solicited_node(),
            255,
            &Icmpv6Repr::NeighborSolicit {
                target: ip6(IP6_A),
                source_mac: Some(MacAddress(MB)),
            },
        ),
    ];
    let mut sent = 0u64;
    for round in 0..4_000u32 {
        let base = &seeds[round as usize % seeds.len()];
        let mut f = base.clone();
        match rng.below(3) {
            0 => f.truncate(rng.below(f.len() as u64 + 1) as usize),
            1 => {
                for _ in 0..1 + rng.below(4) {
                    let i = rng.below(f.len() as u64) as usize;
                    f[i] = rng.next_u64() as u8;
                }
            }
            _ => {
                f = (0..rng.below(80)).map(|_| rng.next_u64() as u8).collect();
            }
        }
        if f.is_empty() {
            continue;
        }
        raw_frame(&mut raw, &f);
        sent += 1;
        a.turn(u64::from(round) * 1_000, &mut app, None);
        raw_rx(&mut raw);
    }
    assert_eq!(a.counters.rx_frames, sent);
    assert!(a.icmp6.echo_answered > 0 && a.neigh6.stats.ns_answered > 0);
}

/// Inserts an 802.1Q tag (id `vid`) into an untagged frame.
fn tagged(frame: &[u8], vid: u16) -> Vec<u8> {
    let mut t = frame[..12].to_vec();
    t.extend_from_slice(&[0x81, 0x00]);
    t.extend_from_slice(&vid.to_be_bytes());
    t.extend_from_slice(&frame[12..]);
    t
}

/// With a VLAN id, a node tags every frame it sends (ARP replies, echo replies, TCP) and
/// takes only frames with its tag: two tagged nodes complete an exchange; untagged
/// frames and frames of another VLAN are counted and dropped, not answered.
#[test]
fn a_vlan_node_tags_what_it_sends_and_takes_only_its_vlan() {
    let tagged_node = |port, mac, peer, ip| node_on_vlan(port, mac, peer, ip, Some(100));
    // Two tagged nodes: the two-app exchange completes through the tags.
    let (pa, pb) = pair(MemConfig::default()).unwrap();
    let (mut a, mut b) = (tagged_node(pa, MA, MB, IP_A), tagged_node(pb, MB, MA, IP_B));
    let body = vec![b'v'; 3_000];
    let mut on_a = server(&mut a, 80, &body);
    let mut on_b = client(&mut b, IP_B, IP_A, 80, &body);
    let mut now = 0;
    for _ in 0..10_000 {
        now += 10_000;
        a.turn(now, &mut on_a, None);
        b.turn(now, &mut on_b, None);
        if on_b.closed.is_some() && on_a.closed == 1 {
            break;
        }
    }
    assert_eq!(on_b.got, body);
    assert_eq!(on_b.closed, Some(CloseReason::Normal));
    assert_eq!(a.counters.rx_vlan_other + b.counters.rx_vlan_other, 0);
    // A raw peer: replies carry the tag; untagged and other-VLAN frames are dropped.
    let (pa, mut raw) = pair(MemConfig::default()).unwrap();
    let mut a = tagged_node(pa, MA, MB, IP_A);
    let data: Vec<u8> = (0..32u8).collect();
    let ping = echo_request(MA, IP_B, IP_A, 1, &data);
    raw_frame(&mut raw, &ping);
    raw_frame(&mut raw, &tagged(&ping, 200));
    a.turn(1_000, &mut NoApp, None);
    assert!(raw_rx(&mut raw).is_empty(), "nothing answered off our VLAN");
    assert_eq!(a.counters.rx_vlan_other, 2);
    raw_frame(&mut raw, &tagged(&ping, 100));
    raw_frame(&mut raw, &tagged(&arp_request(IP_A), 100));
    a.turn(2_000, &mut NoApp, None);
    let got = raw_rx(&mut raw);
    assert_eq!(got.len(), 2, "echo reply and ARP reply");
    assert_eq!(a.icmp.echo_answered, 1);
    for f in &got {
        assert_eq!(&f[12..16], &[0x81, 0x00, 0, 100], "tagged with VLAN 100");
        assert_eq!(&f[0..6], &MB[..]);
    }
    let echo = got.iter().find(|f| f[16..18] == [0x08, 0x00]).unwrap();
    assert_eq!(echo[18 + 20], 0, "an echo reply after the tag");
    assert_eq!(&echo[18 + 28..], &data[..]);
    assert!(got.iter().any(|f| f[16..18] == [0x08, 0x06]), "ARP reply");
}

/// Copies every frame waiting at `from` into `to`.
fn forward(from: &mut MemPort, to: &mut MemPort) -> usize {
    let frames = raw_rx(from);
    for f in &frames {
        raw_frame(to, f);
    }
    frames.len()
}

/// Two client workers behind one port that cannot steer: every frame of the server goes
/// to worker 0's queue. Worker 0 hands the frames of worker 1's flow (its source port is
/// odd) over through the redirect mesh, counted; both exchanges complete.
#[test]
fn a_port_without_steering_redirects_frames_to_their_owner() {
    let (w0, w1) = two_workers_on_one_queue(None);
    let (r0, r1) = (w0.redirect_stats().unwrap(), w1.redirect_stats().unwrap());
    assert!(
        r0.sent >= 4,
        "worker 0 redirected worker 1's frames (SYN-ACK, data, FIN): {r0:?}"
    );
    assert_eq!(r0.sent, r1.received);
    assert_eq!(w1.counters.rx_redirected, r1.received);
    assert_eq!(r1.sent, 0, "worker 1 got nothing of worker 0's");
    assert_eq!(r0.dropped_full + r0.too_big, 0);
}

/// Two client workers (one MAC, one address: queues of one port) with a redirect mesh,
/// each with a client of a server node's port 80 (worker 1's from an odd port), every
/// frame of the server delivered to worker 0's queue (in fragments of at most
/// `fragment` bytes if given); both exchanges complete byte for byte. The workers.
fn two_workers_on_one_queue(fragment: Option<usize>) -> (Node<MemPort>, Node<MemPort>) {
    let (ps, mut to_s) = pair(MemConfig::default()).unwrap();
    let (p0, mut from0) = pair(MemConfig::default()).unwrap();
    let (p1, mut from1) = pair(MemConfig::default()).unwrap();
    let mut s = node(ps, MB, MA, IP_B);
    let mut w0 = node(p0, MA, MB, IP_A);
    let mut w1 = node(p1, MA, MB, IP_A);
    let mut mesh = redirect::mesh(2, 256);
    w1.set_redirect(mesh.pop().unwrap());
    w0.set_redirect(mesh.pop().unwrap());
    let body: Vec<u8> = (0..6_000u32).map(|i| (i % 249) as u8).collect();
    let mut srv = server(&mut s, 80, &body);
    let mut c0 = client(&mut w0, IP_A, IP_B, 80, &body);
    let mut c1 = client(&mut w1, IP_A, IP_B, 80, &body);
    c1.sport = 40_001;
    let (mut now, mut id) = (0, 0);
    for _ in 0..20_000 {
        now += 10_000;
        w0.turn(now, &mut c0, None);
        w1.turn(now, &mut c1, None);
        forward(&mut from0, &mut to_s);
        forward(&mut from1, &mut to_s);
        s.turn(now, &mut srv, None);
        // The port delivers everything to worker 0's queue.
        match fragment {
            Some(size) => forward_fragmented(&mut to_s, &mut from0, size, &mut id),
            None => {
                forward(&mut to_s, &mut from0);
            }
        }
        if c0.closed.is_some() && c1.closed.is_some() && srv.closed == 2 {
            break;
        }
    }
    assert_eq!(c0.got, body);
    assert_eq!(
        c1.got, body,
        "worker 1's flow completed through worker 0's queue"
    );
    assert_eq!(c1.closed, Some(CloseReason::Normal));
    (w0, w1)
}

const IP6_B: &str = "2001:db8::2";

fn node6(port: MemPort, mac: [u8; 6], peer: [u8; 6], ip: &str) -> Node<MemPort> {
    let tcp = TcpConfig {
        mac,
        gateway_mac: peer,
        ..TcpConfig::default()
    };
    let a = ip6(ip).to_u128();
    let cfg = NodeConfig {
        owned6: Owned6(vec![(a, a)]),
        ..NodeConfig::default()
    };
    Node::new(port, tcp, cfg, 0)
}

fn echo6(seq: u16, data: &[u8]) -> Icmpv6Repr<'_> {
    Icmpv6Repr::Echo {
        is_reply: false,
        ident: 0x6666,
        seq,
        data,
    }
}

/// The ICMPv6 message of a frame the node sent (every checksum checked).
fn icmp6_of(f: &[u8]) -> (Ipv6Address, Ipv6Address, Icmpv6Repr<'_>) {
    let fr = parse_frame(f).unwrap();
    assert!(fr.checksums_ok());
    let L3::Ipv6(ip, L4::Icmpv6(p)) = fr.l3 else {
        panic!("not ICMPv6: {fr:?}")
    };
    let p: Icmpv6Packet<&[u8]> = p;
    (ip.src(), ip.dst(), Icmpv6Repr::parse(&p).unwrap())
}

/// A raw peer on the wire: the node answers its neighbour solicitation (sent to the
/// solicited-node group) and its ping6 for the owned address; ignores the others;
/// counts a fragment, an extension header to discard and a corrupted message.
#[test]
fn ndp_and_ping6_are_answered_for_owned_addresses() {
    let (pa, mut raw) = pair(MemConfig::default()).unwrap();
    let mut a = node6(pa, MA, MB, IP6_A);
    let (me, peer) = (ip6(IP6_A), ip6(IP6_B));
    let ns = |t: Ipv6Address| Icmpv6Repr::NeighborSolicit {
        target: t,
        source_mac: Some(MacAddress(MB)),
    };
    let group = me.solicited_node();
    raw_frame(
        &mut raw,
        &icmp6_frame(group.multicast_mac().0, peer, group, 255, &ns(me)),
    );
    let other = ip6("2001:db8::9");
    raw_frame(
        &mut raw,
        &icmp6_frame(
            other.solicited_node().multicast_mac().0,
            peer,
            other.solicited_node(),
            255,
            &ns(other),
        ),
    );
    a.turn(1_000, &mut NoApp, None);
    let got = raw_rx(&mut raw);
    assert_eq!(
        got.len(),
        1,
        "one advertisement, for the owned address only"
    );
    assert_eq!((&got[0][..6], &got[0][6..12]), (&MB[..], &MA[..]));
    let (s, d, m) = icmp6_of(&got[0]);
    assert_eq!((s, d), (me, peer));
    assert_eq!(
        m,
        Icmpv6Repr::NeighborAdvert {
            flags: NaFlags {
                router: false,
                solicited: true,
                override_: true
            },
            target: me,
            target_mac: Some(MacAddress(MA)),
        }
    );
    assert_eq!(a.neigh6.lookup(&peer), Some(MB), "the asker is learned");
    assert_eq!(a.neigh6.stats.ns_answered, 1);
    // Echo requests: to us, to another address, corrupted; a fragment; a discard option.
    let data: Vec<u8> = (0..56u8).collect();
    raw_frame(&mut raw, &icmp6_frame(MA, peer, me, 64, &echo6(7, &data)));
    raw_frame(
        &mut raw,
        &icmp6_frame(MA, peer, other, 64, &echo6(8, &data)),
    );
    let mut bad = icmp6_frame(MA, peer, me, 64, &echo6(9, &data));
    *bad.last_mut().unwrap() ^= 1;
    raw_frame(&mut raw, &bad);
    let ext = |hdr: [u8; 8]| {
        let mut f = icmp6_frame(MA, peer, me, 64, &echo6(10, &data));
        let plen = u16::from_be_bytes([f[18], f[19]]) + 8;
        f[18..20].copy_from_slice(&plen.to_be_bytes());
        f[20] = if hdr[2] == 0 { 44 } else { 60 };
        f.splice(54..54, hdr);
        f
    };
    raw_frame(&mut raw, &ext([58, 0, 0, 8, 0, 0, 0, 1])); // fragment, offset 1
    raw_frame(&mut raw, &ext([58, 0, 0x80, 4, 0, 0, 0, 0])); // unknown option, discard
    a.turn(2_000, &mut NoApp, None);
    let got = raw_rx(&mut raw);
    assert_eq!(got.len(), 1, "one echo reply");
    let (s, d, m) = icmp6_of(&got[0]);
    assert_eq!((s, d), (me, peer));
    assert_eq!(
        m,
        Icmpv6Repr::Echo {
            is_reply: true,
            ident: 0x6666,
            seq: 7,
            data: &data
        }
    );
    assert_eq!(a.icmp6.echo_answered, 1);
    assert_eq!(a.icmp6.bad, 1);
    assert_eq!(
        (a.ip6.fragments, a.ip6.ext_dropped, a.ip6.not_ours),
        (1, 1, 2)
    );
    assert_eq!(a.counters.rx_ipv6, 7);
    // the fragment waits in the reassembly for the rest of its datagram
    assert_eq!((a.counters.rx_other_ip, a.counters.rx_fragments), (1, 1));
    assert_eq!((a.reasm.stats.fragments, a.reasm.pending()), (1, 1));
    // announcements: an unsolicited advertisement for the owned address
    a.announce(3_000);
    let got = raw_rx(&mut raw);
    assert_eq!(got.len(), 1);
    let (s, d, m) = icmp6_of(&got[0]);
    assert_eq!((s, d), (me, Ipv6Address::LINK_LOCAL_ALL_NODES));
    assert!(
        matches!(m, Icmpv6Repr::NeighborAdvert { flags, .. } if !flags.solicited && flags.override_)
    );
}

/// A node owning IP6_B (MAC MB) on `port`, turned on its own thread until it answered a
/// neighbour solicitation (2 s at most); its NDP counters.
fn peer6(port: MemPort) -> std::thread::JoinHandle<squall_stack::neigh6::NdpStats> {
    let mut b = node6(port, MB, MA, IP6_B);
    std::thread::spawn(move || {
        for i in 0..2000u64 {
            b.turn(i * 1_000_000, &mut NoApp, None);
            if b.neigh6.stats.ns_answered > 0 {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        b.neigh6.stats
    })
}

/// `resolve6` on one node learns the other's MAC from its advertisement; an unanswered
/// resolution times out with a clear error.
#[test]
fn resolve6_learns_the_peer_mac_over_a_wire() {
    let (pa, pb) = pair(MemConfig::default()).unwrap();
    let mut a = node6(pa, MA, [0; 6], IP6_A);
    let h = peer6(pb);
    let got = a.resolve6(ip6(IP6_A), ip6(IP6_B), Duration::from_secs(5));
    let st = h.join().unwrap();
    assert_eq!(got, Ok(MB));
    assert_eq!(st.ns_answered, 1);
    let (pc, _pd) = pair(MemConfig::default()).unwrap();
    let mut c = node6(pc, MA, [0; 6], IP6_A);
    let e = c.resolve6(ip6(IP6_A), ip6(IP6_B), Duration::from_millis(300));
    assert!(e
        .unwrap_err()
        .contains("no neighbour advertisement from 2001:db8::2"));
}

const MR: [u8; 6] = [2, 0, 0, 0, 0, 0x99];

/// A router advertisement from fe80::1 (MAC MR in its source link-layer option) to all
/// nodes, with router lifetime `lifetime` seconds.
fn router_advert(lifetime: u16) -> Vec<u8> {
    router_advert_from("fe80::1", MR, lifetime)
}

/// A router on the raw end of the wire: it answers the first router solicitation with a
/// router advertisement of lifetime `lifetime` (within `wait`); returns every frame the
/// node sent meanwhile.
fn router(
    mut raw: MemPort,
    lifetime: u16,
    wait: Duration,
) -> std::thread::JoinHandle<Vec<Vec<u8>>> {
    std::thread::spawn(move || {
        let mut seen = Vec::new();
        let t0 = std::time::Instant::now();
        let mut answered = false;
        while t0.elapsed() < wait {
            for f in raw_rx(&mut raw) {
                let rs = matches!(
                    parse_frame(&f).map(|fr| fr.l3),
                    Ok(L3::Ipv6(_, L4::Icmpv6(ref p))) if p.msg_type() == 133
                );
                if rs && !answered {
                    raw_frame(&mut raw, &router_advert(lifetime));
                    answered = true;
                }
                seen.push(f);
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        seen
    })
}

/// No gateway given and the peer not on the link: the node solicits the routers (RFC
/// 4861 §6.3.7: to ff02::2, hop limit 255, from its address with its link-layer address)
/// besides the peer, and takes the router of the advertisement that answers as its next
/// hop; a server (no peer) waits for the router only.
#[test]
fn next_hop6_is_the_router_of_a_solicited_advertisement() {
    for target in [Some(ip6(IP6_B)), None] {
        let (pa, raw) = pair(MemConfig::default()).unwrap();
        let mut a = node6(pa, MA, [0; 6], IP6_A);
        let r = router(raw, 1800, Duration::from_millis(600));
        let got = a.next_hop6_shared(
            ip6(IP6_A),
            target,
            Duration::from_secs(5),
            true,
            &SharedMac::default(),
        );
        assert_eq!(got, Ok(MR), "target {target:?}");
        assert_eq!(a.neigh6.router(), Some((ip6("fe80::1"), MR)));
        assert_eq!(a.neigh6.stats.rs_sent, 1);
        let sent = r.join().unwrap();
        let rs: Vec<_> = sent
            .iter()
            .map(|f| (f[..6].to_vec(), icmp6_of(f)))
            .filter(|(_, (_, _, m))| matches!(m, Icmpv6Repr::RouterSolicit { .. }))
            .collect();
        assert_eq!(rs.len(), 1, "one solicitation within 4 s");
        let (dmac, (src, dst, m)) = &rs[0];
        assert_eq!(dmac[..], [0x33, 0x33, 0, 0, 0, 2]);
        assert_eq!(
            (*src, *dst),
            (ip6(IP6_A), Ipv6Address::LINK_LOCAL_ALL_ROUTERS)
        );
        assert_eq!(
            *m,
            Icmpv6Repr::RouterSolicit {
                source_mac: Some(MacAddress(MA))
            }
        );
        let hop_limits: Vec<u8> = sent.iter().map(|f| f[21]).collect();
        assert!(hop_limits.iter().all(|&h| h == 255), "{hop_limits:?}");
        // The peer was solicited too (every 200 ms), only when there is one.
        let ns = sent
            .iter()
            .filter(|f| matches!(icmp6_of(f).2, Icmpv6Repr::NeighborSolicit { .. }))
            .count();
        assert_eq!(ns > 0, target.is_some());
    }
}

/// The peer on the link answers first: it is the next hop (no router on the link).
/// Nothing answers: a clear error; an advertisement with router lifetime 0 (not a
/// default router, RFC 4861 §6.3.4) is no next hop either.
#[test]
fn next_hop6_is_the_peer_on_the_link_or_a_clear_error() {
    let (pa, pb) = pair(MemConfig::default()).unwrap();
    let mut a = node6(pa, MA, [0; 6], IP6_A);
    let h = peer6(pb);
    let shared = SharedMac::default();
    let got = a.next_hop6_shared(
        ip6(IP6_A),
        Some(ip6(IP6_B)),
        Duration::from_secs(5),
        true,
        &shared,
    );
    h.join().unwrap();
    assert_eq!(got, Ok(MB));
    assert_eq!(shared.get(), Some(MB), "published for the other workers");
    assert_eq!(a.neigh6.router(), None);

    let (pc, _pd) = pair(MemConfig::default()).unwrap();
    let mut c = node6(pc, MA, [0; 6], IP6_A);
    let e = c
        .next_hop6_shared(
            ip6(IP6_A),
            Some(ip6(IP6_B)),
            Duration::from_millis(300),
            true,
            &SharedMac::default(),
        )
        .unwrap_err();
    assert_eq!(
        e,
        "no neighbour advertisement from 2001:db8::2 and no router advertisement within 0.3 s"
    );
    assert_eq!(c.neigh6.stats.rs_sent, 1);

    let (pe, raw) = pair(MemConfig::default()).unwrap();
    let mut n = node6(pe, MA, [0; 6], IP6_A);
    let r = router(raw, 0, Duration::from_millis(400));
    let e = n
        .next_hop6_shared(
            ip6(IP6_A),
            None,
            Duration::from_millis(500),
            true,
            &SharedMac::default(),
        )
        .unwrap_err();
    r.join().unwrap();
    assert_eq!(e, "no router advertisement within 0.5 s");
    assert_eq!(n.neigh6.stats.ra_seen, 1, "read, but not a default router");
    assert_eq!(n.neigh6.router(), None);
}

/// A SYN test case: what it is, the Ethernet address it goes to, IPv4 (source,
/// destination) or IPv6 (source, destination).
type SynCase = (
    &'static str,
    [u8; 6],
    Option<(u32, u32)>,
    Option<([u8; 16], [u8; 16])>,
);

/// A SYN to port 80 from `src` to `dst` (IPv4, host order) or between two IPv6
/// addresses, sent to Ethernet address `to`.
fn syn_frame(to: [u8; 6], v4: Option<(u32, u32)>, v6: Option<([u8; 16], [u8; 16])>) -> Vec<u8> {
    use squall_wire::segment::{self, TxHdr, SYN};
    let h = TxHdr {
        src_mac: MB,
        dst_mac: to,
        src_ip: v4.map_or(0, |a| a.0),
        dst_ip: v4.map_or(0, |a| a.1),
        ip_id: 1,
        src_port: 40_000,
        dst_port: 80,
        seq: 1000,
        ack: 0,
        flags: SYN,
        wnd: 65535,
        ttl: 64,
        tos: 0,
    };
    let mut f = vec![0u8; 14 + 40 + 20];
    match v6 {
        Some((src, dst)) => {
            let (n, sum) = segment::write_headers6_sum(&mut f, &h, &src, &dst, &[], 0);
            f.truncate(n);
            segment::store_tcp6_checksum(&mut f, sum, 0);
        }
        None => {
            let n = segment::write_headers(&mut f, &h, &[], 0);
            f.truncate(n);
            segment::finish_tcp_checksum(&mut f, h.src_ip, h.dst_ip, n);
        }
    }
    f
}

/// A segment for no connection is answered (SYN-ACK from a listener, RST) only on an
/// owned address and from a unicast one: a SYN to another host's address, to a broadcast
/// or multicast address, or from one, gets nothing (RFC 1122 §4.2.3.10, §3.2.1.3).
#[test]
fn syns_to_addresses_not_ours_get_no_answer() {
    let (pa, mut raw) = pair(MemConfig::default()).unwrap();
    let mut a = node(pa, MA, MB, IP_A);
    a.tcp.listen(80);
    let a6 = ip6(IP6_A).0;
    let b6 = ip6(IP6_B).0;
    let cases: [SynCase; 7] = [
        ("not owned", MA, Some((IP_B, 0xc612_0077)), None),
        ("broadcast", [0xff; 6], Some((IP_B, 0xffff_ffff)), None),
        ("multicast", MA, Some((IP_B, 0xe000_0001)), None),
        ("from broadcast", MA, Some((0xffff_ffff, IP_A)), None),
        ("from loopback", MA, Some((0x7f00_0001, IP_A)), None),
        ("IPv6 multicast", MA, None, Some((b6, ip6("ff02::1").0))),
        (
            "IPv6 not owned",
            MA,
            None,
            Some((b6, ip6("2001:db8::99").0)),
        ),
    ];
    for (k, (what, to, v4, v6)) in cases.into_iter().enumerate() {
        raw_frame(&mut raw, &syn_frame(to, v4, v6));
        a.turn(1_000 * (k as u64 + 1), &mut NoApp, None);
        assert!(raw_rx(&mut raw).is_empty(), "{what}: answered");
    }
    assert_eq!(a.tcp.counters().tcps_rcvnotours, 7);
    assert_eq!(a.tcp.flow_count(), 0);
    // Our own addresses are answered with a SYN-ACK.
    for (v4, v6) in [(Some((IP_B, IP_A)), None), (None, Some((b6, a6)))] {
        raw_frame(&mut raw, &syn_frame(MA, v4, v6));
        a.turn(10_000, &mut NoApp, None);
        let got = raw_rx(&mut raw);
        assert_eq!(got.len(), 1, "{v4:?} {v6:?}");
    }
    assert_eq!(a.tcp.flow_count(), 2);
}

/// Node `a` learns B (2001:db8::2) at MB: B solicits A's address (its source link-layer
/// option is learned). B's address.
fn learn_b6(a: &mut Node<MemPort>, raw: &mut MemPort) -> Ipv6Address {
    let b = ip6(IP6_B);
    let ns = Icmpv6Repr::NeighborSolicit {
        target: ip6(IP6_A),
        source_mac: Some(MacAddress(MB)),
    };
    raw_frame(raw, &icmp6_frame(MA, b, ip6(IP6_A), 255, &ns));
    a.turn(1_000, &mut NoApp, None);
    raw_rx(raw);
    b
}

/// An unsolicited advertisement of `target` at `mac`, with or without Override.
fn unsolicited_na(target: Ipv6Address, mac: [u8; 6], override_: bool) -> Icmpv6Repr<'static> {
    Icmpv6Repr::NeighborAdvert {
        flags: NaFlags {
            router: false,
            solicited: false,
            override_,
        },
        target,
        target_mac: Some(MacAddress(mac)),
    }
}

/// RFC 4861 §7.2.5: an unsolicited advertisement without the Override flag does not move
/// a known neighbour to another link-layer address; one with it does.
#[test]
fn an_advertisement_without_override_keeps_the_cached_address() {
    let (pa, mut raw) = pair(MemConfig::default()).unwrap();
    let mut a = node6(pa, MA, MB, IP6_A);
    let b = learn_b6(&mut a, &mut raw);
    assert_eq!(a.neigh6.lookup(&b), Some(MB));
    let na = |o| unsolicited_na(b, [2, 0, 0, 0, 0, 0xc], o);
    let all = ip6("ff02::1");
    raw_frame(
        &mut raw,
        &icmp6_frame([0x33, 0x33, 0, 0, 0, 1], b, all, 255, &na(false)),
    );
    a.turn(2_000, &mut NoApp, None);
    assert_eq!(a.neigh6.lookup(&b), Some(MB), "O=0 keeps the entry");
    raw_frame(
        &mut raw,
        &icmp6_frame([0x33, 0x33, 0, 0, 0, 1], b, all, 255, &na(true)),
    );
    a.turn(3_000, &mut NoApp, None);
    assert_eq!(
        a.neigh6.lookup(&b),
        Some([2, 0, 0, 0, 0, 0xc]),
        "O=1 moves it"
    );
}

/// RFC 1122 §3.2.1.3 / §3.3.6: echo requests from invalid sources, or sent to the link's
/// broadcast address with our unicast address, are not answered; RFC 5227 §2.4: an ARP
/// request whose sender claims our address is a conflict, neither answered nor learned.
#[test]
fn invalid_sources_and_address_conflicts_are_not_answered() {
    let (pa, mut raw) = pair(MemConfig::default()).unwrap();
    let mut a = node(pa, MA, MB, IP_A);
    let data = [0x55u8; 16];
    for (to, src) in [
        (MA, 0u32),
        (MA, 0xffff_ffff),
        (MA, 0xe000_0005),
        (MA, 0x7f00_0001),
        ([0xff; 6], IP_B),
    ] {
        raw_frame(&mut raw, &echo_request(to, src, IP_A, 1, &data));
    }
    a.turn(1_000, &mut NoApp, None);
    assert!(raw_rx(&mut raw).is_empty());
    assert_eq!((a.icmp.invalid_src, a.icmp.echo_answered), (5, 0));
    raw_frame(&mut raw, &echo_request(MA, IP_B, IP_A, 2, &data));
    a.turn(2_000, &mut NoApp, None);
    assert_eq!(raw_rx(&mut raw).len(), 1, "a valid one is");
    // A gratuitous request from another MAC claiming 198.18.0.1 (ours).
    let g = ArpRepr::request(
        MacAddress([2, 0, 0, 0, 0, 0xc]),
        Ipv4Address(IP_A.to_be_bytes()),
        Ipv4Address(IP_A.to_be_bytes()),
    );
    let mut buf = [0u8; 60];
    squall_stack::neigh::emit_frame(&g, [2, 0, 0, 0, 0, 0xc], &mut buf).unwrap();
    raw_frame(&mut raw, &buf);
    a.turn(3_000, &mut NoApp, None);
    assert!(raw_rx(&mut raw).is_empty(), "not answered");
    assert_eq!(a.neigh.lookup(IP_A), None, "our own address is not cached");
    assert_eq!(a.neigh.stats.conflicts, 1);
}

/// A next hop resolved by ARP that announces another MAC (a failover's gratuitous ARP,
/// RFC 5227 §3) is followed: the next SYN-ACK goes to the new MAC.
#[test]
fn the_next_hop_follows_a_gratuitous_arp() {
    let (pa, mut raw) = pair(MemConfig::default()).unwrap();
    let mut a = node(pa, MA, MB, IP_A);
    a.tcp.listen(80);
    raw_frame(&mut raw, &arp_request(IP_A));
    a.turn(1_000, &mut NoApp, None);
    raw_rx(&mut raw);
    assert_eq!(a.neigh.lookup(IP_B), Some(MB));
    a.set_next_hop(MB);
    a.follow_next_hop(IP_B);
    let mc = [2, 0, 0, 0, 0, 0xc];
    let buf = gratuitous_arp(mc, IP_B);
    raw_frame(&mut raw, &buf);
    a.turn(2_000, &mut NoApp, None);
    assert!(
        raw_rx(&mut raw).is_empty(),
        "a gratuitous ARP is not answered"
    );
    assert_eq!(a.neigh.stats.next_hop_moved, 1);
    raw_frame(&mut raw, &syn_frame(MA, Some((IP_B, IP_A)), None));
    a.turn(3_000, &mut NoApp, None);
    let got = raw_rx(&mut raw);
    assert_eq!(got.len(), 1);
    assert_eq!(&got[0][0..6], &mc[..], "the SYN-ACK goes to the new MAC");
}

/// Two workers of one port sharing their next hop: a failover's gratuitous ARP reaches
/// worker 0's queue only (a fanout puts ARP there); worker 1 follows the move at its next
/// turn, its SYN-ACK goes to the new MAC; the move is counted once, where it was heard.
#[test]
fn every_worker_follows_a_next_hop_move_one_of_them_heard() {
    let (p0, mut r0) = pair(MemConfig::default()).unwrap();
    let (p1, mut r1) = pair(MemConfig::default()).unwrap();
    let mut w0 = node(p0, MA, MB, IP_A);
    let mut w1 = node(p1, MA, MB, IP_A);
    let shared = std::sync::Arc::new(SharedMac::default());
    shared.set(MB);
    for w in [&mut w0, &mut w1] {
        w.tcp.listen(80);
        w.set_next_hop(MB);
        w.share_next_hop(shared.clone());
    }
    // worker 0 learns B from its ARP request
    raw_frame(&mut r0, &arp_request(IP_A));
    w0.turn(1_000, &mut NoApp, None);
    raw_rx(&mut r0);
    w0.follow_next_hop(IP_B);
    let mc = [2, 0, 0, 0, 0, 0xc];
    let buf = gratuitous_arp(mc, IP_B);
    raw_frame(&mut r0, &buf);
    w0.turn(2_000, &mut NoApp, None);
    assert_eq!(w0.neigh.stats.next_hop_moved, 1);
    raw_frame(&mut r1, &syn_frame(MA, Some((IP_B, IP_A)), None));
    w1.turn(3_000, &mut NoApp, None);
    let got = raw_rx(&mut r1);
    assert_eq!(got.len(), 1);
    assert_eq!(
        &got[0][0..6],
        &mc[..],
        "worker 1's SYN-ACK goes to the new MAC"
    );
    assert_eq!(
        w1.neigh.stats.next_hop_moved, 0,
        "counted where it was heard"
    );
    assert_eq!(shared.current(), Some((1, mc)));
    // Worker 1 learns B's old MAC afterwards (B's ARP request reaches worker 1): its own
    // entry says the old MAC, which is no move: nothing goes back to the old MAC.
    w1.follow_next_hop(IP_B);
    raw_frame(&mut r1, &arp_request(IP_A));
    w1.turn(4_000, &mut NoApp, None);
    raw_rx(&mut r1);
    raw_frame(&mut r0, &syn_frame(MA, Some((IP_B, IP_A)), None));
    w0.turn(5_000, &mut NoApp, None);
    assert_eq!(&raw_rx(&mut r0)[0][0..6], &mc[..], "still the new MAC");
    assert_eq!(shared.current(), Some((1, mc)));
    // A worker that shares the next hop after a move was published takes it.
    let (p2, mut r2) = pair(MemConfig::default()).unwrap();
    let mut w2 = node(p2, MA, MB, IP_A);
    w2.tcp.listen(80);
    w2.set_next_hop(MB);
    w2.share_next_hop(shared.clone());
    raw_frame(&mut r2, &syn_frame(MA, Some((IP_B, IP_A)), None));
    w2.turn(6_000, &mut NoApp, None);
    assert_eq!(
        &raw_rx(&mut r2)[0][0..6],
        &mc[..],
        "a late worker takes the move"
    );
}

/// An ICMP (IPv4) or ICMPv6 error from the raw peer (B) to A: `typ`, `code`, the four
/// bytes after the checksum (`rest`: an MTU, or zero) and the quoted packet.
fn icmp_error_frame(v6: bool, typ: u8, code: u8, rest: [u8; 4], quoted: &[u8]) -> Vec<u8> {
    use squall_wire::checksum;
    let mut msg = vec![typ, code, 0, 0];
    msg.extend_from_slice(&rest);
    msg.extend_from_slice(quoted);
    let mut f = Vec::new();
    f.extend_from_slice(&MA);
    f.extend_from_slice(&MB);
    if v6 {
        let (src, dst) = (ip6(IP6_B).0, ip6(IP6_A).0);
        let acc = checksum::pseudo_header_ipv6_acc(&src, &dst, 58, msg.len());
        let c = !checksum::fold(checksum::accumulate(acc, &msg));
        msg[2..4].copy_from_slice(&c.to_be_bytes());
        f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
        f.extend_from_slice(&(msg.len() as u16).to_be_bytes());
        f.extend_from_slice(&[58, 64]);
        f.extend_from_slice(&src);
        f.extend_from_slice(&dst);
    } else {
        let c = checksum::checksum(&msg);
        msg[2..4].copy_from_slice(&c.to_be_bytes());
        let mut ip = [0u8; 20];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&((20 + msg.len()) as u16).to_be_bytes());
        ip[8] = 64;
        ip[9] = 1;
        ip[12..16].copy_from_slice(&IP_B.to_be_bytes());
        ip[16..20].copy_from_slice(&IP_A.to_be_bytes());
        let c = checksum::checksum(&ip);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        f.extend_from_slice(&[0x08, 0x00]);
        f.extend_from_slice(&ip);
    }
    f.extend_from_slice(&msg);
    f
}

/// ICMP and ICMPv6 errors quoting one of the node's segments reach its TCP host
/// (RFC 1122 §4.2.3.9, RFC 5927): a port unreachable about a SYN-ACK ends the half-open
/// connection (a hard error), a packet too big is checked against the flight, an error
/// about a segment we never sent is ignored, a non-TCP quote counts as other ICMP.
#[test]
fn icmp_errors_reach_the_tcp_host() {
    let (pa, mut raw) = pair(MemConfig::default()).unwrap();
    let mut a = node(pa, MA, MB, IP_A);
    a.tcp.listen(80);
    let (a6, b6) = (ip6(IP6_A).0, ip6(IP6_B).0);
    let mut now = 1_000;
    for (k, (v4, v6)) in [(Some((IP_B, IP_A)), None), (None, Some((b6, a6)))]
        .into_iter()
        .enumerate()
    {
        let is6 = v6.is_some();
        raw_frame(&mut raw, &syn_frame(MA, v4, v6));
        now += 1_000;
        a.turn(now, &mut NoApp, None);
        let got = raw_rx(&mut raw);
        assert_eq!(got.len(), 1, "SYN-ACK");
        assert_eq!(a.tcp.flow_count(), 1);
        let quoted = &got[0][14..];
        // A packet too big about the SYN-ACK: within the flight, counted, nothing else
        // (the flow's MSS is already below what 1280 bytes carry).
        let ptb = if is6 { (2, 0) } else { (3, 4) };
        raw_frame(
            &mut raw,
            &icmp_error_frame(is6, ptb.0, ptb.1, [0, 0, 0x05, 0x00], quoted),
        );
        // About a segment of another connection (another port): ignored.
        let mut other = quoted.to_vec();
        other[if is6 { 40 } else { 20 }] ^= 1;
        let unreach = if is6 { (1, 4) } else { (3, 3) };
        raw_frame(
            &mut raw,
            &icmp_error_frame(is6, unreach.0, unreach.1, [0; 4], &other),
        );
        now += 1_000;
        a.turn(now, &mut NoApp, None);
        assert_eq!(a.tcp.flow_count(), 1);
        let c = a.tcp.counters().clone();
        assert_eq!(
            (c.tcps_icmp_rcvd, c.tcps_icmp_oow),
            (2 * k as u64 + 1, k as u64 + 1)
        );
        // Port unreachable about the SYN-ACK: the half-open flow ends, quietly.
        raw_frame(
            &mut raw,
            &icmp_error_frame(is6, unreach.0, unreach.1, [0; 4], quoted),
        );
        now += 1_000;
        a.turn(now, &mut NoApp, None);
        assert_eq!(a.tcp.flow_count(), 0, "{k}");
        assert_eq!(a.tcp.counters().tcps_icmp_drops, k as u64 + 1);
        assert!(raw_rx(&mut raw).is_empty());
    }
    assert_eq!(a.icmp.errors_to_tcp, 3);
    assert_eq!(a.icmp6.errors_to_tcp, 3);
    assert_eq!(a.icmp6.packet_too_big, 1);
    // A quoted UDP datagram is not the TCP host's: other ICMP.
    let mut udp = vec![0x45, 0, 0, 28, 0, 0, 0x40, 0, 64, 17, 0, 0];
    udp.extend_from_slice(&IP_A.to_be_bytes());
    udp.extend_from_slice(&IP_B.to_be_bytes());
    udp.extend_from_slice(&[0x9c, 0x40, 0, 53, 0, 8, 0, 0]);
    let other_before = a.icmp.other;
    raw_frame(&mut raw, &icmp_error_frame(false, 3, 3, [0; 4], &udp));
    a.turn(now + 1_000, &mut NoApp, None);
    assert_eq!(a.icmp.other, other_before + 1);
    assert_eq!(a.icmp.errors_to_tcp, 3);
    // An error sent to the link's broadcast address (RFC 1122 §3.2.2), or with a
    // destination-unreachable code above 15 (as Linux): not handed over.
    let quoted = syn_frame(MA, Some((IP_A, IP_B)), None)[14..].to_vec();
    let mut bcast = icmp_error_frame(false, 3, 3, [0; 4], &quoted);
    bcast[..6].copy_from_slice(&[0xff; 6]);
    raw_frame(&mut raw, &bcast);
    raw_frame(&mut raw, &icmp_error_frame(false, 3, 16, [0; 4], &quoted));
    a.turn(now + 2_000, &mut NoApp, None);
    assert_eq!(a.icmp.other, other_before + 3);
    assert_eq!(a.icmp.errors_to_tcp, 3);
}

/// An IPv6 next hop learnt by neighbour discovery that advertises another MAC with the
/// Override flag (a failover's unsolicited advertisement, RFC 4861 §7.2.6) is followed:
/// the next SYN-ACK goes to the new MAC; one without Override changes nothing.
#[test]
fn the_ipv6_next_hop_follows_an_overriding_advertisement() {
    let (pa, mut raw) = pair(MemConfig::default()).unwrap();
    let mut a = node6(pa, MA, MB, IP6_A);
    a.tcp.listen(80);
    let b = learn_b6(&mut a, &mut raw);
    a.set_next_hop(MB);
    a.follow_resolved_next_hop6(Some(b), MB);
    let mc = [2, 0, 0, 0, 0, 0xc];
    let na = |o| unsolicited_na(b, mc, o);
    let all = ip6("ff02::1");
    let syn_to_a = || syn_frame(MA, None, Some((ip6(IP6_B).0, ip6(IP6_A).0)));
    raw_frame(
        &mut raw,
        &icmp6_frame([0x33, 0x33, 0, 0, 0, 1], b, all, 255, &na(false)),
    );
    raw_frame(&mut raw, &syn_to_a());
    a.turn(2_000, &mut NoApp, None);
    let got = raw_rx(&mut raw);
    assert_eq!(got.len(), 1);
    assert_eq!(&got[0][0..6], &MB[..], "O=0: the next hop stays");
    assert_eq!(a.neigh6.stats.next_hop_moved, 0);
    raw_frame(
        &mut raw,
        &icmp6_frame([0x33, 0x33, 0, 0, 0, 1], b, all, 255, &na(true)),
    );
    a.turn(3_000, &mut NoApp, None);
    assert_eq!(a.neigh6.stats.next_hop_moved, 1);
    // A SYN of another connection: its SYN-ACK goes to the new MAC.
    let mut syn = syn_to_a();
    syn[14 + 40 + 1] ^= 1; // another source port
    let (src, dst) = (ip6(IP6_B).0, ip6(IP6_A).0);
    let sum = squall_wire::checksum::pseudo_header_ipv6_acc(&src, &dst, 6, 20);
    syn[14 + 40 + 16..14 + 40 + 18].copy_from_slice(&[0, 0]);
    let c = !squall_wire::checksum::fold(squall_wire::checksum::accumulate(sum, &syn[54..]));
    syn[14 + 40 + 16..14 + 40 + 18].copy_from_slice(&c.to_be_bytes());
    raw_frame(&mut raw, &syn);
    a.turn(4_000, &mut NoApp, None);
    let got = raw_rx(&mut raw);
    assert_eq!(got.len(), 1);
    assert_eq!(&got[0][0..6], &mc[..], "the SYN-ACK goes to the new MAC");
}

/// A next hop that goes unconfirmed is probed (neighbour unreachability detection, RFC
/// 4861 §7.3, and Linux's NUD for ARP): frames from its MAC keep it confirmed; 30 s
/// without one, a request goes to its MAC and the answer confirms it; three unanswered
/// (the device replaced: its address now at another MAC, not announced) and it is looked
/// for by broadcast (IPv6: its solicited-node group), the answer from the new MAC moving
/// the next hop there.
#[test]
fn an_unconfirmed_next_hop_is_probed_and_found_at_its_new_mac() {
    for v6 in [false, true] {
        unconfirmed_next_hop(v6);
    }
}

fn unconfirmed_next_hop(v6: bool) {
    const S: u64 = 1_000_000_000;
    let mc = [2, 0, 0, 0, 0, 0xc];
    let (pa, mut raw) = pair(MemConfig::default()).unwrap();
    let (b6, a6) = (ip6(IP6_B), ip6(IP6_A));
    let mut a = if v6 {
        let mut a = node6(pa, MA, MB, IP6_A);
        learn_b6(&mut a, &mut raw);
        a.follow_resolved_next_hop6(Some(b6), MB);
        a.probe_next_hop(S, 30 * S, None, Some(a6));
        a
    } else {
        let mut a = node(pa, MA, MB, IP_A);
        raw_frame(&mut raw, &arp_request(IP_A));
        a.turn(1_000, &mut NoApp, None);
        raw_rx(&mut raw);
        a.follow_next_hop(IP_B);
        a.probe_next_hop(S, 30 * S, Some(IP_A), None);
        a
    };
    a.set_next_hop(MB);
    // The destination MACs of the probes the node sent (its other frames left out).
    let probes = |raw: &mut MemPort| -> Vec<[u8; 6]> {
        raw_rx(raw)
            .iter()
            .filter(|f| {
                if v6 {
                    f[12..14] == [0x86, 0xdd] && f[20] == 58 && f[54] == 135
                } else {
                    f[12..14] == [0x08, 0x06]
                        && f[20..22] == [0, 1]
                        && f[38..42] == IP_B.to_be_bytes()
                }
            })
            .map(|f| f[0..6].try_into().unwrap())
            .collect()
    };
    // `mac`'s answer to a probe (ARP reply, solicited advertisement with Override).
    let answer = |mac: [u8; 6]| -> Vec<u8> {
        if v6 {
            let na = Icmpv6Repr::NeighborAdvert {
                flags: NaFlags {
                    router: false,
                    solicited: true,
                    override_: true,
                },
                target: b6,
                target_mac: Some(MacAddress(mac)),
            };
            let mut f = icmp6_frame(MA, b6, a6, 255, &na);
            f[6..12].copy_from_slice(&mac);
            f
        } else {
            arp_reply_of_b(mac).to_vec()
        }
    };
    // Pings from B every 10 s for a minute: no probe.
    for t in 1..=90 {
        if t <= 60 && t % 10 == 0 {
            let ping = if v6 {
                icmp6_frame(MA, b6, a6, 64, &echo6(t as u16, b"x"))
            } else {
                echo_request(MA, IP_B, IP_A, t as u16, b"x")
            };
            raw_frame(&mut raw, &ping);
        }
        a.turn(t * S, &mut NoApp, None);
        let p = probes(&mut raw);
        if t < 90 {
            assert!(p.is_empty(), "a probe at {t} s");
        } else {
            // 30 s after the last ping: a request to B's MAC.
            assert_eq!(p, [MB], "at {t} s");
        }
    }
    raw_frame(&mut raw, &answer(MB));
    a.turn(90 * S + 1_000, &mut NoApp, None);
    for t in 91..120 {
        a.turn(t * S, &mut NoApp, None);
        assert!(probes(&mut raw).is_empty(), "answered: no probe at {t} s");
    }
    // B's address moves to another MAC unannounced: three requests to B's MAC go
    // unanswered, then one to all; the new MAC's answer moves the next hop.
    // (the answer came 1 us after 90 s: the first request at the turn after 120 s)
    let mut sent = Vec::new();
    for t in 120..=124 {
        a.turn(t * S, &mut NoApp, None);
        sent.extend(probes(&mut raw));
    }
    let all = if v6 {
        [0x33, 0x33, 0xff, 0, 0, 2]
    } else {
        [0xff; 6]
    };
    assert_eq!(sent, [MB, MB, MB, all]);
    raw_frame(&mut raw, &answer(mc));
    a.turn(124 * S + 1_000, &mut NoApp, None);
    assert_eq!(a.next_hop(), mc, "the next hop is found at its new MAC");
    let moved = if v6 {
        a.neigh6.stats.next_hop_moved
    } else {
        a.neigh.stats.next_hop_moved
    };
    assert_eq!(moved, 1);
    for t in 125..154 {
        a.turn(t * S, &mut NoApp, None);
        assert!(probes(&mut raw).is_empty(), "found: no probe at {t} s");
    }
    let st = a.nud_stats().unwrap();
    assert_eq!(
        (st.unicast_probes, st.unreachable, st.broadcast_probes),
        (4, 1, 1)
    );
}

/// B's ARP reply (198.18.0.2 at `mac`, from `mac`) to A's request.
fn arp_reply_of_b(mac: [u8; 6]) -> [u8; 60] {
    let req = ArpRepr::request(
        MacAddress(MA),
        Ipv4Address(IP_A.to_be_bytes()),
        Ipv4Address(IP_B.to_be_bytes()),
    );
    let mut buf = [0u8; 60];
    squall_stack::neigh::emit_frame(&ArpRepr::reply_to(&req, MacAddress(mac)), mac, &mut buf)
        .unwrap();
    buf
}

/// An IPv6 node whose next hop is the default router fe80::1 (MR) of a router
/// advertisement, followed and watched from 1 s with a reachable time of 30 s; its raw
/// peer.
fn watched_router() -> (Node<MemPort>, MemPort) {
    const S: u64 = 1_000_000_000;
    let (pa, mut raw) = pair(MemConfig::default()).unwrap();
    let mut a = node6(pa, MA, MB, IP6_A);
    raw_frame(&mut raw, &router_advert(1800));
    a.turn(1_000, &mut NoApp, None);
    raw_rx(&mut raw);
    assert_eq!(a.neigh6.router(), Some((ip6("fe80::1"), MR)));
    a.set_next_hop(MR);
    a.follow_resolved_next_hop6(None, MR);
    a.probe_next_hop(S, 30 * S, None, Some(ip6(IP6_A)));
    (a, raw)
}

/// The ARP probes a node sent (requests for B), by destination MAC.
fn arp_probes(raw: &mut MemPort) -> Vec<[u8; 6]> {
    raw_rx(raw)
        .iter()
        .filter(|f| {
            f[12..14] == [0x08, 0x06]
                && f[20..22] == [0, 1]
                && f[28..32] == IP_A.to_be_bytes()
                && f[38..42] == IP_B.to_be_bytes()
        })
        .map(|f| f[0..6].try_into().unwrap())
        .collect()
}

/// Two workers sharing the next hop: worker 0 probes it, its answers reach worker 1's
/// queue (RSS, a fanout by flow hash): worker 1 tells worker 0 it heard B, so the probes
/// stay one unicast request per reachable time, never a broadcast.
#[test]
fn a_probe_answered_on_another_worker_keeps_the_next_hop_reachable() {
    const S: u64 = 1_000_000_000;
    let (p0, mut r0) = pair(MemConfig::default()).unwrap();
    let (p1, mut r1) = pair(MemConfig::default()).unwrap();
    let mut w0 = node(p0, MA, MB, IP_A);
    let mut w1 = node(p1, MA, MB, IP_A);
    let shared = Arc::new(SharedMac::default());
    shared.set(MB);
    for w in [&mut w0, &mut w1] {
        w.set_next_hop(MB);
        w.follow_next_hop(IP_B);
        w.share_next_hop(shared.clone());
    }
    w0.probe_next_hop(S, 30 * S, Some(IP_A), None);
    let reply = arp_reply_of_b(MB);
    let mut sent = Vec::new();
    for t in 1..=150 {
        w0.turn(t * S, &mut NoApp, None);
        let p = arp_probes(&mut r0);
        if !p.is_empty() {
            raw_frame(&mut r1, &reply);
        }
        sent.extend(p);
        w1.turn(t * S, &mut NoApp, None);
        raw_rx(&mut r1);
    }
    assert_eq!(sent, [MB; 4], "one unicast probe each 30 s, answered");
    let st = w0.nud_stats().unwrap();
    assert_eq!(
        (st.unicast_probes, st.unreachable, st.broadcast_probes),
        (4, 0, 0)
    );
    assert!(w1.nud_stats().is_none(), "one worker probes");
}

/// A next hop given by its MAC (`--peer-mac`: not followed) is never probed.
#[test]
fn a_static_next_hop_is_never_probed() {
    const S: u64 = 1_000_000_000;
    let (pa, mut raw) = pair(MemConfig::default()).unwrap();
    let mut a = node(pa, MA, MB, IP_A);
    a.set_next_hop(MB);
    a.probe_next_hop(S, S, Some(IP_A), None);
    for t in 1..100 {
        a.turn(t * S, &mut NoApp, None);
        assert!(raw_rx(&mut raw).is_empty(), "sent at {t} s");
    }
    assert!(a.nud_stats().is_none());
}

/// The IPv6 default router (from a router advertisement) replaced: the new one has
/// another link-local address. The old one's unicast probes go unanswered; with the
/// multicast ones go router solicitations, and the new router's advertisement makes it
/// the next hop.
#[test]
fn a_replaced_ipv6_router_is_followed_to_the_new_one() {
    const S: u64 = 1_000_000_000;
    let mc = [2, 0, 0, 0, 0, 0xc];
    let (mut a, mut raw) = watched_router();
    // (type 135: a solicitation, 133: a router solicitation; by destination MAC)
    let mut ns = Vec::new();
    let mut rs = 0;
    for t in 1..=34 {
        a.turn(t * S, &mut NoApp, None);
        for f in raw_rx(&mut raw) {
            match f.get(54) {
                Some(135) => ns.push(<[u8; 6]>::try_from(&f[0..6]).unwrap()),
                Some(133) => rs += 1,
                _ => {}
            }
        }
    }
    let fe80_1_group = [0x33, 0x33, 0xff, 0, 0, 1];
    assert_eq!(
        ns,
        [MR, MR, MR, fe80_1_group],
        "three unicast, then to its group"
    );
    assert_eq!(rs, 1, "a router solicitation with the multicast probe");
    raw_frame(&mut raw, &router_advert_from("fe80::2", mc, 1800));
    a.turn(34 * S + 1_000, &mut NoApp, None);
    assert_eq!(a.next_hop(), mc, "the new router is the next hop");
    assert_eq!(a.neigh6.stats.next_hop_moved, 1);
    for t in 35..60 {
        a.turn(t * S, &mut NoApp, None);
        assert!(
            raw_rx(&mut raw).iter().all(|f| f.get(54) != Some(&135)),
            "the new router heard: no probe at {t} s"
        );
    }
}

/// The IPv6 default router silent long enough to be probed by multicast, then answering:
/// it stays the next hop, although another router advertised itself meanwhile (and
/// again after the answer).
#[test]
fn a_lost_router_that_answers_is_not_replaced() {
    const S: u64 = 1_000_000_000;
    let mc = [2, 0, 0, 0, 0, 0xc];
    let (mut a, mut raw) = watched_router();
    // A second router advertises while the first is reachable: no switch.
    raw_frame(&mut raw, &router_advert_from("fe80::2", mc, 1800));
    a.turn(5 * S, &mut NoApp, None);
    assert_eq!(a.next_hop(), MR);
    for t in 6..=34 {
        a.turn(t * S, &mut NoApp, None);
        raw_rx(&mut raw);
    }
    // The first answers the multicast probe, then the second advertises again.
    let na = Icmpv6Repr::NeighborAdvert {
        flags: NaFlags {
            router: true,
            solicited: true,
            override_: true,
        },
        target: ip6("fe80::1"),
        target_mac: Some(MacAddress(MR)),
    };
    let mut f = icmp6_frame(MA, ip6("fe80::1"), ip6(IP6_A), 255, &na);
    f[6..12].copy_from_slice(&MR);
    raw_frame(&mut raw, &f);
    a.turn(34 * S + 500_000_000, &mut NoApp, None);
    raw_frame(&mut raw, &router_advert_from("fe80::2", mc, 1800));
    a.turn(34 * S + 600_000_000, &mut NoApp, None);
    assert_eq!(a.next_hop(), MR, "the first router answered: it stays");
    assert_eq!(a.neigh6.stats.next_hop_moved, 0);
}

/// After the next hop went to another router, the old one's advertisement (it came
/// back) does not take it back: the new router is reachable.
#[test]
fn a_replaced_router_coming_back_does_not_take_the_next_hop_back() {
    const S: u64 = 1_000_000_000;
    let mc = [2, 0, 0, 0, 0, 0xc];
    let (mut a, mut raw) = watched_router();
    for t in 1..=34 {
        a.turn(t * S, &mut NoApp, None);
        raw_rx(&mut raw);
    }
    raw_frame(&mut raw, &router_advert_from("fe80::2", mc, 1800));
    a.turn(34 * S + 1_000, &mut NoApp, None);
    assert_eq!(a.next_hop(), mc);
    raw_frame(&mut raw, &router_advert(1800));
    a.turn(34 * S + 2_000, &mut NoApp, None);
    assert_eq!(a.next_hop(), mc, "no flap back to the first router");
    assert_eq!(a.neigh6.stats.next_hop_moved, 1);
}

/// The next hop replaced (a new MAC) answers worker 0's broadcast probe on worker 1's
/// queue. Worker 1 resolved nothing itself (the first reply reached worker 0), but holds
/// the entry the port resolved: the answer is a move there, followed by worker 0, whose
/// probing stops.
#[test]
fn a_new_mac_answering_on_another_worker_moves_the_next_hop() {
    const S: u64 = 1_000_000_000;
    let mc = [2, 0, 0, 0, 0, 0xc];
    let (p0, mut r0) = pair(MemConfig::default()).unwrap();
    let (p1, mut r1) = pair(MemConfig::default()).unwrap();
    let mut w0 = node(p0, MA, MB, IP_A);
    let mut w1 = node(p1, MA, MB, IP_A);
    raw_frame(&mut r0, &arp_request(IP_A));
    w0.turn(1_000, &mut NoApp, None);
    raw_rx(&mut r0);
    let shared = Arc::new(SharedMac::default());
    shared.set(MB);
    let got = w1.resolve_shared(IP_A, IP_B, Duration::from_millis(50), false, &shared);
    assert_eq!(got, Ok(MB));
    assert_eq!(
        w1.neigh.lookup(IP_B),
        Some(MB),
        "noted from the shared resolution"
    );
    for w in [&mut w0, &mut w1] {
        w.set_next_hop(MB);
        w.follow_next_hop(IP_B);
        w.share_next_hop(shared.clone());
    }
    w0.probe_next_hop(S, 30 * S, Some(IP_A), None);
    let reply = arp_reply_of_b(mc);
    let mut sent = Vec::new();
    for t in 1..=100 {
        w0.turn(t * S, &mut NoApp, None);
        let p = arp_probes(&mut r0);
        if p.iter().any(|m| *m != MB) {
            raw_frame(&mut r1, &reply);
        }
        sent.extend(p);
        w1.turn(t * S, &mut NoApp, None);
        raw_rx(&mut r1);
    }
    assert_eq!(w0.next_hop(), mc, "worker 0 follows the move");
    assert_eq!(w1.next_hop(), mc);
    assert_eq!(w1.neigh.stats.next_hop_moved, 1, "heard on worker 1");
    // Three unicast probes to the old MAC, one broadcast answered, then at most the
    // unicast probes of the new MAC's reachable times (answered nowhere here).
    assert_eq!(&sent[..4], [MB, MB, MB, [0xff; 6]]);
    assert!(sent[4..].iter().all(|&m| m == mc), "{sent:x?}");
}

/// Two workers, the IPv6 default router's advertisements reaching worker 1's queue only
/// (RSS hashes them there): worker 0 takes the router worker 1 resolved, follows and
/// probes it; when it is lost, the advertisement of the router replacing it, heard by
/// worker 1, makes that one the next hop of both.
#[test]
fn a_router_advertised_on_another_workers_queue_is_probed_and_replaced() {
    const S: u64 = 1_000_000_000;
    let mc = [2, 0, 0, 0, 0, 0xc];
    let (p0, mut r0) = pair(MemConfig::default()).unwrap();
    let (p1, mut r1) = pair(MemConfig::default()).unwrap();
    let mut w0 = node6(p0, MA, [0; 6], IP6_A);
    let mut w1 = node6(p1, MA, [0; 6], IP6_A);
    let shared = Arc::new(SharedMac::default());
    raw_frame(&mut r1, &router_advert(1800));
    let wait = Duration::from_millis(500);
    let got1 = w1.next_hop6_shared(ip6(IP6_A), None, wait, false, &shared);
    let got0 = w0.next_hop6_shared(ip6(IP6_A), None, wait, true, &shared);
    assert_eq!((got0, got1), (Ok(MR), Ok(MR)));
    assert_eq!(
        w0.neigh6.router(),
        Some((ip6("fe80::1"), MR)),
        "worker 0 takes the router worker 1 heard"
    );
    raw_rx(&mut r0);
    for w in [&mut w0, &mut w1] {
        w.set_next_hop(MR);
        w.follow_resolved_next_hop6(None, MR);
        w.share_next_hop(shared.clone());
    }
    w0.probe_next_hop(S, 30 * S, None, Some(ip6(IP6_A)));
    assert!(w0.nud_stats().is_some(), "worker 0 watches the router");
    let mut ns = Vec::new();
    let mut rs = 0;
    for t in 1..=34 {
        w0.turn(t * S, &mut NoApp, None);
        for f in raw_rx(&mut r0) {
            match f.get(54) {
                Some(135) => ns.push(<[u8; 6]>::try_from(&f[0..6]).unwrap()),
                Some(133) => rs += 1,
                _ => {}
            }
        }
        w1.turn(t * S, &mut NoApp, None);
        raw_rx(&mut r1);
    }
    let fe80_1_group = [0x33, 0x33, 0xff, 0, 0, 1];
    assert_eq!(ns, [MR, MR, MR, fe80_1_group], "probed, then looked for");
    assert_eq!(rs, 1);
    // The replacing router's advertisement reaches worker 1's queue.
    raw_frame(&mut r1, &router_advert_from("fe80::2", mc, 1800));
    w1.turn(34 * S + 1_000, &mut NoApp, None);
    assert_eq!(w1.next_hop(), MR, "worker 1 does not probe: it only tells");
    w0.turn(34 * S + 2_000, &mut NoApp, None);
    assert_eq!(w0.next_hop(), mc, "the new router is the next hop");
    assert_eq!(w0.neigh6.stats.next_hop_moved, 1);
    w1.turn(34 * S + 3_000, &mut NoApp, None);
    assert_eq!(w1.next_hop(), mc, "worker 1 follows the move");
    for t in 35..60 {
        w0.turn(t * S, &mut NoApp, None);
        assert!(
            raw_rx(&mut r0).iter().all(|f| f.get(54) != Some(&135)),
            "the new router taken: no probe at {t} s"
        );
    }
}

/// RFC 1122 §3.2.2.1 / §4.1.3.1: a UDP datagram to a closed port of one of the node's
/// addresses is answered with "port unreachable" quoting it (IPv4: at most 548 bytes);
/// not one to another address or a broadcast MAC; a flood from one peer gets 6 answers,
/// then one a second, a flood from many 50 at once, then one a millisecond (the error
/// budgets, Linux's).
#[test]
fn udp_to_a_closed_port_is_answered_port_unreachable() {
    let (pa, mut raw) = pair(MemConfig::default()).unwrap();
    let mut a = node(pa, MA, MB, IP_A);
    let data: Vec<u8> = (0..20u8).collect();
    let dg = udp_frame(MA, &IP_B.to_be_bytes(), &IP_A.to_be_bytes(), 5000, &data);
    raw_frame(&mut raw, &dg);
    raw_frame(
        &mut raw,
        &udp_frame(
            MA,
            &IP_B.to_be_bytes(),
            &0xc612_0009u32.to_be_bytes(),
            5000,
            &data,
        ),
    );
    raw_frame(
        &mut raw,
        &udp_frame(
            [0xff; 6],
            &IP_B.to_be_bytes(),
            &IP_A.to_be_bytes(),
            5000,
            &data,
        ),
    );
    a.turn(1_000_000, &mut NoApp, None);
    let got = raw_rx(&mut raw);
    assert_eq!(got.len(), 1, "{got:?}");
    let r = &got[0];
    assert_eq!(
        (&r[0..6], &r[6..12], &r[12..14]),
        (&MB[..], &MA[..], &[8u8, 0][..])
    );
    assert_eq!(
        squall_wire::checksum::sum(&r[14..34]),
        0xffff,
        "IPv4 checksum"
    );
    assert_eq!(
        (r[23], &r[26..30], &r[30..34]),
        (1, &IP_A.to_be_bytes()[..], &IP_B.to_be_bytes()[..])
    );
    assert_eq!(
        (r[34], r[35]),
        (3, 3),
        "destination unreachable, port unreachable"
    );
    assert_eq!(
        squall_wire::checksum::sum(&r[34..]),
        0xffff,
        "ICMP checksum"
    );
    assert_eq!(&r[42..], &dg[14..], "the datagram quoted whole");
    assert_eq!(
        (r[20], r[21]),
        (0x40, 0),
        "DF, an atomic datagram (RFC 6864)"
    );
    // (the one in a link-layer broadcast reaches no app either, RFC 1122 §3.3.6)
    assert_eq!((a.icmp.unreach_sent, a.udp.stats.rx_bad_addr), (1, 1));
    // From the node's own address (looped or forged): not answered.
    raw_frame(
        &mut raw,
        &udp_frame(MA, &IP_A.to_be_bytes(), &IP_A.to_be_bytes(), 5000, &data),
    );
    a.turn(1_500_000, &mut NoApp, None);
    assert!(raw_rx(&mut raw).is_empty());
    assert_eq!(a.icmp.unreach_suppressed, 1);
    // A large datagram: 548 bytes of it quoted.
    let big = vec![7u8; 1000];
    raw_frame(
        &mut raw,
        &udp_frame(MA, &IP_B.to_be_bytes(), &IP_A.to_be_bytes(), 5001, &big),
    );
    a.turn(2_000_000, &mut NoApp, None);
    let got = raw_rx(&mut raw);
    assert_eq!(got[0].len(), 14 + 20 + 8 + 548);
    // A flood from one peer (another than B): 6 answers at once, then one a second (as
    // Linux limits each peer).
    let c = 0xc612_0003u32.to_be_bytes();
    let from_c = udp_frame(MA, &c, &IP_A.to_be_bytes(), 5000, &data);
    for _ in 0..100 {
        raw_frame(&mut raw, &from_c);
    }
    a.turn(3_000_000, &mut NoApp, None);
    assert_eq!(
        raw_rx(&mut raw).len(),
        6,
        "answers to 100 datagrams of one peer"
    );
    for _ in 0..20 {
        raw_frame(&mut raw, &from_c);
    }
    a.turn(1_003_000_000, &mut NoApp, None);
    assert_eq!(raw_rx(&mut raw).len(), 1, "a second later: one more");
    // From 100 peers at once: the node's burst of 50, then one a millisecond.
    let from = |k: u32| {
        udp_frame(
            MA,
            &(0xc612_0100 + k).to_be_bytes(),
            &IP_A.to_be_bytes(),
            5000,
            &data,
        )
    };
    for k in 0..100 {
        raw_frame(&mut raw, &from(k));
    }
    a.turn(2_000_000_000, &mut NoApp, None);
    let n = raw_rx(&mut raw).len();
    assert!((48..=50).contains(&n), "{n} answers to 100 peers");
    for k in 100..120 {
        raw_frame(&mut raw, &from(k));
    }
    a.turn(2_010_000_000, &mut NoApp, None);
    assert_eq!(raw_rx(&mut raw).len(), 10, "10 ms later: 10 more");

    // IPv6: the same answer (type 1, code 4), checksummed over the pseudo-header.
    let (pa, mut raw) = pair(MemConfig::default()).unwrap();
    let mut a = node6(pa, MA, MB, "2001:db8::1");
    let (me, peer) = (ip6("2001:db8::1"), ip6("2001:db8::2"));
    let dg = udp_frame(MA, &peer.0, &me.0, 5000, &data);
    raw_frame(&mut raw, &dg);
    raw_frame(
        &mut raw,
        &udp_frame(MA, &peer.0, &ip6("2001:db8::9").0, 5000, &data),
    );
    a.turn(1_000_000, &mut NoApp, None);
    let got = raw_rx(&mut raw);
    assert_eq!(got.len(), 1, "{got:?}");
    let r = &got[0];
    assert_eq!((&r[0..6], &r[12..14]), (&MB[..], &[0x86u8, 0xdd][..]));
    assert_eq!(
        (r[20], &r[22..38], &r[38..54]),
        (58, &me.0[..], &peer.0[..])
    );
    assert_eq!(
        (r[54], r[55]),
        (1, 4),
        "destination unreachable, port unreachable"
    );
    let acc = squall_wire::checksum::pseudo_header_ipv6_acc(&me.0, &peer.0, 58, r.len() - 54);
    assert_eq!(
        squall_wire::checksum::fold(squall_wire::checksum::accumulate(acc, &r[54..])),
        0xffff,
        "ICMPv6 checksum"
    );
    assert_eq!(&r[62..], &dg[14..], "the packet quoted whole");
    assert_eq!((a.icmp6.unreach_sent, a.udp.stats.rx_no_port), (1, 1));
    // Sources that are not unicast, or ours: loopback (dropped before any app sees it),
    // IPv4-mapped, the node's own.
    for src in ["::1", "::ffff:10.0.0.1", "2001:db8::1"] {
        raw_frame(&mut raw, &udp_frame(MA, &ip6(src).0, &me.0, 5000, &data));
    }
    a.turn(2_000_000, &mut NoApp, None);
    assert!(raw_rx(&mut raw).is_empty());
    assert_eq!(
        (a.icmp6.unreach_suppressed, a.udp.stats.rx_bad_addr),
        (2, 1)
    );

    // A node whose owned addresses include a group: never an answer to a datagram sent
    // to it (RFC 1122 §3.2.2), which no app sees either (§3.2.1.3).
    let (pa, mut raw) = pair(MemConfig::default()).unwrap();
    let mut a = node(pa, MA, MB, 0xe000_0005);
    raw_frame(
        &mut raw,
        &udp_frame(
            MA,
            &IP_B.to_be_bytes(),
            &0xe000_0005u32.to_be_bytes(),
            5000,
            &data,
        ),
    );
    a.turn(1_000_000, &mut NoApp, None);
    assert!(raw_rx(&mut raw).is_empty());
    assert_eq!((a.icmp.unreach_sent, a.udp.stats.rx_bad_addr), (0, 1));
}

/// Splits an IPv4 or IPv6 frame into fragments of at most `size` data bytes (a multiple
/// of 8), as a router clearing DF (IPv4) or the source (IPv6) would, and returns them last
/// first; frames that fit are returned whole.
fn fragments(frame: &[u8], size: usize, id: u32) -> Vec<Vec<u8>> {
    let v6 = frame[12..14] == [0x86, 0xdd];
    let (hlen, end) = if v6 {
        (
            54,
            54 + usize::from(u16::from_be_bytes([frame[18], frame[19]])),
        )
    } else if frame[12..14] == [0x08, 0x00] {
        let ihl = usize::from(frame[14] & 0x0f) * 4;
        (
            14 + ihl,
            14 + usize::from(u16::from_be_bytes([frame[16], frame[17]])),
        )
    } else {
        return vec![frame.to_vec()];
    };
    let data = &frame[hlen..end];
    if data.len() <= size {
        return vec![frame.to_vec()];
    }
    let mut out = Vec::new();
    for (i, chunk) in data.chunks(size).enumerate() {
        let off = i * size;
        let more = off + chunk.len() < data.len();
        let mut f = frame[..hlen].to_vec();
        if v6 {
            let nh = f[20];
            f[20] = 44;
            f.extend_from_slice(&[nh, 0]);
            f.extend_from_slice(&(off as u16 | u16::from(more)).to_be_bytes());
            f.extend_from_slice(&id.to_be_bytes());
            f.extend_from_slice(chunk);
            f[18..20].copy_from_slice(&((8 + chunk.len()) as u16).to_be_bytes());
        } else {
            f.extend_from_slice(chunk);
            let total = (hlen - 14 + chunk.len()) as u16;
            f[16..18].copy_from_slice(&total.to_be_bytes());
            f[18..20].copy_from_slice(&(id as u16).to_be_bytes());
            let fo = (off / 8) as u16 | if more { 0x2000 } else { 0 };
            f[20..22].copy_from_slice(&fo.to_be_bytes());
            f[24..26].copy_from_slice(&[0, 0]);
            let c = squall_wire::checksum::checksum(&f[14..hlen]);
            f[24..26].copy_from_slice(&c.to_be_bytes());
        }
        out.push(f);
    }
    out.reverse();
    out
}

/// Moves every frame `from` sent to `to`, fragmented to `size` data bytes.
fn forward_fragmented(from: &mut MemPort, to: &mut MemPort, size: usize, id: &mut u32) {
    for f in raw_rx(from) {
        *id += 1;
        for g in fragments(&f, size, *id) {
            raw_frame(to, &g);
        }
    }
}

/// RFC 791 §3.2 / RFC 8200 §4.5: a path that fragments every large frame (a router
/// clearing DF with a 576-byte MTU, IPv4; the source, IPv6), fragments delivered last
/// first: both ends reassemble every segment, the bodies arrive intact both ways and the
/// flows close normally, nothing dropped by the reassembly.
#[test]
fn tcp_through_a_fragmenting_path_completes() {
    for v6 in [false, true] {
        let (pa, mut ra) = pair(MemConfig::default()).unwrap();
        let (pb, mut rb) = pair(MemConfig::default()).unwrap();
        let tcp = |mac, gateway_mac| TcpConfig {
            mac,
            gateway_mac,
            ..TcpConfig::default()
        };
        let (mut a, mut b, mut on_a, mut on_b) = bulk_nodes(pa, pb, tcp, v6, 60_000);
        let (body_a, body_b) = (on_b.expect.clone(), on_a.expect.clone());
        let mut id = 0;
        let mut now = 0u64;
        for _ in 0..200_000 {
            now += 100_000;
            a.turn(now, &mut on_a, None);
            forward_fragmented(&mut ra, &mut rb, 552, &mut id);
            b.turn(now, &mut on_b, None);
            forward_fragmented(&mut rb, &mut ra, 552, &mut id);
            if on_a.closed.is_some() && on_b.closed.is_some() {
                break;
            }
        }
        assert!(
            on_a.got == *body_b && on_b.got == *body_a,
            "bodies intact (v6 {v6})"
        );
        assert_eq!(on_a.closed, Some(CloseReason::Normal));
        assert_eq!(on_b.closed, Some(CloseReason::Normal));
        for n in [&a, &b] {
            let r = n.reasm.stats;
            assert!(r.reassembled > 20, "segments came in fragments: {r:?}");
            assert_eq!(r.dropped() + r.duplicates, 0, "{r:?}");
            assert_eq!((n.reasm.pending(), n.reasm.held()), (0, 0));
            assert_eq!(n.counters.rx_fragments, r.fragments);
            assert_eq!(n.counters.rx_bad + n.counters.rx_other_ip, 0);
            let c = n.tcp.counters();
            assert_eq!(c.tcps_rcvbadsum, 0, "reassembled segments verified good");
        }
    }
}

/// A UDP datagram in fragments to a closed port: nothing until the last fragment, then
/// one port unreachable quoting the whole datagram's headers (both families); a
/// corrupted datagram is verified whole and dropped; fragments for another address are
/// not kept.
#[test]
fn a_fragmented_datagram_is_received_whole() {
    for v6 in [false, true] {
        let (pa, mut raw) = pair(MemConfig::default()).unwrap();
        let mut a = node(pa, MA, MB, IP_A);
        let data: Vec<u8> = (0..3000u32).map(|i| (i % 253) as u8).collect();
        let (src, dst, other): (Vec<u8>, Vec<u8>, Vec<u8>) = if v6 {
            (
                ip6(IP6_B).0.to_vec(),
                ip6(IP6_A).0.to_vec(),
                ip6("2001:db8::9").0.to_vec(),
            )
        } else {
            (
                IP_B.to_be_bytes().to_vec(),
                IP_A.to_be_bytes().to_vec(),
                0xc612_0009u32.to_be_bytes().to_vec(),
            )
        };
        let dg = udp_frame(MA, &src, &dst, 5000, &data);
        let parts = fragments(&dg, 1232, 77);
        assert_eq!(parts.len(), 3);
        let mut now = 1_000;
        for (i, p) in parts.iter().enumerate() {
            raw_frame(&mut raw, p);
            now += 1_000;
            a.turn(now, &mut NoApp, None);
            let got = raw_rx(&mut raw);
            if i + 1 < parts.len() {
                assert!(got.is_empty(), "nothing before the datagram is whole");
                continue;
            }
            assert_eq!(got.len(), 1, "one port unreachable (v6 {v6})");
            // the quote: the whole datagram's UDP header (length 3008)
            let q = if v6 {
                14 + 40 + 8 + 40
            } else {
                14 + 20 + 8 + 20
            };
            assert_eq!(&got[0][q + 4..q + 6], &3008u16.to_be_bytes());
        }
        let s = a.reasm.stats;
        assert_eq!((s.fragments, s.reassembled, a.reasm.pending()), (3, 1, 0));
        assert_eq!(a.udp.stats.rx_no_port, 1);
        // corrupted in its middle fragment: reassembled, refused by its checksum
        let mut bad = dg.clone();
        let mid = bad.len() / 2;
        bad[mid] ^= 0xff;
        if !v6 {
            // (IPv4 UDP without a checksum: give it one, then corrupt)
            bad = udp_with_checksum(&dg);
            bad[mid] ^= 0xff;
        }
        for p in fragments(&bad, 1232, 78) {
            raw_frame(&mut raw, &p);
        }
        a.turn(now + 1_000, &mut NoApp, None);
        assert!(raw_rx(&mut raw).is_empty());
        assert_eq!((a.reasm.stats.reassembled, a.udp.stats.rx_bad_sum), (2, 1));
        // to another address: not ours, not kept
        let elsewhere = udp_frame(MA, &src, &other, 5000, &data);
        for p in fragments(&elsewhere, 1232, 79) {
            raw_frame(&mut raw, &p);
        }
        a.turn(now + 2_000, &mut NoApp, None);
        assert_eq!(a.reasm.pending(), 0);
        assert_eq!(a.reasm.stats.fragments, 6);
        assert_eq!(a.counters.rx_not_ours, 3);
        assert_eq!(a.counters.rx_fragments, 6, "fragments for the node only");
    }
}

/// An IPv4 UDP frame's copy with its UDP checksum filled in.
fn udp_with_checksum(f: &[u8]) -> Vec<u8> {
    let mut f = f.to_vec();
    let (s, d): ([u8; 4], [u8; 4]) = (f[26..30].try_into().unwrap(), f[30..34].try_into().unwrap());
    let ulen = f.len() - 34;
    let mut ph = Vec::new();
    ph.extend_from_slice(&s);
    ph.extend_from_slice(&d);
    ph.extend_from_slice(&[0, 17]);
    ph.extend_from_slice(&(ulen as u16).to_be_bytes());
    ph.extend_from_slice(&f[34..]);
    let c = squall_wire::checksum::checksum(&ph);
    f[40..42].copy_from_slice(&c.to_be_bytes());
    f
}

/// Two client workers behind one port that cannot steer, the server's segments
/// fragmented: every fragment stays on worker 0 (fragments carry no ports), which
/// reassembles the segments of worker 1's flow and hands them over whole; both exchanges
/// complete.
#[test]
fn fragments_are_reassembled_where_they_arrive_then_redirected() {
    let (w0, w1) = two_workers_on_one_queue(Some(1000));
    let (r0, r1) = (w0.redirect_stats().unwrap(), w1.redirect_stats().unwrap());
    assert!(w0.reasm.stats.reassembled >= 8, "{:?}", w0.reasm.stats);
    assert_eq!(w1.reasm.stats.fragments, 0, "no fragment went to worker 1");
    // worker 1's segments whole (its data), its small frames as they came (SYN-ACK, ACKs)
    assert!(
        r0.whole_sent >= 4 && r0.whole_sent == r1.whole_received,
        "{r0:?} {r1:?}"
    );
    assert!(r0.sent >= 2 && r0.sent == r1.received, "{r0:?} {r1:?}");
    assert_eq!(r0.dropped(), 0);
    assert_eq!(w1.counters.rx_redirected, r1.taken());
}

/// Two server workers behind a port whose device steers flows by RSS (no redirect of
/// the port's frames), the client's segments fragmented, each fragment put on the queue
/// that is not its flow's (the device hashes fragments on their addresses): the worker
/// that reassembles a segment hands it to the worker of the queue its 4-tuple names, and
/// the exchange completes both ways.
#[test]
fn on_rss_a_reassembled_segment_goes_to_its_queues_worker() {
    use squall_port::rss::{RssConfig, RssSteer};
    let (pc, mut rc) = pair(MemConfig::default()).unwrap();
    let (p0, mut r0) = pair(MemConfig::default()).unwrap();
    let (p1, mut r1) = pair(MemConfig::default()).unwrap();
    let mut c = node(pc, MA, MB, IP_A);
    let mut s0 = node(p0, MB, MA, IP_B);
    let mut s1 = node(p1, MB, MA, IP_B);
    let steer = RssSteer::new(&RssConfig::symmetric(2));
    let mut mesh = redirect::mesh(2, 256);
    s1.set_rss_redirect(mesh.pop().unwrap(), steer.clone());
    s0.set_rss_redirect(mesh.pop().unwrap(), steer.clone());
    s0.tcp.listen(80);
    s1.tcp.listen(80);
    let body = |salt: u8| -> Arc<[u8]> { (0..20_000u32).map(|i| (i % 251) as u8 ^ salt).collect() };
    let (body_c, body_s) = (body(0x21), body(0x6b));
    let mut on_c = bulk_app(&mut c, &body_c, &body_s, Some((IP_A, IP_B, 80)), false);
    let mut on_s0 = bulk_app(&mut s0, &body_s, &body_c, None, false);
    let mut on_s1 = bulk_app(&mut s1, &body_s, &body_c, None, false);
    let (mut now, mut id, mut owner) = (0, 0, None);
    for _ in 0..20_000 {
        now += 100_000;
        c.turn(now, &mut on_c, None);
        for f in raw_rx(&mut rc) {
            let q = steer.queue_of_frame(&f).unwrap_or(0);
            owner = owner.or(Some(q));
            id += 1;
            for g in fragments(&f, 1000, id) {
                // a fragment to the other worker's queue, a whole frame to its own
                let k = if g.len() == f.len() { q } else { 1 - q };
                raw_frame(if k == 0 { &mut r0 } else { &mut r1 }, &g);
            }
        }
        s0.turn(now, &mut on_s0, None);
        s1.turn(now, &mut on_s1, None);
        forward(&mut r0, &mut rc);
        forward(&mut r1, &mut rc);
        if on_c.closed.is_some() && (on_s0.closed.is_some() || on_s1.closed.is_some()) {
            break;
        }
    }
    let q = owner.unwrap();
    let (own, other) = if q == 0 { (&on_s0, &s1) } else { (&on_s1, &s0) };
    assert!(
        on_c.got == *body_s && own.got == *body_c,
        "bodies intact both ways"
    );
    assert_eq!(on_c.closed, Some(CloseReason::Normal));
    assert_eq!(own.closed, Some(CloseReason::Normal));
    let r = other.redirect_stats().unwrap();
    assert!(
        other.reasm.stats.reassembled >= 10,
        "{:?}",
        other.reasm.stats
    );
    assert_eq!(
        r.whole_sent, other.reasm.stats.reassembled,
        "every segment handed over"
    );
    assert_eq!(r.sent, 0, "no frame of the port redirected");
    assert_eq!(
        other.tcp.counters().tcps_connects + other.tcp.counters().tcps_accepts,
        0
    );
    assert_eq!(
        s0.counters.rx_redirected + s1.counters.rx_redirected,
        r.whole_sent
    );
}

/// The `node` fuzz target's harness (`squall_stack::fuzzing::node`) on seeded random
/// inputs: records of frames patched toward what the node takes further, IPv4 and IPv6
/// fragments among them, small reassembly limits and a clock that moves. No panic, the
/// reassembly within its limits after every turn, empty once every datagram timed out.
#[test]
fn random_frames_and_fragments_keep_the_node_whole() {
    let mut rng = squall_port::rng::Rng::new(0x5eed);
    let mut all = squall_stack::reasm::ReasmStats::default();
    for _ in 0..300 {
        let mut input = Vec::new();
        for k in 0..rng.below(40) {
            if rng.below(3) == 0 {
                // a datagram in fragments, whole or one moved over another or one lost
                let v6 = rng.below(2) == 0;
                let data: Vec<u8> = (0..8 + rng.below(3_000)).map(|i| i as u8).collect();
                let (src, dst) = if v6 {
                    (ip6(IP6_B).0.to_vec(), ip6(IP6_A).0.to_vec())
                } else {
                    (IP_B.to_be_bytes().to_vec(), IP_A.to_be_bytes().to_vec())
                };
                let dg = udp_frame(MA, &src, &dst, 7, &data);
                let size = 8 * (1 + rng.below(150) as usize);
                let mut parts = fragments(&dg, size, k as u32 % 3);
                match rng.below(4) {
                    0 if parts.len() > 1 && !v6 => {
                        // (IPv4: the offset field; the harness makes the checksum again)
                        let off = u16::from_be_bytes([parts[0][20], parts[0][21]]);
                        parts[0][20..22].copy_from_slice(&(off ^ 1).to_be_bytes());
                    }
                    1 if parts.len() > 1 => {
                        parts.remove(0);
                    }
                    // (IPv4: one fragment with options, its header longer than the
                    // others'; the harness makes its length and checksum again)
                    2 if !v6 => {
                        let k = rng.below(parts.len() as u64) as usize;
                        parts[k].splice(34..34, [1u8, 1, 1, 1]);
                        parts[k][14] = 0x46;
                    }
                    _ => {}
                }
                for p in parts {
                    let ctl = 0x01 | if v6 { 0 } else { 0x10 } | (rng.next_u64() as u8 & 0xc0);
                    input.push(ctl);
                    input.extend_from_slice(&(p.len() as u16).to_le_bytes());
                    input.extend_from_slice(&p);
                }
                continue;
            }
            let len = 14 + rng.below(1_200) as usize;
            // mostly to us, shaped, fragments; the clock and turns at random
            let ctl = (rng.next_u64() as u8)
                | if rng.chance(u64::MAX / 4 * 3) {
                    0x33
                } else {
                    0
                };
            input.push(ctl);
            input.extend_from_slice(&(len as u16).to_le_bytes());
            // a few ids only, so that fragments of one datagram meet
            let mut f: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
            if len > 22 {
                f[18] = 0;
                f[19] = rng.below(3) as u8;
            }
            input.extend_from_slice(&f);
        }
        let s = squall_stack::fuzzing::node(&input);
        all.fragments += s.fragments;
        all.reassembled += s.reassembled;
        all.timed_out += s.timed_out;
        all.overlaps += s.overlaps;
        all.malformed += s.malformed;
        all.no_room += s.no_room;
    }
    eprintln!("{all:?}");
    assert!(
        all.fragments > 1_000 && all.timed_out > 0 && all.malformed > 0 && all.overlaps > 0,
        "{all:?}"
    );
}

/// RFC 1122 §3.3.2 / RFC 8200 §4.5: a datagram whose fragments did not all come in time
/// is dropped; where its first fragment came, the sender gets "time exceeded: fragment
/// reassembly time exceeded" quoting that fragment as received (over IPv6 with its
/// fragment header); where it did not, nothing. Both families, at their timeouts (30 s,
/// 60 s).
#[test]
fn a_reassembly_timeout_is_reported_to_the_sender() {
    for v6 in [false, true] {
        let (pa, mut raw) = pair(MemConfig::default()).unwrap();
        let mut a = node(pa, MA, MB, IP_A);
        let data: Vec<u8> = (0..3000u32).map(|i| (i % 253) as u8).collect();
        let (src, dst) = if v6 {
            (ip6(IP6_B).0.to_vec(), ip6(IP6_A).0.to_vec())
        } else {
            (IP_B.to_be_bytes().to_vec(), IP_A.to_be_bytes().to_vec())
        };
        let dg = udp_frame(MA, &src, &dst, 5000, &data);
        // datagram 1: its first fragment only (the last of the list); datagram 2: its
        // last only
        let first = fragments(&dg, 1232, 1).pop().unwrap();
        let last = fragments(&dg, 1232, 2).remove(0);
        raw_frame(&mut raw, &first);
        raw_frame(&mut raw, &last);
        a.turn(1_000_000, &mut NoApp, None);
        let timeout = if v6 { 60_000_000_000 } else { 30_000_000_000 };
        a.turn(timeout, &mut NoApp, None);
        assert!(raw_rx(&mut raw).is_empty(), "nothing before the timeout");
        a.turn(timeout + 1_000_000, &mut NoApp, None);
        let got = raw_rx(&mut raw);
        assert_eq!(
            got.len(),
            1,
            "one error, for the datagram whose first fragment came"
        );
        let e = &got[0];
        assert_eq!(&e[..6], &MB[..]);
        let (ip_len, icmp_type) = if v6 { (40, 3) } else { (20, 11) };
        let m = &e[14 + ip_len..];
        assert_eq!(
            (m[0], m[1]),
            (icmp_type, 1),
            "time exceeded, reassembly (v6 {v6})"
        );
        let quote = &m[8..];
        let hl = if v6 { 40 + 8 } else { 20 };
        assert_eq!(
            &quote[..hl],
            &first[14..14 + hl],
            "the first fragment's headers"
        );
        assert_eq!(
            &quote[hl..hl + 8],
            &first[14 + hl..14 + hl + 8],
            "and its data"
        );
        let s = a.reasm.stats;
        assert_eq!((s.fragments, s.timed_out, a.reasm.pending()), (2, 2, 0));
        let sent = if v6 {
            a.icmp6.reasm_exceeded_sent
        } else {
            a.icmp.reasm_exceeded_sent
        };
        assert_eq!(sent, 1);
        // Never an error about an error (RFC 1122 §3.2.2, RFC 4443 §2.4 e): the first
        // fragment of a fragmented ICMP destination unreachable times out unanswered,
        // that of an echo request gets its time exceeded.
        let t1 = timeout + 2_000_000;
        for (typ, answered) in [(if v6 { 1 } else { 3 }, 0), (if v6 { 128 } else { 8 }, 1)] {
            let m = icmp_error_frame(v6, typ, 0, [0; 4], &data[..2_000]);
            raw_frame(&mut raw, &fragments(&m, 1232, 9).pop().unwrap());
            a.turn(t1, &mut NoApp, None);
            a.turn(t1 + timeout + 1_000_000, &mut NoApp, None);
            assert_eq!(raw_rx(&mut raw).len(), answered, "type {typ} (v6 {v6})");
        }
        let held = if v6 {
            a.icmp6.reasm_exceeded_suppressed
        } else {
            a.icmp.reasm_exceeded_suppressed
        };
        assert_eq!(held, 1);
    }
}

/// RFC 6980 §5: neighbour discovery in fragments is ignored (what RA-Guard cannot see
/// must not be learnt): a solicitation for the node's address in two fragments is
/// reassembled, not answered, its sender not learnt; the same solicitation whole is.
#[test]
fn neighbour_discovery_in_fragments_is_ignored() {
    let (pa, mut raw) = pair(MemConfig::default()).unwrap();
    let mut a = node(pa, MA, MB, IP_A);
    let (me, peer) = (ip6(IP6_A), ip6(IP6_B));
    let ns = icmp6_frame(
        MA,
        peer,
        me,
        255,
        &Icmpv6Repr::NeighborSolicit {
            target: me,
            source_mac: Some(MacAddress(MB)),
        },
    );
    let parts = fragments(&ns, 16, 3);
    assert_eq!(parts.len(), 2);
    for p in &parts {
        raw_frame(&mut raw, p);
    }
    a.turn(1_000, &mut NoApp, None);
    assert!(raw_rx(&mut raw).is_empty(), "not answered");
    assert_eq!(a.neigh6.lookup(&peer), None, "not learnt");
    assert_eq!((a.icmp6.ndp_fragmented, a.reasm.stats.reassembled), (1, 1));
    assert_eq!(
        a.counters.rx_ipv6, 2,
        "the fragments, not the reassembled packet again"
    );
    // behind an atomic fragment header (offset 0, no more): ignored as well
    let mut atomic = ns.clone();
    atomic.splice(54..54, [58, 0, 0, 0, 0, 0, 0, 7]);
    atomic[20] = 44;
    let plen = u16::from_be_bytes([atomic[18], atomic[19]]) + 8;
    atomic[18..20].copy_from_slice(&plen.to_be_bytes());
    raw_frame(&mut raw, &atomic);
    a.turn(1_500, &mut NoApp, None);
    assert!(raw_rx(&mut raw).is_empty(), "not answered");
    assert_eq!(a.icmp6.ndp_fragmented, 2);
    raw_frame(&mut raw, &ns);
    a.turn(2_000, &mut NoApp, None);
    assert_eq!(raw_rx(&mut raw).len(), 1, "whole: answered");
    assert_eq!(a.neigh6.lookup(&peer), Some(MB));
}

/// A reassembled segment's checksum is verified on whichever worker receives it, also
/// behind a port that vouches for every frame's (the mem wire's offload): a SYN in
/// fragments reaching the worker that does not own its flow is reassembled there and
/// handed over whole; corrupted, neither worker answers it (the owner counts a bad
/// checksum); intact, its owner answers.
#[test]
fn a_reassembled_segment_is_verified_on_the_worker_it_goes_to() {
    let off = MemConfig {
        offload: true,
        ..MemConfig::default()
    };
    let owner = squall_port::fanout::peer_port_owner(40_000, 2) as usize;
    let other = 1 - owner;
    for corrupt in [true, false] {
        let (p0, r0) = pair(off.clone()).unwrap();
        let (p1, r1) = pair(off.clone()).unwrap();
        let mut w = [node(p0, MA, MB, IP_A), node(p1, MA, MB, IP_A)];
        let mut raws = [r0, r1];
        let mut mesh = redirect::mesh(2, 64);
        w[1].set_redirect(mesh.pop().unwrap());
        w[0].set_redirect(mesh.pop().unwrap());
        let (a0, a1) = w.split_at_mut(1);
        let mut apps = [server(&mut a0[0], 80, b"ok"), server(&mut a1[0], 80, b"ok")];
        let syn = syn_frame(MA, Some((IP_B, IP_A)), None);
        let mut parts = fragments(&syn, 8, 5);
        if corrupt {
            // (the last fragment's data: not under the IP header's checksum)
            parts[0][14 + 20] ^= 0xff;
        }
        for p in &parts {
            raw_frame(&mut raws[other], p);
        }
        for t in 1..3 {
            for k in 0..2 {
                w[k].turn(t * 1_000, &mut apps[k], None);
            }
        }
        let answers: Vec<usize> = raws.iter_mut().map(|r| raw_rx(r).len()).collect();
        let handed = w[other].redirect_stats().unwrap();
        assert_eq!(
            (handed.whole_sent, w[other].reasm.stats.reassembled),
            (1, 1)
        );
        if corrupt {
            assert_eq!(answers, [0, 0], "a corrupted SYN answered");
            assert_eq!(w[owner].tcp.counters().tcps_rcvbadsum, 1);
        } else {
            assert_eq!(answers[owner], 1, "the owner answers the intact SYN");
            assert_eq!(
                apps[owner].accepted + apps[other].accepted,
                0,
                "(no handshake yet)"
            );
        }
    }
}

/// Sends one datagram from its poll (over IPv6 with `v6`); keeps those it receives.
struct UdpPeer {
    send: Option<Vec<u8>>,
    v6: bool,
    got: Vec<Vec<u8>>,
}

impl TcpApp for UdpPeer {
    fn on_data(&mut self, _ctl: &mut Ctl, _f: FlowId, _data: &[u8]) {}
    fn on_closed(&mut self, _f: FlowId, _r: CloseReason) {}
}

impl NodeApp for UdpPeer {
    fn on_udp<P: Port>(
        &mut self,
        _io: &mut NodeIo<'_, P>,
        _flow: Option<squall_stack::UdpFlowId>,
        d: &squall_stack::Datagram<'_>,
    ) -> bool {
        self.got.push(d.payload.to_vec());
        true
    }
    fn poll<P: Port>(&mut self, io: &mut NodeIo<'_, P>) -> bool {
        let Some(p) = self.send.take() else {
            return false;
        };
        let key = if self.v6 {
            io.udp_key6(v6_of(IP_A), 4000, v6_of(IP_B), 53).unwrap()
        } else {
            squall_stack::UdpKey {
                local_ip: IP_A,
                remote_ip: IP_B,
                local_port: 4000,
                remote_port: 53,
            }
        };
        let f = io.udp_open(key).expect("a UDP flow");
        assert!(io.udp_send(f, &p, 64, 0), "sent");
        true
    }
}

/// A datagram larger than the link's MTU goes in fragments (RFC 791: DF clear; RFC 8200
/// §4.5: a fragment header) that each fit the MTU (the wire drops larger frames), and
/// the peer node reassembles it byte for byte, both families. Before, it was not sent.
#[test]
fn a_datagram_larger_than_the_mtu_goes_in_fragments() {
    for v6 in [false, true] {
        let (pa, pb) = pair(MemConfig {
            mtu: 1500,
            enforce_mtu: true,
            ..MemConfig::default()
        })
        .unwrap();
        let ncfg = |ip| {
            let a6 = u128::from_be_bytes(v6_of(ip));
            NodeConfig {
                owned: Owned(vec![(ip, ip)]),
                owned6: Owned6(vec![(a6, a6)]),
                max_udp_flows: 4,
                ..NodeConfig::default()
            }
        };
        let tcp = |mac, gateway_mac| TcpConfig {
            mac,
            gateway_mac,
            ..TcpConfig::default()
        };
        let mut a = Node::new(pa, tcp(MA, MB), ncfg(IP_A), 0);
        let mut b = Node::new(pb, tcp(MB, MA), ncfg(IP_B), 0);
        let payload: Vec<u8> = (0..4000u32).map(|i| (i * 13 % 251) as u8).collect();
        let mut sender = UdpPeer {
            send: Some(payload.clone()),
            v6,
            got: Vec::new(),
        };
        let mut sink = UdpPeer {
            send: None,
            v6,
            got: Vec::new(),
        };
        a.turn(1_000, &mut sender, None);
        b.turn(2_000, &mut sink, None);
        assert_eq!(sink.got, [payload], "reassembled whole (v6 {v6})");
        assert_eq!(
            (a.udp.stats.tx_fragmented, a.udp.stats.tx_fragments),
            (1, 3)
        );
        assert_eq!(b.reasm.stats.reassembled, 1);
        assert_eq!(b.port.oversized_frames(), 0, "every fragment fits the MTU");
    }
}
