//! `serve iscsi --delay`: held statuses. A SCSI command is carried out when it (with its
//! data) has arrived; what it sends back (Data-In and its status, or the SCSI Response) is
//! moved out of the connection's [`Out`](sanbench_blockstore::out::Out) into its
//! [`DueQueue`](sanbench_blockstore::delay::DueQueue), and the loop waits for the next PDU
//! or the earliest due status, whichever comes first (see [`sanbench_blockstore::delay`]).
//!
//! Only I/O completions wait: an R2T (the target asking for a write's data) goes at once, or
//! a write would pay the delay twice, and so do login, text, NOP-In and task management
//! responses. A status is recognised by the StatSN it takes. With jitter, statuses may leave
//! out of StatSN order; initiators take StatSN as an acknowledgement, in any order.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use rustix::event::{PollFd, PollFlags, Timespec};
use sanbench_blockstore::out::Mark;

use super::{Conn, READ_WAIT};
use crate::wire::bhs::{raw_opcode, Opcode, BHS_LEN};

/// The connection's state before it handled a PDU, to tell what the PDU sent.
pub(super) struct Before {
    mark: Mark,
    stat_sn: u32,
    /// A SCSI Command or a Data-Out: its status, if it sent one, is an I/O's completion.
    io: bool,
}

impl Conn {
    pub(super) fn before(&self, header: &[u8; BHS_LEN]) -> Before {
        let op = raw_opcode(header);
        Before {
            mark: self.out.mark(),
            stat_sn: self.stat_sn,
            io: op == Opcode::ScsiCommand as u8 || op == Opcode::DataOut as u8,
        }
    }

    /// After a PDU was handled: holds what it sent when that completes an I/O. A PDU that
    /// ends the connection (a logout) is answered after every status still held.
    pub(super) fn hold_reply(&mut self, b: Before, stop: &AtomicBool) {
        if self.close {
            let mut last = Vec::new();
            self.out.take_since(b.mark, &mut last);
            self.drain_held(stop);
            self.out.buf().extend_from_slice(&last);
            return;
        }
        if !b.io || self.stat_sn == b.stat_sn {
            return;
        }
        let Some(q) = &mut self.held else { return };
        let mut reply = Vec::new();
        // Read data is copied here: the status must carry what the read found, not what
        // later writes leave in the store.
        self.out.take_since(b.mark, &mut reply);
        q.hold(self.arrived, reply);
        // Nothing queued references the store any more (held Data-In are copies, and only
        // held PDUs carry data).
        self.refs.clear();
    }

    /// Sends the statuses due, then waits until the socket has bytes or the next status
    /// falls due (at most [`READ_WAIT`]); true when there are bytes to read.
    pub(super) fn wait_delayed(&mut self) -> bool {
        self.release_due();
        let Some(q) = &self.held else { return true };
        let wait = q.wait(Instant::now(), READ_WAIT);
        let ts = Timespec {
            tv_sec: wait.as_secs() as _,
            tv_nsec: wait.subsec_nanos() as _,
        };
        let mut pfd = [PollFd::new(&self.stream, PollFlags::IN)];
        // EINTR or an error: as if nothing came; the loop looks again.
        rustix::event::poll(&mut pfd, Some(&ts)).is_ok_and(|n| n > 0)
    }

    fn release_due(&mut self) {
        let Some(q) = &mut self.held else { return };
        let now = Instant::now();
        let mut any = false;
        while let Some(reply) = q.pop_due(now) {
            self.out.buf().extend_from_slice(&reply);
            any = true;
        }
        if any {
            self.flush();
        }
    }

    /// Every held status, each at its time, unless the target is stopping.
    fn drain_held(&mut self, stop: &AtomicBool) {
        while let Some(due) = self.held.as_ref().and_then(|q| q.next_due()) {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            let now = Instant::now();
            if due > now {
                std::thread::sleep((due - now).min(READ_WAIT));
            }
            self.release_due();
        }
    }
}
