//! Character classes and small scanners of RFC 9110 §5.6 (tokens, field values, lists).

/// `tchar` of RFC 9110 §5.6.2.
#[inline]
pub(crate) fn is_tchar(c: u8) -> bool {
    matches!(c,
        b'!' | b'#' | b'$' | b'%' | b'&' | b'\'' | b'*' | b'+' | b'-' | b'.' | b'^' | b'_'
        | b'`' | b'|' | b'~' | b'0'..=b'9' | b'a'..=b'z' | b'A'..=b'Z')
}

/// A field-value byte (RFC 9110 §5.5): VCHAR, obs-text, SP, HTAB.
#[inline]
pub(crate) fn is_field_vchar(c: u8) -> bool {
    c == b'\t' || c == b' ' || (0x21..=0x7e).contains(&c) || c >= 0x80
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
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

/// The elements of a comma-separated list (RFC 9110 §5.6.1), trimmed, empty ones skipped.
pub(crate) fn list(s: &[u8]) -> impl Iterator<Item = &[u8]> {
    s.split(|&c| c == b',')
        .map(trim_ows)
        .filter(|e| !e.is_empty())
}

/// Position of the first LF in `s`.
#[inline]
pub(crate) fn find_lf(s: &[u8]) -> Option<usize> {
    s.iter().position(|&c| c == b'\n')
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
