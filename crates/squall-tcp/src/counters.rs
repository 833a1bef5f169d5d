//! Per-core TCP counters, named after TRex's (BSD's) `tcps_*` statistics. A plain struct of
//! u64s; the engine can publish snapshots.

macro_rules! counters {
    ($($(#[doc = $d:literal])* $name:ident),* $(,)?) => {
        /// TRex-compatible TCP counters of one core.
        #[derive(Clone, Debug, Default, PartialEq, Eq)]
        pub struct TcpCounters {
            $($(#[doc = $d])* pub $name: u64,)*
        }
        impl TcpCounters {
            /// (name, value) pairs, in declaration order.
            pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
                [$((stringify!($name), self.$name)),*].into_iter()
            }
            /// Adds another block (e.g. to sum cores).
            pub fn add(&mut self, o: &TcpCounters) {
                $(self.$name += o.$name;)*
            }
        }
    };
}

counters! {
    /// connections initiated
    tcps_connattempt,
    /// connections accepted
    tcps_accepts,
    /// connections established
    tcps_connects,
    /// connections closed (includes drops)
    tcps_closed,
    /// segments where we tried to get an RTT
    tcps_segstimed,
    /// times an RTT sample was taken
    tcps_rttupdated,
    /// delayed ACKs sent
    tcps_delack,
    /// total packets sent
    tcps_sndtotal,
    /// data packets sent (first transmissions; window probes are `tcps_sndprobe`)
    tcps_sndpack,
    /// data bytes sent (first transmissions: each byte once)
    tcps_sndbyte,
    /// data packets retransmitted (a segment resending any byte below SND.MAX)
    tcps_sndrexmitpack,
    /// data bytes retransmitted (the bytes below SND.MAX of those segments)
    tcps_sndrexmitbyte,
    /// window probes sent (not counted as data or retransmissions)
    tcps_sndprobe,
    /// control (SYN|FIN|RST) packets sent
    tcps_sndctrl,
    /// ack-only packets sent
    tcps_sndacks,
    /// window-update-only packets sent
    tcps_sndwinup,
    /// total packets received
    tcps_rcvtotal,
    /// packets received in sequence
    tcps_rcvpack,
    /// bytes received in sequence
    tcps_rcvbyte,
    /// packets received with a bad checksum
    tcps_rcvbadsum,
    /// packets received with a bad header/offset
    tcps_rcvbadoff,
    /// packets received too short
    tcps_rcvshort,
    /// duplicate-only packets received
    tcps_rcvduppack,
    /// duplicate-only bytes received
    tcps_rcvdupbyte,
    /// packets with some duplicate data
    tcps_rcvpartduppack,
    /// out-of-order packets received
    tcps_rcvoopack,
    /// out-of-order bytes received
    tcps_rcvoobyte,
    /// out-of-order packets dropped (queue full)
    tcps_rcvoopackdrop,
    /// out-of-order packets (or FINs) not kept: the host's out-of-order memory budget
    /// (`TcpConfig::ooo_budget`) was spent
    tcps_rcvoomemdrop,
    /// urgent pointers received that made urgent data pending or moved it further (each
    /// told to the app: `TcpApp::on_urgent`; the data itself is delivered inline)
    tcps_rcvurg,
    /// packets with data after window
    tcps_rcvpackafterwin,
    /// duplicate ACKs received
    tcps_rcvdupack,
    /// ACKs for unsent data
    tcps_rcvacktoomuch,
    /// ACK packets received
    tcps_rcvackpack,
    /// bytes acked by received ACKs
    tcps_rcvackbyte,
    /// window updates received
    tcps_rcvwinupd,
    /// retransmit timeouts
    tcps_rexmttimeo,
    /// connections dropped in retransmit timeout
    tcps_timeoutdrop,
    /// persist timeouts
    tcps_persisttimeo,
    /// keepalive timeouts
    tcps_keeptimeo,
    /// keepalive probes sent
    tcps_keepprobe,
    /// connections dropped by keepalive
    tcps_keepdrops,
    /// connections dropped after the peer's SYN came (a RST received, or this end
    /// giving up: retransmission, persist or keep-alive timeout, an abort)
    tcps_drops,
    /// embryonic connections dropped
    tcps_conndrops,
    /// fast retransmits
    tcps_fastrexmt,
    /// times header prediction succeeded for pure ACKs
    tcps_predack,
    /// times header prediction succeeded for data packets
    tcps_preddat,
    /// challenge ACKs sent (RFC 5961)
    tcps_challengeack,
    /// challenge ACKs suppressed by the rate limit (RFC 5961 §7)
    tcps_challengeack_limited,
    /// ACKs answering invalid segments (out of window, PAWS, unsent data, challenge)
    /// suppressed by the per-flow limit (`TcpConfig::invalid_ratelimit_ns`)
    tcps_invalidack_limited,
    /// RSTs sent
    tcps_sndrst,
    /// RSTs received and accepted
    tcps_rcvrst,
    /// segments for no connection (answered with RST)
    tcps_noconn,
    /// segments for no connection to an address this host does not own, or from or to a
    /// broadcast, multicast or loopback address (dropped without an answer)
    tcps_rcvnotours,
    /// ICMP / ICMPv6 errors about a connection, its quoted sequence number in
    /// SND.UNA..SND.MAX (RFC 5927 §4.1)
    tcps_icmp_rcvd,
    /// ICMP / ICMPv6 errors ignored: quoting no connection of ours, or a sequence number
    /// outside SND.UNA..SND.MAX
    tcps_icmp_oow,
    /// send MSS lowered by "fragmentation needed" / "packet too big" (path MTU
    /// discovery, RFC 1191, RFC 8201); the flight was sent again in smaller segments
    tcps_pmtu_lowered,
    /// of `tcps_pmtu_lowered`: the destination's MTU could not be kept (the cache of
    /// 65,536 destinations full of valid entries): its new connections start full-sized
    tcps_pmtu_nocache,
    /// connection attempts ended by an ICMP destination unreachable or time exceeded
    /// (also in `tcps_conndrops`)
    tcps_icmp_drops,
    /// SYNs dropped (half-open table full, no cookie)
    tcps_synfull,
    /// SYN cookies sent
    tcps_sc_sendcookie,
    /// connections created from a valid SYN cookie
    tcps_sc_recvcookie,
    /// flows refused because the flow table or slab was full
    tcps_flowfull,
    /// frames not sent because the tx sink had no buffer
    tcps_txfull,
    /// received frames that were not IPv4/TCP or had bad IPv4 headers
    tcps_rcvnottcp,
    /// PAWS rejected segments
    tcps_pawsdrop,
    /// TIME_WAIT flows recycled by a new SYN or connect
    tcps_twrecycled,
    /// flows dropped after the FIN_WAIT_2 timeout
    tcps_finwait2_drops,
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn names_match_trex() {
        let c = TcpCounters {
            tcps_sndtotal: 3,
            ..Default::default()
        };
        let v: Vec<_> = c.iter().collect();
        assert!(v.contains(&("tcps_sndtotal", 3)));
        assert!(v.iter().any(|(n, _)| *n == "tcps_rcvbadsum"));
        let mut s = TcpCounters::default();
        s.add(&c);
        s.add(&c);
        assert_eq!(s.tcps_sndtotal, 6);
    }
}
