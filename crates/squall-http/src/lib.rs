//! An incremental, zero-copy HTTP/1.1 parser for both directions: requests (for a
//! server) and responses (for a client/generator). No allocation per message: the head
//! parsers fill a caller-owned header array with slices of the input buffer, and the body
//! decoder hands out slices of the input as it goes.
//!
//! - [`parse_request`] / [`parse_response`]: the start line and header section, checked
//!   against [`Limits`]; `Ok(None)` while the head is incomplete, [`Error`] (mapped to a
//!   status code by [`Error::status`]) when it cannot become valid.
//! - The message framing ([`BodyKind`]: none, Content-Length, chunked, close-delimited),
//!   keep-alive (HTTP/1.0 and 1.1 rules, `Connection` tokens) and `Expect:
//!   100-continue` are decided from the head, with request-smuggling shapes rejected
//!   (Transfer-Encoding with Content-Length, duplicate or malformed Content-Length,
//!   codings other than a final `chunked`).
//! - [`BodyDecoder`]: feeds body bytes (Content-Length or chunked with extensions and
//!   trailers) and reports consumed bytes, so several pipelined messages can be taken
//!   from one buffer.

mod body;
mod error;
mod fast;
mod head;
mod limits;
mod syntax;

pub use body::{BodyDecoder, BodyKind, Decoded};
pub use error::Error;
pub use head::{
    parse_request, parse_request_in, parse_response, parse_response_in, Header, Method, Request,
    Response, Version,
};
pub use limits::Limits;

/// The reason phrase of a status code this crate's users send (empty for others).
pub fn reason(code: u16) -> &'static str {
    match code {
        100 => "Continue",
        200 => "OK",
        204 => "No Content",
        206 => "Partial Content",
        301 => "Moved Permanently",
        304 => "Not Modified",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        411 => "Length Required",
        412 => "Precondition Failed",
        413 => "Content Too Large",
        414 => "URI Too Long",
        416 => "Range Not Satisfiable",
        417 => "Expectation Failed",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        505 => "HTTP Version Not Supported",
        _ => "",
    }
}
