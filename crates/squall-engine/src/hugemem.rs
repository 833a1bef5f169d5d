//! Large per-core tables (flow table, flow slab, timer nodes) in transparent huge pages:
//! with 4 KiB pages every random access to a table of tens of MB is also a TLB miss
//! (a two-dimensional page walk under a hypervisor); 2 MiB pages remove most of them.
//! Only a hint: where THP is off or the kernel refuses, the memory stays as it was.

/// Tables smaller than this are left alone (the TLB covers them).
const MIN_BYTES: usize = 4 << 20;
const HUGE: usize = 2 << 20;

/// Asks the kernel to back the whole 2 MiB pages inside `[ptr, ptr + len)` with huge
/// pages (`madvise(MADV_HUGEPAGE)`); call it before the memory is first written.
/// Returns whether the hint was accepted.
pub fn advise_huge(ptr: *const u8, len: usize) -> bool {
    if len < MIN_BYTES {
        return false;
    }
    let start = (ptr as usize).next_multiple_of(HUGE);
    let end = (ptr as usize + len) & !(HUGE - 1);
    if end <= start {
        return false;
    }
    #[cfg(target_os = "linux")]
    {
        // SAFETY: `[start, end)` lies inside an allocation the caller owns (it was
        // rounded inwards); MADV_HUGEPAGE changes only how the kernel backs the pages,
        // never their contents or validity.
        unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) == 0 }
    }
    #[cfg(not(target_os = "linux"))]
    {
        false
    }
}

/// A vector of `n` copies of `v` whose memory is hinted for huge pages before it is
/// first written.
pub fn huge_vec<T: Clone>(n: usize, v: T) -> Vec<T> {
    let mut x = with_capacity_huge(n);
    x.resize(n, v);
    x
}

/// An empty vector with room for `n` elements, hinted for huge pages (elements pushed
/// later land in them).
pub fn with_capacity_huge<T>(n: usize) -> Vec<T> {
    let x: Vec<T> = Vec::with_capacity(n);
    advise_huge(
        x.as_ptr() as *const u8,
        n.saturating_mul(std::mem::size_of::<T>()),
    );
    x
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_tables_are_left_alone() {
        let v = vec![0u8; 4096];
        assert!(!advise_huge(v.as_ptr(), v.len()));
        assert!(!advise_huge(v.as_ptr(), 0));
    }

    #[test]
    fn huge_vec_holds_the_values() {
        let v = huge_vec(3 << 20, 7u32);
        assert_eq!(v.len(), 3 << 20);
        assert!(v.iter().all(|&x| x == 7));
        let w: Vec<u64> = with_capacity_huge(1 << 20);
        assert!(w.capacity() >= 1 << 20 && w.is_empty());
    }

    #[test]
    fn large_aligned_range_is_accepted_where_thp_is_available() {
        let v: Vec<u8> = with_capacity_huge(16 << 20);
        let thp = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
            .map(|s| !s.contains("[never]"))
            .unwrap_or(false);
        if thp {
            assert!(advise_huge(v.as_ptr(), 16 << 20));
        }
    }
}
