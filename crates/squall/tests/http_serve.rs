//! Interop tests of `squall serve` (the lab of `scripts/lab.sh --squall server`: Squall
//! owns 198.18.48.1 on sq-srv0 over AF_PACKET or AF_XDP, real clients run in sq-cli):
//! curl (GET, HEAD, ranges, 304, 404/405, keep-alive and `--next`), pipelined requests
//! on one raw connection, ab, wrk and h2load's HTTP/1.1 mode: curl's and wrk's bodies
//! compared byte for byte with the files (wrk through a Lua hook), ab's by length and
//! h2load's by status (neither hands its bodies over); then SIGTERM during a slow download, which must still finish
//! (graceful stop), and the server's counters and access log must agree with what the
//! clients did. Needs root, ip, ethtool, curl, ab, wrk and h2load (scripts/deps.sh
//! test); skipped with the reason otherwise. Holds the machine-wide lab lock; the lab is
//! torn down by a guard and the server is killed by pid if the test fails.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

mod lab;
use lab::{
    machine_lock, ns, pattern, serve_report, signal, skip, squall_bin, tmpdir, Lab, Proc, LAB,
};

const URL: &str = "http://198.18.48.1";

/// `curl ARGS` in sq-cli: (stdout, exit code).
fn curl(args: &[&str]) -> (Vec<u8>, i32) {
    lab::curl_in("sq-cli", args)
}

fn text(args: &[&str]) -> String {
    String::from_utf8_lossy(&curl(args).0).into_owned()
}

/// The value of `key:` in a tool's report (`Failed requests:        0`).
fn field<'a>(out: &'a str, key: &str) -> &'a str {
    out.lines()
        .find_map(|l| l.trim().strip_prefix(key))
        .map(str::trim)
        .unwrap_or_else(|| panic!("no `{key}` in:\n{out}"))
}

fn run_tool(args: &[&str]) -> String {
    lab::tool_in("sq-cli", args)
}

/// `squall serve` in sq-srv serving `www` on 198.18.48.1:80 over `iface` to the peer
/// 198.18.0.2, with the `/ping` route and `extra` arguments, its report to `out_json`;
/// returned once `/ping` answers (`why` says what failed otherwise).
fn start_serve(www: &Path, iface: &str, out_json: &Path, extra: &[&str], why: &str) -> Proc {
    let mut args = vec![
        squall_bin(),
        "serve",
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
    ];
    args.extend_from_slice(extra);
    let srv = Proc(
        ns("sq-srv", &args)
            .stdout(std::fs::File::create(out_json).unwrap())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start squall serve"),
    );
    let t0 = Instant::now();
    while text(&["-m", "1", &format!("{URL}/ping")]) != "pong" {
        assert!(t0.elapsed() < Duration::from_secs(15), "{why}");
        std::thread::sleep(Duration::from_millis(200));
    }
    srv
}

#[test]
fn squall_serve_over_afpacket_answers_curl_ab_wrk_h2load() {
    serve_interop("afpacket:sq-srv0");
}

#[test]
fn squall_serve_over_afxdp_answers_curl_ab_wrk_h2load() {
    serve_interop("afxdp:sq-srv0");
}

/// The client's kernel leaves its transmit checksums to the veth's offload (a veth's
/// default): its frames carry only the pseudo-header sum. `squall serve` on the AF_PACKET
/// frame ring takes the kernel's word for them (TP_STATUS_CSUMNOTREADY) instead of
/// dropping every one as a bad checksum.
#[test]
fn squall_serve_takes_frames_whose_checksum_the_peer_left_to_the_offload() {
    let _g = LAB.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(r) = skip(&["ip", "ethtool", "curl", "ab"]) {
        eprintln!("skipped: {r}");
        return;
    }
    let dir = tmpdir("serve-csum");
    let www = dir.join("www");
    std::fs::create_dir_all(&www).unwrap();
    let big = pattern(1 << 20, 7);
    std::fs::write(www.join("big.bin"), &big).unwrap();
    let out_json = dir.join("serve.json");
    let _lab = Lab::up_env(&["--squall", "server"], &[("SQUALL_LAB_CLIENT_CSUM", "1")]);
    let tx = ns("sq-cli", &["ethtool", "-k", "sq-cli0"])
        .output()
        .unwrap();
    let tx = String::from_utf8_lossy(&tx.stdout).to_string();
    assert!(
        tx.contains("tx-checksum-ip-generic: on"),
        "the client end's checksum offload is on: {tx}"
    );
    let mut srv = start_serve(
        &www,
        "afpacket:sq-srv0",
        &out_json,
        &[],
        "squall serve did not answer a client whose checksums are left to the offload",
    );
    let (body, rc) = curl(&[&format!("{URL}/big.bin")]);
    assert_eq!(rc, 0);
    assert!(body == big, "big.bin differs ({} bytes)", body.len());
    let ab = run_tool(&["ab", "-n", "500", "-c", "10", &format!("{URL}/ping")]);
    assert!(ab.contains("Complete requests:      500"), "{ab}");
    assert!(ab.contains("Failed requests:        0"), "{ab}");
    signal(&srv, "-TERM");
    let (doc, _) = serve_report(&mut srv, &out_json);
    let num = |k: &str| doc[k].as_u64().unwrap_or_else(|| panic!("{k} in {doc}"));
    assert!(num("requests") >= 502, "{doc}");
    assert_eq!(num("parse_errors"), 0, "{doc}");
    assert_eq!(
        num("retransmits"),
        0,
        "no frame of the client was dropped: {doc}"
    );
}

fn serve_interop(iface: &str) {
    let _g = LAB.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(r) = skip(&["ip", "ethtool", "curl", "ab", "wrk", "h2load"]) {
        eprintln!("skipped: {r}");
        return;
    }
    let Some(_lock) = machine_lock(Duration::from_secs(300)) else {
        squall_port::lab::skipped("the lab lock (/tmp/squall-lab.lock) stayed busy for 300 s");
        return;
    };
    let dir = tmpdir("serve");
    let www = dir.join("www");
    std::fs::create_dir_all(www.join("sub")).unwrap();
    let big = pattern(3 << 20, 1);
    let page = b"<html><body>squall serve</body></html>\n".to_vec();
    std::fs::write(www.join("big.bin"), &big).unwrap();
    std::fs::write(www.join("index.html"), &page).unwrap();
    std::fs::write(www.join("sub/a b.css"), b"body{}\n").unwrap();
    let log = dir.join("access.log");
    let out_json = dir.join("serve.json");
    let _lab = Lab::up(&["--squall", "server"]);
    // Up once /ping answers.
    let mut srv = start_serve(
        &www,
        iface,
        &out_json,
        &["--access-log", log.to_str().unwrap(), "--drain-sec", "10"],
        "squall serve did not come up",
    );
    let mut requests = 1u64; // the /ping that answered (earlier tries got no connection)

    // GET: byte-exact.
    let (body, rc) = curl(&[&format!("{URL}/big.bin")]);
    assert_eq!(rc, 0);
    assert!(
        body == big,
        "big.bin differs ({} bytes received)",
        body.len()
    );
    assert_eq!(curl(&[&format!("{URL}/")]).0, page);
    assert_eq!(curl(&[&format!("{URL}/sub/a%20b.css")]).0, b"body{}\n");
    requests += 3;
    // HEAD: the headers of a GET, no body.
    let head = text(&["-I", &format!("{URL}/big.bin")]);
    requests += 1;
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    assert!(
        head.contains(&format!("Content-Length: {}\r\n", big.len())),
        "{head}"
    );
    assert!(
        head.contains("Content-Type: application/octet-stream\r\n"),
        "{head}"
    );
    let etag = field(&head, "ETag:").to_string();
    let lm = field(&head, "Last-Modified:").to_string();
    // Ranges: 206 with the slice, suffix ranges, 416 past the end.
    let (r, _) = curl(&["-r", "1000-1999", &format!("{URL}/big.bin")]);
    assert_eq!(r, &big[1000..2000]);
    let (r, _) = curl(&["-r", "-500", &format!("{URL}/big.bin")]);
    assert_eq!(r, &big[big.len() - 500..]);
    let st = text(&[
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        "-r",
        "9999999-",
        &format!("{URL}/big.bin"),
    ]);
    assert_eq!(st, "416");
    requests += 3;
    // Conditional requests: 304 on a matching ETag or an unchanged date.
    let code = |extra: &[&str], path: &str| {
        let mut a = vec!["-o", "/dev/null", "-w", "%{http_code}"];
        a.extend_from_slice(extra);
        let u = format!("{URL}{path}");
        a.push(&u);
        text(&a)
    };
    assert_eq!(
        code(&["-H", &format!("If-None-Match: {etag}")], "/big.bin"),
        "304"
    );
    assert_eq!(
        code(&["-H", &format!("If-Modified-Since: {lm}")], "/big.bin"),
        "304"
    );
    assert_eq!(
        code(&["-H", "If-None-Match: \"other\""], "/index.html"),
        "200"
    );
    assert_eq!(code(&[], "/nope"), "404");
    assert_eq!(code(&["-X", "POST"], "/index.html"), "405");
    assert_eq!(code(&["-X", "BREW"], "/index.html"), "501");
    requests += 6;
    // Keep-alive: several URLs on one connection, and `--next`.
    let w = text(&[
        "-o",
        "/dev/null",
        "-w",
        "%{http_code} %{num_connects}\n",
        &format!("{URL}/"),
        "-o",
        "/dev/null",
        &format!("{URL}/big.bin"),
        "--next",
        "-s",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code} %{num_connects}\n",
        &format!("{URL}/ping"),
    ]);
    assert_eq!(w, "200 1\n200 0\n200 0\n", "one connection for all three");
    requests += 3;
    // Pipelining: three requests in one write on a raw connection, answered in order.
    let raw = ns(
        "sq-cli",
        &[
            "bash",
            "-c",
            "exec 3<>/dev/tcp/198.18.48.1/80; printf 'GET /ping HTTP/1.1\\r\\nHost: a\\r\\n\\r\\nHEAD /index.html HTTP/1.1\\r\\nHost: a\\r\\n\\r\\nGET /sub/a%%20b.css HTTP/1.1\\r\\nHost: a\\r\\nConnection: close\\r\\n\\r\\n' >&3; timeout 5 cat <&3",
        ],
    )
    .output()
    .unwrap();
    let raw = String::from_utf8_lossy(&raw.stdout);
    assert_eq!(raw.matches("HTTP/1.1 200 OK\r\n").count(), 3, "{raw}");
    assert!(raw.contains("\r\n\r\npongHTTP/1.1 200 OK\r\n"), "{raw}");
    assert!(raw.ends_with("Connection: close\r\n\r\nbody{}\n"), "{raw}");
    requests += 3;

    // ab (HTTP/1.0 with keep-alive), wrk, h2load --h1: no failure, right sizes.
    let ab = run_tool(&[
        "ab",
        "-q",
        "-k",
        "-n",
        "5000",
        "-c",
        "20",
        &format!("{URL}/index.html"),
    ]);
    assert_eq!(field(&ab, "Complete requests:"), "5000");
    assert_eq!(field(&ab, "Failed requests:"), "0");
    assert_eq!(
        field(&ab, "Document Length:"),
        format!("{} bytes", page.len())
    );
    assert!(!ab.contains("Non-2xx"), "{ab}");
    requests += 5000;
    // wrk compares every body it receives with the file (a Lua `response` hook).
    let cmd = lab::wrk_same_body_cmd(&dir, 20, &format!("{URL}/big.bin"), &www.join("big.bin"));
    let wrk = run_tool(&cmd.iter().map(String::as_str).collect::<Vec<_>>());
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
    let (checked, differing) = lab::wrk_bodies_checked(&wrk);
    assert!(checked >= n && differing == 0, "{wrk}");
    let h2 = run_tool(&[
        "h2load",
        "--h1",
        "-n",
        "4000",
        "-c",
        "20",
        "-m",
        "4",
        &format!("{URL}/index.html"),
    ]);
    assert!(h2.contains("4000 succeeded, 0 failed, 0 errored"), "{h2}");
    assert!(h2.contains("status codes: 4000 2xx"), "{h2}");
    requests += 4000;

    // Graceful stop: SIGTERM while a rate-limited download of big.bin is in flight.
    let slow = ns(
        "sq-cli",
        &[
            "curl",
            "-s",
            "-m",
            "20",
            "--limit-rate",
            "2M",
            &format!("{URL}/big.bin"),
        ],
    )
    .stdout(Stdio::piped())
    .spawn()
    .unwrap();
    std::thread::sleep(Duration::from_millis(400));
    signal(&srv, "-TERM");
    let slow = slow.wait_with_output().unwrap();
    assert!(
        slow.stdout == big,
        "in-flight download cut at {} bytes",
        slow.stdout.len()
    );
    requests += 1;
    let (doc, _) = serve_report(&mut srv, &out_json);
    let num = |k: &str| doc[k].as_u64().unwrap_or_else(|| panic!("{k} in {doc}"));
    // wrk's requests were all answered; the total is ours plus wrk's (wrk counts those it
    // completed, a few more may have been answered as it stopped).
    let answered = num("requests");
    assert!(
        answered >= requests + n && answered <= requests + n + 20,
        "{doc} vs {requests} + wrk {n}"
    );
    assert_eq!(num("parse_errors"), 0, "{doc}");
    assert_eq!(num("status_5xx"), 1, "the 501 only: {doc}");
    assert_eq!(num("cut_at_stop"), 0, "{doc}");
    assert_eq!(num("refused"), 0, "{doc}");
    let lines = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        lines.lines().count() as u64,
        answered,
        "one access-log line per answer"
    );
    assert!(
        lines.contains("\"GET /big.bin HTTP/1.1\" 206 1000 "),
        "range logged"
    );
    // (the body bytes of every answer: "405 Method Not Allowed\n")
    assert!(lines.contains("\"POST /index.html HTTP/1.1\" 405 23 "));
    eprintln!(
        "squall serve over {iface}: {doc}\nab: {} req/s; h2load: {}",
        field(&ab, "Requests per second:"),
        h2.lines()
            .find(|l| l.starts_with("finished in"))
            .unwrap_or("")
    );
}
