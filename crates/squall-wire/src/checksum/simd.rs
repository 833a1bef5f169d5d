//! The x86_64 vector sums, chosen at run time (detection cached by std): AVX-512 (with
//! VNNI if present) from 128 bytes, else AVX2 (with AVX-VNNI if present) from 256
//! bytes, else the portable [`super::sum_short`]. Every implementation gives exactly
//! [`super::sum_reference`] (tested); valgrind hides AVX-512, so runs under it take the
//! AVX2 or scalar paths (the tests pass under valgrind).
//!
//! The vector sums read the data as native-order u16 words with the top bit flipped
//! (xor 0x8000, i.e. minus 0x8000 as a signed word), so that `vpmaddwd` against ones,
//! or `vpdpwssd` (its fused form with the accumulate, VNNI), adds each pair of words
//! minus 0x10000 into an i32 lane without saturation; the 0x10000 per lane and vector
//! is added back before the lanes are folded. That is two instructions per vector with
//! VNNI (three without), against four for mask, shift and two adds. Measured with
//! `examples/csum_bench.rs`.
//!
//! This is the only module of squall-wire allowed `unsafe` code: the calls of the
//! `#[target_feature]` functions after detection, and the vector loads.

use super::{fold_be, short_acc, sum_short, SumFn};

/// Lengths from which the AVX-512 sums beat [`sum_short`] on a Sapphire Rapids core
/// (about equal at 128 bytes, 10-15 % faster at 200, twice as fast from 512 on).
const ZMM_MIN: usize = 128;

/// Lengths from which the AVX2 sums beat [`sum_short`] (their reduction and scalar tail
/// cost more than the AVX-512 ones).
const YMM_MIN: usize = 256;

/// Vectors summed into the i32 lanes before they are folded into the scalar total: a
/// lane's exact (corrected) sum grows by at most 2 * 0xffff per vector, so it stays
/// below 2^32 for up to 32,768 vectors.
pub(super) const VEC_CHUNK: usize = 32_000;

/// The dispatch behind [`super::sum`] on x86_64.
#[inline]
pub(super) fn sum(data: &[u8]) -> u16 {
    if data.len() >= ZMM_MIN {
        use std::arch::is_x86_feature_detected as has;
        if has!("avx512f") && has!("avx512bw") {
            if has!("avx512vnni") {
                // SAFETY: `sum_avx512vnni` only requires AVX-512F, BW and VNNI, whose
                // presence (with OS support) was just checked at run time.
                return unsafe { sum_avx512vnni(data) };
            }
            // SAFETY: `sum_avx512bw` only requires AVX-512F and BW, checked just above.
            return unsafe { sum_avx512bw(data) };
        }
        if data.len() >= YMM_MIN {
            if has!("avx2") && has!("avxvnni") {
                // SAFETY: `sum_avxvnni` only requires AVX2 and AVX-VNNI, checked here.
                return unsafe { sum_avxvnni(data) };
            }
            if has!("avx2") {
                // SAFETY: `sum_avx2` only requires AVX2, whose presence was just checked.
                return unsafe { sum_avx2(data) };
            }
        }
    }
    sum_short(data)
}

/// Appends the vector implementations this CPU can run to `v`, as safe function
/// pointers.
pub(super) fn implementations(v: &mut Vec<(&'static str, SumFn)>) {
    fn avx2(d: &[u8]) -> u16 {
        // SAFETY: this function is handed out only after AVX2 was detected.
        unsafe { sum_avx2(d) }
    }
    fn avxvnni(d: &[u8]) -> u16 {
        // SAFETY: handed out only after AVX2 and AVX-VNNI were detected.
        unsafe { sum_avxvnni(d) }
    }
    fn avx512bw(d: &[u8]) -> u16 {
        // SAFETY: handed out only after AVX-512F and BW were detected.
        unsafe { sum_avx512bw(d) }
    }
    fn avx512vnni(d: &[u8]) -> u16 {
        // SAFETY: handed out only after AVX-512F, BW and VNNI were detected.
        unsafe { sum_avx512vnni(d) }
    }
    use std::arch::is_x86_feature_detected as has;
    if has!("avx2") {
        v.push(("avx2", avx2));
        if has!("avxvnni") {
            v.push(("avxvnni", avxvnni));
        }
    }
    if has!("avx512f") && has!("avx512bw") {
        v.push(("avx512bw", avx512bw));
        if has!("avx512vnni") {
            v.push(("avx512vnni", avx512vnni));
        }
    }
}

/// The AVX-512 sums: 64 bytes per vector in eight independent accumulators (the
/// `vpdpwssd` latency is 4-5 cycles at one per cycle); the last < 64 bytes are read by
/// one masked load (zero bytes past the end: exactly the padding of an odd trailing
/// byte, and a zero word pair is corrected like any other). `$acc(acc, x, ones)` is
/// the accumulate step.
macro_rules! zmm_sum {
    ($(#[$m:meta])* $name:ident, $features:literal, $acc:path) => {
        $(#[$m])*
        #[target_feature(enable = $features)]
        fn $name(data: &[u8]) -> u16 {
            use std::arch::x86_64::*;
            #[inline]
            #[target_feature(enable = $features)]
            fn load(c: &[u8]) -> __m512i {
                assert!(c.len() >= 64);
                // SAFETY: `c` holds at least 64 bytes (checked above; the check folds
                // away at every call site); `loadu` has no alignment requirement.
                unsafe { _mm512_loadu_si512(c.as_ptr() as *const __m512i) }
            }
            let flip = _mm512_set1_epi16(0x8000u16 as i16);
            let ones = _mm512_set1_epi16(1);
            let mut total = 0u64;
            let mut rest = data;
            loop {
                let full = (rest.len() / 64).min(VEC_CHUNK);
                let (run, tail) = rest.split_at(full * 64);
                let mut a = [_mm512_setzero_si512(); 8];
                let mut blocks = run.chunks_exact(512);
                for b in &mut blocks {
                    for (j, acc) in a.iter_mut().enumerate() {
                        let v = _mm512_xor_si512(load(&b[j * 64..j * 64 + 64]), flip);
                        *acc = $acc(*acc, v, ones);
                    }
                }
                let left = blocks.remainder();
                for (j, acc) in a.iter_mut().enumerate().take(7) {
                    if left.len() >= (j + 1) * 64 {
                        let v = _mm512_xor_si512(load(&left[j * 64..j * 64 + 64]), flip);
                        *acc = $acc(*acc, v, ones);
                    }
                }
                let mut vecs = full;
                let last = tail.len() < 64;
                if last && !tail.is_empty() {
                    let k: __mmask64 = (1u64 << tail.len()) - 1;
                    // SAFETY: the mask enables only the first `tail.len()` (< 64) bytes,
                    // all inside `tail`; masked-off bytes are not accessed (AVX-512
                    // masked loads suppress faults on them) and read as zero.
                    let v = unsafe { _mm512_maskz_loadu_epi8(k, tail.as_ptr() as *const i8) };
                    a[7] = $acc(a[7], _mm512_xor_si512(v, flip), ones);
                    vecs += 1;
                }
                // Each lane is its exact pair sum minus 0x10000 per vector, modulo 2^32;
                // the exact sum is below 2^32 (VEC_CHUNK), so adding the 0x10000s back
                // modulo 2^32 restores it. Then each lane is folded to <= 0x1fffe (same
                // value modulo 0xffff, zero only if it was zero), so 16 add up in u32.
                let s0 = _mm512_add_epi32(_mm512_add_epi32(a[0], a[1]), _mm512_add_epi32(a[2], a[3]));
                let s1 = _mm512_add_epi32(_mm512_add_epi32(a[4], a[5]), _mm512_add_epi32(a[6], a[7]));
                let fix = _mm512_set1_epi32((vecs as u32).wrapping_mul(0x10000) as i32);
                let lanes = _mm512_add_epi32(_mm512_add_epi32(s0, s1), fix);
                let lanes = _mm512_add_epi32(
                    _mm512_and_si512(lanes, _mm512_set1_epi32(0xffff)),
                    _mm512_srli_epi32::<16>(lanes),
                );
                total += _mm512_reduce_add_epi32(lanes) as u32 as u64;
                if last {
                    return fold_be(total);
                }
                rest = tail;
            }
        }
    };
}

/// The AVX2 sums: as [`zmm_sum`] with 32-byte vectors, and the last < 32 bytes summed
/// by the scalar code (AVX2 has no byte-masked loads).
macro_rules! ymm_sum {
    ($(#[$m:meta])* $name:ident, $features:literal, $acc:path) => {
        $(#[$m])*
        #[target_feature(enable = $features)]
        fn $name(data: &[u8]) -> u16 {
            use std::arch::x86_64::*;
            #[inline]
            #[target_feature(enable = $features)]
            fn load(c: &[u8]) -> __m256i {
                assert!(c.len() >= 32);
                // SAFETY: `c` holds at least 32 bytes (checked above; the check folds
                // away at every call site); `loadu` has no alignment requirement.
                unsafe { _mm256_loadu_si256(c.as_ptr() as *const __m256i) }
            }
            let flip = _mm256_set1_epi16(0x8000u16 as i16);
            let ones = _mm256_set1_epi16(1);
            let mut total = 0u64;
            let mut rest = data;
            while rest.len() >= 32 {
                let full = (rest.len() / 32).min(VEC_CHUNK);
                let (run, tail) = rest.split_at(full * 32);
                let mut a = [_mm256_setzero_si256(); 8];
                let mut blocks = run.chunks_exact(256);
                for b in &mut blocks {
                    for (j, acc) in a.iter_mut().enumerate() {
                        let v = _mm256_xor_si256(load(&b[j * 32..j * 32 + 32]), flip);
                        *acc = $acc(*acc, v, ones);
                    }
                }
                let left = blocks.remainder();
                for (j, acc) in a.iter_mut().enumerate().take(7) {
                    if left.len() >= (j + 1) * 32 {
                        let v = _mm256_xor_si256(load(&left[j * 32..j * 32 + 32]), flip);
                        *acc = $acc(*acc, v, ones);
                    }
                }
                // As in `zmm_sum`: restore the exact lane sums, fold, add 8 lanes.
                let s0 = _mm256_add_epi32(_mm256_add_epi32(a[0], a[1]), _mm256_add_epi32(a[2], a[3]));
                let s1 = _mm256_add_epi32(_mm256_add_epi32(a[4], a[5]), _mm256_add_epi32(a[6], a[7]));
                let fix = _mm256_set1_epi32((full as u32).wrapping_mul(0x10000) as i32);
                let lanes = _mm256_add_epi32(_mm256_add_epi32(s0, s1), fix);
                let lanes = _mm256_add_epi32(
                    _mm256_and_si256(lanes, _mm256_set1_epi32(0xffff)),
                    _mm256_srli_epi32::<16>(lanes),
                );
                let s = _mm_add_epi32(
                    _mm256_castsi256_si128(lanes),
                    _mm256_extracti128_si256::<1>(lanes),
                );
                let s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
                let s = _mm_add_epi32(s, _mm_shuffle_epi32::<1>(s));
                total += _mm_cvtsi128_si32(s) as u32 as u64;
                rest = tail;
            }
            fold_be(total + short_acc(rest))
        }
    };
}

/// `acc + madd(x, ones)` on 512 bits (AVX-512BW without VNNI).
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
fn madd512(
    acc: std::arch::x86_64::__m512i,
    x: std::arch::x86_64::__m512i,
    ones: std::arch::x86_64::__m512i,
) -> std::arch::x86_64::__m512i {
    use std::arch::x86_64::*;
    _mm512_add_epi32(acc, _mm512_madd_epi16(x, ones))
}

/// `acc + madd(x, ones)` on 256 bits (AVX2).
#[inline]
#[target_feature(enable = "avx2")]
fn madd256(
    acc: std::arch::x86_64::__m256i,
    x: std::arch::x86_64::__m256i,
    ones: std::arch::x86_64::__m256i,
) -> std::arch::x86_64::__m256i {
    use std::arch::x86_64::*;
    _mm256_add_epi32(acc, _mm256_madd_epi16(x, ones))
}

zmm_sum!(
    /// AVX-512 VNNI sum (xor, `vpdpwssd` per 64 bytes).
    sum_avx512vnni,
    "avx512f,avx512bw,avx512vnni",
    std::arch::x86_64::_mm512_dpwssd_epi32
);

zmm_sum!(
    /// AVX-512BW sum (xor, `vpmaddwd`, add per 64 bytes).
    sum_avx512bw,
    "avx512f,avx512bw",
    madd512
);

ymm_sum!(
    /// AVX-VNNI sum (xor, VEX `vpdpwssd` per 32 bytes).
    sum_avxvnni,
    "avx2,avxvnni",
    std::arch::x86_64::_mm256_dpwssd_avx_epi32
);

ymm_sum!(
    /// AVX2 sum (xor, `vpmaddwd`, add per 32 bytes).
    sum_avx2,
    "avx2",
    madd256
);
