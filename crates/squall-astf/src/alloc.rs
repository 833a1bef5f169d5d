//! Client address allocation: for each new client flow, a client IP from the template's
//! pool (seq or rand) and a source port owned by this core, plus the server IP.
//!
//! Port ownership (the scheme replies rely on): with `n` cores, core `c` only uses source
//! ports `p` in the configured range with `p % n == c`. A reply's destination port is that
//! source port, so the receive path steers it to core `dst_port % n` ([`owner_core`]) — no
//! shared flow table, no locks. (With a NIC, program the same rule as flow steering; with
//! RSS only, the engine can pick ports whose hash lands on the core instead.)
//!
//! IP sharing: when the pool has at least `n` addresses, each core takes its own share
//! (`per_core_distribution`: interleaved `c, c+n, ...` or a contiguous slice); a smaller
//! pool is used whole by every core (ports still keep cores apart).
//!
//! Each client address tracks how many of its ports are in use; when all are, the
//! allocation fails with [`AllocError::PortsExhausted`] and is counted — the flow is not
//! opened (TRex users know this as running out of tuples).

use crate::model::{Distribution, IpGen, IpPool, PerCore};
use crate::rng::Rng;

/// The core that owns (source) port `port` among `n_cores`.
pub fn owner_core(port: u16, n_cores: u32) -> u32 {
    u32::from(port) % n_cores.max(1)
}

/// Source port range for client flows (inclusive).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortRange {
    pub first: u16,
    pub last: u16,
}

impl Default for PortRange {
    fn default() -> Self {
        PortRange {
            first: 1025,
            last: 65535,
        }
    }
}

/// A chosen client endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientAddr {
    pub ip: u32,
    pub port: u16,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AllocError {
    /// Every port this core owns on the chosen client address is in use.
    PortsExhausted { ip: u32 },
}

/// Why a [`ClientAlloc`] cannot be built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AllocSetupError {
    /// The port range is empty or starts at 0.
    BadPortRange,
    /// The port range holds no port for this core.
    NoPortsForCore,
}

#[derive(Clone, Copy, Debug, Default)]
struct PortState {
    /// Next port index to try.
    next: u16,
    in_use: u16,
}

/// The addresses a core draws from: `base + k * stride` for `k < count`, plus an offset.
#[derive(Clone, Copy, Debug)]
struct Share {
    base: u32,
    stride: u32,
    count: u32,
    offset: u32,
}

impl Share {
    fn of(pool: &IpPool, core: u32, n: u32, offset: u32) -> Share {
        let len = pool.len() as u32;
        if n <= 1 || len < n {
            return Share {
                base: pool.first,
                stride: 1,
                count: len,
                offset,
            };
        }
        match pool.per_core {
            PerCore::Interleaved => Share {
                base: pool.first + core,
                stride: n,
                count: (len - core).div_ceil(n),
                offset,
            },
            PerCore::Contiguous => {
                let (q, r) = (len / n, len % n);
                let start = core * q + core.min(r);
                Share {
                    base: pool.first + start,
                    stride: 1,
                    count: q + u32::from(core < r),
                    offset,
                }
            }
        }
    }
    fn ip(&self, k: u32) -> u32 {
        (self.base + k * self.stride).wrapping_add(self.offset)
    }
    fn index(&self, ip: u32) -> Option<u32> {
        let d = ip.wrapping_sub(self.offset).checked_sub(self.base)?;
        (d % self.stride == 0 && d / self.stride < self.count).then_some(d / self.stride)
    }
}

/// Picks client addresses and ports for one template's pool on one core.
#[derive(Clone, Debug)]
pub struct ClientAlloc {
    share: Share,
    distribution: Distribution,
    cursor: u32,
    rng: Rng,
    /// First port this core owns, the step between its ports, and how many it owns.
    port0: u16,
    port_step: u16,
    ports_per_ip: u16,
    ports: Vec<PortState>,
    /// Allocations refused because the chosen address had no free port.
    pub exhausted: u64,
}

impl ClientAlloc {
    /// `pair` is the port-pair index (k-th pair adds `k * ip_offset` to client addresses).
    pub fn new(
        gen: &IpGen,
        pair: u32,
        core: u32,
        n_cores: u32,
        ports: PortRange,
        seed: u64,
    ) -> Result<Self, AllocSetupError> {
        let n = n_cores.max(1);
        if ports.first == 0 || ports.first > ports.last {
            return Err(AllocSetupError::BadPortRange);
        }
        let share = Share::of(&gen.clients, core, n, gen.ip_offset.wrapping_mul(pair));
        // First port >= ports.first with port % n == core.
        let first = u32::from(ports.first);
        let rem = first % n;
        let port0 = first + (core + n - rem) % n;
        if port0 > u32::from(ports.last) {
            return Err(AllocSetupError::NoPortsForCore);
        }
        let count = (u32::from(ports.last) - port0) / n + 1;
        Ok(ClientAlloc {
            share,
            distribution: gen.clients.distribution,
            cursor: 0,
            rng: Rng::derive(seed, 0xc11e_0000 | u64::from(core)),
            port0: port0 as u16,
            port_step: n as u16,
            ports_per_ip: count as u16,
            ports: vec![PortState::default(); share.count as usize],
            exhausted: 0,
        })
    }

    /// Number of client addresses this core uses.
    pub fn addresses(&self) -> u32 {
        self.share.count
    }

    /// Ports this core can use per client address.
    pub fn ports_per_address(&self) -> u16 {
        self.ports_per_ip
    }

    /// Allocates a client endpoint. `busy(ip, port)` lets the engine veto a port still in
    /// its flow table (e.g. in TIME_WAIT); vetoed ports are skipped.
    pub fn alloc(
        &mut self,
        mut busy: impl FnMut(u32, u16) -> bool,
    ) -> Result<ClientAddr, AllocError> {
        let k = match self.distribution {
            Distribution::Seq => {
                let k = self.cursor;
                self.cursor = if k + 1 >= self.share.count { 0 } else { k + 1 };
                k
            }
            Distribution::Rand => self.rng.below(u64::from(self.share.count)) as u32,
        };
        let ip = self.share.ip(k);
        let st = &mut self.ports[k as usize];
        if st.in_use < self.ports_per_ip {
            for _ in 0..self.ports_per_ip {
                let j = st.next;
                st.next = if j + 1 >= self.ports_per_ip { 0 } else { j + 1 };
                let port = self.port0 + j * self.port_step;
                if !busy(ip, port) {
                    st.in_use += 1;
                    return Ok(ClientAddr { ip, port });
                }
            }
        }
        self.exhausted += 1;
        Err(AllocError::PortsExhausted { ip })
    }

    /// Returns a port when its flow is gone. Unknown addresses are ignored.
    pub fn release(&mut self, addr: ClientAddr) {
        if let Some(k) = self.share.index(addr.ip) {
            let st = &mut self.ports[k as usize];
            st.in_use = st.in_use.saturating_sub(1);
        }
    }

    /// Ports in use on a client address.
    pub fn in_use(&self, ip: u32) -> u16 {
        self.share
            .index(ip)
            .map_or(0, |k| self.ports[k as usize].in_use)
    }
}

/// Picks server addresses (seq or rand) for client flows.
#[derive(Clone, Debug)]
pub struct ServerPick {
    pool: IpPool,
    offset: u32,
    cursor: u32,
    rng: Rng,
}

impl ServerPick {
    pub fn new(gen: &IpGen, pair: u32, core: u32, seed: u64) -> Self {
        ServerPick {
            pool: gen.servers,
            offset: gen.ip_offset_server.wrapping_mul(pair),
            cursor: 0,
            rng: Rng::derive(seed, 0x5e77_0000 | u64::from(core)),
        }
    }
    pub fn pick(&mut self) -> u32 {
        let len = self.pool.len();
        let k = match self.pool.distribution {
            Distribution::Seq => {
                let k = self.cursor;
                self.cursor = if u64::from(k) + 1 >= len { 0 } else { k + 1 };
                k
            }
            Distribution::Rand => self.rng.below(len) as u32,
        };
        (self.pool.first + k).wrapping_add(self.offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn share_index_inverts_ip() {
        let pool = |per_core| IpPool {
            first: 100,
            last: 130,
            distribution: Distribution::Seq,
            per_core,
            v6: None,
        };
        for per_core in [PerCore::Interleaved, PerCore::Contiguous] {
            let mut all = Vec::new();
            for core in 0..4 {
                let s = Share::of(&pool(per_core), core, 4, 1 << 24);
                for k in 0..s.count {
                    assert_eq!(s.index(s.ip(k)), Some(k));
                    all.push(s.ip(k));
                }
                assert_eq!(s.index(5), None);
            }
            all.sort_unstable();
            assert_eq!(
                all,
                (100..=130).map(|x| x + (1 << 24)).collect::<Vec<_>>(),
                "{per_core:?}"
            );
        }
    }

    #[test]
    fn owner_core_matches_modulo() {
        assert_eq!(owner_core(1025, 4), 1);
        assert_eq!(owner_core(1025, 0), 0);
    }
}
