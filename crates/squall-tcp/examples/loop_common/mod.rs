//! The frame loop shared by the `w1_loop` and `w2_loop` examples: in-process frame queues
//! acting as the wire between a client and a server `TcpHost`, thread CPU time, and the
//! receive step (burst or per frame).

use squall_tcp::{TcpApp, TcpConfig, TcpHost, TxSink};

/// Pool of frame slots reused forever (no per-packet allocation in steady state). With
/// a `limit` it is a bounded ring like a NIC's TX ring: `alloc` fails when `limit` frames
/// wait, the host counts `tcps_txfull` and resumes the flow later (`TcpHost::poll`), so
/// the frames in flight (and the memory they touch) stay bounded and cache-hot. Without
/// a limit (0) it grows to whatever the windows of all flows put in flight at once.
pub struct Queue {
    pub slots: Vec<[u8; 1600]>,
    pub lens: Vec<usize>,
    pub n: usize,
    limit: usize,
}
impl Queue {
    pub fn new(cap: usize, limit: usize) -> Self {
        Queue {
            slots: vec![[0u8; 1600]; cap],
            lens: vec![0; cap],
            n: 0,
            limit,
        }
    }
}
impl TxSink for Queue {
    fn alloc(&mut self, len: usize) -> Option<&mut [u8]> {
        if len > 1600 || (self.limit != 0 && self.n >= self.limit) {
            return None;
        }
        if self.n == self.slots.len() {
            self.slots.push([0u8; 1600]);
            self.lens.push(0);
        }
        Some(&mut self.slots[self.n][..len])
    }
    fn commit(&mut self, len: usize) {
        self.lens[self.n] = len;
        self.n += 1;
    }
}

/// CPU time of this thread in ns (the engine's per-thread CPU clock), or None if unavailable.
pub fn cpu_ns() -> Option<u64> {
    Some(squall_engine::clock::thread_cpu_ns()).filter(|&ns| ns > 0)
}

/// Hands every frame of `q` to `host`, in bursts of 32 (`rx_burst`) or one by one.
pub fn rx_all<A: TcpApp>(
    host: &mut TcpHost,
    now: u64,
    q: &Queue,
    app: &mut A,
    out: &mut Queue,
    single: bool,
) {
    if single {
        for i in 0..q.n {
            host.rx(now, &q.slots[i][..q.lens[i]], app, out);
        }
        return;
    }
    let mut i = 0;
    while i < q.n {
        let n = (q.n - i).min(32);
        let mut burst: [&[u8]; 32] = [&[]; 32];
        for (k, b) in burst.iter_mut().enumerate().take(n) {
            *b = &q.slots[i + k][..q.lens[i + k]];
        }
        host.rx_burst(now, &burst[..n], app, out);
        i += n;
    }
}

/// A client host (MAC ..:01) and a server host (MAC ..:02) pointing at each other, both
/// built from `base` at time `now`.
/// The hosts' configuration for `max_flows` flows: software checksums unless `offload`,
/// RFC 7323 timestamps on both ends with `SQUALL_TS=1` (as the engine's W1/W2 run).
pub fn loop_config(max_flows: u32, offload: bool) -> TcpConfig {
    TcpConfig {
        max_flows,
        tx_checksum: !offload,
        rx_checksum: !offload,
        opts: squall_tcp::FlowOpts {
            timestamps: std::env::var("SQUALL_TS").is_ok_and(|v| v == "1"),
            ..squall_tcp::FlowOpts::default()
        },
        ..TcpConfig::default()
    }
}

pub fn host_pair(base: TcpConfig, now: u64) -> (TcpHost, TcpHost) {
    let ch = TcpHost::new(
        TcpConfig {
            mac: [2, 0, 0, 0, 0, 1],
            gateway_mac: [2, 0, 0, 0, 0, 2],
            ..base.clone()
        },
        now,
    );
    let sh = TcpHost::new(
        TcpConfig {
            mac: [2, 0, 0, 0, 0, 2],
            gateway_mac: [2, 0, 0, 0, 0, 1],
            ..base
        },
        now,
    );
    (ch, sh)
}

/// `SQUALL_FAMILY=ipv6`: the loops run their flows over IPv6 (addresses in 2001:2::/48,
/// the benchmarking range, with the IPv4 address in the low 32 bits).
pub fn ipv6() -> bool {
    std::env::var("SQUALL_FAMILY").is_ok_and(|v| v == "ipv6")
}

/// The IPv6 benchmarking address standing for IPv4 address `a`: 2001:2::a.b.c.d.
pub fn v6(a: u32) -> [u8; 16] {
    let mut x = [0x20, 1, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    x[12..].copy_from_slice(&a.to_be_bytes());
    x
}

/// Opens a flow between IPv4 addresses `src` and `dst`, over IPv6 ([`v6`]) when
/// [`ipv6`] says so.
pub fn connect<S: squall_tcp::TxSink>(
    h: &mut TcpHost,
    now: u64,
    tx: &mut S,
    (src, sport): (u32, u16),
    (dst, dport): (u32, u16),
    over_v6: bool,
) -> Result<squall_tcp::FlowId, squall_tcp::ConnectError> {
    if over_v6 {
        h.connect6(now, tx, v6(src), sport, v6(dst), dport)
    } else {
        h.connect(now, tx, src, sport, dst, dport)
    }
}
