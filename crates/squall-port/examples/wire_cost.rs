//! wire_cost: a fixed amount of work on the in-memory wire, for instruction counts.
//!
//! One thread moves exactly `--frames` 64-byte frames from side A to side B in bursts
//! (`alloc_tx`, fill, `tx_burst`, `rx_burst`, check, `release_all`), so a run under
//! callgrind gives the same counts every time (wire64 is time-bounded and spins; this is
//! not). Per-frame cost of the four port calls:
//!
//! ```text
//! cargo build --release -p squall-port --example wire_cost
//! valgrind --tool=callgrind --callgrind-out-file=/tmp/wc.out \
//!     target/release/examples/wire_cost --frames 1000000
//! callgrind_annotate --inclusive=yes /tmp/wc.out | grep 'MemPort as'
//! ```
//! and divide by the frame count printed (one JSON line); `MemPort` functions appear as
//! `<squall_port::mem::MemPort as squall_port::port::Port>::…`. `--echo` sends every frame
//! back from B to A (zero-copy echo: the slot returns to A's free list locally).
//!
//! Usage: `wire_cost [--frames N] [--burst B] [--echo]`

use squall_port::mem::{pair, MemConfig, MemFrame};
use squall_port::{FrameBuf, Port};

fn main() {
    let (mut frames, mut burst, mut echo) = (1_000_000u64, 32usize, false);
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let mut val = || it.next().and_then(|v| v.parse::<u64>().ok());
        match k.as_str() {
            "--frames" => frames = val().unwrap_or(0),
            "--burst" => burst = val().unwrap_or(0) as usize,
            "--echo" => echo = true,
            _ => {
                eprintln!("usage: wire_cost [--frames N] [--burst B] [--echo]");
                std::process::exit(2);
            }
        }
    }
    if frames == 0 || !(1..=512).contains(&burst) {
        eprintln!("wire_cost: --frames must be > 0 and --burst in 1..=512");
        std::process::exit(2);
    }
    let (mut pa, mut pb) = pair(MemConfig::default()).expect("mem wire");
    // Called through `dyn` (behind `black_box`, so the compiler cannot see through it)
    // so that the port calls stay functions of their own and callgrind counts each one;
    // the indirect call costs a few instructions per burst.
    let a: &mut dyn Port<Frame = MemFrame> = std::hint::black_box(&mut pa);
    let b: &mut dyn Port<Frame = MemFrame> = std::hint::black_box(&mut pb);
    let (mut v, mut r) = (Vec::with_capacity(burst), Vec::with_capacity(burst));
    let (mut seq, mut next, mut errors) = (0u64, 0u64, 0u64);
    while seq < frames {
        let want = (frames - seq).min(burst as u64) as usize;
        a.alloc_tx(&mut v, want);
        for f in v.iter_mut() {
            let _ = f.set_len(64);
            f.data_mut()[..8].copy_from_slice(&seq.to_le_bytes());
            seq += 1;
        }
        a.tx_burst(&mut v);
        b.rx_burst(&mut r, burst);
        for f in &r {
            let got = u64::from_le_bytes(f.data()[..8].try_into().unwrap_or([0; 8]));
            errors += u64::from(got != next);
            next = got + 1;
        }
        if echo {
            b.tx_burst(&mut r);
            a.rx_burst(&mut r, burst);
            a.release_all(&mut r);
        } else {
            b.release_all(&mut r);
        }
        // Frames the ring could not take (never with these sizes) are given back.
        a.release_all(&mut v);
    }
    println!(
        "{{\"example\":\"wire_cost\",\"frames\":{},\"burst\":{burst},\"echo\":{echo},\"errors\":{}}}",
        b.stats().rx_frames,
        errors + (b.stats().rx_frames != frames) as u64
    );
}
