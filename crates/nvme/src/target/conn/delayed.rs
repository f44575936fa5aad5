//! `serve nvme --delay`: held completions. An I/O command is carried out when it (with its
//! data) has arrived; what it sends back (C2HData and the CapsuleResp) is moved out of the
//! connection's [`Out`](sanbench_blockstore::out::Out) into its
//! [`DueQueue`](sanbench_blockstore::delay::DueQueue), and the loop waits for the next PDU
//! or the earliest due completion, whichever comes first (see [`sanbench_blockstore::delay`]).
//!
//! Only I/O queues wait: the admin queue (Connect, Identify, keep-alive) answers at once. An
//! R2T (the target asking for a write's data) also goes at once, or a write would pay the
//! delay twice.

use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec};
use sanbench_blockstore::out::Mark;

use super::{Conn, End};

/// The longest one wait lasts before the loop looks at the stop flag and keep-alive again
/// (the socket's read timeout, as without a delay).
const WAIT: Duration = Duration::from_millis(200);

/// The connection's state before it handled a PDU, to tell what the PDU sent.
pub(super) struct Before {
    mark: Mark,
    len: usize,
    r2ts: u64,
    /// The PDU came on an I/O queue: what it sends is an I/O's completion, unless an R2T.
    io: bool,
}

impl Conn {
    pub(super) fn before(&self) -> Before {
        Before {
            mark: self.out.mark(),
            len: self.out.len(),
            r2ts: self.r2ts,
            io: self.q.as_ref().is_some_and(|q| q.qid != 0),
        }
    }

    /// After a PDU was handled: holds what it sent when that completes an I/O.
    pub(super) fn hold_reply(&mut self, b: Before) {
        if !b.io || self.r2ts != b.r2ts || self.out.len() == b.len {
            return;
        }
        let Some(q) = &mut self.held else { return };
        let mut reply = Vec::new();
        // Read data is copied here: the completion must carry what the read found, not what
        // later writes leave in the store.
        self.out.take_since(b.mark, &mut reply);
        q.hold(self.arrived, reply);
    }

    /// Sends the completions due, then waits until the socket has bytes or the next
    /// completion falls due; true when there are bytes to read.
    pub(super) fn wait_delayed(&mut self) -> Result<bool, End> {
        let now = Instant::now();
        if let Some(q) = &mut self.held {
            while let Some(reply) = q.pop_due(now) {
                self.out.buf().extend_from_slice(&reply);
            }
        }
        self.flush()?;
        let Some(q) = &self.held else { return Ok(true) };
        let wait = q.wait(Instant::now(), WAIT);
        let ts = Timespec {
            tv_sec: wait.as_secs() as _,
            tv_nsec: wait.subsec_nanos() as _,
        };
        let mut pfd = [PollFd::new(&self.s, PollFlags::IN)];
        // EINTR or an error: as if nothing came; the loop looks again.
        Ok(rustix::event::poll(&mut pfd, Some(&ts)).is_ok_and(|n| n > 0))
    }
}
