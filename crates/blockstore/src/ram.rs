//! Sparse RAM: a lock-free table of 64 KiB chunks, allocated on first write (or all at start).
//!
//! * The chunk table is a zeroed (calloc'd) array of `AtomicPtr<u8>`, one per chunk, plus an
//!   allocation bitmap of one bit per chunk: 8 bytes and 1 bit per 64 KiB. Untouched parts of
//!   the table are untouched pages, so even they cost no RSS.
//! * The first write to a chunk allocates it zeroed and installs it with `compare_exchange`;
//!   the loser of a race frees its copy. A chunk is never freed while the store lives, so a
//!   pointer once loaded stays valid: no lock and no reclamation scheme on the data path.
//! * Trim of a whole chunk clears its bit and hands its pages back to the kernel with
//!   `madvise(MADV_DONTNEED)` (the pages stay mapped and read as zeros); with `prealloc` it
//!   zeroes them instead, so the memory stays touched.
//! * Data moves with `memcpy` (`ptr::copy_nonoverlapping`). Two connections writing (or one
//!   writing while another reads) the same bytes at once get torn-but-defined bytes, as from a
//!   disk: every byte read is one that some write stored or zero. No value of `u8` is invalid
//!   and the chunk memory is only ever reached through raw-pointer copies, never through a
//!   reference the compiler could assume unaliased, which is what keeps such a race harmless
//!   in practice. (In the Rust abstract machine it is still a data race: the price of copying
//!   at memory speed instead of word by word through atomics.)

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::io;
use std::mem::MaybeUninit;
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

use crate::StoreError;

/// Allocation granularity: a 4 KiB write into an unwritten chunk allocates 64 KiB.
pub const CHUNK: usize = 64 * 1024;
const PAGE: usize = 4096;
// Page alignment lets trim hand whole pages back to the kernel.
const CHUNK_LAYOUT: Layout = match Layout::from_size_align(CHUNK, PAGE) {
    Ok(l) => l,
    Err(_) => panic!("chunk layout"),
};

/// What a hole's bytes are sent from by [`SparseRam::iovecs`] (never written).
static ZEROS: [u8; CHUNK] = [0; CHUNK];

/// Bits of chunk table per chunk: a pointer and one bit of the allocation bitmap.
pub const TABLE_BITS_PER_CHUNK: usize = 8 * std::mem::size_of::<AtomicPtr<u8>>() + 1;

/// The sparse RAM store. Offsets and lengths are bytes; any alignment works.
pub struct SparseRam {
    table: Box<[AtomicPtr<u8>]>,
    /// One bit per chunk, set while it holds written data (a whole-chunk trim clears it).
    mapped: Box<[AtomicU64]>,
    size: u64,
    prealloc: bool,
}

impl SparseRam {
    /// A store of `size` bytes; with `prealloc` every chunk is allocated and touched now.
    pub fn new(size: u64, prealloc: bool) -> Result<SparseRam, StoreError> {
        let n = usize::try_from(size.div_ceil(CHUNK as u64)).map_err(|_| StoreError::TooLarge)?;
        if prealloc {
            // Before the table: a size far beyond memory must be an error, not an abort.
            let wanted = n as u64 * CHUNK as u64;
            if let Some(available) = mem_available() {
                if wanted > available {
                    return Err(StoreError::PreallocTooBig { wanted, available });
                }
            }
        }
        let s = SparseRam {
            table: zeroed_slice(n),
            mapped: zeroed_slice(n.div_ceil(64)),
            size,
            prealloc,
        };
        if prealloc {
            s.preallocate()?;
        }
        Ok(s)
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    fn preallocate(&self) -> Result<(), StoreError> {
        let wanted = self.table.len() as u64 * CHUNK as u64;
        for (i, slot) in self.table.iter().enumerate() {
            // SAFETY: CHUNK_LAYOUT has a non-zero size.
            let p = unsafe { alloc_zeroed(CHUNK_LAYOUT) };
            if p.is_null() {
                return Err(StoreError::OutOfMemory {
                    done: i as u64 * CHUNK as u64,
                    wanted,
                });
            }
            for page in (0..CHUNK).step_by(PAGE) {
                // SAFETY: `page` < CHUNK, inside the allocation just made. A volatile store
                // makes sure the page is faulted in now, whatever the allocator did.
                unsafe { ptr::write_volatile(p.add(page), 0) };
            }
            slot.store(p, Ordering::Release);
        }
        Ok(())
    }

    fn check(&self, off: u64, len: u64) -> io::Result<()> {
        match off.checked_add(len) {
            Some(end) if end <= self.size => Ok(()),
            _ => Err(io::Error::from_raw_os_error(libc::EINVAL)),
        }
    }

    /// The chunk's memory, if it was ever allocated.
    fn chunk(&self, idx: usize) -> Option<*mut u8> {
        let p = self.table[idx].load(Ordering::Acquire);
        (!p.is_null()).then_some(p)
    }

    fn chunk_or_alloc(&self, idx: usize) -> io::Result<*mut u8> {
        if let Some(p) = self.chunk(idx) {
            return Ok(p);
        }
        // SAFETY: CHUNK_LAYOUT has a non-zero size.
        let fresh = unsafe { alloc_zeroed(CHUNK_LAYOUT) };
        if fresh.is_null() {
            return Err(io::Error::from_raw_os_error(libc::ENOMEM));
        }
        let slot = &self.table[idx];
        match slot.compare_exchange(ptr::null_mut(), fresh, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => Ok(fresh),
            Err(winner) => {
                // SAFETY: `fresh` came from alloc_zeroed with CHUNK_LAYOUT and was never shared.
                unsafe { dealloc(fresh, CHUNK_LAYOUT) };
                Ok(winner)
            }
        }
    }

    fn is_mapped(&self, idx: usize) -> bool {
        self.mapped[idx / 64].load(Ordering::Acquire) & (1 << (idx % 64)) != 0
    }

    fn set_mapped(&self, idx: usize) {
        let (w, bit) = (&self.mapped[idx / 64], 1u64 << (idx % 64));
        // Look first: a bitmap word covers 4 MiB, and rewriting it on every write would bounce
        // its cache line between connections.
        if w.load(Ordering::Relaxed) & bit == 0 {
            w.fetch_or(bit, Ordering::Release);
        }
    }

    fn clear_mapped(&self, idx: usize) {
        let (w, bit) = (&self.mapped[idx / 64], 1u64 << (idx % 64));
        if w.load(Ordering::Relaxed) & bit != 0 {
            w.fetch_and(!bit, Ordering::AcqRel);
        }
    }

    /// Reads `dst.len()` bytes at `off` into possibly uninitialised memory and returns it
    /// initialised. Chunks without data give zeros.
    pub fn read_uninit<'a>(
        &self,
        off: u64,
        dst: &'a mut [MaybeUninit<u8>],
    ) -> io::Result<&'a mut [u8]> {
        self.check(off, dst.len() as u64)?;
        let base = dst.as_mut_ptr().cast::<u8>();
        for (idx, within, at, n) in pieces(off, dst.len() as u64) {
            // SAFETY: pieces() cuts [0, dst.len()) into disjoint ranges, so at + n <= dst.len().
            let d = unsafe { base.add(at) };
            match self.chunk(idx).filter(|_| self.is_mapped(idx)) {
                // SAFETY: `c` is a live chunk of CHUNK bytes (never freed while `self` is
                // borrowed) and within + n <= CHUNK; `d..d+n` lies in `dst`, which cannot
                // overlap a chunk (the caller's memory is not ours). A concurrent write to
                // the same bytes gives torn-but-defined bytes (see the module docs).
                Some(c) => unsafe { ptr::copy_nonoverlapping(c.add(within), d, n) },
                // SAFETY: `d..d+n` lies in `dst`.
                None => unsafe { ptr::write_bytes(d, 0, n) },
            }
        }
        // SAFETY: the pieces cover [0, dst.len()) and every one was written above.
        Ok(unsafe { std::slice::from_raw_parts_mut(base, dst.len()) })
    }

    /// Appends one `iovec` per piece of `[off, off+len)`: where its bytes lie in a chunk, or
    /// in a static block of zeros for a hole. Nothing is copied; the kernel reads the memory
    /// when the caller hands the list to `sendmsg`. The pointers stay valid while the store
    /// lives (a chunk is never freed before, and a trimmed one stays mapped); a write or trim
    /// between this call and the send shows in the bytes sent, as one concurrent with a read
    /// would. They are only for the kernel to read: nothing may write through them.
    pub fn iovecs(&self, off: u64, len: usize, out: &mut Vec<libc::iovec>) -> io::Result<()> {
        self.check(off, len as u64)?;
        for (idx, within, _, n) in pieces(off, len as u64) {
            let base = match self.chunk(idx).filter(|_| self.is_mapped(idx)) {
                // SAFETY: `c` is a live chunk of CHUNK bytes and within + n <= CHUNK, so the
                // pointer and the n bytes after it stay inside the allocation.
                Some(c) => unsafe { c.add(within) },
                None => ZEROS.as_ptr().cast_mut(),
            };
            out.push(libc::iovec {
                iov_base: base.cast(),
                iov_len: n,
            });
        }
        Ok(())
    }

    pub fn write(&self, off: u64, src: &[u8]) -> io::Result<()> {
        self.check(off, src.len() as u64)?;
        for (idx, within, at, n) in pieces(off, src.len() as u64) {
            let c = self.chunk_or_alloc(idx)?;
            // SAFETY: `c` is a live chunk of CHUNK bytes, within + n <= CHUNK, and
            // at + n <= src.len(); a caller's slice never overlaps a chunk. Concurrent
            // writers of the same bytes leave torn-but-defined bytes (module docs).
            unsafe { ptr::copy_nonoverlapping(src.as_ptr().add(at), c.add(within), n) };
            // After the data: a reader that sees the bit sees the bytes.
            self.set_mapped(idx);
        }
        Ok(())
    }

    /// Zeroes `[off, off+len)`. With `keep_allocated` (WRITE_ZEROES with NO_HOLE) the range is
    /// allocated and reported as data; otherwise (TRIM) whole chunks become holes and give
    /// their memory back, partial chunks are zeroed in place.
    pub fn zero(&self, off: u64, len: u64, keep_allocated: bool) -> io::Result<()> {
        self.check(off, len)?;
        for (idx, within, _, n) in pieces(off, len) {
            let whole = within == 0 && (n == CHUNK || off + len == self.size);
            if keep_allocated {
                let c = self.chunk_or_alloc(idx)?;
                // SAFETY: live chunk, within + n <= CHUNK.
                unsafe { ptr::write_bytes(c.add(within), 0, n) };
                self.set_mapped(idx);
            } else if whole {
                self.clear_mapped(idx);
                if let Some(c) = self.chunk(idx) {
                    self.release(c);
                }
            } else if let Some(c) = self.chunk(idx) {
                // SAFETY: live chunk, within + n <= CHUNK.
                unsafe { ptr::write_bytes(c.add(within), 0, n) };
            }
        }
        Ok(())
    }

    /// Makes a whole chunk read as zeros, giving its pages back unless preallocated.
    fn release(&self, c: *mut u8) {
        if !self.prealloc {
            // SAFETY: `c` is a page-aligned allocation of CHUNK bytes that stays allocated.
            // MADV_DONTNEED on private anonymous memory replaces its pages with zero-fill
            // pages: concurrent readers see zeros or old bytes, never invalid memory.
            let rc = unsafe { libc::madvise(c.cast(), CHUNK, libc::MADV_DONTNEED) };
            if rc == 0 {
                return;
            }
        }
        // SAFETY: live chunk of CHUNK bytes.
        unsafe { ptr::write_bytes(c, 0, CHUNK) };
    }

    /// Bytes of memory holding data: chunks written and not trimmed since, or with `prealloc`
    /// every chunk.
    pub fn allocated_bytes(&self) -> u64 {
        let chunks = if self.prealloc {
            self.table.len() as u64
        } else {
            self.mapped
                .iter()
                .map(|w| u64::from(w.load(Ordering::Relaxed).count_ones()))
                .sum()
        };
        chunks * CHUNK as u64
    }

    /// Whether the byte at `off` lies in written data, and where that state ends, looking no
    /// further than `off + len` (nor the end of the store). `off` must be below the size.
    pub fn mapped(&self, off: u64, len: u64) -> (bool, u64) {
        let end = off.saturating_add(len).min(self.size);
        if off >= end {
            return (false, end);
        }
        let first = (off / CHUNK as u64) as usize;
        let limit = (end - 1) / CHUNK as u64 + 1;
        let state = self.is_mapped(first);
        let next = self.next_differing(first + 1, limit as usize, state);
        (state, (next as u64 * CHUNK as u64).min(end))
    }

    /// The first chunk index in `[from, limit)` whose bit differs from `state`, else `limit`.
    fn next_differing(&self, from: usize, limit: usize, state: bool) -> usize {
        let mut i = from;
        while i < limit {
            let w = self.mapped[i / 64].load(Ordering::Acquire);
            let differ = if state { !w } else { w } >> (i % 64);
            if differ != 0 {
                return (i + differ.trailing_zeros() as usize).min(limit);
            }
            i = (i / 64 + 1) * 64;
        }
        limit
    }
}

impl Drop for SparseRam {
    fn drop(&mut self) {
        for slot in self.table.iter() {
            let p = slot.load(Ordering::Acquire);
            if !p.is_null() {
                // SAFETY: every non-null entry was allocated with CHUNK_LAYOUT and is freed
                // exactly once, here, when no borrow of the store remains.
                unsafe { dealloc(p, CHUNK_LAYOUT) };
            }
        }
    }
}

/// Cuts `[off, off+len)` into (chunk index, offset in chunk, offset in buffer, length).
fn pieces(off: u64, len: u64) -> impl Iterator<Item = (usize, usize, usize, usize)> {
    let mut done = 0u64;
    std::iter::from_fn(move || {
        if done >= len {
            return None;
        }
        let pos = off + done;
        let idx = (pos / CHUNK as u64) as usize;
        let within = (pos % CHUNK as u64) as usize;
        let n = ((CHUNK - within) as u64).min(len - done) as usize;
        let at = done as usize;
        done += n as u64;
        Some((idx, within, at, n))
    })
}

/// A boxed slice of atomics, all zero, straight from the zeroing allocator (calloc): pages of
/// it that are never touched cost no memory.
fn zeroed_slice<T: ZeroIsValid>(n: usize) -> Box<[T]> {
    // SAFETY: T is an atomic integer or pointer, for which all-zero bytes are a valid value
    // (0 or null).
    unsafe { Box::<[T]>::new_zeroed_slice(n).assume_init() }
}

trait ZeroIsValid {}
impl ZeroIsValid for AtomicU64 {}
impl ZeroIsValid for AtomicPtr<u8> {}

/// `MemAvailable` from /proc/meminfo, in bytes.
fn mem_available() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = s.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unwritten_reads_zero_and_writes_allocate_chunks() {
        let r = SparseRam::new(10 * CHUNK as u64 + 100, false).unwrap();
        let mut b = vec![1u8; 3 * CHUNK];
        r.read_uninit(5, as_uninit(&mut b)).unwrap();
        assert!(b.iter().all(|&x| x == 0));
        assert_eq!(r.allocated_bytes(), 0);
        let data: Vec<u8> = (0..2 * CHUNK + 10).map(|i| i as u8).collect();
        r.write(CHUNK as u64 - 5, &data).unwrap();
        assert_eq!(r.allocated_bytes(), 4 * CHUNK as u64);
        let mut back = vec![0u8; data.len()];
        r.read_uninit(CHUNK as u64 - 5, as_uninit(&mut back))
            .unwrap();
        assert_eq!(back, data);
        assert_eq!(r.mapped(0, u64::MAX), (true, 4 * CHUNK as u64));
        assert_eq!(r.mapped(4 * CHUNK as u64, u64::MAX), (false, r.size()));
        // Trim the middle chunks: whole ones become holes, edges are zeroed.
        r.zero(CHUNK as u64, 2 * CHUNK as u64, false).unwrap();
        assert_eq!(r.allocated_bytes(), 2 * CHUNK as u64);
        assert_eq!(r.mapped(0, u64::MAX), (true, CHUNK as u64));
        assert_eq!(r.mapped(CHUNK as u64, u64::MAX), (false, 3 * CHUNK as u64));
        r.read_uninit(CHUNK as u64 - 5, as_uninit(&mut back))
            .unwrap();
        assert_eq!(&back[..5], &data[..5]);
        assert!(back[5..5 + 2 * CHUNK].iter().all(|&x| x == 0));
        // Out of range is an error, not a panic.
        assert!(r.write(r.size() - 1, &[0, 0]).is_err());
        assert!(r.read_uninit(u64::MAX, as_uninit(&mut [0u8; 1])).is_err());
    }

    #[test]
    fn write_zeroes_keeps_allocation_and_the_last_partial_chunk_trims_whole() {
        let r = SparseRam::new(2 * CHUNK as u64 + 512, false).unwrap();
        r.zero(0, 4096, true).unwrap();
        assert_eq!(r.mapped(0, 1), (true, 1));
        assert_eq!(r.allocated_bytes(), CHUNK as u64);
        r.write(2 * CHUNK as u64, &[9; 512]).unwrap();
        assert_eq!(r.mapped(CHUNK as u64, u64::MAX), (false, 2 * CHUNK as u64));
        r.zero(2 * CHUNK as u64, 512, false).unwrap();
        assert_eq!(r.allocated_bytes(), CHUNK as u64);
    }

    #[test]
    fn huge_store_costs_only_its_table_and_scans_fast() {
        let size = 100u64 << 30;
        let r = SparseRam::new(size, false).unwrap();
        assert_eq!(r.table.len() as u64, size / CHUNK as u64);
        r.write(size - 512, &[7; 512]).unwrap();
        assert_eq!(r.allocated_bytes(), CHUNK as u64);
        assert_eq!(r.mapped(0, u64::MAX), (false, size - CHUNK as u64));
        assert_eq!(r.mapped(size - 1, 1), (true, size));
        assert_eq!(r.mapped(0, 4096), (false, 4096));
    }

    #[test]
    fn prealloc_holds_every_chunk_but_reports_holes_until_written() {
        let r = SparseRam::new(4 * CHUNK as u64, true).unwrap();
        assert_eq!(r.allocated_bytes(), 4 * CHUNK as u64);
        assert_eq!(r.mapped(0, u64::MAX), (false, 4 * CHUNK as u64));
        r.write(CHUNK as u64, &[1; 10]).unwrap();
        r.zero(CHUNK as u64, CHUNK as u64, false).unwrap();
        let mut b = [5u8; 10];
        r.read_uninit(CHUNK as u64, as_uninit(&mut b)).unwrap();
        assert_eq!(b, [0; 10]);
        assert_eq!(r.allocated_bytes(), 4 * CHUNK as u64);
        assert!(matches!(
            SparseRam::new(1 << 50, true),
            Err(StoreError::PreallocTooBig { .. })
        ));
    }

    #[test]
    fn iovecs_point_at_the_stored_bytes_and_at_zeros_for_holes() {
        let r = SparseRam::new(4 * CHUNK as u64, false).unwrap();
        let data: Vec<u8> = (0..CHUNK + 100).map(|i| (i % 251) as u8 + 1).collect();
        r.write(CHUNK as u64 - 50, &data).unwrap();
        let mut v = Vec::new();
        r.iovecs(CHUNK as u64 - 100, 2 * CHUNK, &mut v).unwrap();
        assert_eq!(
            v.iter().map(|i| i.iov_len).collect::<Vec<_>>(),
            [100, CHUNK, CHUNK - 100]
        );
        let mut got = Vec::new();
        for i in &v {
            // SAFETY: the store lives and nothing writes it during the test.
            got.extend_from_slice(unsafe {
                std::slice::from_raw_parts(i.iov_base.cast::<u8>(), i.iov_len)
            });
        }
        let mut want = vec![0u8; 2 * CHUNK];
        r.read_uninit(CHUNK as u64 - 100, as_uninit(&mut want))
            .unwrap();
        assert_eq!(got, want);
        assert_eq!(&got[50..50 + data.len()], &data[..]);
        // The hole at the end reads as the static zeros; out of range is an error.
        assert!(got[50 + data.len()..].iter().all(|&b| b == 0));
        assert!(r.iovecs(4 * CHUNK as u64 - 1, 2, &mut v).is_err());
    }

    fn as_uninit(b: &mut [u8]) -> &mut [MaybeUninit<u8>] {
        // SAFETY: same layout; the store only stores initialised bytes.
        unsafe { &mut *(b as *mut [u8] as *mut [MaybeUninit<u8>]) }
    }
}
