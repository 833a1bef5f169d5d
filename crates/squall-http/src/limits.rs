//! The parser's limits: start-line and header sizes, header count, body size.

/// Size limits of one message. Exceeding one is an [`crate::Error`] with the status a
/// server answers (414 for the request line, 431 for headers, 413 for the body).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Longest start line (request line or status line), bytes without CRLF.
    pub max_start_line: usize,
    /// Longest header field line (name, colon and value), bytes without CRLF.
    pub max_header_line: usize,
    /// Most header fields (the caller's header array bounds this too).
    pub max_headers: usize,
    /// Largest head: start line, header section and the empty line, bytes.
    pub max_head: usize,
    /// Largest body (decoded length for chunked bodies), bytes.
    pub max_body: u64,
    /// Longest chunk-size line (size, extensions), bytes without CRLF.
    pub max_chunk_line: usize,
    /// Largest trailer section, bytes.
    pub max_trailers: usize,
    /// HTTP/1.1 requests must carry exactly one Host (RFC 9112 §3.2; a server's rule,
    /// off to parse other parsers' test inputs that leave it out).
    pub require_host: bool,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_start_line: 8192,
            max_header_line: 8192,
            max_headers: 64,
            max_head: 16 * 1024,
            max_body: 1 << 20,
            max_chunk_line: 1024,
            max_trailers: 8192,
            require_host: true,
        }
    }
}
