//! `squall daemon` driven over its sockets: JSON-RPC errors for bad input, a live run of
//! the W1 profile (stats that move, a rate update, stop, a clean end), unix socket, shutdown
//! (also from a client that closed at once), a request line over 16 MiB answered while the
//! client still sends it.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// The daemon process; killed on drop unless it exited.
struct Daemon {
    child: Child,
    addr: String,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn manifest() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn w1() -> PathBuf {
    manifest().join("../../examples/w1-astf-http.json")
}

fn spawn(args: &[&str]) -> Daemon {
    let mut child = Command::new(env!("CARGO_BIN_EXE_squall"))
        .arg("daemon")
        .args(args)
        .current_dir(manifest())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn squall daemon");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .rsplit(' ')
        .next()
        .unwrap_or_default()
        .to_string();
    assert!(line.starts_with("listening "), "unexpected: {line:?}");
    Daemon { child, addr }
}

struct Rpc<S: std::io::Read + Write> {
    rd: BufReader<S>,
    wr: S,
    id: u64,
}

fn tcp(d: &Daemon) -> Rpc<TcpStream> {
    let s = TcpStream::connect(&d.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    Rpc {
        rd: BufReader::new(s.try_clone().unwrap()),
        wr: s,
        id: 0,
    }
}

impl<S: std::io::Read + Write> Rpc<S> {
    fn raw(&mut self, line: &[u8]) -> Value {
        self.wr.write_all(line).unwrap();
        self.wr.write_all(b"\n").unwrap();
        let mut l = String::new();
        self.rd.read_line(&mut l).unwrap();
        serde_json::from_str(&l).unwrap_or_else(|e| panic!("bad response {l:?}: {e}"))
    }
    fn call(&mut self, method: &str, params: Value) -> Value {
        self.id += 1;
        let req = json!({"jsonrpc": "2.0", "id": self.id, "method": method, "params": params});
        let r = self.raw(req.to_string().as_bytes());
        assert_eq!(r["id"], self.id, "{r}");
        r
    }
    fn ok(&mut self, method: &str, params: Value) -> Value {
        let r = self.call(method, params);
        assert!(r.get("error").is_none(), "{method}: {r}");
        r["result"].clone()
    }
    fn err(&mut self, method: &str, params: Value) -> (i64, Value) {
        let r = self.call(method, params);
        let e = &r["error"];
        (
            e["code"]
                .as_i64()
                .unwrap_or_else(|| panic!("{method}: no error: {r}")),
            e.clone(),
        )
    }
    fn started(&mut self) -> u64 {
        self.ok("get_stats", json!({}))["client"]["flows"]["started"]
            .as_u64()
            .unwrap()
    }
}

fn shutdown(d: &mut Daemon, r: &mut Rpc<impl std::io::Read + Write>) {
    assert_eq!(r.ok("shutdown", json!({}))["ok"], true);
    let t = Instant::now();
    while d.child.try_wait().unwrap().is_none() {
        assert!(t.elapsed() < Duration::from_secs(20), "daemon did not exit");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(d.child.try_wait().unwrap().unwrap().success());
}

#[test]
fn bad_requests_get_json_rpc_errors() {
    let mut d = spawn(&["--listen", "127.0.0.1:0"]);
    // A line that is not JSON: a parse error, then the connection is closed (nothing
    // after it is read).
    for bad in [&b"{not json"[..], b"\xff\xfe garbage"] {
        let mut r = tcp(&d);
        assert_eq!(r.raw(bad)["error"]["code"], -32700);
        let mut l = String::new();
        assert_eq!(r.rd.read_line(&mut l).unwrap(), 0, "connection not closed");
    }
    // An HTTP request a web page could send to the port (a cross-protocol POST): its
    // request line is a parse error and the JSON in its body never runs.
    let mut r = tcp(&d);
    r.wr.write_all(
        b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\n\r\n\
          {\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"shutdown\"}\n",
    )
    .unwrap();
    let mut l = String::new();
    r.rd.read_line(&mut l).unwrap();
    assert!(l.contains("-32700"), "{l}");
    l.clear();
    let _ = r.rd.read_line(&mut l);
    assert!(!l.contains("\"result\""), "the body ran: {l}");
    let mut r = tcp(&d);
    assert_eq!(
        r.ok("get_status", json!({}))["state"],
        "idle",
        "still serving"
    );
    assert_eq!(
        r.raw(br#"{"jsonrpc":"2.0","id":1}"#)["error"]["code"],
        -32600
    );
    assert_eq!(
        r.raw(br#"{"id":1,"method":"get_status"}"#)["error"]["code"],
        -32600
    );
    assert_eq!(r.raw(b"[]")["error"]["code"], -32600);
    assert_eq!(r.err("no_such_method", json!({})).0, -32601);
    assert_eq!(r.err("start", json!({})).0, -32000);
    assert_eq!(r.err("update", json!({"mult": 2})).0, -32003);
    assert_eq!(r.err("stop", json!({})).0, -32003);
    assert_eq!(r.err("load_profile", json!({})).0, -32602);
    assert_eq!(r.err("load_profile", json!({"path": 5})).0, -32602);
    // Invalid profile: every error with its JSON path.
    let mut bad: Value = serde_json::from_str(&std::fs::read_to_string(w1()).unwrap()).unwrap();
    bad["global"]["tcp"]["mss"] = json!(-3);
    let (code, e) = r.err("load_profile", json!({"profile": bad}));
    assert_eq!(code, -32002);
    let paths: Vec<&str> = e["data"]["errors"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|x| x["path"].as_str())
        .collect();
    assert!(paths.contains(&"global.tcp.mss"), "{e}");
    let (code, e) = r.err(
        "load_profile",
        json!({"path": "tests/profiles/invalid.json"}),
    );
    assert_eq!(code, -32002);
    assert!(e["data"]["errors"].as_array().unwrap().len() >= 3, "{e}");
    let (code, _) = r.err("load_profile", json!({"path": "/nonexistent/p.json"}));
    assert_eq!(code, -32002);
    // Bad start parameters once a profile is loaded.
    r.ok("load_profile", json!({"path": w1()}));
    for p in [
        json!({"mult": 0}),
        json!({"mult": "x"}),
        json!({"duration": 0}),
        json!({"cores": 3}),
        json!({"sim": true}),
        json!({"impair": "loss=7"}),
    ] {
        assert_eq!(r.err("start", p.clone()).0, -32602, "{p}");
    }
    // Notifications get no answer; the next call is answered in order.
    r.wr.write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"get_status\"}\n")
        .unwrap();
    assert_eq!(r.ok("get_status", json!({}))["state"], "idle");
    assert_eq!(r.ok("get_warnings", json!({})), json!([]));
    // A second connection works while the first stays open.
    let mut r2 = tcp(&d);
    assert_eq!(r2.ok("api_version", json!({}))["api_version"], "1.0");
    // A line longer than 16 MiB: an error, then the connection is closed.
    let mut r3 = tcp(&d);
    r3.wr.write_all(&vec![b'a'; (16 << 20) + 1]).unwrap();
    let mut l = String::new();
    r3.rd.read_line(&mut l).unwrap();
    let e: Value = serde_json::from_str(&l).unwrap();
    assert_eq!(e["error"]["code"], -32700, "{e}");
    l.clear();
    assert_eq!(r3.rd.read_line(&mut l).unwrap(), 0, "connection not closed");
    assert_eq!(r2.ok("get_status", json!({}))["state"], "idle");
    shutdown(&mut d, &mut r);
}

#[test]
fn live_run_update_stop_clean() {
    let mut d = spawn(&["--listen", "127.0.0.1:0"]);
    let mut r = tcp(&d);
    r.ok("load_profile", json!({"path": w1()}));
    let s = r.ok("start", json!({"mult": 100, "duration": -1}));
    assert_eq!(s["state"], "running");
    assert_eq!(r.err("start", json!({})).0, -32001);
    assert_eq!(r.err("load_profile", json!({"path": w1()})).0, -32001);
    // Live stats move.
    std::thread::sleep(Duration::from_millis(1200));
    let a = r.started();
    std::thread::sleep(Duration::from_millis(1000));
    let b = r.started();
    assert!(b > a && a > 0, "stats do not move: {a} -> {b}");
    let st = r.ok("get_stats", json!({}));
    assert_eq!(st["state"], "running");
    assert!(st["groups"].as_array().is_some_and(|g| !g.is_empty()));
    assert!(st["client"]["tcp"]["tcps_connects"].as_u64().unwrap() > 0);
    // Rate x3: flows opened per second follow (the schedule, not the machine, sets them).
    let window = Duration::from_millis(2000);
    let a = r.started();
    std::thread::sleep(window);
    let before = r.started() - a;
    assert_eq!(r.ok("update", json!({"mult": 300}))["mult"], 300.0);
    std::thread::sleep(Duration::from_millis(300));
    let a = r.started();
    std::thread::sleep(window);
    let after = r.started() - a;
    assert!(
        after as f64 >= 2.0 * before as f64,
        "update did not raise the rate: {before} -> {after} flows per window"
    );
    assert_eq!(r.ok("get_status", json!({}))["mult"], 300.0);
    // Stop (drain) and wait for the end.
    assert_eq!(r.ok("stop", json!({"drain": true}))["state"], "stopping");
    let w = r.ok("wait_on_traffic", json!({"timeout": 30}));
    assert_eq!(w["finished"], true, "{w}");
    let st = r.ok("get_stats", json!({}));
    assert_eq!(st["state"], "done");
    assert_eq!(st["errors"], 0, "{st}");
    assert_eq!(st["clean"], true, "{st}");
    let started = st["client"]["flows"]["started"].as_u64().unwrap();
    assert_eq!(
        st["client"]["flows"]["completed"].as_u64().unwrap(),
        started
    );
    assert!(
        st["rates"]["cps"].as_f64().unwrap() > 50.0,
        "{}",
        st["rates"]
    );
    assert_eq!(r.ok("get_warnings", json!({})), json!([]));
    assert_eq!(r.err("update", json!({"mult": 1})).0, -32003);
    // clear_stats zeroes the counters (not the latency histograms).
    r.ok("clear_stats", json!({}));
    let st = r.ok("get_stats", json!({}));
    assert_eq!(st["client"]["flows"]["started"], 0);
    assert_eq!(st["client"]["tcp"]["tcps_connects"], 0);
    // A second run after the first one ended.
    r.ok("start", json!({"mult": 50, "duration": 0.5}));
    let w = r.ok("wait_on_traffic", json!({"timeout": 30}));
    assert_eq!(w["finished"], true);
    let st = r.ok("get_stats", json!({}));
    assert_eq!(
        (st["run_id"].as_u64(), st["clean"].as_bool()),
        (Some(2), Some(true))
    );
    shutdown(&mut d, &mut r);
}

#[test]
fn unix_socket_and_profile_object() {
    let dir = std::env::temp_dir().join(format!("squall-daemon-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("ctl.sock");
    let mut d = spawn(&["--unix", sock.to_str().unwrap()]);
    let s = UnixStream::connect(&sock).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut r = Rpc {
        rd: BufReader::new(s.try_clone().unwrap()),
        wr: s,
        id: 0,
    };
    let ir: Value = serde_json::from_str(&std::fs::read_to_string(w1()).unwrap()).unwrap();
    let l = r.ok("load_profile", json!({"profile": ir}));
    assert_eq!(l["templates"], 1);
    r.ok("start", json!({"mult": 20, "duration": 0.5, "sim": true}));
    assert_eq!(
        r.ok("wait_on_traffic", json!({"timeout": 60}))["finished"],
        true
    );
    let st = r.ok("get_stats", json!({}));
    assert_eq!(st["clean"], true, "{st}");
    assert_eq!(st["client"]["flows"]["started"], 10);
    shutdown(&mut d, &mut r);
    assert!(!sock.exists(), "socket file left behind");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn two_cores_update_then_cut() {
    let mut d = spawn(&["--listen", "127.0.0.1:0"]);
    let mut r = tcp(&d);
    r.ok("load_profile", json!({"path": w1()}));
    r.ok("start", json!({"mult": 100, "duration": -1, "cores": 2}));
    std::thread::sleep(Duration::from_millis(1000));
    r.ok("update", json!({"mult": 200}));
    std::thread::sleep(Duration::from_millis(1000));
    let a = r.started();
    assert!(a > 0);
    let s = r.ok("stop", json!({"drain": false}));
    assert_eq!(s["drain"], false);
    // A second stop while stopping is accepted (it can only bring the end forward).
    r.ok("stop", json!({"drain": true}));
    let w = r.ok("wait_on_traffic", json!({"timeout": 30}));
    assert_eq!(w["finished"], true, "{w}");
    assert_eq!(r.err("stop", json!({})).0, -32003);
    let st = r.ok("get_stats", json!({}));
    assert_eq!(st["state"], "done");
    assert_eq!(st["cores"], 2);
    let f = &st["client"]["flows"];
    let started = f["started"].as_u64().unwrap();
    assert!(started >= a);
    // Every flow is accounted for: completed or cut (nothing left running).
    assert_eq!(st["client"]["running_at_end"], 0, "{st}");
    let inv = st["invariants"].as_array().unwrap();
    assert!(
        inv.iter()
            .any(|c| c["name"] == "client_flows_accounted" && c["ok"] == true),
        "{st}"
    );
    shutdown(&mut d, &mut r);
}

#[test]
fn udp_profile_runs_under_the_daemon() {
    let mut d = spawn(&["--listen", "127.0.0.1:0"]);
    let mut r = tcp(&d);
    let udp = manifest().join("../../examples/udp-dns.json");
    r.ok("load_profile", json!({"path": udp}));
    r.ok("start", json!({"mult": 1, "duration": 1, "sim": true}));
    assert_eq!(
        r.ok("wait_on_traffic", json!({"timeout": 60}))["finished"],
        true
    );
    let st = r.ok("get_stats", json!({}));
    assert_eq!(st["errors"], 0, "{st}");
    assert_eq!(st["clean"], true, "{st}");
    shutdown(&mut d, &mut r);
}

/// Issue #14: `squall daemon --metrics` serves the current run's figures (Prometheus text
/// format), and the last run's once it ended (`squall_up 0`).
#[test]
fn daemon_serves_prometheus_metrics() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_squall"))
        .args([
            "daemon",
            "--listen",
            "127.0.0.1:0",
            "--metrics",
            "127.0.0.1:0",
        ])
        .current_dir(manifest())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn squall daemon");
    let mut line = String::new();
    // Kept open to the end: the daemon writes to stderr when it shuts down.
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    stderr.read_line(&mut line).unwrap();
    let maddr = line
        .trim()
        .strip_prefix("squall: metrics at http://")
        .and_then(|s| s.strip_suffix("/metrics"))
        .unwrap_or_else(|| panic!("{line}"))
        .to_string();
    line.clear();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line.trim().rsplit(' ').next().unwrap().to_string();
    let mut d = Daemon { child, addr };
    let mut r = tcp(&d);
    let scrape = || -> Vec<squall::metrics::MetricSample> {
        let mut s = TcpStream::connect(&maddr).unwrap();
        write!(s, "GET /metrics HTTP/1.0\r\n\r\n").unwrap();
        let mut t = String::new();
        std::io::Read::read_to_string(&mut s, &mut t).unwrap();
        let body = t.split_once("\r\n\r\n").unwrap().1.to_string();
        squall::metrics::parse(&body).unwrap_or_else(|e| panic!("{e}\n{body}"))
    };
    let get = |m: &[squall::metrics::MetricSample], name: &str| -> f64 {
        m.iter().find(|x| x.0 == name).map(|x| x.2).unwrap_or(-1.0)
    };
    r.ok("load_profile", json!({"path": w1()}));
    r.ok("start", json!({"mult": 100, "duration": 2.5}));
    std::thread::sleep(Duration::from_millis(2200));
    let m = scrape();
    assert_eq!(get(&m, "squall_up"), 1.0);
    assert!(get(&m, "squall_flows_started_total") > 50.0);
    let w = r.ok("wait_on_traffic", json!({"timeout": 30}));
    assert_eq!(w["finished"], true);
    let st = r.ok("get_stats", json!({}));
    let m = scrape();
    assert_eq!(get(&m, "squall_up"), 0.0);
    assert_eq!(
        get(&m, "squall_flows_completed_total"),
        st["client"]["flows"]["completed"].as_f64().unwrap()
    );
    shutdown(&mut d, &mut r);
    drop(stderr);
}

/// Sends one line and reads the answer.
fn ask<S: std::io::Read + Write>(s: &mut S, rd: &mut BufReader<S>, line: &str) -> Value {
    s.write_all(format!("{line}\n").as_bytes()).unwrap();
    let mut l = String::new();
    rd.read_line(&mut l).unwrap();
    serde_json::from_str(&l).unwrap_or_else(|e| panic!("bad response {l:?}: {e}"))
}

fn exits_within(d: &mut Daemon, limit: Duration) -> bool {
    let t = Instant::now();
    while t.elapsed() < limit {
        if let Some(st) = d.child.try_wait().unwrap() {
            assert!(st.success(), "{st}");
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

#[test]
fn shutdown_from_a_client_that_closed_at_once() {
    let dir = std::env::temp_dir().join(format!("squall-daemon-review-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("ctl.sock");
    let mut d = spawn(&["--unix", sock.to_str().unwrap()]);
    // A run in progress, so that the `wait_on_traffic` ahead of `shutdown` in the batch
    // below holds the answer until the client is surely gone.
    let mut s = UnixStream::connect(&sock).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut rd = BufReader::new(s.try_clone().unwrap());
    let load = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"load_profile","params":{{"path":{:?}}}}}"#,
        w1().to_str().unwrap()
    );
    assert!(ask(&mut s, &mut rd, &load).get("result").is_some());
    let start = r#"{"jsonrpc":"2.0","id":2,"method":"start","params":{"mult":1,"duration":-1}}"#;
    assert!(ask(&mut s, &mut rd, start).get("result").is_some());
    drop((s, rd));
    // Send and close at once: writing the answer fails (EPIPE).
    let mut c = UnixStream::connect(&sock).unwrap();
    c.write_all(
        br#"[{"jsonrpc":"2.0","id":1,"method":"wait_on_traffic","params":{"timeout":0.3}},{"jsonrpc":"2.0","id":2,"method":"shutdown"}]
"#,
    )
    .unwrap();
    drop(c);
    assert!(
        exits_within(&mut d, Duration::from_secs(20)),
        "the daemon ignored a shutdown whose answer could not be written"
    );
    assert!(!sock.exists(), "socket file left behind");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn too_long_line_answered_while_the_client_still_sends() {
    let mut d = spawn(&["--listen", "127.0.0.1:0"]);
    let s = TcpStream::connect(&d.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut rd = BufReader::new(s.try_clone().unwrap());
    let mut w = s;
    // 17 MiB in one line, then its newline: the daemon must not close while the client
    // is still writing (a reset would lose the answer).
    let mut big = vec![b'a'; 17 << 20];
    big.push(b'\n');
    w.write_all(&big)
        .expect("the daemon closed while the client was sending");
    let mut l = String::new();
    rd.read_line(&mut l).expect("no answer to a too-long line");
    let e: Value = serde_json::from_str(&l).unwrap_or_else(|e| panic!("{l:?}: {e}"));
    assert_eq!(e["error"]["code"], -32700, "{e}");
    assert!(e["id"].is_null(), "{e}");
    l.clear();
    assert_eq!(rd.read_line(&mut l).unwrap(), 0, "connection not closed");
    // The daemon still serves.
    let mut s2 = TcpStream::connect(&d.addr).unwrap();
    s2.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut rd2 = BufReader::new(s2.try_clone().unwrap());
    let r = ask(
        &mut s2,
        &mut rd2,
        r#"{"jsonrpc":"2.0","id":1,"method":"shutdown"}"#,
    );
    assert_eq!(r["result"]["ok"], true, "{r}");
    assert!(exits_within(&mut d, Duration::from_secs(20)));
}

/// A daemon on a real port that cannot be opened (no such interface): the command line
/// is accepted (ports open at each run), `get_status` names the port, and a run fails
/// with the reason in `get_warnings`; the daemon keeps serving.
#[test]
fn a_run_on_a_port_that_cannot_open_fails_with_the_reason() {
    let mut d = spawn(&[
        "--listen",
        "127.0.0.1:0",
        "--iface",
        "afpacket:sq-no-such-if",
        "--mode",
        "client",
    ]);
    let mut r = tcp(&d);
    let st = r.ok("get_status", json!({}));
    assert_eq!(st["ports"], "afpacket:sq-no-such-if, client only", "{st}");
    r.ok("load_profile", json!({"path": w1()}));
    assert_eq!(
        r.err("start", json!({"sim": true, "duration": 1})).0,
        -32602
    );
    r.ok("start", json!({"duration": 1}));
    let w = r.ok("wait_on_traffic", json!({"timeout": 30}));
    assert_eq!(w["finished"], true, "{w}");
    let warn = r.ok("get_warnings", json!({}));
    let text = warn.to_string();
    assert!(
        text.contains("run failed") && text.contains("sq-no-such-if"),
        "{text}"
    );
    assert_eq!(r.ok("get_status", json!({}))["state"], "done");
    shutdown(&mut d, &mut r);
}

/// 32 connections at most; with all taken, a new one is refused while they are active,
/// and takes the place of the one idle longest once that has waited more than 5 s for
/// its next request (idle clients cannot lock an operator out).
#[test]
fn idle_connections_give_way_to_a_new_one() {
    let mut d = spawn(&["--listen", "127.0.0.1:0"]);
    let mut held: Vec<Rpc<TcpStream>> = (0..32).map(|_| tcp(&d)).collect();
    for r in held.iter_mut() {
        assert_eq!(r.ok("api_version", json!({}))["api_version"], "1.0");
    }
    // All recently active: the 33rd is refused.
    let mut r = tcp(&d);
    let mut l = String::new();
    r.rd.read_line(&mut l).unwrap();
    assert!(l.contains("too many connections"), "{l}");
    // One keeps talking; the others fall idle.
    std::thread::sleep(Duration::from_millis(5600));
    assert_eq!(held[31].ok("get_status", json!({}))["state"], "idle");
    let mut r = tcp(&d);
    assert_eq!(r.ok("api_version", json!({}))["api_version"], "1.0");
    // The connection idle longest (the first) was closed; the active one was kept.
    let mut l = String::new();
    assert_eq!(held[0].rd.read_line(&mut l).unwrap_or(0), 0, "{l}");
    assert_eq!(held[31].ok("get_status", json!({}))["state"], "idle");
    shutdown(&mut d, &mut r);
}
