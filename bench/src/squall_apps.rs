//! The Squall W1/W2 (and idle W3) client and server apps, the frame sink over a mem port
//! and the host pair on squall-port's mem wire: one implementation shared by the T-mem1
//! driver (`squall.rs`) and the T-mem2 / initial-window driver (`mem2.rs`). Every byte is
//! verified against the expected request/response; wrong or failed flows count as errors.

use std::sync::Arc;

use squall_port::mem::{pair, MemConfig, MemFrame, MemPort};
use squall_port::{FrameBuf, Port};
use squall_tcp::{
    BufId, CloseReason, ConnectError, Ctl, FlowId, TcpApp, TcpConfig, TcpHost, TxSink,
};

use crate::http::{self, matches_at};
use crate::measure::Histogram;

const CLIENT_IP: u32 = 0x1000_0001; // 16.0.0.1 (pool of 200 addresses)
const CLIENT_ADDRS: u32 = 200;
const SERVER_IP: u32 = 0x3000_0001; // 48.0.0.1
const SERVER_PORT: u16 = 80;
pub(crate) const BURST: usize = 32;

/// Which workload the apps play.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wl {
    /// A new connection per 100-byte GET / 32 KiB answer.
    W1,
    /// Persistent connections looping a tiny request/response.
    W2,
    /// W3: connect and stay idle.
    Idle,
}

impl Wl {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Wl::W1 => "W1",
            Wl::W2 => "W2",
            Wl::Idle => "W3",
        }
    }
}

/// A [`TxSink`] over a mem port: frames are written in place in the port's pool.
pub(crate) struct PortSink {
    pub(crate) port: MemPort,
    free: Vec<MemFrame>,
    out: Vec<MemFrame>,
    cur: Option<MemFrame>,
    pub(crate) alloc_fail: u64,
}

impl PortSink {
    fn new(port: MemPort) -> Self {
        PortSink {
            port,
            free: Vec::with_capacity(BURST),
            out: Vec::with_capacity(4 * BURST),
            cur: None,
            alloc_fail: 0,
        }
    }

    pub(crate) fn flush(&mut self) {
        if !self.out.is_empty() {
            self.port.tx_burst(&mut self.out);
        }
    }

    /// Whether frames wait in the sink for the wire.
    pub(crate) fn queued(&self) -> bool {
        !self.out.is_empty()
    }

    /// Frames handed to the wire or queued for it.
    pub(crate) fn sent(&self) -> u64 {
        self.port.stats().tx_frames + self.out.len() as u64
    }
}

impl TxSink for PortSink {
    fn alloc(&mut self, len: usize) -> Option<&mut [u8]> {
        if self.cur.is_none() {
            if self.free.is_empty() && self.port.alloc_tx(&mut self.free, BURST) == 0 {
                self.flush();
                if self.port.alloc_tx(&mut self.free, BURST) == 0 {
                    self.alloc_fail += 1;
                    return None;
                }
            }
            self.cur = self.free.pop();
        }
        let f = self.cur.as_mut()?;
        f.set_len(len).ok()?;
        Some(f.data_mut())
    }

    fn commit(&mut self, len: usize) {
        if let Some(mut f) = self.cur.take() {
            if f.set_len(len).is_ok() {
                self.out.push(f);
                if self.out.len() >= BURST {
                    self.port.tx_burst(&mut self.out);
                }
            } else {
                self.port.release(f);
            }
        }
    }
}

/// Per-flow application state (indexed by `FlowId`).
#[derive(Clone, Copy, Default)]
struct FlowApp {
    got: u32,
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
        let resp = &self.resp;
        let s = flow_slot(&mut self.flows, f);
        if !verify(s, resp, data) {
            ctl.abort();
            return;
        }
        if s.got as usize == resp.len() {
            match self.wl {
                Wl::W1 => ctl.close(),
                Wl::W2 => {
                    self.ops += 1;
                    self.l7_bytes += (self.req_len as usize + resp.len()) as u64;
                    if let Some(h) = self.hist.as_mut() {
                        h.record_ns(self.now_ns.saturating_sub(s.t_sent));
                    }
                    s.got = 0;
                    s.t_sent = self.now_ns;
                    ctl.send(self.req, 0, self.req_len);
                }
                Wl::Idle => {}
            }
        }
    }

    fn on_closed(&mut self, f: FlowId, reason: CloseReason) {
        let resp_len = self.resp.len();
        let s = flow_slot(&mut self.flows, f);
        let ok = self.wl == Wl::W1
            && reason == CloseReason::Normal
            && !s.bad
            && s.got as usize == resp_len;
        if ok {
            self.ops += 1;
            self.l7_bytes += (self.req_len as usize + resp_len) as u64;
        } else {
            self.errors += 1;
        }
        *s = FlowApp::default();
        self.to_open += 1;
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
        if s.responding && self.wl == Wl::W1 {
            s.bad = true; // W1 carries one request per connection
        }
        if !verify(s, req, data) {
            ctl.abort();
            return;
        }
        if s.got as usize == req.len() {
            ctl.send(self.resp, 0, self.resp_len);
            match self.wl {
                Wl::W1 => s.responding = true,
                _ => s.got = 0,
            }
        }
    }

    fn on_peer_closed(&mut self, ctl: &mut Ctl, _f: FlowId) {
        ctl.close();
    }

    fn on_closed(&mut self, f: FlowId, reason: CloseReason) {
        let s = flow_slot(&mut self.flows, f);
        let ok = self.wl != Wl::W1
            || (reason == CloseReason::Normal && !s.bad && s.got as usize == self.req.len());
        if !ok {
            self.errors += 1;
        }
        *s = FlowApp::default();
    }
}

/// One host with its app and its end of the wire.
pub(crate) struct Side<A> {
    pub(crate) host: TcpHost,
    pub(crate) app: A,
    pub(crate) sink: PortSink,
    rxv: Vec<MemFrame>,
}

impl<A: TcpApp> Side<A> {
    fn new(host: TcpHost, app: A, port: MemPort) -> Self {
        Side {
            host,
            app,
            sink: PortSink::new(port),
            rxv: Vec::with_capacity(BURST),
        }
    }

    /// Runs the host's timers.
    pub(crate) fn poll(&mut self, now: u64) {
        self.host.poll(now, &mut self.app, &mut self.sink);
    }

    /// Delivers one burst of received frames; false if there was none.
    pub(crate) fn rx(&mut self, now: u64) -> bool {
        if self.sink.port.rx_burst(&mut self.rxv, BURST) == 0 {
            return false;
        }
        // One call per burst: the host reads every 4-tuple first and prefetches the
        // flow-table slots and TCBs (what keeps the cost flat when flows are many).
        let mut frames: [&[u8]; BURST] = [&[]; BURST];
        let n = self.rxv.len().min(BURST);
        for (d, f) in frames.iter_mut().zip(&self.rxv) {
            *d = f.data();
        }
        self.host
            .rx_burst(now, &frames[..n], &mut self.app, &mut self.sink);
        self.sink.port.release_all(&mut self.rxv);
        true
    }

    /// Flows that stopped on a full TX pool go on.
    pub(crate) fn tx_resume(&mut self, now: u64) {
        self.host.tx_resume(now, &mut self.sink);
    }

    /// Timers, one RX burst, flush; true if a frame was received or sent.
    pub(crate) fn turn(&mut self, now: u64) -> bool {
        let before = self.sink.sent();
        self.poll(now);
        let busy = self.rx(now);
        self.sink.flush();
        busy || self.sink.sent() != before
    }
}

/// Why [`Side::open_owed`] stopped early.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum OpenStop {
    /// Every owed connection (up to the limit) was opened or tried.
    Done,
    /// The host refused: no free flow slot.
    Refused,
}

impl Side<ClientApp> {
    /// Opens up to `limit` of the connections owed, trying at most `max_tries` client
    /// address/port pairs; returns how many were opened and why it stopped.
    pub(crate) fn open_owed(
        &mut self,
        now: u64,
        limit: usize,
        max_tries: usize,
    ) -> (usize, OpenStop) {
        let mut opened = 0;
        let mut tries = 0;
        while self.app.to_open > 0 && opened < limit && tries < max_tries {
            tries += 1;
            let k = self.app.next_port;
            self.app.next_port = k.wrapping_add(1);
            let ip = CLIENT_IP + (k % CLIENT_ADDRS);
            let port = 1024 + ((k / CLIENT_ADDRS) % 64_000) as u16;
            match self
                .host
                .connect(now, &mut self.sink, ip, port, SERVER_IP, SERVER_PORT)
            {
                Ok(_) => {
                    self.app.to_open -= 1;
                    opened += 1;
                }
                Err(ConnectError::InUse) => continue,
                Err(ConnectError::NoResources) => return (opened, OpenStop::Refused),
            }
        }
        (opened, OpenStop::Done)
    }
}

/// A client and a server host on a mem wire of `frames` frames per side (the port cycles
/// its whole pool, so it is the cache working set: size it to the frames in flight), the
/// client owing `conns` connections. `base` carries the settings both hosts share (MACs
/// are set here).
pub(crate) fn build(
    wl: Wl,
    conns: usize,
    base: TcpConfig,
    frames: u32,
) -> Result<(Side<ClientApp>, Side<ServerApp>), String> {
    let (a, b) = pair(MemConfig {
        frames,
        ring_size: frames,
        ..MemConfig::default()
    })
    .map_err(|e| e.to_string())?;
    let (req, resp) = match wl {
        Wl::W1 => (http::w1_request(), http::w1_response()),
        _ => (http::w2_request(), http::w2_response()),
    };
    let mut ch = TcpHost::new(
        TcpConfig {
            mac: [2, 0, 0, 0, 0, 1],
            gateway_mac: [2, 0, 0, 0, 0, 2],
            ..base.clone()
        },
        1,
    );
    let mut sh = TcpHost::new(
        TcpConfig {
            mac: [2, 0, 0, 0, 0, 2],
            gateway_mac: [2, 0, 0, 0, 0, 1],
            ..base
        },
        1,
    );
    sh.listen(SERVER_PORT);
    let (req_len, resp_len) = (req.len() as u32, resp.len() as u32);
    let req: Arc<[u8]> = Arc::from(req);
    let resp: Arc<[u8]> = Arc::from(resp);
    let req_id = ch.buffers().register(req.clone());
    let resp_id = sh.buffers().register(resp.clone());
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
    Ok((Side::new(ch, capp, a), Side::new(sh, sapp, b)))
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
        let (mut c, mut s) = build(Wl::W2, conns, base, 64).unwrap();
        let mut now = 1_000;
        c.open_owed(now, conns, usize::MAX);
        for _ in 0..20_000 {
            now += 1_000;
            c.app.now_ns = now;
            c.poll(now);
            s.poll(now);
            c.sink.flush();
            s.sink.flush();
            s.rx(now);
            s.sink.flush();
            c.rx(now);
            s.tx_resume(now);
            c.tx_resume(now);
        }
        assert_eq!(c.app.errors + s.app.errors, 0);
        assert_eq!(
            (c.app.connected, s.app.accepted),
            (conns as u64, conns as u64)
        );
        assert!(c.app.ops > 10 * conns as u64, "ops {}", c.app.ops);
        assert!(c.sink.alloc_fail > 0, "the pool was never full");
    }

    #[test]
    fn w1_pair_completes_a_connection_with_verified_bytes() {
        let base = TcpConfig {
            max_flows: 64,
            ..TcpConfig::default()
        };
        let (mut c, mut s) = build(Wl::W1, 1, base, 128).unwrap();
        let mut now = 1_000;
        let (opened, stop) = c.open_owed(now, 4, 8);
        assert_eq!((opened, stop), (1, OpenStop::Done));
        for _ in 0..10_000 {
            now += 1_000;
            c.app.now_ns = now;
            let a = c.turn(now);
            let b = s.turn(now);
            if c.app.ops > 0 && !(a | b) {
                break;
            }
        }
        assert_eq!(c.app.ops, 1);
        assert_eq!(c.app.errors + s.app.errors, 0);
        assert_eq!((c.app.connected, s.app.accepted), (1, 1));
        assert_eq!(c.app.to_open, 1, "the ended connection is owed again");
        let w1 = (http::w1_request().len() + http::w1_response().len()) as u64;
        assert_eq!(c.app.l7_bytes, w1);
        // TIME_WAIT (or another timer) is pending: the skip reaches it, and 0 once due.
        let t = c.host.next_timer().or(s.host.next_timer()).unwrap();
        let t = t.min(s.host.next_timer().unwrap_or(t));
        assert_eq!(idle_skip(&c.host, &s.host, t - 5), 5);
        assert_eq!(idle_skip(&c.host, &s.host, t + 5), 0);
    }
}
