//! Test inputs taken as data from llhttp's test suite (https://github.com/nodejs/llhttp,
//! `test/request/*.md` and `test/response/*.md`, MIT licence, Copyright Fedor Indutny
//! and other Node contributors). Their harness turns each `\n` of the markdown into
//! CRLF, as done here. Expected outcomes are llhttp's strict-mode results; llhttp's
//! inputs mostly omit Host, so `require_host` is off for them.

mod common;

use common::messages_any_split;
use squall_http::Limits;

fn crlf(s: &str) -> Vec<u8> {
    s.replace('\n', "\r\n").into_bytes()
}

fn lim() -> Limits {
    Limits {
        require_host: false,
        ..Limits::default()
    }
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
