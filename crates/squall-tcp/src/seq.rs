//! TCP sequence-number arithmetic (RFC 9293 §3.4): 32-bit numbers compared modulo 2^32.

/// `a < b` in sequence space.
#[inline(always)]
pub fn lt(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}
/// `a <= b` in sequence space.
#[inline(always)]
pub fn le(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) <= 0
}
/// `a > b` in sequence space.
#[inline(always)]
pub fn gt(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}
/// `a >= b` in sequence space.
#[inline(always)]
pub fn ge(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) >= 0
}
/// The later of two sequence numbers.
#[inline(always)]
pub fn max(a: u32, b: u32) -> u32 {
    if gt(a, b) {
        a
    } else {
        b
    }
}
/// The earlier of two sequence numbers.
#[inline(always)]
pub fn min(a: u32, b: u32) -> u32 {
    if lt(a, b) {
        a
    } else {
        b
    }
}
/// `lo <= x < lo + len` in sequence space.
#[inline(always)]
pub fn in_window(x: u32, lo: u32, len: u32) -> bool {
    x.wrapping_sub(lo) < len
}

#[cfg(test)]
mod tests {
    use super::*;

    // RFC 9293 §3.4: comparisons are modulo 2^32.
    #[test]
    fn rfc9293_3_4_wraparound_compare() {
        assert!(lt(0xffff_fff0, 0x10));
        assert!(gt(0x10, 0xffff_fff0));
        assert!(le(5, 5) && ge(5, 5));
        assert!(!lt(5, 5));
        assert_eq!(max(0xffff_fff0, 0x10), 0x10);
        assert_eq!(min(0xffff_fff0, 0x10), 0xffff_fff0);
    }

    #[test]
    fn rfc9293_3_4_window_membership() {
        assert!(in_window(0xffff_ffff, 0xffff_fff0, 100));
        assert!(in_window(0x20, 0xffff_fff0, 100));
        assert!(!in_window(0xffff_ffe0, 0xffff_fff0, 100));
        assert!(!in_window(0x60, 0xffff_fff0, 100));
        assert!(!in_window(7, 7, 0));
    }
}
