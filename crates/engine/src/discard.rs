//! Trims and write-zeroes on files and block devices.
//!
//! On a file, a trim is `fallocate(2)` PUNCH_HOLE (the range's blocks go back to the file
//! system; a hole reads as zeros) and a write-zeroes ZERO_RANGE (reads as zeros, allocated,
//! without writing them), on a sync engine's thread or as io_uring's `IORING_OP_FALLOCATE`.
//!
//! On a block device a trim is a discard (REQ_OP_DISCARD: SCSI UNMAP, NVMe deallocate, a
//! loop device's punched hole), which promises nothing about what the range reads back: as
//! io_uring's `BLOCK_URING_CMD_DISCARD` where the kernel has it (6.12+; probed once per
//! target), else `BLKDISCARD` on the thread that issues it (the sync engine's worker, or the
//! io_uring stream's own thread, as fio's io_uring engine does). A write-zeroes is
//! `blkdev_fallocate`'s ZERO_RANGE: BLKZEROOUT, the device's WRITE ZEROES / WRITE SAME where
//! it has one, else written zeros. The result's `discard` parameter says which ran.

use std::fs::File;
use std::os::fd::AsRawFd;

use crate::engine::{Io, Op};

/// What a file target's trims and write-zeroes are, for its parameters.
pub const FILE_DISCARD: &str =
    "fallocate: PUNCH_HOLE|KEEP_SIZE for trim, ZERO_RANGE|KEEP_SIZE for write-zeroes";
/// `_IO(0x12, 119)`: discard a byte range of a block device (linux/fs.h).
const BLKDISCARD: libc::c_ulong = 0x1277;
/// `_IO(0x12, 0)`: io_uring's block-device discard command (linux/fs.h, Linux 6.12+).
pub const BLOCK_URING_CMD_DISCARD: u32 = 0x1200;

/// How a target's trims are carried out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrimHow {
    /// fallocate PUNCH_HOLE (files).
    Fallocate,
    /// io_uring's BLOCK_URING_CMD_DISCARD (block devices, Linux 6.12+).
    UringCmd,
    /// The BLKDISCARD ioctl on the issuing thread (block devices).
    Ioctl,
}

impl TrimHow {
    /// The result's `discard` parameter, for a queue on io_uring (`uring`) or on threads.
    pub fn describe(self, uring: bool) -> &'static str {
        match self {
            TrimHow::Fallocate => FILE_DISCARD,
            TrimHow::UringCmd => {
                "trim: discard as io_uring BLOCK_URING_CMD_DISCARD; write-zeroes: fallocate \
                 ZERO_RANGE|KEEP_SIZE (BLKZEROOUT)"
            }
            TrimHow::Ioctl if uring => {
                "trim: discard by the BLKDISCARD ioctl on the stream's thread (no io_uring \
                 block discard on this kernel); write-zeroes: fallocate ZERO_RANGE|KEEP_SIZE \
                 (BLKZEROOUT)"
            }
            TrimHow::Ioctl => {
                "trim: discard by the BLKDISCARD ioctl on a worker thread; write-zeroes: \
                 fallocate ZERO_RANGE|KEEP_SIZE (BLKZEROOUT)"
            }
        }
    }
}

/// How trims on the block device `file` (opened for writing) run here: io_uring's block
/// discard when this kernel has it. The probe is a discard of no bytes, which a kernel with
/// the command refuses as an invalid range (EINVAL) before touching anything, and one without
/// it (or a device without discard) as unsupported.
pub fn block_trim(file: &File) -> TrimHow {
    use io_uring::{opcode, types, IoUring, Probe};
    let probe = || -> Option<bool> {
        let mut ring = IoUring::new(2).ok()?;
        let mut p = Probe::new();
        ring.submitter().register_probe(&mut p).ok()?;
        if !p.is_supported(opcode::UringCmd16::CODE) {
            return Some(false);
        }
        let sqe = opcode::UringCmd16::new(types::Fd(file.as_raw_fd()), BLOCK_URING_CMD_DISCARD)
            .addr(Some(0))
            .build()
            .user_data(1);
        // SAFETY: the command carries no pointer (start and length are plain numbers).
        unsafe { ring.submission().push(&sqe) }.ok()?;
        ring.submit_and_wait(1).ok()?;
        let res = ring.completion().next()?.result();
        Some(matches!(-res, libc::EINVAL | libc::EFAULT) || res == 0)
    };
    if probe() == Some(true) {
        TrimHow::UringCmd
    } else {
        TrimHow::Ioctl
    }
}

/// A system call returning 0 or -1 with errno, repeated while interrupted: 0 or a negative
/// errno.
fn retrying(call: impl Fn() -> i32) -> i32 {
    loop {
        if call() == 0 {
            return 0;
        }
        let e = std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO);
        if e != libc::EINTR {
            return -e;
        }
    }
}

/// A discard of `io`'s range by BLKDISCARD on the calling thread: 0 or a negative errno.
pub fn blkdiscard(file: &File, io: &Io) -> i32 {
    let range: [u64; 2] = [io.offset, io.len as u64];
    // SAFETY: BLKDISCARD reads two u64s from the pointer, which lives across the call.
    retrying(|| unsafe { libc::ioctl(file.as_raw_fd(), BLKDISCARD, range.as_ptr()) })
}

/// The fallocate mode of a trim or a write-zeroes.
pub fn fallocate_mode(op: Op) -> i32 {
    match op {
        Op::WriteZeroes => libc::FALLOC_FL_ZERO_RANGE | libc::FALLOC_FL_KEEP_SIZE,
        _ => libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
    }
}

/// Carries out a trim or a write-zeroes on the calling thread: 0 or a negative errno.
pub fn fallocate(file: &File, io: &Io) -> i32 {
    // SAFETY: fallocate on an open fd reads no memory of ours.
    retrying(|| unsafe {
        libc::fallocate(
            file.as_raw_fd(),
            fallocate_mode(io.op),
            io.offset as libc::off_t,
            io.len as libc::off_t,
        )
    })
}
