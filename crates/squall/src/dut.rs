//! TRex's topology on real ports (`squall run --client-iface ... --server-iface ...`): one
//! process owns a client port and a server port with the device under test between them
//! (a router, a NAT, a firewall), and plays both sides of every flow through it. Each
//! port has its own node (ARP for the addresses that side owns, the DUT's MAC learnt by
//! resolving its gateway address); one thread runs both nodes on the monotonic clock, or
//! with `--cores N` N workers, each with one fanout member of each port and its own pair
//! of nodes (see [`run_dut`]).
//! Because both sides are Squall's, the run is checked with every invariant of the
//! in-memory wire (bytes sent == bytes received both ways, connects == accepts, ...).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use squall_astf::sched::SchedConfig;
use squall_astf::Profile;
use squall_engine::clock::thread_cpu_ns;
use squall_engine::Clock;
use squall_port::fanout::FanoutBy;
use squall_port::Port;
use squall_stack::{redirect, Redirect, SharedMac};
use squall_wire::Ipv6Address;

#[cfg(feature = "dpdk")]
use crate::cores::with_eal;
use crate::cores::{open_afpacket, open_afxdp, REDIRECT_DEPTH};
use crate::flowtrace::TraceRig;
use crate::gen::{owned_ranges, owned_ranges6, tcp_config, ClientGen, Side};
use crate::iface::{parse_ip, side_report, IdleYield, PortKind, RealConfig};
use crate::run::{
    host_secret, publish_client, publish_server, Live, RunConfig, RunResult, START_LEAD_NS,
};
use crate::shards::{join_workers, spawn_worker};
use crate::worker::Worker;

/// The two ports of a DUT run and the addresses that lead to the DUT on each.
#[derive(Clone, Debug)]
pub struct DutConfig {
    pub client: RealConfig,
    pub server: RealConfig,
    /// Next hop of the client port (the DUT's address there); default: the server
    /// address itself (a DUT that bridges).
    pub client_gw: Option<[u8; 4]>,
    /// Next hop of the server port; default: the first client address.
    pub server_gw: Option<[u8; 4]>,
    /// The same as IPv6 addresses (template 0 over IPv6: resolved by neighbour discovery).
    pub client_gw6: Option<[u8; 16]>,
    pub server_gw6: Option<[u8; 16]>,
    pub arp_timeout: Duration,
}

impl DutConfig {
    /// `--eal "..."` for the DUT's DPDK ports (one EAL for both): an error when neither
    /// port is a DPDK one, or when a DPDK port has none.
    pub fn set_eal(&mut self, eal: Option<&str>) -> Result<(), String> {
        let dpdk = [&self.client, &self.server]
            .iter()
            .any(|r| r.kind == PortKind::Dpdk);
        match (eal, dpdk) {
            (None, false) => Ok(()),
            (Some(_), false) => Err("--eal is for DPDK ports (dpdk:NAME)".into()),
            (None, true) => Err("a DPDK port (dpdk:NAME) needs --eal \"...\"".into()),
            (Some(text), true) => {
                let args = crate::iface::split_eal(text)?;
                for r in [&mut self.client, &mut self.server] {
                    if let Some(d) = r.dpdk.as_mut() {
                        d.eal = args.clone();
                    }
                }
                Ok(())
            }
        }
    }
}

/// Parses `--client-iface`, `--server-iface`, `--client-gw`, `--server-gw`: `None` when
/// neither interface is given.
pub fn parse(
    client: Option<&str>,
    server: Option<&str>,
    client_gw: Option<&str>,
    server_gw: Option<&str>,
) -> Result<Option<DutConfig>, String> {
    let (c, s) = match (client, server) {
        (None, None) => {
            if client_gw.is_some() || server_gw.is_some() {
                return Err(
                    "--client-gw/--server-gw need --client-iface and --server-iface".into(),
                );
            }
            return Ok(None);
        }
        (Some(c), Some(s)) => (c, s),
        _ => return Err("--client-iface and --server-iface go together".into()),
    };
    let port = |spec: &str, opt: &str| -> Result<RealConfig, String> {
        crate::iface::parse(spec, Some("client"), None, None)
            .map_err(|e| e.replace("--iface", opt))?
            .ok_or_else(|| format!("{opt} {spec}: a real interface is needed (not mem)"))
    };
    let (c, s) = (port(c, "--client-iface")?, port(s, "--server-iface")?);
    if c.ifname == s.ifname {
        return Err(format!(
            "--client-iface and --server-iface are both {}: they must be two ports",
            c.ifname
        ));
    }
    let gw = |v: Option<&str>, opt: &str| {
        v.filter(|a| !a.contains(':'))
            .map(|a| parse_ip(a).map_err(|e| e.replace("--peer-ip", opt)))
            .transpose()
    };
    let gw6 = |v: Option<&str>, opt: &str| {
        v.filter(|a| a.contains(':'))
            .map(|a| {
                a.parse::<std::net::Ipv6Addr>()
                    .map(|x| x.octets())
                    .map_err(|_| format!("{opt} {a}: not an IPv4 or IPv6 address"))
            })
            .transpose()
    };
    Ok(Some(DutConfig {
        client_gw: gw(client_gw, "--client-gw")?,
        server_gw: gw(server_gw, "--server-gw")?,
        client_gw6: gw6(client_gw, "--client-gw")?,
        server_gw6: gw6(server_gw, "--server-gw")?,
        client: c,
        server: s,
        arp_timeout: Duration::from_secs(3),
    }))
}

/// What one DUT worker shares with the others: its index among `count`, the clock and
/// start instant, the DUT's MAC on each link (resolved by whichever worker's queue the ARP
/// reply reaches), the count of finished workers, and its ends of each port's redirect
/// mesh.
struct DutWorker {
    w: Worker,
    server_next_hop: Arc<SharedMac>,
    server_redirect: Option<Redirect>,
}

/// Runs both sides of `profile` through the DUT: one worker (one thread running both
/// nodes), or with `--cores N` N workers each owning one fanout member of each port (the
/// client port steered by our source port `% N`, the server port by the peer-port hash,
/// redirect meshes as the safety net).
pub fn run_dut(
    profile: Arc<Profile>,
    cfg: &RunConfig,
    dc: &DutConfig,
    live: Arc<Live>,
) -> Result<RunResult, String> {
    if profile.templates.is_empty() {
        return Err("the profile has no template".into());
    }
    let n = cfg.cores.max(1);
    crate::cores::check_cores(n)?;
    // Each port's own queues: AF_PACKET fanout members (steered by port number), AF_XDP
    // sockets on queues Q.. (the XDP program taking that side's addresses, the rest of the
    // interface left to the kernel), or DPDK queue pairs (one EAL for both ports).
    let dpdk = [&dc.client, &dc.server]
        .iter()
        .find_map(|r| (r.kind == PortKind::Dpdk).then(|| r.dpdk.clone().unwrap_or_default()));
    if dpdk.is_some() {
        let dev = |r: &RealConfig| r.dpdk.as_ref().and_then(|x| x.device.clone());
        if dc.client.kind == PortKind::Dpdk
            && dc.server.kind == PortKind::Dpdk
            && (dev(&dc.client).is_none()
                || dev(&dc.server).is_none()
                || dev(&dc.client) == dev(&dc.server))
        {
            return Err(
                "--client-iface/--server-iface: two DPDK ports need their names \
                 (dpdk:NAME each, as --eal's devices are named)"
                    .into(),
            );
        }
    }
    let run = || {
        let next = AfterClient {
            profile: profile.clone(),
            cfg,
            dc,
            live,
        };
        open_side(&dc.client, true, n, &profile, next)
    };
    match dpdk {
        Some(d) => with_eal(&d.eal, run),
        None => run(),
    }
}

/// What runs on a side's open queues: the client side's opens the server side's, whose
/// runs the DUT on both (a continuation for each port type, as a closure cannot be
/// generic).
trait OnPorts {
    fn go<P: Port + Send + 'static>(self, ports: Vec<P>) -> Result<RunResult, String>;
}

struct AfterClient<'a> {
    profile: Arc<Profile>,
    cfg: &'a RunConfig,
    dc: &'a DutConfig,
    live: Arc<Live>,
}

impl OnPorts for AfterClient<'_> {
    fn go<C: Port + Send + 'static>(self, cports: Vec<C>) -> Result<RunResult, String> {
        let n = cports.len() as u32;
        let (dc, profile) = (self.dc, self.profile.clone());
        open_side(
            &dc.server,
            false,
            n,
            &profile,
            AfterServer { up: self, cports },
        )
    }
}

struct AfterServer<'a, C> {
    up: AfterClient<'a>,
    cports: Vec<C>,
}

impl<C: Port + Send + 'static> OnPorts for AfterServer<'_, C> {
    fn go<S: Port + Send + 'static>(self, sports: Vec<S>) -> Result<RunResult, String> {
        let u = self.up;
        run_dut_on(u.profile, u.cfg, u.dc, u.live, self.cports, sports)
    }
}

/// Opens `n` queues of one DUT port (`client`: the client side's, which owns the client
/// pools) and hands them to `next`.
fn open_side<K: OnPorts>(
    rc: &RealConfig,
    client: bool,
    n: u32,
    profile: &Profile,
    next: K,
) -> Result<RunResult, String> {
    match rc.kind {
        PortKind::AfPacket => {
            let by = if client {
                FanoutBy::DstPort
            } else {
                FanoutBy::SrcPort
            };
            next.go(open_afpacket(rc, n, by)?)
        }
        PortKind::AfXdp { queue, mode } => {
            let owned = (
                owned_ranges(profile, client).0,
                owned_ranges6(profile, client).0,
            );
            next.go(open_afxdp(rc, queue, mode, n, &owned)?)
        }
        PortKind::Dpdk => open_dpdk_side(rc, n, next),
    }
}

#[cfg(feature = "dpdk")]
fn open_dpdk_side<K: OnPorts>(rc: &RealConfig, n: u32, next: K) -> Result<RunResult, String> {
    let d = rc.dpdk.clone().unwrap_or_default();
    next.go(crate::cores::open_dpdk(&d, n)?)
}

#[cfg(not(feature = "dpdk"))]
const NO_DPDK: &str =
    "--client-iface/--server-iface dpdk: built without the dpdk feature (cargo build --features dpdk)";

#[cfg(not(feature = "dpdk"))]
fn with_eal<T>(_eal: &[String], _f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    Err(NO_DPDK.into())
}

#[cfg(not(feature = "dpdk"))]
fn open_dpdk_side<K: OnPorts>(_rc: &RealConfig, _n: u32, _next: K) -> Result<RunResult, String> {
    Err(NO_DPDK.into())
}

/// [`run_dut`] on the open queues of the two ports (`cports[k]`, `sports[k]`: worker
/// `k`'s).
fn run_dut_on<C: Port + Send + 'static, S: Port + Send + 'static>(
    profile: Arc<Profile>,
    cfg: &RunConfig,
    dc: &DutConfig,
    live: Arc<Live>,
    cports: Vec<C>,
    sports: Vec<S>,
) -> Result<RunResult, String> {
    let n = cports.len() as u32;
    let mut w = Worker::single();
    w.count = n;
    w.t0 = w.clock.now_ns() + START_LEAD_NS * u64::from(n.min(8));
    let server_next_hop: Arc<SharedMac> = Arc::default();
    let mut cmesh = mesh_ends(n);
    let mut smesh = mesh_ends(n);
    let ncpu = squall_engine::affinity::available_cores();
    // One worker publishes into the run's own figures and reads its control; several
    // into shards that the join sums and forwards the control to.
    let lives = if n == 1 {
        vec![live.clone()]
    } else {
        crate::shards::shard_lives(&live, n)
    };
    let mut workers = Vec::with_capacity(n as usize);
    for (k, (cport, sport)) in cports.into_iter().zip(sports).enumerate() {
        let dw = DutWorker {
            w: Worker {
                index: k as u32,
                redirect: cmesh[k].take(),
                next_hop: w.next_hop.clone(),
                finished: w.finished.clone(),
                rss: None,
                ..w
            },
            server_next_hop: server_next_hop.clone(),
            server_redirect: smesh[k].take(),
        };
        let (p, c, d, l) = (profile.clone(), cfg.clone(), dc.clone(), lives[k].clone());
        if n == 1 {
            return run_dut_worker(p, &c, &d, l, dw, cport, sport);
        }
        workers.push(spawn_worker(k as u32, &ncpu, move || {
            run_dut_worker(p, &c, &d, l, dw, cport, sport)
        })?);
    }
    join_workers(workers, &live, &lives, "worker")
}

/// The DUT's MAC on one port's link over IPv6: `(our address, the gateway given, the
/// other side's address)`; without a gateway, the other side's address if on the link,
/// else the router a router advertisement names.
fn next_hop6<P: Port>(
    n: &mut squall_stack::Node<P>,
    (from, gw, peer): (Ipv6Address, Option<[u8; 16]>, Ipv6Address),
    timeout: Duration,
    ask: bool,
    shared: &SharedMac,
) -> Result<[u8; 6], String> {
    match gw {
        Some(g) => n.resolve6_shared(from, Ipv6Address(g), timeout, ask, shared),
        None => n
            .next_hop6_shared(from, Some(peer), timeout, ask, shared)
            .map_err(|e| format!("{e} (give the DUT's address with --client-gw / --server-gw)")),
    }
}

/// The ends of a redirect mesh of `n` workers (none for one worker).
fn mesh_ends(n: u32) -> Vec<Option<Redirect>> {
    if n > 1 {
        redirect::mesh(n, REDIRECT_DEPTH)
            .into_iter()
            .map(Some)
            .collect()
    } else {
        vec![None]
    }
}

/// One DUT worker: both nodes on its ports' queues.
fn run_dut_worker<C: Port, S: Port>(
    profile: Arc<Profile>,
    cfg: &RunConfig,
    dc: &DutConfig,
    live: Arc<Live>,
    dw: DutWorker,
    cport: C,
    sport: S,
) -> Result<RunResult, String> {
    let w = dw.w;
    let t = &profile.templates[0];
    let g = &profile.ip_gens[t.ip_gen as usize];
    let (client_ip, server_ip) = (g.clients.first, g.servers.first);
    let (ccaps, scaps) = (cport.caps(), sport.caps());
    let clock = w.clock;
    let cpu0 = thread_cpu_ns();
    let t0 = w.t0;
    let seed = cfg.seed.unwrap_or(profile.scheduler.seed);
    let salt = u64::from(w.index) << 40;
    let (ck, sk) = (
        host_secret(cfg, seed ^ 0xc11e ^ salt)?,
        host_secret(cfg, seed ^ 0x5e4e ^ salt)?,
    );
    let mut ccfg = tcp_config(&t.client, ccaps.mac, [0; 6], cfg.max_flows, ck);
    let mut scfg = tcp_config(&t.server, scaps.mac, [0; 6], cfg.max_flows, sk);
    // Segments must fit both links' MTU.
    let mtu = ccaps.mtu.min(scaps.mtu).saturating_sub(40).max(64);
    ccfg.opts.mss = ccfg.opts.mss.min(mtu);
    scfg.opts.mss = scfg.opts.mss.min(mtu);
    let mut sc =
        SchedConfig::from_profile(&profile, cfg.mult, Some(cfg.duration_ns), w.index, w.count);
    sc.start_ns = t0;
    sc.seed = seed;
    let cg = ClientGen::new(&profile, &sc)?;
    // Each worker's own random sequence (URL and header picks, random delays).
    let mut c = Side::new(
        profile.clone(),
        cport,
        ccfg,
        Some(cg),
        t0,
        seed ^ salt ^ 0x1,
    );
    let mut s = Side::new(profile.clone(), sport, scfg, None, t0, seed ^ salt ^ 0x2);
    c.node.set_vlan(cfg.vlan);
    s.node.set_vlan(cfg.vlan);
    c.gen.app.stall_ns = cfg.stall_ns;
    s.gen.app.stall_ns = cfg.stall_ns;
    // Each node answers ARP for its side's addresses from here on and learns the DUT's
    // MAC on its link (worker 0 asks; any worker may get the reply).
    let ask = w.index == 0;
    let (cmac, smac, cgw_name, sgw_name) = match t.ipv6 {
        None => {
            let cgw = dc.client_gw.map_or(server_ip, u32::from_be_bytes);
            let sgw = dc.server_gw.map_or(client_ip, u32::from_be_bytes);
            let cmac = c
                .node
                .resolve_shared(client_ip, cgw, dc.arp_timeout, ask, &w.next_hop)
                .map_err(|e| format!("client port {}: {e}", dc.client.ifname))?;
            let smac = s
                .node
                .resolve_shared(server_ip, sgw, dc.arp_timeout, ask, &dw.server_next_hop)
                .map_err(|e| format!("server port {}: {e}", dc.server.ifname))?;
            let name = |a: u32| std::net::Ipv4Addr::from(a).to_string();
            // A failover of the device to another MAC (gratuitous ARP) is followed.
            c.node.follow_next_hop(cgw);
            s.node.follow_next_hop(sgw);
            (cmac, smac, name(cgw), name(sgw))
        }
        // Template 0 over IPv6: its addresses under its high bits, neighbour discovery;
        // without a gateway, the other side's address if on the link, else the router a
        // router advertisement names.
        Some(m) => {
            let (c6, s6) = (m.client_addr(client_ip), m.server_addr(server_ip));
            let (cgw, sgw) = (Ipv6Address(s6), Ipv6Address(c6));
            let cmac = next_hop6(
                &mut c.node,
                (Ipv6Address(c6), dc.client_gw6, cgw),
                dc.arp_timeout,
                ask,
                &w.next_hop,
            )
            .map_err(|e| format!("client port {}: {e}", dc.client.ifname))?;
            let smac = next_hop6(
                &mut s.node,
                (Ipv6Address(s6), dc.server_gw6, sgw),
                dc.arp_timeout,
                ask,
                &dw.server_next_hop,
            )
            .map_err(|e| format!("server port {}: {e}", dc.server.ifname))?;
            let name =
                |gw: Option<[u8; 16]>, r: String| gw.map_or(r, |g| Ipv6Address(g).to_string());
            (
                cmac,
                smac,
                name(
                    dc.client_gw6,
                    crate::worker::router_name(&c.node.neigh6, cgw, cmac),
                ),
                name(
                    dc.server_gw6,
                    crate::worker::router_name(&s.node.neigh6, sgw, smac),
                ),
            )
        }
    };
    c.node.set_next_hop(cmac);
    s.node.set_next_hop(smac);
    if let Some(m) = t.ipv6 {
        // Learnt by neighbour discovery: a failover of the device (an advertisement with
        // Override, a router's) is followed, as ARP's is.
        let (c6, s6) = (m.client_addr(client_ip), m.server_addr(server_ip));
        let cgw = dc.client_gw6.unwrap_or(s6);
        let sgw = dc.server_gw6.unwrap_or(c6);
        c.node
            .follow_resolved_next_hop6(Some(Ipv6Address(cgw)), cmac);
        s.node
            .follow_resolved_next_hop6(Some(Ipv6Address(sgw)), smac);
    }
    if w.count > 1 {
        // A move of the device one worker's queue hears is followed by all.
        c.node.share_next_hop(w.next_hop.clone());
        s.node.share_next_hop(dw.server_next_hop.clone());
        c.node.udp.spread_ids(w.index, w.count);
        s.node.udp.spread_ids(w.index, w.count);
    }
    if ask {
        c.node.announce(clock.now_ns());
        s.node.announce(clock.now_ns());
        // Worker 0 watches the device's reachability on both links (the others follow
        // its moves).
        let now = clock.now_ns();
        let v6 = t
            .ipv6
            .map(|m| (m.client_addr(client_ip), m.server_addr(server_ip)));
        let (cr, sr) = (dc.client.reachable, dc.server.reachable);
        let v6c = v6.map(|a| Ipv6Address(a.0));
        let v6s = v6.map(|a| Ipv6Address(a.1));
        c.node
            .probe_next_hop(now, cr.as_nanos() as u64, Some(client_ip), v6c);
        s.node
            .probe_next_hop(now, sr.as_nanos() as u64, Some(server_ip), v6s);
    }
    if let Some(r) = w.redirect {
        c.node.set_redirect(r);
    }
    if let Some(r) = dw.server_redirect {
        s.node.set_redirect(r);
    }
    c.gen.pace = Some(256);
    // Flow tracing: the capture is the client port's wire (what the client side sent
    // and what reached it back through the DUT); the server side's timelines follow the
    // client's flows by their 4-tuple (not through a NAT).
    let mut tap = match &cfg.trace {
        Some(spec) => Some(TraceRig::install_sides(
            spec,
            &profile,
            Some(&mut c),
            Some(&mut s),
            true,
        )?),
        None => None,
    };
    let mut hard = t0 + cfg.duration_ns + cfg.drain_ns;
    let mut ctl_seen = crate::run::CtlSeen::default();
    let mut last_pub = 0u64;
    let mut idle = IdleYield::default();
    let mut done_marked = false;
    crate::run::wait_until(&clock, t0);
    // Idle polling is not work: the core's load counts turns that did some.
    let (mut load, mut now) = crate::run::Busy::start(&clock);
    loop {
        // A stop (Ctrl-C, `q`): no new flows; the drain runs from the request.
        hard = live
            .ctl
            .apply(&mut ctl_seen, &mut c, now, hard, cfg.drain_ns);
        let busy = c.iterate(now, tap.as_mut()) | s.iterate(now, None);
        if !done_marked && c.is_idle() && s.is_idle() {
            done_marked = true;
            w.finished.fetch_add(1, Ordering::AcqRel);
        }
        // Done, and so are the others: nothing can be redirected here any more.
        if done_marked && w.finished.load(Ordering::Acquire) >= w.count {
            break;
        }
        if now >= hard {
            c.cut_all(now, tap.as_mut());
            s.cut_all(now, None);
            // Let each side see the other's RSTs (the flows are gone either way).
            for _ in 0..100 {
                s.iterate(clock.now_ns(), None);
                c.iterate(clock.now_ns(), tap.as_mut());
                std::thread::sleep(Duration::from_micros(100));
            }
            break;
        }
        if now.saturating_sub(last_pub) >= 10_000_000 {
            last_pub = now;
            publish_client(&live, &c);
            publish_server(&live, &s);
            live.busy_ns.store(load.busy_ns, Ordering::Relaxed);
            live.loop_ns.store(load.all_ns, Ordering::Relaxed);
            // Side reports when the time series asks (latency, errors by kind).
            let cpu = thread_cpu_ns().saturating_sub(cpu0);
            let ctl = &live.ctl;
            ctl.publish_with(&ctl.client, now, |g| *g = Some(side_report(&c, cpu)));
            ctl.publish_with(&ctl.server, now, |g| *g = Some(side_report(&s, cpu)));
        }
        // The turn ends here: its clock reading starts the next (a sleep is no turn).
        now = idle.end_turn(
            &mut load,
            &clock,
            now,
            busy,
            c.node.tx_waiting() + s.node.tx_waiting(),
        );
    }
    if !done_marked {
        w.finished.fetch_add(1, Ordering::AcqRel);
    }
    publish_client(&live, &c);
    publish_server(&live, &s);
    live.done.store(true, Ordering::Relaxed);
    c.release_frames();
    s.release_frames();
    let trace =
        tap.map(|p| TraceRig::finish_sides(p, &profile, w.index, Some(&mut c), Some(&mut s)));
    let cpu = thread_cpu_ns().saturating_sub(cpu0);
    let who = if w.count > 1 {
        format!(
            "worker {}/{} (flows opened {}, accepted {}): ",
            w.index,
            w.count,
            c.gen.app.stats.total().started,
            s.gen.app.stats.total().accepted
        )
    } else {
        String::new()
    };
    eprintln!(
        "squall: {who}client port {} -> DUT {} ({}), server port {} -> DUT {} ({}); ARP \
         answered {} / {}; redirected in {} / {}{}",
        dc.client.label(),
        cgw_name,
        crate::iface::fmt_mac(cmac),
        dc.server.label(),
        sgw_name,
        crate::iface::fmt_mac(smac),
        c.node.neigh.stats.requests_answered,
        s.node.neigh.stats.requests_answered,
        c.node.counters.rx_redirected,
        s.node.counters.rx_redirected,
        [
            ("client", crate::worker::moves_note(&c.node)),
            ("server", crate::worker::moves_note(&s.node)),
        ]
        .iter()
        .filter(|(_, m)| !m.is_empty())
        .map(|(side, m)| format!("; {side} port: {}", &m[2..]))
        .collect::<String>(),
    );
    Ok(RunResult {
        client: side_report(&c, cpu),
        server: side_report(&s, cpu),
        elapsed_ns: now.saturating_sub(t0),
        gen_ns: c.gen.generation_ns(t0, cfg.duration_ns),
        cpu_ns: cpu,
        busy_cpu_ns: cpu,
        sleep_cpu_ns: load.sleep_cpu_ns,
        pcap: None,
        trace,
        stall_ns: cfg.stall_ns,
        wire_unimpaired: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_rules() {
        assert!(parse(None, None, None, None).unwrap().is_none());
        assert!(parse(Some("afpacket:a"), None, None, None).is_err());
        assert!(parse(None, Some("afpacket:b"), None, None).is_err());
        assert!(parse(None, None, Some("198.18.0.1"), None).is_err());
        let e = parse(Some("afpacket:a"), Some("afpacket:a"), None, None).unwrap_err();
        assert!(e.contains("two ports"), "{e}");
        let e = parse(Some("mem"), Some("afpacket:b"), None, None).unwrap_err();
        assert!(e.contains("--client-iface"), "{e}");
        let e = parse(Some("afpacket:a"), Some("afpacket:b"), Some("x"), None).unwrap_err();
        assert!(e.contains("--client-gw"), "{e}");
        let d = parse(
            Some("afpacket:sq-c0"),
            Some("afpacket:sq-s0,ring"),
            Some("198.18.0.1"),
            Some("198.19.0.1"),
        )
        .unwrap()
        .unwrap();
        assert_eq!(d.client.ifname, "sq-c0");
        assert_eq!(d.server.rx, squall_port::afpacket::RxMode::Blocks);
        assert_eq!(d.client_gw, Some([198, 18, 0, 1]));
        assert_eq!(d.server_gw, Some([198, 19, 0, 1]));
    }
}
