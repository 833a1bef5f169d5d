//! T-veth smoke test: `squall-bench veth` in a tiny configuration (1 run of 1 s per cell:
//! the raw-veth line for 64-byte frames and W2 at C = 10 for wrk against nginx, plus Squall
//! against Squall when the `squall` binary sits beside `squall-bench`). Needs root, the
//! lab's tools, nginx and wrk; skipped with the reason otherwise. Takes the machine-wide
//! lab lock (`/tmp/squall-lab.lock`; set `SQUALL_LAB_LOCKED=1` when the caller holds it).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

fn skip() -> Option<String> {
    squall_port::lab::skip(&["ip", "ethtool", "taskset", "nginx", "wrk", "curl"])
        .map(|r| format!("{r} (scripts/deps.sh bench)"))
}

/// The lab lock, held while the returned file is open; None if not had within 120 s.
fn lab_lock() -> Option<Option<std::fs::File>> {
    squall_port::lab::lock(Duration::from_secs(120))
}

#[test]
fn veth_tiny_run_is_clean() {
    if let Some(r) = skip() {
        eprintln!("skipped: {r}");
        return;
    }
    let Some(_lock) = lab_lock() else {
        squall_port::lab::skipped("the lab lock was busy for 120 s");
        return;
    };
    let exe = env!("CARGO_BIN_EXE_squall-bench");
    let squall = Path::new(exe).with_file_name("squall");
    let pairs = if squall.exists() {
        "kernel/kernel,squall/squall"
    } else {
        eprintln!("{} not built: Squall pairs left out", squall.display());
        "kernel/kernel"
    };
    let out = Command::new("timeout")
        .args([
            "180",
            exe,
            "veth",
            "--workloads",
            "raw,W2",
            "--pairs",
            pairs,
        ])
        .args(["--conns", "10", "--runs", "1", "--seconds", "1"])
        .args(["--frame-sizes", "64"])
        .stderr(Stdio::inherit())
        .output()
        .expect("run squall-bench veth");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "veth failed: {text}");
    let lines: Vec<&str> = text.lines().collect();
    let want = 1 + pairs.split(',').count();
    assert_eq!(lines.len(), want, "{text}");
    assert!(
        lines[0].contains("\"workload\":\"raw-veth\""),
        "{}",
        lines[0]
    );
    assert!(lines[0].contains("\"us_per_frame\":"), "{}", lines[0]);
    for l in &lines[1..] {
        assert!(l.contains("\"workload\":\"W2\""), "{l}");
        assert!(l.contains("\"errors\":0"), "{l}");
        assert!(l.contains("\"frames_per_op\":"), "{l}");
        assert!(l.contains("\"client_us_per_op\":"), "{l}");
    }
    // The host's congestion-control list is restored.
    let cc = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_allowed_congestion_control")
        .unwrap_or_default();
    eprintln!("allowed congestion control after the run: {}", cc.trim());
}
