//! One worker of a run on a real port: its node (TCP host, flow table, timers, counters)
//! and its generator side over one queue of the port (an AF_PACKET fanout member, an
//! AF_XDP socket on one queue, a DPDK rx/tx queue pair). [`run_on`] resolves the next hop
//! (together with the other workers of the port: the ARP reply may reach any queue),
//! opens this worker's share of the client flows (`1/N` of the rate, source ports
//! `port % N == index`, and with RSS only ports whose reply hashes to its own queue) or
//! answers the flows that reach it, and runs the loop until its side is idle and every
//! other worker's is too (a worker keeps taking frames redirected to it until then).
//! It publishes its live figures every 10 ms and, when the time series asks, its side
//! report (latency, errors by kind) as the memory-wire workers do.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use squall_astf::sched::SchedConfig;
use squall_astf::Profile;
use squall_engine::clock::thread_cpu_ns;
use squall_engine::{Clock, MonotonicClock};
use squall_port::rss::RssSteer;
use squall_port::Port;
use squall_stack::{Redirect, SharedMac};
use squall_wire::Ipv6Address;

use crate::flowtrace::TraceRig;
use crate::gen::{tcp_config, ClientGen, Side};
use crate::iface::{fmt_mac, side_report, IdleYield, Mode, RealConfig};
use crate::run::{Live, RunConfig, RunResult, SideReport, Snapshot};

/// What a worker gets besides its port: its place among the port's workers and what it
/// shares with them (the start instant, the next hop's MAC, the count of finished ones).
pub(crate) struct Worker {
    /// This worker's index (its queue of the port) and the number of workers.
    pub index: u32,
    pub count: u32,
    /// One clock (one origin) for every worker of the run.
    pub clock: MonotonicClock,
    /// When the generators start.
    pub t0: u64,
    /// The next hop's MAC as resolved by whichever worker got the ARP reply.
    pub next_hop: Arc<SharedMac>,
    /// Workers whose side is done (a worker ends once all are).
    pub finished: Arc<AtomicU32>,
    /// This worker's ends of the redirect mesh (frames of other workers' flows).
    pub redirect: Option<Redirect>,
    /// RSS of the device: client source ports whose reply hashes to this worker's queue.
    pub rss: Option<RssSteer>,
}

impl Worker {
    /// The only worker of a port.
    pub(crate) fn single() -> Worker {
        let clock = MonotonicClock::new();
        Worker {
            index: 0,
            count: 1,
            t0: clock.now_ns() + crate::run::START_LEAD_NS,
            clock,
            next_hop: Arc::default(),
            finished: Arc::default(),
            redirect: None,
            rss: None,
        }
    }
}

/// Gives `node` a worker's ends `r` of the redirect mesh, if any: on a `server` on RSS
/// (`rss`: the device keeps each flow on its queue) for reassembled datagrams only.
pub(crate) fn attach_redirect<P: squall_port::Port>(
    r: Option<Redirect>,
    rss: Option<&RssSteer>,
    server: bool,
    node: &mut squall_stack::Node<P>,
) {
    let Some(r) = r else {
        return;
    };
    match rss.filter(|_| server) {
        Some(steer) => node.set_rss_redirect(r, steer.clone()),
        None => node.set_redirect(r),
    }
}

/// Default address to resolve: the first server (client mode) or client (server mode)
/// address of template 0's pool; and our own address used as ARP sender.
fn addresses(p: &Profile, mode: Mode) -> ([u8; 4], [u8; 4]) {
    let g = &p.ip_gens[p.templates[0].ip_gen as usize];
    let (mine, peer) = if mode == Mode::Server {
        (g.servers.first, g.clients.first)
    } else {
        (g.clients.first, g.servers.first)
    };
    (mine.to_be_bytes(), peer.to_be_bytes())
}

/// As [`addresses`] when template 0 runs over IPv6 (pool values under its high bits).
fn addresses6(p: &Profile, mode: Mode) -> Option<([u8; 16], [u8; 16])> {
    let t = &p.templates[0];
    let m = t.ipv6?;
    let g = &p.ip_gens[t.ip_gen as usize];
    let (c, s) = (
        m.client_addr(g.clients.first),
        m.server_addr(g.servers.first),
    );
    Some(if mode == Mode::Server { (s, c) } else { (c, s) })
}

fn publish<P: Port>(live: &Live, s: &Side<P>, mode: Mode) {
    crate::run::publish_client(live, s);
    if mode == Mode::Server {
        let accepted = s.gen.app.stats.total().accepted;
        live.started.store(accepted, Ordering::Relaxed);
    }
}

/// This worker's slot of side reports (the side it plays) and the other side's, which
/// stays an empty report: the time series reads a pair.
fn snapshot_slots(live: &Live, mode: Mode) -> (&Snapshot, &Snapshot) {
    let c = &live.ctl;
    if mode == Mode::Server {
        (&c.server, &c.client)
    } else {
        (&c.client, &c.server)
    }
}

/// Publishes this worker's side report when the time series asks (latency and errors
/// by kind of the `series`, the metrics, the live view), with `try_lock` only.
fn publish_snapshot<P: Port>(live: &Live, s: &Side<P>, mode: Mode, cpu0: u64, now: u64) {
    let (mine, _) = snapshot_slots(live, mode);
    live.ctl.publish_with(mine, now, |g| {
        *g = Some(side_report(s, thread_cpu_ns().saturating_sub(cpu0)));
    });
}

/// The run of one worker on its open port; `describe` gives the port's own part of the
/// worker's final report line.
pub(crate) fn run_on<P: Port>(
    mut port: P,
    profile: Arc<Profile>,
    cfg: &RunConfig,
    rc: &RealConfig,
    live: Arc<Live>,
    w: Worker,
    describe: fn(&P, &RealConfig) -> String,
) -> Result<RunResult, String> {
    if let Err(e) = port.bind_thread() {
        eprintln!("squall: warning: {e}");
    }
    let caps = port.caps();
    let (mine, peer_default) = addresses(&profile, rc.mode);
    let peer_ip = rc.peer_ip.unwrap_or(peer_default);
    let clock = w.clock;
    let cpu0 = thread_cpu_ns();
    let t0 = w.t0;
    let seed = cfg.seed.unwrap_or(profile.scheduler.seed);
    let t = &profile.templates[0];
    let tun = if rc.mode == Mode::Server {
        &t.server
    } else {
        &t.client
    };
    let mut tc = tcp_config(
        tun,
        caps.mac,
        rc.peer_mac.unwrap_or([0; 6]),
        cfg.max_flows,
        crate::run::host_secret(cfg, seed ^ 0xaf9 ^ (u64::from(w.index) << 40))?,
    );
    // Segments must fit the interface's MTU.
    tc.opts.mss = tc.opts.mss.min(caps.mtu.saturating_sub(40)).max(64);
    let cg = if rc.mode == Mode::Client {
        let mut sc =
            SchedConfig::from_profile(&profile, cfg.mult, Some(cfg.duration_ns), w.index, w.count);
        sc.start_ns = t0;
        sc.seed = seed;
        let mut cg = ClientGen::new(&profile, &sc)?;
        if let Some(steer) = w.rss.clone() {
            cg.set_rss(steer, w.index);
        }
        Some(cg)
    } else {
        None
    };
    // Each worker's own random sequence (URL and header picks, random delays), as the
    // memory wire's shards have.
    let salt = u64::from(w.index) << 40;
    let mut s = Side::new(profile.clone(), port, tc, cg, t0, seed ^ salt ^ 0x1);
    s.node.set_vlan(cfg.vlan);
    s.gen.app.stall_ns = cfg.stall_ns;
    // The node answers ARP for its pools from here on; worker 0 asks for the peer unless
    // told, every worker learns the reply from whichever queue it reaches.
    // Over IPv6 (template 0's family, or an IPv6 --peer-ip) neighbour discovery finds it;
    // without --peer-ip, the peer itself if on the link, else the router that a router
    // advertisement names.
    let v6 = addresses6(&profile, rc.mode)
        .filter(|_| rc.peer_ip.is_none())
        .map(|(m, p)| (m, rc.peer_ip6.unwrap_or(p)));
    let peer_mac = match (rc.peer_mac, v6) {
        (Some(m), _) => m,
        (None, Some((mine6, peer6))) if rc.peer_ip6.is_some() => s
            .node
            .resolve6_shared(
                Ipv6Address(mine6),
                Ipv6Address(peer6),
                rc.arp_timeout,
                w.index == 0,
                &w.next_hop,
            )
            .map_err(|e| format!("{}: {e}", rc.ifname))?,
        (None, Some((mine6, peer6))) => s
            .node
            .next_hop6_shared(
                Ipv6Address(mine6),
                Some(Ipv6Address(peer6)),
                rc.arp_timeout,
                w.index == 0,
                &w.next_hop,
            )
            .map_err(|e| {
                format!(
                    "{}: {e} (give the gateway with --peer-ip IPV6, or --peer-mac MAC)",
                    rc.ifname
                )
            })?,
        (None, None) => s
            .node
            .resolve_shared(
                u32::from_be_bytes(mine),
                u32::from_be_bytes(peer_ip),
                rc.arp_timeout,
                w.index == 0,
                &w.next_hop,
            )
            .map_err(|e| format!("{}: {e}", rc.ifname))?,
    };
    let peer_name = match v6 {
        Some((_, p)) => router_name(&s.node.neigh6, Ipv6Address(p), peer_mac),
        None => std::net::Ipv4Addr::from(peer_ip).to_string(),
    };
    s.node.set_next_hop(peer_mac);
    match v6 {
        // Resolved by ARP: a failover to another MAC (gratuitous ARP) is followed.
        None if rc.peer_mac.is_none() => s.node.follow_next_hop(u32::from_be_bytes(peer_ip)),
        // By neighbour discovery: the same for an advertisement with Override.
        Some((_, p)) if rc.peer_mac.is_none() => s
            .node
            .follow_resolved_next_hop6(Some(Ipv6Address(p)), peer_mac),
        _ => {}
    }
    if w.count > 1 {
        // A move one worker's queue hears is followed by all.
        s.node.share_next_hop(w.next_hop.clone());
        s.node.udp.spread_ids(w.index, w.count);
    }
    if w.index == 0 {
        s.node.announce(clock.now_ns());
        // Worker 0 watches the next hop's reachability (the others follow its moves).
        s.node.probe_next_hop(
            clock.now_ns(),
            rc.reachable.as_nanos() as u64,
            Some(u32::from_be_bytes(mine)),
            v6.map(|(m, _)| Ipv6Address(m)),
        );
    }
    let server = rc.mode == Mode::Server;
    attach_redirect(w.redirect, w.rss.as_ref(), server, &mut s.node);
    if rc.mode == Mode::Client {
        s.gen.pace = Some(256);
    }
    // Flow tracing: the tap records received frames too (the peer's are not ours).
    let mut tap = match &cfg.trace {
        None => None,
        Some(spec) if rc.mode == Mode::Client => {
            Some(TraceRig::install(spec, &profile, Some(&mut s), None, true)?)
        }
        Some(spec) => Some(TraceRig::install(spec, &profile, None, Some(&mut s), true)?),
    };
    let mut stop = t0 + cfg.duration_ns;
    let mut hard = stop + cfg.drain_ns;
    let mut ctl_seen = crate::run::CtlSeen::default();
    let mut last_pub = 0u64;
    let mut idle = IdleYield::default();
    let mut done_marked = false;
    if live.ctl.snapshots.load(Ordering::Relaxed) {
        let (_, other) = snapshot_slots(&live, rc.mode);
        if let Ok(mut g) = other.report.lock() {
            *g = Some(SideReport {
                app: crate::stats::SideStats::new(profile.tg_names.len()),
                ..SideReport::default()
            });
        }
    }
    crate::run::wait_until(&clock, t0);
    // Idle polling is not work: the busy figure counts iterations that did some.
    let (mut busy, mut now) = crate::run::Busy::start(&clock);
    loop {
        // A stop (Ctrl-C, `q`, the daemon): a client opens no more flows; a server ends
        // when idle from then on; the drain runs from the request.
        hard = live
            .ctl
            .apply(&mut ctl_seen, &mut s, now, hard, cfg.drain_ns);
        if let Some(at) = ctl_seen.stopped_at {
            stop = stop.min(at);
        }
        let worked = s.iterate(now, tap.as_mut());
        let done = if rc.mode == Mode::Client {
            s.is_idle()
        } else {
            now >= stop && s.is_idle()
        };
        if done && !done_marked {
            done_marked = true;
            w.finished.fetch_add(1, Ordering::AcqRel);
        }
        // Done, and so are the others: nothing can be redirected here any more.
        if done_marked && w.finished.load(Ordering::Acquire) >= w.count {
            break;
        }
        if now >= hard {
            if s.gen.app.live > 0 {
                s.cut_all(now, tap.as_mut());
            }
            break;
        }
        if now.saturating_sub(last_pub) >= 10_000_000 {
            last_pub = now;
            publish(&live, &s, rc.mode);
            live.busy_ns.store(busy.busy_ns, Ordering::Relaxed);
            live.loop_ns.store(busy.all_ns, Ordering::Relaxed);
            publish_snapshot(&live, &s, rc.mode, cpu0, now);
        }
        // The turn ends here: its clock reading starts the next (a sleep is no turn).
        now = idle.end_turn(&mut busy, &clock, now, worked, s.node.tx_waiting());
    }
    let busy_cpu = busy.busy_cpu();
    if !done_marked {
        w.finished.fetch_add(1, Ordering::AcqRel);
    }
    publish(&live, &s, rc.mode);
    live.busy_ns.store(busy.busy_ns, Ordering::Relaxed);
    live.loop_ns.store(busy.all_ns, Ordering::Relaxed);
    live.done.store(true, Ordering::Relaxed);
    s.release_frames();
    let cpu = thread_cpu_ns().saturating_sub(cpu0);
    let a = s.node.neigh.stats;
    let n = s.node.counters;
    let who = if w.count > 1 {
        let t = s.gen.app.stats.total();
        format!(
            "worker {}/{} (flows opened {}, completed {}): ",
            w.index,
            w.count,
            t.started + t.accepted,
            t.completed
        )
    } else {
        String::new()
    };
    eprintln!(
        "squall: {who}{} mac {} peer {} at {}: ARP requests answered {}, ARP ignored {}, \
         ICMP echo requests answered {}{}, unrelated frames dropped {}{}",
        describe(&s.node.port, rc),
        fmt_mac(caps.mac),
        peer_name,
        fmt_mac(peer_mac),
        a.requests_answered,
        a.ignored,
        s.node.icmp.echo_answered,
        icmp_errors_note(s.node.icmp.errors_to_tcp + s.node.icmp6.errors_to_tcp)
            + &unreachables_note(&s.node)
            + &fragments_note(&s.node)
            + &moves_note(&s.node),
        n.rx_not_ours + n.rx_other_ip + n.rx_other_ether + n.rx_bad,
        match s.node.redirect_stats() {
            Some(r) => format!(
                "; redirect: handed to other workers {}, taken in {}, dropped {}",
                r.handed(),
                r.taken(),
                r.dropped()
            ),
            None => String::new(),
        }
    );
    let trace = tap.map(|p| {
        if rc.mode == Mode::Client {
            TraceRig::finish(p, &profile, w.index, Some(&mut s), None)
        } else {
            TraceRig::finish(p, &profile, w.index, None, Some(&mut s))
        }
    });
    let rep = side_report(&s, cpu);
    let (client, server) = if rc.mode == Mode::Server {
        (SideReport::default(), rep)
    } else {
        (rep, SideReport::default())
    };
    Ok(RunResult {
        client,
        server,
        elapsed_ns: now.saturating_sub(t0),
        // A stop ends the generation of a server side too (it has no schedule of its own).
        gen_ns: ctl_seen
            .stopped_at
            .map_or(u64::MAX, |at| at.saturating_sub(t0))
            .min(s.gen.generation_ns(t0, cfg.duration_ns)),
        stall_ns: cfg.stall_ns,
        cpu_ns: cpu,
        busy_cpu_ns: busy_cpu,
        sleep_cpu_ns: busy.sleep_cpu_ns,
        pcap: None,
        trace,
        wire_unimpaired: false,
    })
}

/// The worker line's note of ICMP errors handed to the TCP host (path MTU, unreachable
/// destinations), when there were any.
pub(crate) fn icmp_errors_note(n: u64) -> String {
    if n == 0 {
        String::new()
    } else {
        format!(", ICMP errors about TCP segments {n} (see the tcps_icmp_* counters)")
    }
}

/// The node's port unreachables (UDP datagrams to a closed port), for a port's line:
/// empty when there were none.
pub(crate) fn unreachables_note(n: &squall_stack::Node<impl squall_port::Port>) -> String {
    let (sent, held) = (
        n.icmp.unreach_sent + n.icmp6.unreach_sent,
        n.icmp.unreach_suppressed + n.icmp6.unreach_suppressed,
    );
    match (sent, held) {
        (0, 0) => String::new(),
        (s, 0) => format!(", port unreachables sent {s}"),
        (s, h) => format!(", port unreachables sent {s} (and {h} not: rate limit or not unicast)"),
    }
}

/// The moves of the node's next hop (a failover's announcement, or the answer to a
/// probe), heard here or followed from another worker, and the probes of it where it went
/// unconfirmed, for a port's line: empty when there were none.
pub(crate) fn moves_note(n: &squall_stack::Node<impl squall_port::Port>) -> String {
    let heard = n.next_hop_moves();
    let followed = n.counters.next_hop_followed;
    let probed = match n.nud_stats() {
        Some(p) if p.unicast_probes > 0 => format!(
            ", next hop probed {} (unanswered at its MAC {}, looked for by broadcast {})",
            p.probes(),
            p.unreachable,
            p.broadcast_probes
        ),
        _ => String::new(),
    };
    if heard + followed == 0 {
        return probed;
    }
    format!(
        ", next hop moved {heard} (followed from another worker {followed}; now {}){probed}",
        crate::iface::fmt_mac(n.next_hop())
    )
}

/// The node's IP fragments and what became of them, and the UDP datagrams it sent in
/// fragments, for a port's line: empty when there were none.
pub(crate) fn fragments_note(n: &squall_stack::Node<impl squall_port::Port>) -> String {
    let u = n.udp.stats;
    let sent = if u.tx_fragmented > 0 {
        format!(
            ", UDP datagrams sent in fragments {} ({} fragments)",
            u.tx_fragmented, u.tx_fragments
        )
    } else {
        String::new()
    };
    let r = n.reasm.stats;
    if r.fragments == 0 {
        return sent;
    }
    let mut s = format!(
        ", IP fragments {} (datagrams reassembled {}",
        r.fragments, r.reassembled
    );
    for (what, k) in [
        ("timed out", r.timed_out),
        ("dropped for overlaps", r.overlaps),
        ("malformed", r.malformed),
        ("no room", r.no_room),
        ("duplicates", r.duplicates),
    ] {
        if k > 0 {
            s.push_str(&format!(", {what} {k}"));
        }
    }
    if n.reasm.pending() > 0 {
        s.push_str(&format!(", incomplete at the end {}", n.reasm.pending()));
    }
    let told = n.icmp.reasm_exceeded_sent + n.icmp6.reasm_exceeded_sent;
    if told > 0 {
        s.push_str(&format!(", reassembly time exceeded sent {told}"));
    }
    s.push(')');
    s + &sent
}

/// How a report names the IPv6 next hop `peer_mac`: `peer`, or the router whose
/// advertisement gave it (`router fe80::1`) when the peer's own MAC is not that.
pub(crate) fn router_name(
    n6: &squall_stack::Neighbours6,
    peer: Ipv6Address,
    mac: [u8; 6],
) -> String {
    match n6.router() {
        Some((r, m)) if m == mac && n6.lookup(&peer) != Some(mac) => format!("router {r}"),
        _ => peer.to_string(),
    }
}
