//! Loading and attaching Squall's XDP program (`csrc/squall_xdp.bpf.c`, compiled by
//! `build.rs` and embedded here), filling its owned-prefix maps (IPv4 and IPv6) and its
//! XSK map.
//!
//! **Attachment and its lifetime.** The program is attached through a BPF link (native
//! mode, or generic mode where the driver has no XDP), not through netlink: the kernel
//! detaches a link when its last descriptor closes, so the program goes away when the port
//! is dropped, *and* when the process exits by a crash, a panic or `kill -9`: no stale
//! program can outlive Squall. The ports of one process on one interface (one per queue)
//! share one attachment. A program named `squall_xdp` found attached through netlink (a
//! copy loaded by hand, e.g. `ip link set dev IF xdp obj ...`, or by an older Squall) is
//! detached and replaced; one held by a link belongs to a running process (another Squall
//! on the interface) and is an error, as is anybody else's program.
//! Until a socket is bound to a queue, owned traffic falls back to the kernel (XDP_PASS).

use std::sync::{Arc, Mutex, Weak};

use super::sys;

/// The compiled XDP program (BPF ELF object).
static OBJ: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/squall_xdp.o"));

/// Name of the program (also how a stale copy is recognised).
pub const PROG_NAME: &str = "squall_xdp";

/// One attachment of the program to one interface.
pub(crate) struct XdpProgram {
    prog: sys::Prog,
    /// Native (driver) mode rather than generic (skb) mode.
    pub(crate) native: bool,
    owned: Vec<(u32, u32)>,
    owned6: Vec<(u128, u128)>,
}

/// The attachments of this process by (network namespace, interface index), shared by
/// the ports of the interface's queues.
type Key = (u64, i32);
static ATTACHED: Mutex<Vec<(Key, Weak<Mutex<XdpProgram>>)>> = Mutex::new(Vec::new());

/// The calling thread's network namespace (inode of its nsfs file; 0 if unknown).
fn netns() -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/thread-self/ns/net")
        .map(|m| m.ino())
        .unwrap_or(0)
}

/// Errno -> a message about `what` on `ifname`.
pub(crate) fn errmsg(ifname: &str, what: &str, e: i32) -> String {
    let s = std::io::Error::from_raw_os_error(e);
    let hint = match e {
        libc::EPERM | libc::EACCES => {
            " (permission denied: AF_XDP needs root, or CAP_NET_ADMIN, CAP_NET_RAW and CAP_BPF)"
        }
        libc::EOPNOTSUPP => " (not supported by this interface or kernel)",
        libc::EBUSY => " (busy: another socket is bound to this queue)",
        libc::ENOBUFS => {
            " (the UMEM could not be locked in memory: raise the locked-memory limit, \
             `ulimit -l unlimited`, or run with CAP_IPC_LOCK)"
        }
        _ => "",
    };
    format!("afxdp:{ifname}: {what}: {s}{hint}")
}

/// Splits `first..=last` into the fewest CIDR prefixes `(addr, len)`.
pub(crate) fn prefixes(first: u32, last: u32) -> Vec<(u32, u32)> {
    prefixes_of(u128::from(first), u128::from(last), 32)
        .into_iter()
        .map(|(a, l)| (a as u32, l))
        .collect()
}

/// Splits the IPv6 range `first..=last` into the fewest CIDR prefixes `(addr, len)`.
pub(crate) fn prefixes6(first: u128, last: u128) -> Vec<(u128, u32)> {
    prefixes_of(first, last, 128)
}

/// The fewest CIDR prefixes of `bits`-bit addresses covering `first..=last` (at most
/// `2 * bits` of them).
fn prefixes_of(first: u128, last: u128, bits: u32) -> Vec<(u128, u32)> {
    let mut v = Vec::new();
    if first > last {
        return v;
    }
    // The last address of the block of 2^k addresses starting at `a` (aligned to it, so
    // this never overflows).
    let block_end = |a: u128, k: u32| {
        if k >= 128 {
            u128::MAX
        } else {
            a + ((1u128 << k) - 1)
        }
    };
    let mut a = first;
    loop {
        // The largest aligned block starting at `a` that stays within `last` (the whole
        // space of `bits` when `a` is 0).
        let mut k = if a == 0 {
            bits
        } else {
            a.trailing_zeros().min(bits)
        };
        while k > 0 && block_end(a, k) > last {
            k -= 1;
        }
        v.push((a, bits - k));
        let end = block_end(a, k);
        if end >= last {
            return v;
        }
        a = end + 1;
    }
}

impl XdpProgram {
    fn attach(ifname: &str, ifindex: i32, generic: bool) -> Result<XdpProgram, String> {
        sys::quiet();
        if let Some((id, name)) =
            sys::attached(ifindex).map_err(|e| errmsg(ifname, "query XDP", e))?
        {
            if name != PROG_NAME {
                return Err(format!(
                    "afxdp:{ifname}: another XDP program is attached (id {id}, `{name}`); \
                     detach it first (ip link set dev {ifname} xdp off)"
                ));
            }
            // A stale copy attached through netlink: detach it in whatever mode it is. One
            // held by a link goes when its holder's descriptor closes (a Squall that is
            // just exiting): give it a second.
            for f in [sys::XDP_FLAGS_DRV_MODE, sys::XDP_FLAGS_SKB_MODE, 0] {
                let _ = sys::detach(ifindex, f);
            }
            let t0 = std::time::Instant::now();
            while sys::attached(ifindex).ok().flatten().is_some()
                && t0.elapsed() < std::time::Duration::from_secs(1)
            {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            if sys::attached(ifindex).ok().flatten().is_some() {
                return Err(format!(
                    "afxdp:{ifname}: interface in use: Squall's XDP program (id {id}) is held \
                     by a link of a running process (another Squall on this interface?)"
                ));
            }
        }
        let mut last = 0;
        let modes: &[(u32, bool)] = if generic {
            &[(sys::XDP_FLAGS_SKB_MODE, false)]
        } else {
            &[
                (sys::XDP_FLAGS_DRV_MODE, true),
                (sys::XDP_FLAGS_SKB_MODE, false),
            ]
        };
        for &(flags, native) in modes {
            match sys::Prog::load(OBJ, ifindex, flags) {
                Ok(prog) => {
                    return Ok(XdpProgram {
                        prog,
                        native,
                        owned: Vec::new(),
                        owned6: Vec::new(),
                    })
                }
                Err(e) => last = e,
            }
        }
        Err(match last {
            libc::EOPNOTSUPP | libc::EINVAL => format!(
                "afxdp:{ifname}: XDP not supported: the program could not be attached \
                 (native or generic mode): {}",
                std::io::Error::from_raw_os_error(last)
            ),
            e => errmsg(ifname, "load/attach the XDP program", e),
        })
    }

    /// The process's attachment on `ifindex` of the caller's network namespace (made now
    /// if there is none).
    pub(crate) fn shared(
        ifname: &str,
        ifindex: i32,
        generic: bool,
    ) -> Result<Arc<Mutex<XdpProgram>>, String> {
        let mut list = ATTACHED.lock().unwrap_or_else(|e| e.into_inner());
        list.retain(|(_, w)| w.strong_count() > 0);
        let key = (netns(), ifindex);
        if let Some(p) = list
            .iter()
            .find(|(k, _)| *k == key)
            .and_then(|(_, w)| w.upgrade())
        {
            return Ok(p);
        }
        let p = Arc::new(Mutex::new(Self::attach(ifname, ifindex, generic)?));
        list.push((key, Arc::downgrade(&p)));
        Ok(p)
    }

    /// Steers `first..=last` (host order) to the sockets from now on.
    pub(crate) fn own(&mut self, first: u32, last: u32) -> Result<(), i32> {
        if self.owned.contains(&(first, last)) {
            return Ok(());
        }
        for (a, l) in prefixes(first, last) {
            self.prog.own(a, l)?;
        }
        self.owned.push((first, last));
        Ok(())
    }

    /// Steers the IPv6 range `first..=last` to the sockets from now on.
    pub(crate) fn own6(&mut self, first: u128, last: u128) -> Result<(), i32> {
        if self.owned6.contains(&(first, last)) {
            return Ok(());
        }
        for (a, l) in prefixes6(first, last) {
            self.prog.own6(a, l)?;
        }
        self.owned6.push((first, last));
        Ok(())
    }

    /// Binds queue `queue` to socket `fd`.
    pub(crate) fn set_xsk(&mut self, queue: u32, fd: i32) -> Result<(), i32> {
        self.prog.set_xsk(queue, fd)
    }

    /// (redirected to a socket, passed to the kernel, too short to parse), all queues.
    pub(crate) fn counts(&self) -> (u64, u64, u64) {
        (self.prog.stat(0), self.prog.stat(1), self.prog.stat(2))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn covered(v: &[(u32, u32)]) -> Vec<u32> {
        let mut out = Vec::new();
        for &(a, l) in v {
            let n = 1u64 << (32 - l);
            assert_eq!(u64::from(a) % n, 0, "aligned");
            for i in 0..n {
                out.push((u64::from(a) + i) as u32);
            }
        }
        out
    }

    #[test]
    fn ranges_become_exact_prefixes() {
        let base = 0xc612_1000; // 198.18.16.0
        assert_eq!(prefixes(base, base + 255), vec![(base, 24)]);
        assert_eq!(prefixes(base + 1, base + 1), vec![(base + 1, 32)]);
        let v = prefixes(base + 1, base + 200);
        assert_eq!(covered(&v), (base + 1..=base + 200).collect::<Vec<_>>());
        assert!(v.len() <= 14, "{v:?}");
        assert_eq!(prefixes(0, u32::MAX), vec![(0, 0)]);
        assert_eq!(prefixes(u32::MAX, u32::MAX), vec![(u32::MAX, 32)]);
        assert!(prefixes(5, 4).is_empty());
    }

    #[test]
    fn ipv6_ranges_become_exact_prefixes() {
        let base: u128 = 0x2001_0db8_0066 << 80; // 2001:db8:66::
        assert_eq!(prefixes6(base + 1, base + 1), vec![(base + 1, 128)]);
        assert_eq!(prefixes6(base, base + 255), vec![(base, 120)]);
        let v = prefixes6(base + 3, base + 1000);
        let mut covered = Vec::new();
        for &(a, l) in &v {
            let n = 1u128 << (128 - l);
            assert_eq!(a % n, 0, "aligned");
            covered.extend((0..n).map(|i| a + i));
        }
        assert_eq!(covered, (base + 3..=base + 1000).collect::<Vec<_>>());
        assert!(v.len() <= 18, "{v:?}");
        assert_eq!(prefixes6(0, u128::MAX), vec![(0, 0)]);
        assert_eq!(prefixes6(u128::MAX, u128::MAX), vec![(u128::MAX, 128)]);
        assert_eq!(prefixes6(1 << 127, u128::MAX), vec![(1 << 127, 1)]);
        assert!(prefixes6(5, 4).is_empty());
    }
}
