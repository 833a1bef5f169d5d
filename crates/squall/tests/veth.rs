//! Lab tests on a real interface (`scripts/lab.sh`: namespaces sq-cli / sq-srv joined by a
//! veth, 198.18.0.0/15 only): Squall in client-only mode over AF_PACKET or AF_XDP against a
//! real nginx (whose access log must agree on the count), and in server-only mode
//! answering real curl (and ab and wrk if installed). The AF_XDP runs are W1-sized (10,000
//! flows) and the wire is captured in the peer namespace and checked with tshark (no
//! malformed packet, no bad checksum, no RST). Each test needs root, ip, ethtool, nginx and
//! curl, and is skipped (with the reason printed) otherwise. The lab is always torn down
//! (guard), spawned servers and captures are stopped by pid.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;

mod lab;
use lab::{
    ab_field, fragmented_udp_client, have, nginx_squall_requests, nginx_w1, ns, num, python_in,
    root, server_thread, skip, squall_bin, squall_in, tmpdir, w1_client_profile, Capture, Lab,
    Proc, LAB,
};

/// One client-side lab run: the port, the rate (x the profile's 100 CPS), the seconds of
/// generation, and whether the wire is captured and checked.
struct ClientCase {
    iface: &'static str,
    /// `--eal` arguments (DPDK).
    eal: Option<&'static str>,
    /// `tc netem` on the Linux side, both directions (loss, delay, reordering).
    netem: bool,
    mult: u32,
    secs: u32,
    capture: bool,
    /// The server end keeps its transmit offloads (TSO/GSO): nginx's answers reach Squall
    /// as super-packets of up to 64 KiB.
    server_offloads: bool,
    /// The veth's MTU on both ends (the lab's is 1500); Squall's MSS follows it.
    mtu: u16,
}

/// W1 over AF_PACKET: 10,000 flows at 1,000 CPS, the wire captured and checked.
#[test]
fn client_only_squall_against_nginx() {
    client_against_nginx(&ClientCase {
        iface: "afpacket:sq-cli0",
        eal: None,
        netem: false,
        mult: 10,
        secs: 10,
        capture: true,
        server_offloads: false,
        mtu: 1500,
    });
}

/// A lossy, reordering, delaying link with a Linux peer: `tc netem` on sq-srv0's egress
/// (nginx -> Squall: 1 % loss, 5 ms +- 2 ms delay, a quarter of the frames sent early, so
/// reordered) and, through an ifb device, on its ingress (Squall -> nginx: 1 % loss, 2 ms
/// delay). 2,000 W1 flows; every one still completes, every byte received.
#[test]
fn client_only_squall_against_nginx_through_netem() {
    client_against_nginx(&ClientCase {
        iface: "afpacket:sq-cli0",
        eal: None,
        netem: true,
        mult: 5,
        secs: 4,
        capture: false,
        server_offloads: false,
        mtu: 1500,
    });
}

/// The same over DPDK: the `net_af_packet` PMD on the lab's veth, no hugepages, 10,000
/// flows.
#[cfg(feature = "dpdk")]
#[test]
fn client_only_squall_over_dpdk_against_nginx() {
    client_against_nginx(&ClientCase {
        iface: "dpdk",
        netem: false,
        eal: Some(
            "--no-huge --in-memory -l 0 --no-pci --no-telemetry --log-level=*:warning \
             --vdev=net_af_packet0,iface=sq-cli0,framecnt=8192,qdisc_bypass=1",
        ),
        mult: 10,
        secs: 10,
        capture: true,
        server_offloads: false,
        mtu: 1500,
    });
}

/// The `recvmmsg` receive path (the default is the TPACKET_V2 frame ring).
#[test]
fn client_only_squall_against_nginx_recvmmsg() {
    client_against_nginx(&ClientCase {
        iface: "afpacket:sq-cli0,recvmmsg",
        eal: None,
        netem: false,
        mult: 1,
        secs: 2,
        capture: false,
        server_offloads: false,
        mtu: 1500,
    });
}

/// The TPACKET_V3 block ring.
#[test]
fn client_only_squall_against_nginx_rx_ring() {
    client_against_nginx(&ClientCase {
        iface: "afpacket:sq-cli0,ring",
        eal: None,
        netem: false,
        mult: 1,
        secs: 2,
        capture: false,
        server_offloads: false,
        mtu: 1500,
    });
}

/// nginx's kernel with the veth's transmit offloads (TSO/GSO, checksum) on its end: its
/// answers cross as super-packets, which the frame ring takes whole with `superframes`.
#[test]
fn client_only_squall_takes_nginx_super_packets_whole() {
    client_against_nginx(&ClientCase {
        iface: "afpacket:sq-cli0,superframes",
        eal: None,
        netem: false,
        mult: 5,
        secs: 4,
        capture: false,
        server_offloads: true,
        mtu: 1500,
    });
}

/// Jumbo frames: the veth at MTU 9000 on both ends, Squall's MSS 8960 (AF_PACKET's frames
/// grow to fit the MTU): 1,000 flows, each answer in ~4 segments instead of ~23.
#[test]
fn client_only_squall_against_nginx_jumbo_mtu() {
    client_against_nginx(&ClientCase {
        iface: "afpacket:sq-cli0",
        eal: None,
        netem: false,
        mult: 5,
        secs: 2,
        capture: true,
        server_offloads: false,
        mtu: 9000,
    });
}

/// W1 over AF_XDP (copy mode: veth has no zero-copy): 10,000 flows at 1,000 CPS.
#[test]
fn client_only_squall_over_afxdp_against_nginx_w1() {
    client_against_nginx(&ClientCase {
        iface: "afxdp:sq-cli0",
        eal: None,
        netem: false,
        mult: 10,
        secs: 10,
        capture: true,
        server_offloads: false,
        mtu: 1500,
    });
}

/// Impairs both directions of the lab's veth at sq-srv0 (see the netem test): with `tc
/// netem` where the kernel has it; where it has not (this CI machine's kernel is built
/// without netem), with `squall bridge` inside sq-srv, which applies the same settings:
/// nginx's addresses move from sq-srv0 to a new veth pair's end sq-sb1, and the bridge
/// joins sq-srv0 to the pair's other end sq-sb0 (the kernel of sq-srv kept out of both
/// bridged interfaces), so every frame between Squall and nginx crosses its impairment.
/// Returns the bridge's process (killed on drop) and the file of its report, if it runs.
fn netem_on_server_link(dir: &Path) -> Option<(Proc, std::path::PathBuf)> {
    let ok = |args: &[&str]| {
        ns("sq-srv", args)
            .stderr(Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false)
    };
    let run = |args: &[&str]| assert!(ok(args), "{args:?} failed");
    let netem = [
        "tc", "qdisc", "add", "dev", "sq-srv0", "root", "netem", "loss", "1%", "delay", "5ms",
        "2ms", "reorder", "25%", "50%",
    ];
    if ok(&netem) {
        run(&["ip", "link", "add", "sq-ifb0", "type", "ifb"]);
        run(&["ip", "link", "set", "sq-ifb0", "up"]);
        run(&[
            "tc", "qdisc", "add", "dev", "sq-srv0", "handle", "ffff:", "ingress",
        ]);
        run(&[
            "tc", "filter", "add", "dev", "sq-srv0", "parent", "ffff:", "matchall", "action",
            "mirred", "egress", "redirect", "dev", "sq-ifb0",
        ]);
        run(&[
            "tc", "qdisc", "add", "dev", "sq-ifb0", "root", "netem", "loss", "1%", "delay", "2ms",
        ]);
        eprintln!("impairment: tc netem both ways (loss, delay, reordering)");
        return None;
    }
    assert!(have("nft"), "neither tc netem nor nft is available");
    for a in [
        &[
            "ip", "link", "add", "sq-sb0", "type", "veth", "peer", "name", "sq-sb1",
        ][..],
        &["ip", "addr", "del", "198.18.0.1/24", "dev", "sq-srv0"],
        &["ip", "addr", "del", "198.18.48.1/32", "dev", "sq-srv0"],
    ] {
        run(a);
    }
    // (The kernel drops the routes over sq-srv0 with its last address; said again if not.)
    ok(&["ip", "route", "del", "198.18.16.0/24", "dev", "sq-srv0"]);
    for i in ["sq-sb0", "sq-sb1"] {
        run(&["ip", "link", "set", i, "mtu", "1500"]);
        run(&[
            "ethtool", "-K", i, "tso", "off", "gso", "off", "gro", "off", "tx", "off", "rx", "off",
        ]);
        run(&["ip", "link", "set", i, "up"]);
    }
    for a in [
        &["ip", "addr", "add", "198.18.0.1/24", "dev", "sq-sb1"][..],
        &["ip", "addr", "add", "198.18.48.1/32", "dev", "sq-sb1"],
        &["ip", "route", "add", "198.18.16.0/24", "dev", "sq-sb1"],
    ] {
        run(a);
    }
    // The bridged interfaces are the bridge's: sq-srv's kernel drops what arrives on them
    // after the packet taps (the bridge's sockets) have seen it.
    let rules = "table netdev sq_bridge {\n\
        chain a { type filter hook ingress device \"sq-srv0\" priority 0; policy drop; }\n\
        chain b { type filter hook ingress device \"sq-sb0\" priority 0; policy drop; }\n}\n";
    let mut c = ns("sq-srv", &["nft", "-f", "-"])
        .stdin(Stdio::piped())
        .spawn()
        .expect("nft");
    use std::io::Write as _;
    c.stdin.take().unwrap().write_all(rules.as_bytes()).unwrap();
    assert!(c.wait().unwrap().success(), "nft rules");
    // From Squall (sq-srv0) to nginx: 1 % loss, 2 ms; back: 1 % loss, 5 ms +- 2 ms, a
    // quarter of the frames overtaken by later ones (netem's settings above).
    let report = dir.join("bridge.out");
    let bridge = Proc(
        ns(
            "sq-srv",
            &[
                squall_bin(),
                "bridge",
                "afpacket:sq-srv0",
                "afpacket:sq-sb0",
                "--impair",
                "loss=0.01,delay_us=2000",
                "--impair-back",
                "loss=0.01,delay_us=5000,jitter_us=2000,reorder=0.25",
                "--duration",
                "120",
            ],
        )
        .stdout(std::fs::File::create(&report).unwrap())
        .spawn()
        .expect("squall bridge"),
    );
    // Up once the kernel's ping crosses it both ways.
    let t0 = Instant::now();
    while !ok(&[
        "ping",
        "-c",
        "1",
        "-W",
        "1",
        "-I",
        "198.18.48.1",
        "198.18.0.1",
    ]) && t0.elapsed() < Duration::from_secs(1)
    {
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!(
        "impairment: no netem in this kernel; squall bridge in sq-srv: 1 % loss and 2 ms to \
         nginx, 1 % loss, 5 +- 2 ms and 25 % reordering back"
    );
    Some((bridge, report))
}

fn client_against_nginx(case: &ClientCase) {
    let iface = case.iface;
    let _g = LAB.lock().unwrap_or_else(|e| e.into_inner());
    let mut tools = vec!["ip", "ethtool", "nginx", "curl"];
    if case.netem {
        tools.push("tc");
    }
    if case.capture {
        tools.extend_from_slice(&["dumpcap", "tshark"]);
    }
    if let Some(r) = skip(&tools) {
        eprintln!("skipped: {r}");
        return;
    }
    let dir = tmpdir("cli");
    let _lab = if case.server_offloads {
        Lab::up_env(
            &["--squall", "client"],
            &[("SQUALL_LAB_SERVER_OFFLOADS", "1")],
        )
    } else {
        Lab::up(&["--squall", "client"])
    };
    let bridge = if case.netem {
        netem_on_server_link(&dir)
    } else {
        None
    };
    if case.mtu != 1500 {
        let m = case.mtu.to_string();
        for (n, i) in [("sq-cli", "sq-cli0"), ("sq-srv", "sq-srv0")] {
            assert!(
                ns(n, &["ip", "link", "set", i, "mtu", &m])
                    .status()
                    .unwrap()
                    .success(),
                "mtu {m} on {i}"
            );
        }
    }
    let (_nginx, total) = nginx_w1("sq-srv", &dir);
    let prof = w1_client_profile(&dir, total);
    if case.mtu != 1500 {
        let mut p: Value = serde_json::from_str(&std::fs::read_to_string(&prof).unwrap()).unwrap();
        p["global"]["tcp"]["mss"] = (case.mtu - 40).into();
        std::fs::write(&prof, p.to_string()).unwrap();
    }
    let json = dir.join("client-run.json");
    // Whole frames of the flows of 16 client addresses (of 200), headers of all.
    let cap = case
        .capture
        .then(|| Capture::start("sq-srv", "sq-srv0", &dir, "net 198.18.16.0/28"));
    let (mult, secs) = (case.mult.to_string(), case.secs.to_string());
    let mut args = vec![
        "run",
        prof.to_str().unwrap(),
        "--iface",
        iface,
        "--mode",
        "client",
        "--duration",
        &secs,
        "--mult",
        &mult,
        "--drain-sec",
        "20",
        "-q",
        "--json",
        json.to_str().unwrap(),
    ];
    if let Some(e) = case.eal {
        args.extend_from_slice(&["--eal", e]);
    }
    let (code, text) = squall_in("sq-cli", &args, 90);
    eprintln!("{text}");
    let wire = cap.map(Capture::stop_and_check);
    assert_eq!(code, 0, "squall client run not clean:\n{text}");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let flows = num(&r, &["client", "flows", "started"]);
    assert_eq!(
        flows,
        u64::from(100 * case.mult * case.secs),
        "{} s at {} CPS",
        case.secs,
        100 * case.mult
    );
    // nginx's own count: one log line per Squall request (user agent `squall`; the size
    // probe's curl line may land after the log was emptied), each a full 200 with the
    // 32 KiB body.
    assert_eq!(nginx_squall_requests(&dir), flows, "nginx access log lines");
    assert_eq!(num(&r, &["client", "flows", "completed"]), flows);
    assert_eq!(num(&r, &["errors"]), 0);
    assert_eq!(
        num(&r, &["client", "flows", "l7_rx_bytes"]),
        flows * total,
        "every response byte of every flow"
    );
    assert_eq!(num(&r, &["client", "tcp", "tcps_rcvbyte"]), flows * total);
    assert!(r["clean"].as_bool().unwrap());
    lab::check_real_series(&r, 1);
    if case.server_offloads {
        // 23 wire segments of answer per flow; as super-packets, a few.
        let segs = num(&r, &["client", "tcp", "tcps_rcvpack"]);
        assert!(
            segs < flows * 10,
            "super-packets taken whole: {segs} data segments for {flows} flows"
        );
    }
    if case.mtu != 1500 {
        // 32 KiB in segments of up to 8,960 bytes: 4 per flow (5 with the head's split).
        let segs = num(&r, &["client", "tcp", "tcps_rcvpack"]);
        assert!(
            segs <= flows * 6,
            "jumbo segments: {segs} data segments for {flows} flows"
        );
    }
    if case.netem {
        assert!(
            num(&r, &["retransmits"]) > 0,
            "a lossy link: retransmissions"
        );
    }
    if let Some((mut b, report)) = bridge {
        // The bridge's own count of what it did to the frames, both ways.
        lab::signal(&b, "-TERM");
        let _ = b.0.wait();
        let out = std::fs::read_to_string(&report).unwrap();
        eprintln!("{out}");
        let count = |dir: &str, what: &str| -> u64 {
            let d = out.split(dir).nth(1).unwrap_or_else(|| panic!("{out}"));
            d.split(&format!("{what} "))
                .nth(1)
                .and_then(|x| x.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok())
                .unwrap_or_else(|| panic!("{what} in {out}"))
        };
        let (to_nginx, to_squall) = ("sq-srv0 -> sq-sb0", "sq-sb0 -> sq-srv0");
        assert!(
            count(to_nginx, "lost") > 0 && count(to_squall, "lost") > 0,
            "{out}"
        );
        assert!(count(to_squall, "reordered") > 0, "{out}");
        assert!(
            count(to_squall, "delayed") > 0 && count(to_nginx, "delayed") > 0,
            "{out}"
        );
    }
    let inv = r["invariants"].as_array().unwrap();
    assert!(inv.iter().any(|c| c["name"] == "single_side_mode"));
    assert!(!inv
        .iter()
        .any(|c| c["name"] == "client_sent_eq_server_received"));
    eprintln!(
        "veth client-only ({iface}) vs nginx: {flows} flows, {} errors, {:.1} CPS, {total} bytes each, \
         {:.1} CPU us per flow; nginx logged {flows}; {}",
        num(&r, &["errors"]),
        r["rates"]["cps"].as_f64().unwrap(),
        r["cpu_us_per_flow"].as_f64().unwrap_or(0.0),
        wire.unwrap_or_else(|| "no capture".into())
    );
}

/// The bytes of a profile buffer (`text` then `fill.text` repeated up to `size`).
fn buffer_bytes(p: &Value, name: &str) -> Vec<u8> {
    let b = p["buffers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["name"] == name)
        .unwrap();
    let mut v = b["text"].as_str().unwrap().as_bytes().to_vec();
    if let Some(size) = b["size"].as_u64() {
        let fill = b["fill"]["text"].as_str().unwrap().as_bytes();
        let mut i = 0;
        while (v.len() as u64) < size {
            v.push(fill[i % fill.len()]);
            i += 1;
        }
    }
    v
}

/// Squall's server over AF_PACKET answers curl (byte for byte, wire captured and
/// checked), ab and wrk.
#[test]
fn server_only_squall_answers_curl_ab_and_wrk() {
    server_answers("afpacket:sq-srv0", false);
}

/// Squall's server over AF_XDP answers curl (byte for byte, wire captured and checked),
/// ab and wrk; meanwhile the kernel of sq-srv, given an address of its own on the same
/// interface, still answers ping through the XDP program's pass path.
#[test]
fn server_only_squall_over_afxdp_answers_curl_ab_and_wrk() {
    server_answers("afxdp:sq-srv0", true);
}

fn server_answers(iface: &str, afxdp: bool) {
    let _g = LAB.lock().unwrap_or_else(|e| e.into_inner());
    let mut tools = vec!["ip", "ethtool", "curl", "dumpcap", "tshark"];
    if afxdp {
        tools.push("ping");
    }
    if let Some(r) = skip(&tools) {
        eprintln!("skipped: {r}");
        return;
    }
    let dir = tmpdir("srv");
    let prof = root().join("crates/squall/tests/profiles/veth-server.json");
    let p: Value = serde_json::from_str(&std::fs::read_to_string(&prof).unwrap()).unwrap();
    let expect = buffer_bytes(&p, "http_resp");
    let prof = prof.to_str().unwrap().to_string();
    let _lab = Lab::up(&["--squall", "server"]);
    if afxdp {
        // The kernel keeps an address of its own on Squall's interface: XDP passes its
        // traffic (ARP and ICMP for 198.18.0.1) to it. The lab's chain that keeps the
        // kernel out of Squall's interface (scripts/lab.sh, kernel_out) goes first.
        let st = ns(
            "sq-srv",
            &["nft", "delete", "table", "netdev", "squall_lab"],
        )
        .status()
        .unwrap();
        assert!(st.success());
        let st = ns(
            "sq-srv",
            &["ip", "addr", "add", "198.18.0.1/24", "dev", "sq-srv0"],
        )
        .status()
        .unwrap();
        assert!(st.success());
    }
    let json = dir.join("server-run.json");
    // Phase 1: curl, checked byte for byte; the run must be clean.
    let cap = Capture::start("sq-cli", "sq-cli0", &dir, "tcp port 80");
    let srv = server_thread("sq-srv", &prof, iface, &[], Some(&json));
    std::thread::sleep(Duration::from_millis(1200));
    const CURLS: u64 = 20;
    for i in 0..CURLS {
        let out = ns(
            "sq-cli",
            &["curl", "-s", "-i", "-m", "3", "http://198.18.48.1/"],
        )
        .output()
        .unwrap();
        assert!(out.status.success(), "curl #{i} failed: {out:?}");
        assert_eq!(
            out.stdout, expect,
            "curl #{i}: response differs from the profile's buffer"
        );
    }
    let kernel = afxdp.then(|| {
        ns(
            "sq-cli",
            &["ping", "-c", "3", "-i", "0.2", "-W", "1", "198.18.0.1"],
        )
        .output()
        .unwrap()
    });
    let (code, text) = srv.join().unwrap();
    eprintln!("{text}");
    let wire = cap.stop_and_check();
    if let Some(k) = kernel {
        let out = String::from_utf8_lossy(&k.stdout);
        assert!(
            out.contains("3 received"),
            "the kernel's own address on Squall's interface stopped answering: {out}"
        );
        eprintln!("veth server-only ({iface}): the kernel's 198.18.0.1 on the same interface answered 3/3 pings");
    }
    assert_eq!(code, 0, "squall server run not clean:\n{text}");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(num(&r, &["server", "flows", "accepted"]), CURLS);
    assert_eq!(num(&r, &["server", "flows", "completed"]), CURLS);
    assert_eq!(num(&r, &["errors"]), 0);
    assert_eq!(
        num(&r, &["server", "flows", "l7_tx_acked"]),
        CURLS * expect.len() as u64
    );
    eprintln!("veth server-only ({iface}) vs curl: {CURLS} requests, byte-exact, 0 errors; {wire}");
    // Phase 2: ab -n 200 -c 10, if installed.
    if let Some(r) = skip(&["ab"]) {
        eprintln!("ab phase skipped: {r}");
        return;
    }
    let (ok, abt, _, _) = tool_against_server(
        iface,
        &prof,
        &json,
        &["ab", "-n", "200", "-c", "10", "http://198.18.48.1/"],
    );
    assert!(ok, "ab failed: {abt}");
    let field = |k: &str| ab_field(&abt, k);
    assert_eq!(field("Complete requests"), "200");
    assert_eq!(field("Failed requests"), "0");
    assert_eq!(field("Document Length"), "4096 bytes");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(num(&r, &["server", "flows", "completed"]), 200);
    // ab may open connections it closes without a request once 200 are done (seen: one
    // per run): Squall counts them as peer_closed_early; nothing else may fail.
    let early = num(&r, &["server", "flows", "peer_closed_early"]);
    assert!(early <= 10, "{early} connections closed early");
    assert_eq!(num(&r, &["errors"]), early);
    assert_eq!(num(&r, &["server", "flows", "accepted"]), 200 + early);
    eprintln!(
        "veth server-only ({iface}) vs ab -n 200 -c 10: 200 complete, 0 failed, ab {} req/s, {early} extra connection(s) closed early by ab",
        field("Requests per second")
            .split_whitespace()
            .next()
            .unwrap_or("?")
    );
    let body = &expect[expect.len() - 4096..];
    wrk_phase(iface, &prof, &json, body, expect.len() as u64);
}

/// Runs Squall's server (`server_run`, result in `json`) and, once it is up, `tool` in
/// sq-cli (at most 20 s); returns (tool succeeded, its stdout, Squall's exit code, Squall's
/// output).
fn tool_against_server(
    iface: &str,
    prof: &str,
    json: &Path,
    tool: &[&str],
) -> (bool, String, i32, String) {
    let srv = server_thread("sq-srv", prof, iface, &[], Some(json));
    std::thread::sleep(Duration::from_millis(1200));
    let mut a = vec!["timeout", "20"];
    a.extend_from_slice(tool);
    let out = ns("sq-cli", &a).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let (code, text) = srv.join().unwrap();
    eprintln!("{stdout}\n{text}");
    (out.status.success(), stdout, code, text)
}

/// Phase 3: wrk (1 thread, 10 connections, 2 s) against the server; Squall answers every
/// request wrk counts, with the whole response (the response says `Connection: close`,
/// so wrk reconnects for each request).
fn wrk_phase(iface: &str, prof: &str, json: &Path, body: &[u8], resp_len: u64) {
    if let Some(r) = skip(&["wrk"]) {
        eprintln!("wrk phase skipped: {r}");
        return;
    }
    // wrk compares every body with the profile's (a Lua `response` hook).
    let dir = tmpdir("wrk-body");
    let want = dir.join("body");
    std::fs::write(&want, body).unwrap();
    let cmd = lab::wrk_same_body_cmd(&dir, 10, "http://198.18.48.1/", &want);
    let cmd: Vec<&str> = cmd.iter().map(String::as_str).collect();
    let (ok, wt, code, text) = tool_against_server(iface, prof, json, &cmd);
    let (checked, differing) = lab::wrk_bodies_checked(&wt);
    assert!(checked > 0 && differing == 0, "wrk's bodies: {wt}");
    assert!(ok, "wrk failed: {wt}");
    assert!(!wt.contains("Non-2xx"), "wrk saw non-2xx responses: {wt}");
    let requests: u64 = wt
        .lines()
        .find(|l| l.contains("requests in"))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no request count in wrk's output: {wt}"));
    assert!(requests > 0, "{wt}");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
    let accepted = num(&r, &["server", "flows", "accepted"]);
    let completed = num(&r, &["server", "flows", "completed"]);
    let errors = num(&r, &["errors"]);
    // wrk stops at its deadline with its 10 connections open (some reconnected and not
    // sent a request yet, some waiting for their answer): those flows end unfinished
    // (peer_closed_early, bad_close, reset_by_peer / aborted; seen: 7 to 11). Every other
    // flow completes, and nothing times out.
    assert!(
        completed >= requests,
        "Squall completed {completed} < wrk's {requests}"
    );
    let unfinished = accepted - completed;
    assert!(unfinished <= 20, "{unfinished} flows unfinished: {text}");
    assert!(errors <= 2 * unfinished, "{errors} errors: {text}");
    assert_eq!(num(&r, &["server", "flows", "timeouts"]), 0, "{text}");
    assert!(num(&r, &["server", "flows", "l7_tx_acked"]) >= requests * resp_len);
    assert!(
        code == 0 || errors > 0,
        "squall server run not clean:\n{text}"
    );
    eprintln!(
        "veth server-only ({iface}) vs wrk -c10 -d2s: {requests} requests, Squall completed {completed}, {unfinished} connection(s) cut at wrk's exit"
    );
}

/// The node answers the kernel: while Squall runs server-only (owning 198.18.48.1, which
/// no kernel in the lab holds), `arping` from the client namespace gets Squall's MAC and
/// `ping` gets echo replies; an address Squall does not own gets neither.
#[test]
fn the_node_answers_kernel_arping_and_ping() {
    node_answers("afpacket:sq-srv0");
}

/// The same over AF_XDP: the XDP program steers ARP and ICMP for the owned address to
/// Squall, and the rest (198.18.48.2) to the kernel, which has no such address.
#[test]
fn the_node_answers_kernel_arping_and_ping_over_afxdp() {
    node_answers("afxdp:sq-srv0");
}

fn node_answers(iface: &str) {
    let _g = LAB.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(r) = skip(&["ip", "ethtool", "ping", "arping"]) {
        eprintln!("skipped: {r}");
        return;
    }
    let prof = root().join("crates/squall/tests/profiles/veth-server.json");
    let prof = prof.to_str().unwrap().to_string();
    let _lab = Lab::up(&["--squall", "server"]);
    let srv = server_thread("sq-srv", &prof, iface, &[], None);
    std::thread::sleep(Duration::from_millis(1200));
    let mac = String::from_utf8(
        ns("sq-srv", &["cat", "/sys/class/net/sq-srv0/address"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap()
    .trim()
    .to_lowercase();
    let arp = ns(
        "sq-cli",
        &[
            "arping",
            "-c",
            "2",
            "-w",
            "3",
            "-I",
            "sq-cli0",
            "198.18.48.1",
        ],
    )
    .output()
    .unwrap();
    let arp_out = String::from_utf8_lossy(&arp.stdout).to_lowercase();
    let ping = ns(
        "sq-cli",
        &["ping", "-c", "3", "-i", "0.2", "-W", "1", "198.18.48.1"],
    )
    .output()
    .unwrap();
    let ping_out = String::from_utf8_lossy(&ping.stdout).to_string();
    let other = ns("sq-cli", &["ping", "-c", "1", "-W", "1", "198.18.48.2"])
        .output()
        .unwrap();
    let (code, text) = srv.join().unwrap();
    eprintln!("arping:\n{arp_out}\nping:\n{ping_out}\nsquall:\n{text}");
    assert!(arp.status.success(), "arping got no reply: {arp_out}");
    assert!(
        arp_out.contains(&mac),
        "arping's reply does not carry Squall's MAC {mac}: {arp_out}"
    );
    assert!(ping.status.success(), "ping got no reply: {ping_out}");
    assert!(ping_out.contains("3 received"), "{ping_out}");
    assert!(
        !other.status.success(),
        "an address Squall does not own was answered"
    );
    assert_eq!(code, 0, "squall server run not clean:\n{text}");
    assert!(
        text.contains("echo requests answered 3"),
        "squall's own count of echo replies: {text}"
    );
}

/// The XDP program lives as long as the Squall process, however it ends: after `kill -9`
/// the interface has no program left, and the next start works.
#[test]
fn afxdp_program_goes_away_with_a_killed_squall() {
    let _g = LAB.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(r) = skip(&["ip", "ethtool", "curl"]) {
        eprintln!("skipped: {r}");
        return;
    }
    let prof = root().join("crates/squall/tests/profiles/veth-server.json");
    let prof = prof.to_str().unwrap().to_string();
    let _lab = Lab::up(&["--squall", "server"]);
    let xdp_on = || {
        let out = ns("sq-srv", &["ip", "link", "show", "sq-srv0"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).contains("prog/xdp")
    };
    let wait_for = |want: bool| {
        let t0 = Instant::now();
        while xdp_on() != want && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(50));
        }
        xdp_on() == want
    };
    assert!(!xdp_on(), "no program before Squall starts");
    let mut squall = Proc(
        ns(
            "sq-srv",
            &[
                squall_bin(),
                "run",
                &prof,
                "--iface",
                "afxdp:sq-srv0",
                "--mode",
                "server",
                "--duration",
                "30",
                "-q",
            ],
        )
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start squall"),
    );
    assert!(wait_for(true), "Squall attached no XDP program");
    squall.0.kill().unwrap(); // SIGKILL: no destructor runs
    let _ = squall.0.wait();
    assert!(wait_for(false), "the XDP program outlived a killed Squall");
    // The next start attaches afresh and serves.
    let srv = server_thread("sq-srv", &prof, "afxdp:sq-srv0", &[], None);
    std::thread::sleep(Duration::from_millis(1200));
    let out = ns(
        "sq-cli",
        &[
            "curl",
            "-s",
            "-o",
            "/dev/null",
            "-m",
            "3",
            "-w",
            "%{http_code}",
            "http://198.18.48.1/",
        ],
    )
    .output()
    .unwrap();
    let (code, text) = srv.join().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "200", "{text}");
    assert_eq!(code, 0, "{text}");
    assert!(wait_for(false), "the XDP program outlived a clean exit");
    eprintln!(
        "afxdp: program attached while Squall ran, gone after kill -9 and after a clean exit"
    );
}

/// UDP from a kernel that leaves its checksums to the veth's offload (the client end's
/// default, `SQUALL_LAB_CLIENT_CSUM=1`): Squall's server (the DNS-like profile) answers
/// every query — the frame ring's verdict covers UDP too; before, every datagram was
/// dropped as a bad checksum.
#[test]
fn server_only_squall_answers_udp_whose_checksum_the_peer_left_to_the_offload() {
    let _g = LAB.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(r) = skip(&["ip", "ethtool", "python3"]) {
        eprintln!("skipped: {r}");
        return;
    }
    let dir = tmpdir("udp-csum");
    let _lab = Lab::up_env(&["--squall", "server"], &[("SQUALL_LAB_CLIENT_CSUM", "1")]);
    let _srv = dns_server(&dir, Stdio::null());
    // 20 queries from 20 source ports, each answered with the profile's answer (its id).
    let client = r#"
import socket, base64, time
q = base64.b64decode("EjQBAAABAAAAAAAAA3d3dwVleG1wbAR0ZXN0AAABAAE=")
ok, t0 = 0, time.time()
while ok == 0 and time.time() - t0 < 3:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(0.3)
    s.sendto(q, ("198.18.48.1", 53))
    try: ok += s.recvfrom(2048)[0][:2] == q[:2]
    except socket.timeout: pass
for i in range(19):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(0.5)
    s.sendto(q, ("198.18.48.1", 53))
    try: ok += s.recvfrom(2048)[0][:2] == q[:2]
    except socket.timeout: pass
print(ok)
"#;
    let (answered, err) = python_in("sq-cli", client);
    assert_eq!(answered, "20", "answers of 20 queries: {answered} ({err})");
}

/// `squall run` in server mode on sq-srv0 with the DNS-like UDP profile
/// (`examples/udp-dns.json`) answering 198.18.0.2 from 198.18.48.1:53 for 5 s; its
/// `--json` report in `dir/server.json`, its stderr to `stderr`.
fn dns_server(dir: &Path, stderr: Stdio) -> Proc {
    let mut p: Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("examples/udp-dns.json")).unwrap(),
    )
    .unwrap();
    p["ip_gens"][0]["clients"]["range"] = serde_json::json!(["198.18.0.2", "198.18.0.2"]);
    p["ip_gens"][0]["servers"]["range"] = serde_json::json!(["198.18.48.1", "198.18.48.1"]);
    let prof = dir.join("udp.json");
    std::fs::write(&prof, p.to_string()).unwrap();
    let json = dir.join("server.json");
    Proc(
        ns(
            "sq-srv",
            &[
                squall_bin(),
                "run",
                prof.to_str().unwrap(),
                "--iface",
                "afpacket:sq-srv0",
                "--mode",
                "server",
                "--peer-ip",
                "198.18.0.2",
                "--duration",
                "5",
                "-q",
                "--json",
                json.to_str().unwrap(),
            ],
        )
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .expect("start squall"),
    )
}

/// RFC 791 / RFC 1122 §3.3.2: the kernel's UDP sends a datagram larger than the veth's
/// MTU in fragments (4,000 bytes: three). Squall's node reassembles them: the DNS-like
/// server answers a query padded to 4,000 bytes, and a datagram of that size to a closed
/// port is answered port unreachable (the kernel's socket gets ECONNREFUSED); the port's
/// line reports the fragments and the datagrams reassembled. Before, every fragment was
/// dropped: no answer, no refusal.
#[test]
fn server_only_squall_reassembles_fragmented_udp() {
    let _g = LAB.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(r) = skip(&["ip", "ethtool", "python3"]) {
        eprintln!("skipped: {r}");
        return;
    }
    let dir = tmpdir("udp-frag");
    let _lab = Lab::up(&["--squall", "server"]);
    let err = dir.join("server.err");
    let mut srv = dns_server(&dir, Stdio::from(std::fs::File::create(&err).unwrap()));
    let client = fragmented_udp_client("198.18.48.1", 48);
    let (got, stderr) = python_in("sq-cli", &client);
    assert_eq!(
        got, "5 3",
        "answers to 5 fragmented queries, refusals of 3 fragmented datagrams: {got} ({stderr})"
    );
    let _ = srv.0.wait();
    let line = std::fs::read_to_string(&err).unwrap();
    assert!(
        line.contains("IP fragments 24 (datagrams reassembled 8)"),
        "the port's line: {line}"
    );
}

/// `--vlan 100` over AF_PACKET, Squall on both ends of the lab's veth: every frame carries
/// the tag in its bytes on the wire, and the receiving kernel takes it out (into the
/// packet's metadata) before a packet socket sees the frame; the port puts it back from
/// the ring header (or `PACKET_AUXDATA` on the `recvmmsg` path), else the node would
/// count every frame as of another VLAN and drop it. ARP, and W1 flows with every byte
/// checked, go through the tag on each receive path. (This kernel has no 802.1Q devices,
/// so the kernel's own VLAN stack cannot be the peer.)
#[test]
fn vlan_tagged_traffic_over_afpacket() {
    for rx in [
        "afpacket:{},frames",
        "afpacket:{},ring",
        "afpacket:{},recvmmsg",
    ] {
        vlan_through(rx);
    }
}

/// The same over AF_XDP: the tag is in the frames' bytes on the veth (Squall's own), and
/// the XDP program steers tagged frames by their inner addresses.
#[test]
fn vlan_tagged_traffic_over_afxdp() {
    vlan_through("afxdp:{}");
}

/// `squall serve --vlan 100` over AF_PACKET, a `squall run` client on the other end
/// (also `--vlan 100`) fetching a file with `Connection: close` until the server closes:
/// every answer whole through the tag, the server's count agreeing.
#[test]
fn squall_serve_answers_through_a_vlan() {
    let _g = LAB.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(r) = skip(&["ip", "ethtool"]) {
        eprintln!("skipped: {r}");
        return;
    }
    let _lab = Lab::up(&["--squall", "both"]);
    let dir = tmpdir("serve-vlan");
    let www = dir.join("www");
    std::fs::create_dir_all(&www).unwrap();
    std::fs::write(www.join("w1"), vec![b'v'; 20_000]).unwrap();
    // dut-w1's client asks `GET /w1` with `Connection: close` and now reads until the
    // server closes.
    let src = root().join("crates/squall/tests/profiles/dut-w1.json");
    let mut p: Value = serde_json::from_str(&std::fs::read_to_string(src).unwrap()).unwrap();
    p["programs"][0]["commands"][1] = serde_json::json!({"op": "wait_for_peer_close"});
    let prof = dir.join("client.json");
    std::fs::write(&prof, p.to_string()).unwrap();
    let out_json = dir.join("serve.json");
    let mut srv = Proc(
        ns(
            "sq-srv",
            &[
                squall_bin(),
                "serve",
                "--root",
                www.to_str().unwrap(),
                "--listen",
                "198.19.48.1:80",
                "--iface",
                "afpacket:sq-srv0",
                "--peer-ip",
                "198.18.16.1",
                "--vlan",
                "100",
                "-q",
            ],
        )
        .stdout(std::fs::File::create(&out_json).unwrap())
        .stderr(Stdio::piped())
        .spawn()
        .expect("squall serve"),
    );
    std::thread::sleep(Duration::from_millis(800));
    let cj = dir.join("client.json.out");
    let (code, out) = vlan_client(prof.to_str().unwrap(), "afpacket:sq-cli0", 100, &cj);
    lab::signal(&srv, "-TERM");
    let (doc, err) = lab::serve_report(&mut srv, &out_json);
    assert_eq!(code, 0, "the client through VLAN 100 failed:\n{out}\n{err}");
    let c: Value = serde_json::from_str(&std::fs::read_to_string(&cj).unwrap()).unwrap();
    let started = num(&c, &["client", "flows", "started"]);
    assert_eq!(started, 100, "{out}");
    assert_eq!(num(&c, &["client", "flows", "completed"]), started, "{out}");
    let got = num(&c, &["client", "tcp", "tcps_rcvbyte"]);
    assert!(got > started * 20_000, "{got} bytes for {started} answers");
    assert_eq!(got % started, 0, "every answer the same size: {got}");
    assert_eq!(doc["requests"].as_u64(), Some(started), "{doc}");
    assert_eq!(doc["parse_errors"].as_u64(), Some(0), "{doc}");
}

/// `squall run PROF --iface IFACE --mode client --vlan 100` in sq-cli for 1 s at `flows`
/// flows per second, its JSON to `json`: (exit code, output).
fn vlan_client(prof: &str, iface: &str, flows: u32, json: &Path) -> (i32, String) {
    let mult = flows.to_string();
    squall_in(
        "sq-cli",
        &[
            "run",
            prof,
            "--iface",
            iface,
            "--mode",
            "client",
            "--vlan",
            "100",
            "--duration",
            "1",
            "--mult",
            &mult,
            "-q",
            "--json",
            json.to_str().unwrap(),
        ],
        30,
    )
}

/// `rx`: the port spec with `{}` for the interface.
fn vlan_through(rx: &str) {
    let _g = LAB.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(r) = skip(&["ip", "ethtool"]) {
        eprintln!("skipped: {r}");
        return;
    }
    let prof = root().join("crates/squall/tests/profiles/dut-w1.json");
    let prof = prof.to_str().unwrap().to_string();
    let _lab = Lab::up(&["--squall", "both"]);
    let dir = tmpdir("vlan");
    let (sj, cj) = (dir.join("server.json"), dir.join("client.json"));
    let srv = server_thread(
        "sq-srv",
        &prof,
        &rx.replace("{}", "sq-srv0"),
        &["--vlan", "100"],
        Some(&sj),
    );
    std::thread::sleep(Duration::from_millis(800));
    let (code, out) = vlan_client(&prof, &rx.replace("{}", "sq-cli0"), 200, &cj);
    let (scode, text) = srv.join().unwrap();
    assert_eq!(
        code, 0,
        "{rx}: the client through VLAN 100 failed:\n{out}\n{text}"
    );
    assert_eq!(
        scode, 0,
        "{rx}: the server through VLAN 100 failed:\n{text}"
    );
    let c: Value = serde_json::from_str(&std::fs::read_to_string(&cj).unwrap()).unwrap();
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&sj).unwrap()).unwrap();
    let started = num(&c, &["client", "flows", "started"]);
    assert_eq!(started, 200, "{rx}: {out}");
    assert_eq!(num(&c, &["client", "flows", "completed"]), started, "{out}");
    assert_eq!(
        num(&s, &["server", "flows", "completed"]),
        started,
        "{text}"
    );
    assert_eq!(
        num(&c, &["client", "tcp", "tcps_rcvbyte"]),
        started * 32_768,
        "{rx}: every response byte through the tag"
    );
}

/// SIGINT ends a server-only run (AF_PACKET) asked for 60 s: the server stops when idle
/// from the signal on and reports what it served (curl's 3 requests here). On the way,
/// a kernel UDP socket sending to a port Squall does not serve gets ECONNREFUSED (the
/// node's port unreachable).
#[test]
fn sigint_ends_a_server_only_run_with_its_report() {
    let _g = LAB.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(r) = skip(&["ip", "ethtool", "curl", "timeout", "python3"]) {
        eprintln!("skipped: {r}");
        return;
    }
    let dir = tmpdir("srv-sigint");
    let json = dir.join("run.json");
    let prof = root().join("crates/squall/tests/profiles/veth-server.json");
    let _lab = Lab::up(&["--squall", "server"]);
    let t0 = std::time::Instant::now();
    let (j, p) = (json.clone(), prof.clone());
    let srv = std::thread::spawn(move || {
        lab::squall_interrupted(
            "sq-srv",
            3,
            &[
                "run",
                p.to_str().unwrap(),
                "--iface",
                "afpacket:sq-srv0",
                "--mode",
                "server",
                "--duration",
                "60",
                "--drain-sec",
                "1",
                "-q",
                "--json",
                j.to_str().unwrap(),
            ],
        )
        .output()
        .unwrap()
    });
    std::thread::sleep(Duration::from_millis(1200));
    for _ in 0..3 {
        let (_, code) = lab::curl_in("sq-cli", &["http://198.18.48.1/"]);
        assert_eq!(code, 0);
    }
    // The kernel's UDP socket to a port Squall does not serve learns it at once: Squall
    // answers port unreachable, the socket's next call fails with ECONNREFUSED.
    let udp = ns(
        "sq-cli",
        &[
            "python3",
            "-c",
            "import socket\n\
             s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
             s.settimeout(2)\n\
             s.connect(('198.18.48.1', 9))\n\
             s.send(b'x')\n\
             try:\n    s.recv(10)\n    print('answered')\n\
             except ConnectionRefusedError:\n    print('refused')\n\
             except socket.timeout:\n    print('timeout')\n",
        ],
    )
    .output()
    .unwrap();
    let udp = String::from_utf8_lossy(&udp.stdout).to_string();
    let out = srv.join().unwrap();
    let text = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(udp.trim(), "refused", "{text}");
    assert!(text.contains("port unreachables sent 1"), "{text}");
    assert!(out.status.code().is_some(), "killed, not stopped: {text}");
    assert!(t0.elapsed().as_secs() < 15, "took {:?}", t0.elapsed());
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(num(&r, &["server", "flows", "completed"]), 3, "{text}");
    assert!(r["elapsed_sec"].as_f64().unwrap() < 10.0, "{r}");
    assert!(r["generation_sec"].as_f64().unwrap() < 10.0, "{r}");
}
