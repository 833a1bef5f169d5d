//! Shared scenario harness: two `TcpHost`s joined by a deterministic in-memory wire with
//! impairments (loss, duplication, reordering, corruption, delay + jitter) on a virtual
//! clock, and the W1 client/server applications that verify every byte.
#![allow(dead_code)]

pub mod wire;

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;

use squall_tcp::{
    BufId, CloseReason, ConnectError, Ctl, FlowId, FlowTracer, OptsId, State, TcpApp, TcpConfig,
    TcpHost, TxSink,
};

/// Small deterministic PRNG (the workspace's SplitMix64).
pub struct Rng(rand_xoshiro::SplitMix64);
impl Rng {
    pub fn new(seed: u64) -> Self {
        use rand_core::SeedableRng;
        Rng(rand_xoshiro::SplitMix64::seed_from_u64(seed))
    }
    pub fn next(&mut self) -> u64 {
        rand_core::Rng::next_u64(&mut self.0)
    }
    pub fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && (self.next() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
}

/// Wire impairments (each applied independently per frame and direction).
#[derive(Clone, Copy, Debug, Default)]
pub struct Impair {
    pub loss: f64,
    pub dup: f64,
    pub corrupt: f64,
    /// Probability that a frame is held back by an extra random delay (reordering).
    pub reorder: f64,
    pub reorder_extra_ns: u64,
    pub delay_ns: u64,
    pub jitter_ns: u64,
}

#[derive(Default, Debug, Clone)]
pub struct WireStats {
    pub sent: u64,
    pub lost: u64,
    pub duplicated: u64,
    pub corrupted: u64,
    pub reordered: u64,
}

/// (delivery time, sequence, destination side, frame).
type InFlight = Reverse<(u64, u64, u8, Vec<u8>)>;

/// Frames in flight, ordered by delivery time (then by a sequence number: FIFO ties).
pub struct Wire {
    pub imp: Impair,
    rng: Rng,
    q: BinaryHeap<InFlight>,
    n: u64,
    pub stats: WireStats,
}

impl Wire {
    pub fn new(imp: Impair, seed: u64) -> Self {
        Wire {
            imp,
            rng: Rng::new(seed),
            q: BinaryHeap::new(),
            n: 0,
            stats: WireStats::default(),
        }
    }
    /// Sends a frame towards side `to` (0 = client, 1 = server).
    pub fn send(&mut self, now: u64, to: u8, mut f: Vec<u8>) {
        self.stats.sent += 1;
        if self.rng.chance(self.imp.loss) {
            self.stats.lost += 1;
            return;
        }
        let copies = if self.rng.chance(self.imp.dup) {
            self.stats.duplicated += 1;
            2
        } else {
            1
        };
        if self.rng.chance(self.imp.corrupt) && !f.is_empty() {
            self.stats.corrupted += 1;
            // Flip a byte in the IPv4/TCP part (an Ethernet MAC flip would go unnoticed, as on a real link).
            // IPv6 has no header checksum: its first 8 bytes (class, flow label, length,
            // next header, hop limit) are not what these tests are about; from the
            // addresses on, the TCP checksum covers everything.
            let lo = if f.get(12..14) == Some(&[0x86, 0xdd]) {
                22
            } else {
                14
            };
            let lo = lo.min(f.len() - 1);
            let i = lo + self.rng.below((f.len() - lo) as u64) as usize;
            f[i] ^= 1 + self.rng.below(255) as u8;
        }
        for _ in 0..copies {
            let mut t = now + self.imp.delay_ns + self.rng.below(self.imp.jitter_ns + 1);
            if self.rng.chance(self.imp.reorder) {
                self.stats.reordered += 1;
                t += 1 + self.rng.below(self.imp.reorder_extra_ns + 1);
            }
            self.n += 1;
            self.q.push(Reverse((t, self.n, to, f.clone())));
        }
    }
    pub fn next_time(&self) -> Option<u64> {
        self.q.peek().map(|r| r.0 .0)
    }
    pub fn pop_due(&mut self, now: u64) -> Option<(u8, Vec<u8>)> {
        if self.next_time()? <= now {
            let Reverse((_, _, to, f)) = self.q.pop()?;
            Some((to, f))
        } else {
            None
        }
    }
    pub fn is_empty(&self) -> bool {
        self.q.is_empty()
    }
}

/// Collects frames written by a host. With `tso_max` > 0 it takes TCP super-frames and
/// cuts them into wire frames as a kernel's GSO does ([`gso_segment`]), counting them.
#[derive(Default)]
pub struct VecSink {
    cur: Vec<u8>,
    pub frames: Vec<Vec<u8>>,
    pub tso_max: usize,
    /// Super-frames taken, and the wire frames they became.
    pub tso_frames: u64,
    pub tso_segments: u64,
}
impl TxSink for VecSink {
    fn alloc(&mut self, len: usize) -> Option<&mut [u8]> {
        self.cur.clear();
        self.cur.resize(len, 0);
        Some(&mut self.cur[..])
    }
    fn commit(&mut self, len: usize) {
        self.frames.push(self.cur[..len].to_vec());
    }
    fn tso_max(&self) -> usize {
        self.tso_max
    }
    fn alloc_tso(&mut self, len: usize) -> Option<&mut [u8]> {
        assert!(
            len <= self.tso_max,
            "super-frame of {len} bytes over {}",
            self.tso_max
        );
        self.alloc(len)
    }
    fn commit_tso(&mut self, len: usize, l3_len: u8, mss: u16) {
        let segs = gso_segment(&self.cur[..len], usize::from(l3_len), usize::from(mss));
        assert!(segs.len() >= 2, "a super-frame of one segment");
        self.tso_frames += 1;
        self.tso_segments += segs.len() as u64;
        self.frames.extend(segs);
    }
}

/// Cuts an Ethernet + IPv4/IPv6 + TCP super-frame (its TCP checksum field holding the
/// pseudo-header sum) into segments of `mss` payload bytes, as Linux's GSO does: headers
/// copied, IP length (and IPv4 id and checksum) per segment, sequence numbers advanced,
/// FIN and PSH on the last segment only, CWR on the first only, full TCP checksums.
pub fn gso_segment(f: &[u8], l3: usize, mss: usize) -> Vec<Vec<u8>> {
    use squall_wire::checksum::{fold, sum};
    let t0 = 14 + l3;
    let thl = usize::from(f[t0 + 12] >> 4) * 4;
    let hdr = t0 + thl;
    let payload = &f[hdr..];
    let seq0 = u32::from_be_bytes(f[t0 + 4..t0 + 8].try_into().unwrap());
    let id0 = u16::from_be_bytes([f[18], f[19]]);
    let n = payload.len().div_ceil(mss);
    let mut out = Vec::with_capacity(n);
    for (k, part) in payload.chunks(mss).enumerate() {
        let mut s = f[..hdr].to_vec();
        s.extend_from_slice(part);
        let tcp_len = thl + part.len();
        let pseudo: u32 = if l3 == 20 {
            s[16..18].copy_from_slice(&((20 + tcp_len) as u16).to_be_bytes());
            s[18..20].copy_from_slice(&id0.wrapping_add(k as u16).to_be_bytes());
            s[24..26].fill(0);
            let c = !sum(&s[14..34]);
            s[24..26].copy_from_slice(&c.to_be_bytes());
            u32::from(sum(&s[26..34])) + 6 + tcp_len as u32
        } else {
            s[18..20].copy_from_slice(&(tcp_len as u16).to_be_bytes());
            u32::from(sum(&s[22..54])) + 6 + tcp_len as u32
        };
        let t = &mut s[t0..];
        let seq = seq0.wrapping_add((k * mss) as u32);
        t[4..8].copy_from_slice(&seq.to_be_bytes());
        if k + 1 < n {
            t[13] &= !0x09; // FIN, PSH
        }
        if k > 0 {
            t[13] &= !0x80; // CWR
        }
        t[16..18].fill(0);
        let c = !fold(u64::from(pseudo) + u64::from(sum(t)));
        t[16..18].copy_from_slice(&c.to_be_bytes());
        out.push(s);
    }
    out
}

pub const REQ_LEN: usize = 100;
pub const RESP_LEN: usize = 32_768;

pub fn pattern(len: usize, salt: u8) -> Arc<[u8]> {
    (0..len)
        .map(|i| ((i * 31 + 7) % 251) as u8 ^ salt)
        .collect::<Vec<u8>>()
        .into()
}

#[derive(Clone, Copy, Default, Debug)]
struct CFlow {
    conn: u32,
    rx: u32,
    bad: bool,
    live: bool,
}

/// W1 client: sends the request on connect, verifies the response, closes after the last byte.
pub struct W1Client {
    req: BufId,
    resp: Arc<[u8]>,
    flows: Vec<CFlow>,
    pub ok: u64,
    pub failed: Vec<(u32, CloseReason, u32, bool)>,
    pub done: u64,
}

impl W1Client {
    pub fn new(req: BufId, resp: Arc<[u8]>) -> Self {
        W1Client {
            req,
            resp,
            flows: Vec::new(),
            ok: 0,
            failed: Vec::new(),
            done: 0,
        }
    }
    pub fn started(&mut self, f: FlowId, conn: u32) {
        let i = f.0 as usize;
        if self.flows.len() <= i {
            self.flows.resize(i + 1, CFlow::default());
        }
        self.flows[i] = CFlow {
            conn,
            rx: 0,
            bad: false,
            live: true,
        };
    }
}

impl TcpApp for W1Client {
    fn on_connected(&mut self, ctl: &mut Ctl, _f: FlowId) {
        ctl.send(self.req, 0, REQ_LEN as u32);
    }
    fn on_data(&mut self, ctl: &mut Ctl, f: FlowId, data: &[u8]) {
        let st = &mut self.flows[f.0 as usize];
        let pos = st.rx as usize;
        if pos + data.len() > RESP_LEN || self.resp[pos..pos + data.len()] != *data {
            st.bad = true;
        }
        st.rx += data.len() as u32;
        if st.rx as usize == RESP_LEN {
            ctl.close();
        }
    }
    fn on_closed(&mut self, f: FlowId, reason: CloseReason) {
        let st = &mut self.flows[f.0 as usize];
        assert!(st.live, "on_closed twice for flow {}", f.0);
        st.live = false;
        self.done += 1;
        if reason == CloseReason::Normal && st.rx as usize == RESP_LEN && !st.bad {
            self.ok += 1;
        } else {
            self.failed.push((st.conn, reason, st.rx, st.bad));
        }
    }
}

#[derive(Clone, Copy, Default, Debug)]
struct SFlow {
    rx: u32,
    acked: u32,
    bad: bool,
    live: bool,
}

/// W1 server: answers 32,768 bytes once the 100-byte request is in, closes on the client's FIN.
pub struct W1Server {
    req: Arc<[u8]>,
    resp: BufId,
    flows: Vec<SFlow>,
    pub accepted: u64,
    pub ok: u64,
    pub failed: Vec<(CloseReason, u32, u32, bool)>,
    pub done: u64,
}

impl W1Server {
    pub fn new(req: Arc<[u8]>, resp: BufId) -> Self {
        W1Server {
            req,
            resp,
            flows: Vec::new(),
            accepted: 0,
            ok: 0,
            failed: Vec::new(),
            done: 0,
        }
    }
}

impl TcpApp for W1Server {
    fn on_connected(&mut self, ctl: &mut Ctl, f: FlowId) {
        assert!(ctl.passive());
        let i = f.0 as usize;
        if self.flows.len() <= i {
            self.flows.resize(i + 1, SFlow::default());
        }
        self.flows[i] = SFlow {
            rx: 0,
            acked: 0,
            bad: false,
            live: true,
        };
        self.accepted += 1;
    }
    fn on_data(&mut self, ctl: &mut Ctl, f: FlowId, data: &[u8]) {
        let st = &mut self.flows[f.0 as usize];
        let pos = st.rx as usize;
        if pos + data.len() > REQ_LEN || self.req[pos..pos + data.len()] != *data {
            st.bad = true;
        }
        st.rx += data.len() as u32;
        if st.rx as usize == REQ_LEN {
            ctl.send(self.resp, 0, RESP_LEN as u32);
        }
    }
    fn on_acked(&mut self, _ctl: &mut Ctl, f: FlowId, bytes: u32) {
        self.flows[f.0 as usize].acked += bytes;
    }
    fn on_peer_closed(&mut self, ctl: &mut Ctl, _f: FlowId) {
        ctl.close();
    }
    fn on_closed(&mut self, f: FlowId, reason: CloseReason) {
        let st = &mut self.flows[f.0 as usize];
        assert!(st.live, "server on_closed twice for flow {}", f.0);
        st.live = false;
        self.done += 1;
        if reason == CloseReason::Normal
            && st.rx as usize == REQ_LEN
            && st.acked as usize == RESP_LEN
            && !st.bad
        {
            self.ok += 1;
        } else {
            self.failed.push((reason, st.rx, st.acked, st.bad));
        }
    }
}

/// The address family a scenario runs over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    V4,
    V6,
}

impl Family {
    /// The IP header's length (IPv4 without options, the fixed IPv6 header).
    pub fn ip_len(self) -> usize {
        match self {
            Family::V4 => 20,
            Family::V6 => 40,
        }
    }
    /// Where the TCP header starts in a frame (Ethernet, then the IP header).
    pub fn tcp_at(self) -> usize {
        14 + self.ip_len()
    }
    /// The MSS a host uses and advertises for an option set of MSS `mss` (an IPv4
    /// figure): 20 bytes less over IPv6, whose header is 20 bytes longer.
    pub fn mss(self, mss: u16) -> u16 {
        match self {
            Family::V4 => mss,
            Family::V6 => mss - 20,
        }
    }
    /// Opens a flow from `local` to `remote` (IPv4 address, port) with option set
    /// `opts`; over IPv6 between the addresses [`wire::ip6_of`] gives.
    pub fn connect<S: TxSink>(
        self,
        h: &mut TcpHost,
        now: u64,
        tx: &mut S,
        local: (u32, u16),
        remote: (u32, u16),
        opts: OptsId,
    ) -> Result<FlowId, ConnectError> {
        match self {
            Family::V4 => h.connect_with(now, tx, local.0, local.1, remote.0, remote.1, opts),
            Family::V6 => {
                let (l, r) = (wire::ip6_of(local.0), wire::ip6_of(remote.0));
                h.connect6_with(now, tx, l, local.1, r, remote.1, opts)
            }
        }
    }
}

/// `per_family!(name);` above `fn name(fam: Family)` makes it two tests, `name::ipv4`
/// and `name::ipv6`, running it over each address family (the module shares the
/// function's name: modules and functions live in different namespaces).
#[macro_export]
macro_rules! per_family {
    ($name:ident) => {
        mod $name {
            #[test]
            fn ipv4() {
                super::$name($crate::common::Family::V4)
            }
            #[test]
            fn ipv6() {
                super::$name($crate::common::Family::V6)
            }
        }
    };
}

pub const SERVER_IP: u32 = 0x3000_0001; // 48.0.0.1
/// 2001:db8:2::1, the server over IPv6.
pub const SERVER_IP6: [u8; 16] = [0x20, 1, 0xd, 0xb8, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
/// 2001:db8:1::1 - 2001:db8:1::c8, the clients over IPv6.
pub fn client_ip6(k: u32) -> [u8; 16] {
    let mut a = [0x20, 1, 0xd, 0xb8, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    a[15] = (1 + k % 200) as u8;
    a
}
pub fn client_ip(k: u32) -> u32 {
    0x1000_0001 + (k % 200) // 16.0.0.1 - 16.0.0.200
}
pub fn client_port(k: u32) -> u16 {
    1025 + (k / 200) as u16
}

/// Outcome of a W1 run.
#[derive(Debug)]
pub struct W1Result {
    pub flows: u32,
    pub client_ok: u64,
    pub server_ok: u64,
    pub client_failed: Vec<(u32, CloseReason, u32, bool)>,
    pub server_failed: Vec<(CloseReason, u32, u32, bool)>,
    pub hung: Vec<(u32, State)>,
    pub virtual_ns: u64,
    pub wire: WireStats,
    pub client: squall_tcp::TcpCounters,
    pub server: squall_tcp::TcpCounters,
}

pub fn w1_config() -> TcpConfig {
    TcpConfig {
        opts: squall_tcp::FlowOpts {
            mss: 1460,
            init_cwnd: 2,
            delack_ns: 100_000_000,
            ..squall_tcp::FlowOpts::default()
        },
        max_syn_retries: 12,
        // At 20 % loss a transmission and its ACK both get through with probability
        // 0.64: after an RTO, 15 more failures in a row (0.36^15, 2e-7) happen in about
        // one 100,000-flow run in ten (some 600,000 RTOs). Then the sender gives up, its
        // RST may be lost too and the receiver (no keepalive) waits forever: a hang that
        // says nothing about the stack. 30 retries make it 2e-13.
        max_retries: 30,
        // At 20 % loss the peer's FIN can need many backed-off retransmissions.
        fin_wait2_ns: 3_600_000_000_000,
        ..TcpConfig::default()
    }
}

/// A W1 client host and a server host listening on port 80, built from `cfg` (MACs,
/// per-side seeds derived from `seed`, room for `max_flows`), with their applications.
pub struct W1Pair {
    pub ch: TcpHost,
    pub sh: TcpHost,
    pub capp: W1Client,
    pub sapp: W1Server,
}

pub fn w1_pair(cfg: TcpConfig, max_flows: u32, seed: u64, now: u64) -> W1Pair {
    let ccfg = TcpConfig {
        max_flows,
        seed: seed ^ 0xc11e,
        ..cfg.clone()
    };
    let scfg = TcpConfig {
        max_flows,
        seed: seed ^ 0x5e4e,
        ..cfg
    };
    let (mut ch, mut sh) = host_pair(ccfg, scfg, now);
    sh.listen(80);
    let (capp, sapp) = w1_apps(&mut ch, &mut sh);
    W1Pair { ch, sh, capp, sapp }
}

impl W1Pair {
    /// Opens one W1 flow (client port 0 to port 80) and runs the handshake and the
    /// request frame by frame until the server's first flight of data is out; returns
    /// the server's frames of that last step (the flight).
    pub fn until_first_flight(
        &mut self,
        fam: Family,
        now: u64,
        cs: &mut VecSink,
        ss: &mut VecSink,
    ) -> Vec<Vec<u8>> {
        let f = fam
            .connect(
                &mut self.ch,
                now,
                cs,
                (client_ip(0), client_port(0)),
                (SERVER_IP, 80),
                squall_tcp::OptsId::DEFAULT,
            )
            .expect("connect");
        self.capp.started(f, 0);
        let data = |fr: &Vec<u8>| fr.len() > fam.tcp_at() + 20 + 100;
        let mut flight = Vec::new();
        for _ in 0..20 {
            for fr in cs.frames.drain(..) {
                self.sh.rx(now, &fr, &mut self.sapp, ss);
            }
            flight.append(&mut ss.frames);
            if flight.iter().any(data) {
                break;
            }
            for fr in flight.drain(..) {
                self.ch.rx(now, &fr, &mut self.capp, cs);
            }
        }
        flight
    }
}

/// A client host (MAC ...:01) and a server host (MAC ...:02) addressed to each other;
/// everything else from `ccfg` / `scfg`.
pub fn host_pair(ccfg: TcpConfig, scfg: TcpConfig, now: u64) -> (TcpHost, TcpHost) {
    let c = TcpHost::new(
        TcpConfig {
            mac: [2, 0, 0, 0, 0, 1],
            gateway_mac: [2, 0, 0, 0, 0, 2],
            ..ccfg
        },
        now,
    );
    let s = TcpHost::new(
        TcpConfig {
            mac: [2, 0, 0, 0, 0, 2],
            gateway_mac: [2, 0, 0, 0, 0, 1],
            ..scfg
        },
        now,
    );
    (c, s)
}

/// Registers the W1 request at the client and the response at the server and returns
/// the W1 applications that send and verify them.
pub fn w1_apps(ch: &mut TcpHost, sh: &mut TcpHost) -> (W1Client, W1Server) {
    let req = pattern(REQ_LEN, 0x11);
    let resp = pattern(RESP_LEN, 0x5a);
    let req_id = ch.buffers().register(req.clone());
    let resp_id = sh.buffers().register(resp.clone());
    (W1Client::new(req_id, resp), W1Server::new(req, resp_id))
}

/// Runs `n` W1 flows over address family `fam`, at most `conc` at a time, over a wire
/// with `imp`.
pub fn run_w1_over(
    fam: Family,
    n: u32,
    conc: u32,
    imp: Impair,
    seed: u64,
    cfg: TcpConfig,
) -> W1Result {
    run_w1_sinks(fam, n, conc, imp, seed, cfg, false, 0, false).0
}

/// Every flow of a W1 run completed on both ends, none hung or failed on the client,
/// every response byte verified.
pub fn assert_every_flow_done(r: &W1Result) {
    assert!(
        r.hung.is_empty(),
        "hung: {:?}",
        &r.hung[..r.hung.len().min(5)]
    );
    assert!(r.client_failed.is_empty(), "{:?}", &r.client_failed[..1]);
    assert_eq!(
        r.client_ok,
        u64::from(r.flows),
        "every response byte verified"
    );
    assert_eq!(r.server_ok, u64::from(r.flows));
}

/// The frames of `v` as the slices `rx_burst` takes.
fn frame_refs(v: &[Vec<u8>]) -> Vec<&[u8]> {
    v.iter().map(|f| &f[..]).collect()
}

/// Both hosts' tracers (client, server), when the run traced.
pub type Tracers = Option<(FlowTracer, FlowTracer)>;

/// [`run_w1_over`], every flow traced when `trace` (both hosts' tracers returned:
/// client, server), with both hosts' sinks taking TCP super-frames of up to `tso_max`
/// bytes (0: none), cut into segments by the sink; also returns the (client, server)
/// super-frame and segment counts. `bursts`: the frames due at each instant go to each
/// host in `rx_burst` calls (as a node's receive loop hands them over), not one `rx`
/// each.
#[allow(clippy::too_many_arguments)]
pub fn run_w1_sinks(
    fam: Family,
    n: u32,
    conc: u32,
    imp: Impair,
    seed: u64,
    cfg: TcpConfig,
    trace: bool,
    tso_max: usize,
    bursts: bool,
) -> (W1Result, Tracers, [(u64, u64); 2]) {
    let mut now = 1_000_000_000u64;
    let W1Pair {
        mut ch,
        mut sh,
        mut capp,
        mut sapp,
    } = w1_pair(cfg, n + conc + 16, seed, now);
    if trace {
        ch.set_tracer(Some(FlowTracer::new(1 << 24)));
        // Every passive flow: the server traces whatever its select accepts.
        sh.set_tracer(Some(
            FlowTracer::new(1 << 24).with_select(usize::MAX, Box::new(|_, _, _, _| true)),
        ));
    }
    let mut csink = VecSink {
        tso_max,
        ..VecSink::default()
    };
    let mut ssink = VecSink {
        tso_max,
        ..VecSink::default()
    };
    let mut wire = Wire::new(imp, seed);
    let mut next = 0u32;
    let mut conn_of_flow: Vec<u32> = Vec::new();
    // Four virtual hours: anything beyond is a hang. 100,000 flows at 20 % loss without
    // timestamps need about two: Karn's rule keeps the backed-off RTO until a valid RTT
    // sample, and at that loss rate go-back-N recoveries often lose a retransmission.
    let deadline = now + 4 * 3_600_000_000_000;
    loop {
        // Open new connections up to the concurrency limit.
        while next < n && (next as u64) < capp.done + conc as u64 {
            let opened = match fam {
                Family::V4 => ch.connect(
                    now,
                    &mut csink,
                    client_ip(next),
                    client_port(next),
                    SERVER_IP,
                    80,
                ),
                Family::V6 => ch.connect6(
                    now,
                    &mut csink,
                    client_ip6(next),
                    client_port(next),
                    SERVER_IP6,
                    80,
                ),
            };
            match opened {
                Ok(f) => {
                    if trace {
                        assert!(ch.trace_flow(f));
                    }
                    capp.started(f, next);
                    if conn_of_flow.len() <= f.0 as usize {
                        conn_of_flow.resize(f.0 as usize + 1, 0);
                    }
                    conn_of_flow[f.0 as usize] = next;
                }
                Err(e) => panic!("connect {next} failed: {e:?}"),
            }
            next += 1;
        }
        // Deliver frames due now.
        for f in csink.frames.drain(..) {
            wire.send(now, 1, f);
        }
        for f in ssink.frames.drain(..) {
            wire.send(now, 0, f);
        }
        if bursts {
            // Index 0: frames to the client, 1: to the server.
            let mut due: [Vec<Vec<u8>>; 2] = Default::default();
            while let Some((to, f)) = wire.pop_due(now) {
                due[usize::from(to)].push(f);
            }
            let [to_c, to_s] = due;
            sh.rx_burst(now, &frame_refs(&to_s), &mut sapp, &mut ssink);
            ch.rx_burst(now, &frame_refs(&to_c), &mut capp, &mut csink);
        } else {
            while let Some((to, f)) = wire.pop_due(now) {
                if to == 1 {
                    sh.rx(now, &f, &mut sapp, &mut ssink);
                } else {
                    ch.rx(now, &f, &mut capp, &mut csink);
                }
            }
        }
        ch.poll(now, &mut capp, &mut csink);
        sh.poll(now, &mut sapp, &mut ssink);
        if !csink.frames.is_empty() || !ssink.frames.is_empty() {
            continue;
        }
        if capp.done == n as u64 && sapp.done == sapp.accepted {
            break;
        }
        let t = [wire.next_time(), ch.next_timer(), sh.next_timer()]
            .into_iter()
            .flatten()
            .min();
        match t {
            Some(t) if t <= deadline => now = now.max(t),
            _ => break,
        }
    }
    let mut hung = Vec::new();
    for i in 0..conn_of_flow.len() as u32 {
        let st = ch.state(FlowId(i));
        if st != State::Closed && st != State::TimeWait {
            hung.push((conn_of_flow[i as usize], st));
        }
    }
    let r = W1Result {
        flows: n,
        client_ok: capp.ok,
        server_ok: sapp.ok,
        client_failed: capp.failed,
        server_failed: sapp.failed,
        hung,
        virtual_ns: now - 1_000_000_000,
        wire: wire.stats,
        client: ch.counters().clone(),
        server: sh.counters().clone(),
    };
    let tracers = match (ch.take_tracer(), sh.take_tracer()) {
        (Some(c), Some(s)) => Some((c, s)),
        _ => None,
    };
    let tso = [
        (csink.tso_frames, csink.tso_segments),
        (ssink.tso_frames, ssink.tso_segments),
    ];
    (r, tracers, tso)
}
