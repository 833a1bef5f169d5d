//! Per-flow TCP/IP options ([`FlowOpts`]): the settings a traffic profile may vary per
//! template and side (MSS, initial window, delayed ACK, Nagle, RFC 7323/2018 offers,
//! receive window, duplicate-ACK threshold, IPv4 TTL and TOS). A host keeps a small table
//! of option sets; a flow stores only the one-byte index ([`OptsId`]) of its set. The
//! host's default set is [`crate::TcpConfig::opts`].

/// Index of an option set in a host's table ([`crate::TcpHost::add_flow_opts`]).
/// `OptsId::DEFAULT` (0) is the host's default set ([`crate::TcpConfig::opts`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct OptsId(pub u8);

impl OptsId {
    /// The host's default option set (its `TcpConfig::opts`).
    pub const DEFAULT: OptsId = OptsId(0);
}

/// Most option sets per host (the index is one byte).
pub const MAX_OPTS: usize = 256;

/// TCP/IP options of one flow. The host's defaults are [`crate::TcpConfig::opts`]; more
/// sets are added with [`crate::TcpHost::add_flow_opts`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowOpts {
    /// Our MSS (advertised in the SYN / SYN-ACK and upper bound for sending).
    pub mss: u16,
    /// Initial congestion window in segments (1..=20).
    pub init_cwnd: u8,
    /// Receive window we advertise, bytes (above 65,535 only with `wscale`). Constant: the
    /// application consumes data as it is delivered.
    pub rcv_wnd: u32,
    /// Offer window scaling with this shift (RFC 7323 §2); None = do not offer.
    pub wscale: Option<u8>,
    /// Offer/accept timestamps (RFC 7323 §3: RTTM and PAWS).
    pub timestamps: bool,
    /// Offer/accept SACK (RFC 2018; loss recovery per RFC 6675).
    pub sack: bool,
    /// Nagle's algorithm (RFC 9293 §3.7.4).
    pub nagle: bool,
    /// Delayed-ACK timeout (RFC 9293 §3.8.6.3), ns; 0 = ACK every segment immediately.
    pub delack_ns: u64,
    /// One ACK per receive burst: the in-order segments one burst brings are acknowledged
    /// once, at the burst's end, when no data of ours carries the ACK (as Linux ACKs a GRO
    /// super-packet once). Off: an ACK per second full-sized segment as each is processed.
    pub burst_ack: bool,
    /// Received bytes after which an ACK is due at once (TRex's `tcp.no_delay_counter`):
    /// below a segment every segment is acknowledged, above two the ACKs are fewer than
    /// RFC 5681 §4.2 asks (the delayed-ACK timer still bounds the wait); each ACK goes as
    /// it falls due, not merged at a receive burst's end (`burst_ack`). The bytes count
    /// since our last ACK of any kind (TRex's FreeBSD counter keeps the remainder past
    /// its limit, other ACKs not starting it again: the same where the limit is a multiple
    /// of the segments, a few more ACKs there otherwise). 0: every second full-sized
    /// segment.
    pub ack_bytes: u16,
    /// Duplicate ACKs that trigger fast retransmit (RFC 5681 §3.2: 3), 1..=10.
    pub rexmt_thresh: u8,
    /// IPv4 time to live of every segment of the flow.
    pub ttl: u8,
    /// IPv4 type of service (DSCP/ECN byte) of every segment of the flow.
    pub tos: u8,
}

impl FlowOpts {
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
    /// MSS 1460, initial window 2, receive window 65,535, no RFC 7323 / SACK offers, Nagle
    /// off, 40 ms delayed ACK (Linux's minimum delayed-ACK timeout, well below the 200 ms
    /// minimum RTO: a delayed ACK must not race the peer's retransmission timer), fast
    /// retransmit after 3 duplicate ACKs, one ACK per receive burst, an ACK every second
    /// full-sized segment, TTL 64, TOS 0.
    fn default() -> Self {
        FlowOpts {
            mss: 1460,
            init_cwnd: 2,
            rcv_wnd: 65_535,
            wscale: None,
            timestamps: false,
            sack: false,
            nagle: false,
            delack_ns: 40_000_000,
            burst_ack: true,
            ack_bytes: 0,
            rexmt_thresh: 3,
            ttl: 64,
            tos: 0,
        }
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
    fn host_default_set_is_the_config_opts() {
        let cfg = crate::TcpConfig {
            opts: FlowOpts {
                mss: 1000,
                init_cwnd: 4,
                nagle: true,
                ..FlowOpts::default()
            },
            ..crate::TcpConfig::default()
        };
        let host = crate::TcpHost::new(cfg, 0);
        let o = host.flow_opts(OptsId::DEFAULT);
        assert_eq!((o.mss, o.init_cwnd, o.nagle), (1000, 4, true));
        assert_eq!((o.ttl, o.tos, o.rexmt_thresh), (64, 0, 3));
        assert_eq!(FlowOpts::default(), FlowOpts::default().sanitised());
    }
}
