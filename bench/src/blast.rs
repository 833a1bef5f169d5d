//! `squall-bench blast tx|rx`: raw frames through squall-port's [`AfPacketPort`] or
//! [`AfXdpPort`] (`--port`), the floor of every Squall figure on a real interface (the
//! `raw-veth` line of `squall-bench veth`, which runs `blast rx` in sq-srv and `blast tx`
//! in sq-cli).
//!
//! `tx` sends frames of `--size` bytes as fast as the port takes them, in bursts of
//! `--burst`, for `--seconds`: over AF_PACKET an Ethernet header with the local
//! experimental ethertype 0x88b5, a sequence number and zero padding; over AF_XDP an IPv4
//! packet (experimental protocol 253) from 198.18.0.2 to 198.18.0.1 carrying the sequence
//! number, since Squall's XDP program steers only IPv4 and ARP for owned addresses to the
//! socket (the receiver owns 198.18.0.1). `rx` counts the frames of that ethertype it receives and
//! the sequence gaps (frames the veth or the socket dropped), from its first frame until
//! none came for `--quiet-ms` (or `--seconds` + 5 s in all). Before the first frame `rx`
//! sleeps 1 ms between polls, so waiting is not billed as work; after it, it polls
//! without pause (the run is saturated); its `cpu_sec` runs from the first frame to the
//! last.
//!
//! Each prints one line of `key=value` pairs on stdout: `frames`, `bytes`, `seconds`
//! (first to last frame for rx, the send loop for tx), `cpu_sec` (the thread's CPU time),
//! `lost` (rx: sequence gaps), `tx_full` (tx: bursts the socket refused in part).
//!
//! Usage (root, in the namespace of the interface):
//! `squall-bench blast tx|rx --iface IF [--port afpacket|afxdp] [--seconds S] [--size 64]
//! [--burst 32] [--dst MAC] [--quiet-ms 200]`

use squall_port::afpacket::{AfPacketConfig, AfPacketPort};
use squall_port::afxdp::{AfXdpConfig, AfXdpPort};
use squall_port::{FrameBuf, Port};
use std::time::{Duration, Instant};

const ETHERTYPE: [u8; 2] = [0x88, 0xb5];
const IPV4: [u8; 2] = [0x08, 0x00];
/// Sender and receiver addresses of the AF_XDP frames (the lab's client and server).
const SRC_IP: [u8; 4] = [198, 18, 0, 2];
const DST_IP: [u8; 4] = [198, 18, 0, 1];

/// How the frames look: what each port type delivers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    /// Ethertype 0x88b5, the sequence number at 14.
    Raw,
    /// IPv4 protocol 253 to [`DST_IP`], the sequence number at 34.
    Ipv4,
}

impl Shape {
    fn seq_at(self) -> usize {
        match self {
            Shape::Raw => 14,
            Shape::Ipv4 => 34,
        }
    }

    /// Writes the headers and sequence number `seq` into frame `d`.
    fn write(self, d: &mut [u8], dst: &[u8; 6], src: &[u8; 6], seq: u64) {
        d[..6].copy_from_slice(dst);
        d[6..12].copy_from_slice(src);
        let at = self.seq_at();
        if self == Shape::Ipv4 {
            d[12..14].copy_from_slice(&IPV4);
            let total = (d.len() - 14) as u16;
            let ip = &mut d[14..34];
            ip.fill(0);
            ip[0] = 0x45;
            ip[2..4].copy_from_slice(&total.to_be_bytes());
            ip[8] = 64;
            ip[9] = 253;
            ip[12..16].copy_from_slice(&SRC_IP);
            ip[16..20].copy_from_slice(&DST_IP);
            let sum = squall_wire::checksum::checksum(ip);
            ip[10..12].copy_from_slice(&sum.to_be_bytes());
        } else {
            d[12..14].copy_from_slice(&ETHERTYPE);
        }
        d[at..at + 8].copy_from_slice(&seq.to_be_bytes());
        d[at + 8..].fill(0);
    }

    /// The sequence number of a received frame of this shape.
    fn seq_of(self, d: &[u8]) -> Option<u64> {
        let at = self.seq_at();
        let ok = match self {
            Shape::Raw => d.get(12..14) == Some(&ETHERTYPE[..]),
            Shape::Ipv4 => d.get(12..14) == Some(&IPV4[..]) && d.get(23) == Some(&253),
        };
        if !ok {
            return None;
        }
        Some(u64::from_be_bytes(d.get(at..at + 8)?.try_into().ok()?))
    }
}

struct Args {
    tx: bool,
    iface: String,
    seconds: f64,
    size: usize,
    burst: usize,
    dst: [u8; 6],
    quiet_ms: u64,
    afxdp: bool,
}

/// `aa:bb:cc:dd:ee:ff` as bytes.
pub fn parse_mac(s: &str) -> Result<[u8; 6], String> {
    let v: Vec<u8> = s
        .split(':')
        .map(|x| u8::from_str_radix(x, 16).map_err(|_| format!("bad MAC {s}")))
        .collect::<Result<_, _>>()?;
    v.try_into().map_err(|_| format!("bad MAC {s}"))
}

fn parse_args(args: &[String]) -> Result<Args, String> {
    let mut it = args.iter().cloned();
    let mode = it.next().ok_or("first argument: tx or rx")?;
    let mut a = Args {
        tx: match mode.as_str() {
            "tx" => true,
            "rx" => false,
            m => return Err(format!("mode {m}: tx or rx")),
        },
        iface: String::new(),
        seconds: 3.0,
        size: 64,
        burst: 32,
        dst: [0x02, 0, 0, 0, 0, 0x01],
        quiet_ms: 200,
        afxdp: false,
    };
    while let Some(k) = it.next() {
        let v = it.next().ok_or(format!("{k} needs a value"))?;
        match k.as_str() {
            "--iface" => a.iface = v,
            "--seconds" => a.seconds = v.parse().map_err(|_| "bad --seconds")?,
            "--size" => a.size = v.parse().map_err(|_| "bad --size")?,
            "--burst" => a.burst = v.parse().map_err(|_| "bad --burst")?,
            "--dst" => a.dst = parse_mac(&v)?,
            "--quiet-ms" => a.quiet_ms = v.parse().map_err(|_| "bad --quiet-ms")?,
            "--port" => {
                a.afxdp = match v.as_str() {
                    "afpacket" => false,
                    "afxdp" => true,
                    p => return Err(format!("--port {p}: afpacket or afxdp")),
                }
            }
            _ => return Err(format!("unknown option {k}")),
        }
    }
    if a.iface.is_empty() {
        return Err("--iface IF is required".into());
    }
    if !(a.seconds > 0.0 && a.seconds <= 600.0 && (60..=1514).contains(&a.size)) {
        return Err("--seconds in (0, 600], --size in 60..=1514".into());
    }
    if a.burst == 0 || a.burst > 64 {
        return Err("--burst in 1..=64".into());
    }
    Ok(a)
}

fn thread_cpu() -> f64 {
    crate::measure::thread_cpu().as_secs_f64()
}

fn tx<P: Port>(a: &Args, port: &mut P, shape: Shape) -> String {
    let mac = port.caps().mac;
    let mut frames = Vec::with_capacity(a.burst);
    let (mut seq, mut sent, mut tx_full) = (0u64, 0u64, 0u64);
    let cpu0 = thread_cpu();
    let t0 = Instant::now();
    let end = t0 + Duration::from_secs_f64(a.seconds);
    while Instant::now() < end {
        if frames.is_empty() {
            port.alloc_tx(&mut frames, a.burst);
            for f in frames.iter_mut() {
                if f.set_len(a.size).is_err() {
                    continue;
                }
                shape.write(f.data_mut(), &a.dst, &mac, seq);
                seq += 1;
            }
        }
        let want = frames.len();
        let n = port.tx_burst(&mut frames);
        sent += n as u64;
        if n < want {
            tx_full += 1;
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    let cpu = thread_cpu() - cpu0;
    port.release_all(&mut frames);
    format!(
        "frames={sent} bytes={} seconds={secs:.6} cpu_sec={cpu:.6} lost=0 tx_full={tx_full}",
        sent * a.size as u64
    )
}

fn rx<P: Port>(a: &Args, port: &mut P, shape: Shape) -> String {
    let mut frames = Vec::with_capacity(a.burst);
    let (mut got, mut bytes, mut lost, mut next) = (0u64, 0u64, 0u64, 0u64);
    let start = Instant::now();
    let hard = start + Duration::from_secs_f64(a.seconds + 5.0);
    let quiet = Duration::from_millis(a.quiet_ms);
    let (mut first, mut last) = (None::<Instant>, start);
    let (mut cpu0, mut cpu_last) = (thread_cpu(), 0.0);
    loop {
        let n = port.rx_burst(&mut frames, a.burst);
        if n > 0 {
            let now = Instant::now();
            if first.is_none() {
                first = Some(now);
                cpu0 = thread_cpu();
            }
            last = now;
            cpu_last = thread_cpu();
            for f in frames.iter() {
                let d = f.data();
                let Some(s) = shape.seq_of(d) else {
                    continue;
                };
                lost += s.saturating_sub(next);
                next = s + 1;
                got += 1;
                bytes += d.len() as u64;
            }
            port.release_all(&mut frames);
            continue;
        }
        let now = Instant::now();
        if now >= hard || (first.is_some() && now - last >= quiet) {
            break;
        }
        if first.is_none() {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    // From the first to the last frame: the wait for more at the end is not billed.
    let cpu = if first.is_some() {
        cpu_last - cpu0
    } else {
        0.0
    };
    let secs = first.map_or(0.0, |f| (last - f).as_secs_f64());
    format!("frames={got} bytes={bytes} seconds={secs:.6} cpu_sec={cpu:.6} lost={lost} tx_full=0")
}

/// Runs `tx` or `rx` as `args` say (the words after `blast`); returns the result line.
pub fn run(args: &[String]) -> Result<String, String> {
    let a = parse_args(args)?;
    if a.afxdp {
        let mut cfg = AfXdpConfig::new(&a.iface, 0);
        if !a.tx {
            let ip = u32::from_be_bytes(DST_IP);
            cfg.owned = vec![(ip, ip)];
        }
        let mut port = AfXdpPort::open(cfg)?;
        return Ok(if a.tx {
            tx(&a, &mut port, Shape::Ipv4)
        } else {
            rx(&a, &mut port, Shape::Ipv4)
        });
    }
    let mut cfg = AfPacketConfig::new(&a.iface);
    cfg.frames = 4096;
    // The floor is the cost of a wire frame through AF_PACKET (past the qdisc).
    cfg.gso = false;
    let mut port = AfPacketPort::open(cfg)?;
    Ok(if a.tx {
        tx(&a, &mut port, Shape::Raw)
    } else {
        rx(&a, &mut port, Shape::Raw)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_of_both_shapes_carry_their_sequence() {
        for shape in [Shape::Raw, Shape::Ipv4] {
            let mut d = vec![0xaau8; 64];
            shape.write(&mut d, &[2, 0, 0, 0, 0, 1], &[2, 0, 0, 0, 0, 2], 77);
            assert_eq!(shape.seq_of(&d), Some(77), "{shape:?}");
            // The other shape does not take it.
            let other = if shape == Shape::Raw {
                Shape::Ipv4
            } else {
                Shape::Raw
            };
            assert_eq!(other.seq_of(&d), None);
        }
        let mut d = vec![0u8; 60];
        Shape::Ipv4.write(&mut d, &[0; 6], &[0; 6], 1);
        // A correct IPv4 header sums to zero (RFC 1071).
        assert_eq!(squall_wire::checksum::checksum(&d[14..34]), 0);
        assert_eq!(u16::from_be_bytes([d[16], d[17]]), 46);
        // Short frames are not read past their end.
        assert_eq!(Shape::Ipv4.seq_of(&d[..30]), None);
    }
}
