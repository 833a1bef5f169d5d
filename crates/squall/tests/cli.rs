//! The `squall` command line: exit codes, profile errors with JSON paths, the JSON output.

use std::path::Path;
use std::process::Command;

mod common;

fn squall() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_squall"));
    c.current_dir(Path::new(env!("CARGO_MANIFEST_DIR")));
    c
}

#[test]
fn invalid_profile_exits_2_with_every_json_path() {
    for sub in ["run", "validate"] {
        let out = squall()
            .args([sub, "tests/profiles/invalid.json"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{sub}");
        let err = String::from_utf8_lossy(&out.stderr);
        for path in [
            "programs[0].commands[2].buf",
            "global.tcp.mss",
            "ip_gens[0].clients.range",
        ] {
            assert!(err.contains(path), "{sub}: {path} missing in {err}");
        }
    }
}

/// Template group `name` of a run's JSON document.
fn group<'a>(v: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    let groups = v["groups"].as_array().unwrap();
    groups.iter().find(|g| g["name"] == name).unwrap()
}

/// Shipped example `name` changed by `edit`, written to a temporary file (`tag` names
/// it); the caller removes it.
fn edited_example(
    name: &str,
    tag: &str,
    edit: impl FnOnce(&mut serde_json::Value),
) -> std::path::PathBuf {
    let text = std::fs::read_to_string(format!("../../examples/{name}")).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    edit(&mut v);
    let f = std::env::temp_dir().join(format!("squall-{tag}-{}.json", std::process::id()));
    std::fs::write(&f, v.to_string()).unwrap();
    f
}

/// `squall run PROFILE --sim --duration 1 --json FILE`: its exit status (0 asserted),
/// its output and the JSON document.
fn sim_run_json(profile: &str) -> (String, serde_json::Value) {
    let name = profile.rsplit('/').next().unwrap_or(profile);
    let json = std::env::temp_dir().join(format!("squall-{}-{name}", std::process::id()));
    let out = squall()
        .args(["run", profile, "--sim", "--duration", "1", "--json"])
        .arg(&json)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let _ = std::fs::remove_file(&json);
    (stdout, v)
}

#[test]
fn udp_profile_runs_clean_with_udp_counters_in_json() {
    let (stdout, v) = sim_run_json("tests/profiles/udp.json");
    assert!(stdout.contains("udps_sndpkt"), "{stdout}");
    let sent = v["client"]["udp"]["udps_sndpkt"].as_u64().unwrap();
    assert!(sent > 0);
    assert_eq!(v["server"]["udp"]["udps_rcvpkt"].as_u64(), Some(sent));
    assert_eq!(v["client"]["udp"]["errors"].as_u64(), Some(0));
}

/// Keep-alive HTTP flows that outlast the run (1,000 requests each, 100 ms per answer)
/// are cut at its end: their pending requests are `cut`, not errors, and the run passes.
#[test]
fn http_flows_cut_at_the_end_are_not_errors() {
    let (_, v) = sim_run_json("tests/profiles/http_cut.json");
    let h = &group(&v, "ka")["http"];
    assert!(h["cut"].as_u64().unwrap() > 0, "{h}");
    assert_eq!(
        (h["incomplete"].as_u64(), h["errors"].as_u64()),
        (Some(0), Some(0)),
        "{h}"
    );
    assert!(h["responses"].as_u64().unwrap() > 0, "{h}");
    assert_eq!(h["status_class"]["2xx"], h["responses"], "{h}");
}

#[test]
fn missing_file_and_bad_options_exit_2() {
    let out = squall().args(["run", "no/such.json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = squall()
        .args(["run", "tests/profiles/loop.json", "--mult", "-1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = squall()
        .args(["run", "tests/profiles/loop.json", "--impair", "loss=7"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = squall()
        .args(["run", "tests/profiles/loop.json", "--cores", "3", "--split"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    // Out of range, or meaningless for the profile: a usage error naming the bound,
    // never an allocation abort or a silently ignored option.
    for (args, says) in [
        (&["--mult", "1e7"][..], "--mult must be in"),
        (&["--max-flows", "4294967295"], "16..=67108864"),
        (&["--max-flows", "0"], "16..=67108864"),
        (&["-t", "initwnd=10"], "apply to Python (.py) profiles only"),
    ] {
        let out = squall()
            .args(["run", "tests/profiles/loop.json", "--sim"])
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

#[test]
fn sim_run_writes_json_and_pcap_and_exits_0() {
    let dir = std::env::temp_dir().join(format!("squall-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("out.json");
    let pcap = dir.join("out.pcap");
    let out = sim_w1_cmd(&[])
        .arg("--json")
        .arg(&json)
        .arg("--pcap")
        .arg(&pcap)
        .args(["--pcap-flows", "2"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("result: CLEAN"), "{stdout}");
    assert!(stdout.contains("tcps_connattempt"));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(v["clean"], true);
    assert_eq!(v["errors"], 0);
    assert_eq!(v["client"]["tcp"]["tcps_connattempt"], 20);
    assert_eq!(v["client"]["flows"]["completed"], 20);
    assert_eq!(v["server"]["tcp"]["tcps_rcvbyte"], 20 * 100);
    let g = group(&v, "http");
    assert_eq!(g["latency_us"]["connect"]["count"], 20);
    assert!(v["invariants"]
        .as_array()
        .unwrap()
        .iter()
        .all(|c| c["ok"] == true));
    let (_, recs) = squall_port::pcap::read_pcap(&std::fs::read(&pcap).unwrap()).unwrap();
    assert!(recs.len() > 20);
    std::fs::remove_dir_all(&dir).ok();
}

/// `squall run ... | head`: a standard output closed before the summary is printed is no
/// error (no panic): the run ends as usual, its JSON written and its exit status kept.
#[test]
fn a_closed_stdout_loses_the_summary_not_the_run() {
    let dir = std::env::temp_dir().join(format!("squall-cli-pipe-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("out.json");
    let mut child = sim_w1_cmd(&["--json", json.to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The reader goes away before anything is read: every write to stdout fails (EPIPE).
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(out.status.code(), Some(0), "{err}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert!(v["client"]["flows"]["completed"].as_u64().unwrap() > 0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn failed_run_exits_1() {
    // Flows that wait 3-5 ms in their program, cut after a 1 ms drain: cut is not an
    // error, but with a zero stall time the server flows waiting for the client's
    // request are stalled.
    let run = |stall: &str| {
        squall()
            .args([
                "run",
                "tests/profiles/delay.json",
                "--sim",
                "--duration",
                "0.003",
                "--mult",
                "10",
                "--drain-sec",
                "0.001",
                "--stall-sec",
                stall,
            ])
            .output()
            .unwrap()
    };
    let out = run("0");
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("result: FAILED"));
    let out = run("5");
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("result: CLEAN"));
}

/// A device that answers nothing (the server here sits on every request for a minute):
/// a run shorter than the stall time cannot find its flows stalled, and says so in a
/// warning; with a stall time the run reaches, it fails; and an assertion on a latency
/// that was never measured fails rather than pass on a 0.
#[test]
fn flows_that_never_get_an_answer_are_not_hidden() {
    let f = edited_example("w1-astf-http.json", "mute", |v| {
        let cmds = v["programs"][1]["commands"].as_array_mut().unwrap();
        cmds.insert(1, serde_json::json!({"op": "delay", "usec": 60_000_000}));
    });
    let run = |extra: &[&str]| {
        let out = squall()
            .arg("run")
            .arg(&f)
            .args([
                "--sim",
                "--duration",
                "2",
                "--mult",
                "0.0001",
                "--drain-sec",
                "1",
            ])
            .args(extra)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let (code, text) = run(&[]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("none could be found stalled"), "{text}");
    let (code, text) = run(&["--stall-sec", "1"]);
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains("result: FAILED") && !text.contains("none could be found"),
        "{text}"
    );
    let (code, text) = run(&["--assert", "ttfb.p99 < 2ms"]);
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains("assert FAILED: ttfb.p99 < 2ms: 'ttfb.p99' has no value"),
        "{text}"
    );
    let _ = std::fs::remove_file(&f);
}

/// A DPDK port of the DUT topology needs `--eal`, and `--eal` needs a DPDK port: both
/// said before any port is opened (no root needed).
#[test]
fn a_dut_run_on_a_dpdk_port_needs_eal() {
    for (ports, eal, want) in [
        // A DPDK port without --eal.
        (
            ["dpdk", "afpacket:lo"],
            None,
            "a DPDK port (dpdk:NAME) needs --eal",
        ),
        // --eal without a DPDK port.
        (
            ["afpacket:x0", "afpacket:x1"],
            Some("--no-huge"),
            "--eal is for DPDK ports (dpdk:NAME)",
        ),
        // Two DPDK ports, each by its device name (an unnamed one is the first probed
        // port, which the other may be).
        (
            ["dpdk", "dpdk:net_x1"],
            Some("--no-huge"),
            "two DPDK ports need their names",
        ),
    ] {
        let mut c = squall();
        c.args([
            "run",
            "tests/profiles/dut-w1.json",
            "--client-iface",
            ports[0],
        ])
        .args(["--server-iface", ports[1], "-d", "1"]);
        if let Some(e) = eal {
            c.args(["--eal", e]);
        }
        let out = c.output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{ports:?}: {err}");
        assert!(err.contains(want), "{ports:?}: {err}");
    }
}

/// Without the privileges a raw port needs, the run stops with a message saying what it
/// needs (root drops them with `setpriv`; skipped when not root).
#[test]
fn a_port_without_permission_says_what_it_needs() {
    if !squall_port::lab::is_root() || Command::new("setpriv").arg("--version").output().is_err() {
        squall_port::lab::skipped("needs root and setpriv to drop privileges");
        return;
    }
    let bin = env!("CARGO_BIN_EXE_squall");
    let out = Command::new("setpriv")
        .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups", bin])
        .args([
            "run",
            "../../examples/w1-astf-http.json",
            "--iface",
            "afpacket:lo",
            "--mode",
            "client",
            "-d",
            "1",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains(
            "afpacket:lo: socket: permission denied (AF_PACKET needs root or CAP_NET_RAW)"
        ),
        "{err}"
    );
}

/// `squall bridge` says what is wrong with its options (exit 2, before opening anything)
/// and what failed when a port cannot be opened (exit 1).
#[test]
fn bridge_errors_say_what_is_wrong() {
    let run = |args: &[&str]| {
        let o = squall().arg("bridge").args(args).output().unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    for (args, want) in [
        (&["afpacket:x0", "afpacket:x0"][..], "x0 twice"),
        (
            &["x0", "x1", "--impair", "loss=2"],
            "--impair: impairment `loss`",
        ),
        (
            &["x0", "x1", "--impair-back", "bogus=1"],
            "--impair-back: unknown impairment",
        ),
        (&["afxdp:x0", "x1"], "the bridge runs on AF_PACKET"),
        (&["x0", "x1", "--duration", "0"], "--duration 0"),
        // (beyond what a Duration holds: an error, not a panic)
        (
            &["x0", "x1", "--duration", "1e20"],
            "--duration 100000000000000000000",
        ),
    ] {
        let (code, err) = run(args);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
    let (code, err) = run(&["sq-no-such-if0", "sq-no-such-if1", "-d", "1"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("sq-no-such-if0"), "{err}");
}

/// A stand-in for the `squall` Python package: `squall.compile` prints the IR of a file
/// named in the profile, or fails with a message, so the pass-through can be tested
/// without the real compiler.
fn fake_compiler(dir: &Path) {
    let pkg = dir.join("squall");
    std::fs::create_dir_all(&pkg).unwrap();
    std::fs::write(pkg.join("__init__.py"), "").unwrap();
    std::fs::write(
        pkg.join("compile.py"),
        r#"import sys
args = sys.argv[1:]
src = open(args[0]).read()
tun = [args[i + 1] for i, a in enumerate(args) if a == "-t"]
if "fail" in src:
    sys.stderr.write("profile.py:3: NameError: name 'ASTFProgrm' is not defined\n")
    sys.exit(1)
if tun != ["mult=2"]:
    sys.stderr.write("expected -t mult=2, got %r\n" % tun)
    sys.exit(1)
sys.stdout.write(open(src.strip()).read())
"#,
    )
    .unwrap();
}

#[test]
fn py_profiles_are_compiled_and_errors_passed_through() {
    if Command::new("python3").arg("-V").output().is_err() {
        eprintln!("python3 not available: skipped");
        return;
    }
    let dir = std::env::temp_dir().join(format!("squall-py-{}", std::process::id()));
    fake_compiler(&dir);
    let good = dir.join("good.py");
    let loop_json = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/profiles/loop.json");
    std::fs::write(&good, loop_json.to_str().unwrap()).unwrap();
    let out = squall()
        .env("SQUALL_PYTHONPATH", &dir)
        .args(["run", "--sim", "--duration", "1", "-q", "-t", "mult=2"])
        .arg(&good)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bad = dir.join("bad.py");
    std::fs::write(&bad, "fail").unwrap();
    let out = squall()
        .env("SQUALL_PYTHONPATH", &dir)
        .arg("validate")
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("NameError: name 'ASTFProgrm'"));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_config_file_gives_defaults_and_the_command_line_wins() {
    let dir = std::env::temp_dir().join(format!("squall-cli-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("squall.toml");
    let json = dir.join("out.json");
    std::fs::write(
        &cfg,
        format!(
            "[run]\nsim = true\nduration = 1\nmult = 50\nquiet = true\njson = {:?}\n",
            json.to_str().unwrap()
        ),
    )
    .unwrap();
    let out = squall()
        .args([
            "run",
            "tests/profiles/loop.json",
            "--mult",
            "20",
            "--config",
        ])
        .arg(&cfg)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["mult"], 20.0, "the command line wins");
    assert_eq!(v["duration_sec"], 1.0, "the file gives the rest");
    assert!(v["mode"].as_str().unwrap().contains("simulation"));
    // A file squall refuses: exit 2 and its error text.
    let refused = |text: &str| {
        std::fs::write(&cfg, text).unwrap();
        let out = squall()
            .args(["run", "tests/profiles/loop.json", "--config"])
            .arg(&cfg)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let err = refused("[run]\nbogus = 1\n");
    assert!(
        err.contains("bogus") && err.contains("squall.toml"),
        "{err}"
    );
    // A value of the file that the command line's parser refuses names the file too.
    let err = refused("[run]\ncores = 0\n");
    assert!(
        err.contains("--cores") && err.contains("squall.toml come before"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn vlan_runs_tag_every_frame() {
    let dir = std::env::temp_dir().join(format!("squall-cli-vlan-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("vlan.pcap");
    let out = squall()
        .args([
            "run",
            "../../examples/w1-astf-http.json",
            "--sim",
            "-d",
            "1",
            "-m",
            "20",
            "-q",
            "--vlan",
            "100",
            "--pcap",
        ])
        .arg(&pcap)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let bytes = std::fs::read(&pcap).unwrap();
    let (_, recs) = squall_port::pcap::read_pcap(&bytes).unwrap();
    assert!(recs.len() > 50, "{} frames", recs.len());
    for r in &recs {
        assert_eq!(&r.data[12..16], &[0x81, 0x00, 0x00, 100], "802.1Q id 100");
        assert_eq!(&r.data[16..18], &[0x08, 0x00]);
    }
    let bad = squall()
        .args(["run", "tests/profiles/loop.json", "--vlan", "4095"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `squall serve`'s usage errors (exit 2, a message saying what to do), its `[serve]`
/// table in the configuration file, `--cores 0` and `--no-steering` without workers refused.
#[test]
fn serve_usage_errors_say_what_is_wrong() {
    let dir = std::env::temp_dir().join(format!("squall-serve-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let conf = dir.join("squall.toml");
    std::fs::write(&conf, "[serve]\nlisten = \"198.18.48.1:80\"\ncores = 0\n").unwrap();
    let conf = conf.to_str().unwrap().to_string();
    // IPv6 and dual stack: what cannot work is refused before anything opens; the file's
    // `listen` may be a list (IPv6 only here: an IPv4 peer cannot be resolved).
    let conf6 = dir.join("v6.toml");
    std::fs::write(
        &conf6,
        "[serve]\nlisten = [\"[2001:db8::1]:80\", \"[2001:db8::2]:8080\"]\nroot = \".\"\n",
    )
    .unwrap();
    let conf6 = conf6.to_str().unwrap().to_string();
    let cases: [(&[&str], &str); 20] = [
        (
            &["serve", "--iface", "afpacket:x", "--root", "."],
            "--listen ADDR:PORT",
        ),
        (
            &[
                "serve",
                "--listen",
                "198.18.48.1:0",
                "--iface",
                "afpacket:x",
                "--root",
                ".",
            ],
            "port 0 is not one a client can connect to",
        ),
        (
            &[
                "serve",
                "--listen",
                "198.18.48.1:80",
                "--iface",
                "afpacket:x",
                "--root",
                ".",
                "--initcwnd",
                "0",
            ],
            "0 is not in 1..=20",
        ),
        (
            &[
                "serve",
                "--listen",
                "198.18.48.1:80",
                "--iface",
                "afpacket:x",
                "--root",
                ".",
                "--max-line",
                "0",
            ],
            "--max-line 0 / --max-head 16384: expected 16",
        ),
        (
            &[
                "serve",
                "--listen",
                "198.18.48.1:80",
                "--iface",
                "afpacket:x",
                "--root",
                ".",
                "--max-line",
                "20000",
            ],
            "--max-line may not exceed --max-head",
        ),
        (
            &[
                "serve",
                "--listen",
                "198.18.48.1:80",
                "--iface",
                "afpacket:x",
                "--root",
                ".",
                "--idle-timeout",
                "18446744074",
            ],
            "at most 10,000,000",
        ),
        // Assertions are checked before the server starts: an unknown figure names the
        // short names, a malformed expression says what was expected.
        (
            &[
                "serve",
                "--listen",
                "198.18.48.1:80",
                "--iface",
                "afpacket:x",
                "--root",
                ".",
                "--assert",
                "rsp >= 1",
            ],
            "unknown figure 'rsp'",
        ),
        (
            &[
                "serve",
                "--listen",
                "198.18.48.1:80",
                "--iface",
                "afpacket:x",
                "--root",
                ".",
                "--assert",
                "rps >=",
            ],
            "--assert",
        ),
        (
            &["serve", "--listen", "198.18.48.1:80", "--root", "."],
            "--iface KIND:NAME",
        ),
        (
            &[
                "serve",
                "--listen",
                "198.18.48.1:80",
                "--iface",
                "mem",
                "--root",
                ".",
            ],
            "real interface",
        ),
        (
            &[
                "serve",
                "--listen",
                "198.18.48.1:80",
                "--iface",
                "afpacket:x",
            ],
            "nothing to serve",
        ),
        (
            &[
                "serve",
                "--listen",
                "198.18.48.1:80",
                "--iface",
                "afpacket:x",
                "--route",
                "/x 200",
            ],
            "expected: PATH return CODE",
        ),
        (
            &[
                "serve",
                "--listen",
                "198.18.48.1:80",
                "--iface",
                "afpacket:x",
                "--root",
                ".",
                "--cores",
                "0",
            ],
            "--cores 0: expected at least one worker",
        ),
        (
            &[
                "serve",
                "--listen",
                "198.18.48.1:80",
                "--iface",
                "afpacket:x",
                "--root",
                ".",
                "--cores",
                "4000000000",
            ],
            "--cores 4000000000: at most 256 workers",
        ),
        (
            &[
                "serve",
                "--listen",
                "198.18.48.1:80",
                "--iface",
                "afpacket:x",
                "--root",
                ".",
                "--no-steering",
            ],
            "--no-steering: only with --cores N",
        ),
        // From the file: cores = 0 is refused the same way.
        (
            &[
                "serve",
                "--config",
                &conf,
                "--iface",
                "afpacket:x",
                "--root",
                ".",
            ],
            "--cores 0",
        ),
        (
            &[
                "serve",
                "--config",
                &conf6,
                "--iface",
                "afxdp:x",
                "--peer-ip",
                "198.18.0.2",
            ],
            "an IPv4 peer is resolved by ARP",
        ),
        (
            &[
                "serve",
                "--listen",
                "[2001:db8::1]:80",
                "--iface",
                "afpacket:x",
                "--root",
                ".",
                "--peer-ip",
                "198.18.0.2",
            ],
            "an IPv4 peer is resolved by ARP",
        ),
        (
            &[
                "serve",
                "--listen",
                "198.18.48.1:80",
                "--iface",
                "afpacket:x",
                "--root",
                ".",
                "--peer-ip",
                "2001:db8::2",
            ],
            "an IPv6 peer is resolved by neighbour discovery",
        ),
        (
            &[
                "serve",
                "--listen",
                "[::]:80",
                "--iface",
                "afpacket:x",
                "--root",
                ".",
            ],
            "not a wildcard",
        ),
    ];
    for (args, msg) in cases {
        let out = squall().args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(msg), "{args:?}: `{msg}` not in {err}");
    }
    // The example file's [serve] table is read (and its [run] table left alone): only the
    // command line's --cores 0 is refused.
    let out = squall()
        .args([
            "serve",
            "--config",
            "../../examples/squall.toml",
            "--cores",
            "0",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("options from ../../examples/squall.toml") && err.contains("--cores 0"),
        "{err}"
    );
    std::fs::write(dir.join("squall.toml"), "[serve]\nbogus = 1\n").unwrap();
    let out = squall()
        .args(["serve", "--config", &conf])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("[serve] bogus: `squall serve` has no such option"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue #14: a real-time run's JSON carries one sample per second whose figures add up
/// to the run's totals.
#[test]
fn real_time_json_has_a_per_second_series() {
    let json = std::env::temp_dir().join(format!("squall-series-{}.json", std::process::id()));
    let args = [
        "--duration",
        "3",
        "--mult",
        "500",
        "--cores",
        "2",
        "--drain-sec",
        "1",
    ];
    let (_, v) = common::run_w1_json(&json, &args);
    let _ = std::fs::remove_file(&json);
    let series = v["series"].as_array().expect("series array");
    assert!((3..=6).contains(&series.len()), "{} samples", series.len());
    let started = v["client"]["flows"]["started"].as_f64().unwrap();
    let opened: f64 = series
        .iter()
        .map(|s| s["cps"].as_f64().unwrap() * s["dt"].as_f64().unwrap())
        .sum();
    assert!(
        (opened - started).abs() < 0.01 * started + 2.0,
        "{opened} vs {started}"
    );
    let completed: u64 = series
        .iter()
        .flat_map(|s| s["groups"].as_array().unwrap().iter())
        .map(|g| g["completed"].as_u64().unwrap())
        .sum();
    assert_eq!(
        completed,
        v["client"]["flows"]["completed"].as_u64().unwrap()
    );
    let measured: u64 = series
        .iter()
        .map(|s| s["latency_us"]["first_byte"]["count"].as_u64().unwrap())
        .sum();
    assert_eq!(
        measured, completed,
        "each flow's latency in exactly one second"
    );
    let mid = &series[1];
    assert!(mid["cps"].as_f64().unwrap() > 400.0, "{mid}");
    assert!(mid["wire_gbps"].as_f64().unwrap() > 0.0);
    assert!(mid["mpps"].as_f64().unwrap() > 0.0);
    assert_eq!(mid["retransmits"], 0);
    let cores = mid["cores"].as_array().unwrap();
    assert_eq!(cores.len(), 2);
    assert!(
        cores.iter().all(|c| c["cps"].as_f64().unwrap() > 100.0),
        "{mid}"
    );
    assert_eq!(
        series.last().unwrap()["completed"],
        v["client"]["flows"]["completed"]
    );
}

fn sim_w1(extra: &[&str]) -> std::process::Output {
    sim_w1_cmd(extra).output().unwrap()
}

/// `squall run` of the W1 example in simulated time (1 s, 20 flows/s) with `extra`.
fn sim_w1_cmd(extra: &[&str]) -> Command {
    let mut c = squall();
    c.args([
        "run",
        "../../examples/w1-astf-http.json",
        "--sim",
        "--duration",
        "1",
        "--mult",
        "20",
    ])
    .args(extra);
    c
}

/// Issue #14: `--assert` decides the exit status; each assertion is reported.
#[test]
fn assertions_pass_fail_and_bad_expressions() {
    let out = sim_w1(&[
        "--assert",
        "errors == 0",
        "--assert",
        "completed == 20",
        "--assert",
        "ttfb.p99 < 1s",
        "--assert",
        "cps >= 0.95 * target",
        "--assert",
        "groups.http.client.completed == client.flows.completed",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert_eq!(stdout.matches("assert ok: ").count(), 5, "{stdout}");

    let out = sim_w1(&["--assert", "errors == 0", "--assert", "completed > 20"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("assert FAILED: completed > 20: left 20, right 20 (completed = 20)"),
        "{stdout}"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("1 of 2 assertion(s) failed"));

    // Mistakes stop before the run (exit 2) and say what to write.
    for (e, want) in [
        ("errors = 0", "use '=='"),
        ("ttfb.p99 < 2 fortnights", "unexpected text"),
        ("ttfb.p99 < 2xs", "unknown unit 'xs'"),
        ("latency > 1", "unknown figure 'latency'"),
        ("rates > 1", "not a number but an object"),
    ] {
        let out = sim_w1(&["--assert", e]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{e}: {stderr}");
        assert!(stderr.contains(want), "{e}: {stderr}");
        assert!(out.stdout.is_empty(), "{e}: the run started");
    }
    let out = sim_w1(&["--warmup", "0.5"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("real-time run"));
}

/// Issue #14: --warmup/--cooldown measure a window of the run; the aliases read it.
#[test]
fn warmup_and_cooldown_window_the_figures() {
    let json = std::env::temp_dir().join(format!("squall-window-{}.json", std::process::id()));
    let (stdout, v) = common::run_w1_json(
        &json,
        &[
            "--duration",
            "4",
            "--mult",
            "400",
            "--drain-sec",
            "1",
            "-q",
            "--warmup",
            "1",
            "--cooldown",
            "1",
            "--assert",
            "window.seconds > 1.5",
            "--assert",
            "cps == window.cps",
            "--assert",
            "cps > 0.9 * target",
        ],
    );
    assert!(stdout.contains("measurement window 1.0-3.0 s"), "{stdout}");
    let _ = std::fs::remove_file(&json);
    let w = &v["window"];
    let secs = w["seconds"].as_f64().unwrap();
    assert!((1.9..2.2).contains(&secs), "{w}");
    let fb = w["latency_us"]["first_byte"]["count"].as_f64().unwrap();
    let all = v["latency_us"]["first_byte"]["count"].as_f64().unwrap();
    assert!(
        fb > 0.35 * all && fb < 0.65 * all,
        "window {fb} of {all} flows"
    );
    assert_eq!(v["assertions"].as_array().unwrap().len(), 3);
    // The summary shows the window's rates and latency; the counters stay whole-run.
    let (from, to) = (w["from"].as_f64().unwrap(), w["to"].as_f64().unwrap());
    let span = format!("measurement window {from:.1}-{to:.1} s");
    let rates = format!("rates ({span}): {:.1} CPS", w["cps"].as_f64().unwrap());
    assert!(stdout.contains(&rates), "{rates}\n{stdout}");
    let whole = format!(
        "rates (whole run): {:.1} CPS",
        v["rates"]["cps"].as_f64().unwrap()
    );
    assert!(stdout.contains(&whole), "{whole}\n{stdout}");
    assert!(
        stdout.contains(&format!("flows measured in the {span}")),
        "{stdout}"
    );
    // W1's group `http` (group 1): its row's counters are the run's, its CPS the
    // window's; its latency rows are the window's figures, phase by phase.
    let g = &v["groups"][1];
    let wg = &w["groups"][1];
    assert_eq!(wg["name"], "http");
    let row: Vec<&str> = stdout
        .lines()
        .find(|l| l.starts_with("http "))
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(row[1], g["client"]["started"].to_string(), "{row:?}");
    assert_eq!(row[2], g["client"]["completed"].to_string(), "{row:?}");
    assert_eq!(
        row[4],
        format!("{:.1}", wg["cps"].as_f64().unwrap()),
        "{row:?}"
    );
    assert!(wg["l7_gbps"].as_f64().unwrap() > 0.0, "{wg}");
    for phase in ["connect", "first_byte", "last_byte"] {
        let l = &wg["latency_us"][phase];
        let want: Vec<String> = ["count", "p50", "p90", "p99", "p99_9", "max"]
            .iter()
            .map(|k| l[k].to_string())
            .collect();
        let got: Vec<String> = stdout
            .lines()
            .map(|x| x.split_whitespace().collect::<Vec<_>>())
            .find(|x| x.len() == 8 && x[0] == "http" && x[1] == phase)
            .unwrap_or_else(|| panic!("{phase}: {stdout}"))[2..]
            .iter()
            .map(|x| x.to_string())
            .collect();
        assert_eq!(got, want, "{phase}");
        let whole = g["latency_us"][phase]["count"].as_u64().unwrap();
        assert!(
            l["count"].as_u64().unwrap() < whole,
            "{phase}: the window has fewer flows"
        );
    }
    // The JSON's whole-run figures are unchanged (added to, not renamed).
    assert!(v["rates"]["cps"].is_f64() && v["latency_us"]["first_byte"]["p99"].is_u64());
    assert_eq!(wg["started"].as_u64().map(|n| n > 0), Some(true));
}

/// Issue #14: what cannot work says so with the next step: an unknown interface (once
/// named, with how to list interfaces), a missing `--root`, output paths that cannot be
/// written (refused with exit status 2 before the run, not after it).
#[test]
fn errors_say_what_to_do_next_and_outputs_are_checked_before_the_run() {
    let out = squall()
        .args([
            "run",
            "../../examples/w1-astf-http.json",
            "--iface",
            "afpacket:nope0",
        ])
        .args(["--mode", "client", "-d", "1", "-q"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.matches("afpacket:nope0:").count(), 1, "{err}");
    assert!(
        err.contains("no such interface") && err.contains("ip link"),
        "{err}"
    );
    assert!(err.contains("ip netns exec"), "{err}");

    let out = squall()
        .args(["serve", "--root", "/nonexist", "--listen", "198.18.48.1:80"])
        .args(["--iface", "afpacket:nope0"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--root /nonexist: no such directory"), "{err}");
    assert!(
        err.contains("give the directory that holds the files"),
        "{err}"
    );
    assert!(
        !err.contains("nope0"),
        "refused before the interface: {err}"
    );

    let dir = std::env::temp_dir().join(format!("squall-outputs-cli-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("a-file");
    std::fs::write(&file, "x").unwrap();
    let missing = dir.join("no/such/dir/out.json");
    let under_file = file.join("trace");
    let pcap = dir.join("no/x.pcap");
    let cases: [(&str, &Path, &str); 3] = [
        ("--json", &missing, "cannot create the file"),
        ("--pcap", &pcap, "cannot create the file"),
        ("--trace", &under_file, "cannot create the directory"),
    ];
    for (opt, path, want) in cases {
        // A real-time run: it would take 3 s and more before the outputs were written.
        let t0 = std::time::Instant::now();
        let out = squall()
            .args(["run", "../../examples/w1-astf-http.json", "-d", "3", "-q"])
            .arg(opt)
            .arg(path)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{opt}: {err}");
        assert!(
            err.contains(&format!("{opt} {}: {want}", path.display())),
            "{err}"
        );
        assert!(
            err.contains("pick another"),
            "{opt}: says what to do: {err}"
        );
        assert!(out.stdout.is_empty(), "{opt}: the run started");
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(3),
            "{opt}: after the run"
        );
    }
    // The server's outputs too, before its interface is opened.
    let out = squall()
        .args(["serve", "--root", ".", "--listen", "198.18.48.1:80"])
        .args(["--iface", "afpacket:nope0", "--json"])
        .arg(&missing)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--json") && !err.contains("nope0"), "{err}");
    // A writable --json is left as it was by the check, and written by the run.
    let ok = dir.join("ok.json");
    let out = sim_w1(&["--json", ok.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    assert!(std::fs::read_to_string(&ok).unwrap().contains("\"rates\""));
    let _ = std::fs::remove_dir_all(&dir);
}

/// GET `path` from `addr` (HTTP/1.0); the status line and the body.
fn http_get(addr: &str, path: &str) -> (String, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut r = String::new();
    s.read_to_string(&mut r).unwrap();
    let (head, body) = r.split_once("\r\n\r\n").unwrap();
    (head.lines().next().unwrap().to_string(), body.to_string())
}

/// Issue #14: `--metrics` serves the Prometheus text format during the run, scraped here
/// and read back with a strict parser.
#[test]
fn metrics_endpoint_is_scraped_during_the_run() {
    use std::io::{BufRead, BufReader};
    let mut child = squall()
        .args([
            "run",
            "../../examples/w1-astf-http.json",
            "--duration",
            "4",
            "--mult",
            "500",
            "--drain-sec",
            "1",
            "--cores",
            "2",
            "--metrics",
            "127.0.0.1:0",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    let addr = line
        .trim()
        .strip_prefix("squall: metrics at http://")
        .and_then(|s| s.strip_suffix("/metrics"))
        .unwrap_or_else(|| panic!("{line}"))
        .to_string();
    // Two progress lines: two samples taken.
    for _ in 0..2 {
        line.clear();
        err.read_line(&mut line).unwrap();
    }
    let (status, body) = http_get(&addr, "/metrics");
    assert!(status.contains("200"), "{status}");
    let m = squall::metrics::parse(&body).unwrap_or_else(|e| panic!("{e}\n{body}"));
    let get = |name: &str, labels: &[(&str, &str)]| -> f64 {
        squall::metrics::find(&m, name, labels)
            .unwrap_or_else(|| panic!("{name} {labels:?} missing in\n{body}"))
    };
    assert_eq!(get("squall_up", &[]), 1.0);
    let started = get("squall_flows_started_total", &[]);
    assert!(started > 400.0, "{started}");
    assert!(get("squall_cps", &[]) > 300.0);
    assert!(get("squall_wire_bytes_total", &[("side", "server")]) > 0.0);
    assert_eq!(
        get(
            "squall_flow_errors_total",
            &[("side", "client"), ("kind", "aborted")]
        ),
        0.0
    );
    let fb = [("group", "http"), ("phase", "first_byte")];
    let count = get("squall_latency_seconds_count", &fb);
    assert!(count > 0.0 && count <= started);
    assert_eq!(
        get(
            "squall_latency_seconds_bucket",
            &[fb[0], fb[1], ("le", "+Inf")]
        ),
        count
    );
    assert!(get("squall_core_load_ratio", &[("core", "1")]) > 0.0);
    let (status, _) = http_get(&addr, "/nope");
    assert!(status.contains("404"), "{status}");
    assert!(child.wait().unwrap().success());
}

/// Issue #14: help that teaches: examples in every command's --help, shell completions, a
/// man page, and usage errors that say where to look.
#[test]
fn help_completions_and_man_pages() {
    for sub in [
        "run",
        "serve",
        "validate",
        "report",
        "daemon",
        "completions",
        "man",
    ] {
        let out = squall().args([sub, "--help"]).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{sub}");
        assert!(
            text.contains("\nExamples:\n") && text.contains("\n  squall "),
            "{sub} --help has no example:\n{text}"
        );
    }
    let top = squall().arg("--help").output().unwrap();
    assert!(String::from_utf8_lossy(&top.stdout).contains("squall report out.json"));
    for (shell, want) in [
        ("bash", "_squall()"),
        ("zsh", "#compdef squall"),
        ("fish", "complete -c squall"),
    ] {
        let out = squall().args(["completions", shell]).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success() && text.contains(want), "{shell}");
        assert!(
            text.contains("warmup") && text.contains("metrics"),
            "{shell}: run options"
        );
    }
    let out = squall().arg("man").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(".TH squall 1") && text.contains("report"),
        "{text:.300}"
    );
    let dir = std::env::temp_dir().join(format!("squall-man-{}", std::process::id()));
    let out = squall().args(["man", "--dir"]).arg(&dir).output().unwrap();
    assert!(out.status.success());
    let run = std::fs::read_to_string(dir.join("squall-run.1")).unwrap();
    assert!(
        run.contains("assert") && run.contains("Examples"),
        "{run:.300}"
    );
    std::fs::remove_dir_all(&dir).ok();
    let out = squall()
        .args(["run", "../../examples/w1-astf-http.json", "--duration=-1"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        err.contains("--duration must be") && err.contains("squall help COMMAND"),
        "{err}"
    );
    // Recording more flows than memory should hold.
    for (opt, val) in [("--pcap", "/tmp/sq-cap.pcap"), ("--trace", "/tmp/sq-trace")] {
        let n = if opt == "--pcap" {
            "--pcap-flows"
        } else {
            "--trace-flows"
        };
        let out = squall()
            .args([
                "run",
                "../../examples/w1-astf-http.json",
                opt,
                val,
                n,
                "200000",
            ])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{opt}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!("{n} 200000: at most 100000")),
            "{err}"
        );
    }
    // A duration that would round to a run of 0 ns.
    let out = squall()
        .args([
            "run",
            "../../examples/w1-astf-http.json",
            "--duration=1e-10",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("0.001 to 1000000"));
}

/// More templates with distinct TCP tunables than a host holds option sets: refused at
/// validation, naming the first template that would not get its own settings.
#[test]
fn more_distinct_tunable_sets_than_a_host_holds_are_refused() {
    let f = edited_example("w1-astf-http.json", "t300", |v| {
        let t0 = v["templates"][0].clone();
        let tpls: Vec<serde_json::Value> = (0..300)
            .map(|i| {
                let mut t = t0.clone();
                t["port"] = (1000 + i).into();
                t["assoc"] = serde_json::json!([{"port": 1000 + i}]);
                t["client_tunables"] = serde_json::json!({"tcp": {"mss": 500 + i}});
                t
            })
            .collect();
        v["templates"] = tpls.into();
    });
    let out = squall().arg("validate").arg(&f).output().unwrap();
    let _ = std::fs::remove_file(&f);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("templates[255].client_tunables: more than 255"),
        "{err}"
    );
}

/// UDP datagrams larger than a 1500-byte MTU holds (2,000 bytes) run on the in-memory
/// wire: its MTU is sized for the largest datagram a program sends, as for TCP's MSS.
#[test]
fn large_udp_datagrams_fit_the_memory_wire() {
    let f = edited_example("udp-dns.json", "udp2000", |v| {
        for b in v["buffers"].as_array_mut().unwrap() {
            if b["name"] == "answer" {
                *b = serde_json::json!({"name": "answer", "size": 2000});
            }
        }
    });
    let (stdout, doc) = sim_run_json(f.to_str().unwrap());
    let _ = std::fs::remove_file(&f);
    assert!(stdout.contains("result: CLEAN"), "{stdout}");
    assert_eq!(doc["server"]["udp"]["udps_nombuf"].as_u64(), Some(0));
}

/// TRex's own IPv6 example maps flows under `ff02::` and `ff03::`: those addresses are
/// the pools' (owned), and the flows complete.
#[test]
fn trex_ipv6_prefixes_under_ff02_run_clean() {
    let f = edited_example("w1-astf-http.json", "v6msb", |v| {
        v["global"]["client"]["ipv6"] =
            serde_json::json!({"enable": 1, "src_msb": "ff02::", "dst_msb": "ff03::"});
    });
    let (stdout, doc) = sim_run_json(f.to_str().unwrap());
    let _ = std::fs::remove_file(&f);
    assert!(stdout.contains("result: CLEAN"), "{stdout}");
    assert_eq!(doc["server"]["tcp"]["tcps_rcvnotours"].as_u64(), Some(0));
    assert!(doc["server"]["tcp"]["tcps_accepts"].as_u64().unwrap() > 0);
}

/// Starts `squall run PROFILE --duration 60 ... --json FILE` on the memory wire, sends it
/// SIGINT `signals` times (1.5 s in, then a second apart) and waits for it: (exit status,
/// seconds from start to exit, the JSON document).
fn interrupted_run(profile: &str, extra: &[&str], signals: u32) -> (i32, f64, serde_json::Value) {
    let json = std::env::temp_dir().join(format!(
        "squall-sigint-{signals}-{}.json",
        std::process::id()
    ));
    let t0 = std::time::Instant::now();
    let mut child = squall()
        .args([
            "run",
            profile,
            "--duration",
            "60",
            "-q",
            "--plain",
            "--json",
        ])
        .arg(&json)
        .args(extra)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    for k in 0..signals {
        std::thread::sleep(std::time::Duration::from_millis(if k == 0 {
            1500
        } else {
            1000
        }));
        let st = Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(st.success());
    }
    // Bounded: a run that ignored the signal is killed after 30 s (and fails below).
    while t0.elapsed().as_secs() < 30 && child.try_wait().unwrap().is_none() {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let stopped = child.try_wait().unwrap().is_some();
    if !stopped {
        child.kill().unwrap();
    }
    let code = child.wait().unwrap().code();
    assert!(stopped, "squall run did not stop after SIGINT");
    let secs = t0.elapsed().as_secs_f64();
    let v = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    std::fs::remove_file(&json).unwrap();
    (code.unwrap_or(-1), secs, v)
}

/// SIGINT stops a run as the live view's `q` does: no new flows, those in flight finish,
/// the report and JSON follow (exit 0 on a clean run), the rates over the time flows
/// were opened.
#[test]
fn sigint_stops_a_run_and_reports() {
    let (code, secs, v) =
        interrupted_run("../../examples/w1-astf-http.json", &["--mult", "200"], 1);
    assert_eq!(code, 0, "{v}");
    assert!(secs < 10.0, "took {secs} s");
    let gen = v["generation_sec"].as_f64().unwrap();
    assert!((1.0..5.0).contains(&gen), "generation {gen} s");
    assert_eq!(v["duration_sec"].as_f64(), Some(60.0));
    let started = v["client"]["flows"]["started"].as_u64().unwrap();
    assert!(started > 100, "{started} flows");
    assert_eq!(v["client"]["flows"]["completed"].as_u64(), Some(started));
    assert_eq!(v["clean"], serde_json::Value::Bool(true));
}

/// A second SIGINT cuts the flows in flight instead of waiting for the drain (30 s here,
/// and each flow of the profile runs far longer).
#[test]
fn a_second_sigint_cuts_the_flows_in_flight() {
    // 10 million rounds of 64 KiB per flow: none ends by itself in this test.
    let long = edited_example("loop-elephant.json", "sigint-cut", |v| {
        for p in v["programs"].as_array_mut().unwrap() {
            p["commands"][0]["val"] = 10_000_000.into();
        }
    });
    let (_, secs, v) = interrupted_run(long.to_str().unwrap(), &["--drain-sec", "30"], 2);
    std::fs::remove_file(&long).unwrap();
    assert!(secs < 15.0, "took {secs} s: the drain was not cut");
    let cut = v["client"]["flows"]["cut"].as_u64().unwrap();
    assert!(cut > 0, "{}", v["client"]["flows"]);
}

/// A T-mem2 run (`--cores 2 --split`) whose flows outlast the drain: both threads cut
/// their flows, counted as cut on both sides, not as resets by the peer (the server
/// thread read the client's RSTs first: exit 1, "errors counted").
#[test]
fn a_split_run_cuts_both_sides_at_the_end_of_the_drain() {
    let long = edited_example("loop-elephant.json", "split-cut", |v| {
        for p in v["programs"].as_array_mut().unwrap() {
            p["commands"][0]["val"] = 10_000_000.into();
        }
    });
    let json = std::env::temp_dir().join(format!(
        "squall-split-cut-result-{}.json",
        std::process::id()
    ));
    let out = squall()
        .args([
            "run",
            long.to_str().unwrap(),
            "--duration",
            "1",
            "--drain-sec",
            "1",
        ])
        .args(["--cores", "2", "--split", "-q", "--json"])
        .arg(&json)
        .output()
        .unwrap();
    std::fs::remove_file(&long).unwrap();
    let text = String::from_utf8_lossy(&out.stderr).to_string();
    let v: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(&json).unwrap_or_else(|e| panic!("{e}: {text} {out:?}")),
    )
    .unwrap();
    std::fs::remove_file(&json).unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        v["client"]["flows"]["cut"].as_u64().unwrap() > 0,
        "{}",
        v["client"]["flows"]
    );
    assert_eq!(
        v["server"]["flows"]["reset_by_peer"], 0,
        "{}",
        v["server"]["flows"]
    );
    assert_eq!(v["server"]["flows"]["cut"], v["client"]["flows"]["cut"]);
}
