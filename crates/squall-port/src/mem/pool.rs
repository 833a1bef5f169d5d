//! Frame pool memory of one side of the in-memory wire, and the [`MemFrame`] handle.
//!
//! One side's pool is a single zeroed allocation of `frames x frame_size` bytes; frames
//! move between the two sides by index (the pool's owner allocates and sends them; the
//! peer hands them back through a return ring). The memory is freed when both ports are
//! gone, unless a frame handle may still point into it (the ports count the frames they
//! handed to the user and not got back): then it is leaked on purpose, which keeps every
//! safe access through a stale `MemFrame` valid.

use crate::frame::{FrameBuf, FrameError, Offload};
use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicI64, Ordering};

/// Bit of a frame index that names the pool (0 = side A, 1 = side B).
pub(crate) const POOL_BIT: u32 = 1 << 31;

pub(crate) struct PoolMem {
    base: NonNull<u8>,
    layout: Layout,
    pub(crate) frames: u32,
    /// Sum over ports of frames handed to users and not returned (added at port drop).
    pub(crate) held: AtomicI64,
}

// SAFETY: the pool is plain memory; which thread may touch which frame is decided by the
// ring protocol of the mem wire (a frame has exactly one owner at a time, handed over
// with release/acquire ring operations).
unsafe impl Send for PoolMem {}
// SAFETY: see above.
unsafe impl Sync for PoolMem {}

impl PoolMem {
    /// Returns `None` if the size overflows or the allocation fails.
    pub(crate) fn new(frames: u32, frame_size: usize) -> Option<PoolMem> {
        let bytes = (frames as usize).checked_mul(frame_size)?.max(1);
        let layout = Layout::from_size_align(bytes, 4096).ok()?;
        // SAFETY: layout has a non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        Some(PoolMem {
            base: NonNull::new(ptr)?,
            layout,
            frames,
            held: AtomicI64::new(0),
        })
    }

    pub(crate) fn base(&self) -> *mut u8 {
        self.base.as_ptr()
    }
}

impl Drop for PoolMem {
    fn drop(&mut self) {
        if self.held.load(Ordering::Acquire) == 0 {
            // SAFETY: allocated in `new` with this layout; no frame handle can reach it.
            unsafe { dealloc(self.base.as_ptr(), self.layout) };
        }
        // else: a MemFrame handle may still point here; leak rather than dangle.
    }
}

/// The fields of a frame handle as plain data: what a [`MemFrame`] holds and what a
/// direction ring carries (as the receiver will see it), so receiving is a copy.
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub(crate) struct FrameRaw {
    /// Start of the slot (not of the data).
    pub(crate) buf: *mut u8,
    /// Slot index, with [`POOL_BIT`] naming the pool.
    pub(crate) idx: u32,
    pub(crate) off: u16,
    pub(crate) len: u16,
    pub(crate) size: u16,
    pub(crate) offload: Offload,
}

/// A frame of the in-memory wire: a fixed-size slot of a side's pool.
///
/// Not `Clone`: the handle owns its slot. Only this module makes one, from a slot it
/// owns (`alloc_tx`) or one handed over on a direction ring (`rx_burst`).
#[derive(Debug)]
pub struct MemFrame {
    pub(crate) raw: FrameRaw,
}

// SAFETY: a MemFrame exclusively owns its slot (the pool protocol never hands a slot to
// two holders) and the pool memory is Sync and outlives every handle (leaked if a handle
// may remain), so moving a handle to another thread is sound.
unsafe impl Send for MemFrame {}

impl MemFrame {
    /// Index of the slot in its pool and the pool's side (0 = A, 1 = B); for diagnostics.
    pub fn slot(&self) -> (u8, u32) {
        ((self.raw.idx >> 31) as u8, self.raw.idx & !POOL_BIT)
    }
}

impl FrameBuf for MemFrame {
    #[inline]
    fn data(&self) -> &[u8] {
        // SAFETY: `buf` points to a live slot of `size` bytes exclusively owned by this
        // handle (pool protocol; memory kept alive while handles may exist), and
        // off + len <= size is kept by every method.
        unsafe {
            std::slice::from_raw_parts(
                self.raw.buf.add(self.raw.off as usize),
                self.raw.len as usize,
            )
        }
    }
    #[inline]
    fn data_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `data`, and `&mut self` gives exclusive access.
        unsafe {
            std::slice::from_raw_parts_mut(
                self.raw.buf.add(self.raw.off as usize),
                self.raw.len as usize,
            )
        }
    }
    #[inline]
    fn len(&self) -> usize {
        self.raw.len as usize
    }
    #[inline]
    fn set_len(&mut self, len: usize) -> Result<(), FrameError> {
        if len > self.capacity() {
            return Err(FrameError::NoRoom);
        }
        self.raw.len = len as u16;
        Ok(())
    }
    #[inline]
    fn capacity(&self) -> usize {
        (self.raw.size - self.raw.off) as usize
    }
    #[inline]
    fn headroom(&self) -> usize {
        self.raw.off as usize
    }
    #[inline]
    fn prepend(&mut self, n: usize) -> Result<(), FrameError> {
        if n > self.raw.off as usize {
            return Err(FrameError::NoRoom);
        }
        self.raw.off -= n as u16;
        self.raw.len += n as u16;
        Ok(())
    }
    #[inline]
    fn adjust(&mut self, n: usize) -> Result<(), FrameError> {
        if n > self.raw.len as usize {
            return Err(FrameError::NoRoom);
        }
        self.raw.off += n as u16;
        self.raw.len -= n as u16;
        Ok(())
    }
    #[inline]
    fn offload(&self) -> Offload {
        self.raw.offload
    }
    #[inline]
    fn set_offload(&mut self, o: Offload) {
        self.raw.offload = o;
    }
}
