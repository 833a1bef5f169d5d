//! The FFI boundary of the AF_XDP port: the C shim (`csrc/xsk_shim.c`) over libxdp's
//! socket/UMEM calls and its static-inline ring helpers, and libbpf's program loading.
//!
//! Why a shim rather than ring code in Rust: `<xdp/xsk.h>` keeps the ring protocol
//! (producer/consumer indices, cached copies, the barriers, the need-wakeup flag) in
//! static inline functions; the shim exports one call per *burst* that runs them over
//! caller arrays, so the protocol stays libxdp's own (no second implementation of its
//! memory ordering to keep in step) and the FFI cost is one call per burst, not per
//! packet. Everything unsafe of the port lives in this module and in the UMEM mapping.

use std::ffi::{c_char, c_int, c_uint, c_ulong, c_ulonglong, c_void, CString};

#[repr(C)]
pub(crate) struct SqXsk {
    _p: [u8; 0],
}
#[repr(C)]
pub(crate) struct SqProg {
    _p: [u8; 0],
}

extern "C" {
    fn sq_quiet();
    fn sq_xsk_open(
        out: *mut *mut SqXsk,
        ifname: *const c_char,
        queue: c_uint,
        area: *mut c_void,
        size: c_ulonglong,
        chunk: c_uint,
        headroom: c_uint,
        ring: c_uint,
        bind_flags: c_uint,
    ) -> c_int;
    fn sq_xsk_close(s: *mut SqXsk);
    fn sq_xsk_fd(s: *mut SqXsk) -> c_int;
    fn sq_rx(s: *mut SqXsk, addr: *mut c_ulonglong, len: *mut c_uint, max: c_uint) -> c_int;
    fn sq_fill(s: *mut SqXsk, addr: *const c_ulonglong, n: c_uint) -> c_int;
    fn sq_tx(s: *mut SqXsk, addr: *const c_ulonglong, len: *const c_uint, n: c_uint) -> c_int;
    fn sq_comp(s: *mut SqXsk, addr: *mut c_ulonglong, max: c_uint) -> c_int;
    fn sq_tx_needs_wakeup(s: *mut SqXsk) -> c_int;
    fn sq_fill_needs_wakeup(s: *mut SqXsk) -> c_int;
    fn sq_tx_pending(s: *mut SqXsk) -> c_int;
    fn sq_xdp_attached(ifindex: c_int, name: *mut c_char, id: *mut u32) -> c_int;
    fn sq_xdp_detach(ifindex: c_int, flags: c_uint) -> c_int;
    fn sq_prog_load(
        out: *mut *mut SqProg,
        obj: *const c_void,
        size: c_ulong,
        ifindex: c_int,
        flags: c_uint,
    ) -> c_int;
    fn sq_prog_close(p: *mut SqProg);
    fn sq_prog_own(p: *mut SqProg, addr_be: c_uint, prefixlen: c_uint) -> c_int;
    fn sq_prog_own6(p: *mut SqProg, addr: *const u8, prefixlen: c_uint) -> c_int;
    fn sq_prog_set_xsk(p: *mut SqProg, queue: c_uint, xsk_fd: c_int) -> c_int;
    fn sq_prog_stat(p: *mut SqProg, i: c_uint, out: *mut c_ulonglong) -> c_int;
}

/// `XDP_COPY` bind flag (linux/if_xdp.h).
pub(crate) const XDP_COPY: u32 = 1 << 1;
/// `XDP_ZEROCOPY` bind flag.
pub(crate) const XDP_ZEROCOPY: u32 = 1 << 2;
/// `XDP_USE_NEED_WAKEUP` bind flag.
pub(crate) const XDP_USE_NEED_WAKEUP: u32 = 1 << 3;
/// `XDP_FLAGS_SKB_MODE` (generic XDP) attach flag (linux/if_link.h).
pub(crate) const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
/// `XDP_FLAGS_DRV_MODE` (native XDP) attach flag.
pub(crate) const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;

fn neg(r: c_int) -> Result<usize, i32> {
    if r < 0 {
        Err(-r)
    } else {
        Ok(r as usize)
    }
}

/// Makes libbpf/libxdp silent (errors are reported by the port from their errno).
pub(crate) fn quiet() {
    // SAFETY: sets a process-wide print callback; no other precondition.
    unsafe { sq_quiet() }
}

/// One AF_XDP socket with its own UMEM registration and four rings.
pub(crate) struct Xsk(*mut SqXsk);

// SAFETY: the socket and its rings are used by the one owner of the handle.
unsafe impl Send for Xsk {}

impl Xsk {
    /// Creates the UMEM over `area` (`size` bytes, `chunk`-byte chunks) and binds a socket
    /// to `ifname`/`queue`. Returns the errno on failure.
    ///
    /// # Safety
    /// `area` must stay mapped, page-aligned and `size` bytes long until the socket is
    /// dropped: the kernel writes received frames into it.
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn open(
        ifname: &str,
        queue: u32,
        area: *mut u8,
        size: u64,
        chunk: u32,
        ring: u32,
        bind_flags: u32,
    ) -> Result<Xsk, i32> {
        let name = CString::new(ifname).map_err(|_| libc::EINVAL)?;
        let mut p = std::ptr::null_mut();
        // SAFETY: `name` is NUL-terminated; the caller guarantees `area`.
        let r = unsafe {
            sq_xsk_open(
                &mut p,
                name.as_ptr(),
                queue,
                area as *mut c_void,
                size,
                chunk,
                0,
                ring,
                bind_flags,
            )
        };
        neg(r)?;
        Ok(Xsk(p))
    }

    /// The socket descriptor (for the XSK map and the wakeup calls).
    pub(crate) fn fd(&self) -> i32 {
        // SAFETY: `self.0` is a live socket.
        unsafe { sq_xsk_fd(self.0) }
    }

    /// Up to `addr.len()` received descriptors into `addr`/`len`; returns how many.
    pub(crate) fn rx(&mut self, addr: &mut [u64], len: &mut [u32]) -> usize {
        let max = addr.len().min(len.len()) as c_uint;
        // SAFETY: both arrays hold at least `max` elements.
        let r = unsafe { sq_rx(self.0, addr.as_mut_ptr(), len.as_mut_ptr(), max) };
        neg(r).unwrap_or(0)
    }

    /// Puts a prefix of `addr` on the fill ring; returns how many went.
    pub(crate) fn fill(&mut self, addr: &[u64]) -> usize {
        // SAFETY: `addr` holds `addr.len()` elements.
        let r = unsafe { sq_fill(self.0, addr.as_ptr(), addr.len() as c_uint) };
        neg(r).unwrap_or(0)
    }

    /// Queues a prefix of the descriptors on the tx ring; returns how many went.
    pub(crate) fn tx(&mut self, addr: &[u64], len: &[u32]) -> usize {
        let n = addr.len().min(len.len()) as c_uint;
        // SAFETY: both arrays hold at least `n` elements.
        let r = unsafe { sq_tx(self.0, addr.as_ptr(), len.as_ptr(), n) };
        neg(r).unwrap_or(0)
    }

    /// Completed tx chunk addresses into `addr`; returns how many.
    pub(crate) fn completions(&mut self, addr: &mut [u64]) -> usize {
        // SAFETY: `addr` holds `addr.len()` elements.
        let r = unsafe { sq_comp(self.0, addr.as_mut_ptr(), addr.len() as c_uint) };
        neg(r).unwrap_or(0)
    }

    /// Whether the kernel asks for a `sendto` to process the tx ring.
    pub(crate) fn tx_needs_wakeup(&self) -> bool {
        // SAFETY: `self.0` is a live socket.
        unsafe { sq_tx_needs_wakeup(self.0) != 0 }
    }

    /// Descriptors on the tx ring not consumed by the kernel yet.
    pub(crate) fn tx_pending(&self) -> usize {
        // SAFETY: `self.0` is a live socket.
        neg(unsafe { sq_tx_pending(self.0) }).unwrap_or(0)
    }

    /// Whether the kernel asks for a `recvfrom`/`poll` to refill from the fill ring.
    pub(crate) fn fill_needs_wakeup(&self) -> bool {
        // SAFETY: `self.0` is a live socket.
        unsafe { sq_fill_needs_wakeup(self.0) != 0 }
    }

    /// Kicks tx (`sendto`, non-blocking). Returns the errno of a hard failure.
    pub(crate) fn kick_tx(&self) -> Result<(), i32> {
        // SAFETY: a zero-length sendto on our own socket; no buffer is read.
        let r = unsafe {
            libc::sendto(
                self.fd(),
                std::ptr::null(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null(),
                0,
            )
        };
        if r >= 0 {
            return Ok(());
        }
        match std::io::Error::last_os_error().raw_os_error() {
            Some(libc::EAGAIN) | Some(libc::EBUSY) | Some(libc::ENOBUFS) | Some(libc::EINTR) => {
                Ok(())
            }
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// The kernel's counters of this socket (`XDP_STATISTICS`): rx dropped, rx invalid
    /// descriptors, tx invalid descriptors, rx ring full, fill ring empty, tx ring empty.
    pub(crate) fn kernel_stats(&self) -> [u64; 6] {
        const SOL_XDP: libc::c_int = 283;
        const XDP_STATISTICS: libc::c_int = 7;
        let mut v = [0u64; 6];
        let mut len = std::mem::size_of_val(&v) as libc::socklen_t;
        // SAFETY: `v` is a writable buffer of `len` bytes; the kernel writes at most that
        // (older kernels fewer: the rest stays zero).
        let r = unsafe {
            libc::getsockopt(
                self.fd(),
                SOL_XDP,
                XDP_STATISTICS,
                v.as_mut_ptr() as *mut libc::c_void,
                &mut len,
            )
        };
        if r != 0 {
            return [0; 6];
        }
        v
    }

    /// Kicks rx processing of the fill ring (`recvfrom`, non-blocking).
    pub(crate) fn kick_rx(&self) {
        // SAFETY: a zero-length non-blocking recvfrom on our own socket; nothing is written.
        unsafe {
            libc::recvfrom(
                self.fd(),
                std::ptr::null_mut(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
    }
}

impl Drop for Xsk {
    fn drop(&mut self) {
        // SAFETY: `self.0` came from sq_xsk_open and is closed once.
        unsafe { sq_xsk_close(self.0) }
    }
}

/// The XDP program attached to an interface through a BPF link (detached on drop, and by
/// the kernel when the process dies).
pub(crate) struct Prog(*mut SqProg);

// SAFETY: map updates and the link are used by the one owner of the handle.
unsafe impl Send for Prog {}

impl Prog {
    /// Loads `obj` (a BPF ELF object) and attaches its `squall_xdp` program to `ifindex`
    /// in the mode of `flags`. Returns the errno on failure.
    pub(crate) fn load(obj: &[u8], ifindex: i32, flags: u32) -> Result<Prog, i32> {
        let mut p = std::ptr::null_mut();
        // SAFETY: `obj` is a live byte slice of the size passed; libbpf copies it.
        let r = unsafe {
            sq_prog_load(
                &mut p,
                obj.as_ptr() as *const c_void,
                obj.len() as c_ulong,
                ifindex,
                flags,
            )
        };
        neg(r)?;
        Ok(Prog(p))
    }

    /// Adds an owned prefix (`addr` in host order).
    pub(crate) fn own(&mut self, addr: u32, prefixlen: u32) -> Result<(), i32> {
        // SAFETY: `self.0` is a live program.
        neg(unsafe { sq_prog_own(self.0, addr.to_be(), prefixlen) }).map(|_| ())
    }

    /// Adds an owned IPv6 prefix (`addr` as a number: its big-endian bytes are the
    /// address).
    pub(crate) fn own6(&mut self, addr: u128, prefixlen: u32) -> Result<(), i32> {
        let b = addr.to_be_bytes();
        // SAFETY: `self.0` is a live program; `b` is 16 readable bytes for the call.
        neg(unsafe { sq_prog_own6(self.0, b.as_ptr(), prefixlen) }).map(|_| ())
    }

    /// Binds `queue` to the socket `fd` in the XSK map.
    pub(crate) fn set_xsk(&mut self, queue: u32, fd: i32) -> Result<(), i32> {
        // SAFETY: `self.0` is a live program.
        neg(unsafe { sq_prog_set_xsk(self.0, queue, fd) }).map(|_| ())
    }

    /// Counter `i` summed over CPUs (0 redirected, 1 passed, 2 too short).
    pub(crate) fn stat(&self, i: u32) -> u64 {
        let mut v = 0;
        // SAFETY: `self.0` is a live program; `v` is a valid out pointer.
        let r = unsafe { sq_prog_stat(self.0, i, &mut v) };
        if r < 0 {
            0
        } else {
            v
        }
    }
}

impl Drop for Prog {
    fn drop(&mut self) {
        // SAFETY: `self.0` came from sq_prog_load and is closed once.
        unsafe { sq_prog_close(self.0) }
    }
}

/// The id and name of the XDP program attached to `ifindex`, if any.
pub(crate) fn attached(ifindex: i32) -> Result<Option<(u32, String)>, i32> {
    let mut name = [0 as c_char; 16];
    let mut id = 0u32;
    // SAFETY: `name` is the 16-byte buffer the shim fills (BPF_OBJ_NAME_LEN), `id` a
    // u32 it writes.
    neg(unsafe { sq_xdp_attached(ifindex, name.as_mut_ptr(), &mut id) })?;
    if id == 0 {
        return Ok(None);
    }
    let s: Vec<u8> = name
        .iter()
        .take_while(|c| **c != 0)
        .map(|c| *c as u8)
        .collect();
    Ok(Some((id, String::from_utf8_lossy(&s).into_owned())))
}

/// Detaches a netlink-attached XDP program in the mode of `flags`.
pub(crate) fn detach(ifindex: i32, flags: u32) -> Result<(), i32> {
    // SAFETY: plain netlink request; no memory is passed.
    neg(unsafe { sq_xdp_detach(ifindex, flags) }).map(|_| ())
}
