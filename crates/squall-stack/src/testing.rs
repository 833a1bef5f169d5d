//! Test helpers of the crate's unit tests: a transmit sink that keeps the frames written.

use squall_tcp::TxSink;

/// Frames written to a Vec; `room`: how many it takes at most (none: any number).
#[derive(Default)]
pub(crate) struct Frames {
    pub cur: Vec<u8>,
    pub out: Vec<Vec<u8>>,
    pub room: Option<usize>,
}

impl TxSink for Frames {
    fn alloc(&mut self, len: usize) -> Option<&mut [u8]> {
        self.cur.resize(len, 0);
        Some(&mut self.cur[..])
    }
    fn commit(&mut self, len: usize) {
        self.out.push(self.cur[..len].to_vec());
    }
    fn room(&self) -> usize {
        self.room
            .map_or(usize::MAX, |r| r.saturating_sub(self.out.len()))
    }
}
