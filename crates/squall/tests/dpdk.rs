//! Squall over DPDK virtual devices (no NIC, no hugepages). T-memif
//! (../shared/BENCHMARKS.md): two Squall processes, a server and a client, joined by DPDK's
//! `net_memif` shared-memory device (no kernel in the path), one core each, run W1
//! (examples/w1-astf-http.json with the lab's addresses): every flow completes, every byte
//! is counted on both sides; the memif socket lives in a private temp dir. And Squall
//! server-only over `net_tap` (a PMD with checksum offload) in a private namespace
//! (`dp-tap-PID`) answering the kernel's curl byte for byte, with the device filling and
//! verifying the checksums; and `squall serve` the same way (a file, a range, a route).
//! Need root and the `dpdk` feature.
#![cfg(feature = "dpdk")]

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

mod lab;
use lab::*;

/// EAL arguments of one end: core `core`, memif `role` on `sock`.
fn eal(core: u32, role: &str, sock: &str) -> String {
    format!(
        "--no-huge --in-memory -l {core} --no-pci --no-telemetry --log-level=*:warning \
         --vdev=net_memif0,role={role},socket={sock}"
    )
}

#[test]
fn w1_between_two_squall_processes_over_memif() {
    w1_over_memif(false);
}

/// The same over IPv6 (TRex's `ipv6.enable` over the lab pools: 2001:db8:64::c612:1001..
/// to 2001:db8:64:1::c612:3001), neighbour discovery resolving each end.
#[test]
fn w1_between_two_squall_processes_over_memif_ipv6() {
    w1_over_memif(true);
}

fn w1_over_memif(ipv6: bool) {
    if let Some(r) = skip(&["timeout"]) {
        eprintln!("skipped: {r}");
        return;
    }
    // One memif pair at a time: each end busy-polls a core.
    let _g = LAB.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tmpdir(if ipv6 { "memif6" } else { "memif" });
    // W1 with the lab's addresses (198.18.0.0/15) and the request length the server expects.
    let src = root().join("examples/w1-astf-http.json");
    let mut p: Value = serde_json::from_str(&std::fs::read_to_string(src).unwrap()).unwrap();
    let g = &mut p["ip_gens"][0];
    g["clients"]["range"] = serde_json::json!(["198.18.16.1", "198.18.16.200"]);
    g["servers"]["range"] = serde_json::json!(["198.18.48.1", "198.18.48.1"]);
    g.as_object_mut().unwrap().remove("ip_offset");
    for a in p["templates"][0]["assoc"].as_array_mut().unwrap() {
        a["ip_start"] = "198.18.48.1".into();
        a["ip_end"] = "198.18.48.1".into();
    }
    let req = p["buffers"][0]["text"]
        .as_str()
        .unwrap()
        .replace("48.0.0.1", "198.18.48.1");
    p["programs"][1]["commands"][0]["bytes"] = req.len().into();
    p["buffers"][0]["text"] = req.into();
    if ipv6 {
        p["global"]["ipv6"] = serde_json::json!({"enable": 1, "src_msb": "2001:db8:64::", "dst_msb": "2001:db8:64:1::"});
    }
    let prof = dir.join("w1.json");
    std::fs::write(&prof, p.to_string()).unwrap();
    let prof = prof.to_str().unwrap().to_string();
    let sock = dir.join("memif.sock").display().to_string();
    let (srv_json, cli_json) = (dir.join("server.json"), dir.join("client.json"));
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let (srv_core, cli_core) = if cores > 1 { (1, 0) } else { (0, 0) };

    // The server: up for 12 s of generation (+2 s drain) at most; it ends once idle after.
    let srv_eal = eal(srv_core, "server", &sock);
    let log = dir.join("server.log");
    let mut srv = Proc(
        Command::new("timeout")
            .args([
                "60",
                squall_bin(),
                "run",
                &prof,
                "--iface",
                "dpdk",
                "--mode",
                "server",
            ])
            .args([
                "--eal",
                &srv_eal,
                "--duration",
                "12",
                "--drain-sec",
                "2",
                "-q",
            ])
            .args(["--json", srv_json.to_str().unwrap()])
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(std::fs::File::create(dir.join("server.err")).unwrap())
            .spawn()
            .expect("start the server"),
    );
    // The memif client connects once, at its start: wait for the server's socket (an
    // abstract one, listed in /proc/net/unix as `@PATH`).
    let listed = format!("@{sock}");
    let t0 = Instant::now();
    while !std::fs::read_to_string("/proc/net/unix")
        .map(|t| t.lines().any(|l| l.ends_with(&listed)))
        .unwrap_or(false)
    {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "the squall server made no memif socket in 20 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // The client: 10,000 flows at 2,000 CPS.
    let cli_eal = eal(cli_core, "client", &sock);
    let (code, text) = squall_in(
        "",
        &[
            "run",
            &prof,
            "--iface",
            "dpdk",
            "--mode",
            "client",
            "--eal",
            &cli_eal,
            "--duration",
            "5",
            "--mult",
            "2000",
            "--drain-sec",
            "5",
            "-q",
            "--json",
            cli_json.to_str().unwrap(),
        ],
        60,
    );
    let status = srv.0.wait().expect("server");
    let srv_text = std::fs::read_to_string(&log).unwrap_or_default()
        + &std::fs::read_to_string(dir.join("server.err")).unwrap_or_default();
    eprintln!("client:\n{text}\nserver:\n{srv_text}");
    assert_eq!(code, 0, "client run not clean");
    assert_eq!(status.code(), Some(0), "server run not clean");
    let c: Value = serde_json::from_str(&std::fs::read_to_string(&cli_json).unwrap()).unwrap();
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&srv_json).unwrap()).unwrap();
    let flows = 10_000;
    assert_eq!(num(&c, &["client", "flows", "started"]), flows);
    assert_eq!(num(&c, &["client", "flows", "completed"]), flows);
    assert_eq!(num(&s, &["server", "flows", "accepted"]), flows);
    assert_eq!(num(&s, &["server", "flows", "completed"]), flows);
    assert_eq!(num(&c, &["errors"]) + num(&s, &["errors"]), 0);
    assert_eq!(num(&c, &["client", "flows", "l7_rx_bytes"]), flows * 32_768);
    assert_eq!(num(&s, &["server", "flows", "l7_tx_acked"]), flows * 32_768);
    // What each side sent is what the other received.
    let tcp = |v: &Value, side: &str, k: &str| num(v, &[side, "tcp", k]);
    assert_eq!(
        tcp(&c, "client", "tcps_sndbyte"),
        tcp(&s, "server", "tcps_rcvbyte")
    );
    assert_eq!(
        tcp(&s, "server", "tcps_sndbyte"),
        tcp(&c, "client", "tcps_rcvbyte")
    );
    assert!(text.contains("net_memif0 (net_memif)"), "{text}");
    if ipv6 {
        assert!(text.contains("peer 2001:db8:64:1::c612:3001"), "{text}");
    }
    eprintln!(
        "T-memif W1 (IPv6 {ipv6}): {flows} flows at {:.1} CPS; CPU (polling included) client {:.3} s, \
         server {:.3} s",
        c["rates"]["cps"].as_f64().unwrap(),
        c["cpu_sec"].as_f64().unwrap_or(0.0),
        s["cpu_sec"].as_f64().unwrap_or(0.0)
    );
}

/// A network namespace of this test's own, deleted on drop.
struct Netns(String);

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

/// Waits for the PMD's tap `dp-tap0` in namespace `n`, then gives the kernel's side
/// 198.18.0.2/24 and a route to Squall's 198.18.48.0/24 through it.
fn tap_up(n: &str) {
    let t0 = Instant::now();
    while !ns(n, &["ip", "link", "show", "dp-tap0"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap()
        .success()
    {
        assert!(
            t0.elapsed() < Duration::from_secs(15),
            "the tap did not appear"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    for cmd in [
        &["ip", "link", "set", "lo", "up"][..],
        &["ip", "addr", "add", "198.18.0.2/24", "dev", "dp-tap0"],
        &["ip", "link", "set", "dp-tap0", "up"],
        &["ip", "route", "add", "198.18.48.0/24", "dev", "dp-tap0"],
    ] {
        assert!(ns(n, cmd).status().unwrap().success(), "{cmd:?}");
    }
}

/// `squall serve` over DPDK (`net_tap`, checksum offload by the device) in a private
/// namespace answering the kernel's curl: a file byte for byte, a range of it, a route;
/// dual stack: the same file over IPv6 (the kernel resolving Squall's IPv6 address by
/// neighbour discovery, the device filling the IPv6 TCP checksums).
#[test]
fn squall_serve_over_dpdk_tap_answers_curl() {
    if let Some(r) = skip(&["ip", "curl", "ab", "wrk", "dumpcap", "tshark"]) {
        eprintln!("skipped: {r}");
        return;
    }
    if !std::path::Path::new("/dev/net/tun").exists() {
        squall_port::lab::skipped("no /dev/net/tun");
        return;
    }
    let name = format!("dp-srv-{}", std::process::id());
    let _ = Command::new("ip").args(["netns", "del", &name]).status();
    assert!(Command::new("ip")
        .args(["netns", "add", &name])
        .status()
        .unwrap()
        .success());
    let netns = Netns(name);
    let n = netns.0.as_str();
    let dir = tmpdir("tap-serve");
    let www = dir.join("www");
    std::fs::create_dir_all(&www).unwrap();
    let file: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(www.join("f.bin"), &file).unwrap();
    let out_json = dir.join("serve.json");
    let eal = "--no-huge --in-memory -l 0 --no-pci --no-telemetry --log-level=*:warning \
               --vdev=net_tap0,iface=dp-tap0";
    let mut srv = Proc(
        ns(
            n,
            &[
                "timeout",
                "60",
                squall_bin(),
                "serve",
                "--root",
                www.to_str().unwrap(),
                "--listen",
                "198.18.48.1:80",
                "--listen",
                "[2001:db8:48::1]:80",
                "--iface",
                "dpdk",
                "--eal",
                eal,
                "--peer-ip",
                "198.18.0.2",
                "--route",
                "/ping return 200 \"pong\"",
                "--duration",
                "16",
            ],
        )
        .stdout(std::fs::File::create(&out_json).unwrap())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap(),
    );
    tap_up(n);
    // The wire on the tap's kernel side, checked by tshark at the end (the heads of every
    // frame; whole frames of the IPv6 download).
    let cap = Capture::start(n, "dp-tap0", &dir, "ip6 and tcp port 80");
    let curl = |args: &[&str]| {
        let mut a = vec!["curl", "-s", "-m", "2"];
        a.extend_from_slice(args);
        ns(n, &a).output().unwrap().stdout
    };
    let t0 = Instant::now();
    while curl(&["http://198.18.48.1/ping"]) != b"pong" {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "squall serve did not answer"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(curl(&["http://198.18.48.1/f.bin"]) == file, "f.bin differs");
    assert_eq!(
        curl(&["-r", "1000-1099", "http://198.18.48.1/f.bin"]),
        &file[1000..1100]
    );
    let v6 = [
        "ip",
        "-6",
        "addr",
        "add",
        "2001:db8:48::2/64",
        "dev",
        "dp-tap0",
        "nodad",
    ];
    assert!(ns(n, &v6).status().unwrap().success(), "{v6:?}");
    assert!(
        curl(&["-6", "http://[2001:db8:48::1]/f.bin"]) == file,
        "f.bin over IPv6 differs"
    );
    // ab, and wrk comparing every body with the file.
    let url = "http://198.18.48.1/f.bin";
    let ab = tool_in(n, &["ab", "-q", "-n", "200", "-c", "10", url]);
    assert_eq!(ab_field(&ab, "Complete requests"), "200", "{ab}");
    assert_eq!(ab_field(&ab, "Failed requests"), "0", "{ab}");
    assert_eq!(ab_field(&ab, "Document Length"), "200000 bytes", "{ab}");
    let wire = cap.stop_and_check();
    // wrk in a capture of its own: it stops after its 2 s with answers in flight, and its
    // kernel resets those connections (RSTs towards port 80, expected); any RST from
    // Squall's side fails. Whole frames kept: the short ones (requests, ACKs, FINs; the
    // answers' payload checksums were checked above).
    let wrk_dir = dir.join("wrk");
    std::fs::create_dir_all(&wrk_dir).unwrap();
    let cap = Capture::start(n, "dp-tap0", &wrk_dir, "tcp port 80 and less 300");
    let cmd = wrk_same_body_cmd(&dir, 10, url, &www.join("f.bin"));
    let wrk = tool_in(n, &cmd.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(
        !wrk.contains("Non-2xx") && !wrk.contains("Socket errors"),
        "{wrk}"
    );
    let (checked, differing) = wrk_bodies_checked(&wrk);
    assert!(checked > 0 && differing == 0, "{wrk}");
    let wrk_wire = cap.stop_and_check_allowing("tcp.dstport == 80");
    eprintln!(
        "squall serve over DPDK net_tap: curl and ab 200/200: {wire}; wrk {checked} bodies \
         identical: {wrk_wire}"
    );
    let status = srv.0.wait().unwrap();
    let mut err = String::new();
    if let Some(mut e) = srv.0.stderr.take() {
        use std::io::Read;
        let _ = e.read_to_string(&mut err);
    }
    assert!(status.success(), "squall serve: {status}\n{err}");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&out_json).unwrap())
        .unwrap_or_else(|e| panic!("{e}: {err}"));
    assert_eq!(num(&r, &["parse_errors"]), 0, "{r}");
    assert_eq!(num(&r, &["status_5xx"]), 0, "{r}");
    assert!(num(&r, &["status_2xx"]) >= 4, "{r}");
    assert!(num(&r, &["nd_answered"]) >= 1, "{r}");
    assert!(err.contains("(net_tap)"), "{err}");
}

#[test]
fn server_over_dpdk_tap_with_checksum_offload_answers_curl() {
    if let Some(r) = skip(&["ip", "curl", "timeout"]) {
        eprintln!("skipped: {r}");
        return;
    }
    if !std::path::Path::new("/dev/net/tun").exists() {
        squall_port::lab::skipped("no /dev/net/tun");
        return;
    }
    let name = format!("dp-tap-{}", std::process::id());
    let _ = Command::new("ip").args(["netns", "del", &name]).status();
    let st = Command::new("ip")
        .args(["netns", "add", &name])
        .status()
        .unwrap();
    assert!(st.success());
    let netns = Netns(name);
    let n = netns.0.as_str();
    let dir = tmpdir("tap");
    let prof = root().join("crates/squall/tests/profiles/veth-server.json");
    let p: Value = serde_json::from_str(&std::fs::read_to_string(&prof).unwrap()).unwrap();
    let expect = buffer_bytes(&p, "http_resp");
    let json = dir.join("server.json");
    // Squall serves 198.18.48.1 through the tap dp-tap0 (created by the PMD); the kernel
    // of the namespace is the client, 198.18.0.2 on the tap's kernel side.
    let eal = "--no-huge --in-memory -l 0 --no-pci --no-telemetry --log-level=*:warning \
               --vdev=net_tap0,iface=dp-tap0";
    let srv = server_thread(
        n,
        prof.to_str().unwrap(),
        "dpdk",
        &["--eal", eal],
        Some(&json),
    );
    tap_up(n);
    std::thread::sleep(Duration::from_millis(1000));
    const CURLS: u64 = 10;
    for i in 0..CURLS {
        let out = ns(n, &["curl", "-s", "-i", "-m", "3", "http://198.18.48.1/"])
            .output()
            .unwrap();
        assert!(out.status.success(), "curl #{i} failed: {out:?}");
        assert_eq!(out.stdout, expect, "curl #{i}: response differs");
    }
    let (code, text) = srv.join().unwrap();
    eprintln!("{text}");
    assert_eq!(code, 0, "squall server run not clean");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(num(&r, &["server", "flows", "completed"]), CURLS);
    assert_eq!(num(&r, &["errors"]), 0);
    // The node used the device's checksum offloads both ways.
    assert!(text.contains("(net_tap)"), "{text}");
    assert!(
        text.contains("TCP checksums on tx by the device, on rx by the device, frame by frame"),
        "{text}"
    );
}

/// `squall serve --cores 2` over a device whose driver takes an RSS redirection table
/// (DPDK's `net_null`, no traffic: `no-rx=1`): each worker's line says the table was
/// programmed round robin and read back (squall-port's `dpdk_reta` test checks the
/// table entry by entry and the steering that follows it).
#[test]
fn squall_serve_programs_the_redirection_table_of_a_two_queue_device() {
    if let Some(r) = skip(&[]) {
        eprintln!("skipped: {r}");
        return;
    }
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        squall_port::lab::skipped("needs 2 cores for --cores 2");
        return;
    }
    let dir = tmpdir("null-reta");
    std::fs::write(dir.join("a.txt"), b"a").unwrap();
    let eal = "--no-huge --in-memory -m 512 -l 0,1 --no-pci --no-telemetry \
               --log-level=*:warning --vdev=net_null0,no-rx=1";
    let (code, out) = squall_in(
        "",
        &[
            "serve",
            "--root",
            dir.to_str().unwrap(),
            "--listen",
            "198.18.0.1:80",
            "--peer-mac",
            "02:00:00:00:00:09",
            "--iface",
            "dpdk",
            "--eal",
            eal,
            "--cores",
            "2",
            "--duration",
            "1",
        ],
        30,
    );
    assert_eq!(code, 0, "{out}");
    let lines: Vec<&str> = out
        .lines()
        .filter(|l| l.contains("device net_null0 (net_null)"))
        .collect();
    assert_eq!(lines.len(), 2, "one line per worker: {out}");
    for l in lines {
        assert!(
            l.contains("(redirection table programmed round robin, read back)"),
            "{l}"
        );
    }
}
