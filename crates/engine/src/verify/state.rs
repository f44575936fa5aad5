//! `--verify-state FILE`: the generation map kept in a file, so that verification survives a
//! target restart, a crash of sanbench or of the target's host.
//!
//! Layout: a 64-byte header (magic "SBVSTAT1", run id, unit, granule, span, cells), then the
//! current map (one byte per granule, as in memory: generation, EITHER, BUSY) and the durable
//! map (the generation of each granule known to have reached stable storage: written, then
//! covered by a completed flush). Both arrays are the file's pages mapped shared, so every
//! store is in the page cache at once (a killed sanbench or target loses nothing); the
//! durable array is synced to the file (msync) after it changes at a flush point.
//!
//! After a crash, a block verifies when it holds its current generation, or (when the write
//! was never confirmed) the one before, or its durable generation: the fsynced policy of fio,
//! applied per block.

use std::fs::{File, OpenOptions};
use std::path::Path;
use std::sync::atomic::AtomicU8;

use crate::error::EngineError;

const MAGIC: &[u8; 8] = b"SBVSTAT1";
const HEADER: usize = 64;

/// Cells in memory or in a shared file mapping.
pub enum Cells {
    Heap(Box<[AtomicU8]>),
    Mapped { ptr: *mut u8, len: usize },
}

// SAFETY: the mapping is owned by this value and only accessed through atomics.
unsafe impl Send for Cells {}
// SAFETY: as above.
unsafe impl Sync for Cells {}

impl Cells {
    pub fn heap(n: usize) -> Cells {
        Cells::Heap((0..n).map(|_| AtomicU8::new(0)).collect())
    }

    #[inline]
    pub fn as_slice(&self) -> &[AtomicU8] {
        match self {
            Cells::Heap(b) => b,
            // SAFETY: `ptr` maps `len` bytes for as long as self lives; AtomicU8 has the
            // layout of u8.
            Cells::Mapped { ptr, len } => unsafe {
                std::slice::from_raw_parts(*ptr as *const AtomicU8, *len)
            },
        }
    }

    /// Writes mapped cells back to the file (no-op in memory).
    pub fn sync(&self) {
        if let Cells::Mapped { ptr, len } = self {
            let page = 4096usize;
            let start = (*ptr as usize) / page * page;
            let end = *ptr as usize + *len;
            // SAFETY: the range lies within (or at the page start of) our mapping.
            unsafe { libc::msync(start as *mut libc::c_void, end - start, libc::MS_SYNC) };
        }
    }
}

/// The whole mapping of a state file; the two arrays point into it.
pub struct Mapping {
    base: *mut u8,
    len: usize,
    _file: File,
}

// SAFETY: the mapping lives as long as this value; access goes through atomics.
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: mapped in `map` with this length.
        unsafe {
            libc::msync(self.base.cast(), self.len, libc::MS_SYNC);
            libc::munmap(self.base.cast(), self.len);
        }
    }
}

/// What a state file says about its session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    pub run_id: u64,
    pub unit: u32,
    pub granule: u64,
    pub span: u64,
    pub cells: u64,
}

fn err(path: &Path, what: &str, e: std::io::Error) -> EngineError {
    EngineError::sys(format!("--verify-state {}: {what}", path.display()), e)
}

fn bad(path: &Path, what: String) -> EngineError {
    EngineError::Invalid(format!("--verify-state {}: {what}", path.display()))
}

/// Reads a state file's geometry, `Ok(None)` when the file does not exist.
pub fn read_geometry(path: &Path) -> Result<Option<Geometry>, EngineError> {
    use std::io::Read;
    let mut f = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(err(path, "cannot open", e)),
    };
    let mut h = [0u8; HEADER];
    f.read_exact(&mut h)
        .map_err(|_| bad(path, "not a sanbench verification state (too short)".into()))?;
    if &h[0..8] != MAGIC {
        return Err(bad(path, "not a sanbench verification state".into()));
    }
    let u = |i: usize| u64::from_le_bytes(h[i..i + 8].try_into().unwrap_or_default());
    let g = Geometry {
        run_id: u(8),
        unit: u(16) as u32,
        granule: u(24),
        span: u(32),
        cells: u(40),
    };
    let len = f.metadata().map_err(|e| err(path, "cannot stat", e))?.len();
    if !g.granule.is_power_of_two()
        || g.unit == 0
        || g.cells != g.span.div_ceil(g.granule)
        || len != HEADER as u64 + 2 * g.cells
    {
        return Err(bad(
            path,
            "header and size do not agree (damaged file)".into(),
        ));
    }
    Ok(Some(g))
}

/// Granule `i`'s cell in the current map of the state file at `path` (generation, EITHER and
/// BUSY bits, as [`super::map`] keeps them), read without mapping the file: what a test or a
/// tool inspecting a stopped run's state sees. `Ok(None)` when the file does not exist.
pub fn read_current_cell(path: &Path, i: u64) -> Result<Option<u8>, EngineError> {
    use std::io::{Read, Seek, SeekFrom};
    let Some(g) = read_geometry(path)? else {
        return Ok(None);
    };
    if i >= g.cells {
        return Err(bad(
            path,
            format!("granule {i} is past its {} cells", g.cells),
        ));
    }
    let mut f = File::open(path).map_err(|e| err(path, "cannot open", e))?;
    let mut b = [0u8; 1];
    f.seek(SeekFrom::Start(HEADER as u64 + i))
        .and_then(|_| f.read_exact(&mut b))
        .map_err(|e| err(path, "cannot read", e))?;
    Ok(Some(b[0]))
}

/// Maps the state file at `path`: creates it for `g` when missing (both maps zero), or opens
/// it when its geometry is `g`'s. Returns the mapping and the two arrays.
pub fn map(path: &Path, g: Geometry, create: bool) -> Result<(Mapping, Cells, Cells), EngineError> {
    let len = HEADER + 2 * g.cells as usize;
    let file = if create {
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(|e| err(path, "cannot create", e))?;
        let mut h = [0u8; HEADER];
        h[0..8].copy_from_slice(MAGIC);
        for (i, v) in [g.run_id, g.unit as u64, g.granule, g.span, g.cells]
            .into_iter()
            .enumerate()
        {
            h[8 + i * 8..16 + i * 8].copy_from_slice(&v.to_le_bytes());
        }
        use std::io::Write;
        (&f).write_all(&h)
            .map_err(|e| err(path, "cannot write", e))?;
        f.set_len(len as u64)
            .map_err(|e| err(path, "cannot size", e))?;
        f
    } else {
        OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| err(path, "cannot open", e))?
    };
    use std::os::fd::AsRawFd;
    // SAFETY: a shared read-write mapping of the whole file, which has `len` bytes.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        )
    };
    if base == libc::MAP_FAILED {
        return Err(err(path, "cannot map", std::io::Error::last_os_error()));
    }
    let base = base as *mut u8;
    let n = g.cells as usize;
    // SAFETY: both arrays lie inside the mapping.
    let (cur, dur) = unsafe { (base.add(HEADER), base.add(HEADER + n)) };
    Ok((
        Mapping {
            base,
            len,
            _file: file,
        },
        Cells::Mapped { ptr: cur, len: n },
        Cells::Mapped { ptr: dur, len: n },
    ))
}

#[cfg(test)]
mod tests {
    use super::super::map::EITHER;
    use super::super::Verifier;
    use super::*;
    use std::sync::atomic::Ordering;

    #[test]
    fn a_cell_reads_back_from_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.vs");
        assert_eq!(read_current_cell(&path, 0).unwrap(), None);
        let g = Geometry {
            run_id: 7,
            unit: 4096,
            granule: 4096,
            span: 10 * 4096,
            cells: 10,
        };
        let (_m, cur, dur) = map(&path, g, true).unwrap();
        cur.as_slice()[3].store(5 | EITHER, Ordering::Relaxed);
        dur.as_slice()[3].store(9, Ordering::Relaxed);
        assert_eq!(read_current_cell(&path, 3).unwrap(), Some(5 | EITHER));
        assert_eq!(read_current_cell(&path, 2).unwrap(), Some(0));
        let e = read_current_cell(&path, 10).unwrap_err().to_string();
        assert!(e.contains("past its 10 cells"), "{e}");
    }

    #[test]
    fn a_state_kept_for_another_geometry_is_refused_in_one_sentence() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.vs");
        let (_, resumed) = Verifier::with_state(&path, 1, 4096, 4096, 1 << 20).unwrap();
        assert!(!resumed);
        let (_, resumed) = Verifier::with_state(&path, 2, 4096, 4096, 1 << 20).unwrap();
        assert!(resumed, "the same geometry continues the session");
        let e = match Verifier::with_state(&path, 3, 4096, 4096, 2 << 20) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("a state file of another span was accepted"),
        };
        assert!(
            e.ends_with(
                "kept for a span of 1048576 B in 4096 B granules of 4096 B units, not this \
                 run's 2097152 B, 4096 B, 4096 B (another file, or remove it to start over)"
            ),
            "{e}"
        );
    }
}
