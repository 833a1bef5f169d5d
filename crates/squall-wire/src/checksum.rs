//! The Internet checksum (RFC 1071), the one implementation of the workspace: full
//! one's-complement sums (run-time dispatched SIMD on x86_64, a portable scalar form for
//! short buffers), the fold of an accumulated sum, the IPv4 pseudo-header sum, and
//! incremental updates (RFC 1624, eqn. 3).
//!
//! Conventions: a *sum* is the folded 16-bit one's-complement sum of the
//! big-endian 16-bit words (an odd trailing byte is padded with zero), not
//! complemented; it is 0 only for all-zero data. The *checksum* placed in a header
//! is `!sum`. A header whose checksum field is correct sums (with the field
//! included) to `0xffff`. An *accumulator* is an unfolded u64 of such sums and
//! 16/32-bit big-endian values (congruent modulo 0xffff); [`fold`] folds it.
//!
//! The sums read the data in native byte order (one's-complement addition is byte-order
//! independent, RFC 1071 §2(B)) and byte-swap the folded result once. [`sum`] picks the
//! fastest implementation for the length and CPU: on x86_64 the AVX-512 (VNNI) or AVX2
//! (AVX-VNNI) sums of the `simd` submodule for long buffers, detected at run time,
//! and [`sum_short`] below them; elsewhere a loop the compiler vectorises with the
//! target's baseline SIMD for long buffers. [`implementations`] lists every one this CPU
//! can run (tests, `examples/csum_bench.rs`).

#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
mod simd;

/// Folds an accumulator (any u64, congruent modulo 0xffff to the sum it stands for) to
/// 16 bits with end-around carry. Returns 0 only for 0, otherwise the unique value in
/// 1..=0xffff congruent to `acc` modulo 0xffff. Byte-order neutral: the fold of a
/// native-order accumulator is the byte swap of the fold of the big-endian one.
#[inline(always)]
pub fn fold(acc: u64) -> u16 {
    // lo + hi + carry cannot overflow: if lo + hi wrapped, it is at most 2^32 - 2.
    let (s, c) = (acc as u32).overflowing_add((acc >> 32) as u32);
    let s = s.wrapping_add(c as u32);
    let (t, c) = (s as u16).overflowing_add((s >> 16) as u16);
    t.wrapping_add(c as u16)
}

/// Folds a native-order accumulator and converts it to the big-endian sum.
#[inline(always)]
fn fold_be(t: u64) -> u16 {
    // The sum of native-order words is the byte swap of the sum of big-endian words on
    // a little-endian machine, identical on big-endian.
    u16::from_be(fold(t))
}

/// Add one native-order u64 to the accumulator without losing carries: the
/// two 32-bit halves are added separately (each add is < 2^33, so 2^31 chunks
/// fit, i.e. any buffer smaller than 16 GiB).
#[inline(always)]
fn add_u64(acc: u64, v: u64) -> u64 {
    acc + (v & 0xffff_ffff) + (v >> 32)
}

#[inline(always)]
fn read_u64(c: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&c[..8]);
    u64::from_ne_bytes(a)
}

/// Sum of the bytes that remain after the 8-byte chunks (0..=7 bytes).
#[inline(always)]
fn sum_tail(mut rem: &[u8]) -> u64 {
    let mut acc = 0u64;
    if rem.len() >= 4 {
        acc += u32::from_ne_bytes([rem[0], rem[1], rem[2], rem[3]]) as u64;
        rem = &rem[4..];
    }
    if rem.len() >= 2 {
        acc += u16::from_ne_bytes([rem[0], rem[1]]) as u64;
        rem = &rem[2..];
    }
    if let Some(&b) = rem.first() {
        acc += u16::from_ne_bytes([b, 0]) as u64;
    }
    acc
}

/// Unfolded native-order accumulation for a length known at compile time;
/// the compiler unrolls it completely.
#[inline(always)]
fn acc_fixed<const N: usize>(a: &[u8; N]) -> u64 {
    let mut acc = 0u64;
    let chunks = a.chunks_exact(8);
    let rem = chunks.remainder();
    for c in chunks {
        acc = add_u64(acc, read_u64(c));
    }
    acc + sum_tail(rem)
}

/// Native-order sum of `data`, not folded (its value modulo 0xffff is the sum; zero
/// only for all-zero data): 8-byte words added in two chains with end-around carry
/// counted separately (add + adc; 2^64 is 1 modulo 0xffff, so each carry counts 1).
#[inline]
fn short_acc(data: &[u8]) -> u64 {
    let (mut a, mut b, mut carries) = (0u64, 0u64, 0u64);
    let mut chunks = data.chunks_exact(16);
    for c in &mut chunks {
        let (s, o) = a.overflowing_add(read_u64(&c[..8]));
        a = s;
        carries += o as u64;
        let (s, o) = b.overflowing_add(read_u64(&c[8..]));
        b = s;
        carries += o as u64;
    }
    let mut rem = chunks.remainder();
    if rem.len() >= 8 {
        let (s, o) = a.overflowing_add(read_u64(rem));
        a = s;
        carries += o as u64;
        rem = &rem[8..];
    }
    // Each term < 2^33 (carries < 2^61): no overflow.
    (a & 0xffff_ffff) + (a >> 32) + (b & 0xffff_ffff) + (b >> 32) + carries + sum_tail(rem)
}

/// The portable scalar sum (short buffers on every CPU, all buffers on x86_64 CPUs
/// without AVX2, where it also beats the compiler-vectorised SSE2 loop of
/// `sum_wide`: `csum_bench`). Callers that know their buffer is short (below 128
/// bytes: headers, the partial blocks at a segment's ends) call it directly, inlined
/// without [`sum`]'s dispatch; any length is correct.
#[inline(always)]
pub fn sum_short(data: &[u8]) -> u16 {
    fold_be(short_acc(data))
}

/// The sum of two short pieces of one buffer, each counted from its own start: `a` and
/// `b` must start at positions of the same parity (then the words of both line up, and
/// one fold serves the two). Equal to the fold of `sum_short(a) + sum_short(b)`.
#[inline(always)]
pub fn sum_short2(a: &[u8], b: &[u8]) -> u16 {
    // Each accumulator is below 2^62 (see `short_acc`): their sum cannot overflow.
    fold_be(short_acc(a) + short_acc(b))
}

/// Other architectures: lengths from which `sum_wide` (vectorised by the compiler
/// with the target's baseline SIMD) is used by [`sum`].
#[cfg(not(target_arch = "x86_64"))]
const WIDE_MIN: usize = 512;

/// Blocks of 64 bytes accumulated in the u32 lanes before they are flushed into
/// the u64 total: each lane gains at most 2 * 0xffff per block, so 32,768 blocks
/// stay below 2^32.
const WIDE_FLUSH: u32 = 32_768;

/// Portable sum for long buffers, written so that the compiler vectorises it with the
/// baseline SIMD of the target (SSE2 on x86_64): the data is read as 16 native-order
/// u32 words per 64-byte block, and each word's two 16-bit halves are added into one of
/// 16 u32 lanes (mask, shift, two adds per 4 lanes at a time; no carries to track
/// because the lanes are flushed into a u64 long before they can overflow). Used by
/// [`sum`] from 512 bytes on architectures other than x86_64.
#[inline(never)]
fn sum_wide(data: &[u8]) -> u16 {
    let mut total = 0u64;
    let mut rest = data;
    while rest.len() >= 64 {
        // At most WIDE_FLUSH blocks per pass, so no lane can overflow.
        let take = (rest.len() / 64).min(WIDE_FLUSH as usize) * 64;
        let (run, tail) = rest.split_at(take);
        let mut lanes = [0u32; 16];
        for c in run.chunks_exact(64) {
            let (words, _) = c.as_chunks::<4>();
            for (w, lane) in words.iter().zip(lanes.iter_mut()) {
                let w = u32::from_ne_bytes(*w);
                *lane += (w & 0xffff) + (w >> 16);
            }
        }
        total += lanes.iter().map(|&l| l as u64).sum::<u64>();
        rest = tail;
    }
    fold_be(total + short_acc(rest))
}

/// The folded one's-complement sum of `data` as big-endian 16-bit words (not
/// complemented), by the fastest implementation for its length on this CPU. The sizes
/// that dominate the data path (20-byte IPv4 header, 20/32/40-byte TCP headers: pure
/// ACKs, with timestamps) are summed fully unrolled.
#[inline]
pub fn sum(data: &[u8]) -> u16 {
    if let Ok(a) = <&[u8; 20]>::try_from(data) {
        return fold_be(acc_fixed(a));
    }
    if let Ok(a) = <&[u8; 32]>::try_from(data) {
        return fold_be(acc_fixed(a));
    }
    if let Ok(a) = <&[u8; 40]>::try_from(data) {
        return fold_be(acc_fixed(a));
    }
    #[cfg(target_arch = "x86_64")]
    {
        simd::sum(data)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        if data.len() >= WIDE_MIN {
            sum_wide(data)
        } else {
            sum_short(data)
        }
    }
}

/// A checksum implementation: the folded big-endian one's-complement sum of a buffer.
pub type SumFn = fn(&[u8]) -> u16;

/// Every implementation this CPU can run, by name, as safe function pointers (for the
/// tests and `examples/csum_bench.rs`). Each one sums any length; [`sum`] picks among
/// them by length.
pub fn implementations() -> Vec<(&'static str, SumFn)> {
    #[allow(unused_mut)] // pushed to on x86_64 only
    let mut v: Vec<(&'static str, SumFn)> = vec![("scalar", sum_short), ("wide", sum_wide)];
    #[cfg(target_arch = "x86_64")]
    simd::implementations(&mut v);
    v
}

/// Sum of a 20-byte header (e.g. an IPv4 header without options), fully unrolled.
#[inline]
pub fn sum20(data: &[u8; 20]) -> u16 {
    fold_be(acc_fixed(data))
}

/// `acc` plus the sum of `data` (an accumulator, for [`fold`]). `data` must start at an
/// even offset from the other regions summed into `acc`.
#[inline]
pub fn accumulate(acc: u64, data: &[u8]) -> u64 {
    acc + sum(data) as u64
}

/// One's-complement addition of two folded sums (both must cover regions
/// that start at an even offset relative to each other).
#[inline]
pub const fn add(a: u16, b: u16) -> u16 {
    let s = a as u32 + b as u32;
    ((s & 0xffff) + (s >> 16)) as u16
}

/// The checksum to store in a header: `!sum(data)`.
#[inline]
pub fn checksum(data: &[u8]) -> u16 {
    !sum(data)
}

/// The IPv4 pseudo-header (RFC 9293 §3.1, RFC 768) as an accumulator, for addresses
/// as host-order u32 and an upper-layer `length` (TCP header + data, or UDP length):
/// add the segment's sum and [`fold`].
#[inline(always)]
pub fn pseudo_header_ipv4_acc(src: u32, dst: u32, protocol: u8, length: usize) -> u64 {
    src as u64 + dst as u64 + protocol as u64 + length as u64
}

/// The sum of the IPv4 pseudo-header (RFC 9293 §3.1, RFC 768) for an upper
/// layer segment of `length` bytes (TCP header + data, or UDP length).
#[inline]
pub fn pseudo_header_ipv4(
    src: &crate::Ipv4Address,
    dst: &crate::Ipv4Address,
    protocol: u8,
    length: u32,
) -> u16 {
    fold(pseudo_header_ipv4_acc(
        u32::from_be_bytes(src.0),
        u32::from_be_bytes(dst.0),
        protocol,
        length as usize,
    ))
}

/// The IPv6 pseudo-header (RFC 8200 §8.1: source, destination, upper-layer length as 32
/// bits, three zero bytes and the next header) as an accumulator: add the upper-layer
/// packet's sum and [`fold`]. The same for TCP, UDP and ICMPv6.
#[inline(always)]
pub fn pseudo_header_ipv6_acc(
    src: &[u8; 16],
    dst: &[u8; 16],
    next_header: u8,
    length: usize,
) -> u64 {
    // 16-byte addresses as two u64 halves each, big-endian, added with end-around carry
    // (a ones'-complement sum modulo 2^64 - 1, which 0xffff divides: the folded sum is
    // the same), then split into 32-bit halves as the accumulator wants them.
    let half = |a: &[u8; 16], k: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&a[k..k + 8]);
        u64::from_be_bytes(b)
    };
    let add = |x: u64, y: u64| {
        let (s, c) = x.overflowing_add(y);
        s + c as u64 // s <= 2^64 - 2 when it carried
    };
    let s = add(
        add(half(src, 0), half(src, 8)),
        add(half(dst, 0), half(dst, 8)),
    );
    add_u64(next_header as u64 + (length as u64 & 0xffff_ffff), s)
}

/// The sum of the IPv6 pseudo-header (RFC 8200 §8.1) for an upper-layer packet of
/// `length` bytes with next header `next_header` (6 TCP, 17 UDP, 58 ICMPv6).
#[inline]
pub fn pseudo_header_ipv6(
    src: &crate::Ipv6Address,
    dst: &crate::Ipv6Address,
    next_header: u8,
    length: u32,
) -> u16 {
    fold(pseudo_header_ipv6_acc(
        &src.0,
        &dst.0,
        next_header,
        length as usize,
    ))
}

/// An address family whose pseudo-header the TCP, UDP and ICMPv6 checksums cover:
/// the views' checksum methods are generic over it, so one method serves IPv4
/// ([`pseudo_header_ipv4`]) and IPv6 ([`pseudo_header_ipv6`]).
pub trait PseudoHeader {
    /// True if a UDP checksum of zero means "no checksum" (IPv4, RFC 768); over IPv6
    /// it is invalid (RFC 8200 §8.1) and the datagram is discarded.
    const ZERO_UDP_CHECKSUM_OK: bool;
    /// The pseudo-header sum for an upper-layer packet of `length` bytes.
    fn pseudo_header_sum(src: &Self, dst: &Self, protocol: u8, length: u32) -> u16;
}

impl PseudoHeader for crate::Ipv4Address {
    const ZERO_UDP_CHECKSUM_OK: bool = true;
    #[inline]
    fn pseudo_header_sum(src: &Self, dst: &Self, protocol: u8, length: u32) -> u16 {
        pseudo_header_ipv4(src, dst, protocol, length)
    }
}

impl PseudoHeader for crate::Ipv6Address {
    const ZERO_UDP_CHECKSUM_OK: bool = false;
    #[inline]
    fn pseudo_header_sum(src: &Self, dst: &Self, protocol: u8, length: u32) -> u16 {
        pseudo_header_ipv6(src, dst, protocol, length)
    }
}

/// Incrementally update checksum `hc` after a 16-bit field changed from
/// `old` to `new`: `HC' = ~(~HC + ~m + m')` (RFC 1624, eqn. 3).
///
/// One degenerate case cannot be told apart incrementally: if every covered
/// byte other than the checksum is zero after the change, the full
/// computation gives 0xffff but this gives 0x0000 (both are one's-complement
/// zero; a strict verifier rejects the latter). IPv4 and TCP headers are
/// never all zero; callers that can meet it (ICMP) re-check for a 0 result.
#[inline]
pub const fn update16(hc: u16, old: u16, new: u16) -> u16 {
    if old == new {
        return hc;
    }
    !add(add(!hc, !old), new)
}

/// Incrementally update checksum `hc` after a 32-bit field (e.g. an IPv4
/// address or a TCP sequence number) changed from `old` to `new`. Same
/// degenerate all-zero case as [`update16`].
#[inline]
pub const fn update32(hc: u16, old: u32, new: u32) -> u16 {
    if old == new {
        return hc;
    }
    let s = add(!hc, !(old >> 16) as u16);
    let s = add(s, !(old as u16));
    let s = add(s, (new >> 16) as u16);
    !add(s, new as u16)
}

/// Obviously-correct reference implementation (16 bits at a time, u32
/// accumulator folded as it goes). Used by tests and fuzz targets to check
/// the fast path; not meant for the data path.
pub fn sum_reference(data: &[u8]) -> u16 {
    let mut acc: u32 = 0;
    let mut i = 0;
    while i + 1 < data.len() {
        acc += u16::from_be_bytes([data[i], data[i + 1]]) as u32;
        acc = (acc & 0xffff) + (acc >> 16);
        i += 2;
    }
    if i < data.len() {
        acc += (data[i] as u32) << 8;
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Ipv4Address;

    struct XorShift(u64);
    impl XorShift {
        fn next(&mut self) -> u64 {
            let mut x = self.0;
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            self.0 = x;
            x
        }
        fn bytes(&mut self, n: usize) -> Vec<u8> {
            (0..n).map(|_| self.next() as u8).collect()
        }
    }

    /// One's-complement sums have two zeros (0x0000 and 0xffff); compare
    /// modulo that.
    fn same(a: u16, b: u16) -> bool {
        a == b || (a == 0 && b == 0xffff) || (a == 0xffff && b == 0)
    }

    /// Two short pieces under one fold equal the fold of their two sums, exactly (the
    /// same representative: 0 only when both are all zero).
    #[test]
    fn sum_short2_is_the_fold_of_both_sums() {
        let mut r = XorShift(0x0123_4567_89ab_cdef);
        for la in 0..40usize {
            for lb in 0..40usize {
                let (a, b) = (r.bytes(la), r.bytes(lb));
                let two = fold(u64::from(sum_short(&a)) + u64::from(sum_short(&b)));
                assert_eq!(sum_short2(&a, &b), two, "{la} + {lb}");
            }
        }
        assert_eq!(sum_short2(&[0; 7], &[0; 31]), 0);
        assert_eq!(sum_short2(&[0xff; 6], &[0xff; 2]), 0xffff);
    }

    #[test]
    fn fast_matches_reference_on_random_input() {
        let mut r = XorShift(0x9e37_79b9_7f4a_7c15);
        for len in 0..200usize {
            for _ in 0..20 {
                let d = r.bytes(len);
                let (f, s) = (sum(&d), sum_reference(&d));
                assert!(same(f, s), "len {len}: fast {f:#x} ref {s:#x}");
            }
        }
        for _ in 0..50 {
            let len = (r.next() % 9000) as usize;
            let d = r.bytes(len);
            assert!(same(sum(&d), sum_reference(&d)));
        }
    }

    /// The dispatch and the portable wide (compiler-vectorised) sum against the reference on random lengths
    /// around the block size and the path threshold, at every start alignment.
    #[test]
    fn wide_path_matches_reference_on_random_lengths_and_alignments() {
        let mut r = XorShift(0xdead_beef_cafe_f00d);
        let buf = r.bytes(4096 + 64);
        for start in 0..64usize {
            for len in (512 - 3..512 + 200).chain([1460, 1461, 2048, 4095, 4096]) {
                let d = &buf[start..start + len];
                assert!(same(sum(d), sum_reference(d)), "start {start} len {len}");
                assert_eq!(sum_wide(d), sum_short(d), "start {start} len {len}");
            }
        }
        for _ in 0..200 {
            let len = (r.next() % 20_000) as usize;
            let start = (r.next() % 16) as usize;
            let d = r.bytes(len + start);
            let d = &d[start..];
            assert!(same(sum(d), sum_reference(d)), "len {len} start {start}");
        }
    }

    /// All-ones input long enough to pass the lane flush point more than once
    /// (32,768 blocks of 64 bytes = 2 MiB): no lane may overflow.
    #[test]
    fn wide_path_survives_lane_flush() {
        for len in [2 * 1024 * 1024 - 1, 2 * 1024 * 1024, 4 * 1024 * 1024 + 130] {
            let ones = vec![0xffu8; len];
            assert!(same(sum(&ones), sum_reference(&ones)), "ones {len}");
            let mut r = XorShift(len as u64);
            let d = r.bytes(len);
            assert!(same(sum(&d), sum_reference(&d)), "random {len}");
        }
    }

    #[test]
    fn fast_matches_reference_on_all_ones_and_zeros() {
        for len in [0usize, 1, 2, 7, 8, 19, 20, 32, 40, 41, 1500, 65535] {
            let ones = vec![0xffu8; len];
            assert!(same(sum(&ones), sum_reference(&ones)), "ones {len}");
            let zeros = vec![0u8; len];
            assert_eq!(sum(&zeros), 0);
        }
    }

    #[test]
    fn fixed_sizes_use_same_result() {
        let mut r = XorShift(12345);
        for _ in 0..500 {
            let d = r.bytes(20);
            let a: [u8; 20] = d.clone().try_into().unwrap();
            assert!(same(sum20(&a), sum_reference(&d)));
        }
    }

    #[test]
    fn rfc1071_example() {
        // RFC 1071 §3: bytes 00 01 f2 03 f4 f5 f6 f7 sum to 0xddf2.
        let d = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(sum(&d), 0xddf2);
        assert_eq!(checksum(&d), !0xddf2);
    }

    #[test]
    fn known_ipv4_header_checksum() {
        // Classic example header (Wikipedia "IPv4 header checksum").
        let mut h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(checksum(&h), 0xb861);
        h[10..12].copy_from_slice(&0xb861u16.to_be_bytes());
        assert_eq!(sum(&h), 0xffff);
    }

    #[test]
    fn rfc1624_examples() {
        // RFC 1624 §4: HC = 0xDD2F, m = 0x5555 -> m' = 0x3285 gives 0x0000
        // with eqn. 3 (eqn. 2 would give the wrong 0xFFFF).
        assert_eq!(update16(0xdd2f, 0x5555, 0x3285), 0x0000);
        // No change, no change in checksum (also for the all-zero 0xffff).
        assert_eq!(update16(0x1234, 0xabcd, 0xabcd), 0x1234);
        assert_eq!(update16(0xffff, 0, 0), 0xffff);
        assert_eq!(update32(0xffff, 0, 0), 0xffff);
    }

    fn set16(d: &mut [u8], at: usize, v: u16) {
        d[at..at + 2].copy_from_slice(&v.to_be_bytes());
    }

    #[test]
    fn incremental_matches_recompute() {
        let mut r = XorShift(777);
        for _ in 0..5000 {
            let len = 4 + 2 * (r.next() % 40) as usize;
            let mut d = r.bytes(len);
            set16(&mut d, 0, 0);
            let hc = checksum(&d);
            set16(&mut d, 0, hc);
            assert_eq!(sum(&d), 0xffff);
            // change a random 16-bit field (not the checksum)
            let at = 2 + 2 * (r.next() as usize % ((len - 2) / 2));
            let old = u16::from_be_bytes([d[at], d[at + 1]]);
            let new = r.next() as u16;
            set16(&mut d, at, new);
            let hc2 = update16(hc, old, new);
            set16(&mut d, 0, hc2);
            assert_eq!(sum(&d), 0xffff, "16-bit update failed");
            // and a 32-bit field if there is room
            if len >= 8 {
                let at = 2 + 2 * (r.next() as usize % ((len - 4) / 2));
                let old = u32::from_be_bytes([d[at], d[at + 1], d[at + 2], d[at + 3]]);
                let new = r.next() as u32;
                d[at..at + 4].copy_from_slice(&new.to_be_bytes());
                let hc3 = update32(hc2, old, new);
                set16(&mut d, 0, hc3);
                assert_eq!(sum(&d), 0xffff, "32-bit update failed");
                set16(&mut d, 0, 0);
                assert!(same(hc3, checksum(&d)));
            }
        }
    }

    #[test]
    fn pseudo_header_matches_explicit_bytes() {
        let src = Ipv4Address::new(198, 18, 0, 1);
        let dst = Ipv4Address::new(198, 19, 255, 254);
        let mut b = Vec::new();
        b.extend_from_slice(&src.0);
        b.extend_from_slice(&dst.0);
        b.extend_from_slice(&[0, 6]);
        b.extend_from_slice(&1480u16.to_be_bytes());
        assert_eq!(pseudo_header_ipv4(&src, &dst, 6, 1480), sum_reference(&b));
    }

    #[test]
    fn add_is_ones_complement() {
        assert_eq!(add(0xffff, 0x0001), 0x0001);
        assert_eq!(add(0x8000, 0x8000), 0x0001);
        assert_eq!(add(0x1234, 0x0000), 0x1234);
    }

    #[test]
    fn fold_matches_reference() {
        fn reference(mut acc: u64) -> u16 {
            acc = (acc & 0xffff_ffff) + (acc >> 32);
            acc = (acc & 0xffff_ffff) + (acc >> 32);
            acc = (acc & 0xffff) + (acc >> 16);
            acc = (acc & 0xffff) + (acc >> 16);
            acc = (acc & 0xffff) + (acc >> 16);
            acc as u16
        }
        let mut x = 0x1234_5678_9abc_def1u64;
        let edge = [
            0,
            1,
            0xffff,
            0x1_0000,
            0xffff_ffff,
            0x1_0000_0000,
            u64::MAX,
            u64::MAX - 1,
        ];
        for &v in &edge {
            assert_eq!(fold(v), reference(v), "{v:#x}");
        }
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            for v in [x, x >> 16, x >> 31, x & 0x3_ffff_ffff] {
                assert_eq!(fold(v), reference(v), "{v:#x}");
            }
        }
    }

    /// The IPv6 pseudo-header sum equals the sum of its 40 explicit bytes.
    #[test]
    fn pseudo_header_ipv6_matches_explicit_bytes() {
        let src: crate::Ipv6Address = "2001:db8::1".parse().unwrap();
        let dst: crate::Ipv6Address = "fe80::ffff:ffff:ffff:fffe".parse().unwrap();
        for (nh, len) in [(6u8, 20u32), (17, 65_535), (58, 70_000), (6, u32::MAX)] {
            let mut b = Vec::new();
            b.extend_from_slice(&src.0);
            b.extend_from_slice(&dst.0);
            b.extend_from_slice(&len.to_be_bytes());
            b.extend_from_slice(&[0, 0, 0, nh]);
            assert_eq!(pseudo_header_ipv6(&src, &dst, nh, len), sum_reference(&b));
        }
        // Random and all-ones addresses (every carry of the 64-bit adds taken).
        let mut r = XorShift(7);
        for k in 0..2000 {
            let mut a = [[0u8; 16]; 2];
            for x in a.iter_mut().flatten() {
                *x = if k % 4 == 0 { 0xff } else { r.next() as u8 };
            }
            let (src, dst) = (crate::Ipv6Address(a[0]), crate::Ipv6Address(a[1]));
            let len = (r.next() % 70_000) as u32;
            let mut b = Vec::new();
            b.extend_from_slice(&a[0]);
            b.extend_from_slice(&a[1]);
            b.extend_from_slice(&len.to_be_bytes());
            b.extend_from_slice(&[0, 0, 0, 6]);
            assert_eq!(pseudo_header_ipv6(&src, &dst, 6, len), sum_reference(&b));
        }
    }

    /// The accumulator form of the pseudo-header folds to the same sum as the bytes.
    #[test]
    fn pseudo_header_acc_matches_bytes() {
        let mut r = XorShift(99);
        for _ in 0..1000 {
            let (s, d) = (r.next() as u32, r.next() as u32);
            let len = (r.next() % 65536) as usize;
            let mut b = Vec::new();
            b.extend_from_slice(&s.to_be_bytes());
            b.extend_from_slice(&d.to_be_bytes());
            b.extend_from_slice(&[0, 6]);
            b.extend_from_slice(&(len as u16).to_be_bytes());
            assert_eq!(
                fold(pseudo_header_ipv4_acc(s, d, 6, len)),
                sum_reference(&b)
            );
        }
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

    /// The dispatch and every implementation this CPU has.
    fn all() -> Vec<(&'static str, SumFn)> {
        let mut v = implementations();
        v.push(("dispatch", sum));
        let names: Vec<&str> = v.iter().map(|(n, _)| *n).collect();
        eprintln!("csum implementations tested: {names:?}");
        v
    }

    /// Every length 0..=1100 at every start alignment 0..64, random and all-ones data
    /// (all-ones is the most carries): exactly the RFC 1071 reference (which, like every
    /// implementation, gives 0 only for all-zero data), for every implementation.
    #[test]
    fn every_implementation_equals_reference_for_every_length_and_alignment() {
        let impls = all();
        assert!(impls.len() >= 2);
        let random = random_bytes(1100 + 64, 0x1234_5678_9abc_def0);
        let ones = vec![0xffu8; 1100 + 64];
        for start in 0..64usize {
            for len in 0..=1100usize {
                for (kind, buf) in [("random", &random), ("ones", &ones)] {
                    let d = &buf[start..start + len];
                    let want = sum_reference(d);
                    for (name, f) in &impls {
                        assert_eq!(f(d), want, "{name} {kind} start {start} len {len}");
                    }
                }
            }
        }
    }

    /// Word patterns at the edges of the sign flip (0x8000, 0x7fff, 0xffff, 0x0000,
    /// 0x0001) and all zeros (the sum is 0, not 0xffff), against the RFC 1071
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
                let want = sum_reference(d);
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
        assert_eq!(FOLD_VECS, simd::VEC_CHUNK);
        for unit in [32usize, 64] {
            for r in [0usize, 1, 31, 63, 64, 65, 127] {
                lens.push(FOLD_VECS * unit + r);
            }
        }
        for len in lens {
            for (kind, buf) in [("ones", &ones), ("random", &random)] {
                let d = &buf[1..1 + len];
                let want = sum_reference(d);
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
            let want = sum_reference(&d);
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
