//! T-mem2 driver (Squall client and server on two threads across the mem wire): W1 and W2
//! complete with zero errors, and the CLI's JSON lines carry the required fields. Short,
//! bounded runs; no timing assertions.
#![cfg(feature = "squall")]

use std::process::Command;

use squall_bench::mem2::{self, Mem2Cfg, Placement, Workload};

fn short(w: Workload, conns: usize) -> Mem2Cfg {
    let mut cfg = Mem2Cfg::new(w, conns, 0.3);
    cfg.warmup = 0.1;
    cfg
}

#[test]
fn w1_two_threads_completes_without_errors() {
    let r = mem2::run(&short(Workload::W1, 20)).unwrap();
    assert_eq!(r.topology, "T-mem2");
    assert_eq!(r.workload, "W1");
    assert_eq!(r.errors, 0, "{r:?}");
    assert!(r.cps.unwrap() > 0.0);
    assert!(r.rps.is_none());
    // A W1 flow is at least SYN, SYN-ACK, ACK, request, 23 data segments, 2 FINs.
    assert!(r.frames_per_op.unwrap() >= 28.0, "{r:?}");
    let (c, s, t) = (
        r.client_us_per_op.unwrap(),
        r.server_us_per_op.unwrap(),
        r.cpu_us_per_op.unwrap(),
    );
    assert!(c > 0.0 && s > 0.0);
    assert!((c + s - t).abs() < 1e-6 * t.max(1.0));
    // Busy-share billing never exceeds the raw thread CPU.
    assert!(t <= r.thread_us_per_op.unwrap() * (1.0 + 1e-9));
}

#[test]
fn w2_two_threads_completes_without_errors_and_has_latency() {
    let r = mem2::run(&short(Workload::W2, 20)).unwrap();
    assert_eq!(r.topology, "T-mem2");
    assert_eq!(r.errors, 0, "{r:?}");
    assert!(r.rps.unwrap() > 0.0);
    assert!(r.cps.is_none());
    let (p50, p99) = (r.p50_us.unwrap(), r.p99_us.unwrap());
    assert!(p50 > 0.0 && p99 >= p50);
    // One request segment and one response segment per op (ACKs ride on them).
    let f = r.frames_per_op.unwrap();
    assert!((1.9..3.5).contains(&f), "frames/op {f}");
}

#[test]
fn initial_window_ten_on_one_thread_is_clean() {
    let mut cfg = short(Workload::W1, 10);
    cfg.placement = Placement::OneThread;
    cfg.init_cwnd = 10;
    let r = mem2::run(&cfg).unwrap();
    assert_eq!(r.topology, "T-mem1");
    assert_eq!(r.initwnd, Some(10));
    assert_eq!(r.errors, 0, "{r:?}");
    assert!(r.cps.unwrap() > 0.0);
    assert!(r.client_us_per_op.is_none(), "one thread gives no split");
}

/// The number after `"key":` in a JSON line, if any.
fn num(line: &str, key: &str) -> Option<f64> {
    let k = format!("\"{key}\":");
    let i = line.find(&k)? + k.len();
    let rest = &line[i..];
    let end = rest.find([',', '}'])?;
    rest[..end].parse().ok()
}

fn text<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let k = format!("\"{key}\":\"");
    let i = line.find(&k)? + k.len();
    let end = line[i..].find('"')?;
    Some(&line[i..i + end])
}

/// Runs the harness binary; its stdout and stderr (the run must succeed).
fn cli(args: &[&str]) -> (String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_squall-bench"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (String::from_utf8(out.stdout).unwrap(), stderr)
}

#[test]
fn cli_prints_t_mem2_lines_with_required_fields() {
    let (stdout, _) = cli(&["mem2", "--conns", "10", "--seconds", "0.2", "--runs", "1"]);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 2, "one line per workload: {stdout}");
    for (line, w) in lines.iter().zip(["W1", "W2"]) {
        assert!(line.starts_with('{') && line.ends_with('}'), "{line}");
        assert_eq!(text(line, "workload"), Some(w));
        assert_eq!(text(line, "topology"), Some("T-mem2"));
        assert_eq!(text(line, "client"), Some("squall"));
        assert_eq!(text(line, "server"), Some("squall"));
        assert_eq!(num(line, "conns"), Some(10.0));
        assert_eq!(num(line, "errors"), Some(0.0));
        assert_eq!(num(line, "runs"), Some(1.0));
        for k in [
            "frames_per_op",
            "cpu_us_per_op",
            "client_us_per_op",
            "server_us_per_op",
            "seconds",
        ] {
            assert!(num(line, k).is_some_and(|v| v > 0.0), "{k} in {line}");
        }
        let rate = if w == "W1" { "cps" } else { "rps" };
        assert!(num(line, rate).is_some_and(|v| v > 0.0), "{rate} in {line}");
    }
    assert!(num(lines[1], "p50_us").is_some() && num(lines[1], "p99_us").is_some());
}

#[test]
fn cli_initwnd_rows_carry_the_window() {
    let (stdout, stderr) = cli(&[
        "mem",
        "--stacks",
        "squall,smoltcp",
        "--workloads",
        "W1",
        "--conns",
        "5",
        "--seconds",
        "0.15",
        "--runs",
        "1",
        "--initwnd",
        "2,10",
    ]);
    let lines: Vec<&str> = stdout.lines().collect();
    // Squall: one row per window; smoltcp: omitted (no initial-window knob).
    assert_eq!(lines.len(), 2, "{stdout}");
    assert_eq!(num(lines[0], "initwnd"), Some(2.0));
    assert_eq!(num(lines[1], "initwnd"), Some(10.0));
    for l in &lines {
        assert_eq!(text(l, "topology"), Some("T-mem1"));
        assert_eq!(num(l, "errors"), Some(0.0));
    }
    assert!(stderr.contains("smoltcp"), "{stderr}");
}
