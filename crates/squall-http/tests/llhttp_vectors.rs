//! Test inputs taken as data from llhttp's test suite (https://github.com/nodejs/llhttp,
//! MIT licence, Copyright Fedor Indutny and other Node contributors): `test/request/`
//! `transfer-encoding.md`, `content-length.md`, `sample.md`, `connection.md`,
//! `invalid.md`, `uri.md`, `method.md`, `pipelining.md`, and `test/response/`
//! `sample.md`, `connection.md`, `content-length.md`, `transfer-encoding.md`,
//! `invalid.md`, `pipelining.md`. Each group names its file (and, for the groups added
//! with the second set, the commit read) and each case its section title. Their harness (`test/md-test.ts`) drops the block's last
//! line break, sends each other line break as CRLF, joins lines ended by `\`, and turns
//! the escapes `\r`, `\n`, `\t`, `\f`, `\xHH` and `\NNN` (octal) into those characters,
//! sent UTF-8 encoded: [`md`] does the same. In these strings `\n` is a line break of the
//! block and `\\` the block's backslash (`\\r\\n` is llhttp's escaped CRLF). Expected
//! outcomes are llhttp's strict-mode results, except where a comment says Squall follows
//! RFC 9110/9112 instead; lenient-mode sections and those that need llhttp's own
//! behaviour (pausing, callbacks, skipping a body) are left out. llhttp's inputs mostly
//! omit Host, so `require_host` is off for them.

mod common;

use common::messages_any_split;
use squall_http::{Limits, Method};

fn crlf(s: &str) -> Vec<u8> {
    s.replace('\n', "\r\n").into_bytes()
}

fn lim() -> Limits {
    Limits {
        require_host: false,
        ..Limits::default()
    }
}

/// The bytes llhttp's `md-test.ts` sends for an ```http block `s` (given without its
/// last line break): line breaks as CRLF, `\` + line break removed, then its escapes.
fn md(s: &str) -> Vec<u8> {
    let s = s
        .replace("\\\n", "")
        .replace('\n', "\r\n")
        .replace("\\r", "\r")
        .replace("\\n", "\n")
        .replace("\\t", "\t")
        .replace("\\f", "\x0c");
    let s = code_escapes(&s, "x", 16, usize::MAX);
    code_escapes(&s, "", 8, 3).into_bytes()
}

/// `s` with each `\` + `prefix` + (at most `max`) digits of `radix` replaced by the
/// character of that code, as the harness's regular expressions do.
fn code_escapes(s: &str, prefix: &str, radix: u32, max: usize) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find('\\') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        let tail = after.strip_prefix(prefix).unwrap_or("");
        let n = tail
            .chars()
            .take(max)
            .take_while(|c| c.is_digit(radix))
            .count();
        let code = u32::from_str_radix(&tail[..n], radix).ok();
        match code.and_then(char::from_u32) {
            Some(c) if n > 0 => {
                out.push(c);
                rest = &tail[n..];
            }
            _ => {
                out.push('\\');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// A request as checked here: method, target, keep-alive, body.
type Req = (Method, String, bool, Vec<u8>);

fn rq(m: Method, target: &str, keep_alive: bool, body: &[u8]) -> Req {
    (m, target.to_string(), keep_alive, body.to_vec())
}

/// The complete requests of the ```http block `s` (parsed at every split), then the
/// status of the error that stopped the stream, if any.
fn requests(s: &str) -> (Vec<Req>, Option<u16>) {
    let (v, e) = messages_any_split(&md(s), &lim(), false);
    let v = v
        .into_iter()
        .map(|m| (m.method.expect("a request"), m.target, m.keep_alive, m.body))
        .collect();
    (v, e)
}

/// A response as checked here: status code, keep-alive, body.
type Resp = (u16, bool, Vec<u8>);

fn rs(code: u16, keep_alive: bool, body: &[u8]) -> Resp {
    (code, keep_alive, body.to_vec())
}

/// The complete responses of the ```http block `s` (a close-delimited body ends with
/// the input), then the error status, if any.
fn responses(s: &str) -> (Vec<Resp>, Option<u16>) {
    let (v, e) = messages_any_split(&md(s), &lim(), true);
    (
        v.into_iter()
            .map(|m| (m.code, m.keep_alive, m.body))
            .collect(),
        e,
    )
}

/// Nothing accepted: the stream's first message is refused with `status`.
fn refused<T>(status: u16) -> (Vec<T>, Option<u16>) {
    (Vec::new(), Some(status))
}

/// Bodies of the messages, or the error status.
fn bodies(s: &str) -> Result<Vec<Vec<u8>>, u16> {
    let (v, e) = messages_any_split(&crlf(s), &lim(), false);
    match e {
        Some(code) => Err(code),
        None => Ok(v.into_iter().map(|m| m.body).collect()),
    }
}

#[test]
fn transfer_encoding_md() {
    // "Parse chunks with lowercase size" / "uppercase size".
    for size in ["a", "A"] {
        let s =
            format!("PUT /url HTTP/1.1\nTransfer-Encoding: chunked\n\n{size}\n0123456789\n0\n\n");
        assert_eq!(bodies(&s), Ok(vec![b"0123456789".to_vec()]));
    }
    // "Two chunks and triple zero prefixed end chunk".
    assert_eq!(
        bodies("POST /two_chunks_mult_zero_end HTTP/1.1\nTransfer-Encoding: chunked\n\n5\nhello\n6\n world\n000\n\n"),
        Ok(vec![b"hello world".to_vec()])
    );
    // "Trailing headers".
    assert_eq!(
        bodies("POST /chunked_w_trailing_headers HTTP/1.1\nTransfer-Encoding: chunked\n\n5\nhello\n6\n world\n0\nVary: *\nContent-Type: text/plain\n\n"),
        Ok(vec![b"hello world".to_vec()])
    );
    // "Chunk extensions" and "Chunk extensions quoting".
    assert_eq!(
        bodies("POST /chunked_w_unicorns_after_length HTTP/1.1\nTransfer-Encoding: chunked\n\n5;ilovew3;somuchlove=aretheseparametersfor;another=withvalue\nhello\n6;blahblah;blah\n world\n0\n\n"),
        Ok(vec![b"hello world".to_vec()])
    );
    assert_eq!(
        bodies("POST /chunked_w_unicorns_after_length HTTP/1.1\nTransfer-Encoding: chunked\n\n5;ilovew3=\"I \\\"love\\\"; \\\\extensions\\\\\";somuchlove=\"aretheseparametersfor\";blah;foo=bar\nhello\n6;blahblah;blah\n world\n0\n\n"),
        Ok(vec![b"hello world".to_vec()])
    );
    // Errors: "Empty Transfer-Encoding with Content-Length", "No semicolon before chunk
    // extensions", "No extension after semicolon", "Unbalanced chunk extensions quoting",
    // "Ignoring pigeons", "POST with Transfer-Encoding and Content-Length".
    for bad in [
        "POST /first HTTP/1.1\nTransfer-Encoding:\nContent-Length: 5\n\nhello",
        "POST /chunked_w_unicorns_after_length HTTP/1.1\nHost: localhost\nTransfer-encoding: chunked\n\n2 erfrferferf\naa\n0 rrrr\n\n",
        "POST /chunked_w_unicorns_after_length HTTP/1.1\nHost: localhost\nTransfer-encoding: chunked\n\n2;\naa\n0\n\n",
        "POST /chunked_w_unicorns_after_length HTTP/1.1\nTransfer-Encoding: chunked\n\n5;ilovew3=\"abc\";somuchlove=\"def; ghi\nhello\n6;blahblah;blah\n world\n0\n\n",
        "PUT /url HTTP/1.1\nTransfer-Encoding: pigeons\n\n",
        "POST /post_identity_body_world?q=search#hey HTTP/1.1\nAccept: */*\nTransfer-Encoding: identity\nContent-Length: 5\n\nWorld",
        "POST / HTTP/1.1\nHost: foo\nContent-Length: 10\nTransfer-Encoding:\nTransfer-Encoding:\nTransfer-Encoding:\n\n2\nAA\n0\n",
    ] {
        assert_eq!(bodies(bad), Err(400), "{bad:?}");
    }
}

#[test]
fn content_length_md() {
    // "Content-Length with zeroes", "with follow-up headers", "Funky Content-Length with
    // body", "Spaces in Content-Length (surrounding)" (the body is cut short here).
    assert_eq!(
        bodies("PUT /url HTTP/1.1\nContent-Length: 003\n\nabc"),
        Ok(vec![b"abc".to_vec()])
    );
    assert_eq!(
        bodies("PUT /url HTTP/1.1\nContent-Length: 003\nOhai: world\n\nabc"),
        Ok(vec![b"abc".to_vec()])
    );
    assert_eq!(
        bodies("GET /get_funky_content_length_body_hello HTTP/1.0\nconTENT-Length: 5\n\nHELLO"),
        Ok(vec![b"HELLO".to_vec()])
    );
    assert_eq!(
        bodies("POST / HTTP/1.1\nContent-Length:  42 \n\n"),
        Ok(vec![])
    );
    // Errors: overflow, duplicate, with TE identity, spaces inside (#2, #3), empty,
    // CR instead of dash in the name.
    for bad in [
        "PUT /url HTTP/1.1\nContent-Length: 1000000000000000000000\n\n",
        "PUT /url HTTP/1.1\nContent-Length: 1\nContent-Length: 2\n\n",
        "PUT /url HTTP/1.1\nContent-Length: 1\nTransfer-Encoding: identity\n\n",
        "POST / HTTP/1.1\nContent-Length: 4 2\n\n",
        "POST / HTTP/1.1\nContent-Length: 13 37\n\n",
        "POST / HTTP/1.1\nContent-Length:\n\n",
        "PUT /url HTTP/1.1\nContent\rLength: 003\n\nabc",
    ] {
        assert_eq!(bodies(bad), Err(400), "{bad:?}");
    }
}

/// [`md`] against llhttp's logs: the offsets they show fix the bytes sent.
#[test]
fn md_makes_the_harness_bytes() {
    assert_eq!(
        md("\\r\\nGET /test HTTP/1.1\n\n"),
        b"\r\nGET /test HTTP/1.1\r\n\r\n"
    );
    // "255 ASCII in header value": headers complete at off=61 (`\xff` sent UTF-8).
    let b = md("OPTIONS /url HTTP/1.1\nHeader1: Value1\nHeader2: \\xffValue2\n\n");
    assert_eq!((b.len(), &b[49..51]), (61, &[0xc3, 0xbf][..]));
    assert_eq!(
        md("Connection\\r\\033\\065\\325eep-Alive"),
        "Connection\r\x1b5\u{d5}eep-Alive".as_bytes()
    );
    assert_eq!(md("Foo\\01\\test"), b"Foo\x01\test");
    assert_eq!(md("HTTP/1.1 200 \\r\\n\\\n\n"), b"HTTP/1.1 200 \r\n\r\n");
    // "Host terminated by a query string": 48 bytes, one CRLF after the head.
    let b = md("GET http://hypnotoad.org?hail=all HTTP/1.1\\r\\n\n\n");
    assert_eq!((b.len(), b.ends_with(b"1.1\r\n\r\n\r\n")), (48, true));
    // A `\` closing the block stays (response "Only LFs present").
    assert!(md("BODY\\n\\").ends_with(b"BODY\n\\"));
}

/// test/request/sample.md (commit 11ceb694c3a6838966af454ead5b8f91b54098b3).
#[test]
fn request_sample_md() {
    use Method::*;
    let ok = |s: &str, want: Req| assert_eq!(requests(s), (vec![want], None), "{s:?}");
    // "Simple request".
    ok(
        "OPTIONS /url HTTP/1.1\nHeader1: Value1\nHeader2:\\t Value2\n\n",
        rq(Options, "/url", true, b""),
    );
    // "Request with method starting with `H`".
    ok("HEAD /url HTTP/1.1\n\n", rq(Head, "/url", true, b""));
    // "curl GET".
    ok(
        "GET /test HTTP/1.1\nUser-Agent: curl/7.18.0 (i486-pc-linux-gnu) libcurl/7.18.0 OpenSSL/0.9.8g zlib/1.2.3.3 libidn/1.1\nHost: 0.0.0.0=5000\nAccept: */*\n\n",
        rq(Get, "/test", true, b""),
    );
    // "Firefox GET".
    ok(
        "GET /favicon.ico HTTP/1.1\nHost: 0.0.0.0=5000\nUser-Agent: Mozilla/5.0 (X11; U; Linux i686; en-US; rv:1.9) Gecko/2008061015 Firefox/3.0\nAccept: text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8\nAccept-Language: en-us,en;q=0.5\nAccept-Encoding: gzip,deflate\nAccept-Charset: ISO-8859-1,utf-8;q=0.7,*;q=0.7\nKeep-Alive: 300\nConnection: keep-alive\n\n",
        rq(Get, "/favicon.ico", true, b""),
    );
    // "DUMBPACK".
    ok(
        "GET /dumbpack HTTP/1.1\naaaaaaaaaaaaa:++++++++++\n\n",
        rq(Get, "/dumbpack", true, b""),
    );
    // "No headers and no body".
    ok(
        "GET /get_no_headers_no_body/world HTTP/1.1\n\n",
        rq(Get, "/get_no_headers_no_body/world", true, b""),
    );
    // "One header and no body".
    ok(
        "GET /get_one_header_no_body HTTP/1.1\nAccept: */*\n\n",
        rq(Get, "/get_one_header_no_body", true, b""),
    );
    // "Apache bench GET" (HTTP/1.0 without keep-alive: the connection closes).
    ok(
        "GET /test HTTP/1.0\nHost: 0.0.0.0:5000\nUser-Agent: ApacheBench/2.3\nAccept: */*\n\n",
        rq(Get, "/test", false, b""),
    );
    // "Prefix newline".
    ok("\\r\\nGET /test HTTP/1.1\n\n", rq(Get, "/test", true, b""));
    // "Request starting with CRLF".
    ok(
        "\\r\\nGET /url HTTP/1.1\nHeader1: Value1\n\n",
        rq(Get, "/url", true, b""),
    );
    // "Extended Characters" (obs-text in a field value).
    ok(
        "GET / HTTP/1.1\nTest: Düsseldorf\n\n",
        rq(Get, "/", true, b""),
    );
    // "255 ASCII in header value".
    ok(
        "OPTIONS /url HTTP/1.1\nHeader1: Value1\nHeader2: \\xffValue2\n\n",
        rq(Options, "/url", true, b""),
    );
    // "No HTTP version": llhttp takes it as HTTP/0.9; Squall is stricter (RFC 9112 §3:
    // the request line has an HTTP-version; no HTTP/0.9).
    assert_eq!(requests("GET /\n\n"), refused(400));
    // "Line folding in header value with CRLF": llhttp strict accepts obs-fold; Squall
    // rejects it (RFC 9112 §5.2: a server rejects obs-fold with 400 or replaces it).
    assert_eq!(
        requests("GET / HTTP/1.1\nLine1:   abc\n\\tdef\n ghi\n\\t\\tjkl\n  mno \n\\t \\tqrs\nLine2: \\t line2\\t\nLine3:\n line3\nLine4: \n \nConnection:\n close\n\n"),
        refused(400)
    );
    // "Line folding in header value with LF" (lines ended by LF alone).
    assert_eq!(
        requests("GET / HTTP/1.1\\n\\\nLine1:   abc\\n\\\n\\tdef\\n\\\n ghi\\n\\\n\\t\\tjkl\\n\\\n  mno \\n\\\n\\t \\tqrs\\n\\\nLine2: \\t line2\\t\\n\\\nLine3:\\n\\\n line3\\n\\\nLine4: \\n\\\n \\n\\\nConnection:\\n\\\n close\\n\\\n\\n"),
        refused(400)
    );
}

/// test/request/connection.md (commit 11f16293bc417e2383b6bb6a80b13bbaccb0b229). Where
/// llhttp stops with "Data after `Connection: close`", Squall marks the message not
/// keep-alive: the server closes after answering it (the driver here reads on).
#[test]
fn request_connection_md() {
    use Method::*;
    // "`keep-alive`" / "Setting flag".
    assert_eq!(
        requests("PUT /url HTTP/1.1\nConnection: keep-alive\n\n"),
        (vec![rq(Put, "/url", true, b"")], None)
    );
    // "Restarting when keep-alive is explicitly".
    assert_eq!(
        requests("PUT /url HTTP/1.1\nConnection: keep-alive\n\nPUT /url HTTP/1.1\nConnection: keep-alive\n\n"),
        (vec![rq(Put, "/url", true, b""), rq(Put, "/url", true, b"")], None)
    );
    // "No restart when keep-alive is off (1.0) and parser is in strict mode".
    let (v, e) = requests("PUT /url HTTP/1.0\n\nPUT /url HTTP/1.1\n\n");
    assert_eq!((&v[0], e), (&rq(Put, "/url", false, b""), None));
    // "CRLF between requests, implicit `keep-alive`" (the second request is cut short).
    assert_eq!(
        requests("POST / HTTP/1.1\nHost: www.example.com\nContent-Type: application/x-www-form-urlencoded\nContent-Length: 4\n\nq=42\n\nGET / HTTP/1.1"),
        (vec![rq(Post, "/", true, b"q=42")], None)
    );
    // "`close`" / "Setting flag on `close`".
    assert_eq!(
        requests("PUT /url HTTP/1.1\nConnection: close\n\n"),
        (vec![rq(Put, "/url", false, b"")], None)
    );
    // "CRLF between requests, explicit `close` (strict mode)".
    assert_eq!(
        requests("POST / HTTP/1.1\nHost: www.example.com\nContent-Type: application/x-www-form-urlencoded\nContent-Length: 4\nConnection: close\n\nq=42\n\nGET / HTTP/1.1"),
        (vec![rq(Post, "/", false, b"q=42")], None)
    );
    // "Parsing multiple tokens" / "Sample": close wins over keep-alive.
    assert_eq!(
        requests("PUT /url HTTP/1.1\nConnection: close, token, upgrade, token, keep-alive\n\n"),
        (vec![rq(Put, "/url", false, b"")], None)
    );
    // "Multiple tokens with folding": llhttp strict accepts the obs-fold (then pauses
    // for the upgrade); Squall rejects it (RFC 9112 §5.2).
    assert_eq!(
        requests("GET /demo HTTP/1.1\nHost: example.com\nConnection: Something,\n Upgrade, ,Keep-Alive\nSec-WebSocket-Key2: 12998 5 Y3 1  .P00\nSec-WebSocket-Protocol: sample\nUpgrade: WebSocket\nSec-WebSocket-Key1: 4 @1  46546xW%0l 1 5\nOrigin: http://example.com\n\nHot diggity dogg"),
        refused(400)
    );
}

/// test/request/invalid.md (commit 07fb6df69262aca2bedf38234d85f6608ee2f175).
#[test]
fn request_invalid_md() {
    for (section, s) in [
        (
            "ICE protocol and GET method",
            "GET /music/sweet/music ICE/1.0\nHost: example.com\n\n",
        ),
        (
            "ICE protocol, but not really",
            "GET /music/sweet/music IHTTP/1.0\nHost: example.com\n\n",
        ),
        (
            "RTSP protocol and PUT method",
            "PUT /music/sweet/music RTSP/1.0\nHost: example.com\n\n",
        ),
        ("Headers separated by CR", "GET / HTTP/1.1\nFoo: 1\\rBar: 2\n\n"),
        (
            "Headers separated by LF",
            "POST / HTTP/1.1\nHost: localhost:5000\nx:x\\nTransfer-Encoding: chunked\n\n1\nA\n0\n",
        ),
        (
            "Headers separated by dummy characters",
            "GET / HTTP/1.1\nConnection: close\nHost: a\n\\rZGET /evil: HTTP/1.1\nHost: a\n",
        ),
        (
            "Empty headers separated by CR",
            "POST / HTTP/1.1\nConnection: Close\nHost: localhost:5000\nx:\\rTransfer-Encoding: chunked\n\n1\nA\n0\n",
        ),
        (
            "Empty headers separated by LF",
            "POST / HTTP/1.1\nHost: localhost:5000\nx:\\nTransfer-Encoding: chunked\n\n1\nA\n0\n",
        ),
        ("Invalid header token #1", "GET / HTTP/1.1\nFo@: Failure\n\n"),
        ("Invalid header token #2", "GET / HTTP/1.1\nFoo\\01\\test: Bar\n\n"),
        ("Invalid header token #3", "GET / HTTP/1.1\n: Bar\n\n"),
        (
            "Illegal header field name line folding",
            "GET / HTTP/1.1\nname\n : value\n\n",
        ),
        (
            "Corrupted Connection header",
            "GET / HTTP/1.1\nHost: www.example.com\nConnection\\r\\033\\065\\325eep-Alive\nAccept-Encoding: gzip\n\n",
        ),
        (
            "Corrupted header name",
            "GET / HTTP/1.1\nHost: www.example.com\nX-Some-Header\\r\\033\\065\\325eep-Alive\nAccept-Encoding: gzip\n\n",
        ),
        (
            "Missing CR between headers",
            "GET / HTTP/1.1\nHost: localhost\nDummy: x\\nContent-Length: 23\n\nGET / HTTP/1.1\nDummy: GET /admin HTTP/1.1\nHost: localhost\n\n",
        ),
        ("Invalid space after start line", "GET / HTTP/1.1\n Host: foo"),
        (
            "Only LFs present",
            "POST / HTTP/1.1\\n\\\nTransfer-Encoding: chunked\\n\\\nTrailer: Baz\nFoo: abc\\n\\\nBar: def\\n\\\n\\n\\\n1\\n\\\nA\\n\\\n1;abc\\n\\\nB\\n\\\n1;def=ghi\\n\\\nC\\n\\\n1;jkl=\"mno\"\\n\\\nD\\n\\\n0\\n\\\n\\n\\\nBaz: ghi\\n\\\n\\n\\",
        ),
        (
            "Spaces before headers",
            "POST /hello HTTP/1.1\nHost: localhost\nFoo: bar\n Content-Length: 38\n\nGET /bye HTTP/1.1\nHost: localhost\n\n",
        ),
    ] {
        assert_eq!(requests(s), refused(400), "{section}");
    }
    // "Invalid HTTP version": the input has no line end, and Squall judges a request
    // line once its CRLF is in (llhttp at the version's last digit); with the CRLF it
    // is 505 (RFC 9110 §15.6.6).
    assert_eq!(requests("GET / HTTP/5.6"), (vec![], None));
    assert_eq!(requests("GET / HTTP/5.6\n\n"), refused(505));
    // "HTTP protocol and ANNOUNCE method" and "Invalid method": llhttp knows a fixed
    // list of methods; for Squall any token is a method (RFC 9110 §9.1), which the
    // server may answer 501.
    assert_eq!(
        requests("ANNOUNCE /music/sweet/music HTTP/1.0\nHost: example.com\n\n"),
        (
            vec![rq(Method::Other, "/music/sweet/music", false, b"")],
            None
        )
    );
    assert_eq!(
        requests("MKCOLA / HTTP/1.1\n\n"),
        (vec![rq(Method::Other, "/", true, b"")], None)
    );
}

/// test/request/uri.md (commit 07fb6df69262aca2bedf38234d85f6608ee2f175).
#[test]
fn request_uri_md() {
    use Method::*;
    for (section, s, m, target, keep_alive) in [
        (
            "Quotes in URI",
            "GET /with_\"lovely\"_quotes?foo=\\\"bar\\\" HTTP/1.1\n\n",
            Get,
            "/with_\"lovely\"_quotes?foo=\\\"bar\\\"",
            true,
        ),
        (
            "Query URL with question mark",
            "GET /test.cgi?foo=bar?baz HTTP/1.1\n\n",
            Get,
            "/test.cgi?foo=bar?baz",
            true,
        ),
        // One more CRLF follows the head: skipped as an empty line before a request.
        (
            "Host terminated by a query string",
            "GET http://hypnotoad.org?hail=all HTTP/1.1\\r\\n\n\n",
            Get,
            "http://hypnotoad.org?hail=all",
            true,
        ),
        (
            "`host:port` terminated by a query string",
            "GET http://hypnotoad.org:1234?hail=all HTTP/1.1\n\n",
            Get,
            "http://hypnotoad.org:1234?hail=all",
            true,
        ),
        (
            "Query URL with vertical bar character",
            "GET /test.cgi?query=| HTTP/1.1\n\n",
            Get,
            "/test.cgi?query=|",
            true,
        ),
        (
            "`host:port` terminated by a space",
            "GET http://hypnotoad.org:1234 HTTP/1.1\n\n",
            Get,
            "http://hypnotoad.org:1234",
            true,
        ),
        (
            "Fragment in URI",
            "GET /forums/1/topics/2375?page=1#posts-17408 HTTP/1.1\n\n",
            Get,
            "/forums/1/topics/2375?page=1#posts-17408",
            true,
        ),
        // llhttp then pauses for the tunnel; no bytes follow.
        (
            "Underscore in hostname",
            "CONNECT home_0.netscape.com:443 HTTP/1.0\nUser-agent: Mozilla/1.1N\nProxy-authorization: basic aGVsbG86d29ybGQ=\n\n",
            Connect,
            "home_0.netscape.com:443",
            false,
        ),
        (
            "`host:port` and basic auth",
            "GET http://a%12:b!&*$@hypnotoad.org:1234/toto HTTP/1.1\n\n",
            Get,
            "http://a%12:b!&*$@hypnotoad.org:1234/toto",
            true,
        ),
    ] {
        let want = (vec![rq(m, target, keep_alive, b"")], None);
        assert_eq!(requests(s), want, "{section}");
    }
    // "Disallow UTF-8 in URI path in strict mode", "Space in URI".
    assert_eq!(
        requests("GET /δ¶/δt/pope?q=1#narf HTTP/1.1\nHost: github.com\n\n"),
        refused(400)
    );
    assert_eq!(requests("GET /foo bar/ HTTP/1.1\n\n"), refused(400));
}

/// test/request/method.md (commit 11f16293bc417e2383b6bb6a80b13bbaccb0b229). Methods
/// outside RFC 9110 and PATCH are `Method::Other` tokens.
#[test]
fn request_method_md() {
    use Method::*;
    for (section, s, want) in [
        (
            "REPORT request",
            "REPORT /test HTTP/1.1\n\n",
            rq(Other, "/test", true, b""),
        ),
        // llhttp then pauses for the tunnel; no bytes follow.
        (
            "CONNECT request with CAPS",
            "CONNECT HOME0.NETSCAPE.COM:443 HTTP/1.0\nUser-agent: Mozilla/1.1N\nProxy-authorization: basic aGVsbG86d29ybGQ=\n\n",
            rq(Connect, "HOME0.NETSCAPE.COM:443", false, b""),
        ),
        (
            "M-SEARCH request",
            "M-SEARCH * HTTP/1.1\nHOST: 239.255.255.250:1900\nMAN: \"ssdp:discover\"\nST: \"ssdp:all\"\n\n",
            rq(Other, "*", true, b""),
        ),
        (
            "PATCH request",
            "PATCH /file.txt HTTP/1.1\nHost: www.example.com\nContent-Type: application/example\nIf-Match: \"e0023aa4e\"\nContent-Length: 10\n\ncccccccccc",
            rq(Patch, "/file.txt", true, b"cccccccccc"),
        ),
        (
            "PURGE request",
            "PURGE /file.txt HTTP/1.1\nHost: www.example.com\n\n",
            rq(Other, "/file.txt", true, b""),
        ),
        (
            "SEARCH request",
            "SEARCH / HTTP/1.1\nHost: www.example.com\n\n",
            rq(Other, "/", true, b""),
        ),
        (
            "LINK request",
            "LINK /images/my_dog.jpg HTTP/1.1\nHost: example.com\nLink: <http://example.com/profiles/joe>; rel=\"tag\"\nLink: <http://example.com/profiles/sally>; rel=\"tag\"\n\n",
            rq(Other, "/images/my_dog.jpg", true, b""),
        ),
        // The second section titled "LINK request".
        (
            "LINK request (UNLINK)",
            "UNLINK /images/my_dog.jpg HTTP/1.1\nHost: example.com\nLink: <http://example.com/profiles/sally>; rel=\"tag\"\n\n",
            rq(Other, "/images/my_dog.jpg", true, b""),
        ),
        (
            "SOURCE request",
            "SOURCE /music/sweet/music HTTP/1.1\nHost: example.com\n\n",
            rq(Other, "/music/sweet/music", true, b""),
        ),
    ] {
        assert_eq!(requests(s), (vec![want], None), "{section}");
    }
}

/// test/request/pipelining.md (commit 7094b9798fa3418246e07266fe348ac0830a373f).
#[test]
fn request_pipelining_md() {
    use Method::*;
    // "Should parse multiple events": CRLF after each body (skipped before the next
    // request line); the third body is one byte short.
    assert_eq!(
        requests("POST /aaa HTTP/1.1\nContent-Length: 3\n\nAAA\nPUT /bbb HTTP/1.1\nContent-Length: 4\n\nBBBB\nPATCH /ccc HTTP/1.1\nContent-Length: 5\n\nCCCC"),
        (
            vec![rq(Post, "/aaa", true, b"AAA"), rq(Put, "/bbb", true, b"BBBB")],
            None
        )
    );
}

/// test/request/transfer-encoding.md (commit 0ebaea78ee4f0330419648c1b30cb8d722d97e4b):
/// the sections not in `transfer_encoding_md`.
#[test]
fn request_transfer_encoding_md_more() {
    // "POST with `Transfer-Encoding: chunked`".
    assert_eq!(
        requests("POST /post_chunked_all_your_base HTTP/1.1\nTransfer-Encoding: chunked\n\n1e\nall your base are belong to us\n0\n\n"),
        (
            vec![rq(
                Method::Post,
                "/post_chunked_all_your_base",
                true,
                b"all your base are belong to us"
            )],
            None
        )
    );
    for (section, s) in [
        (
            "POST with `chunked` before other transfer coding names",
            "POST /post_identity_body_world?q=search#hey HTTP/1.1\nAccept: */*\nTransfer-Encoding: chunked, deflate\n\nWorld",
        ),
        (
            "POST with `chunked` and duplicate transfer-encoding",
            "POST /post_identity_body_world?q=search#hey HTTP/1.1\nAccept: */*\nTransfer-Encoding: chunked\nTransfer-Encoding: deflate\n\nWorld",
        ),
        (
            "POST with `chunkedchunked` as transfer-encoding",
            "POST /post_identity_body_world?q=search#hey HTTP/1.1\nAccept: */*\nTransfer-Encoding: chunkedchunked\n\n5\nWorld\n0\n\n",
        ),
        (
            "Missing last-chunk",
            "PUT /url HTTP/1.1\nTransfer-Encoding: chunked\n\n3\nfoo\n\n",
        ),
        (
            "Validate chunk parameters",
            "PUT /url HTTP/1.1\nTransfer-Encoding: chunked\n\n3 \\n  \\r\\n\\\nfoo\n\n",
        ),
        (
            "Chunk header not terminated by CRLF",
            "GET / HTTP/1.1\nHost: a\nConnection: close \nTransfer-Encoding: chunked \n\n5\\r\\r;ABCD\n34\nE\n0\n\nGET / HTTP/1.1 \nHost: a\nContent-Length: 5\n\n0\n",
        ),
        (
            "Chunk data not terminated by CRLF",
            "GET / HTTP/1.1\nHost: a\nConnection: close \nTransfer-Encoding: chunked \n\n5\nABCDE0\n",
        ),
        (
            "Space after chunk header",
            "PUT /url HTTP/1.1\nTransfer-Encoding: chunked\n\na \\r\\n0123456789\n0\n\n",
        ),
    ] {
        assert_eq!(requests(s), refused(400), "{section}");
    }
    // "POST with `chunked` as last transfer-encoding" and "(multiple headers)": llhttp
    // accepts and hands over the still-deflated body; Squall decodes no coding but
    // chunked and answers 501 (RFC 9112 §6.1: a server SHOULD answer 501 to a transfer
    // coding it does not understand).
    for s in [
        "POST /post_identity_body_world?q=search#hey HTTP/1.1\nAccept: */*\nTransfer-Encoding: deflate, chunked\n\n5\nWorld\n0\n\n",
        "POST /post_identity_body_world?q=search#hey HTTP/1.1\nAccept: */*\nTransfer-Encoding: deflate\nTransfer-Encoding: chunked\n\n5\nWorld\n0\n\n",
    ] {
        assert_eq!(requests(s), refused(501), "{s:?}");
    }
}

/// test/response/sample.md (commit 07fb6df69262aca2bedf38234d85f6608ee2f175). A response
/// without Content-Length or Transfer-Encoding is read until the connection closes (the
/// end of the input), so it is never keep-alive.
#[test]
fn response_sample_md() {
    // "Simple response".
    assert_eq!(
        responses("HTTP/1.1 200 OK\nHeader1: Value1\nHeader2:\\t Value2\nContent-Length: 0\n\n"),
        (vec![rs(200, true, b"")], None)
    );
    // "Empty body should not trigger spurious span callbacks".
    assert_eq!(
        responses("HTTP/1.1 200 OK\n\n"),
        (vec![rs(200, false, b"")], None)
    );
    // "Google 301": the body is 213 bytes of the 219 announced (`  219  `): incomplete.
    assert_eq!(
        responses("HTTP/1.1 301 Moved Permanently\nLocation: http://www.google.com/\nContent-Type: text/html; charset=UTF-8\nDate: Sun, 26 Apr 2009 11:11:49 GMT\nExpires: Tue, 26 May 2009 11:11:49 GMT\nX-$PrototypeBI-Version: 1.6.0.3\nCache-Control: public, max-age=2592000\nServer: gws\nContent-Length:  219  \n\n<HTML><HEAD><meta http-equiv=content-type content=text/html;charset=utf-8>\\n\\\n<TITLE>301 Moved</TITLE></HEAD><BODY>\\n\\\n<H1>301 Moved</H1>\\n\\\nThe document has moved\\n\\\n<A HREF=\"http://www.google.com/\">here</A>.\n</BODY></HTML>"),
        (vec![], None)
    );
    // "amazon.com".
    assert_eq!(
        responses("HTTP/1.1 301 MovedPermanently\nDate: Wed, 15 May 2013 17:06:33 GMT\nServer: Server\nx-amz-id-1: 0GPHKXSJQ826RK7GZEB2\np3p: policyref=\"http://www.amazon.com/w3c/p3p.xml\",CP=\"CAO DSP LAW CUR ADM IVAo IVDo CONo OTPo OUR DELi PUBi OTRi BUS PHY ONL UNI PUR FIN COM NAV INT DEM CNT STA HEA PRE LOC GOV OTC \"\nx-amz-id-2: STN69VZxIFSz9YJLbz1GDbxpbjG6Qjmmq5E3DxRhOUw+Et0p4hr7c/Q8qNcx4oAD\nLocation: http://www.amazon.com/Dan-Brown/e/B000AP9DSU/ref=s9_pop_gw_al1?_encoding=UTF8&refinementId=618073011&pf_rd_m=ATVPDKIKX0DER&pf_rd_s=center-2&pf_rd_r=0SHYY5BZXN3KR20BNFAY&pf_rd_t=101&pf_rd_p=1263340922&pf_rd_i=507846\nVary: Accept-Encoding,User-Agent\nContent-Type: text/html; charset=ISO-8859-1\nTransfer-Encoding: chunked\n\n1\n\\n\n0\n\n"),
        (vec![rs(301, true, b"\n")], None)
    );
    // "No headers and no body".
    assert_eq!(
        responses("HTTP/1.1 404 Not Found\n\n"),
        (vec![rs(404, false, b"")], None)
    );
    // "No reason phrase" (Squall also takes the status line without the SP before an
    // empty reason).
    assert_eq!(
        responses("HTTP/1.1 301\n\n"),
        (vec![rs(301, false, b"")], None)
    );
    // "Empty reason phrase after space".
    assert_eq!(
        responses("HTTP/1.1 200 \\r\\n\\\n\n"),
        (vec![rs(200, false, b"")], None)
    );
    // "Underscore in header key".
    assert_eq!(
        responses("HTTP/1.1 200 OK\nServer: DCLK-AdSvr\nContent-Type: text/xml\nContent-Length: 0\nDCLK_imp: v7;x;114750856;0-0;0;17820020;0/0;21603567/21621457/1;;~okv=;dcmt=text/xml;;~cs=o\n\n"),
        (vec![rs(200, true, b"")], None)
    );
    // "bonjourmadame.fr" (an empty Pragma; HTTP/1.0 with keep-alive).
    assert_eq!(
        responses("HTTP/1.0 301 Moved Permanently\nDate: Thu, 03 Jun 2010 09:56:32 GMT\nServer: Apache/2.2.3 (Red Hat)\nCache-Control: public\nPragma: \\r\\n\\\nLocation: http://www.bonjourmadame.fr/\nVary: Accept-Encoding\nContent-Length: 0\nContent-Type: text/html; charset=UTF-8\nConnection: keep-alive\n\n"),
        (vec![rs(301, true, b"")], None)
    );
    // "Spaces in header value" (`.et-Cookie`, `_eep-Alive`, `_onnection` are tokens).
    assert_eq!(
        responses("HTTP/1.1 200 OK\nDate: Tue, 28 Sep 2010 01:14:13 GMT\nServer: Apache\nCache-Control: no-cache, must-revalidate\nExpires: Mon, 26 Jul 1997 05:00:00 GMT\n.et-Cookie: PlaxoCS=1274804622353690521; path=/; domain=.plaxo.com\nVary: Accept-Encoding\n_eep-Alive: timeout=45\n_onnection: Keep-Alive\nTransfer-Encoding: chunked\nContent-Type: text/html\nConnection: close\n\n0\n\n"),
        (vec![rs(200, false, b"")], None)
    );
    // "Non ASCII in status line" (obs-text in the reason phrase).
    assert_eq!(
        responses("HTTP/1.1 500 Oriëntatieprobleem\nDate: Fri, 5 Nov 2010 23:07:12 GMT+2\nContent-Length: 0\nConnection: close\n\n"),
        (vec![rs(500, false, b"")], None)
    );
    // "No Content-Length, no Transfer-Encoding".
    assert_eq!(
        responses("HTTP/1.1 200 OK\nContent-Type: text/plain\n\nhello world"),
        (vec![rs(200, false, b"hello world")], None)
    );
    // "Error on invalid response start", "No carriage ret", "Spaces in header name".
    for s in [
        "HTTPER/1.1 200 OK\n\n",
        "HTTP/1.1 200 OK\\n\\\nContent-Type: text/html; charset=utf-8\\n\\\nConnection: close\\n\\\n\\n\\\nthese headers are from http://news.ycombinator.com/",
        "HTTP/1.1 200 OK\nServer: Microsoft-IIS/6.0\nX-Powered-By: ASP.NET\nen-US Content-Type: text/xml\nContent-Type: text/xml\nContent-Length: 16\nDate: Fri, 23 Jul 2010 18:45:38 GMT\nConnection: keep-alive\n\n<xml>hello</xml>",
    ] {
        assert_eq!(responses(s), refused(400), "{s:?}");
    }
    // "RTSP response", "ICE response": llhttp also parses those protocols; Squall takes
    // only HTTP-version = "HTTP/" DIGIT "." DIGIT (RFC 9112 §2.3).
    assert_eq!(responses("RTSP/1.1 200 OK\n\n"), refused(400));
    assert_eq!(responses("ICE/1.1 200 OK\n\n"), refused(400));
    // "HTTP version 0.9": llhttp accepts; Squall speaks HTTP/1.x only (RFC 9112 §2.3).
    assert_eq!(responses("HTTP/0.9 200 OK\n\n"), refused(505));
    // "Response starting with CRLF": llhttp skips it; Squall is stricter (RFC 9112 §2.2
    // has only a server ignore empty lines before the start line).
    assert_eq!(
        responses(
            "\\r\\nHTTP/1.1 200 OK\nHeader1: Value1\nHeader2:\\t Value2\nContent-Length: 0\n\n"
        ),
        refused(400)
    );
}

/// test/response/connection.md (commit 311e81465d4dc168a7b1fcdbb275431f46fa8c09). Where
/// llhttp stops with "Data after `Connection: close`", Squall marks the response not
/// keep-alive: the client closes (the driver here reads on).
#[test]
fn response_connection_md() {
    // "Proxy-Connection": llhttp takes `Proxy-Connection: close` as `Connection: close`;
    // Squall follows RFC 9110 §7.6.1 (only Connection carries connection options).
    assert_eq!(
        responses("HTTP/1.1 200 OK\nContent-Type: text/html; charset=UTF-8\nContent-Length: 11\nProxy-Connection: close\nDate: Thu, 31 Dec 2009 20:55:48 +0000\n\nhello world"),
        (vec![rs(200, true, b"hello world")], None)
    );
    // "HTTP/1.0 with keep-alive and EOF-terminated 200 status".
    assert_eq!(
        responses("HTTP/1.0 200 OK\nConnection: keep-alive\n\nHTTP/1.0 200 OK"),
        (vec![rs(200, false, b"HTTP/1.0 200 OK")], None)
    );
    // "HTTP/1.0 with keep-alive and 204 status" (the next status line is cut short).
    assert_eq!(
        responses("HTTP/1.0 204 No content\nConnection: keep-alive\n\nHTTP/1.0 200 OK"),
        (vec![rs(204, true, b"")], None)
    );
    // "HTTP/1.1 with EOF-terminated 200 status".
    assert_eq!(
        responses("HTTP/1.1 200 OK\n\nHTTP/1.1 200 OK"),
        (vec![rs(200, false, b"HTTP/1.1 200 OK")], None)
    );
    // "HTTP/1.1 with 204 status".
    assert_eq!(
        responses("HTTP/1.1 204 No content\n\nHTTP/1.1 200 OK"),
        (vec![rs(204, true, b"")], None)
    );
    // "HTTP/1.1 with keep-alive disabled and 204 status".
    assert_eq!(
        responses("HTTP/1.1 204 No content\nConnection: close\n\nHTTP/1.1 200 OK"),
        (vec![rs(204, false, b"")], None)
    );
    // "HTTP/1.1 with keep-alive disabled, content-length".
    assert_eq!(
        responses("HTTP/1.1 200 No content\nContent-Length: 5\nConnection: close\n\n2ad731e3-4dcd-4f70-b871-0ad284b29ffc"),
        (vec![rs(200, false, b"2ad73")], None)
    );
    // "HTTP 101 response with Upgrade and Content-Length header": llhttp reads 4 body
    // bytes; for Squall a 1xx response ends with its header section whatever its fields
    // say (RFC 9112 §6.3 item 1); the bytes after it (here an unfinished line) are the
    // next protocol's.
    assert_eq!(
        responses("HTTP/1.1 101 Switching Protocols\nConnection: upgrade\nUpgrade: h2c\nContent-Length: 4\n\nbody\\\nproto"),
        (vec![rs(101, true, b"")], None)
    );
    // "HTTP 200 response with Upgrade header" (read until close).
    assert_eq!(
        responses("HTTP/1.1 200 OK\nConnection: upgrade\nUpgrade: h2c\n\nbody"),
        (vec![rs(200, false, b"body")], None)
    );
    // "HTTP 200 response with Upgrade header and Content-Length".
    assert_eq!(
        responses("HTTP/1.1 200 OK\nConnection: upgrade\nUpgrade: h2c\nContent-Length: 4\n\nbody"),
        (vec![rs(200, true, b"body")], None)
    );
    // "HTTP 200 response with Upgrade header and Transfer-Encoding".
    assert_eq!(
        responses("HTTP/1.1 200 OK\nConnection: upgrade\nUpgrade: h2c\nTransfer-Encoding: chunked\n\n2\nbo\n2\ndy\n0\n\n"),
        (vec![rs(200, true, b"body")], None)
    );
}

/// test/response/content-length.md (commit 312b74ff515bf37dd2d7c6d081f227cdb792ca2e).
#[test]
fn response_content_length_md() {
    // "Response without `Content-Length`, but with body" (its `\"` stay as written).
    let lines = [
        r#"<?xml version=\"1.0\" encoding=\"UTF-8\"?>"#,
        r#"<SOAP-ENV:Envelope xmlns:SOAP-ENV=\"http://schemas.xmlsoap.org/soap/envelope/\">"#,
        "  <SOAP-ENV:Body>",
        "    <SOAP-ENV:Fault>",
        "       <faultcode>SOAP-ENV:Client</faultcode>",
        "       <faultstring>Client Error</faultstring>",
        "    </SOAP-ENV:Fault>",
        "  </SOAP-ENV:Body>",
        "</SOAP-ENV:Envelope>",
    ];
    let head = "HTTP/1.1 200 OK\nDate: Tue, 04 Aug 2009 07:59:32 GMT\nServer: Apache\nX-Powered-By: Servlet/2.5 JSP/2.1\nContent-Type: text/xml; charset=utf-8\nConnection: close\n\n";
    let body = lines.join("\n");
    assert_eq!(body.len(), 317);
    assert_eq!(
        responses(&format!("{head}{}", lines.join("\\n\\\n"))),
        (vec![rs(200, false, body.as_bytes())], None)
    );
    // "Content-Length-X".
    assert_eq!(
        responses(
            "HTTP/1.1 200 OK\nContent-Length-X: 0\nTransfer-Encoding: chunked\n\n2\nOK\n0\n\n"
        ),
        (vec![rs(200, true, b"OK")], None)
    );
    // "Tabs in `Content-Length` (surrounding)": accepted; the 42 bytes never come.
    assert_eq!(
        responses("HTTP/1.1 200 OK\nContent-Length:\\t42\\t\n\n"),
        (vec![], None)
    );
}

/// test/response/transfer-encoding.md (commit 0ebaea78ee4f0330419648c1b30cb8d722d97e4b).
#[test]
fn response_transfer_encoding_md() {
    // "`chunkedchunked` transfer-encoding does not enable chunked enconding": the last
    // coding is not chunked, so the body runs until close (RFC 9112 §6.3 item 4).
    assert_eq!(
        responses(
            "HTTP/1.1 200 OK\nAccept: */*\nTransfer-Encoding: chunkedchunked\n\n2\nOK\n0\n\n"
        ),
        (vec![rs(200, false, b"2\r\nOK\r\n0\r\n\r\n")], None)
    );
    // "`chunked` before other transfer-encoding" and "multiple transfer-encoding where
    // chunked is not the last one": chunked is not the final coding, so the body runs
    // until close (RFC 9112 §6.3 item 4).
    assert_eq!(
        responses("HTTP/1.1 200 OK\nAccept: */*\nTransfer-Encoding: chunked, deflate\n\nWorld"),
        (vec![rs(200, false, b"World")], None)
    );
    assert_eq!(
        responses("HTTP/1.1 200 OK\nAccept: */*\nTransfer-Encoding: chunked\nTransfer-Encoding: identity\n\nWorld"),
        (vec![rs(200, false, b"World")], None)
    );
    // "Chunk extensions".
    assert_eq!(
        responses("HTTP/1.1 200 OK\nHost: localhost\nTransfer-encoding: chunked\n\n5;ilovew3;somuchlove=aretheseparametersfor\nhello\n6;blahblah;blah\n world\n0\n\n"),
        (vec![rs(200, true, b"hello world")], None)
    );
    // "Chunk extensions quoting": accepted; the input ends before the trailer section's
    // empty line.
    assert_eq!(
        responses("HTTP/1.1 200 OK\nHost: localhost\nTransfer-Encoding: chunked\n\n5;ilovew3=\"I love; extensions\";somuchlove=\"aretheseparametersfor\";blah;foo=bar\nhello\n6;blahblah;blah\n world\n0\n"),
        (vec![], None)
    );
    for (section, s) in [
        (
            "Empty `Transfer-Encoding` with `Content-Length`",
            "HTTP/1.1 200 OK\nTransfer-Encoding:\nContent-Length: 5\n\nhello",
        ),
        (
            "Trailing space on chunked body",
            "HTTP/1.1 200 OK\nContent-Type: text/plain\nTransfer-Encoding: chunked\n\n25  \\r\\n\\\nThis is the data in the first chunk\n\n1C\nand this is the second one\n\n0  \\r\\n\\\n\n",
        ),
        (
            "No semicolon before chunk extensions",
            "HTTP/1.1 200 OK\nHost: localhost\nTransfer-encoding: chunked\n\n2 erfrferferf\naa\n0 rrrr\n\n",
        ),
        (
            "No extension after semicolon",
            "HTTP/1.1 200 OK\nHost: localhost\nTransfer-encoding: chunked\n\n2;\naa\n0\n\n",
        ),
        (
            "Unbalanced chunk extensions quoting",
            "HTTP/1.1 200 OK\nHost: localhost\nTransfer-Encoding: chunked\n\n5;ilovew3=\"abc\";somuchlove=\"def; ghi\nhello\n6;blahblah;blah\n world\n0\n",
        ),
    ] {
        assert_eq!(responses(s), refused(400), "{section}");
    }
}

/// test/response/invalid.md (commit 07fb6df69262aca2bedf38234d85f6608ee2f175).
#[test]
fn response_invalid_md() {
    for (section, s) in [
        ("Incomplete HTTP protocol", "HTP/1.1 200 OK\n\n"),
        ("Extra digit in HTTP major version", "HTTP/01.1 200 OK\n\n"),
        (
            "Extra digit in HTTP major version #2",
            "HTTP/11.1 200 OK\n\n",
        ),
        ("Tab after HTTP version", "HTTP/1.1\\t200 OK\n\n"),
        (
            "CR before response and tab after HTTP version",
            "\\rHTTP/1.1\\t200 OK\n\n",
        ),
        (
            "Headers separated by CR",
            "HTTP/1.1 200 OK\nFoo: 1\\rBar: 2\n\n",
        ),
        (
            "Invalid space after start line",
            "HTTP/1.1 200 OK\n Host: foo",
        ),
        (
            "Extra space between HTTP version and status code",
            "HTTP/1.1  200 OK\n\n",
        ),
        ("One-digit status code", "HTTP/1.1 2 OK\n\n"),
        (
            "Only LFs present and no body",
            "HTTP/1.1 200 OK\\nContent-Length: 0\\n\\n",
        ),
        (
            "Only LFs present",
            "HTTP/1.1 200 OK\\n\\\nFoo: abc\\n\\\nBar: def\\n\\\n\\n\\\nBODY\\n\\",
        ),
    ] {
        assert_eq!(responses(s), refused(400), "{section}");
    }
    // "Invalid HTTP version".
    assert_eq!(responses("HTTP/5.6 200 OK\n\n"), refused(505));
    // "Extra space between status code and reason": the reason is " OK".
    assert_eq!(
        responses("HTTP/1.1 200  OK\n\n"),
        (vec![rs(200, false, b"")], None)
    );
}

/// test/response/pipelining.md (commit 7094b9798fa3418246e07266fe348ac0830a373f).
#[test]
fn response_pipelining_md() {
    // "Should parse multiple events": llhttp skips the CRLF after each body; Squall is
    // stricter and refuses it as the next status line (RFC 9112 §2.2 lets only a server
    // ignore empty lines before the start line).
    assert_eq!(
        responses("HTTP/1.1 200 OK\nContent-Length: 3\n\nAAA\nHTTP/1.1 201 Created\nContent-Length: 4\n\nBBBB\nHTTP/1.1 202 Accepted\nContent-Length: 5\n\nCCCC"),
        (vec![rs(200, true, b"AAA")], Some(400))
    );
}
