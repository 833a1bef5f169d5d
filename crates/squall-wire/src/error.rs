//! The crate-wide error type returned by every parser and builder.

use core::fmt;

/// Why a byte string could not be parsed, or a header could not be emitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Error {
    /// The buffer is shorter than the header (or than a length field says).
    Truncated,
    /// A field holds a value that makes the packet impossible to interpret
    /// (e.g. IPv4 IHL < 5, TCP data offset < 5, an option length of 0 or 1).
    Malformed,
    /// A checksum did not verify.
    BadChecksum,
    /// Well-formed but not something this crate handles (e.g. IP version 6
    /// in an IPv4 view, ARP for a non-Ethernet/IPv4 hardware pair).
    Unsupported,
    /// A builder was given an output buffer too small for what it must write,
    /// or asked to emit more than the format allows (e.g. > 40 bytes of options).
    NoSpace,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            Error::Truncated => "truncated packet",
            Error::Malformed => "malformed packet",
            Error::BadChecksum => "bad checksum",
            Error::Unsupported => "unsupported packet",
            Error::NoSpace => "no space in output buffer",
        };
        f.write_str(s)
    }
}

impl std::error::Error for Error {}

/// Shorthand used throughout the crate.
pub type Result<T> = core::result::Result<T, Error>;
