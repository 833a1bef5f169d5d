//! DPDK port (cargo feature `dpdk`): one rx/tx queue pair of a DPDK ethdev as a [`Port`],
//! over Debian's `libdpdk-dev` 22.11 through a small C shim (`csrc/dpdk_shim.c`: the
//! fast path of DPDK is static inline, so the shim exports non-inline wrappers).
//!
//! - **EAL** ([`init`]): once per process, the user's arguments passed through
//!   (`--eal "--no-huge --in-memory --vdev=net_memif0,..."`; 22.11 refuses `--in-memory`
//!   with `--no-huge`, so that pair runs with a file prefix of the process's own:
//!   [`effective_args`]); PMDs are shared objects the EAL loads from its plugin directory.
//! - **Device** ([`open`]): the port named in [`DpdkConfig::device`] (e.g. `net_memif0`)
//!   or the first probed one, configured with one rx/tx queue pair per worker
//!   ([`DpdkConfig::queues`]), each with an rx and a tx mbuf pool of its own; RSS over IPv4 and IPv6 (TCP, UDP) with a
//!   known symmetric Toeplitz key ([`crate::rss::SYMMETRIC_KEY`]) when there is more than
//!   one queue and the device hashes; checksum offloads enabled where `dev_info` offers them (and the
//!   config allows). [`PortCaps`] come from the device (MAC, MTU, offloads).
//! - **Frames** ([`DpdkFrame`]): an `rte_mbuf*` and nothing else (no copy, no allocation
//!   per packet). `rx_burst` lets the PMD write mbuf pointers straight into the caller's
//!   `Vec`, `alloc_tx` takes mbufs from the queue's pool in bulk, `tx_burst` hands the
//!   front of the `Vec` to `rte_eth_tx_burst` (the unsent stay, in order), `release` frees
//!   them. Frame data, length, headroom and offload metadata are the mbuf's own fields,
//!   read and written in place at offsets the shim pins with static assertions.
//!   Offload requests map to `ol_flags` (`RTE_MBUF_F_TX_TCP_CKSUM` etc. plus
//!   `RTE_MBUF_F_TX_IPV4`, `l2_len`/`l3_len` in `tx_offload`); rx checksum status
//!   (`RTE_MBUF_F_RX_*_CKSUM_GOOD/BAD/NONE/UNKNOWN`) maps to the port's `RX_*` flags.

mod eal;
mod ffi;

use std::ffi::{c_char, c_int, c_uint, CStr, CString};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use eal::{effective_args, init, is_up, remove_own_runtime_dir, split_args};
pub use ffi::DevStats;
use ffi::{RteMbuf, RteMempool};

use crate::frame::{FrameBuf, FrameError, Offload, OffloadFlags};
use crate::port::{Port, PortCaps, PortStats};
use crate::rss::SYMMETRIC_KEY;

/// `rte_mbuf` field offsets (pinned by `_Static_assert`s in the shim).
mod mbuf {
    pub const BUF_ADDR: usize = 0;
    pub const DATA_OFF: usize = 16;
    pub const NB_SEGS: usize = 20;
    pub const OL_FLAGS: usize = 24;
    pub const PKT_LEN: usize = 36;
    pub const DATA_LEN: usize = 40;
    pub const BUF_LEN: usize = 54;
    pub const POOL: usize = 56;
    pub const NEXT: usize = 64;
    pub const TX_OFFLOAD: usize = 72;
}

/// `RTE_MBUF_F_*` values (pinned by the shim).
mod olf {
    pub const RX_L4_BAD: u64 = 1 << 3;
    pub const RX_IP_BAD: u64 = 1 << 4;
    pub const RX_IP_GOOD: u64 = 1 << 7;
    pub const RX_L4_GOOD: u64 = 1 << 8;
    pub const RX_IP_MASK: u64 = RX_IP_BAD | RX_IP_GOOD;
    pub const RX_L4_MASK: u64 = RX_L4_BAD | RX_L4_GOOD;
    pub const TX_TCP: u64 = 1 << 52;
    pub const TX_UDP: u64 = 3 << 52;
    pub const TX_L4_MASK: u64 = 3 << 52;
    pub const TX_IP: u64 = 1 << 54;
    pub const TX_IPV4: u64 = 1 << 55;
    pub const TX_IPV6: u64 = 1 << 56;
    /// The mbuf's data lives in an external buffer or another mbuf: the free path needs
    /// to know (never ours to clear).
    pub const EXTERNAL: u64 = 1 << 61;
    pub const INDIRECT: u64 = 1 << 62;
}

/// `RTE_ETH_{RX,TX}_OFFLOAD_*` and `RTE_ETH_RSS_*` bits (pinned by the shim).
mod capa {
    pub const IPV4_CKSUM: u64 = 1 << 1;
    pub const UDP_CKSUM: u64 = 1 << 2;
    pub const TCP_CKSUM: u64 = 1 << 3;
    pub const RSS_IPV4: u64 = 1 << 2;
    pub const RSS_IPV4_TCP: u64 = 1 << 4;
    pub const RSS_IPV4_UDP: u64 = 1 << 5;
    pub const RSS_IPV6: u64 = 1 << 8;
    pub const RSS_IPV6_TCP: u64 = 1 << 10;
    pub const RSS_IPV6_UDP: u64 = 1 << 11;
}

/// `RTE_PKTMBUF_HEADROOM` of Debian's build.
const HEADROOM: u16 = 128;
/// Largest burst handed to the PMD at once.
const BURST: usize = 64;

/// Settings of a DPDK device opened by [`open`].
#[derive(Clone, Debug)]
pub struct DpdkConfig {
    /// The ethdev's name (`net_memif0`, `net_af_packet0`, a PCI address), or `None` for
    /// the first probed port.
    pub device: Option<String>,
    /// Rx/tx queue pairs: one per worker.
    pub queues: u16,
    /// Descriptors per rx queue and per tx queue (adjusted to the device's limits).
    pub rx_desc: u16,
    pub tx_desc: u16,
    /// Mbufs in each queue's tx pool (`alloc_tx`).
    pub pool_frames: u32,
    /// Mbufs in each queue's rx pool (the PMD fills its rx ring from it). Rx has a pool
    /// of its own so that frames queued for a full tx ring can never take the mbufs rx
    /// needs: two ends that both stall on tx would otherwise starve each other's rx and
    /// never drain (seen on memif under overload).
    pub rx_pool_frames: u32,
    /// Use the device's tx checksum offloads where it has them.
    pub tx_csum: bool,
    /// Use the device's rx checksum verification where it has it.
    pub rx_csum: bool,
    /// Put the device in promiscuous mode.
    pub promisc: bool,
}

impl Default for DpdkConfig {
    fn default() -> Self {
        DpdkConfig {
            device: None,
            queues: 1,
            rx_desc: 1024,
            tx_desc: 1024,
            pool_frames: 8191,
            rx_pool_frames: 4095,
            tx_csum: true,
            rx_csum: true,
            promisc: true,
        }
    }
}

/// A frame of a [`DpdkPort`]: one `rte_mbuf` (see the module comment).
#[repr(transparent)]
#[derive(Debug)]
pub struct DpdkFrame(NonNull<RteMbuf>);

// SAFETY: a frame is the only handle to its mbuf (the PMD or the pool hold it otherwise),
// and mbufs may be freed or sent from any thread (the pools are multi-producer safe).
unsafe impl Send for DpdkFrame {}

impl DpdkFrame {
    #[inline]
    fn field<T>(&self, off: usize) -> *mut T {
        // SAFETY: `off` is one of the `mbuf` offsets, inside the 128-byte rte_mbuf.
        unsafe { (self.0.as_ptr() as *mut u8).add(off) as *mut T }
    }
    #[inline]
    fn get<T: Copy>(&self, off: usize) -> T {
        // SAFETY: the handle owns a live mbuf (from rx or alloc, not yet sent or freed);
        // the offset and type match the field (static assertions in the shim), which is
        // naturally aligned.
        unsafe { self.field::<T>(off).read() }
    }
    #[inline]
    fn put<T: Copy>(&mut self, off: usize, v: T) {
        // SAFETY: as in `get`; `&mut self` makes the handle's access exclusive.
        unsafe { self.field::<T>(off).write(v) }
    }
    fn buf_addr(&self) -> *mut u8 {
        self.get::<*mut u8>(mbuf::BUF_ADDR)
    }
    fn data_off(&self) -> u16 {
        self.get(mbuf::DATA_OFF)
    }
    fn data_len(&self) -> u16 {
        self.get(mbuf::DATA_LEN)
    }
    /// Sets data_off/data_len and moves pkt_len by the change of data_len.
    fn set_window(&mut self, off: u16, len: u16) {
        let pkt: u32 = self.get(mbuf::PKT_LEN);
        let old = u32::from(self.data_len());
        self.put(mbuf::DATA_OFF, off);
        self.put(mbuf::DATA_LEN, len);
        self.put(
            mbuf::PKT_LEN,
            pkt.wrapping_sub(old).wrapping_add(u32::from(len)),
        );
    }
    /// The `i`-th mbuf of the chain.
    fn seg(&self, i: usize) -> Option<DpdkFrameRef> {
        let mut m = self.0;
        for _ in 0..i {
            // SAFETY: `m` is a live mbuf of this frame's chain; `next` is its pointer
            // field (null at the end).
            let next = unsafe {
                ((m.as_ptr() as *const u8).add(mbuf::NEXT) as *const *mut RteMbuf).read()
            };
            m = NonNull::new(next)?;
        }
        Some(DpdkFrameRef(m))
    }
    /// Whether the chain the PMD handed over is consistent (see [`chain_is_sound`]): read
    /// before any byte of the frame is touched.
    fn well_formed(&self) -> bool {
        let segs = self.segments();
        let mut m = Some(DpdkFrameRef(self.0));
        let windows = std::iter::from_fn(|| {
            let s = m.take()?;
            let f = std::mem::ManuallyDrop::new(DpdkFrame(s.0));
            let w = (f.data_off(), f.data_len(), f.get::<u16>(mbuf::BUF_LEN));
            m = f.seg(1);
            Some(w)
        });
        // (at most one segment past nb_segs is read: a longer chain is refused there)
        chain_is_sound(windows.take(segs + 1), segs, self.pkt_len())
    }
    /// The raw `ol_flags` (tests).
    pub fn ol_flags(&self) -> u64 {
        self.get(mbuf::OL_FLAGS)
    }
}

/// Whether a received chain is one a frame can be read from: `nb_segs` segments exactly,
/// each one's data (`data_off`, `data_len`) inside its buffer (`buf_len`), and `pkt_len`
/// their sum. `windows`: each segment's `(data_off, data_len, buf_len)`, in chain order.
/// A PMD's own frames always pass; a memif peer writes the lengths of what a zero-copy
/// client receives (DPDK 22.11's `eth_memif_rx_zc` copies the descriptor's length into
/// `data_len` unchecked), so a frame that fails is dropped and counted, never read.
pub fn chain_is_sound(
    windows: impl Iterator<Item = (u16, u16, u16)>,
    nb_segs: usize,
    pkt_len: usize,
) -> bool {
    let mut n = 0usize;
    let mut total = 0usize;
    for (off, len, buf_len) in windows {
        n += 1;
        if n > nb_segs || u32::from(off) + u32::from(len) > u32::from(buf_len) {
            return false;
        }
        total += usize::from(len);
    }
    n == nb_segs && total == pkt_len
}

/// A borrowed segment of a chained frame.
struct DpdkFrameRef(NonNull<RteMbuf>);

impl DpdkFrameRef {
    fn bytes<'a>(&self) -> &'a [u8] {
        let f = std::mem::ManuallyDrop::new(DpdkFrame(self.0));
        let (a, o, l) = (f.buf_addr(), f.data_off(), f.data_len());
        // SAFETY: a live segment's data lies at buf_addr + data_off for data_len bytes;
        // the caller ties the lifetime to the frame that owns the chain.
        unsafe { std::slice::from_raw_parts(a.add(usize::from(o)), usize::from(l)) }
    }
}

impl FrameBuf for DpdkFrame {
    #[inline]
    fn data(&self) -> &[u8] {
        // SAFETY: the mbuf's data is data_len bytes at buf_addr + data_off, inside its
        // buffer (a received chain was checked by `chain_is_sound` in rx_burst; alloc_tx
        // and set_len/prepend/adjust keep the window inside), owned by this handle.
        unsafe {
            std::slice::from_raw_parts(
                self.buf_addr().add(usize::from(self.data_off())),
                usize::from(self.data_len()),
            )
        }
    }
    #[inline]
    fn data_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `data`; `&mut self` makes the access exclusive.
        unsafe {
            std::slice::from_raw_parts_mut(
                self.buf_addr().add(usize::from(self.data_off())),
                usize::from(self.data_len()),
            )
        }
    }
    #[inline]
    fn len(&self) -> usize {
        usize::from(self.data_len())
    }
    fn set_len(&mut self, len: usize) -> Result<(), FrameError> {
        if len > self.capacity() {
            return Err(FrameError::NoRoom);
        }
        let off = self.data_off();
        self.set_window(off, len as u16);
        Ok(())
    }
    fn capacity(&self) -> usize {
        let buf_len: u16 = self.get(mbuf::BUF_LEN);
        usize::from(buf_len.saturating_sub(self.data_off()))
    }
    fn headroom(&self) -> usize {
        usize::from(self.data_off())
    }
    fn prepend(&mut self, n: usize) -> Result<(), FrameError> {
        let off = usize::from(self.data_off());
        if n > off {
            return Err(FrameError::NoRoom);
        }
        let len = self.data_len() + n as u16;
        self.set_window((off - n) as u16, len);
        Ok(())
    }
    fn adjust(&mut self, n: usize) -> Result<(), FrameError> {
        let len = usize::from(self.data_len());
        if n > len {
            return Err(FrameError::NoRoom);
        }
        let off = self.data_off() + n as u16;
        self.set_window(off, (len - n) as u16);
        Ok(())
    }
    fn offload(&self) -> Offload {
        let ol = self.ol_flags();
        let mut f = OffloadFlags::NONE;
        match ol & olf::RX_IP_MASK {
            olf::RX_IP_GOOD => f = f | OffloadFlags::RX_IP_CSUM_GOOD,
            olf::RX_IP_BAD => f = f | OffloadFlags::RX_CSUM_BAD,
            _ => {}
        }
        match ol & olf::RX_L4_MASK {
            // NONE: "the checksum in the packet is not correct, but the data is verified".
            olf::RX_L4_GOOD | olf::RX_L4_MASK => f = f | OffloadFlags::RX_L4_CSUM_GOOD,
            olf::RX_L4_BAD => f = f | OffloadFlags::RX_CSUM_BAD,
            _ => {}
        }
        match ol & olf::TX_L4_MASK {
            olf::TX_TCP => f = f | OffloadFlags::TX_TCP_CSUM,
            olf::TX_UDP => f = f | OffloadFlags::TX_UDP_CSUM,
            _ => {}
        }
        if ol & olf::TX_IP != 0 {
            f = f | OffloadFlags::TX_IP_CSUM;
        }
        let txo: u64 = self.get(mbuf::TX_OFFLOAD);
        Offload {
            flags: f,
            l2_len: (txo & 0x7f) as u8,
            l3_len: ((txo >> 7) & 0x1ff).min(255) as u8,
            ..Default::default()
        }
    }
    fn set_offload(&mut self, o: Offload) {
        let mut ol = 0u64;
        if o.flags.contains(OffloadFlags::TX_TCP_CSUM) {
            ol |= olf::TX_TCP;
        } else if o.flags.contains(OffloadFlags::TX_UDP_CSUM) {
            ol |= olf::TX_UDP;
        }
        if o.flags.contains(OffloadFlags::TX_IP_CSUM) {
            ol |= olf::TX_IP;
        }
        if ol != 0 {
            // DPDK wants the L3 type with any checksum request: from the ethertype.
            let l2 = usize::from(o.l2_len);
            let et = self
                .data()
                .get(l2.wrapping_sub(2)..l2)
                .map(|b| [b[0], b[1]]);
            ol |= match et {
                Some([0x86, 0xdd]) => olf::TX_IPV6,
                _ => olf::TX_IPV4,
            };
        }
        // Rx results of a received frame sent back are dropped with the old flags; how its
        // data is attached (a driver's external buffer, an indirect mbuf) is kept.
        let attached: u64 = self.get::<u64>(mbuf::OL_FLAGS) & (olf::EXTERNAL | olf::INDIRECT);
        self.put(mbuf::OL_FLAGS, ol | attached);
        self.put(
            mbuf::TX_OFFLOAD,
            u64::from(o.l2_len & 0x7f) | (u64::from(o.l3_len) << 7),
        );
    }
    fn segments(&self) -> usize {
        usize::from(self.get::<u16>(mbuf::NB_SEGS).max(1))
    }
    fn segment(&self, i: usize) -> &[u8] {
        if i == 0 {
            return self.data();
        }
        match self.seg(i) {
            Some(s) => s.bytes(),
            None => &[],
        }
    }
    fn pkt_len(&self) -> usize {
        self.get::<u32>(mbuf::PKT_LEN) as usize
    }
}

/// Counters of a DPDK port beyond [`PortStats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DpdkStats {
    /// Received frames made of several mbufs (delivered; the stack reads the first).
    pub rx_chained: u64,
    /// Received frames dropped before they were read because their mbuf chain was not
    /// sound ([`chain_is_sound`]: a length past its buffer, a segment count or a total
    /// that does not add up; what a faulty or hostile memif peer can write).
    pub rx_malformed: u64,
    /// `alloc_tx` calls served one mbuf at a time because the pool had fewer than asked.
    pub alloc_partial: u64,
}

/// What [`open`] found out about the device.
#[derive(Clone, Debug)]
pub struct DeviceInfo {
    /// Port id.
    pub port_id: u16,
    /// Ethdev name (`net_memif0`).
    pub name: String,
    /// Driver name (`net_memif`).
    pub driver: String,
    /// Queue pairs configured.
    pub queues: u16,
    /// Rx/tx offload capabilities the device reported (`RTE_ETH_*_OFFLOAD_*` bits).
    pub rx_offload_capa: u64,
    pub tx_offload_capa: u64,
    /// RSS hash types enabled (0: a single queue or a device without RSS).
    pub rss_hf: u64,
    /// Entries of the device's RSS redirection table (as the configured device reports
    /// them), filled round robin over the queues (entry `i` -> queue `i % queues`) by
    /// Squall where the driver takes a table ([`Reta::Programmed`]), else as the driver
    /// filled it ([`DeviceInfo::reta_table`] where it can be read).
    pub reta_size: u16,
    /// What became of the redirection table.
    pub reta: Reta,
    /// The redirection table as the driver reported it after the start (entry `i` ->
    /// queue; `rte_eth_dev_rss_reta_query`), with RSS on several queues where the driver
    /// lets it be read: the client's RSS port choice follows it
    /// ([`crate::rss::RssConfig::table`]) rather than assume round robin.
    pub reta_table: Option<Vec<u16>>,
}

impl DeviceInfo {
    /// Whether the device was configured to hash IPv6 TCP and UDP on their 4-tuple.
    pub fn hashes_ipv6(&self) -> bool {
        self.rss_hf & (capa::RSS_IPV6_TCP | capa::RSS_IPV6_UDP)
            == capa::RSS_IPV6_TCP | capa::RSS_IPV6_UDP
    }
}

/// The RSS redirection table of a device with several queues and RSS.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reta {
    /// Squall filled it round robin (`rte_eth_dev_rss_reta_update`).
    Programmed,
    /// The driver has none to program (no RSS, or `-ENOTSUP`): its default, round robin
    /// in Linux and DPDK drivers, is assumed.
    DriverDefault,
    /// The update failed (the reason): the port runs on with the driver's table.
    Failed(String),
}

/// The device shared by its queues' ports: stopped and closed when the last port goes.
struct Device {
    port_id: u16,
    pools: Vec<*mut RteMempool>,
    /// Frames still held by users when their port was dropped (the pools are then kept).
    leaked: AtomicUsize,
}

// SAFETY: the device is only stopped/closed in Drop (once, by the last owner); the pool
// pointers are only freed there; mempools are thread safe.
unsafe impl Send for Device {}
// SAFETY: as above; shared access only reads `port_id` and the pool pointers.
unsafe impl Sync for Device {}

impl Drop for Device {
    fn drop(&mut self) {
        // SAFETY: the port was started by `open` and no queue is used any more (every
        // DpdkPort of it is gone).
        unsafe { ffi::sq_dev_stop_close(self.port_id) };
        if self.leaked.load(Ordering::Relaxed) == 0 {
            for &p in &self.pools {
                // SAFETY: every mbuf of the pool is back (none held by users, the device
                // closed and its queues released).
                unsafe { ffi::sq_pool_free(p) };
            }
        }
    }
}

/// One rx/tx queue pair of a DPDK device (see the module comment).
pub struct DpdkPort {
    dev: Arc<Device>,
    port_id: u16,
    queue: u16,
    pool: *mut RteMempool,
    caps: PortCaps,
    info: DeviceInfo,
    stats: PortStats,
    extra: DpdkStats,
    /// Frames handed out and not returned.
    out: usize,
    /// The DPDK lcore id of the thread that polls this queue ([`Port::bind_thread`]).
    lcore: Option<u32>,
    /// The thread this port registered as an lcore (unregistered on drop, there).
    registered: Option<std::thread::ThreadId>,
}

// SAFETY: a queue pair is polled by one thread at a time (the owner of this value);
// DPDK allows any thread to poll a queue as long as only one does; the pool is thread safe.
unsafe impl Send for DpdkPort {}

fn port_name(id: u16) -> String {
    let mut buf = [0 as c_char; 64];
    // SAFETY: the buffer holds 64 bytes; the shim NUL-terminates within it.
    let r = unsafe { ffi::sq_port_name(id, buf.as_mut_ptr(), buf.len()) };
    if r != 0 {
        return format!("port{id}");
    }
    // SAFETY: NUL-terminated by the shim.
    unsafe { CStr::from_ptr(buf.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

/// Names of every probed port.
pub fn port_names() -> Vec<String> {
    if !is_up() {
        return Vec::new();
    }
    let mut v = Vec::new();
    let mut from = 0u16;
    // SAFETY: the EAL is up; this only reads the ethdev table.
    while let Ok(id) = u16::try_from(unsafe { ffi::sq_port_next(from) }) {
        v.push(port_name(id));
        match id.checked_add(1) {
            Some(n) => from = n,
            None => break,
        }
    }
    v
}

static POOL_SEQ: AtomicU64 = AtomicU64::new(0);

/// Opens the device of `cfg` (the EAL must be up: [`init`]) and returns one port per
/// queue pair, queue `i` at index `i`.
pub fn open(cfg: &DpdkConfig) -> Result<Vec<DpdkPort>, String> {
    if !is_up() {
        return Err("dpdk: the EAL is not initialised (dpdk::init first)".into());
    }
    // SAFETY: the EAL is up; these only read the ethdev table.
    let count = unsafe { ffi::sq_port_count() };
    if count == 0 {
        return Err(
            "dpdk: no DPDK port was probed: give a device in --eal, e.g. \
             --vdev=net_af_packet0,iface=IFNAME or --vdev=net_memif0,role=server,socket=PATH, \
             or bind a NIC to vfio-pci"
                .into(),
        );
    }
    let id = match &cfg.device {
        None => {
            // SAFETY: as above.
            let p = unsafe { ffi::sq_port_next(0) };
            if p < 0 {
                return Err("dpdk: no DPDK port available".into());
            }
            p as u16
        }
        Some(name) => {
            let c = CString::new(name.as_str()).map_err(|_| format!("dpdk: bad name {name:?}"))?;
            // SAFETY: `c` is a valid C string.
            let p = unsafe { ffi::sq_port_by_name(c.as_ptr()) };
            if p < 0 {
                return Err(format!(
                    "dpdk: no port named {name} (probed: {})",
                    port_names().join(", ")
                ));
            }
            p as u16
        }
    };
    let name = port_name(id);
    // SAFETY: DevInfo is plain old data (all-zero is valid); the shim fills it.
    let mut di: ffi::DevInfo = unsafe { std::mem::zeroed() };
    // SAFETY: `di` is a valid out pointer.
    let r = unsafe { ffi::sq_dev_info(id, &mut di) };
    if r != 0 {
        return Err(format!(
            "dpdk: {name}: rte_eth_dev_info_get: {}",
            ffi::strerror(-r)
        ));
    }
    // SAFETY: NUL-terminated by the shim (snprintf).
    let driver = unsafe { CStr::from_ptr(di.driver.as_ptr()) }
        .to_string_lossy()
        .into_owned();
    let maxq = di.max_rx_queues.min(di.max_tx_queues);
    if cfg.queues == 0 || cfg.queues > maxq {
        return Err(format!(
            "dpdk: {name}: {} queue pairs asked, the device ({driver}) has 1..={maxq}",
            cfg.queues
        ));
    }
    let mut tx_off = 0u64;
    let mut rx_off = 0u64;
    let mut offloads = OffloadFlags::NONE;
    if cfg.tx_csum {
        for (c, f) in [
            (capa::TCP_CKSUM, OffloadFlags::TX_TCP_CSUM),
            (capa::UDP_CKSUM, OffloadFlags::TX_UDP_CSUM),
            (capa::IPV4_CKSUM, OffloadFlags::TX_IP_CSUM),
        ] {
            if di.tx_offload_capa & c != 0 {
                tx_off |= c;
                offloads = offloads | f;
            }
        }
    }
    if cfg.rx_csum && di.rx_offload_capa & capa::TCP_CKSUM != 0 {
        rx_off |= capa::TCP_CKSUM | (di.rx_offload_capa & (capa::UDP_CKSUM | capa::IPV4_CKSUM));
        // Frame by frame: a NIC says "unknown" for what it cannot parse (IPv6 with
        // extension headers, IPv4 with options), and those the stack verifies itself.
        offloads = offloads | OffloadFlags::RX_CSUM_PER_FRAME;
        if di.rx_offload_capa & capa::IPV4_CKSUM != 0 {
            offloads = offloads | OffloadFlags::RX_IP_CSUM_GOOD;
        }
    }
    let rss_hf = if cfg.queues > 1 {
        di.flow_type_rss_offloads
            & (capa::RSS_IPV4
                | capa::RSS_IPV4_TCP
                | capa::RSS_IPV4_UDP
                | capa::RSS_IPV6
                | capa::RSS_IPV6_TCP
                | capa::RSS_IPV6_UDP)
    } else {
        0
    };
    let key_len = if di.hash_key_size == 0 {
        SYMMETRIC_KEY.len()
    } else {
        usize::from(di.hash_key_size)
    };
    let key: Vec<u8> = SYMMETRIC_KEY
        .iter()
        .copied()
        .cycle()
        .take(key_len)
        .collect();
    let max_frame = u32::from(di.mtu) + 18;
    let data_room = (u32::from(HEADROOM) + max_frame.max(2048)).min(u32::from(u16::MAX)) as u16;
    let tx_frames = cfg.pool_frames.max(u32::from(cfg.tx_desc) + 512);
    let rx_frames = cfg.rx_pool_frames.max(2 * u32::from(cfg.rx_desc) + 512);
    // Per queue: the rx pool (index q) and the tx pool (index queues + q).
    let mut pools: Vec<*mut RteMempool> = Vec::with_capacity(2 * usize::from(cfg.queues));
    for (kind, frames) in [("r", rx_frames), ("t", tx_frames)] {
        for q in 0..cfg.queues {
            let seq = POOL_SEQ.fetch_add(1, Ordering::Relaxed);
            let pname = CString::new(format!("sq{id}{kind}{q}n{seq}")).unwrap_or_default();
            // SAFETY: valid C string; the EAL is up.
            let p = unsafe {
                ffi::sq_pool_create(pname.as_ptr(), frames as c_uint, 256, data_room, di.socket)
            };
            if p.is_null() {
                for &p in &pools {
                    // SAFETY: created above, never used.
                    unsafe { ffi::sq_pool_free(p) };
                }
                return Err(format!(
                    "dpdk: {name}: cannot create a pool of {frames} mbufs of {data_room} bytes \
                     (out of DPDK memory: raise the EAL's -m, in MB; --no-huge gives 64 MB)"
                ));
            }
            pools.push(p);
        }
    }
    let conf = ffi::DevConf {
        queues: cfg.queues,
        rx_desc: cfg.rx_desc,
        tx_desc: cfg.tx_desc,
        promisc: u8::from(cfg.promisc),
        rss_key_len: key.len().min(255) as u8,
        rx_offloads: rx_off,
        tx_offloads: tx_off,
        rss_hf,
        rss_key: key.as_ptr(),
    };
    let mut stage: *const c_char = std::ptr::null();
    let mut reta: c_int = 0;
    let mut reta_size: u16 = di.reta_size;
    // SAFETY: `conf`, `key` and `pools` (the rx pools first, one per queue) outlive the
    // call; `stage` is a valid out pointer the shim sets to a static string, `reta` and
    // `reta_size` valid out pointers.
    let r = unsafe {
        ffi::sq_dev_start(
            id,
            &conf,
            pools.as_ptr(),
            &mut stage,
            &mut reta,
            &mut reta_size,
        )
    };
    if r != 0 {
        let st = if stage.is_null() {
            "start".into()
        } else {
            // SAFETY: a static C string literal of the shim.
            unsafe { CStr::from_ptr(stage) }
                .to_string_lossy()
                .into_owned()
        };
        // The device may hold mbufs of the pools now: leak them rather than free under it.
        return Err(format!(
            "dpdk: {name} ({driver}): {st}: {}",
            ffi::strerror(-r)
        ));
    }
    let dev = Arc::new(Device {
        port_id: id,
        pools: pools.clone(),
        leaked: AtomicUsize::new(0),
    });
    let info = DeviceInfo {
        port_id: id,
        name,
        driver,
        queues: cfg.queues,
        rx_offload_capa: di.rx_offload_capa,
        tx_offload_capa: di.tx_offload_capa,
        rss_hf,
        reta_size,
        reta: match reta {
            1 => Reta::Programmed,
            0 => Reta::DriverDefault,
            e => Reta::Failed(ffi::strerror(-e)),
        },
        reta_table: if rss_hf != 0 {
            query_reta(id, reta_size).ok()
        } else {
            None
        },
    };
    let caps = PortCaps {
        mac: di.mac,
        mtu: di.mtu,
        max_frame: data_room - HEADROOM,
        headroom: HEADROOM,
        offloads,
    };
    Ok(pools[usize::from(cfg.queues)..]
        .iter()
        .enumerate()
        .map(|(q, &pool)| DpdkPort {
            dev: dev.clone(),
            port_id: id,
            queue: q as u16,
            pool,
            caps,
            info: info.clone(),
            stats: PortStats::default(),
            extra: DpdkStats::default(),
            out: 0,
            lcore: None,
            registered: None,
        })
        .collect())
}

impl DpdkPort {
    /// The DPDK lcore id of the thread polling this queue, once [`Port::bind_thread`]
    /// gave it one (`None` before, or if it could not).
    pub fn lcore(&self) -> Option<u32> {
        self.lcore
    }
    /// Free mbufs of this queue's tx pool held in the calling thread's per-core cache
    /// (0 for a thread without an lcore id: it bypasses the caches).
    pub fn pool_cached_here(&self) -> usize {
        // SAFETY: the pool lives as long as the device; reads this thread's lcore id and
        // the length of that cache.
        unsafe { ffi::sq_pool_cached(self.pool, ffi::sq_lcore_id()) as usize }
    }
    /// The device behind this port.
    pub fn info(&self) -> &DeviceInfo {
        &self.info
    }
    /// This port's queue pair.
    pub fn queue(&self) -> u16 {
        self.queue
    }
    /// Extra counters.
    pub fn extra_stats(&self) -> DpdkStats {
        self.extra
    }
    /// Whether `f`'s mbuf comes from one of this device's pools: only those are counted
    /// back in (`out`). A frame of another device may be sent or freed here, but its own
    /// port keeps it counted, so that its device never frees its pools under it (that
    /// count may then stay too high: the pools are kept at its drop, never freed early).
    fn ours(&self, f: &DpdkFrame) -> bool {
        let pool: *mut RteMempool = f.get(mbuf::POOL);
        self.dev.pools.contains(&pool)
    }
    /// Frames handed out by this port and not returned yet.
    pub fn frames_out(&self) -> usize {
        self.out
    }
    /// Free mbufs in this queue's tx pool (the pool's ring plus the per-lcore caches).
    pub fn pool_free(&self) -> usize {
        // SAFETY: the pool lives as long as the device.
        unsafe { ffi::sq_pool_avail(self.pool) as usize }
    }
    /// The device's own counters (`rte_eth_stats_get`, all queues).
    pub fn device_stats(&self) -> DevStats {
        let mut s = DevStats::default();
        // SAFETY: `s` is a valid out pointer; the port is started.
        let _ = unsafe { ffi::sq_dev_stats(self.port_id, &mut s) };
        s
    }
    /// The device's RSS redirection table as the driver reports it
    /// (`rte_eth_dev_rss_reta_query`): entry `i` -> its queue, [`DeviceInfo::reta_size`]
    /// entries. An error for a device without a table to read.
    pub fn reta(&self) -> Result<Vec<u16>, String> {
        query_reta(self.port_id, self.info.reta_size).map_err(|e| {
            format!(
                "dpdk: {}: reading the redirection table: {e}",
                self.info.name
            )
        })
    }
    /// Whether the link is up (a memif link is up once both ends are connected).
    pub fn link_up(&self) -> bool {
        // SAFETY: plain query of a started port.
        unsafe { ffi::sq_link_up(self.port_id) == 1 }
    }
    /// Waits up to `timeout` for the link to come up.
    pub fn wait_link(&self, timeout: Duration) -> bool {
        let t0 = Instant::now();
        loop {
            if self.link_up() {
                return true;
            }
            if t0.elapsed() >= timeout {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for DpdkPort {
    fn drop(&mut self) {
        if self.out > 0 {
            self.dev.leaked.fetch_add(self.out, Ordering::Relaxed);
        }
        if self.registered == Some(std::thread::current().id()) {
            // SAFETY: this thread registered itself in `bind_thread`; it polls no queue
            // after its port is gone. The mbufs left in its cache stay in the pool.
            unsafe { ffi::sq_thread_unregister() };
        }
    }
}

/// The `n`-entry redirection table of started port `port`, or DPDK's reason.
fn query_reta(port: u16, n: u16) -> Result<Vec<u16>, String> {
    let mut out = vec![0u16; usize::from(n)];
    // SAFETY: `out` holds `n` entries, the number the shim writes; the port is started.
    let r = unsafe { ffi::sq_reta_query(port, out.as_mut_ptr(), n) };
    if r != 0 {
        return Err(ffi::strerror(-r));
    }
    Ok(out)
}

/// Views a frame slice as the `rte_mbuf*` array DPDK takes.
fn mbufs(frames: &mut [DpdkFrame]) -> *mut *mut RteMbuf {
    // DpdkFrame is repr(transparent) over NonNull<RteMbuf>, laid out as *mut rte_mbuf.
    frames.as_mut_ptr() as *mut *mut RteMbuf
}

impl Port for DpdkPort {
    type Frame = DpdkFrame;

    fn bind_thread(&mut self) -> Result<(), String> {
        // SAFETY: the EAL is up (this port exists); reads the calling thread's lcore id.
        let id = unsafe { ffi::sq_lcore_id() };
        if id != ffi::LCORE_ID_ANY {
            // An EAL thread (the main lcore), or a thread registered before.
            self.lcore = Some(id);
            return Ok(());
        }
        // SAFETY: registers the calling thread as a non-EAL lcore (DPDK picks a free id).
        let (e, id) = unsafe { (ffi::sq_thread_register(), ffi::sq_lcore_id()) };
        if e != 0 || id == ffi::LCORE_ID_ANY {
            self.lcore = None;
            return Err(format!(
                "dpdk: {} queue {}: the worker thread could not become a DPDK lcore \
                 (rte_thread_register: {}); its mbuf pools run without a per-core cache",
                self.info.name,
                self.queue,
                ffi::strerror(-e)
            ));
        }
        self.lcore = Some(id);
        self.registered = Some(std::thread::current().id());
        Ok(())
    }

    fn rx_burst(&mut self, out: &mut Vec<DpdkFrame>, max: usize) -> usize {
        let max = max.min(usize::from(u16::MAX));
        out.reserve(max);
        let len = out.len();
        // SAFETY: `out` has room for `max` more elements; the PMD writes n <= max valid,
        // non-null mbuf pointers there (DpdkFrame's layout), which then become elements.
        let n = unsafe {
            let n = ffi::sq_rx_burst(
                self.port_id,
                self.queue,
                out.as_mut_ptr().add(len) as *mut *mut RteMbuf,
                max as u16,
            ) as usize;
            out.set_len(len + n);
            n
        };
        // Frames whose chain is not sound are freed before anyone reads them (the rest
        // keep their order).
        let mut kept = len;
        for i in len..len + n {
            // (a copy of the handle: DpdkFrame has no Drop; the one in `out[i]` is
            // overwritten or truncated away, so one handle per mbuf remains)
            let f = DpdkFrame(out[i].0);
            if !f.well_formed() {
                // SAFETY: the PMD handed this mbuf (chain) over; it is freed once, here,
                // and its handle is overwritten or truncated away below.
                unsafe { ffi::sq_free(f.0.as_ptr()) };
                self.extra.rx_malformed += 1;
                self.stats.dropped += 1;
                continue;
            }
            self.stats.rx_bytes += f.pkt_len() as u64;
            if f.segments() > 1 {
                self.extra.rx_chained += 1;
            }
            out[kept] = f;
            kept += 1;
        }
        out.truncate(kept);
        let n = kept - len;
        self.stats.rx_frames += n as u64;
        self.out += n;
        n
    }

    fn alloc_tx(&mut self, out: &mut Vec<DpdkFrame>, n: usize) -> usize {
        out.reserve(n);
        let len = out.len();
        // SAFETY: room for n more pointers; on success the pool wrote n valid, reset
        // mbufs (data_off = headroom, len 0, no flags), which become elements.
        let ok = unsafe {
            ffi::sq_alloc_bulk(
                self.pool,
                out.as_mut_ptr().add(len) as *mut *mut RteMbuf,
                n as c_uint,
            ) == 0
        };
        let got = if ok {
            // SAFETY: n elements written above.
            unsafe { out.set_len(len + n) };
            n
        } else {
            // Fewer than n left: take what there is, one by one.
            self.extra.alloc_partial += 1;
            let mut k = 0;
            while k < n {
                // SAFETY: plain allocation from this queue's pool.
                let Some(m) = NonNull::new(unsafe { ffi::sq_alloc(self.pool) }) else {
                    break;
                };
                out.push(DpdkFrame(m));
                k += 1;
            }
            k
        };
        if got < n {
            self.stats.alloc_fail += 1;
        }
        self.out += got;
        got
    }

    fn tx_burst(&mut self, frames: &mut Vec<DpdkFrame>) -> usize {
        let mut sent = 0;
        let mut mine = 0;
        let total = frames.len();
        while sent < total {
            let k = (total - sent).min(BURST);
            let mut lens = [0u32; BURST];
            // Read before the PMD owns them (it may free them inside tx_burst).
            let mut own = [false; BURST];
            for ((l, o), f) in lens.iter_mut().zip(&mut own).zip(&frames[sent..sent + k]) {
                *l = f.pkt_len() as u32;
                *o = self.ours(f);
            }
            // SAFETY: frames[sent..sent + k] are live mbufs owned by these handles; the
            // PMD takes the first n (they are drained below and never touched again).
            let n = unsafe {
                ffi::sq_tx_burst(
                    self.port_id,
                    self.queue,
                    mbufs(&mut frames[sent..]),
                    k as u16,
                )
            } as usize;
            // (rte_eth_tx_burst returns at most k; a PMD's count is not indexed unchecked)
            let n = n.min(k);
            self.stats.tx_bytes += lens[..n].iter().map(|&l| u64::from(l)).sum::<u64>();
            mine += own[..n].iter().filter(|&&o| o).count();
            sent += n;
            if n < k {
                self.stats.tx_full += (total - sent) as u64;
                break;
            }
        }
        // The accepted handles belong to the PMD now (DpdkFrame has no Drop).
        frames.drain(..sent);
        self.stats.tx_frames += sent as u64;
        self.out -= mine.min(self.out);
        sent
    }

    fn release(&mut self, frame: DpdkFrame) {
        let mine = self.ours(&frame);
        // SAFETY: the handle owned the mbuf (chain); it is consumed here.
        unsafe { ffi::sq_free(frame.0.as_ptr()) };
        if mine {
            self.out = self.out.saturating_sub(1);
        }
    }

    fn release_all(&mut self, frames: &mut Vec<DpdkFrame>) {
        if frames.is_empty() {
            return;
        }
        let n = frames.len();
        let mine = frames.iter().filter(|f| self.ours(f)).count();
        // SAFETY: every handle owns its mbuf; all are freed here and the handles dropped
        // (no Drop) by clear().
        unsafe { ffi::sq_free_bulk(mbufs(frames), n as c_uint) };
        frames.clear();
        self.out = self.out.saturating_sub(mine);
    }

    fn caps(&self) -> PortCaps {
        self.caps
    }

    fn stats(&self) -> PortStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Rust packing of l2_len/l3_len is DPDK's (`rte_mbuf_tx_offload`).
    #[test]
    fn tx_offload_packing_matches_dpdk() {
        for (l2, l3) in [(14u8, 20u8), (18, 60), (127, 255), (0, 0)] {
            // SAFETY: a pure function of the shim.
            let d = unsafe { ffi::sq_tx_offload_pack(u64::from(l2), u64::from(l3)) };
            assert_eq!(d, u64::from(l2 & 0x7f) | (u64::from(l3) << 7), "{l2} {l3}");
        }
    }

    #[test]
    fn only_a_sound_chain_is_read() {
        let ok = |w: &[(u16, u16, u16)], nb: usize, pkt: usize| {
            chain_is_sound(w.iter().copied(), nb, pkt)
        };
        // One segment: data inside the buffer, pkt_len its length.
        assert!(ok(&[(128, 60, 2176)], 1, 60));
        assert!(ok(&[(128, 2048, 2176)], 1, 2048));
        // A length past the buffer (what a memif peer can write into a zero-copy mbuf).
        assert!(!ok(&[(128, 2049, 2176)], 1, 2049));
        assert!(!ok(&[(128, 60000, 2176)], 1, 60000));
        assert!(!ok(&[(65535, 65535, 65535)], 1, 65535));
        // pkt_len not the sum; segments fewer or more than nb_segs.
        assert!(!ok(&[(128, 60, 2176)], 1, 61));
        assert!(ok(&[(128, 1500, 2176), (0, 500, 2048)], 2, 2000));
        assert!(!ok(&[(128, 1500, 2176), (0, 500, 2048)], 2, 1500));
        assert!(!ok(&[(128, 1500, 2176)], 2, 1500));
        assert!(!ok(&[(128, 1500, 2176), (0, 500, 2048)], 1, 2000));
        assert!(!ok(&[(128, 1500, 2176), (0, 2049, 2048)], 2, 3549));
    }

    #[test]
    fn open_without_eal_is_an_error() {
        if is_up() {
            return;
        }
        let e = open(&DpdkConfig::default()).err().expect("no EAL");
        assert!(e.contains("not initialised"), "{e}");
    }
}
