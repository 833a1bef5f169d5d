//! Issue #14 for `squall serve` (the lab of `scripts/lab.sh --squall server`: Squall owns
//! 198.18.48.1 on sq-srv0 over AF_PACKET, ab and curl run in sq-cli): the live view in a
//! tmux pane (figures, keys, `q` stops serving), the Prometheus endpoint scraped while ab
//! loads the server (strict parser; `promtool check metrics` too when installed), the
//! `--json` results with their per-second series adding up to the totals, `--assert`
//! passing and failing (exit status), `--plain` progress lines. Needs root, ip, ethtool,
//! ab, curl and tmux; skipped with the reason otherwise. Holds the machine-wide lab lock;
//! the lab is torn down by a guard, the tmux server killed on drop.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod lab;
mod tmux;
use lab::{machine_lock, ns, skip, squall_bin, squall_in, tmpdir, Lab, LAB};
use tmux::Tmux;

const METRICS: &str = "127.0.0.1:19465";

/// The number after `label` on a line of the pane (`requests answered    20001`).
fn figure(pane: &str, label: &str) -> Option<u64> {
    let line = pane.lines().find(|l| l.contains(label))?;
    let rest = &line[line.find(label)? + label.len()..];
    rest.split_whitespace().next()?.parse().ok()
}

fn scrape() -> String {
    let out = ns(
        "sq-srv",
        &[
            "curl",
            "-s",
            "-m",
            "3",
            &format!("http://{METRICS}/metrics"),
        ],
    )
    .output()
    .expect("curl");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn serve_live_view_metrics_json_and_assertions() {
    let _g = LAB.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(r) = skip(&["ip", "ethtool", "ab", "curl", "tmux"]) {
        eprintln!("skipped: {r}");
        return;
    }
    let Some(_lock) = machine_lock(Duration::from_secs(300)) else {
        squall_port::lab::skipped("the lab lock (/tmp/squall-lab.lock) stayed busy for 300 s");
        return;
    };
    let dir = tmpdir("serveops");
    let json = dir.join("serve.json");
    let line = dir.join("stdout.json");
    let rc = dir.join("rc");
    let _lab = Lab::up(&["--squall", "server"]);
    let cmd = format!(
        "ip netns exec sq-srv {} serve --listen 198.18.48.1:80 --iface afpacket:sq-srv0 \
         --peer-ip 198.18.0.2 --route '/ping return 200 \"pong\"' --cores 2 --duration 40 \
         --drain-sec 2 --metrics {METRICS} --json {} --assert 'errors == 0' \
         --assert 'rps >= 100' --assert 'request.count > 0' > {}; echo $? > {}",
        squall_bin(),
        json.display(),
        line.display(),
        rc.display()
    );
    let t = Tmux {
        sock: format!("squall-serveops-{}", std::process::id()),
    };
    t.cmd(&[
        "new-session",
        "-d",
        "-s",
        "live",
        "-x",
        "120",
        "-y",
        "32",
        &cmd,
    ]);
    t.wait_for_all(
        &[
            "Rates (last second)",
            "squall serve",
            "1 Overview",
            "2 worker(s)",
            "Request latency",
            "none",
        ],
        20,
    );
    // Up once /ping answers.
    let t0 = Instant::now();
    loop {
        let out = ns(
            "sq-cli",
            &["curl", "-s", "-m", "1", "http://198.18.48.1/ping"],
        )
        .output()
        .expect("curl");
        if out.stdout == b"pong" {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(15), "no answer to /ping");
        std::thread::sleep(Duration::from_millis(200));
    }
    // 20,000 keep-alive requests.
    let ab = ns(
        "sq-cli",
        &[
            "timeout",
            "60",
            "ab",
            "-q",
            "-k",
            "-s",
            "5",
            "-n",
            "20000",
            "-c",
            "8",
            "http://198.18.48.1/ping",
        ],
    )
    .output()
    .expect("ab");
    let abo = String::from_utf8_lossy(&ab.stdout);
    assert!(ab.status.success(), "ab: {abo}");
    assert!(abo.contains("Failed requests:        0"), "{abo}");
    // The endpoint: the server's counters while it serves (sampled once a second: ab
    // may have been faster than that).
    let t2 = Instant::now();
    let (body, m) = loop {
        let body = scrape();
        let m = squall::metrics::parse(&body).unwrap_or_else(|e| panic!("{e}\n{body}"));
        let n = squall::metrics::find(&m, "squall_serve_requests_total", &[]).unwrap_or(0.0);
        if n > 20_000.0 || t2.elapsed() > Duration::from_secs(5) {
            break (body, m);
        }
        std::thread::sleep(Duration::from_millis(250));
    };
    let get = |name: &str, labels: &[(&str, &str)]| -> f64 {
        squall::metrics::find(&m, name, labels)
            .unwrap_or_else(|| panic!("{name} {labels:?} missing in\n{body}"))
    };
    let requests = get("squall_serve_requests_total", &[]);
    assert!(requests > 20_000.0, "{requests}\n{abo}");
    assert_eq!(get("squall_serve_up", &[]), 1.0);
    assert_eq!(
        get("squall_serve_responses_total", &[("class", "2xx")]),
        requests
    );
    assert_eq!(get("squall_serve_errors_total", &[]), 0.0);
    let per_core = get("squall_serve_core_requests_total", &[("core", "0")])
        + get("squall_serve_core_requests_total", &[("core", "1")]);
    assert_eq!(per_core, requests);
    assert!(get("squall_serve_request_latency_seconds_count", &[]) > 0.0);
    assert!(get("squall_serve_wire_bytes_total", &[("direction", "rx")]) > 0.0);
    if lab::have("promtool") {
        let (st, out) = Command::new("promtool")
            .args(["check", "metrics"])
            .stdin(Stdio::piped())
            .output_stdin(&body);
        assert!(st.success(), "promtool check metrics: {out}");
    } else {
        eprintln!("promtool not installed: the exposition was checked by the strict parser only");
    }
    // The view: ab's requests show, keys switch screens.
    let t1 = Instant::now();
    let c = loop {
        let c = t.capture();
        if figure(&c, "requests answered").is_some_and(|n| n > 20_000) {
            break c;
        }
        assert!(t1.elapsed() < Duration::from_secs(5), "{c}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(c.contains("connections open|idle"), "{c}");
    t.cmd(&["send-keys", "-t", "live", "3"]);
    t.wait_for_all(&["core 1", "req/s", "load "], 5);
    t.cmd(&["send-keys", "-t", "live", "2"]);
    t.wait_for_all(&["Responses by status class", "2xx"], 5);
    // q: the graceful stop, long before --duration.
    let stopped = Instant::now();
    t.cmd(&["send-keys", "-t", "live", "q"]);
    while !rc.is_file() {
        assert!(
            stopped.elapsed() < Duration::from_secs(15),
            "q did not stop the server"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(200));
    let code = std::fs::read_to_string(&rc).unwrap();
    assert_eq!(code.trim(), "0", "{}", t.capture());
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(v["kind"], "serve");
    let total = v["requests"].as_u64().unwrap();
    assert!(total > 20_000, "{total}");
    assert_eq!(v["status_2xx"].as_u64(), Some(total));
    assert_eq!(v["errors"], 0);
    assert!(v["duration_sec"].as_f64().unwrap() < 35.0, "stopped by q");
    let series = v["series"].as_array().unwrap();
    assert!(series.len() >= 3, "{}", series.len());
    // The samples add up to the totals (rates rounded to 1/1000).
    let summed: f64 = series
        .iter()
        .map(|s| s["rps"].as_f64().unwrap() * s["dt"].as_f64().unwrap())
        .sum();
    assert!(
        (summed - total as f64).abs() <= 1.0 + total as f64 * 1e-3,
        "{summed} vs {total}"
    );
    assert_eq!(
        series.last().unwrap()["requests"].as_u64(),
        Some(total),
        "the last sample carries the final counters"
    );
    let lat: u64 = series
        .iter()
        .map(|s| s["latency_us"]["request"]["count"].as_u64().unwrap())
        .sum();
    assert_eq!(lat, v["latency_us"]["request"]["count"].as_u64().unwrap());
    assert!(lat > 0);
    assert!(series
        .iter()
        .all(|s| s["cores"].as_array().unwrap().len() == 2));
    assert!(series.iter().any(|s| s["rps"].as_f64().unwrap() > 1_000.0));
    let asserts = v["assertions"].as_array().unwrap();
    assert_eq!(asserts.len(), 3);
    assert!(asserts.iter().all(|a| a["ok"] == true), "{asserts:?}");
    assert_eq!(v["clean"], true);
    eprintln!(
        "serve ops: {total} requests, rates {}, request latency {}, {} samples",
        v["rates"],
        v["latency_us"]["request"],
        series.len()
    );
    // The stdout line: the same results without the series.
    let l: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&line).unwrap()).unwrap();
    assert_eq!(l["requests"].as_u64(), Some(total));
    assert!(l.get("series").is_none());
    // The report draws it.
    let html = dir.join("serve.html");
    let out = Command::new(squall_bin())
        .args(["report"])
        .arg(&json)
        .arg("-o")
        .arg(&html)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("data-chart=\"rps\"") && page.contains("data-key=\"rates.rps\""));

    // A failing assertion: exit 1, the values read; --plain progress lines on stderr.
    let (code, text) = squall_in(
        "sq-srv",
        &[
            "serve",
            "--listen",
            "198.18.48.1:80",
            "--iface",
            "afpacket:sq-srv0",
            "--peer-ip",
            "198.18.0.2",
            "--route",
            "/ping return 200 \"pong\"",
            "--duration",
            "3",
            "--plain",
            "--assert",
            "rps >= 1000000",
            "--assert",
            "errors == 0",
        ],
        30,
    );
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("FAILED: rps >= 1000000: left 0"), "{text}");
    assert!(text.contains("ok: errors == 0"), "{text}");
    assert!(
        text.contains("req/s") && text.contains("latency p99"),
        "{text}"
    );
    assert!(text.contains("\"clean\":false"), "{text}");
}

/// Feeds `input` to a command's stdin; (status, stdout and stderr).
trait OutputStdin {
    fn output_stdin(&mut self, input: &str) -> (std::process::ExitStatus, String);
}

impl OutputStdin for Command {
    fn output_stdin(&mut self, input: &str) -> (std::process::ExitStatus, String) {
        use std::io::Write as _;
        let mut c = self
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        if let Some(mut i) = c.stdin.take() {
            let _ = i.write_all(input.as_bytes());
        }
        let o = c.wait_with_output().expect("wait");
        let text =
            String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
        (o.status, text)
    }
}
