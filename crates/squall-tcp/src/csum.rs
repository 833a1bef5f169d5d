//! Checksum dispatch for the data path: the one's-complement sum of received segments
//! and payloads, by the fastest implementation this CPU has (run-time detection, cached
//! by std): AVX-512 (with VNNI if present) from 128 bytes, else AVX2 (with
//! AVX-VNNI if present) from 256 bytes, else a portable scalar loop (other
//! architectures: `squall_wire::checksum::sum` for long buffers). Every implementation
//! gives exactly `squall_wire::checksum::sum` (tested); valgrind hides AVX-512, so runs
//! under it take the AVX2 or scalar paths (the tests pass under valgrind).
//!
//! The vector sums read the data as native-order u16 words with the top bit flipped
//! (xor 0x8000, i.e. minus 0x8000 as a signed word), so that `vpmaddwd` against ones,
//! or `vpdpwssd` (its fused form with the accumulate, VNNI), adds each pair of words
//! minus 0x10000 into an i32 lane without saturation; the 0x10000 per lane and vector
//! is added back before the lanes are folded. That is two instructions per vector with
//! VNNI (three without), against four for mask, shift and two adds. Measured with
//! `examples/csum_bench.rs`.

/// Lengths from which the AVX-512 sums beat [`sum_short`] on a Sapphire Rapids core
/// (about equal at 128 bytes, 10-15 % faster at 200, twice as fast from 512 on).
#[cfg(target_arch = "x86_64")]
const ZMM_MIN: usize = 128;

/// Lengths from which the AVX2 sums beat [`sum_short`] (their reduction and scalar tail
/// cost more than the AVX-512 ones).
#[cfg(target_arch = "x86_64")]
const YMM_MIN: usize = 256;

/// Other architectures: lengths from which `squall_wire::checksum::sum` (vectorised by
/// the compiler with the target's baseline SIMD) is used. On x86_64 its SSE2 loop is
/// half as fast as [`sum_short`], which therefore takes every length there.
#[cfg(not(target_arch = "x86_64"))]
const WIRE_MIN: usize = 256;

/// Vectors summed into the i32 lanes before they are folded into the scalar total: a
/// lane's exact (corrected) sum grows by at most 2 * 0xffff per vector, so it stays
/// below 2^32 for up to 32,768 vectors.
#[cfg(target_arch = "x86_64")]
const VEC_CHUNK: usize = 32_000;

/// The folded one's-complement sum of `data` as big-endian 16-bit words, not
/// complemented (exactly `squall_wire::checksum::sum`).
#[inline]
pub fn sum(data: &[u8]) -> u16 {
    #[cfg(target_arch = "x86_64")]
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
    #[cfg(not(target_arch = "x86_64"))]
    if data.len() >= WIRE_MIN {
        return squall_wire::checksum::sum(data);
    }
    sum_short(data)
}

/// A checksum implementation: the folded big-endian one's-complement sum of a buffer.
pub type SumFn = fn(&[u8]) -> u16;

/// Every implementation this CPU can run, by name, as safe function pointers (for the
/// tests and `examples/csum_bench.rs`). Each one sums any length; [`sum`] picks among
/// them by length.
pub fn implementations() -> Vec<(&'static str, SumFn)> {
    #[allow(unused_mut)] // pushed to on x86_64 only
    let mut v: Vec<(&'static str, SumFn)> = vec![("scalar", sum_short)];
    #[cfg(target_arch = "x86_64")]
    {
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
    v
}

/// Folds a native-order sum (any u64) to 16 bits and converts it to the big-endian
/// sum. Zero only if `t` is zero, so it equals every other exact fold of the same data.
#[inline(always)]
fn fold_be(t: u64) -> u16 {
    // < 2^33, then < 2^32; then <= 0x1fffe, then <= 0xffff.
    let t = (t & 0xffff_ffff) + (t >> 32);
    let t = (t & 0xffff_ffff) + (t >> 32);
    let t = (t & 0xffff) + (t >> 16);
    let t = (t & 0xffff) + (t >> 16);
    u16::from_be(t as u16)
}

#[inline(always)]
fn word64(c: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&c[..8]);
    u64::from_ne_bytes(w)
}

/// Native-order sum of `data`, not folded (its value modulo 0xffff is the sum; zero
/// only for all-zero data): 8-byte words added in two chains with end-around carry
/// counted separately (add + adc; 2^64 is 1 modulo 0xffff, so each carry counts 1).
#[inline]
fn short_acc(data: &[u8]) -> u64 {
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
    // Each term < 2^33 (carries < 2^61): no overflow.
    (a & 0xffff_ffff) + (a >> 32) + (b & 0xffff_ffff) + (b >> 32) + carries + tail
}

/// The portable sum (short buffers on every CPU, all buffers on x86_64 CPUs without
/// AVX2): on x86_64 twice as fast as `squall_wire::checksum::sum` from 64 bytes on,
/// whose SSE2 long-buffer loop it also beats (`csum_bench`). Callers that know their
/// buffer is short (below 128 bytes: headers, the partial blocks at a segment's ends)
/// call it directly, inlined without [`sum`]'s dispatch; any length is correct.
#[inline(always)]
pub fn sum_short(data: &[u8]) -> u16 {
    fold_be(short_acc(data))
}

/// The AVX-512 sums: 64 bytes per vector in eight independent accumulators (the
/// `vpdpwssd` latency is 4-5 cycles at one per cycle); the last < 64 bytes are read by
/// one masked load (zero bytes past the end: exactly the padding of an odd trailing
/// byte, and a zero word pair is corrected like any other). `$acc(acc, x, ones)` is
/// the accumulate step.
#[cfg(target_arch = "x86_64")]
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
#[cfg(target_arch = "x86_64")]
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
#[cfg(target_arch = "x86_64")]
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
#[cfg(target_arch = "x86_64")]
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

#[cfg(target_arch = "x86_64")]
zmm_sum!(
    /// AVX-512 VNNI sum (xor, `vpdpwssd` per 64 bytes).
    sum_avx512vnni,
    "avx512f,avx512bw,avx512vnni",
    std::arch::x86_64::_mm512_dpwssd_epi32
);

#[cfg(target_arch = "x86_64")]
zmm_sum!(
    /// AVX-512BW sum (xor, `vpmaddwd`, add per 64 bytes).
    sum_avx512bw,
    "avx512f,avx512bw",
    madd512
);

#[cfg(target_arch = "x86_64")]
ymm_sum!(
    /// AVX-VNNI sum (xor, VEX `vpdpwssd` per 32 bytes).
    sum_avxvnni,
    "avx2,avxvnni",
    std::arch::x86_64::_mm256_dpwssd_avx_epi32
);

#[cfg(target_arch = "x86_64")]
ymm_sum!(
    /// AVX2 sum (xor, `vpmaddwd`, add per 32 bytes).
    sum_avx2,
    "avx2",
    madd256
);

#[cfg(test)]
mod tests {
    use super::*;

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

    /// The dispatch and every implementation this CPU has.
    fn all() -> Vec<(&'static str, SumFn)> {
        let mut v = implementations();
        v.push(("dispatch", sum));
        let names: Vec<&str> = v.iter().map(|(n, _)| *n).collect();
        eprintln!("csum implementations tested: {names:?}");
        v
    }

    /// Every length 0..=1100 at every start alignment 0..64, random and all-ones data
    /// (all-ones is the most carries): exactly squall-wire's sum, for every
    /// implementation.
    #[test]
    fn every_implementation_equals_wire_sum_for_every_length_and_alignment() {
        let impls = all();
        assert!(impls.len() >= 2);
        let random = random_bytes(1100 + 64, 0x1234_5678_9abc_def0);
        let ones = vec![0xffu8; 1100 + 64];
        for start in 0..64usize {
            for len in 0..=1100usize {
                for (kind, buf) in [("random", &random), ("ones", &ones)] {
                    let d = &buf[start..start + len];
                    let want = squall_wire::checksum::sum(d);
                    for (name, f) in &impls {
                        assert_eq!(f(d), want, "{name} {kind} start {start} len {len}");
                    }
                }
            }
        }
    }

    /// Word patterns at the edges of the sign flip (0x8000, 0x7fff, 0xffff, 0x0000,
    /// 0x0001) and all zeros (the sum is 0, not 0xffff), also against the RFC 1071
    /// reference.
    #[test]
    fn sign_flip_edge_patterns() {
        let impls = all();
        let patterns: [[u8; 2]; 6] = [
            [0x80, 0x00],
            [0x00, 0x80],
            [0x7f, 0xff],
            [0xff, 0x7f],
            [0x00, 0x00],
            [0x00, 0x01],
        ];
        for p in patterns {
            let buf: Vec<u8> = p.iter().copied().cycle().take(3000).collect();
            for len in (0..=3000usize).step_by(7).chain([64, 128, 256, 1460, 1461]) {
                let d = &buf[..len];
                let want = squall_wire::checksum::sum(d);
                let r = squall_wire::checksum::sum_reference(d);
                assert!(
                    want == r || (want | r == 0xffff && want & r == 0),
                    "{p:?} {len}"
                );
                if p == [0, 0] {
                    assert_eq!(want, 0);
                }
                for (name, f) in &impls {
                    assert_eq!(f(d), want, "{name} {p:?} len {len}");
                }
            }
        }
    }

    /// Lengths around the point where the vector lanes are folded (VEC_CHUNK vectors of
    /// 32 and 64 bytes) and several MiB, all ones (worst case for lane overflow) and
    /// random, at an odd start.
    #[test]
    fn long_buffers_across_lane_folds() {
        let impls = all();
        let max = 8 * 1024 * 1024 + 131;
        let ones = vec![0xffu8; max + 1];
        let random = random_bytes(max + 1, 0x0bad_cafe_f00d_d00d);
        let mut lens = vec![max, 4 * 1024 * 1024];
        const FOLD_VECS: usize = 32_000;
        #[cfg(target_arch = "x86_64")]
        assert_eq!(FOLD_VECS, VEC_CHUNK);
        for unit in [32usize, 64] {
            for r in [0usize, 1, 31, 63, 64, 65, 127] {
                lens.push(FOLD_VECS * unit + r);
            }
        }
        for len in lens {
            for (kind, buf) in [("ones", &ones), ("random", &random)] {
                let d = &buf[1..1 + len];
                let want = squall_wire::checksum::sum(d);
                for (name, f) in &impls {
                    assert_eq!(f(d), want, "{name} {kind} len {len}");
                }
            }
        }
    }

    /// Buffers that end exactly where their allocation ends (the masked tail load must
    /// not need the bytes after them), at every length up to a few vectors.
    #[test]
    fn exact_size_allocations() {
        let impls = all();
        for len in 0..=300usize {
            let d: Box<[u8]> = random_bytes(len, len as u64 + 7).into_boxed_slice();
            let want = squall_wire::checksum::sum(&d);
            for (name, f) in &impls {
                assert_eq!(f(&d), want, "{name} len {len}");
            }
        }
    }

    /// The dispatch gives the sum of known data (RFC 1071 §3 example, repeated to a
    /// vector length: 0xddf2 times 200 folded).
    #[test]
    fn known_sum() {
        let d = [0x00u8, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(sum(&d), 0xddf2);
        let long: Vec<u8> = d.iter().copied().cycle().take(8 * 200).collect();
        let want = (0xddf2u64 * 200) % 0xffff;
        assert_eq!(sum(&long) as u64, want);
    }
}
