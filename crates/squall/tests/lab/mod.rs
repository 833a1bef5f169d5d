//! Shared helpers of the lab tests (`scripts/lab.sh` topologies, 198.18.0.0/15 only):
//! skip rules, the lab guard that tears the namespaces down, processes killed by pid,
//! running a command or Squall inside a namespace.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;

/// The lab's namespace names are fixed: one lab test at a time in a test binary (cargo
/// runs test binaries one after the other).
pub static LAB: Mutex<()> = Mutex::new(());

pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn have(cmd: &str) -> bool {
    squall_port::lab::have(cmd)
}

/// Why the test cannot run here (not root, a tool missing), if it cannot.
pub fn skip(tools: &[&str]) -> Option<String> {
    squall_port::lab::skip(tools)
}

/// A lab topology, torn down on drop.
pub struct Lab;

impl Lab {
    /// `scripts/lab.sh up ARGS...` (e.g. `["--squall", "client"]` or `["dut-nat"]`).
    pub fn up(args: &[&str]) -> Lab {
        let st = Command::new(root().join("scripts/lab.sh"))
            .arg("up")
            .args(args)
            .status()
            .expect("run lab.sh");
        assert!(st.success(), "lab.sh up {args:?} failed");
        Lab
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = Command::new(root().join("scripts/lab.sh"))
            .arg("down")
            .stdout(Stdio::null())
            .status();
    }
}

/// A child process killed (by pid) on drop.
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `ip netns exec NAME ARGS...`.
pub fn ns(name: &str, args: &[&str]) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", name]).args(args);
    c
}

pub fn tmpdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("squall-lab-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

pub fn squall_bin() -> &'static str {
    env!("CARGO_BIN_EXE_squall")
}

/// Runs squall in namespace `n`, or here if `n` is empty (bounded by `limit_s`); returns
/// (exit code, stdout+stderr).
pub fn squall_in(n: &str, args: &[&str], limit_s: u32) -> (i32, String) {
    let lim = limit_s.to_string();
    let mut a = vec!["timeout", &lim, squall_bin()];
    a.extend_from_slice(args);
    let out = if n.is_empty() {
        Command::new(a[0]).args(&a[1..]).output()
    } else {
        ns(n, &a).output()
    }
    .expect("run squall");
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text)
}

/// The number at `path` in a JSON document (panics with the document if absent).
pub fn num(v: &serde_json::Value, path: &[&str]) -> u64 {
    let mut x = v;
    for p in path {
        x = &x[*p];
    }
    x.as_u64()
        .unwrap_or_else(|| panic!("no number at {path:?} in {v}"))
}

/// The bytes of a profile buffer (`text` then `fill.text` repeated up to `size`).
pub fn buffer_bytes(p: &serde_json::Value, name: &str) -> Vec<u8> {
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

/// Squall server-only on `iface` (plus `extra` arguments) in namespace `n` for 4 s (+1 s
/// drain) in a thread, its result as JSON in `json` if given; joined for (exit code,
/// output).
pub fn server_thread(
    n: &str,
    prof: &str,
    iface: &str,
    extra: &[&str],
    json: Option<&Path>,
) -> std::thread::JoinHandle<(i32, String)> {
    let mut args: Vec<String> = [
        "run",
        prof,
        "--iface",
        iface,
        "--mode",
        "server",
        "--duration",
        "4",
        "--drain-sec",
        "1",
        "-q",
    ]
    .iter()
    .chain(extra)
    .map(|s| s.to_string())
    .collect();
    if let Some(j) = json {
        args.push("--json".into());
        args.push(j.to_str().unwrap().to_string());
    }
    let n = n.to_string();
    std::thread::spawn(move || {
        let a: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
        squall_in(&n, &a, 30)
    })
}

/// The machine-wide lab lock (`/tmp/squall-lab.lock`, the file `flock` takes in the
/// Makefile's lab targets), held while the returned file is open; `None` if it stayed
/// busy for `wait`. `SQUALL_LAB_LOCKED=1`: the caller holds it already.
pub fn machine_lock(wait: std::time::Duration) -> Option<Option<std::fs::File>> {
    use std::os::fd::AsRawFd;
    if std::env::var_os("SQUALL_LAB_LOCKED").is_some() {
        return Some(None);
    }
    let f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open("/tmp/squall-lab.lock")
        .ok()?;
    let t0 = std::time::Instant::now();
    // SAFETY: flock on a file descriptor this function owns.
    while unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        if t0.elapsed() > wait {
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    Some(Some(f))
}
