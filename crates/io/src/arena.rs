//! Page-aligned I/O buffers, allocated once per queue before the run.
//!
//! The arena is shared (`Arc`) between the scheduler, which decides which region each I/O uses,
//! and the engine, which reads or writes that region, possibly from the kernel (io_uring fixed
//! buffers) or another thread. It therefore hands out raw slices through `unsafe` accessors: the
//! scheduler guarantees that no two in-flight I/Os use overlapping regions for reads, and write
//! sources are only ever read.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::cell::UnsafeCell;

/// Alignment of every arena and of every region the scheduler hands out: enough for O_DIRECT on
/// 4 KiB-sector devices.
pub const ALIGN: usize = 4096;

pub struct Arena {
    ptr: *mut u8,
    len: usize,
    _cell: UnsafeCell<()>,
}

// SAFETY: the arena is a plain byte buffer; access discipline (disjoint regions per in-flight
// I/O) is the scheduler's contract documented above, and the pointer stays valid until drop.
unsafe impl Send for Arena {}
// SAFETY: as above; concurrent readers of write-source regions only read.
unsafe impl Sync for Arena {}

impl Arena {
    /// Allocates `len` zeroed bytes aligned to [`ALIGN`] (at least one page).
    pub fn new(len: usize) -> Arena {
        let len = len.max(ALIGN).next_multiple_of(ALIGN);
        let layout = Layout::from_size_align(len, ALIGN).expect("arena layout");
        // SAFETY: layout has non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        Arena {
            ptr,
            len,
            _cell: UnsafeCell::new(()),
        }
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline]
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// A read-only view of `len` bytes at `off`.
    ///
    /// # Safety
    /// No in-flight I/O may be writing to the region.
    #[inline]
    pub unsafe fn slice(&self, off: usize, len: usize) -> &[u8] {
        assert!(off + len <= self.len, "arena region out of bounds");
        // SAFETY: bounds checked above; caller guarantees no concurrent writer.
        unsafe { std::slice::from_raw_parts(self.ptr.add(off), len) }
    }

    /// A writable view of `len` bytes at `off`.
    ///
    /// # Safety
    /// The caller must be the only user of the region while the slice lives.
    #[allow(clippy::mut_from_ref)]
    #[inline]
    pub unsafe fn slice_mut(&self, off: usize, len: usize) -> &mut [u8] {
        assert!(off + len <= self.len, "arena region out of bounds");
        // SAFETY: bounds checked above; caller guarantees exclusive use of the region.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(off), len) }
    }

    /// Fills the whole arena with incompressible pseudo-random bytes.
    pub fn fill_random(&self, seed: u64) {
        // SAFETY: called before the arena is shared with any engine.
        let all = unsafe { self.slice_mut(0, self.len) };
        fill_random(all, seed);
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        let layout = Layout::from_size_align(self.len, ALIGN).expect("arena layout");
        // SAFETY: allocated in `new` with this layout.
        unsafe { dealloc(self.ptr, layout) }
    }
}

/// Fills `buf` with pseudo-random bytes (wyrand): incompressible, so that compressing or
/// deduplicating targets cannot flatter a write test.
pub fn fill_random(buf: &mut [u8], seed: u64) {
    let mut rng = crate::rng::Rng::new(seed);
    let mut chunks = buf.chunks_exact_mut(8);
    for c in &mut chunks {
        c.copy_from_slice(&rng.next_u64().to_le_bytes());
    }
    let rest = chunks.into_remainder();
    let last = rng.next_u64().to_le_bytes();
    let n = rest.len();
    rest.copy_from_slice(&last[..n]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_and_random() {
        let a = Arena::new(10_000);
        assert_eq!(a.len(), 12_288);
        assert_eq!(a.as_ptr() as usize % ALIGN, 0);
        a.fill_random(7);
        let s = unsafe { a.slice(0, a.len()) };
        // Crude incompressibility check: all byte values appear, none dominates.
        let mut hist = [0u32; 256];
        for b in s {
            hist[*b as usize] += 1;
        }
        assert!(hist.iter().all(|&c| c > 0 && c < 200));
    }
}
