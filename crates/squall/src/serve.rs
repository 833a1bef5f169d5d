//! `squall serve`: the HTTP/1.1 server app of `squall-serve` on a Squall node, run on a
//! real port by the same port runner as `squall run` ([`crate::cores::with_port`]):
//! loading the site, the loop, the stop on SIGINT/SIGTERM, the final counters.

pub use squall_serve::{app, files, log, respond};

use std::net::SocketAddrV4;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use squall_engine::clock::thread_cpu_ns;
use squall_engine::{Clock, MonotonicClock};
use squall_port::Port;
use squall_stack::{Node, NodeConfig, Owned};
use squall_tcp::{FlowId, TcpConfig};

use crate::cores::{self, PortJob};
use crate::iface::{fmt_mac, IdleYield, RealConfig};
use app::{AppConfig, ServeApp, ServeStats};
use files::Files;
use respond::Route;

/// Everything `squall serve` was told.
#[derive(Clone, Debug)]
pub struct ServeConfig {
    /// Directory served.
    pub root: Option<PathBuf>,
    /// Address and port listened on (the node owns the address).
    pub listen: SocketAddrV4,
    /// The real port (mode server).
    pub iface: RealConfig,
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
}

/// What a run of the server did.
#[derive(Clone, Debug, Default)]
pub struct ServeReport {
    pub stats: ServeStats,
    /// Connections reset at the end of the drain period.
    pub cut: u64,
    /// Thread CPU time, ns.
    pub cpu_ns: u64,
    /// Access-log buffers lost (writer behind).
    pub log_dropped: u64,
}

/// Loads the site and serves until `stop` is set (SIGINT/SIGTERM) or the duration ends,
/// then stops gracefully.
pub fn serve(cfg: &ServeConfig, stop: Arc<AtomicBool>) -> Result<ServeReport, String> {
    let files = match &cfg.root {
        Some(r) => Files::load(r)?,
        None => Files {
            list: Vec::new(),
            by_path: Default::default(),
            bytes: 0,
        },
    };
    eprintln!(
        "squall serve: {} files ({} bytes) and {} routes in memory, listening on {} over {}",
        files.list.len(),
        files.bytes,
        cfg.routes.len(),
        cfg.listen,
        cfg.iface.label()
    );
    let ip = u32::from(*cfg.listen.ip());
    cores::with_port(
        &cfg.iface,
        vec![(ip, ip)],
        ServeJob {
            cfg,
            files: Arc::new(files),
            stop,
        },
    )
}

struct ServeJob<'a> {
    cfg: &'a ServeConfig,
    files: Arc<Files>,
    stop: Arc<AtomicBool>,
}

impl PortJob for ServeJob<'_> {
    type Out = ServeReport;
    fn run<P: Port>(self, port: P, describe: &dyn Fn(&P) -> String) -> Result<ServeReport, String> {
        let cfg = self.cfg;
        let rc = &cfg.iface;
        let caps = port.caps();
        let clock = MonotonicClock::new();
        let cpu0 = thread_cpu_ns();
        let ip = u32::from(*cfg.listen.ip());
        let mut tc = TcpConfig {
            mac: caps.mac,
            gateway_mac: rc.peer_mac.unwrap_or([0; 6]),
            // The limit answers 503 from the app; some room above it for those.
            max_flows: cfg.app.max_conns.saturating_add(cfg.app.max_conns / 8 + 64),
            seed: if cfg.fixed_keys {
                0x5157_4c4c_7365_7276
            } else {
                TcpConfig::random_seed().map_err(|e| format!("OS random source: {e}"))?
            },
            ..TcpConfig::default()
        };
        tc.opts.mss = tc.opts.mss.min(caps.mtu.saturating_sub(40)).max(64);
        let ncfg = NodeConfig {
            owned: Owned(vec![(ip, ip)]),
            ..NodeConfig::default()
        };
        let mut node = Node::new(port, tc, ncfg, clock.now_ns());
        let log = cfg
            .access_log
            .as_deref()
            .map(log::AccessLog::open)
            .transpose()?;
        let mut app = ServeApp::new(cfg.app.clone(), self.files, &cfg.routes, &mut node.tcp, log);
        let peer_mac = match (rc.peer_mac, rc.peer_ip) {
            (Some(m), _) => m,
            (None, Some(p)) => node
                .resolve(ip, u32::from_be_bytes(p), rc.arp_timeout)
                .map_err(|e| format!("{}: {e}", rc.ifname))?,
            (None, None) => {
                return Err("squall serve needs the peer's (or gateway's) address: --peer-ip IP or --peer-mac MAC".into())
            }
        };
        node.set_next_hop(peer_mac);
        node.announce(clock.now_ns());
        let port_no = cfg.listen.port();
        node.tcp.listen(port_no);
        let t0 = clock.now_ns();
        let end = cfg.duration.map(|d| t0 + d.as_nanos() as u64);
        let mut idle = IdleYield::default();
        let mut drain_until: Option<u64> = None;
        let mut now;
        loop {
            now = clock.now_ns();
            let w = node.turn(now, &mut app, None);
            if drain_until.is_none()
                && (self.stop.load(Ordering::Relaxed) || end.is_some_and(|e| now >= e))
            {
                // New connections are refused (RST) from here; idle ones close, the others
                // after their answer.
                node.tcp.unlisten(port_no);
                app.stop();
                drain_until = Some(now + cfg.drain.as_nanos() as u64);
            }
            if let Some(d) = drain_until {
                if node.tcp.flow_count() == 0 || now >= d {
                    break;
                }
            }
            idle.turn(w);
        }
        let mut cut = 0;
        if node.tcp.flow_count() > 0 {
            {
                let mut io = node.io(now, None);
                for i in 0..app.slots() {
                    if app.is_open(i) {
                        io.abort(&mut app, FlowId(i as u32));
                        cut += 1;
                    }
                }
            }
            node.flush();
        }
        node.release_frames();
        app.finish()?;
        let cpu = thread_cpu_ns().saturating_sub(cpu0);
        eprintln!(
            "squall serve: {} peer {}: ARP requests answered {}, ICMP echo answered {}",
            describe(&node.port),
            fmt_mac(peer_mac),
            node.neigh.stats.requests_answered,
            node.icmp.echo_answered
        );
        Ok(ServeReport {
            stats: app.stats,
            cut,
            cpu_ns: cpu,
            log_dropped: app.log_dropped(),
        })
    }
}
