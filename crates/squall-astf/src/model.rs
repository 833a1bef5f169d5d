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
    /// Send the HTTP request [`Profile::http`]`[req]` (its pieces by reference) and
    /// expect one response; does not wait.
    HttpRequest {
        req: u16,
    },
    /// Wait until every response expected by earlier `HttpRequest`s has ended as HTTP
    /// frames it (Content-Length, chunked, or the server's close).
    HttpWaitResponse,
}

impl Insn {
    /// May this instruction wait for an event (so a loop containing it cannot spin)? A
    /// delay of zero does not.
    pub fn may_wait(&self) -> bool {
        matches!(
            self,
            Insn::Send { .. }
                | Insn::Recv { .. }
                | Insn::Delay { usec: 1.. }
                | Insn::DelayRand { max_usec: 1.., .. }
                | Insn::RecvMsg { .. }
                | Insn::Connect
                | Insn::Accept
                | Insn::WaitForPeerClose
                | Insn::HttpWaitResponse
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
    /// Does the program use the HTTP instructions (its flows parse responses)?
    pub has_http: bool,
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

/// An inclusive range of 32-bit values with its distribution: IPv4 addresses, or with
/// `v6` the low 32 bits of IPv6 addresses under those high 96 bits (a native IPv6 pool).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IpPool {
    pub first: u32,
    pub last: u32,
    pub distribution: Distribution,
    pub per_core: PerCore,
    /// The high 96 bits of a native IPv6 pool; None for IPv4.
    pub v6: Option<crate::ipv6::Msb>,
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

/// Most byte offsets in an [`L7Map`].
pub const MAX_L7_OFFSETS: usize = 8;

/// TRex `l7_map`: a server template chosen by the first bytes the client sends. The
/// flow matches when, at every offset, `byte & mask == value & mask`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct L7Map {
    /// Number of offsets used (1..=[`MAX_L7_OFFSETS`]).
    pub len: u8,
    pub offsets: [u8; MAX_L7_OFFSETS],
    pub mask: [u8; MAX_L7_OFFSETS],
    pub value: [u8; MAX_L7_OFFSETS],
}

impl L7Map {
    fn entries(&self) -> impl Iterator<Item = (usize, u8, u8)> + '_ {
        (0..self.len as usize).map(|k| (self.offsets[k] as usize, self.mask[k], self.value[k]))
    }
    /// Bytes the server needs before it can decide (the largest offset + 1).
    pub fn need(&self) -> usize {
        self.entries().map(|(o, _, _)| o + 1).max().unwrap_or(0)
    }
    /// Do the first bytes of a stream (at least [`L7Map::need`] of them) match?
    pub fn matches(&self, first: &[u8]) -> bool {
        self.entries()
            .all(|(o, m, v)| first.get(o).is_some_and(|&b| b & m == v & m))
    }
    /// Could one stream match both maps? Not when some offset present in both has bits,
    /// under both masks, where the values differ.
    pub fn may_both_match(&self, o: &L7Map) -> bool {
        !self.entries().any(|(off, m, v)| {
            o.entries()
                .any(|(off2, m2, v2)| off == off2 && (v ^ v2) & m & m2 != 0)
        })
    }
}

/// Server association rule: destination port and optional destination address range,
/// and optionally the client's first bytes (`l7`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AssocRule {
    pub port: u16,
    /// Inclusive range of destination addresses; `None` = any.
    pub ips: Option<(u32, u32)>,
    /// TRex `l7_map`: the template is chosen once the client's first bytes arrive.
    pub l7: Option<L7Map>,
    /// The family of the template's flows (IPv6 when true). A flow prefers the rules of
    /// its own family; rules of the two families never overlap.
    pub v6: bool,
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
    /// Could one flow match both rules (address, port and, when both have one, the L7 map)?
    pub fn overlaps(&self, o: &AssocRule) -> bool {
        let (a, b) = self.range();
        let (c, d) = o.range();
        self.port == o.port
            && self.v6 == o.v6
            && a <= d
            && c <= b
            && match (&self.l7, &o.l7) {
                (Some(x), Some(y)) => x.may_both_match(y),
                _ => true,
            }
    }
}

/// TCP tunables, resolved (every field has its value).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpTunables {
    pub mss: u16,
    pub initwnd: u8,
    pub delay_ack_msec: u16,
    /// One ACK for the in-order segments of a receive burst (squall-tcp `burst_ack`).
    pub burst_ack: bool,
    /// Nagle off (`no_delay` bit 0).
    pub no_delay: bool,
    /// TRex `no_delay` bit 1 (value 2 or 3): PUSH on every data segment. Carried, not
    /// applied (squall-tcp sets PSH on the segment that empties the send queue).
    pub no_delay_push: bool,
    /// Received bytes after which an ACK goes at once (squall-tcp `FlowOpts::ack_bytes`);
    /// 0: every second full-sized segment.
    pub no_delay_counter: u16,
    pub rxbufsize: u32,
    pub txbufsize: u32,
    pub rexmtthresh: u8,
    pub do_rfc1323: bool,
    pub do_sack: bool,
    /// Connection-establishment timeout, seconds (BSD/TRex `keepinit`): the SYN and
    /// SYN-ACK retransmissions that fit in it. Side-wide (global tunables only).
    pub keepinit: u16,
    /// Keepalive idle time, seconds; 0 = no keepalive probes. Side-wide.
    pub keepidle: u16,
    /// Keepalive probe interval, seconds. Side-wide.
    pub keepintvl: u16,
}

impl Default for TcpTunables {
    fn default() -> Self {
        TcpTunables {
            mss: 1460,
            initwnd: 10,
            delay_ack_msec: 40,
            burst_ack: true,
            no_delay: false,
            no_delay_push: false,
            no_delay_counter: 0,
            rxbufsize: 32768,
            txbufsize: 32768,
            rexmtthresh: 3,
            do_rfc1323: true,
            do_sack: true,
            keepinit: 75,
            keepidle: 0,
            keepintvl: 75,
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
    /// TRex's `ipv6.*` (on the client side, whether and how flows go over IPv6).
    pub ipv6: crate::ipv6::Ipv6Tunables,
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
    /// IPv6 addressing of the template's flows (native IPv6 pools, or the client side's
    /// `ipv6.enable` over IPv4 pools); None: IPv4.
    pub ipv6: Option<crate::ipv6::Ipv6Map>,
}

/// How a new server flow finds its template ([`Profile::server_assoc`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServerAssoc {
    /// No template accepts this address and port.
    None,
    /// This template, at once.
    Template(TemplateIdx),
    /// L7 maps decide: wait for this many bytes of the client's stream (or its end).
    L7 { need: usize },
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
    /// HTTP requests of the `http_request` instructions (their pieces are in `buffers`).
    pub http: Vec<crate::http::HttpReq>,
    /// Round-robin cursors the HTTP requests' parts use ([`crate::http::Part::cursor`]).
    pub http_cursors: u32,
}

impl Profile {
    pub fn buffer(&self, b: BufIdx) -> &[u8] {
        &self.buffers[b.0 as usize].data
    }
    pub fn program(&self, p: ProgIdx) -> &Program {
        &self.programs[p.0 as usize]
    }
    /// The shared client pool of template `t`: the index of the first template whose
    /// generator has the identical client pool (and so, checked by the loader, the same
    /// `ip_offset`) (TRex: templates built
    /// from one `ASTFIPGenDist` draw from one distribution and one port space).
    pub fn client_pool_of(&self, t: TemplateIdx) -> usize {
        self.first_template_with(t, |g| g.clients)
    }

    /// As [`Profile::client_pool_of`] for the server pool (one shared server cursor).
    pub fn server_pool_of(&self, t: TemplateIdx) -> usize {
        self.first_template_with(t, |g| (g.servers, g.ip_offset_server))
    }

    fn first_template_with<K: PartialEq>(
        &self,
        t: TemplateIdx,
        key: impl Fn(&IpGen) -> K,
    ) -> usize {
        let k = |i: usize| key(&self.ip_gens[self.templates[i].ip_gen as usize]);
        let me = k(t.0 as usize);
        (0..t.0 as usize)
            .find(|&i| k(i) == me)
            .unwrap_or(t.0 as usize)
    }

    /// The template whose server side accepts a new IPv4 flow to `dst_ip:dst_port` over
    /// `transport` (association rules in template order; the first match wins). Rules
    /// with an L7 map are left to [`Profile::server_assoc`].
    pub fn server_template_for(
        &self,
        transport: Transport,
        dst_ip: u32,
        dst_port: u16,
    ) -> Option<TemplateIdx> {
        match self.server_assoc(transport, dst_ip, dst_port) {
            ServerAssoc::Template(t) => Some(t),
            _ => None,
        }
    }

    /// The matching rules of the flow's family (`v6`) in template order, then those of
    /// the other family (TRex associates by port: an IPv6 flow still finds an IPv4
    /// template when no IPv6 one takes it). `dst_ip` of an IPv6 flow: its low 32 bits.
    fn assoc_rules(
        &self,
        transport: Transport,
        v6: bool,
        dst_ip: u32,
        dst_port: u16,
    ) -> impl Iterator<Item = (usize, &AssocRule)> + '_ {
        let fam = move |fam: bool| {
            self.templates
                .iter()
                .enumerate()
                .filter(move |(_, t)| t.transport == transport)
                .flat_map(|(i, t)| t.assoc.iter().map(move |r| (i, r)))
                .filter(move |(_, r)| r.v6 == fam && r.matches(dst_ip, dst_port))
        };
        fam(v6).chain(fam(!v6))
    }

    /// How a new IPv4 flow to `dst_ip:dst_port` finds its server template: at once, or
    /// (L7 maps) from the client's first bytes, or not at all.
    pub fn server_assoc(&self, transport: Transport, dst_ip: u32, dst_port: u16) -> ServerAssoc {
        self.server_assoc_in(transport, false, dst_ip, dst_port)
    }

    /// [`Profile::server_assoc`] for a flow of either family (`v6`; `dst_ip`: the low 32
    /// bits of an IPv6 destination).
    pub fn server_assoc_in(
        &self,
        transport: Transport,
        v6: bool,
        dst_ip: u32,
        dst_port: u16,
    ) -> ServerAssoc {
        let mut rules = self.assoc_rules(transport, v6, dst_ip, dst_port).peekable();
        match rules.peek() {
            None => ServerAssoc::None,
            Some((i, r)) if r.l7.is_none() => ServerAssoc::Template(TemplateIdx(*i as u16)),
            Some(_) => ServerAssoc::L7 {
                need: rules
                    .filter_map(|(_, r)| r.l7.map(|m| m.need()))
                    .max()
                    .unwrap_or(0),
            },
        }
    }

    /// The template whose L7 map matches the client's `first` bytes (see
    /// [`Profile::server_assoc`]).
    pub fn server_template_l7(
        &self,
        transport: Transport,
        dst_ip: u32,
        dst_port: u16,
        first: &[u8],
    ) -> Option<TemplateIdx> {
        self.server_template_l7_in(transport, false, dst_ip, dst_port, first)
    }

    /// [`Profile::server_template_l7`] for a flow of either family (as
    /// [`Profile::server_assoc_in`]).
    pub fn server_template_l7_in(
        &self,
        transport: Transport,
        v6: bool,
        dst_ip: u32,
        dst_port: u16,
        first: &[u8],
    ) -> Option<TemplateIdx> {
        self.assoc_rules(transport, v6, dst_ip, dst_port)
            .find(|(_, r)| r.l7.is_some_and(|m| m.matches(first)))
            .map(|(i, _)| TemplateIdx(i as u16))
    }
}
