//! A file (or block device) as the store: `pread`/`pwrite`, `fdatasync` for FLUSH and FUA,
//! `fallocate` for trim and zeroing, `SEEK_DATA`/`SEEK_HOLE` for the allocation query.

use std::fs::File;
use std::io;
use std::mem::MaybeUninit;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::os::unix::io::AsRawFd;

use crate::StoreError;

pub struct FileStore {
    file: File,
    size: u64,
}

impl FileStore {
    /// Serves `size` bytes of `file`; reads past the file's end give zeros. With `prealloc`
    /// the file system allocates every block now (`fallocate`).
    pub fn new(file: File, size: u64, prealloc: bool) -> Result<FileStore, StoreError> {
        if prealloc && size > 0 {
            // SAFETY: fallocate on a descriptor we own; no memory is passed.
            let rc = unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, size as libc::off_t) };
            if rc != 0 {
                return Err(StoreError::Io {
                    what: "preallocate the file".into(),
                    source: io::Error::last_os_error(),
                });
            }
        }
        Ok(FileStore { file, size })
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    fn check(&self, off: u64, len: u64) -> io::Result<()> {
        match off.checked_add(len) {
            Some(end) if end <= self.size => Ok(()),
            _ => Err(io::Error::from_raw_os_error(libc::EINVAL)),
        }
    }

    pub fn read_uninit<'a>(
        &self,
        off: u64,
        dst: &'a mut [MaybeUninit<u8>],
    ) -> io::Result<&'a mut [u8]> {
        self.check(off, dst.len() as u64)?;
        let (base, len) = (dst.as_mut_ptr().cast::<u8>(), dst.len());
        let mut done = 0;
        while done < len {
            // SAFETY: the kernel writes at most `len - done` bytes at `base + done`, inside
            // `dst`; pread never reads the buffer, so its being uninitialised is fine.
            let n = unsafe {
                libc::pread(
                    self.file.as_raw_fd(),
                    base.add(done).cast(),
                    len - done,
                    (off + done as u64) as libc::off_t,
                )
            };
            if n > 0 {
                done += n as usize;
            } else if n == 0 {
                // Past the file's end (a sparse or short file) reads as zeros.
                // SAFETY: `base + done .. base + len` lies inside `dst`.
                unsafe { std::ptr::write_bytes(base.add(done), 0, len - done) };
                done = len;
            } else {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
        // SAFETY: all `len` bytes were written by pread or write_bytes above.
        Ok(unsafe { std::slice::from_raw_parts_mut(base, len) })
    }

    pub fn write(&self, off: u64, src: &[u8], fua: bool) -> io::Result<()> {
        self.check(off, src.len() as u64)?;
        self.file.write_all_at(src, off)?;
        if fua {
            self.file.sync_data()?;
        }
        Ok(())
    }

    pub fn flush(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    pub fn zero(&self, off: u64, len: u64, keep_allocated: bool) -> io::Result<()> {
        if self.zero_fast(off, len, keep_allocated).is_ok() {
            return Ok(());
        }
        self.check(off, len)?;
        // File systems (and devices) without these modes: write zeros.
        let zeros = vec![0u8; (len as usize).min(1 << 20)];
        let mut pos = 0;
        while pos < len {
            let n = (len - pos).min(zeros.len() as u64) as usize;
            self.file.write_all_at(&zeros[..n], off + pos)?;
            pos += n as u64;
        }
        Ok(())
    }

    /// Zeroes a range by fallocate alone: EOPNOTSUPP where the file system cannot.
    pub fn zero_fast(&self, off: u64, len: u64, keep_allocated: bool) -> io::Result<()> {
        self.check(off, len)?;
        let mode = if keep_allocated {
            libc::FALLOC_FL_ZERO_RANGE
        } else {
            libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE
        };
        // SAFETY: fallocate on a descriptor we own; no memory is passed.
        let rc = unsafe {
            libc::fallocate(
                self.file.as_raw_fd(),
                mode,
                off as libc::off_t,
                len as libc::off_t,
            )
        };
        if rc == 0 {
            return Ok(());
        }
        Err(io::Error::from_raw_os_error(libc::EOPNOTSUPP))
    }

    /// Bytes the file system allocated to the file (`st_blocks`).
    pub fn allocated_bytes(&self) -> u64 {
        self.file.metadata().map_or(0, |m| m.blocks() * 512)
    }

    /// Data or hole at `off`, from `SEEK_DATA`/`SEEK_HOLE`; a file system that cannot tell
    /// reports data.
    pub fn mapped(&self, off: u64, len: u64) -> (bool, u64) {
        let end = off.saturating_add(len).min(self.size);
        if off >= end {
            return (false, end);
        }
        let fd = self.file.as_raw_fd();
        // SAFETY: lseek on a descriptor we own. It moves the file offset, which nothing here
        // uses (all I/O is positional).
        let data = unsafe { libc::lseek(fd, off as libc::off_t, libc::SEEK_DATA) };
        if data < 0 {
            let hole = io::Error::last_os_error().raw_os_error() == Some(libc::ENXIO);
            return (!hole, end);
        }
        if data as u64 > off {
            return (false, (data as u64).min(end));
        }
        // SAFETY: as above.
        let hole = unsafe { libc::lseek(fd, off as libc::off_t, libc::SEEK_HOLE) };
        if hole < 0 {
            return (true, end);
        }
        (true, (hole as u64).clamp(off + 1, end))
    }
}
