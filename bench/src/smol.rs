//! smoltcp 0.12 as a [`MemPair`]: a client `Interface` and a server `Interface` on the
//! harness wire ([`crate::memwire`]), software checksums, one thread, a clock that jumps
//! over idle gaps (so timers such as delayed ACK cost no CPU spin).
//!
//! Client 16.0.0.1, server 48.0.0.1:80, both /2 so each is on-link for the other (ARP
//! resolves once). smoltcp has no accept queue: the server side is a set of listening
//! sockets, re-armed when released. smoltcp keeps at most two addresses per interface,
//! so the client uses one source address and cycles ephemeral ports 1024..=65535.

use smoltcp::iface::{Config, Interface, SocketHandle, SocketSet};
use smoltcp::socket::tcp;
use smoltcp::time::{Duration, Instant};
use smoltcp::wire::{EthernetAddress, IpAddress, IpCidr};

use crate::memwire::Wire;
use crate::pair::{MemPair, PairStats, Side, SockState};
use crate::portwire::PortWire;

/// The wire under a smoltcp pair: end A (client) and end B (server) as smoltcp devices.
pub trait PairWire {
    /// Name for notes ("harness" or "squall-port").
    fn name(&self) -> &'static str;
    /// Emulate checksum offload on both ends (before the interfaces are built).
    fn set_offload(&mut self, on: bool);
    /// Builds an interface on end A (`a == true`) or B.
    fn new_iface(&mut self, a: bool, cfg: Config, now: Instant) -> Interface;
    /// Polls `iface` on end A or B and hands its output to the wire.
    fn poll(&mut self, a: bool, iface: &mut Interface, now: Instant, set: &mut SocketSet<'_>);
    /// Whether frames wait to be received by end A or B.
    fn rx_pending(&mut self, a: bool) -> bool;
    /// Frames sent so far by end A or B.
    fn sent(&self, a: bool) -> u64;
    /// Bytes carried so far, both directions.
    fn bytes(&self) -> u64;
}

impl PairWire for Wire {
    fn name(&self) -> &'static str {
        "harness"
    }
    fn set_offload(&mut self, on: bool) {
        self.offload = on;
    }
    fn new_iface(&mut self, a: bool, cfg: Config, now: Instant) -> Interface {
        if a {
            Interface::new(cfg, &mut self.end_a(), now)
        } else {
            Interface::new(cfg, &mut self.end_b(), now)
        }
    }
    fn poll(&mut self, a: bool, iface: &mut Interface, now: Instant, set: &mut SocketSet<'_>) {
        if a {
            iface.poll(now, &mut self.end_a(), set);
        } else {
            iface.poll(now, &mut self.end_b(), set);
        }
    }
    fn rx_pending(&mut self, a: bool) -> bool {
        !self.lanes[if a { 1 } else { 0 }].is_empty()
    }
    fn sent(&self, a: bool) -> u64 {
        self.lanes[if a { 0 } else { 1 }].frames
    }
    fn bytes(&self) -> u64 {
        self.lanes[0].bytes + self.lanes[1].bytes
    }
}

impl PairWire for PortWire {
    fn name(&self) -> &'static str {
        "squall-port"
    }
    fn set_offload(&mut self, on: bool) {
        self.a.offload = on;
        self.b.offload = on;
    }
    fn new_iface(&mut self, a: bool, cfg: Config, now: Instant) -> Interface {
        Interface::new(cfg, if a { &mut self.a } else { &mut self.b }, now)
    }
    fn poll(&mut self, a: bool, iface: &mut Interface, now: Instant, set: &mut SocketSet<'_>) {
        let dev = if a { &mut self.a } else { &mut self.b };
        iface.poll(now, dev, set);
        dev.flush();
    }
    fn rx_pending(&mut self, a: bool) -> bool {
        if a {
            self.a.rx_pending()
        } else {
            self.b.rx_pending()
        }
    }
    fn sent(&self, a: bool) -> u64 {
        use squall_port::Port;
        let d = if a { &self.a } else { &self.b };
        d.port().stats().tx_frames + d.tx_backlog() as u64
    }
    fn bytes(&self) -> u64 {
        use squall_port::Port;
        self.a.port().stats().tx_bytes + self.b.port().stats().tx_bytes
    }
}

pub const CLIENT_IP: IpAddress = IpAddress::v4(16, 0, 0, 1);
/// The client's second address, used once the ports of the first are exhausted (W3).
pub const CLIENT_IP2: IpAddress = IpAddress::v4(16, 0, 0, 2);
pub const SERVER_IP: IpAddress = IpAddress::v4(48, 0, 0, 1);
pub const SERVER_PORT: u16 = 80;

/// Socket and interface settings of a smoltcp pair.
#[derive(Clone, Copy, Debug)]
pub struct SmolConfig {
    /// Client sockets' receive / transmit buffer bytes.
    pub client_rx: usize,
    pub client_tx: usize,
    /// Server sockets' receive / transmit buffer bytes.
    pub server_rx: usize,
    pub server_tx: usize,
    /// Delayed-ACK timeout (BENCHMARKS.md W1: 100 ms).
    pub ack_delay_ms: u64,
    /// Client slots.
    pub clients: usize,
    /// Listening server sockets.
    pub listeners: usize,
    /// Frames the wire holds per direction.
    pub wire_limit: usize,
    /// Emulate checksum offload on both sides (no software checksums at all).
    pub offload: bool,
}

impl SmolConfig {
    /// Defaults: 4 KiB + 4 KiB buffers everywhere, delayed ACK 100 ms, listeners = 1.5 x
    /// clients + 8 (a closing server socket still sits in LAST_ACK when its client
    /// already reconnects).
    pub fn new(clients: usize) -> Self {
        SmolConfig {
            client_rx: 4096,
            client_tx: 4096,
            server_rx: 4096,
            server_tx: 4096,
            ack_delay_ms: 100,
            clients,
            listeners: clients + clients / 2 + 8,
            wire_limit: 65_536,
            offload: false,
        }
    }
}

/// Bound on poll rounds per [`MemPair::poll`] call.
const MAX_ROUNDS: usize = 256;

/// The stacks' clock: the driver's elapsed time plus the idle gaps skipped.
struct Clock {
    elapsed_us: i64,
    skipped_us: i64,
}

impl Clock {
    fn set(&mut self, elapsed: std::time::Duration) {
        self.elapsed_us = self.elapsed_us.max(elapsed.as_micros() as i64);
    }

    fn now(&self) -> Instant {
        Instant::from_micros(self.elapsed_us + self.skipped_us)
    }
}

#[derive(Clone, Copy)]
struct ClientSlot {
    h: SocketHandle,
    opened: bool,
    closed_by_us: bool,
}

#[derive(Clone, Copy)]
struct ServerSlot {
    h: SocketHandle,
    closed_by_us: bool,
}

pub struct SmolPair<W: PairWire = Wire> {
    wire: W,
    c_iface: Interface,
    s_iface: Interface,
    c_set: SocketSet<'static>,
    s_set: SocketSet<'static>,
    clients: Vec<ClientSlot>,
    servers: Vec<ServerSlot>,
    next_port: u16,
    second_addr: bool,
    /// Socket sets of established flows set aside by [`SmolPair::establish_idle`].
    parked: Vec<(SocketSet<'static>, SocketSet<'static>)>,
    clock: Clock,
    cfg: SmolConfig,
}

fn new_socket(rx: usize, tx: usize, ack_delay_ms: u64) -> tcp::Socket<'static> {
    let mut s = tcp::Socket::new(
        tcp::SocketBuffer::new(vec![0u8; rx]),
        tcp::SocketBuffer::new(vec![0u8; tx]),
    );
    s.set_ack_delay(Some(Duration::from_millis(ack_delay_ms)));
    s
}

impl SmolPair<Wire> {
    /// A pair on the harness's own frame queues.
    pub fn new(cfg: SmolConfig) -> Self {
        Self::with_wire(cfg, Wire::new(cfg.wire_limit))
    }
}

impl SmolPair<PortWire> {
    /// A pair on squall-port's mem wire (the wire Squall runs on).
    pub fn on_port(cfg: SmolConfig) -> Result<Self, String> {
        Ok(Self::with_wire(cfg, PortWire::new(cfg.clients)?))
    }
}

impl<W: PairWire> SmolPair<W> {
    pub fn with_wire(cfg: SmolConfig, mut wire: W) -> Self {
        wire.set_offload(cfg.offload);
        let clock = Clock {
            elapsed_us: 0,
            skipped_us: 0,
        };
        let now = clock.now();
        let mut c_cfg = Config::new(EthernetAddress([2, 0, 0, 0, 0, 1]).into());
        c_cfg.random_seed = 0x5eed_0001;
        let mut c_iface = wire.new_iface(true, c_cfg, now);
        c_iface.update_ip_addrs(|a| {
            let _ = a.push(IpCidr::new(CLIENT_IP, 2));
            let _ = a.push(IpCidr::new(CLIENT_IP2, 2));
        });
        let mut s_cfg = Config::new(EthernetAddress([2, 0, 0, 0, 0, 2]).into());
        s_cfg.random_seed = 0x5eed_0002;
        let mut s_iface = wire.new_iface(false, s_cfg, now);
        s_iface.update_ip_addrs(|a| {
            let _ = a.push(IpCidr::new(SERVER_IP, 2));
        });
        let mut pair = SmolPair {
            wire,
            c_iface,
            s_iface,
            c_set: SocketSet::new(Vec::with_capacity(cfg.clients)),
            s_set: SocketSet::new(Vec::with_capacity(cfg.listeners)),
            clients: Vec::with_capacity(cfg.clients),
            servers: Vec::with_capacity(cfg.listeners),
            next_port: 1024,
            second_addr: false,
            parked: Vec::new(),
            clock,
            cfg,
        };
        pair.add_sockets(cfg.clients, cfg.listeners);
        pair
    }

    /// Adds client slots and listening server sockets (W3 grows the pair in steps).
    pub fn add_sockets(&mut self, clients: usize, listeners: usize) {
        let cfg = self.cfg;
        for _ in 0..clients {
            let h = self
                .c_set
                .add(new_socket(cfg.client_rx, cfg.client_tx, cfg.ack_delay_ms));
            self.clients.push(ClientSlot {
                h,
                opened: false,
                closed_by_us: false,
            });
        }
        for _ in 0..listeners {
            let mut s = new_socket(cfg.server_rx, cfg.server_tx, cfg.ack_delay_ms);
            // A fresh socket is closed, so listen cannot fail here.
            let _ = s.listen(SERVER_PORT);
            let h = self.s_set.add(s);
            self.servers.push(ServerSlot {
                h,
                closed_by_us: false,
            });
        }
    }

    /// Which wire the pair runs on.
    pub fn wire_name(&self) -> &'static str {
        self.wire.name()
    }

    pub fn clients(&self) -> usize {
        self.clients.len()
    }

    pub fn servers(&self) -> usize {
        self.servers.len()
    }

    fn sock(&self, side: Side, id: usize) -> Option<&tcp::Socket<'static>> {
        match side {
            Side::Client => self.clients.get(id).map(|s| self.c_set.get(s.h)),
            Side::Server => self.servers.get(id).map(|s| self.s_set.get(s.h)),
        }
    }

    fn sock_mut(&mut self, side: Side, id: usize) -> Option<&mut tcp::Socket<'static>> {
        match side {
            Side::Client => {
                let h = self.clients.get(id)?.h;
                Some(self.c_set.get_mut(h))
            }
            Side::Server => {
                let h = self.servers.get(id)?.h;
                Some(self.s_set.get_mut(h))
            }
        }
    }

    /// The next local endpoint: ports 1024..=65535 on the first address, then the second.
    fn next_local(&mut self) -> (IpAddress, u16) {
        let p = self.next_port;
        let addr = if self.second_addr {
            CLIENT_IP2
        } else {
            CLIENT_IP
        };
        if p == u16::MAX {
            self.next_port = 1024;
            self.second_addr = !self.second_addr;
        } else {
            self.next_port = p + 1;
        }
        (addr, p)
    }
}

fn map_state(st: tcp::State, closed_by_us: bool) -> SockState {
    use tcp::State::*;
    match st {
        Listen => SockState::Idle,
        SynSent | SynReceived => SockState::Opening,
        Established => SockState::Open,
        CloseWait => SockState::PeerClosed,
        FinWait1 | FinWait2 | Closing | LastAck => SockState::Closing,
        TimeWait => SockState::Done,
        Closed => {
            if closed_by_us {
                SockState::Done
            } else {
                SockState::Failed
            }
        }
    }
}

impl<W: PairWire> MemPair for SmolPair<W> {
    fn client_name(&self) -> &'static str {
        "smoltcp"
    }

    fn server_name(&self) -> &'static str {
        "smoltcp"
    }

    fn open(&mut self, id: usize) -> bool {
        let Some(slot) = self.clients.get(id).copied() else {
            return false;
        };
        let local = self.next_local();
        let s = self.c_set.get_mut::<tcp::Socket>(slot.h);
        let ok = s
            .connect(self.c_iface.context(), (SERVER_IP, SERVER_PORT), local)
            .is_ok();
        if ok {
            self.clients[id].opened = true;
            self.clients[id].closed_by_us = false;
        }
        ok
    }

    fn poll(&mut self, now: std::time::Duration, ready: &mut Vec<(Side, usize)>) -> bool {
        self.clock.set(now);
        let now = self.clock.now();
        let before = self.wire.sent(true) + self.wire.sent(false);
        // Poll each interface first once (timers, what the applications queued), then
        // again only while it has frames to receive or sent frames in its last poll, so
        // the application scan runs once per burst and idle interfaces are not re-polled.
        let (mut c_go, mut s_go) = (true, true);
        for _ in 0..MAX_ROUNDS {
            if !c_go && !s_go {
                break;
            }
            if c_go {
                let sent = self.wire.sent(true);
                self.wire
                    .poll(true, &mut self.c_iface, now, &mut self.c_set);
                c_go = self.wire.sent(true) != sent;
            }
            if s_go {
                let sent = self.wire.sent(false);
                self.wire
                    .poll(false, &mut self.s_iface, now, &mut self.s_set);
                s_go = self.wire.sent(false) != sent;
            }
            c_go |= self.wire.rx_pending(true);
            s_go |= self.wire.rx_pending(false);
        }
        ready.extend((0..self.clients.len()).map(|i| (Side::Client, i)));
        ready.extend((0..self.servers.len()).map(|i| (Side::Server, i)));
        self.wire.sent(true) + self.wire.sent(false) != before
            || self.wire.rx_pending(true)
            || self.wire.rx_pending(false)
    }

    fn idle(&mut self) -> bool {
        let now = self.clock.now();
        let dc = self.c_iface.poll_delay(now, &self.c_set);
        let ds = self.s_iface.poll_delay(now, &self.s_set);
        let d = match (dc, ds) {
            (Some(a), Some(b)) => a.min(b),
            (Some(a), None) | (None, Some(a)) => a,
            (None, None) => return false,
        };
        self.clock.skipped_us += (d.total_micros() as i64).max(1);
        true
    }

    fn state(&self, side: Side, id: usize) -> SockState {
        match side {
            Side::Client => match self.clients.get(id) {
                Some(slot) if slot.opened => map_state(
                    self.c_set.get::<tcp::Socket>(slot.h).state(),
                    slot.closed_by_us,
                ),
                _ => SockState::Idle,
            },
            Side::Server => match self.servers.get(id) {
                Some(slot) => map_state(
                    self.s_set.get::<tcp::Socket>(slot.h).state(),
                    slot.closed_by_us,
                ),
                None => SockState::Idle,
            },
        }
    }

    fn send(&mut self, side: Side, id: usize, data: &[u8]) -> usize {
        self.sock_mut(side, id)
            .and_then(|s| s.send_slice(data).ok())
            .unwrap_or(0)
    }

    fn recv<F: FnMut(&[u8])>(&mut self, side: Side, id: usize, mut f: F) -> usize {
        let Some(s) = self.sock_mut(side, id) else {
            return 0;
        };
        let mut total = 0;
        // The ring may hand the data out in two pieces.
        for _ in 0..2 {
            let n = s
                .recv(|buf| {
                    f(buf);
                    (buf.len(), buf.len())
                })
                .unwrap_or(0);
            if n == 0 {
                break;
            }
            total += n;
        }
        total
    }

    fn close(&mut self, side: Side, id: usize) {
        if let Some(s) = self.sock_mut(side, id) {
            s.close();
        }
        match side {
            Side::Client => {
                if let Some(slot) = self.clients.get_mut(id) {
                    slot.closed_by_us = true;
                }
            }
            Side::Server => {
                if let Some(slot) = self.servers.get_mut(id) {
                    slot.closed_by_us = true;
                }
            }
        }
    }

    fn release(&mut self, side: Side, id: usize) {
        match side {
            Side::Client => {
                if let Some(slot) = self.clients.get_mut(id) {
                    slot.opened = false;
                    slot.closed_by_us = false;
                }
            }
            Side::Server => {
                if let Some(slot) = self.servers.get_mut(id) {
                    slot.closed_by_us = false;
                    let s = self.s_set.get_mut::<tcp::Socket>(slot.h);
                    if s.state() != tcp::State::Listen {
                        // An aborted socket may still be mid-close: abort first.
                        if s.is_open() {
                            s.abort();
                        }
                        let _ = s.listen(SERVER_PORT);
                    }
                }
            }
        }
    }

    fn stats(&self) -> PairStats {
        PairStats {
            frames: self.wire.sent(true) + self.wire.sent(false),
            wire_bytes: self.wire.bytes(),
        }
    }
}

impl<W: PairWire> SmolPair<W> {
    /// Whether client slot `id` is in the socket state `Established` (W3 uses it).
    pub fn is_established(&self, side: Side, id: usize) -> bool {
        self.sock(side, id)
            .is_some_and(|s| s.state() == tcp::State::Established)
    }
}

impl<W: PairWire> SmolPair<W> {
    /// W3: establishes `n` idle flows in batches of `batch`. Each batch gets fresh socket
    /// sets; once all its flows are established both sets are parked (kept alive, never
    /// polled again: the flows are idle). smoltcp looks sockets up by a linear scan, so one
    /// set of 2 x 100k sockets cannot be driven in reasonable time; batching measures the
    /// same per-socket memory. Returns the flows established before `deadline`.
    pub fn establish_idle_batched(
        &mut self,
        n: usize,
        batch: usize,
        deadline: std::time::Instant,
    ) -> Result<usize, String> {
        let batch = batch.max(1);
        let t0 = std::time::Instant::now();
        let mut done = 0;
        let mut ready = Vec::new();
        while done < n {
            if std::time::Instant::now() >= deadline {
                return Ok(done);
            }
            let k = batch.min(n - done);
            self.clients.clear();
            self.servers.clear();
            self.add_sockets(k, k);
            for id in 0..k {
                if !self.open(id) {
                    return Err(format!("smoltcp refused connect on slot {id}"));
                }
            }
            loop {
                ready.clear();
                let moved = self.poll(t0.elapsed(), &mut ready);
                let all = (0..k).all(|i| self.is_established(Side::Client, i))
                    && established_in(&self.s_set) >= k;
                if all {
                    break;
                }
                if (0..k).any(|i| self.state(Side::Client, i) == SockState::Failed) {
                    return Err("a W3 connection failed".into());
                }
                if std::time::Instant::now() >= deadline {
                    return Ok(done);
                }
                if !moved {
                    self.idle();
                }
            }
            // Let the last ACKs cross, then set both sets aside.
            ready.clear();
            self.poll(t0.elapsed(), &mut ready);
            let cap = batch.min(n - done - k).max(1);
            let c = std::mem::replace(&mut self.c_set, SocketSet::new(Vec::with_capacity(cap)));
            let s = std::mem::replace(&mut self.s_set, SocketSet::new(Vec::with_capacity(cap)));
            self.parked.push((c, s));
            done += k;
        }
        self.clients.clear();
        self.servers.clear();
        Ok(done)
    }

    /// Established client-side flows held in parked socket sets.
    pub fn parked_flows(&self) -> usize {
        self.parked.iter().map(|(c, _)| established_in(c)).sum()
    }
}

impl<W: PairWire> crate::workload::IdleFlows for SmolPair<W> {
    fn client_name(&self) -> &'static str {
        "smoltcp"
    }

    fn server_name(&self) -> &'static str {
        "smoltcp"
    }

    fn establish_idle(&mut self, n: usize, deadline: std::time::Instant) -> Result<usize, String> {
        self.establish_idle_batched(n, 1000, deadline)
    }
}

/// Sockets of `set` in the ESTABLISHED state.
fn established_in(set: &SocketSet<'_>) -> usize {
    use smoltcp::socket::AnySocket;
    set.iter()
        .filter(|(_, s)| {
            tcp::Socket::downcast(s).is_some_and(|t| t.state() == tcp::State::Established)
        })
        .count()
}
