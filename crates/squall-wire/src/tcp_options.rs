//! TCP options (RFC 9293 §3.1, RFC 7323, RFC 2018): the [`TcpOption`] enum,
//! a non-allocating [`TcpOptionIter`], a raw [`TcpOptionWriter`] and the
//! [`TcpOptions`] summary that the TCP state machine consumes and emits.
//!
//! Malformed lists never panic. Framing errors (a length byte < 2, an option
//! running past the end) yield `Err(Error::Malformed)` and end iteration.
//! A known kind with the wrong length (e.g. MSS of length 5) is still
//! skippable, so the iterator yields `Err(Error::Malformed)` for it and goes
//! on; [`TcpOptions::parse`] ignores such an option, as Linux does. Unknown
//! kinds are skipped by their length (RFC 9293 MUST-6/MUST-68).

use crate::{Error, Result};

/// Option kinds.
pub mod kind {
    /// End of option list.
    pub const EOL: u8 = 0;
    /// No-operation (padding).
    pub const NOP: u8 = 1;
    /// Maximum segment size.
    pub const MSS: u8 = 2;
    /// Window scale.
    pub const WINDOW_SCALE: u8 = 3;
    /// SACK permitted.
    pub const SACK_PERMITTED: u8 = 4;
    /// SACK blocks.
    pub const SACK: u8 = 5;
    /// Timestamps.
    pub const TIMESTAMPS: u8 = 8;
}

/// Longest option area (data offset 15 -> 60-byte header).
pub const MAX_OPTIONS_LEN: usize = 40;
/// Most SACK blocks one option can carry.
pub const MAX_SACK_BLOCKS: usize = 4;

/// One SACK block: the sequence numbers `[left, right)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SackBlock {
    /// First sequence number of the block.
    pub left: u32,
    /// Sequence number just after the block.
    pub right: u32,
}

/// Up to four SACK blocks, stored inline (no allocation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SackBlocks {
    len: u8,
    blocks: [SackBlock; MAX_SACK_BLOCKS],
}

impl SackBlocks {
    /// No blocks.
    pub const fn new() -> SackBlocks {
        SackBlocks {
            len: 0,
            blocks: [SackBlock { left: 0, right: 0 }; MAX_SACK_BLOCKS],
        }
    }

    /// From a slice of at most four blocks.
    pub fn from_slice(b: &[SackBlock]) -> Result<SackBlocks> {
        let mut s = SackBlocks::new();
        for &x in b {
            s.push(x)?;
        }
        Ok(s)
    }

    /// Append a block; [`Error::NoSpace`] if four are already held.
    pub fn push(&mut self, b: SackBlock) -> Result<()> {
        let slot = self
            .blocks
            .get_mut(self.len as usize)
            .ok_or(Error::NoSpace)?;
        *slot = b;
        self.len += 1;
        Ok(())
    }

    /// The blocks held.
    #[inline]
    pub fn as_slice(&self) -> &[SackBlock] {
        &self.blocks[..self.len as usize]
    }

    /// Number of blocks.
    #[inline]
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// True if there are no blocks.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Remove all blocks.
    #[inline]
    pub fn clear(&mut self) {
        self.len = 0;
    }
}

/// One decoded TCP option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcpOption<'a> {
    /// Kind 0: end of the option list (the rest is padding).
    EndOfList,
    /// Kind 1: no-operation.
    Nop,
    /// Kind 2: maximum segment size.
    Mss(u16),
    /// Kind 3: window scale shift count (raw; RFC 7323 says clamp to 14).
    WindowScale(u8),
    /// Kind 4: SACK permitted.
    SackPermitted,
    /// Kind 5: one to four SACK blocks.
    Sack(SackBlocks),
    /// Kind 8: timestamps.
    Timestamps {
        /// TSval.
        tsval: u32,
        /// TSecr.
        tsecr: u32,
    },
    /// Any other kind, with its data (length byte excluded).
    Unknown {
        /// The option kind.
        kind: u8,
        /// The option data after the kind and length bytes.
        data: &'a [u8],
    },
}

impl TcpOption<'_> {
    /// Bytes this option takes on the wire.
    pub fn wire_len(&self) -> usize {
        match self {
            TcpOption::EndOfList | TcpOption::Nop => 1,
            TcpOption::Mss(_) => 4,
            TcpOption::WindowScale(_) => 3,
            TcpOption::SackPermitted => 2,
            TcpOption::Sack(b) => 2 + 8 * b.len(),
            TcpOption::Timestamps { .. } => 10,
            TcpOption::Unknown { data, .. } => 2 + data.len(),
        }
    }

    /// Write this option at the start of `buf`; returns its length.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let n = self.wire_len();
        let b = buf.get_mut(..n).ok_or(Error::NoSpace)?;
        match *self {
            TcpOption::EndOfList => b[0] = kind::EOL,
            TcpOption::Nop => b[0] = kind::NOP,
            TcpOption::Mss(m) => {
                b[0] = kind::MSS;
                b[1] = 4;
                b[2..4].copy_from_slice(&m.to_be_bytes());
            }
            TcpOption::WindowScale(s) => {
                b[0] = kind::WINDOW_SCALE;
                b[1] = 3;
                b[2] = s;
            }
            TcpOption::SackPermitted => {
                b[0] = kind::SACK_PERMITTED;
                b[1] = 2;
            }
            TcpOption::Sack(ref blocks) => {
                if blocks.is_empty() {
                    return Err(Error::Malformed);
                }
                b[0] = kind::SACK;
                b[1] = n as u8;
                for (i, blk) in blocks.as_slice().iter().enumerate() {
                    let at = 2 + 8 * i;
                    b[at..at + 4].copy_from_slice(&blk.left.to_be_bytes());
                    b[at + 4..at + 8].copy_from_slice(&blk.right.to_be_bytes());
                }
            }
            TcpOption::Timestamps { tsval, tsecr } => {
                b[0] = kind::TIMESTAMPS;
                b[1] = 10;
                b[2..6].copy_from_slice(&tsval.to_be_bytes());
                b[6..10].copy_from_slice(&tsecr.to_be_bytes());
            }
            TcpOption::Unknown { kind: k, data } => {
                if n > MAX_OPTIONS_LEN || k == kind::EOL || k == kind::NOP {
                    return Err(Error::Malformed);
                }
                b[0] = k;
                b[1] = n as u8;
                b[2..].copy_from_slice(data);
            }
        }
        Ok(n)
    }
}

#[inline]
fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

/// Decode the body of a length-framed option. `body` excludes kind and length.
#[inline]
fn decode(k: u8, body: &[u8]) -> Result<TcpOption<'_>> {
    match k {
        kind::MSS => match body {
            [a, b] => Ok(TcpOption::Mss(u16::from_be_bytes([*a, *b]))),
            _ => Err(Error::Malformed),
        },
        kind::WINDOW_SCALE => match body {
            [s] => Ok(TcpOption::WindowScale(*s)),
            _ => Err(Error::Malformed),
        },
        kind::SACK_PERMITTED => {
            if body.is_empty() {
                Ok(TcpOption::SackPermitted)
            } else {
                Err(Error::Malformed)
            }
        }
        kind::SACK => {
            if body.is_empty() || body.len() & 7 != 0 || body.len() > 8 * MAX_SACK_BLOCKS {
                return Err(Error::Malformed);
            }
            let mut s = SackBlocks::new();
            for c in body.chunks_exact(8) {
                s.push(SackBlock {
                    left: be32(&c[..4]),
                    right: be32(&c[4..]),
                })?;
            }
            Ok(TcpOption::Sack(s))
        }
        kind::TIMESTAMPS => {
            if body.len() != 8 {
                return Err(Error::Malformed);
            }
            Ok(TcpOption::Timestamps {
                tsval: be32(&body[..4]),
                tsecr: be32(&body[4..]),
            })
        }
        _ => Ok(TcpOption::Unknown {
            kind: k,
            data: body,
        }),
    }
}

/// Iterator over the options area of a TCP header. Yields
/// `Result<TcpOption>`; see the module docs for error behaviour.
#[derive(Debug, Clone)]
pub struct TcpOptionIter<'a> {
    data: &'a [u8],
}

impl<'a> TcpOptionIter<'a> {
    /// Iterate over a raw options area (the bytes after the fixed header).
    #[inline]
    pub fn new(data: &'a [u8]) -> Self {
        TcpOptionIter { data }
    }
}

impl<'a> Iterator for TcpOptionIter<'a> {
    type Item = Result<TcpOption<'a>>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let d = self.data;
        let (&k, rest) = d.split_first()?;
        match k {
            kind::EOL => {
                self.data = &[];
                Some(Ok(TcpOption::EndOfList))
            }
            kind::NOP => {
                self.data = rest;
                Some(Ok(TcpOption::Nop))
            }
            _ => {
                let len = match rest.first() {
                    Some(&l) if l >= 2 && l as usize <= d.len() => l as usize,
                    _ => {
                        self.data = &[];
                        return Some(Err(Error::Malformed));
                    }
                };
                self.data = &d[len..];
                Some(decode(k, &d[2..len]))
            }
        }
    }
}

/// Writes a chosen sequence of options into a buffer, then pads to a
/// multiple of 4 bytes with EOL/zero bytes. No alignment NOPs are inserted:
/// push [`TcpOption::Nop`] yourself, or use [`TcpOptions::emit`].
#[derive(Debug)]
pub struct TcpOptionWriter<'a> {
    buf: &'a mut [u8],
    len: usize,
}

impl<'a> TcpOptionWriter<'a> {
    /// Write into `buf` (at most 40 bytes of it are used).
    pub fn new(buf: &'a mut [u8]) -> Self {
        let cap = buf.len().min(MAX_OPTIONS_LEN);
        TcpOptionWriter {
            buf: &mut buf[..cap],
            len: 0,
        }
    }

    /// Append one option.
    pub fn push(&mut self, opt: &TcpOption<'_>) -> Result<()> {
        let n = opt.emit(&mut self.buf[self.len..])?;
        self.len += n;
        Ok(())
    }

    /// Bytes written so far (unpadded).
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if nothing has been written.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Pad with zeros to a multiple of 4; returns the padded length.
    pub fn finish(self) -> Result<usize> {
        let padded = self.len.div_ceil(4) * 4;
        let pad = self.buf.get_mut(self.len..padded).ok_or(Error::NoSpace)?;
        pad.fill(0);
        Ok(padded)
    }
}

/// TCP timestamps option values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Timestamps {
    /// TSval.
    pub tsval: u32,
    /// TSecr.
    pub tsecr: u32,
}

/// The options a TCP implementation acts on, decoded in one pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TcpOptions {
    /// MSS option.
    pub mss: Option<u16>,
    /// Window scale shift (raw value as received or to send).
    pub window_scale: Option<u8>,
    /// SACK-permitted option present.
    pub sack_permitted: bool,
    /// Timestamps option.
    pub timestamps: Option<Timestamps>,
    /// SACK blocks (empty = no SACK option).
    pub sack: SackBlocks,
}

impl TcpOptions {
    /// No options.
    pub const NONE: TcpOptions = TcpOptions {
        mss: None,
        window_scale: None,
        sack_permitted: false,
        timestamps: None,
        sack: SackBlocks::new(),
    };

    /// Decode an options area. Framing errors give [`Error::Malformed`];
    /// known kinds with a wrong length and unknown kinds are ignored. If an
    /// option appears twice, the last one wins.
    pub fn parse(data: &[u8]) -> Result<TcpOptions> {
        let mut o = TcpOptions::NONE;
        let mut d = data;
        while let Some((&k, rest)) = d.split_first() {
            match k {
                kind::EOL => break,
                kind::NOP => d = rest,
                _ => {
                    let len = match rest.first() {
                        Some(&l) if l >= 2 && l as usize <= d.len() => l as usize,
                        _ => return Err(Error::Malformed),
                    };
                    match decode(k, &d[2..len]) {
                        Ok(TcpOption::Mss(m)) => o.mss = Some(m),
                        Ok(TcpOption::WindowScale(s)) => o.window_scale = Some(s),
                        Ok(TcpOption::SackPermitted) => o.sack_permitted = true,
                        Ok(TcpOption::Timestamps { tsval, tsecr }) => {
                            o.timestamps = Some(Timestamps { tsval, tsecr })
                        }
                        Ok(TcpOption::Sack(s)) => o.sack = s,
                        _ => {}
                    }
                    d = &d[len..];
                }
            }
        }
        Ok(o)
    }

    /// Bytes [`emit`](Self::emit) writes (always a multiple of 4).
    pub fn wire_len(&self) -> usize {
        let mut n = 0;
        if self.mss.is_some() {
            n += 4;
        }
        if self.timestamps.is_some() {
            n += 12;
        } else if self.sack_permitted {
            n += 4;
        }
        if self.window_scale.is_some() {
            n += 4;
        }
        if !self.sack.is_empty() {
            n += 4 + 8 * self.sack.len();
        }
        n
    }

    /// Emit in the canonical aligned layout used by Linux: MSS; SACK-permitted
    /// and/or timestamps (`4,2,8,10,..` or `1,1,8,10,..` or `1,1,4,2`); NOP +
    /// window scale; NOP NOP + SACK blocks. Returns the length (multiple of
    /// 4), or [`Error::NoSpace`] if more than 40 bytes would be needed or
    /// `buf` is too small.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let n = self.wire_len();
        if n > MAX_OPTIONS_LEN {
            return Err(Error::NoSpace);
        }
        let b = buf.get_mut(..n).ok_or(Error::NoSpace)?;
        let mut at = 0;
        if let Some(m) = self.mss {
            at += TcpOption::Mss(m).emit(&mut b[at..])?;
        }
        match (self.sack_permitted, self.timestamps) {
            (sp, Some(ts)) => {
                if sp {
                    at += TcpOption::SackPermitted.emit(&mut b[at..])?;
                } else {
                    b[at..at + 2].copy_from_slice(&[kind::NOP, kind::NOP]);
                    at += 2;
                }
                at += TcpOption::Timestamps {
                    tsval: ts.tsval,
                    tsecr: ts.tsecr,
                }
                .emit(&mut b[at..])?;
            }
            (true, None) => {
                b[at..at + 2].copy_from_slice(&[kind::NOP, kind::NOP]);
                at += 2;
                at += TcpOption::SackPermitted.emit(&mut b[at..])?;
            }
            (false, None) => {}
        }
        if let Some(s) = self.window_scale {
            b[at] = kind::NOP;
            at += 1;
            at += TcpOption::WindowScale(s).emit(&mut b[at..])?;
        }
        if !self.sack.is_empty() {
            b[at..at + 2].copy_from_slice(&[kind::NOP, kind::NOP]);
            at += 2;
            at += TcpOption::Sack(self.sack).emit(&mut b[at..])?;
        }
        debug_assert_eq!(at, n);
        Ok(at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(d: &[u8]) -> Vec<Result<TcpOption<'_>>> {
        TcpOptionIter::new(d).collect()
    }

    #[test]
    fn linux_syn_options() {
        // MSS 1460, SACK_PERM, TS, NOP, WS 7 (a Linux SYN).
        let d = [
            2, 4, 0x05, 0xb4, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0, 1, 3, 3, 7,
        ];
        let v = collect(&d);
        assert_eq!(
            v,
            vec![
                Ok(TcpOption::Mss(1460)),
                Ok(TcpOption::SackPermitted),
                Ok(TcpOption::Timestamps { tsval: 1, tsecr: 0 }),
                Ok(TcpOption::Nop),
                Ok(TcpOption::WindowScale(7)),
            ]
        );
        let o = TcpOptions::parse(&d).unwrap();
        assert_eq!(o.mss, Some(1460));
        assert_eq!(o.window_scale, Some(7));
        assert!(o.sack_permitted);
        assert_eq!(o.timestamps, Some(Timestamps { tsval: 1, tsecr: 0 }));
        // canonical emit reproduces exactly these bytes
        let mut out = [0u8; 40];
        let n = o.emit(&mut out).unwrap();
        assert_eq!(&out[..n], &d);
    }

    #[test]
    fn sack_blocks_1_to_4() {
        for nblk in 1..=4usize {
            let mut s = SackBlocks::new();
            for i in 0..nblk as u32 {
                s.push(SackBlock {
                    left: 1000 * i,
                    right: 1000 * i + 500,
                })
                .unwrap();
            }
            let o = TcpOptions {
                sack: s,
                ..TcpOptions::NONE
            };
            let mut out = [0u8; 40];
            let n = o.emit(&mut out).unwrap();
            assert_eq!(n, 4 + 8 * nblk);
            assert_eq!(TcpOptions::parse(&out[..n]).unwrap().sack, s);
            let v = collect(&out[..n]);
            assert_eq!(v.last().unwrap(), &Ok(TcpOption::Sack(s)));
        }
        let mut s = SackBlocks::from_slice(&[SackBlock::default(); 4]).unwrap();
        assert_eq!(s.push(SackBlock::default()), Err(Error::NoSpace));
        s.clear();
        assert!(s.is_empty());
    }

    #[test]
    fn too_many_options_is_no_space() {
        let o = TcpOptions {
            timestamps: Some(Timestamps::default()),
            sack: SackBlocks::from_slice(&[SackBlock::default(); 4]).unwrap(),
            ..TcpOptions::NONE
        };
        assert_eq!(o.wire_len(), 12 + 36);
        assert_eq!(o.emit(&mut [0u8; 60]), Err(Error::NoSpace));
    }

    #[test]
    fn unknown_options_skipped() {
        // kind 30 (MPTCP) length 4, then MSS.
        let d = [30, 4, 0xaa, 0xbb, 2, 4, 0x02, 0x18];
        let v = collect(&d);
        assert_eq!(
            v[0],
            Ok(TcpOption::Unknown {
                kind: 30,
                data: &[0xaa, 0xbb]
            })
        );
        assert_eq!(v[1], Ok(TcpOption::Mss(536)));
        assert_eq!(TcpOptions::parse(&d).unwrap().mss, Some(536));
    }

    #[test]
    fn eol_stops() {
        let d = [1, 0, 2, 4, 5, 0xb4];
        assert_eq!(
            collect(&d),
            vec![Ok(TcpOption::Nop), Ok(TcpOption::EndOfList)]
        );
        assert_eq!(TcpOptions::parse(&d).unwrap(), TcpOptions::NONE);
    }

    #[test]
    fn malformed_framing() {
        for d in [
            &[2u8][..],
            &[2, 0],
            &[2, 1],
            &[2, 5, 0, 0],
            &[30, 4, 0],
            &[8],
        ] {
            let v = collect(d);
            assert_eq!(v.last().unwrap(), &Err(Error::Malformed), "{d:?}");
            assert_eq!(TcpOptions::parse(d), Err(Error::Malformed), "{d:?}");
        }
    }

    #[test]
    fn wrong_length_known_kind_skipped() {
        // MSS with length 5 then WS 3: iterator flags MSS, keeps going.
        let d = [2, 5, 1, 2, 3, 3, 3, 3];
        let v = collect(&d);
        assert_eq!(
            v,
            vec![Err(Error::Malformed), Ok(TcpOption::WindowScale(3))]
        );
        let o = TcpOptions::parse(&d).unwrap();
        assert_eq!((o.mss, o.window_scale), (None, Some(3)));
        // SACK with 12 bytes of body: not a multiple of 8.
        let d = [5, 14, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(collect(&d), vec![Err(Error::Malformed)]);
    }

    #[test]
    fn writer_pads_to_4() {
        let mut buf = [0xffu8; 40];
        let mut w = TcpOptionWriter::new(&mut buf);
        w.push(&TcpOption::Mss(1460)).unwrap();
        w.push(&TcpOption::WindowScale(14)).unwrap();
        w.push(&TcpOption::Unknown {
            kind: 254,
            data: &[1, 2],
        })
        .unwrap();
        assert_eq!(w.len(), 11);
        let n = w.finish().unwrap();
        assert_eq!(n, 12);
        assert_eq!(buf[11], 0);
        let v: Vec<_> = TcpOptionIter::new(&buf[..n]).collect();
        assert_eq!(v.len(), 4);
        assert_eq!(v[3], Ok(TcpOption::EndOfList));
        // overflow
        let mut buf = [0u8; 40];
        let mut w = TcpOptionWriter::new(&mut buf);
        for _ in 0..4 {
            w.push(&TcpOption::Timestamps { tsval: 0, tsecr: 0 })
                .unwrap();
        }
        assert_eq!(
            w.push(&TcpOption::Timestamps { tsval: 0, tsecr: 0 }),
            Err(Error::NoSpace)
        );
        assert_eq!(w.finish(), Ok(40));
        let mut small = [0u8; 3];
        let mut w = TcpOptionWriter::new(&mut small);
        w.push(&TcpOption::Nop).unwrap();
        assert_eq!(w.finish(), Err(Error::NoSpace));
    }
}
