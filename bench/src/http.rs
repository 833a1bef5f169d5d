//! The fixed HTTP messages of the workloads (BENCHMARKS.md W1, W2 and W4), built once, and
//! byte-exact verification helpers.

/// W1 request: exactly 100 bytes.
pub const W1_REQ_LEN: usize = 100;
/// W1 response: exactly 32,768 bytes (status line + headers + body).
pub const W1_RESP_LEN: usize = 32_768;
/// W2 response body length.
pub const W2_BODY_LEN: usize = 80;
/// W4 (ab-2649): the static file's length.
pub const W4_FILE_LEN: usize = 2_649;

/// The W1 request: a GET padded with a header so the whole message is 100 bytes.
pub fn w1_request() -> Vec<u8> {
    let head = "GET /w1 HTTP/1.1\r\nHost: 48.0.0.1\r\nX-Pad: ";
    let tail = "\r\n\r\n";
    let pad = W1_REQ_LEN - head.len() - tail.len();
    let mut v = Vec::with_capacity(W1_REQ_LEN);
    v.extend_from_slice(head.as_bytes());
    v.extend(std::iter::repeat_n(b'a', pad));
    v.extend_from_slice(tail.as_bytes());
    debug_assert_eq!(v.len(), W1_REQ_LEN);
    v
}

/// A response of exactly `total` bytes with a correct Content-Length and a patterned body.
pub fn response_of_total(total: usize) -> Vec<u8> {
    // The header length depends on the digits of the body length; settle it by iterating.
    let mut body = total.saturating_sub(64);
    for _ in 0..4 {
        let head =
            format!("HTTP/1.1 200 OK\r\nServer: squall-bench\r\nContent-Length: {body}\r\n\r\n");
        body = total.saturating_sub(head.len());
    }
    let head = format!("HTTP/1.1 200 OK\r\nServer: squall-bench\r\nContent-Length: {body}\r\n\r\n");
    let mut v = Vec::with_capacity(total);
    v.extend_from_slice(head.as_bytes());
    v.extend((0..body).map(|i| b'a' + (i % 26) as u8));
    v
}

/// The W1 response (32,768 bytes in total).
pub fn w1_response() -> Vec<u8> {
    response_of_total(W1_RESP_LEN)
}

/// The W2 request: `GET /testu` with a Host header.
pub fn w2_request() -> Vec<u8> {
    b"GET /testu HTTP/1.1\r\nHost: 48.0.0.1\r\n\r\n".to_vec()
}

/// The W2 response: `200 OK` with an 80-byte body and its Content-Length.
pub fn w2_response() -> Vec<u8> {
    let mut v =
        format!("HTTP/1.1 200 OK\r\nServer: squall-bench\r\nContent-Length: {W2_BODY_LEN}\r\n\r\n")
            .into_bytes();
    v.extend((0..W2_BODY_LEN).map(|i| b'A' + (i % 26) as u8));
    v
}

/// The W4 file's bytes (a pattern, so a misplaced byte shows).
pub fn w4_body() -> Vec<u8> {
    (0..W4_FILE_LEN).map(|i| b'a' + (i % 26) as u8).collect()
}

/// The W4 request: `GET /w4` with a Host header (one per connection, or looped on a
/// keep-alive connection).
pub fn w4_request() -> Vec<u8> {
    b"GET /w4 HTTP/1.1\r\nHost: 48.0.0.1\r\n\r\n".to_vec()
}

/// The W4 response of the bench's own server: `200 OK`, Content-Length, the file.
pub fn w4_response() -> Vec<u8> {
    let mut v =
        format!("HTTP/1.1 200 OK\r\nServer: squall-bench\r\nContent-Length: {W4_FILE_LEN}\r\n\r\n")
            .into_bytes();
    v.extend(w4_body());
    v
}

/// Checks that `got` equals `expected[at..at + got.len()]` (false if it runs past the end).
#[inline]
pub fn matches_at(expected: &[u8], at: usize, got: &[u8]) -> bool {
    expected
        .get(at..at + got.len())
        .is_some_and(|want| want == got)
}

/// The body length declared by a response's Content-Length header, if present and valid.
pub fn content_length(resp: &[u8]) -> Option<usize> {
    let text = std::str::from_utf8(resp).ok()?;
    let head = text.split("\r\n\r\n").next()?;
    head.lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn w1_sizes_and_content_length_are_exact() {
        assert_eq!(w1_request().len(), 100);
        assert!(w1_request().ends_with(b"\r\n\r\n"));
        let r = w1_response();
        assert_eq!(r.len(), 32_768);
        let head_len = r.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        assert_eq!(content_length(&r), Some(32_768 - head_len));
    }

    #[test]
    fn w2_response_declares_its_body() {
        let r = w2_response();
        let head_len = r.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        assert_eq!(r.len() - head_len, W2_BODY_LEN);
        assert_eq!(content_length(&r), Some(W2_BODY_LEN));
        assert!(w2_request().starts_with(b"GET /testu HTTP/1.1\r\nHost: "));
    }

    #[test]
    fn w4_response_carries_the_2649_byte_file() {
        let r = w4_response();
        let head_len = r.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        assert_eq!(r.len() - head_len, 2_649);
        assert_eq!(content_length(&r), Some(2_649));
        assert_eq!(&r[head_len..], &w4_body()[..]);
        assert!(w4_request().starts_with(b"GET /w4 HTTP/1.1\r\nHost: "));
    }

    #[test]
    fn matches_at_checks_bounds_and_bytes() {
        let e = b"abcdef";
        assert!(matches_at(e, 2, b"cd"));
        assert!(!matches_at(e, 2, b"cx"));
        assert!(!matches_at(e, 5, b"fg"));
        assert!(matches_at(e, 6, b""));
    }
}
