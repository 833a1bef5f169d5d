//! Parse errors and the status code a server answers each with.

use std::fmt;

/// Why a message was rejected. A server answers [`Error::status`] and closes the
/// connection (the framing can no longer be trusted).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// Malformed syntax or ambiguous framing (smuggling shapes): 400.
    BadRequest(&'static str),
    /// Request line longer than [`crate::Limits::max_start_line`]: 414.
    UriTooLong,
    /// Too many header fields, a field line or the head too large: 431.
    HeadersTooLarge,
    /// Body larger than [`crate::Limits::max_body`]: 413.
    BodyTooLarge,
    /// A transfer coding this parser does not implement: 501.
    NotImplemented(&'static str),
    /// An HTTP major version other than 1: 505.
    VersionNotSupported,
}

impl Error {
    /// The status code a server answers.
    pub fn status(self) -> u16 {
        match self {
            Error::BadRequest(_) => 400,
            Error::UriTooLong => 414,
            Error::HeadersTooLarge => 431,
            Error::BodyTooLarge => 413,
            Error::NotImplemented(_) => 501,
            Error::VersionNotSupported => 505,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::BadRequest(why) => write!(f, "bad message: {why}"),
            Error::UriTooLong => f.write_str("request line too long"),
            Error::HeadersTooLarge => f.write_str("header section too large"),
            Error::BodyTooLarge => f.write_str("body too large"),
            Error::NotImplemented(why) => write!(f, "not implemented: {why}"),
            Error::VersionNotSupported => f.write_str("HTTP version not supported"),
        }
    }
}

impl std::error::Error for Error {}
