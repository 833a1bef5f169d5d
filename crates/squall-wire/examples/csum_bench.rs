//! Micro-benchmark of the checksum (`squall_wire::checksum`): ns per call and bytes per
//! ns for `checksum::sum` (the run-time dispatch) and every implementation the CPU
//! supports (called directly: `scalar` = `sum_short`, `wide` = the portable
//! compiler-vectorised loop, and the AVX2 / AVX-512 forms), over L1-resident buffers of
//! typical lengths (headers, a 1460-byte MSS payload, a 1492-byte TCP segment, 32 KiB).
//!
//! `taskset -c 1 cargo run --release -p squall-wire --example csum_bench -- [offset] [runs] [len...]`
//! (`offset`: start of the buffer modulo 64, default 34 = an Ethernet + IPv4 header before
//! the TCP segment in a 64-byte-aligned frame; `runs`: timed runs per figure, default 7,
//! the median is printed; lengths up to 32 KiB, default a fixed list). With
//! `CSUM_POOL=<bytes>` each call sums the next of as many buffers as fit in that many
//! bytes (e.g. 1048576: L2-resident rather than L1-resident data, as frames in a ring). Timing is thread CPU time, so preemption by neighbours on a
//! shared machine does not count.

use std::hint::black_box;

use squall_engine::clock::thread_cpu_ns;
use squall_wire::checksum;

const LENGTHS: [usize; 13] = [
    20, 32, 40, 64, 100, 128, 200, 255, 256, 512, 1460, 1492, 32_768,
];

fn main() {
    let mut args = std::env::args().skip(1);
    let offset: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(34) % 64;
    let runs: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(7).max(1);
    let mut lengths: Vec<usize> = args.filter_map(|a| a.parse().ok()).collect();
    lengths.retain(|&l| l <= 32_768);
    if lengths.is_empty() {
        lengths = LENGTHS.to_vec();
    }

    let mut impls: Vec<(&'static str, checksum::SumFn)> = vec![("dispatch", checksum::sum)];
    impls.extend(checksum::implementations());

    // 64-byte-aligned backing store, so `offset` is the real start alignment.
    let pool: usize = std::env::var("CSUM_POOL")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut store = vec![[0u64; 8]; (pool.max(32_768) + 32_768 + 128) / 64];
    let bytes: &mut [u8] = {
        let p = store.as_mut_ptr() as *mut u8;
        let n = store.len() * 64;
        // SAFETY: `store` is a live, exclusively borrowed allocation of `n` bytes, and u8
        // has no alignment or validity requirements; the slice ends with this block.
        unsafe { std::slice::from_raw_parts_mut(p, n) }
    };
    let mut x = 0x2545_f491_4f6c_dd1du64;
    for b in bytes.iter_mut() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
    let buf = &bytes[offset..];

    println!(
        "offset {offset} (mod 64), buffer pool {pool} bytes, median of {runs} runs, thread CPU time"
    );
    print!("{:>7}", "len");
    for (name, _) in &impls {
        print!(" {name:>20}");
    }
    println!("\n{:>7} {:>20}", "", "(ns/call  bytes/ns)");
    let mut sink = 0u16;
    for len in lengths {
        // Buffers one after the other, each starting at `offset` modulo 64.
        let stride = len.next_multiple_of(64);
        let count = (pool / stride).max(1);
        let bufs: Vec<&[u8]> = (0..count)
            .map(|i| &buf[i * stride..i * stride + len])
            .collect();
        let data = bufs[0];
        let want = checksum::sum_reference(data);
        let iters = (64usize << 20).div_ceil(len).max(200_000) as u64;
        let mut samples = vec![Vec::with_capacity(runs); impls.len()];
        for _ in 0..runs {
            // Interleaved so that a noisy period hits every implementation alike.
            for (i, (name, f)) in impls.iter().enumerate() {
                let got = f(data);
                assert!(
                    got == want || (got | want == 0xffff && got & want == 0),
                    "{name} len {len}: {got:#06x} != {want:#06x}"
                );
                let t0 = thread_cpu_ns();
                let mut k = 0;
                for _ in 0..iters {
                    sink ^= f(black_box(bufs[k]));
                    k += 1;
                    if k == count {
                        k = 0;
                    }
                }
                let t1 = thread_cpu_ns();
                samples[i].push((t1 - t0) as f64 / iters as f64);
            }
        }
        print!("{len:>7}");
        for s in &mut samples {
            s.sort_by(f64::total_cmp);
            let ns = s[s.len() / 2];
            print!(" {:>10.2} {:>9.2}", ns, len as f64 / ns);
        }
        println!();
    }
    black_box(sink);
}
