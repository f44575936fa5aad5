//! Trims and write-zeroes on files and block devices: `fallocate(2)`, on a sync engine's
//! thread or as io_uring's `IORING_OP_FALLOCATE`.
//!
//! On a file, PUNCH_HOLE gives the range's blocks back to the file system (a hole reads as
//! zeros) and ZERO_RANGE makes it read as zeros, allocated, without writing them. On a block
//! device the kernel's `blkdev_fallocate` carries the same modes out: ZERO_RANGE as
//! BLKZEROOUT (the device's WRITE ZEROES / WRITE SAME where it has one, else written zeros),
//! PUNCH_HOLE as a zero-out that may unmap (so the range still reads as zeros), which is
//! what the result's `discard` parameter says.

use std::fs::File;
use std::os::fd::AsRawFd;

use crate::engine::{Io, Op};

/// What a file target's trims and write-zeroes are, for its parameters.
pub const FILE_DISCARD: &str =
    "fallocate: PUNCH_HOLE|KEEP_SIZE for trim, ZERO_RANGE|KEEP_SIZE for write-zeroes";
/// The same on a block device, where the kernel turns them into block-layer commands.
pub const BLOCK_DISCARD: &str = "fallocate (blkdev_fallocate): PUNCH_HOLE|KEEP_SIZE (zero-out \
     that may unmap) for trim, ZERO_RANGE|KEEP_SIZE (BLKZEROOUT) for write-zeroes";

/// The fallocate mode of a trim or a write-zeroes.
pub fn fallocate_mode(op: Op) -> i32 {
    match op {
        Op::WriteZeroes => libc::FALLOC_FL_ZERO_RANGE | libc::FALLOC_FL_KEEP_SIZE,
        _ => libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
    }
}

/// Carries out a trim or a write-zeroes on the calling thread: 0 or a negative errno.
pub fn fallocate(file: &File, io: &Io) -> i32 {
    loop {
        // SAFETY: fallocate on an open fd reads no memory of ours.
        let rc = unsafe {
            libc::fallocate(
                file.as_raw_fd(),
                fallocate_mode(io.op),
                io.offset as libc::off_t,
                io.len as libc::off_t,
            )
        };
        if rc == 0 {
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
