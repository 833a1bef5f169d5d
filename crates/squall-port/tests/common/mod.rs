//! Shared by the AF_PACKET tests: a private network namespace holding one veth pair
//! (created up, removed on drop) and a way into it for the calling thread.
#![allow(dead_code)]

use std::process::Command;

/// Runs a command; true if it ran and succeeded.
pub fn sh(args: &[&str]) -> bool {
    Command::new(args[0])
        .args(&args[1..])
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// Namespace `name` with the veth pair `a` <-> `b`, both up; removed on drop.
pub struct VethNs {
    pub name: &'static str,
}

impl VethNs {
    /// Creates it (replacing a leftover of the same name); with `offloads_off`, every
    /// offload of both ends is turned off as in the lab. None if a step fails.
    pub fn up(name: &'static str, a: &str, b: &str, offloads_off: bool) -> Option<VethNs> {
        let _ = sh(&["ip", "netns", "del", name]);
        if !sh(&["ip", "netns", "add", name]) {
            return None;
        }
        let ns = VethNs { name };
        let mut ok = sh(&[
            "ip", "-n", name, "link", "add", a, "type", "veth", "peer", "name", b,
        ]);
        for d in [a, b] {
            ok = ok && sh(&["ip", "-n", name, "link", "set", d, "up"]);
            if offloads_off {
                ok = ok
                    && sh(&[
                        "ip", "netns", "exec", name, "ethtool", "-K", d, "tso", "off", "gso",
                        "off", "gro", "off", "tx", "off", "rx", "off",
                    ]);
            }
        }
        ok.then_some(ns)
    }

    /// Moves the calling thread into the namespace.
    pub fn enter(&self) {
        enter(self.name);
    }
}

/// Moves the calling thread into namespace `name`.
pub fn enter(name: &str) {
    let f = std::fs::File::open(format!("/var/run/netns/{name}")).expect("open netns");
    // SAFETY: setns on a namespace file we hold open; affects only this thread.
    let r = unsafe { libc::setns(std::os::fd::AsRawFd::as_raw_fd(&f), libc::CLONE_NEWNET) };
    assert_eq!(r, 0, "setns");
}

impl Drop for VethNs {
    fn drop(&mut self) {
        let _ = sh(&["ip", "netns", "del", self.name]);
    }
}

/// Runs `f` on a thread inside namespace `name` holding the veth pair `a` <-> `b` (removed
/// afterwards); skipped, with the reason printed, without root or when the namespace
/// cannot be made. A failure inside `f` fails the caller.
pub fn in_veth_ns(name: &'static str, a: &str, b: &str, f: impl FnOnce() + Send + 'static) {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        squall_port::lab::skipped("needs root (network namespace, AF_PACKET)");
        return;
    }
    let Some(ns) = VethNs::up(name, a, b, false) else {
        squall_port::lab::skipped("cannot create a network namespace here");
        return;
    };
    let h = std::thread::spawn(move || {
        enter(name);
        f()
    });
    let r = h.join();
    drop(ns);
    if let Err(e) = r {
        std::panic::resume_unwind(e);
    }
}
