//! The Squall W1/W2 (and idle W3) client and server apps and the node pair on
//! squall-port's mem wire: one implementation shared by the T-mem1 driver (`squall.rs`)
//! and the T-mem2 / initial-window driver (`mem2.rs`). Each end is a
//! [`squall_stack::Node`] (the node `squall run` runs on: its loop turn, demux and port
//! sink) carrying a [`NodeApp`]. Every byte is verified against the expected
//! request/response; wrong or failed flows count as errors.

use std::sync::Arc;

use squall_port::mem::{pair, MemConfig, MemPort};
use squall_port::Port;
use squall_stack::{Node, NodeApp, NodeConfig, NodeIo};
use squall_tcp::{
    BufId, CloseReason, ConnectError, Ctl, FlowId, OptsId, TcpApp, TcpConfig, TcpHost,
};

use crate::http::{self, matches_at};
use crate::measure::Histogram;

const CLIENT_IP: u32 = 0x1000_0001; // 16.0.0.1 (pool of 200 addresses)
const CLIENT_ADDRS: u32 = 200;
const SERVER_IP: u32 = 0x3000_0001; // 48.0.0.1
const SERVER_PORT: u16 = 80;
const CLIENT_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
const SERVER_MAC: [u8; 6] = [2, 0, 0, 0, 0, 2];

/// Which workload the apps play.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wl {
    /// A new connection per 100-byte GET / 32 KiB answer.
    W1,
    /// Persistent connections looping a tiny request/response.
    W2,
    /// ab-2649: a new connection per GET of a 2,649-byte file.
    W4,
    /// W4's keep-alive variant: persistent connections looping the GET.
    W4Ka,
    /// W3: connect and stay idle.
    Idle,
}

impl Wl {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Wl::W1 => "W1",
            Wl::W2 => "W2",
            Wl::W4 | Wl::W4Ka => "W4",
            Wl::Idle => "W3",
        }
    }

    /// One request per connection: the client closes after the answer, the server on the
    /// client's FIN; an operation is a connection that ended so.
    pub(crate) fn one_shot(self) -> bool {
        matches!(self, Wl::W1 | Wl::W4)
    }

    /// Persistent connections looping request/answer; an operation is an answer.
    pub(crate) fn looping(self) -> bool {
        matches!(self, Wl::W2 | Wl::W4Ka)
    }

    /// The `keepalive` field of W4's lines (the variants of a one-per-connection workload).
    pub(crate) fn keepalive(self) -> Option<bool> {
        match self {
            Wl::W4 => Some(false),
            Wl::W4Ka => Some(true),
            _ => None,
        }
    }
}

/// Per-flow application state (indexed by `FlowId`): 16 bytes, so that W3's memory per
/// flow stays the stack's.
#[derive(Clone, Copy, Default)]
struct FlowApp {
    got: u32,
    /// HTTP checking: the answer's head length once it is parsed (0: not yet; at most
    /// `HTTP_LIMITS.max_head`, so 16 bits hold it).
    head_len: u16,
    bad: bool,
    responding: bool,
    t_sent: u64,
}

fn flow_slot(v: &mut Vec<FlowApp>, f: FlowId) -> &mut FlowApp {
    let i = f.0 as usize;
    if i >= v.len() {
        v.resize(i + 1, FlowApp::default());
    }
    &mut v[i]
}

/// Checks `data` against `expect` at the flow's offset and advances it; false (and the
/// flow marked bad) on a mismatch or after an earlier one.
fn verify(s: &mut FlowApp, expect: &[u8], data: &[u8]) -> bool {
    if !matches_at(expect, s.got as usize, data) {
        s.bad = true;
    }
    s.got += data.len() as u32;
    !s.bad
}

/// The client app: sends the request, verifies the response, counts operations.
pub(crate) struct ClientApp {
    pub(crate) wl: Wl,
    req: BufId,
    req_len: u32,
    resp: Arc<[u8]>,
    flows: Vec<FlowApp>,
    pub(crate) ops: u64,
    pub(crate) errors: u64,
    pub(crate) l7_bytes: u64,
    /// Connections that ended and should be replaced.
    pub(crate) to_open: usize,
    /// Connections established so far.
    pub(crate) connected: u64,
    /// The next client address/port to try.
    next_port: u32,
    /// The clock the latency histogram is read on.
    pub(crate) now_ns: u64,
    /// W2 round-trip latencies (set to start recording).
    pub(crate) hist: Option<Histogram>,
    /// Opens owed connections in every turn's poll: at most (limit, client address/port
    /// pairs tried); `None`: the driver opens them (`Endpoint::open_owed`).
    pub(crate) open_in_poll: Option<(usize, usize)>,
    /// Polls whose opening stopped because the host refused (no free flow slot).
    pub(crate) refused: u64,
    /// Against an HTTP server whose answers carry headers of their own (Date, ...): each
    /// answer is parsed with squall-http and must be `200` with exactly this body,
    /// instead of being compared byte for byte with `resp`.
    pub(crate) http_body: Option<Arc<[u8]>>,
    /// Per flow: the start of an answer split across segments (HTTP checking only).
    partial: Vec<Vec<u8>>,
    /// Open the connections over IPv6 ([`v6`] of the IPv4 addresses).
    pub(crate) ipv6: bool,
}

/// The IPv6 benchmarking address (2001:2::/48, RFC 5180) standing for IPv4 address `a`.
pub(crate) fn v6(a: u32) -> [u8; 16] {
    let mut x = [0x20, 1, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    x[12..].copy_from_slice(&a.to_be_bytes());
    x
}

/// Why [`ClientApp::open_owed`] stopped early.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum OpenStop {
    /// Every owed connection (up to the limit) was opened or tried.
    Done,
    /// The host refused: no free flow slot.
    Refused,
}

impl ClientApp {
    /// Opens up to `limit` of the connections owed through the node, trying at most
    /// `max_tries` client address/port pairs; returns how many were opened and why it
    /// stopped.
    pub(crate) fn open_owed<P: Port>(
        &mut self,
        io: &mut NodeIo<'_, P>,
        limit: usize,
        max_tries: usize,
    ) -> (usize, OpenStop) {
        let mut opened = 0;
        let mut tries = 0;
        while self.to_open > 0 && opened < limit && tries < max_tries {
            tries += 1;
            let k = self.next_port;
            self.next_port = k.wrapping_add(1);
            let ip = CLIENT_IP + (k % CLIENT_ADDRS);
            let port = 1024 + ((k / CLIENT_ADDRS) % 64_000) as u16;
            let res = if self.ipv6 {
                io.connect6(v6(ip), port, v6(SERVER_IP), SERVER_PORT, OptsId::DEFAULT)
            } else {
                io.connect(ip, port, SERVER_IP, SERVER_PORT, OptsId::DEFAULT)
            };
            match res {
                Ok(_) => {
                    self.to_open -= 1;
                    opened += 1;
                }
                Err(ConnectError::InUse) => continue,
                Err(ConnectError::NoResources) => return (opened, OpenStop::Refused),
            }
        }
        (opened, OpenStop::Done)
    }
}

impl TcpApp for ClientApp {
    fn on_connected(&mut self, ctl: &mut Ctl, f: FlowId) {
        self.connected += 1;
        let now = self.now_ns;
        *flow_slot(&mut self.flows, f) = FlowApp {
            t_sent: now,
            ..FlowApp::default()
        };
        if self.wl != Wl::Idle {
            ctl.send(self.req, 0, self.req_len);
        }
    }

    fn on_data(&mut self, ctl: &mut Ctl, f: FlowId, data: &[u8]) {
        if self.http_body.is_some() {
            return self.on_http_data(ctl, f, data);
        }
        let resp = &self.resp;
        let s = flow_slot(&mut self.flows, f);
        if !verify(s, resp, data) {
            ctl.abort();
            return;
        }
        if s.got as usize == resp.len() {
            match self.wl {
                w if w.one_shot() => ctl.close(),
                w if w.looping() => {
                    self.ops += 1;
                    self.l7_bytes += (self.req_len as usize + resp.len()) as u64;
                    if let Some(h) = self.hist.as_mut() {
                        h.record_ns(self.now_ns.saturating_sub(s.t_sent));
                    }
                    s.got = 0;
                    s.t_sent = self.now_ns;
                    ctl.send(self.req, 0, self.req_len);
                }
                _ => {}
            }
        }
    }

    fn on_closed(&mut self, f: FlowId, reason: CloseReason) {
        let resp_len = self.resp.len();
        let http = self.http_body.is_some();
        let s = flow_slot(&mut self.flows, f);
        // Raw: every byte of the answer came; HTTP: the answer was parsed whole and right
        // (`responding`, its length in `got`).
        let complete = if http {
            s.responding
        } else {
            s.got as usize == resp_len
        };
        let ok = self.wl.one_shot() && reason == CloseReason::Normal && !s.bad && complete;
        if ok {
            self.ops += 1;
            self.l7_bytes += (self.req_len + s.got) as u64;
        } else {
            self.errors += 1;
        }
        *s = FlowApp::default();
        self.to_open += 1;
    }
}

impl ClientApp {
    /// Against an HTTP server: parses each answer (squall-http), checks status and body,
    /// then sends the next request (looping workloads) or closes (one per connection).
    fn on_http_data(&mut self, ctl: &mut Ctl, f: FlowId, data: &[u8]) {
        let i = f.0 as usize;
        let body = self.http_body.as_deref().unwrap_or(&[]);
        let s = flow_slot(&mut self.flows, f);
        // The head is parsed once (gathered in `partial` while split across segments);
        // the body is then compared with the expected one as it comes, in place.
        let mut held = Vec::new();
        let bytes: &[u8] = if s.head_len > 0 {
            data
        } else {
            // A head split across segments was kept in `partial` (rare: most heads come
            // whole, and then `partial` is not touched).
            if let Some(p) = self.partial.get_mut(i).filter(|p| !p.is_empty()) {
                held = std::mem::take(p);
            }
            let buf: &[u8] = if held.is_empty() {
                data
            } else {
                held.extend_from_slice(data);
                &held
            };
            let mut h = [squall_http::Header::SLOT; 8];
            match squall_http::parse_response_in(buf, &mut h, &HTTP_LIMITS, false) {
                Ok(None) => {
                    if held.is_empty() {
                        held.extend_from_slice(data);
                    }
                    if self.partial.len() <= i {
                        self.partial.resize_with(i + 1, Vec::new);
                    }
                    self.partial[i] = held;
                    return;
                }
                Ok(Some(r))
                    if r.code == 200
                        && r.body == squall_http::BodyKind::Length(body.len() as u64) =>
                {
                    s.head_len = r.head_len as u16;
                    s.got = 0;
                    &buf[r.head_len..]
                }
                _ => {
                    s.bad = true;
                    ctl.abort();
                    return;
                }
            }
        };
        // One request in flight: nothing may follow the answer.
        if !matches_at(body, s.got as usize, bytes) {
            s.bad = true;
            ctl.abort();
            return;
        }
        s.got += bytes.len() as u32;
        if !held.is_empty() {
            held.clear();
            self.partial[i] = held;
        }
        if s.got as usize != body.len() {
            return;
        }
        let n = u32::from(s.head_len) + s.got;
        s.head_len = 0;
        if self.wl.one_shot() {
            // Counted when the connection has closed normally (`on_closed`).
            s.responding = true;
            s.got = n;
            ctl.close();
            return;
        }
        s.got = 0;
        self.ops += 1;
        self.l7_bytes += u64::from(self.req_len + n);
        if let Some(hist) = self.hist.as_mut() {
            hist.record_ns(self.now_ns.saturating_sub(s.t_sent));
        }
        s.t_sent = self.now_ns;
        ctl.send(self.req, 0, self.req_len);
    }
}

/// Limits of the client's HTTP check.
const HTTP_LIMITS: squall_http::Limits = squall_http::Limits {
    max_start_line: 1024,
    max_header_line: 1024,
    max_headers: 8,
    max_head: 4096,
    max_body: 1 << 20,
    max_chunk_line: 256,
    max_trailers: 1024,
    require_host: false,
};

// The head length fits FlowApp::head_len.
const _: () = assert!(HTTP_LIMITS.max_head <= u16::MAX as usize);
const _: () = assert!(std::mem::size_of::<FlowApp>() == 16);

impl NodeApp for ClientApp {
    fn begin_turn(&mut self, now: u64) {
        // The clock latencies are read on.
        self.now_ns = now;
    }

    fn poll<P: Port>(&mut self, io: &mut NodeIo<'_, P>) -> bool {
        let Some((limit, max_tries)) = self.open_in_poll else {
            return false;
        };
        let (opened, stop) = self.open_owed(io, limit, max_tries);
        if stop == OpenStop::Refused {
            self.refused += 1;
        }
        opened > 0
    }
}

/// The server app: verifies the request, answers it, closes when the client does.
pub(crate) struct ServerApp {
    wl: Wl,
    req: Arc<[u8]>,
    resp: BufId,
    resp_len: u32,
    flows: Vec<FlowApp>,
    pub(crate) errors: u64,
    /// Connections accepted so far.
    pub(crate) accepted: u64,
}

impl TcpApp for ServerApp {
    fn on_connected(&mut self, _ctl: &mut Ctl, f: FlowId) {
        self.accepted += 1;
        *flow_slot(&mut self.flows, f) = FlowApp::default();
    }

    fn on_data(&mut self, ctl: &mut Ctl, f: FlowId, data: &[u8]) {
        let req = &self.req;
        let s = flow_slot(&mut self.flows, f);
        if s.responding && self.wl.one_shot() {
            s.bad = true; // W1 and W4 carry one request per connection
        }
        if !verify(s, req, data) {
            ctl.abort();
            return;
        }
        if s.got as usize == req.len() {
            ctl.send(self.resp, 0, self.resp_len);
            if self.wl.one_shot() {
                s.responding = true;
            } else {
                s.got = 0;
            }
        }
    }

    fn on_peer_closed(&mut self, ctl: &mut Ctl, _f: FlowId) {
        ctl.close();
    }

    fn on_closed(&mut self, f: FlowId, reason: CloseReason) {
        let s = flow_slot(&mut self.flows, f);
        let ok = !self.wl.one_shot()
            || (reason == CloseReason::Normal && !s.bad && s.got as usize == self.req.len());
        if !ok {
            self.errors += 1;
        }
        *s = FlowApp::default();
    }
}

impl NodeApp for ServerApp {}

/// One end of the mem wire: a node and the app it carries.
pub(crate) struct Endpoint<A> {
    pub(crate) node: Node<MemPort>,
    pub(crate) app: A,
}

impl<A: NodeApp> Endpoint<A> {
    /// One node turn (rx bursts, TCP timers, the app's poll, TX flushes); true if
    /// anything happened.
    pub(crate) fn turn(&mut self, now: u64) -> bool {
        self.node.turn(now, &mut self.app, None)
    }

    /// Frames handed to the wire.
    pub(crate) fn sent(&self) -> u64 {
        self.node.port.stats().tx_frames
    }

    /// Frames the TCP host could not build because the TX pool was empty.
    pub(crate) fn tx_full(&self) -> u64 {
        self.node.tcp.counters().tcps_txfull
    }
}

impl Endpoint<ClientApp> {
    /// Opens owed connections outside a turn (see [`ClientApp::open_owed`]); the SYNs go
    /// to the wire at once.
    pub(crate) fn open_owed(
        &mut self,
        now: u64,
        limit: usize,
        max_tries: usize,
    ) -> (usize, OpenStop) {
        let r = {
            let mut io = self.node.io(now, None);
            self.app.open_owed(&mut io, limit, max_tries)
        };
        self.node.flush();
        r
    }
}

/// A client and a server node on a mem wire of `frames` frames per side (the port cycles
/// its whole pool, so it is the cache working set: size it to the frames in flight), the
/// client owing `conns` connections. `base` carries the settings both hosts share (MACs
/// are set here). With `offload` the wire emulates checksum offload: the ports offer TCP
/// checksum offload on send and checksum results on receive, so the nodes turn the
/// hosts' software checksums off (and the wire computes none either).
pub(crate) fn build(
    wl: Wl,
    conns: usize,
    base: TcpConfig,
    frames: u32,
    offload: bool,
    rx_bursts: usize,
    ipv6: bool,
) -> Result<(Endpoint<ClientApp>, Endpoint<ServerApp>), String> {
    let (a, b) = pair(MemConfig {
        frames,
        ring_size: frames,
        mac_a: CLIENT_MAC,
        mac_b: SERVER_MAC,
        offload,
        ..MemConfig::default()
    })
    .map_err(|e| e.to_string())?;
    let (req, resp) = match wl {
        Wl::W1 => (http::w1_request(), http::w1_response()),
        Wl::W4 | Wl::W4Ka => (http::w4_request(), http::w4_response()),
        Wl::W2 | Wl::Idle => (http::w2_request(), http::w2_response()),
    };
    let mut cn = Node::new(
        a,
        TcpConfig {
            mac: CLIENT_MAC,
            gateway_mac: SERVER_MAC,
            ..base.clone()
        },
        NodeConfig {
            rx_bursts,
            ..NodeConfig::default()
        },
        1,
    );
    let mut sn = Node::new(
        b,
        TcpConfig {
            mac: SERVER_MAC,
            gateway_mac: CLIENT_MAC,
            ..base
        },
        NodeConfig {
            rx_bursts,
            ..NodeConfig::default()
        },
        1,
    );
    sn.tcp.listen(SERVER_PORT);
    let (req_len, resp_len) = (req.len() as u32, resp.len() as u32);
    let req: Arc<[u8]> = Arc::from(req);
    let resp: Arc<[u8]> = Arc::from(resp);
    let req_id = cn.tcp.buffers().register(req.clone());
    let resp_id = sn.tcp.buffers().register(resp.clone());
    let capp = ClientApp {
        wl,
        req: req_id,
        req_len,
        resp,
        flows: Vec::new(),
        ops: 0,
        errors: 0,
        l7_bytes: 0,
        to_open: conns,
        connected: 0,
        next_port: 0,
        now_ns: 1,
        hist: None,
        open_in_poll: None,
        refused: 0,
        http_body: None,
        partial: Vec::new(),
        ipv6,
    };
    let sapp = ServerApp {
        wl,
        req,
        resp: resp_id,
        resp_len,
        flows: Vec::new(),
        errors: 0,
        accepted: 0,
    };
    Ok((
        Endpoint {
            node: cn,
            app: capp,
        },
        Endpoint {
            node: sn,
            app: sapp,
        },
    ))
}

/// How far a virtual clock at `now` may jump when nothing is happening: to the two
/// hosts' next timer (0 if it is due), 1 µs if neither has one.
pub(crate) fn idle_skip(c: &TcpHost, s: &TcpHost, now: u64) -> u64 {
    match [c.next_timer(), s.next_timer()].into_iter().flatten().min() {
        Some(t) => t.saturating_sub(now),
        None => 1_000,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use squall_stack::node::MAX_RX_BURSTS;

    #[test]
    fn verify_marks_a_mismatch_and_keeps_it() {
        let mut s = FlowApp::default();
        assert!(verify(&mut s, b"hello world", b"hello"));
        assert_eq!(s.got, 5);
        assert!(!verify(&mut s, b"hello world", b" w0rl"));
        assert!(s.bad);
        // A later correct chunk does not clear the flag.
        assert!(!verify(&mut s, b"hello world", b"d"));
    }

    #[test]
    fn flow_slot_grows_to_the_flow_id() {
        let mut v = Vec::new();
        flow_slot(&mut v, FlowId(7)).got = 3;
        assert_eq!(v.len(), 8);
        assert_eq!(v[7].got, 3);
        assert_eq!(v[0].got, 0);
    }

    // A wire pool much smaller than the connections in flight (a NIC ring): every
    // connection still gets established and served. Flows whose SYN or segment waited
    // for a frame go before the segments that busy flows' receives trigger; without that,
    // W2's ping-pong flows took every freed frame and most SYNs waited forever.
    #[test]
    fn small_pool_serves_every_connection() {
        let conns = 300;
        let base = TcpConfig {
            max_flows: 1024,
            ..TcpConfig::default()
        };
        let (mut c, mut s) = build(Wl::W2, conns, base, 64, false, MAX_RX_BURSTS, false).unwrap();
        let mut now = 1_000;
        c.open_owed(now, conns, usize::MAX);
        for _ in 0..20_000 {
            now += 1_000;
            c.turn(now);
            s.turn(now);
        }
        assert_eq!(c.app.errors + s.app.errors, 0);
        assert_eq!(
            (c.app.connected, s.app.accepted),
            (conns as u64, conns as u64)
        );
        assert!(c.app.ops > 10 * conns as u64, "ops {}", c.app.ops);
        assert!(c.tx_full() > 0, "the pool was never full");
    }

    /// Turns both nodes 1 µs apart until the client has `ops` operations and the wire is
    /// quiet; when nothing happens the clock jumps to the next timer (as the drivers do).
    fn run_until(
        c: &mut Endpoint<ClientApp>,
        s: &mut Endpoint<ServerApp>,
        ops: u64,
        mut now: u64,
    ) -> u64 {
        for _ in 0..10_000 {
            now += 1_000;
            let a = c.turn(now);
            let b = s.turn(now);
            if !(a | b) {
                if c.app.ops >= ops {
                    break;
                }
                now += idle_skip(&c.node.tcp, &s.node.tcp, now);
            }
        }
        now
    }

    #[test]
    fn w1_pair_completes_a_connection_with_verified_bytes() {
        w1_pair_completes(false);
    }

    /// The same over IPv6 (`--family ipv6`): every frame is IPv6 TCP on the TCP path.
    #[test]
    fn w1_pair_completes_over_ipv6() {
        w1_pair_completes(true);
    }

    fn w1_pair_completes(ipv6: bool) {
        let base = TcpConfig {
            max_flows: 64,
            ..TcpConfig::default()
        };
        let (mut c, mut s) = build(Wl::W1, 1, base, 128, false, MAX_RX_BURSTS, ipv6).unwrap();
        assert!(c.node.tcp.config().tx_checksum && s.node.tcp.config().rx_checksum);
        let now = 1_000;
        let (opened, stop) = c.open_owed(now, 4, 8);
        assert_eq!((opened, stop), (1, OpenStop::Done));
        assert_eq!(c.sent(), 1, "the SYN went to the wire");
        run_until(&mut c, &mut s, 1, now);
        assert_eq!(c.app.ops, 1);
        assert_eq!(c.app.errors + s.app.errors, 0);
        assert_eq!((c.app.connected, s.app.accepted), (1, 1));
        assert_eq!(c.app.to_open, 1, "the ended connection is owed again");
        let w1 = (http::w1_request().len() + http::w1_response().len()) as u64;
        assert_eq!(c.app.l7_bytes, w1);
        // Every frame was TCP for the node's MAC: the demux dropped none.
        let (cc, sc) = (c.node.counters, s.node.counters);
        assert_eq!((cc.rx_tcp, sc.rx_tcp), (cc.rx_frames, sc.rx_frames));
        assert_eq!((cc.rx_frames, sc.rx_frames), (s.sent(), c.sent()));
        assert_eq!(c.node.tcp.ipv6_addresses() > 0, ipv6, "the flow's family");
        // TIME_WAIT (or another timer) is pending: the skip reaches it, and 0 once due.
        let (ct, st) = (&c.node.tcp, &s.node.tcp);
        let t = [ct.next_timer(), st.next_timer()]
            .into_iter()
            .flatten()
            .min()
            .unwrap();
        assert_eq!(idle_skip(ct, st, t - 5), 5);
        assert_eq!(idle_skip(ct, st, t + 5), 0);
    }

    // The client's poll opens the owed connections (as mem2 runs it), and reopens the
    // ones that ended.
    #[test]
    fn client_poll_opens_and_reopens_owed_connections() {
        let base = TcpConfig {
            max_flows: 256,
            ..TcpConfig::default()
        };
        let (mut c, mut s) = build(Wl::W1, 8, base, 256, false, MAX_RX_BURSTS, false).unwrap();
        c.app.open_in_poll = Some((4096, 2 * 4096));
        run_until(&mut c, &mut s, 40, 1_000);
        assert!(c.app.ops >= 40, "ops {}", c.app.ops);
        assert_eq!(c.app.errors + s.app.errors, 0);
        assert!(c.app.connected >= c.app.ops && c.app.connected <= c.app.ops + 8);
    }

    /// Whether the IPv4/TCP frame `d` carries a correct TCP checksum.
    fn tcp_checksum_ok(d: &[u8]) -> bool {
        let ip = &d[14..];
        let ihl = usize::from(ip[0] & 0xf) * 4;
        let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
        let seg = &ip[ihl..total];
        let mut sum: u64 = 0;
        for w in ip[12..20].chunks(2) {
            sum += u64::from(u16::from_be_bytes([w[0], w[1]]));
        }
        sum += 6 + seg.len() as u64;
        for w in seg.chunks(2) {
            sum += u64::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)]));
        }
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        sum == 0xffff
    }

    // `--offload`: the mem ports offer checksum offload, so the nodes leave TCP checksums
    // to them (the wire computes none and flags frames "checksum good"); a W1 exchange
    // still completes with every byte verified.
    #[test]
    fn offload_leaves_tcp_checksums_to_the_port() {
        use squall_port::{FrameBuf, OffloadFlags};
        let base = TcpConfig {
            max_flows: 64,
            ..TcpConfig::default()
        };
        for offload in [false, true] {
            let (mut c, mut s) =
                build(Wl::W1, 1, base.clone(), 128, offload, MAX_RX_BURSTS, false).unwrap();
            for cfg in [c.node.tcp.config(), s.node.tcp.config()] {
                assert_eq!((cfg.tx_checksum, cfg.rx_checksum), (!offload, !offload));
            }
            let now = 1_000;
            assert_eq!(c.open_owed(now, 1, 1).0, 1);
            // The SYN as the server's port delivers it.
            let mut rx = Vec::new();
            assert_eq!(s.node.port.rx_burst(&mut rx, 4), 1);
            let good = rx[0]
                .offload()
                .flags
                .contains(OffloadFlags::RX_L4_CSUM_GOOD);
            assert_eq!(good, offload);
            assert_eq!(tcp_checksum_ok(rx[0].data()), !offload);
            s.node.port.release_all(&mut rx);
            // The SYN was taken off the wire: the client's retransmission opens the flow.
            run_until(&mut c, &mut s, 1, now);
            assert_eq!(c.app.ops, 1, "offload {offload}");
            assert_eq!(c.app.errors + s.app.errors, 0);
            assert!(c.node.tcp.counters().tcps_rexmttimeo > 0);
        }
    }
}
