//! NewReno congestion control: slow start and congestion avoidance (RFC 5681, with
//! appropriate byte counting RFC 3465, L = 2 SMSS) and fast retransmit / fast recovery with
//! the NewReno partial-ACK rule (RFC 6582).

use crate::seq;

/// Per-flow congestion state (16 bytes).
#[derive(Clone, Copy, Debug, Default)]
pub struct NewReno {
    pub cwnd: u32,
    pub ssthresh: u32,
    /// RFC 6582 "recover": highest sequence sent when loss recovery started.
    pub recover: u32,
    /// Congestion avoidance's progress towards the next cwnd increase, in 1/65,536 of a
    /// cwnd of acked bytes (a byte count would need 32 bits to follow a cwnd above 64 KiB;
    /// this keeps the state in 16 bytes).
    acc: u16,
    pub dupacks: u8,
    pub in_recovery: bool,
}

/// What the sender should do after a duplicate ACK.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DupAck {
    /// Nothing (first or second duplicate, or no outstanding data).
    Nothing,
    /// Third duplicate: retransmit the segment at SND.UNA (RFC 6582 §3.2 step 2).
    FastRetransmit,
    /// Further duplicate in recovery: cwnd inflated, new data may go out (step 3).
    Inflate,
}

/// What the sender should do after an ACK that advances SND.UNA.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NewAck {
    Normal,
    /// Partial ACK in recovery: retransmit the first unacknowledged segment (§3.2 step 5).
    PartialRetransmit,
    /// Full ACK: recovery is over (§3.2 step 6).
    RecoveryDone,
}

impl NewReno {
    /// RFC 5681 §3.1 / configurable initial window (1..=20 segments).
    pub fn new(init_segs: u8, mss: u32, iss: u32) -> Self {
        NewReno {
            cwnd: init_segs.clamp(1, 20) as u32 * mss,
            ssthresh: u32::MAX / 2,
            recover: iss,
            acc: 0,
            dupacks: 0,
            in_recovery: false,
        }
    }

    /// Resets the initial window once the MSS is known (after the handshake).
    pub fn set_initial(&mut self, init_segs: u8, mss: u32) {
        self.cwnd = init_segs.clamp(1, 20) as u32 * mss;
    }

    /// An ACK advanced SND.UNA by `acked` bytes to `ack`.
    pub fn on_new_ack(&mut self, acked: u32, ack: u32, mss: u32, flight_after: u32) -> NewAck {
        self.dupacks = 0;
        if self.in_recovery {
            if seq::ge(ack, self.recover) {
                // Full ACK (RFC 6582 §3.2 step 6, option 1).
                self.in_recovery = false;
                self.cwnd = self.ssthresh.min(flight_after.max(mss) + mss);
                self.acc = 0;
                return NewAck::RecoveryDone;
            }
            // Partial ACK: deflate by the amount acked, add back one SMSS if >= SMSS.
            self.cwnd = self.cwnd.saturating_sub(acked);
            if acked >= mss {
                self.cwnd += mss;
            }
            self.cwnd = self.cwnd.max(mss);
            return NewAck::PartialRetransmit;
        }
        // Keep "recover" from drifting more than 2^30 behind (sequence-space wrap).
        if seq::lt(self.recover, ack.wrapping_sub(1 << 30)) {
            self.recover = ack.wrapping_sub(1);
        }
        if self.cwnd < self.ssthresh {
            // Slow start with ABC, L = 2*SMSS (RFC 3465 §2.2).
            self.cwnd = self.cwnd.saturating_add(acked.min(2 * mss));
        } else {
            // Congestion avoidance: +1 SMSS per cwnd of acked bytes (RFC 5681 §3.1 eq. 3 via
            // ABC), as a fraction of cwnd (rounded up: every ACK makes progress; at most one
            // SMSS per ACK).
            let part = (u64::from(acked) << 16).div_ceil(u64::from(self.cwnd.max(1)));
            let acc = u32::from(self.acc) + part.min(1 << 16) as u32;
            if acc >= 1 << 16 {
                self.cwnd = self.cwnd.saturating_add(mss);
                self.acc = (acc - (1 << 16)) as u16;
            } else {
                self.acc = acc as u16;
            }
        }
        NewAck::Normal
    }

    /// A duplicate ACK arrived (RFC 5681 §2 definition checked by the caller).
    #[cfg(test)]
    pub fn on_dupack(&mut self, snd_una: u32, snd_max: u32, mss: u32, flight: u32) -> DupAck {
        self.on_dupack_thresh(snd_una, snd_max, mss, flight, 3)
    }

    /// [`NewReno::on_dupack`] with `thresh` duplicate ACKs triggering fast retransmit
    /// (RFC 5681 §3.2 uses 3; TRex's `tcp.rexmtthresh`).
    pub fn on_dupack_thresh(
        &mut self,
        snd_una: u32,
        snd_max: u32,
        mss: u32,
        flight: u32,
        thresh: u8,
    ) -> DupAck {
        if flight == 0 {
            self.dupacks = 0;
            return DupAck::Nothing;
        }
        self.dupacks = self.dupacks.saturating_add(1);
        if self.in_recovery {
            self.cwnd = self.cwnd.saturating_add(mss);
            return DupAck::Inflate;
        }
        if self.dupacks == thresh.max(1) {
            return self.enter_recovery(snd_una, snd_max, mss, flight, thresh);
        }
        DupAck::Nothing
    }

    /// Enters loss recovery (fast retransmit) at a duplicate ACK: on the `thresh`-th, or
    /// earlier where the SACK scoreboard already deems SND.UNA lost (RFC 6675 §5 step
    /// 2). RFC 6582 §3.2 step 2: only if the ACK covers more than "recover" (no second
    /// fast retransmit for one window); else nothing.
    pub fn enter_recovery(
        &mut self,
        snd_una: u32,
        snd_max: u32,
        mss: u32,
        flight: u32,
        thresh: u8,
    ) -> DupAck {
        if self.in_recovery || !seq::gt(snd_una, self.recover) {
            return DupAck::Nothing;
        }
        self.ssthresh = (flight / 2).max(2 * mss);
        self.recover = snd_max;
        // Inflated by the segments the duplicate ACKs say have left the network.
        self.cwnd = self.ssthresh + u32::from(thresh.max(1)) * mss;
        self.in_recovery = true;
        DupAck::FastRetransmit
    }

    /// Retransmission timeout (RFC 5681 §3.1 eq. 4; cwnd = 1 SMSS).
    pub fn on_rto(&mut self, flight: u32, mss: u32, snd_max: u32) {
        self.ssthresh = (flight / 2).max(2 * mss);
        self.cwnd = mss;
        self.dupacks = 0;
        self.acc = 0;
        self.in_recovery = false;
        self.recover = snd_max;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    const MSS: u32 = 1000;

    // RFC 5681 §3.1 + RFC 3465: slow start grows by at most 2 SMSS per ACK.
    #[test]
    fn rfc5681_3_1_slow_start() {
        let mut c = NewReno::new(2, MSS, 0);
        assert_eq!(c.cwnd, 2000);
        c.on_new_ack(2000, 2000, MSS, 0);
        assert_eq!(c.cwnd, 4000);
        c.on_new_ack(5000, 7000, MSS, 0);
        assert_eq!(c.cwnd, 6000);
    }

    // RFC 5681 §3.1: congestion avoidance adds one SMSS per window of data acked.
    #[test]
    fn rfc5681_3_1_congestion_avoidance() {
        let mut c = NewReno::new(4, MSS, 0);
        c.ssthresh = 4000;
        for _ in 0..3 {
            c.on_new_ack(1000, 0, MSS, 0);
        }
        assert_eq!(c.cwnd, 4000);
        c.on_new_ack(1000, 0, MSS, 0);
        assert_eq!(c.cwnd, 5000);
    }

    // ... whatever cwnd is: above 64 KiB too (a byte count in 16 bits froze it there), one
    // SMSS per cwnd of acked bytes, the remainder carried.
    #[test]
    fn rfc5681_3_1_congestion_avoidance_above_64_kib() {
        for start in [100_000u32, 1 << 20, 64 << 20] {
            let mut c = NewReno::new(10, 1460, 0);
            c.ssthresh = start;
            c.cwnd = start;
            let mut acked = 0u64;
            let mut windows = 0;
            while windows < 20 {
                c.on_new_ack(2920, 0, 1460, 0);
                acked += 2920;
                if acked >= u64::from(c.cwnd) {
                    acked -= u64::from(c.cwnd);
                    windows += 1;
                }
            }
            let grown = c.cwnd - start;
            assert!(
                (19 * 1460..=21 * 1460).contains(&grown),
                "{start}: +{grown}"
            );
        }
    }

    // RFC 6582 §3.2 steps 2-3: third dupack triggers fast retransmit, more dupacks inflate.
    #[test]
    fn rfc6582_3_2_fast_retransmit_and_inflate() {
        let mut c = NewReno::new(10, MSS, 0);
        assert_eq!(c.on_dupack(100, 10_100, MSS, 10_000), DupAck::Nothing);
        assert_eq!(c.on_dupack(100, 10_100, MSS, 10_000), DupAck::Nothing);
        assert_eq!(
            c.on_dupack(100, 10_100, MSS, 10_000),
            DupAck::FastRetransmit
        );
        assert_eq!(c.ssthresh, 5000);
        assert_eq!(c.cwnd, 8000);
        assert_eq!(c.recover, 10_100);
        assert_eq!(c.on_dupack(100, 10_100, MSS, 10_000), DupAck::Inflate);
        assert_eq!(c.cwnd, 9000);
    }

    // A configured threshold (TRex tcp.rexmtthresh): the thresh-th dupack retransmits and
    // the window is inflated by that many segments.
    #[test]
    fn configurable_dupack_threshold() {
        for thresh in [2u8, 5] {
            let mut c = NewReno::new(10, MSS, 0);
            for _ in 1..thresh {
                let d = c.on_dupack_thresh(100, 10_100, MSS, 10_000, thresh);
                assert_eq!(d, DupAck::Nothing);
            }
            let d = c.on_dupack_thresh(100, 10_100, MSS, 10_000, thresh);
            assert_eq!(d, DupAck::FastRetransmit, "threshold {thresh}");
            assert_eq!(c.cwnd, 5000 + u32::from(thresh) * MSS);
        }
    }

    // RFC 6582 §3.2 step 2: dupacks not covering more than "recover" do not re-enter.
    #[test]
    fn rfc6582_3_2_no_fast_retransmit_below_recover() {
        let mut c = NewReno::new(10, MSS, 0);
        c.on_rto(10_000, MSS, 5000);
        for _ in 0..3 {
            assert_eq!(c.on_dupack(3000, 6000, MSS, 3000), DupAck::Nothing);
        }
        assert!(!c.in_recovery);
    }

    // RFC 6582 §3.2 steps 5-6: partial ACK retransmits, full ACK deflates to ssthresh.
    #[test]
    fn rfc6582_3_2_partial_then_full_ack() {
        let mut c = NewReno::new(10, MSS, 0);
        for _ in 0..3 {
            c.on_dupack(100, 10_100, MSS, 10_000);
        }
        assert_eq!(
            c.on_new_ack(2000, 2100, MSS, 8000),
            NewAck::PartialRetransmit
        );
        assert!(c.in_recovery);
        assert_eq!(c.cwnd, 8000 - 2000 + 1000);
        assert_eq!(c.on_new_ack(8000, 10_100, MSS, 0), NewAck::RecoveryDone);
        assert!(!c.in_recovery);
        assert_eq!(c.cwnd, 2000); // min(ssthresh 5000, flight 0 + mss... floor 2*mss)
    }

    // RFC 5681 §3.1 eq. 4: on RTO cwnd falls to one segment.
    #[test]
    fn rfc5681_3_1_rto_collapses_window() {
        let mut c = NewReno::new(10, MSS, 0);
        c.on_rto(9000, MSS, 5);
        assert_eq!(c.cwnd, MSS);
        assert_eq!(c.ssthresh, 4500);
    }

    #[test]
    fn initial_window_clamped_1_to_20() {
        assert_eq!(NewReno::new(0, MSS, 0).cwnd, MSS);
        assert_eq!(NewReno::new(50, MSS, 0).cwnd, 20 * MSS);
    }
}
