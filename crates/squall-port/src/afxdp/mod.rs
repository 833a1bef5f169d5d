//! AF_XDP port: one XDP socket (XSK) on one queue of a Linux interface, over a UMEM of its
//! own, as a [`Port`].
//!
//! Modules: [`umem`] (the mapping and its free chunks), `sys` (the FFI boundary: the C
//! shim over libxdp's rings and sockets and libbpf's program calls), [`prog`] (the XDP
//! program that steers Squall's traffic to the socket and everything else to the kernel).
//!
//! **Frames are UMEM chunks** ([`SlotFrame`]: chunk pointer, chunk index, offset, length;
//! no copy per packet). `rx_burst` turns rx-ring descriptors into frames; `release` puts
//! the chunk on the free stack; before each rx burst the free stack refills the **fill
//! ring** (leaving `tx_reserve` chunks for tx); `alloc_tx` pops free chunks; `tx_burst`
//! writes tx descriptors and kicks the kernel with `sendto` only when the ring's
//! need-wakeup flag asks for it; the **completion ring** is drained into the free stack at
//! the start of `alloc_tx`/`tx_burst`. A received frame can be sent back as it is (same
//! UMEM). When the fill ring's need-wakeup flag is set, `rx_burst` pokes the socket
//! (`recvfrom`, non-blocking) so that the driver refills from it.
//!
//! **Modes.** The socket binds in zero-copy mode where the driver has it
//! ([`XdpMode::Auto`] tries zero-copy, then copy); veth refuses zero-copy, so the lab runs
//! in copy mode. The program attaches in native (driver) mode, or generic mode where the
//! driver has no XDP. AF_XDP has no checksum offload: `caps().offloads` is empty and the
//! stack computes every checksum in software.
//!
//! **Attachment lifetime** (see [`prog`]): a BPF link that the kernel removes when the
//! process ends, however it ends (exit, panic, SIGINT/SIGTERM default action, `kill -9`).

pub mod prog;
mod sys;
pub(crate) mod umem;

use std::ffi::CString;

use crate::frame::{FrameBuf, Offload, SlotFrame};
use crate::port::{Port, PortCaps, PortStats};

use prog::XdpProgram;
use umem::Umem;

/// Descriptors moved per ring call.
const BURST: usize = 64;
/// Queues the XDP program's socket map holds (`xsks_map`'s `max_entries` in
/// `csrc/squall_xdp.bpf.c`).
const MAX_QUEUES: u32 = 64;

/// How the socket binds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XdpMode {
    /// Zero-copy if the driver supports it, else copy.
    Auto,
    /// Copy mode only (the kernel copies between its buffers and the UMEM).
    Copy,
    /// Zero-copy only (an error where the driver lacks it, e.g. veth).
    ZeroCopy,
}

/// Settings of an [`AfXdpPort`].
#[derive(Clone, Debug)]
pub struct AfXdpConfig {
    /// Interface name.
    pub ifname: String,
    /// Queue (rx/tx queue pair) of the interface.
    pub queue: u32,
    /// Chunks in the UMEM.
    pub frames: u32,
    /// Bytes per chunk (2048 or 4096).
    pub chunk: u32,
    /// Entries of each of the four rings (a power of two).
    pub ring: u32,
    /// Headroom of a fresh tx frame.
    pub headroom: u16,
    /// Chunks the fill ring leaves on the free stack for tx.
    pub tx_reserve: u32,
    /// Socket bind mode.
    pub mode: XdpMode,
    /// Attach the program in generic (skb) mode even where the driver has native XDP.
    pub generic: bool,
    /// IPv4 ranges (`first..=last`, host order) steered to Squall (IPv4 by destination,
    /// ARP by target address); everything else goes to the kernel.
    pub owned: Vec<(u32, u32)>,
    /// IPv6 ranges (`first..=last`, the addresses as numbers) steered to Squall (IPv6 by
    /// destination, neighbour solicitations by target address).
    pub owned6: Vec<(u128, u128)>,
}

impl AfXdpConfig {
    /// Defaults for `ifname` queue `queue`: 4096 chunks of 2048 bytes, rings of 2048,
    /// headroom 128, 1024 chunks reserved for tx, [`XdpMode::Auto`], native XDP.
    pub fn new(ifname: &str, queue: u32) -> Self {
        AfXdpConfig {
            ifname: ifname.to_string(),
            queue,
            frames: 4096,
            chunk: 2048,
            ring: 2048,
            headroom: 128,
            tx_reserve: 1024,
            mode: XdpMode::Auto,
            generic: false,
            owned: Vec::new(),
            owned6: Vec::new(),
        }
    }
}

/// Extra counters of an AF_XDP port.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AfXdpStats {
    /// Rx descriptors outside the UMEM or past their chunk (dropped).
    pub rx_invalid: u64,
    /// Frames refused before tx (longer than the MTU allows, or not of this UMEM); dropped.
    pub tx_refused: u64,
    /// Frames handed back that do not belong to this port (ignored).
    pub foreign: u64,
    /// `sendto` kicks (the tx ring's need-wakeup flag was set).
    pub tx_wakeups: u64,
    /// `recvfrom` pokes (the fill ring's need-wakeup flag was set).
    pub rx_wakeups: u64,
    /// `sendto` failures other than "try again".
    pub tx_errors: u64,
    /// The XDP program's counters (all queues of the interface): frames redirected to a
    /// socket, passed to the kernel, too short to parse (passed).
    pub xdp_redirected: u64,
    pub xdp_passed: u64,
    pub xdp_short: u64,
    /// The kernel's counters of the socket (`XDP_STATISTICS`): frames dropped on rx (no
    /// room: rx ring full or fill ring empty), of which rx ring full and fill ring empty.
    pub kernel_rx_dropped: u64,
    pub kernel_rx_ring_full: u64,
    pub kernel_fill_empty: u64,
}

/// How long a bind to a busy queue is retried (the kernel releases a closed socket's
/// queue asynchronously, in a work item; a restart right after a kill meets it busy).
const BIND_BUSY_WAIT: std::time::Duration = std::time::Duration::from_millis(1500);

/// An AF_XDP socket on one queue (see the module comment).
pub struct AfXdpPort {
    // Field order is drop order: the socket closes before the program detaches and the
    // UMEM is unmapped.
    xsk: sys::Xsk,
    prog: std::sync::Arc<std::sync::Mutex<XdpProgram>>,
    umem: Umem,
    cfg: AfXdpConfig,
    ifindex: i32,
    mac: [u8; 6],
    mtu: u16,
    zero_copy: bool,
    native: bool,
    /// Frames handed out and not returned yet.
    out: usize,
    /// Chunks on the tx ring, not completed yet.
    in_tx: usize,
    stats: PortStats,
    extra: AfXdpStats,
    addr: Vec<u64>,
    lens: Vec<u32>,
}

impl AfXdpPort {
    /// Opens queue `cfg.queue` of `cfg.ifname`: attaches the XDP program (or joins this
    /// process's attachment on the interface), maps the UMEM, binds the socket and steers
    /// `cfg.owned` to it. Errors are readable messages (no such interface, permission
    /// denied, queue busy, XDP not supported, zero-copy refused).
    pub fn open(cfg: AfXdpConfig) -> Result<Self, String> {
        let name = cfg.ifname.clone();
        if !cfg.ring.is_power_of_two() || cfg.ring < 64 || cfg.frames < 2 * cfg.ring {
            return Err(format!(
                "afxdp:{name}: bad ring geometry (rings a power of two >= 64, frames >= 2 x ring)"
            ));
        }
        if u32::from(cfg.headroom) >= cfg.chunk / 2 || cfg.tx_reserve >= cfg.frames {
            return Err(format!("afxdp:{name}: bad headroom or tx reserve"));
        }
        if cfg.queue >= MAX_QUEUES {
            return Err(format!(
                "afxdp:{name}: queue {} out of range (the XDP program serves queues 0 to {})",
                cfg.queue,
                MAX_QUEUES - 1
            ));
        }
        let cname = CString::new(name.clone()).map_err(|_| format!("afxdp:{name}: bad name"))?;
        // SAFETY: `cname` is a valid NUL-terminated string.
        let ifindex = unsafe { libc::if_nametoindex(cname.as_ptr()) } as i32;
        if ifindex == 0 {
            return Err(crate::netif::no_such_interface("afxdp", &name));
        }
        let (mac, mtu) = if_facts(&name)?;
        if u32::from(mtu) + 18 + 256 > cfg.chunk {
            return Err(format!(
                "afxdp:{name}: MTU {mtu} does not fit chunks of {} bytes (AF_XDP has no \
                 multi-buffer support here)",
                cfg.chunk
            ));
        }
        let prog = XdpProgram::shared(&name, ifindex, cfg.generic)?;
        let native = prog.lock().unwrap_or_else(|e| e.into_inner()).native;
        let umem = Umem::new(cfg.frames, cfg.chunk).map_err(|e| format!("afxdp:{name}: {e}"))?;
        let tries: &[(u32, bool)] = match cfg.mode {
            XdpMode::Auto if native => &[(sys::XDP_ZEROCOPY, true), (sys::XDP_COPY, false)],
            XdpMode::Auto | XdpMode::Copy => &[(sys::XDP_COPY, false)],
            XdpMode::ZeroCopy => &[(sys::XDP_ZEROCOPY, true)],
        };
        // Each mode in turn; the first that binds, and whether it is zero-copy.
        let bind = || {
            let mut res = Err(libc::EINVAL);
            for &(flags, zc) in tries {
                // SAFETY: the UMEM mapping lives in the port beside the socket and is
                // dropped after it (field order), or leaked while frames are out.
                res = unsafe {
                    sys::Xsk::open(
                        &name,
                        cfg.queue,
                        umem.area(),
                        umem.size() as u64,
                        umem.chunk(),
                        cfg.ring,
                        flags | sys::XDP_USE_NEED_WAKEUP,
                    )
                }
                .map(|x| (x, zc));
                if res.is_ok() {
                    break;
                }
            }
            res
        };
        // A queue whose socket was just closed (or whose process was killed) stays busy
        // until the kernel's deferred release of its buffer pool has run: EBUSY is
        // retried for up to BIND_BUSY_WAIT before it is reported.
        let t0 = std::time::Instant::now();
        let mut res = bind();
        while matches!(res, Err(libc::EBUSY)) && t0.elapsed() < BIND_BUSY_WAIT {
            std::thread::sleep(std::time::Duration::from_millis(20));
            res = bind();
        }
        let (xsk, zero_copy) = res.map_err(|e| match e {
            libc::EINVAL | libc::ENODEV => format!(
                "afxdp:{name}: queue {}: cannot bind ({}): no such queue, or the mode is not \
                 supported (veth has no zero-copy)",
                cfg.queue,
                std::io::Error::from_raw_os_error(e)
            ),
            libc::EOPNOTSUPP if cfg.mode == XdpMode::ZeroCopy => {
                format!("afxdp:{name}: zero-copy not supported by this driver (use copy mode)")
            }
            e => prog::errmsg(&name, &format!("bind queue {}", cfg.queue), e),
        })?;
        {
            let mut p = prog.lock().unwrap_or_else(|e| e.into_inner());
            for &(a, b) in &cfg.owned {
                p.own(a, b)
                    .map_err(|e| prog::errmsg(&name, "fill the owned-address map", e))?;
            }
            for &(a, b) in &cfg.owned6 {
                p.own6(a, b)
                    .map_err(|e| prog::errmsg(&name, "fill the owned IPv6 map", e))?;
            }
            p.set_xsk(cfg.queue, xsk.fd())
                .map_err(|e| prog::errmsg(&name, "fill the XSK map", e))?;
        }
        let mut port = AfXdpPort {
            xsk,
            prog,
            umem,
            cfg,
            ifindex,
            mac,
            mtu,
            zero_copy,
            native,
            out: 0,
            in_tx: 0,
            stats: PortStats::default(),
            extra: AfXdpStats::default(),
            addr: vec![0; BURST],
            lens: vec![0; BURST],
        };
        port.refill();
        Ok(port)
    }

    /// Interface index.
    pub fn ifindex(&self) -> i32 {
        self.ifindex
    }

    /// The interface queue the socket is bound to.
    pub fn queue(&self) -> u32 {
        self.cfg.queue
    }

    /// Whether the socket is bound in zero-copy mode.
    pub fn zero_copy(&self) -> bool {
        self.zero_copy
    }

    /// Whether the program runs in native (driver) XDP mode rather than generic mode.
    pub fn native(&self) -> bool {
        self.native
    }

    /// Chunks on the free stack.
    pub fn free_frames(&self) -> usize {
        self.umem.free.len()
    }

    /// Backend-specific counters (the XDP program's are read from its map now).
    pub fn extra_stats(&self) -> AfXdpStats {
        let mut x = self.extra;
        let (r, p, s) = self.prog.lock().unwrap_or_else(|e| e.into_inner()).counts();
        x.xdp_redirected = r;
        x.xdp_passed = p;
        x.xdp_short = s;
        let k = self.xsk.kernel_stats();
        x.kernel_rx_dropped = k[0];
        x.kernel_rx_ring_full = k[3];
        x.kernel_fill_empty = k[4];
        x
    }

    /// Moves free chunks to the fill ring, keeping `tx_reserve` of them for tx.
    fn refill(&mut self) {
        let reserve = self.cfg.tx_reserve as usize;
        loop {
            let n = self.umem.free.len().saturating_sub(reserve).min(BURST);
            if n == 0 {
                return;
            }
            let from = self.umem.free.len() - n;
            let k = self.xsk.fill(&self.umem.free[from..]);
            // The first k of the tail went to the kernel: drop them from the stack.
            self.umem.free.drain(from..from + k);
            if k < n {
                return;
            }
        }
    }

    /// Makes the kernel send what the tx ring holds: `sendto` while the ring's
    /// need-wakeup flag is set and descriptors are pending (copy mode sends a batch of at
    /// most 32 per call), reclaiming completions in between; bounded per call.
    fn flush_tx(&mut self) {
        for _ in 0..self.cfg.ring / 16 {
            if self.xsk.tx_pending() == 0 || !self.xsk.tx_needs_wakeup() {
                break;
            }
            self.extra.tx_wakeups += 1;
            if self.xsk.kick_tx().is_err() {
                self.extra.tx_errors += 1;
                break;
            }
            self.reclaim();
        }
        self.reclaim();
    }

    /// Drains the completion ring into the free stack.
    fn reclaim(&mut self) {
        while self.in_tx > 0 {
            let n = self.xsk.completions(&mut self.addr);
            for &a in &self.addr[..n] {
                if let Some((c, _)) = self.umem.split(a) {
                    self.umem.free.push(c);
                }
            }
            self.in_tx = self.in_tx.saturating_sub(n);
            if n < BURST {
                return;
            }
        }
    }

    fn frame(&mut self, chunk: u64, off: u32, len: u32) -> SlotFrame {
        self.out += 1;
        SlotFrame {
            slot: self.umem.ptr(chunk),
            idx: (chunk / u64::from(self.umem.chunk())) as u32,
            cap: self.umem.chunk(),
            off,
            len,
            offload: Offload::default(),
        }
    }

    /// The chunk address of `f` if it is a frame of this UMEM.
    fn chunk_of(&self, f: &SlotFrame) -> Option<u64> {
        let c = u64::from(f.idx) * u64::from(self.umem.chunk());
        (f.idx < self.umem.frames()
            && f.cap == self.umem.chunk()
            && std::ptr::eq(f.slot as *const u8, self.umem.ptr(c)))
        .then_some(c)
    }

    fn give_back(&mut self, f: SlotFrame) {
        match self.chunk_of(&f) {
            Some(c) => {
                self.umem.free.push(c);
                self.out -= 1;
            }
            None => self.extra.foreign += 1,
        }
    }
}

/// MAC and MTU through a throw-away datagram socket (any namespace, no privilege).
fn if_facts(name: &str) -> Result<([u8; 6], u16), String> {
    // SAFETY: plain socket(2) call; the result is checked and closed below.
    let s = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if s < 0 {
        return Err(format!(
            "afxdp:{name}: socket: {}",
            std::io::Error::last_os_error()
        ));
    }
    let r = crate::netif::mac_mtu(s, "afxdp", name);
    // SAFETY: `s` is our descriptor, closed once.
    unsafe { libc::close(s) };
    r
}

impl Drop for AfXdpPort {
    fn drop(&mut self) {
        if self.out > 0 {
            // Frames still point into the UMEM: keep it mapped rather than let them dangle.
            self.umem.leak();
        }
    }
}

impl Port for AfXdpPort {
    type Frame = SlotFrame;

    fn rx_burst(&mut self, out: &mut Vec<SlotFrame>, max: usize) -> usize {
        if self.in_tx > 0 {
            // Descriptors left on the tx ring by an earlier burst (the kernel stopped at a
            // full completion ring or its batch limit) go out now.
            self.flush_tx();
        }
        self.refill();
        if self.xsk.fill_needs_wakeup() {
            self.extra.rx_wakeups += 1;
            self.xsk.kick_rx();
        }
        let mut got = 0;
        while got < max {
            let want = (max - got).min(BURST);
            let n = self.xsk.rx(&mut self.addr[..want], &mut self.lens[..want]);
            for i in 0..n {
                let (a, len) = (self.addr[i], self.lens[i]);
                match self.umem.split(a) {
                    Some((c, off)) if desc_fits(off, len, self.umem.chunk()) => {
                        self.stats.rx_frames += 1;
                        self.stats.rx_bytes += u64::from(len);
                        let f = self.frame(c, off, len);
                        out.push(f);
                        got += 1;
                    }
                    Some((c, _)) => {
                        self.extra.rx_invalid += 1;
                        self.stats.dropped += 1;
                        self.umem.free.push(c);
                    }
                    None => {
                        self.extra.rx_invalid += 1;
                        self.stats.dropped += 1;
                    }
                }
            }
            if n < want {
                break;
            }
        }
        got
    }

    fn alloc_tx(&mut self, out: &mut Vec<SlotFrame>, n: usize) -> usize {
        self.reclaim();
        let hr = u32::from(self.cfg.headroom);
        for k in 0..n {
            let Some(c) = self.umem.free.pop() else {
                self.stats.alloc_fail += 1;
                return k;
            };
            let f = self.frame(c, hr, 0);
            out.push(f);
        }
        n
    }

    fn tx_burst(&mut self, frames: &mut Vec<SlotFrame>) -> usize {
        self.reclaim();
        let max_len = usize::from(self.mtu) + 18;
        let mut sent = 0;
        while !frames.is_empty() {
            // Frames the kernel would refuse (too long) or cannot see (not ours) are dropped
            // here: a refused descriptor would never come back through the completion ring.
            let mut i = 0;
            while i < frames.len() && i < BURST {
                let ok = frames[i].len() <= max_len
                    && frames[i].len() > 0
                    && self.chunk_of(&frames[i]).is_some();
                if ok {
                    let f = &frames[i];
                    self.addr[i] =
                        u64::from(f.idx) * u64::from(self.umem.chunk()) + u64::from(f.off);
                    self.lens[i] = f.len;
                    i += 1;
                } else {
                    let f = frames.remove(i);
                    self.extra.tx_refused += 1;
                    self.stats.dropped += 1;
                    self.give_back(f);
                }
            }
            if i == 0 {
                break;
            }
            let k = self.xsk.tx(&self.addr[..i], &self.lens[..i]);
            for f in frames.drain(..k) {
                self.stats.tx_frames += 1;
                self.stats.tx_bytes += f.len() as u64;
                self.out -= 1;
                self.in_tx += 1;
            }
            sent += k;
            self.flush_tx();
            if k < i {
                self.stats.tx_full += frames.len() as u64;
                break;
            }
        }
        sent
    }

    fn release(&mut self, frame: SlotFrame) {
        self.give_back(frame);
    }

    fn caps(&self) -> PortCaps {
        PortCaps {
            mac: self.mac,
            mtu: self.mtu,
            max_frame: (self.umem.chunk() - u32::from(self.cfg.headroom))
                .min(u32::from(self.mtu) + 18) as u16,
            headroom: self.cfg.headroom,
            offloads: Default::default(),
        }
    }

    fn stats(&self) -> PortStats {
        self.stats
    }
}

/// Whether a received descriptor (`len` bytes at offset `off` of its chunk) is a frame:
/// not empty, and inside the chunk — in 64 bits, so that a length near 2^32 from the
/// kernel cannot wrap past the check.
fn desc_fits(off: u32, len: u32, chunk: u32) -> bool {
    len > 0 && u64::from(off) + u64::from(len) <= u64::from(chunk)
}

#[cfg(test)]
mod tests;
