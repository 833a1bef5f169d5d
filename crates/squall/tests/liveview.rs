//! The live view of `squall run` on a terminal, driven in a tmux pane (Debian's tmux,
//! scripts/deps.sh test): the screens show the run's figures, keys switch them, `q` stops
//! the generation early and the summary still follows.

use std::path::Path;
use std::time::{Duration, Instant};

mod tmux;
use tmux::Tmux;

#[test]
fn live_view_in_tmux_shows_the_run_and_q_stops_it() {
    let dir = std::env::temp_dir().join(format!("squall-live-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("out.json");
    let summary = dir.join("summary.txt");
    let cmd = format!(
        "{} run ../../examples/w1-astf-http.json --duration 30 --mult 300 --cores 2 --drain-sec 1 --json {} > {}",
        env!("CARGO_BIN_EXE_squall"),
        json.display(),
        summary.display()
    );
    let t = Tmux {
        sock: format!("squall-live-{}", std::process::id()),
    };
    let cwd = Path::new(env!("CARGO_MANIFEST_DIR")).display().to_string();
    t.cmd(&[
        "new-session",
        "-d",
        "-s",
        "live",
        "-x",
        "120",
        "-y",
        "32",
        "-c",
        &cwd,
        &cmd,
    ]);
    let started = Instant::now();
    t.wait_for_all(
        &[
            "Rates (last second)",
            "1 Overview",
            "(target 300)",
            "Latency (last second)",
            "first_byte",
            "Errors by kind",
            "none",
        ],
        20,
    );
    let c = t.wait_for_all(&["active flows", "CPS "], 5);
    let cps_line = c.lines().find(|l| l.contains("CPS ")).unwrap_or("");
    assert!(cps_line.contains("CPS"), "{c}");
    t.cmd(&["send-keys", "-t", "live", "3"]);
    t.wait_for_all(&["core 1", "load "], 5);
    t.cmd(&["send-keys", "-t", "live", "2"]);
    t.wait_for_all(&["ttfb p99 us", "http"], 5);
    t.cmd(&["send-keys", "-t", "live", "q"]);
    // The generation stops at once; the flows drain; the summary follows.
    let t0 = Instant::now();
    while !json.is_file() {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "the run did not stop"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        started.elapsed() < Duration::from_secs(25),
        "q did not stop the generation"
    );
    std::thread::sleep(Duration::from_millis(300));
    let out = std::fs::read_to_string(&summary).unwrap();
    assert!(out.contains("result: CLEAN"), "{out}");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let opened = v["client"]["flows"]["started"].as_u64().unwrap();
    assert!(
        opened > 0 && opened < 30 * 300 / 2,
        "{opened} flows: not stopped early"
    );
    std::fs::remove_dir_all(&dir).ok();
}
