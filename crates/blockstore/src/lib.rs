//! The one block store behind sanbench's own servers (`serve nbd` and `serve iscsi`).
//!
//! # Why it exists
//!
//! A comparison "NBD vs iSCSI" run against sanbench's built-in servers must differ only by
//! transport. The two servers used to keep their data in two different sparse stores (one
//! with a reader-writer lock per chunk and `memcpy`, one with lock-free chunks copied word by
//! word through atomics), so part of any difference measured was the store. Both now serve
//! a [`BlockStore`]: same chunking, same allocation policy, same copy, same trim.
//!
//! # What it is
//!
//! [`BlockStore::Ram`] is sparse memory ([`SparseRam`]): the export is cut into [`CHUNK`]
//! (64 KiB) chunks held in a lock-free table (`AtomicPtr` per chunk, installed with
//! `compare_exchange`, never freed while the store lives). No lock is shared by connections:
//! a read or write is one `memcpy` per chunk it touches. Concurrent overlapping I/O gives
//! torn-but-defined bytes, as a disk would (see `ram.rs`). Chunks are allocated as written
//! by default; with `prealloc` every chunk is allocated and touched at creation, so no
//! first-touch page fault ever lands inside a measurement. Trim makes whole chunks holes and
//! hands their pages back (`MADV_DONTNEED`; with `prealloc` they are zeroed and kept);
//! WRITE_ZEROES with `keep_allocated` zeroes in place and keeps the range allocated.
//! [`BlockStore::File`] is a file: `pread`/`pwrite`, `fdatasync`, `fallocate`,
//! `SEEK_DATA`/`SEEK_HOLE`.
//!
//! [`BlockStore::mapped`] answers "is this range allocated, and up to where": what iSCSI's
//! GET LBA STATUS and NBD's `base:allocation` block status both report.
//!
//! Reads go into memory that need not be initialised ([`BlockStore::read_uninit`],
//! [`BlockStore::read_append`]): a server appends the bytes straight into its reply buffer
//! without zero-filling it first. Or it does not copy at all: [`out::Out`], the output of the
//! NVMe/TCP and iSCSI targets, sends read data from where it lies ([`BlockStore::iovecs`]).
//!
//! [`delay::DueQueue`] is the servers' other shared part: the replies `serve --delay` holds
//! per connection until they fall due.
//!
//! # Memory model (RAM)
//!
//! ```text
//! memory = 64 KiB x chunks written (not trimmed since), or x all chunks with prealloc
//!        + 8 bytes + 1 bit of table per 64 KiB of size (13 MiB per 100 GiB; calloc'd, so
//!          table pages never touched cost nothing)
//!        + per connection, in the servers:
//!            NBD:   256 KiB receive buffer + a reply buffer of one batch: 64 KiB at start,
//!                   up to 1 MiB + the largest READ (at most the maximum payload, 32 MiB)
//!            iSCSI: 1 MiB receive buffer (grown to the largest PDU) + a reply buffer of
//!                   headers and copied bytes (1 MiB at start, sent at 1 MiB) + the iovecs
//!                   of read data referenced in the store (sent at 8 MiB) + Data-Out of
//!                   unfinished writes, at most 256 MiB
//!            NVMe:  1 MiB receive buffer (written at start) + a reply buffer of headers and
//!                   copied bytes (256 KiB at start, sent at 1 MiB) + the iovecs of read data
//!                   referenced in the store (`iovecs`, sent at 8 MiB) + H2CData of
//!                   unfinished writes
//! ```
//!
//! A 4 KiB write to an unwritten chunk costs a whole 64 KiB chunk. [`BlockStore::allocated_bytes`]
//! reports the first line (for a file: the bytes the file system allocated to it).
//!
//! # Telling clients it is sanbench's own
//!
//! The servers built on this store say so, and clients rely on it to know that the target is
//! a scratch disk they may overwrite: the NBD export description contains "sanbench"
//! ("sanbench RAM disk", "sanbench file"), and the iSCSI target's standard INQUIRY T10 vendor
//! identification is `SANBENCH`. Keep both when changing the servers.

pub mod counters;
pub mod delay;
mod file;
pub mod out;
pub mod portals;
mod ram;

use std::fs::{File, OpenOptions};
use std::io;
use std::mem::MaybeUninit;
use std::path::Path;

use thiserror::Error;

pub use file::FileStore;

/// Opens a server's backing file: for reading and, with `write`, writing, created when
/// `create`, never truncated. Returns it with its current length (what a size of 0 means).
pub fn open_backing(path: &Path, write: bool, create: bool) -> io::Result<(File, u64)> {
    let f = OpenOptions::new()
        .read(true)
        .write(write)
        .create(create)
        .truncate(false)
        .open(path)?;
    let len = f.metadata()?.len();
    Ok((f, len))
}
pub use ram::{SparseRam, CHUNK, TABLE_BITS_PER_CHUNK};

/// Why a store could not be created.
#[derive(Debug, Error)]
pub enum StoreError {
    #[error("a store this large does not fit in the address space")]
    TooLarge,
    #[error(
        "preallocating {wanted} bytes needs more than the {available} bytes of memory available"
    )]
    PreallocTooBig { wanted: u64, available: u64 },
    #[error("out of memory after preallocating {done} of {wanted} bytes")]
    OutOfMemory { done: u64, wanted: u64 },
    #[error("cannot {what}: {source}")]
    Io {
        what: String,
        #[source]
        source: io::Error,
    },
}

/// Where a server's bytes live.
pub enum BlockStore {
    Ram(SparseRam),
    File(FileStore),
}

impl BlockStore {
    /// Sparse RAM of `size` bytes, allocated as written, or all at once with `prealloc`.
    pub fn ram(size: u64, prealloc: bool) -> Result<BlockStore, StoreError> {
        SparseRam::new(size, prealloc).map(BlockStore::Ram)
    }

    /// `size` bytes of `file` (reads past its end give zeros); `prealloc` allocates every
    /// block now.
    pub fn file(file: File, size: u64, prealloc: bool) -> Result<BlockStore, StoreError> {
        FileStore::new(file, size, prealloc).map(BlockStore::File)
    }

    pub fn size(&self) -> u64 {
        match self {
            BlockStore::Ram(r) => r.size(),
            BlockStore::File(f) => f.size(),
        }
    }

    pub fn is_ram(&self) -> bool {
        matches!(self, BlockStore::Ram(_))
    }

    /// Reads `dst.len()` bytes at `off` into memory that may be uninitialised and returns it
    /// initialised. Out of range is `EINVAL`.
    pub fn read_uninit<'a>(
        &self,
        off: u64,
        dst: &'a mut [MaybeUninit<u8>],
    ) -> io::Result<&'a mut [u8]> {
        match self {
            BlockStore::Ram(r) => r.read_uninit(off, dst),
            BlockStore::File(f) => f.read_uninit(off, dst),
        }
    }

    /// Reads into an initialised buffer.
    pub fn read(&self, off: u64, dst: &mut [u8]) -> io::Result<()> {
        // SAFETY: `[u8]` and `[MaybeUninit<u8>]` have the same layout, and read_uninit only
        // ever stores initialised bytes, so `dst` stays initialised.
        let d = unsafe { &mut *(dst as *mut [u8] as *mut [MaybeUninit<u8>]) };
        self.read_uninit(off, d).map(|_| ())
    }

    /// Appends `len` bytes read at `off` to `out`, without zero-filling them first. On error
    /// `out` is left as it was.
    pub fn read_append(&self, off: u64, len: usize, out: &mut Vec<u8>) -> io::Result<()> {
        let at = out.len();
        out.reserve(len);
        let n = self
            .read_uninit(off, &mut out.spare_capacity_mut()[..len])?
            .len();
        debug_assert_eq!(n, len);
        // SAFETY: read_uninit initialised the `len` bytes after `at` (it returns only after
        // writing every byte of the slice it was given), and reserve made room for them.
        unsafe { out.set_len(at + len) };
        Ok(())
    }

    /// For a zero-copy send: appends to `out` where the bytes of `[off, off+len)` lie in memory
    /// ([`SparseRam::iovecs`]: valid while the store lives, for the kernel to read) and returns
    /// true; a file store has no such memory, appends nothing and returns false (the caller
    /// copies with [`BlockStore::read_append`]). Out of range is `EINVAL`.
    pub fn iovecs(&self, off: u64, len: usize, out: &mut Vec<libc::iovec>) -> io::Result<bool> {
        match self {
            BlockStore::Ram(r) => r.iovecs(off, len, out).map(|()| true),
            BlockStore::File(_) => Ok(false),
        }
    }

    /// Writes `src` at `off`; `fua` forces it to stable storage (a file) before returning.
    pub fn write(&self, off: u64, src: &[u8], fua: bool) -> io::Result<()> {
        match self {
            BlockStore::Ram(r) => r.write(off, src),
            BlockStore::File(f) => f.write(off, src, fua),
        }
    }

    /// Makes written data stable (a file's `fdatasync`; nothing to do for RAM).
    pub fn flush(&self) -> io::Result<()> {
        match self {
            BlockStore::Ram(_) => Ok(()),
            BlockStore::File(f) => f.flush(),
        }
    }

    /// Zeroes a range. `keep_allocated == false` is TRIM / UNMAP / WRITE_ZEROES without
    /// NO_HOLE: whole chunks become holes and give their memory back. `true` keeps (or makes)
    /// the range allocated.
    pub fn zero(&self, off: u64, len: u64, keep_allocated: bool) -> io::Result<()> {
        match self {
            BlockStore::Ram(r) => r.zero(off, len, keep_allocated),
            BlockStore::File(f) => f.zero(off, len, keep_allocated),
        }
    }

    /// As [`zero`](Self::zero), but fails with EOPNOTSUPP where zeroing would mean writing
    /// the zeros out (a file system without fallocate's modes): NBD's FAST_ZERO, which asks
    /// the server to refuse rather than be slow.
    pub fn zero_fast(&self, off: u64, len: u64, keep_allocated: bool) -> io::Result<()> {
        match self {
            BlockStore::Ram(r) => r.zero(off, len, keep_allocated),
            BlockStore::File(f) => f.zero_fast(off, len, keep_allocated),
        }
    }

    /// TRIM / UNMAP: `zero(off, len, false)`.
    pub fn trim(&self, off: u64, len: u64) -> io::Result<()> {
        self.zero(off, len, false)
    }

    /// Bytes of memory (RAM) or disk (file) holding the store's data.
    pub fn allocated_bytes(&self) -> u64 {
        match self {
            BlockStore::Ram(r) => r.allocated_bytes(),
            BlockStore::File(f) => f.allocated_bytes(),
        }
    }

    /// Allocation at `off`: `(true, end)` when `[off, end)` holds data, `(false, end)` when it
    /// is a hole that reads as zeros; `end` is where that state ends, at most `off + len` and
    /// the size. `off` must be below the size (otherwise `end == off`).
    pub fn mapped(&self, off: u64, len: u64) -> (bool, u64) {
        match self {
            BlockStore::Ram(r) => r.mapped(off, len),
            BlockStore::File(f) => f.mapped(off, len),
        }
    }
}
