//! The head of a message: the request line or status line and the header section
//! (RFC 9112 §2-§5), and what it says about the message's framing and the connection
//! (RFC 9112 §6, §9): body kind, keep-alive, `Expect: 100-continue`.

use core::mem::MaybeUninit;

use crate::body::BodyKind;
use crate::error::Error;
use crate::fast::RequestLine;
use crate::limits::Limits;
use crate::syntax::{
    all_tchar, find_lf, is_field_vchar, is_target_char, is_tchar, is_token, list, name_is,
    trim_ows, word_has_ctl,
};

/// The protocol version of a message (HTTP/1.x with a minor version above 1 is taken as
/// 1.1, RFC 9110 §6.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    Http10,
    Http11,
}

impl Version {
    /// `HTTP/1.0` or `HTTP/1.1`.
    pub fn as_str(self) -> &'static str {
        match self {
            Version::Http10 => "HTTP/1.0",
            Version::Http11 => "HTTP/1.1",
        }
    }
}

/// A request method (RFC 9110 §9 and PATCH); `Other` for any other token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Get,
    Head,
    Post,
    Put,
    Delete,
    Connect,
    Options,
    Trace,
    Patch,
    Other,
}

impl Method {
    /// The method of token `m` (methods are case-sensitive, RFC 9110 §9.1).
    #[inline]
    pub fn from_bytes(m: &[u8]) -> Method {
        match m {
            b"GET" => Method::Get,
            b"HEAD" => Method::Head,
            b"POST" => Method::Post,
            b"PUT" => Method::Put,
            b"DELETE" => Method::Delete,
            b"CONNECT" => Method::Connect,
            b"OPTIONS" => Method::Options,
            b"TRACE" => Method::Trace,
            b"PATCH" => Method::Patch,
            _ => Method::Other,
        }
    }
}

/// One header field: slices of the input buffer (name as received; compare it with
/// `eq_ignore_ascii_case`; value without surrounding whitespace).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Header<'b> {
    pub name: &'b [u8],
    pub value: &'b [u8],
}

impl Header<'_> {
    /// An empty entry, to fill the caller's array with.
    pub const EMPTY: Header<'static> = Header {
        name: b"",
        value: b"",
    };
    /// A slot for [`parse_request_in`] / [`parse_response_in`]: nothing to write.
    pub const SLOT: MaybeUninit<Header<'static>> = MaybeUninit::uninit();
}

/// A parsed request head. `head_len` bytes of the buffer were used; the body (if any)
/// follows, framed as `body` says.
#[derive(Debug)]
pub struct Request<'b, 'h> {
    pub method: Method,
    /// The method token as received (for `Method::Other`, logs).
    pub method_raw: &'b [u8],
    /// The request-target as received (origin-form `/path?query`, absolute-form, `*`).
    pub target: &'b [u8],
    /// Bytes of `target` before its first `?` ([`Request::path`]).
    path_len: usize,
    pub version: Version,
    pub headers: &'h [Header<'b>],
    /// Bytes of the head, leading empty lines included (RFC 9112 §2.2).
    pub head_len: usize,
    /// How the body is framed (never `Close` for a request).
    pub body: BodyKind,
    /// The connection may carry another request after this one's response.
    pub keep_alive: bool,
    /// `Expect: 100-continue` (RFC 9110 §10.1.1) in an HTTP/1.1 request; a server MUST
    /// ignore it in an HTTP/1.0 one, so it is never set there.
    pub expect_continue: bool,
    /// An `Expect` value other than 100-continue (a server answers 417).
    pub expect_other: bool,
    /// A precondition field is present (If-Match, If-None-Match, If-Modified-Since,
    /// If-Unmodified-Since: RFC 9110 §13.1), for a server to evaluate.
    pub conditional: bool,
}

/// A parsed response head.
#[derive(Debug)]
pub struct Response<'b, 'h> {
    pub version: Version,
    /// Status code: three digits, 100-599 valid (a client treats another as a 5xx,
    /// RFC 9110 §15).
    pub code: u16,
    pub reason: &'b [u8],
    pub headers: &'h [Header<'b>],
    /// Bytes of the head.
    pub head_len: usize,
    /// How the body is framed (`None` for HEAD answers, 1xx, 204 and 304).
    pub body: BodyKind,
    /// The connection may carry another request after this response.
    pub keep_alive: bool,
}

impl<'b> Request<'b, '_> {
    /// The value of the first header named `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&'b [u8]> {
        find(self.headers, name)
    }
    /// The path of the target (before `?`; found while the request line was read).
    pub fn path(&self) -> &'b [u8] {
        self.target.get(..self.path_len).unwrap_or(self.target)
    }
}

impl<'b> Response<'b, '_> {
    /// The value of the first header named `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&'b [u8]> {
        find(self.headers, name)
    }
}

fn find<'b>(h: &[Header<'b>], name: &str) -> Option<&'b [u8]> {
    h.iter()
        .find(|h| h.name.eq_ignore_ascii_case(name.as_bytes()))
        .map(|h| h.value)
}

/// Parses a request head from the start of `buf` into `headers`. `Ok(None)`: the head
/// is not complete yet (parse again with more bytes; nothing is kept between calls).
/// Leading empty lines are skipped (RFC 9112 §2.2). Lines must end in CRLF.
pub fn parse_request<'b, 'h>(
    buf: &'b [u8],
    headers: &'h mut [Header<'b>],
    lim: &Limits,
) -> Result<Option<Request<'b, 'h>>, Error> {
    parse_request_in(buf, as_slots(headers), lim)
}

/// [`parse_request`] into an array the caller has not initialised (`[Header::SLOT; N]`
/// or `[const { MaybeUninit::uninit() }; N]`: nothing is written before the parse, the
/// parser writes the fields it finds).
pub fn parse_request_in<'b, 'h>(
    buf: &'b [u8],
    headers: &'h mut [MaybeUninit<Header<'b>>],
    lim: &Limits,
) -> Result<Option<Request<'b, 'h>>, Error> {
    let mut pos = 0;
    while buf[pos..].starts_with(b"\r\n") {
        pos += 2;
        if pos > lim.max_head {
            return Err(Error::BadRequest("too many empty lines before the request"));
        }
    }
    let start = match crate::fast::request_line(buf, pos, lim.max_start_line) {
        Some(l) => l,
        None => {
            let Some((line, next)) = line(buf, pos, lim.max_start_line, Error::UriTooLong)? else {
                return Ok(None);
            };
            general_request_line(line, next)?
        }
    };
    let RequestLine {
        method,
        method_raw,
        target,
        path_len,
        version,
        next,
    } = start;
    let Some((n, head_len)) = fields(buf, next, headers, lim, false)? else {
        return Ok(None);
    };
    let headers = filled(headers, n);
    let f = Semantics::of(headers)?;
    if f.te.is_some() && version == Version::Http10 {
        return Err(Error::BadRequest(
            "Transfer-Encoding in an HTTP/1.0 request",
        ));
    }
    let body = framing(&f, lim, false)?;
    if lim.require_host && version == Version::Http11 && f.hosts != 1 {
        return Err(Error::BadRequest(if f.hosts == 0 {
            "HTTP/1.1 request without Host"
        } else {
            "more than one Host"
        }));
    }
    if f.hosts > 1 {
        return Err(Error::BadRequest("more than one Host"));
    }
    // RFC 9112 §3.2: a Host field with an invalid value is answered 400.
    if f.hosts == 1 && !crate::syntax::valid_host(f.host) {
        return Err(Error::BadRequest("invalid Host"));
    }
    Ok(Some(Request {
        method,
        method_raw,
        target,
        path_len,
        version,
        headers,
        head_len,
        body,
        keep_alive: f.keep_alive(version),
        expect_continue: f.expect_continue && version == Version::Http11,
        expect_other: f.expect_other,
        conditional: f.conditional,
    }))
}

/// Parses a response head from the start of `buf`. `head_request`: the request was HEAD
/// (no body follows whatever the headers say). `Ok(None)`: incomplete.
pub fn parse_response<'b, 'h>(
    buf: &'b [u8],
    headers: &'h mut [Header<'b>],
    lim: &Limits,
    head_request: bool,
) -> Result<Option<Response<'b, 'h>>, Error> {
    parse_response_in(buf, as_slots(headers), lim, head_request)
}

/// [`parse_response`] into an array the caller has not initialised (as
/// [`parse_request_in`]).
pub fn parse_response_in<'b, 'h>(
    buf: &'b [u8],
    headers: &'h mut [MaybeUninit<Header<'b>>],
    lim: &Limits,
    head_request: bool,
) -> Result<Option<Response<'b, 'h>>, Error> {
    let (version, code, reason, next) = match crate::fast::status_line(buf, lim.max_start_line) {
        Some(l) => l,
        None => {
            let Some((line, next)) = line(buf, 0, lim.max_start_line, Error::HeadersTooLarge)?
            else {
                return Ok(None);
            };
            let (v, c, r) = status_line(line)?;
            (v, c, r, next)
        }
    };
    let Some((n, head_len)) = fields(buf, next, headers, lim, true)? else {
        return Ok(None);
    };
    let headers = filled(headers, n);
    let f = Semantics::of(headers)?;
    let no_body = head_request || (100..200).contains(&code) || code == 204 || code == 304;
    let body = if no_body {
        BodyKind::None
    } else if f.te.is_some() && version == Version::Http10 {
        // Transfer-Encoding in an HTTP/1.0 message: its framing is faulty, the
        // connection closes after it (RFC 9112 §6.1): read until then.
        BodyKind::Close
    } else {
        framing(&f, lim, true)?
    };
    Ok(Some(Response {
        version,
        code,
        reason,
        headers,
        head_len,
        body,
        keep_alive: body != BodyKind::Close && f.keep_alive(version),
    }))
}

/// The body framing of a message with a body (RFC 9112 §6.3): chunked, Content-Length,
/// or (responses only) until close; the ambiguous shapes refused.
fn framing(f: &Semantics, lim: &Limits, response: bool) -> Result<BodyKind, Error> {
    Ok(match (f.te, f.cl) {
        (Some(_), Some(_)) => {
            return Err(Error::BadRequest(
                "both Transfer-Encoding and Content-Length",
            ))
        }
        (Some(Coding::Chunked), None) => BodyKind::Chunked,
        // RFC 9112 §6.3 item 4: chunked last frames the body whatever came before it; a
        // client reads a response so (the other codings are the content's, undecoded), a
        // server answers 501 to a request coding it does not implement (§6.1).
        (Some(Coding::OtherThenChunked), None) if response => BodyKind::Chunked,
        (Some(Coding::OtherThenChunked), None) => {
            return Err(Error::NotImplemented("transfer coding other than chunked"))
        }
        // RFC 9112 §6.3 item 4: a response is read until the connection closes; a
        // request cannot be framed (400).
        (Some(Coding::NotChunkedLast), None) if response => BodyKind::Close,
        (Some(Coding::NotChunkedLast), None) => {
            return Err(Error::BadRequest(
                "request transfer coding not ending in chunked",
            ))
        }
        (None, Some(n)) if n > lim.max_body => return Err(Error::BodyTooLarge),
        (None, Some(0)) => BodyKind::None,
        (None, Some(n)) => BodyKind::Length(n),
        (None, None) if response => BodyKind::Close,
        (None, None) => BodyKind::None,
    })
}

/// The line starting at `pos` (without CRLF) and where the next begins; `None` if its
/// LF has not arrived. A line longer than `max` is `too_long`.
fn line(
    buf: &[u8],
    pos: usize,
    max: usize,
    too_long: Error,
) -> Result<Option<(&[u8], usize)>, Error> {
    let rest = &buf[pos..];
    let Some(lf) = find_lf(&rest[..rest.len().min(max + 2)]) else {
        return if rest.len() > max + 1 {
            Err(too_long)
        } else {
            Ok(None)
        };
    };
    if lf == 0 || rest[lf - 1] != b'\r' {
        return Err(Error::BadRequest("line not ended by CRLF"));
    }
    if lf - 1 > max {
        return Err(too_long);
    }
    Ok(Some((&rest[..lf - 1], pos + lf + 1)))
}

/// The request line `l` (CRLF removed; the next line at `next`) by the general code.
fn general_request_line(l: &[u8], next: usize) -> Result<RequestLine<'_>, Error> {
    let (m, t, version) = request_line(l)?;
    Ok(RequestLine {
        method: Method::from_bytes(m),
        method_raw: m,
        target: t,
        path_len: t.iter().position(|&c| c == b'?').unwrap_or(t.len()),
        version,
        next,
    })
}

/// `method SP request-target SP HTTP-version` (RFC 9112 §3).
fn request_line(l: &[u8]) -> Result<(&[u8], &[u8], Version), Error> {
    let mut parts = l.splitn(3, |&c| c == b' ');
    let (Some(m), Some(t), Some(v)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(Error::BadRequest("malformed request line"));
    };
    if !is_token(m) {
        return Err(Error::BadRequest("malformed method"));
    }
    if t.is_empty() || !t.iter().all(|&c| is_target_char(c)) {
        return Err(Error::BadRequest("malformed request target"));
    }
    Ok((m, t, version(v)?))
}

/// `HTTP/DIGIT.DIGIT`.
fn version(v: &[u8]) -> Result<Version, Error> {
    match v {
        b"HTTP/1.1" => Ok(Version::Http11),
        b"HTTP/1.0" => Ok(Version::Http10),
        [b'H', b'T', b'T', b'P', b'/', b'1', b'.', d] if d.is_ascii_digit() => Ok(Version::Http11),
        [b'H', b'T', b'T', b'P', b'/', a, b'.', b] if a.is_ascii_digit() && b.is_ascii_digit() => {
            Err(Error::VersionNotSupported)
        }
        _ => Err(Error::BadRequest("malformed HTTP version")),
    }
}

/// `HTTP-version SP status-code SP [reason-phrase]` (RFC 9112 §4; the SP before an
/// empty reason may be missing, as many servers send it).
fn status_line(l: &[u8]) -> Result<(Version, u16, &[u8]), Error> {
    if l.len() < 12 || l[8] != b' ' {
        return Err(Error::BadRequest("malformed status line"));
    }
    let v = version(&l[..8])?;
    let c = &l[9..12];
    if !c.iter().all(u8::is_ascii_digit) {
        return Err(Error::BadRequest("malformed status code"));
    }
    let code = c.iter().fold(0u16, |a, &d| a * 10 + u16::from(d - b'0'));
    let reason = match &l[12..] {
        [] => &l[12..],
        [b' ', r @ ..] => r,
        _ => return Err(Error::BadRequest("malformed status line")),
    };
    if !reason.iter().all(|&c| is_field_vchar(c)) {
        return Err(Error::BadRequest("malformed reason phrase"));
    }
    Ok((v, code, reason))
}

/// The header section from `pos` up to and including the empty line: the number of
/// fields stored and the head's total length; `None` if incomplete. One pass over each
/// line (RFC 9112 §5: `field-name ":" OWS field-value OWS CRLF`); plain lines through
/// the vector fast path (`fast.rs`), the rest, and every error, through the general code.
#[inline]
fn fields<'b>(
    buf: &'b [u8],
    pos: usize,
    out: &mut [MaybeUninit<Header<'b>>],
    lim: &Limits,
    fold: bool,
) -> Result<Option<(usize, usize)>, Error> {
    fields_with::<true>(buf, pos, out, lim, fold)
}

/// [`fields`], with (`FAST`) or without the fast path: the tests check that both agree.
/// The fast loop is inlined into the head parsers; the general code, for the lines it
/// leaves, is a call. `fold`: a line starting with SP or HTAB continues the field before
/// it (obs-fold, which a user agent MUST accept in a response, RFC 9112 §5.2: the value
/// then spans the fold, its CRLF read as whitespace); else it is refused.
#[inline(always)]
fn fields_with<'b, const FAST: bool>(
    buf: &'b [u8],
    mut pos: usize,
    out: &mut [MaybeUninit<Header<'b>>],
    lim: &Limits,
    fold: bool,
) -> Result<Option<(usize, usize)>, Error> {
    let mut n = 0;
    let len = buf.len();
    let max_n = lim.max_headers.min(out.len());
    // No line of a buffer this short can reach the line or head limit: the fast loop
    // then checks neither.
    let short = len <= lim.max_head.min(lim.max_header_line);
    loop {
        if FAST {
            // Plain lines back to back (at a limit the general code decides), then the
            // head's end; anything else goes to the general code, one line at a time.
            while let Some((name, value, end)) = crate::fast::field_line(buf, pos) {
                if (!short && (end - pos > lim.max_header_line || end + 2 > lim.max_head))
                    || n >= max_n
                {
                    break;
                }
                out[n] = MaybeUninit::new(Header { name, value });
                n += 1;
                pos = end + 2;
            }
            if buf.get(pos..pos + 2) == Some(b"\r\n") && pos + 2 <= lim.max_head {
                return Ok(Some((n, pos + 2)));
            }
        }
        match general_line(buf, pos, n >= max_n, lim, fold && n > 0)? {
            Line::Field(h, next) => {
                out[n] = MaybeUninit::new(h);
                n += 1;
                pos = next;
            }
            Line::Fold(end, next) => {
                let h = filled(out, n)[n - 1];
                // (the value's offset in `buf`, which it is a slice of; an empty value
                // is an empty slice at the line's end)
                let from = (h.value.as_ptr() as usize).wrapping_sub(buf.as_ptr() as usize);
                let from = from.min(end);
                out[n - 1] = MaybeUninit::new(Header {
                    name: h.name,
                    value: trim_ows(&buf[from..end]),
                });
                pos = next;
            }
            Line::End(head_len) => return Ok(Some((n, head_len))),
            Line::Incomplete => return Ok(None),
        }
    }
}

/// What the general code made of the line at `pos`.
enum Line<'b> {
    /// A field, and where the next line starts.
    Field(Header<'b>, usize),
    /// A continuation of the field before (obs-fold): where its value now ends, and where
    /// the next line starts.
    Fold(usize, usize),
    /// The head's empty last line: the head's length.
    End(usize),
    /// Not all here yet.
    Incomplete,
}

/// The header line at `pos` by the general code (every shape; every error decided here).
/// `full`: no slot is left for another field. `fold`: a line starting with SP or HTAB
/// continues the field before it ([`Line::Fold`]).
#[inline(never)]
fn general_line<'b>(
    buf: &'b [u8],
    mut pos: usize,
    full: bool,
    lim: &Limits,
    fold: bool,
) -> Result<Line<'b>, Error> {
    let len = buf.len();
    // Incomplete at `at` (line began at `start`): an error if it cannot fit any more.
    let partial = |start: usize, at: usize| -> Result<Line<'b>, Error> {
        if at - start > lim.max_header_line + 1 || at > lim.max_head {
            Err(Error::HeadersTooLarge)
        } else {
            Ok(Line::Incomplete)
        }
    };
    let start = pos;
    let Some(&c) = buf.get(pos) else {
        return partial(start, len);
    };
    match c {
        b'\r' => {
            return match buf.get(pos + 1) {
                None => partial(start, len),
                Some(b'\n') if pos + 2 > lim.max_head => Err(Error::HeadersTooLarge),
                Some(b'\n') => Ok(Line::End(pos + 2)),
                Some(_) => Err(Error::BadRequest("line not ended by CRLF")),
            }
        }
        b'\n' => return Err(Error::BadRequest("line not ended by CRLF")),
        b' ' | b'\t' if fold => {
            // Whitespace and value bytes up to CRLF.
            while pos < len && is_field_vchar(buf[pos]) {
                pos += 1;
            }
            return match (buf.get(pos), buf.get(pos + 1)) {
                (None, _) | (Some(b'\r'), None) => partial(start, len),
                (Some(b'\r'), Some(b'\n'))
                    if pos - start > lim.max_header_line || pos + 2 > lim.max_head =>
                {
                    Err(Error::HeadersTooLarge)
                }
                (Some(b'\r'), Some(b'\n')) => Ok(Line::Fold(pos, pos + 2)),
                (Some(b'\r' | b'\n'), _) => Err(Error::BadRequest("line not ended by CRLF")),
                _ => Err(Error::BadRequest("invalid character in a field value")),
            };
        }
        b' ' | b'\t' => return Err(Error::BadRequest("obsolete line folding")),
        _ => {}
    }
    // The name ends at the first colon; all of it must be tchars (checked without a
    // branch per byte: the first byte that is not is looked for only on failure).
    let Some(colon) = find_colon(buf, pos) else {
        return match buf[pos..].iter().position(|&c| !is_tchar(c)) {
            Some(k) => Err(Error::BadRequest(match buf[pos + k] {
                b' ' | b'\t' => "whitespace between a field name and the colon",
                b'\r' | b'\n' => "header field without a colon",
                _ => "malformed field name",
            })),
            None => partial(start, len),
        };
    };
    if !all_tchar(&buf[pos..colon]) {
        pos += buf[pos..colon]
            .iter()
            .position(|&c| !is_tchar(c))
            .unwrap_or(0);
    } else {
        pos = colon;
    }
    let c = buf[pos];
    if c != b':' {
        return Err(Error::BadRequest(match c {
            b' ' | b'\t' => "whitespace between a field name and the colon",
            b'\r' | b'\n' => "header field without a colon",
            _ => "malformed field name",
        }));
    }
    if pos == start {
        return Err(Error::BadRequest("empty field name"));
    }
    let name = &buf[start..pos];
    pos += 1;
    while pos < len && matches!(buf[pos], b' ' | b'\t') {
        pos += 1;
    }
    let vstart = pos;
    // Eight bytes at a time while they are all plain value bytes, then one by one.
    while let Some(w) = buf.get(pos..pos + 8) {
        let w = u64::from_le_bytes(w.try_into().unwrap_or([0; 8]));
        if word_has_ctl(w) {
            break;
        }
        pos += 8;
    }
    while pos < len && is_field_vchar(buf[pos]) {
        pos += 1;
    }
    match (buf.get(pos), buf.get(pos + 1)) {
        (None, _) | (Some(b'\r'), None) => return partial(start, len),
        (Some(b'\r'), Some(b'\n')) => {}
        (Some(b'\r' | b'\n'), _) => return Err(Error::BadRequest("line not ended by CRLF")),
        _ => return Err(Error::BadRequest("invalid character in a field value")),
    }
    if pos - start > lim.max_header_line || pos + 2 > lim.max_head {
        return Err(Error::HeadersTooLarge);
    }
    if full {
        return Err(Error::HeadersTooLarge);
    }
    Ok(Line::Field(
        Header {
            name,
            value: trim_ows(&buf[vstart..pos]),
        },
        pos + 2,
    ))
}

/// An initialised header array seen as slots the parser writes (only initialised
/// headers are ever written into it, so it stays initialised).
fn as_slots<'a, 'b>(h: &'a mut [Header<'b>]) -> &'a mut [MaybeUninit<Header<'b>>] {
    // SAFETY: `MaybeUninit<T>` has the layout of `T`; the parser only stores initialised
    // `Header`s through the returned slice, so `h` holds valid headers afterwards.
    unsafe { &mut *(h as *mut [Header<'b>] as *mut [MaybeUninit<Header<'b>>]) }
}

/// The first `n` slots, which `fields` wrote.
fn filled<'h, 'b>(h: &'h [MaybeUninit<Header<'b>>], n: usize) -> &'h [Header<'b>] {
    let h = &h[..n];
    // SAFETY: `fields` returned `n`, having written slots `0..n` (it stores each header
    // before counting it); `MaybeUninit<T>` has the layout of `T`.
    unsafe { &*(h as *const [MaybeUninit<Header<'b>>] as *const [Header<'b>]) }
}

/// The first `:` at or after `pos`: eight bytes at a time (names are short: a library
/// memchr's setup costs more than the search), then byte by byte.
#[inline]
fn find_colon(buf: &[u8], mut pos: usize) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    while let Some(w) = buf.get(pos..pos + 8) {
        let x = u64::from_le_bytes(w.try_into().unwrap_or([0; 8])) ^ (ONES * u64::from(b':'));
        // The lowest flagged byte is the first colon (false flags only sit above a true one).
        let m = x.wrapping_sub(ONES) & !x & HIGH;
        if m != 0 {
            return Some(pos + (m.trailing_zeros() / 8) as usize);
        }
        pos += 8;
    }
    buf[pos..].iter().position(|&c| c == b':').map(|k| pos + k)
}

/// What a Transfer-Encoding list ends with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Coding {
    /// Exactly `chunked`.
    Chunked,
    /// Other codings, then `chunked` last.
    OtherThenChunked,
    /// The last coding is not chunked.
    NotChunkedLast,
}

/// The framing and connection fields of a head.
#[derive(Default)]
struct Semantics<'b> {
    /// The value of the (last) Host field.
    host: &'b [u8],
    te: Option<Coding>,
    cl: Option<u64>,
    close: bool,
    keep_alive: bool,
    expect_continue: bool,
    expect_other: bool,
    conditional: bool,
    hosts: u32,
}

impl<'b> Semantics<'b> {
    #[inline(always)]
    fn of(headers: &[Header<'b>]) -> Result<Semantics<'b>, Error> {
        let mut s = Semantics::default();
        let mut codings = 0u32;
        let mut chunked_at = None;
        // A coding listed after chunked: chunked is then not the final coding.
        let mut after_chunked = false;
        for h in headers {
            let n = h.name;
            // Dispatch on the length: only nine names matter, each found by its length
            // first.
            match n.len() {
                14 if name_is(n, b"content-length") => {
                    if s.cl.is_some() {
                        return Err(Error::BadRequest("more than one Content-Length"));
                    }
                    s.cl = Some(
                        crate::syntax::parse_decimal(h.value)
                            .ok_or(Error::BadRequest("invalid Content-Length"))?,
                    );
                }
                17 if name_is(n, b"transfer-encoding") => {
                    let mut any = false;
                    for c in list(h.value) {
                        any = true;
                        if c.eq_ignore_ascii_case(b"chunked") {
                            // RFC 9112 §6.1: a sender MUST NOT apply chunked twice.
                            if chunked_at.is_some() {
                                return Err(Error::BadRequest("chunked applied twice"));
                            }
                            chunked_at = Some(codings);
                        } else if !is_token(c.split(|&b| b == b';').next().unwrap_or(c)) {
                            return Err(Error::BadRequest("malformed Transfer-Encoding"));
                        } else {
                            after_chunked |= chunked_at.is_some();
                        }
                        codings += 1;
                    }
                    if !any {
                        return Err(Error::BadRequest("empty Transfer-Encoding"));
                    }
                }
                10 if name_is(n, b"connection") => {
                    for t in list(h.value) {
                        if t.eq_ignore_ascii_case(b"close") {
                            s.close = true;
                        } else if t.eq_ignore_ascii_case(b"keep-alive") {
                            s.keep_alive = true;
                        }
                    }
                }
                6 if name_is(n, b"expect") => {
                    if h.value.eq_ignore_ascii_case(b"100-continue") {
                        s.expect_continue = true;
                    } else {
                        s.expect_other = true;
                    }
                }
                4 if name_is(n, b"host") => {
                    s.hosts += 1;
                    s.host = h.value;
                }
                8 if name_is(n, b"if-match") => s.conditional = true,
                13 if name_is(n, b"if-none-match") => s.conditional = true,
                17 if name_is(n, b"if-modified-since") => s.conditional = true,
                19 if name_is(n, b"if-unmodified-since") => s.conditional = true,
                _ => {}
            }
        }
        if codings > 0 {
            // Chunked not the final coding (none, or others after it): a response is read
            // until the connection closes, a request refused (RFC 9112 §6.3 item 4).
            s.te = Some(match chunked_at {
                _ if after_chunked => Coding::NotChunkedLast,
                Some(0) => Coding::Chunked,
                Some(_) => Coding::OtherThenChunked,
                None => Coding::NotChunkedLast,
            });
        }
        Ok(s)
    }

    /// RFC 9112 §9.3: 1.1 persists unless `close`; 1.0 only with `keep-alive`.
    fn keep_alive(&self, v: Version) -> bool {
        !self.close && (v == Version::Http11 || self.keep_alive)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Method, target, version, body kind, keep-alive, head length.
    type Parsed = (Method, String, Version, BodyKind, bool, usize);

    fn req(s: &str) -> Result<Option<Parsed>, Error> {
        let mut h = [Header::EMPTY; 16];
        let r = parse_request(s.as_bytes(), &mut h, &Limits::default())?;
        Ok(r.map(|r| {
            (
                r.method,
                String::from_utf8_lossy(r.target).into_owned(),
                r.version,
                r.body,
                r.keep_alive,
                r.head_len,
            )
        }))
    }

    #[test]
    fn colon_search_agrees_with_a_plain_scan() {
        let text = b"Content-Length: 3\r\nX:y\r\nabcdefghijklmnop:q\r\nnone";
        for pos in 0..text.len() {
            let want = text[pos..].iter().position(|&c| c == b':').map(|k| pos + k);
            assert_eq!(find_colon(text, pos), want, "from {pos}");
        }
        for c in 0..=255u8 {
            let mut b = *b"abcdefgh:";
            b[3] = c;
            let want = b.iter().position(|&x| x == b':');
            assert_eq!(find_colon(&b, 0), want, "byte {c:#x}");
        }
    }

    /// The fast path and the general code give the same answer for every head: lines
    /// of every shape the fast path takes or leaves, each byte of them replaced by bytes of
    /// every class, at every length (incomplete heads included), with tight limits.
    #[test]
    fn fast_path_agrees_with_the_general_code() {
        let base: &[u8] =
            b"Host: a\r\nX-Long-Name-Here: v\r\nDate: Wed, 25 Nov 2026 14:50:00 GMT\r\n\
            E:\r\nS:  two\r\nT:\tx\r\nU: y \r\nContent-Length: 80\r\n\r\ntrailing body bytes....";
        let lims = [
            Limits::default(),
            Limits {
                max_header_line: 20,
                max_head: 60,
                max_headers: 3,
                ..Limits::default()
            },
        ];
        let check = |buf: &[u8]| {
            for lim in &lims {
                for len in [buf.len(), buf.len() / 2, buf.len().saturating_sub(30)] {
                    let b = &buf[..len];
                    for fold in [false, true] {
                        let (mut h1, mut h2) = ([Header::EMPTY; 8], [Header::EMPTY; 8]);
                        let a = fields_with::<true>(b, 0, as_slots(&mut h1), lim, fold);
                        let g = fields_with::<false>(b, 0, as_slots(&mut h2), lim, fold);
                        assert_eq!(a, g, "{:?}", String::from_utf8_lossy(b));
                        assert_eq!(h1, h2);
                    }
                }
            }
        };
        check(base);
        for i in 0..110 {
            for c in [
                0u8, b'\t', b'\n', b'\r', b' ', b':', b'"', b'a', 0x7f, 0x80, 0xff,
            ] {
                let mut b = base.to_vec();
                b[i] = c;
                check(&b);
            }
        }
    }

    /// Random heads (several bytes of a realistic head replaced at random, lines cut
    /// short, limits varied): the fast paths and the general code agree on every one.
    #[test]
    fn fast_paths_agree_on_random_heads() {
        let bases: [&[u8]; 3] = [
            b"HTTP/1.1 200 OK\r\nServer: squall\r\nContent-Type: text/plain\r\n\
              Content-Length: 80\r\nDate: Wed, 25 Nov 2026 14:50:00 GMT\r\n\r\nABCDEFGHIJKLMNOPQRSTUVWXYZ",
            b"GET /testu?a=b HTTP/1.1\r\nHost: 48.0.0.1\r\nUser-Agent: curl/8.5.0\r\n\
              Accept: */*\r\nX-Some_Tchar.Name~: v\r\n\r\n0123456789abcdef",
            b"POST /up HTTP/1.0\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\
              Expect: 100-continue\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        ];
        let bytes = [
            0u8, b'\t', b'\n', b'\r', b' ', b':', b'-', b'_', b'"', b'a', b'Z', b'0', 0x7f, 0x80,
        ];
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..20_000 {
            let base = bases[(next() % 3) as usize];
            let mut b = base.to_vec();
            for _ in 0..next() % 4 {
                let i = (next() as usize) % b.len();
                b[i] = bytes[(next() as usize) % bytes.len()];
            }
            let len = if next() % 4 == 0 {
                (next() as usize) % b.len()
            } else {
                b.len()
            };
            let b = &b[..len];
            let lim = Limits {
                max_header_line: 12 + (next() as usize) % 60,
                max_head: 40 + (next() as usize) % 200,
                max_headers: 1 + (next() as usize) % 6,
                ..Limits::default()
            };
            let start = b.windows(2).position(|w| w == b"\r\n").map_or(0, |p| p + 2);
            let (mut h1, mut h2) = ([Header::EMPTY; 8], [Header::EMPTY; 8]);
            let fold = next() % 2 == 0;
            let fast = fields_with::<true>(b, start, as_slots(&mut h1), &lim, fold);
            assert_eq!(
                fast,
                fields_with::<false>(b, start, as_slots(&mut h2), &lim, fold),
                "{b:?}"
            );
            assert_eq!(h1, h2);
            for max in [lim.max_header_line, 8192] {
                if let Some(f) = crate::fast::request_line(b, 0, max) {
                    let l = line(b, 0, max, Error::UriTooLong).unwrap().unwrap();
                    assert_eq!(f, general_request_line(l.0, l.1).unwrap(), "{b:?}");
                }
                if let Some(f) = crate::fast::status_line(b, max) {
                    let l = line(b, 0, max, Error::HeadersTooLarge).unwrap().unwrap();
                    let (v, c, r) = status_line(l.0).unwrap();
                    assert_eq!(f, (v, c, r, l.1), "{b:?}");
                }
            }
        }
    }

    /// The start-line fast paths agree with the general code on every line shape they
    /// take and leave, each byte replaced by bytes of every class, at every length.
    #[test]
    fn start_line_fast_paths_agree_with_the_general_code() {
        type Req<'a> = Result<Option<RequestLine<'a>>, Error>;
        type Status<'a> = Result<Option<(Version, u16, &'a [u8], usize)>, Error>;
        fn general_req(b: &[u8], max: usize) -> Req<'_> {
            line(b, 0, max, Error::UriTooLong).and_then(|l| match l {
                Some((l, next)) => general_request_line(l, next).map(Some),
                None => Ok(None),
            })
        }
        fn general_status(b: &[u8], max: usize) -> Status<'_> {
            line(b, 0, max, Error::HeadersTooLarge).and_then(|l| match l {
                Some((l, next)) => status_line(l).map(|(v, c, r)| Some((v, c, r, next))),
                None => Ok(None),
            })
        }
        let classes = [
            0u8, b'\t', b'\n', b'\r', b' ', b'/', b'1', b'9', b'"', b'a', b'?', 0x7f, 0x80,
        ];
        for base in [
            &b"GET /testu?x=1 HTTP/1.1\r\nHost"[..],
            b"OPTIONS * HTTP/1.0\r\n",
            // A target over several sixteen-byte chunks.
            b"POST /a/longer/path/than/sixteen/bytes?q=1&r=2 HTTP/1.1\r\n",
            b"GETX /a HTTP/1.1\r\n",
        ] {
            for max in [8192, 12] {
                for i in 0..=base.len() {
                    for &c in &classes {
                        let mut b = base.to_vec();
                        if i < b.len() {
                            b[i] = c;
                        }
                        for len in [b.len(), i] {
                            let b = &b[..len];
                            if let Some(f) = crate::fast::request_line(b, 0, max) {
                                assert_eq!(Ok(Some(f)), general_req(b, max), "{b:?}");
                            }
                        }
                    }
                }
            }
        }
        for base in [
            &b"HTTP/1.1 200 OK\r\nServer"[..],
            b"HTTP/1.0 404 \r\n",
            b"HTTP/1.1 204\r\n",
        ] {
            for max in [8192, 14] {
                for i in 0..=base.len() {
                    for &c in &classes {
                        let mut b = base.to_vec();
                        if i < b.len() {
                            b[i] = c;
                        }
                        for len in [b.len(), i] {
                            let b = &b[..len];
                            if let Some(f) = crate::fast::status_line(b, max) {
                                assert_eq!(Ok(Some(f)), general_status(b, max), "{b:?}");
                            }
                        }
                    }
                }
            }
        }
        // The plain lines do take the fast paths.
        assert!(crate::fast::request_line(b"GET / HTTP/1.1\r\n", 0, 100).is_some());
        assert!(crate::fast::status_line(b"HTTP/1.1 200 OK\r\n", 100).is_some());
        assert!(crate::fast::status_line(b"HTTP/1.1 204\r\n", 100).is_some());
    }

    /// The path is the target before its first `?`, whichever code read the line (HTTP/1.2
    /// goes to the general code).
    #[test]
    fn path_is_the_target_before_its_query() {
        let long = "/a/path/longer/than/sixteen/bytes";
        for (target, path) in [
            ("/testu", "/testu"),
            ("/a?b=c?d", "/a"),
            ("/?", "/"),
            ("*", "*"),
            (&format!("{long}?q=1")[..], long),
            (&format!("{long}{long}")[..], &format!("{long}{long}")[..]),
        ] {
            for v in ["1.1", "1.2"] {
                let s = format!("GET {target} HTTP/{v}\r\nHost: x\r\n\r\n");
                let mut h = [Header::SLOT; 4];
                let r = parse_request_in(s.as_bytes(), &mut h, &Limits::default());
                let r = r.unwrap().unwrap();
                assert_eq!(r.path(), path.as_bytes(), "{s:?}");
                assert_eq!(r.target, target.as_bytes());
            }
        }
    }

    #[test]
    fn simple_get() {
        let s = "GET /a?b=c HTTP/1.1\r\nHost: x\r\nUser-Agent: t\r\n\r\n";
        let (m, t, v, b, ka, n) = req(s).unwrap().unwrap();
        assert_eq!(
            (m, t.as_str(), v, b, ka, n),
            (
                Method::Get,
                "/a?b=c",
                Version::Http11,
                BodyKind::None,
                true,
                s.len()
            )
        );
    }

    #[test]
    fn precondition_fields_are_flagged() {
        let cond = |fields: &str| {
            let s = format!("GET / HTTP/1.1\r\nHost: x\r\n{fields}\r\n");
            let mut h = [Header::SLOT; 8];
            parse_request_in(s.as_bytes(), &mut h, &Limits::default())
                .unwrap()
                .unwrap()
                .conditional
        };
        assert!(!cond(""));
        assert!(!cond(
            "Range: bytes=0-1\r\nIf-Range: \"x\"\r\nLast-Modify: x\r\n"
        ));
        for f in [
            "If-Match: *",
            "if-none-match: \"a\"",
            "IF-MODIFIED-SINCE: x",
            "If-Unmodified-Since: x",
        ] {
            assert!(cond(&format!("{f}\r\n")), "{f}");
        }
    }

    #[test]
    fn every_prefix_is_incomplete() {
        let s = "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\n";
        for i in 0..s.len() {
            assert_eq!(req(&s[..i]).unwrap().map(|r| r.0), None, "prefix {i}");
        }
        assert_eq!(req(s).unwrap().unwrap().3, BodyKind::Length(3));
    }
}
