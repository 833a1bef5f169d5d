//! `squall serve`: the HTTP/1.1 server app of `squall-serve` on a Squall node, run on a
//! real port by the same port runner as `squall run` ([`crate::cores::with_ports`]):
//! loading the site, one server worker per queue (`--cores N`: each its own node, app,
//! counters and access-log buffer, flows reaching the wrong worker redirected to their
//! owner), the stop on SIGINT/SIGTERM reaching every worker, the summed counters; each
//! worker publishes its figures for the reporting thread ([`crate::servelive`]). It
//! listens on IPv4 and IPv6 addresses alike, and on both at once (dual stack: every
//! worker's node owns every listen address, answering ARP or neighbour discovery and
//! echo requests for it).

pub use squall_serve::{app, files, log, respond};

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use squall_engine::clock::thread_cpu_ns;
use squall_engine::{Clock, MonotonicClock};
use squall_port::Port;
use squall_stack::{Node, NodeConfig, Owned, Owned6, TapRef};
use squall_tcp::{FlowId, TcpConfig};
use squall_wire::Ipv6Address;

use crate::cores::{self, PortJob, Steering};
use crate::iface::{fmt_mac, IdleYield, RealConfig};
use crate::servelive::{Publisher, ServeLive};
use crate::shards::spawn_worker;
use crate::worker::Worker;
use app::{AppConfig, ServeApp, ServeStats};
use files::Files;
use respond::Route;

/// Everything `squall serve` was told.
#[derive(Clone, Debug)]
pub struct ServeConfig {
    /// Directory served.
    pub root: Option<PathBuf>,
    /// Addresses and ports listened on, IPv4 and/or IPv6 (the node owns the addresses;
    /// each port is open on its own address only).
    pub listen: Vec<SocketAddr>,
    /// The real port (mode server; an IPv4 `--peer-ip` in `iface.peer_ip`).
    pub iface: RealConfig,
    /// An IPv6 peer (or gateway) whose MAC is resolved by neighbour discovery
    /// (`--peer-ip` given an IPv6 address).
    pub peer_ip6: Option<Ipv6Address>,
    /// Fixed routes (checked before files).
    pub routes: Vec<Route>,
    /// Connection limit, timeouts, parser limits.
    pub app: AppConfig,
    /// Access log file (off when `None`).
    pub access_log: Option<PathBuf>,
    /// After a stop signal: how long in-flight answers may take before the rest is reset.
    pub drain: Duration,
    /// Stop by itself after this long (tests); `None`: until SIGINT/SIGTERM.
    pub duration: Option<Duration>,
    /// Fixed TCP secrets (reproducible ISNs; links you control only).
    pub fixed_keys: bool,
    /// Server workers, one per queue of the port and per core (`--cores N`).
    pub cores: u32,
    /// TCP initial congestion window, in segments (`--initcwnd`, 1 to 20, default 10).
    pub init_cwnd: u8,
    /// 802.1Q VLAN id of every frame (`--vlan`).
    pub vlan: Option<u16>,
    /// Flow tracing (`--trace`): connections to the listen port matching the filter.
    pub trace: Option<crate::flowtrace::TraceSpec>,
}

/// What a run of the server did (every worker's figures summed).
#[derive(Clone, Debug, Default)]
pub struct ServeReport {
    pub stats: ServeStats,
    /// Requests answered by each worker, in worker order.
    pub worker_requests: Vec<u64>,
    /// Frames a worker handed to the worker owning their flow (redirect mesh).
    pub redirected: u64,
    /// Connections reset at the end of the drain period.
    pub cut: u64,
    /// Thread CPU time, ns.
    pub cpu_ns: u64,
    /// The part of `cpu_ns` spent in loop turns that did work (idle polling and the
    /// CPU of idle sleeps left out, as `squall run`'s `busy_cpu_sec`): the benchmarks'
    /// server figure.
    pub busy_cpu_ns: u64,
    /// The part of `cpu_ns` the loops' idle sleeps cost.
    pub sleep_cpu_ns: u64,
    /// Access-log buffers lost (writer behind).
    pub log_dropped: u64,
    /// Each worker's closing line (its port's counters), printed by the caller once the
    /// live view is closed.
    pub notes: Vec<String>,
    /// ARP requests for a listen address answered.
    pub arp_answered: u64,
    /// ICMP echo requests answered.
    pub echo_answered: u64,
    /// IPv6 neighbour solicitations for a listen address answered.
    pub ns_answered: u64,
    /// ICMPv6 echo requests answered.
    pub echo6_answered: u64,
    /// IP fragments received for the listen addresses, and the datagrams they made whole.
    pub ip_fragments: u64,
    pub ip_reassembled: u64,
    /// The next hop's moves heard (announcements, answers to probes) and the probes sent
    /// to it (`--reachable-sec`).
    pub next_hop_moved: u64,
    pub next_hop_probes: u64,
    /// Times every unicast probe of the next hop went unanswered.
    pub next_hop_unreachable: u64,
    /// The traced connections (`--trace`).
    pub trace: Option<crate::flowtrace::TraceData>,
}

/// Loads the site and serves until `stop` is set (SIGINT/SIGTERM) or the duration ends,
/// then stops gracefully. Worker `k` publishes its figures into `live.workers[k]`
/// ([`ServeLive::new`]`(cfg.cores)`).
pub fn serve(
    cfg: &ServeConfig,
    stop: Arc<AtomicBool>,
    live: Arc<ServeLive>,
) -> Result<ServeReport, String> {
    let files = match &cfg.root {
        Some(r) => Files::load(r)?,
        None => Files {
            list: Vec::new(),
            by_path: Default::default(),
            bytes: 0,
        },
    };
    let (owned, owned6) = check_listen(cfg)?;
    eprintln!(
        "squall serve: {} files ({} bytes) and {} routes in memory, listening on {} over {}",
        files.list.len(),
        files.bytes,
        cfg.routes.len(),
        cfg.listen
            .iter()
            .map(|a| a.to_string())
            .collect::<Vec<_>>()
            .join(", "),
        cfg.iface.label()
    );
    let n = cfg.cores.max(1);
    cores::check_cores(n)?;
    if live.workers.len() < n as usize {
        return Err(format!(
            "{n} workers but {} publication slots (ServeLive::new(cores))",
            live.workers.len()
        ));
    }
    cores::with_ports(
        &cfg.iface,
        n,
        (owned.0, owned6.0),
        ServeJob {
            cfg,
            files: Arc::new(files),
            stop,
            live,
        },
    )
}

/// The addresses the server's nodes own, by family, from the listen addresses; refuses
/// what cannot work (no address, an unspecified one, a peer of a family not listened
/// on).
pub fn check_listen(cfg: &ServeConfig) -> Result<(Owned, Owned6), String> {
    let (mut v4, mut v6) = (Owned::default(), Owned6::default());
    if cfg.listen.is_empty() {
        return Err("squall serve needs --listen ADDR:PORT (or [ADDR6]:PORT)".into());
    }
    for a in &cfg.listen {
        if a.ip().is_unspecified() || a.ip().is_multicast() {
            return Err(format!(
                "--listen {a}: give the address Squall owns (not a wildcard or a group)"
            ));
        }
        if a.port() == 0 {
            return Err(format!(
                "--listen {a}: give the port to answer on (port 0 is not one a client can \
                 connect to)"
            ));
        }
        match a.ip() {
            IpAddr::V4(ip) => {
                let ip = u32::from(ip);
                if !v4.contains(ip) {
                    v4.add(ip, ip);
                }
            }
            IpAddr::V6(ip) => {
                let ip = u128::from(ip);
                if !v6.contains(ip) {
                    v6.add(ip, ip);
                }
            }
        }
    }
    if cfg.iface.peer_ip.is_some() && v4.0.is_empty() {
        return Err(
            "--peer-ip: an IPv4 peer is resolved by ARP from a listen address: add an IPv4 \
             --listen, or give the peer's IPv6 address or --peer-mac"
                .into(),
        );
    }
    if cfg.peer_ip6.is_some() && v6.0.is_empty() {
        return Err(
            "--peer-ip: an IPv6 peer is resolved by neighbour discovery from a listen \
             address: add an IPv6 --listen, or give the peer's IPv4 address or --peer-mac"
                .into(),
        );
    }
    Ok((v4, v6))
}

struct ServeJob<'a> {
    cfg: &'a ServeConfig,
    files: Arc<Files>,
    stop: Arc<AtomicBool>,
    live: Arc<ServeLive>,
}

impl PortJob for ServeJob<'_> {
    type Out = ServeReport;
    fn run<P: Port + Send + 'static>(
        self,
        ports: Vec<P>,
        steer: Steering,
        describe: fn(&P, &RealConfig) -> String,
    ) -> Result<ServeReport, String> {
        let n = ports.len() as u32;
        let clock = MonotonicClock::new();
        let t0 = clock.now_ns();
        if n == 1 {
            let port = ports.into_iter().next().ok_or("no port")?;
            let mut w = Worker::single();
            w.t0 = t0;
            return serve_on(
                port, self.cfg, self.files, &self.stop, &self.live, w, describe,
            );
        }
        let ncpu = squall_engine::affinity::available_cores();
        let mut handles = Vec::with_capacity(n as usize);
        for ((k, port), w) in ports
            .into_iter()
            .enumerate()
            .zip(cores::crew(n, &steer, clock, t0))
        {
            let (cfg, files, stop) = (self.cfg.clone(), self.files.clone(), self.stop.clone());
            let live = self.live.clone();
            handles.push(spawn_worker(k as u32, &ncpu, move || {
                let r = serve_on(port, &cfg, files, &stop, &live, w, describe);
                if r.is_err() {
                    // A failed worker stops the others (they drain and end).
                    stop.store(true, Ordering::Relaxed);
                }
                r
            })?);
        }
        let mut total = ServeReport::default();
        let mut failed = Vec::new();
        for (k, h) in handles.into_iter().enumerate() {
            match h.join() {
                Err(_) => failed.push(format!("worker {k} panicked")),
                Ok(Err(e)) => failed.push(format!("worker {k}: {e}")),
                Ok(Ok(r)) => {
                    total.stats += r.stats;
                    total.worker_requests.extend(r.worker_requests);
                    total.redirected += r.redirected;
                    total.cut += r.cut;
                    total.cpu_ns += r.cpu_ns;
                    total.busy_cpu_ns += r.busy_cpu_ns;
                    total.sleep_cpu_ns += r.sleep_cpu_ns;
                    total.log_dropped += r.log_dropped;
                    total.notes.extend(r.notes);
                    total.arp_answered += r.arp_answered;
                    total.echo_answered += r.echo_answered;
                    total.ns_answered += r.ns_answered;
                    total.echo6_answered += r.echo6_answered;
                    total.ip_fragments += r.ip_fragments;
                    total.ip_reassembled += r.ip_reassembled;
                    total.next_hop_moved += r.next_hop_moved;
                    total.next_hop_probes += r.next_hop_probes;
                    total.next_hop_unreachable += r.next_hop_unreachable;
                    if let Some(t) = r.trace {
                        total.trace.get_or_insert_default().merge(t);
                    }
                }
            }
        }
        if failed.is_empty() {
            Ok(total)
        } else {
            Err(failed.join("; "))
        }
    }
}

/// One server worker on its queue `port`: its node (owning the listen address), its app
/// and access-log buffer; serves until `stop` or the duration, then drains. With several
/// workers it keeps taking frames redirected to it until every worker is done.
fn serve_on<P: Port>(
    mut port: P,
    cfg: &ServeConfig,
    files: Arc<Files>,
    stop: &AtomicBool,
    live: &ServeLive,
    mut w: Worker,
    describe: fn(&P, &RealConfig) -> String,
) -> Result<ServeReport, String> {
    let rc = &cfg.iface;
    // This worker counts as done from its drain's end, or from an early error.
    let mut done = Finished {
        count: &w.finished,
        marked: false,
    };
    let bound = port.bind_thread();
    let caps = port.caps();
    let clock = w.clock;
    let cpu0 = thread_cpu_ns();
    let (owned, owned6) = check_listen(cfg)?;
    // The connection limit is the whole server's: each worker takes its share.
    let mut acfg = cfg.app.clone();
    acfg.max_conns = acfg.max_conns.div_ceil(w.count).max(1);
    let mut tc = TcpConfig {
        mac: caps.mac,
        gateway_mac: rc.peer_mac.unwrap_or([0; 6]),
        // The limit answers 503 from the app; some room above it for those.
        max_flows: acfg.max_conns.saturating_add(acfg.max_conns / 8 + 64),
        seed: if cfg.fixed_keys {
            0x5157_4c4c_7365_7276 ^ (u64::from(w.index) << 40)
        } else {
            TcpConfig::random_seed().map_err(|e| format!("OS random source: {e}"))?
        },
        opts: server_opts(cfg.init_cwnd),
        ..TcpConfig::default()
    };
    tc.opts.mss = tc.opts.mss.min(caps.mtu.saturating_sub(40)).max(64);
    let ncfg = NodeConfig {
        owned,
        owned6,
        vlan: cfg.vlan,
        ..NodeConfig::default()
    };
    let mut node = Node::new(port, tc, ncfg, clock.now_ns());
    // Each worker its own buffer and writer, appending whole buffers of whole lines
    // (O_APPEND) to the one file.
    let log = cfg
        .access_log
        .as_deref()
        .map(log::AccessLog::open)
        .transpose()?;
    let mut app = ServeApp::new(acfg, files, &cfg.routes, &mut node.tcp, log);
    // Worker 0 asks for the peer unless told; every worker learns the reply from
    // whichever queue it reaches.
    let (from4, from6) = (
        node.neigh.owned().firsts().next(),
        node.neigh6.owned().firsts().next(),
    );
    let peer_mac = match (rc.peer_mac, rc.peer_ip, cfg.peer_ip6, from4, from6) {
        (Some(m), ..) => m,
        (None, Some(p), _, Some(from), _) => node
            .resolve_shared(
                from,
                u32::from_be_bytes(p),
                rc.arp_timeout,
                w.index == 0,
                &w.next_hop,
            )
            .map_err(|e| format!("{}: {e}", rc.ifname))?,
        (None, None, Some(p), _, Some(from)) => node
            .resolve6_shared(
                Ipv6Address::from_u128(from),
                p,
                rc.arp_timeout,
                w.index == 0,
                &w.next_hop,
            )
            .map_err(|e| format!("{}: {e}", rc.ifname))?,
        // Listening on IPv6 with no peer given: the router a router advertisement names
        // (solicited), the next hop of both families.
        (None, None, None, _, Some(from)) => node
            .next_hop6_shared(
                Ipv6Address::from_u128(from),
                None,
                rc.arp_timeout,
                w.index == 0,
                &w.next_hop,
            )
            .map_err(|e| format!("{}: {e}: {NEEDS_PEER}", rc.ifname))?,
        _ => return Err(NEEDS_PEER.into()),
    };
    node.set_next_hop(peer_mac);
    if let (None, Some(p), Some(_)) = (rc.peer_mac, rc.peer_ip, from4) {
        // Resolved by ARP: a failover to another MAC (gratuitous ARP) is followed.
        node.follow_next_hop(u32::from_be_bytes(p));
    } else if rc.peer_mac.is_none() && rc.peer_ip.is_none() && from6.is_some() {
        // By neighbour discovery (the peer, or the router): the same for an
        // advertisement with Override.
        node.follow_resolved_next_hop6(cfg.peer_ip6, peer_mac);
    }
    if w.count > 1 {
        // A move one worker's queue hears is followed by all.
        node.share_next_hop(w.next_hop.clone());
        node.udp.spread_ids(w.index, w.count);
    }
    if w.index == 0 {
        node.announce(clock.now_ns());
        // Worker 0 watches the next hop's reachability (the others follow its moves).
        let reachable = rc.reachable.as_nanos() as u64;
        node.probe_next_hop(
            clock.now_ns(),
            reachable,
            from4,
            from6.map(Ipv6Address::from_u128),
        );
    }
    let r = w.redirect.take();
    crate::worker::attach_redirect(r, w.rss.as_ref(), true, &mut node);
    let mut ports: Vec<u16> = cfg.listen.iter().map(|a| a.port()).collect();
    ports.sort_unstable();
    ports.dedup();
    // Each port on its own addresses only, as sockets bound to them.
    for a in &cfg.listen {
        node.tcp.listen_at(a.ip(), a.port());
    }
    // Flow tracing: this worker's tracer chooses connections at their SYN.
    let mut tap = cfg.trace.as_ref().map(|spec| {
        let (t, pcap) = crate::flowtrace::passive(spec, ports.clone());
        node.tcp.set_tracer(Some(t));
        pcap
    });
    let end = cfg.duration.map(|d| w.t0 + d.as_nanos() as u64);
    let mut idle = IdleYield::default();
    let slot = &live.workers[w.index as usize];
    let mut publisher = Publisher::default();
    let mut drain_until: Option<u64> = None;
    let (mut busy, mut now) = crate::run::Busy::start(&clock);
    loop {
        let worked = node.turn(now, &mut app, tap.as_mut().map(|p| p as TapRef));
        publisher.turn(now, worked, slot, &app, &node);
        if drain_until.is_none() && (stop.load(Ordering::Relaxed) || end.is_some_and(|e| now >= e))
        {
            // New connections are refused (RST) from here; idle ones close, the others
            // after their answer.
            for &p in &ports {
                node.tcp.unlisten(p);
            }
            app.stop();
            drain_until = Some(now + cfg.drain.as_nanos() as u64);
        }
        if let Some(d) = drain_until {
            if node.tcp.flow_count() == 0 {
                done.mark();
            }
            // Done, and so are the others: nothing can be redirected here any more.
            if (done.marked && w.finished.load(Ordering::Acquire) >= w.count) || now >= d {
                break;
            }
        }
        // The turn ends here: its clock reading starts the next (a sleep is no turn).
        now = idle.end_turn(&mut busy, &clock, now, worked, node.tx_waiting());
    }
    done.mark();
    let busy_cpu = busy.busy_cpu();
    let mut cut = 0;
    if node.tcp.flow_count() > 0 {
        {
            let mut io = node.io(now, tap.as_mut().map(|p| p as TapRef));
            for i in 0..app.slots() {
                if app.is_open(i) {
                    io.abort(&mut app, FlowId(i as u32));
                    cut += 1;
                }
            }
        }
        node.flush();
    }
    publisher.publish_final(slot, &app, &node);
    node.release_frames();
    let trace = tap.map(|p| crate::flowtrace::passive_data(p, &mut node.tcp, w.index));
    app.finish()?;
    let cpu = thread_cpu_ns().saturating_sub(cpu0);
    let redirect = node.redirect_stats();
    let who = if w.count > 1 {
        format!(
            "worker {}/{} (connections {}, requests {}): ",
            w.index, w.count, app.stats.accepted, app.stats.requests
        )
    } else {
        String::new()
    };
    let note = format!(
        "squall serve: {who}{} peer {}: ARP requests answered {}, ICMP echo answered {}, \
         neighbour solicitations answered {}, ICMPv6 echo answered {}{}{}",
        describe(&node.port, rc),
        fmt_mac(peer_mac),
        node.neigh.stats.requests_answered,
        node.icmp.echo_answered,
        node.neigh6.stats.ns_answered,
        node.icmp6.echo_answered,
        crate::worker::icmp_errors_note(node.icmp.errors_to_tcp + node.icmp6.errors_to_tcp)
            + &crate::worker::unreachables_note(&node)
            + &crate::worker::fragments_note(&node)
            + &crate::worker::moves_note(&node),
        match redirect {
            Some(r) => format!(
                "; redirect: handed to other workers {}, taken in {}, dropped {}",
                r.handed(),
                r.taken(),
                r.dropped()
            ),
            None => String::new(),
        }
    );
    Ok(ServeReport {
        stats: app.stats,
        worker_requests: vec![app.stats.requests],
        redirected: redirect.map_or(0, |r| r.sent),
        cut,
        cpu_ns: cpu,
        busy_cpu_ns: busy_cpu,
        sleep_cpu_ns: busy.sleep_cpu_ns,
        log_dropped: app.log_dropped(),
        notes: std::iter::once(note).chain(bound.err()).collect(),
        arp_answered: node.neigh.stats.requests_answered,
        echo_answered: node.icmp.echo_answered,
        ns_answered: node.neigh6.stats.ns_answered,
        echo6_answered: node.icmp6.echo_answered,
        ip_fragments: node.reasm.stats.fragments,
        ip_reassembled: node.reasm.stats.reassembled,
        next_hop_moved: node.next_hop_moves(),
        next_hop_probes: node.nud_stats().map_or(0, |n| n.probes()),
        next_hop_unreachable: node.nud_stats().map_or(0, |n| n.unreachable),
        trace,
    })
}

/// Counts its worker among the finished ones once: at [`Finished::mark`] or on drop (an
/// error return), so that the other workers never wait for a failed one.
struct Finished<'a> {
    count: &'a AtomicU32,
    marked: bool,
}

impl Finished<'_> {
    fn mark(&mut self) {
        if !self.marked {
            self.marked = true;
            self.count.fetch_add(1, Ordering::AcqRel);
        }
    }
}

impl Drop for Finished<'_> {
    fn drop(&mut self) {
        self.mark();
    }
}

/// What `squall serve` says when it cannot find its next hop.
const NEEDS_PEER: &str = "squall serve needs the peer's (or gateway's) address: --peer-ip IP \
     (IPv4 or IPv6, of a family it listens on) or --peer-mac MAC";

/// The TCP options of `squall serve`'s connections: what a Linux server offers a client
/// (nginx's peers see the same): an initial window of 10 segments (RFC 6928; `init_cwnd`,
/// `--initcwnd`, as Linux's `ip route ... initcwnd`), SACK
/// (RFC 2018), and RFC 7323 timestamps and window scaling (shift 0: the 64 KiB receive
/// window is ample for requests, and offering the option lets the client scale its own
/// window, as it would with a kernel server).
fn server_opts(init_cwnd: u8) -> squall_tcp::FlowOpts {
    squall_tcp::FlowOpts {
        init_cwnd,
        wscale: Some(0),
        timestamps: true,
        sack: true,
        ..squall_tcp::FlowOpts::default()
    }
}
