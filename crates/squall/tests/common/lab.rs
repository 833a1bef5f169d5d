//! Helpers of the tests that run the `squall` binary as root on real or virtual
//! interfaces (veth.rs, memif.rs): tool checks, child processes killed by pid, commands
//! in a network namespace, bounded squall runs, JSON report fields.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::Value;

pub fn have(cmd: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {cmd}")])
        .stdout(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// Why the test cannot run here (not root, a tool missing), if so.
pub fn skip(tools: &[&str]) -> Option<String> {
    let uid = Command::new("id").arg("-u").output().ok()?;
    if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
        return Some("needs root (network namespaces, AF_PACKET, DPDK)".into());
    }
    tools
        .iter()
        .find(|t| !have(t))
        .map(|t| format!("`{t}` is not installed"))
}

/// A child process killed (by pid) on drop.
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `args` run in network namespace `name`.
pub fn ns(name: &str, args: &[&str]) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", name]).args(args);
    c
}

/// A fresh private directory for test `tag`.
pub fn tmpdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("squall-veth-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

pub fn squall_bin() -> &'static str {
    env!("CARGO_BIN_EXE_squall")
}

/// Runs squall (bounded by `timeout`) in namespace `n`, or here if `n` is empty; returns
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

pub fn num(v: &Value, path: &[&str]) -> u64 {
    let mut x = v;
    for p in path {
        x = &x[*p];
    }
    x.as_u64()
        .unwrap_or_else(|| panic!("no number at {path:?} in {v}"))
}

/// The bytes of a profile buffer (`text` then `fill.text` repeated up to `size`).
pub fn buffer_bytes(p: &Value, name: &str) -> Vec<u8> {
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
