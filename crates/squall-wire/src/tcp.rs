//! TCP headers (RFC 9293 §3.1): the [`TcpPacket`] view over a whole segment
//! (header + options + data), [`TcpFlags`], checksum with the IPv4
//! pseudo-header, and the [`TcpRepr`] header builder.

use crate::checksum::{self, PseudoHeader};
use crate::field::{get_u16, get_u32, set_u16, set_u32};
use crate::tcp_options::{TcpOptionIter, TcpOptions, MAX_OPTIONS_LEN};
use crate::{Error, IpProtocol, Result};
use core::fmt;
use core::ops::{BitAnd, BitOr, BitOrAssign, Not};

/// The TCP control bits (9 bits: NS in byte 12, the rest in byte 13).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TcpFlags(pub u16);

impl TcpFlags {
    /// FIN
    pub const FIN: TcpFlags = TcpFlags(0x001);
    /// SYN
    pub const SYN: TcpFlags = TcpFlags(0x002);
    /// RST
    pub const RST: TcpFlags = TcpFlags(0x004);
    /// PSH
    pub const PSH: TcpFlags = TcpFlags(0x008);
    /// ACK
    pub const ACK: TcpFlags = TcpFlags(0x010);
    /// URG
    pub const URG: TcpFlags = TcpFlags(0x020);
    /// ECE
    pub const ECE: TcpFlags = TcpFlags(0x040);
    /// CWR
    pub const CWR: TcpFlags = TcpFlags(0x080);
    /// NS (RFC 3540, historic)
    pub const NS: TcpFlags = TcpFlags(0x100);
    /// No flags.
    pub const NONE: TcpFlags = TcpFlags(0);

    /// True if every bit of `other` is set in `self`.
    #[inline]
    pub const fn contains(self, other: TcpFlags) -> bool {
        self.0 & other.0 == other.0
    }

    /// True if any bit of `other` is set in `self`.
    #[inline]
    pub const fn intersects(self, other: TcpFlags) -> bool {
        self.0 & other.0 != 0
    }

    /// FIN set.
    #[inline]
    pub const fn fin(self) -> bool {
        self.contains(Self::FIN)
    }
    /// SYN set.
    #[inline]
    pub const fn syn(self) -> bool {
        self.contains(Self::SYN)
    }
    /// RST set.
    #[inline]
    pub const fn rst(self) -> bool {
        self.contains(Self::RST)
    }
    /// PSH set.
    #[inline]
    pub const fn psh(self) -> bool {
        self.contains(Self::PSH)
    }
    /// ACK set.
    #[inline]
    pub const fn ack(self) -> bool {
        self.contains(Self::ACK)
    }
    /// URG set.
    #[inline]
    pub const fn urg(self) -> bool {
        self.contains(Self::URG)
    }
}

impl BitOr for TcpFlags {
    type Output = TcpFlags;
    fn bitor(self, o: TcpFlags) -> TcpFlags {
        TcpFlags(self.0 | o.0)
    }
}

impl BitOrAssign for TcpFlags {
    fn bitor_assign(&mut self, o: TcpFlags) {
        self.0 |= o.0;
    }
}

impl BitAnd for TcpFlags {
    type Output = TcpFlags;
    fn bitand(self, o: TcpFlags) -> TcpFlags {
        TcpFlags(self.0 & o.0)
    }
}

impl Not for TcpFlags {
    type Output = TcpFlags;
    fn not(self) -> TcpFlags {
        TcpFlags(!self.0 & 0x1ff)
    }
}

impl fmt::Debug for TcpFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const NAMES: [(TcpFlags, &str); 9] = [
            (TcpFlags::SYN, "SYN"),
            (TcpFlags::FIN, "FIN"),
            (TcpFlags::RST, "RST"),
            (TcpFlags::PSH, "PSH"),
            (TcpFlags::ACK, "ACK"),
            (TcpFlags::URG, "URG"),
            (TcpFlags::ECE, "ECE"),
            (TcpFlags::CWR, "CWR"),
            (TcpFlags::NS, "NS"),
        ];
        let mut first = true;
        for (fl, name) in NAMES {
            if self.contains(fl) {
                if !first {
                    f.write_str("|")?;
                }
                f.write_str(name)?;
                first = false;
            }
        }
        if first {
            f.write_str("-")?;
        }
        Ok(())
    }
}

mod field {
    pub const SRC_PORT: usize = 0;
    pub const DST_PORT: usize = 2;
    pub const SEQ: usize = 4;
    pub const ACK: usize = 8;
    pub const OFF_FLAGS: usize = 12;
    pub const WINDOW: usize = 14;
    pub const CHECKSUM: usize = 16;
    pub const URGENT: usize = 18;
}

/// Length of a TCP header without options.
pub const TCP_HEADER_LEN: usize = 20;

/// A read/write view of a TCP segment (the IPv4 payload).
///
/// `new_checked` guarantees: buffer >= 20 bytes, data offset >= 5 and the
/// whole header (with options) is in the buffer. Everything after the header
/// is payload, so pass exactly the IPv4 payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> TcpPacket<T> {
    /// Wrap without validation (accessors may panic on short buffers).
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Self {
        TcpPacket { buffer }
    }

    /// Wrap after validating lengths (see the type docs).
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = TcpPacket { buffer };
        p.check_len()?;
        Ok(p)
    }

    /// The checks behind [`new_checked`](Self::new_checked).
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        let b = self.buffer.as_ref();
        if b.len() < TCP_HEADER_LEN {
            return Err(Error::Truncated);
        }
        let hl = self.header_len();
        if hl < TCP_HEADER_LEN {
            return Err(Error::Malformed);
        }
        if b.len() < hl {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Give back the wrapped buffer.
    #[inline]
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Source port.
    #[inline]
    pub fn src_port(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::SRC_PORT)
    }

    /// Destination port.
    #[inline]
    pub fn dst_port(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::DST_PORT)
    }

    /// Sequence number.
    #[inline]
    pub fn seq_number(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::SEQ)
    }

    /// Acknowledgment number.
    #[inline]
    pub fn ack_number(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::ACK)
    }

    /// Header length in bytes (data offset * 4), options included.
    #[inline]
    pub fn header_len(&self) -> usize {
        ((self.buffer.as_ref()[field::OFF_FLAGS] >> 4) as usize) * 4
    }

    /// Control bits.
    #[inline]
    pub fn flags(&self) -> TcpFlags {
        TcpFlags(get_u16(self.buffer.as_ref(), field::OFF_FLAGS) & 0x1ff)
    }

    /// The three reserved bits between data offset and NS.
    #[inline]
    pub fn reserved(&self) -> u8 {
        (self.buffer.as_ref()[field::OFF_FLAGS] >> 1) & 7
    }

    /// Window (unscaled).
    #[inline]
    pub fn window_len(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::WINDOW)
    }

    /// Checksum field.
    #[inline]
    pub fn checksum(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// Urgent pointer.
    #[inline]
    pub fn urgent_at(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::URGENT)
    }

    /// The raw options area (bytes 20 .. header length).
    #[inline]
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[TCP_HEADER_LEN..self.header_len()]
    }

    /// Iterate over the options without allocating.
    #[inline]
    pub fn options_iter(&self) -> TcpOptionIter<'_> {
        TcpOptionIter::new(self.options())
    }

    /// Decode the options the state machine needs (see [`TcpOptions::parse`]).
    #[inline]
    pub fn parse_options(&self) -> Result<TcpOptions> {
        TcpOptions::parse(self.options())
    }

    /// The segment data after the header.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }

    /// Length in sequence space: data + 1 for SYN + 1 for FIN.
    #[inline]
    pub fn segment_len(&self) -> usize {
        let f = self.flags();
        self.payload().len() + f.syn() as usize + f.fin() as usize
    }

    /// The checksum this segment should carry between `src` and `dst`
    /// (computed with the checksum field taken as zero).
    #[inline]
    pub fn compute_checksum<A: PseudoHeader>(&self, src: &A, dst: &A) -> u16 {
        let b = self.buffer.as_ref();
        let ph = A::pseudo_header_sum(src, dst, IpProtocol::TCP.0, b.len() as u32);
        let s = checksum::add(ph, checksum::sum(b));
        // remove the stored checksum from the sum
        !checksum::add(s, !self.checksum())
    }

    /// True if the checksum verifies between `src` and `dst`.
    #[inline]
    pub fn verify_checksum<A: PseudoHeader>(&self, src: &A, dst: &A) -> bool {
        let b = self.buffer.as_ref();
        let ph = A::pseudo_header_sum(src, dst, IpProtocol::TCP.0, b.len() as u32);
        checksum::add(ph, checksum::sum(b)) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> TcpPacket<T> {
    /// Set the source port.
    #[inline]
    pub fn set_src_port(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::SRC_PORT, v);
    }

    /// Set the destination port.
    #[inline]
    pub fn set_dst_port(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::DST_PORT, v);
    }

    /// Set the sequence number.
    #[inline]
    pub fn set_seq_number(&mut self, v: u32) {
        set_u32(self.buffer.as_mut(), field::SEQ, v);
    }

    /// Set the acknowledgment number.
    #[inline]
    pub fn set_ack_number(&mut self, v: u32) {
        set_u32(self.buffer.as_mut(), field::ACK, v);
    }

    /// Set the header length in bytes (rounded down to 4), keeping flags.
    #[inline]
    pub fn set_header_len(&mut self, len: usize) {
        let b = self.buffer.as_mut();
        b[field::OFF_FLAGS] = (((len / 4) as u8) << 4) | (b[field::OFF_FLAGS] & 0x0f);
    }

    /// Set the control bits, keeping the data offset (reserved bits cleared).
    #[inline]
    pub fn set_flags(&mut self, f: TcpFlags) {
        let b = self.buffer.as_mut();
        b[field::OFF_FLAGS] = (b[field::OFF_FLAGS] & 0xf0) | ((f.0 >> 8) as u8 & 1);
        b[field::OFF_FLAGS + 1] = f.0 as u8;
    }

    /// Set the window.
    #[inline]
    pub fn set_window_len(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::WINDOW, v);
    }

    /// Set the checksum field.
    #[inline]
    pub fn set_checksum(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::CHECKSUM, v);
    }

    /// Set the urgent pointer.
    #[inline]
    pub fn set_urgent_at(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::URGENT, v);
    }

    /// Compute and store the checksum over the whole buffer.
    #[inline]
    pub fn fill_checksum<A: PseudoHeader>(&mut self, src: &A, dst: &A) {
        self.set_checksum(0);
        let c = self.compute_checksum(src, dst);
        self.set_checksum(c);
    }

    /// Mutable options area.
    #[inline]
    pub fn options_mut(&mut self) -> &mut [u8] {
        let h = self.header_len();
        &mut self.buffer.as_mut()[TCP_HEADER_LEN..h]
    }

    /// Mutable payload.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let h = self.header_len();
        &mut self.buffer.as_mut()[h..]
    }
}

/// A high-level description of a TCP header, for emitting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TcpRepr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Sequence number.
    pub seq: u32,
    /// Acknowledgment number.
    pub ack: u32,
    /// Control bits.
    pub flags: TcpFlags,
    /// Window (already scaled down, as on the wire).
    pub window: u16,
    /// Urgent pointer.
    pub urgent: u16,
    /// Options, emitted in the canonical layout of [`TcpOptions::emit`].
    pub options: TcpOptions,
}

impl TcpRepr {
    /// Read the header of a checked packet; fails only on malformed options.
    pub fn parse<T: AsRef<[u8]>>(p: &TcpPacket<T>) -> Result<TcpRepr> {
        Ok(TcpRepr {
            src_port: p.src_port(),
            dst_port: p.dst_port(),
            seq: p.seq_number(),
            ack: p.ack_number(),
            flags: p.flags(),
            window: p.window_len(),
            urgent: p.urgent_at(),
            options: p.parse_options()?,
        })
    }

    /// Header length [`emit`](Self::emit) writes (20 + options).
    #[inline]
    pub fn header_len(&self) -> usize {
        TCP_HEADER_LEN + self.options.wire_len()
    }

    /// Write the header (checksum field zero) at the start of `buf`; returns
    /// its length. Write the payload after it, then call
    /// [`TcpPacket::fill_checksum`] on the whole segment.
    #[inline]
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let ol = self.options.wire_len();
        if ol > MAX_OPTIONS_LEN {
            return Err(Error::NoSpace);
        }
        let hl = TCP_HEADER_LEN + ol;
        let b = buf.get_mut(..hl).ok_or(Error::NoSpace)?;
        self.options.emit(&mut b[TCP_HEADER_LEN..])?;
        let mut p = TcpPacket::new_unchecked(b);
        p.set_src_port(self.src_port);
        p.set_dst_port(self.dst_port);
        p.set_seq_number(self.seq);
        p.set_ack_number(self.ack);
        p.set_header_len(hl);
        p.set_flags(self.flags);
        p.set_window_len(self.window);
        p.set_checksum(0);
        p.set_urgent_at(self.urgent);
        Ok(hl)
    }

    /// Write header and `payload` into `buf` and fill the checksum; returns
    /// the segment length.
    pub fn emit_segment<A: PseudoHeader>(
        &self,
        buf: &mut [u8],
        payload: &[u8],
        src: &A,
        dst: &A,
    ) -> Result<usize> {
        let hl = self.emit(buf)?;
        let n = hl + payload.len();
        let seg = buf.get_mut(..n).ok_or(Error::NoSpace)?;
        seg[hl..].copy_from_slice(payload);
        TcpPacket::new_unchecked(seg).fill_checksum(src, dst);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcp_options::{SackBlock, SackBlocks, TcpOption, Timestamps};
    use crate::Ipv4Address;

    const SRC: Ipv4Address = Ipv4Address::new(198, 18, 0, 1);
    const DST: Ipv4Address = Ipv4Address::new(198, 19, 0, 1);

    // A SYN laid out as Linux sends it (192.168.1.2:40000 -> 192.168.1.1:80):
    // MSS, SACK_PERM, TS, NOP, WS; checksum left zero for the test to fill.
    fn linux_syn() -> (Ipv4Address, Ipv4Address, Vec<u8>) {
        let seg = vec![
            0x9c, 0x40, 0x00, 0x50, 0x12, 0x34, 0x56, 0x78, 0x00, 0x00, 0x00, 0x00, 0xa0, 0x02,
            0xfa, 0xf0, 0x00, 0x00, 0x00, 0x00, 0x02, 0x04, 0x05, 0xb4, 0x04, 0x02, 0x08, 0x0a,
            0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x01, 0x03, 0x03, 0x07,
        ];
        (
            Ipv4Address::new(192, 168, 1, 2),
            Ipv4Address::new(192, 168, 1, 1),
            seg,
        )
    }

    #[test]
    fn parse_syn() {
        let (s, d, mut seg) = linux_syn();
        let mut p = TcpPacket::new_checked(&mut seg[..]).unwrap();
        assert_eq!(p.src_port(), 40000);
        assert_eq!(p.dst_port(), 80);
        assert_eq!(p.seq_number(), 0x1234_5678);
        assert_eq!(p.header_len(), 40);
        assert_eq!(p.flags(), TcpFlags::SYN);
        assert_eq!(p.window_len(), 64240);
        assert_eq!(p.segment_len(), 1);
        let o = p.parse_options().unwrap();
        assert_eq!(o.mss, Some(1460));
        assert_eq!(o.window_scale, Some(7));
        p.fill_checksum(&s, &d);
        assert!(p.verify_checksum(&s, &d));
        assert!(!p.verify_checksum(&d, &SRC));
        let r = TcpRepr::parse(&p).unwrap();
        let mut out = [0u8; 60];
        let n = r.emit(&mut out).unwrap();
        assert_eq!(n, 40);
        let mut q = TcpPacket::new_checked(&mut out[..n]).unwrap();
        q.fill_checksum(&s, &d);
        assert_eq!(&out[..n], &seg[..]);
    }

    #[test]
    fn checksum_against_reference() {
        let r = TcpRepr {
            src_port: 1234,
            dst_port: 80,
            seq: 1,
            ack: 2,
            flags: TcpFlags::ACK | TcpFlags::PSH,
            window: 512,
            urgent: 0,
            options: TcpOptions {
                timestamps: Some(Timestamps { tsval: 9, tsecr: 8 }),
                ..TcpOptions::NONE
            },
        };
        for plen in [0usize, 1, 2, 3, 100, 1447] {
            let payload: Vec<u8> = (0..plen).map(|i| i as u8).collect();
            let mut buf = vec![0u8; 1600];
            let n = r.emit_segment(&mut buf, &payload, &SRC, &DST).unwrap();
            let seg = &buf[..n];
            let mut ph = Vec::new();
            ph.extend_from_slice(&SRC.0);
            ph.extend_from_slice(&DST.0);
            ph.extend_from_slice(&[0, 6]);
            ph.extend_from_slice(&(n as u16).to_be_bytes());
            ph.extend_from_slice(seg);
            assert_eq!(checksum::sum_reference(&ph), 0xffff, "plen {plen}");
            let p = TcpPacket::new_checked(seg).unwrap();
            assert!(p.verify_checksum(&SRC, &DST));
            assert_eq!(p.payload(), &payload[..]);
            assert_eq!(TcpRepr::parse(&p).unwrap(), r);
        }
    }

    #[test]
    fn incremental_seq_update_keeps_checksum_valid() {
        let r = TcpRepr {
            src_port: 1,
            dst_port: 2,
            seq: 0xffff_0000,
            ack: 0,
            flags: TcpFlags::ACK,
            window: 1,
            urgent: 0,
            options: TcpOptions::NONE,
        };
        let mut buf = [0u8; 24];
        let n = r.emit_segment(&mut buf, b"data", &SRC, &DST).unwrap();
        let mut p = TcpPacket::new_checked(&mut buf[..n]).unwrap();
        let hc = p.checksum();
        p.set_seq_number(0x0001_fffe);
        p.set_checksum(checksum::update32(hc, 0xffff_0000, 0x0001_fffe));
        assert!(p.verify_checksum(&SRC, &DST));
    }

    #[test]
    fn length_checks() {
        let (_, _, seg) = linux_syn();
        for n in 0..20 {
            assert_eq!(TcpPacket::new_checked(&seg[..n]), Err(Error::Truncated));
        }
        for n in 20..40 {
            assert_eq!(TcpPacket::new_checked(&seg[..n]), Err(Error::Truncated));
        }
        let mut bad = seg.clone();
        bad[12] = 0x40;
        assert_eq!(TcpPacket::new_checked(&bad[..]), Err(Error::Malformed));
    }

    #[test]
    fn flags_roundtrip_including_ns() {
        let mut buf = [0u8; 20];
        let mut p = TcpPacket::new_unchecked(&mut buf[..]);
        p.set_header_len(20);
        for bits in 0..0x200u16 {
            p.set_flags(TcpFlags(bits));
            assert_eq!(p.flags(), TcpFlags(bits));
            assert_eq!(p.header_len(), 20);
        }
        assert_eq!(format!("{:?}", TcpFlags::SYN | TcpFlags::ACK), "SYN|ACK");
        assert!((!TcpFlags::ACK).syn());
    }

    #[test]
    fn emit_with_sack_blocks() {
        let sack = SackBlocks::from_slice(&[
            SackBlock {
                left: 10,
                right: 20,
            },
            SackBlock {
                left: 30,
                right: 40,
            },
            SackBlock {
                left: 50,
                right: 60,
            },
        ])
        .unwrap();
        let r = TcpRepr {
            src_port: 5,
            dst_port: 6,
            seq: 7,
            ack: 8,
            flags: TcpFlags::ACK,
            window: 9,
            urgent: 0,
            options: TcpOptions {
                timestamps: Some(Timestamps { tsval: 1, tsecr: 2 }),
                sack,
                ..TcpOptions::NONE
            },
        };
        let mut buf = [0u8; 64];
        let n = r.emit_segment(&mut buf, &[], &SRC, &DST).unwrap();
        assert_eq!(n, 60);
        let p = TcpPacket::new_checked(&buf[..n]).unwrap();
        let opts: Vec<_> = p.options_iter().collect::<Result<_>>().unwrap();
        assert!(opts.contains(&TcpOption::Sack(sack)));
        assert_eq!(TcpRepr::parse(&p).unwrap(), r);
        assert_eq!(r.emit(&mut buf[..59]), Err(Error::NoSpace));
    }
}
