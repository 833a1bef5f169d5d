//! Issue 13, `squall run` over IPv6 on a real interface (needs root, ip, ethtool, and per
//! test nginx/curl/dumpcap/tshark; skipped with the reason otherwise). Its own namespaces
//! `v6p-cli` / `v6p-srv` joined by the veth `v6p-c0` / `v6p-s0`, addresses from
//! 2001:db8::/32 only, torn down by a guard; holds the machine-wide lab lock.
//!
//! - Squall client (`--iface afpacket:v6p-c0` or `afxdp:v6p-c0`, `--mode client`, a
//!   native IPv6 pool) against
//!   a kernel nginx listening on [2001:db8:62::1]:80: 2,000 flows, every response byte
//!   verified, nginx's access log agrees on the count, the wire captured in nginx's
//!   namespace and checked by tshark (no malformed packet, every TCP checksum good, no
//!   RST). Neighbour discovery both ways: Squall resolves nginx, the kernel resolves
//!   Squall's client addresses.
//! - Squall client and Squall server (`--mode client` / `--mode server`, TRex's
//!   `ipv6.enable` over IPv4 pools) on the two ends of the veth, no kernel address.
//! - Both sides in one process through a kernel IPv6 router (the DUT topology,
//!   `--client-gw` / `--server-gw` as IPv6 addresses): namespaces `v6p-tg` / `v6p-dut`.

use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

mod lab;
use lab::{
    lab_start, machine_lock, nginx_squall_requests, nginx_w1_on, ns, num, root, run_ok, skip,
    squall_bin, squall_in, tmpdir, Capture, Namespaces, Proc,
};

const CLI: &str = "v6p-cli";
const SRV: &str = "v6p-srv";
const CIF: &str = "v6p-c0";
const SIF: &str = "v6p-s0";
const KERNEL_SRV: &str = "2001:db8:62::1";

/// The two namespaces and the veth; `kernel_srv`: the server end gets 2001:db8:62::1/64
/// for a kernel server, else neither kernel has IPv6 on the veth (Squall on both ends).
struct Topo;

impl Topo {
    fn up(kernel_srv: bool) -> Namespaces {
        let t = Namespaces::create(&[CLI, SRV]);
        run_ok(Command::new("ip").args([
            "link", "add", CIF, "netns", CLI, "type", "veth", "peer", "name", SIF, "netns", SRV,
        ]));
        for (n, ifc) in [(CLI, CIF), (SRV, SIF)] {
            // Offloads off: AF_PACKET then sees what a wire would carry (scripts/lab.sh).
            run_ok(&mut ns(
                n,
                &[
                    "ethtool", "-K", ifc, "tso", "off", "gso", "off", "gro", "off", "tx", "off",
                    "rx", "off",
                ],
            ));
            let squall_here = n == CLI || !kernel_srv;
            let off = format!("net.ipv6.conf.{ifc}.disable_ipv6={}", u8::from(squall_here));
            run_ok(&mut ns(n, &["sysctl", "-qw", &off]));
            run_ok(&mut ns(n, &["ip", "link", "set", ifc, "up"]));
        }
        if kernel_srv {
            let a = format!("{KERNEL_SRV}/64");
            run_ok(&mut ns(
                SRV,
                &["ip", "-6", "addr", "add", &a, "dev", SIF, "nodad"],
            ));
        }
        t
    }
}

/// The lab's W1 client profile over IPv6: 200 client addresses 2001:db8:62::100:1.. and
/// nginx at 2001:db8:62::1, receiving exactly `total` bytes per flow.
fn client_profile(dir: &std::path::Path, total: u64) -> std::path::PathBuf {
    let src = root().join("crates/squall/tests/profiles/veth-client.json");
    let mut p: Value = serde_json::from_str(&std::fs::read_to_string(src).unwrap()).unwrap();
    p["programs"][0]["commands"][1]["bytes"] = total.into();
    p["ip_gens"][0]["clients"]["range"] =
        serde_json::json!(["2001:db8:62::100:1", "2001:db8:62::100:c8"]);
    p["ip_gens"][0]["servers"]["range"] = serde_json::json!([KERNEL_SRV, KERNEL_SRV]);
    let prof = dir.join("client6.json");
    std::fs::write(&prof, p.to_string()).unwrap();
    prof
}

#[test]
fn client_only_squall_against_nginx_over_ipv6() {
    client_vs_nginx("afpacket", 1);
}

/// Two workers on AF_PACKET: the fanout program steers IPv6 replies by port (`% 2`) to
/// the worker owning the flow; nothing is redirected between them.
#[test]
fn two_workers_steer_ipv6_replies_to_their_flow() {
    client_vs_nginx("afpacket", 2);
}

/// The same over AF_XDP: Squall's XDP program steers its IPv6 addresses (and the
/// neighbour solicitations for them) to its socket.
#[test]
fn client_only_squall_over_afxdp_against_nginx_over_ipv6() {
    client_vs_nginx("afxdp", 1);
}

fn client_vs_nginx(kind: &str, cores: u32) {
    let tools = [
        "ip", "ethtool", "sysctl", "nginx", "curl", "dumpcap", "tshark",
    ];
    let Some(_lock) = lab_start(&tools) else {
        return;
    };
    let _topo = Topo::up(true);
    let dir = tmpdir(&format!("v6p-cli-{kind}-{cores}"));
    let (_nginx, total) = nginx_w1_on(SRV, &dir, &format!("[{KERNEL_SRV}]"));
    let prof = client_profile(&dir, total);
    let json = dir.join("run.json");
    let cap = Capture::start(SRV, SIF, &dir, "net 2001:db8:62::100:0/124");
    // 400 CPS for 5 s: 2,000 flows.
    let cores_s = cores.to_string();
    let args = [
        "run",
        prof.to_str().unwrap(),
        "--cores",
        &cores_s,
        "--iface",
        &format!("{kind}:{CIF}"),
        "--mode",
        "client",
        "--duration",
        "5",
        "--mult",
        "4",
        "--drain-sec",
        "20",
        "-q",
        "--json",
        json.to_str().unwrap(),
    ];
    let (code, text) = squall_in(CLI, &args, 90);
    eprintln!("{text}");
    let wire = cap.stop_and_check();
    assert_eq!(code, 0, "squall client run over IPv6 not clean:\n{text}");
    assert!(
        text.contains(&format!("peer {KERNEL_SRV}")),
        "nginx resolved by neighbour discovery: {text}"
    );
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let flows = num(&r, &["client", "flows", "started"]);
    assert_eq!(flows, 2_000);
    assert_eq!(num(&r, &["client", "flows", "completed"]), flows);
    assert_eq!(num(&r, &["errors"]), 0);
    assert_eq!(num(&r, &["client", "flows", "l7_rx_bytes"]), flows * total);
    assert_eq!(num(&r, &["client", "tcp", "tcps_rcvbyte"]), flows * total);
    assert_eq!(nginx_squall_requests(&dir), flows, "nginx access log lines");
    assert_eq!(
        num(&r, &["client", "port", "rx_redirected"]),
        0,
        "replies steered"
    );
    // The kernel learned Squall's client addresses by neighbour discovery.
    let neigh = ns(SRV, &["ip", "-6", "neigh", "show", "dev", SIF])
        .output()
        .unwrap();
    let neigh = String::from_utf8_lossy(&neigh.stdout);
    assert!(
        neigh.contains("2001:db8:62::100:1 "),
        "kernel neighbours: {neigh}"
    );
    eprintln!(
        "veth IPv6 client-only ({kind}, {cores} worker(s)) vs nginx: {flows} flows, {total} bytes each; {wire}"
    );
}

#[test]
fn squall_client_and_server_over_ipv6_on_a_veth() {
    if let Some(r) = skip(&["ip", "ethtool", "sysctl"]) {
        eprintln!("skipped: {r}");
        return;
    }
    let Some(_lock) = machine_lock(Duration::from_secs(900)) else {
        panic!("the lab lock /tmp/squall-lab.lock was not free within 900 s");
    };
    let _topo = Topo::up(false);
    let dir = tmpdir("v6p-both");
    // TRex's ipv6.enable over IPv4 pools: 16.0.0.x -> 2001:db8:62:1::1000:x,
    // 48.0.0.1 -> 2001:db8:62:2::3000:1.
    let mut p: Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("examples/w1-astf-http.json")).unwrap(),
    )
    .unwrap();
    p["global"]["ipv6"] = serde_json::json!({
        "enable": 1, "src_msb": "2001:db8:62:1::", "dst_msb": "2001:db8:62:2::"
    });
    let prof = dir.join("w1-ipv6.json");
    std::fs::write(&prof, p.to_string()).unwrap();
    let (sj, cj) = (dir.join("server.json"), dir.join("client.json"));
    let srv = Proc(
        ns(
            SRV,
            &[
                "timeout",
                "60",
                squall_bin(),
                "run",
                prof.to_str().unwrap(),
                "--iface",
                &format!("afpacket:{SIF}"),
                "--mode",
                "server",
                "--duration",
                "8",
                "-q",
                "--json",
                sj.to_str().unwrap(),
            ],
        )
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the squall server"),
    );
    // 1,500 flows: 500 CPS for 3 s (W1 is 1 CPS x mult).
    let (code, text) = squall_in(
        CLI,
        &[
            "run",
            prof.to_str().unwrap(),
            "--iface",
            &format!("afpacket:{CIF}"),
            "--mode",
            "client",
            "--duration",
            "3",
            "--mult",
            "500",
            "--drain-sec",
            "10",
            "-q",
            "--json",
            cj.to_str().unwrap(),
        ],
        60,
    );
    eprintln!("{text}");
    let out = wait_run_ok(srv);
    eprintln!("server: {out}");
    assert_eq!(code, 0, "squall client over IPv6 not clean:\n{text}");
    assert!(text.contains("peer 2001:db8:62:2::3000:1"), "{text}");
    let c: Value = serde_json::from_str(&std::fs::read_to_string(&cj).unwrap()).unwrap();
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&sj).unwrap()).unwrap();
    let flows = num(&c, &["client", "flows", "started"]);
    assert_eq!(flows, 1_500);
    assert_eq!(num(&c, &["client", "flows", "completed"]), flows);
    assert_eq!(num(&s, &["server", "flows", "accepted"]), flows);
    assert_eq!(num(&s, &["server", "flows", "completed"]), flows);
    assert_eq!(num(&c, &["errors"]) + num(&s, &["errors"]), 0);
    assert_eq!(num(&c, &["client", "flows", "l7_rx_bytes"]), flows * 32_768);
    assert_eq!(num(&s, &["server", "flows", "l7_rx_bytes"]), flows * 100);
    assert_eq!(num(&s, &["server", "translated"]), 0);
}

/// Waits (70 s at most) for `p` to exit 0 and returns its stderr.
fn wait_run_ok(mut p: Proc) -> String {
    let t0 = std::time::Instant::now();
    let status = loop {
        if let Some(s) = p.0.try_wait().unwrap() {
            break s;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(70),
            "squall server did not end"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut err = String::new();
    if let Some(mut e) = p.0.stderr.take() {
        use std::io::Read;
        let _ = e.read_to_string(&mut err);
    }
    assert!(status.success(), "squall server: {status}\n{err}");
    err
}

/// The DUT topology over IPv6: namespace `v6p-tg` holds Squall's two ports (`v6p-tc`,
/// `v6p-ts`, no address), namespace `v6p-dut` a kernel router between them
/// (2001:db8:70::1/64 on the client link, 2001:db8:71::1/64 on the server link, IPv6
/// forwarding on); the pools are on-link on each side, so the router resolves every
/// Squall address by neighbour discovery and Squall resolves the router's by its gateway
/// addresses.
struct DutTopo;

const TG: &str = "v6p-tg";
const DUT: &str = "v6p-dut";

impl DutTopo {
    fn up() -> Namespaces {
        let t = Namespaces::create(&[TG, DUT]);
        for (mine, theirs, addr) in [
            ("v6p-tc", "v6p-dc", "2001:db8:70::1/64"),
            ("v6p-ts", "v6p-ds", "2001:db8:71::1/64"),
        ] {
            run_ok(Command::new("ip").args([
                "link", "add", mine, "netns", TG, "type", "veth", "peer", "name", theirs, "netns",
                DUT,
            ]));
            for (n, ifc) in [(TG, mine), (DUT, theirs)] {
                run_ok(&mut ns(
                    n,
                    &[
                        "ethtool", "-K", ifc, "tso", "off", "gso", "off", "gro", "off", "tx",
                        "off", "rx", "off",
                    ],
                ));
                let off = format!("net.ipv6.conf.{ifc}.disable_ipv6={}", u8::from(n == TG));
                run_ok(&mut ns(n, &["sysctl", "-qw", &off]));
                run_ok(&mut ns(n, &["ip", "link", "set", ifc, "up"]));
            }
            run_ok(&mut ns(
                DUT,
                &["ip", "-6", "addr", "add", addr, "dev", theirs, "nodad"],
            ));
        }
        run_ok(&mut ns(
            DUT,
            &["sysctl", "-qw", "net.ipv6.conf.all.forwarding=1"],
        ));
        t
    }
}

#[test]
fn both_sides_through_an_ipv6_router() {
    if let Some(r) = skip(&["ip", "ethtool", "sysctl"]) {
        eprintln!("skipped: {r}");
        return;
    }
    let Some(_lock) = machine_lock(Duration::from_secs(900)) else {
        panic!("the lab lock /tmp/squall-lab.lock was not free within 900 s");
    };
    let _topo = DutTopo::up();
    let dir = tmpdir("v6p-dut");
    let mut p: Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("examples/w1-astf-http.json")).unwrap(),
    )
    .unwrap();
    // Native IPv6 pools; the server's low 32 bits stay 48.0.0.1 (the W1 association).
    p["ip_gens"][0]["clients"]["range"] =
        serde_json::json!(["2001:db8:70::100:1", "2001:db8:70::100:c8"]);
    p["ip_gens"][0]["servers"]["range"] =
        serde_json::json!(["2001:db8:71::3000:1", "2001:db8:71::3000:1"]);
    let prof = dir.join("w1-dut6.json");
    std::fs::write(&prof, p.to_string()).unwrap();
    let json = dir.join("dut.json");
    // 1,000 flows: 250 CPS for 4 s.
    let (code, text) = squall_in(
        TG,
        &[
            "run",
            prof.to_str().unwrap(),
            "--client-iface",
            "afpacket:v6p-tc",
            "--server-iface",
            "afpacket:v6p-ts",
            "--client-gw",
            "2001:db8:70::1",
            "--server-gw",
            "2001:db8:71::1",
            "--duration",
            "4",
            "--mult",
            "250",
            "--drain-sec",
            "10",
            "-q",
            "--json",
            json.to_str().unwrap(),
        ],
        60,
    );
    eprintln!("{text}");
    assert_eq!(code, 0, "DUT run over IPv6 not clean:\n{text}");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let flows = num(&r, &["client", "flows", "started"]);
    assert_eq!(flows, 1_000);
    assert_eq!(num(&r, &["client", "flows", "completed"]), flows);
    assert_eq!(num(&r, &["server", "flows", "accepted"]), flows);
    assert_eq!(num(&r, &["errors"]), 0);
    assert_eq!(num(&r, &["client", "flows", "l7_rx_bytes"]), flows * 32_768);
    assert_eq!(
        num(&r, &["server", "translated"]),
        0,
        "a router does not translate"
    );
}
