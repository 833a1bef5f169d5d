//! The UMEM of one AF_XDP port: one anonymous mapping of `frames x chunk` bytes that the
//! kernel reads tx frames from and writes rx frames into, and the stack of free chunks.
//!
//! A chunk is named by its UMEM address (`index x chunk`, aligned mode). Chunks move
//! between four owners: the free stack (here), the fill ring (kernel, waiting for rx),
//! the user (frames handed out) and the tx ring (kernel, until the completion ring gives
//! the address back).

/// The mapping and the free chunks.
pub(crate) struct Umem {
    area: *mut u8,
    size: usize,
    chunk: u32,
    frames: u32,
    /// Free chunk addresses (a stack: the most recently used chunk is reused first).
    pub(crate) free: Vec<u64>,
}

// SAFETY: the mapping is owned by the port that owns this value; moving it moves the owner.
unsafe impl Send for Umem {}

impl Umem {
    /// Maps `frames` chunks of `chunk` bytes (a power of two, 2048..=4096 as AF_XDP's
    /// aligned mode wants), all free.
    pub(crate) fn new(frames: u32, chunk: u32) -> Result<Umem, String> {
        if !chunk.is_power_of_two() || !(2048..=4096).contains(&chunk) || frames < 64 {
            return Err("bad UMEM geometry (chunk 2048 or 4096 bytes, >= 64 frames)".into());
        }
        let size = frames as usize * chunk as usize;
        // SAFETY: a fresh private anonymous mapping; the result is checked.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                size,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(format!(
                "cannot map the UMEM ({size} bytes): {}",
                std::io::Error::last_os_error()
            ));
        }
        Ok(Umem {
            area: p as *mut u8,
            size,
            chunk,
            frames,
            free: (0..u64::from(frames))
                .rev()
                .map(|i| i * u64::from(chunk))
                .collect(),
        })
    }

    pub(crate) fn area(&self) -> *mut u8 {
        self.area
    }
    pub(crate) fn size(&self) -> usize {
        self.size
    }
    pub(crate) fn chunk(&self) -> u32 {
        self.chunk
    }
    pub(crate) fn frames(&self) -> u32 {
        self.frames
    }

    /// The chunk holding UMEM address `addr` and the offset of `addr` in it, if `addr`
    /// lies inside the UMEM.
    pub(crate) fn split(&self, addr: u64) -> Option<(u64, u32)> {
        let c = u64::from(self.chunk);
        (addr < self.size as u64).then(|| (addr & !(c - 1), (addr & (c - 1)) as u32))
    }

    /// Pointer to the start of chunk `chunk` (an address from [`Umem::split`]).
    pub(crate) fn ptr(&self, chunk: u64) -> *mut u8 {
        // Wrapping: only dereferenced for chunks inside the mapping (checked by callers).
        self.area.wrapping_add(chunk as usize)
    }

    /// Leaves the mapping in place for good (frames still point into it).
    pub(crate) fn leak(&mut self) {
        self.size = 0;
    }
}

impl Drop for Umem {
    fn drop(&mut self) {
        if self.size > 0 {
            // SAFETY: the mapping was made with this address and size, and the owning
            // port only drops it when no frame points into it and the socket is closed.
            unsafe { libc::munmap(self.area as *mut libc::c_void, self.size) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn geometry_and_split() {
        assert!(Umem::new(64, 3000).is_err());
        assert!(Umem::new(8, 2048).is_err());
        let u = Umem::new(64, 2048).unwrap();
        assert_eq!(u.free.len(), 64);
        assert_eq!(u.free.last(), Some(&0));
        assert_eq!(u.split(2048 * 3 + 256), Some((2048 * 3, 256)));
        assert_eq!(u.split(2048 * 64), None);
        // The memory is ours to write.
        // SAFETY: chunk 63 lies inside the mapping.
        unsafe { *u.ptr(2048 * 63).add(2047) = 7 };
    }
}
