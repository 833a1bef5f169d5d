//! Character classes and small scanners of RFC 9110 §5.6 (tokens, field values, lists).

/// Byte classes, one table lookup per byte on the hot path.
const TCHAR: u8 = 1;
const VCHAR: u8 = 2;
/// A URI reg-name's bytes but `%` (RFC 3986 §3.2.2: unreserved, sub-delims).
const HOST: u8 = 4;
/// Those and `:` (inside an IP-literal's brackets).
const IP_LITERAL: u8 = 8;

static CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut c = 0;
    while c < 256 {
        let b = c as u8;
        let tchar = matches!(b,
            b'!' | b'#' | b'$' | b'%' | b'&' | b'\'' | b'*' | b'+' | b'-' | b'.' | b'^' | b'_'
            | b'`' | b'|' | b'~' | b'0'..=b'9' | b'a'..=b'z' | b'A'..=b'Z');
        let vchar = b == b'\t' || b == b' ' || (b >= 0x21 && b <= 0x7e) || b >= 0x80;
        let host = matches!(b,
            b'-' | b'.' | b'_' | b'~' | b'!' | b'$' | b'&' | b'\'' | b'(' | b')' | b'*' | b'+'
            | b',' | b';' | b'=' | b'0'..=b'9' | b'a'..=b'z' | b'A'..=b'Z');
        t[c] = if tchar { TCHAR } else { 0 }
            | if vchar { VCHAR } else { 0 }
            | if host { HOST | IP_LITERAL } else { 0 }
            | if b == b':' { IP_LITERAL } else { 0 };
        c += 1;
    }
    t
};

/// `tchar` of RFC 9110 §5.6.2.
#[inline]
pub(crate) fn is_tchar(c: u8) -> bool {
    CLASS[c as usize] & TCHAR != 0
}

/// Whether every byte of `s` is a tchar (no early exit: one AND per byte).
#[inline]
pub(crate) fn all_tchar(s: &[u8]) -> bool {
    s.iter().fold(TCHAR, |a, &c| a & CLASS[c as usize]) & TCHAR != 0
}

/// A field-value byte (RFC 9110 §5.5): VCHAR, obs-text, SP, HTAB.
#[inline]
pub(crate) fn is_field_vchar(c: u8) -> bool {
    CLASS[c as usize] & VCHAR != 0
}

/// A request-target byte: visible ASCII (no SP, no controls, no DEL, no obs-text).
#[inline]
pub(crate) fn is_target_char(c: u8) -> bool {
    (0x21..=0x7e).contains(&c)
}

/// Whether every byte of `s` is a tchar and `s` is not empty.
pub(crate) fn is_token(s: &[u8]) -> bool {
    !s.is_empty() && s.iter().all(|&c| is_tchar(c))
}

/// `s` without leading and trailing SP / HTAB (OWS).
pub(crate) fn trim_ows(mut s: &[u8]) -> &[u8] {
    // (CR and LF: a response's value folded over lines, obs-fold, holds them where the
    // fold is, which counts as SP, RFC 9112 §5.2; no other value holds them)
    while let [b' ' | b'\t' | b'\r' | b'\n', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t' | b'\r' | b'\n'] = s {
        s = rest;
    }
    s
}

/// Whether every byte of `s` is of `class` (no early exit: one AND per byte).
#[inline]
fn all_class(s: &[u8], class: u8) -> bool {
    s.iter().fold(class, |a, &c| a & CLASS[c as usize]) & class != 0
}

/// Whether `v` is a valid Host field value (RFC 9110 §7.2: `uri-host [ ":" port ]`, the
/// host a reg-name, an IPv4 address, or an IP-literal in brackets, RFC 3986 §3.2.2; both
/// may be empty, as a request for a URI without an authority sends).
#[inline]
pub(crate) fn valid_host(v: &[u8]) -> bool {
    // The common value, a name or an IPv4 address alone: one AND per byte.
    all_class(v, HOST) || valid_host_general(v)
}

/// [`valid_host`] for every other shape: a port, an IP-literal, pct-encoded bytes.
#[cold]
#[inline(never)]
fn valid_host_general(v: &[u8]) -> bool {
    // Bytes of `class`, or `%` and two hex digits.
    let all = |s: &[u8], class: u8| {
        let mut i = 0;
        while let Some(&c) = s.get(i) {
            if c == b'%' {
                if !s
                    .get(i + 1..i + 3)
                    .is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit))
                {
                    return false;
                }
                i += 3;
            } else if CLASS[c as usize] & class == 0 {
                return false;
            } else {
                i += 1;
            }
        }
        true
    };
    let (host_ok, rest) = match v {
        [b'[', inner @ ..] => match inner.iter().position(|&c| c == b']') {
            Some(e) => (e > 0 && all(&inner[..e], IP_LITERAL), &inner[e + 1..]),
            None => return false,
        },
        _ => {
            let e = v.iter().position(|&c| c == b':').unwrap_or(v.len());
            (all(&v[..e], HOST), &v[e..])
        }
    };
    host_ok
        && match rest {
            [] => true,
            [b':', port @ ..] => port.iter().all(u8::is_ascii_digit),
            _ => false,
        }
}

/// The elements of a comma-separated list (RFC 9110 §5.6.1), trimmed, empty ones skipped.
pub(crate) fn list(s: &[u8]) -> impl Iterator<Item = &[u8]> {
    s.split(|&c| c == b',')
        .map(trim_ows)
        .filter(|e| !e.is_empty())
}

/// Whether any of the 8 bytes of `w` is not a plain field-value byte: a control
/// character (below 0x20, HTAB included: the caller rechecks such words byte by byte) or
/// DEL. Bytes of 0x80 and above (obs-text) pass. SWAR: eight bytes per step.
#[inline]
pub(crate) fn word_has_ctl(w: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let below_space = w.wrapping_sub(ONES * 0x20) & !w & HIGH;
    let x = w ^ (ONES * 0x7f);
    let del = x.wrapping_sub(ONES) & !x & HIGH;
    below_space | del != 0
}

/// Whether the field name `n` (tchars only: a parsed name) is `lower`, a name written in
/// lowercase letters and `-`, ignoring case: eight bytes at a time. For a tchar, `c |
/// 0x20` is a lowercase letter only if `c` is that letter in either case, and `-` only
/// if `c` is `-` (CR would also map to `-`, but no name holds it).
#[inline]
pub(crate) fn name_is(n: &[u8], lower: &[u8]) -> bool {
    const CASE: u64 = 0x2020_2020_2020_2020;
    if n.len() != lower.len() {
        return false;
    }
    let word = |s: &[u8], i: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&s[i..i + 8]);
        u64::from_le_bytes(b)
    };
    let half = |s: &[u8], i: usize| {
        let mut b = [0u8; 4];
        b.copy_from_slice(&s[i..i + 4]);
        u32::from_le_bytes(b)
    };
    match n.len() {
        // Two overlapping words cover 4 to 8 bytes (host, expect).
        4..=8 => {
            let j = n.len() - 4;
            (half(n, 0) | CASE as u32) == half(lower, 0)
                && (half(n, j) | CASE as u32) == half(lower, j)
        }
        // Two overlapping words cover 8 to 16 bytes; 17 (transfer-encoding) takes a third.
        9..=16 => {
            let j = n.len() - 8;
            (word(n, 0) | CASE) == word(lower, 0) && (word(n, j) | CASE) == word(lower, j)
        }
        17..=24 => {
            let j = n.len() - 8;
            (word(n, 0) | CASE) == word(lower, 0)
                && (word(n, 8) | CASE) == word(lower, 8)
                && (word(n, j) | CASE) == word(lower, j)
        }
        _ => n.iter().zip(lower).all(|(&c, &l)| c | 0x20 == l),
    }
}

/// Position of the first LF in `s`.
#[inline]
pub(crate) fn find_lf(s: &[u8]) -> Option<usize> {
    memchr::memchr(b'\n', s)
}

/// Parses a decimal number of at most 19 digits (no sign, no spaces): Content-Length.
pub(crate) fn parse_decimal(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 19 {
        return None;
    }
    let mut v: u64 = 0;
    for &c in s {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v * 10 + u64::from(c - b'0');
    }
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_comparison_agrees_with_ascii_case_folding() {
        let names: [&[u8]; 6] = [
            b"host",
            b"expect",
            b"connection",
            b"content-length",
            b"transfer-encoding",
            b"x",
        ];
        for lower in names {
            for i in 0..lower.len() {
                // Every tchar in every position.
                for c in (0..=255u8).filter(|&c| is_tchar(c)) {
                    let mut n = lower.to_vec();
                    n[i] = c;
                    assert_eq!(name_is(&n, lower), n.eq_ignore_ascii_case(lower));
                }
            }
            assert!(name_is(&lower.to_ascii_uppercase(), lower));
            assert!(!name_is(&lower[1..], lower));
        }
    }

    #[test]
    fn word_check_agrees_with_the_byte_table() {
        // Every byte value in every position of a word of otherwise plain bytes.
        for pos in 0..8 {
            for c in 0..=255u8 {
                let mut b = *b"abcdefgh";
                b[pos] = c;
                let plain = c != b'\t' && is_field_vchar(c);
                assert_eq!(
                    !word_has_ctl(u64::from_le_bytes(b)),
                    plain,
                    "byte {c:#x} at {pos}"
                );
            }
        }
    }
}
