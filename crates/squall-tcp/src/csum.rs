//! Checksum dispatch for the data path: long buffers (received segments) are summed
//! with AVX2 when the CPU has it (runtime detection, cached by std), otherwise by
//! `squall_wire::checksum::sum` (whose long-buffer loop the compiler vectorises with
//! the baseline SSE2).

/// Lengths from which the AVX2 loop is worth the dispatch.
const AVX2_MIN: usize = 256;

/// The folded one's-complement sum of `data` (as `squall_wire::checksum::sum`).
#[inline]
pub fn sum(data: &[u8]) -> u16 {
    #[cfg(target_arch = "x86_64")]
    if data.len() >= AVX2_MIN && std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: `sum_avx2` only requires the AVX2 instruction set, whose presence on
        // this CPU was just checked at run time.
        return unsafe { sum_avx2(data) };
    }
    if data.len() < AVX2_MIN {
        return sum_short(data);
    }
    squall_wire::checksum::sum(data)
}

#[inline(always)]
fn word64(c: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&c[..8]);
    u64::from_ne_bytes(w)
}

/// Short buffers (headers, small segments, partial blocks): 8-byte native-order words
/// added in two chains with end-around carry counted separately (add + adc; 2^64 is 1
/// modulo 0xffff, so each carry counts 1). Equal to `squall_wire::checksum::sum` for
/// every input (tested).
#[inline]
fn sum_short(data: &[u8]) -> u16 {
    let (mut a, mut b, mut carries) = (0u64, 0u64, 0u64);
    let mut chunks = data.chunks_exact(16);
    for c in &mut chunks {
        let (s, o) = a.overflowing_add(word64(&c[..8]));
        a = s;
        carries += o as u64;
        let (s, o) = b.overflowing_add(word64(&c[8..]));
        b = s;
        carries += o as u64;
    }
    let mut rem = chunks.remainder();
    if rem.len() >= 8 {
        let (s, o) = a.overflowing_add(word64(rem));
        a = s;
        carries += o as u64;
        rem = &rem[8..];
    }
    let mut tail = 0u64;
    if rem.len() >= 4 {
        tail += u32::from_ne_bytes([rem[0], rem[1], rem[2], rem[3]]) as u64;
        rem = &rem[4..];
    }
    if rem.len() >= 2 {
        tail += u16::from_ne_bytes([rem[0], rem[1]]) as u64;
        rem = &rem[2..];
    }
    if let Some(&x) = rem.first() {
        tail += u16::from_ne_bytes([x, 0]) as u64;
    }
    // Each term < 2^33: no overflow; fold to 16 bits and convert to the big-endian sum.
    let t = (a & 0xffff_ffff) + (a >> 32) + (b & 0xffff_ffff) + (b >> 32) + carries + tail;
    let t = (t & 0xffff_ffff) + (t >> 32);
    let t = (t & 0xffff) + (t >> 16);
    let t = (t & 0xffff) + (t >> 16);
    u16::from_be(t as u16)
}

/// Blocks of 128 bytes summed into the u32 lanes before they are widened: each lane
/// gains at most 2 * 0xffff per block, so 32,768 blocks stay below 2^32.
#[cfg(target_arch = "x86_64")]
const FLUSH_BLOCKS: usize = 32_768;

/// AVX2 sum: 128 bytes per iteration as four 256-bit vectors of native-order u32
/// words; each word's two 16-bit halves are added into u32 lanes (and, shift, two
/// adds per vector: no carries to track). Lanes are widened to u64 lanes every
/// [`FLUSH_BLOCKS`] blocks; then 32-byte steps, and the last < 32 bytes (at an
/// even offset) are summed by the scalar code and added in one's-complement
/// arithmetic.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn sum_avx2(data: &[u8]) -> u16 {
    use std::arch::x86_64::*;
    let mask16 = _mm256_set1_epi32(0xffff);
    let mask32 = _mm256_set1_epi64x(0xffff_ffff);
    #[inline]
    #[target_feature(enable = "avx2")]
    fn halves(v: __m256i, mask16: __m256i) -> __m256i {
        _mm256_add_epi32(_mm256_and_si256(v, mask16), _mm256_srli_epi32(v, 16))
    }
    #[inline]
    #[target_feature(enable = "avx2")]
    fn widen(a: __m256i, mask32: __m256i) -> __m256i {
        _mm256_add_epi64(_mm256_and_si256(a, mask32), _mm256_srli_epi64(a, 32))
    }
    #[inline]
    #[target_feature(enable = "avx2")]
    fn load(c: &[u8]) -> __m256i {
        assert!(c.len() >= 32);
        // SAFETY: `c` holds at least 32 bytes (checked above; the check folds away
        // at every call site); `loadu` has no alignment requirement.
        unsafe { _mm256_loadu_si256(c.as_ptr() as *const __m256i) }
    }
    // u64 lanes: each gains < 2^35 per flush, so they cannot overflow.
    let mut wide = _mm256_setzero_si256();
    let mut rest = data;
    while rest.len() >= 128 {
        let blocks = (rest.len() / 128).min(FLUSH_BLOCKS);
        let (run, tail) = rest.split_at(blocks * 128);
        let mut a0 = _mm256_setzero_si256();
        let mut a1 = _mm256_setzero_si256();
        let mut a2 = _mm256_setzero_si256();
        let mut a3 = _mm256_setzero_si256();
        for c in run.chunks_exact(128) {
            a0 = _mm256_add_epi32(a0, halves(load(&c[0..32]), mask16));
            a1 = _mm256_add_epi32(a1, halves(load(&c[32..64]), mask16));
            a2 = _mm256_add_epi32(a2, halves(load(&c[64..96]), mask16));
            a3 = _mm256_add_epi32(a3, halves(load(&c[96..128]), mask16));
        }
        let s01 = _mm256_add_epi64(widen(a0, mask32), widen(a1, mask32));
        let s23 = _mm256_add_epi64(widen(a2, mask32), widen(a3, mask32));
        wide = _mm256_add_epi64(wide, _mm256_add_epi64(s01, s23));
        rest = tail;
    }
    while rest.len() >= 32 {
        wide = _mm256_add_epi64(wide, widen(halves(load(rest), mask16), mask32));
        rest = &rest[32..];
    }
    let total = (_mm256_extract_epi64::<0>(wide) as u64)
        + (_mm256_extract_epi64::<1>(wide) as u64)
        + (_mm256_extract_epi64::<2>(wide) as u64)
        + (_mm256_extract_epi64::<3>(wide) as u64);
    // Fold the native-order total and convert it to the big-endian sum.
    let t = (total & 0xffff_ffff) + (total >> 32);
    let t = (t & 0xffff_ffff) + (t >> 32);
    let t = (t & 0xffff) + (t >> 16);
    let t = (t & 0xffff) + (t >> 16);
    let t = (t & 0xffff) + (t >> 16);
    let head = u16::from_be(t as u16);
    squall_wire::checksum::add(head, squall_wire::checksum::sum(rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both zeros of one's-complement arithmetic are the same sum.
    fn same(a: u16, b: u16) -> bool {
        a == b || (a == 0 && b == 0xffff) || (a == 0xffff && b == 0)
    }

    fn random_bytes(n: usize, mut x: u64) -> Vec<u8> {
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    #[test]
    fn dispatch_matches_reference_on_random_lengths_and_offsets() {
        let buf = random_bytes(10_000, 0x1234_5678_9abc_def0);
        for start in 0..40usize {
            for len in [
                0usize, 1, 20, 127, 128, 129, 255, 256, 257, 383, 384, 1460, 1461, 4000, 9000,
            ] {
                let d = &buf[start..start + len];
                assert!(
                    same(sum(d), squall_wire::checksum::sum_reference(d)),
                    "start {start} len {len}"
                );
            }
        }
        for len in 256..700usize {
            let d = &buf[len % 7..len % 7 + len];
            assert!(
                same(sum(d), squall_wire::checksum::sum_reference(d)),
                "len {len}"
            );
        }
    }

    /// The short path gives exactly squall-wire's sum (not just an equal one's-complement
    /// value) for every length below the AVX2 threshold, at odd and even offsets,
    /// including all-ones data (maximal carries) and all zeros.
    #[test]
    fn short_sum_equals_wire_sum() {
        let buf = random_bytes(600, 0x0bad_cafe_f00d_d00d);
        let ones = [0xffu8; 300];
        let zeros = [0u8; 300];
        for start in 0..9usize {
            for len in 0..AVX2_MIN {
                let d = &buf[start..start + len];
                assert_eq!(sum_short(d), squall_wire::checksum::sum(d), "{start} {len}");
                assert_eq!(sum(d), squall_wire::checksum::sum(d), "{start} {len}");
                let o = &ones[start..start + len];
                assert_eq!(sum_short(o), squall_wire::checksum::sum(o), "ones {len}");
                let z = &zeros[start..start + len];
                assert_eq!(sum_short(z), squall_wire::checksum::sum(z), "zeros {len}");
            }
        }
    }

    /// Long enough to widen the lanes more than once (32,768 blocks = 4 MiB): all
    /// ones is the worst case for lane overflow.
    #[test]
    fn dispatch_survives_lane_flush() {
        for len in [4 * 1024 * 1024, 8 * 1024 * 1024 + 131] {
            let ones = vec![0xffu8; len];
            assert!(same(
                sum(&ones),
                squall_wire::checksum::sum_reference(&ones)
            ));
            let d = random_bytes(len, len as u64);
            assert!(same(sum(&d), squall_wire::checksum::sum_reference(&d)));
        }
    }
}
