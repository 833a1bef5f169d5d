//! One side of a run: the generator app ([`GenSide`]: TCP programs in [`GenApp`], UDP
//! programs in [`UdpFlows`], and on a client side the flow scheduler with address
//! allocation) on a `squall_stack::Node` that owns the port, the TCP host and the UDP
//! layer. [`Side::iterate`] is one node turn; the generator's part of it
//! ([`NodeApp::poll`]) fires program timers and UDP timers, then opens the flows that are
//! due (none while TCP flows wait for TX frames, or while the driver throttles).

use std::collections::VecDeque;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use squall_astf::alloc::{AllocError, ClientAddr, ClientAlloc, PortRange, ServerPick};
use squall_astf::interp::Event;
use squall_astf::ipv6::Ipv6Map;
use squall_astf::sched::{FlowStart, SchedConfig, Scheduler};
use squall_astf::{IpPool, Profile, SideTunables, TemplateIdx, Transport};
use squall_port::rss::RssSteer;
use squall_port::Port;
use squall_stack::{
    Datagram, Node, NodeApp, NodeConfig, NodeIo, Owned, Owned6, PcapCap, TapRef, UdpFlowId, UdpKey,
};
use squall_tcp::{
    CloseReason, Ctl, FlowId, FlowOpts, OptsId, RtoConfig, TcpApp, TcpConfig, TcpHost,
};

use super::app::{GenApp, IoOp};
use super::udp::{udp_prealloc, UdpFlows};
use crate::stats::SideStats;

/// The client side's flow source.
pub struct ClientGen {
    sched: Scheduler,
    /// Client allocators and server pickers, one per distinct pool: templates whose
    /// generators share a pool (TRex: one `ASTFIPGenDist` in several templates) share
    /// one distribution and one port space.
    allocs: Vec<ClientAlloc>,
    servers: Vec<ServerPick>,
    /// Per template: its index in `allocs` and in `servers`.
    pool: Vec<(usize, usize)>,
    starts: Vec<FlowStart>,
    /// Flows due but not opened yet (pacing or throttling); opened in order.
    pending: VecDeque<FlowStart>,
    /// With receive-side scaling: only source ports whose reply hashes to this queue.
    rss: Option<(RssSteer, u32)>,
    /// Per template: its IPv6 addressing (pool values are the low 32 bits), if IPv6; the
    /// RSS hash of its replies is then the IPv6 one.
    v6: Vec<Option<Ipv6Map>>,
}

impl ClientGen {
    /// Scheduler and allocators for every template (one client core), source ports from
    /// the default range.
    pub fn new(profile: &Profile, cfg: &SchedConfig) -> Result<Self, String> {
        Self::with_ports(profile, cfg, PortRange::default())
    }

    /// As [`ClientGen::new`] with source ports from `ports` (ports are reused as flows end).
    pub fn with_ports(
        profile: &Profile,
        cfg: &SchedConfig,
        ports: PortRange,
    ) -> Result<Self, String> {
        let mut allocs = Vec::new();
        let mut servers = Vec::new();
        let mut pool: Vec<(usize, usize)> = Vec::new();
        for (i, t) in profile.templates.iter().enumerate() {
            let gen = &profile.ip_gens[t.ip_gen as usize];
            let seed = cfg.seed ^ (i as u64).wrapping_mul(0x9E37_79B9);
            let tpl = TemplateIdx(i as u16);
            let (ci, si) = (profile.client_pool_of(tpl), profile.server_pool_of(tpl));
            let a = if ci == i {
                // This core's share of the pool and the source ports it owns
                // (`port % n_cores == core`: the rule replies are steered by).
                allocs.push(
                    ClientAlloc::new(gen, 0, cfg.core, cfg.n_cores, ports, seed)
                        .map_err(|e| format!("template {i}: client allocation: {e:?}"))?,
                );
                allocs.len() - 1
            } else {
                pool[ci].0
            };
            let s = if si == i {
                servers.push(ServerPick::new(gen, 0, 0, seed));
                servers.len() - 1
            } else {
                pool[si].1
            };
            pool.push((a, s));
        }
        Ok(ClientGen {
            sched: Scheduler::new(profile, cfg),
            allocs,
            servers,
            pool,
            starts: Vec::with_capacity(64),
            pending: VecDeque::new(),
            rss: None,
            v6: profile.templates.iter().map(|t| t.ipv6).collect(),
        })
    }

    /// For a port that spreads received frames over queues by RSS: source ports are
    /// taken only if the reply of the flow hashes to `queue` (the queue of this core), so
    /// every reply lands on the core that opened the flow, as TRex does. With a scheduler
    /// of core `k` of `n` the ports also keep `port % n == k` (the rule of the software
    /// redirect, the safety net where the device's hash differs), so `queue` should be `k`:
    /// about `1/n²` of the port range then fits.
    pub fn set_rss(&mut self, steer: RssSteer, queue: u32) {
        self.rss = Some((steer, queue));
    }
    /// Stops opening flows from `at` on.
    pub fn stop_at(&mut self, at: u64) {
        self.sched.stop_at(at);
    }
    /// When opening stops (see `Scheduler::stop_ns`).
    pub fn stop_ns(&self) -> u64 {
        self.sched.stop_ns()
    }
    /// Changes the rate multiplier from `now` on (live rate control: `squall daemon`).
    pub fn set_mult(&mut self, now: u64, mult: f64) {
        self.sched.set_mult(now, mult);
    }
    /// No flow will be opened any more.
    pub fn is_finished(&self) -> bool {
        self.sched.is_finished() && self.pending.is_empty()
    }
    /// Flows due and waiting to be opened.
    pub fn backlog(&self) -> usize {
        self.pending.len()
    }
    /// A client endpoint for a flow of template `tpl`, from its (possibly shared) pool;
    /// `busy(ip, port)` vetoes a tuple still in use.
    pub fn alloc(
        &mut self,
        tpl: usize,
        server: u32,
        sport: u16,
        mut busy: impl FnMut(u32, u16) -> bool,
    ) -> Result<ClientAddr, AllocError> {
        let a = &mut self.allocs[self.pool[tpl].0];
        match (&self.rss, self.v6.get(tpl).copied().flatten()) {
            (None, _) => a.alloc(busy),
            (Some((steer, q)), None) => {
                a.alloc(|ip, port| !steer.port_fits(*q, ip, port, server, sport) || busy(ip, port))
            }
            // A device that does not hash IPv6 4-tuples puts the replies where it will.
            (Some((steer, _)), Some(_)) if !steer.hashes_ipv6() => a.alloc(busy),
            (Some((steer, q)), Some(m)) => {
                let srv = m.server_addr(server);
                a.alloc(|ip, port| {
                    !steer.port_fits6(*q, &m.client_addr(ip), port, &srv, sport) || busy(ip, port)
                })
            }
        }
    }
    /// Gives back the client endpoint of an ended flow of template `tpl`.
    pub fn release(&mut self, tpl: usize, addr: ClientAddr) {
        if let Some(&(a, _)) = self.pool.get(tpl) {
            self.allocs[a].release(addr);
        }
    }
    /// The server address for the next flow of template `tpl`.
    pub fn pick_server(&mut self, tpl: usize) -> u32 {
        self.servers[self.pool[tpl].1].pick()
    }
}

/// Window scale needed to advertise `rxbufsize` (RFC 7323), when `do_rfc1323` allows it
/// and the buffer exceeds what an unscaled window can say.
fn wscale_for(t: &SideTunables) -> Option<u8> {
    let rx = u64::from(t.tcp.rxbufsize);
    (t.tcp.do_rfc1323 && rx > 65_535).then(|| {
        let mut s = 0u8;
        while (65_535u64 << s) < rx && s < 14 {
            s += 1;
        }
        s
    })
}

/// Per-flow TCP/IP options from a side's tunables: MSS, initial window, delayed ACK,
/// Nagle (`no_delay`), RFC 7323 (`do_rfc1323`: timestamps, and window scaling when the
/// receive buffer needs it), SACK, receive window (`rxbufsize`), duplicate-ACK
/// threshold (`rexmtthresh`), TTL and TOS.
pub fn flow_opts(t: &SideTunables) -> FlowOpts {
    let wscale = wscale_for(t);
    FlowOpts {
        mss: t.tcp.mss,
        init_cwnd: t.tcp.initwnd.clamp(1, 20),
        // Without window scaling the advertised window cannot exceed 65535.
        rcv_wnd: if wscale.is_some() {
            t.tcp.rxbufsize
        } else {
            t.tcp.rxbufsize.clamp(1, 65_535)
        },
        wscale,
        timestamps: t.tcp.do_rfc1323,
        sack: t.tcp.do_sack,
        nagle: !t.tcp.no_delay,
        delack_ns: u64::from(t.tcp.delay_ack_msec) * 1_000_000,
        burst_ack: t.tcp.burst_ack,
        ack_bytes: t.tcp.no_delay_counter,
        rexmt_thresh: t.tcp.rexmtthresh,
        ttl: t.ip.ttl,
        tos: t.ip.tos,
    }
    .sanitised()
}

/// SYN / SYN-ACK retransmissions whose backoff schedule (`rto`: initial RTO doubling up
/// to its maximum) gives up within `keepinit_s` seconds: TRex's (BSD's) connection
/// establishment timeout expressed as squall-tcp's retransmission limit.
pub fn syn_retries_within(keepinit_s: u16, rto: &RtoConfig) -> u8 {
    let limit = u64::from(keepinit_s) * 1_000_000;
    let step = |k: u8| (u64::from(rto.initial_us) << k.min(32)).min(u64::from(rto.max_us));
    let (mut n, mut total) = (0u8, step(0));
    while n < u8::MAX && total + step(n + 1) <= limit {
        n += 1;
        total += step(n);
    }
    n
}

/// Host configuration from a side's tunables (its defaults: flows of templates with
/// other tunables get their own option set, see [`flow_opts`]). The side-wide TCP
/// tunables map onto the host: `keepinit` onto the SYN retransmission limit
/// ([`syn_retries_within`]), `keepidle`/`keepintvl` onto keepalive (8 probes, as BSD).
pub fn tcp_config(
    t: &SideTunables,
    mac: [u8; 6],
    gw: [u8; 6],
    max_flows: u32,
    seed: u64,
) -> TcpConfig {
    let d = FlowOpts::default();
    TcpConfig {
        mac,
        gateway_mac: gw,
        max_flows,
        // The side's options, except that the default set (RST replies to segments
        // without a flow, ports without a template) keeps the host defaults for the
        // duplicate-ACK threshold, TTL and TOS; template flows get all of their
        // tunables through their own set (`add_flow_opts`).
        opts: FlowOpts {
            rexmt_thresh: d.rexmt_thresh,
            ttl: d.ttl,
            tos: d.tos,
            ..flow_opts(t)
        },
        max_syn_retries: syn_retries_within(t.tcp.keepinit, &RtoConfig::default()),
        max_retries: 12,
        keepalive: (t.tcp.keepidle > 0).then(|| {
            let s = 1_000_000_000u64;
            (
                u64::from(t.tcp.keepidle) * s,
                u64::from(t.tcp.keepintvl) * s,
                8,
            )
        }),
        seed,
        ..TcpConfig::default()
    }
}

/// The IPv4 addresses a side owns (answers ARP and ping for): the client pool of every
/// IPv4 template on a client side, the server pool on a server side.
pub fn owned_ranges(p: &Profile, client: bool) -> Owned {
    Owned(
        p.templates
            .iter()
            .filter(|t| t.ipv6.is_none())
            .map(|t| pool_of(p, t, client))
            .map(|pool| (pool.first, pool.last))
            .collect(),
    )
}

/// The IPv6 addresses a side owns (answers neighbour solicitations and ICMPv6 echo
/// for): the pools of the IPv6 templates under their high bits.
pub fn owned_ranges6(p: &Profile, client: bool) -> Owned6 {
    let mut o = Owned6::default();
    for t in &p.templates {
        if let Some(m) = t.ipv6 {
            let pool = pool_of(p, t, client);
            let msb = if client { m.client } else { m.server };
            let a = |low| u128::from_be_bytes(squall_astf::ipv6::join(&msb, low));
            o.add(a(pool.first), a(pool.last));
        }
    }
    o
}

fn pool_of<'a>(p: &'a Profile, t: &squall_astf::Template, client: bool) -> &'a IpPool {
    let g = &p.ip_gens[t.ip_gen as usize];
    if client {
        &g.clients
    } else {
        &g.servers
    }
}

/// The generator as an application of the node: one side's programs and (client side)
/// its flow source.
pub struct GenSide {
    pub app: GenApp,
    pub udp: UdpFlows,
    /// Boxed: `poll` takes it out and puts it back every turn.
    pub client: Option<Box<ClientGen>>,
    /// Option set of each template's flows on this side (client tunables on a client
    /// side, server tunables on a server side).
    tpl_opts: Vec<OptsId>,
    /// Most client flows opened per turn (`None`: all that are due). Real-time runs pace
    /// so that a burst of late flows cannot flood the wire's frame pool in one turn.
    pub pace: Option<usize>,
    /// Set by the driver while the wire's frame pools run low: no new flow is opened
    /// (due flows wait; their latency still counts from their scheduled start).
    pub throttle: bool,
    /// TCP flows waiting for TX frames at the last poll: no new flow opens meanwhile.
    tx_waiting: usize,
    scratch: Vec<u32>,
    /// Flow tracing (`--trace`), client side: picks the flows to trace.
    pub trace: Option<crate::flowtrace::FlowSelect>,
}

impl TcpApp for GenSide {
    #[inline]
    fn on_connected(&mut self, ctl: &mut Ctl, f: FlowId) {
        self.app.on_connected(ctl, f)
    }
    #[inline]
    fn on_data(&mut self, ctl: &mut Ctl, f: FlowId, data: &[u8]) {
        self.app.on_data(ctl, f, data)
    }
    #[inline]
    fn on_acked(&mut self, ctl: &mut Ctl, f: FlowId, bytes: u32) {
        self.app.on_acked(ctl, f, bytes)
    }
    #[inline]
    fn on_peer_closed(&mut self, ctl: &mut Ctl, f: FlowId) {
        self.app.on_peer_closed(ctl, f)
    }
    #[inline]
    fn on_closed(&mut self, f: FlowId, reason: CloseReason) {
        self.app.on_closed(f, reason)
    }
    #[inline]
    fn on_retransmit(&mut self, f: FlowId) {
        self.app.on_retransmit(f)
    }
}

impl NodeApp for GenSide {
    fn begin_turn(&mut self, now: u64) {
        self.app.set_now(now);
    }

    fn on_udp<P: Port>(
        &mut self,
        io: &mut NodeIo<'_, P>,
        flow: Option<UdpFlowId>,
        d: &Datagram<'_>,
    ) -> bool {
        self.udp.rx(&mut self.app.udp_ctx(), io, flow, d)
    }

    fn owns_tcp_port(&self, port: u16) -> bool {
        self.serves(Transport::Tcp, port)
    }

    fn owns_udp_port(&self, port: u16) -> bool {
        self.serves(Transport::Udp, port)
    }

    fn poll<P: Port>(&mut self, io: &mut NodeIo<'_, P>) -> bool {
        let now = io.now();
        let mut work = false;
        self.tx_waiting = io.tx_waiting();
        // Program timers.
        if self.app.next_timer().is_some_and(|t| t <= now) {
            work = true;
            let mut exp = self.app.take_expired();
            self.app.expire_timers(now, &mut exp);
            for &f in &exp {
                self.app.step(f, Event::Timer);
                self.apply_ops(io, f);
            }
            self.app.put_expired(exp);
        }
        if self.udp.next_timer().is_some_and(|t| t <= now) {
            work = true;
            self.udp.expire(&mut self.app.udp_ctx(), io);
        }
        // New client flows.
        if let Some(mut cg) = self.client.take() {
            if !self.throttle && self.tx_waiting == 0 {
                if cg.pending.is_empty() && cg.sched.next_due().is_some_and(|t| t <= now) {
                    let mut starts = std::mem::take(&mut cg.starts);
                    starts.clear();
                    // A bounded batch: a generator far behind its schedule keeps the rest
                    // due (with their times) instead of holding them all at once.
                    cg.sched.poll_max(now, &mut starts, POLL_BATCH);
                    cg.pending.extend(starts.drain(..));
                    cg.starts = starts;
                }
                let budget = self.pace.unwrap_or(usize::MAX);
                let mut n = 0;
                while n < budget {
                    let Some(s) = cg.pending.pop_front() else {
                        break;
                    };
                    self.start_flow(io, &mut cg, &s);
                    n += 1;
                }
                work |= n > 0;
            }
            for (tpl, addr) in self.app.released.drain(..) {
                cg.release(tpl as usize, addr);
            }
            self.client = Some(cg);
        }
        work
    }

    fn next_event(&self, now: u64) -> Option<u64> {
        [
            self.app.next_timer(),
            self.udp.next_timer(),
            self.client.as_ref().and_then(|c| {
                if self.tx_waiting > 0 {
                    // No flow opens before frames come back (a peer's turn or a timer).
                    None
                } else if c.pending.is_empty() {
                    c.sched.next_due()
                } else {
                    Some(now)
                }
            }),
        ]
        .into_iter()
        .flatten()
        .min()
    }
}

impl GenSide {
    /// How long flows were opened from `t0`: `duration_ns`, or less when a stop came
    /// first (the daemon's `stop`, the live view's `q`); the rates divide by it.
    pub fn generation_ns(&self, t0: u64, duration_ns: u64) -> u64 {
        self.client.as_ref().map_or(duration_ns, |c| {
            c.stop_ns().saturating_sub(t0).min(duration_ns)
        })
    }
    /// A server side with a `transport` template on (or associated with) local `port`.
    fn serves(&self, transport: Transport, port: u16) -> bool {
        self.client.is_none()
            && self.app.profile().templates.iter().any(|t| {
                t.transport == transport
                    && (t.port == port || t.assoc.iter().any(|r| r.port == port))
            })
    }

    /// The generator of one side for a node whose TCP host is `host`: registers every
    /// profile buffer and each template's option set once; a server side listens on
    /// every TCP template's port (and associated ports). `client`: the flow source of a
    /// client side. Several apps may share the host (`squall_stack::Pair`).
    pub fn new(
        profile: Arc<Profile>,
        host: &mut TcpHost,
        max_flows: u32,
        client: Option<ClientGen>,
        now: u64,
        seed: u64,
    ) -> Self {
        let is_client = client.is_some();
        let bufs = profile
            .buffers
            .iter()
            .map(|b| (host.buffers().register(b.data.clone()), b.data.len() as u32))
            .collect();
        let tpl_opts: Vec<OptsId> = profile
            .templates
            .iter()
            .map(|t| {
                let o = flow_opts(if is_client { &t.client } else { &t.server });
                // More than 256 distinct option sets: the rest use the host's defaults.
                host.add_flow_opts(o).unwrap_or(OptsId::DEFAULT)
            })
            .collect();
        if !is_client {
            // Options are per listening port: where templates share a port, the first
            // template (the first association match) sets them, hence the reverse order.
            for (t, &o) in profile.templates.iter().zip(&tpl_opts).rev() {
                if t.transport != Transport::Tcp {
                    continue;
                }
                for r in &t.assoc {
                    host.listen_with(r.port, o);
                }
                host.listen_with(t.port, o);
            }
        }
        GenSide {
            udp: UdpFlows::new(&profile, max_flows, !is_client, now),
            app: GenApp::new(profile, bufs, max_flows as usize, now, seed),
            client: client.map(Box::new),
            tpl_opts,
            trace: None,
            pace: None,
            throttle: false,
            tx_waiting: 0,
            scratch: Vec::with_capacity(256),
        }
    }

    /// Applies the app's recorded operations for flow `f` outside a callback.
    fn apply_ops<P: Port>(&mut self, io: &mut NodeIo<'_, P>, f: u32) {
        if self.app.ops.is_empty() {
            return;
        }
        let mut ops = std::mem::take(&mut self.app.ops);
        let fid = FlowId(f);
        for op in ops.drain(..) {
            match op {
                IoOp::Send(id, len) => {
                    if io.send(fid, id, 0, len).is_err() {
                        self.app.stats.send_errors += 1;
                    }
                }
                IoOp::Close => io.close(&mut self.app, fid),
                IoOp::Reset => {
                    io.abort(&mut self.app, fid);
                    break;
                }
            }
        }
        ops.clear();
        self.app.ops = ops;
    }

    /// Opens a client flow: picks the server, allocates a client tuple (for UDP one no UDP
    /// flow uses), then connects (TCP) or opens the UDP flow and runs its program.
    fn start_flow<P: Port>(&mut self, io: &mut NodeIo<'_, P>, cg: &mut ClientGen, s: &FlowStart) {
        let ti = s.template.0 as usize;
        let t = &self.app.profile().templates[ti];
        let (tg, dport, is_udp) = (t.tg_id as usize, t.port, t.transport == Transport::Udp);
        let v6 = t.ipv6;
        let server = cg.pick_server(ti);
        let udp = io.udp();
        let addr = match cg.alloc(ti, server, dport, |ip, port| {
            is_udp
                && udp.in_use(&UdpKey {
                    local_ip: ip,
                    remote_ip: server,
                    local_port: port,
                    remote_port: dport,
                })
        }) {
            Ok(a) => a,
            Err(_) => {
                self.app.stats.tg[tg].c.ports_exhausted += 1;
                return;
            }
        };
        // Traced flows are the only ones the capture watches; without tracing it takes
        // the first flows it is shown (`--pcap`).
        let traced = match self.trace.as_mut() {
            None => {
                io.watch(addr.ip, addr.port);
                false
            }
            Some(sel) => {
                let (c, s) = match v6 {
                    None => (
                        Ipv4Addr::from(addr.ip).into(),
                        Ipv4Addr::from(server).into(),
                    ),
                    Some(m) => (
                        Ipv6Addr::from(m.client_addr(addr.ip)).into(),
                        Ipv6Addr::from(m.server_addr(server)).into(),
                    ),
                };
                sel.select(ti, c, addr.port, s, dport)
            }
        };
        if traced {
            io.watch(addr.ip, addr.port);
        }
        let opened = if is_udp {
            let mut cx = self.app.udp_ctx();
            self.udp
                .open_client(&mut cx, io, s.template, s.at_ns, addr, server, dport)
        } else {
            let o = self.tpl_opts[ti];
            let c = match v6 {
                None => io.connect(addr.ip, addr.port, server, dport, o),
                Some(m) => connect6(io, m, addr, server, dport, o),
            };
            match c {
                Ok(f) => {
                    if traced && io.trace_flow(f) {
                        if let Some(sel) = self.trace.as_mut() {
                            sel.traced_templates.push(ti as u16);
                        }
                    }
                    self.app.start_client(f, s.template, s.at_ns, addr);
                    self.apply_ops(io, f.0);
                    true
                }
                Err(_) => false,
            }
        };
        if !opened {
            cg.release(ti, addr);
            self.app.stats.tg[tg].c.connect_failed += 1;
        } else if io.now().saturating_sub(s.at_ns) > LATE_START_NS {
            self.app.stats.tg[tg].c.started_late += 1;
        }
    }
}

/// A client flow opened this long after its scheduled start counts as `started_late`: the
/// generator fell behind its schedule (the flows' latencies, counted from the schedule,
/// show by how much). Bursts of a paced, healthy run stay within a few milliseconds.
pub const LATE_START_NS: u64 = 10_000_000;

/// Most flow starts taken from the schedule at once (a generator behind its schedule
/// takes the rest in later turns, or counts them as not opened at the stop).
const POLL_BATCH: usize = 4096;

/// Opens the TCP flow of an IPv6 template: pool values are the low 32 bits under the
/// template's high bits. Out of line: the IPv4 path of [`GenSide::poll`] stays as it was.
#[inline(never)]
fn connect6<P: Port>(
    io: &mut NodeIo<'_, P>,
    m: Ipv6Map,
    addr: ClientAddr,
    server: u32,
    dport: u16,
    o: OptsId,
) -> Result<FlowId, squall_tcp::ConnectError> {
    let (c, s) = (m.client_addr(addr.ip), m.server_addr(server));
    io.connect6(c, addr.port, s, dport, o)
}

/// One side of a run: the generator on its node.
pub struct Side<P: Port> {
    pub node: Node<P>,
    pub gen: GenSide,
}

impl<P: Port> Side<P> {
    /// A side over `port` with a host built from `cfg`; registers every profile buffer
    /// once. Server sides listen on every template's port. The node owns the side's
    /// address pools (ARP, ping).
    pub fn new(
        profile: Arc<Profile>,
        port: P,
        cfg: TcpConfig,
        client: Option<ClientGen>,
        now: u64,
        seed: u64,
    ) -> Self {
        let is_client = client.is_some();
        let ncfg = NodeConfig {
            owned: owned_ranges(&profile, is_client),
            owned6: owned_ranges6(&profile, is_client),
            neighbours: Vec::new(),
            max_udp_flows: cfg.max_flows as usize,
            udp_prealloc: udp_prealloc(&profile, cfg.max_flows),
            ..NodeConfig::default()
        };
        let max_flows = cfg.max_flows;
        let mut node = Node::new(port, cfg, ncfg, now);
        let gen = GenSide::new(profile, &mut node.tcp, max_flows, client, now, seed);
        Side { node, gen }
    }

    /// One loop turn at time `now`. Returns true if anything happened.
    pub fn iterate(&mut self, now: u64, pcap: Option<&mut PcapCap>) -> bool {
        self.node
            .turn(now, &mut self.gen, pcap.map(|p| p as TapRef))
    }

    /// Aborts every live flow (stop after the drain period); they are counted as cut.
    pub fn cut_all(&mut self, now: u64, pcap: Option<&mut PcapCap>) -> u64 {
        let g = &mut self.gen;
        let mut live = std::mem::take(&mut g.scratch);
        g.app.live_flows(&mut live);
        let n = {
            let mut io = self.node.io(now, pcap.map(|p| p as TapRef));
            let n = live.len() as u64 + g.udp.cut_all(&mut g.app.udp_ctx(), &mut io);
            for &f in &live {
                g.app.mark_cut(f);
                io.abort(&mut g.app, FlowId(f));
            }
            n
        };
        g.scratch = live;
        self.node.flush();
        // Flows scheduled before the stop but never opened (the generator fell behind).
        if let Some(cg) = g.client.as_mut() {
            let mut missed = cg.sched.drain_due(now, 1 << 20);
            for s in cg.pending.drain(..) {
                if let Some(m) = missed.get_mut(s.template.0 as usize) {
                    *m += 1;
                }
            }
            for (ti, n) in missed.into_iter().enumerate() {
                let tg = g.app.profile().templates[ti].tg_id as usize;
                if let Some(t) = g.app.stats.tg.get_mut(tg) {
                    t.c.not_opened = t.c.not_opened.saturating_add(n);
                }
            }
        }
        n
    }

    /// Earliest moment this side has something to do (virtual-clock driver).
    pub fn next_event(&self, now: u64) -> Option<u64> {
        self.node.next_event(now, &self.gen)
    }

    /// No client flow will be opened any more, no flow runs, the host holds no flow
    /// (TIME_WAIT included) and no frame is on its way to this side (a datagram to a
    /// released UDP flow still gets counted).
    pub fn is_idle(&self) -> bool {
        self.gen.app.live == 0
            && self.gen.udp.live == 0
            && self.node.port.next_event_ns().is_none()
            && self.node.tcp.flow_count() == 0
            && !matches!(&self.gen.client, Some(c) if !c.is_finished())
    }

    /// The side's statistics with the node's UDP drops folded in under their TRex names
    /// (the node checks datagrams before the generator sees them).
    pub fn stats(&self) -> SideStats {
        let mut s = SideStats::default();
        self.stats_into(&mut s);
        s
    }

    /// [`Side::stats`] into `s`, reusing its histograms (no allocation once sized).
    pub fn stats_into(&self, s: &mut SideStats) {
        s.clone_from(&self.gen.app.stats);
        let u = &self.node.udp.stats;
        s.udp.udps_badsum += u.rx_bad_sum;
        s.udp.udps_hdrops += u.rx_bad_hdr + u.rx_bad_addr;
    }

    /// Gives every frame this side still holds back to the port.
    pub fn release_frames(&mut self) {
        self.node.release_frames();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w1() -> Profile {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../examples/w1-astf-http.json");
        crate::source::load(&p, &[]).unwrap()
    }

    #[test]
    fn each_core_allocates_its_share_of_addresses_and_its_own_ports() {
        let p = w1();
        let mut seen = std::collections::HashSet::new();
        for core in 0..2 {
            let sc = SchedConfig::from_profile(&p, 1.0, Some(1_000_000_000), core, 2);
            let mut cg = ClientGen::new(&p, &sc).unwrap();
            for _ in 0..500 {
                let a = cg.alloc(0, 0x3000_0001, 80, |_, _| false).unwrap();
                assert_eq!(
                    u32::from(a.port) % 2,
                    core,
                    "port {} on core {core}",
                    a.port
                );
                assert!(seen.insert((a.ip, a.port)), "a tuple of two cores");
            }
        }
    }

    #[test]
    fn with_rss_every_reply_hashes_to_the_cores_queue() {
        use squall_port::rss::{RssConfig, RssSteer};
        let p = w1();
        let server = 0x3000_0001; // 48.0.0.1
        for queue in 0..4 {
            let sc = SchedConfig::from_profile(&p, 1.0, Some(1_000_000_000), 0, 1);
            let mut cg = ClientGen::new(&p, &sc).unwrap();
            let steer = RssSteer::new(&RssConfig::symmetric(4));
            cg.set_rss(steer.clone(), queue);
            for _ in 0..300 {
                let a = cg.alloc(0, server, 80, |_, _| false).unwrap();
                assert_eq!(steer.reply_queue(a.ip, a.port, server, 80), queue);
            }
        }
    }

    #[test]
    fn with_rss_an_ipv6_templates_replies_hash_with_its_ipv6_tuple() {
        use squall_port::rss::{RssConfig, RssSteer};
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/profiles/mixed-ipv4-ipv6.json");
        let p = crate::source::load(&path, &[]).unwrap();
        let m = p.templates[1].ipv6.expect("template 1 is IPv6");
        assert!(p.templates[0].ipv6.is_none());
        let steer = RssSteer::new(&RssConfig::symmetric(2));
        for queue in 0..2 {
            let sc = SchedConfig::from_profile(&p, 1.0, Some(1_000_000_000), 0, 1);
            let mut cg = ClientGen::new(&p, &sc).unwrap();
            cg.set_rss(steer.clone(), queue);
            let mut v6_only = 0;
            for _ in 0..300 {
                let server = cg.pick_server(1);
                let a = cg.alloc(1, server, 80, |_, _| false).unwrap();
                let (c, s) = (m.client_addr(a.ip), m.server_addr(server));
                assert_eq!(steer.reply_queue6(&c, a.port, &s, 80), queue);
                // The IPv4 hash of the pool values would not have told.
                if steer.reply_queue(a.ip, a.port, server, 80) != queue {
                    v6_only += 1;
                }
                let server4 = cg.pick_server(0);
                let b = cg.alloc(0, server4, 80, |_, _| false).unwrap();
                assert_eq!(steer.reply_queue(b.ip, b.port, server4, 80), queue);
            }
            assert!(v6_only > 50, "{v6_only}");
        }
        // A device that does not hash IPv6 4-tuples: IPv6 ports are not filtered (about
        // half of them have replies the IPv6 hash would put elsewhere).
        let mut cfg = RssConfig::symmetric(2);
        cfg.ipv6 = false;
        let steer4 = RssSteer::new(&cfg);
        let sc = SchedConfig::from_profile(&p, 1.0, Some(1_000_000_000), 0, 1);
        let mut cg = ClientGen::new(&p, &sc).unwrap();
        cg.set_rss(steer4.clone(), 0);
        let elsewhere = (0..300)
            .filter(|_| {
                let server = cg.pick_server(1);
                let a = cg.alloc(1, server, 80, |_, _| false).unwrap();
                let (c, s) = (m.client_addr(a.ip), m.server_addr(server));
                steer4.reply_queue6(&c, a.port, &s, 80) != 0
            })
            .count();
        assert!((75..=225).contains(&elsewhere), "{elsewhere} of 300");
    }

    #[test]
    fn with_rss_on_core_k_of_n_ports_keep_both_rules() {
        use squall_port::rss::{RssConfig, RssSteer};
        let p = w1();
        let server = 0x3000_0001;
        let steer = RssSteer::new(&RssConfig::symmetric(2));
        for core in 0..2 {
            let sc = SchedConfig::from_profile(&p, 1.0, Some(1_000_000_000), core, 2);
            let mut cg = ClientGen::new(&p, &sc).unwrap();
            cg.set_rss(steer.clone(), core);
            for _ in 0..300 {
                let a = cg.alloc(0, server, 80, |_, _| false).unwrap();
                assert_eq!(u32::from(a.port) % 2, core);
                assert_eq!(steer.reply_queue(a.ip, a.port, server, 80), core);
            }
        }
    }

    #[test]
    fn window_scale_only_when_the_buffer_needs_it() {
        let mut t = SideTunables::default();
        t.tcp.rxbufsize = 32_768;
        let c = tcp_config(&t, [0; 6], [0; 6], 16, 1);
        assert_eq!((c.opts.wscale, c.opts.rcv_wnd), (None, 32_768));
        t.tcp.rxbufsize = 262_144;
        let c = tcp_config(&t, [0; 6], [0; 6], 16, 1);
        assert_eq!((c.opts.wscale, c.opts.rcv_wnd), (Some(3), 262_144));
        // The largest buffer a profile may give (TRex allows about 1 GiB): the largest
        // window RFC 7323 advertises.
        t.tcp.rxbufsize = 65_535 << 14;
        let c = tcp_config(&t, [0; 6], [0; 6], 16, 1);
        assert_eq!((c.opts.wscale, c.opts.rcv_wnd), (Some(14), 65_535 << 14));
        t.tcp.do_rfc1323 = false;
        let c = tcp_config(&t, [0; 6], [0; 6], 16, 1);
        assert_eq!((c.opts.wscale, c.opts.rcv_wnd), (None, 65_535));
    }

    #[test]
    fn keepalive_tunables_map_onto_the_host() {
        let mut t = SideTunables::default();
        let c = tcp_config(&t, [0; 6], [0; 6], 16, 1);
        // keepinit 75 s: retransmissions at 1, 3, 7, 15, 31 s, given up at 63 s.
        assert_eq!((c.max_syn_retries, c.keepalive), (5, None));
        t.tcp.keepinit = 5;
        t.tcp.keepidle = 128;
        t.tcp.keepintvl = 10;
        let c = tcp_config(&t, [0; 6], [0; 6], 16, 1);
        assert_eq!(c.max_syn_retries, 1);
        assert_eq!(c.keepalive, Some((128_000_000_000, 10_000_000_000, 8)));
        assert_eq!(syn_retries_within(1, &RtoConfig::default()), 0);
        assert_eq!(syn_retries_within(65533, &RtoConfig::default()), u8::MAX);
    }
}
