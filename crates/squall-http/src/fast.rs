//! The fast paths of the head: the plain request and status lines (byte loops without the
//! general code's line split), and one header field line (`name: value CRLF`) sixteen
//! bytes at a time with SSE2 (every x86-64 CPU has it): the line's colons, control bytes
//! and name bytes are found with a few vector compares instead of a branch per byte.
//! Each accepts only the plain shape — for a field line: a name of tchars ending at a
//! colon in the line's first 16 bytes, at most one SP before the value, a value of
//! visible bytes (no HTAB, no trailing whitespace), CRLF, with the line's first 16 bytes
//! readable (the value's last bytes may be read one by one) — and answers `None` for
//! anything else; the general code (`head.rs`) then parses the line, so what is accepted
//! or refused, and why, is the general code's decision in every case (its tests check
//! that both agree).

/// Bit `i` set where byte `i` of `w` is a control character (below 0x20: HTAB, CR and LF
/// included) or DEL; the bytes a field value may not hold, plus HTAB and the line end.
#[cfg(target_arch = "x86_64")]
#[inline]
fn ctl_mask(w: &[u8; 16]) -> u32 {
    use core::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_max_epu8, _mm_movemask_epi8, _mm_or_si128,
        _mm_set1_epi8,
    };
    // SAFETY: `w` is 16 readable bytes and `_mm_loadu_si128` has no alignment
    // requirement; the intrinsics need SSE2, part of the x86-64 baseline.
    unsafe {
        let x = _mm_loadu_si128(w.as_ptr().cast::<__m128i>());
        let low = _mm_cmpeq_epi8(_mm_max_epu8(x, _mm_set1_epi8(0x1f)), _mm_set1_epi8(0x1f));
        let del = _mm_cmpeq_epi8(x, _mm_set1_epi8(0x7f));
        _mm_movemask_epi8(_mm_or_si128(low, del)) as u32
    }
}

/// The masks of a line's first 16 bytes, from one load: colons, control characters (as
/// [`ctl_mask`]), and letters, digits and `-` (the tchars of nearly every field name;
/// any other tchar is checked by the byte table).
#[cfg(target_arch = "x86_64")]
#[inline]
fn line_masks(w: &[u8; 16]) -> (u32, u32, u32) {
    use core::arch::x86_64::{
        __m128i, _mm_and_si128, _mm_cmpeq_epi8, _mm_cmpgt_epi8, _mm_cmplt_epi8, _mm_loadu_si128,
        _mm_max_epu8, _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8,
    };
    // SAFETY: as in `ctl_mask`. Signed compares: bytes of 0x80 and above are negative,
    // so they fall outside every range below.
    unsafe {
        let x = _mm_loadu_si128(w.as_ptr().cast::<__m128i>());
        let colon = _mm_cmpeq_epi8(x, _mm_set1_epi8(b':' as i8));
        let low = _mm_cmpeq_epi8(_mm_max_epu8(x, _mm_set1_epi8(0x1f)), _mm_set1_epi8(0x1f));
        let del = _mm_cmpeq_epi8(x, _mm_set1_epi8(0x7f));
        let lower = _mm_or_si128(x, _mm_set1_epi8(0x20));
        let letter = _mm_and_si128(
            _mm_cmpgt_epi8(lower, _mm_set1_epi8(b'a' as i8 - 1)),
            _mm_cmplt_epi8(lower, _mm_set1_epi8(b'z' as i8 + 1)),
        );
        let digit = _mm_and_si128(
            _mm_cmpgt_epi8(x, _mm_set1_epi8(b'0' as i8 - 1)),
            _mm_cmplt_epi8(x, _mm_set1_epi8(b'9' as i8 + 1)),
        );
        let dash = _mm_cmpeq_epi8(x, _mm_set1_epi8(b'-' as i8));
        (
            _mm_movemask_epi8(colon) as u32,
            _mm_movemask_epi8(_mm_or_si128(low, del)) as u32,
            _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(letter, digit), dash)) as u32,
        )
    }
}

/// The 16 bytes at `at`, if the buffer has them.
#[inline]
fn chunk(buf: &[u8], at: usize) -> Option<&[u8; 16]> {
    buf.get(at..at.checked_add(16)?)?.try_into().ok()
}

/// A plain field line at `pos`: `(name, value, value_end)`, slices of `buf`, the value's
/// end being the CR of the line's CRLF; `None` if the line is not of the plain shape (or
/// not all here yet), the head's empty last line and folded lines (SP, HTAB first)
/// included.
#[cfg(target_arch = "x86_64")]
#[inline]
pub(crate) fn field_line(buf: &[u8], pos: usize) -> Option<(&[u8], &[u8], usize)> {
    let w = chunk(buf, pos)?;
    let (colons, ctl, name) = line_masks(w);
    let k = colons.trailing_zeros() as usize;
    // A colon in this chunk, not at the start, tchars only before it (letters, digits
    // and `-` by the vector test, any other tchar by the table).
    if k >= 16 || k == 0 {
        return None;
    }
    let below = (1u32 << k) - 1;
    if name & below != below && !crate::syntax::all_tchar(&w[..k]) {
        return None;
    }
    let colon = pos + k;
    let mut vstart = colon + 1;
    if buf.get(vstart) == Some(&b' ') {
        vstart += 1;
    }
    // The value runs to the first control byte (or DEL): it must be the CR of CRLF.
    let mut at = pos;
    let mut m = ctl & !((2u32 << k) - 1);
    let end = loop {
        if m != 0 {
            break at + m.trailing_zeros() as usize;
        }
        at += 16;
        match chunk(buf, at) {
            Some(w) => m = ctl_mask(w),
            // Fewer than 16 bytes left (the head's last line): byte by byte.
            None => break at + buf.get(at..)?.iter().position(|&c| c < 0x20 || c == 0x7f)?,
        }
    };
    let value = buf.get(vstart..end)?;
    if buf.get(end..end + 2) != Some(b"\r\n") {
        return None;
    }
    // OWS left for the general code: a second SP or an HTAB before the value, SP after.
    if let [b' ', ..] | [.., b' '] = value {
        return None;
    }
    Some((&w[..k], value, end))
}

/// A request line as the head parsers use it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RequestLine<'b> {
    pub method: crate::Method,
    pub method_raw: &'b [u8],
    pub target: &'b [u8],
    /// Bytes of the target before its first `?` (all of it without one).
    pub path_len: usize,
    pub version: crate::Version,
    /// Where the next line starts.
    pub next: usize,
}

/// The eight bytes of `buf` at `at` as a little-endian word, if there are eight.
#[inline]
fn word(buf: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(
        buf.get(at..at.checked_add(8)?)?.try_into().ok()?,
    ))
}

/// `HTTP/1.1` and `HTTP/1.0` as little-endian words.
const HTTP11: u64 = u64::from_le_bytes(*b"HTTP/1.1");
const HTTP10: u64 = u64::from_le_bytes(*b"HTTP/1.0");

/// `METHOD SP TARGET SP HTTP/1.1|HTTP/1.0 CRLF` at `pos`, at most `max` bytes before the
/// CRLF; `None` for any other shape (another version, a long or incomplete line, a bad
/// byte), which the general code then decides. `GET` is recognised by one word compare;
/// the target is scanned sixteen bytes at a time, its `?` found in the same pass.
#[inline]
pub(crate) fn request_line(buf: &[u8], pos: usize, max: usize) -> Option<RequestLine<'_>> {
    use crate::syntax::is_tchar;
    let (method, i) = if buf.get(pos..pos + 4) == Some(b"GET ") {
        (crate::Method::Get, pos + 3)
    } else {
        let mut i = pos;
        while i < buf.len() && is_tchar(buf[i]) {
            i += 1;
        }
        if i == pos || buf.get(i) != Some(&b' ') {
            return None;
        }
        (crate::Method::from_bytes(&buf[pos..i]), i)
    };
    let t = i + 1;
    let (j, q) = target_end(buf, t);
    if j == t || buf.get(j) != Some(&b' ') {
        return None;
    }
    let version = match word(buf, j + 1)? {
        HTTP11 => crate::Version::Http11,
        HTTP10 => crate::Version::Http10,
        _ => return None,
    };
    if buf.get(j + 9..j + 11)? != b"\r\n" || j + 9 - pos > max {
        return None;
    }
    Some(RequestLine {
        method,
        method_raw: &buf[pos..i],
        target: &buf[t..j],
        path_len: q.min(j) - t,
        version,
        next: j + 11,
    })
}

/// Bits `i` set where byte `i` of `w` is not a request-target byte (0x21-0x7e), and
/// where it is `?`.
#[cfg(target_arch = "x86_64")]
#[inline]
fn target_masks(w: &[u8; 16]) -> (u32, u32) {
    use core::arch::x86_64::{
        __m128i, _mm_and_si128, _mm_cmpeq_epi8, _mm_cmpgt_epi8, _mm_cmplt_epi8, _mm_loadu_si128,
        _mm_movemask_epi8, _mm_set1_epi8,
    };
    // SAFETY: as in `ctl_mask`. Signed compares: bytes of 0x80 and above are negative,
    // so they fall outside the range.
    unsafe {
        let x = _mm_loadu_si128(w.as_ptr().cast::<__m128i>());
        let ok = _mm_and_si128(
            _mm_cmpgt_epi8(x, _mm_set1_epi8(0x20)),
            _mm_cmplt_epi8(x, _mm_set1_epi8(0x7f)),
        );
        let q = _mm_cmpeq_epi8(x, _mm_set1_epi8(b'?' as i8));
        (
            !(_mm_movemask_epi8(ok) as u32) & 0xffff,
            _mm_movemask_epi8(q) as u32,
        )
    }
}

/// From `t`: the first byte that is not a request-target byte (`buf.len()` if none),
/// and the first `?` (`usize::MAX` if none; it may lie beyond the first answer, which
/// the caller bounds). Sixteen bytes at a time on x86-64, then byte by byte.
#[inline]
fn target_end(buf: &[u8], t: usize) -> (usize, usize) {
    let mut j = t;
    let mut q = usize::MAX;
    #[cfg(target_arch = "x86_64")]
    while let Some(w) = chunk(buf, j) {
        let (m, qm) = target_masks(w);
        if qm != 0 && q == usize::MAX {
            q = j + qm.trailing_zeros() as usize;
        }
        if m != 0 {
            return (j + m.trailing_zeros() as usize, q);
        }
        j += 16;
    }
    while j < buf.len() && crate::syntax::is_target_char(buf[j]) {
        if buf[j] == b'?' && q == usize::MAX {
            q = j;
        }
        j += 1;
    }
    (j, q)
}

/// `HTTP/1.1|HTTP/1.0 SP DIGIT{3} [SP reason] CRLF` at the start of `buf`, at most `max`
/// bytes before the CRLF: `(version, code, reason, next line)`; `None` otherwise.
#[inline]
pub(crate) fn status_line(buf: &[u8], max: usize) -> Option<(crate::Version, u16, &[u8], usize)> {
    let v = match word(buf, 0)? {
        HTTP11 => crate::Version::Http11,
        HTTP10 => crate::Version::Http10,
        _ => return None,
    };
    if buf.get(8)? != &b' ' {
        return None;
    }
    let d = buf.get(9..12)?;
    if !d.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let code = d.iter().fold(0u16, |a, &c| a * 10 + u16::from(c - b'0'));
    let (r, mut e) = match buf.get(12)? {
        b' ' => (13, 13),
        b'\r' => (12, 12),
        _ => return None,
    };
    while e < buf.len() && buf[e] != b'\r' && crate::syntax::is_field_vchar(buf[e]) {
        e += 1;
    }
    if buf.get(e..e + 2)? != b"\r\n" || e > max {
        return None;
    }
    Some((v, code, &buf[r..e], e + 2))
}

/// Other targets: always the general code.
#[cfg(not(target_arch = "x86_64"))]
#[inline]
pub(crate) fn field_line(_buf: &[u8], _pos: usize) -> Option<(&[u8], &[u8], usize)> {
    None
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    #[test]
    fn masks_agree_with_the_byte_rules() {
        for c in 0..=255u8 {
            for i in 0..16 {
                let mut w = [b'a'; 16];
                w[i] = c;
                let ctl = c < 0x20 || c == 0x7f;
                assert_eq!(ctl_mask(&w), u32::from(ctl) << i, "byte {c:#x} at {i}");
                let (colon, ctl2, names) = line_masks(&w);
                assert_eq!(ctl2, u32::from(ctl) << i);
                assert_eq!(colon, u32::from(c == b':') << i);
                let name = c.is_ascii_alphanumeric() || c == b'-';
                let rest = 0xffff & !(1u32 << i);
                assert_eq!(names, rest | u32::from(name) << i, "byte {c:#x}");
                let target = (0x21..=0x7e).contains(&c);
                let (t, q) = target_masks(&w);
                assert_eq!(t, u32::from(!target) << i, "byte {c:#x}");
                assert_eq!(q, u32::from(c == b'?') << i, "byte {c:#x}");
            }
        }
    }

    #[test]
    fn plain_lines_are_taken_and_others_left() {
        let pad = "X".repeat(40);
        let line = |s: &str| format!("{s}{pad}");
        // As positions: (colon, value start, value end).
        fn at(b: &[u8], pos: usize) -> Option<(usize, usize, usize)> {
            let (n, v, end) = field_line(b, pos)?;
            assert_eq!(n.as_ptr(), b[pos..].as_ptr());
            assert_eq!(v.as_ptr() as usize + v.len(), b[end..].as_ptr() as usize);
            Some((
                pos + n.len(),
                v.as_ptr() as usize - b.as_ptr() as usize,
                end,
            ))
        }
        let t = |s: &str| at(line(s).as_bytes(), 0);
        assert_eq!(t("Host: a\r\n"), Some((4, 6, 7)));
        assert_eq!(t("Host:a\r\n"), Some((4, 5, 6)));
        assert_eq!(t("Host:\r\n"), Some((4, 5, 5)));
        assert_eq!(t("Host: \r\n"), Some((4, 6, 6)));
        let long = "Date: Wed, 25 Nov 2026 14:50:00 GMT\r\n";
        assert_eq!(t(long), Some((4, 6, long.len() - 2)));
        for other in [
            "Host:  a\r\n",            // two SP: trimmed by the general code
            "Host:\ta\r\n",            // HTAB
            "Host: a \r\n",            // trailing SP
            "Host: a\tb\r\n",          // HTAB inside
            "Host: a\nb\r\n",          // bare LF
            "Host: a\rb\r\n",          // bare CR
            "Host: a\x7f\r\n",         // DEL
            "Ho st: a\r\n",            // not a tchar
            ":a\r\n",                  // empty name
            "Abcdefghijklmnop: a\r\n", // colon beyond the first 16 bytes
            "Host a\r\n",              // no colon in the line
        ] {
            assert_eq!(t(other), None, "{other:?}");
        }
        // Not 16 bytes to look at: the general code's; a value's end is found in fewer.
        assert_eq!(at(b"Host: a\r\n\r\n", 0), None);
        let last = b"Date: Wed, 25 Nov 2026 14:50:00 GMT\r\n\r\n";
        assert_eq!(at(last, 0), Some((4, 6, last.len() - 4)));
        assert_eq!(at(&last[..last.len() - 4], 0), None);
    }
}
