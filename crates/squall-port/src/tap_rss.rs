//! Receive-side scaling on a multi-queue tap: the lab's stand-in for a NIC with RSS.
//!
//! No device on a test machine hashes received frames with Toeplitz (a veth queues a frame
//! on the queue its sender picked; DPDK's vdevs have no RSS), so the RSS path of a
//! multi-core client (source ports chosen so each reply hashes to the opening core's
//! queue, [`crate::rss`]) could only be checked in unit tests. A tap can be given an RSS
//! of its own: Linux's tun driver runs a steering program (`TUNSETSTEERINGEBPF`, the hook
//! QEMU uses to offer RSS to virtio-net guests) for every frame the kernel sends into the
//! tap, and delivers the frame on the queue it returns. [`TapRss::attach`] loads
//! `csrc/tap_rss.bpf.c` (built by `build.rs`, embedded here) with the key, table size and
//! queue count of an [`RssConfig`] and attaches it; a DPDK `net_tap` port with that many
//! queues then receives exactly as an RSS NIC configured that way would. The program's
//! hash is written from the definition, bit by bit, not from [`crate::rss`]'s tables, so a
//! test over it checks Squall's choice against an independent implementation.
//!
//! The tap is created (persistent) when it does not exist, so the port can join it later
//! with the program in place; the kernel keeps the program until the tap is deleted. A
//! persistent tap outlives the process: the tests make theirs in a namespace they delete;
//! one made elsewhere stays until `ip link del NAME`.

use std::ffi::{c_char, c_int, c_uint, c_ulong, c_ulonglong, c_void, CString};

use crate::rss::RssConfig;

/// The compiled steering program (BPF ELF object).
static OBJ: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/tap_rss.o"));

#[repr(C)]
struct SqTapRss {
    _private: [u8; 0],
}

extern "C" {
    fn sq_tap_rss_attach(
        out: *mut *mut SqTapRss,
        obj: *const c_void,
        size: c_ulong,
        ifname: *const c_char,
        key: *const u8,
        queues: c_uint,
        reta_size: c_uint,
    ) -> c_int;
    fn sq_tap_rss_close(p: *mut SqTapRss);
    fn sq_tap_rss_stat(p: *mut SqTapRss, i: c_uint, out: *mut c_ulonglong) -> c_int;
}

/// What the steering program has done since it was attached.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TapRssStats {
    /// Frames hashed on their 4-tuple (TCP, UDP).
    pub four_tuple: u64,
    /// Frames hashed on their address pair (other IPv4, fragments, IPv6 with extension
    /// headers).
    pub addr_pair: u64,
    /// Frames sent to queue 0 unhashed (ARP, runts, ...).
    pub default_queue: u64,
    /// Of the hashed frames, those over IPv6.
    pub ipv6: u64,
}

/// The steering program attached to one tap (its maps stay readable while this lives).
pub struct TapRss {
    p: *mut SqTapRss,
}

impl TapRss {
    /// Attaches RSS with `cfg`'s key, table size (rounded up to a power of two, as
    /// [`crate::rss::RssSteer`] does) and queue count to the tap `ifname` of the calling
    /// thread's network namespace, creating the tap (multi-queue, persistent) if needed.
    pub fn attach(ifname: &str, cfg: &RssConfig) -> Result<TapRss, String> {
        let name = CString::new(ifname).map_err(|_| format!("{ifname:?}: bad interface name"))?;
        if cfg.queues == 0 {
            return Err("tap RSS needs at least one queue".into());
        }
        let reta = cfg.reta_size.clamp(1, 1 << 16).next_power_of_two();
        let mut p = std::ptr::null_mut();
        // SAFETY: OBJ is a live static slice; name and key outlive the call; `p` is
        // written only on success.
        let rc = unsafe {
            sq_tap_rss_attach(
                &mut p,
                OBJ.as_ptr().cast(),
                OBJ.len() as c_ulong,
                name.as_ptr(),
                cfg.key.as_ptr(),
                cfg.queues,
                reta,
            )
        };
        if rc < 0 {
            let e = std::io::Error::from_raw_os_error(-rc);
            let hint = match -rc {
                libc::EPERM | libc::EACCES => " (needs root: CAP_BPF and CAP_NET_ADMIN)",
                libc::EINVAL => " (is it a tap with several queues? a tun, or a tap made without multi_queue, cannot take it)",
                _ => "",
            };
            return Err(format!("tap RSS on {ifname}: {e}{hint}"));
        }
        Ok(TapRss { p })
    }

    /// The program's counters.
    pub fn stats(&self) -> TapRssStats {
        let read = |i: c_uint| {
            let mut v: c_ulonglong = 0;
            // SAFETY: self.p is live until drop; v is a valid out-pointer.
            let rc = unsafe { sq_tap_rss_stat(self.p, i, &mut v) };
            if rc < 0 {
                0
            } else {
                v
            }
        };
        TapRssStats {
            four_tuple: read(0),
            addr_pair: read(1),
            default_queue: read(2),
            ipv6: read(3),
        }
    }
}

impl Drop for TapRss {
    fn drop(&mut self) {
        // SAFETY: p came from sq_tap_rss_attach and is closed once.
        unsafe { sq_tap_rss_close(self.p) }
    }
}

// SAFETY: the handle is only a libbpf object and map descriptors, used through &self/&mut
// self; nothing in it is tied to the creating thread.
unsafe impl Send for TapRss {}
