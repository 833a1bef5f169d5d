//! Lab test of the HTTP-aware generator (`http_request` / `http_wait_response`) against a
//! real nginx (`scripts/lab.sh`: namespaces sq-cli / sq-srv joined by a veth, 198.18.0.0/15
//! only): Squall client-only over AF_PACKET, with keep-alive (6 requests per connection)
//! and with `Connection: close` (one per connection), nginx configured to answer 200 (a
//! fixed `return`), 404 (no such file) and a chunked response (gzip of a static file). The
//! status counts of each template group must equal those of nginx's access log (the two
//! groups send different User-Agents), and the chunked answers must have been chunked.
//! Needs root, ip, ethtool, nginx and curl; skipped (reason printed) otherwise. Holds the
//! machine-wide lab lock; the lab is torn down and nginx stopped by pid (guards).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

mod lab;
use lab::{machine_lock, ns, num, skip, squall_in, start_nginx, tmpdir, Lab, LAB};

/// Flows per second of each group and seconds of generation.
const CPS: u32 = 20;
const SECS: u32 = 3;
const ROUNDS: u32 = 6;

fn profile() -> Value {
    let urls = json!(["/ok", "/missing", "/chunked.txt"]);
    let hdr = |ua: &str, close: bool| {
        let mut h = vec![
            json!({"name": "Host", "value": "198.18.48.1"}),
            json!({"name": "User-Agent", "value": ua}),
            json!({"name": "Accept-Encoding", "value": "gzip"}),
        ];
        if close {
            h.push(json!({"name": "Connection", "value": "close"}));
        }
        h
    };
    json!({
        "version": 1,
        "buffers": [],
        "ip_gens": [{"name": "g",
            "clients": {"range": ["198.18.16.1", "198.18.16.200"]},
            "servers": {"range": ["198.18.48.1", "198.18.48.1"]}}],
        "programs": [
            {"name": "keepalive", "commands": [
                {"op": "connect"},
                {"op": "set_var", "id": 0, "val": ROUNDS},
                {"op": "set_label", "label": "next"},
                {"op": "http_request", "urls": urls, "headers": hdr("squall-ka", false)},
                {"op": "http_wait_response"},
                {"op": "jmp_nz", "id": 0, "label": "next"}]},
            {"name": "close", "commands": [
                {"op": "http_request", "urls": urls, "pick": "random",
                 "headers": hdr("squall-close", true)},
                {"op": "http_wait_response"},
                {"op": "wait_for_peer_close"}]},
            {"name": "unused", "commands": [{"op": "accept"}]}],
        // Client-only: the association (server side) is unused; distinct rules keep the
        // two templates on port 80 valid.
        "templates": [
            {"tg_name": "keepalive", "client_program": "keepalive", "server_program": "unused",
             "port": 80, "cps": CPS,
             "assoc": [{"port": 80, "ip_start": "198.18.60.1", "ip_end": "198.18.60.1"}]},
            {"tg_name": "close", "client_program": "close", "server_program": "unused",
             "port": 80, "cps": CPS,
             "assoc": [{"port": 80, "ip_start": "198.18.60.2", "ip_end": "198.18.60.2"}]}],
        "global": {"tcp": {"delay_ack_msec": 0}}
    })
}

/// Status code counts of nginx's access log lines whose User-Agent is `ua`.
fn log_codes(log: &str, ua: &str) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for l in log.lines() {
        // `ADDR - - [DATE] "REQUEST" STATUS BYTES "REFERER" "UA"`
        let f: Vec<&str> = l.split('"').collect();
        if f.len() >= 6 && f[5] == ua {
            let code = f[2].split_whitespace().next().unwrap_or("").to_string();
            *m.entry(code).or_insert(0) += 1;
        }
    }
    m
}

/// The body bytes of the answers nginx logged for User-Agent `ua`, as their framing
/// delimits them: `$body_bytes_sent` of each line, except the chunked `/chunked.txt`
/// answers (whose logged size includes the chunk framing), counted as `gz` each.
fn log_body_bytes(log: &str, ua: &str, gz: u64) -> u64 {
    log.lines()
        .map(|l| l.split('"').collect::<Vec<_>>())
        .filter(|f| f.len() >= 6 && f[5] == ua)
        .filter_map(|f| {
            if f[1].contains(" /chunked.txt ") && f[2].split_whitespace().next() == Some("200") {
                return Some(gz);
            }
            f[2].split_whitespace().nth(1)?.parse::<u64>().ok()
        })
        .sum()
}

fn group<'a>(r: &'a Value, name: &str) -> &'a Value {
    r["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == name)
        .unwrap_or_else(|| panic!("no group {name} in {r}"))
}

fn json_codes(g: &Value) -> BTreeMap<String, u64> {
    g["http"]["status_codes"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_u64().unwrap()))
        .collect()
}

#[test]
fn http_generator_against_nginx_keepalive_and_close() {
    let _g = LAB.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(r) = skip(&["ip", "ethtool", "nginx", "curl"]) {
        eprintln!("skipped: {r}");
        return;
    }
    let Some(_lock) = machine_lock(Duration::from_secs(300)) else {
        squall_port::lab::skipped("the lab lock (/tmp/squall-lab.lock) stayed busy for 300 s");
        return;
    };
    let dir = tmpdir("httpgen");
    let www = dir.join("www");
    std::fs::create_dir_all(&www).unwrap();
    let text: String = (0..2000)
        .map(|i| format!("line {i} of the chunked file\n"))
        .collect();
    std::fs::write(www.join("chunked.txt"), &text).unwrap();
    let d = dir.display();
    let conf = format!(
        "daemon off;\nmaster_process off;\nworker_processes 1;\npid {d}/nginx.pid;\n\
         error_log {d}/error.log warn;\nevents {{ worker_connections 1024; }}\n\
         http {{\n access_log {d}/access.log;\n server_tokens off;\n client_body_temp_path {d};\n\
         proxy_temp_path {d};\n fastcgi_temp_path {d};\n uwsgi_temp_path {d};\n\
         scgi_temp_path {d};\n keepalive_requests 1000;\n\
         server {{\n  listen 198.18.48.1:80;\n  root {d}/www;\n\
         default_type text/plain;\n\
         location = /ok {{ return 200 \"ok\\n\"; }}\n\
         location = /chunked.txt {{ gzip on; gzip_min_length 0; gzip_types text/plain; }}\n }}\n}}\n"
    );
    let _lab = Lab::up(&["--squall", "client"]);
    let _nginx = start_nginx("sq-srv", &dir, &conf);
    // nginx is up, and its gzip answer is chunked (no Content-Length).
    let t0 = Instant::now();
    let head = loop {
        let out = ns(
            "sq-srv",
            &[
                "curl",
                "-s",
                "-m",
                "2",
                "-o",
                "/dev/null",
                "-D",
                "-",
                "-H",
                "Accept-Encoding: gzip",
                "http://198.18.48.1/chunked.txt",
            ],
        )
        .output()
        .unwrap();
        let s = String::from_utf8_lossy(&out.stdout).to_string();
        if s.starts_with("HTTP/1.1 200") {
            break s;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "nginx did not come up: {s}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        head.to_ascii_lowercase()
            .contains("transfer-encoding: chunked"),
        "{head}"
    );
    // The chunked answer's body as its chunks carry it (gzip, not decoded): what the
    // generator must count for it (nginx's log counts the chunk framing too).
    let gz = ns(
        "sq-srv",
        &[
            "curl",
            "-s",
            "-m",
            "2",
            "-H",
            "Accept-Encoding: gzip",
            "http://198.18.48.1/chunked.txt",
        ],
    )
    .output()
    .unwrap()
    .stdout
    .len() as u64;
    assert!(gz > 0);
    let prof = dir.join("http.json");
    std::fs::write(&prof, profile().to_string()).unwrap();
    let out = dir.join("run.json");
    let secs = SECS.to_string();
    let (code, text) = squall_in(
        "sq-cli",
        &[
            "run",
            prof.to_str().unwrap(),
            "--iface",
            "afpacket:sq-cli0",
            "--mode",
            "client",
            "--duration",
            &secs,
            "--drain-sec",
            "10",
            "-q",
            "--json",
            out.to_str().unwrap(),
        ],
        60,
    );
    eprintln!("{text}");
    assert_eq!(code, 0, "squall client run not clean:\n{text}");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(num(&r, &["errors"]), 0);
    let log = std::fs::read_to_string(dir.join("access.log")).unwrap();
    let flows = u64::from(CPS * SECS);
    for (name, ua, per_flow) in [
        ("keepalive", "squall-ka", u64::from(ROUNDS)),
        ("close", "squall-close", 1),
    ] {
        let g = group(&r, name);
        let reqs = flows * per_flow;
        assert_eq!(num(g, &["client", "started"]), flows, "{name}");
        assert_eq!(num(g, &["client", "completed"]), flows, "{name}");
        assert_eq!(num(g, &["http", "requests"]), reqs, "{name}");
        assert_eq!(num(g, &["http", "responses"]), reqs, "{name}");
        assert_eq!(num(g, &["http", "errors"]), 0, "{name}");
        let ours = json_codes(g);
        let nginx = log_codes(&log, ua);
        assert_eq!(ours, nginx, "{name}: generator vs nginx access log");
        assert!(ours.get("200").copied().unwrap_or(0) > 0 && ours.contains_key("404"));
        assert_eq!(
            num(g, &["http", "body_bytes"]),
            log_body_bytes(&log, ua, gz),
            "{name}: body bytes, generator vs nginx's log (chunked answers de-chunked)"
        );
        assert_eq!(
            num(g, &["latency_us", "req_last_byte", "count"]),
            reqs,
            "{name}"
        );
        eprintln!(
            "{name}: {reqs} requests, codes {ours:?} = nginx's log, body bytes {}, per request \
             last byte p50 {} us",
            num(g, &["http", "body_bytes"]),
            num(g, &["latency_us", "req_last_byte", "p50"])
        );
    }
    // Keep-alive: 3 URLs in turn over 6 rounds: 2 of each per flow; 2/3 of them 200.
    let ka = json_codes(group(&r, "keepalive"));
    assert_eq!(ka["404"], flows * 2);
    assert_eq!(ka["200"], flows * 4);
}
