//! Where the server keeps the export's bytes.
//!
//! # The RAM store: allocated as written
//!
//! The export is cut into [`CHUNK`]-byte chunks. The chunk table is allocated up front, one slot
//! per chunk, each slot a `RwLock<Option<Box<[u8; CHUNK]>>>` ([`SLOT_BYTES`] bytes): a 100 GiB
//! export costs about 40 MiB of table and nothing else until it is written. A chunk is allocated
//! on its first write; reading an unwritten chunk fills the reader's buffer with zeros without
//! allocating; TRIM and WRITE_ZEROES free whole chunks and zero partial ones. Memory in use is
//! therefore `table + CHUNK x chunks written` (a 4 KiB write costs a whole chunk), plus the
//! connections' buffers (see `conn.rs`).
//!
//! There is no lock across the export: each chunk has its own reader-writer lock, held only for
//! one `memcpy` of at most one chunk, so connections touching different chunks never meet and
//! readers of one chunk share it. Concurrent writes to the same bytes end up in some order per
//! chunk, like a disk without ordering guarantees; the outcome is always memory-safe because
//! every access goes through the lock (no `unsafe` here).

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{PoisonError, RwLock};

/// Allocation granularity of the RAM store.
pub const CHUNK: usize = 64 * 1024;

type Slot = RwLock<Option<Box<[u8; CHUNK]>>>;

/// Bytes of chunk table per chunk of export.
pub const SLOT_BYTES: usize = std::mem::size_of::<Slot>();

pub(crate) enum Store {
    Ram(SparseRam),
    File(File),
}

pub(crate) struct SparseRam {
    slots: Box<[Slot]>,
    allocated: AtomicU64,
}

impl SparseRam {
    pub(crate) fn new(size: u64) -> SparseRam {
        let n = size.div_ceil(CHUNK as u64) as usize;
        let slots = (0..n).map(|_| RwLock::new(None)).collect();
        SparseRam {
            slots,
            allocated: AtomicU64::new(0),
        }
    }

    /// Splits `[off, off+len)` into (chunk index, offset in chunk, length) pieces.
    fn pieces(off: u64, len: usize) -> impl Iterator<Item = (usize, usize, usize)> {
        let mut pos = off;
        let end = off + len as u64;
        std::iter::from_fn(move || {
            if pos >= end {
                return None;
            }
            let idx = (pos / CHUNK as u64) as usize;
            let within = (pos % CHUNK as u64) as usize;
            let n = (CHUNK - within).min((end - pos) as usize);
            pos += n as u64;
            Some((idx, within, n))
        })
    }

    /// The slot of a chunk; ranges were checked against the export size by the caller, the
    /// `get` keeps a mistake an error rather than a panic.
    fn slot(&self, idx: usize) -> io::Result<&Slot> {
        self.slots
            .get(idx)
            .ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))
    }

    fn read(&self, off: u64, dst: &mut [u8]) -> io::Result<()> {
        let mut done = 0;
        for (idx, within, n) in Self::pieces(off, dst.len()) {
            let out = &mut dst[done..done + n];
            let guard = self
                .slot(idx)?
                .read()
                .unwrap_or_else(PoisonError::into_inner);
            match guard.as_ref() {
                Some(c) => out.copy_from_slice(&c[within..within + n]),
                None => out.fill(0),
            }
            done += n;
        }
        Ok(())
    }

    fn write(&self, off: u64, src: &[u8]) -> io::Result<()> {
        let mut done = 0;
        for (idx, within, n) in Self::pieces(off, src.len()) {
            let mut guard = self
                .slot(idx)?
                .write()
                .unwrap_or_else(PoisonError::into_inner);
            let c = guard.get_or_insert_with(|| {
                self.allocated.fetch_add(1, Ordering::Relaxed);
                new_chunk()
            });
            c[within..within + n].copy_from_slice(&src[done..done + n]);
            done += n;
        }
        Ok(())
    }

    /// Zeroes a range; whole chunks are freed unless `keep` asks to keep them allocated.
    fn zero(&self, off: u64, len: u64, keep: bool) -> io::Result<()> {
        let mut pos = off;
        let end = off + len;
        while pos < end {
            let idx = (pos / CHUNK as u64) as usize;
            let within = (pos % CHUNK as u64) as usize;
            let n = (CHUNK - within).min((end - pos).min(CHUNK as u64) as usize);
            let mut guard = self
                .slot(idx)?
                .write()
                .unwrap_or_else(PoisonError::into_inner);
            if n == CHUNK && !keep {
                if guard.take().is_some() {
                    self.allocated.fetch_sub(1, Ordering::Relaxed);
                }
            } else if let Some(c) = guard.as_mut() {
                c[within..within + n].fill(0);
            }
            pos += n as u64;
        }
        Ok(())
    }

    pub(crate) fn allocated_bytes(&self) -> u64 {
        self.allocated.load(Ordering::Relaxed) * CHUNK as u64
    }
}

fn new_chunk() -> Box<[u8; CHUNK]> {
    // A zeroed allocation straight on the heap (a `Box::new([0; CHUNK])` would build it on the
    // stack first).
    vec![0u8; CHUNK]
        .into_boxed_slice()
        .try_into()
        .unwrap_or_else(|_| unreachable!("vec of CHUNK bytes"))
}

impl Store {
    pub(crate) fn read(&self, off: u64, dst: &mut [u8]) -> io::Result<()> {
        match self {
            Store::Ram(r) => r.read(off, dst),
            Store::File(f) => f.read_exact_at(dst, off),
        }
    }

    pub(crate) fn write(&self, off: u64, src: &[u8], fua: bool) -> io::Result<()> {
        match self {
            Store::Ram(r) => r.write(off, src),
            Store::File(f) => {
                f.write_all_at(src, off)?;
                if fua {
                    f.sync_data()?;
                }
                Ok(())
            }
        }
    }

    pub(crate) fn flush(&self) -> io::Result<()> {
        match self {
            Store::Ram(_) => Ok(()),
            Store::File(f) => f.sync_data(),
        }
    }

    /// TRIM (`keep == false`) or WRITE_ZEROES (`keep` = NO_HOLE).
    pub(crate) fn zero(&self, off: u64, len: u64, keep: bool) -> io::Result<()> {
        match self {
            Store::Ram(r) => r.zero(off, len, keep),
            Store::File(f) => {
                let mode = if keep {
                    libc::FALLOC_FL_ZERO_RANGE
                } else {
                    libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE
                };
                // SAFETY: fallocate on a file descriptor we own; no memory is passed.
                let rc = unsafe { libc::fallocate(f.as_raw_fd(), mode, off as i64, len as i64) };
                if rc == 0 {
                    return Ok(());
                }
                // File systems without hole punching: write zeros.
                let zeros = vec![0u8; CHUNK];
                let mut pos = off;
                while pos < off + len {
                    let n = (off + len - pos).min(CHUNK as u64) as usize;
                    f.write_all_at(&zeros[..n], pos)?;
                    pos += n as u64;
                }
                Ok(())
            }
        }
    }

    pub(crate) fn allocated_bytes(&self) -> Option<u64> {
        match self {
            Store::Ram(r) => Some(r.allocated_bytes()),
            Store::File(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparse_reads_zero_and_writes_allocate() {
        let r = SparseRam::new(10 * CHUNK as u64 + 100);
        let mut b = vec![1u8; 3 * CHUNK];
        r.read(5, &mut b).unwrap();
        assert!(b.iter().all(|&x| x == 0));
        assert_eq!(r.allocated_bytes(), 0);
        let data: Vec<u8> = (0..2 * CHUNK + 10).map(|i| i as u8).collect();
        r.write(CHUNK as u64 - 5, &data).unwrap();
        assert_eq!(r.allocated_bytes(), 4 * CHUNK as u64);
        let mut back = vec![0u8; data.len()];
        r.read(CHUNK as u64 - 5, &mut back).unwrap();
        assert_eq!(back, data);
        // Trim the middle chunks: whole ones are freed, edges zeroed.
        r.zero(CHUNK as u64, 2 * CHUNK as u64, false).unwrap();
        assert_eq!(r.allocated_bytes(), 2 * CHUNK as u64);
        r.read(CHUNK as u64 - 5, &mut back).unwrap();
        assert_eq!(&back[..5], &data[..5]);
        assert!(back[5..5 + 2 * CHUNK].iter().all(|&x| x == 0));
    }

    #[test]
    fn huge_export_costs_only_its_table() {
        // 100 GiB: about SLOT_BYTES per 64 KiB.
        let r = SparseRam::new(100 << 30);
        assert_eq!(r.slots.len(), (100 << 30) / CHUNK);
        const { assert!(SLOT_BYTES <= 24) };
        let mut b = [0u8; 512];
        r.read((100 << 30) - 512, &mut b).unwrap();
        r.write((100 << 30) - 512, &[7; 512]).unwrap();
        assert_eq!(r.allocated_bytes(), CHUNK as u64);
    }
}
