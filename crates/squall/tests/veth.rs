//! Lab tests on a real interface (`scripts/lab.sh`: namespaces sq-cli / sq-srv joined by a
//! veth, 198.18.0.0/15 only): Squall in client-only mode over AF_PACKET against a real
//! nginx, and in server-only mode answering real curl (and ab if installed). Each test
//! needs root, ip, ethtool, nginx and curl, and is skipped (with the reason printed)
//! otherwise. The lab is always torn down (guard), spawned servers are killed by pid.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

mod lab;
use lab::*;

#[test]
fn client_only_squall_against_nginx() {
    client_against_nginx("afpacket:sq-cli0", None, 200);
}

#[test]
fn client_only_squall_against_nginx_rx_ring() {
    client_against_nginx("afpacket:sq-cli0,ring", None, 200);
}

/// The same over DPDK: the `net_af_packet` PMD on the lab's veth, no hugepages, 10,000
/// flows.
#[cfg(feature = "dpdk")]
#[test]
fn client_only_squall_over_dpdk_against_nginx() {
    client_against_nginx(
        "dpdk",
        Some(
            "--no-huge --in-memory -l 0 --no-pci --no-telemetry --log-level=*:warning \
             --vdev=net_af_packet0,iface=sq-cli0,framecnt=8192,qdisc_bypass=1",
        ),
        10_000,
    );
}

/// A capture on the server's end of the veth (sq-srv0), stopped (SIGTERM) and checked by
/// [`Capture::check`]: full frames of the first `frames` frames, and the RSTs of the whole
/// run in a second, filtered file.
struct Capture {
    all: Proc,
    rst: Proc,
    dir: PathBuf,
}

impl Capture {
    fn start(dir: &Path, frames: u32) -> Capture {
        let spawn = |file: &str, extra: &[&str]| {
            let f = dir.join(file).display().to_string();
            let log = std::fs::File::create(dir.join(format!("{file}.log"))).unwrap();
            let c = frames.to_string();
            let mut a = vec!["tcpdump", "-i", "sq-srv0", "-n", "-s", "0", "-U", "-w", &f];
            if extra.is_empty() {
                a.extend_from_slice(&["-c", &c]);
            }
            a.extend_from_slice(extra);
            Proc(
                ns("sq-srv", &a)
                    .stdout(Stdio::null())
                    .stderr(log)
                    .spawn()
                    .expect("tcpdump"),
            )
        };
        let cap = Capture {
            all: spawn("all.pcap", &[]),
            rst: spawn("rst.pcap", &["tcp[tcpflags] & tcp-rst != 0"]),
            dir: dir.to_path_buf(),
        };
        let t0 = Instant::now();
        for f in ["all.pcap.log", "rst.pcap.log"] {
            while !std::fs::read_to_string(dir.join(f))
                .unwrap_or_default()
                .contains("listening on")
            {
                assert!(
                    t0.elapsed() < Duration::from_secs(10),
                    "tcpdump did not start"
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        cap
    }

    /// Stops the captures; asserts that tshark finds TCP frames, no malformed frame, no
    /// bad IP or TCP checksum and no RST (in the whole run). Returns the frames checked.
    fn check(mut self) -> usize {
        for p in [&self.all, &self.rst] {
            let _ = Command::new("kill")
                .args(["-TERM", &p.0.id().to_string()])
                .status();
        }
        let _ = self.all.0.wait();
        let _ = self.rst.0.wait();
        let tshark = |file: &str, filter: &str| -> usize {
            let f = self.dir.join(file).display().to_string();
            let out = Command::new("tshark")
                .args(["-r", &f, "-n", "-o", "tcp.check_checksum:TRUE"])
                .args(["-o", "tcp.desegment_tcp_streams:FALSE"])
                .args(["-o", "ip.check_checksum:TRUE", "-Y", filter])
                .args(["-T", "fields", "-e", "frame.number"])
                .output()
                .expect("tshark");
            assert!(out.status.success(), "tshark -r {f}: {out:?}");
            String::from_utf8_lossy(&out.stdout).lines().count()
        };
        let tcp = tshark("all.pcap", "tcp");
        assert!(tcp > 1000, "the capture holds {tcp} TCP frames");
        let bad = "_ws.malformed || _ws.expert.severity == error || tcp.checksum.status == 2 \
                   || ip.checksum.status == 2 || tcp.flags.reset == 1";
        assert_eq!(
            tshark("all.pcap", bad),
            0,
            "malformed, bad checksum or RST frames"
        );
        assert_eq!(
            tshark("rst.pcap", "tcp.flags.reset == 1"),
            0,
            "RSTs during the run"
        );
        tcp
    }
}

/// Squall client-only on sq-cli0 (`iface`, EAL arguments `eal`) against nginx in sq-srv:
/// `flows` W1-like flows at 100 CPS x mult (2 s for 200, else 10 s), every response byte
/// checked, nginx's access log agreeing on the count, a capture of the run free of
/// malformed frames, bad checksums and RSTs.
fn client_against_nginx(iface: &str, eal: Option<&str>, flows: u64) {
    let _g = LAB.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(r) = skip(&["ip", "ethtool", "nginx", "curl", "tcpdump", "tshark"]) {
        eprintln!("skipped: {r}");
        return;
    }
    let dir = tmpdir("cli");
    let www = dir.join("www");
    std::fs::create_dir_all(&www).unwrap();
    let body: Vec<u8> = (0..32_768u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(www.join("w1"), &body).unwrap();
    let d = dir.display();
    let conf = format!(
        "daemon off;\nmaster_process off;\nworker_processes 1;\npid {d}/nginx.pid;\n\
         error_log {d}/error.log warn;\nevents {{ worker_connections 4096; }}\n\
         http {{\n access_log {d}/access.log;\n server_tokens off;\n client_body_temp_path {d};\n\
         proxy_temp_path {d};\n fastcgi_temp_path {d};\n uwsgi_temp_path {d};\n\
         scgi_temp_path {d};\n server {{\n  listen 198.18.48.1:80;\n  root {d}/www;\n\
         default_type application/octet-stream;\n }}\n}}\n"
    );
    std::fs::write(dir.join("nginx.conf"), conf).unwrap();
    let _lab = Lab::up(&["--squall", "client"]);
    let conf_path = dir.join("nginx.conf").display().to_string();
    let prefix = d.to_string();
    let _nginx = Proc(
        ns("sq-srv", &["nginx", "-c", &conf_path, "-p", &prefix])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start nginx"),
    );
    // Exact response size (headers + body) as nginx sends it to a `Connection: close`
    // request, measured from inside sq-srv (the kernel path, not the veth).
    let t0 = Instant::now();
    let total = loop {
        let out = ns(
            "sq-srv",
            &[
                "curl",
                "-s",
                "-m",
                "2",
                "-o",
                "/dev/null",
                "-H",
                "Connection: close",
                "-w",
                "%{size_header} %{size_download}",
                "http://198.18.48.1/w1",
            ],
        )
        .output()
        .unwrap();
        let s = String::from_utf8_lossy(&out.stdout).to_string();
        let v: Vec<u64> = s.split(' ').filter_map(|x| x.parse().ok()).collect();
        if v.len() == 2 && v[1] == 32_768 {
            break v[0] + v[1];
        }
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "nginx did not come up: {s}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let src = root().join("crates/squall/tests/profiles/veth-client.json");
    let mut p: Value = serde_json::from_str(&std::fs::read_to_string(src).unwrap()).unwrap();
    p["programs"][0]["commands"][1]["bytes"] = total.into();
    let prof = dir.join("client.json");
    std::fs::write(&prof, p.to_string()).unwrap();
    let json = dir.join("client-run.json");
    // nginx's log so far holds the probes above.
    let probes = std::fs::read_to_string(dir.join("access.log"))
        .unwrap_or_default()
        .lines()
        .count();
    let secs: u64 = if flows <= 200 { 2 } else { 10 };
    let (secs_s, mult) = (
        secs.to_string(),
        (flows as f64 / (100.0 * secs as f64)).to_string(),
    );
    let mut args = vec![
        "run",
        prof.to_str().unwrap(),
        "--iface",
        iface,
        "--mode",
        "client",
        "--duration",
        &secs_s,
        "--mult",
        &mult,
        "--drain-sec",
        "20",
        "-q",
        "--json",
        json.to_str().unwrap(),
    ];
    if let Some(e) = eal {
        args.extend_from_slice(&["--eal", e]);
    }
    let cap = Capture::start(&dir, 40_000);
    let (code, text) = squall_in("sq-cli", &args, 90);
    eprintln!("{text}");
    let checked = cap.check();
    assert_eq!(code, 0, "squall client run not clean:\n{text}");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let started = num(&r, &["client", "flows", "started"]);
    assert_eq!(started, flows, "{secs} s at {} CPS", flows / secs);
    assert_eq!(num(&r, &["client", "flows", "completed"]), flows);
    assert_eq!(num(&r, &["errors"]), 0);
    assert_eq!(
        num(&r, &["client", "flows", "l7_rx_bytes"]),
        flows * total,
        "every response byte of every flow"
    );
    assert_eq!(num(&r, &["client", "tcp", "tcps_rcvbyte"]), flows * total);
    assert!(r["clean"].as_bool().unwrap());
    let inv = r["invariants"].as_array().unwrap();
    assert!(inv.iter().any(|c| c["name"] == "single_side_mode"));
    assert!(!inv
        .iter()
        .any(|c| c["name"] == "client_sent_eq_server_received"));
    // nginx served every request once, whole: its access log agrees.
    let log = std::fs::read_to_string(dir.join("access.log")).unwrap();
    let served: Vec<&str> = log.lines().skip(probes).collect();
    assert_eq!(served.len() as u64, flows, "nginx's access log");
    let whole = served
        .iter()
        .filter(|l| l.contains("\"GET /w1 HTTP/1.1\" 200 32768 "))
        .count();
    assert_eq!(
        whole as u64, flows,
        "requests served whole (200, 32768 bytes)"
    );
    eprintln!(
        "veth client-only ({iface}) vs nginx: {flows} flows, {} errors, {:.1} CPS, {total} bytes \
         each; nginx logged {flows}; {checked} captured TCP frames clean",
        num(&r, &["errors"]),
        r["rates"]["cps"].as_f64().unwrap()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Squall server-only on sq-srv0 (AF_PACKET) for 4 s (+1 s drain) in a thread.
fn server_run(prof: &str, json: Option<&Path>) -> std::thread::JoinHandle<(i32, String)> {
    server_thread("sq-srv", prof, "afpacket:sq-srv0", &[], json)
}

#[test]
fn server_only_squall_answers_curl_and_ab() {
    let _g = LAB.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(r) = skip(&["ip", "ethtool", "curl"]) {
        eprintln!("skipped: {r}");
        return;
    }
    let dir = tmpdir("srv");
    let prof = root().join("crates/squall/tests/profiles/veth-server.json");
    let p: Value = serde_json::from_str(&std::fs::read_to_string(&prof).unwrap()).unwrap();
    let expect = buffer_bytes(&p, "http_resp");
    let prof = prof.to_str().unwrap().to_string();
    let _lab = Lab::up(&["--squall", "server"]);
    let json = dir.join("server-run.json");
    // Phase 1: curl, checked byte for byte; the run must be clean.
    let srv = server_run(&prof, Some(&json));
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
    let (code, text) = srv.join().unwrap();
    eprintln!("{text}");
    assert_eq!(code, 0, "squall server run not clean:\n{text}");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(num(&r, &["server", "flows", "accepted"]), CURLS);
    assert_eq!(num(&r, &["server", "flows", "completed"]), CURLS);
    assert_eq!(num(&r, &["errors"]), 0);
    assert_eq!(
        num(&r, &["server", "flows", "l7_tx_acked"]),
        CURLS * expect.len() as u64
    );
    eprintln!("veth server-only vs curl: {CURLS} requests, byte-exact, 0 errors");
    // Phase 2: ab -n 200 -c 10, if installed.
    if !have("ab") {
        eprintln!("ab phase skipped: `ab` (apache2-utils) is not installed");
        let _ = std::fs::remove_dir_all(&dir);
        return;
    }
    let srv = server_run(&prof, Some(&json));
    std::thread::sleep(Duration::from_millis(1200));
    let out = ns(
        "sq-cli",
        &[
            "timeout",
            "20",
            "ab",
            "-n",
            "200",
            "-c",
            "10",
            "http://198.18.48.1/",
        ],
    )
    .output()
    .unwrap();
    let abt = String::from_utf8_lossy(&out.stdout).to_string();
    let (_, text) = srv.join().unwrap();
    eprintln!("{abt}\n{text}");
    assert!(out.status.success(), "ab failed: {abt}");
    let field = |k: &str| -> String {
        abt.lines()
            .find(|l| l.starts_with(k))
            .and_then(|l| l.split(':').nth(1))
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    };
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
        "veth server-only vs ab -n 200 -c 10: 200 complete, 0 failed, ab {} req/s, {early} extra connection(s) closed early by ab",
        field("Requests per second")
            .split_whitespace()
            .next()
            .unwrap_or("?")
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The node answers the kernel: while Squall runs server-only (owning 198.18.48.1, which
/// no kernel in the lab holds), `arping` from the client namespace gets Squall's MAC and
/// `ping` gets echo replies; an address Squall does not own gets neither.
#[test]
fn the_node_answers_kernel_arping_and_ping() {
    let _g = LAB.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(r) = skip(&["ip", "ethtool", "ping", "arping"]) {
        eprintln!("skipped: {r}");
        return;
    }
    let prof = root().join("crates/squall/tests/profiles/veth-server.json");
    let prof = prof.to_str().unwrap().to_string();
    let _lab = Lab::up(&["--squall", "server"]);
    let srv = server_run(&prof, None);
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
