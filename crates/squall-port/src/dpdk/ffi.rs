//! Declarations of the C shim's functions (`csrc/dpdk_shim.c`, compiled by `build.rs`
//! against `libdpdk-dev`). The structs mirror the shim's C structs field for field.

use std::ffi::{c_char, c_int, c_uint};

/// `struct rte_mbuf`, opaque: the fields the port touches are read at the offsets the
/// shim pins with static assertions (see `super::mbuf`).
#[repr(C)]
pub struct RteMbuf {
    _opaque: [u8; 0],
}

/// `struct rte_mempool`, opaque.
#[repr(C)]
pub struct RteMempool {
    _opaque: [u8; 0],
}

/// `struct sq_dev_info`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct DevInfo {
    pub mac: [u8; 6],
    pub mtu: u16,
    pub max_rx_queues: u16,
    pub max_tx_queues: u16,
    pub rx_desc_max: u16,
    pub tx_desc_max: u16,
    pub rx_offload_capa: u64,
    pub tx_offload_capa: u64,
    pub flow_type_rss_offloads: u64,
    pub max_rx_pktlen: u32,
    pub hash_key_size: u8,
    pub socket: i32,
    pub driver: [c_char; 32],
    /// Entries of the RSS redirection table (0: no RSS).
    pub reta_size: u16,
}

/// `struct sq_dev_conf`.
#[repr(C)]
pub struct DevConf {
    pub queues: u16,
    pub rx_desc: u16,
    pub tx_desc: u16,
    pub promisc: u8,
    pub rss_key_len: u8,
    pub rx_offloads: u64,
    pub tx_offloads: u64,
    pub rss_hf: u64,
    pub rss_key: *const u8,
}

/// `struct sq_dev_stats` (`rte_eth_stats`, device-wide).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DevStats {
    pub ipackets: u64,
    pub opackets: u64,
    pub ibytes: u64,
    pub obytes: u64,
    pub imissed: u64,
    pub ierrors: u64,
    pub oerrors: u64,
    pub rx_nombuf: u64,
}

extern "C" {
    pub fn sq_eal_init(argc: c_int, argv: *mut *mut c_char) -> c_int;
    pub fn sq_strerror(e: c_int) -> *const c_char;
    pub fn sq_runtime_dir() -> *const c_char;
    pub fn sq_port_count() -> u16;
    pub fn sq_port_next(from: u16) -> c_int;
    pub fn sq_port_by_name(name: *const c_char) -> c_int;
    pub fn sq_port_name(port: u16, buf: *mut c_char, len: usize) -> c_int;
    pub fn sq_dev_info(port: u16, out: *mut DevInfo) -> c_int;
    pub fn sq_dev_start(
        port: u16,
        conf: *const DevConf,
        pools: *const *mut RteMempool,
        stage: *mut *const c_char,
        reta: *mut c_int,
        reta_size: *mut u16,
    ) -> c_int;
    pub fn sq_dev_stop_close(port: u16);
    pub fn sq_link_up(port: u16) -> c_int;
    pub fn sq_reta_query(port: u16, out: *mut u16, size: u16) -> c_int;
    pub fn sq_dev_stats(port: u16, out: *mut DevStats) -> c_int;
    pub fn sq_pool_create(
        name: *const c_char,
        n: c_uint,
        cache: c_uint,
        data_room: u16,
        socket: c_int,
    ) -> *mut RteMempool;
    pub fn sq_pool_free(mp: *mut RteMempool);
    pub fn sq_pool_avail(mp: *const RteMempool) -> c_uint;
    pub fn sq_lcore_id() -> c_uint;
    pub fn sq_thread_register() -> c_int;
    pub fn sq_thread_unregister();
    pub fn sq_pool_cached(mp: *const RteMempool, lcore: c_uint) -> c_uint;
    pub fn sq_rx_burst(port: u16, q: u16, pkts: *mut *mut RteMbuf, n: u16) -> u16;
    pub fn sq_tx_burst(port: u16, q: u16, pkts: *mut *mut RteMbuf, n: u16) -> u16;
    pub fn sq_alloc_bulk(mp: *mut RteMempool, pkts: *mut *mut RteMbuf, n: c_uint) -> c_int;
    pub fn sq_alloc(mp: *mut RteMempool) -> *mut RteMbuf;
    pub fn sq_free(m: *mut RteMbuf);
    pub fn sq_free_bulk(m: *mut *mut RteMbuf, n: c_uint);
    #[cfg(test)]
    pub fn sq_tx_offload_pack(l2: u64, l3: u64) -> u64;
}

/// `LCORE_ID_ANY`: the lcore id of a thread DPDK does not know.
pub const LCORE_ID_ANY: c_uint = c_uint::MAX;

/// DPDK's text for errno `e`.
pub fn strerror(e: i32) -> String {
    // SAFETY: rte_strerror returns a pointer to a NUL-terminated string (static or
    // per-thread) that stays valid until the next call on this thread; copied at once.
    unsafe { std::ffi::CStr::from_ptr(sq_strerror(e)) }
        .to_string_lossy()
        .into_owned()
}
