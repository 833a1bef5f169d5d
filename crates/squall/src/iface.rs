//! Runs on a real interface (`--iface afpacket:IFNAME`, `--iface afxdp:IFNAME[:QUEUE]`, or
//! `--iface dpdk --eal "..."` when built with the `dpdk` feature): one side only (`--mode
//! client` or `--mode server`) against a real peer, over an [`AfPacketPort`], an
//! [`AfXdpPort`] or a DPDK port under the side's node (which answers ARP and ping for the
//! addresses Squall owns, and learns the peer's MAC first). With AF_XDP, Squall's XDP
//! program steers only those addresses to Squall and leaves the rest of the interface's
//! traffic to the kernel. This module holds the CLI parsing of
//! `--iface`/`--eal`/`--mode`/`--peer-*`, the side report of a real-port side and the
//! single-side invariants (checks that need both sides are skipped and say so); the run
//! itself is [`crate::cores`] (one worker per queue, `--cores N`) over `crate::worker`.
//!
//! [`AfPacketPort`]: squall_port::afpacket::AfPacketPort
//! [`AfXdpPort`]: squall_port::afxdp::AfXdpPort

use std::time::Duration;

pub use squall_port::afpacket::RxMode;
use squall_port::afxdp::XdpMode;
use squall_port::Port;

pub use crate::cores::run_real;
use crate::gen::Side;
use crate::report::{self, Check};
use crate::run::{RunResult, SideReport};

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

/// The port kind on a real interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortKind {
    /// `afpacket:IFNAME[,ring][,nogso]`.
    AfPacket,
    /// `afxdp:IFNAME[:QUEUE][,copy|,zerocopy]`.
    AfXdp { queue: u32, mode: XdpMode },
    /// `dpdk[:PORTNAME]` (the device and EAL arguments in [`RealConfig::dpdk`]).
    Dpdk,
}

/// A DPDK port to run on (`--iface dpdk[:NAME]`, `--eal "..."`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DpdkSpec {
    /// The ethdev's name (`dpdk:net_memif0`), or `None` for the first probed port.
    pub device: Option<String>,
    /// EAL arguments, passed through.
    pub eal: Vec<String>,
}

/// A run on a real interface.
#[derive(Clone, Debug)]
pub struct RealConfig {
    /// Interface name.
    pub ifname: String,
    /// AF_PACKET, AF_XDP or DPDK.
    pub kind: PortKind,
    /// The DPDK device and EAL arguments (`kind` is `Dpdk`).
    pub dpdk: Option<DpdkSpec>,
    /// AF_PACKET receive path: the TPACKET_V2 frame ring (default), `recvmmsg`
    /// (`afpacket:IFNAME,recvmmsg`) or the TPACKET_V3 block ring (`afpacket:IFNAME,ring`).
    pub rx: RxMode,
    /// AF_PACKET: send TCP super-frames for the kernel to segment (GSO); off with
    /// `afpacket:IFNAME,nogso`.
    pub gso: bool,
    /// AF_PACKET: receive super-frames of up to 64 KiB whole
    /// (`afpacket:IFNAME,superframes`; a peer's TSO across a veth, GRO on the interface).
    pub superframes: bool,
    /// `Client` or `Server`.
    pub mode: Mode,
    /// Address whose MAC is resolved (default: the first peer address of template 0).
    pub peer_ip: Option<[u8; 4]>,
    /// The same, an IPv6 address (resolved by neighbour discovery; template 0 over IPv6).
    pub peer_ip6: Option<[u8; 16]>,
    /// Peer MAC given by the user (no ARP request then).
    pub peer_mac: Option<[u8; 6]>,
    /// How long to wait for the ARP reply.
    pub arp_timeout: Duration,
    /// How long the next hop stays confirmed without a frame from its MAC before it is
    /// probed (`--reachable-sec`; zero: never probed; squall_stack::nud).
    pub reachable: Duration,
    /// With several workers (`--cores N`): steer each reply to the worker that owns its
    /// flow (AF_PACKET fanout program, source ports chosen by the device's RSS hash);
    /// `false` (`--no-steering`): the kernel's flow hash spreads frames and the software
    /// redirect forwards them to their owner.
    pub steering: bool,
}

/// The next hop's reachable time without `--reachable-sec` (Linux's
/// `base_reachable_time`).
pub const DEFAULT_REACHABLE: Duration = Duration::from_nanos(squall_stack::nud::REACHABLE_NS);

/// `--reachable-sec S` (0 to 3,600) as a duration; `peer_mac`: the next hop was given by
/// `--peer-mac` (never probed: only 0 makes sense).
pub fn reachable(sec: u32, peer_mac: bool) -> Result<Duration, String> {
    if peer_mac && sec > 0 {
        return Err("--reachable-sec: a next hop given by --peer-mac is never probed".into());
    }
    if sec > 3_600 {
        return Err(format!(
            "--reachable-sec {sec}: at most 3600 (0: no probes)"
        ));
    }
    Ok(Duration::from_secs(u64::from(sec)))
}

pub(crate) fn parse_ip(s: &str) -> Result<[u8; 4], String> {
    s.parse::<std::net::Ipv4Addr>()
        .map(|a| a.octets())
        .map_err(|_| format!("--peer-ip {s}: not an IPv4 address"))
}

fn parse_ip6(s: &str) -> Result<[u8; 16], String> {
    s.parse::<std::net::Ipv6Addr>()
        .map(|a| a.octets())
        .map_err(|_| format!("--peer-ip {s}: not an IPv4 or IPv6 address"))
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
/// (mode must be `both`), a [`RealConfig`] for `afpacket:IFNAME` or
/// `afxdp:IFNAME[:QUEUE]` (mode `client` or `server` required).
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
    let dpdk = match iface.strip_prefix("dpdk") {
        Some("") => Some(DpdkSpec::default()),
        Some(name) => match name.strip_prefix(':') {
            Some(n) if !n.is_empty() => Some(DpdkSpec {
                device: Some(n.to_string()),
                eal: Vec::new(),
            }),
            _ => {
                return Err(format!(
                    "--iface {iface}: expected `dpdk` or `dpdk:PORTNAME`"
                ))
            }
        },
        None => None,
    };
    if dpdk.is_some() && !cfg!(feature = "dpdk") {
        return Err(format!(
            "--iface {iface}: built without the dpdk feature (cargo build --features dpdk)"
        ));
    }
    let (mut rx, mut gso, mut superframes) = (RxMode::Frames, true, false);
    let (ifname, kind) = if dpdk.is_some() {
        (iface, PortKind::Dpdk)
    } else if let Some(spec) = iface.strip_prefix("afxdp:") {
        let (ifname, kind) = parse_afxdp(iface, spec)?;
        (ifname, kind)
    } else if let Some(spec) = iface.strip_prefix("afpacket:") {
        let mut parts = spec.split(',');
        let ifname = parts.next().unwrap_or_default();
        for o in parts {
            match o {
                "frames" => rx = RxMode::Frames,
                "recvmmsg" => rx = RxMode::Copy,
                "ring" => rx = RxMode::Blocks,
                "nogso" => gso = false,
                "superframes" => superframes = true,
                _ => {
                    return Err(format!(
                        "--iface {iface}: unknown option `{o}` (frames, recvmmsg, ring, \
                         nogso, superframes)"
                    ))
                }
            }
        }
        (ifname, PortKind::AfPacket)
    } else {
        return Err(format!(
            "--iface {iface}: expected `mem`, \
             `afpacket:IFNAME[,recvmmsg|,ring][,nogso][,superframes]`, \
             `afxdp:IFNAME[:QUEUE][,copy|,zerocopy]` or `dpdk[:PORTNAME]` (with --eal \"...\")"
        ));
    };
    if ifname.is_empty() {
        return Err(format!("--iface {iface}: needs an interface name"));
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
        kind,
        dpdk,
        rx,
        gso,
        superframes,
        mode,
        peer_ip: peer_ip
            .filter(|s| !s.contains(':'))
            .map(parse_ip)
            .transpose()?,
        peer_ip6: peer_ip
            .filter(|s| s.contains(':'))
            .map(parse_ip6)
            .transpose()?,
        peer_mac: peer_mac.map(parse_mac).transpose()?,
        arp_timeout: Duration::from_secs(3),
        reachable: DEFAULT_REACHABLE,
        steering: true,
    }))
}

/// `IFNAME[:QUEUE][,copy|,zerocopy]` of `afxdp:` (queue 0, zero-copy where the driver
/// has it, else copy, by default).
fn parse_afxdp<'a>(iface: &str, spec: &'a str) -> Result<(&'a str, PortKind), String> {
    let (head, mode) = match spec.split_once(',') {
        None => (spec, XdpMode::Auto),
        Some((h, "copy")) => (h, XdpMode::Copy),
        Some((h, "zerocopy")) => (h, XdpMode::ZeroCopy),
        Some((_, o)) => {
            return Err(format!(
                "--iface {iface}: unknown option `{o}` (copy or zerocopy)"
            ))
        }
    };
    let (ifname, queue) = match head.split_once(':') {
        None => (head, 0),
        Some((n, q)) => (
            n,
            q.parse::<u32>()
                .map_err(|_| format!("--iface {iface}: queue `{q}` is not a number"))?,
        ),
    };
    Ok((ifname, PortKind::AfXdp { queue, mode }))
}

/// Applies `--eal ARGS` to a parsed `--iface`: only DPDK takes EAL arguments.
pub fn set_eal(real: &mut Option<RealConfig>, eal: Option<&str>) -> Result<(), String> {
    let Some(text) = eal else {
        return Ok(());
    };
    match real.as_mut().and_then(|r| r.dpdk.as_mut()) {
        Some(d) => {
            d.eal = split_eal(text)?;
            Ok(())
        }
        None => Err("--eal is for --iface dpdk".into()),
    }
}

#[cfg(feature = "dpdk")]
pub(crate) fn split_eal(text: &str) -> Result<Vec<String>, String> {
    squall_port::dpdk::split_args(text)
}

#[cfg(not(feature = "dpdk"))]
pub(crate) fn split_eal(_text: &str) -> Result<Vec<String>, String> {
    Err("--eal: built without the dpdk feature (cargo build --features dpdk)".into())
}

impl RealConfig {
    /// How the interface is named in reports (`afpacket:IF`, `afxdp:IF:Q`, `dpdk:NAME`).
    pub fn label(&self) -> String {
        match self.kind {
            PortKind::AfPacket => format!("afpacket:{}", self.ifname),
            PortKind::AfXdp { queue, .. } => format!("afxdp:{}:{queue}", self.ifname),
            PortKind::Dpdk => self.ifname.clone(),
        }
    }
}

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
        rx_redirected: s.node.counters.rx_redirected,
        redirect_dropped: s.node.redirect_stats().map_or(0, |r| r.dropped()),
        redirect_mesh: s.node.redirect_stats().is_some(),
        ip_fragments: s.node.reasm.stats.fragments,
        ip_reassembled: s.node.reasm.stats.reassembled,
        ip_reasm_dropped: s.node.reasm.stats.dropped(),
        next_hop_moved: s.node.next_hop_moves(),
        next_hop_probes: s.node.nud_stats().map_or(0, |n| n.probes()),
        next_hop_unreachable: s.node.nud_stats().map_or(0, |n| n.unreachable),
        ..SideReport::default()
    }
}

/// A polling loop on real ports yields the core after 1,000 turns in a row without work
/// (50 us sleeps until work comes back). A turn with flows waiting for TX frames does not
/// count: those wait on the peer draining a shared ring (memif), and a sleep there let
/// both ends sleep on full rings and W1 at 120 K conn/s collapse (docs/BENCHMARKS.md,
/// T-memif overload). The loop sleeps through [`crate::run::Busy::sleep`], which keeps
/// the sleeps' CPU out of the busy figure.
#[derive(Default)]
pub(crate) struct IdleYield {
    turns: u32,
}

impl IdleYield {
    /// How long an idle loop sleeps between turns.
    const SLEEP: Duration = Duration::from_micros(50);

    /// Ends a turn of the loop begun at `start`: `worked` as the node's turn said,
    /// `tx_waiting` the flows waiting for TX frames ([`squall_stack::Node::tx_waiting`],
    /// summed over the nodes). Times the turn in `busy` and sleeps if the loop has idled
    /// long enough; returns the next turn's start.
    pub(crate) fn end_turn(
        &mut self,
        busy: &mut crate::run::Busy,
        clock: &impl squall_engine::Clock,
        start: u64,
        worked: bool,
        tx_waiting: usize,
    ) -> u64 {
        let next = busy.end_turn(clock, start, worked);
        if self.turn(worked, tx_waiting) {
            return busy.sleep(clock, Self::SLEEP);
        }
        next
    }

    /// Counts a turn; true when the loop should sleep [`IdleYield::SLEEP`] now.
    fn turn(&mut self, worked: bool, tx_waiting: usize) -> bool {
        if worked || tx_waiting > 0 {
            self.turns = 0;
            false
        } else {
            self.turns = self.turns.saturating_add(1);
            self.turns > 1000
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
        assert_eq!(r.rx, RxMode::Frames, "the frame ring by default");
        let r2 = parse("afpacket:sq-cli0,ring", Some("client"), None, None)
            .unwrap()
            .unwrap();
        assert!(r2.rx == RxMode::Blocks && r2.ifname == "sq-cli0");
        let rc = parse("afpacket:sq-cli0,recvmmsg", Some("client"), None, None)
            .unwrap()
            .unwrap();
        assert_eq!(rc.rx, RxMode::Copy);
        assert!(r.gso && r2.gso, "super-frames by default");
        let r3 = parse("afpacket:sq-cli0,ring,nogso", Some("client"), None, None)
            .unwrap()
            .unwrap();
        assert!(r3.rx == RxMode::Blocks && !r3.gso && r3.ifname == "sq-cli0");
        assert!(!r3.superframes, "MTU-sized receive unless asked");
        let r4 = parse("afpacket:sq-cli0,superframes", Some("client"), None, None)
            .unwrap()
            .unwrap();
        assert!(r4.superframes && r4.rx == RxMode::Frames && r4.gso);
        let e = parse("afpacket:x,bogus", Some("client"), None, None).unwrap_err();
        assert!(
            e.contains("unknown option `bogus` (frames, recvmmsg, ring, nogso, superframes)"),
            "{e}"
        );
        assert_eq!(r2.kind, PortKind::AfPacket);
        let x = parse("afxdp:sq-cli0", Some("client"), None, None)
            .unwrap()
            .unwrap();
        assert_eq!(x.ifname, "sq-cli0");
        assert_eq!(
            x.kind,
            PortKind::AfXdp {
                queue: 0,
                mode: XdpMode::Auto
            }
        );
        let x = parse("afxdp:eth1:3,copy", Some("server"), None, None)
            .unwrap()
            .unwrap();
        assert_eq!(x.ifname, "eth1");
        assert_eq!(
            x.kind,
            PortKind::AfXdp {
                queue: 3,
                mode: XdpMode::Copy
            }
        );
        let x = parse("afxdp:eth1,zerocopy", Some("server"), None, None)
            .unwrap()
            .unwrap();
        assert!(matches!(
            x.kind,
            PortKind::AfXdp {
                mode: XdpMode::ZeroCopy,
                ..
            }
        ));
        for bad in [
            "afxdp:",
            "afxdp::1",
            "afxdp:x:q",
            "afxdp:x,fast",
            "afxdp:x:-1",
        ] {
            assert!(parse(bad, Some("client"), None, None).is_err(), "{bad}");
        }
        assert!(parse("afxdp:x", None, None, None).is_err());
        assert_eq!(r.mode, Mode::Server);
        assert_eq!(r.peer_ip, Some([198, 18, 0, 2]));
        assert_eq!(r.peer_mac, Some([2, 0, 10, 11, 12, 255]));
        assert!(parse("afpacket:x", Some("client"), Some("1.2.3"), None).is_err());
        let r6 = parse("afpacket:x", Some("client"), Some("2001:db8::2"), None)
            .unwrap()
            .unwrap();
        assert_eq!(r6.peer_ip, None);
        assert_eq!(
            r6.peer_ip6.map(std::net::Ipv6Addr::from),
            "2001:db8::2".parse().ok()
        );
        let e = parse("afpacket:x", Some("client"), Some("2001:db8::g"), None).unwrap_err();
        assert!(e.contains("not an IPv4 or IPv6 address"), "{e}");
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

    #[test]
    fn dpdk_iface_and_eal() {
        let r = parse("dpdk", Some("client"), None, None);
        let s = parse("dpdk:net_memif0", Some("server"), None, None);
        assert!(parse("dpdk:", Some("client"), None, None).is_err());
        assert!(parse("dpdkx", Some("client"), None, None).is_err());
        let mut m = parse("mem", None, None, None).unwrap();
        assert_eq!(
            set_eal(&mut m, Some("--no-huge")).unwrap_err(),
            "--eal is for --iface dpdk"
        );
        assert!(set_eal(&mut m, None).is_ok());
        if !cfg!(feature = "dpdk") {
            let e = r.unwrap_err();
            assert!(
                e.contains("built without the dpdk feature (cargo build --features dpdk)"),
                "{e}"
            );
            assert!(s.is_err());
            return;
        }
        let mut r = r.unwrap();
        let rc = r.as_ref().unwrap();
        assert_eq!(
            (rc.label(), rc.dpdk.clone()),
            ("dpdk".into(), Some(DpdkSpec::default()))
        );
        set_eal(
            &mut r,
            Some("--no-huge --in-memory '--vdev=net_memif0,socket=/a b'"),
        )
        .unwrap();
        assert_eq!(
            r.unwrap().dpdk.unwrap().eal,
            vec!["--no-huge", "--in-memory", "--vdev=net_memif0,socket=/a b"]
        );
        let s = s.unwrap().unwrap();
        assert_eq!(s.mode, Mode::Server);
        assert_eq!(s.label(), "dpdk:net_memif0");
        assert_eq!(s.dpdk.unwrap().device.as_deref(), Some("net_memif0"));
        let e = parse("dpdk", None, None, None).unwrap_err();
        assert!(e.contains("--mode client or --mode server"), "{e}");
        assert_eq!(
            parse("afpacket:sq-cli0", Some("client"), None, None)
                .unwrap()
                .unwrap()
                .label(),
            "afpacket:sq-cli0"
        );
    }
}
