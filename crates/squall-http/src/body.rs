//! Message bodies: how one is framed ([`BodyKind`]) and the incremental decoder of
//! Content-Length and chunked bodies with extensions and trailers (RFC 9112 §6-§7).

use crate::error::Error;
use crate::limits::Limits;
use crate::syntax::{is_field_vchar, is_tchar};

/// How a message's body is delimited (RFC 9112 §6.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyKind {
    /// No body.
    None,
    /// Exactly this many bytes.
    Length(u64),
    /// Chunked transfer coding.
    Chunked,
    /// Until the connection closes (responses only).
    Close,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Bytes left of a Content-Length body.
    Length(u64),
    /// A close-delimited body.
    Close,
    /// In the chunk-size digits: value so far, whether a digit was seen.
    Size(u64, bool),
    /// After the digits: BWS before `;`.
    SizeWs(u64),
    /// Chunk extensions (RFC 9112 §7.1.1): after `;` (BWS, then a name), in a name,
    /// after `=` (BWS, then a token or a quoted string), in a token value, in a quoted
    /// string, after a backslash in it, after a value (BWS, then `;` or CR); after a
    /// name, BWS then `=`, `;` or CR.
    ExtStart(u64),
    ExtName(u64),
    ExtNameWs(u64),
    ExtValStart(u64),
    ExtToken(u64),
    ExtQuoted(u64),
    ExtEscape(u64),
    ExtEnd(u64),
    /// CR seen at the end of the size line.
    SizeLf(u64),
    /// Bytes left of the current chunk's data.
    Data(u64),
    DataCr,
    DataLf,
    /// At the start of a trailer line (or the final empty line).
    TrailerStart,
    /// The same after a trailer field, whose value a line starting with SP or HTAB
    /// continues (obs-fold: the trailers are not kept, the fold is whitespace in a value
    /// nobody reads, as RFC 9112 §5.2 lets a recipient replace it with SP).
    TrailerNext,
    /// In a trailer field's name, then its value.
    TrailerName,
    TrailerValue,
    TrailerLf,
    EndLf,
    Done,
}

/// One step of [`BodyDecoder::decode`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decoded<'a> {
    /// Bytes of the input used (framing and data).
    pub consumed: usize,
    /// Body bytes (a slice of the input; may be empty).
    pub data: &'a [u8],
    /// The body is complete: the bytes after `consumed` belong to the next message.
    pub done: bool,
}

/// Incremental body decoder: feed it the bytes after the head, as they come.
#[derive(Clone, Debug)]
pub struct BodyDecoder {
    state: State,
    /// Decoded body bytes so far.
    total: u64,
    max_body: u64,
    max_line: usize,
    max_trailers: usize,
    /// Bytes of the current size line / of the trailer section so far.
    line: usize,
    trailers: usize,
}

impl BodyDecoder {
    /// A decoder for a body framed as `kind` (the head was checked against `lim` already).
    pub fn new(kind: BodyKind, lim: &Limits) -> BodyDecoder {
        let state = match kind {
            BodyKind::None | BodyKind::Length(0) => State::Done,
            BodyKind::Length(n) => State::Length(n),
            BodyKind::Chunked => State::Size(0, false),
            BodyKind::Close => State::Close,
        };
        BodyDecoder {
            state,
            total: 0,
            max_body: lim.max_body,
            max_line: lim.max_chunk_line,
            max_trailers: lim.max_trailers,
            line: 0,
            trailers: 0,
        }
    }

    /// The body is complete.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Body bytes decoded so far.
    pub fn body_bytes(&self) -> u64 {
        self.total
    }

    /// Takes framing bytes from `input` until it reaches body data (returned as a slice
    /// of `input`), the end of the body, or the end of `input`. Call again with the rest
    /// (`&input[consumed..]`) while `consumed < input.len()` and not `done`.
    pub fn decode<'a>(&mut self, input: &'a [u8]) -> Result<Decoded<'a>, Error> {
        let mut i = 0;
        while i < input.len() {
            let c = input[i];
            match self.state {
                State::Done => break,
                State::Length(rem) => {
                    let n = rem.min((input.len() - i) as u64);
                    let left = rem - n;
                    self.total += n;
                    self.state = if left == 0 {
                        State::Done
                    } else {
                        State::Length(left)
                    };
                    let end = i + n as usize;
                    return Ok(self.out(end, &input[i..end]));
                }
                State::Close => {
                    self.total += (input.len() - i) as u64;
                    if self.total > self.max_body {
                        return Err(Error::BodyTooLarge);
                    }
                    return Ok(self.out(input.len(), &input[i..]));
                }
                State::Data(rem) => {
                    let n = rem.min((input.len() - i) as u64);
                    let left = rem - n;
                    self.state = if left == 0 {
                        State::DataCr
                    } else {
                        State::Data(left)
                    };
                    let end = i + n as usize;
                    return Ok(self.out(end, &input[i..end]));
                }
                State::Size(v, digit) => {
                    self.size_line()?;
                    match hex(c) {
                        // At most 15 significant hex digits (leading zeros do not count;
                        // the size line's limit bounds them).
                        Some(d) if v >> 56 == 0 => self.state = State::Size(v << 4 | d, true),
                        Some(_) => return Err(Error::BadRequest("chunk size too large")),
                        None if !digit => return Err(Error::BadRequest("bad chunk size")),
                        None => self.after_size(v, c)?,
                    }
                }
                State::SizeWs(v) => {
                    self.size_line()?;
                    match c {
                        b' ' | b'\t' => {}
                        b';' => self.state = State::ExtStart(v),
                        _ => return Err(Error::BadRequest("bad chunk size")),
                    }
                }
                State::ExtStart(_)
                | State::ExtName(_)
                | State::ExtNameWs(_)
                | State::ExtValStart(_)
                | State::ExtToken(_)
                | State::ExtQuoted(_)
                | State::ExtEscape(_)
                | State::ExtEnd(_) => {
                    self.size_line()?;
                    self.state = ext(self.state, c)?;
                }
                State::SizeLf(v) => {
                    if c != b'\n' {
                        return Err(Error::BadRequest("chunk size line not ended by CRLF"));
                    }
                    self.line = 0;
                    if v == 0 {
                        self.state = State::TrailerStart;
                    } else {
                        self.total = self.total.saturating_add(v);
                        if self.total > self.max_body {
                            return Err(Error::BodyTooLarge);
                        }
                        self.state = State::Data(v);
                    }
                }
                State::DataCr => {
                    if c != b'\r' {
                        return Err(Error::BadRequest("chunk data not followed by CRLF"));
                    }
                    self.state = State::DataLf;
                }
                State::DataLf => {
                    if c != b'\n' {
                        return Err(Error::BadRequest("chunk data not followed by CRLF"));
                    }
                    self.state = State::Size(0, false);
                }
                State::TrailerStart | State::TrailerNext => {
                    self.trailer_byte()?;
                    self.state = match c {
                        b'\r' => State::EndLf,
                        b' ' | b'\t' if self.state == State::TrailerNext => State::TrailerValue,
                        b' ' | b'\t' => {
                            return Err(Error::BadRequest("obsolete line folding in trailers"))
                        }
                        c if is_tchar(c) => State::TrailerName,
                        _ => return Err(Error::BadRequest("malformed trailer field")),
                    };
                }
                State::TrailerName => {
                    self.trailer_byte()?;
                    match c {
                        b':' => self.state = State::TrailerValue,
                        c if is_tchar(c) => {}
                        _ => return Err(Error::BadRequest("malformed trailer field")),
                    }
                }
                State::TrailerValue => {
                    self.trailer_byte()?;
                    match c {
                        b'\r' => self.state = State::TrailerLf,
                        c if is_field_vchar(c) => {}
                        _ => return Err(Error::BadRequest("malformed trailer field")),
                    }
                }
                State::TrailerLf | State::EndLf => {
                    if c != b'\n' {
                        return Err(Error::BadRequest("trailer line not ended by CRLF"));
                    }
                    self.state = if self.state == State::EndLf {
                        State::Done
                    } else {
                        State::TrailerNext
                    };
                    if self.state == State::Done {
                        return Ok(self.out(i + 1, &[]));
                    }
                }
            }
            i += 1;
        }
        Ok(self.out(i, &[]))
    }

    fn out<'a>(&self, consumed: usize, data: &'a [u8]) -> Decoded<'a> {
        Decoded {
            consumed,
            data,
            done: self.state == State::Done,
        }
    }

    /// The byte `c` right after the size digits of `v`.
    fn after_size(&mut self, v: u64, c: u8) -> Result<(), Error> {
        self.state = match c {
            b'\r' => State::SizeLf(v),
            b';' => State::ExtStart(v),
            b' ' | b'\t' => State::SizeWs(v),
            _ => return Err(Error::BadRequest("bad chunk size")),
        };
        Ok(())
    }

    fn size_line(&mut self) -> Result<(), Error> {
        self.line += 1;
        if self.line > self.max_line {
            return Err(Error::BadRequest("chunk size line too long"));
        }
        Ok(())
    }

    fn trailer_byte(&mut self) -> Result<(), Error> {
        self.trailers += 1;
        if self.trailers > self.max_trailers {
            return Err(Error::HeadersTooLarge);
        }
        Ok(())
    }
}

/// The chunk-extension state after byte `c` in state `s`.
fn ext(s: State, c: u8) -> Result<State, Error> {
    const BAD: Error = Error::BadRequest("bad chunk extension");
    let ws = matches!(c, b' ' | b'\t');
    Ok(match s {
        State::ExtStart(v) if ws => State::ExtStart(v),
        State::ExtStart(v) if is_tchar(c) => State::ExtName(v),
        State::ExtName(v) if is_tchar(c) => State::ExtName(v),
        State::ExtName(v) | State::ExtNameWs(v) if c == b'=' => State::ExtValStart(v),
        // BWS between a name and `=` (RFC 9112 §7.1.1).
        State::ExtName(v) | State::ExtNameWs(v) if ws => State::ExtNameWs(v),
        State::ExtValStart(v) if ws => State::ExtValStart(v),
        State::ExtValStart(v) if c == b'"' => State::ExtQuoted(v),
        State::ExtValStart(v) | State::ExtToken(v) if is_tchar(c) => State::ExtToken(v),
        State::ExtQuoted(v) if c == b'\\' => State::ExtEscape(v),
        State::ExtQuoted(v) if c == b'"' => State::ExtEnd(v),
        State::ExtQuoted(v) if c != 0x7f && (c == b'\t' || c >= 0x20) => State::ExtQuoted(v),
        State::ExtEscape(v) if c != 0x7f && (c == b'\t' || c >= 0x20) => State::ExtQuoted(v),
        State::ExtToken(v) | State::ExtEnd(v) if ws => State::ExtEnd(v),
        State::ExtName(v) | State::ExtNameWs(v) | State::ExtToken(v) | State::ExtEnd(v)
            if c == b';' =>
        {
            State::ExtStart(v)
        }
        State::ExtName(v) | State::ExtNameWs(v) | State::ExtToken(v) | State::ExtEnd(v)
            if c == b'\r' =>
        {
            State::SizeLf(v)
        }
        _ => return Err(BAD),
    })
}

fn hex(c: u8) -> Option<u64> {
    match c {
        b'0'..=b'9' => Some(u64::from(c - b'0')),
        b'a'..=b'f' => Some(u64::from(c - b'a' + 10)),
        b'A'..=b'F' => Some(u64::from(c - b'A' + 10)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Decodes `input` fed in pieces of `step` bytes: (body, bytes consumed, done).
    fn feed(kind: BodyKind, input: &[u8], step: usize) -> Result<(Vec<u8>, usize, bool), Error> {
        let mut d = BodyDecoder::new(kind, &Limits::default());
        let mut body = Vec::new();
        let mut used = 0;
        let mut avail = 0;
        while avail < input.len() && !d.is_done() {
            avail = (avail + step).min(input.len());
            while used < avail && !d.is_done() {
                let r = d.decode(&input[used..avail])?;
                body.extend_from_slice(r.data);
                used += r.consumed;
            }
        }
        Ok((body, used, d.is_done()))
    }

    #[test]
    fn chunked_with_extension_and_trailer_any_split() {
        let msg =
            b"4;ext=1\r\nWiki\r\n5\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nX-T: v\r\n\r\nNEXT";
        for step in 1..msg.len() {
            let (b, used, done) = feed(BodyKind::Chunked, msg, step).unwrap();
            assert_eq!(b, b"Wikipedia in\r\n\r\nchunks.", "step {step}");
            assert!(done);
            assert_eq!(used, msg.len() - 4);
        }
    }

    /// A trailer field folded over lines (obs-fold) is whitespace in a value nobody
    /// reads; a line starting with whitespace right after the last chunk continues
    /// nothing and is refused.
    #[test]
    fn folded_trailers_continue_their_field() {
        let msg = b"2\r\nab\r\n0\r\nX-T: v\r\n w\r\n\t x\r\nX-U: y\r\n\r\nNEXT";
        for step in 1..msg.len() {
            let (b, used, done) = feed(BodyKind::Chunked, msg, step).unwrap();
            assert_eq!(
                (b.as_slice(), used, done),
                (&b"ab"[..], msg.len() - 4, true)
            );
        }
        let bad = feed(BodyKind::Chunked, b"0\r\n w\r\n\r\n", 64);
        assert!(bad.is_err());
    }

    /// RFC 9112 §7.1.1's chunk-ext allows BWS around `=` and `;`; a size may carry any
    /// leading zeros (at most 15 significant digits).
    #[test]
    fn chunk_lines_with_whitespace_and_leading_zeros() {
        for line in [
            "5;a = b",
            "5;a =b",
            "5;a= b",
            "5 ; a ; b = \"q\" ",
            "5;a ",
            "5;a \t;b",
            "0000000000000000000005",
            "00000000000000000000000000000000005;x",
        ] {
            let msg = format!("{line}\r\nhello\r\n0\r\n\r\n");
            for step in [1, 3, msg.len()] {
                let r = feed(BodyKind::Chunked, msg.as_bytes(), step);
                assert_eq!(
                    r,
                    Ok((b"hello".to_vec(), msg.len(), true)),
                    "{line:?} step {step}"
                );
            }
        }
        for (line, why) in [
            ("5;a b", "bad chunk extension"),
            ("5;a = b c", "bad chunk extension"),
            ("5;=b", "bad chunk extension"),
            ("1000000000000000", "chunk size too large"),
            ("0001000000000000000", "chunk size too large"),
        ] {
            let msg = format!("{line}\r\nhello\r\n0\r\n\r\n");
            assert_eq!(
                feed(BodyKind::Chunked, msg.as_bytes(), 1),
                Err(Error::BadRequest(why)),
                "{line:?}"
            );
        }
        // Fifteen significant digits are taken (the body limit then decides).
        let mut d = BodyDecoder::new(BodyKind::Chunked, &Limits::default());
        assert_eq!(d.decode(b"0fffffffffffffff\r\n"), Err(Error::BodyTooLarge));
    }

    #[test]
    fn length_body_stops_at_its_end() {
        let (b, used, done) = feed(BodyKind::Length(3), b"abcGET", 2).unwrap();
        assert_eq!((b.as_slice(), used, done), (&b"abc"[..], 3, true));
    }
}
