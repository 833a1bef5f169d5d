//! wire64: the floor under every Squall benchmark. Moves 64-byte frames between two threads
//! pinned to two cores over the in-memory wire for a bounded time and prints one JSON line
//! (`{"workload":"wire64","topology":"T-mem2","mpps":..}`, see BENCHMARKS.md).
//!
//! The sender writes every frame's 64 bytes (Ethernet header + sequence number); the
//! receiver reads the header and checks the sequence (a gap or a bad header is an error).
//! A thread that finds the ring full (sender) or empty (receiver) 4096 times in a row
//! yields its core: on a shared machine its peer is then probably descheduled, and
//! spinning would only delay it (on a quiet machine this never triggers).
//!
//! Usage: `cargo run --release -p squall-port --example wire64 -- [--seconds S]
//! [--runs R] [--burst B] [--cores C0,C1] [--ring N] [--frames N] [--same-thread]`
//!
//! The `--seconds` budget (default 3) is split over `--runs` runs (default 3); the line
//! carries the median run (by rate) and every run's rate in `runs_mpps`.
//!
//! `--same-thread` runs sender and receiver in one thread on core C0 (topology `T-mem1`):
//! the pure CPU cost of the wire without cross-core traffic.

use squall_port::mem::{pair, MemConfig};
use squall_port::{FrameBuf, Port};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

const FRAME: usize = 64;
/// Consecutive idle polls (ring empty or full) after which a thread yields its core.
const STALL_YIELD: u32 = 4096;

struct Args {
    same_thread: bool,
    runs: usize,
    seconds: f64,
    burst: usize,
    cores: [usize; 2],
    ring: u32,
    frames: u32,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        same_thread: false,
        runs: 3,
        seconds: 3.0,
        burst: 32,
        cores: [0, 1],
        ring: 1024,
        frames: 4096,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        if k == "--same-thread" {
            a.same_thread = true;
            continue;
        }
        let v = it.next().ok_or(format!("{k} needs a value"))?;
        match k.as_str() {
            "--seconds" => a.seconds = v.parse().map_err(|_| "bad --seconds")?,
            "--burst" => a.burst = v.parse().map_err(|_| "bad --burst")?,
            "--runs" => a.runs = v.parse().map_err(|_| "bad --runs")?,
            "--ring" => a.ring = v.parse().map_err(|_| "bad --ring")?,
            "--frames" => a.frames = v.parse().map_err(|_| "bad --frames")?,
            "--cores" => {
                let c: Vec<usize> = v
                    .split(',')
                    .map(|x| x.parse().map_err(|_| "bad --cores"))
                    .collect::<Result<_, _>>()?;
                if c.len() != 2 {
                    return Err("--cores wants two cores, e.g. 0,1".into());
                }
                a.cores = [c[0], c[1]];
            }
            _ => return Err(format!("unknown option {k}")),
        }
    }
    if !(a.seconds > 0.0 && a.seconds <= 600.0) || a.burst == 0 || a.burst > 512 {
        return Err("--seconds must be in (0, 600], --burst in 1..=512".into());
    }
    if a.runs == 0 || a.runs > 100 {
        return Err("--runs must be in 1..=100".into());
    }
    Ok(a)
}

fn pin(core: usize) -> Result<(), String> {
    // SAFETY: cpu_set_t is plain data; CPU_SET writes inside it; sched_setaffinity reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if core >= libc::CPU_SETSIZE as usize {
            return Err(format!("core {core} out of range"));
        }
        libc::CPU_SET(core, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(format!(
                "cannot pin to core {core}: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    Ok(())
}

/// CPU time of the calling thread in ns.
fn thread_cpu_ns() -> u64 {
    // SAFETY: clock_gettime writes a timespec we own.
    unsafe {
        let mut ts: libc::timespec = std::mem::zeroed();
        libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts);
        ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
    }
}

struct Side {
    frames: u64,
    /// Non-empty bursts (receiver) or tx_burst calls (sender).
    bursts: u64,
    errors: u64,
    cpu_ns: u64,
}

/// Both ends in one thread: fill a burst, send it, receive it, check it, release it.
fn same_thread(args: &Args) {
    if let Err(e) = pin(args.cores[0]) {
        eprintln!("wire64: {e}");
        std::process::exit(1);
    }
    let (mut a, mut b) = pair(MemConfig::default()).expect("mem wire");
    let mut v = Vec::with_capacity(args.burst);
    let mut r = Vec::with_capacity(args.burst);
    let (mut seq, mut next, mut errors) = (0u64, 0u64, 0u64);
    let t0 = Instant::now();
    let cpu0 = thread_cpu_ns();
    let mut rounds = 0u64;
    loop {
        if rounds & 1023 == 0 && t0.elapsed().as_secs_f64() >= args.seconds {
            break;
        }
        rounds += 1;
        a.alloc_tx(&mut v, args.burst);
        for f in v.iter_mut() {
            let _ = f.set_len(FRAME);
            let d = f.data_mut();
            d.fill(0);
            d[12..14].copy_from_slice(&[0x88, 0xb5]);
            d[14..22].copy_from_slice(&seq.to_le_bytes());
            seq += 1;
        }
        a.tx_burst(&mut v);
        b.rx_burst(&mut r, args.burst);
        for f in &r {
            let d = f.data();
            let ok = d[12..14] == [0x88, 0xb5]
                && u64::from_le_bytes(d[14..22].try_into().unwrap_or([0; 8])) == next;
            errors += u64::from(!ok);
            next += 1;
        }
        b.release_all(&mut r);
    }
    let cpu = thread_cpu_ns() - cpu0;
    let secs = t0.elapsed().as_secs_f64();
    errors += seq.abs_diff(next);
    println!(
        "{{\"workload\":\"wire64\",\"topology\":\"T-mem1\",\"mpps\":{:.2},\"seconds\":{:.2},\
         \"frames\":{},\"frame_bytes\":{},\"burst\":{},\"cpu_ns_per_frame\":{:.1},\"errors\":{}}}",
        next as f64 / secs / 1e6,
        secs,
        next,
        FRAME,
        args.burst,
        cpu as f64 / next.max(1) as f64,
        errors
    );
}

fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("wire64: {e}");
            std::process::exit(2);
        }
    };
    if args.same_thread {
        same_thread(&args);
        return;
    }
    let per_run = args.seconds / args.runs as f64;
    let mut runs = Vec::new();
    for _ in 0..args.runs {
        match two_threads(&args, per_run) {
            Ok(r) => runs.push(r),
            Err(e) => {
                eprintln!("wire64: {e}");
                std::process::exit(1);
            }
        }
    }
    let rates: Vec<String> = runs.iter().map(|r| format!("{:.2}", r.mpps)).collect();
    let errors: u64 = runs.iter().map(|r| r.errors).sum();
    runs.sort_by(|a, b| a.mpps.total_cmp(&b.mpps));
    let m = &runs[runs.len() / 2];
    println!(
        "{{\"workload\":\"wire64\",\"topology\":\"T-mem2\",\"mpps\":{:.2},\"seconds\":{:.2},\
         \"frames\":{},\"frame_bytes\":{},\"burst\":{},\"sender_ns_per_frame\":{:.1},\
         \"receiver_ns_per_frame\":{:.1},\"rx_frames_per_burst\":{:.1},\
         \"runs_mpps\":[{}],\"errors\":{}}}",
        m.mpps,
        m.secs,
        m.frames,
        FRAME,
        args.burst,
        m.sender_ns,
        m.receiver_ns,
        m.per_burst,
        rates.join(","),
        errors
    );
}

/// Result of one two-thread run.
struct Run {
    mpps: f64,
    secs: f64,
    frames: u64,
    sender_ns: f64,
    receiver_ns: f64,
    per_burst: f64,
    errors: u64,
}

/// One run of `seconds` with the sender on core C0 and the receiver on core C1.
fn two_threads(args: &Args, seconds: f64) -> Result<Run, String> {
    let (mut tx_port, mut rx_port) = pair(MemConfig {
        frames: args.frames,
        ring_size: args.ring,
        ..MemConfig::default()
    })
    .map_err(|e| e.to_string())?;
    let stop = Arc::new(AtomicBool::new(false));
    let sender_done = Arc::new(AtomicBool::new(false));
    let start = Arc::new(Barrier::new(3));
    let burst = args.burst;
    let [c0, c1] = args.cores;

    let (st, sb, sd) = (stop.clone(), start.clone(), sender_done.clone());
    let sender = std::thread::spawn(move || -> Result<Side, String> {
        pin(c0)?;
        let mut template = [0u8; FRAME];
        template[0..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x0b]);
        template[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x0a]);
        template[12..14].copy_from_slice(&[0x88, 0xb5]); // local experimental ethertype
        let mut v = Vec::with_capacity(burst);
        let mut seq: u64 = 0;
        let mut bursts = 0;
        let mut stalls = 0u32;
        sb.wait();
        let cpu0 = thread_cpu_ns();
        while !st.load(Ordering::Relaxed) {
            bursts += 1;
            let want = burst - v.len();
            if want > 0 {
                let k = tx_port.alloc_tx(&mut v, want);
                let n = v.len();
                for f in &mut v[n - k..] {
                    let _ = f.set_len(FRAME);
                    let d = f.data_mut();
                    d.copy_from_slice(&template);
                    d[14..22].copy_from_slice(&seq.to_le_bytes());
                    seq += 1;
                }
            }
            if tx_port.tx_burst(&mut v) == 0 {
                // Ring full: back off a little instead of hammering the shared line, and
                // give the core away if the receiver seems descheduled.
                std::hint::spin_loop();
                stalls += 1;
                if stalls >= STALL_YIELD {
                    std::thread::yield_now();
                    stalls = 0;
                }
            } else {
                stalls = 0;
            }
        }
        let cpu_ns = thread_cpu_ns() - cpu0;
        let unsent = v.len() as u64;
        tx_port.release_all(&mut v);
        sd.store(true, Ordering::Release);
        Ok(Side {
            frames: seq - unsent,
            bursts,
            errors: 0,
            cpu_ns,
        })
    });

    let (sd, sb) = (sender_done.clone(), start.clone());
    let receiver = std::thread::spawn(move || -> Result<Side, String> {
        pin(c1)?;
        let mut v = Vec::with_capacity(burst);
        let mut next: u64 = 0;
        let mut errors = 0;
        let mut bursts = 0;
        let mut stalls = 0u32;
        sb.wait();
        let cpu0 = thread_cpu_ns();
        loop {
            let n = rx_port.rx_burst(&mut v, burst);
            if n == 0 {
                std::hint::spin_loop();
                stalls += 1;
                if stalls >= STALL_YIELD {
                    std::thread::yield_now();
                    stalls = 0;
                }
                // Stop once the sender is done and everything it sent was taken.
                if sd.load(Ordering::Acquire) && rx_port.rx_burst(&mut v, burst) == 0 {
                    break;
                }
            } else {
                stalls = 0;
                bursts += 1;
            }
            for f in &v {
                let d = f.data();
                let ok = d.len() == FRAME
                    && d[12..14] == [0x88, 0xb5]
                    && u64::from_le_bytes(d[14..22].try_into().unwrap_or([0; 8])) == next;
                errors += u64::from(!ok);
                next += 1;
            }
            rx_port.release_all(&mut v);
        }
        Ok(Side {
            frames: next,
            bursts,
            errors,
            cpu_ns: thread_cpu_ns() - cpu0,
        })
    });

    start.wait();
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(seconds));
    stop.store(true, Ordering::Relaxed);
    let s = sender.join().map_err(|_| "sender thread panicked")??;
    let r = receiver.join().map_err(|_| "receiver thread panicked")??;
    let secs = t0.elapsed().as_secs_f64();
    Ok(Run {
        mpps: r.frames as f64 / secs / 1e6,
        secs,
        frames: r.frames,
        sender_ns: s.cpu_ns as f64 / s.frames.max(1) as f64,
        receiver_ns: r.cpu_ns as f64 / r.frames.max(1) as f64,
        per_burst: r.frames as f64 / r.bursts.max(1) as f64,
        errors: r.errors + s.frames.abs_diff(r.frames),
    })
}
