//! `sg:/dev/sgN`: SCSI commands through the SCSI generic driver's `SG_IO`, on a thread per
//! slot of the queue (the request blocks; io_uring has no SCSI passthrough command). The disk's
//! upper block layer (sd, bio, I/O scheduler) is not on the path; the request still goes
//! through the SCSI midlayer to the host driver, so beside the disk's block device it
//! separates what the block layer costs.
//!
//! * Geometry and offers: INQUIRY (a disk, device type 0), READ CAPACITY(16), and the Block
//!   Limits and Logical Block Provisioning VPD pages, read into the same [`Discard`] policy the
//!   iSCSI initiator uses (UNMAP where LBPU, else WRITE SAME(16) with UNMAP where LBPWS;
//!   zeroing by WRITE SAME(16) of one zero block).
//! * Commands: READ(16), WRITE(16) (FUA), SYNCHRONIZE CACHE(16), UNMAP and WRITE SAME(16)
//!   (a range beyond one command's limit goes as several, in turn, on the slot's thread).
//! * Failures: the SCSI status, host status and decoded sense data ([`io_hdr::Outcome`]) give
//!   the errno and the line kept in the queue's `last_failure`.
//! * The disk's block device ([`sysfs`]) is named in the parameters (`block_device`).

pub mod io_hdr;
mod pool;

pub use pool::SG_THREAD_PREFIX;
pub mod sysfs;

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::sync::Arc;

use sanbench_io::engine::{Io, Op, Queue, QueueConfig, Target, TargetInfo};
use sanbench_io::{Arena, EngineError};

use crate::initiator::discard::{Discard, TrimBy};
use crate::scsi::cdb::{Cdb, CdbLen};
use crate::scsi::vpd::{BlockLimits, Provisioning};
use io_hdr::{dir, Outcome, SgIoHdr};

/// The target's `kind` parameter.
pub const KIND: &str = "scsi passthrough";

/// Timeout of the commands asked while opening.
const PROBE_TIMEOUT_MS: u32 = 10_000;

/// One command on `f`: the CDB, the data (direction, buffer) and the timeout. `Err` only when
/// the ioctl itself failed (the command never reached the device).
pub fn sg_io(
    f: &File,
    cdb: &Cdb,
    direction: i32,
    data: (*mut u8, u32),
    timeout_ms: u32,
) -> std::io::Result<Outcome> {
    let (bytes, n) = cdb.encode();
    let mut sense = [0u8; 64];
    let mut h = SgIoHdr::new(&bytes[..n], direction, data, &mut sense, timeout_ms);
    loop {
        // SAFETY: SG_IO reads the header, the CDB and `data.1` bytes at `data.0` (or writes
        // them), and writes at most `mx_sb_len` bytes of sense; the CDB, the sense buffer and
        // the data (the caller's) outlive the blocking call.
        let r = unsafe { libc::ioctl(f.as_raw_fd(), io_hdr::SG_IO as _, &mut h as *mut SgIoHdr) };
        if r == 0 {
            return Ok(Outcome::read(&h, &sense));
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// An opened SCSI generic device.
pub struct SgTarget {
    info: TargetInfo,
    file: Arc<File>,
    geo: Geometry,
}

/// What every command needs to know of the disk.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Geometry {
    pub block: u32,
    pub disc: Discard,
    pub timeout_ms: u32,
}

fn be32(b: &[u8], o: usize) -> u32 {
    u32::from_be_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}

impl SgTarget {
    /// Opens `path` (read-write when the workload writes). Not a SCSI generic device, or not a
    /// disk: `Invalid` (the CLI exits 2).
    pub fn open(uri: &str, path: &Path, writes: bool) -> Result<SgTarget, EngineError> {
        let shown = path.display().to_string();
        let meta = std::fs::metadata(path).map_err(|source| match source.kind() {
            // A device that is not there is bad input, as a URI that names none.
            std::io::ErrorKind::NotFound => {
                EngineError::Invalid(format!("{shown}: no such device"))
            }
            _ => EngineError::Open {
                path: shown.clone(),
                source,
            },
        })?;
        if !meta.file_type().is_char_device() {
            return Err(EngineError::Invalid(format!(
                "{shown}: not a character device (sg: takes a SCSI generic device, /dev/sgN)"
            )));
        }
        // O_RDWR even to read: SG_IO on a read-only open is refused for commands the kernel
        // does not know as safe (its allow list), whatever the user's rights.
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|source| EngineError::Open {
                path: shown.clone(),
                source,
            })?;
        let ask = |cdb: Cdb, len: u32| -> Result<(Outcome, Vec<u8>), EngineError> {
            let mut buf = vec![0u8; len as usize];
            let d = if len == 0 { dir::NONE } else { dir::FROM_DEV };
            let o =
                sg_io(&file, &cdb, d, (buf.as_mut_ptr(), len), PROBE_TIMEOUT_MS).map_err(|e| {
                    match e.raw_os_error() {
                        Some(libc::ENOTTY) | Some(libc::EINVAL) => EngineError::Invalid(format!(
                            "{shown}: not a SCSI generic device (SG_IO: {e})"
                        )),
                        _ => EngineError::sys(format!("{shown}: SG_IO"), e),
                    }
                })?;
            let got = (len as i32 - o.resid.max(0)).max(0) as usize;
            buf.truncate(got);
            Ok((o, buf))
        };
        // A unit attention (power on, reset) is reported once per condition.
        for _ in 0..4 {
            if ask(Cdb::TestUnitReady, 0)?.0.ok() {
                break;
            }
        }
        let (o, inq) = ask(
            Cdb::Inquiry {
                evpd: false,
                page: 0,
                alloc_len: 96,
            },
            96,
        )?;
        if !o.ok() || inq.len() < 36 {
            return Err(EngineError::Invalid(format!(
                "{shown}: INQUIRY failed: {}",
                o.describe()
            )));
        }
        if inq[0] & 0x1f != 0 {
            return Err(EngineError::Invalid(format!(
                "{shown}: not a disk (peripheral device type {:#04x})",
                inq[0] & 0x1f
            )));
        }
        let (o, cap) = ask(Cdb::ReadCapacity16 { alloc_len: 32 }, 32)?;
        if !o.ok() || cap.len() < 12 {
            return Err(EngineError::Invalid(format!(
                "{shown}: READ CAPACITY(16) failed: {}",
                o.describe()
            )));
        }
        let blocks = u64::from_be_bytes(cap[..8].try_into().unwrap_or([0; 8])).wrapping_add(1);
        let block = be32(&cap, 8);
        if block < 512 || !block.is_power_of_two() {
            return Err(EngineError::Invalid(format!(
                "{shown}: READ CAPACITY(16) reports a block length of {block}"
            )));
        }
        let lbpme = cap.len() >= 15 && cap[14] & 0x80 != 0;
        let vpd = |page: u8, len: u16| {
            ask(
                Cdb::Inquiry {
                    evpd: true,
                    page,
                    alloc_len: len,
                },
                len as u32,
            )
        };
        let (o, b0) = vpd(0xb0, 64)?;
        let limits = o.ok().then(|| BlockLimits::decode(&b0)).flatten();
        let prov = if lbpme {
            let (o, b2) = vpd(0xb2, 8)?;
            o.ok().then(|| Provisioning::decode(&b2)).flatten()
        } else {
            None
        };
        let disc = Discard::new(lbpme, limits, prov);
        let block_dev = sysfs::block_device_of(Path::new("/"), path);
        let mut max_transfer = limits
            .map(|l| u64::from(l.max_transfer) * u64::from(block))
            .filter(|&m| m > 0);
        if let Some(hw) = block_dev.as_ref().and_then(|b| b.max_hw_bytes) {
            let hw = u64::from(hw);
            max_transfer = Some(max_transfer.map_or(hw, |m| m.min(hw)));
        }
        let mut info = TargetInfo {
            uri: uri.to_string(),
            engine: "sg".into(),
            size: blocks * u64::from(block),
            block_size: block,
            max_transfer: max_transfer.map(|m| m.min(u64::from(u32::MAX)) as u32),
            read_only: !writes,
            params: BTreeMap::new(),
        };
        disc.record(&mut info);
        let ascii = |b: &[u8]| String::from_utf8_lossy(b).trim().to_string();
        let p = &mut info.params;
        p.insert("path".into(), shown.clone().into());
        p.insert("kind".into(), KIND.into());
        p.insert("vendor".into(), ascii(&inq[8..16]).into());
        p.insert("product".into(), ascii(&inq[16..32]).into());
        p.insert("lbpme".into(), lbpme.into());
        match &block_dev {
            Some(b) => {
                p.insert("block_device".into(), b.dev.clone().into());
            }
            None => {
                p.insert(
                    "block_device_note".into(),
                    "no block device of this SCSI device found in sysfs".into(),
                );
            }
        }
        Ok(SgTarget {
            info,
            file: Arc::new(file),
            geo: Geometry {
                block,
                disc,
                timeout_ms: 0,
            },
        })
    }
}

impl Target for SgTarget {
    fn info(&self) -> &TargetInfo {
        &self.info
    }

    fn supports(&self, op: Op) -> bool {
        self.geo.disc.supports(op)
    }

    fn open_queue(&self, cfg: &QueueConfig) -> Result<Box<dyn Queue>, EngineError> {
        let geo = Geometry {
            timeout_ms: cfg.io_timeout.as_millis().clamp(1, u32::MAX as u128) as u32,
            ..self.geo
        };
        Ok(Box::new(pool::SgQueue::open(self.file.clone(), geo, cfg)))
    }
}

/// The commands that carry out `io`, in order (one but for a trim or a write-zeroes longer
/// than one command may cover), or the errno of an I/O that is not whole blocks.
pub(crate) fn commands(geo: &Geometry, io: &Io) -> Result<Vec<Cdb>, i32> {
    let b = u64::from(geo.block);
    if !io.offset.is_multiple_of(b) || !u64::from(io.len).is_multiple_of(b) {
        return Err(-libc::EINVAL);
    }
    let lba = io.offset / b;
    let blocks = u64::from(io.len) / b;
    let chunks = |max: u64, make: &dyn Fn(u64, u64) -> Cdb| {
        let mut out = Vec::new();
        let mut at = lba;
        while at < lba + blocks {
            let n = (lba + blocks - at).min(max.max(1));
            out.push(make(at, n));
            at += n;
        }
        out
    };
    Ok(match io.op {
        Op::Read => vec![Cdb::Read {
            len: CdbLen::L16,
            lba,
            blocks: blocks as u32,
            protect: 0,
            dpo: false,
            fua: false,
        }],
        Op::Write => vec![Cdb::Write {
            len: CdbLen::L16,
            lba,
            blocks: blocks as u32,
            protect: 0,
            dpo: false,
            fua: io.fua,
            verify: false,
        }],
        Op::Flush => vec![Cdb::SynchronizeCache {
            sixteen: true,
            lba: 0,
            blocks: 0,
            immed: false,
        }],
        Op::WriteZeroes => chunks(geo.disc.write_same_blocks(), &|lba, n| Cdb::WriteSame {
            sixteen: true,
            lba,
            blocks: n as u32,
            protect: 0,
            anchor: false,
            unmap: false,
            ndob: false,
        }),
        Op::Trim => match geo.disc.trim {
            // One descriptor per UNMAP (8 bytes of header, 16 of descriptor); the pool
            // encodes each command's range from `unmap_ranges`.
            Some(TrimBy::Unmap) => unmap_ranges(geo, io)
                .iter()
                .map(|_| Cdb::Unmap {
                    anchor: false,
                    param_len: 24,
                })
                .collect(),
            Some(TrimBy::WriteSameUnmap) => match geo.disc.granules(lba, blocks) {
                // Only whole unmap granules go out; a trim smaller than one is done, as
                // the iSCSI initiator does it.
                None => Vec::new(),
                Some((lba, blocks)) => {
                    let mut out = Vec::new();
                    let mut at = lba;
                    let max = geo.disc.write_same_blocks();
                    while at < lba + blocks {
                        let n = (lba + blocks - at).min(max);
                        out.push(Cdb::WriteSame {
                            sixteen: true,
                            lba: at,
                            blocks: n as u32,
                            protect: 0,
                            anchor: false,
                            unmap: true,
                            ndob: false,
                        });
                        at += n;
                    }
                    out
                }
            },
            None => return Err(-libc::EOPNOTSUPP),
        },
    })
}

/// The (LBA, blocks) ranges of a trim's UNMAP commands, one per command, in the order of
/// [`commands`]: whole unmap granules only, each within the MAXIMUM UNMAP LBA COUNT.
pub(crate) fn unmap_ranges(geo: &Geometry, io: &Io) -> Vec<(u64, u64)> {
    let b = u64::from(geo.block);
    let Some((lba, blocks)) = geo.disc.granules(io.offset / b, u64::from(io.len) / b) else {
        return Vec::new();
    };
    let max = geo.disc.unmap_lbas().min(u64::from(u32::MAX));
    let mut out = Vec::new();
    let mut at = lba;
    while at < lba + blocks {
        let n = (lba + blocks - at).min(max);
        out.push((at, n));
        at += n;
    }
    out
}

/// Carries out `io` on the calling thread: 0, or the errno, with the failure's line.
pub(crate) fn do_io(
    f: &File,
    geo: &Geometry,
    arena: &Arena,
    zero_block: &[u8],
    io: &Io,
) -> (i32, Option<String>) {
    let cdbs = match commands(geo, io) {
        Ok(c) => c,
        Err(e) => {
            return (
                e,
                Some(format!(
                    "{} of {} bytes at {}: not whole blocks of {} or not offered",
                    io.op.name(),
                    io.len,
                    io.offset,
                    geo.block
                )),
            )
        }
    };
    let ranges = if io.op == Op::Trim && geo.disc.trim == Some(TrimBy::Unmap) {
        unmap_ranges(geo, io)
    } else {
        Vec::new()
    };
    let mut plist = [0u8; 24];
    for (i, cdb) in cdbs.iter().enumerate() {
        let (direction, data) = match (io.op, cdb) {
            (Op::Read, _) => {
                // SAFETY: the scheduler gives this I/O exclusive use of its arena region.
                let buf = unsafe { arena.slice_mut(io.buf, io.len as usize) };
                (dir::FROM_DEV, (buf.as_mut_ptr(), io.len))
            }
            (Op::Write, _) => {
                // SAFETY: write sources are only read (SG_IO with TO_DEV reads the buffer).
                let buf = unsafe { arena.slice(io.buf, io.len as usize) };
                (dir::TO_DEV, (buf.as_ptr() as *mut u8, io.len))
            }
            (_, Cdb::WriteSame { .. }) => (
                dir::TO_DEV,
                (zero_block.as_ptr() as *mut u8, zero_block.len() as u32),
            ),
            (_, Cdb::Unmap { .. }) => {
                let n = crate::scsi::unmap::encode(&ranges[i..i + 1], &mut plist);
                (dir::TO_DEV, (plist.as_mut_ptr(), n as u32))
            }
            _ => (dir::NONE, (std::ptr::null_mut(), 0)),
        };
        match sg_io(f, cdb, direction, data, geo.timeout_ms) {
            Err(e) => {
                let errno = -e.raw_os_error().unwrap_or(libc::EIO);
                return (errno, Some(format!("{}: SG_IO: {e}", io.op.name())));
            }
            Ok(o) if !o.ok() => {
                return (
                    o.errno(),
                    Some(format!(
                        "{} at offset {}: {}",
                        io.op.name(),
                        io.offset,
                        o.describe()
                    )),
                )
            }
            Ok(o) if o.resid > 0 && io.op.moves_data() => {
                return (
                    -libc::EIO,
                    Some(format!(
                        "{} at offset {}: {} of {} bytes not transferred",
                        io.op.name(),
                        io.offset,
                        o.resid,
                        io.len
                    )),
                )
            }
            Ok(_) => {}
        }
    }
    (0, None)
}

#[cfg(test)]
mod tests;
