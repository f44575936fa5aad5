//! Which part of a file was never written: holes read as zeros without touching the disk, so a
//! read workload over them measures the filesystem's zero-fill, not storage.
//!
//! `lseek(SEEK_DATA)` / `lseek(SEEK_HOLE)` walk the extents of the range exactly. Where the
//! filesystem does not support them (EINVAL), `st_blocks * 512` against the file size gives the
//! file's unwritten bytes, counted against the range as an estimate.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;

use crate::engine::Allocation;

fn seek(f: &File, pos: u64, whence: libc::c_int) -> std::io::Result<Option<u64>> {
    // SAFETY: lseek on an open fd. It moves the fd's position, which no engine uses (all I/O is
    // positioned: pread/pwrite, io_uring with offsets).
    let r = unsafe { libc::lseek(f.as_raw_fd(), pos as libc::off_t, whence) };
    if r < 0 {
        let e = std::io::Error::last_os_error();
        // ENXIO: no data (SEEK_DATA) at or after `pos`.
        return match e.raw_os_error() {
            Some(libc::ENXIO) => Ok(None),
            _ => Err(e),
        };
    }
    Ok(Some(r as u64))
}

/// Holes in `[offset, offset + len)` of `f` (clipped to its size).
pub fn allocation(f: &File, offset: u64, len: u64) -> std::io::Result<Allocation> {
    let size = f.metadata()?.len();
    let end = offset.saturating_add(len).min(size);
    let start = offset.min(end);
    match walk(f, start, end) {
        Ok(unwritten) => Ok(Allocation {
            method: "SEEK_DATA".into(),
            checked_bytes: end - start,
            unwritten_bytes: unwritten,
        }),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            let m = f.metadata()?;
            let holes = size.saturating_sub(m.blocks() * 512);
            Ok(Allocation {
                method: "st_blocks".into(),
                checked_bytes: end - start,
                unwritten_bytes: holes.min(end - start),
            })
        }
        Err(e) => Err(e),
    }
}

fn walk(f: &File, start: u64, end: u64) -> std::io::Result<u64> {
    let mut pos = start;
    let mut holes = 0;
    while pos < end {
        let data = match seek(f, pos, libc::SEEK_DATA)? {
            Some(d) if d < end => d,
            _ => {
                holes += end - pos;
                break;
            }
        };
        holes += data - pos;
        // Every file ends in an implicit hole, so SEEK_HOLE after data always answers.
        let hole = seek(f, data, libc::SEEK_HOLE)?.unwrap_or(end);
        pos = hole.min(end).max(data + 1);
    }
    Ok(holes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileExt;

    fn sparse(dir: &std::path::Path) -> File {
        let p = dir.join("sparse");
        let f = std::fs::OpenOptions::new()
            .create(true)
            .read(true)
            .write(true)
            .truncate(true)
            .open(p)
            .unwrap();
        f.set_len(1 << 20).unwrap();
        // 64 KiB of data at 256 KiB and 4 KiB at the very end.
        f.write_all_at(&[1u8; 65536], 256 << 10).unwrap();
        f.write_all_at(&[2u8; 4096], (1 << 20) - 4096).unwrap();
        f.sync_all().unwrap();
        f
    }

    #[test]
    fn counts_the_holes_of_a_sparse_file() {
        for base in ["/var/tmp", "/dev/shm"] {
            let dir = tempfile::tempdir_in(base).unwrap();
            let f = sparse(dir.path());
            let a = allocation(&f, 0, 1 << 20).unwrap();
            assert_eq!(a.method, "SEEK_DATA", "{base}");
            assert_eq!(a.checked_bytes, 1 << 20);
            assert_eq!(a.unwritten_bytes, (1 << 20) - 65536 - 4096, "{base}");
            // A range inside the data, one across its start, one past the end of the file.
            assert_eq!(allocation(&f, 256 << 10, 65536).unwrap().unwritten_bytes, 0);
            assert_eq!(
                allocation(&f, 252 << 10, 8192).unwrap().unwritten_bytes,
                4096
            );
            let past = allocation(&f, (1 << 20) - 8192, 1 << 30).unwrap();
            assert_eq!((past.checked_bytes, past.unwritten_bytes), (8192, 4096));
        }
    }

    #[test]
    fn a_written_file_has_no_holes() {
        let dir = tempfile::tempdir_in("/var/tmp").unwrap();
        let p = dir.path().join("full");
        std::fs::write(&p, vec![3u8; 300_000]).unwrap();
        let f = File::open(&p).unwrap();
        let a = allocation(&f, 0, 1 << 40).unwrap();
        assert_eq!((a.checked_bytes, a.unwritten_bytes), (300_000, 0));
    }
}
