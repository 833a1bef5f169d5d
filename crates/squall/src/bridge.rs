//! `squall bridge`: two real interfaces joined at layer 2 through the in-memory wire's
//! impairment, each direction with its own settings (loss, duplication, reordering,
//! corruption, delay and jitter, a rate limit) — a software netem box for a lab whose
//! kernel has no netem qdisc, or a device under test that drops, delays and reorders.
//!
//! Every frame received on one port is copied into a frame of one side of an in-memory
//! wire pair, whose impairment of that direction decides its fate and time; what comes
//! out of the other side is copied into a frame of the other port and sent. The wire's
//! clock is the monotonic clock, read once per turn. Frames are forwarded as they are
//! (addresses untouched: a bridge, not a router); both ports listen promiscuously.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use squall_port::afpacket::{AfPacketConfig, AfPacketPort};
use squall_port::mem::{pair, ImpairStats, Impairment, MemConfig};
use squall_port::{FrameBuf, Port};

/// Frames moved per port call.
const BURST: usize = 64;

/// What to bridge and how each direction is impaired.
#[derive(Clone, Debug)]
pub struct BridgeConfig {
    /// The interfaces (AF_PACKET, names without `afpacket:`).
    pub a: String,
    pub b: String,
    /// Impairment of frames from `a` to `b`, and from `b` to `a`.
    pub a_to_b: Impairment,
    pub b_to_a: Impairment,
    /// Stop by itself after this long (`None`: until `stop` is set).
    pub duration: Option<Duration>,
}

/// One direction's counts.
#[derive(Clone, Copy, Debug, Default)]
pub struct DirStats {
    /// Frames received on the ingress port.
    pub received: u64,
    /// Frames sent on the egress port.
    pub sent: u64,
    /// Frames that found no room on their way (the wire's pool or ring full, the egress
    /// port's transmit queue full): dropped, not by the impairment.
    pub dropped: u64,
    /// Frames the ingress port could not take whole (longer than the MTU: a super-frame of
    /// a peer with TSO/GSO on) and frames the egress port's kernel refused.
    pub truncated: u64,
    pub refused: u64,
    /// What the impairment did.
    pub impair: ImpairStats,
}

/// The counts of a bridge run.
#[derive(Clone, Copy, Debug, Default)]
pub struct BridgeReport {
    pub a_to_b: DirStats,
    pub b_to_a: DirStats,
    pub elapsed: Duration,
}

/// Parses `afpacket:IF` (or a bare interface name) for `squall bridge`.
pub fn parse_port(spec: &str) -> Result<String, String> {
    let name = spec.strip_prefix("afpacket:").unwrap_or(spec);
    if name.is_empty() || name.contains(':') || name.contains(',') {
        return Err(format!(
            "{spec}: expected an interface (`afpacket:IF` or `IF`; the bridge runs on AF_PACKET)"
        ));
    }
    Ok(name.to_string())
}

fn open(ifname: &str) -> Result<AfPacketPort, String> {
    let mut c = AfPacketConfig::new(ifname);
    // Frames for any MAC cross the bridge, and leave as they came (no super-frames).
    c.promisc = true;
    c.gso = false;
    AfPacketPort::open(c)
}

/// Moves up to a burst of frames from `from` into `to` (copies; frames that find no room
/// are dropped and counted). Returns how many were received.
fn forward<P: Port, Q: Port>(
    from: &mut P,
    to: &mut Q,
    rx: &mut Vec<P::Frame>,
    tx: &mut Vec<Q::Frame>,
    dropped: &mut u64,
) -> usize {
    let n = from.rx_burst(rx, BURST);
    if n == 0 {
        return 0;
    }
    to.alloc_tx(tx, n);
    let mut k = 0;
    for f in rx.iter() {
        let Some(t) = tx.get_mut(k) else {
            *dropped += 1;
            continue;
        };
        let d = f.data();
        if t.set_len(d.len()).is_err() {
            *dropped += 1;
            continue;
        }
        t.data_mut().copy_from_slice(d);
        k += 1;
    }
    from.release_all(rx);
    // Frames allocated but not filled (a frame too long for the other side) go back.
    while tx.len() > k {
        if let Some(t) = tx.pop() {
            to.release(t);
        }
    }
    to.tx_burst(tx);
    *dropped += tx.len() as u64;
    to.release_all(tx);
    n
}

/// Runs the bridge until `stop` is set or the duration ends.
pub fn run_bridge(cfg: &BridgeConfig, stop: Arc<AtomicBool>) -> Result<BridgeReport, String> {
    let mut pa = open(&cfg.a)?;
    let mut pb = open(&cfg.b)?;
    // The wire's frames hold the larger MTU's (up to 16 KiB frames).
    let mtu = u32::from(pa.caps().mtu.max(pb.caps().mtu));
    let frame_size = (mtu + 18 + 128).next_power_of_two().clamp(2048, 16_384);
    if mtu + 18 + 128 > frame_size {
        return Err(format!(
            "bridge: MTU {mtu} is over what the bridge's wire carries (16 KiB frames)"
        ));
    }
    // Room for what the impairment holds: 16,384 frames per side (a 5 ms delay at
    // 500,000 frames/s holds 2,500 of them).
    let mc = MemConfig {
        frames: 16_384,
        ring_size: 16_384,
        frame_size,
        a_to_b: cfg.a_to_b.clone(),
        b_to_a: cfg.b_to_a.clone(),
        ..MemConfig::default()
    };
    let (mut wa, mut wb) = pair(mc).map_err(|e| format!("bridge: the wire: {e:?}"))?;
    let mut r = BridgeReport::default();
    let (mut rx_a, mut rx_b) = (Vec::with_capacity(BURST), Vec::with_capacity(BURST));
    let (mut rx_wa, mut rx_wb): (Vec<_>, Vec<_>) =
        (Vec::with_capacity(BURST), Vec::with_capacity(BURST));
    let (mut tx_a, mut tx_b) = (Vec::with_capacity(BURST), Vec::with_capacity(BURST));
    let (mut tx_wa, mut tx_wb): (Vec<_>, Vec<_>) =
        (Vec::with_capacity(BURST), Vec::with_capacity(BURST));
    let t0 = Instant::now();
    let mut idle = 0u32;
    let mut checked = 0u64;
    while !stop.load(Ordering::Relaxed) && cfg.duration.is_none_or(|d| t0.elapsed() < d) {
        let now = t0.elapsed().as_nanos() as u64;
        // Once a second: an interface removed under the bridge ends the run.
        if now - checked >= 1_000_000_000 {
            checked = now;
            if let Some(gone) = [&cfg.a, &cfg.b]
                .into_iter()
                .find(|n| !squall_port::netif::exists(n))
            {
                return Err(format!("bridge: {gone} is gone"));
            }
        }
        wa.set_time(now);
        wb.set_time(now);
        let mut work = 0;
        // a -> wire (a side) ... wire (b side) -> b, and back.
        work += forward(
            &mut pa,
            &mut wa,
            &mut rx_a,
            &mut tx_wa,
            &mut r.a_to_b.dropped,
        );
        work += forward(
            &mut wb,
            &mut pb,
            &mut rx_wb,
            &mut tx_b,
            &mut r.a_to_b.dropped,
        );
        work += forward(
            &mut pb,
            &mut wb,
            &mut rx_b,
            &mut tx_wb,
            &mut r.b_to_a.dropped,
        );
        work += forward(
            &mut wa,
            &mut pa,
            &mut rx_wa,
            &mut tx_a,
            &mut r.b_to_a.dropped,
        );
        if work == 0 {
            idle += 1;
            // Held frames are due at their time: sleep only while nothing is held.
            if idle > 1000 && wa.next_event_ns().is_none() && wb.next_event_ns().is_none() {
                std::thread::sleep(Duration::from_micros(50));
            }
        } else {
            idle = 0;
        }
    }
    // Each port receives one direction and sends the other.
    (r.a_to_b.received, r.a_to_b.sent) = (pa.stats().rx_frames, pb.stats().tx_frames);
    (r.b_to_a.received, r.b_to_a.sent) = (pb.stats().rx_frames, pa.stats().tx_frames);
    let (xa, xb) = (pa.extra_stats(), pb.extra_stats());
    (r.a_to_b.truncated, r.a_to_b.refused) = (xa.rx_truncated, xb.tx_refused);
    (r.b_to_a.truncated, r.b_to_a.refused) = (xb.rx_truncated, xa.tx_refused);
    r.a_to_b.impair = wa.impair_stats();
    r.b_to_a.impair = wb.impair_stats();
    r.elapsed = t0.elapsed();
    Ok(r)
}

/// The one-line summary of a direction.
pub fn describe(name: &str, d: &DirStats) -> String {
    let i = &d.impair;
    format!(
        "{name}: received {}, sent {}, dropped {} (no room), truncated {} (over the MTU), \
         refused {} (by the kernel); impairment: lost {}, duplicated {}, reordered {}, \
         corrupted {}, delayed {}, rate-dropped {}",
        d.received,
        d.sent,
        d.dropped,
        d.truncated,
        d.refused,
        i.lost,
        i.duplicated,
        i.reordered,
        i.corrupted,
        i.delayed,
        i.rate_dropped
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_afpacket_interfaces() {
        assert_eq!(parse_port("afpacket:sq-b0").unwrap(), "sq-b0");
        assert_eq!(parse_port("eth1").unwrap(), "eth1");
        for bad in ["", "afpacket:", "afxdp:eth0:1", "afpacket:eth0,ring"] {
            assert!(parse_port(bad).is_err(), "{bad}");
        }
    }
}
