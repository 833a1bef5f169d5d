//! cksum_speed: a quick measurement of `checksum::sum` (fast path) against
//! `checksum::sum_reference` for the sizes that matter. Informational only;
//! run with `cargo run --release -p squall-wire --example cksum_speed`.

use squall_wire::checksum;
use std::hint::black_box;
use std::time::Instant;

fn time_ns(iters: u32, mut f: impl FnMut() -> u16) -> f64 {
    let t = Instant::now();
    let mut acc = 0u16;
    for _ in 0..iters {
        acc ^= f();
    }
    black_box(acc);
    t.elapsed().as_nanos() as f64 / iters as f64
}

fn main() {
    let data: Vec<u8> = (0..9000u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    println!(
        "{:>6} {:>10} {:>10} {:>8}",
        "bytes", "fast ns", "ref ns", "GB/s"
    );
    for n in [20usize, 32, 40, 64, 576, 1500, 9000] {
        let iters = (20_000_000 / n.max(20)) as u32;
        let d = &data[..n];
        let fast = time_ns(iters, || checksum::sum(black_box(d)));
        let slow = time_ns(iters, || checksum::sum_reference(black_box(d)));
        println!("{n:>6} {fast:>10.2} {slow:>10.2} {:>8.2}", n as f64 / fast);
    }
}
