//! Zero-copy sends on a [`SockRing`]: IORING_OP_SEND_ZC and SENDMSG_ZC (Linux 6.0/6.1), and
//! registered (fixed) buffers for SEND_ZC (IORING_RECVSEND_FIXED_BUF).
//!
//! A zero-copy send completes twice under one `user_data`: first its result, flagged
//! IORING_CQE_F_MORE when a notification follows, then the notification (IORING_CQE_F_NOTIF)
//! once the kernel no longer reads the pages. The buffer belongs to the kernel until the
//! notification, not the result: [`SockRing::take`] counts an operation done only on its
//! CQE without F_MORE, so [`SockRing::drain`] waits for notifications too.
//!
//! On loopback the pages are copied anyway when the receiving socket takes them
//! (`skb_orphan_frags_rx`); with IORING_SEND_ZC_REPORT_USAGE the notification says so
//! ([`Cqe::zc_copied`]). Whether it pays is measured in docs/BENCHMARKS.md (issue 43).

use std::io;

use io_uring::{cqueue, opcode, types, IoUring, Probe};

use super::{Cqe, SockRing};

/// IORING_SEND_ZC_REPORT_USAGE (include/uapi/linux/io_uring.h): the notification's result
/// says whether the kernel fell back to copying.
pub(super) const SEND_ZC_REPORT_USAGE: u16 = 1 << 3;
/// IORING_NOTIF_USAGE_ZC_COPIED: set in a notification's result when the data was copied.
const NOTIF_USAGE_ZC_COPIED: i32 = 1 << 31;

impl Cqe {
    /// IORING_CQE_F_MORE: another completion of the same operation follows (a zero-copy
    /// send's notification, a multishot receive still armed).
    pub fn more(&self) -> bool {
        cqueue::more(self.flags)
    }

    /// IORING_CQE_F_NOTIF: a zero-copy send's notification; its buffer is free again.
    pub fn notif(&self) -> bool {
        cqueue::notif(self.flags)
    }

    /// For a notification asked with usage reports: the kernel copied the data after all.
    pub fn zc_copied(&self) -> bool {
        self.notif() && self.result & NOTIF_USAGE_ZC_COPIED != 0
    }
}

impl SockRing {
    /// Why this kernel cannot send zero-copy (SEND_ZC, SENDMSG_ZC), or `Ok`.
    pub fn probe_zc() -> Result<(), String> {
        let ring = IoUring::new(2).map_err(|e| format!("io_uring_setup: {e}"))?;
        probe_ops(
            &ring,
            &[
                (opcode::SendZc::CODE, "SEND_ZC"),
                (opcode::SendMsgZc::CODE, "SENDMSG_ZC"),
            ],
        )
    }

    /// Pushes a SEND_ZC of `buf..buf+len` on fixed file `file`; with `fixed`, `buf` lies in
    /// registered buffer `fixed` ([`register_buffers`](Self::register_buffers)) and the
    /// kernel skips pinning the pages.
    ///
    /// # Safety
    /// The buffer must stay valid and unmodified until the completion without F_MORE (the
    /// notification) carrying `user_data` has been taken, or [`drain`](Self::drain) returned
    /// true.
    pub unsafe fn send_zc(
        &mut self,
        file: u32,
        buf: *const u8,
        len: u32,
        flags: i32,
        fixed: Option<u16>,
        user_data: u64,
    ) -> io::Result<()> {
        let e = opcode::SendZc::new(types::Fixed(file), buf, len)
            .flags(flags)
            .zc_flags(SEND_ZC_REPORT_USAGE)
            .buf_index(fixed)
            .build()
            .user_data(user_data);
        // SAFETY: the caller keeps the buffer untouched until the notification.
        unsafe { self.push(&e) }
    }

    /// Pushes a SENDMSG_ZC on fixed file `file`.
    ///
    /// # Safety
    /// As [`send_msg`](Self::send_msg), but until the notification (the completion without
    /// F_MORE).
    pub unsafe fn send_msg_zc(
        &mut self,
        file: u32,
        msg: *const libc::msghdr,
        flags: i32,
        user_data: u64,
    ) -> io::Result<()> {
        let e = super::send_msg_sqe(file, msg, flags, true).user_data(user_data);
        // SAFETY: the caller keeps msg and its buffers untouched until the notification.
        unsafe { self.push(&e) }
    }

    /// Registers `bufs` as fixed buffers 0, 1, ... for [`send_zc`](Self::send_zc).
    ///
    /// # Safety
    /// The regions must stay mapped until the ring is dropped (the kernel holds the pages
    /// pinned; a SEND_ZC naming one reads it).
    pub unsafe fn register_buffers(&mut self, bufs: &[libc::iovec]) -> io::Result<()> {
        // SAFETY: forwarded from the caller.
        unsafe { self.ring.submitter().register_buffers(bufs) }
    }
}

/// `Ok` when the ring's kernel has every opcode named, else which it lacks.
pub(super) fn probe_ops(ring: &IoUring, ops: &[(u8, &str)]) -> Result<(), String> {
    let mut probe = Probe::new();
    ring.submitter()
        .register_probe(&mut probe)
        .map_err(|e| format!("io_uring probe: {e}"))?;
    for &(code, name) in ops {
        if !probe.is_supported(code) {
            return Err(format!("no IORING_OP_{name}"));
        }
    }
    Ok(())
}
