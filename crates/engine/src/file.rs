//! Files and block devices: opening, creating, sizing, and choosing the engine that drives them.
//!
//! * A path that does not exist is created sparse at `--size` and marked `created`: the
//!   precondition step fills it with stamped unique data before anything is measured.
//! * Block devices are opened with O_DIRECT unless `--buffered`; regular files use the page cache
//!   unless `--direct`, as fio does. O_DIRECT alignment comes from the kernel
//!   ([`crate::blkdev`]), and which source gave it is recorded.
//! * Before any write to a block device, [`crate::safety`] refuses devices that are mounted or
//!   hold a filesystem or partition table, unless forced; and the device is opened with O_EXCL,
//!   so the kernel itself refuses one that is mounted or claimed (not overridable).
//! * Before each run the span is dropped from the page cache ([`crate::page_cache`]) unless
//!   `--no-invalidate`; holes are reported by SEEK_DATA ([`crate::holes`]).

use crate::poison;
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::Path;
use std::sync::{Arc, Mutex, Weak};

use crate::blkdev;
use crate::engine::{Allocation, Queue, QueueConfig, Target, TargetInfo};
use crate::error::EngineError;

/// Which engine drives a file or block device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum EngineKind {
    /// io_uring where the kernel offers it, the thread engine otherwise.
    #[default]
    Auto,
    Uring,
    Sync,
}

impl std::str::FromStr for EngineKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(EngineKind::Auto),
            "io_uring" | "uring" => Ok(EngineKind::Uring),
            "sync" | "psync" => Ok(EngineKind::Sync),
            _ => Err(format!("unknown engine '{s}' (use auto, io_uring or sync)")),
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct FileOptions {
    /// Size to create a missing file at (and to extend a shorter one to).
    pub size: Option<u64>,
    pub engine: EngineKind,
    /// `Some(true)` = O_DIRECT, `Some(false)` = page cache, `None` = the default for the kind.
    pub direct: Option<bool>,
    /// Write even to a device that holds data.
    pub force: bool,
    /// Whether the workload writes (decides the open mode and the safety check).
    pub writes: bool,
    /// Keep the span in the page cache between runs (`--no-invalidate`); by default it is
    /// dropped before each run (see [`crate::page_cache`]).
    pub keep_cache: bool,
}

/// An opened file or block device, shared by all queues.
pub struct FileTarget {
    info: TargetInfo,
    file: Arc<File>,
    kind: EngineKind,
    is_block: bool,
    /// How trims run (a discard on a block device, a punched hole in a file).
    trim: crate::discard::TrimHow,
    direct: bool,
    keep_cache: bool,
}

/// Opens a block device exclusively, or shares this process's open of it: the kernel refuses a
/// second exclusive open even to the same process, and a suite may drive one device as several
/// targets at once (`targets = [4, 8]`). Entries die with the last target holding the file.
fn shared_exclusive(
    rdev: u64,
    direct: bool,
    open: impl FnOnce() -> std::io::Result<File>,
) -> std::io::Result<Arc<File>> {
    static HELD: Mutex<Vec<(u64, bool, Weak<File>)>> = Mutex::new(Vec::new());
    let mut held = poison::lock(&HELD);
    held.retain(|(_, _, f)| f.strong_count() > 0);
    if let Some(f) = held
        .iter()
        .find(|(r, d, _)| (*r, *d) == (rdev, direct))
        .and_then(|(_, _, f)| f.upgrade())
    {
        return Ok(f);
    }
    let f = Arc::new(open()?);
    held.push((rdev, direct, Arc::downgrade(&f)));
    Ok(f)
}

/// Writes random data to `path` from `from` up to `to` bytes.
fn lay_out(path: &Path, from: u64, to: u64) -> Result<(), EngineError> {
    let open_err = |source| EngineError::Open {
        path: path.display().to_string(),
        source,
    };
    let mut f = OpenOptions::new()
        .create(true)
        .append(false)
        .write(true)
        .truncate(false)
        .open(path)
        .map_err(open_err)?;
    use std::io::{Seek, SeekFrom};
    f.seek(SeekFrom::Start(from)).map_err(open_err)?;
    let mut chunk = vec![0u8; 1 << 20];
    let mut pos = from;
    let mut seed = from ^ 0x5eed;
    while pos < to {
        let n = ((to - pos) as usize).min(chunk.len());
        seed = seed.wrapping_add(1);
        crate::arena::fill_random(&mut chunk[..n], seed);
        f.write_all(&chunk[..n]).map_err(|source| EngineError::Io {
            op: "lay out",
            offset: pos,
            source,
        })?;
        pos += n as u64;
    }
    f.sync_all().map_err(open_err)?;
    Ok(())
}

/// Creates a file of `size` bytes without writing it (a sparse file).
fn create_sparse(path: &Path, size: u64) -> Result<(), EngineError> {
    let open_err = |source| EngineError::Open {
        path: path.display().to_string(),
        source,
    };
    let f = OpenOptions::new()
        .create_new(true)
        .write(true)
        .open(path)
        .map_err(open_err)?;
    f.set_len(size).map_err(open_err)
}

impl FileTarget {
    pub fn open(uri: &str, path: &Path, opts: &FileOptions) -> Result<FileTarget, EngineError> {
        let shown = path.display().to_string();
        let meta = match std::fs::metadata(path) {
            Ok(m) => Some(m),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(source) => {
                return Err(EngineError::Open {
                    path: shown,
                    source,
                })
            }
        };
        let is_block = meta
            .as_ref()
            .is_some_and(|m| m.file_type().is_block_device());
        let mut laid_out = false;
        let mut created = false;
        match &meta {
            None => {
                let size = opts.size.ok_or_else(|| {
                    EngineError::Invalid(format!(
                        "{shown} does not exist; give --size to create it"
                    ))
                })?;
                // Created sparse: the precondition step (auto) writes it with stamped unique
                // data before anything is measured, and says so when it was told not to.
                create_sparse(path, size)?;
                created = true;
            }
            Some(m) if m.is_file() => {
                if let Some(size) = opts.size {
                    if m.len() < size {
                        lay_out(path, m.len(), size)?;
                        laid_out = true;
                    }
                }
            }
            Some(m) if m.file_type().is_block_device() => {}
            Some(_) => {
                return Err(EngineError::Invalid(format!(
                    "{shown} is neither a regular file nor a block device"
                )))
            }
        }
        if is_block && opts.writes && !opts.force {
            crate::safety::check_writable(path)?;
        }
        let direct = opts.direct.unwrap_or(is_block);
        let write = opts.writes || created;
        let mut oo = OpenOptions::new();
        // A file sanbench created is its own: open it writable so preconditioning can fill it
        // even for a workload that only reads.
        oo.read(true).write(write);
        let mut flags = if direct { libc::O_DIRECT } else { 0 };
        // O_EXCL on a block device: the kernel refuses it while it is mounted or claimed (a
        // filesystem, RAID, LVM, another exclusive opener), whatever the checks above missed
        // and whatever --force says.
        let exclusive = is_block && write;
        if exclusive {
            flags |= libc::O_EXCL;
        }
        oo.custom_flags(flags);
        let opened = match &meta {
            Some(m) if exclusive => shared_exclusive(m.rdev(), direct, || oo.open(path)),
            _ => oo.open(path).map(Arc::new),
        };
        let file = opened.map_err(|source| match source.raw_os_error() {
            Some(libc::EINVAL) if direct => EngineError::Invalid(format!(
                "{shown}: the filesystem does not support O_DIRECT; use --buffered"
            )),
            Some(libc::EBUSY) if exclusive => EngineError::Refused(format!(
                "refusing to write to {shown}: the kernel reports it busy (mounted, or claimed by a \
                 filesystem, RAID, LVM or another program); sanbench opens a block device it \
                 writes to exclusively (O_EXCL), so --force does not override this"
            )),
            _ => EngineError::Open {
                path: shown.clone(),
                source,
            },
        })?;
        let sys = |c: &str, e| EngineError::sys(format!("{shown}: {c}"), e);
        let (size, align) = if is_block {
            let logical = blkdev::logical_block(&file).map_err(|e| sys("BLKSSZGET", e))?;
            let physical = blkdev::physical_block(&file).ok();
            let dio = blkdev::dio_align(&file).ok().flatten();
            (
                blkdev::size64(&file).map_err(|e| sys("BLKGETSIZE64", e))?,
                blkdev::device_alignment(logical, physical, dio, direct, opts.writes),
            )
        } else {
            let len = file.metadata().map_err(|e| sys("stat", e))?.len();
            let align = blkdev::file_alignment(&file, direct).map_err(|e| sys("statx", e))?;
            (len, align)
        };
        if align.mem.is_some_and(|m| m as usize > crate::arena::ALIGN) {
            return Err(EngineError::Invalid(format!(
                "{shown}: O_DIRECT needs buffers aligned to {} bytes, more than sanbench's {}; \
                 use --buffered",
                align.mem.unwrap_or(0),
                crate::arena::ALIGN
            )));
        }
        let (kind, engine_note) = choose_engine(opts.engine, crate::uring::support())?;
        let mut params = BTreeMap::new();
        if let Some(n) = engine_note {
            params.insert("engine_note".into(), n.into());
        }
        params.insert("path".into(), shown.clone().into());
        params.insert(
            "kind".into(),
            if is_block { "block device" } else { "file" }.into(),
        );
        params.insert("direct".into(), direct.into());
        params.insert("laid_out".into(), laid_out.into());
        params.insert("created".into(), created.into());
        params.insert("alignment".into(), align.block.into());
        params.insert("alignment_source".into(), align.source.clone().into());
        if let Some(m) = align.mem {
            params.insert("dio_mem_align".into(), m.into());
        }
        if is_block {
            params.insert("exclusive".into(), exclusive.into());
        }
        let trim = match (is_block, opts.writes) {
            (true, true) => crate::discard::block_trim(&file),
            (true, false) => crate::discard::TrimHow::Ioctl,
            (false, _) => crate::discard::TrimHow::Fallocate,
        };
        if opts.writes {
            // The sync engine issues every trim on its worker threads, by BLKDISCARD.
            let uring = kind == EngineKind::Uring;
            let shown = match trim {
                crate::discard::TrimHow::UringCmd if !uring => crate::discard::TrimHow::Ioctl,
                t => t,
            };
            params.insert("discard".into(), shown.describe(uring).into());
        }
        Ok(FileTarget {
            info: TargetInfo {
                uri: uri.to_string(),
                engine: match kind {
                    EngineKind::Uring => "io_uring",
                    _ => "sync",
                }
                .into(),
                size,
                block_size: align.block,
                max_transfer: None,
                read_only: !opts.writes,
                params,
            },
            file,
            kind,
            is_block,
            trim,
            direct,
            keep_cache: opts.keep_cache,
        })
    }
}

/// Note on a target that asked for io_uring (or auto) on a kernel whose rings lack the
/// extended-argument wait (before 5.11): the sync engine runs it instead.
pub const NO_EXT_ARG_NOTE: &str = "io_uring without extended-argument wait (kernel before \
     5.11): the sync engine (pread/pwrite threads) ran this target instead";

/// The engine a file target runs on, and a note when it is not the one asked for.
fn choose_engine(
    asked: EngineKind,
    support: crate::uring::Support,
) -> Result<(EngineKind, Option<&'static str>), EngineError> {
    use crate::uring::Support;
    Ok(match (asked, support) {
        (EngineKind::Auto | EngineKind::Uring, Support::Full) => (EngineKind::Uring, None),
        (EngineKind::Auto | EngineKind::Uring, Support::NoExtArg) => {
            (EngineKind::Sync, Some(NO_EXT_ARG_NOTE))
        }
        (EngineKind::Auto, Support::Unavailable) => (EngineKind::Sync, None),
        (EngineKind::Uring, Support::Unavailable) => {
            return Err(EngineError::Invalid(
                "io_uring is not available on this kernel; use --engine sync".into(),
            ))
        }
        (k, _) => (k, None),
    })
}

impl Target for FileTarget {
    fn info(&self) -> &TargetInfo {
        &self.info
    }

    /// Trims and write-zeroes by fallocate (crate::discard); a file system or device that
    /// lacks a mode fails the first such I/O with EOPNOTSUPP.
    fn supports(&self, _op: crate::engine::Op) -> bool {
        true
    }

    /// Holes by SEEK_DATA (st_blocks where unsupported); block devices cannot tell.
    fn allocation(&self, offset: u64, len: u64) -> Result<Option<Allocation>, EngineError> {
        if self.is_block {
            return Ok(None);
        }
        crate::holes::allocation(&self.file, offset, len)
            .map(Some)
            .map_err(|e| EngineError::sys(format!("{}: SEEK_DATA", self.info.uri), e))
    }

    /// fdatasync + POSIX_FADV_DONTNEED over the span (fio's invalidate=1), unless
    /// `--no-invalidate`; nothing under O_DIRECT, which bypasses the cache.
    fn invalidate_cache(&self, span: u64) -> Result<Option<String>, EngineError> {
        if self.direct {
            return Ok(None);
        }
        if self.keep_cache {
            return Ok(Some(crate::page_cache::KEPT.into()));
        }
        crate::page_cache::drop_span(&self.file, span).map_err(|e| {
            EngineError::sys(
                format!("{}: dropping the page cache (posix_fadvise)", self.info.uri),
                e,
            )
        })?;
        Ok(Some(crate::page_cache::DROPPED.into()))
    }

    fn open_queue(&self, cfg: &QueueConfig) -> Result<Box<dyn Queue>, EngineError> {
        match self.kind {
            EngineKind::Uring => crate::uring::UringQueue::open(self.file.clone(), cfg)
                .map(|q| Box::new(q.with_trim(self.trim)) as Box<dyn Queue>),
            _ if self.is_block => Ok(Box::new(crate::sync::SyncQueue::open_block(
                self.file.clone(),
                cfg,
            ))),
            _ => Ok(Box::new(crate::sync::SyncQueue::open(
                self.file.clone(),
                cfg,
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::uring::Support;

    #[test]
    fn io_uring_without_ext_arg_falls_back_to_sync_with_a_note() {
        for asked in [EngineKind::Auto, EngineKind::Uring] {
            assert_eq!(
                choose_engine(asked, Support::NoExtArg).unwrap(),
                (EngineKind::Sync, Some(NO_EXT_ARG_NOTE))
            );
            assert_eq!(
                choose_engine(asked, Support::Full).unwrap(),
                (EngineKind::Uring, None)
            );
        }
        assert_eq!(
            choose_engine(EngineKind::Auto, Support::Unavailable).unwrap(),
            (EngineKind::Sync, None)
        );
        let e = choose_engine(EngineKind::Uring, Support::Unavailable).unwrap_err();
        assert!(e.is_usage(), "{e}");
        assert_eq!(
            choose_engine(EngineKind::Sync, Support::Full).unwrap(),
            (EngineKind::Sync, None)
        );
    }
}
