//! `--cores N` on a real port (`--iface afpacket:IF`, `afxdp:IF[:Q]`, `dpdk ...`): opens
//! one queue of the port per worker, decides how replies reach the worker that owns
//! their flow, and runs N workers (`crate::worker`), each pinned to its own core with its own
//! node, flow table, timers and counters (nothing shared on the data path); their live
//! figures and results are summed as the in-memory shards' are ([`crate::shards`]).
//!
//! Queues per port kind, and how a reply finds its owner ([`Steering`]):
//! - AF_PACKET: N sockets in one fanout group. By default a classic-BPF program steers
//!   each frame by port number: on the client side our port `% N` (the rule by which
//!   worker `k` picks its source ports), on the server side a hash of the peer's port
//!   ([`squall_port::fanout::peer_port_owner`]): [`Steering::PortRule`]. With
//!   `--no-steering` the kernel's flow hash spreads them ([`Steering::Redirect`]).
//! - AF_XDP: the socket of worker `k` on queue `Q + k`. Which queue a frame reaches is the
//!   NIC's (or, on a veth, the sending side's) choice: [`Steering::Redirect`].
//! - DPDK: one rx/tx queue pair per worker, RSS configured with Squall's symmetric key. If
//!   the device does RSS (`rss_hf` not 0), a client worker only takes source ports whose
//!   reply hashes to its own queue ([`Steering::Rss`]); a device without RSS (or
//!   `--no-steering`): [`Steering::Redirect`].
//!
//! Every worker of a client (and of a server, except under RSS where the device keeps
//! each flow on one queue) joins a redirect mesh: a frame that reaches a worker not
//! owning its flow (by the same port rule) is copied to the owner and counted
//! (`rx_redirected` in the report). With steering the count stays 0; the mesh is the
//! safety net. The T-dut run ([`crate::dut`]) uses `open_afpacket` for both its ports.

use std::sync::atomic::AtomicU32;
use std::sync::Arc;
use std::time::Duration;

use squall_astf::Profile;
use squall_engine::{Clock, MonotonicClock};
use squall_port::afpacket::{AfPacketConfig, AfPacketPort, RxMode};
use squall_port::afxdp::{AfXdpConfig, AfXdpPort, XdpMode};
use squall_port::fanout::{Fanout, FanoutBy};
use squall_port::rss::RssSteer;
use squall_port::Port;
use squall_stack::redirect;

use crate::gen::{owned_ranges, owned_ranges6};
use crate::iface::{Mode, PortKind, RealConfig};
use crate::run::{Live, RunConfig, RunResult, START_LEAD_NS};
use crate::shards::{join_workers, spawn_worker};
use crate::worker::{run_on, Worker};

/// Frames each redirect ring holds.
pub(crate) const REDIRECT_DEPTH: usize = 1024;

/// How frames reach the worker that owns their flow.
#[derive(Clone, Debug)]
pub enum Steering {
    /// The port hands each frame to the worker its port names (AF_PACKET fanout program:
    /// our port `% N` on the client side, the peer-port hash on the server side).
    PortRule,
    /// The device's RSS with Squall's key: client source ports are chosen so that each
    /// reply hashes to its worker's queue.
    Rss(RssSteer),
    /// Nothing steers: frames land where the device or kernel puts them and the software
    /// redirect forwards them.
    Redirect,
}

/// What `--cores N` does on this port, in a word for the summary's mode line.
pub fn plan(rc: &RealConfig, n: u32) -> String {
    if n <= 1 {
        return String::new();
    }
    let how = match (rc.kind, rc.steering, rc.mode) {
        (PortKind::AfPacket, true, Mode::Server) => "fanout steering by the peer-port hash",
        (PortKind::AfPacket, true, _) => &*format!("fanout steering by port % {n}"),
        (PortKind::Dpdk, true, _) => "RSS steering where the device has it, else redirect",
        _ => "no steering: software redirect",
    };
    format!(", {n} workers ({how})")
}

/// Checks that `n` workers can each have a core of their own.
pub fn check_cores(n: u32) -> Result<(), String> {
    let cores = squall_engine::affinity::available_cores();
    if more_than_cores(n, cores.len()) {
        return Err(format!(
            "--cores {n}: this process may use {} core(s) ({:?}); one worker per core",
            cores.len(),
            cores
        ));
    }
    Ok(())
}

/// On the in-memory wire more worker threads (shards, or `--split`'s two) than cores may
/// run (they wrap around the cores this process may use): the note that says so, `None`
/// when every thread has a core.
pub fn shared_cores_note(n: u32) -> Option<String> {
    shared_cores_note_for(n, squall_engine::affinity::available_cores().len())
}

/// Whether `n` worker threads outnumber the `have` cores this process may use (0: the
/// set could not be read, and nothing is said).
fn more_than_cores(n: u32, have: usize) -> bool {
    n > 1 && have > 0 && n as usize > have
}

fn shared_cores_note_for(n: u32, have: usize) -> Option<String> {
    more_than_cores(n, have).then(|| {
        format!(
            "--cores {n}: this process may use {have} core(s); its {n} worker threads \
             share them, so their CPU figures are not per core"
        )
    })
}

/// Rx queues of interface `ifname` as the kernel lists them (`/sys/class/net/IF/queues`).
fn rx_queues(ifname: &str) -> Option<u32> {
    let d = std::fs::read_dir(format!("/sys/class/net/{ifname}/queues")).ok()?;
    Some(
        d.filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().starts_with("rx-"))
            .count() as u32,
    )
}

/// Runs one side of `profile` on a real interface with `cfg.cores` workers.
pub fn run_real(
    profile: Arc<Profile>,
    cfg: &RunConfig,
    rc: &RealConfig,
    live: Arc<Live>,
) -> Result<RunResult, String> {
    if profile.templates.is_empty() {
        return Err("the profile has no template".into());
    }
    let n = cfg.cores.max(1);
    check_cores(n)?;
    let owned = owned_ranges(&profile, rc.mode == Mode::Client).0;
    let owned6 = owned_ranges6(&profile, rc.mode == Mode::Client).0;
    with_ports(
        rc,
        n,
        (owned, owned6),
        RunJob {
            profile,
            cfg,
            rc,
            live,
        },
    )
}

/// `squall run`'s job on the open queues: the traffic generator's workers.
struct RunJob<'a> {
    profile: Arc<Profile>,
    cfg: &'a RunConfig,
    rc: &'a RealConfig,
    live: Arc<Live>,
}

impl PortJob for RunJob<'_> {
    type Out = RunResult;
    fn run<P: Port + Send + 'static>(
        self,
        ports: Vec<P>,
        steer: Steering,
        describe: fn(&P, &RealConfig) -> String,
    ) -> Result<RunResult, String> {
        run_workers(
            ports,
            steer,
            self.profile,
            self.cfg,
            self.rc,
            self.live,
            describe,
        )
    }
}

/// What runs on the open queues of a real port (one per worker): the generator of
/// `squall run` ([`run_real`]) or the HTTP server of `squall serve`.
pub trait PortJob {
    type Out;
    /// Runs on `ports` (worker `k` on `ports[k]`), frames reaching their owner as `steer`
    /// says; `describe` gives a port's own part of its worker's final report line.
    fn run<P: Port + Send + 'static>(
        self,
        ports: Vec<P>,
        steer: Steering,
        describe: fn(&P, &RealConfig) -> String,
    ) -> Result<Self::Out, String>;
}

/// The address ranges Squall owns on a port, IPv4 (host order) and IPv6 (as numbers):
/// what AF_XDP's program steers to Squall's sockets.
pub type OwnedRanges = (Vec<(u32, u32)>, Vec<(u128, u128)>);

/// Opens `n` queues of the port `rc` names (AF_PACKET: a fanout group steering as the
/// mode says; AF_XDP: queues `Q..Q+n`, steering the IPv4 and IPv6 ranges of `owned` to
/// them; DPDK: `n` queue pairs, the EAL initialised here) and runs `job` on them.
pub fn with_ports<J: PortJob>(
    rc: &RealConfig,
    n: u32,
    owned: OwnedRanges,
    job: J,
) -> Result<J::Out, String> {
    match rc.kind {
        PortKind::AfPacket => {
            let by = match (rc.steering, rc.mode) {
                (false, _) => FanoutBy::KernelHash,
                (true, Mode::Server) => FanoutBy::SrcPort,
                (true, _) => FanoutBy::DstPort,
            };
            let ports = open_afpacket(rc, n, by)?;
            let steer = if rc.steering {
                Steering::PortRule
            } else {
                Steering::Redirect
            };
            job.run(ports, steer, describe_afpacket)
        }
        PortKind::AfXdp { queue, mode } => {
            let ports = open_afxdp(rc, queue, mode, n, &owned)?;
            job.run(ports, Steering::Redirect, describe_afxdp)
        }
        PortKind::Dpdk => with_dpdk(rc, n, job),
    }
}

/// `n` AF_XDP sockets on queues `queue..queue + n` of `rc`'s interface, each with its
/// own UMEM, the XDP program steering the IPv4 and IPv6 ranges of `owned` to them; a
/// clear error when the interface has fewer queues than the workers need.
pub(crate) fn open_afxdp(
    rc: &RealConfig,
    queue: u32,
    mode: XdpMode,
    n: u32,
    owned: &OwnedRanges,
) -> Result<Vec<AfXdpPort>, String> {
    // Queues queue..queue+n must be numbers (a queue id near 2^32 from the command line).
    if queue.checked_add(n).is_none() {
        return Err(format!(
            "afxdp:{}:{queue}: no room for {n} worker queue(s) after queue {queue}",
            rc.ifname
        ));
    }
    if n > 1 {
        if let Some(q) = rx_queues(&rc.ifname) {
            if queue + n > q {
                return Err(format!(
                    "--cores {n}: afxdp:{} has {q} rx queue(s), workers need queues \
                     {queue}..={} (ethtool -L {} combined {}; a veth: ip link add ... \
                     numrxqueues {} numtxqueues {})",
                    rc.ifname,
                    queue + n - 1,
                    rc.ifname,
                    queue + n,
                    queue + n,
                    queue + n
                ));
            }
        }
    }
    let mut ports = Vec::with_capacity(n as usize);
    for k in 0..n {
        let mut xc = AfXdpConfig::new(&rc.ifname, queue + k);
        xc.mode = mode;
        xc.owned = owned.0.clone();
        xc.owned6 = owned.1.clone();
        ports.push(AfXdpPort::open(xc)?);
    }
    Ok(ports)
}

/// `n` AF_PACKET sockets on `rc`'s interface, joined (if `n > 1`) in one fanout group
/// that steers `by`, with an id the kernel picks for the first (unique in the network
/// namespace: another process's group on the interface cannot be joined by mistake);
/// socket `k` is the group's `k`-th member (opened in order).
pub(crate) fn open_afpacket(
    rc: &RealConfig,
    n: u32,
    by: FanoutBy,
) -> Result<Vec<AfPacketPort>, String> {
    let mut group = None;
    let mut ports = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let mut pc = AfPacketConfig::new(&rc.ifname);
        pc.rx = rc.rx;
        pc.gso = rc.gso;
        pc.rx_superframes = rc.superframes;
        pc.fanout = (n > 1).then_some(Fanout {
            group,
            members: n as u16,
            by,
        });
        // The port's errors name the interface already (`afpacket:IF: ...`).
        let p = AfPacketPort::open(pc)?;
        if let Some(f) = p.fanout() {
            group = f.group;
        }
        ports.push(p);
    }
    Ok(ports)
}

/// Starts the workers, one per port in `ports` (worker `k` on `ports[k]`), and merges
/// their results. One port: the worker runs on the calling thread (DPDK's main lcore).
fn run_workers<P: Port + Send + 'static>(
    ports: Vec<P>,
    steer: Steering,
    profile: Arc<Profile>,
    cfg: &RunConfig,
    rc: &RealConfig,
    live: Arc<Live>,
    describe: fn(&P, &RealConfig) -> String,
) -> Result<RunResult, String> {
    let n = ports.len() as u32;
    if n == 1 {
        let port = ports.into_iter().next().ok_or("no port")?;
        return run_on(port, profile, cfg, rc, live, Worker::single(), describe);
    }
    let clock = MonotonicClock::new();
    let t0 = clock.now_ns() + START_LEAD_NS * u64::from(n.min(8));
    let ncpu = squall_engine::affinity::available_cores();
    let lives = crate::shards::shard_lives(&live, n);
    let mut workers = Vec::with_capacity(n as usize);
    for ((k, port), w) in ports
        .into_iter()
        .enumerate()
        .zip(crew(n, &steer, clock, t0))
    {
        let (p, c, r, l) = (profile.clone(), cfg.clone(), rc.clone(), lives[k].clone());
        workers.push(spawn_worker(k as u32, &ncpu, move || {
            run_on(port, p, &c, &r, l, w, describe)
        })?);
    }
    join_workers(workers, &live, &lives, "worker")
}

/// The `n` workers of a port (index, the shared start instant `t0`, next hop and finish
/// count, each its ends of the redirect mesh; on a server on RSS the mesh carries only
/// reassembled datagrams, `worker::attach_redirect`).
pub(crate) fn crew(n: u32, steer: &Steering, clock: MonotonicClock, t0: u64) -> Vec<Worker> {
    let next_hop = Arc::default();
    let finished = Arc::new(AtomicU32::new(0));
    let rss = match steer {
        Steering::Rss(s) => Some(s.clone()),
        _ => None,
    };
    // (a server on RSS has its mesh too, for the datagrams reassembled on a worker other
    // than their flow's: `Node::set_rss_redirect`)
    let mut ends: Vec<Option<squall_stack::Redirect>> = if n > 1 {
        redirect::mesh(n, REDIRECT_DEPTH)
            .into_iter()
            .map(Some)
            .collect()
    } else {
        (0..n).map(|_| None).collect()
    };
    (0..n)
        .map(|k| Worker {
            index: k,
            count: n,
            clock,
            t0,
            next_hop: Arc::clone(&next_hop),
            finished: finished.clone(),
            redirect: ends[k as usize].take(),
            rss: rss.clone(),
        })
        .collect()
}

fn describe_afpacket(p: &AfPacketPort, rc: &RealConfig) -> String {
    let x = p.extra_stats();
    format!(
        "afpacket:{} (rx {}): own outgoing skipped {}, rx truncated {}, tx refused {}{}",
        rc.ifname,
        match rc.rx {
            RxMode::Frames => "TPACKET_V2 frame ring",
            RxMode::Copy => "recvmmsg",
            RxMode::Blocks => "TPACKET_V3 block ring",
        },
        x.rx_outgoing,
        x.rx_truncated,
        x.tx_refused,
        if x.rx_vlan_no_room > 0 {
            format!(", VLAN tag not put back (no room) {}", x.rx_vlan_no_room)
        } else {
            String::new()
        }
    )
}

fn describe_afxdp(p: &AfXdpPort, rc: &RealConfig) -> String {
    let x = p.extra_stats();
    format!(
        "afxdp:{}:{} ({}, XDP {} mode): XDP redirected {}, passed to the kernel {}, \
         kernel rx drops {} (rx ring full {}, fill ring empty {}), rx invalid {}, \
         tx refused {}, tx kicks {}, fill kicks {}",
        rc.ifname,
        p.queue(),
        if p.zero_copy() { "zero-copy" } else { "copy" },
        if p.native() { "native" } else { "generic" },
        x.xdp_redirected,
        x.xdp_passed + x.xdp_short,
        x.kernel_rx_dropped,
        x.kernel_rx_ring_full,
        x.kernel_fill_empty,
        x.rx_invalid,
        x.tx_refused,
        x.tx_wakeups,
        x.rx_wakeups
    )
}

#[cfg(feature = "dpdk")]
fn describe_dpdk(p: &squall_port::dpdk::DpdkPort, rc: &RealConfig) -> String {
    use squall_port::dpdk::Reta;
    use squall_port::OffloadFlags;
    let offloads = p.caps().offloads;
    let by = |f| {
        if offloads.contains(f) {
            "device"
        } else {
            "stack"
        }
    };
    let i = p.info();
    let x = p.device_stats();
    format!(
        "{} queue {} (lcore {}): device {} ({}), rx offload capa {:#x}, tx offload capa {:#x}, \
         RSS hash types {:#x}{}, TCP checksums on tx by the {}, on rx by the {}; device missed {}, \
         rx errors {}, tx errors {}, no mbuf {}; chained rx {}, malformed rx dropped {}",
        rc.label(),
        p.queue(),
        p.lcore()
            .map_or("none: no per-core mbuf cache".to_string(), |l| l
                .to_string()),
        i.name,
        i.driver,
        i.rx_offload_capa,
        i.tx_offload_capa,
        i.rss_hf,
        {
            // Whether the table was read back from the driver (a client's RSS steering
            // then follows it, `with_dpdk`), or is assumed round robin.
            let read = match &i.reta_table {
                Some(t) if squall_port::rss::table_is_usable(t, u32::from(i.queues)) => "read back",
                Some(_) => "read back, not usable for steering: assumed round robin",
                None => "assumed round robin",
            };
            match (i.rss_hf, &i.reta) {
                (0, _) => String::new(),
                (_, Reta::Programmed) => {
                    format!(" (redirection table programmed round robin, {read})")
                }
                (_, Reta::DriverDefault) => format!(" (the driver's redirection table, {read})"),
                (_, Reta::Failed(e)) => format!(
                    " (programming the redirection table failed: {e}; the driver's, {read})"
                ),
            }
        },
        by(OffloadFlags::TX_TCP_CSUM),
        if offloads.contains(OffloadFlags::RX_CSUM_PER_FRAME) {
            "device, frame by frame (the stack verifies what it leaves unknown)"
        } else {
            by(OffloadFlags::RX_L4_CSUM_GOOD)
        },
        x.imissed,
        x.ierrors,
        x.oerrors,
        x.rx_nombuf,
        p.extra_stats().rx_chained,
        p.extra_stats().rx_malformed
    )
}

/// Runs `job` over `n` queue pairs of the DPDK port of `rc` (EAL initialised here: this
/// thread becomes its main lcore); without the `dpdk` feature, an error.
fn with_dpdk<J: PortJob>(rc: &RealConfig, n: u32, job: J) -> Result<J::Out, String> {
    let d = rc.dpdk.clone().unwrap_or_default();
    #[cfg(feature = "dpdk")]
    {
        use squall_port::rss::RssConfig;
        with_eal(&d.eal, || {
            let ports = open_dpdk(&d, n)?;
            let info = ports[0].info();
            let steer = if n > 1 && rc.steering && info.rss_hf != 0 {
                // The key the device was given (`dpdk::open`), its table size.
                let mut rss = RssConfig::symmetric(n);
                if info.reta_size > 0 {
                    rss.reta_size = u32::from(info.reta_size);
                }
                rss.table = info.reta_table.clone();
                rss.ipv6 = info.hashes_ipv6();
                Steering::Rss(RssSteer::new(&rss))
            } else {
                Steering::Redirect
            };
            job.run(ports, steer, describe_dpdk)
        })
    }
    #[cfg(not(feature = "dpdk"))]
    {
        let _ = (rc, d, job, n, Duration::ZERO);
        Err("--iface dpdk: built without the dpdk feature (cargo build --features dpdk)".into())
    }
}

/// Runs `f` with the EAL initialised from `eal` (this thread its main lcore); once `f`
/// has returned (its ports closed), the EAL's runtime files of this process go.
#[cfg(feature = "dpdk")]
pub(crate) fn with_eal<T>(
    eal: &[String],
    f: impl FnOnce() -> Result<T, String>,
) -> Result<T, String> {
    squall_port::dpdk::init(eal)?;
    let r = f();
    squall_port::dpdk::remove_own_runtime_dir();
    r
}

/// `n` queue pairs of `d`'s device (the EAL is up), once its link is up.
#[cfg(feature = "dpdk")]
pub(crate) fn open_dpdk(
    d: &crate::iface::DpdkSpec,
    n: u32,
) -> Result<Vec<squall_port::dpdk::DpdkPort>, String> {
    use squall_port::dpdk::{self, DpdkConfig};
    let queues = u16::try_from(n).map_err(|_| format!("--cores {n}: too many"))?;
    let ports = dpdk::open(&DpdkConfig {
        device: d.device.clone(),
        queues,
        ..DpdkConfig::default()
    })?;
    let port = &ports[0];
    // A memif link comes up once the peer process has connected.
    if !port.wait_link(Duration::from_secs(20)) {
        return Err(format!(
            "dpdk: {}: the link is down after 20 s (no peer on the memif socket? \
             interface down?)",
            port.info().name
        ));
    }
    Ok(ports)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn more_shards_than_cores_are_noted() {
        assert_eq!(shared_cores_note_for(1, 2), None);
        assert_eq!(shared_cores_note_for(2, 2), None);
        assert_eq!(shared_cores_note_for(3, 0), None);
        let n = shared_cores_note_for(3, 2).unwrap();
        assert!(
            n.contains("may use 2 core(s)") && n.contains("3 worker threads"),
            "{n}"
        );
    }

    #[test]
    fn more_workers_than_cores_is_refused() {
        let have = squall_engine::affinity::available_cores().len() as u32;
        assert!(check_cores(1).is_ok());
        if have > 0 {
            assert!(check_cores(have).is_ok());
            let e = check_cores(have + 1).unwrap_err();
            assert!(e.contains("one worker per core"), "{e}");
        }
    }

    #[test]
    fn the_plan_names_the_steering() {
        let mut rc = crate::iface::parse("afpacket:x", Some("client"), None, None)
            .unwrap()
            .unwrap();
        assert_eq!(plan(&rc, 1), "");
        assert!(plan(&rc, 2).contains("port % 2"));
        rc.steering = false;
        assert!(plan(&rc, 2).contains("redirect"));
    }
}
