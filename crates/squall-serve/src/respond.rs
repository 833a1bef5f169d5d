//! What `squall serve` answers a request with: the route or file it names, conditional
//! requests (If-None-Match, If-Modified-Since: 304), byte ranges (206, 416), and the
//! header blocks of every answer. Pure functions of the request: the app sends the parts.

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

/// The header block of a route's answer, up to (not including) Date and the end.
pub fn route_head(r: &Route) -> String {
    format!(
        "{}Server: squall\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n",
        status_line(Version::Http11, r.code),
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

/// An answer with a small body of its own (errors, 304, 416), whole.
pub fn small(
    code: u16,
    extra: &str,
    body: &str,
    head_only: bool,
    date: &str,
    keep_alive: bool,
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
    v.extend_from_slice(&tail(date, keep_alive, Version::Http11));
    if !head_only {
        v.extend_from_slice(body.as_bytes());
    }
    v
}

/// The answer of an error status (`404 Not Found\n` as the body).
pub fn error(code: u16, head_only: bool, date: &str, keep_alive: bool) -> Vec<u8> {
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
}

/// Decides a GET/HEAD of file `f` (RFC 9110 §13.2.2 order: If-None-Match, else
/// If-Modified-Since; then Range, with If-Range).
pub fn decide(req: &Request<'_, '_>, f: &File) -> FileAnswer {
    if let Some(inm) = req.header("if-none-match") {
        if etag_matches(inm, &f.etag) {
            return FileAnswer::NotModified;
        }
    } else if let Some(ims) = req.header("if-modified-since") {
        if let Some(t) = parse_date(ims) {
            if f.mtime <= t {
                return FileAnswer::NotModified;
            }
        }
    }
    let Some(range) = req.header("range") else {
        return FileAnswer::Full;
    };
    if let Some(ir) = req.header("if-range") {
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

/// Whether an If-None-Match list matches `etag` (weak comparison, `*` matches).
fn etag_matches(list: &[u8], etag: &str) -> bool {
    let tag = etag.as_bytes();
    list.split(|&c| c == b',').any(|t| {
        let t = t.trim_ascii();
        t == b"*" || t.strip_prefix(b"W/").unwrap_or(t) == tag
    })
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
    let spec = std::str::from_utf8(v.strip_prefix(b"bytes=")?).ok()?.trim();
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
        // Suffix: the last N bytes.
        let n = num(b)?;
        if n == 0 || len == 0 {
            return Some(Err(()));
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

/// The 304 answer for `f`.
pub fn not_modified(f: &File, date: &str, keep_alive: bool, v: Version) -> Vec<u8> {
    let mut h = format!(
        "{}Server: squall\r\nLast-Modified: {}\r\nETag: {}\r\n",
        status_line(v, 304),
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
    }

    #[test]
    fn etags() {
        assert!(etag_matches(b"\"x\", W/\"abc\"", "\"abc\""));
        assert!(etag_matches(b"*", "\"abc\""));
        assert!(!etag_matches(b"\"abd\"", "\"abc\""));
    }
}
