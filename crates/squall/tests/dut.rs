//! T-dut lab tests (`scripts/lab.sh up dut|dut-nat`): one Squall process owns a client
//! port and a server port (AF_PACKET on sq-c0 and sq-s0 in sq-tg), and a Linux namespace
//! between them routes — and in the second test also masquerades — every flow. Both
//! sides are Squall's, so every invariant of the in-memory wire is checked: every flow
//! completes, bytes sent == bytes received both ways. Needs root, ip, ethtool (and nft
//! for the NAT case); skipped with the reason printed otherwise. The NAT case also runs
//! with `--cores 2` (a worker per fanout member of each port, no frame redirected).

mod lab;

use lab::{num, skip, squall_in, tmpdir, Lab, LAB};

/// Both ports of the T-dut lab (AF_PACKET) and the DUT's address on each link.
const DUT_PORTS: &[&str] = &[
    "--client-iface",
    "afpacket:sq-c0",
    "--server-iface",
    "afpacket:sq-s0",
    "--client-gw",
    "198.18.0.1",
    "--server-gw",
    "198.19.0.1",
];
use serde_json::Value;

/// W1 through the DUT for 3 s at 1,000 flows/s with `cores` workers on AF_PACKET ports;
/// the run's JSON result.
fn w1_through_dut(topology: &str, cores: u32) -> Value {
    w1_through_dut_on(topology, cores, "afpacket")
}

/// [`w1_through_dut`] on ports of `kind` (`afpacket`, `afxdp`) for both sides.
fn w1_through_dut_on(topology: &str, cores: u32, kind: &str) -> Value {
    let (cport, sport) = (format!("{kind}:sq-c0"), format!("{kind}:sq-s0"));
    w1_through_dut_ports(topology, cores, &cport, &sport, &[])
}

/// [`w1_through_dut`] on the ports `cport` and `sport`, with `extra` arguments.
fn w1_through_dut_ports(
    topology: &str,
    cores: u32,
    cport: &str,
    sport: &str,
    extra: &[&str],
) -> Value {
    w1_through_prepared_dut(topology, cores, cport, sport, extra, &[])
}

/// [`w1_through_dut_ports`] with commands run in the DUT's namespace once the lab is up
/// (`prep`: each an argument list, e.g. `ip link set ...`).
fn w1_through_prepared_dut(
    topology: &str,
    cores: u32,
    cport: &str,
    sport: &str,
    extra: &[&str],
    prep: &[&[&str]],
) -> Value {
    let _g = LAB.lock().unwrap_or_else(|e| e.into_inner());
    let _lab = Lab::up(&[topology]);
    for args in prep {
        let st = lab::ns("sq-dut", args).status().unwrap();
        assert!(st.success(), "in sq-dut: {args:?}");
    }
    let dir = tmpdir(topology);
    let json = dir.join("run.json");
    let profile = lab::root().join("crates/squall/tests/profiles/dut-w1.json");
    let cores = cores.to_string();
    let mut args = vec![
        "run",
        profile.to_str().unwrap(),
        "--client-iface",
        cport,
        "--server-iface",
        sport,
        "--client-gw",
        "198.18.0.1",
        "--server-gw",
        "198.19.0.1",
        "--duration",
        "3",
        "--mult",
        "1000",
        "--cores",
        &cores,
        "-q",
        "--json",
        json.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let (code, out) = squall_in("sq-tg", &args, 60);
    assert_eq!(
        code, 0,
        "squall through the DUT ({topology}) failed:\n{out}"
    );
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    // Every flow opened completed on both sides, and the bytes agree both ways.
    assert_eq!(num(&v, &["client", "flows", "started"]), 3000, "{out}");
    assert_eq!(num(&v, &["client", "flows", "completed"]), 3000);
    assert_eq!(num(&v, &["server", "flows", "accepted"]), 3000);
    assert_eq!(num(&v, &["server", "flows", "completed"]), 3000);
    assert_eq!(
        num(&v, &["client", "tcp", "tcps_sndbyte"]),
        num(&v, &["server", "tcp", "tcps_rcvbyte"])
    );
    assert_eq!(
        num(&v, &["server", "tcp", "tcps_sndbyte"]),
        num(&v, &["client", "tcp", "tcps_rcvbyte"])
    );
    assert_eq!(num(&v, &["server", "tcp", "tcps_sndbyte"]), 3000 * 32_768);
    assert_eq!(v["clean"], Value::Bool(true), "{out}");
    let n: usize = cores.parse().unwrap();
    lab::check_real_series(&v, n);
    v
}

#[test]
fn every_flow_completes_through_a_routing_dut() {
    if let Some(why) = skip(&["ip", "ethtool"]) {
        eprintln!("skipped: {why}");
        return;
    }
    let v = w1_through_dut("dut", 1);
    // Routed, not translated: the server saw the client pool's own addresses.
    assert_eq!(num(&v, &["server", "translated"]), 0);
}

/// Path MTU discovery through the DUT (RFC 1191): its link toward the clients carries
/// 1,400-byte packets while every other link carries 1,500, so the server's full-sized
/// segments (DF set) are refused by the DUT with ICMP "fragmentation needed"; the server
/// lowers its MSS, sends the flight again in segments that fit, and every flow completes.
/// The DUT sends as many errors as it is asked to (its ICMP rate limits off): one per
/// client address at least, the server learning each destination's path.
#[test]
fn every_flow_completes_through_a_dut_with_a_smaller_mtu() {
    if let Some(why) = skip(&["ip", "ethtool"]) {
        eprintln!("skipped: {why}");
        return;
    }
    let v = w1_through_prepared_dut(
        "dut",
        1,
        "afpacket:sq-c0",
        "afpacket:sq-s0",
        &[],
        &[
            &["ip", "link", "set", "sq-dc0", "mtu", "1400"],
            &["sysctl", "-qw", "net.ipv4.icmp_ratelimit=0"],
            &["sysctl", "-qw", "net.ipv4.icmp_msgs_per_sec=1000000"],
        ],
    );
    let lowered = num(&v, &["server", "tcp", "tcps_pmtu_lowered"]);
    eprintln!(
        "server: pmtu_lowered {lowered}, icmp_rcvd {}, icmp_oow {}, sndrexmitpack {}",
        num(&v, &["server", "tcp", "tcps_icmp_rcvd"]),
        num(&v, &["server", "tcp", "tcps_icmp_oow"]),
        num(&v, &["server", "tcp", "tcps_sndrexmitpack"])
    );
    assert!(lowered >= 200, "MSS lowered {lowered} times");
    assert!(num(&v, &["server", "tcp", "tcps_icmp_rcvd"]) >= lowered);
    // The client's segments are small: nothing to learn on its side.
    assert_eq!(num(&v, &["client", "tcp", "tcps_pmtu_lowered"]), 0);
}

/// The same NAT run with both ports over AF_XDP (copy mode on the veth): the XDP
/// program of each port takes that side's addresses, and the run says so.
#[test]
fn every_flow_completes_through_a_nat_on_af_xdp_ports() {
    if let Some(why) = skip(&["ip", "ethtool", "nft"]) {
        eprintln!("skipped: {why}");
        return;
    }
    let v = w1_through_dut_on("dut-nat", 1, "afxdp");
    assert_eq!(num(&v, &["server", "translated"]), 3000);
    assert_eq!(v["server"]["translated_from"], "198.19.0.1");
    let mode = v["mode"].as_str().unwrap();
    assert!(
        mode.contains("afxdp:sq-c0:0 (client) and afxdp:sq-s0:0 (server)"),
        "{mode}"
    );
}

/// TRex's own setup: both ports over DPDK (the `net_af_packet` PMD on each veth, one EAL,
/// no hugepages), through the NAT.
#[cfg(feature = "dpdk")]
#[test]
fn every_flow_completes_through_a_nat_on_dpdk_ports() {
    if let Some(why) = skip(&["ip", "ethtool", "nft"]) {
        eprintln!("skipped: {why}");
        return;
    }
    let eal = "--no-huge -m 512 --in-memory -l 0 --no-pci --no-telemetry --log-level=*:warning \
               --vdev=net_af_packet0,iface=sq-c0,framecnt=4096,qdisc_bypass=1 \
               --vdev=net_af_packet1,iface=sq-s0,framecnt=4096,qdisc_bypass=1";
    let v = w1_through_dut_ports(
        "dut-nat",
        1,
        "dpdk:net_af_packet0",
        "dpdk:net_af_packet1",
        &["--eal", eal],
    );
    assert_eq!(num(&v, &["server", "translated"]), 3000);
    assert_eq!(v["server"]["translated_from"], "198.19.0.1");
    let mode = v["mode"].as_str().unwrap();
    assert!(
        mode.contains("dpdk:net_af_packet0 (client) and dpdk:net_af_packet1 (server)"),
        "{mode}"
    );
}

#[test]
fn every_flow_completes_through_a_nat_and_the_server_sees_the_translated_address() {
    if let Some(why) = skip(&["ip", "ethtool", "nft"]) {
        eprintln!("skipped: {why}");
        return;
    }
    let v = w1_through_dut("dut-nat", 1);
    assert_eq!(num(&v, &["server", "translated"]), 3000);
    assert_eq!(v["server"]["translated_from"], "198.19.0.1");
    assert_eq!(num(&v, &["client", "translated"]), 0);
}

/// `--cores 2` through the NAT: each worker owns one fanout member of each port (client
/// port steered by our source port, server port by the peer-port hash of the translated
/// source port); every flow completes and no frame has to move between the workers.
#[test]
fn two_workers_through_a_nat_keep_every_flow_on_its_core() {
    if let Some(why) = skip(&["ip", "ethtool", "nft"]) {
        eprintln!("skipped: {why}");
        return;
    }
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        squall_port::lab::skipped("needs 2 cores for 2 workers");
        return;
    }
    let v = w1_through_dut("dut-nat", 2);
    assert_eq!(num(&v, &["server", "translated"]), 3000);
    assert!(v["mode"].as_str().unwrap().contains("2 workers"));
    assert_eq!(num(&v, &["client", "port", "rx_redirected"]), 0);
    assert_eq!(num(&v, &["server", "port", "rx_redirected"]), 0);
}

/// A firewall's REJECT (RFC 1122 §4.2.3.9): the DUT answers every SYN to port 80 with
/// ICMP port unreachable; each connection attempt ends at once as `unreachable` (not
/// after its SYN retransmissions as a timeout), none reaches the server, and the run
/// reports the errors.
#[test]
fn connection_attempts_rejected_by_the_dut_end_as_unreachable() {
    if let Some(why) = skip(&["ip", "ethtool", "nft"]) {
        eprintln!("skipped: {why}");
        return;
    }
    let _g = LAB.lock().unwrap_or_else(|e| e.into_inner());
    let _lab = Lab::up(&["dut"]);
    let mut nft = lab::ns("sq-dut", &["nft", "-f", "-"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    nft.stdin
        .take()
        .unwrap()
        .write_all(
            b"table inet sq_fw {\n chain forward {\n  type filter hook forward priority 0; \
              policy accept;\n  tcp dport 80 reject with icmpx type port-unreachable\n }\n}\n",
        )
        .unwrap();
    assert!(nft.wait().unwrap().success());
    let dir = tmpdir("dut-reject");
    let json = dir.join("run.json");
    let profile = lab::root().join("crates/squall/tests/profiles/dut-w1.json");
    let (code, out) = squall_in(
        "sq-tg",
        &[
            &["run", profile.to_str().unwrap()][..],
            DUT_PORTS,
            &[
                "--duration",
                "2",
                "--mult",
                "200",
                "-q",
                "--json",
                json.to_str().unwrap(),
            ],
        ]
        .concat(),
        60,
    );
    assert_ne!(code, 0, "a run whose every flow failed passed:\n{out}");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let started = num(&v, &["client", "flows", "started"]);
    assert_eq!(started, 400, "{out}");
    assert_eq!(num(&v, &["client", "flows", "aborted"]), started);
    assert_eq!(num(&v, &["client", "flows", "unreachable"]), started);
    assert_eq!(num(&v, &["client", "flows", "timeouts"]), 0);
    assert_eq!(num(&v, &["client", "tcp", "tcps_icmp_drops"]), started);
    assert_eq!(num(&v, &["client", "tcp", "tcps_rexmttimeo"]), 0);
    assert_eq!(num(&v, &["server", "flows", "accepted"]), 0);
}

/// SIGINT stops a run on real ports as on the memory wire: the run asked for 60 s is
/// interrupted after 3 s (GNU timeout sends the signal), opens no more flows, lets those
/// in flight complete through the DUT, and reports (exit 0, every flow complete); its
/// progress lines show the flows as they complete.
#[test]
fn sigint_stops_a_run_on_real_ports_and_reports() {
    if let Some(why) = skip(&["ip", "ethtool", "timeout"]) {
        eprintln!("skipped: {why}");
        return;
    }
    let _g = LAB.lock().unwrap_or_else(|e| e.into_inner());
    let _lab = Lab::up(&["dut"]);
    let dir = tmpdir("dut-sigint");
    let json = dir.join("run.json");
    let profile = lab::root().join("crates/squall/tests/profiles/dut-w1.json");
    let t0 = std::time::Instant::now();
    let out = lab::squall_interrupted(
        "sq-tg",
        3,
        &[
            &["run", profile.to_str().unwrap()][..],
            DUT_PORTS,
            &[
                "--duration",
                "60",
                "--mult",
                "500",
                "--plain",
                "--json",
                json.to_str().unwrap(),
            ],
        ]
        .concat(),
    )
    .output()
    .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        t0.elapsed().as_secs() < 20,
        "took {:?}: {text}",
        t0.elapsed()
    );
    assert!(text.contains("stopped early"), "{text}");
    // The progress lines read the worker's figures (a single DUT worker published them
    // where nothing read them: "0 done" throughout).
    let done_max = text
        .lines()
        .filter(|l| l.starts_with('['))
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let k = w.iter().position(|&x| x == "done")?;
            w.get(k.checked_sub(1)?)?.parse::<u64>().ok()
        })
        .max();
    assert!(done_max.is_some_and(|d| d > 0), "{text}");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let gen = v["generation_sec"].as_f64().unwrap();
    assert!(gen < 5.0, "generation {gen} s");
    let started = num(&v, &["client", "flows", "started"]);
    assert!(started >= 500, "{started} flows: {text}");
    assert_eq!(num(&v, &["client", "flows", "completed"]), started);
    assert_eq!(num(&v, &["server", "flows", "completed"]), started);
    assert_eq!(v["clean"], Value::Bool(true), "{text}");
}

/// `squall daemon` on the DUT's two real ports (TRex's workflow: its control API drives
/// the ports): a run until stopped shows live figures, takes a rate change, stops with a
/// drain and ends clean, every flow complete on both sides; a second run on two workers;
/// what only the in-memory wire can do (simulation, impairment) is refused.
#[test]
fn the_daemon_runs_on_the_dut_ports() {
    use std::io::{BufRead, BufReader, Write};
    if let Some(why) = skip(&["ip", "ethtool"]) {
        eprintln!("skipped: {why}");
        return;
    }
    let _g = LAB.lock().unwrap_or_else(|e| e.into_inner());
    let _lab = Lab::up(&["dut"]);
    let dir = tmpdir("dut-daemon");
    let sock = dir.join("d.sock");
    let mut child = lab::ns(
        "sq-tg",
        &[
            &[
                lab::squall_bin(),
                "daemon",
                "--unix",
                sock.to_str().unwrap(),
            ][..],
            DUT_PORTS,
            &[],
        ]
        .concat(),
    )
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::null())
    .spawn()
    .unwrap();
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let _child = Kill(child);
    assert!(line.starts_with("listening "), "{line:?}");
    let s = std::os::unix::net::UnixStream::connect(&sock).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(60)))
        .unwrap();
    let mut rd = BufReader::new(s.try_clone().unwrap());
    let mut wr = s;
    let mut id = 0;
    let mut call = |method: &str, params: Value| -> Value {
        id += 1;
        let req =
            serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(wr, "{req}").unwrap();
        let mut l = String::new();
        rd.read_line(&mut l).unwrap();
        serde_json::from_str(&l).unwrap()
    };
    let ok = |r: Value| -> Value {
        assert!(r.get("error").is_none(), "{r}");
        r["result"].clone()
    };
    let st = ok(call("get_status", serde_json::json!({})));
    assert_eq!(
        st["ports"],
        "afpacket:sq-c0 (client) and afpacket:sq-s0 (server), DUT between"
    );
    let profile = lab::root().join("crates/squall/tests/profiles/dut-w1.json");
    ok(call("load_profile", serde_json::json!({"path": profile})));
    for bad in [
        serde_json::json!({"sim": true, "duration": 1}),
        serde_json::json!({"impair": "loss=0.01"}),
    ] {
        let r = call("start", bad.clone());
        assert_eq!(r["error"]["code"], -32602, "{bad}: {r}");
    }
    let r = ok(call(
        "start",
        serde_json::json!({"mult": 300, "duration": -1}),
    ));
    assert_eq!(r["state"], "running");
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let st = ok(call("get_stats", serde_json::json!({})));
    let a = num(&st, &["client", "flows", "started"]);
    assert!(a > 0, "no live figures: {st}");
    assert!(
        st["mode"]
            .as_str()
            .is_some_and(|m| m.contains("DUT between")),
        "{}",
        st["mode"]
    );
    ok(call("update", serde_json::json!({"mult": 600})));
    std::thread::sleep(std::time::Duration::from_millis(1000));
    assert_eq!(
        ok(call("stop", serde_json::json!({"drain": true})))["state"],
        "stopping"
    );
    let w = ok(call("wait_on_traffic", serde_json::json!({"timeout": 30})));
    assert_eq!(w["finished"], true, "{w}");
    let st = ok(call("get_stats", serde_json::json!({})));
    let started = num(&st, &["client", "flows", "started"]);
    assert!(started > a, "{st}");
    assert_eq!(num(&st, &["client", "flows", "completed"]), started);
    assert_eq!(num(&st, &["server", "flows", "completed"]), started);
    assert_eq!(st["clean"], Value::Bool(true), "{st}");
    // Two workers, each a fanout member of both ports.
    ok(call(
        "start",
        serde_json::json!({"mult": 500, "duration": 1, "cores": 2}),
    ));
    let w = ok(call("wait_on_traffic", serde_json::json!({"timeout": 30})));
    assert_eq!(w["finished"], true, "{w}");
    let st = ok(call("get_stats", serde_json::json!({})));
    assert_eq!(num(&st, &["client", "flows", "started"]), 500, "{st}");
    assert_eq!(num(&st, &["server", "flows", "completed"]), 500, "{st}");
    assert_eq!(st["clean"], Value::Bool(true), "{st}");
    ok(call("shutdown", serde_json::json!({})));
}

/// A failover of the device under test in the middle of a run on 2 workers: its
/// client-side interface takes another MAC and announces it (`arping -U`, a gratuitous
/// ARP). The ports' fanout puts ARP on one worker's queue; that worker moves the next hop
/// and the other follows it through the shared next hop. Every flow completes (frames to
/// the old MAC would be dropped by the DUT's kernel, stalling the flows of a worker that
/// did not follow), and the client port's lines say where the move was heard and where
/// it was followed.
#[test]
fn every_worker_follows_a_failover_of_the_dut() {
    if let Some(why) = skip(&["ip", "ethtool", "arping"]) {
        eprintln!("skipped: {why}");
        return;
    }
    let _g = LAB.lock().unwrap_or_else(|e| e.into_inner());
    let _lab = Lab::up(&["dut"]);
    let new_mac = "02:00:5e:00:01:01";
    let mut run = DutMacChange::start(
        "dut-failover",
        &["--duration", "5", "--mult", "300", "--cores", "2"],
        new_mac,
    );
    // (unsolicited: no reply comes, and arping's status says so; the move in Squall's
    // lines below says the announcement went)
    let _ = lab::ns(
        "sq-dut",
        &["arping", "-U", "-c", "2", "-I", "sq-dc0", "198.18.0.1"],
    )
    .output()
    .unwrap();
    let (v, text) = run.finish();
    let started = num(&v, &["client", "flows", "started"]);
    assert_eq!(started, 1_500, "{text}");
    assert_eq!(
        num(&v, &["client", "flows", "completed"]),
        started,
        "{text}"
    );
    assert_eq!(
        num(&v, &["server", "flows", "completed"]),
        started,
        "{text}"
    );
    assert_eq!(v["clean"], Value::Bool(true), "{text}");
    let heard =
        format!("client port: next hop moved 1 (followed from another worker 0; now {new_mac})");
    let followed =
        format!("client port: next hop moved 0 (followed from another worker 1; now {new_mac})");
    assert!(
        text.contains(&heard) && text.contains(&followed),
        "one worker heard the move, the other followed it:\n{text}"
    );
}

/// A W1 run through the DUT (`extra` options) whose client-side interface takes MAC
/// `new_mac` 2.5 s in (the caller may announce it).
struct DutMacChange {
    run: lab::Proc,
    json: std::path::PathBuf,
    err: std::path::PathBuf,
    /// Removed when the test ends.
    _dir: lab::TmpDir,
}

impl DutMacChange {
    fn start(name: &str, extra: &[&str], new_mac: &str) -> Self {
        let dir = tmpdir(name);
        let (json, err) = (dir.join("run.json"), dir.join("run.err"));
        let profile = lab::root().join("crates/squall/tests/profiles/dut-w1.json");
        let mut args = vec![lab::squall_bin(), "run", profile.to_str().unwrap()];
        args.extend_from_slice(DUT_PORTS);
        args.extend_from_slice(extra);
        args.extend_from_slice(&["-q", "--json", json.to_str().unwrap()]);
        let run = lab::Proc(
            lab::ns("sq-tg", &args)
                .stdout(std::process::Stdio::null())
                .stderr(std::fs::File::create(&err).unwrap())
                .spawn()
                .expect("start squall"),
        );
        std::thread::sleep(std::time::Duration::from_millis(2_500));
        // The DUT must already know every client address (dut-w1.json: 200 of them)
        // before its MAC moves: an ARP request it sends from the new MAC for an address
        // not yet used (a slow start) would tell Squall the move by itself.
        let t0 = std::time::Instant::now();
        while dut_neighbours("198.18.16.") < 200 {
            assert!(
                t0.elapsed() < std::time::Duration::from_secs(20),
                "the DUT never learnt every client address"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let st = lab::ns(
            "sq-dut",
            &["ip", "link", "set", "sq-dc0", "address", new_mac],
        )
        .status()
        .unwrap();
        assert!(st.success(), "the DUT's new MAC");
        DutMacChange {
            run,
            json,
            err,
            _dir: dir,
        }
    }

    /// The run's JSON and its stderr, once it ended successfully.
    fn finish(&mut self) -> (Value, String) {
        let code = self.run.0.wait().unwrap();
        let text = std::fs::read_to_string(&self.err).unwrap();
        assert!(code.success(), "squall through the MAC change:\n{text}");
        let json = std::fs::read_to_string(&self.json).unwrap();
        (serde_json::from_str(&json).unwrap(), text)
    }
}

/// How many neighbours with an address starting `prefix` the DUT's client side has
/// resolved.
fn dut_neighbours(prefix: &str) -> usize {
    let out = lab::ns("sq-dut", &["ip", "-4", "neigh", "show", "dev", "sq-dc0"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with(prefix) && l.contains("lladdr"))
        .count()
}

/// The DUT replaced mid-run: its client-side address moves to another MAC without any
/// announcement (`ip link set ... address`, the kernel's arp_notify off). Squall's client
/// port stops hearing the old MAC; one reachable time later (`--reachable-sec 1`) it
/// probes it by unicast ARP three times, unanswered, then asks by broadcast, and the
/// DUT's answer moves the next hop to the new MAC. Every flow completes (the stalled ones
/// by their retransmissions), and the client port's line says what happened.
#[test]
fn a_replaced_dut_is_found_at_its_new_mac() {
    if let Some(why) = skip(&["ip", "ethtool"]) {
        eprintln!("skipped: {why}");
        return;
    }
    let _g = LAB.lock().unwrap_or_else(|e| e.into_inner());
    let _lab = Lab::up(&["dut"]);
    let new_mac = "02:00:5e:00:01:02";
    let args = [
        "--duration",
        "8",
        "--mult",
        "100",
        "--reachable-sec",
        "1",
        "--drain-sec",
        "10",
    ];
    let (v, text) = DutMacChange::start("dut-replaced", &args, new_mac).finish();
    let started = num(&v, &["client", "flows", "started"]);
    assert_eq!(started, 800, "{text}");
    assert_eq!(
        num(&v, &["client", "flows", "completed"]),
        started,
        "{text}"
    );
    assert_eq!(v["clean"], Value::Bool(true), "{text}");
    assert_eq!(num(&v, &["client", "port", "next_hop_moved"]), 1, "{text}");
    assert_eq!(
        num(&v, &["client", "port", "next_hop_unreachable"]),
        1,
        "{text}"
    );
    assert!(
        num(&v, &["client", "port", "next_hop_probes"]) >= 4,
        "{text}"
    );
    let line = text
        .lines()
        .find(|l| l.contains("client port:") && l.contains("next hop moved"))
        .unwrap_or_else(|| panic!("no move on the client port's line:\n{text}"));
    eprintln!("{line}");
    assert!(
        line.contains(&format!(
            "next hop moved 1 (followed from another worker 0; now {new_mac})"
        )) && line.contains("unanswered at its MAC 1, looked for by broadcast 1)"),
        "found by broadcast after three unicast probes:\n{line}"
    );
}
