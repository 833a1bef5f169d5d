//! What tests that build veth labs share (they run as root and hold the machine-wide lab
//! lock, `/tmp/squall-lab.lock`): whether a tool is installed, whether we are root, and
//! the lock itself.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The machine-wide lab lock's path (`scripts/lab.sh` and every namespace test take it).
pub const LOCK_PATH: &str = "/tmp/squall-lab.lock";

/// Whether `cmd` is on the PATH.
pub fn have(cmd: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {cmd}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Whether the process runs as root.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Whether every lab test must run (`SQUALL_LAB_REQUIRED` set and not `0`, as `.ci/run`
/// sets it): a test that cannot then fails with its reason instead of passing skipped.
pub fn required() -> bool {
    std::env::var_os("SQUALL_LAB_REQUIRED").is_some_and(|v| !v.is_empty() && v != "0")
}

/// A lab test that cannot run says why and passes, or fails with the reason when lab
/// tests are [`required`].
pub fn skipped(why: &str) {
    refuse_if_required(why);
    eprintln!("skipped: {why}");
}

/// Fails with `why` when lab tests are [`required`].
fn refuse_if_required(why: &str) {
    assert!(
        !required(),
        "this lab test cannot run: {why} (SQUALL_LAB_REQUIRED is set: no lab test may be skipped)"
    );
}

/// Why a lab test cannot run here (not root, one of `tools` missing), if it cannot.
/// Panics with the reason instead when lab tests are [`required`].
pub fn skip(tools: &[&str]) -> Option<String> {
    let why = if is_root() {
        tools
            .iter()
            .find(|t| !have(t))
            .map(|t| format!("`{t}` is not installed"))
    } else {
        Some("needs root (network namespaces, AF_PACKET)".into())
    };
    if let Some(w) = &why {
        refuse_if_required(w);
    }
    why
}

/// The lab lock, held while the returned file is open (`Some(None)` when the caller
/// already holds it: `SQUALL_LAB_LOCKED` set); None if not had within `wait`.
pub fn lock(wait: Duration) -> Option<Option<std::fs::File>> {
    if std::env::var_os("SQUALL_LAB_LOCKED").is_some() {
        return Some(None);
    }
    let f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(LOCK_PATH)
        .ok()?;
    let t0 = Instant::now();
    loop {
        use std::os::fd::AsRawFd;
        // SAFETY: flock on a valid, open fd.
        if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
            return Some(Some(f));
        }
        if t0.elapsed() > wait {
            return None;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}
