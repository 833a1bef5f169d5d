//! What a node carries: the [`NodeApp`] trait (TCP callbacks, UDP datagrams, a poll each
//! turn for the app's own timers and new flows), the [`NodeIo`] handle through which an
//! app acts outside callbacks (connect, send, close, UDP flows), and [`Pair`], which puts
//! two apps on one node: passive flows go to the app that owns the local port, active
//! flows to the app that opened them.

use squall_port::Port;
use squall_tcp::{
    BufId, CloseReason, ConnectError, Ctl, FlowId, OptsId, SendError, TcpApp, TcpHost,
};

use crate::sink::PortSink;
use crate::udp::{Datagram, UdpFlowId, UdpKey, UdpLayer};

/// An application on a node. Every method has a default, so a TCP-only app implements
/// [`TcpApp`] and an empty `impl NodeApp for X {}`.
pub trait NodeApp: TcpApp {
    /// Called once at the start of every turn with the turn's time.
    fn begin_turn(&mut self, _now: u64) {}
    /// A checked UDP datagram for this node: `flow` is the UDP flow with its 4-tuple, if
    /// one is open. Returns false if the app does not take it (counted as no port).
    fn on_udp<P: Port>(
        &mut self,
        _io: &mut NodeIo<'_, P>,
        _flow: Option<UdpFlowId>,
        _d: &Datagram<'_>,
    ) -> bool {
        false
    }
    /// Whether connections accepted on local TCP `port` belong to this app (used to
    /// dispatch between several apps; one app alone gets everything).
    fn owns_tcp_port(&self, _port: u16) -> bool {
        true
    }
    /// Whether datagrams to local UDP `port` that match no flow belong to this app.
    fn owns_udp_port(&self, _port: u16) -> bool {
        true
    }
    /// The app's turn after received frames and TCP timers: its own timers, new flows.
    /// Returns true if it did something.
    fn poll<P: Port>(&mut self, _io: &mut NodeIo<'_, P>) -> bool {
        false
    }
    /// The earliest time `poll` has something to do (virtual-clock drivers); `None`: only
    /// in reaction to frames.
    fn next_event(&self, _now: u64) -> Option<u64> {
        None
    }
}

/// What a node lends an application for one call: the TCP host, the UDP layer and the
/// port sink, at the turn's time.
pub struct NodeIo<'a, P: Port> {
    pub(crate) now: u64,
    pub(crate) tcp: &'a mut TcpHost,
    pub(crate) udp: &'a mut UdpLayer,
    pub(crate) sink: PortSink<'a, P>,
    /// TCP flows opened through this handle in this call (for [`Pair`]'s dispatch).
    pub(crate) opened: &'a mut Vec<FlowId>,
    /// Path of the app acting among nested [`Pair`]s: bit `d` is the side taken at
    /// nesting depth `d` (the owner recorded for the UDP flows it opens).
    pub(crate) app: u8,
    /// Nesting depth of the [`Pair`] being entered.
    pub(crate) depth: u8,
    pub(crate) tx_waiting: usize,
}

impl<'a, P: Port> NodeIo<'a, P> {
    /// The handle for one call at `now`; the list of flows opened through it starts empty.
    pub(crate) fn new(
        now: u64,
        tcp: &'a mut TcpHost,
        udp: &'a mut UdpLayer,
        sink: PortSink<'a, P>,
        opened: &'a mut Vec<FlowId>,
        tx_waiting: usize,
    ) -> Self {
        opened.clear();
        NodeIo {
            now,
            tcp,
            udp,
            sink,
            opened,
            app: 0,
            depth: 0,
            tx_waiting,
        }
    }

    /// The turn's time (ns).
    pub fn now(&self) -> u64 {
        self.now
    }
    /// The TCP host (read access: counters, flow states).
    pub fn tcp(&self) -> &TcpHost {
        self.tcp
    }
    /// The TCP host's registry of send buffers (an app registering or retiring buffers
    /// during the run, e.g. answers that change every second).
    pub fn buffers(&mut self) -> &mut squall_tcp::BufRegistry {
        self.tcp.buffers()
    }
    /// The UDP layer (read access: flow keys, counters).
    pub fn udp(&self) -> &UdpLayer {
        self.udp
    }
    /// TCP flows still waiting for TX frames (the port's pool ran dry): an app should
    /// open no new flow while there are any.
    pub fn tx_waiting(&self) -> usize {
        self.tx_waiting
    }
    /// Tells the frame tap that a flow from `ip:port` is about to be opened.
    pub fn watch(&mut self, ip: u32, port: u16) {
        if let Some(t) = self.sink.tap.as_deref_mut() {
            t.watch(ip, port);
        }
    }
    /// Starts tracing TCP flow `f` (the host's tracer records its events; right after
    /// `connect`). False when the host has no tracer.
    pub fn trace_flow(&mut self, f: FlowId) -> bool {
        self.tcp.trace_flow(f)
    }
    /// Opens a TCP connection with option set `opts` (the SYN goes out now).
    pub fn connect(
        &mut self,
        src: u32,
        sport: u16,
        dst: u32,
        dport: u16,
        opts: OptsId,
    ) -> Result<FlowId, ConnectError> {
        let f = self
            .tcp
            .connect_with(self.now, &mut self.sink, src, sport, dst, dport, opts)?;
        self.opened.push(f);
        Ok(f)
    }
    /// Opens a TCP connection over IPv6 with option set `opts` (the SYN goes out now).
    pub fn connect6(
        &mut self,
        src: [u8; 16],
        sport: u16,
        dst: [u8; 16],
        dport: u16,
        opts: OptsId,
    ) -> Result<FlowId, ConnectError> {
        let f = self
            .tcp
            .connect6_with(self.now, &mut self.sink, src, sport, dst, dport, opts)?;
        self.opened.push(f);
        Ok(f)
    }
    /// Queues `len` bytes of registered buffer `buf` from `off` on flow `f`.
    pub fn send(&mut self, f: FlowId, buf: BufId, off: u32, len: u32) -> Result<(), SendError> {
        self.tcp.send(self.now, &mut self.sink, f, buf, off, len)
    }
    /// Queues owned bytes on flow `f` (freed once acknowledged).
    pub fn send_owned(&mut self, f: FlowId, data: Box<[u8]>) -> Result<(), SendError> {
        self.tcp.send_owned(self.now, &mut self.sink, f, data)
    }
    /// Closes the send side of `f` (FIN after queued data); `app` gets the callbacks.
    pub fn close<A: TcpApp>(&mut self, app: &mut A, f: FlowId) {
        self.tcp.close(self.now, app, &mut self.sink, f)
    }
    /// Resets `f`; `app` gets `on_closed`.
    pub fn abort<A: TcpApp>(&mut self, app: &mut A, f: FlowId) {
        self.tcp.abort(self.now, app, &mut self.sink, f)
    }
    /// Opens a UDP flow for `key`, owned by the acting app.
    pub fn udp_open(&mut self, key: UdpKey) -> Option<UdpFlowId> {
        self.udp.open(key, self.app)
    }
    /// The key of an IPv6 UDP 4-tuple (its addresses given ids, [`UdpLayer::key6`]);
    /// None when every id is taken. Give the ids back with
    /// [`udp_release_unused`](Self::udp_release_unused) if no flow is opened with it.
    pub fn udp_key6(
        &mut self,
        local: [u8; 16],
        local_port: u16,
        remote: [u8; 16],
        remote_port: u16,
    ) -> Option<UdpKey> {
        self.udp.key6(local, local_port, remote, remote_port)
    }
    /// Gives back the ids of an IPv6 key no flow took ([`UdpLayer::release_unused`]).
    pub fn udp_release_unused(&mut self, key: &UdpKey) {
        self.udp.release_unused(key)
    }
    /// Closes a UDP flow.
    pub fn udp_close(&mut self, f: UdpFlowId) {
        self.udp.close(f)
    }
    /// Sends a datagram on UDP flow `f`.
    pub fn udp_send(&mut self, f: UdpFlowId, payload: &[u8], ttl: u8, tos: u8) -> bool {
        self.udp.send(&mut self.sink, f, payload, ttl, tos)
    }
}

/// Two applications on one node. `a` is asked first which local ports it owns; `b` gets
/// the rest. Active TCP flows and UDP flows belong to the app that opened them. Pairs
/// nest (`Pair<A, Pair<B, C>>`) up to 8 levels deep: more apps on one node.
pub struct Pair<A, B> {
    pub a: A,
    pub b: B,
    /// Owner of each TCP flow (0: `a`, 1: `b`), indexed by `FlowId`.
    owner: Vec<u8>,
}

impl<A: NodeApp, B: NodeApp> Pair<A, B> {
    /// `a` and `b` on one node.
    pub fn new(a: A, b: B) -> Self {
        Pair {
            a,
            b,
            owner: Vec::new(),
        }
    }

    fn set_owner(&mut self, f: FlowId, o: u8) {
        let i = f.0 as usize;
        if self.owner.len() <= i {
            self.owner.resize(i + 1, 0);
        }
        self.owner[i] = o;
    }

    /// Flows opened through `io` since `mark` belong to app `o` (they stay listed, so
    /// that an enclosing `Pair` claims them too).
    fn claim<P: Port>(&mut self, io: &mut NodeIo<'_, P>, mark: usize, o: u8) {
        for i in mark..io.opened.len() {
            let f = io.opened[i];
            self.set_owner(f, o);
        }
    }

    fn owner(&self, f: FlowId) -> u8 {
        self.owner.get(f.0 as usize).copied().unwrap_or(0)
    }
}

impl<A: NodeApp, B: NodeApp> TcpApp for Pair<A, B> {
    fn on_connected(&mut self, ctl: &mut Ctl, f: FlowId) {
        if ctl.passive() {
            let o = u8::from(!self.a.owns_tcp_port(ctl.key().local_port));
            self.set_owner(f, o);
        }
        match self.owner(f) {
            0 => self.a.on_connected(ctl, f),
            _ => self.b.on_connected(ctl, f),
        }
    }
    fn on_data(&mut self, ctl: &mut Ctl, f: FlowId, data: &[u8]) {
        match self.owner(f) {
            0 => self.a.on_data(ctl, f, data),
            _ => self.b.on_data(ctl, f, data),
        }
    }
    fn on_acked(&mut self, ctl: &mut Ctl, f: FlowId, bytes: u32) {
        match self.owner(f) {
            0 => self.a.on_acked(ctl, f, bytes),
            _ => self.b.on_acked(ctl, f, bytes),
        }
    }
    fn on_peer_closed(&mut self, ctl: &mut Ctl, f: FlowId) {
        match self.owner(f) {
            0 => self.a.on_peer_closed(ctl, f),
            _ => self.b.on_peer_closed(ctl, f),
        }
    }
    fn on_closed(&mut self, f: FlowId, reason: CloseReason) {
        match self.owner(f) {
            0 => self.a.on_closed(f, reason),
            _ => self.b.on_closed(f, reason),
        }
    }
    fn on_retransmit(&mut self, f: FlowId) {
        match self.owner(f) {
            0 => self.a.on_retransmit(f),
            _ => self.b.on_retransmit(f),
        }
    }
    fn on_urgent(&mut self, f: FlowId, pending: u32) {
        match self.owner(f) {
            0 => self.a.on_urgent(f, pending),
            _ => self.b.on_urgent(f, pending),
        }
    }
}

impl<A: NodeApp, B: NodeApp> NodeApp for Pair<A, B> {
    fn begin_turn(&mut self, now: u64) {
        self.a.begin_turn(now);
        self.b.begin_turn(now);
    }
    fn on_udp<P: Port>(
        &mut self,
        io: &mut NodeIo<'_, P>,
        flow: Option<UdpFlowId>,
        d: &Datagram<'_>,
    ) -> bool {
        let side = match flow {
            Some(f) => io.udp.owner(f).map_or(0, |o| (o >> io.depth) & 1),
            None => u8::from(!self.a.owns_udp_port(d.dport)),
        };
        let (saved, depth) = (io.app, io.depth);
        io.app = saved | side << depth;
        io.depth = depth + 1;
        let taken = match side {
            0 => self.a.on_udp(io, flow, d),
            _ => self.b.on_udp(io, flow, d),
        };
        (io.app, io.depth) = (saved, depth);
        taken
    }
    fn owns_tcp_port(&self, port: u16) -> bool {
        self.a.owns_tcp_port(port) || self.b.owns_tcp_port(port)
    }
    fn owns_udp_port(&self, port: u16) -> bool {
        self.a.owns_udp_port(port) || self.b.owns_udp_port(port)
    }
    fn poll<P: Port>(&mut self, io: &mut NodeIo<'_, P>) -> bool {
        let (saved, depth) = (io.app, io.depth);
        let mark = io.opened.len();
        io.depth = depth + 1;
        io.app = saved;
        let wa = self.a.poll(io);
        let mid = io.opened.len();
        self.claim(io, mark, 0);
        io.app = saved | 1 << depth;
        let wb = self.b.poll(io);
        self.claim(io, mid, 1);
        (io.app, io.depth) = (saved, depth);
        wa | wb
    }
    fn next_event(&self, now: u64) -> Option<u64> {
        match (self.a.next_event(now), self.b.next_event(now)) {
            (Some(x), Some(y)) => Some(x.min(y)),
            (x, y) => x.or(y),
        }
    }
}

/// An app that takes nothing (a node that only answers ARP and ping, or before the run).
#[derive(Clone, Copy, Debug, Default)]
pub struct NoApp;
impl TcpApp for NoApp {}
impl NodeApp for NoApp {
    fn owns_tcp_port(&self, _port: u16) -> bool {
        false
    }
    fn owns_udp_port(&self, _port: u16) -> bool {
        false
    }
}
