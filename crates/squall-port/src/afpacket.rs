//! AF_PACKET port: a raw packet socket bound to one Linux interface, as a [`Port`].
//!
//! Tx frames live in one preallocated pool (`frames x frame_size` bytes, allocated once at
//! open) and `tx_burst` sends them with one `sendmmsg` (one kernel copy, no allocation per
//! packet). Rx has three variants ([`AfPacketConfig::rx`], [`RxMode`]):
//! - **frames** (default): a TPACKET_V2 rx ring of fixed 2 KiB slots mmap'ed from the
//!   kernel: the kernel copies each frame into the next free slot and flags it ready, a
//!   received frame points into its slot (no system call, no second copy) and its slot
//!   goes back to the kernel (`TP_STATUS_KERNEL`) when the frame is released. A frame is
//!   visible as soon as it is written: no added latency.
//! - **copy**: `rx_burst` receives with one `recvmmsg` straight into free pool slots (one
//!   kernel copy, one system call per burst, the socket queue's work per frame);
//! - **blocks**: a TPACKET_V3 rx ring, as sketched in `DESIGN.md`: a received frame points
//!   into its ring block; a block goes back to the kernel once it has been walked and
//!   every frame of it released. The kernel hands over a block when it is full or after
//!   the retire timeout (1 ms), so at low packet rates it adds up to 1 ms of latency.
//!
//! Tx from a ring-backed port still uses the pool and `sendmmsg` (no tx ring); an rx frame
//! can be sent back as is (its bytes are read from the ring).
//!
//! The socket is non-blocking, bound to the interface with `ETH_P_ALL`, ignores our own
//! outgoing frames (`PACKET_IGNORE_OUTGOING` where the kernel has it, and a
//! `PACKET_OUTGOING` check on every frame), bypasses the qdisc (`PACKET_QDISC_BYPASS`)
//! when available and can put the interface in promiscuous mode (membership, undone when
//! the socket closes). No checksum offload is offered: the stack fills checksums itself,
//! and the lab turns veth offloads off so that received frames carry full checksums.
//!
//! **TCP super-frames** ([`AfPacketConfig::gso`], on by default): frames are sent on a
//! second, transmit-only socket with `PACKET_VNET_HDR` (through the qdisc: the direct
//! transmit drops frames it would have to segment), each behind a `virtio_net_hdr`; a
//! frame flagged `TX_TCP_SEG` goes out as one GSO frame the kernel cuts into segments
//! ([`Port::tso_max`], [`Port::alloc_tso`]: 32 slots of 64 KiB).

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::frame::{FrameBuf, Offload, OffloadFlags, SlotFrame};
use crate::port::{Port, PortCaps, PortStats};

/// Tag of a frame index that designates an rx ring frame (the low bits are its block).
const RING_TAG: u32 = 1 << 31;
/// `PACKET_VERSION` value of TPACKET_V3.
const TPACKET_V3: libc::c_int = 2;
/// Block status bits (linux/if_packet.h).
const TP_STATUS_KERNEL: u32 = 0;
const TP_STATUS_USER: u32 = 1;
/// Our mark of a TPACKET_V2 slot handed to the user (no kernel status bit of an rx slot;
/// the kernel only asks whether a slot is KERNEL).
const TP_STATUS_HELD: u32 = 1 << 31;
const TP_STATUS_COPY: u32 = 1 << 1;
/// The frame's transport checksum is not filled in yet (`CHECKSUM_PARTIAL`: a local
/// sender left it to an offload; the field holds the pseudo-header sum).
const TP_STATUS_CSUMNOTREADY: u32 = 1 << 3;
/// The kernel (or the device before it) verified the transport checksum.
const TP_STATUS_CSUM_VALID: u32 = 1 << 7;
/// The frame came with an 802.1Q tag, which the kernel took out of its bytes and gives in
/// the header's `tp_vlan_tci` (and `tp_vlan_tpid` when `TP_STATUS_VLAN_TPID_VALID`).
const TP_STATUS_VLAN_VALID: u32 = 1 << 4;
const TP_STATUS_VLAN_TPID_VALID: u32 = 1 << 6;

/// `struct tpacket_req3`.
#[repr(C)]
struct TpacketReq3 {
    block_size: u32,
    block_nr: u32,
    frame_size: u32,
    frame_nr: u32,
    retire_blk_tov: u32,
    sizeof_priv: u32,
    feature_req_word: u32,
}

/// The mmap'ed TPACKET_V3 rx ring and the walk state.
struct RxRing {
    map: *mut u8,
    size: usize,
    block_size: usize,
    blocks: usize,
    /// Block being walked.
    cur: usize,
    /// Whether `cur` has been taken from the kernel (its status said USER).
    open: bool,
    pkts_left: u32,
    next_off: usize,
    /// Frames of each block held by the user.
    held: Vec<u32>,
    /// Blocks fully walked, waiting for their frames to come back.
    walked: Vec<bool>,
}

impl RxRing {
    fn block(&self, b: usize) -> *mut u8 {
        // SAFETY: b < blocks, so the block lies inside the mapping.
        unsafe { self.map.add(b * self.block_size) }
    }
    /// `tpacket_block_desc.hdr.bh1.block_status`, read with acquire ordering.
    fn status(&self, b: usize) -> u32 {
        // SAFETY: offset 8 of a block descriptor is the aligned u32 block_status, shared
        // with the kernel: accessed atomically.
        unsafe {
            (*(self.block(b).add(8) as *const std::sync::atomic::AtomicU32))
                .load(std::sync::atomic::Ordering::Acquire)
        }
    }
    fn u32_at(&self, b: usize, off: usize) -> u32 {
        // SAFETY: callers pass offsets inside block `b` (kernel-written headers, checked
        // against the block size); read unaligned-safe.
        unsafe { std::ptr::read_unaligned(self.block(b).add(off) as *const u32) }
    }
    /// Gives block `b` back to the kernel if it was walked and none of its frames is held.
    fn maybe_return(&mut self, b: usize) {
        if self.walked[b] && self.held[b] == 0 {
            self.walked[b] = false;
            // SAFETY: as in `status`; the release store publishes our reads as done.
            unsafe {
                (*(self.block(b).add(8) as *const std::sync::atomic::AtomicU32))
                    .store(TP_STATUS_KERNEL, std::sync::atomic::Ordering::Release)
            }
        }
    }
}

/// Tag of a frame index that designates a TPACKET_V2 ring frame (the low bits: its slot).
const FRING_TAG: u32 = 1 << 29;
/// `PACKET_VERSION` value of TPACKET_V2.
const TPACKET_V2: libc::c_int = 1;
/// Smallest TPACKET_V2 ring slot: a `tpacket2_hdr`, the `sockaddr_ll`, a 1,518-byte
/// frame (slots grow to the next power of two for larger MTUs).
const FRING_SLOT: u32 = 2048;
/// Bytes the kernel puts before the frame in a V2 slot (header, address, alignment).
const FRING_HEAD: u32 = 96;
/// Offsets in a slot (linux/if_packet.h): `tpacket2_hdr` (status, len, snaplen, mac,
/// net, ...) then, at `TPACKET_ALIGN(sizeof(tpacket2_hdr))` = 32, the `sockaddr_ll`
/// whose `sll_pkttype` is at 10.
const V2_LEN: usize = 4;
const V2_SNAPLEN: usize = 8;
const V2_MAC: usize = 12;
/// `tp_vlan_tci` (low 16 bits) and `tp_vlan_tpid` (high 16 bits).
const V2_VLAN: usize = 24;
/// Bytes of `tpacket2_hdr` (aligned): a tag put back must not reach into them.
const V2_HDR: usize = 32;
const V2_PKTTYPE: usize = 32 + 10;
/// In a TPACKET_V3 frame header: `tp_vlan_tci` (u32), `tp_vlan_tpid` (u16), and the
/// header's aligned size.
const V3_VLAN_TCI: usize = 32;
const V3_VLAN_TPID: usize = 36;
const V3_HDR: usize = 48;
/// A V3 block's descriptor (`tpacket_block_desc`: version, offset_to_priv and the
/// `tpacket_hdr_v1` holding the block's status): no frame header may start inside it.
const V3_BLOCK_DESC: usize = 48;
/// `sockaddr_ll` after a V3 frame header: the frame's data starts past both.
const SOCKADDR_LL: usize = 20;

/// `struct tpacket_req` (TPACKET_V2 rings).
#[repr(C)]
struct TpacketReq {
    block_size: u32,
    block_nr: u32,
    frame_size: u32,
    frame_nr: u32,
}

/// The mmap'ed TPACKET_V2 rx ring: fixed slots the kernel fills in order, each handed
/// over on its own (`TP_STATUS_USER`) and given back on its own (`TP_STATUS_KERNEL`), so
/// a frame is visible as soon as the kernel has written it (no block timeout).
struct FrameRing {
    map: *mut u8,
    size: usize,
    /// Bytes per slot (a power of two).
    slot_size: usize,
    slots: usize,
    /// Next slot to read.
    cur: usize,
}

impl FrameRing {
    fn slot(&self, i: usize) -> *mut u8 {
        // SAFETY: i < slots, so the slot lies inside the mapping.
        unsafe { self.map.add(i * self.slot_size) }
    }
    /// The slot's `tp_status` (shared with the kernel: atomic, acquire).
    fn status(&self, i: usize) -> &std::sync::atomic::AtomicU32 {
        // SAFETY: offset 0 of a slot is its aligned u32 tp_status, written by the kernel
        // and by us only through atomics.
        unsafe { &*(self.slot(i) as *const std::sync::atomic::AtomicU32) }
    }
    fn u32_at(&self, i: usize, off: usize) -> u32 {
        // SAFETY: callers pass header offsets (< 64) inside slot `i`.
        unsafe { std::ptr::read_unaligned(self.slot(i).add(off) as *const u32) }
    }
    /// Gives slot `i` back to the kernel (the release store publishes our reads as done).
    fn give(&self, i: usize) {
        self.status(i)
            .store(TP_STATUS_KERNEL, std::sync::atomic::Ordering::Release);
    }
}

/// Largest frame slot of the pool (a 64 KiB MTU fits).
const MAX_FRAME_SIZE: u32 = 1 << 17;

/// Largest burst handled by one system call.
const MAX_BURST: usize = 64;
/// `PACKET_IGNORE_OUTGOING` (Linux 4.20); not in every libc version.
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
/// `PACKET_VNET_HDR`: every frame sent on the socket starts with a `virtio_net_hdr`.
const PACKET_VNET_HDR: libc::c_int = 15;
/// Bytes of a `struct virtio_net_hdr` (flags, gso_type, hdr_len, gso_size, csum_start,
/// csum_offset; little-endian, as AF_PACKET reads it on this host).
const VNET_HDR_LEN: usize = 10;
/// Tag of a frame index that designates a TCP super-frame slot (the low bits: its index).
const BIG_TAG: u32 = 1 << 30;
/// Super-frame slots of a port with GSO, and their size (headroom included).
const BIG_FRAMES: u32 = 32;
const BIG_SIZE: u32 = 65_536 + 512;
/// Largest super-frame (Ethernet header included): its IP total length must fit 16 bits.
const TSO_MAX: usize = 65_535;

/// Settings of an [`AfPacketPort`].
#[derive(Clone, Debug)]
pub struct AfPacketConfig {
    /// Interface name (e.g. `sq-cli0`).
    pub ifname: String,
    /// Frames in the pool (rx and tx share it).
    pub frames: u32,
    /// Bytes per frame slot (headroom included). An interface whose MTU does not fit
    /// (jumbo frames) gets larger slots at open: the next power of two that holds its
    /// frames, `frames` reduced to keep the pool's size in bytes (at least 512).
    pub frame_size: u32,
    /// Headroom of every frame.
    pub headroom: u16,
    /// Put the interface in promiscuous mode while the port is open.
    pub promisc: bool,
    /// Socket buffer sizes asked for (bytes, both directions).
    pub sockbuf: u32,
    /// How frames are received ([`RxMode`]).
    pub rx: RxMode,
    /// Slots of the TPACKET_V2 ring ([`RxMode::Frames`]; 2 KiB each for MTUs up to
    /// 1,934 bytes, the next power of two above; rounded up to whole 64 KiB blocks).
    pub ring_slots: u32,
    /// Block ring geometry ([`RxMode::Blocks`]): blocks of `ring_block_size` bytes (a
    /// power of two, >= 64 KiB).
    pub ring_blocks: u32,
    pub ring_block_size: u32,
    /// Share the interface's receive traffic with other workers' sockets: frames go to the
    /// socket of the worker owning their flow ([`crate::fanout`]).
    pub fanout: Option<crate::fanout::Fanout>,
    /// Take TCP super-frames (up to 64 KiB, [`Port::tso_max`]) and let the kernel cut
    /// them into segments (its GSO, through a transmit-only socket with
    /// `PACKET_VNET_HDR`). A kernel peer on a veth then takes a flow's segments in one
    /// pass of its receive path instead of one pass (and one wake-up) per frame.
    pub gso: bool,
    /// Receive super-frames whole: frames of up to 64 KiB, as the kernel hands them over
    /// when the sender's TSO/GSO crosses a veth whole or GRO merges on the interface
    /// (the TCP host takes such a segment as it is). The frame ring's slots then hold
    /// 64 KiB (128 KiB each, 512 of them: 64 MiB); the block ring holds them as they
    /// are; `recvmmsg` cannot (refused). Off: frames longer than the MTU are counted as
    /// truncated and dropped.
    pub rx_superframes: bool,
}

impl AfPacketConfig {
    /// Defaults for interface `ifname`: 8192 frames of 2048 bytes, headroom 128.
    pub fn new(ifname: &str) -> Self {
        AfPacketConfig {
            ifname: ifname.to_string(),
            frames: 8192,
            frame_size: 2048,
            headroom: 128,
            promisc: false,
            sockbuf: 4 << 20,
            rx: RxMode::Frames,
            ring_slots: 4096,
            ring_blocks: 64,
            ring_block_size: 1 << 18,
            fanout: None,
            gso: true,
            rx_superframes: false,
        }
    }
}

/// How an [`AfPacketPort`] receives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RxMode {
    /// `recvmmsg` into free pool slots (one copy by the kernel into our buffers, one
    /// system call per burst).
    Copy,
    /// A TPACKET_V2 ring of fixed 2 KiB slots (the default): the kernel writes each frame
    /// into the next slot and flags it ready; no system call, a frame is read in place
    /// and is visible at once.
    Frames,
    /// A TPACKET_V3 ring of blocks: a block is handed over when full or after the 1 ms
    /// retire timeout (up to 1 ms of latency at low packet rates).
    Blocks,
}

/// A frame of an [`AfPacketPort`]: a slot of the port's pool (or of its rx ring).
pub type AfFrame = SlotFrame;

/// Extra counters of an AF_PACKET port.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AfPacketStats {
    /// Our own outgoing frames seen on rx and skipped.
    pub rx_outgoing: u64,
    /// Received frames larger than a slot (truncated; dropped).
    pub rx_truncated: u64,
    /// Frames the kernel refused to send (too large, bad); dropped.
    pub tx_refused: u64,
    /// Frames handed back that do not belong to this port (ignored).
    pub foreign: u64,
    /// Received frames whose 802.1Q tag (taken out by the kernel) could not be put back:
    /// no room before the frame (a headroom under 4 bytes) or a runt; dropped.
    pub rx_vlan_no_room: u64,
}

/// A raw AF_PACKET socket bound to one interface (see the module comment).
pub struct AfPacketPort {
    fd: OwnedFd,
    ifindex: i32,
    mac: [u8; 6],
    mtu: u16,
    cfg: AfPacketConfig,
    pool: Vec<u8>,
    free: Vec<u32>,
    /// Frames handed out and not returned yet.
    out: usize,
    stats: PortStats,
    extra: AfPacketStats,
    msgs: Vec<libc::mmsghdr>,
    iovs: Vec<libc::iovec>,
    addrs: Vec<libc::sockaddr_ll>,
    /// Per message of the copy receive path: room for its `PACKET_AUXDATA` control
    /// message (the VLAN tag the kernel took out of the frame).
    ctrls: Vec<[u64; 8]>,
    idx: Vec<u32>,
    ring: Option<RxRing>,
    fring: Option<FrameRing>,
    /// GSO ([`AfPacketConfig::gso`]): the transmit-only `PACKET_VNET_HDR` socket every
    /// frame is sent on, the super-frame slots, and per message its virtio header and
    /// the two-part iovec (header, frame).
    gso: Option<Gso>,
}

struct Gso {
    fd: OwnedFd,
    big: Vec<u8>,
    free: Vec<u32>,
    hdrs: Vec<[u8; VNET_HDR_LEN]>,
    iovs: Vec<[libc::iovec; 2]>,
}

/// The transmit-only socket of GSO: `PACKET_VNET_HDR`, bound to the interface with
/// protocol 0 (it receives nothing). None where the kernel refuses any of it (GSO is
/// then off).
fn gso_socket(ifindex: i32, sockbuf: u32) -> Option<OwnedFd> {
    // SAFETY: plain socket creation; the fd is owned at once.
    let raw = unsafe {
        libc::socket(
            libc::AF_PACKET,
            libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    };
    if raw < 0 {
        return None;
    }
    // SAFETY: `raw` is a new descriptor nobody else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let s = fd.as_raw_fd();
    let one: libc::c_int = 1;
    if !setopt(s, libc::SOL_PACKET, PACKET_VNET_HDR, &one) {
        return None;
    }
    // Not past the qdisc: the kernel's direct transmit drops a frame it had to segment
    // (`__dev_direct_xmit`), while `dev_queue_xmit` cuts it and sends the segments in one
    // go (a veth's noqueue qdisc adds no queueing).
    let buf = sockbuf as libc::c_int;
    let _ = setopt(s, libc::SOL_SOCKET, libc::SO_SNDBUF, &buf);
    // SAFETY: sockaddr_ll is plain old data (all-zero is valid).
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_ifindex = ifindex;
    // SAFETY: `sll` is a valid sockaddr_ll of the size given.
    let r = unsafe {
        libc::bind(
            s,
            &sll as *const libc::sockaddr_ll as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    (r == 0).then_some(fd)
}

/// The `virtio_net_hdr` of a frame: zero (nothing to do) unless it asks for TCP
/// segmentation, then GSO TCPv4/TCPv6 in `tso_mss`-byte segments with the TCP checksum
/// to complete from `csum_start` (the field holds the pseudo-header sum).
fn vnet_hdr(f: &AfFrame) -> [u8; VNET_HDR_LEN] {
    let o = f.offload;
    if !o.flags.contains(OffloadFlags::TX_TCP_SEG) || o.tso_mss == 0 {
        return [0; VNET_HDR_LEN];
    }
    let d = f.data();
    let (l2, l3) = (usize::from(o.l2_len), usize::from(o.l3_len));
    let l4 = d.get(l2 + l3 + 12).map_or(20, |b| usize::from(b >> 4) * 4);
    let v6 = d.get(l2.wrapping_sub(2)..l2) == Some(&[0x86, 0xdd][..]);
    let mut h = [0u8; VNET_HDR_LEN];
    h[0] = 1; // VIRTIO_NET_HDR_F_NEEDS_CSUM
    h[1] = if v6 { 4 } else { 1 }; // VIRTIO_NET_HDR_GSO_TCPV6 / _TCPV4
    h[2..4].copy_from_slice(&((l2 + l3 + l4) as u16).to_le_bytes());
    h[4..6].copy_from_slice(&o.tso_mss.to_le_bytes());
    h[6..8].copy_from_slice(&((l2 + l3) as u16).to_le_bytes());
    h[8..10].copy_from_slice(&16u16.to_le_bytes());
    h
}

// SAFETY: the raw pointers in `msgs`/`iovs` (and GSO's `iovs`) only ever point into this
// port's own `pool`, super-frame slots, virtio headers, `iovs` and `addrs`, and are
// rewritten before each system call; moving the port to another thread moves its owner
// with it.
unsafe impl Send for AfPacketPort {}

fn os_err(what: &str, ifname: &str) -> String {
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => format!(
            "afpacket:{ifname}: {what}: permission denied (AF_PACKET needs root or CAP_NET_RAW)"
        ),
        _ => format!("afpacket:{ifname}: {what}: {e}"),
    }
}

pub(crate) fn setopt<T>(fd: i32, level: i32, name: i32, v: &T) -> bool {
    // SAFETY: `v` points to a live value of the size passed.
    unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            v as *const T as *const libc::c_void,
            std::mem::size_of::<T>() as libc::socklen_t,
        ) == 0
    }
}

impl AfPacketPort {
    /// Opens a port on `cfg.ifname`. Errors are readable messages (no such interface,
    /// not permitted, ...).
    pub fn open(mut cfg: AfPacketConfig) -> Result<Self, String> {
        let name = cfg.ifname.clone();
        if cfg.frames == 0
            || cfg.frame_size < 256
            || cfg.frame_size > MAX_FRAME_SIZE
            || u32::from(cfg.headroom) >= cfg.frame_size / 2
        {
            return Err(format!("afpacket:{name}: bad pool geometry"));
        }
        if cfg.rx_superframes && cfg.rx == RxMode::Copy {
            return Err(format!(
                "afpacket:{name}: superframes needs a ring receive path (the default frame \
                 ring, or `ring`), not `recvmmsg`"
            ));
        }
        let cname = CString::new(name.clone()).map_err(|_| format!("afpacket:{name}: bad name"))?;
        // SAFETY: `cname` is a valid NUL-terminated string.
        let ifindex = unsafe { libc::if_nametoindex(cname.as_ptr()) } as i32;
        if ifindex == 0 {
            return Err(crate::netif::no_such_interface("afpacket", &name));
        }
        let proto = (libc::ETH_P_ALL as u16).to_be();
        // SAFETY: plain socket(2) call; the result is checked.
        let raw = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                i32::from(proto),
            )
        };
        if raw < 0 {
            return Err(os_err("socket", &name));
        }
        // SAFETY: `raw` is a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let s = fd.as_raw_fd();
        // Best effort: not every kernel has these.
        let one: libc::c_int = 1;
        let _ = setopt(s, libc::SOL_PACKET, PACKET_IGNORE_OUTGOING, &one);
        let _ = setopt(s, libc::SOL_PACKET, libc::PACKET_QDISC_BYPASS, &one);
        // The copy receive path learns a frame's VLAN tag (which the kernel takes out of
        // its bytes) from this control message; the rings carry it in their headers.
        if cfg.rx == RxMode::Copy {
            let _ = setopt(s, libc::SOL_PACKET, libc::PACKET_AUXDATA, &one);
        }
        let buf = cfg.sockbuf as libc::c_int;
        let _ = setopt(s, libc::SOL_SOCKET, libc::SO_RCVBUF, &buf);
        let _ = setopt(s, libc::SOL_SOCKET, libc::SO_SNDBUF, &buf);
        // SAFETY: sockaddr_ll is plain old data; all-zero is valid.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = proto;
        sll.sll_ifindex = ifindex;
        // SAFETY: `sll` is a valid sockaddr_ll of the size passed.
        let r = unsafe {
            libc::bind(
                s,
                &sll as *const libc::sockaddr_ll as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if r != 0 {
            return Err(os_err("bind", &name));
        }
        let (mac, mtu) = crate::netif::mac_mtu(s, "afpacket", &name)?;
        let need = u32::from(mtu) + 18 + u32::from(cfg.headroom);
        if need > cfg.frame_size && need <= MAX_FRAME_SIZE {
            // A jumbo MTU: the pool's frames grow to fit it (the next power of two), the
            // pool keeps its size in bytes (fewer frames, at least 512).
            let size = need.next_power_of_two().min(MAX_FRAME_SIZE);
            let bytes = u64::from(cfg.frames) * u64::from(cfg.frame_size);
            cfg.frames = ((bytes / u64::from(size)) as u32).max(512);
            cfg.frame_size = size;
        }
        if need > cfg.frame_size {
            return Err(format!(
                "afpacket:{name}: MTU {mtu} does not fit frames of {} bytes",
                cfg.frame_size
            ));
        }
        if cfg.promisc {
            // SAFETY: packet_mreq is plain old data; all-zero is valid.
            let mut mr: libc::packet_mreq = unsafe { std::mem::zeroed() };
            mr.mr_ifindex = ifindex;
            mr.mr_type = libc::PACKET_MR_PROMISC as u16;
            if !setopt(s, libc::SOL_PACKET, libc::PACKET_ADD_MEMBERSHIP, &mr) {
                return Err(os_err("PACKET_ADD_MEMBERSHIP(promisc)", &name));
            }
        }
        let ring = if cfg.rx == RxMode::Blocks {
            Some(setup_ring(s, &cfg)?)
        } else {
            None
        };
        let fring = if cfg.rx == RxMode::Frames {
            Some(setup_frame_ring(s, &cfg, mtu)?)
        } else {
            None
        };
        let mut cfg = cfg;
        if let Some(f) = cfg.fanout.as_mut() {
            let g = crate::fanout::join(s, f).map_err(|e| format!("afpacket:{name}: {e}"))?;
            f.group = Some(g);
        }
        let n = cfg.frames as usize;
        let gso = if cfg.gso {
            gso_socket(ifindex, cfg.sockbuf).map(|fd| Gso {
                fd,
                big: vec![0u8; (BIG_FRAMES * BIG_SIZE) as usize],
                free: (0..BIG_FRAMES).rev().collect(),
                hdrs: vec![[0; VNET_HDR_LEN]; MAX_BURST],
                // SAFETY: iovec is plain old data (all-zero is valid).
                iovs: vec![unsafe { std::mem::zeroed() }; MAX_BURST],
            })
        } else {
            None
        };
        // SAFETY (zeroed): mmsghdr, iovec and sockaddr_ll are plain old data.
        let port = AfPacketPort {
            fd,
            ifindex,
            mac,
            mtu,
            pool: vec![0u8; n * cfg.frame_size as usize],
            free: (0..cfg.frames).rev().collect(),
            out: 0,
            stats: PortStats::default(),
            extra: AfPacketStats::default(),
            msgs: vec![unsafe { std::mem::zeroed() }; MAX_BURST],
            iovs: vec![unsafe { std::mem::zeroed() }; MAX_BURST],
            addrs: vec![unsafe { std::mem::zeroed() }; MAX_BURST],
            ctrls: vec![[0; 8]; MAX_BURST],
            idx: Vec::with_capacity(MAX_BURST),
            ring,
            fring,
            gso,
            cfg,
        };
        Ok(port)
    }

    /// Interface index.
    pub fn ifindex(&self) -> i32 {
        self.ifindex
    }

    /// The fanout group this socket joined, with the id it has (the kernel's pick for a
    /// new group: the next members join that id).
    pub fn fanout(&self) -> Option<crate::fanout::Fanout> {
        self.cfg.fanout
    }

    /// Backend-specific counters.
    pub fn extra_stats(&self) -> AfPacketStats {
        self.extra
    }

    /// Frames free in the pool.
    pub fn free_frames(&self) -> usize {
        self.free.len()
    }

    fn frame(&mut self, idx: u32, len: u32) -> AfFrame {
        let fs = self.cfg.frame_size as usize;
        self.out += 1;
        AfFrame {
            // SAFETY: idx < frames, so the slot lies inside `pool`.
            slot: unsafe { self.pool.as_mut_ptr().add(idx as usize * fs) },
            idx,
            cap: self.cfg.frame_size,
            off: u32::from(self.cfg.headroom),
            len,
            offload: Offload::default(),
        }
    }

    /// Whether rx goes through a mapped ring (TPACKET_V2 or V3).
    pub fn has_rx_ring(&self) -> bool {
        self.ring.is_some() || self.fring.is_some()
    }

    /// How this port receives.
    pub fn rx_mode(&self) -> RxMode {
        self.cfg.rx
    }

    /// Whether `f` is a frame of this port's pool.
    fn owns(&self, f: &AfFrame) -> bool {
        if f.idx & RING_TAG != 0 {
            let b = (f.idx & !RING_TAG) as usize;
            return self.ring.as_ref().is_some_and(|r| {
                let start = r.map as usize + b * r.block_size;
                let p = f.slot as usize;
                b < r.blocks && p >= start && p + f.cap as usize <= start + r.block_size
            });
        }
        if f.idx & FRING_TAG != 0 {
            let i = (f.idx & !FRING_TAG) as usize;
            return self.fring.as_ref().is_some_and(|r| {
                let start = r.map as usize + i * r.slot_size + V2_HDR;
                i < r.slots && f.slot as usize == start && f.cap as usize <= r.slot_size - V2_HDR
            });
        }
        if f.idx & BIG_TAG != 0 {
            let i = f.idx & !BIG_TAG;
            return self.gso.as_ref().is_some_and(|g| {
                i < BIG_FRAMES
                    && f.cap == BIG_SIZE
                    && std::ptr::eq(
                        f.slot as *const u8,
                        g.big.as_ptr().wrapping_add((i * BIG_SIZE) as usize),
                    )
            });
        }
        let fs = self.cfg.frame_size as usize;
        f.idx < self.cfg.frames
            && f.cap == self.cfg.frame_size
            && std::ptr::eq(
                f.slot as *const u8,
                self.pool.as_ptr().wrapping_add(f.idx as usize * fs),
            )
    }

    fn give_back(&mut self, f: AfFrame) {
        if !self.owns(&f) {
            self.extra.foreign += 1;
            return;
        }
        self.out -= 1;
        if f.idx & RING_TAG != 0 {
            let b = (f.idx & !RING_TAG) as usize;
            if let Some(r) = self.ring.as_mut() {
                r.held[b] = r.held[b].saturating_sub(1);
                r.maybe_return(b);
            }
        } else if f.idx & FRING_TAG != 0 {
            if let Some(r) = self.fring.as_ref() {
                r.give((f.idx & !FRING_TAG) as usize);
            }
        } else if f.idx & BIG_TAG != 0 {
            if let Some(g) = self.gso.as_mut() {
                g.free.push(f.idx & !BIG_TAG);
            }
        } else {
            self.free.push(f.idx);
        }
    }
}

impl AfPacketPort {
    /// Walks the rx ring: hands out up to `max` frames pointing into their blocks.
    fn rx_ring_burst(&mut self, out: &mut Vec<AfFrame>, max: usize) -> usize {
        let Some(mut r) = self.ring.take() else {
            return 0;
        };
        let mut got = 0;
        while got < max {
            let b = r.cur;
            if !r.open {
                // A walked block still holds frames the user has not released: its status
                // still says USER, but it was handed out already.
                if r.walked[b] || r.status(b) & TP_STATUS_USER == 0 {
                    break;
                }
                r.open = true;
                r.pkts_left = r.u32_at(b, 12);
                r.next_off = r.u32_at(b, 16) as usize;
            }
            if r.pkts_left == 0 || r.next_off + 60 > r.block_size {
                // Block walked: it returns to the kernel when its frames are released.
                r.walked[b] = true;
                r.open = false;
                r.maybe_return(b);
                r.cur = (b + 1) % r.blocks;
                continue;
            }
            let h = r.next_off;
            let next = r.u32_at(b, h) as usize;
            let snap = r.u32_at(b, h + 12) as usize;
            let wire = r.u32_at(b, h + 16) as usize;
            let st = r.u32_at(b, h + 20);
            let mac = (r.u32_at(b, h + 24) & 0xffff) as usize;
            // SAFETY: h + 58 < h + 60 <= block_size (checked above).
            let pkttype = unsafe { *r.block(b).add(h + 58) };
            r.pkts_left -= 1;
            r.next_off = if next == 0 { r.block_size } else { h + next };
            // The kernel's layout, else dropped: the header past the block's descriptor,
            // the data past the header and its address (a frame's headroom never reaches
            // the block's status), the data inside the block.
            if h < V3_BLOCK_DESC || mac < V3_HDR + SOCKADDR_LL || h + mac + snap > r.block_size {
                self.stats.dropped += 1;
                continue;
            }
            if !self.rx_check(pkttype, snap, snap < wire || st & TP_STATUS_COPY != 0) {
                continue;
            }
            // SAFETY: h < block_size: inside block b of the mapping.
            let slot = unsafe { r.block(b).add(h) };
            let (mut mac, mut snap) = (mac, snap);
            if st & TP_STATUS_VLAN_VALID != 0 {
                let tci = r.u32_at(b, h + V3_VLAN_TCI) as u16;
                let tpid = (st & TP_STATUS_VLAN_TPID_VALID != 0)
                    .then(|| r.u32_at(b, h + V3_VLAN_TPID) as u16);
                // SAFETY: `mac + snap` bytes from `slot` lie inside the block (checked).
                match unsafe { self.retag(slot, mac, snap, V3_HDR, tpid, tci) } {
                    Some(m) => (mac, snap) = m,
                    None => continue,
                }
            }
            r.held[b] += 1;
            self.out += 1;
            out.push(ring_frame(slot, RING_TAG | b as u32, mac, snap, st));
            got += 1;
        }
        self.ring = Some(r);
        got
    }
}

impl AfPacketPort {
    /// Reads the TPACKET_V2 ring: hands out up to `max` frames pointing into their slots.
    fn rx_frames_burst(&mut self, out: &mut Vec<AfFrame>, max: usize) -> usize {
        let Some(mut r) = self.fring.take() else {
            return 0;
        };
        let mut got = 0;
        while got < max {
            let i = r.cur;
            let st = r.status(i).load(std::sync::atomic::Ordering::Acquire);
            if st & TP_STATUS_USER == 0 {
                break;
            }
            r.cur = if i + 1 == r.slots { 0 } else { i + 1 };
            let wire = r.u32_at(i, V2_LEN) as usize;
            let snap = r.u32_at(i, V2_SNAPLEN) as usize;
            let mac = (r.u32_at(i, V2_MAC) & 0xffff) as usize;
            // SAFETY: V2_PKTTYPE < 64 < slot_size: inside slot i.
            let pkttype = unsafe { *r.slot(i).add(V2_PKTTYPE) };
            if mac < V2_PKTTYPE + 1 || mac + snap > r.slot_size {
                self.stats.dropped += 1;
                r.give(i);
                continue;
            }
            if !self.rx_check(pkttype, snap, snap < wire || st & TP_STATUS_COPY != 0) {
                r.give(i);
                continue;
            }
            let (mut mac, mut snap) = (mac, snap);
            if st & TP_STATUS_VLAN_VALID != 0 {
                let v = r.u32_at(i, V2_VLAN);
                let tpid = (st & TP_STATUS_VLAN_TPID_VALID != 0).then_some((v >> 16) as u16);
                // SAFETY: `mac + snap` bytes from the slot lie inside it (checked).
                match unsafe { self.retag(r.slot(i), mac, snap, V2_HDR, tpid, v as u16) } {
                    Some(m) => (mac, snap) = m,
                    None => {
                        r.give(i);
                        continue;
                    }
                }
            }
            // Held by the user from here on: a status the kernel reads as busy (not
            // KERNEL) and this loop as not ready (not USER), so a held slot the ring wraps
            // around to is not handed out twice; `give` makes it KERNEL again.
            r.status(i)
                .store(TP_STATUS_HELD, std::sync::atomic::Ordering::Relaxed);
            self.out += 1;
            // The frame starts past the slot's `tpacket2_hdr` (mac > V2_PKTTYPE > V2_HDR as
            // checked, and a tag put back stops at V2_HDR): its headroom never reaches
            // `tp_status`, the word that says who owns the slot.
            // SAFETY: V2_HDR <= mac <= slot_size: inside slot i.
            let start = unsafe { r.slot(i).add(V2_HDR) };
            out.push(ring_frame(
                start,
                FRING_TAG | i as u32,
                mac - V2_HDR,
                snap,
                st,
            ));
            got += 1;
        }
        self.fring = Some(r);
        got
    }

    /// Puts back the tag (`tpid` if the kernel gave one, `tci`) the kernel took out of a
    /// received frame of `len` bytes at `start` in `buf`, counted by `rx_check` (see
    /// [`vlan_put_back`]; a priority tag, VID 0, is left out as the kernel left it): the
    /// frame's new start and length, or `None` when it has to be dropped (counted as
    /// dropped instead of received).
    ///
    /// # Safety
    /// As [`vlan_put_back`].
    unsafe fn retag(
        &mut self,
        buf: *mut u8,
        start: usize,
        len: usize,
        floor: usize,
        tpid: Option<u16>,
        tci: u16,
    ) -> Option<(usize, usize)> {
        if !has_vid(tci) {
            return Some((start, len));
        }
        // SAFETY: the caller's guarantee.
        match unsafe { vlan_put_back(buf, start, len, floor, tpid, tci) } {
            Some(new) => {
                self.stats.rx_bytes += 4;
                Some((new, len + 4))
            }
            None => {
                self.stats.rx_frames -= 1;
                self.stats.rx_bytes -= len as u64;
                self.stats.dropped += 1;
                self.extra.rx_vlan_no_room += 1;
                None
            }
        }
    }

    /// The checks of a received frame of `len` bytes: our own outgoing copies are
    /// skipped, truncated frames dropped (both counted); true when the frame is taken
    /// (counted as received).
    fn rx_check(&mut self, pkttype: u8, len: usize, truncated: bool) -> bool {
        if pkttype == libc::PACKET_OUTGOING {
            self.extra.rx_outgoing += 1;
            return false;
        }
        if truncated {
            self.extra.rx_truncated += 1;
            self.stats.dropped += 1;
            return false;
        }
        self.stats.rx_frames += 1;
        self.stats.rx_bytes += len as u64;
        true
    }
}

/// A received frame that stays in its ring slot: `mac` bytes of headroom before it (the
/// ring's bytes between `slot` and the data), `len` bytes long, `status` its `tp_status`.
fn ring_frame(slot: *mut u8, idx: u32, mac: usize, len: usize, status: u32) -> AfFrame {
    AfFrame {
        slot,
        idx,
        cap: (mac + len) as u32,
        off: mac as u32,
        len: len as u32,
        offload: Offload {
            flags: rx_csum_flags(status),
            ..Offload::default()
        },
    }
}

/// The VLAN tag `PACKET_AUXDATA` gives for a message `recvmmsg` filled: `(tpid if the
/// kernel gave one, tci)`, or `None` for an untagged frame (or no control message).
fn aux_vlan(m: &libc::msghdr) -> Option<(Option<u16>, u16)> {
    // SAFETY: `m` was filled by recvmmsg: its control buffer and length are the kernel's
    // (within the buffer we gave), which the CMSG macros walk.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(m);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_PACKET && (*c).cmsg_type == libc::PACKET_AUXDATA {
                let a =
                    std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::tpacket_auxdata);
                if a.tp_status & TP_STATUS_VLAN_VALID == 0 {
                    return None;
                }
                let tpid = (a.tp_status & TP_STATUS_VLAN_TPID_VALID != 0).then_some(a.tp_vlan_tpid);
                return Some((tpid, a.tp_vlan_tci));
            }
            c = libc::CMSG_NXTHDR(m, c);
        }
    }
    None
}

/// Whether a tag's TCI names a VLAN: a priority tag (VID 0) is left out, as the kernel
/// left it, so that a node without a VLAN takes such frames as untagged.
fn has_vid(tci: u16) -> bool {
    tci & 0x0fff != 0
}

/// Puts back the 802.1Q tag the kernel took out of a received frame: Linux moves a
/// frame's VLAN tag into the packet's metadata before packet taps see it (and a veth
/// peer's VLAN device hands it over there in the first place), and gives it back in the
/// ring header (`tp_vlan_tci`) or `PACKET_AUXDATA`. The frame's 12 address bytes move 4
/// bytes earlier and the tag (`tpid`, 0x8100 if the kernel gave none, then `tci`) goes
/// between them and the EtherType, so the node sees the frame as it was on the wire.
/// The frame is `len` bytes at `start` in `buf`; `floor`: the first byte the tag may use.
/// Returns the frame's new start, or `None` when there is no room before it or the frame
/// is too short to hold Ethernet addresses.
///
/// # Safety
/// `buf[..start + len]` must be valid for reads and writes, and not borrowed elsewhere.
unsafe fn vlan_put_back(
    buf: *mut u8,
    start: usize,
    len: usize,
    floor: usize,
    tpid: Option<u16>,
    tci: u16,
) -> Option<usize> {
    if start < floor + 4 || len < 14 {
        return None;
    }
    let new = start - 4;
    let tag = [tpid.unwrap_or(0x8100).to_be_bytes(), tci.to_be_bytes()];
    // SAFETY: source `buf[start..start + 12]` and destination `buf[new..new + 12]` lie in
    // the caller's range (new >= floor); `copy` allows the overlap; the 4 tag bytes at
    // `new + 12..start + 12` are inside it too.
    unsafe {
        std::ptr::copy(buf.add(start), buf.add(new), 12);
        std::ptr::copy_nonoverlapping(tag.as_ptr() as *const u8, buf.add(new + 12), 4);
    }
    Some(new)
}

/// The checksum verdict the kernel gives a received frame in its ring status: a frame
/// a local sender handed over with its transport checksum left to an offload (veth, lo:
/// the field holds only the pseudo-header sum, which no verification would pass) or one
/// whose checksum the kernel or the device already verified is marked good; any other
/// frame is left to the stack to verify.
fn rx_csum_flags(status: u32) -> OffloadFlags {
    if status & (TP_STATUS_CSUMNOTREADY | TP_STATUS_CSUM_VALID) != 0 {
        OffloadFlags::RX_L4_CSUM_GOOD
    } else {
        OffloadFlags::NONE
    }
}

/// Maps `size` bytes of socket `s`'s ring (locked in memory where the limit allows).
fn map_ring(s: i32, size: usize, name: &str) -> Result<*mut u8, String> {
    for flags in [libc::MAP_SHARED | libc::MAP_LOCKED, libc::MAP_SHARED] {
        // SAFETY: maps the ring the kernel just allocated for this socket; the result is
        // checked.
        let m = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                size,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                s,
                0,
            )
        };
        if m != libc::MAP_FAILED {
            return Ok(m as *mut u8);
        }
        // MAP_LOCKED may exceed RLIMIT_MEMLOCK: retried without it.
    }
    Err(os_err("mmap rx ring", name))
}

/// Switches socket `s` to TPACKET_V2 and maps its ring: `cfg.ring_slots` slots of 2 KiB,
/// or of the next power of two that holds a frame of `mtu`; with
/// [`AfPacketConfig::rx_superframes`], slots that hold 64 KiB. At most 64 MiB in all:
/// fewer slots where they are large.
fn setup_frame_ring(s: i32, cfg: &AfPacketConfig, mtu: u16) -> Result<FrameRing, String> {
    let name = &cfg.ifname;
    let largest = if cfg.rx_superframes {
        u32::from(u16::MAX)
    } else {
        u32::from(mtu) + 18
    };
    let slot = (largest + FRING_HEAD).next_power_of_two().max(FRING_SLOT);
    // Blocks of at least 64 KiB holding whole slots: the slots are contiguous.
    let per_block = ((1u32 << 16) / slot).max(1);
    // Large slots (super-frames, or an interface with a jumbo MTU such as lo's 65,536):
    // as many as fit 64 MiB.
    let want = cfg.ring_slots.min((64u32 << 20) / slot);
    let slots = want.div_ceil(per_block) * per_block;
    // The cap above keeps the ring within 64 MiB: only an empty ring is refused.
    if cfg.ring_slots == 0 {
        return Err(format!(
            "afpacket:{name}: bad rx ring geometry ({} slots of {slot} bytes: 1 to {} slots)",
            cfg.ring_slots,
            (64u32 << 20) / slot
        ));
    }
    if !setopt(s, libc::SOL_PACKET, libc::PACKET_VERSION, &TPACKET_V2) {
        return Err(os_err("PACKET_VERSION(TPACKET_V2)", name));
    }
    let req = TpacketReq {
        block_size: per_block * slot,
        block_nr: slots / per_block,
        frame_size: slot,
        frame_nr: slots,
    };
    if !setopt(s, libc::SOL_PACKET, libc::PACKET_RX_RING, &req) {
        return Err(os_err("PACKET_RX_RING", name));
    }
    let size = slots as usize * slot as usize;
    Ok(FrameRing {
        map: map_ring(s, size, name)?,
        size,
        slot_size: slot as usize,
        slots: slots as usize,
        cur: 0,
    })
}

/// Switches socket `s` to TPACKET_V3 and maps its rx ring.
fn setup_ring(s: i32, cfg: &AfPacketConfig) -> Result<RxRing, String> {
    let name = &cfg.ifname;
    let bs = cfg.ring_block_size;
    // (frame_nr, the ring's 2 KiB frames, must fit the kernel's u32)
    let frame_nr = (bs / 2048).checked_mul(cfg.ring_blocks);
    if !bs.is_power_of_two()
        || bs < 1 << 16
        || cfg.ring_blocks == 0
        || cfg.ring_blocks > 4096
        || frame_nr.is_none()
    {
        return Err(format!("afpacket:{name}: bad rx ring geometry"));
    }
    if !setopt(s, libc::SOL_PACKET, libc::PACKET_VERSION, &TPACKET_V3) {
        return Err(os_err("PACKET_VERSION(TPACKET_V3)", name));
    }
    let req = TpacketReq3 {
        block_size: bs,
        block_nr: cfg.ring_blocks,
        frame_size: 2048,
        frame_nr: frame_nr.unwrap_or(0),
        retire_blk_tov: 1,
        sizeof_priv: 0,
        feature_req_word: 0,
    };
    if !setopt(s, libc::SOL_PACKET, libc::PACKET_RX_RING, &req) {
        return Err(os_err("PACKET_RX_RING", name));
    }
    let size = bs as usize * cfg.ring_blocks as usize;
    let map = map_ring(s, size, name)?;
    let blocks = cfg.ring_blocks as usize;
    Ok(RxRing {
        map,
        size,
        block_size: bs as usize,
        blocks,
        cur: 0,
        open: false,
        pkts_left: 0,
        next_off: 0,
        held: vec![0; blocks],
        walked: vec![false; blocks],
    })
}

impl Drop for AfPacketPort {
    fn drop(&mut self) {
        if self.out > 0 {
            // Frames still point into the pool, the super-frame buffer or the ring: keep
            // them alive rather than let the frames dangle.
            std::mem::forget(std::mem::take(&mut self.pool));
            if let Some(g) = self.gso.as_mut() {
                std::mem::forget(std::mem::take(&mut g.big));
            }
            std::mem::forget(self.ring.take());
            std::mem::forget(self.fring.take());
        }
        // Otherwise the rings unmap themselves as they drop.
    }
}

/// Unmaps a receive ring of `size` bytes at `map` (no frame points into it any more).
fn unmap(map: *mut u8, size: usize) {
    // SAFETY: the caller's ring was mapped with this address and size, and nothing
    // refers to it any more (the port forgets its rings while frames are out).
    unsafe { libc::munmap(map as *mut libc::c_void, size) };
}

impl Drop for RxRing {
    fn drop(&mut self) {
        unmap(self.map, self.size);
    }
}

impl Drop for FrameRing {
    fn drop(&mut self) {
        unmap(self.map, self.size);
    }
}

impl Port for AfPacketPort {
    type Frame = AfFrame;

    fn rx_burst(&mut self, out: &mut Vec<AfFrame>, max: usize) -> usize {
        if self.fring.is_some() {
            return self.rx_frames_burst(out, max);
        }
        if self.ring.is_some() {
            return self.rx_ring_burst(out, max);
        }
        let mut got = 0;
        let fs = self.cfg.frame_size as usize;
        let hr = self.cfg.headroom as usize;
        while got < max {
            let n = (max - got).min(MAX_BURST).min(self.free.len());
            if n == 0 {
                break;
            }
            self.idx.clear();
            for i in 0..n {
                let idx = self.free.pop().unwrap_or(0);
                self.idx.push(idx);
                // SAFETY: the slot `idx` lies inside `pool`; the iovec covers its bytes
                // after the headroom.
                self.iovs[i] = libc::iovec {
                    iov_base: unsafe { self.pool.as_mut_ptr().add(idx as usize * fs + hr) }
                        as *mut libc::c_void,
                    iov_len: fs - hr,
                };
                let m = &mut self.msgs[i].msg_hdr;
                m.msg_name = &mut self.addrs[i] as *mut libc::sockaddr_ll as *mut libc::c_void;
                m.msg_namelen = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
                m.msg_iov = &mut self.iovs[i];
                m.msg_iovlen = 1;
                m.msg_control = self.ctrls[i].as_mut_ptr() as *mut libc::c_void;
                m.msg_controllen = std::mem::size_of::<[u64; 8]>();
                m.msg_flags = 0;
                self.msgs[i].msg_len = 0;
            }
            // SAFETY: `msgs[..n]` are initialised above and point to live buffers of
            // this port that stay untouched during the call.
            let r = unsafe {
                libc::recvmmsg(
                    self.fd.as_raw_fd(),
                    self.msgs.as_mut_ptr(),
                    n as libc::c_uint,
                    libc::MSG_DONTWAIT,
                    std::ptr::null_mut(),
                )
            };
            let r = if r < 0 { 0 } else { r as usize };
            for i in 0..n {
                let idx = self.idx[i];
                if i >= r {
                    self.free.push(idx);
                    continue;
                }
                let len = self.msgs[i].msg_len as usize;
                let flags = self.msgs[i].msg_hdr.msg_flags;
                let trunc = flags & libc::MSG_TRUNC != 0 || len > fs - hr;
                if !self.rx_check(self.addrs[i].sll_pkttype, len, trunc) {
                    self.free.push(idx);
                    continue;
                }
                let mut f = self.frame(idx, len as u32);
                if let Some((tpid, tci)) = aux_vlan(&self.msgs[i].msg_hdr) {
                    // SAFETY: the frame's slot holds `off + len` bytes (len <= fs - hr).
                    match unsafe { self.retag(f.slot, hr, len, 0, tpid, tci) } {
                        Some((o, l)) => (f.off, f.len) = (o as u32, l as u32),
                        None => {
                            self.out -= 1;
                            self.free.push(idx);
                            continue;
                        }
                    }
                }
                out.push(f);
                got += 1;
            }
            if r < n {
                break;
            }
        }
        got
    }

    fn alloc_tx(&mut self, out: &mut Vec<AfFrame>, n: usize) -> usize {
        let mut k = 0;
        while k < n {
            let Some(idx) = self.free.pop() else {
                self.stats.alloc_fail += 1;
                break;
            };
            let f = self.frame(idx, 0);
            out.push(f);
            k += 1;
        }
        k
    }

    fn tx_burst(&mut self, frames: &mut Vec<AfFrame>) -> usize {
        let mut sent = 0;
        while !frames.is_empty() {
            let n = frames.len().min(MAX_BURST);
            for (i, f) in frames[..n].iter().enumerate() {
                let m = &mut self.msgs[i].msg_hdr;
                m.msg_name = std::ptr::null_mut();
                m.msg_namelen = 0;
                m.msg_control = std::ptr::null_mut();
                m.msg_controllen = 0;
                m.msg_flags = 0;
                let frame = libc::iovec {
                    iov_base: f.data().as_ptr() as *mut libc::c_void,
                    iov_len: f.len(),
                };
                if let Some(g) = self.gso.as_mut() {
                    // The GSO socket: the frame's virtio header, then the frame.
                    g.hdrs[i] = vnet_hdr(f);
                    g.iovs[i] = [
                        libc::iovec {
                            iov_base: g.hdrs[i].as_mut_ptr() as *mut libc::c_void,
                            iov_len: VNET_HDR_LEN,
                        },
                        frame,
                    ];
                    m.msg_iov = g.iovs[i].as_mut_ptr();
                    m.msg_iovlen = 2;
                } else {
                    self.iovs[i] = frame;
                    m.msg_iov = &mut self.iovs[i];
                    m.msg_iovlen = 1;
                }
            }
            let fd = self.gso.as_ref().map_or(&self.fd, |g| &g.fd);
            // SAFETY: `msgs[..n]` point to the frames' bytes (and, on the GSO socket, to
            // their virtio headers in `hdrs`), all alive and unmoved during the call.
            let r = unsafe {
                libc::sendmmsg(
                    fd.as_raw_fd(),
                    self.msgs.as_mut_ptr(),
                    n as libc::c_uint,
                    libc::MSG_DONTWAIT,
                )
            };
            if r <= 0 {
                let e = io::Error::last_os_error().raw_os_error();
                match e {
                    Some(libc::EAGAIN) | Some(libc::ENOBUFS) | Some(libc::EINTR) => {
                        self.stats.tx_full += frames.len() as u64;
                        break;
                    }
                    _ => {
                        // The first frame itself is bad (too large, interface down):
                        // drop it so that the queue does not stall.
                        let f = frames.remove(0);
                        self.extra.tx_refused += 1;
                        self.stats.dropped += 1;
                        self.give_back(f);
                        continue;
                    }
                }
            }
            let r = r as usize;
            for f in frames.drain(..r) {
                self.stats.tx_frames += 1;
                self.stats.tx_bytes += f.len() as u64;
                self.give_back(f);
            }
            sent += r;
            if r < n {
                // Partial: the socket is full (or the next frame is bad: retried next call).
                break;
            }
        }
        sent
    }

    fn release(&mut self, frame: AfFrame) {
        self.give_back(frame);
    }

    fn tso_max(&self) -> usize {
        if self.gso.as_ref().is_some_and(|g| !g.free.is_empty()) {
            TSO_MAX
        } else {
            0
        }
    }

    fn alloc_tso(&mut self) -> Option<AfFrame> {
        let g = self.gso.as_mut()?;
        let i = g.free.pop()?;
        self.out += 1;
        Some(AfFrame {
            // SAFETY: i < BIG_FRAMES, so the slot lies inside `big`.
            slot: unsafe { g.big.as_mut_ptr().add((i * BIG_SIZE) as usize) },
            idx: BIG_TAG | i,
            cap: BIG_SIZE,
            off: u32::from(self.cfg.headroom),
            len: 0,
            offload: Offload::default(),
        })
    }

    fn caps(&self) -> PortCaps {
        PortCaps {
            mac: self.mac,
            mtu: self.mtu,
            max_frame: (self.cfg.frame_size - u32::from(self.cfg.headroom)).min(65_535) as u16,
            headroom: self.cfg.headroom,
            // The rings' status carries the kernel's checksum verdict, frame by frame.
            offloads: if self.has_rx_ring() {
                OffloadFlags::RX_CSUM_PER_FRAME
            } else {
                OffloadFlags::NONE
            },
        }
    }

    fn stats(&self) -> PortStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_root() -> bool {
        // SAFETY: geteuid has no preconditions.
        unsafe { libc::geteuid() == 0 }
    }

    #[test]
    fn a_vlan_tag_is_put_back_before_the_ethertype() {
        let mut b = [0u8; 64];
        // A 30-byte frame at 20: destination MAC 1s, source 2s, IPv4, payload 9s.
        b[20..26].fill(1);
        b[26..32].fill(2);
        b[32..34].copy_from_slice(&[0x08, 0x00]);
        b[34..50].fill(9);
        // SAFETY: the frame and the 4 bytes before it lie inside `b`.
        let new = unsafe { vlan_put_back(b.as_mut_ptr(), 20, 30, 8, None, 0x2064) };
        assert_eq!(new, Some(16));
        assert_eq!(&b[16..22], &[1; 6]);
        assert_eq!(&b[22..28], &[2; 6]);
        assert_eq!(&b[28..34], &[0x81, 0x00, 0x20, 0x64, 0x08, 0x00]);
        assert_eq!(&b[34..50], &[9; 16]);
        // A TPID the kernel gave (802.1ad) is kept.
        // SAFETY: as above.
        let new = unsafe { vlan_put_back(b.as_mut_ptr(), 40, 14, 8, Some(0x88a8), 7) };
        assert_eq!((new, &b[48..52]), (Some(36), &[0x88, 0xa8, 0, 7][..]));
        // No room before the frame (the header's bytes end at 8), and a runt.
        // SAFETY: as above.
        unsafe {
            assert_eq!(vlan_put_back(b.as_mut_ptr(), 11, 30, 8, None, 1), None);
            assert_eq!(vlan_put_back(b.as_mut_ptr(), 20, 13, 8, None, 1), None);
        }
        // A priority tag (VID 0) is no VLAN: left out, as the kernel left it.
        assert!(has_vid(0x0064) && !has_vid(0xe000));
    }

    #[test]
    fn missing_interface_is_a_clear_error() {
        let e = AfPacketPort::open(AfPacketConfig::new("sq-nosuch9"))
            .err()
            .expect("no such interface");
        assert!(e.contains("no such interface"), "{e}");
        let e = AfPacketPort::open(AfPacketConfig::new(&"x".repeat(40)))
            .err()
            .expect("bad name");
        assert!(e.contains("afpacket:"), "{e}");
    }

    /// In a fresh network namespace (this thread only), a frame sent on `lo` comes back
    /// exactly once (the outgoing copy is skipped), and every frame returns to the pool.
    #[test]
    fn loopback_roundtrip_in_private_netns() {
        loopback_roundtrip(RxMode::Copy);
    }

    #[test]
    fn loopback_roundtrip_frame_ring() {
        loopback_roundtrip(RxMode::Frames);
    }

    #[test]
    fn loopback_roundtrip_block_ring() {
        loopback_roundtrip(RxMode::Blocks);
    }

    /// The kernel's TCP on `lo` leaves its checksums to the offload (the field holds the
    /// pseudo-header sum): the rings mark those frames good (the kernel's status says
    /// so); the copy path has no status and leaves them to the stack.
    #[test]
    fn rings_carry_the_kernels_checksum_verdict() {
        for mode in [RxMode::Frames, RxMode::Blocks, RxMode::Copy] {
            let h = std::thread::spawn(move || kernel_tcp_on_lo(mode));
            let Some((tcp, good)) = h.join().expect("test thread") else {
                return;
            };
            assert!(tcp >= 3, "{mode:?}: the handshake seen ({tcp} TCP frames)");
            let want = if mode == RxMode::Copy { 0 } else { tcp };
            assert_eq!(good, want, "{mode:?}: frames marked good of {tcp}");
        }
    }

    /// In a fresh network namespace: a kernel TCP connection on `lo` seen by a port in
    /// `mode`; (TCP frames, those marked RX_L4_CSUM_GOOD), None when skipped.
    fn kernel_tcp_on_lo(mode: RxMode) -> Option<(usize, usize)> {
        if !private_netns_with_lo() {
            return None;
        }
        let mut cfg = AfPacketConfig::new("lo");
        cfg.frames = 64;
        cfg.frame_size = 1 << 17;
        cfg.rx = mode;
        cfg.ring_blocks = 4;
        cfg.ring_block_size = 1 << 17;
        cfg.ring_slots = 64;
        let mut p = AfPacketPort::open(cfg).expect("open lo");
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut s, _) = l.accept().unwrap();
        use std::io::{Read, Write};
        c.write_all(b"ping").unwrap();
        let mut b = [0u8; 4];
        s.read_exact(&mut b).unwrap();
        let (mut tcp, mut good) = (0, 0);
        let mut rx = Vec::new();
        for _ in 0..50 {
            p.rx_burst(&mut rx, 64);
            for f in rx.iter() {
                let d = f.data();
                if d.len() >= 34 && d[12..14] == [0x08, 0x00] && d[23] == 6 {
                    tcp += 1;
                    good += usize::from(f.offload().flags.contains(OffloadFlags::RX_L4_CSUM_GOOD));
                }
            }
            p.release_all(&mut rx);
            if tcp >= 5 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        Some((tcp, good))
    }

    #[test]
    fn frame_ring_geometry_is_checked() {
        if !is_root() {
            crate::lab::skipped("needs root (AF_PACKET)");
            return;
        }
        let mut cfg = AfPacketConfig::new("lo");
        cfg.frame_size = 1 << 17;
        cfg.ring_slots = 0;
        let e = AfPacketPort::open(cfg).err().expect("bad geometry");
        assert!(e.contains("rx ring geometry"), "{e}");
        // lo's MTU (65,536) makes 128 KiB slots: as many as fit 64 MiB, not an error.
        let lo_mtu = std::fs::read_to_string("/sys/class/net/lo/mtu");
        if lo_mtu.is_ok_and(|m| m.trim() == "65536") {
            AfPacketPort::open(AfPacketConfig::new("lo")).expect("lo with its jumbo MTU");
        }
        let mut cfg = AfPacketConfig::new("lo");
        cfg.rx = RxMode::Copy;
        cfg.rx_superframes = true;
        let e = AfPacketPort::open(cfg).err().expect("recvmmsg cannot");
        assert!(e.contains("superframes needs a ring receive path"), "{e}");
    }

    /// Moves the calling thread into a fresh network namespace with `lo` up; false (the
    /// reason printed: the test is skipped) where that cannot be done (not root, ...).
    fn private_netns_with_lo() -> bool {
        if !is_root() {
            crate::lab::skipped("needs root (unshare CLONE_NEWNET, AF_PACKET)");
            return false;
        }
        // SAFETY: unshare only affects this thread's network namespace.
        if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
            crate::lab::skipped("unshare(CLONE_NEWNET) failed");
            return false;
        }
        let up = std::process::Command::new("ip")
            .args(["link", "set", "lo", "up"])
            .status();
        if !up.map(|s| s.success()).unwrap_or(false) {
            crate::lab::skipped("cannot bring lo up");
            return false;
        }
        true
    }

    fn loopback_roundtrip(mode: RxMode) {
        let h = std::thread::spawn(move || {
            if !private_netns_with_lo() {
                return;
            }
            let mut cfg = AfPacketConfig::new("lo");
            cfg.frames = 64;
            cfg.frame_size = 1 << 17;
            cfg.headroom = 128;
            cfg.rx = mode;
            cfg.ring_blocks = 4;
            cfg.ring_block_size = 1 << 16;
            cfg.ring_slots = 128;
            let mut p = AfPacketPort::open(cfg).expect("open lo");
            assert_eq!(p.has_rx_ring(), mode != RxMode::Copy);
            assert_eq!(p.rx_mode(), mode);
            assert_eq!(p.caps().mac, [0; 6]);
            let mut v = Vec::new();
            assert_eq!(p.alloc_tx(&mut v, 3), 3);
            for (i, f) in v.iter_mut().enumerate() {
                let mut b = [0u8; 60];
                b[12] = 0x88;
                b[13] = 0xb5; // local experimental ethertype
                b[14] = i as u8;
                f.fill(&b).unwrap();
            }
            assert_eq!(p.tx_burst(&mut v), 3);
            assert!(v.is_empty());
            let mut rx = Vec::new();
            for _ in 0..1000 {
                p.rx_burst(&mut rx, 16);
                if rx.len() >= 3 {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            let ours: Vec<u8> = rx
                .iter()
                .filter(|f| f.len() == 60 && f.data()[12..14] == [0x88, 0xb5])
                .map(|f| f.data()[14])
                .collect();
            assert_eq!(ours, vec![0, 1, 2]);
            p.release_all(&mut rx);
            assert_eq!(p.free_frames(), 64);
            assert_eq!(p.stats().tx_frames, 3);
            // 20 rounds of 40 frames of 1000 bytes (800 KB) through a 256 KiB ring (128
            // slots for the frame ring): every frame arrives only if released blocks
            // (slots) go back to the kernel.
            let mut seen = 0usize;
            for round in 0..20u8 {
                assert_eq!(p.alloc_tx(&mut v, 40), 40);
                for f in v.iter_mut() {
                    f.set_len(1000).unwrap();
                    let d = f.data_mut();
                    d[12] = 0x88;
                    d[13] = 0xb5;
                    d[14] = round;
                }
                assert_eq!(p.tx_burst(&mut v), 40);
                let mut n = 0;
                for _ in 0..1000 {
                    p.rx_burst(&mut rx, 64);
                    n += rx
                        .iter()
                        .filter(|f| f.len() == 1000 && f.data()[14] == round)
                        .count();
                    p.release_all(&mut rx);
                    if n >= 40 {
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                assert_eq!(n, 40, "round {round}");
                seen += n;
            }
            assert_eq!(seen, 800);
            assert_eq!(p.free_frames(), 64);
        });
        h.join().expect("test thread");
    }
}
