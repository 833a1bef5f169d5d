//! The compiled profile: what the engine runs. Buffers are interned once as `Arc<[u8]>`
//! and shared read-only by every flow; programs are compact instruction arrays with jump
//! labels resolved to program counters; names survive only for messages and statistics.

use std::net::Ipv4Addr;
use std::sync::Arc;

/// Maximum number of per-flow variables (`set_var` / `set_tick_var` ids 0..MAX_VARS).
pub const MAX_VARS: usize = 4;
/// Maximum number of commands in a program (program counters are `u16`).
pub const MAX_COMMANDS: usize = 65_000;
/// Largest UDP payload a `send_msg` buffer may have.
pub const MAX_DATAGRAM: usize = 65_507;
/// Largest buffer (64 MiB).
pub const MAX_BUFFER: u64 = 64 << 20;
/// Largest total of all buffers (1 GiB).
pub const MAX_BUFFERS_TOTAL: u64 = 1 << 30;
/// Largest IP pool (2^24 addresses).
pub const MAX_POOL: u64 = 1 << 24;

/// Index of a buffer in [`Profile::buffers`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BufIdx(pub u32);

/// Index of a program in [`Profile::programs`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ProgIdx(pub u16);

/// Index of a template in [`Profile::templates`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TemplateIdx(pub u16);

/// An interned payload buffer.
#[derive(Clone, Debug)]
pub struct Buffer {
    pub name: String,
    pub data: Arc<[u8]>,
}

/// How a `send` waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendMode {
    /// Use the flow's current mode (`set_send_blocking`; blocking by default).
    Current,
    /// Wait until every queued byte is acknowledged.
    Blocking,
    /// Continue once queued.
    NonBlocking,
}

/// One compiled instruction. `set_label` does not exist at run time; jump targets are
/// program counters (a target equal to the program length ends the program).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Insn {
    Send {
        buf: BufIdx,
        mode: SendMode,
    },
    Recv {
        bytes: u32,
        clear: bool,
    },
    Delay {
        usec: u32,
    },
    DelayRand {
        min_usec: u32,
        max_usec: u32,
    },
    Reset,
    WaitForPeerClose,
    Connect,
    Accept,
    Close,
    SetVar {
        id: u8,
        val: u32,
    },
    JmpNz {
        id: u8,
        target: u16,
    },
    SetTickVar {
        id: u8,
    },
    JmpDp {
        id: u8,
        target: u16,
        duration_usec: u32,
    },
    SendMsg {
        buf: BufIdx,
    },
    RecvMsg {
        count: u32,
        clear: bool,
    },
    SetKeepaliveMsg {
        msec: u32,
        rx_mode: bool,
    },
    SetSendBlocking {
        block: bool,
    },
}

impl Insn {
    /// May this instruction wait for an event (so a loop containing it cannot spin)?
    pub fn may_wait(&self) -> bool {
        matches!(
            self,
            Insn::Send { .. }
                | Insn::Recv { .. }
                | Insn::Delay { .. }
                | Insn::DelayRand { .. }
                | Insn::RecvMsg { .. }
                | Insn::Connect
                | Insn::Accept
                | Insn::WaitForPeerClose
        )
    }
}

/// A compiled program.
#[derive(Clone, Debug)]
pub struct Program {
    pub name: String,
    pub insns: Box<[Insn]>,
    /// Does the program contain a jump (loops make byte totals unknowable statically)?
    pub has_jumps: bool,
}

/// Transport of a template.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    Tcp,
    Udp,
}

/// How a pool hands out addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Distribution {
    Seq,
    Rand,
}

/// How a pool is shared among cores.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PerCore {
    /// Core c of n takes addresses c, c+n, c+2n, ...
    Interleaved,
    /// Each core takes a contiguous slice.
    Contiguous,
}

/// An inclusive IPv4 range with its distribution.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IpPool {
    pub first: u32,
    pub last: u32,
    pub distribution: Distribution,
    pub per_core: PerCore,
}

impl IpPool {
    /// Number of addresses (>= 1).
    pub fn len(&self) -> u64 {
        u64::from(self.last - self.first) + 1
    }
    /// Always false: validated pools are never empty.
    pub fn is_empty(&self) -> bool {
        false
    }
    pub fn contains(&self, ip: u32) -> bool {
        (self.first..=self.last).contains(&ip)
    }
    pub fn first_addr(&self) -> Ipv4Addr {
        Ipv4Addr::from(self.first)
    }
}

/// A client and a server pool (TRex `ASTFIPGen`).
#[derive(Clone, Debug)]
pub struct IpGen {
    pub name: String,
    pub clients: IpPool,
    pub servers: IpPool,
    /// Added `k` times to client addresses for the k-th further port pair.
    pub ip_offset: u32,
    pub ip_offset_server: u32,
}

/// Server association rule: destination port and optional destination address range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AssocRule {
    pub port: u16,
    /// Inclusive range of destination addresses; `None` = any.
    pub ips: Option<(u32, u32)>,
}

impl AssocRule {
    pub fn matches(&self, ip: u32, port: u16) -> bool {
        self.port == port
            && match self.ips {
                None => true,
                Some((a, b)) => (a..=b).contains(&ip),
            }
    }
    fn range(&self) -> (u32, u32) {
        self.ips.unwrap_or((0, u32::MAX))
    }
    /// Could one packet match both rules?
    pub fn overlaps(&self, o: &AssocRule) -> bool {
        let (a, b) = self.range();
        let (c, d) = o.range();
        self.port == o.port && a <= d && c <= b
    }
}

/// TCP tunables, resolved (every field has its value).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpTunables {
    pub mss: u16,
    pub initwnd: u8,
    pub delay_ack_msec: u16,
    pub no_delay: bool,
    pub no_delay_counter: u16,
    pub rxbufsize: u32,
    pub txbufsize: u32,
    pub rexmtthresh: u8,
    pub do_rfc1323: bool,
    pub do_sack: bool,
}

impl Default for TcpTunables {
    fn default() -> Self {
        TcpTunables {
            mss: 1460,
            initwnd: 10,
            delay_ack_msec: 40,
            no_delay: false,
            no_delay_counter: 0,
            rxbufsize: 32768,
            txbufsize: 32768,
            rexmtthresh: 3,
            do_rfc1323: true,
            do_sack: false,
        }
    }
}

/// IP tunables, resolved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IpTunables {
    pub ttl: u8,
    pub tos: u8,
}

impl Default for IpTunables {
    fn default() -> Self {
        IpTunables { ttl: 64, tos: 0 }
    }
}

/// Everything tunable for one side of one template.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SideTunables {
    pub tcp: TcpTunables,
    pub ip: IpTunables,
}

/// Flow start spacing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spacing {
    Even,
    Poisson,
}

/// Global scheduler settings from the profile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SchedulerTunables {
    pub rampup_sec: u32,
    pub spacing: Spacing,
    pub seed: u64,
}

impl Default for SchedulerTunables {
    fn default() -> Self {
        SchedulerTunables {
            rampup_sec: 0,
            spacing: Spacing::Even,
            seed: 1,
        }
    }
}

/// A compiled template.
#[derive(Clone, Debug)]
pub struct Template {
    pub name: String,
    /// Template group (statistics); 0 is the unnamed default group.
    pub tg_id: u16,
    pub transport: Transport,
    pub client_program: ProgIdx,
    pub server_program: ProgIdx,
    pub ip_gen: u16,
    pub port: u16,
    pub cps: f64,
    pub limit: Option<u32>,
    pub assoc: Vec<AssocRule>,
    pub client: SideTunables,
    pub server: SideTunables,
}

/// A validated, compiled profile.
#[derive(Clone, Debug)]
pub struct Profile {
    pub buffers: Vec<Buffer>,
    pub programs: Vec<Program>,
    pub ip_gens: Vec<IpGen>,
    pub templates: Vec<Template>,
    /// Template group names by id; index 0 is the unnamed default group ("").
    pub tg_names: Vec<String>,
    pub scheduler: SchedulerTunables,
}

impl Profile {
    pub fn buffer(&self, b: BufIdx) -> &[u8] {
        &self.buffers[b.0 as usize].data
    }
    pub fn program(&self, p: ProgIdx) -> &Program {
        &self.programs[p.0 as usize]
    }
    /// The template whose server side accepts a new flow to `dst_ip:dst_port` over
    /// `transport` (association rules in template order; the first match wins).
    pub fn server_template_for(
        &self,
        transport: Transport,
        dst_ip: u32,
        dst_port: u16,
    ) -> Option<TemplateIdx> {
        self.templates
            .iter()
            .position(|t| {
                t.transport == transport && t.assoc.iter().any(|r| r.matches(dst_ip, dst_port))
            })
            .map(|i| TemplateIdx(i as u16))
    }
}
