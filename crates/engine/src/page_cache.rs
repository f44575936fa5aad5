//! Dropping a file's or block device's span from the page cache before a measured run, as fio's
//! `invalidate=1` does: without it, a read workload over a file that was just written (or read by
//! the previous cell of a comparison) measures memory, and the order of a comparison's cells
//! decides who gets the warm cache.
//!
//! `posix_fadvise(POSIX_FADV_DONTNEED)` drops only clean pages, so the span is written back
//! first (`fdatasync`). tmpfs pages cannot be dropped (they are the file); the call succeeds and
//! changes nothing there, as with fio.

use std::fs::File;
use std::os::fd::AsRawFd;

/// What the result's parameters say when the cache was dropped.
pub const DROPPED: &str = "page cache dropped for the span (posix_fadvise DONTNEED)";
/// What they say under `--no-invalidate`.
pub const KEPT: &str = "page cache kept (--no-invalidate)";

/// Writes back and drops `[0, span)` of `f` from the page cache.
pub fn drop_span(f: &File, span: u64) -> std::io::Result<()> {
    f.sync_data()?;
    let len = libc::off_t::try_from(span).unwrap_or(libc::off_t::MAX);
    // SAFETY: plain system call on an open fd; it reads no memory of ours.
    let r = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, len, libc::POSIX_FADV_DONTNEED) };
    if r != 0 {
        return Err(std::io::Error::from_raw_os_error(r));
    }
    Ok(())
}

/// How many of the pages of `[0, len)` of `f` are in the page cache (mincore(2)); for tests and
/// diagnostics. `f` must be a regular file at least `len` bytes long.
pub fn resident_pages(f: &File, len: usize) -> std::io::Result<usize> {
    if len == 0 {
        return Ok(0);
    }
    // SAFETY: sysconf has no memory effects.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
    // SAFETY: a fresh shared read-only mapping of the file; nothing else refers to it and it is
    // unmapped before returning. mincore does not touch (fault in) the pages.
    unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            f.as_raw_fd(),
            0,
        );
        if p == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let mut vec = vec![0u8; len.div_ceil(page)];
        let r = libc::mincore(p, len, vec.as_mut_ptr());
        let err = std::io::Error::last_os_error();
        libc::munmap(p, len);
        if r < 0 {
            return Err(err);
        }
        Ok(vec.iter().filter(|b| **b & 1 != 0).count())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn drop_span_evicts_resident_pages() {
        // A disk filesystem: tmpfs (/dev/shm) pages cannot be dropped.
        let dir = tempfile::tempdir_in("/var/tmp").unwrap();
        let p = dir.path().join("cached");
        let len = 4 << 20;
        std::fs::write(&p, vec![7u8; len]).unwrap();
        let mut f = File::open(&p).unwrap();
        let mut buf = Vec::new();
        f.read_to_end(&mut buf).unwrap();
        let pages = len / 4096;
        assert_eq!(resident_pages(&f, len).unwrap(), pages, "read it: resident");
        // Only the span goes: the second half stays.
        drop_span(&f, len as u64 / 2).unwrap();
        assert_eq!(resident_pages(&f, len).unwrap(), pages / 2);
        drop_span(&f, len as u64).unwrap();
        assert_eq!(resident_pages(&f, len).unwrap(), 0);
    }

    #[test]
    fn dirty_pages_are_written_back_then_dropped() {
        let dir = tempfile::tempdir_in("/var/tmp").unwrap();
        let p = dir.path().join("dirty");
        let len = 1 << 20;
        std::fs::write(&p, vec![1u8; len]).unwrap();
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&p)
            .unwrap();
        assert!(resident_pages(&f, len).unwrap() > 0);
        drop_span(&f, len as u64).unwrap();
        assert_eq!(resident_pages(&f, len).unwrap(), 0);
        assert_eq!(std::fs::read(&p).unwrap(), vec![1u8; len]);
    }
}
