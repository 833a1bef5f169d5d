//! Runs on a real interface (`--iface afpacket:IFNAME`): one side only (`--mode client`
//! or `--mode server`) against a real peer, over an [`AfPacketPort`] under the side's
//! node (which answers ARP and ping for the addresses Squall owns, and learns the peer's
//! MAC first). Also the CLI parsing of `--iface`/`--mode`/`--peer-*` and the single-side
//! invariants (checks that need both sides are skipped and say so).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use squall_astf::sched::SchedConfig;
use squall_astf::Profile;
use squall_engine::clock::thread_cpu_ns;
use squall_engine::{Clock, MonotonicClock};
use squall_port::afpacket::{AfPacketConfig, AfPacketPort};
use squall_port::Port;

use crate::gen::{tcp_config, ClientGen, Side};
use crate::report::{self, Check};
use crate::run::{Live, RunConfig, RunResult, SideReport};

/// Which side(s) Squall plays.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Client,
    Server,
    Both,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Client => "client",
            Mode::Server => "server",
            Mode::Both => "both",
        }
    }
}

/// A run on a real interface.
#[derive(Clone, Debug)]
pub struct RealConfig {
    /// Interface name (AF_PACKET).
    pub ifname: String,
    /// Receive through the TPACKET_V3 mmap ring (`afpacket:IFNAME,ring`).
    pub rx_ring: bool,
    /// `Client` or `Server`.
    pub mode: Mode,
    /// Address whose MAC is resolved (default: the first peer address of template 0).
    pub peer_ip: Option<[u8; 4]>,
    /// Peer MAC given by the user (no ARP request then).
    pub peer_mac: Option<[u8; 6]>,
    /// How long to wait for the ARP reply.
    pub arp_timeout: Duration,
}

pub(crate) fn parse_ip(s: &str) -> Result<[u8; 4], String> {
    s.parse::<std::net::Ipv4Addr>()
        .map(|a| a.octets())
        .map_err(|_| format!("--peer-ip {s}: not an IPv4 address"))
}

fn parse_mac(s: &str) -> Result<[u8; 6], String> {
    let parts: Vec<&str> = s.split(':').collect();
    let mut m = [0u8; 6];
    if parts.len() != 6 {
        return Err(format!("--peer-mac {s}: expected aa:bb:cc:dd:ee:ff"));
    }
    for (d, p) in m.iter_mut().zip(parts) {
        *d = u8::from_str_radix(p, 16)
            .map_err(|_| format!("--peer-mac {s}: expected aa:bb:cc:dd:ee:ff"))?;
    }
    Ok(m)
}

/// Parses `--iface`, `--mode`, `--peer-ip`, `--peer-mac`: `None` for the in-memory wire
/// (mode must be `both`), a [`RealConfig`] for `afpacket:IFNAME` (mode `client` or
/// `server` required).
pub fn parse(
    iface: &str,
    mode: Option<&str>,
    peer_ip: Option<&str>,
    peer_mac: Option<&str>,
) -> Result<Option<RealConfig>, String> {
    let mode = match mode {
        None => None,
        Some("client") => Some(Mode::Client),
        Some("server") => Some(Mode::Server),
        Some("both") => Some(Mode::Both),
        Some(m) => return Err(format!("--mode {m}: expected client, server or both")),
    };
    if iface == "mem" {
        if mode.is_some_and(|m| m != Mode::Both) {
            return Err(
                "--mode client|server needs a real interface (--iface afpacket:IFNAME)".into(),
            );
        }
        if peer_ip.is_some() || peer_mac.is_some() {
            return Err("--peer-ip/--peer-mac need a real interface".into());
        }
        return Ok(None);
    }
    let Some(spec) = iface.strip_prefix("afpacket:") else {
        return Err(format!(
            "--iface {iface}: expected `mem`, `afpacket:IFNAME` or `afpacket:IFNAME,ring`"
        ));
    };
    let (ifname, rx_ring) = match spec.split_once(',') {
        None => (spec, false),
        Some((n, "ring")) => (n, true),
        Some((_, o)) => return Err(format!("--iface {iface}: unknown option `{o}` (ring)")),
    };
    if ifname.is_empty() {
        return Err("--iface afpacket: needs an interface name".into());
    }
    let mode = match mode {
        Some(Mode::Client) => Mode::Client,
        Some(Mode::Server) => Mode::Server,
        _ => {
            return Err("with a real interface, --mode client or --mode server is required".into())
        }
    };
    Ok(Some(RealConfig {
        ifname: ifname.to_string(),
        rx_ring,
        mode,
        peer_ip: peer_ip.map(parse_ip).transpose()?,
        peer_mac: peer_mac.map(parse_mac).transpose()?,
        arp_timeout: Duration::from_secs(3),
    }))
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

type RealSide = Side<AfPacketPort>;

pub(crate) fn side_report<P: Port>(s: &Side<P>, cpu_ns: u64) -> SideReport {
    SideReport {
        tcp: s.node.tcp.counters().clone(),
        app: s.stats(),
        port: s.node.port.stats(),
        cpu_ns,
        still_open: s.node.tcp.flow_count() as u64,
        live_end: s.gen.app.live,
        udp_live_end: s.gen.udp.live,
        peak_active: s.gen.app.peak_live,
        ..SideReport::default()
    }
}

fn publish(live: &Live, s: &RealSide, mode: Mode) {
    let t = s.gen.app.stats.total();
    let started = if mode == Mode::Server {
        t.accepted
    } else {
        t.started
    };
    live.started.store(started, Ordering::Relaxed);
    live.completed.store(t.completed, Ordering::Relaxed);
    live.errors
        .store(s.gen.app.stats.errors(), Ordering::Relaxed);
    live.active.store(s.gen.app.live, Ordering::Relaxed);
    live.wire_bytes
        .store(s.node.port.stats().tx_bytes, Ordering::Relaxed);
}

/// Runs one side of `profile` on a real interface (single thread, monotonic clock).
pub fn run_real(
    profile: Arc<Profile>,
    cfg: &RunConfig,
    rc: &RealConfig,
    live: Arc<Live>,
) -> Result<RunResult, String> {
    if profile.templates.is_empty() {
        return Err("the profile has no template".into());
    }
    let mut pc = AfPacketConfig::new(&rc.ifname);
    pc.rx_ring = rc.rx_ring;
    let port = AfPacketPort::open(pc)?;
    let caps = port.caps();
    let (mine, peer_default) = addresses(&profile, rc.mode);
    let peer_ip = rc.peer_ip.unwrap_or(peer_default);
    let clock = MonotonicClock::new();
    let cpu0 = thread_cpu_ns();
    let t0 = clock.now_ns() + 100_000_000;
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
        seed ^ 0xaf9,
    );
    // Segments must fit the interface's MTU.
    tc.opts.mss = tc.opts.mss.min(caps.mtu.saturating_sub(40)).max(64);
    let cg = if rc.mode == Mode::Client {
        let mut sc = SchedConfig::from_profile(&profile, cfg.mult, Some(cfg.duration_ns), 0, 1);
        sc.start_ns = t0;
        sc.seed = seed;
        Some(ClientGen::new(&profile, &sc)?)
    } else {
        None
    };
    let mut s = Side::new(profile.clone(), port, tc, cg, t0, seed ^ 0x1);
    // The node answers ARP for its pools from here on; it asks for the peer unless told.
    let peer_mac = match rc.peer_mac {
        Some(m) => m,
        None => s
            .node
            .resolve(
                u32::from_be_bytes(mine),
                u32::from_be_bytes(peer_ip),
                rc.arp_timeout,
            )
            .map_err(|e| format!("afpacket:{}: {e}", rc.ifname))?,
    };
    s.node.set_next_hop(peer_mac);
    s.node.announce(clock.now_ns());
    if rc.mode == Mode::Client {
        s.gen.pace = Some(256);
    }
    let stop = t0 + cfg.duration_ns;
    let hard = stop + cfg.drain_ns;
    let mut now;
    let mut last_pub = 0u64;
    let mut idle = IdleYield::default();
    // Idle polling is not work: the busy figure counts iterations that did some.
    let mut busy = crate::run::Busy::default();
    crate::run::wait_until(&clock, t0);
    loop {
        now = clock.now_ns();
        let w = s.iterate(now, None);
        busy.add(now, clock.now_ns(), w);
        let done = if rc.mode == Mode::Client {
            s.is_idle()
        } else {
            now >= stop && s.is_idle()
        };
        if done {
            break;
        }
        if now >= hard {
            if s.gen.app.live > 0 {
                s.cut_all(now, None);
            }
            break;
        }
        if now.saturating_sub(last_pub) >= 10_000_000 {
            last_pub = now;
            publish(&live, &s, rc.mode);
        }
        idle.turn(w);
    }
    publish(&live, &s, rc.mode);
    live.done.store(true, Ordering::Relaxed);
    s.release_frames();
    let cpu = thread_cpu_ns().saturating_sub(cpu0);
    let a = s.node.neigh.stats;
    let n = s.node.counters;
    let x = s.node.port.extra_stats();
    eprintln!(
        "squall: afpacket:{} (rx {}) mac {} peer {} at {}: ARP requests answered {}, ARP ignored {}, \
         ICMP echo requests answered {}, unrelated frames dropped {}, own outgoing skipped {}, \
         rx truncated {}, tx refused {}",
        rc.ifname,
        if rc.rx_ring { "TPACKET_V3 ring" } else { "recvmmsg" },
        fmt_mac(caps.mac),
        std::net::Ipv4Addr::from(peer_ip),
        fmt_mac(peer_mac),
        a.requests_answered,
        a.ignored,
        s.node.icmp.echo_answered,
        n.rx_not_ours + n.rx_other_ip + n.rx_other_ether + n.rx_bad,
        x.rx_outgoing,
        x.rx_truncated,
        x.tx_refused
    );
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
        gen_ns: cfg.duration_ns,
        cpu_ns: cpu,
        busy_cpu_ns: busy.scale(cpu),
        pcap: None,
    })
}

/// A polling loop on real ports yields the core after 1,000 turns in a row without work
/// (50 us sleeps until work comes back).
#[derive(Default)]
pub(crate) struct IdleYield {
    turns: u32,
}

impl IdleYield {
    pub(crate) fn turn(&mut self, worked: bool) {
        if worked {
            self.turns = 0;
        } else {
            self.turns = self.turns.saturating_add(1);
            if self.turns > 1000 {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
    }
}

pub(crate) fn fmt_mac(m: [u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// Invariants of a single-side run: the checks about that side only, plus "every flow
/// completed"; the checks that compare both sides are skipped (reported as such).
pub fn single_side_checks(r: &RunResult, mode: Mode) -> Vec<Check> {
    let (me, other) = match mode {
        Mode::Client => ("client", "server"),
        Mode::Server => ("server", "client"),
        Mode::Both => return report::invariants(r),
    };
    let all = report::invariants(r);
    let skipped: Vec<&str> = all
        .iter()
        .filter(|c| c.name.contains(other))
        .map(|c| c.name)
        .collect();
    let mut v: Vec<Check> = all
        .into_iter()
        .filter(|c| c.name.contains(me) && !c.name.contains(other))
        .collect();
    let side = if mode == Mode::Client {
        &r.client
    } else {
        &r.server
    };
    let t = side.app.total();
    let opened = if mode == Mode::Client {
        t.started
    } else {
        t.accepted
    };
    v.push(Check {
        name: if mode == Mode::Client {
            "client_all_flows_completed"
        } else {
            "server_all_flows_completed"
        },
        ok: opened == t.completed,
        detail: format!("{me} flows opened {opened} vs completed {}", t.completed),
    });
    v.push(Check {
        name: "single_side_mode",
        ok: true,
        detail: format!(
            "{me}-only run: checks needing both sides skipped ({})",
            skipped.join(", ")
        ),
    });
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_rules() {
        assert!(parse("mem", None, None, None).unwrap().is_none());
        assert!(parse("mem", Some("both"), None, None).unwrap().is_none());
        assert!(parse("mem", Some("client"), None, None).is_err());
        assert!(parse("mem", None, Some("198.18.0.1"), None).is_err());
        assert!(parse("eth0", Some("client"), None, None).is_err());
        assert!(parse("afpacket:", Some("client"), None, None).is_err());
        let e = parse("afpacket:sq-cli0", None, None, None).unwrap_err();
        assert!(e.contains("--mode client or --mode server"), "{e}");
        assert!(parse("afpacket:sq-cli0", Some("both"), None, None).is_err());
        assert!(parse("afpacket:x", Some("bogus"), None, None).is_err());
        let r = parse(
            "afpacket:sq-cli0",
            Some("server"),
            Some("198.18.0.2"),
            Some("02:00:0a:0b:0c:ff"),
        )
        .unwrap()
        .unwrap();
        assert_eq!(r.ifname, "sq-cli0");
        assert!(!r.rx_ring);
        let r2 = parse("afpacket:sq-cli0,ring", Some("client"), None, None)
            .unwrap()
            .unwrap();
        assert!(r2.rx_ring && r2.ifname == "sq-cli0");
        assert!(parse("afpacket:x,bogus", Some("client"), None, None).is_err());
        assert_eq!(r.mode, Mode::Server);
        assert_eq!(r.peer_ip, Some([198, 18, 0, 2]));
        assert_eq!(r.peer_mac, Some([2, 0, 10, 11, 12, 255]));
        assert!(parse("afpacket:x", Some("client"), Some("1.2.3"), None).is_err());
        assert!(parse("afpacket:x", Some("client"), None, Some("02:00")).is_err());
        assert!(parse("afpacket:x", Some("client"), None, Some("zz:0:0:0:0:0")).is_err());
    }

    #[test]
    fn single_side_checks_skip_the_other_side() {
        let mut r = RunResult::default();
        r.client.app = crate::stats::SideStats::new(1);
        r.client.app.tg[0].c.started = 5;
        r.client.app.tg[0].c.completed = 5;
        r.client.tcp.tcps_connattempt = 5;
        r.client.tcp.tcps_closed = 5;
        r.client.tcp.tcps_sndbyte = 100; // the server saw nothing: not checked
        let v = single_side_checks(&r, Mode::Client);
        assert!(v.iter().all(|c| c.ok), "{v:?}");
        assert!(v.iter().all(|c| !c.name.contains("server")));
        let skip = v.iter().find(|c| c.name == "single_side_mode").unwrap();
        assert!(skip.detail.contains("client_sent_eq_server_received"));
        r.client.app.tg[0].c.completed = 4;
        r.client.app.tg[0].c.aborted = 1;
        let v = single_side_checks(&r, Mode::Client);
        assert!(v
            .iter()
            .any(|c| c.name == "client_all_flows_completed" && !c.ok));
    }
}
