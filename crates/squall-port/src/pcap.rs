//! pcap capture: a writer (nanosecond pcap, Ethernet link type), a total reader for tests
//! and tools, and [`Tap`], a port wrapper that records the frames it receives and sends.
//!
//! File format: the classic libpcap format with the nanosecond magic `0xa1b23c4d`
//! (version 2.4, snaplen 65535, LINKTYPE_ETHERNET), little-endian as written on this host
//! order-independently (we always write little-endian). tcpdump, tshark and scapy read it.

use crate::frame::FrameBuf;
use crate::port::{Port, PortCaps, PortStats};
use std::io::{self, Write};

/// Nanosecond-resolution pcap magic.
pub const MAGIC_NS: u32 = 0xa1b2_3c4d;
/// Microsecond-resolution pcap magic (accepted by the reader).
pub const MAGIC_US: u32 = 0xa1b2_c3d4;
/// LINKTYPE_ETHERNET.
pub const LINKTYPE_ETHERNET: u32 = 1;
/// Snap length written in the header; longer frames are truncated to it.
pub const SNAPLEN: u32 = 65_535;

/// Writes frames to a pcap stream.
pub struct PcapWriter<W: Write> {
    out: W,
    records: u64,
    errors: u64,
}

impl<W: Write> PcapWriter<W> {
    /// Writes the file header.
    pub fn new(mut out: W) -> io::Result<Self> {
        let mut h = [0u8; 24];
        h[0..4].copy_from_slice(&MAGIC_NS.to_le_bytes());
        h[4..6].copy_from_slice(&2u16.to_le_bytes());
        h[6..8].copy_from_slice(&4u16.to_le_bytes());
        // thiszone = 0, sigfigs = 0
        h[16..20].copy_from_slice(&SNAPLEN.to_le_bytes());
        h[20..24].copy_from_slice(&LINKTYPE_ETHERNET.to_le_bytes());
        out.write_all(&h)?;
        Ok(PcapWriter {
            out,
            records: 0,
            errors: 0,
        })
    }

    /// Appends one frame captured at `ts_ns` (ns since the Unix epoch, or any epoch the
    /// caller chooses, e.g. a virtual clock's zero).
    pub fn write(&mut self, ts_ns: u64, frame: &[u8]) -> io::Result<()> {
        let incl = frame.len().min(SNAPLEN as usize);
        let mut h = [0u8; 16];
        h[0..4].copy_from_slice(&((ts_ns / 1_000_000_000) as u32).to_le_bytes());
        h[4..8].copy_from_slice(&((ts_ns % 1_000_000_000) as u32).to_le_bytes());
        h[8..12].copy_from_slice(&(incl as u32).to_le_bytes());
        h[12..16].copy_from_slice(&(frame.len().min(u32::MAX as usize) as u32).to_le_bytes());
        self.out.write_all(&h)?;
        self.out.write_all(&frame[..incl])?;
        self.records += 1;
        Ok(())
    }

    /// Like [`write`](Self::write) but counts an I/O error instead of returning it.
    pub fn record(&mut self, ts_ns: u64, frame: &[u8]) {
        if self.write(ts_ns, frame).is_err() {
            self.errors += 1;
        }
    }

    /// Records written.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Write errors counted by [`record`](Self::record).
    pub fn errors(&self) -> u64 {
        self.errors
    }

    /// Flushes the underlying stream.
    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    /// Flushes and returns the stream.
    pub fn into_inner(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

/// One record read back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PcapRecord {
    /// Timestamp in ns.
    pub ts_ns: u64,
    /// Original frame length.
    pub orig_len: u32,
    /// Captured bytes.
    pub data: Vec<u8>,
}

/// Why a pcap could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PcapError {
    /// Shorter than the 24-byte header.
    Truncated,
    /// Not a pcap magic number.
    BadMagic(u32),
    /// A record header or body runs past the end (offset of the record).
    BadRecord(usize),
}

impl core::fmt::Display for PcapError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            PcapError::Truncated => f.write_str("pcap: truncated header"),
            PcapError::BadMagic(m) => write!(f, "pcap: bad magic {m:#010x}"),
            PcapError::BadRecord(o) => write!(f, "pcap: bad record at offset {o}"),
        }
    }
}

impl std::error::Error for PcapError {}

/// Parses a whole pcap file (either byte order, us or ns resolution). Total: any input
/// gives records or an error.
pub fn read_pcap(bytes: &[u8]) -> Result<(u32, Vec<PcapRecord>), PcapError> {
    let hdr = bytes.get(..24).ok_or(PcapError::Truncated)?;
    let magic_le = u32::from_le_bytes([hdr[0], hdr[1], hdr[2], hdr[3]]);
    let (swap, nanos) = match magic_le {
        MAGIC_NS => (false, true),
        MAGIC_US => (false, false),
        m if m.swap_bytes() == MAGIC_NS => (true, true),
        m if m.swap_bytes() == MAGIC_US => (true, false),
        m => return Err(PcapError::BadMagic(m)),
    };
    let rd = |b: &[u8], at: usize| -> u32 {
        let v = u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
        if swap {
            v.swap_bytes()
        } else {
            v
        }
    };
    let linktype = rd(hdr, 20);
    let mut recs = Vec::new();
    let mut at = 24;
    while at < bytes.len() {
        let h = bytes.get(at..at + 16).ok_or(PcapError::BadRecord(at))?;
        let sec = rd(h, 0) as u64;
        let frac = rd(h, 4) as u64;
        let incl = rd(h, 8) as usize;
        let orig = rd(h, 12);
        let body = bytes
            .get(at + 16..(at + 16).saturating_add(incl))
            .ok_or(PcapError::BadRecord(at))?;
        recs.push(PcapRecord {
            ts_ns: sec * 1_000_000_000 + if nanos { frac } else { frac * 1000 },
            orig_len: orig,
            data: body.to_vec(),
        });
        at += 16 + incl;
    }
    Ok((linktype, recs))
}

/// A port wrapper that records received and/or sent frames to pcap writers, stamped with
/// the time given to `set_time`. Wrap either end of a mem wire (or any port) to capture
/// that side.
///
/// Sent frames are recorded when `tx_burst` accepts them. (The wrapper records the burst
/// before handing it over and remembers how many leading frames it already recorded, so a
/// frame left for retry is not recorded twice as long as the caller keeps the unsent
/// frames at the front of the `Vec`, as the `Port` contract has them.)
pub struct Tap<P: Port, W: Write> {
    inner: P,
    rx: Option<PcapWriter<W>>,
    tx: Option<PcapWriter<W>>,
    now: u64,
    recorded_pending: usize,
    /// Tx records go to the rx writer (one file for both directions).
    both: bool,
}

impl<P: Port, W: Write> Tap<P, W> {
    /// Wraps `inner`; `rx` records what it receives, `tx` what it sends (see [`Tap::both`]
    /// for one file with both directions). Tx frames are recorded as handed to the port,
    /// i.e. before any impairment of the mem wire; record the receiving side to see
    /// what crossed the wire.
    pub fn new(inner: P, rx: Option<PcapWriter<W>>, tx: Option<PcapWriter<W>>) -> Self {
        Tap {
            inner,
            rx,
            tx,
            now: 0,
            recorded_pending: 0,
            both: false,
        }
    }

    /// The wrapped port.
    pub fn inner(&self) -> &P {
        &self.inner
    }

    /// The wrapped port, mutable.
    pub fn inner_mut(&mut self) -> &mut P {
        &mut self.inner
    }

    /// Unwraps into the port and the two writers.
    pub fn into_parts(self) -> (P, Option<PcapWriter<W>>, Option<PcapWriter<W>>) {
        (self.inner, self.rx, self.tx)
    }
}

impl<P: Port, W: Write> Tap<P, W> {
    /// One writer recording both directions in order (rx as received, tx as sent).
    pub fn both(inner: P, w: PcapWriter<W>) -> Self {
        Tap {
            inner,
            rx: Some(w),
            tx: None,
            now: 0,
            recorded_pending: 0,
            both: true,
        }
    }

    fn tx_writer(&mut self) -> Option<&mut PcapWriter<W>> {
        // With `both`, tx records go to the single (rx) writer.
        if self.both {
            self.rx.as_mut()
        } else {
            self.tx.as_mut()
        }
    }
}

impl<P: Port, W: Write> Port for Tap<P, W> {
    type Frame = P::Frame;

    fn rx_burst(&mut self, out: &mut Vec<P::Frame>, max: usize) -> usize {
        let start = out.len();
        let n = self.inner.rx_burst(out, max);
        if let Some(w) = self.rx.as_mut() {
            for f in &out[start..] {
                w.record(self.now, f.data());
            }
        }
        n
    }

    fn alloc_tx(&mut self, out: &mut Vec<P::Frame>, n: usize) -> usize {
        self.inner.alloc_tx(out, n)
    }

    fn tx_burst(&mut self, frames: &mut Vec<P::Frame>) -> usize {
        let now = self.now;
        let skip = self.recorded_pending.min(frames.len());
        if let Some(w) = self.tx_writer() {
            for f in &frames[skip..] {
                w.record(now, f.data());
            }
        }
        let sent = self.inner.tx_burst(frames);
        // What the port kept (a full ring) was recorded and goes again; what it refused
        // is gone from the vector, so count what is left, not what was not sent.
        self.recorded_pending = frames.len();
        sent
    }

    fn release(&mut self, frame: P::Frame) {
        self.inner.release(frame)
    }

    fn release_all(&mut self, frames: &mut Vec<P::Frame>) {
        self.inner.release_all(frames)
    }

    fn caps(&self) -> PortCaps {
        self.inner.caps()
    }

    fn stats(&self) -> PortStats {
        self.inner.stats()
    }

    fn set_time(&mut self, now_ns: u64) {
        self.now = now_ns;
        self.inner.set_time(now_ns)
    }

    fn next_event_ns(&self) -> Option<u64> {
        self.inner.next_event_ns()
    }

    fn bind_thread(&mut self) -> Result<(), String> {
        self.inner.bind_thread()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem::{pair, MemConfig};

    #[test]
    fn header_and_records_round_trip() {
        let mut w = PcapWriter::new(Vec::new()).unwrap();
        w.write(1_500_000_123, &[1, 2, 3]).unwrap();
        w.write(2_000_000_000, &[9; 70]).unwrap();
        let bytes = w.into_inner().unwrap();
        assert_eq!(&bytes[0..4], &[0x4d, 0x3c, 0xb2, 0xa1]);
        assert_eq!(bytes.len(), 24 + 16 + 3 + 16 + 70);
        let (lt, recs) = read_pcap(&bytes).unwrap();
        assert_eq!(lt, 1);
        assert_eq!(recs.len(), 2);
        assert_eq!(recs[0].ts_ns, 1_500_000_123);
        assert_eq!(recs[0].data, vec![1, 2, 3]);
        assert_eq!(recs[1].orig_len, 70);
    }

    #[test]
    fn reader_is_total() {
        assert_eq!(read_pcap(&[1, 2]), Err(PcapError::Truncated));
        assert!(matches!(read_pcap(&[0; 24]), Err(PcapError::BadMagic(0))));
        let mut w = PcapWriter::new(Vec::new()).unwrap();
        w.write(0, &[1; 10]).unwrap();
        let bytes = w.into_inner().unwrap();
        for cut in 0..bytes.len() {
            let _ = read_pcap(&bytes[..cut]);
        }
        assert_eq!(read_pcap(&bytes[..30]), Err(PcapError::BadRecord(24)));
        // Big-endian microsecond files are read too.
        let mut be = vec![0xa1, 0xb2, 0xc3, 0xd4, 0, 2, 0, 4];
        be.extend_from_slice(&[0; 8]);
        be.extend_from_slice(&65535u32.to_be_bytes());
        be.extend_from_slice(&1u32.to_be_bytes());
        be.extend_from_slice(&3u32.to_be_bytes()); // sec
        be.extend_from_slice(&7u32.to_be_bytes()); // usec
        be.extend_from_slice(&1u32.to_be_bytes());
        be.extend_from_slice(&1u32.to_be_bytes());
        be.push(0xee);
        let (_, recs) = read_pcap(&be).unwrap();
        assert_eq!(recs[0].ts_ns, 3_000_007_000);
        assert_eq!(recs[0].data, vec![0xee]);
    }

    #[test]
    fn tap_records_each_side_once() {
        let cfg = MemConfig {
            frames: 64,
            ring_size: 4,
            ..MemConfig::default()
        };
        let (a, b) = pair(cfg).unwrap();
        let wa = PcapWriter::new(Vec::new()).unwrap();
        let mut a = Tap::both(a, wa);
        let wb = PcapWriter::new(Vec::new()).unwrap();
        let mut b = Tap::new(b, Some(wb), None::<PcapWriter<Vec<u8>>>);
        a.set_time(5_000);
        let mut v = Vec::new();
        a.alloc_tx(&mut v, 6);
        for (i, f) in v.iter_mut().enumerate() {
            f.fill(&[i as u8; 60]).unwrap();
        }
        assert_eq!(a.tx_burst(&mut v), 4); // ring of 4: 2 stay for retry
        let mut r = Vec::new();
        b.rx_burst(&mut r, 64);
        b.release_all(&mut r);
        a.set_time(6_000);
        assert_eq!(a.tx_burst(&mut v), 2);
        b.rx_burst(&mut r, 64);
        // Echo one back so A records an rx too.
        let back = r.split_off(1);
        b.release_all(&mut r);
        let mut back = back;
        // b's tap records rx only (no tx writer): its tx is not recorded.
        b.tx_burst(&mut back);
        a.rx_burst(&mut r, 64);
        a.release_all(&mut r);
        let (_, wa, _) = a.into_parts();
        let (_, wb, _) = b.into_parts();
        let (_, ra) = read_pcap(&wa.unwrap().into_inner().unwrap()).unwrap();
        let (_, rb) = read_pcap(&wb.unwrap().into_inner().unwrap()).unwrap();
        // A: 6 sent (each once, despite the retry) + 1 received.
        assert_eq!(ra.len(), 7);
        let firsts: Vec<u8> = ra.iter().map(|r| r.data[0]).collect();
        assert_eq!(firsts, vec![0, 1, 2, 3, 4, 5, 5]);
        assert_eq!(ra[4].ts_ns, 5_000);
        assert_eq!(rb.len(), 6);
    }

    /// A port that refuses (drops, without sending) the first frame of every burst, as
    /// the kernel ports do with frames it rejects.
    struct Refusing(crate::mem::MemPort);

    impl Port for Refusing {
        type Frame = <crate::mem::MemPort as Port>::Frame;
        fn rx_burst(&mut self, out: &mut Vec<Self::Frame>, max: usize) -> usize {
            self.0.rx_burst(out, max)
        }
        fn alloc_tx(&mut self, out: &mut Vec<Self::Frame>, n: usize) -> usize {
            self.0.alloc_tx(out, n)
        }
        fn tx_burst(&mut self, frames: &mut Vec<Self::Frame>) -> usize {
            if !frames.is_empty() {
                let f = frames.remove(0);
                self.0.release(f);
            }
            self.0.tx_burst(frames)
        }
        fn release(&mut self, frame: Self::Frame) {
            self.0.release(frame)
        }
        fn caps(&self) -> PortCaps {
            self.0.caps()
        }
        fn stats(&self) -> PortStats {
            self.0.stats()
        }
    }

    /// Frames a port refuses leave the burst: the frames the caller adds next are still
    /// recorded (each once).
    #[test]
    fn tap_records_frames_after_refused_ones() {
        let cfg = MemConfig {
            frames: 64,
            ring_size: 4,
            ..MemConfig::default()
        };
        let (a, _b) = pair(cfg).unwrap();
        let mut a = Tap::both(Refusing(a), PcapWriter::new(Vec::new()).unwrap());
        let mut v = Vec::new();
        for round in 0..3u8 {
            a.alloc_tx(&mut v, 2);
            let n = v.len();
            for (k, f) in v.iter_mut().enumerate().skip(n - 2) {
                f.fill(&[round * 10 + k as u8; 60]).unwrap();
            }
            a.tx_burst(&mut v);
            assert!(v.is_empty(), "{round}");
        }
        let (_, w, _) = a.into_parts();
        let (_, r) = read_pcap(&w.unwrap().into_inner().unwrap()).unwrap();
        let firsts: Vec<u8> = r.iter().map(|r| r.data[0]).collect();
        assert_eq!(firsts, vec![0, 1, 10, 11, 20, 21]);
    }
}
