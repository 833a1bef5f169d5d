//! Squall's client against nginx through a Linux router that fragments (needs root, ip,
//! ethtool, sysctl, nginx, curl, dumpcap and tshark; skipped with the reason otherwise).
//! Its own namespaces `frg-cli` (Squall on `frg-c0`), `frg-rtr` (the router) and
//! `frg-srv` (nginx), 198.18.0.0/15 only, torn down by a guard; holds the machine-wide
//! lab lock.
//!
//! nginx's kernel sends without DF (`net.ipv4.ip_no_pmtu_disc=1`, as behind a device that
//! clears it or a tunnel), the router's link towards Squall has an MTU of 1,000 bytes and
//! Squall's end 1,500 (Squall advertises an MSS of 1,460): every full segment of nginx's
//! answers reaches Squall in two IPv4 fragments, which the node reassembles. Before the
//! node reassembled, no answer ever came whole and every flow stalled.

use std::process::{Command, Stdio};

use serde_json::Value;

mod lab;
use lab::{
    fragmented_udp_client, lab_start, nginx_squall_requests, nginx_w1_on, ns, num, python_in, root,
    run_ok, squall_bin, squall_in, tmpdir, w1_client_profile, Capture, Namespaces, Proc,
};

const CLI: &str = "frg-cli";
const RTR: &str = "frg-rtr";
const SRV: &str = "frg-srv";

/// The three namespaces: frg-c0 (Squall, MTU 1,500) - frg-r0 (198.18.0.1/24, MTU 1,000)
/// | frg-r1 (198.18.1.1/24) - frg-s0 (198.18.1.2/24 and nginx's 198.18.48.1/32).
fn topology() -> Namespaces {
    let t = Namespaces::create(&[CLI, RTR, SRV]);
    for (a, na, b, nb) in [
        ("frg-c0", CLI, "frg-r0", RTR),
        ("frg-r1", RTR, "frg-s0", SRV),
    ] {
        run_ok(Command::new("ip").args([
            "link", "add", a, "netns", na, "type", "veth", "peer", "name", b, "netns", nb,
        ]));
    }
    for (n, i) in [
        (CLI, "frg-c0"),
        (RTR, "frg-r0"),
        (RTR, "frg-r1"),
        (SRV, "frg-s0"),
    ] {
        // Offloads off: the frames are what a wire would carry.
        run_ok(&mut ns(
            n,
            &[
                "ethtool", "-K", i, "tso", "off", "gso", "off", "gro", "off", "tx", "off", "rx",
                "off",
            ],
        ));
        run_ok(&mut ns(n, &["ip", "link", "set", i, "up"]));
    }
    for (n, cmd) in [
        (RTR, "ip link set frg-r0 mtu 1000"),
        (RTR, "ip addr add 198.18.0.1/24 dev frg-r0"),
        (RTR, "ip addr add 198.18.1.1/24 dev frg-r1"),
        // Squall's client pool, on the link towards it (Squall answers ARP for it).
        (RTR, "ip route add 198.18.16.0/24 dev frg-r0"),
        (RTR, "ip route add 198.18.48.1/32 via 198.18.1.2"),
        (RTR, "sysctl -qw net.ipv4.ip_forward=1"),
        (SRV, "ip addr add 198.18.1.2/24 dev frg-s0"),
        (SRV, "ip addr add 198.18.48.1/32 dev frg-s0"),
        (SRV, "ip route add 198.18.16.0/24 via 198.18.1.1"),
        // No DF on what nginx's kernel sends: the router fragments it.
        (SRV, "sysctl -qw net.ipv4.ip_no_pmtu_disc=1"),
    ] {
        run_ok(&mut ns(n, &cmd.split(' ').collect::<Vec<_>>()));
    }
    t
}

/// 1,000 W1 flows (200 a second for 5 s) from Squall's client through the fragmenting
/// router to nginx: every flow completes with every byte, nginx's access log agrees,
/// Squall reassembled every fragmented segment (none lost), and the capture on Squall's
/// side (tshark reassembling the fragments) shows no malformed packet, no bad checksum
/// and no RST.
#[test]
fn client_only_squall_against_nginx_through_a_fragmenting_router() {
    let tools = [
        "ip", "ethtool", "sysctl", "nginx", "curl", "dumpcap", "tshark",
    ];
    let Some(_lock) = lab_start(&tools) else {
        return;
    };
    let _topo = topology();
    let dir = tmpdir("frg-cli");
    let (_nginx, total) = nginx_w1_on(SRV, &dir, "198.18.48.1");
    let prof = w1_client_profile(&dir, total);
    let json = dir.join("run.json");
    let cap = Capture::start(CLI, "frg-c0", &dir, "net 198.18.16.0/28");
    let args = [
        "run",
        prof.to_str().unwrap(),
        "--iface",
        "afpacket:frg-c0",
        "--mode",
        "client",
        "--peer-ip",
        "198.18.0.1",
        "--duration",
        "5",
        "--mult",
        "2",
        "--drain-sec",
        "20",
        "-q",
        "--json",
        json.to_str().unwrap(),
    ];
    let (code, text) = squall_in(CLI, &args, 90);
    eprintln!("{text}");
    let wire = cap.stop_and_check();
    assert_eq!(
        code, 0,
        "squall client run through the router not clean:\n{text}"
    );
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let flows = num(&r, &["client", "flows", "started"]);
    assert_eq!(flows, 1_000);
    assert_eq!(num(&r, &["client", "flows", "completed"]), flows);
    assert_eq!(num(&r, &["errors"]), 0);
    assert_eq!(num(&r, &["client", "flows", "l7_rx_bytes"]), flows * total);
    assert_eq!(nginx_squall_requests(&dir), flows, "nginx access log lines");
    // 32 KiB in 1,460-byte segments: 22 full ones a flow at least, each in 2 fragments.
    let (frags, whole, lost) = (
        num(&r, &["client", "port", "ip_fragments"]),
        num(&r, &["client", "port", "ip_reassembled"]),
        num(&r, &["client", "port", "ip_reasm_dropped"]),
    );
    assert!(whole >= flows * 22, "segments reassembled: {whole}");
    assert_eq!(frags, 2 * whole, "two fragments each");
    assert_eq!(lost, 0);
    assert!(
        text.contains(&format!(
            "IP fragments {frags} (datagrams reassembled {whole})"
        )),
        "the port's line: {text}"
    );
    eprintln!(
        "through a fragmenting router: {flows} flows, {total} bytes each; {frags} fragments, \
         {whole} segments reassembled; {wire}"
    );
}

/// Fragments both ways with the kernel as Squall's UDP peer, IPv4 and IPv6: a kernel UDP
/// socket sends 4,000-byte queries to Squall's DNS-like server (`examples/udp-dns.json`,
/// its answer made 4,000 bytes too) over a 1,500-byte veth, so each query comes in three
/// fragments of the kernel's (RFC 791; RFC 8200 §4.5: its own fragment headers and ids),
/// which Squall reassembles, and each answer goes back in three of Squall's, which the
/// kernel reassembles: every padded query is answered whole; a datagram of that size to
/// a closed port is refused (port unreachable: ECONNREFUSED); the port's line counts both
/// ways. Namespaces `frg4-*` / `frg6-*` (the kernel at .2 or ::2, Squall at .1 or ::1).
#[test]
fn fragments_both_ways_with_a_kernels_udp() {
    kernel_udp_through_fragments(false);
    kernel_udp_through_fragments(true);
}

fn kernel_udp_through_fragments(v6: bool) {
    let Some(_lock) = lab_start(&["ip", "ethtool", "sysctl", "python3"]) else {
        return;
    };
    let (cli, srv, c0, s0) = if v6 {
        ("frg6-cli", "frg6-srv", "frg6-c0", "frg6-s0")
    } else {
        ("frg4-cli", "frg4-srv", "frg4-c0", "frg4-s0")
    };
    let (kernel, squall, kernel_cidr) = if v6 {
        ("2001:db8:66::2", "2001:db8:66::1", "2001:db8:66::2/64")
    } else {
        ("198.18.66.2", "198.18.66.1", "198.18.66.2/24")
    };
    let _topo = Namespaces::create(if v6 {
        &["frg6-cli", "frg6-srv"]
    } else {
        &["frg4-cli", "frg4-srv"]
    });
    run_ok(Command::new("ip").args([
        "link", "add", c0, "netns", cli, "type", "veth", "peer", "name", s0, "netns", srv,
    ]));
    let off = |i: &str| format!("ethtool -K {i} tso off gso off gro off tx off rx off");
    for (n, cmd) in [
        (cli, off(c0)),
        (srv, off(s0)),
        // Squall's end: no kernel IPv6 there (Squall answers neighbour discovery).
        (srv, format!("sysctl -qw net.ipv6.conf.{s0}.disable_ipv6=1")),
        (cli, format!("ip link set {c0} up")),
        (srv, format!("ip link set {s0} up")),
        (cli, format!("ip addr add {kernel_cidr} dev {c0} nodad")),
    ] {
        let cmd = if v6 { cmd } else { cmd.replace(" nodad", "") };
        run_ok(&mut ns(n, &cmd.split(' ').collect::<Vec<_>>()));
    }
    let dir = tmpdir(cli);
    let mut p: Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("examples/udp-dns.json")).unwrap(),
    )
    .unwrap();
    p["ip_gens"][0]["clients"]["range"] = serde_json::json!([kernel, kernel]);
    p["ip_gens"][0]["servers"]["range"] = serde_json::json!([squall, squall]);
    // The answer: the query's id (0x1234) first, 4,000 bytes in all.
    p["buffers"][1] = serde_json::json!({
        "name": "answer", "text": "\u{12}4", "size": 4000, "fill": {"text": "a"}
    });
    let prof = dir.join("udp.json");
    std::fs::write(&prof, p.to_string()).unwrap();
    let err = dir.join("server.err");
    let iface = format!("afpacket:{s0}");
    let mut srv_proc = Proc(
        ns(
            srv,
            &[
                "timeout",
                "60",
                squall_bin(),
                "run",
                prof.to_str().unwrap(),
                "--iface",
                &iface,
                "--mode",
                "server",
                "--peer-ip",
                kernel,
                "--duration",
                "6",
                "-q",
            ],
        )
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .expect("start the squall server"),
    );
    let client = fragmented_udp_client(squall, 4000);
    let (got, stderr) = python_in(cli, &client);
    assert_eq!(
        got, "5 3",
        "whole answers to 5 fragmented queries, refusals of 3 fragmented datagrams (v6 \
         {v6}): {got} ({stderr})"
    );
    let _ = srv_proc.0.wait();
    let line = std::fs::read_to_string(&err).unwrap();
    assert!(
        line.contains("IP fragments 24 (datagrams reassembled 8)"),
        "the port's line: {line}"
    );
    // The answers: 5, and those of the client's first, plain queries (one at least).
    let sent: Vec<u64> = line
        .split("UDP datagrams sent in fragments ")
        .nth(1)
        .map(|t| {
            t.split(|c: char| !c.is_ascii_digit())
                .filter_map(|x| x.parse().ok())
                .take(2)
                .collect()
        })
        .unwrap_or_default();
    assert!(
        sent.len() == 2 && sent[0] >= 6 && sent[1] == 3 * sent[0],
        "answers sent in fragments: {line}"
    );
}
