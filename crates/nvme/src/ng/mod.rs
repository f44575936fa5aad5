//! `nvme-ng:/dev/ngXnY`: NVMe I/O commands through the namespace's generic character device,
//! carried by io_uring's URING_CMD (Linux 5.19+: `IORING_OP_URING_CMD` with
//! `NVME_URING_CMD_IO` on a ring of 128-byte SQEs and 32-byte CQEs). Nothing of the block
//! layer's upper half runs: no bio, no merging, no I/O scheduler, no partition remapping; the
//! request still goes through the namespace's blk-mq queue to the driver. Beside the block
//! device of the same namespace it separates the block layer's cost from the device's.
//!
//! * Geometry: `NVME_IOCTL_ID` names the namespace; Identify Namespace (admin ioctl) gives its
//!   size, block size and metadata (a format with metadata is refused: the engine moves data
//!   only), Identify Controller whether it takes Dataset Management and Write Zeroes
//!   (ONCS) and its MDTS.
//! * Commands: Read, Write (FUA), Flush, Write Zeroes, and a trim as a Dataset Management
//!   deallocate of one range ([`cmd`]), data by user address: not a fixed buffer
//!   (`IORING_URING_CMD_FIXED`), which Linux 6.1 maps wrongly for large arenas (see
//!   `NgQueue::open`).
//! * One command moves at most what the block device's queue takes unsplit
//!   (`sysfs::max_command_bytes`: max_hw_sectors_kb and max_segments), and MDTS.
//! * The block device behind the namespace ([`sysfs`]) is named in the target's parameters
//!   (`block_device`), for the safety check before writes and the manifest's transport label.

pub mod cmd;
pub mod sysfs;

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::sync::Arc;

use io_uring::{cqueue, opcode, squeue, types, IoUring};
use sanbench_io::engine::{Completion, Io, Op, Queue, QueueConfig, Target, TargetInfo};
use sanbench_io::{Arena, EngineError};

use crate::wire::cmd::{DsmRange, DSM_RANGE_LEN};
use crate::wire::identify::{cns, IDENTIFY_LEN};
use cmd::{Geometry, Offers, PassthruCmd};

/// The target's `kind` parameter.
pub const KIND: &str = "nvme passthrough";

/// An opened namespace generic device.
pub struct NgTarget {
    info: TargetInfo,
    file: Arc<File>,
    nsid: u32,
    geo: Geometry,
    offers: Offers,
}

/// Issues one admin command through the ioctl; `Err` carries the errno or the NVMe status.
fn admin(f: &File, c: &mut PassthruCmd) -> Result<(), String> {
    // SAFETY: NVME_IOCTL_ADMIN_CMD reads and writes one `struct nvme_passthru_cmd`, which
    // PassthruCmd is (layout asserted in cmd.rs); its `addr` points to a buffer of
    // `data_len` bytes the caller keeps alive across the call.
    let r = unsafe {
        libc::ioctl(
            f.as_raw_fd(),
            cmd::NVME_IOCTL_ADMIN_CMD as _,
            c as *mut PassthruCmd,
        )
    };
    match r {
        0 => Ok(()),
        r if r > 0 => Err(match cmd::completion_status(r) {
            Some(s) => format!("NVMe status {s}"),
            None => format!("status {r}"),
        }),
        _ => Err(std::io::Error::last_os_error().to_string()),
    }
}

fn identify(f: &File, cns: u8, nsid: u32) -> Result<Vec<u8>, String> {
    let mut buf = vec![0u8; IDENTIFY_LEN];
    let mut c = cmd::identify_cmd(cns, nsid, buf.as_mut_ptr() as u64);
    admin(f, &mut c)?;
    Ok(buf)
}

impl NgTarget {
    /// Opens `path` (read-write when the workload writes). Bad input (not an NVMe generic
    /// device, a namespace the engine cannot drive) is `Invalid`, so the CLI exits 2.
    pub fn open(uri: &str, path: &Path, writes: bool) -> Result<NgTarget, EngineError> {
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
                "{shown}: not a character device (nvme-ng: takes a namespace's generic device, \
                 /dev/ngXnY)"
            )));
        }
        let file = OpenOptions::new()
            .read(true)
            .write(writes)
            .open(path)
            .map_err(|source| EngineError::Open {
                path: shown.clone(),
                source,
            })?;
        // SAFETY: NVME_IOCTL_ID takes no argument and returns the namespace id.
        let nsid = unsafe { libc::ioctl(file.as_raw_fd(), cmd::NVME_IOCTL_ID as _) };
        if nsid <= 0 {
            return Err(EngineError::Invalid(format!(
                "{shown}: not an NVMe namespace device (NVME_IOCTL_ID: {})",
                std::io::Error::last_os_error()
            )));
        }
        let nsid = nsid as u32;
        let ask = |c: u8, n: u32, what: &str| {
            identify(&file, c, n)
                .map_err(|e| EngineError::Invalid(format!("{shown}: Identify {what} failed: {e}")))
        };
        let geo = Geometry::decode(&ask(cns::NAMESPACE, nsid, "Namespace")?).ok_or_else(|| {
            EngineError::Invalid(format!(
                "{shown}: namespace {nsid} reports no usable format (inactive?)"
            ))
        })?;
        if geo.ms != 0 {
            return Err(EngineError::Invalid(format!(
                "{shown}: the namespace's format carries {} bytes of metadata per block; \
                 nvme-ng: moves data only (format it without metadata, or use its block device)",
                geo.ms
            )));
        }
        let offers = Offers::decode(&ask(cns::CONTROLLER, 0, "Controller")?).unwrap_or_default();
        let block = sysfs::block_device_of(Path::new("/"), path, nsid);
        let mut max_transfer = offers.max_transfer();
        if let Some(hw) = block.as_ref().and_then(|b| b.max_hw_bytes) {
            max_transfer = Some(max_transfer.map_or(hw, |m| m.min(hw)));
        }
        let mut params: BTreeMap<String, serde_json::Value> = BTreeMap::new();
        params.insert("path".into(), shown.clone().into());
        params.insert("kind".into(), KIND.into());
        params.insert("nsid".into(), nsid.into());
        params.insert("lba_size".into(), geo.block_size().into());
        params.insert("lba_count".into(), geo.blocks.into());
        params.insert(
            "trim_by".into(),
            if offers.dsm {
                "Dataset Management (deallocate, one range per command)"
            } else {
                "none"
            }
            .into(),
        );
        params.insert(
            "write_zeroes_by".into(),
            if offers.write_zeroes {
                "Write Zeroes"
            } else {
                "none"
            }
            .into(),
        );
        params.insert(
            sanbench_io::params::TRIM_READS_ZEROS.into(),
            (offers.dsm && geo.dealloc_reads_zeros).into(),
        );
        match &block {
            Some(b) => {
                params.insert("block_device".into(), b.dev.clone().into());
            }
            None => {
                params.insert(
                    "block_device_note".into(),
                    "no block device of this namespace found in sysfs".into(),
                );
            }
        }
        Ok(NgTarget {
            info: TargetInfo {
                uri: uri.to_string(),
                engine: "nvme-ng".into(),
                size: geo.blocks << geo.lbads,
                block_size: geo.block_size(),
                max_transfer,
                read_only: !writes,
                params,
            },
            file: Arc::new(file),
            nsid,
            geo,
            offers,
        })
    }
}

impl Target for NgTarget {
    fn info(&self) -> &TargetInfo {
        &self.info
    }

    fn supports(&self, op: Op) -> bool {
        match op {
            Op::Trim => self.offers.dsm,
            Op::WriteZeroes => self.offers.write_zeroes,
            _ => true,
        }
    }

    fn open_queue(&self, cfg: &QueueConfig) -> Result<Box<dyn Queue>, EngineError> {
        Ok(Box::new(NgQueue::open(self, cfg)?))
    }
}

/// One worker's ring on the namespace.
pub struct NgQueue {
    ring: IoUring<squeue::Entry128, cqueue::Entry32>,
    _file: Arc<File>,
    arena: Arc<Arena>,
    nsid: u32,
    lbads: u8,
    /// One DSM range per tag, where a trim's range lives until it completes.
    ranges: Box<[DsmRange]>,
    timeout: types::Timespec,
    timeout_secs: f64,
    /// The last failure the controller reported, for the result's parameters.
    last_status: Option<String>,
    failed: u64,
    /// I/Os that completed without reaching the device (not whole blocks).
    early: Vec<Completion>,
}

impl NgQueue {
    fn open(t: &NgTarget, cfg: &QueueConfig) -> Result<NgQueue, EngineError> {
        let entries = cfg.depth.next_power_of_two().max(8);
        let ring = IoUring::<squeue::Entry128, cqueue::Entry32>::builder()
            .build(entries)
            .map_err(|e| {
                EngineError::Invalid(format!(
                    "{}: io_uring with 128-byte SQEs and 32-byte CQEs (Linux 5.19+): {e}",
                    t.info.uri
                ))
            })?;
        ring.submitter()
            .register_files(&[t.file.as_raw_fd()])
            .map_err(|e| EngineError::sys("io_uring register_files", e))?;
        // No fixed buffer: Linux 6.1's blk_rq_map_user_bvec counts every page from the I/O's
        // start to the end of the registered buffer against the queue's max_segments (the
        // iterator io_import_fixed builds keeps all the buffer's bvecs), so with an arena of
        // more than ~127 pages every command failed with EINVAL (seen in the test guest on
        // QEMU's NVMe controller). The user-address path pins the I/O's own pages.
        let d = cfg.io_timeout;
        Ok(NgQueue {
            ring,
            _file: t.file.clone(),
            arena: cfg.arena.clone(),
            nsid: t.nsid,
            lbads: t.geo.lbads,
            ranges: vec![DsmRange::new(0, 0); cfg.depth as usize].into_boxed_slice(),
            timeout: types::Timespec::new()
                .sec(d.as_secs())
                .nsec(d.subsec_nanos()),
            timeout_secs: d.as_secs_f64(),
            last_status: None,
            failed: 0,
            early: Vec::new(),
        })
    }

    /// Queues `io`'s command, or returns the errno it completes with at once.
    fn push(&mut self, io: &Io) -> Result<Result<(), i32>, EngineError> {
        let moves = io.op.moves_data();
        let addr = if moves {
            assert!(io.buf + io.len as usize <= self.arena.len(), "arena region");
            // SAFETY: in bounds (asserted); the region belongs to this I/O until it completes.
            unsafe { self.arena.as_ptr().add(io.buf) as u64 }
        } else if io.op == Op::Trim {
            let r = &mut self.ranges[io.tag as usize];
            *r = cmd::dsm_range(self.lbads, io.offset, io.len);
            r as *const DsmRange as u64
        } else {
            0
        };
        let c = match cmd::io_cmd(
            io.op, self.nsid, self.lbads, io.offset, io.len, io.fua, addr,
        ) {
            Ok(c) => c,
            Err(e) => return Ok(Err(e.errno())),
        };
        debug_assert!(io.op != Op::Trim || c.data_len as usize == DSM_RANGE_LEN);
        let op = opcode::UringCmd80::new(types::Fixed(0), cmd::NVME_URING_CMD_IO)
            .cmd(c.to_uring_bytes());
        let sqe = op.build().user_data(io.tag as u64);
        loop {
            // SAFETY: the SQE points into the arena or at this tag's range, both of which
            // outlive the ring's use of them (the scheduler reaps every I/O before dropping
            // the queue).
            if unsafe { self.ring.submission().push(&sqe) }.is_ok() {
                return Ok(Ok(()));
            }
            self.ring
                .submit()
                .map_err(|e| EngineError::sys("io_uring_enter", e))?;
        }
    }

    fn take(&mut self, out: &mut Vec<Completion>) -> usize {
        let mut n = 0;
        let mut failures = Vec::new();
        for cqe in self.ring.completion() {
            let res = cqe.result();
            if res != 0 {
                failures.push(res);
            }
            out.push(Completion {
                tag: cqe.user_data() as u32,
                result: cmd::completion_errno(res),
            });
            n += 1;
        }
        for res in failures {
            self.failed += 1;
            self.last_status = Some(match cmd::completion_status(res) {
                Some(s) => format!("NVMe status {s}"),
                None => std::io::Error::from_raw_os_error(-res).to_string(),
            });
        }
        n
    }
}

impl Queue for NgQueue {
    fn submit(&mut self, ios: &[Io]) -> Result<(), EngineError> {
        for io in ios {
            if let Err(errno) = self.push(io)? {
                // Not a command the device could take: it completes at once, with the
                // errno, at the next reap.
                self.failed += 1;
                self.last_status = Some(format!(
                    "{} of {} bytes at {} is not whole blocks of {} or is longer than one \
                     command",
                    io.op.name(),
                    io.len,
                    io.offset,
                    1u32 << self.lbads
                ));
                self.early.push(Completion {
                    tag: io.tag,
                    result: errno,
                });
            }
        }
        Ok(())
    }

    fn reap(&mut self, min: usize, out: &mut Vec<Completion>) -> Result<(), EngineError> {
        let mut got = self.early.len();
        out.append(&mut self.early);
        loop {
            let want = min.saturating_sub(got);
            if want > 0 {
                let args = types::SubmitArgs::new().timespec(&self.timeout);
                match self.ring.submitter().submit_with_args(want, &args) {
                    Ok(_) => {}
                    Err(e) if e.raw_os_error() == Some(libc::ETIME) => {
                        if self.ring.completion().is_empty() {
                            return Err(EngineError::Timeout {
                                peer: "nvme-ng".into(),
                                secs: self.timeout_secs,
                            });
                        }
                    }
                    Err(e) if matches!(e.raw_os_error(), Some(libc::EINTR) | Some(libc::EBUSY)) => {
                    }
                    Err(e) => return Err(EngineError::sys("io_uring_enter", e)),
                }
            } else if !self.ring.submission().is_empty() {
                self.ring
                    .submit()
                    .map_err(|e| EngineError::sys("io_uring_enter", e))?;
            }
            got += self.take(out);
            if got >= min {
                break;
            }
        }
        Ok(())
    }

    fn reap_until(
        &mut self,
        deadline: std::time::Instant,
        out: &mut Vec<Completion>,
    ) -> Result<(), EngineError> {
        let rest = deadline.saturating_duration_since(std::time::Instant::now());
        if !rest.is_zero() && self.early.is_empty() && self.ring.completion().is_empty() {
            let ts = types::Timespec::new()
                .sec(rest.as_secs())
                .nsec(rest.subsec_nanos());
            let args = types::SubmitArgs::new().timespec(&ts);
            match self.ring.submitter().submit_with_args(1, &args) {
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::ETIME) | Some(libc::EINTR) | Some(libc::EBUSY)
                    ) => {}
                Err(e) => return Err(EngineError::sys("io_uring_enter", e)),
            }
        }
        self.reap(0, out)
    }

    fn stats(&self) -> BTreeMap<String, serde_json::Value> {
        let mut m = BTreeMap::new();
        m.insert("fixed_buffers".into(), false.into());
        m.insert("failed_commands".into(), self.failed.into());
        if let Some(s) = &self.last_status {
            m.insert("last_failure".into(), s.clone().into());
        }
        m
    }
}
