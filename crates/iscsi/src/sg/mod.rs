//! `sg:/dev/sgN` and `bsg:/dev/bsg/H:C:T:L`: SCSI commands through the SCSI generic driver
//! (its v3 header, [`io_hdr`]) or the bsg driver (`struct sg_io_v4`, [`v4`]). io_uring has no
//! SCSI passthrough command: sg's queues use the driver's own asynchronous write/read interface
//! on the stream's thread ([`async_queue`]); bsg, which has none, blocks a thread per slot of
//! the queue in `SG_IO` ([`pool`]). The disk's
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

mod async_queue;
mod exec;
pub mod io_hdr;
mod pool;
pub mod v4;

pub use pool::SG_THREAD_PREFIX;
pub mod sysfs;

use std::collections::BTreeMap;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::Arc;

use sanbench_io::engine::{Op, Queue, QueueConfig, Target, TargetInfo};
use sanbench_io::EngineError;

use crate::initiator::discard::Discard;
use crate::scsi::cdb::Cdb;
use crate::scsi::vpd::{BlockLimits, Provisioning};
use io_hdr::{dir, Outcome, SgIoHdr};

/// The target's `kind` parameter.
pub const KIND: &str = "scsi passthrough";

/// Timeout of the commands asked while opening.
const PROBE_TIMEOUT_MS: u32 = 10_000;

/// The driver a SCSI passthrough target sends its commands through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Interface {
    /// The SCSI generic driver (`/dev/sgN`, `struct sg_io_hdr`).
    Sg,
    /// The block SCSI generic driver (`/dev/bsg/H:C:T:L`, `struct sg_io_v4`).
    Bsg,
}

impl Interface {
    /// The URI scheme and engine name.
    pub fn scheme(self) -> &'static str {
        match self {
            Interface::Sg => "sg",
            Interface::Bsg => "bsg",
        }
    }

    /// What the path must name, for messages.
    fn example(self) -> &'static str {
        match self {
            Interface::Sg => "a SCSI generic device, /dev/sgN",
            Interface::Bsg => "a bsg device, /dev/bsg/H:C:T:L",
        }
    }

    /// The sysfs class of its devices.
    fn class(self) -> &'static str {
        match self {
            Interface::Sg => "scsi_generic",
            Interface::Bsg => "bsg",
        }
    }
}

/// One command on `f` through `iface`: the CDB, the data (direction, buffer) and the
/// timeout. `Err` only when the ioctl itself failed (the command never reached the device).
pub fn sg_io(
    f: &File,
    iface: Interface,
    cdb: &Cdb,
    direction: i32,
    data: (*mut u8, u32),
    timeout_ms: u32,
) -> std::io::Result<Outcome> {
    let (bytes, n) = cdb.encode();
    let mut sense = [0u8; 64];
    match iface {
        Interface::Sg => {
            let mut h = SgIoHdr::new(&bytes[..n], direction, data, &mut sense, timeout_ms);
            // SAFETY: SG_IO reads the header, the CDB and `data.1` bytes at `data.0` (or
            // writes them), and writes at most `mx_sb_len` bytes of sense; the CDB, the sense
            // buffer and the data (the caller's) outlive the blocking call.
            retry_eintr(|| unsafe {
                libc::ioctl(f.as_raw_fd(), io_hdr::SG_IO as _, &mut h as *mut SgIoHdr)
            })?;
            Ok(Outcome::read(&h, &sense))
        }
        Interface::Bsg => {
            let mut h = v4::SgIoV4::new(&bytes[..n], direction, data, &mut sense, timeout_ms);
            // SAFETY: as above, with the v4 header: the request (CDB), the response (sense,
            // at most `max_response_len`) and the one data buffer outlive the blocking call.
            retry_eintr(|| unsafe {
                libc::ioctl(f.as_raw_fd(), io_hdr::SG_IO as _, &mut h as *mut v4::SgIoV4)
            })?;
            Ok(h.outcome(&sense))
        }
    }
}

/// The environment variable that puts `sg:` queues on a thread per slot blocking in `SG_IO`
/// (`threads`) instead of the driver's write/read interface (the default): for measuring one
/// against the other (scripts/bench_sg.py).
pub const SG_QUEUE_ENV: &str = "SANBENCH_SG_QUEUE";

fn pool_asked() -> bool {
    std::env::var(SG_QUEUE_ENV).is_ok_and(|v| v.trim() == "threads")
}

/// Calls `ioctl` until it is not interrupted.
fn retry_eintr(mut ioctl: impl FnMut() -> libc::c_int) -> std::io::Result<()> {
    loop {
        if ioctl() == 0 {
            return Ok(());
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
    path: std::path::PathBuf,
    geo: Geometry,
}

/// What every command needs to know of the disk.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Geometry {
    pub iface: Interface,
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
        SgTarget::open_as(Interface::Sg, uri, path, writes)
    }

    /// Opens `path`, a device of `iface`'s driver, as [`SgTarget::open`] does.
    pub fn open_as(
        iface: Interface,
        uri: &str,
        path: &Path,
        writes: bool,
    ) -> Result<SgTarget, EngineError> {
        let scheme = iface.scheme();
        let shown = path.display().to_string();
        // O_RDWR even to read: SG_IO on a read-only open is refused for commands the kernel
        // does not know as safe (its allow list), whatever the user's rights.
        let takes = format!("{scheme}: takes {}", iface.example());
        let file = sanbench_io::chardev::open(path, true, &takes)?;
        let ask = |cdb: Cdb, len: u32| -> Result<(Outcome, Vec<u8>), EngineError> {
            let mut buf = vec![0u8; len as usize];
            let d = if len == 0 { dir::NONE } else { dir::FROM_DEV };
            let o = sg_io(
                &file,
                iface,
                &cdb,
                d,
                (buf.as_mut_ptr(), len),
                PROBE_TIMEOUT_MS,
            )
            .map_err(|e| match e.raw_os_error() {
                Some(libc::ENOTTY) | Some(libc::EINVAL) => {
                    EngineError::Invalid(format!("{shown}: not {} (SG_IO: {e})", iface.example()))
                }
                _ => EngineError::sys(format!("{shown}: SG_IO"), e),
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
        let block_dev = sysfs::block_device_in(Path::new("/"), iface.class(), path);
        let mut max_transfer = limits
            .map(|l| u64::from(l.max_transfer) * u64::from(block))
            .filter(|&m| m > 0);
        if let Some(hw) = block_dev.as_ref().and_then(|b| b.max_hw_bytes) {
            let hw = u64::from(hw);
            max_transfer = Some(max_transfer.map_or(hw, |m| m.min(hw)));
        }
        let mut info = TargetInfo {
            uri: uri.to_string(),
            engine: scheme.into(),
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
            path: path.to_path_buf(),
            geo: Geometry {
                iface,
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
        // The sg driver's write/read interface where there is one (and unless the thread
        // pool is asked for, to measure one against the other); bsg has none.
        if self.geo.iface == Interface::Sg && !pool_asked() {
            return Ok(Box::new(async_queue::AsyncQueue::open(
                &self.path, geo, cfg,
            )?));
        }
        Ok(Box::new(pool::SgQueue::open(self.file.clone(), geo, cfg)))
    }
}

#[cfg(test)]
mod tests;
