//! `squall daemon` review findings: a `shutdown` whose client closed at once still ends
//! the daemon; a request line over 16 MiB gets its -32700 error even while the client is
//! still sending it.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

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
    assert!(line.starts_with("listening "), "unexpected: {line:?}");
    let addr = line.trim().rsplit(' ').next().unwrap().to_string();
    Daemon { child, addr }
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
