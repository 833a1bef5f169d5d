//! Shared helpers of the lab tests (`scripts/lab.sh` topologies, 198.18.0.0/15 only):
//! skip rules, the lab guard that tears the namespaces down, processes killed by pid,
//! running a command or Squall inside a namespace.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;

mod capture;
#[allow(unused_imports)]
pub use capture::Capture;

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

/// A lab topology, torn down on drop. It holds the machine-wide lab lock for its life
/// unless the test took it already ([`machine_lock`]), so that no other process's lab
/// (another test binary, a benchmark) is torn down under it.
pub struct Lab {
    _lock: Option<Option<LabLock>>,
}

impl Lab {
    /// `scripts/lab.sh up ARGS...` (e.g. `["--squall", "client"]` or `["dut-nat"]`).
    pub fn up(args: &[&str]) -> Lab {
        Lab::up_env(args, &[])
    }

    /// `lab.sh up` with variables of its environment (`SQUALL_LAB_*`).
    pub fn up_env(args: &[&str], env: &[(&str, &str)]) -> Lab {
        let lock = (HELD.load(std::sync::atomic::Ordering::SeqCst) == 0).then(|| {
            machine_lock(std::time::Duration::from_secs(900))
                .expect("the lab lock (/tmp/squall-lab.lock) stayed busy for 900 s")
        });
        let st = Command::new(root().join("scripts/lab.sh"))
            .arg("up")
            .args(args)
            .envs(env.iter().copied())
            .status()
            .expect("run lab.sh");
        assert!(st.success(), "lab.sh up {args:?} failed");
        Lab { _lock: lock }
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

/// The start of a lab test with namespaces of its own: `None` (the reason printed) if
/// one of `tools` is missing (or not root: see [`skip`]), else the machine-wide lab lock,
/// held until the guard goes (panics if it stays busy for 900 s).
pub fn lab_start(tools: &[&str]) -> Option<Option<LabLock>> {
    if let Some(r) = skip(tools) {
        eprintln!("skipped: {r}");
        return None;
    }
    let lock = machine_lock(std::time::Duration::from_secs(900));
    assert!(
        lock.is_some(),
        "the lab lock /tmp/squall-lab.lock was not free within 900 s"
    );
    lock
}

/// A Python client of the DNS-like UDP profile (`examples/udp-dns.json`) at `server`
/// (an IPv4 or IPv6 address, port 53): once the server answers a plain query, 5 queries
/// padded to 4,000 bytes (more than a 1,500-byte link carries: the kernel sends them in
/// fragments), then 3 datagrams of that size to closed port 9 on a connected socket;
/// prints the answers (of `answer_len` bytes, the query's id first) and the refusals
/// (ECONNREFUSED) it got.
pub fn fragmented_udp_client(server: &str, answer_len: usize) -> String {
    let family = if server.contains(':') {
        "AF_INET6"
    } else {
        "AF_INET"
    };
    format!(
        r#"
import socket, base64, time
q = base64.b64decode("EjQBAAABAAAAAAAAA3d3dwVleG1wbAR0ZXN0AAABAAE=")
big = q + bytes(4000 - len(q))
fam, srv = socket.{family}, "{server}"
ok, t0 = 0, time.time()
while ok == 0 and time.time() - t0 < 4:
    s = socket.socket(fam, socket.SOCK_DGRAM); s.settimeout(0.3)
    s.sendto(q, (srv, 53))
    try: ok += s.recvfrom(65536)[0][:2] == q[:2]
    except socket.timeout: pass
answered = 0
for i in range(5):
    s = socket.socket(fam, socket.SOCK_DGRAM); s.settimeout(0.5)
    s.sendto(big, (srv, 53))
    try:
        a = s.recvfrom(65536)[0]
        answered += a[:2] == q[:2] and len(a) == {answer_len}
    except socket.timeout: pass
refused = 0
s = socket.socket(fam, socket.SOCK_DGRAM); s.settimeout(0.5)
s.connect((srv, 9))
for i in range(3):
    s.send(big)
    try: s.recv(65536)
    except ConnectionRefusedError: refused += 1
    except socket.timeout: pass
print(answered, refused)
"#
    )
}

/// Runs the Python `script` in namespace `name`: its output (trimmed) and its errors.
pub fn python_in(name: &str, script: &str) -> (String, String) {
    let out = ns(name, &["python3", "-c", script]).output().unwrap();
    (
        String::from_utf8_lossy(&out.stdout).trim().to_string(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs `c` (output discarded); it must succeed.
pub fn run_ok(c: &mut Command) {
    let st = c.stdout(Stdio::null()).stderr(Stdio::null()).status();
    assert!(st.is_ok_and(|s| s.success()), "{c:?} failed");
}

/// Network namespaces of a test of its own (outside `scripts/lab.sh`'s), created with
/// their loopback up (leftovers of an earlier run deleted first) and deleted when the
/// guard goes, with everything in them.
pub struct Namespaces(&'static [&'static str]);

impl Namespaces {
    pub fn create(names: &'static [&'static str]) -> Namespaces {
        let g = Namespaces(names);
        g.delete();
        for n in names {
            run_ok(Command::new("ip").args(["netns", "add", n]));
            run_ok(&mut ns(n, &["ip", "link", "set", "lo", "up"]));
        }
        g
    }

    fn delete(&self) {
        for n in self.0 {
            let _ = Command::new("ip")
                .args(["netns", "del", n])
                .stderr(Stdio::null())
                .status();
        }
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        self.delete();
    }
}

/// `ip netns exec NAME ARGS...`.
pub fn ns(name: &str, args: &[&str]) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", name]).args(args);
    c
}

/// `curl -s -m 5 ARGS` in namespace `n`: (stdout, exit code).
pub fn curl_in(n: &str, args: &[&str]) -> (Vec<u8>, i32) {
    let mut a = vec!["curl", "-s", "-m", "5"];
    a.extend_from_slice(args);
    let out = ns(n, &a).output().expect("run curl");
    (out.stdout, out.status.code().unwrap_or(-1))
}

/// A tool in namespace `n` that must succeed: its stdout.
pub fn tool_in(n: &str, args: &[&str]) -> String {
    let out = ns(n, args).output().expect("run tool");
    let s = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{args:?} failed:\n{s}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    s
}

/// Deterministic file contents (xorshift bytes from `seed`).
pub fn pattern(n: usize, seed: u32) -> Vec<u8> {
    let mut x = seed.wrapping_mul(2_654_435_761) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

/// Sends signal `sig` (`-TERM`, `-INT`) to the process `p` (by its pid).
pub fn signal(p: &Proc, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &p.0.id().to_string()])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "kill {sig} {}", p.0.id());
}

/// A test's scratch directory under the system's temporary directory: removed when the
/// test ends, kept (for its logs and captures) when the test fails.
pub struct TmpDir(PathBuf);

impl std::ops::Deref for TmpDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for TmpDir {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for TmpDir {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

pub fn tmpdir(tag: &str) -> TmpDir {
    let d = std::env::temp_dir().join(format!("squall-lab-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    TmpDir(d)
}

pub fn squall_bin() -> &'static str {
    env!("CARGO_BIN_EXE_squall")
}

/// `squall ARGS` in namespace `n`, sent SIGINT after `after_s` seconds by GNU timeout
/// (killed 30 s later if still running; its exit status is squall's).
pub fn squall_interrupted(n: &str, after_s: u32, args: &[&str]) -> Command {
    let after = after_s.to_string();
    let mut a = vec![
        "timeout",
        "--preserve-status",
        "-k",
        "30",
        "-s",
        "INT",
        &after,
        squall_bin(),
    ];
    a.extend_from_slice(args);
    ns(n, &a)
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

/// Machine-wide lab locks this process holds ([`LabLock`]s alive).
static HELD: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// The machine-wide lab lock, held until dropped.
pub struct LabLock {
    _file: std::fs::File,
}

impl Drop for LabLock {
    fn drop(&mut self) {
        HELD.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// The machine-wide lab lock (`/tmp/squall-lab.lock`, the file `flock` takes in the
/// Makefile's lab targets), held while the returned guard lives; `None` if it stayed
/// busy for `wait` (the caller then skips through `squall_port::lab::skipped`, a failure
/// when lab tests are required). `SQUALL_LAB_LOCKED=1`: the caller holds it already.
pub fn machine_lock(wait: std::time::Duration) -> Option<Option<LabLock>> {
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
    HELD.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    Some(Some(LabLock { _file: f }))
}

/// A kernel nginx in namespace `n` serving `/w1` (32 KiB) on 198.18.48.1:80 from `dir`
/// (its config, root, logs), stopped on drop; with the exact size of its response (headers
/// and body) to a `Connection: close` request, measured from inside `n` (the kernel path,
/// not the veth) once it answers.
pub fn nginx_w1(n: &str, dir: &Path) -> (Proc, u64) {
    nginx_w1_on(n, dir, "198.18.48.1")
}

/// [`nginx_w1`] listening on `host` (an IPv4 address, or an IPv6 one in brackets:
/// `[2001:db8::1]`).
pub fn nginx_w1_on(n: &str, dir: &Path, host: &str) -> (Proc, u64) {
    use std::time::{Duration, Instant};
    let www = dir.join("www");
    std::fs::create_dir_all(&www).unwrap();
    let body: Vec<u8> = (0..32_768u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(www.join("w1"), &body).unwrap();
    let d = dir.display();
    let conf = format!(
        "daemon off;\nmaster_process off;\nworker_processes 1;\npid {d}/nginx.pid;\n\
         error_log {d}/error.log warn;\nevents {{ worker_connections 1024; }}\n\
         http {{\n access_log {d}/access.log;\n server_tokens off;\n client_body_temp_path {d};\n\
         proxy_temp_path {d};\n fastcgi_temp_path {d};\n uwsgi_temp_path {d};\n\
         scgi_temp_path {d};\n server {{\n  listen {host}:80;\n  root {d}/www;\n\
         default_type application/octet-stream;\n }}\n}}\n"
    );
    let nginx = start_nginx(n, dir, &conf);
    let t0 = Instant::now();
    let total = loop {
        let out = ns(
            n,
            &[
                "curl",
                "-s",
                "-g",
                "-m",
                "2",
                "-o",
                "/dev/null",
                "-H",
                "Connection: close",
                "-w",
                "%{size_header} %{size_download}",
                &format!("http://{host}/w1"),
            ],
        )
        .output()
        .unwrap();
        let s = String::from_utf8_lossy(&out.stdout).to_string();
        let v: Vec<u64> = s.split(' ').filter_map(|x| x.parse().ok()).collect();
        if v.len() == 2 && v[1] == 32_768 {
            break v[0] + v[1];
        }
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "nginx did not come up: {s}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    (nginx, total)
}

/// The lab's W1 client profile (`tests/profiles/veth-client.json`) receiving exactly
/// `total` response bytes, written into `dir`; its path.
pub fn w1_client_profile(dir: &Path, total: u64) -> PathBuf {
    let src = root().join("crates/squall/tests/profiles/veth-client.json");
    let mut p: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(src).unwrap()).unwrap();
    p["programs"][0]["commands"][1]["bytes"] = total.into();
    let prof = dir.join("client.json");
    std::fs::write(&prof, p.to_string()).unwrap();
    prof
}

/// nginx's access-log lines of Squall's requests (user agent `squall`) in `dir`, after
/// checking that each is a full 200 with the 32 KiB body of `/w1`.
pub fn nginx_squall_requests(dir: &Path) -> u64 {
    let log = std::fs::read_to_string(dir.join("access.log")).unwrap();
    let ours: Vec<&str> = log.lines().filter(|l| l.ends_with("\"squall\"")).collect();
    assert!(
        ours.iter()
            .all(|l| l.contains("\"GET /w1 HTTP/1.1\" 200 32768 ")),
        "every request answered 200 with the whole body"
    );
    ours.len() as u64
}

/// The value of line `key: value` of ab's report (empty if absent).
pub fn ab_field(report: &str, key: &str) -> String {
    report
        .lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split(':').nth(1))
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Waits (15 s at most) for a stopping `squall serve` (stderr piped, its report line on
/// stdout written to `out_json`) to exit 0; returns the parsed report and its stderr.
pub fn serve_report(srv: &mut Proc, out_json: &Path) -> (serde_json::Value, String) {
    use std::time::{Duration, Instant};
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = srv.0.try_wait().unwrap() {
            break s;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(15),
            "squall serve did not stop"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut err = String::new();
    if let Some(mut e) = srv.0.stderr.take() {
        use std::io::Read;
        let _ = e.read_to_string(&mut err);
    }
    assert!(status.success(), "squall serve: {status}\n{err}");
    let doc = serde_json::from_str(&std::fs::read_to_string(out_json).unwrap())
        .unwrap_or_else(|e| panic!("{e}: {err}"));
    (doc, err)
}

/// A kernel nginx in namespace `n` with configuration `conf` (written to `dir/nginx.conf`,
/// `dir` its prefix), stopped on drop.
pub fn start_nginx(n: &str, dir: &Path, conf: &str) -> Proc {
    let conf_path = dir.join("nginx.conf");
    std::fs::write(&conf_path, conf).unwrap();
    let conf_path = conf_path.display().to_string();
    let prefix = dir.display().to_string();
    Proc(
        ns(n, &["nginx", "-c", &conf_path, "-p", &prefix])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start nginx"),
    )
}

/// Issue #14 on real interfaces: every sample of a `squall run --json` `series` carries
/// errors by kind, retransmissions and latency (the workers' side reports), the samples add
/// up to the run's totals, and a run of `cores` > 1 workers has a row (and a load) per core.
pub fn check_real_series(r: &serde_json::Value, cores: usize) {
    let s = r["series"].as_array().expect("series");
    assert!(!s.is_empty(), "no samples");
    let (mut fb, mut rex) = (0, 0);
    for x in s {
        assert!(x["errors_by_kind"].is_object(), "{x}");
        fb += x["latency_us"]["first_byte"]["count"]
            .as_u64()
            .unwrap_or_else(|| panic!("no latency in {x}"));
        rex += x["retransmits"]
            .as_u64()
            .unwrap_or_else(|| panic!("no retransmits in {x}"));
        let c = x["cores"].as_array().expect("cores");
        if cores > 1 {
            assert_eq!(c.len(), cores, "{x}");
            assert!(c
                .iter()
                .all(|k| (0.0..=1.0).contains(&k["load"].as_f64().unwrap())));
        }
    }
    assert_eq!(
        fb,
        num(r, &["latency_us", "first_byte", "count"]),
        "latency"
    );
    assert!(fb > 0);
    assert_eq!(rex, num(r, &["retransmits"]), "retransmissions");
    if cores > 1 {
        let busy = s
            .iter()
            .flat_map(|x| x["cores"].as_array().unwrap().iter())
            .any(|k| k["load"].as_f64().unwrap() > 0.0);
        assert!(busy, "no load measured on any core");
    }
}

/// A wrk script that compares every response body with the file named by its argument
/// and prints `bodies checked N, differing M` at the end (the threads' counts summed).
pub const WRK_SAME_BODY: &str = r#"
local threads = {}
function setup(thread) table.insert(threads, thread) end
function init(args)
  local f = assert(io.open(args[1], "rb"))
  want = f:read("*a")
  f:close()
  checked, differing = 0, 0
end
function response(status, headers, body)
  checked = checked + 1
  if body ~= want then differing = differing + 1 end
end
function done(summary, latency, requests)
  local c, d = 0, 0
  for _, t in ipairs(threads) do
    c = c + t:get("checked")
    d = d + t:get("differing")
  end
  io.write(string.format("bodies checked %d, differing %d\n", c, d))
end
"#;

/// The command line of wrk (one thread, `conns` connections, 2 s) against `url`, every
/// body compared with the file `body` by [`WRK_SAME_BODY`] (written into `dir`); read
/// its verdict with [`wrk_bodies_checked`].
pub fn wrk_same_body_cmd(dir: &Path, conns: u32, url: &str, body: &Path) -> Vec<String> {
    let lua = dir.join("same_body.lua");
    std::fs::write(&lua, WRK_SAME_BODY).unwrap();
    [
        "wrk".to_string(),
        "-t1".into(),
        format!("-c{conns}"),
        "-d2s".into(),
        "-s".into(),
        lua.display().to_string(),
        url.into(),
        "--".into(),
        body.display().to_string(),
    ]
    .into()
}

/// The `bodies checked N, differing M` line of a wrk run with [`WRK_SAME_BODY`].
pub fn wrk_bodies_checked(out: &str) -> (u64, u64) {
    out.lines()
        .find_map(|l| l.strip_prefix("bodies checked "))
        .and_then(|r| r.split_once(", differing "))
        .and_then(|(c, d)| Some((c.trim().parse().ok()?, d.trim().parse().ok()?)))
        .unwrap_or_else(|| panic!("no body check in wrk's output: {out}"))
}
