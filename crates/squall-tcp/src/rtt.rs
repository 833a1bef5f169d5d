//! Round-trip time estimator and retransmission timeout per RFC 6298 (with Karn's rule and
//! exponential backoff applied by the caller through [`Rtt::backed_off`]).

/// RTO limits, in microseconds.
#[derive(Clone, Copy, Debug)]
pub struct RtoConfig {
    pub min_us: u32,
    pub max_us: u32,
    pub initial_us: u32,
}

impl Default for RtoConfig {
    fn default() -> Self {
        // RFC 6298 §2.1 initial 1 s; min 200 ms as deployed stacks (RFC 6298 §2.4 allows it
        // to be configured); max 60 s (§2.5).
        RtoConfig {
            min_us: 200_000,
            max_us: 60_000_000,
            initial_us: 1_000_000,
        }
    }
}

/// Smoothed RTT state. `srtt8` is SRTT*8 and `rttvar4` RTTVAR*4 (in us), as in BSD.
#[derive(Clone, Copy, Debug, Default)]
pub struct Rtt {
    srtt8: u32,
    rttvar4: u32,
    /// Current base RTO in microseconds (before backoff).
    rto_us: u32,
}

/// Clock granularity G of RFC 6298 §2, in microseconds.
const G_US: u32 = 1_000;

impl Rtt {
    pub fn new(cfg: &RtoConfig) -> Self {
        Rtt {
            srtt8: 0,
            rttvar4: 0,
            rto_us: cfg.initial_us,
        }
    }

    /// Feeds one RTT measurement (RFC 6298 §2.2/§2.3). Callers apply Karn's rule: never
    /// sample a retransmitted segment.
    pub fn sample(&mut self, r_us: u32, cfg: &RtoConfig) {
        let r = r_us.max(1);
        if self.srtt8 == 0 {
            self.srtt8 = r.saturating_mul(8);
            self.rttvar4 = r.saturating_mul(2); // R/2 * 4
        } else {
            let srtt = self.srtt8 / 8;
            let delta = srtt.abs_diff(r);
            // RTTVAR = 3/4 RTTVAR + 1/4 |SRTT - R|, SRTT = 7/8 SRTT + 1/8 R; saturating:
            // a peer's TSecr can make R as large as an hour.
            self.rttvar4 = (self.rttvar4 - self.rttvar4 / 4).saturating_add(delta);
            self.srtt8 = (self.srtt8 - self.srtt8 / 8).saturating_add(r);
        }
        let rto = (self.srtt8 / 8).saturating_add(G_US.max(self.rttvar4));
        self.rto_us = rto.clamp(cfg.min_us, cfg.max_us);
    }

    /// RFC 6298 §5.7: the SYN (or SYN-ACK) was retransmitted and the handshake gave no RTT
    /// sample: data transmission starts with an RTO of 3 s (if the RTO is below that).
    pub fn syn_retransmitted(&mut self, cfg: &RtoConfig) {
        if self.srtt8 == 0 {
            self.rto_us = self.rto_us.max(3_000_000).min(cfg.max_us);
        }
    }

    /// Smoothed RTT in microseconds (0 before the first sample).
    pub fn srtt_us(&self) -> u32 {
        self.srtt8 / 8
    }
    /// RTT variance in microseconds.
    pub fn rttvar_us(&self) -> u32 {
        self.rttvar4 / 4
    }
    /// Base RTO in microseconds.
    pub fn rto_us(&self) -> u32 {
        self.rto_us
    }
    /// RTO after `backoff` doublings (RFC 6298 §5.5), capped at the maximum.
    pub fn backed_off(&self, backoff: u8, cfg: &RtoConfig) -> u32 {
        let v = (self.rto_us as u64) << backoff.min(20);
        v.min(cfg.max_us as u64) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // RFC 6298 §2.1: before any sample RTO is the initial value.
    #[test]
    fn rfc6298_2_1_initial_rto() {
        let cfg = RtoConfig::default();
        assert_eq!(Rtt::new(&cfg).rto_us(), 1_000_000);
    }

    // RFC 6298 §2.2: first measurement SRTT=R, RTTVAR=R/2, RTO=SRTT+max(G,4*RTTVAR).
    #[test]
    fn rfc6298_2_2_first_sample() {
        let cfg = RtoConfig {
            min_us: 1,
            max_us: 60_000_000,
            initial_us: 1_000_000,
        };
        let mut r = Rtt::new(&cfg);
        r.sample(100_000, &cfg);
        assert_eq!(r.srtt_us(), 100_000);
        assert_eq!(r.rttvar_us(), 50_000);
        assert_eq!(r.rto_us(), 300_000);
    }

    // RFC 6298 §2.3: subsequent samples with alpha=1/8, beta=1/4.
    #[test]
    fn rfc6298_2_3_subsequent_samples() {
        let cfg = RtoConfig {
            min_us: 1,
            max_us: 60_000_000,
            initial_us: 1_000_000,
        };
        let mut r = Rtt::new(&cfg);
        r.sample(100_000, &cfg);
        r.sample(200_000, &cfg);
        // RTTVAR = 3/4*50000 + 1/4*100000 = 62500 ; SRTT = 7/8*100000 + 1/8*200000 = 112500
        assert_eq!(r.rttvar_us(), 62_500);
        assert_eq!(r.srtt_us(), 112_500);
        assert_eq!(r.rto_us(), 112_500 + 250_000);
    }

    // RFC 6298 §2.4: RTO is rounded up to the configured minimum.
    #[test]
    fn rfc6298_2_4_min_rto() {
        let cfg = RtoConfig::default();
        let mut r = Rtt::new(&cfg);
        r.sample(50, &cfg);
        assert_eq!(r.rto_us(), cfg.min_us);
    }

    // RFC 6298 §5.5: back off the timer (doubling), bounded by the maximum (§2.5).
    #[test]
    fn rfc6298_5_5_backoff_doubles_and_caps() {
        let cfg = RtoConfig::default();
        let r = Rtt::new(&cfg);
        assert_eq!(r.backed_off(1, &cfg), 2_000_000);
        assert_eq!(r.backed_off(3, &cfg), 8_000_000);
        assert_eq!(r.backed_off(10, &cfg), cfg.max_us);
    }
}
