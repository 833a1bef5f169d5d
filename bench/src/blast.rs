//! `squall-bench blast tx|rx`: raw frames through squall-port's [`AfPacketPort`], the
//! floor of every Squall figure on a real interface (the `raw-veth` line of
//! `squall-bench veth`, which runs `blast rx` in sq-srv and `blast tx` in sq-cli).
//!
//! `tx` sends frames of `--size` bytes (Ethernet header, local experimental ethertype
//! 0x88b5, a sequence number, zero padding) as fast as the port takes them, in bursts of
//! `--burst`, for `--seconds`. `rx` counts the frames of that ethertype it receives and
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
//! `squall-bench blast tx|rx --iface IF [--seconds S] [--size 64] [--burst 32] [--dst MAC]
//! [--quiet-ms 200]`

use squall_port::afpacket::{AfPacketConfig, AfPacketPort};
use squall_port::{FrameBuf, Port};
use std::time::{Duration, Instant};

const ETHERTYPE: [u8; 2] = [0x88, 0xb5];

struct Args {
    tx: bool,
    iface: String,
    seconds: f64,
    size: usize,
    burst: usize,
    dst: [u8; 6],
    quiet_ms: u64,
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

fn tx(a: &Args, port: &mut AfPacketPort) -> String {
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
                let d = f.data_mut();
                d[..6].copy_from_slice(&a.dst);
                d[6..12].copy_from_slice(&mac);
                d[12..14].copy_from_slice(&ETHERTYPE);
                d[14..22].copy_from_slice(&seq.to_be_bytes());
                d[22..].fill(0);
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

fn rx(a: &Args, port: &mut AfPacketPort) -> String {
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
                if d.len() < 22 || d[12..14] != ETHERTYPE {
                    continue;
                }
                let s = u64::from_be_bytes(d[14..22].try_into().unwrap_or_default());
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
    let mut cfg = AfPacketConfig::new(&a.iface);
    cfg.frames = 4096;
    let mut port = AfPacketPort::open(cfg)?;
    Ok(if a.tx {
        tx(&a, &mut port)
    } else {
        rx(&a, &mut port)
    })
}
