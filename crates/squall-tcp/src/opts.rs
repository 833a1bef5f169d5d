//! Per-flow TCP/IP options ([`FlowOpts`]): the settings a traffic profile may vary per
//! template and side (MSS, initial window, delayed ACK, Nagle, RFC 7323/2018 offers,
//! receive window, duplicate-ACK threshold, IPv4 TTL and TOS). A host keeps a small table
//! of option sets; a flow stores only the one-byte index ([`OptsId`]) of its set.

use crate::host::TcpConfig;

/// Index of an option set in a host's table ([`crate::TcpHost::add_flow_opts`]).
/// `OptsId::DEFAULT` (0) is the set derived from the host's [`TcpConfig`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct OptsId(pub u8);

impl OptsId {
    /// The host's default option set (from its `TcpConfig`).
    pub const DEFAULT: OptsId = OptsId(0);
}

/// Most option sets per host (the index is one byte).
pub const MAX_OPTS: usize = 256;

/// TCP/IP options of one flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowOpts {
    /// Our MSS (advertised in the SYN / SYN-ACK and upper bound for sending).
    pub mss: u16,
    /// Initial congestion window in segments (1..=20).
    pub init_cwnd: u8,
    /// Receive window we advertise, bytes (above 65,535 only with `wscale`).
    pub rcv_wnd: u32,
    /// Offer window scaling with this shift (RFC 7323 §2); None = do not offer.
    pub wscale: Option<u8>,
    /// Offer/accept timestamps (RFC 7323 §3).
    pub timestamps: bool,
    /// Offer/accept SACK (RFC 2018).
    pub sack: bool,
    /// Nagle's algorithm (RFC 9293 §3.7.4).
    pub nagle: bool,
    /// Delayed-ACK timeout, ns; 0 = ACK every segment immediately.
    pub delack_ns: u64,
    /// Duplicate ACKs that trigger fast retransmit (RFC 5681 §3.2: 3), 1..=10.
    pub rexmt_thresh: u8,
    /// IPv4 time to live of every segment of the flow.
    pub ttl: u8,
    /// IPv4 type of service (DSCP/ECN byte) of every segment of the flow.
    pub tos: u8,
}

impl FlowOpts {
    /// The options a host built from `cfg` gives flows by default (TTL 64, TOS 0,
    /// fast retransmit after 3 duplicate ACKs).
    pub fn from_config(cfg: &TcpConfig) -> Self {
        FlowOpts {
            mss: cfg.mss,
            init_cwnd: cfg.init_cwnd,
            rcv_wnd: cfg.rcv_wnd,
            wscale: cfg.wscale,
            timestamps: cfg.timestamps,
            sack: cfg.sack,
            nagle: cfg.nagle,
            delack_ns: cfg.delack_ns,
            rexmt_thresh: 3,
            ttl: 64,
            tos: 0,
        }
        .sanitised()
    }

    /// The same options with values that make no sense on the wire clamped: MSS
    /// 64..=65495, initial window 1..=20, receive window 1..=2^30 (advertised as at
    /// most 65,535 unless window scaling is negotiated), shift <= 14, threshold 1..=10,
    /// TTL >= 1.
    pub fn sanitised(mut self) -> Self {
        self.mss = self.mss.clamp(64, 65_495);
        self.init_cwnd = self.init_cwnd.clamp(1, 20);
        self.wscale = self.wscale.map(|w| w.min(14));
        self.rcv_wnd = self.rcv_wnd.clamp(1, 1 << 30);
        self.rexmt_thresh = self.rexmt_thresh.clamp(1, 10);
        self.ttl = self.ttl.max(1);
        self
    }
}

impl Default for FlowOpts {
    fn default() -> Self {
        FlowOpts::from_config(&TcpConfig::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitising_clamps_to_wire_ranges() {
        let o = FlowOpts {
            mss: 10,
            init_cwnd: 0,
            rcv_wnd: 0,
            rexmt_thresh: 0,
            ttl: 0,
            ..FlowOpts::default()
        }
        .sanitised();
        assert_eq!((o.mss, o.init_cwnd, o.rcv_wnd), (64, 1, 1));
        assert_eq!((o.rexmt_thresh, o.ttl), (1, 1));
        let o = FlowOpts {
            rcv_wnd: 1 << 20,
            wscale: Some(20),
            ..FlowOpts::default()
        }
        .sanitised();
        assert_eq!((o.rcv_wnd, o.wscale), (1 << 20, Some(14)));
    }

    #[test]
    fn defaults_follow_the_config() {
        let cfg = TcpConfig {
            mss: 1000,
            init_cwnd: 4,
            nagle: true,
            ..TcpConfig::default()
        };
        let o = FlowOpts::from_config(&cfg);
        assert_eq!((o.mss, o.init_cwnd, o.nagle), (1000, 4, true));
        assert_eq!((o.ttl, o.tos, o.rexmt_thresh), (64, 0, 3));
    }
}
