//! The harness's own in-memory wire: two one-way queues of Ethernet frames held in
//! preallocated, reused `Vec<u8>` buffers (no allocation per frame once warm), plus a
//! smoltcp `phy::Device` view of each end.

use std::collections::VecDeque;

use smoltcp::phy::{self, DeviceCapabilities, Medium};
use smoltcp::time::Instant;

/// Largest Ethernet frame carried (1500-byte MTU + 14-byte header).
pub const MAX_FRAME: usize = 1514;

/// One direction of the wire: queued frames and a free list of buffers.
pub struct Lane {
    queue: VecDeque<Vec<u8>>,
    free: Vec<Vec<u8>>,
    limit: usize,
    /// Frames carried so far in this direction.
    pub frames: u64,
    /// Bytes carried so far in this direction (whole frames).
    pub bytes: u64,
    /// Transmit attempts refused because the queue was full.
    pub refused: u64,
}

impl Lane {
    /// A lane holding at most `limit` frames in flight, buffers preallocated.
    pub fn new(limit: usize) -> Self {
        let limit = limit.max(1);
        let prealloc = limit.min(4096);
        Lane {
            queue: VecDeque::with_capacity(limit),
            free: (0..prealloc)
                .map(|_| Vec::with_capacity(MAX_FRAME))
                .collect(),
            limit,
            frames: 0,
            bytes: 0,
            refused: 0,
        }
    }

    /// Frames waiting in the lane.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Appends a frame of `len` bytes written by `fill`; `None` if the lane is full
    /// or `len` exceeds [`MAX_FRAME`].
    pub fn push_with<R>(&mut self, len: usize, fill: impl FnOnce(&mut [u8]) -> R) -> Option<R> {
        if self.queue.len() >= self.limit || len > MAX_FRAME {
            self.refused += 1;
            return None;
        }
        let mut buf = self
            .free
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(MAX_FRAME));
        buf.clear();
        buf.resize(len, 0);
        let r = fill(&mut buf);
        self.frames += 1;
        self.bytes += len as u64;
        self.queue.push_back(buf);
        Some(r)
    }

    /// Takes the oldest frame, if any; give it back with [`Lane::recycle`].
    pub fn pop(&mut self) -> Option<Vec<u8>> {
        self.queue.pop_front()
    }

    /// Returns a buffer to the free list.
    pub fn recycle(&mut self, buf: Vec<u8>) {
        self.free.push(buf);
    }
}

/// A full-duplex wire: lane 0 carries A -> B, lane 1 carries B -> A.
pub struct Wire {
    pub lanes: [Lane; 2],
    /// Emulated checksum offload: smoltcp neither computes nor verifies checksums.
    pub offload: bool,
}

impl Wire {
    pub fn new(limit: usize) -> Self {
        Wire {
            lanes: [Lane::new(limit), Lane::new(limit)],
            offload: false,
        }
    }

    /// The device seen by end A (sends on lane 0, receives from lane 1).
    pub fn end_a(&mut self) -> End<'_> {
        let [l0, l1] = &mut self.lanes;
        End {
            tx: l0,
            rx: l1,
            offload: self.offload,
        }
    }

    /// The device seen by end B (sends on lane 1, receives from lane 0).
    pub fn end_b(&mut self) -> End<'_> {
        let [l0, l1] = &mut self.lanes;
        End {
            tx: l1,
            rx: l0,
            offload: self.offload,
        }
    }

    /// Frames carried in both directions.
    pub fn frames(&self) -> u64 {
        self.lanes[0].frames + self.lanes[1].frames
    }

    /// Frames waiting in either direction.
    pub fn pending(&self) -> usize {
        self.lanes[0].len() + self.lanes[1].len()
    }
}

/// One end of the wire as a smoltcp Ethernet device (software checksums).
pub struct End<'w> {
    tx: &'w mut Lane,
    rx: &'w mut Lane,
    offload: bool,
}

pub struct RxToken<'w> {
    buf: Vec<u8>,
    lane: &'w mut Lane,
}

pub struct TxToken<'w> {
    lane: &'w mut Lane,
}

impl phy::Device for End<'_> {
    type RxToken<'a>
        = RxToken<'a>
    where
        Self: 'a;
    type TxToken<'a>
        = TxToken<'a>
    where
        Self: 'a;

    fn receive(&mut self, _t: Instant) -> Option<(Self::RxToken<'_>, Self::TxToken<'_>)> {
        let buf = self.rx.pop()?;
        Some((RxToken { buf, lane: self.rx }, TxToken { lane: self.tx }))
    }

    fn transmit(&mut self, _t: Instant) -> Option<Self::TxToken<'_>> {
        if self.tx.len() >= self.tx.limit {
            return None;
        }
        Some(TxToken { lane: self.tx })
    }

    fn capabilities(&self) -> DeviceCapabilities {
        let mut caps = DeviceCapabilities::default();
        caps.medium = Medium::Ethernet;
        caps.max_transmission_unit = MAX_FRAME;
        caps.max_burst_size = None;
        if self.offload {
            caps.checksum = phy::ChecksumCapabilities::ignored();
        }
        caps
    }
}

impl phy::RxToken for RxToken<'_> {
    fn consume<R, F>(self, f: F) -> R
    where
        F: FnOnce(&[u8]) -> R,
    {
        let r = f(&self.buf);
        self.lane.recycle(self.buf);
        r
    }
}

impl phy::TxToken for TxToken<'_> {
    fn consume<R, F>(self, len: usize, f: F) -> R
    where
        F: FnOnce(&mut [u8]) -> R,
    {
        // `transmit` checked the limit; an oversized frame is written into a scratch
        // buffer and dropped (counted as refused) rather than panicking.
        let mut f = Some(f);
        match self
            .lane
            .push_with(len, |b| (f.take().expect("called once"))(b))
        {
            Some(r) => r,
            None => {
                let mut scratch = vec![0u8; len];
                (f.take().expect("not yet called"))(&mut scratch)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use smoltcp::phy::{Device, RxToken as _, TxToken as _};

    #[test]
    fn frames_cross_in_order_and_buffers_are_reused() {
        let mut w = Wire::new(8);
        {
            let mut a = w.end_a();
            for i in 0..3u8 {
                let t = a.transmit(Instant::ZERO).unwrap();
                t.consume(60, |b| b.fill(i));
            }
        }
        assert_eq!(w.lanes[0].len(), 3);
        let free_before = w.lanes[0].free.len();
        {
            let mut b = w.end_b();
            for i in 0..3u8 {
                let (rx, _tx) = b.receive(Instant::ZERO).unwrap();
                rx.consume(|f| {
                    assert_eq!(f.len(), 60);
                    assert!(f.iter().all(|&x| x == i));
                });
            }
            assert!(b.receive(Instant::ZERO).is_none());
        }
        assert_eq!(w.lanes[0].free.len(), free_before + 3);
        assert_eq!(w.frames(), 3);
        assert_eq!(w.pending(), 0);
    }

    #[test]
    fn full_lane_refuses_transmit() {
        let mut w = Wire::new(2);
        let mut a = w.end_a();
        for _ in 0..2 {
            a.transmit(Instant::ZERO).unwrap().consume(64, |_| ());
        }
        assert!(a.transmit(Instant::ZERO).is_none());
        assert!(w.lanes[0].push_with(64, |_| ()).is_none());
        assert_eq!(w.lanes[0].refused, 1);
    }

    #[test]
    fn oversized_frame_is_refused_not_panicking() {
        let mut w = Wire::new(4);
        assert!(w.lanes[0].push_with(MAX_FRAME + 1, |_| ()).is_none());
        let mut a = w.end_a();
        a.transmit(Instant::ZERO)
            .unwrap()
            .consume(MAX_FRAME + 10, |b| b.fill(1));
        assert_eq!(w.lanes[0].len(), 0);
    }
}
