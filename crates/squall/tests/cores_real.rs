//! `--cores 2` on a real 2-queue port (root only; skipped otherwise, with the reason):
//! Squall's client over a veth created with 2 rx and 2 tx queues, against a kernel nginx
//! in a second namespace. Every reply must land on the worker that owns its flow:
//! - AF_PACKET with fanout steering (`port % 2`): 0 frames redirected between workers;
//! - AF_PACKET with `--no-steering` (the kernel's flow hash spreads the frames): frames
//!   redirected and counted, and every flow still completes;
//! - AF_PACKET with the TPACKET_V3 rx ring in each fanout member: 0 redirected;
//! - AF_XDP, one socket per queue (which veth queue a frame takes is the sender's choice,
//!   so the redirect does the steering): every flow completes;
//! - DPDK `net_af_packet` with `qpairs=2` (the PMD's own kernel fanout, no RSS): the same;
//! - DPDK `net_tap` with 2 queues on a tap given RSS (`squall_port::tap_rss`: Toeplitz with
//!   the key Squall's DPDK port configures, the drivers' default table): the client picks
//!   source ports whose replies hash to their own queue, 0 redirected (IPv4 and IPv6);
//!   with `--no-steering` about half the replies are redirected, counted.
//!
//! Each run: both workers opened flows, every flow completed with every response byte,
//! nginx's access log agrees on the count. The server side: Squall's server with 2
//! workers answers `ab -n 400 -c 10` in full over AF_PACKET (fanout by the peer-port hash:
//! 0 redirected; `--no-steering`: redirected, counted) and over AF_XDP (redirected). The namespaces (`sqc-cli`, `sqc-srv`, own names
//! so as not to collide with the lab's) are removed on drop; the machine-wide lab lock
//! (`/tmp/squall-lab.lock`) is held for the test (set `SQUALL_LAB_LOCKED=1` when the caller
//! already holds it). Also the refusals that need no root: more workers than cores, more
//! than the port's queues, `--no-steering` without `--cores`.

use std::process::{Command, Stdio};

use serde_json::Value;

mod lab;
use lab::{
    nginx_squall_requests, nginx_w1, num, serve_report, skip, squall_in, tmpdir, w1_client_profile,
    LAB,
};

const CLI: &str = "sqc-cli";
const SRV: &str = "sqc-srv";

fn sh(args: &[&str]) -> bool {
    Command::new(args[0])
        .args(&args[1..])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// Which side Squall plays on the 2-queue lab.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    /// Squall's client over IPv6 (the tap lab only): nginx at 2001:db8:62::1/64, the
    /// client pool on-link.
    #[cfg_attr(not(feature = "dpdk"), allow(dead_code))]
    ClientV6,
    /// Squall's client on sqc-c0 (no address); nginx's 198.18.48.1 and 198.18.0.1 on
    /// sqc-s0, the client pool on-link.
    Client,
    /// Squall's server on sqc-s0 (no address); the kernel client's 198.18.0.2 on sqc-c0,
    /// the server pool on-link.
    Server,
}

/// The two namespaces joined by a veth with 2 rx and 2 tx queues on each end (sqc-c0 in
/// sqc-cli, sqc-s0 in sqc-srv), offloads off as in `scripts/lab.sh`, addressed for
/// `role`; removed on drop.
struct TwoQueueLab;

impl TwoQueueLab {
    fn up(role: Role) -> TwoQueueLab {
        let lab = TwoQueueLab;
        lab.down();
        let run = |cmd: &str| {
            let a: Vec<&str> = cmd.split_whitespace().collect();
            assert!(sh(&a), "{cmd} failed");
        };
        run("ip netns add sqc-cli");
        run("ip netns add sqc-srv");
        run(
            "ip link add sqc-c0 netns sqc-cli numtxqueues 2 numrxqueues 2 type veth \
             peer name sqc-s0 netns sqc-srv numtxqueues 2 numrxqueues 2",
        );
        for (n, i) in [(CLI, "sqc-c0"), (SRV, "sqc-s0")] {
            run(&format!(
                "ip netns exec {n} sysctl -qw net.ipv6.conf.all.disable_ipv6=1"
            ));
            run(&format!("ip -n {n} link set lo up"));
            run(&format!("ip -n {n} link set {i} mtu 1500"));
            run(&format!(
                "ip netns exec {n} ethtool -K {i} tso off gso off gro off tx off rx off"
            ));
        }
        if role == Role::Client {
            run("ip -n sqc-srv addr add 198.18.0.1/24 dev sqc-s0");
            run("ip -n sqc-srv addr add 198.18.48.1/32 dev sqc-s0");
        } else {
            run("ip -n sqc-cli addr add 198.18.0.2/24 dev sqc-c0");
        }
        run("ip -n sqc-cli link set sqc-c0 up");
        run("ip -n sqc-srv link set sqc-s0 up");
        if role == Role::Client {
            run("ip -n sqc-srv route add 198.18.16.0/24 dev sqc-s0");
        } else {
            run("ip -n sqc-cli route add 198.18.48.0/24 dev sqc-c0");
        }
        lab
    }

    fn down(&self) {
        let _ = sh(&["ip", "netns", "del", CLI]);
        let _ = sh(&["ip", "netns", "del", SRV]);
    }
}

impl Drop for TwoQueueLab {
    fn drop(&mut self) {
        self.down();
    }
}

/// The locks of a lab test (this binary's, and the machine-wide one unless the caller
/// holds it), or `None` (the reason printed) when it cannot run here: not root, a tool of
/// `tools` missing, fewer than 2 cores.
fn lab_access(
    tools: &[&str],
) -> Option<(std::sync::MutexGuard<'static, ()>, Option<std::fs::File>)> {
    let g = LAB.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(r) = skip(tools) {
        eprintln!("skipped: {r}");
        return None;
    }
    if squall_engine_cores() < 2 {
        squall_port::lab::skipped("needs 2 cores for 2 workers");
        return None;
    }
    Some((g, machine_lock()))
}

/// The machine-wide lab lock (namespaces, veth, nginx), unless the caller holds it.
fn machine_lock() -> Option<std::fs::File> {
    if std::env::var_os("SQUALL_LAB_LOCKED").is_some() {
        return None;
    }
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open("/tmp/squall-lab.lock")
        .expect("open /tmp/squall-lab.lock");
    f.lock().expect("lock /tmp/squall-lab.lock");
    Some(f)
}

/// What one `--cores 2` client run did.
struct Outcome {
    flows: u64,
    redirected: u64,
    /// Frames the workers' queues received.
    #[cfg_attr(not(feature = "dpdk"), allow(dead_code))]
    rx_frames: u64,
    /// Flows opened by worker 0 and worker 1 (from their report lines).
    per_worker: [u64; 2],
    /// Each worker's DPDK lcore, from its report line (`queue K (lcore N)`; DPDK only).
    #[cfg_attr(not(feature = "dpdk"), allow(dead_code))]
    lcores: [Option<String>; 2],
    /// What the run printed.
    #[cfg_attr(not(feature = "dpdk"), allow(dead_code))]
    text: String,
}

/// Squall's client with `--cores 2` and `extra` options over `iface` on a fresh lab (the
/// server's TIME_WAIT tuples of a previous run would meet the same client ports): W1
/// (2,000 flows at 1,000 CPS) against a kernel nginx; checks that every flow completed
/// with every byte, that nginx logged each, and that both workers carried half the flows.
fn client_run(iface: &str, extra: &[&str]) -> Outcome {
    let _lab = TwoQueueLab::up(Role::Client);
    client_run_on(CLI, SRV, iface, extra, None)
}

/// [`client_run`] on a lab already up: Squall in namespace `cli`, nginx in `srv` (at
/// `v6`, with the client pool 2001:db8:62::100:1-c8, when given; else at 198.18.48.1).
fn client_run_on(cli: &str, srv: &str, iface: &str, extra: &[&str], v6: Option<&str>) -> Outcome {
    let dir = tmpdir("cores");
    let (_nginx, total) = match v6 {
        None => nginx_w1(srv, &dir),
        Some(a) => lab::nginx_w1_on(srv, &dir, &format!("[{a}]")),
    };
    let prof = w1_client_profile(&dir, total);
    if let Some(a) = v6 {
        let mut p: Value = serde_json::from_str(&std::fs::read_to_string(&prof).unwrap()).unwrap();
        p["ip_gens"][0]["clients"]["range"] =
            serde_json::json!(["2001:db8:62::100:1", "2001:db8:62::100:c8"]);
        p["ip_gens"][0]["servers"]["range"] = serde_json::json!([a, a]);
        std::fs::write(&prof, p.to_string()).unwrap();
    }
    let json = dir.join("run.json");
    let _ = std::fs::remove_file(&json);
    let mut args = vec![
        "run",
        prof.to_str().unwrap(),
        "--iface",
        iface,
        "--mode",
        "client",
        "--cores",
        "2",
        "--duration",
        "2",
        "--mult",
        "10",
        "--drain-sec",
        "20",
        "-q",
        "--json",
        json.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let (code, text) = squall_in(cli, &args, 90);
    eprintln!("{text}");
    assert_eq!(code, 0, "squall --cores 2 over {iface} not clean:\n{text}");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let flows = num(&r, &["client", "flows", "started"]);
    assert_eq!(flows, 2000, "2 s at 1,000 CPS");
    assert_eq!(num(&r, &["client", "flows", "completed"]), flows);
    assert_eq!(num(&r, &["errors"]), 0);
    assert_eq!(
        num(&r, &["client", "flows", "l7_rx_bytes"]),
        flows * total,
        "every response byte of every flow"
    );
    assert_eq!(nginx_squall_requests(&dir), flows, "nginx access log lines");
    lab::check_real_series(&r, 2);
    assert!(
        r["mode"].as_str().unwrap_or("").contains("2 workers"),
        "{}",
        r["mode"]
    );
    let mut per_worker = [0u64; 2];
    for (k, w) in per_worker.iter_mut().enumerate() {
        let tag = format!("worker {k}/2 (flows opened ");
        let line = text
            .lines()
            .find(|l| l.contains(&tag))
            .unwrap_or_else(|| panic!("no report line of worker {k}:\n{text}"));
        let rest = &line[line.find(&tag).unwrap() + tag.len()..];
        *w = rest
            .split(',')
            .next()
            .and_then(|x| x.trim().parse().ok())
            .unwrap();
    }
    assert_eq!(per_worker[0] + per_worker[1], flows);
    let lcores = [0, 1].map(|k| {
        let line = text
            .lines()
            .find(|l| l.contains(&format!("worker {k}/2 ")))?;
        let at = line.find("(lcore ")? + "(lcore ".len();
        Some(line[at..].split(')').next()?.to_string())
    });
    // Each worker has half the rate.
    for (k, &w) in per_worker.iter().enumerate() {
        assert!(
            (900..=1100).contains(&w),
            "worker {k} opened {w} of {flows}"
        );
    }
    assert_eq!(num(&r, &["client", "port", "redirect_dropped"]), 0);
    Outcome {
        flows,
        redirected: num(&r, &["client", "port", "rx_redirected"]),
        rx_frames: num(&r, &["client", "port", "rx_frames"]),
        per_worker,
        lcores,
        text,
    }
}

#[test]
fn every_reply_lands_on_its_owning_core_on_a_two_queue_port() {
    let Some(_locks) = lab_access(&["ip", "ethtool", "nginx", "curl"]) else {
        return;
    };

    // Fanout steering: the reply's destination port names its worker.
    let steered = client_run("afpacket:sqc-c0", &[]);
    assert_eq!(
        steered.redirected, 0,
        "with steering every reply lands on its owner"
    );
    // The kernel's flow hash: about half the frames reach the other worker.
    let hashed = client_run("afpacket:sqc-c0", &["--no-steering"]);
    assert!(
        hashed.redirected > 0,
        "without steering frames reach the wrong worker and are redirected"
    );
    // The TPACKET_V3 receive ring in each fanout member: steered the same.
    let ring = client_run("afpacket:sqc-c0,ring", &[]);
    assert_eq!(ring.redirected, 0, "rx ring: every reply on its owner");
    // AF_XDP, a socket per queue: the veth's sender picks the queue.
    let xdp = client_run("afxdp:sqc-c0,copy", &[]);
    eprintln!(
        "2-queue veth, --cores 2, {} flows each: AF_PACKET steered: {} redirected \
         (workers {:?}); AF_PACKET kernel hash: {} redirected (workers {:?}); AF_XDP: {} \
         redirected (workers {:?})",
        steered.flows,
        steered.redirected,
        steered.per_worker,
        hashed.redirected,
        hashed.per_worker,
        xdp.redirected,
        xdp.per_worker
    );
    #[cfg(feature = "dpdk")]
    {
        let eal =
            "--no-huge -m 256 --in-memory -l 0 --no-pci --no-telemetry --log-level=*:warning \
                   --vdev=net_af_packet0,iface=sqc-c0,qpairs=2,framecnt=4096,qdisc_bypass=1";
        let d = client_run("dpdk", &["--eal", eal]);
        eprintln!(
            "DPDK net_af_packet qpairs=2: {} redirected (workers {:?}, lcores {:?})",
            d.redirected, d.per_worker, d.lcores
        );
        // Each worker thread is an lcore of its own, so the mbuf pools' per-core caches
        // serve it (a thread without one goes to the pool's shared ring for every frame).
        let ids: Vec<u32> = d
            .lcores
            .iter()
            .map(|l| match l.as_deref().map(str::parse) {
                Some(Ok(id)) => id,
                _ => panic!("a worker without an lcore: {:?}", d.lcores),
            })
            .collect();
        assert_ne!(ids[0], ids[1], "{ids:?}");
    }
    // Refused with a clear error: more workers than the port has queues.
    let _lab = TwoQueueLab::up(Role::Client);
    let prof = lab::root().join("examples/w1-astf-http.json");
    let (code, text) = squall_in(
        CLI,
        &[
            "run",
            prof.to_str().unwrap(),
            "--iface",
            "afxdp:sqc-c0:1",
            "--mode",
            "client",
            "--cores",
            "2",
        ],
        30,
    );
    assert_ne!(code, 0);
    assert!(text.contains("has 2 rx queue(s)"), "{text}");
}

/// The one-namespace lab of the RSS tests: namespace `sqc-tap` holding the tap `sqt0` with
/// 2 queues and RSS (`squall_port::tap_rss`: the symmetric key Squall's DPDK port gives
/// the device, the drivers' default table). Squall's DPDK `net_tap` port joins the tap
/// (its queues 0 and 1 are the tap's); the kernel side is addressed for `role` as on the
/// 2-queue veth (Squall's client: nginx's 198.18.0.1 and 198.18.48.1, the client pool
/// routed to the tap; Squall's server: the kernel client's 198.18.0.2, the server pool
/// routed to the tap; Squall's IPv6 client: nginx's 2001:db8:62::1/64, the client pool
/// on-link). Removed on drop.
#[cfg(feature = "dpdk")]
struct TapLab {
    rss: squall_port::tap_rss::TapRss,
}

#[cfg(feature = "dpdk")]
const TAP_NS: &str = "sqc-tap";
/// The EAL of Squall's DPDK port on the tap lab: `net_tap` joining the tap `sqt0`.
#[cfg(feature = "dpdk")]
const TAP_EAL: &str = "--no-huge -m 256 --in-memory -l 0 --no-pci --no-telemetry \
                       --log-level=*:warning --vdev=net_tap0,iface=sqt0";

/// [`client_run_on`] with the DPDK port on a fresh tap lab for `role` (and `extra`
/// options); the outcome and what the tap's steering program did.
#[cfg(feature = "dpdk")]
fn tap_client_run(
    role: Role,
    extra: &[&str],
    v6: Option<&str>,
) -> (Outcome, squall_port::tap_rss::TapRssStats) {
    let lab = TapLab::up(role);
    let mut args = vec!["--eal", TAP_EAL];
    args.extend_from_slice(extra);
    let o = client_run_on(TAP_NS, TAP_NS, "dpdk", &args, v6);
    (o, lab.rss.stats())
}

/// nginx's address in the IPv6 tap lab.
#[cfg(feature = "dpdk")]
const TAP_V6_SRV: &str = "2001:db8:62::1";

#[cfg(feature = "dpdk")]
impl TapLab {
    fn up(role: Role) -> TapLab {
        let _ = sh(&["ip", "netns", "del", TAP_NS]);
        assert!(sh(&["ip", "netns", "add", TAP_NS]));
        // The tap is made, and the program attached, from a thread inside the namespace.
        let rss = std::thread::spawn(|| {
            let f = std::fs::File::open(format!("/var/run/netns/{TAP_NS}")).unwrap();
            // SAFETY: setns on a namespace file held open; only this thread moves.
            let rc =
                unsafe { libc::setns(std::os::fd::AsRawFd::as_raw_fd(&f), libc::CLONE_NEWNET) };
            assert_eq!(rc, 0, "setns {TAP_NS}");
            let cfg = squall_port::rss::RssConfig::symmetric(2);
            squall_port::tap_rss::TapRss::attach("sqt0", &cfg).unwrap_or_else(|e| panic!("{e}"))
        })
        .join()
        .expect("tap thread");
        let lab = TapLab { rss };
        let addressing: &[&str] = match role {
            Role::Client => &[
                "ip addr add 198.18.0.1/24 dev sqt0",
                "ip addr add 198.18.48.1/32 dev sqt0",
                "ip route add 198.18.16.0/24 dev sqt0",
            ],
            Role::Server => &[
                "ip addr add 198.18.0.2/24 dev sqt0",
                "ip route add 198.18.48.0/24 dev sqt0",
            ],
            Role::ClientV6 => &["ip -6 addr add 2001:db8:62::1/64 dev sqt0 nodad"],
        };
        let v6 = u8::from(role != Role::ClientV6);
        let setup = [
            &*format!("sysctl -qw net.ipv6.conf.all.disable_ipv6={v6}"),
            "ip link set lo up",
            "ip link set sqt0 up",
        ];
        for cmd in setup.iter().chain(addressing) {
            let mut a = vec!["ip", "netns", "exec", TAP_NS];
            a.extend(cmd.split_whitespace());
            assert!(sh(&a), "{cmd} failed");
        }
        lab
    }
}

#[cfg(feature = "dpdk")]
impl Drop for TapLab {
    fn drop(&mut self) {
        let _ = sh(&["ip", "netns", "del", TAP_NS]);
    }
}

/// `RTE_ETH_RSS_NONFRAG_IPV4_TCP` and `_IPV6_TCP`.
#[cfg(feature = "dpdk")]
const RSS_IPV4_TCP: u64 = 1 << 4;
#[cfg(feature = "dpdk")]
const RSS_IPV6_TCP: u64 = 1 << 10;

/// The RSS hash types each of the 2 workers' report lines gives its device.
#[cfg(feature = "dpdk")]
fn rss_hash_types(text: &str) -> [u64; 2] {
    [0, 1].map(|k| {
        let line = text
            .lines()
            .find(|l| l.contains(&format!("worker {k}/2 ")) && l.contains("RSS hash types "))
            .unwrap_or_else(|| panic!("no device line of worker {k}:\n{text}"));
        let at = line.find("RSS hash types 0x").unwrap() + "RSS hash types 0x".len();
        let hex: String = line[at..]
            .chars()
            .take_while(char::is_ascii_hexdigit)
            .collect();
        u64::from_str_radix(&hex, 16).unwrap()
    })
}

/// `--cores 2` over a DPDK port whose device hashes with RSS (a 2-queue tap with the
/// steering program, see [`TapLab`]): the client picks source ports whose replies hash to
/// their own queue, so no frame is redirected; with `--no-steering` it does not, the
/// device still spreads replies by hash, and about half of them are redirected (counted)
/// while every flow completes.
#[cfg(feature = "dpdk")]
#[test]
fn with_rss_every_reply_lands_on_its_owning_core() {
    let Some(_locks) = lab_access(&["ip", "nginx", "curl"]) else {
        return;
    };
    let (rss, rss_frames) = tap_client_run(Role::Client, &[], None);
    eprintln!(
        "DPDK net_tap, 2 queues with RSS: {} redirected (workers {:?}); tap program {rss_frames:?}",
        rss.redirected, rss.per_worker
    );
    // The device says it hashes IPv4 TCP (so the workers took the RSS path), and it did.
    for h in rss_hash_types(&rss.text) {
        assert_ne!(h & RSS_IPV4_TCP, 0, "{h:#x}");
    }
    // At least the SYN-ACK, the answer (a super-frame per program run where the kernel
    // segments after the queue is chosen) and the FIN of each flow.
    assert!(
        rss_frames.four_tuple >= 2000 * 3,
        "the replies went through the tap's RSS: {rss_frames:?}"
    );
    assert_eq!(rss.redirected, 0, "with RSS every reply lands on its owner");

    let (plain, plain_frames) = tap_client_run(Role::Client, &["--no-steering"], None);
    eprintln!(
        "the same without the RSS port choice (--no-steering): {} of {} received frames \
         redirected (workers {:?}); tap program {plain_frames:?}",
        plain.redirected, plain.rx_frames, plain.per_worker
    );
    // Ports chosen by `port % 2` alone: the hash sends about half the replies to the other
    // worker's queue.
    assert!(
        plain.redirected * 4 > plain.rx_frames && plain.redirected * 4 < plain.rx_frames * 3,
        "about half redirected: {} of {}",
        plain.redirected,
        plain.rx_frames
    );

    // IPv6 flows: the client takes ports by the IPv6 tuple's hash (the device hashes the
    // 36-byte IPv6 input); neighbour discovery lands where the device puts it and is
    // answered there.
    let (v6, v6_frames) = tap_client_run(Role::ClientV6, &[], Some(TAP_V6_SRV));
    eprintln!(
        "IPv6 over the same device: {} redirected (workers {:?}); tap program {v6_frames:?}",
        v6.redirected, v6.per_worker
    );
    // The device was configured to hash IPv6 TCP, so the workers chose by the IPv6 hash.
    for h in rss_hash_types(&v6.text) {
        assert_ne!(h & RSS_IPV6_TCP, 0, "{h:#x}");
    }
    assert!(
        v6_frames.ipv6 >= 2000 * 3,
        "the replies went through the tap's IPv6 RSS: {v6_frames:?}"
    );
    assert_eq!(
        v6.redirected, 0,
        "with RSS every IPv6 reply lands on its owner"
    );
}

/// Squall's server with `--cores 2` over the same RSS device answers `ab -n 400 -c 10`
/// from the kernel in full: each connection's frames hash to one queue, whose worker
/// accepts and serves it (a server on an RSS device has no redirect mesh: a connection
/// whose frames reached two workers would fail), both workers take a share.
#[cfg(feature = "dpdk")]
#[test]
fn with_rss_a_two_worker_server_keeps_each_connection_on_one_queue() {
    let Some(_locks) = lab_access(&["ip", "ab"]) else {
        return;
    };
    let lab = TapLab::up(Role::Server);
    server_run_on(TAP_NS, TAP_NS, "dpdk", &["--eal", TAP_EAL]);
    let st = lab.rss.stats();
    eprintln!(
        "DPDK net_tap with RSS, Squall server --cores 2 vs ab: all answered; tap program {st:?}"
    );
    assert!(
        st.four_tuple >= 400 * 3,
        "ab's frames went through the tap's RSS: {st:?}"
    );
}

/// Cores this process may use (the affinity mask), as Squall counts them.
fn squall_engine_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[test]
fn cores_on_a_real_port_are_checked_before_anything_opens() {
    let prof = lab::root().join("examples/w1-astf-http.json");
    let p = prof.to_str().unwrap();
    // More workers than cores.
    let (code, text) = squall_in(
        "",
        &[
            "run",
            p,
            "--iface",
            "afpacket:lo",
            "--mode",
            "client",
            "--cores",
            "256",
        ],
        10,
    );
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("--cores 256: this process may use"), "{text}");
    // --no-steering needs several workers on a real port.
    let (code, text) = squall_in("", &["run", p, "--no-steering"], 10);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("--no-steering is for --cores N"), "{text}");
}

/// Squall's server with `--cores 2` (and `extra`) on `iface` (sqc-s0) answering `ab -n
/// 400 -c 10` from the kernel of sqc-cli: every request answered in full, both workers
/// accepted connections; returns the frames redirected between the workers.
fn server_run(iface: &str, extra: &[&str]) -> u64 {
    let _lab = TwoQueueLab::up(Role::Server);
    server_run_on(CLI, SRV, iface, extra)
}

/// [`server_run`] on a lab already up: ab in namespace `cli`, Squall in `srv`.
fn server_run_on(cli: &str, srv_ns: &str, iface: &str, extra: &[&str]) -> u64 {
    let dir = tmpdir("cores-srv");
    let prof = lab::root().join("crates/squall/tests/profiles/veth-server.json");
    let json = dir.join("server-run.json");
    let mut args = vec!["--cores", "2"];
    args.extend_from_slice(extra);
    let srv = lab::server_thread(srv_ns, prof.to_str().unwrap(), iface, &args, Some(&json));
    std::thread::sleep(std::time::Duration::from_millis(1200));
    let out = lab::ns(
        cli,
        &[
            "timeout",
            "20",
            "ab",
            "-n",
            "400",
            "-c",
            "10",
            "http://198.18.48.1/",
        ],
    )
    .output()
    .unwrap();
    let abt = String::from_utf8_lossy(&out.stdout).to_string();
    let (code, text) = srv.join().unwrap();
    eprintln!("{abt}\n{text}");
    assert!(out.status.success(), "ab failed: {abt}");
    assert_eq!(lab::ab_field(&abt, "Complete requests"), "400");
    assert_eq!(lab::ab_field(&abt, "Failed requests"), "0");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(num(&r, &["server", "flows", "completed"]), 400);
    // ab may open a connection it closes without a request once done (see tests/veth.rs).
    let early = num(&r, &["server", "flows", "peer_closed_early"]);
    assert!(early <= 10, "{early} connections closed early");
    assert_eq!(num(&r, &["errors"]), early, "{text}");
    assert!(code == 0 || early > 0, "squall server not clean:\n{text}");
    for k in 0..2 {
        let tag = format!("worker {k}/2 (flows opened ");
        let line = text
            .lines()
            .find(|l| l.contains(&tag))
            .unwrap_or_else(|| panic!("{text}"));
        let rest = &line[line.find(&tag).unwrap() + tag.len()..];
        let opened: u64 = rest
            .split(',')
            .next()
            .and_then(|x| x.trim().parse().ok())
            .unwrap();
        assert!(opened >= 100, "worker {k} accepted {opened} of 400");
    }
    assert_eq!(num(&r, &["server", "port", "redirect_dropped"]), 0);
    num(&r, &["server", "port", "rx_redirected"])
}

#[test]
fn a_two_worker_server_answers_ab_with_replies_on_their_owning_core() {
    let Some(_locks) = lab_access(&["ip", "ethtool", "ab"]) else {
        return;
    };
    // Fanout by the peer's source port: each connection's frames reach its owner.
    assert_eq!(
        server_run("afpacket:sqc-s0", &[]),
        0,
        "steered: no frame redirected"
    );
    // The kernel's flow hash: frames redirected, every request still answered.
    let hashed = server_run("afpacket:sqc-s0", &["--no-steering"]);
    assert!(hashed > 0, "kernel hash: frames reach the other worker");
    // AF_XDP, a socket per queue: the redirect by the peer-port hash.
    let xdp = server_run("afxdp:sqc-s0,copy", &[]);
    eprintln!(
        "2-queue veth, Squall server --cores 2 vs ab -n 400 -c 10: AF_PACKET steered 0 \
         redirected, kernel hash {hashed} redirected, AF_XDP {xdp} redirected"
    );
}

/// `curl -s ARGS` in sqc-cli: stdout.
fn cli_curl(args: &[&str]) -> Vec<u8> {
    lab::curl_in(CLI, args).0
}

/// A tool in sqc-cli that must succeed: its stdout.
fn cli_tool(args: &[&str]) -> String {
    lab::tool_in(CLI, args)
}

/// `squall serve --cores 2` (and `extra`) on `iface` (sqc-s0): curl byte-exact on several
/// connections, ab and wrk without a failure, SIGTERM, then the summed report: both
/// workers answered, the total is every client's requests, one access-log line per answer
/// (two writers on one file); returns the frames redirected between the workers.
fn serve_run(iface: &str, extra: &[&str]) -> u64 {
    use std::time::{Duration, Instant};
    let dir = tmpdir("cores-serve");
    let www = dir.join("www");
    std::fs::create_dir_all(&www).unwrap();
    let mut x = 0x9e37_79b9u32;
    let big: Vec<u8> = (0..(1 << 20))
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect();
    let page = b"<html><body>two workers</body></html>\n".to_vec();
    std::fs::write(www.join("big.bin"), &big).unwrap();
    std::fs::write(www.join("index.html"), &page).unwrap();
    let log = dir.join("access.log");
    let out_json = dir.join("serve.json");
    let _lab = TwoQueueLab::up(Role::Server);
    let mut args = vec![
        lab::squall_bin(),
        "serve",
        "--cores",
        "2",
        "--root",
        www.to_str().unwrap(),
        "--listen",
        "198.18.48.1:80",
        "--iface",
        iface,
        "--peer-ip",
        "198.18.0.2",
        "--route",
        "/ping return 200 \"pong\"",
        "--access-log",
        log.to_str().unwrap(),
        "--drain-sec",
        "5",
    ];
    args.extend_from_slice(extra);
    let mut srv = lab::Proc(
        lab::ns(SRV, &args)
            .stdout(std::fs::File::create(&out_json).unwrap())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start squall serve"),
    );
    let t0 = Instant::now();
    while cli_curl(&["-m", "1", "http://198.18.48.1/ping"]) != b"pong" {
        assert!(
            t0.elapsed() < Duration::from_secs(15),
            "squall serve --cores 2 did not come up"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let mut requests = 1u64;
    // A connection each (source ports spread over both workers): byte-exact.
    for _ in 0..8 {
        let body = cli_curl(&["http://198.18.48.1/big.bin"]);
        assert!(body == big, "big.bin differs ({} bytes)", body.len());
        assert_eq!(cli_curl(&["http://198.18.48.1/"]), page);
        requests += 2;
    }
    let ab = cli_tool(&[
        "ab",
        "-n",
        "2000",
        "-c",
        "10",
        "http://198.18.48.1/index.html",
    ]);
    assert_eq!(lab::ab_field(&ab, "Complete requests"), "2000", "{ab}");
    assert_eq!(lab::ab_field(&ab, "Failed requests"), "0", "{ab}");
    assert_eq!(
        lab::ab_field(&ab, "Document Length"),
        format!("{} bytes", page.len())
    );
    assert!(!ab.contains("Non-2xx"), "{ab}");
    requests += 2000;
    let wrk = cli_tool(&["wrk", "-t1", "-c8", "-d2s", "http://198.18.48.1/big.bin"]);
    assert!(
        !wrk.contains("Non-2xx") && !wrk.contains("Socket errors"),
        "{wrk}"
    );
    let n: u64 = wrk
        .lines()
        .find_map(|l| l.trim().split_once(" requests in "))
        .map(|(n, _)| n.parse().unwrap())
        .unwrap_or_else(|| panic!("{wrk}"));
    assert!(n > 0, "{wrk}");
    // Graceful stop reaches both workers.
    assert!(Command::new("kill")
        .args(["-TERM", &srv.0.id().to_string()])
        .status()
        .unwrap()
        .success());
    let (doc, err) = serve_report(&mut srv, &out_json);
    eprintln!("squall serve --cores 2 over {iface} {extra:?}: {doc}\n{err}");
    let get = |k: &str| doc[k].as_u64().unwrap_or_else(|| panic!("{k} in {doc}"));
    assert_eq!(get("workers"), 2, "{doc}");
    let per: Vec<u64> = doc["worker_requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    let answered = get("requests");
    assert_eq!(per.iter().sum::<u64>(), answered, "{doc}");
    for (k, r) in per.iter().enumerate() {
        assert!(*r >= 100, "worker {k} answered {r} of {answered}: {doc}");
    }
    // wrk counts what it completed; a few more may have been answered as it stopped.
    assert!(
        answered >= requests + n && answered <= requests + n + 20,
        "{doc} vs {requests} + wrk {n}"
    );
    assert_eq!(get("status_2xx"), answered, "{doc}");
    assert_eq!(get("parse_errors"), 0, "{doc}");
    assert_eq!(get("cut_at_stop"), 0, "{doc}");
    assert_eq!(get("refused"), 0, "{doc}");
    let lines = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        lines.lines().count() as u64,
        answered,
        "one access-log line per answer"
    );
    assert!(
        lines
            .lines()
            .all(|l| l.starts_with("198.18.0.2 - - [") && l.ends_with('"')),
        "whole lines only"
    );
    get("rx_redirected")
}

#[test]
fn squall_serve_with_two_workers_answers_curl_ab_wrk_byte_exact() {
    let Some(_locks) = lab_access(&["ip", "ethtool", "curl", "ab", "wrk"]) else {
        return;
    };
    // Fanout by the peer's source port: each connection's frames reach its owner.
    assert_eq!(
        serve_run("afpacket:sqc-s0", &[]),
        0,
        "steered: no frame redirected"
    );
    // The kernel's flow hash: frames redirected, counted, every request still answered.
    let hashed = serve_run("afpacket:sqc-s0", &["--no-steering"]);
    assert!(hashed > 0, "kernel hash: frames reach the other worker");
    // AF_XDP, a socket per queue: the redirect by the peer-port hash.
    let xdp = serve_run("afxdp:sqc-s0,copy", &[]);
    eprintln!(
        "2-queue veth, squall serve --cores 2: AF_PACKET steered 0 redirected, kernel hash \
         {hashed} redirected, AF_XDP {xdp} redirected"
    );
}
