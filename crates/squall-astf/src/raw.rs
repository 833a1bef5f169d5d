//! Serde mirror of the JSON IR (schema/profile-v1.schema.json) exactly as written, before
//! any semantic check. Numbers are read wide (`u64`/`i64`) so that range errors are
//! reported by the validator with the offending value rather than as type errors.

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;
use std::fmt;

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawProfile {
    pub version: u64,
    #[serde(default)]
    #[allow(dead_code)]
    pub meta: Option<serde_json::Map<String, serde_json::Value>>,
    pub buffers: Vec<RawBuffer>,
    pub ip_gens: Vec<RawIpGen>,
    pub programs: Vec<RawProgram>,
    pub templates: Vec<RawTemplate>,
    #[serde(default)]
    pub global: Option<RawGlobal>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawBuffer {
    pub name: String,
    pub text: Option<String>,
    pub base64: Option<String>,
    pub size: Option<u64>,
    pub fill: Option<RawBytes>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawBytes {
    pub text: Option<String>,
    pub base64: Option<String>,
}

#[derive(Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum RawDistribution {
    Seq,
    Rand,
}

#[derive(Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum RawPerCore {
    Default,
    Seq,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawDist {
    pub range: [String; 2],
    pub distribution: Option<RawDistribution>,
    pub per_core_distribution: Option<RawPerCore>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawIpGen {
    pub name: String,
    pub clients: RawDist,
    pub servers: RawDist,
    pub ip_offset: Option<String>,
    pub ip_offset_server: Option<String>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawProgram {
    pub name: String,
    /// Kept as raw JSON: each command is decoded on its own so that every bad command in
    /// every program is reported, not only the first.
    pub commands: Vec<serde_json::Value>,
}

#[derive(Deserialize, Debug, Clone, PartialEq)]
/// Decoded from `{"<op>": {fields}}` (the loader moves `op` out of the command object so
/// that type errors keep the path of the field inside the command).
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum RawCmd {
    Send {
        buf: String,
        blocking: Option<bool>,
    },
    Recv {
        bytes: u64,
        #[serde(default)]
        clear: bool,
    },
    Delay {
        usec: u64,
    },
    DelayRand {
        min_usec: u64,
        max_usec: u64,
    },
    Reset {},
    WaitForPeerClose {},
    Connect {},
    Accept {},
    Close {},
    SetVar {
        id: u64,
        val: u64,
    },
    JmpNz {
        id: u64,
        label: Option<String>,
        offset: Option<i64>,
    },
    SetLabel {
        label: String,
    },
    SetTickVar {
        id: u64,
    },
    JmpDp {
        id: u64,
        label: Option<String>,
        offset: Option<i64>,
        duration_usec: u64,
    },
    SendMsg {
        buf: String,
    },
    RecvMsg {
        count: u64,
        #[serde(default)]
        clear: bool,
    },
    SetKeepaliveMsg {
        msec: u64,
        #[serde(default)]
        rx_mode: bool,
    },
    SetSendBlocking {
        block: bool,
    },
    HttpRequest {
        method: Option<String>,
        url: Option<String>,
        urls: Option<Vec<String>>,
        pick: Option<RawPick>,
        weights: Option<Vec<u64>>,
        #[serde(default)]
        headers: Vec<RawHeader>,
        body: Option<String>,
        version: Option<String>,
    },
    HttpWaitResponse {},
}

/// How an HTTP request part chooses among alternatives.
#[derive(Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum RawPick {
    RoundRobin,
    Random,
    Weighted,
    Flow,
}

/// One header of an `http_request`: a fixed `value`, or `values` to choose from.
#[derive(Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct RawHeader {
    pub name: String,
    pub value: Option<String>,
    pub values: Option<Vec<String>>,
    pub pick: Option<RawPick>,
    pub weights: Option<Vec<u64>>,
}

/// Every instruction name, for "unknown instruction" messages.
pub const OPS: &[&str] = &[
    "send",
    "recv",
    "delay",
    "delay_rand",
    "reset",
    "wait_for_peer_close",
    "connect",
    "accept",
    "close",
    "set_var",
    "jmp_nz",
    "set_label",
    "set_tick_var",
    "jmp_dp",
    "send_msg",
    "recv_msg",
    "set_keepalive_msg",
    "set_send_blocking",
    "http_request",
    "http_wait_response",
];

#[derive(Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum RawTransport {
    Tcp,
    Udp,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawAssoc {
    pub port: u64,
    pub ip_start: Option<String>,
    pub ip_end: Option<String>,
    pub l7_map: Option<RawL7Map>,
}

/// TRex `l7_map`: byte offsets into the client's first bytes, optional masks and values.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawL7Map {
    pub offset: Vec<u64>,
    pub mask: Option<Vec<u64>>,
    pub value: Option<Vec<u64>>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawTemplate {
    pub name: Option<String>,
    pub tg_name: Option<String>,
    pub transport: Option<RawTransport>,
    pub client_program: String,
    pub server_program: String,
    pub ip_gen: Option<String>,
    pub port: Option<u64>,
    pub cps: Option<f64>,
    pub limit: Option<u64>,
    pub assoc: Option<Vec<RawAssoc>>,
    pub client_tunables: Option<RawSide>,
    pub server_tunables: Option<RawSide>,
}

/// A boolean that also accepts TRex's 0/1 integers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flag(pub bool);

impl<'de> Deserialize<'de> for Flag {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Flag;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a boolean or 0/1")
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Flag, E> {
                Ok(Flag(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Flag, E> {
                match v {
                    0 => Ok(Flag(false)),
                    1 => Ok(Flag(true)),
                    _ => Err(E::invalid_value(de::Unexpected::Unsigned(v), &self)),
                }
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Flag, E> {
                match v {
                    0 => Ok(Flag(false)),
                    1 => Ok(Flag(true)),
                    _ => Err(E::invalid_value(de::Unexpected::Signed(v), &self)),
                }
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Deserialize, Debug, Default, Clone)]
#[serde(deny_unknown_fields)]
pub struct RawTcp {
    pub mss: Option<u64>,
    pub initwnd: Option<u64>,
    pub delay_ack_msec: Option<u64>,
    pub burst_ack: Option<Flag>,
    /// A flag, or TRex's 0..=3 (bit 0: Nagle off, bit 1: PUSH on every segment).
    pub no_delay: Option<serde_json::Value>,
    pub no_delay_counter: Option<u64>,
    pub rxbufsize: Option<u64>,
    pub txbufsize: Option<u64>,
    pub rexmtthresh: Option<u64>,
    pub do_rfc1323: Option<Flag>,
    pub do_sack: Option<Flag>,
    pub keepinit: Option<u64>,
    pub keepidle: Option<u64>,
    pub keepintvl: Option<u64>,
    pub blackhole: Option<u64>,
    /// TRex's congestion control (0 NewReno, 1 Cubic): only 0.
    pub cc_algo: Option<u64>,
    /// TRex's ECN (0 off, 1 on): only 0.
    pub do_ecn: Option<u64>,
}

#[derive(Deserialize, Debug, Default, Clone)]
#[serde(deny_unknown_fields)]
pub struct RawIp {
    pub ttl: Option<u64>,
    pub tos: Option<u64>,
    /// TRex: use the configured next-hop MAC, not the inbound frame's. Squall always does.
    #[allow(dead_code)]
    pub dont_use_inbound_mac: Option<Flag>,
}

#[derive(Deserialize, Debug, Default, Clone)]
#[serde(deny_unknown_fields)]
pub struct RawSide {
    pub tcp: Option<RawTcp>,
    pub ip: Option<RawIp>,
    pub ipv6: Option<RawIpv6>,
}

#[derive(Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum RawSpacing {
    Even,
    Poisson,
}

#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct RawScheduler {
    pub rampup_sec: Option<u64>,
    pub spacing: Option<RawSpacing>,
    pub seed: Option<u64>,
    /// TRex's more accurate (more CPU) scheduler. Squall's scheduler is always exact.
    #[allow(dead_code)]
    pub accurate: Option<Flag>,
}

/// TRex's `ipv6.*` tunables: `enable` (0/1) and the high bits of client (`src_msb`) and
/// server (`dst_msb`) addresses.
#[derive(Deserialize, Debug, Default, Clone)]
#[serde(deny_unknown_fields)]
pub struct RawIpv6 {
    pub enable: Option<u64>,
    pub src_msb: Option<String>,
    pub dst_msb: Option<String>,
}

#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct RawGlobal {
    pub tcp: Option<RawTcp>,
    pub ip: Option<RawIp>,
    pub scheduler: Option<RawScheduler>,
    pub client: Option<RawSide>,
    pub server: Option<RawSide>,
    pub ipv6: Option<RawIpv6>,
}
