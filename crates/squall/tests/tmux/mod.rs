//! A private tmux server for the live-view tests (Debian's tmux, scripts/deps.sh test):
//! start a command in a pane of a given size, capture the pane, send keys.
#![allow(dead_code)]

use std::process::Command;
use std::time::{Duration, Instant};

/// A private tmux server (its own socket), killed on drop.
pub struct Tmux {
    pub sock: String,
}

impl Tmux {
    pub fn cmd(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.sock])
            .args(args)
            .output()
            .expect("tmux (scripts/deps.sh test)");
        assert!(
            out.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
    pub fn capture(&self) -> String {
        self.cmd(&["capture-pane", "-p", "-t", "live"])
    }
    /// Captures until `want` shows (or panics after `secs`).
    pub fn wait_for(&self, want: &str, secs: u64) -> String {
        self.wait_for_all(&[want], secs)
    }
    /// Captures until every string of `want` shows in one capture (a screen is drawn by
    /// tmux as its bytes arrive: its title may show before its rows), or panics after
    /// `secs`.
    pub fn wait_for_all(&self, want: &[&str], secs: u64) -> String {
        let t = Instant::now();
        loop {
            let c = self.capture();
            if want.iter().all(|w| c.contains(w)) {
                return c;
            }
            assert!(
                t.elapsed() < Duration::from_secs(secs),
                "not all of {want:?} in\n{c}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.sock, "kill-server"])
            .output();
    }
}
