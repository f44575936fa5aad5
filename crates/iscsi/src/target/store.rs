//! Block storage behind a LUN: sparse RAM allocated as written, or a file.
//!
//! Memory model of [`SparseRam`]: the LUN is cut into 64 KiB chunks. The chunk table is a
//! zero-initialised array of `AtomicPtr` (calloc'd, so untouched parts of the table cost no
//! RSS either). The first write to a chunk allocates it zeroed and installs it with
//! `compare_exchange`; the loser of a race frees its copy. Chunks are never freed while the
//! store lives, so a reader that loaded a pointer can always use it: there is no lock and no
//! reclamation scheme on the data path. Data is accessed as `AtomicU64` words with relaxed
//! ordering, so concurrent overlapping I/O from several initiators yields torn-but-defined data
//! (as a real disk would) instead of a data race. UNMAP of whole pages gives memory back with
//! `madvise(MADV_DONTNEED)`, which keeps the pages mapped and makes them read as zeros.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};

/// Bytes per chunk.
pub const CHUNK: usize = 64 * 1024;
const WORDS: usize = CHUNK / 8;
const PAGE: usize = 4096;

fn chunk_layout() -> Layout {
    // Page alignment lets UNMAP hand whole pages back to the kernel.
    Layout::from_size_align(CHUNK, PAGE).expect("constant layout")
}

/// Sparse RAM store. All offsets and lengths are multiples of 8 (the target only does
/// block-granular I/O with 512-byte blocks).
pub struct SparseRam {
    table: Box<[AtomicPtr<AtomicU64>]>,
    mapped: Box<[AtomicBool]>,
    size: u64,
}

// SAFETY: all shared state is atomics; chunk memory is only reached through atomic words.
unsafe impl Sync for SparseRam {}
// SAFETY: the raw chunk pointers are owned by the store and freed only in Drop.
unsafe impl Send for SparseRam {}

impl SparseRam {
    pub fn new(size: u64) -> SparseRam {
        let n = size.div_ceil(CHUNK as u64) as usize;
        let table: Box<[AtomicPtr<AtomicU64>]> =
            (0..n).map(|_| AtomicPtr::new(ptr::null_mut())).collect();
        let mapped: Box<[AtomicBool]> = (0..n).map(|_| AtomicBool::new(false)).collect();
        SparseRam {
            table,
            mapped,
            size,
        }
    }

    /// Bytes currently allocated for data.
    pub fn allocated_bytes(&self) -> u64 {
        self.table
            .iter()
            .filter(|p| !p.load(Ordering::Relaxed).is_null())
            .count() as u64
            * CHUNK as u64
    }

    fn chunk(&self, idx: usize) -> Option<&[AtomicU64]> {
        let p = self.table.get(idx)?.load(Ordering::Acquire);
        if p.is_null() {
            return None;
        }
        // SAFETY: a non-null entry points to a live, zero-initialised allocation of WORDS
        // AtomicU64 installed with Release ordering (paired with the Acquire above); chunks are
        // only freed in Drop, which cannot run while `&self` is borrowed.
        Some(unsafe { std::slice::from_raw_parts(p, WORDS) })
    }

    fn chunk_or_alloc(&self, idx: usize) -> &[AtomicU64] {
        if let Some(c) = self.chunk(idx) {
            return c;
        }
        // SAFETY: the layout has non-zero size; all-zero bytes are a valid AtomicU64.
        let fresh = unsafe { alloc_zeroed(chunk_layout()) } as *mut AtomicU64;
        if fresh.is_null() {
            std::alloc::handle_alloc_error(chunk_layout());
        }
        let slot = &self.table[idx];
        let p = match slot.compare_exchange(
            ptr::null_mut(),
            fresh,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => fresh,
            Err(winner) => {
                // SAFETY: `fresh` came from alloc_zeroed with this layout and was never shared.
                unsafe { dealloc(fresh as *mut u8, chunk_layout()) };
                winner
            }
        };
        // SAFETY: `p` is a live chunk of WORDS atomics, owned by the table until Drop.
        unsafe { std::slice::from_raw_parts(p, WORDS) }
    }

    /// Calls `f(chunk_index, offset_in_chunk, start_in_buffer, len)` for each chunk piece.
    fn split(off: u64, len: usize, mut f: impl FnMut(usize, usize, usize, usize)) {
        let mut done = 0;
        while done < len {
            let pos = off + done as u64;
            let idx = (pos / CHUNK as u64) as usize;
            let co = (pos % CHUNK as u64) as usize;
            let n = (CHUNK - co).min(len - done);
            f(idx, co, done, n);
            done += n;
        }
    }

    /// Reads any byte range (a Data-In cut short by the initiator's expected length need not
    /// end on a word); writes are always whole blocks.
    pub fn read(&self, off: u64, buf: &mut [u8]) {
        debug_assert!(off + buf.len() as u64 <= self.size);
        Self::split(off, buf.len(), |idx, co, bo, n| {
            let dst = &mut buf[bo..bo + n];
            match self.chunk(idx) {
                None => dst.fill(0),
                Some(c) if co & 7 == 0 && n & 7 == 0 => {
                    for (w, d) in c[co / 8..(co + n) / 8].iter().zip(dst.chunks_exact_mut(8)) {
                        d.copy_from_slice(&w.load(Ordering::Relaxed).to_ne_bytes());
                    }
                }
                Some(c) => {
                    let (mut pos, mut d) = (co, 0);
                    while d < n {
                        let w = c[pos / 8].load(Ordering::Relaxed).to_ne_bytes();
                        let s = pos % 8;
                        let k = (8 - s).min(n - d);
                        dst[d..d + k].copy_from_slice(&w[s..s + k]);
                        pos += k;
                        d += k;
                    }
                }
            }
        });
    }

    pub fn write(&self, off: u64, buf: &[u8]) {
        debug_assert!(off & 7 == 0 && buf.len() & 7 == 0 && off + buf.len() as u64 <= self.size);
        Self::split(off, buf.len(), |idx, co, bo, n| {
            let src = &buf[bo..bo + n];
            let c = self.chunk_or_alloc(idx);
            for (w, s) in c[co / 8..(co + n) / 8].iter().zip(src.chunks_exact(8)) {
                let mut a = [0u8; 8];
                a.copy_from_slice(s);
                w.store(u64::from_ne_bytes(a), Ordering::Relaxed);
            }
            if !self.mapped[idx].load(Ordering::Relaxed) {
                self.mapped[idx].store(true, Ordering::Relaxed);
            }
        });
    }

    /// Deallocates a range: it reads as zeros afterwards. Whole chunks are marked unmapped and
    /// their pages returned to the kernel; partial chunks are zeroed.
    pub fn unmap(&self, off: u64, len: u64) {
        let mut pos = off;
        let end = off + len;
        while pos < end {
            let idx = (pos / CHUNK as u64) as usize;
            let co = (pos % CHUNK as u64) as usize;
            let n = ((CHUNK - co) as u64).min(end - pos) as usize;
            if let Some(c) = self.chunk(idx) {
                let words = &c[co / 8..(co + n) / 8];
                if n == CHUNK {
                    self.mapped[idx].store(false, Ordering::Relaxed);
                    // SAFETY: the chunk is a page-aligned allocation of CHUNK bytes that stays
                    // allocated; MADV_DONTNEED on private anonymous memory only replaces its
                    // pages with zero pages, which every reader may observe as zero words.
                    unsafe {
                        libc::madvise(c.as_ptr() as *mut libc::c_void, CHUNK, libc::MADV_DONTNEED);
                    }
                } else {
                    words.iter().for_each(|w| w.store(0, Ordering::Relaxed));
                }
            }
            pos += n as u64;
        }
    }

    /// Whether the chunk holding byte `off` holds written data, and where that state ends.
    pub fn mapping_at(&self, off: u64) -> (bool, u64) {
        let mut idx = (off / CHUNK as u64) as usize;
        let state = self.is_mapped(idx);
        while idx < self.table.len() && self.is_mapped(idx) == state {
            idx += 1;
        }
        (state, (idx as u64 * CHUNK as u64).min(self.size))
    }

    fn is_mapped(&self, idx: usize) -> bool {
        self.mapped
            .get(idx)
            .is_some_and(|m| m.load(Ordering::Relaxed))
            && self.chunk(idx).is_some()
    }
}

impl Drop for SparseRam {
    fn drop(&mut self) {
        for slot in self.table.iter() {
            let p = slot.load(Ordering::Acquire);
            if !p.is_null() {
                // SAFETY: every non-null entry was allocated with chunk_layout() and is freed
                // exactly once, here, when no borrow of the store remains.
                unsafe { dealloc(p as *mut u8, chunk_layout()) };
            }
        }
    }
}

/// Where a LUN's blocks live.
pub enum Backing {
    Ram(SparseRam),
    File(File),
}

impl Backing {
    pub fn read(&self, off: u64, buf: &mut [u8]) -> std::io::Result<()> {
        match self {
            Backing::Ram(r) => {
                r.read(off, buf);
                Ok(())
            }
            Backing::File(f) => f.read_exact_at(buf, off).or_else(|e| {
                if e.kind() == std::io::ErrorKind::UnexpectedEof {
                    // Past the file's current end reads as zeros (the file may be sparse).
                    let n = f
                        .metadata()?
                        .len()
                        .saturating_sub(off)
                        .min(buf.len() as u64) as usize;
                    buf[n..].fill(0);
                    f.read_exact_at(&mut buf[..n], off)
                } else {
                    Err(e)
                }
            }),
        }
    }

    pub fn write(&self, off: u64, buf: &[u8]) -> std::io::Result<()> {
        match self {
            Backing::Ram(r) => {
                r.write(off, buf);
                Ok(())
            }
            Backing::File(f) => f.write_all_at(buf, off),
        }
    }

    pub fn unmap(&self, off: u64, len: u64) -> std::io::Result<()> {
        match self {
            Backing::Ram(r) => {
                r.unmap(off, len);
                Ok(())
            }
            Backing::File(f) => {
                let zeros = vec![0u8; (len as usize).min(1 << 20)];
                let mut pos = 0;
                while pos < len {
                    let n = (len - pos).min(zeros.len() as u64) as usize;
                    f.write_all_at(&zeros[..n], off + pos)?;
                    pos += n as u64;
                }
                Ok(())
            }
        }
    }

    pub fn sync(&self) -> std::io::Result<()> {
        match self {
            Backing::Ram(_) => Ok(()),
            Backing::File(f) => f.sync_data(),
        }
    }

    /// (mapped, end offset of that state) for GET LBA STATUS; files report mapped.
    pub fn mapping_at(&self, off: u64, size: u64) -> (bool, u64) {
        match self {
            Backing::Ram(r) => r.mapping_at(off),
            Backing::File(_) => (true, size),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparse_reads_zero_and_writes_stick() {
        let s = SparseRam::new(100 << 30);
        let mut b = vec![1u8; 4096];
        s.read(50 << 30, &mut b);
        assert!(b.iter().all(|&x| x == 0));
        assert_eq!(s.allocated_bytes(), 0);
        let w: Vec<u8> = (0..8192).map(|i| i as u8).collect();
        let mut odd = vec![0u8; 13];
        s.write(CHUNK as u64 - 4096, &w);
        let mut r = vec![0u8; 8192];
        s.read(CHUNK as u64 - 4096, &mut r);
        assert_eq!(r, w);
        s.read(CHUNK as u64 - 4093, &mut odd);
        assert_eq!(&odd[..], &w[3..16]);
        assert_eq!(s.allocated_bytes(), 2 * CHUNK as u64);
        assert_eq!(s.mapping_at(0), (true, 2 * CHUNK as u64));
        s.unmap(0, CHUNK as u64);
        s.read(CHUNK as u64 - 4096, &mut r);
        assert!(r[..4096].iter().all(|&x| x == 0));
        assert_eq!(&r[4096..], &w[4096..]);
        assert_eq!(s.mapping_at(0), (false, CHUNK as u64));
    }
}
