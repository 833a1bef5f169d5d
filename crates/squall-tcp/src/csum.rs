//! Checksum dispatch for the data path: long buffers (received segments) are summed by
//! `squall_wire::checksum::sum_inline` compiled for AVX2 when the CPU has it (runtime
//! detection, cached by std), otherwise by the baseline `squall_wire::checksum::sum`.

/// Lengths from which the AVX2 build is worth the dispatch (below, the scalar path
/// is as fast).
const AVX2_MIN: usize = 128;

/// The folded one's-complement sum of `data` (as `squall_wire::checksum::sum`).
#[inline]
pub fn sum(data: &[u8]) -> u16 {
    #[cfg(target_arch = "x86_64")]
    if data.len() >= AVX2_MIN && std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: `sum_avx2` only requires the AVX2 instruction set, whose presence on
        // this CPU was just checked at run time.
        return unsafe { sum_avx2(data) };
    }
    squall_wire::checksum::sum(data)
}

/// The generic sum compiled with AVX2 enabled (the vectoriser uses 256-bit lanes).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn sum_avx2(data: &[u8]) -> u16 {
    squall_wire::checksum::sum_inline(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both zeros of one's-complement arithmetic are the same sum.
    fn same(a: u16, b: u16) -> bool {
        a == b || (a == 0 && b == 0xffff) || (a == 0xffff && b == 0)
    }

    #[test]
    fn dispatch_matches_reference_on_random_lengths_and_offsets() {
        let mut x = 0x1234_5678_9abc_def0u64;
        let buf: Vec<u8> = (0..10_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        for start in 0..40usize {
            for len in [
                0usize, 1, 20, 127, 128, 129, 191, 192, 1460, 1461, 4000, 9000,
            ] {
                let d = &buf[start..start + len];
                assert!(
                    same(sum(d), squall_wire::checksum::sum_reference(d)),
                    "start {start} len {len}"
                );
            }
        }
        let ones = vec![0xffu8; 3 * 1024 * 1024 + 7];
        assert!(same(
            sum(&ones),
            squall_wire::checksum::sum_reference(&ones)
        ));
    }
}
