//! Cases written from RFC 9110 / RFC 9112: framing (§6), chunked coding (§7), request and
//! status lines (§3, §4), field syntax (§5), persistence (§9), limits, and the request
//! smuggling shapes (§6.1, §6.3, §11.2). Every case is parsed at every split of its bytes.

mod common;

use common::{messages_any_split, Msg};
use squall_http::{Limits, Method};

fn req(s: &str) -> (Vec<Msg>, Option<u16>) {
    messages_any_split(s.as_bytes(), &Limits::default(), false)
}

fn status(s: &str) -> Option<u16> {
    req(s).1
}

fn one(s: &str) -> Msg {
    let (mut v, e) = req(s);
    assert_eq!((v.len(), e), (1, None), "{s:?}");
    v.remove(0)
}

#[test]
fn get_and_head_without_body() {
    let m = one("GET /index.html HTTP/1.1\r\nHost: example.com\r\n\r\n");
    assert_eq!(
        (m.method, m.target.as_str(), m.keep_alive),
        (Some(Method::Get), "/index.html", true)
    );
    let m = one("HEAD / HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_eq!(m.method, Some(Method::Head));
}

#[test]
fn leading_empty_lines_are_ignored() {
    // §2.2: a server SHOULD ignore at least one empty line before the request-line.
    let m = one("\r\n\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_eq!(m.target, "/");
}

#[test]
fn keep_alive_rules() {
    // §9.3: 1.1 persists by default, 1.0 only with keep-alive; close wins.
    assert!(one("GET / HTTP/1.1\r\nHost: h\r\n\r\n").keep_alive);
    assert!(!one("GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n").keep_alive);
    assert!(!one("GET / HTTP/1.1\r\nHost: h\r\nConnection: Upgrade, CLOSE\r\n\r\n").keep_alive);
    assert!(!one("GET / HTTP/1.0\r\n\r\n").keep_alive);
    assert!(one("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n").keep_alive);
    assert!(!one("GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n").keep_alive);
}

#[test]
fn pipelined_requests_in_one_buffer() {
    let s = "GET /a HTTP/1.1\r\nHost: h\r\n\r\nPOST /b HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhelloGET /c HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\nHEAD /d HTTP/1.1\r\nHost: h\r\n\r\n";
    let (v, e) = req(s);
    assert_eq!(e, None);
    let t: Vec<(&str, &[u8])> = v
        .iter()
        .map(|m| (m.target.as_str(), m.body.as_slice()))
        .collect();
    assert_eq!(
        t,
        vec![
            ("/a", &b""[..]),
            ("/b", b"hello"),
            ("/c", b"abc"),
            ("/d", b"")
        ]
    );
}

#[test]
fn expect_100_continue() {
    let m =
        one("PUT /f HTTP/1.1\r\nHost: h\r\nExpect: 100-Continue\r\nContent-Length: 2\r\n\r\nok");
    assert!(m.expect_continue);
    assert_eq!(m.body, b"ok");
    // RFC 9110 §10.1.1: a server MUST ignore a 100-continue expectation in an HTTP/1.0
    // request (a 1.0 client may not understand an interim answer).
    let m = one("PUT /f HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nok");
    assert!(!m.expect_continue);
    assert_eq!(m.body, b"ok");
}

#[test]
fn chunked_with_extensions_and_trailers() {
    let m = one("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5;a=b;c=\"d;\\\"e\"\r\nhello\r\n6 ; x\r\n world\r\n0\r\nExpires: never\r\nX: y\r\n\r\n");
    assert_eq!(m.body, b"hello world");
}

#[test]
fn content_length_rules() {
    // §8.6: 1*DIGIT only.
    assert_eq!(
        one("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 003\r\n\r\nabc").body,
        b"abc"
    );
    for bad in [
        "+3",
        "-1",
        "3 3",
        "0x3",
        "",
        "3,3",
        "3, 4",
        "1e3",
        "99999999999999999999",
    ] {
        let s = format!("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: {bad}\r\n\r\nabc");
        assert_eq!(status(&s), Some(400), "Content-Length {bad:?}");
    }
}

#[test]
fn smuggling_shapes_are_rejected() {
    let cases = [
        // CL.TE and TE.CL (§6.1: a server MAY reject; we do).
        "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n0\r\n\r\n",
        // Duplicate and differing Content-Length (§6.3 item 5).
        "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\nContent-Length: 4\r\n\r\nabcd",
        "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\nabcde",
        // chunked not last, chunked twice (§6.3 item 4: 400 and close).
        "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: identity\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding:\r\n\r\n",
        // Transfer-Encoding in HTTP/1.0 (§6.1: faulty framing).
        "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        // Obfuscated names: whitespace before the colon (§5.1 MUST 400), folding (§5.2).
        "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding : chunked\r\n\r\n0\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: h\r\nX: a\r\n chunked\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: h\r\n Transfer-Encoding: chunked\r\n\r\n",
        // Bad chunk sizes: not hex, overflow, negative, missing, LF only, bad terminator.
        "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\nz\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n10000000000000000\r\n",
        "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\nabc\r\n0\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX\r\n0\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n0x3\r\nabc\r\n0\r\n\r\n",
        // Bare CR / bare LF line ends (§2.2: we accept CRLF only).
        "GET / HTTP/1.1\nHost: h\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: h\rX: y\r\n\r\n",
        // Host missing or twice in 1.1 (§3.2).
        "GET / HTTP/1.1\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
    ];
    for c in cases {
        assert_eq!(status(c), Some(400), "{c:?}");
    }
}

/// RFC 9112 §3.2: a Host field with an invalid value gets 400 (RFC 9110 §7.2: `uri-host
/// [":" port]`); valid ones of every shape pass, the empty one included (a URI without
/// an authority).
#[test]
fn host_values_are_checked() {
    for good in [
        "example.com",
        "example.com:8080",
        "198.18.0.1:80",
        "[2001:db8::1]",
        "[2001:db8::1]:443",
        "[v1.fe80::a+en1]",
        "a-b_c~d.%41!$&'()*+,;=",
        "h:",
        "",
    ] {
        let s = format!("GET / HTTP/1.1\r\nHost: {good}\r\n\r\n");
        assert_eq!(status(&s), None, "{good:?}");
    }
    for bad in [
        "a b",
        "a/b@c",
        "user@host",
        "h:8x",
        "h:80:90",
        "[2001:db8::1",
        "[]",
        "[::1]x",
        "%4",
        "%zz",
        "h\u{e9}",
    ] {
        let s = format!("GET / HTTP/1.1\r\nHost: {bad}\r\n\r\n");
        assert_eq!(status(&s), Some(400), "{bad:?}");
    }
}

#[test]
fn request_line_syntax() {
    for bad in [
        "GET  / HTTP/1.1\r\nHost: h\r\n\r\n",
        "GET / HTTP/1.1 \r\nHost: h\r\n\r\n",
        "GET /a b HTTP/1.1\r\nHost: h\r\n\r\n",
        "G(T / HTTP/1.1\r\nHost: h\r\n\r\n",
        "GET / HTTP/1\r\nHost: h\r\n\r\n",
        "GET / http/1.1\r\nHost: h\r\n\r\n",
        "GET /\x7f HTTP/1.1\r\nHost: h\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: h\x00\r\n\r\n",
    ] {
        assert_eq!(status(bad), Some(400), "{bad:?}");
    }
    // §2.3 / RFC 9110 §6.2: another major version is 505; 1.x above 1.1 is taken as 1.1.
    assert_eq!(status("GET / HTTP/2.0\r\nHost: h\r\n\r\n"), Some(505));
    assert_eq!(status("GET / HTTP/0.9\r\nHost: h\r\n\r\n"), Some(505));
    assert!(one("GET / HTTP/1.2\r\nHost: h\r\n\r\n").keep_alive);
    // Unknown but well-formed methods parse (a server answers 501 or 405).
    assert_eq!(
        one("PURGE /x HTTP/1.1\r\nHost: h\r\n\r\n").method,
        Some(Method::Other)
    );
}

#[test]
fn limits_map_to_their_status() {
    let lim = Limits {
        max_start_line: 64,
        max_header_line: 64,
        max_headers: 4,
        max_head: 256,
        max_body: 10,
        ..Limits::default()
    };
    let run = |s: String| common::messages_any_split(s.as_bytes(), &lim, false).1;
    assert_eq!(
        run(format!(
            "GET /{} HTTP/1.1\r\nHost: h\r\n\r\n",
            "a".repeat(100)
        )),
        Some(414)
    );
    // Still 414 before the line's end has arrived.
    assert_eq!(run(format!("GET /{}", "a".repeat(100))), Some(414));
    assert_eq!(
        run(format!(
            "GET / HTTP/1.1\r\nHost: h\r\nX: {}\r\n\r\n",
            "v".repeat(80)
        )),
        Some(431)
    );
    assert_eq!(
        run("GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\n\r\n".into()),
        Some(431)
    );
    let many: String = (0..8)
        .map(|i| format!("X{i}: {}\r\n", "v".repeat(40)))
        .collect();
    assert_eq!(run(format!("GET / HTTP/1.1\r\n{many}")), Some(431));
    assert_eq!(
        run("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 11\r\n\r\n".into()),
        Some(413)
    );
    assert_eq!(
        run("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\n0123456789".into()),
        None
    );
    assert_eq!(
        run("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n6\r\n012345\r\n6\r\n012345\r\n0\r\n\r\n".into()),
        Some(413)
    );
    // A coding we do not implement before chunked: 501 (RFC 9112 §6.1).
    assert_eq!(
        status("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n"),
        Some(501)
    );
}

#[test]
fn responses_and_their_framing() {
    let lim = Limits::default();
    let rsp = |s: &str| common::messages_any_split(s.as_bytes(), &lim, true);
    let (v, e) = rsp("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhiHTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nno\r\n0\r\n\r\nHTTP/1.1 304 Not Modified\r\nContent-Length: 99\r\n\r\nHTTP/1.1 204 \r\n\r\nHTTP/1.0 200\r\n\r\nuntil close");
    assert_eq!(e, None);
    let got: Vec<(u16, &[u8], bool)> = v
        .iter()
        .map(|m| (m.code, m.body.as_slice(), m.keep_alive))
        .collect();
    assert_eq!(
        got,
        vec![
            (200, &b"hi"[..], true),
            (404, b"no", true),
            (304, b"", true),
            (204, b"", true),
            (200, b"until close", false),
        ]
    );
    // A final coding other than chunked: close-delimited (RFC 9112 §6.3 item 4), also
    // when chunked comes earlier in the list.
    for te in ["gzip", "chunked, gzip"] {
        let (v, _) = rsp(&format!(
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: {te}\r\n\r\nxyz"
        ));
        assert_eq!(
            (v[0].body.as_slice(), v[0].keep_alive),
            (&b"xyz"[..], false),
            "{te}"
        );
    }
    // Chunked last frames the body whatever codings came before it (the content stays
    // coded: a client counts it as it came); a request with such a coding is a 501.
    let (v, e) =
        rsp("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n3\r\nxyz\r\n0\r\n\r\n");
    assert_eq!(e, None);
    assert_eq!((v[0].body.as_slice(), v[0].keep_alive), (&b"xyz"[..], true));
    assert_eq!(
        status("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n3\r\nxyz\r\n0\r\n\r\n"),
        Some(501)
    );
    // Transfer-Encoding in an HTTP/1.0 response: faulty framing, read until the close
    // (RFC 9112 §6.1), even with chunked.
    let (v, e) = rsp("HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nxyz");
    assert_eq!(e, None);
    assert_eq!(
        (v[0].body.as_slice(), v[0].keep_alive),
        (&b"3\r\nxyz"[..], false)
    );
    // Three digits outside 100-599: invalid, a client reads them (as a 5xx, RFC 9110
    // §15), framed as any final answer.
    for (head, code) in [("HTTP/1.1 600 Nope", 600), ("HTTP/1.1 099 Low", 99)] {
        let (v, e) = rsp(&format!("{head}\r\nContent-Length: 2\r\n\r\nok"));
        assert_eq!(e, None, "{head}");
        assert_eq!((v[0].code, v[0].body.as_slice()), (code, &b"ok"[..]));
    }
    // Obsolete line folding in a response: the field continues (a user agent MUST
    // accept it, RFC 9112 §5.2), the fold read as whitespace by the framing fields.
    let (v, e) = rsp(
        "HTTP/1.1 200 OK\r\nX-A: a\r\n b\r\nConnection: keep-alive,\r\n\t close\r\n\
         Content-Length:\r\n 2\r\n\r\nok",
    );
    assert_eq!(e, None);
    assert_eq!((v[0].body.as_slice(), v[0].keep_alive), (&b"ok"[..], false));
    let buf = b"HTTP/1.1 200 OK\r\nX-A: a\r\n b \r\n  c\r\nX-B: d\r\n\r\n";
    let mut h = [squall_http::Header::EMPTY; 4];
    let r = squall_http::parse_response(buf, &mut h, &lim, false)
        .unwrap()
        .unwrap();
    let fields: Vec<(&[u8], &[u8])> = r.headers.iter().map(|h| (h.name, h.value)).collect();
    assert_eq!(
        fields,
        [(&b"X-A"[..], &b"a\r\n b \r\n  c"[..]), (b"X-B", b"d")]
    );
    for bad in [
        "HTTP/1.1 20 OK\r\n\r\n",
        "HTTP/1.1 2x0 Nope\r\n\r\n",
        "HTTP/1.1 200 OK\r\n folded first\r\n\r\n",
        "HTTP/1.1 200 OK\r\nX-A: a\r\n b\x01\r\n\r\n",
        "HTTP/1.1 200OK\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
    ] {
        assert_eq!(rsp(bad).1, Some(400), "{bad:?}");
    }
}
