//! The per-flow transmission control block (RFC 9293 §3.3.1), kept compact: 32-bit
//! sequence numbers, flags in bits, rarely used state (out-of-order queue) in a side table
//! referenced by index. Its size is asserted in a test.

use crate::cc::NewReno;
use crate::flowtable::FlowKey;
use crate::rtt::Rtt;
use crate::sendq::SendQueue;

/// Connection states (RFC 9293 §3.3.2). `Listen` is represented by the host's listener
/// table, not by a TCB.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[repr(u8)]
pub enum State {
    /// Free slab entry.
    #[default]
    Closed,
    SynSent,
    SynReceived,
    Established,
    FinWait1,
    FinWait2,
    CloseWait,
    Closing,
    LastAck,
    TimeWait,
}

/// Send an ACK at the next output.
pub const F_ACKNOW: u16 = 1 << 0;
/// The application closed its send side: a FIN follows the queued data.
pub const F_FIN_QUEUED: u16 = 1 << 1;
/// Passive open (accepted from a listener).
pub const F_PASSIVE: u16 = 1 << 2;
/// Nagle's algorithm enabled.
pub const F_NAGLE: u16 = 1 << 3;
/// An RTT measurement is in progress (`rtt_seq`, `rtt_ts`).
pub const F_TIMING: u16 = 1 << 4;
/// Window scaling negotiated.
pub const F_WSCALE: u16 = 1 << 5;
/// on_closed was already reported to the application.
pub const F_REPORTED: u16 = 1 << 6;
/// Output at most one segment ignoring cwnd (fast retransmit / partial ACK).
pub const F_ONE_SEG: u16 = 1 << 7;
/// Force one byte past a zero window (persist probe).
pub const F_FORCE: u16 = 1 << 8;
/// The half-open counter includes this flow.
pub const F_HALF_OPEN: u16 = 1 << 9;
/// Timestamps negotiated (RFC 7323).
pub const F_TS: u16 = 1 << 10;
/// SACK negotiated (RFC 2018).
pub const F_SACK: u16 = 1 << 11;
/// A FIN that arrived out of order is now in sequence: process it.
pub const F_FIN_READY: u16 = 1 << 12;
/// Output stopped because the TX sink was full; the flow is on the host's resume list.
pub const F_TX_BLOCKED: u16 = 1 << 13;
/// The flow is traced: its events go to the host's `FlowTracer` (`crate::trace`).
pub const F_TRACED: u16 = 1 << 14;
/// Output owed after an ACK, waiting for the end of the receive burst (on the host's
/// deferred list).
pub const F_OUT_DEFER: u16 = 1 << 15;

/// Per-flow state.
#[derive(Clone, Copy, Debug, Default)]
pub struct Tcb {
    pub key: FlowKey,
    pub state: State,
    /// RTO backoff: doublings of the retransmission (or persist) timeout. Cleared only by
    /// a valid RTT sample (Karn, RFC 6298 §5) or when the peer's window opens.
    pub backoff: u8,
    /// Expiries the peer has not answered: retransmission timeouts since new data was last
    /// acknowledged, zero-window or keepalive probes since the peer last answered one. The
    /// flow is dropped when it exceeds the configured limit.
    pub retries: u8,
    pub flags: u16,
    /// Send MSS (peer's MSS option, clamped to ours).
    pub mss: u16,
    /// Window scale shifts (0..=14 each): the peer's in the low 4 bits (applied to
    /// received windows, [`Tcb::snd_wscale`]), ours in the high 4 bits (applied to
    /// advertised windows, [`Tcb::rcv_wscale`]).
    pub wscales: u8,
    /// Index of the flow's option set in the host's table (`crate::opts::FlowOpts`).
    pub opt: u8,
    /// Our millisecond clock (low 16 bits) when we last answered an invalid segment
    /// (out of window, PAWS, unsent data, challenge): the per-flow rate limit. A 16-bit
    /// clock wraps every 65.5 s, so rarely one answer more is suppressed; it fits the
    /// TCB's padding.
    pub oow_ms: u16,
    /// Low 16 bits of SND.SML, the end of the last short segment sent (Minshall's Nagle,
    /// Linux `snd_sml`); see [`Tcb::short_unacked`].
    pub snd_sml: u16,
    /// The largest send window the peer has offered, in bytes, at most 65,535 (sender
    /// silly-window avoidance compares sub-segment windows with half of it; a window of
    /// 64 KiB or more leaves every such window below the half).
    pub snd_maxwnd: u16,
    pub snd_una: u32,
    pub snd_nxt: u32,
    pub snd_max: u32,
    pub snd_wnd: u32,
    pub snd_wl1: u32,
    pub snd_wl2: u32,
    pub rcv_nxt: u32,
    /// Bytes received since our last ACK (delayed-ACK policy).
    pub rcv_unacked: u32,
    pub rtt_seq: u32,
    /// Microsecond timestamp (low 32 bits) when `rtt_seq` was sent.
    pub rtt_ts: u32,
    pub cc: NewReno,
    pub rtt: Rtt,
    pub sq: SendQueue,
    /// RFC 7323 TS.Recent: the peer's timestamp to echo.
    pub ts_recent: u32,
    /// Our millisecond clock (low 32 bits) when `ts_recent` was set (PAWS 24-day rule).
    pub ts_recent_age: u32,
    /// Index of this flow's out-of-order queue in the host's side table, or `NO_SIDE`.
    pub ooo: u32,
    /// Index of this flow's SACK scoreboard in the host's side table, or `NO_SIDE`.
    pub sb: u32,
    /// Retransmission-class timer (RTO, SYN retransmit, persist, keepalive, TIME_WAIT), ns; 0 = off.
    pub rexmt_at: u64,
    /// Delayed-ACK deadline, ns; 0 = off.
    pub delack_at: u64,
    /// Deadline the timer wheel is armed with for this flow; 0 = not armed.
    pub wheel_at: u64,
}

/// No side-table entry.
pub const NO_SIDE: u32 = u32::MAX;

impl Tcb {
    /// The peer's window scale shift.
    #[inline(always)]
    pub fn snd_wscale(&self) -> u8 {
        self.wscales & 0x0f
    }
    /// Our window scale shift.
    #[inline(always)]
    pub fn rcv_wscale(&self) -> u8 {
        self.wscales >> 4
    }
    /// Sets both shifts (each clamped to 14, RFC 7323 §2.3).
    #[inline]
    pub fn set_wscales(&mut self, snd: u8, rcv: u8) {
        self.wscales = snd.min(14) | (rcv.min(14) << 4);
    }

    /// Sets SND.WND (and the largest window offered).
    #[inline(always)]
    pub fn set_snd_wnd(&mut self, w: u32) {
        self.snd_wnd = w;
        self.snd_maxwnd = self.snd_maxwnd.max(w.min(65_535) as u16);
    }

    /// Sender silly-window avoidance with nothing in flight (RFC 9293 §3.8.6.2.1, as BSD
    /// and Linux): the peer's window holds less than a segment and less than half the
    /// largest window it has offered, and more data than fits is queued. The data then
    /// waits for a larger window or the persist timer (the rule's override timeout),
    /// which sends what fits.
    #[inline]
    pub fn window_too_small(&self) -> bool {
        let w = self.snd_wnd;
        w < u32::from(self.mss) && w < self.sq.len && 2 * w < u32::from(self.snd_maxwnd)
    }

    #[inline(always)]
    pub fn has(&self, f: u16) -> bool {
        self.flags & f != 0
    }
    /// Bytes received after which an ACK is due: `ack_bytes` where the flow's options
    /// set it (TRex's `tcp.no_delay_counter`), else two full-sized segments (RFC 5681
    /// §4.2). A full-sized segment from the peer is the connection's segment size (the
    /// smaller of both MSS options, less the timestamp option), as Linux's initial
    /// rcv_mss: the peer cannot send more, and may announce less than we do.
    #[inline(always)]
    pub fn ack_every(&self, ack_bytes: u16) -> u32 {
        if ack_bytes != 0 {
            u32::from(ack_bytes)
        } else {
            2 * u32::from(self.mss)
        }
    }
    /// Bytes in flight (sent, unacknowledged, excluding SYN/FIN accounting subtleties).
    #[inline(always)]
    pub fn flight(&self) -> u32 {
        self.snd_max.wrapping_sub(self.snd_una)
    }
    /// Sequence number of our FIN (valid when `F_FIN_QUEUED` and the FIN is not acked).
    #[inline(always)]
    pub fn fin_seq(&self) -> u32 {
        self.snd_una.wrapping_add(self.sq.len)
    }
    /// Minshall's check (Linux `tcp_minshall_check`): a short segment we sent is still
    /// unacknowledged (SND.UNA < SND.SML <= SND.NXT). SND.SML is rebuilt as the latest
    /// sequence number at or below SND.MAX with the stored low 16 bits; with more than
    /// 64 KiB in flight an acknowledged one may alias to an unacknowledged one, which only
    /// makes Nagle hold (the classic rule) rather than send.
    #[inline(always)]
    pub fn short_unacked(&self) -> bool {
        let back = (self.snd_max as u16).wrapping_sub(self.snd_sml);
        let sml = self.snd_max.wrapping_sub(u32::from(back));
        crate::seq::gt(sml, self.snd_una) && crate::seq::le(sml, self.snd_nxt)
    }
    /// States in which our FIN has been queued but not yet acknowledged.
    #[inline(always)]
    pub fn fin_pending(&self) -> bool {
        matches!(
            self.state,
            State::FinWait1 | State::Closing | State::LastAck
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Issue 3 / W3: the per-flow footprint (TCB + flow-table slot at <= 50 % load + timer
    // node) stays within 256 bytes.
    #[test]
    fn per_flow_footprint_within_256_bytes() {
        let tcb = std::mem::size_of::<Tcb>();
        let slot = crate::flowtable::FlowTable::SLOT_BYTES * 2; // table is sized 2x
        let timer_node = crate::host::TIMER_NODE_BYTES; // squall-engine TimerWheel, per token
        eprintln!("TCB {tcb} bytes, footprint {}", tcb + slot + timer_node);
        // 152: SND.SML (Minshall's Nagle) and the per-flow invalid-ACK clock (RFC 5961
        // rate limit) took the last padding of the 144-byte layout and one more word.
        assert!(tcb <= 152, "TCB is {tcb} bytes");
        assert!(
            tcb + slot + timer_node <= 256,
            "footprint {}",
            tcb + slot + timer_node
        );
    }
}
