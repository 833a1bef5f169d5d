//! What `squall serve` answers a request with: the route or file it names, conditional
//! requests (If-Match, If-Unmodified-Since: 412; If-None-Match, If-Modified-Since: 304),
//! byte ranges (206, 416), and the header blocks of every answer. Pure functions of the
//! request: the app sends the parts.

use std::ops::Range;

use squall_http::{reason, Method, Request, Version};

use crate::files::File;

/// A fixed route from the configuration: `PATH return CODE ["TEXT"]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    pub path: String,
    pub code: u16,
    pub text: String,
}

impl Route {
    /// Parses `/ping return 200 "pong"` (the text may be left out; `\"` and `\\` escape
    /// inside it, `\n` is a newline).
    pub fn parse(s: &str) -> Result<Route, String> {
        let err = |why: &str| format!("--route {s:?}: {why} (expected: PATH return CODE \"TEXT\")");
        let s2 = s.trim();
        let (path, rest) = s2
            .split_once(char::is_whitespace)
            .ok_or_else(|| err("too short"))?;
        if !path.starts_with('/') {
            return Err(err("the path must start with /"));
        }
        let rest = rest.trim_start();
        let rest = rest
            .strip_prefix("return")
            .ok_or_else(|| err("no `return`"))?
            .trim_start();
        let (code, text) = match rest.split_once(char::is_whitespace) {
            Some((c, t)) => (c, t.trim()),
            None => (rest, ""),
        };
        let code: u16 = code.parse().map_err(|_| err("bad status code"))?;
        if !(200..=599).contains(&code) || code == 204 || code == 304 {
            return Err(err("status code must be 200-599, not 204 or 304"));
        }
        if code == 205 && !text.is_empty() {
            // RFC 9110 §15.3.6: a 205 answer carries no content.
            return Err(err("a 205 answer carries no text"));
        }
        let text = if text.is_empty() {
            String::new()
        } else {
            let inner = text
                .strip_prefix('"')
                .and_then(|t| t.strip_suffix('"'))
                .ok_or_else(|| err("the text must be in double quotes"))?;
            let mut out = String::new();
            let mut it = inner.chars();
            while let Some(c) = it.next() {
                if c == '\\' {
                    match it.next() {
                        Some('n') => out.push('\n'),
                        Some(c @ ('"' | '\\')) => out.push(c),
                        _ => return Err(err("bad escape in the text")),
                    }
                } else {
                    out.push(c);
                }
            }
            out
        };
        Ok(Route {
            path: path.to_string(),
            code,
            text,
        })
    }
}

/// The status line of `code` in `version` (`HTTP/1.1 200 OK\r\n`).
pub fn status_line(version: Version, code: u16) -> String {
    format!("{} {code} {}\r\n", version.as_str(), reason(code))
}

/// The header block of a route's answer, up to (not including) Date and the end (a 405
/// route says which methods it takes, RFC 9110 §15.5.6).
pub fn route_head(r: &Route) -> String {
    format!(
        "{}Server: squall\r\n{}Content-Type: text/plain\r\nContent-Length: {}\r\n",
        status_line(Version::Http11, r.code),
        if r.code == 405 {
            "Allow: GET, HEAD\r\n"
        } else {
            ""
        },
        r.text.len()
    )
}

/// The 200 header block of a file, up to (not including) Date and the end.
pub fn file_head(f: &File) -> String {
    format!(
        "HTTP/1.1 200 OK\r\nServer: squall\r\nContent-Type: {}\r\nContent-Length: {}\r\n\
         Last-Modified: {}\r\nETag: {}\r\nAccept-Ranges: bytes\r\n",
        f.content_type,
        f.data.len(),
        f.last_modified,
        f.etag
    )
}

/// The end of every header block: Date, the connection's fate, the empty line.
pub fn tail(date: &str, keep_alive: bool, version: Version) -> Vec<u8> {
    let conn = match (keep_alive, version) {
        (false, _) => "Connection: close\r\n",
        (true, Version::Http10) => "Connection: keep-alive\r\n",
        (true, Version::Http11) => "",
    };
    format!("Date: {date}\r\n{conn}\r\n").into_bytes()
}

/// An answer with a small body of its own (errors, 412, 416), whole; `v` is the
/// request's version (an HTTP/1.0 client kept alive is told so).
pub fn small(
    code: u16,
    extra: &str,
    body: &str,
    head_only: bool,
    date: &str,
    keep_alive: bool,
    version: Version,
) -> Vec<u8> {
    let mut v = format!(
        "{}Server: squall\r\n{extra}Content-Length: {}\r\n",
        status_line(Version::Http11, code),
        body.len()
    )
    .into_bytes();
    if !body.is_empty() && code != 304 {
        v.extend_from_slice(b"Content-Type: text/plain\r\n");
    }
    v.extend_from_slice(&tail(date, keep_alive, version));
    if !head_only {
        v.extend_from_slice(body.as_bytes());
    }
    v
}

/// The answer of an error status (`404 Not Found\n` as the body) to a request of version
/// `v`.
pub fn error(code: u16, head_only: bool, date: &str, keep_alive: bool, v: Version) -> Vec<u8> {
    let extra = if code == 405 {
        "Allow: GET, HEAD\r\n"
    } else {
        ""
    };
    small(
        code,
        extra,
        &format!("{code} {}\n", reason(code)),
        head_only,
        date,
        keep_alive,
        v,
    )
}

/// What to send for a file request.
#[derive(Debug, PartialEq, Eq)]
pub enum FileAnswer {
    /// 200 with the whole file.
    Full,
    /// 304 Not Modified.
    NotModified,
    /// 206 with this byte range.
    Partial(Range<usize>),
    /// 416: the range starts past the end.
    Unsatisfiable,
    /// 412: If-Match or If-Unmodified-Since is false.
    PreconditionFailed,
}

/// Decides a GET/HEAD of file `f`, in the order of RFC 9110 §13.2.2: If-Match, else
/// If-Unmodified-Since (412 when false); If-None-Match, else If-Modified-Since (304 when
/// false); then Range (GET only, §14.2), with If-Range. A field sent on several lines
/// is one list (§5.3).
pub fn decide(req: &Request<'_, '_>, f: &File) -> FileAnswer {
    let mut im = None;
    let mut ius = None;
    let mut inm = false;
    let mut inm_match = false;
    let mut ims = None;
    let mut range = None;
    let mut if_range = None;
    for h in req.headers {
        let n = h.name;
        if n.len() < 5 || !n[..3].eq_ignore_ascii_case(b"if-") {
            if n.eq_ignore_ascii_case(b"range") {
                range.get_or_insert(h.value);
            }
            continue;
        }
        let rest = &n[3..];
        if rest.eq_ignore_ascii_case(b"match") {
            im = Some(im.unwrap_or(false) || strong_match(h.value, &f.etag));
        } else if rest.eq_ignore_ascii_case(b"none-match") {
            inm = true;
            inm_match |= weak_match(h.value, &f.etag);
        } else if rest.eq_ignore_ascii_case(b"unmodified-since") {
            ius.get_or_insert(h.value);
        } else if rest.eq_ignore_ascii_case(b"modified-since") {
            ims.get_or_insert(h.value);
        } else if rest.eq_ignore_ascii_case(b"range") {
            if_range.get_or_insert(h.value);
        }
    }
    // Step 1-2: a false If-Match, or (without one) a valid If-Unmodified-Since older
    // than the file.
    match im {
        Some(false) => return FileAnswer::PreconditionFailed,
        Some(true) => {}
        None => {
            if ius.and_then(parse_date).is_some_and(|t| f.mtime > t) {
                return FileAnswer::PreconditionFailed;
            }
        }
    }
    // Step 3-4 (GET and HEAD only come here).
    if inm {
        if inm_match {
            return FileAnswer::NotModified;
        }
    } else if ims.and_then(parse_date).is_some_and(|t| f.mtime <= t) {
        return FileAnswer::NotModified;
    }
    // Step 5: range handling is defined for GET only (a HEAD answer is the 200's head).
    let Some(range) = range.filter(|_| req.method == Method::Get) else {
        return FileAnswer::Full;
    };
    if let Some(ir) = if_range {
        let fresh = if ir.starts_with(b"\"") {
            ir == f.etag.as_bytes()
        } else {
            parse_date(ir) == Some(f.mtime)
        };
        if !fresh {
            return FileAnswer::Full;
        }
    }
    match byte_range(range, f.data.len() as u64) {
        Some(Ok(r)) => FileAnswer::Partial(r.start as usize..r.end as usize),
        Some(Err(())) => FileAnswer::Unsatisfiable,
        None => FileAnswer::Full,
    }
}

/// Whether an If-Match list holds `*` or `etag` by the strong comparison (a weak tag
/// never matches, RFC 9110 §8.8.3.2); `etag` empty: whether it holds `*`.
fn strong_match(list: &[u8], etag: &str) -> bool {
    tag_listed(list, etag, |t| t)
}

/// Whether an If-None-Match list matches `etag` (weak comparison, `*` matches).
fn weak_match(list: &[u8], etag: &str) -> bool {
    tag_listed(list, etag, |t| t.strip_prefix(b"W/").unwrap_or(t))
}

/// Whether a comma-separated entity-tag list holds `*`, or `etag` once each listed tag
/// went through `cmp` (the comparison's view of a tag).
fn tag_listed(list: &[u8], etag: &str, cmp: impl Fn(&[u8]) -> &[u8]) -> bool {
    let tag = etag.as_bytes();
    list.split(|&c| c == b',').any(|t| {
        let t = t.trim_ascii();
        t == b"*" || (!tag.is_empty() && cmp(t) == tag)
    })
}

/// The preconditions of a GET or HEAD to a 2xx route, which has a current
/// representation but no validators (no ETag, no Last-Modified), in RFC 9110 §13.2.2's
/// order: an If-Match other than `*` fails (412, §13.1.1); an If-None-Match of `*` is
/// false (304, §13.1.2: `*` matches any current representation); no other tag can match
/// and dates are ignored without a modification date (§13.1.3-4).
pub fn route_preconditions(req: &Request<'_, '_>) -> FileAnswer {
    let (mut if_match, mut if_match_any, mut none_match_any) = (false, false, false);
    for h in req.headers {
        if h.name.len() == 8 && h.name.eq_ignore_ascii_case(b"if-match") {
            if_match = true;
            if_match_any |= strong_match(h.value, "");
        } else if h.name.len() == 13 && h.name.eq_ignore_ascii_case(b"if-none-match") {
            none_match_any |= weak_match(h.value, "");
        }
    }
    if if_match && !if_match_any {
        FileAnswer::PreconditionFailed
    } else if none_match_any {
        FileAnswer::NotModified
    } else {
        FileAnswer::Full
    }
}

/// A 304 for a route (no validators to send: the Date, RFC 9110 §15.4.5).
pub fn route_not_modified(date: &str, keep_alive: bool, v: Version) -> Vec<u8> {
    let mut h = format!("{}Server: squall\r\n", status_line(Version::Http11, 304)).into_bytes();
    h.extend_from_slice(&tail(date, keep_alive, v));
    h
}

fn parse_date(v: &[u8]) -> Option<u64> {
    let s = std::str::from_utf8(v).ok()?;
    let t = httpdate::parse_http_date(s).ok()?;
    t.duration_since(std::time::UNIX_EPOCH)
        .ok()
        .map(|d| d.as_secs())
}

/// A single `bytes=` range of a representation of `len` bytes (RFC 9110 §14.1.2):
/// `None` to ignore the header (malformed, other unit, several ranges), `Err` if it
/// cannot be satisfied (416), else the byte range.
pub fn byte_range(v: &[u8], len: u64) -> Option<Result<Range<u64>, ()>> {
    // The unit is case-insensitive (RFC 9110 §14.1).
    let (unit, spec) = (v.get(..6)?, &v[6..]);
    if !unit.eq_ignore_ascii_case(b"bytes=") {
        return None;
    }
    let spec = std::str::from_utf8(spec).ok()?.trim();
    if spec.contains(',') {
        return None;
    }
    let (a, b) = spec.split_once('-')?;
    let num = |s: &str| -> Option<u64> {
        if s.is_empty() || !s.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        s.parse().ok()
    };
    if a.is_empty() {
        // Suffix: the last N bytes. Of an empty representation none can be sent, yet
        // a suffix of N > 0 is satisfiable there (RFC 9110 §14.1.1): the Range is
        // ignored, the whole (empty) representation sent.
        let n = num(b)?;
        if n == 0 {
            return Some(Err(()));
        }
        if len == 0 {
            return None;
        }
        return Some(Ok(len - n.min(len)..len));
    }
    let first = num(a)?;
    let last = if b.is_empty() { u64::MAX } else { num(b)? };
    if last < first {
        return None;
    }
    if first >= len {
        return Some(Err(()));
    }
    Some(Ok(first..last.min(len - 1) + 1))
}

/// The 206 header block for `r` of `f`.
pub fn partial_head(f: &File, r: &Range<usize>) -> String {
    format!(
        "HTTP/1.1 206 Partial Content\r\nServer: squall\r\nContent-Type: {}\r\n\
         Content-Length: {}\r\nContent-Range: bytes {}-{}/{}\r\nLast-Modified: {}\r\n\
         ETag: {}\r\nAccept-Ranges: bytes\r\n",
        f.content_type,
        r.len(),
        r.start,
        r.end - 1,
        f.data.len(),
        f.last_modified,
        f.etag
    )
}

/// The 304 answer for `f` to a request of version `v` (the status line says HTTP/1.1 as
/// every answer does, RFC 9110 §6.2; the tail keeps an HTTP/1.0 client alive).
pub fn not_modified(f: &File, date: &str, keep_alive: bool, v: Version) -> Vec<u8> {
    let mut h = format!(
        "{}Server: squall\r\nLast-Modified: {}\r\nETag: {}\r\n",
        status_line(Version::Http11, 304),
        f.last_modified,
        f.etag
    )
    .into_bytes();
    h.extend_from_slice(&tail(date, keep_alive, v));
    h
}

/// Whether `m` is answered at all (GET, HEAD) or with 405 (other known methods) or
/// 501 (methods this server does not know).
pub fn method_status(m: Method) -> Option<u16> {
    match m {
        Method::Get | Method::Head => None,
        Method::Other => Some(501),
        _ => Some(405),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn routes_parse() {
        let r = Route::parse(r#"/ping return 200 "pong\n""#).unwrap();
        assert_eq!(
            (r.path.as_str(), r.code, r.text.as_str()),
            ("/ping", 200, "pong\n")
        );
        assert_eq!(Route::parse("/x return 404").unwrap().text, "");
        assert_eq!(
            Route::parse(r#"/q return 200 "a \"b\"""#).unwrap().text,
            "a \"b\""
        );
        for bad in [
            "x return 200",
            "/x 200",
            "/x return abc",
            "/x return 200 pong",
            "/x return 99",
            "/x return 304",
            "/x return 205 \"text\"",
        ] {
            assert!(Route::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn ranges() {
        assert_eq!(byte_range(b"bytes=0-3", 10), Some(Ok(0..4)));
        assert_eq!(byte_range(b"bytes=5-", 10), Some(Ok(5..10)));
        assert_eq!(byte_range(b"bytes=-3", 10), Some(Ok(7..10)));
        assert_eq!(byte_range(b"bytes=-30", 10), Some(Ok(0..10)));
        assert_eq!(byte_range(b"bytes=8-100", 10), Some(Ok(8..10)));
        assert_eq!(byte_range(b"bytes=10-", 10), Some(Err(())));
        assert_eq!(byte_range(b"bytes=-0", 10), Some(Err(())));
        assert_eq!(byte_range(b"bytes=3-1", 10), None);
        assert_eq!(byte_range(b"bytes=0-1,3-4", 10), None);
        assert_eq!(byte_range(b"items=0-1", 10), None);
        assert_eq!(byte_range(b"bytes=a-1", 10), None);
        // The unit is case-insensitive; a suffix of an empty representation is
        // satisfiable by the whole of it (the Range ignored), not a 416.
        assert_eq!(byte_range(b"Bytes=0-3", 10), Some(Ok(0..4)));
        assert_eq!(byte_range(b"BYTES=-3", 10), Some(Ok(7..10)));
        assert_eq!(byte_range(b"bytes=-5", 0), None);
        assert_eq!(byte_range(b"bytes=0-", 0), Some(Err(())));
        assert_eq!(byte_range(b"bytes", 10), None);
    }

    #[test]
    fn etags() {
        assert!(weak_match(b"\"x\", W/\"abc\"", "\"abc\""));
        assert!(weak_match(b"*", "\"abc\""));
        assert!(!weak_match(b"\"abd\"", "\"abc\""));
        assert!(strong_match(b"\"x\", \"abc\"", "\"abc\""));
        assert!(strong_match(b"*", "\"abc\""));
        assert!(!strong_match(b"W/\"abc\"", "\"abc\""));
        assert!(!strong_match(b"\"abd\"", "\"abc\""));
    }

    /// The answer `decide` gives a request with `fields` for a 10-byte file last
    /// modified at 1,700,000,000 (Tue, 14 Nov 2023 22:13:20 GMT).
    fn answer(method: &str, fields: &str) -> FileAnswer {
        let f = File::new("a.txt", Arc::from(&b"0123456789"[..]), 1_700_000_000);
        let text = format!("{method} /a.txt HTTP/1.1\r\nHost: a\r\n{fields}\r\n");
        let mut h = [squall_http::Header::EMPTY; 16];
        let req = squall_http::parse_request(text.as_bytes(), &mut h, &Default::default())
            .unwrap()
            .unwrap();
        decide(&req, &f)
    }

    #[test]
    fn preconditions_in_the_order_of_rfc_9110() {
        use FileAnswer::*;
        let tag = "\"6553f100-a\"";
        let older = "Mon, 13 Nov 2023 00:00:00 GMT";
        let same = "Tue, 14 Nov 2023 22:13:20 GMT";
        let later = "Wed, 15 Nov 2023 00:00:00 GMT";
        let cases: Vec<(String, FileAnswer)> = vec![
            (String::new(), Full),
            // If-Match: strong comparison, `*`, a list over several lines.
            ("If-Match: \"x\"\r\n".into(), PreconditionFailed),
            (format!("If-Match: W/{tag}\r\n"), PreconditionFailed),
            (format!("If-Match: \"x\", {tag}\r\n"), Full),
            (format!("If-Match: \"x\"\r\nIf-Match: {tag}\r\n"), Full),
            ("If-Match: *\r\n".into(), Full),
            // If-Unmodified-Since, only without If-Match; invalid dates ignored.
            (
                format!("If-Unmodified-Since: {older}\r\n"),
                PreconditionFailed,
            ),
            (format!("If-Unmodified-Since: {same}\r\n"), Full),
            ("If-Unmodified-Since: yesterday\r\n".into(), Full),
            (
                format!("If-Match: {tag}\r\nIf-Unmodified-Since: {older}\r\n"),
                Full,
            ),
            // A failed precondition wins over a range.
            (
                format!("If-Unmodified-Since: {older}\r\nRange: bytes=2-\r\n"),
                PreconditionFailed,
            ),
            // If-None-Match over several lines; it overrides If-Modified-Since.
            (
                format!("If-None-Match: \"x\"\r\nIf-None-Match: {tag}\r\n"),
                NotModified,
            ),
            (format!("If-None-Match: W/{tag}\r\n"), NotModified),
            (
                format!("If-None-Match: \"x\"\r\nIf-Modified-Since: {later}\r\n"),
                Full,
            ),
            (format!("If-Modified-Since: {same}\r\n"), NotModified),
            (format!("If-Modified-Since: {older}\r\n"), Full),
            // Range, with If-Range.
            ("Range: bytes=2-4\r\n".into(), Partial(2..5)),
            ("Range: bytes=10-\r\n".into(), Unsatisfiable),
            (
                format!("Range: bytes=2-4\r\nIf-Range: {tag}\r\n"),
                Partial(2..5),
            ),
            ("Range: bytes=2-4\r\nIf-Range: \"x\"\r\n".into(), Full),
            (
                format!("Range: bytes=2-4\r\nIf-Range: {same}\r\n"),
                Partial(2..5),
            ),
        ];
        for (fields, want) in cases {
            assert_eq!(answer("GET", &fields), want, "{fields}");
        }
        // HEAD: no range handling (RFC 9110 §14.2), preconditions as for GET.
        assert_eq!(answer("HEAD", "Range: bytes=2-4\r\n"), Full);
        assert_eq!(answer("HEAD", "Range: bytes=10-\r\n"), Full);
        assert_eq!(answer("HEAD", "If-Match: \"x\"\r\n"), PreconditionFailed);
    }

    #[test]
    fn route_preconditions_in_order() {
        use FileAnswer::*;
        let req = |fields: &str| {
            let text = format!("GET /p HTTP/1.1\r\nHost: a\r\n{fields}\r\n");
            let mut h = [squall_http::Header::EMPTY; 16];
            let r = squall_http::parse_request(text.as_bytes(), &mut h, &Default::default())
                .unwrap()
                .unwrap();
            route_preconditions(&r)
        };
        assert_eq!(req(""), Full);
        assert_eq!(req("If-Match: \"x\"\r\n"), PreconditionFailed);
        assert_eq!(req("If-Match: \"x\", *\r\n"), Full);
        assert_eq!(
            req("If-Unmodified-Since: Mon, 13 Nov 2023 00:00:00 GMT\r\n"),
            Full
        );
        assert_eq!(req("If-None-Match: *\r\n"), NotModified);
        assert_eq!(req("If-None-Match: \"x\"\r\n"), Full);
        assert_eq!(
            req("If-Match: \"x\"\r\nIf-None-Match: *\r\n"),
            PreconditionFailed,
            "If-Match first"
        );
    }
}
