//! io_uring engine for files and block devices.
//!
//! One ring per queue. The file is registered (no per-I/O fd lookup) and the queue's whole arena
//! is registered as one fixed buffer (no per-I/O page pinning); `submit` only fills SQEs, and
//! `reap` submits them and waits for completions in one `io_uring_enter`, so a batch of 32 I/Os
//! costs one system call. Short transfers are resubmitted for the remainder. The scheduler drains
//! every queue before dropping it, so the kernel never holds a request into a freed arena.

use std::collections::BTreeMap;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::OnceLock;

use io_uring::{opcode, types, IoUring};

use crate::arena::Arena;
use crate::discard::TrimHow;
use crate::engine::{Completion, Io, Op, Queue, QueueConfig};
use crate::error::EngineError;

/// What this kernel's io_uring offers the engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Support {
    /// Rings, with the extended-argument wait `reap` uses for its timeout (Linux 5.11+).
    Full,
    /// Rings without IORING_FEAT_EXT_ARG: `reap` could not bound its wait.
    NoExtArg,
    /// No ring at all (old kernel, or disabled by sysctl or seccomp).
    Unavailable,
}

/// Probes once per process.
pub fn support() -> Support {
    static SUPPORT: OnceLock<Support> = OnceLock::new();
    *SUPPORT.get_or_init(|| match IoUring::new(2) {
        Ok(r) if r.params().is_feature_ext_arg() => Support::Full,
        Ok(_) => Support::NoExtArg,
        Err(_) => Support::Unavailable,
    })
}

/// Whether the io_uring engine can run here.
pub fn available() -> bool {
    support() == Support::Full
}

pub struct UringQueue {
    ring: IoUring,
    _file: Arc<File>,
    arena: Arc<Arena>,
    fixed_buffers: bool,
    mode: &'static str,
    /// The request behind each tag, with how much of it is done (for short transfers).
    reqs: Vec<(Io, u32)>,
    timeout: types::Timespec,
    timeout_secs: f64,
    resubmits: u64,
    /// How trims run (files: fallocate; block devices: io_uring's discard or BLKDISCARD).
    trim: TrimHow,
    /// The result of an I/O done on this thread (a BLKDISCARD), by tag: its completion is a
    /// NOP's, so that it is reaped in order with the ring's.
    inline: Vec<Option<i32>>,
}

impl UringQueue {
    pub fn open(file: Arc<File>, cfg: &QueueConfig) -> Result<UringQueue, EngineError> {
        let entries = cfg.depth.next_power_of_two().max(8);
        // DEFER_TASKRUN runs completion work in our own thread at reap time; without it, reads
        // from page-cache files (tmpfs) were punted to io-wq workers here, at half the IOPS and
        // twice the CPU. Older kernels lack the flags: fall back to a plain ring.
        let ring = IoUring::builder()
            .setup_single_issuer()
            .setup_coop_taskrun()
            .setup_defer_taskrun()
            .build(entries)
            .map(|r| (r, "defer_taskrun"))
            .or_else(|_| IoUring::new(entries).map(|r| (r, "plain")));
        let (ring, mode) = ring.map_err(|e| EngineError::sys("io_uring_setup", e))?;
        ring.submitter()
            .register_files(&[file.as_raw_fd()])
            .map_err(|e| EngineError::sys("io_uring register_files", e))?;
        let iov = libc::iovec {
            iov_base: cfg.arena.as_ptr().cast(),
            iov_len: cfg.arena.len(),
        };
        // SAFETY: the arena stays alive as long as the ring (we hold its Arc), and buffers are
        // unregistered when the ring is dropped.
        let fixed_buffers = unsafe { ring.submitter().register_buffers(&[iov]) }.is_ok();
        let d = cfg.io_timeout;
        Ok(UringQueue {
            ring,
            _file: file,
            arena: cfg.arena.clone(),
            fixed_buffers,
            mode,
            reqs: vec![
                (
                    Io {
                        fua: false,
                        tag: 0,
                        op: Op::Read,
                        offset: 0,
                        len: 0,
                        buf: 0,
                    },
                    0
                );
                cfg.depth as usize
            ],
            timeout: types::Timespec::new()
                .sec(d.as_secs())
                .nsec(d.subsec_nanos()),
            timeout_secs: d.as_secs_f64(),
            resubmits: 0,
            trim: TrimHow::Fallocate,
            inline: vec![None; cfg.depth as usize],
        })
    }

    /// Trims as `how` (a block device's discard) instead of a punched hole.
    pub fn with_trim(mut self, how: TrimHow) -> UringQueue {
        self.trim = how;
        self
    }

    fn push(&mut self, io: &Io, done: u32) -> Result<(), EngineError> {
        let len = io.len - done;
        assert!(io.buf + io.len as usize <= self.arena.len(), "arena region");
        // SAFETY: in bounds (asserted); the region belongs to this I/O until it completes.
        let ptr = unsafe { self.arena.as_ptr().add(io.buf + done as usize) };
        let off = io.offset + done as u64;
        // FUA: RWF_DSYNC makes this write durable (data and what is needed to read it back).
        let rw_flags = if io.fua { libc::RWF_DSYNC } else { 0 };
        macro_rules! sqe {
            ($fd:expr) => {
                match (io.op, self.fixed_buffers) {
                    (Op::Read, true) => {
                        opcode::ReadFixed::new($fd, ptr, len, 0).offset(off).build()
                    }
                    (Op::Write, true) => opcode::WriteFixed::new($fd, ptr, len, 0)
                        .offset(off)
                        .rw_flags(rw_flags)
                        .build(),
                    (Op::Read, false) => opcode::Read::new($fd, ptr, len).offset(off).build(),
                    (Op::Write, false) => opcode::Write::new($fd, ptr, len)
                        .offset(off)
                        .rw_flags(rw_flags)
                        .build(),
                    (Op::Flush, _) => opcode::Fsync::new($fd).build(),
                    (Op::Trim, _) if self.trim == TrimHow::UringCmd => {
                        let mut range = [0u8; 16];
                        range[..8].copy_from_slice(&(len as u64).to_ne_bytes());
                        opcode::UringCmd16::new($fd, crate::discard::BLOCK_URING_CMD_DISCARD)
                            .addr(Some(off))
                            .cmd(range)
                            .build()
                    }
                    (Op::Trim, _) if self.trim == TrimHow::Ioctl => {
                        let done = crate::discard::blkdiscard(&self._file, io);
                        self.inline[io.tag as usize] = Some(done);
                        opcode::Nop::new().build()
                    }
                    (Op::Trim | Op::WriteZeroes, _) => opcode::Fallocate::new($fd, len as u64)
                        .offset(off)
                        .mode(crate::discard::fallocate_mode(io.op))
                        .build(),
                }
            };
        }
        let sqe = sqe!(types::Fixed(0)).user_data(io.tag as u64);
        loop {
            // SAFETY: the SQE points into the arena, which outlives the ring (see `open`).
            if unsafe { self.ring.submission().push(&sqe) }.is_ok() {
                return Ok(());
            }
            // Submission queue full: hand what we have to the kernel and retry.
            self.ring
                .submit()
                .map_err(|e| EngineError::sys("io_uring_enter", e))?;
        }
    }
}

impl Drop for UringQueue {
    /// Gives the registered file back now: a ring's own teardown runs later, on a kernel
    /// worker, and until then it holds the file, so a block device opened exclusively stays
    /// claimed after the process exits and the next run is refused as busy (seen: a run started
    /// right after another on a loop device). Unregistering waits for the ring's references.
    fn drop(&mut self) {
        let _ = self.ring.submitter().unregister_files();
    }
}

impl Queue for UringQueue {
    fn submit(&mut self, ios: &[Io]) -> Result<(), EngineError> {
        for io in ios {
            self.reqs[io.tag as usize] = (*io, 0);
            self.push(io, 0)?;
        }
        Ok(())
    }

    fn commit(&mut self) -> Result<(), EngineError> {
        if !self.ring.submission().is_empty() {
            self.ring
                .submit()
                .map_err(|e| EngineError::sys("io_uring_enter", e))?;
        }
        Ok(())
    }

    fn reap(&mut self, min: usize, out: &mut Vec<Completion>) -> Result<(), EngineError> {
        let mut got = 0usize;
        loop {
            let want = min.saturating_sub(got);
            if want > 0 {
                let args = types::SubmitArgs::new().timespec(&self.timeout);
                match self.ring.submitter().submit_with_args(want, &args) {
                    Ok(_) => {}
                    Err(e) if e.raw_os_error() == Some(libc::ETIME) => {
                        if self.ring.completion().is_empty() {
                            return Err(EngineError::Timeout {
                                peer: "io_uring".into(),
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
            let mut resubmit: Vec<(Io, u32)> = Vec::new();
            for cqe in self.ring.completion() {
                let tag = cqe.user_data() as u32;
                // Only a queue that runs BLKDISCARD itself has results of its own to give.
                let res = match self.trim {
                    TrimHow::Ioctl => self.inline[tag as usize].take().unwrap_or(cqe.result()),
                    _ => cqe.result(),
                };
                let (io, done) = self.reqs[tag as usize];
                let short = matches!(io.op, Op::Read | Op::Write)
                    && res >= 0
                    && done + (res as u32) < io.len;
                if short && res > 0 {
                    self.reqs[tag as usize].1 = done + res as u32;
                    resubmit.push(self.reqs[tag as usize]);
                    continue;
                }
                let result = if short {
                    // Zero bytes moved: past the end of the file.
                    -libc::ENXIO
                } else {
                    res.min(0)
                };
                out.push(Completion { tag, result });
                got += 1;
            }
            for (io, done) in resubmit {
                self.resubmits += 1;
                self.push(&io, done)?;
            }
            if got >= min {
                return Ok(());
            }
        }
    }

    fn reap_until(
        &mut self,
        deadline: std::time::Instant,
        out: &mut Vec<Completion>,
    ) -> Result<(), EngineError> {
        let rest = deadline.saturating_duration_since(std::time::Instant::now());
        if !rest.is_zero() && self.ring.completion().is_empty() {
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
        m.insert("fixed_buffers".into(), self.fixed_buffers.into());
        m.insert("ring".into(), self.mode.into());
        m.insert("short_resubmits".into(), self.resubmits.into());
        m
    }
}
