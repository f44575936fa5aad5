//! Waiting on the socket without reading blindly: for a reply within a bound (held requests),
//! or for room to send while draining replies (a full socket).

use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::io::Errno;

use sanbench_io::{Completion, EngineError};

use super::NbdQueue;

impl NbdQueue {
    /// `Queue::reap_until`: what completes by `deadline`, sleeping in poll meanwhile. Held
    /// requests go out first: in an open loop a request waits on its schedule, not for
    /// company.
    pub(super) fn reap_by(
        &mut self,
        deadline: Instant,
        out: &mut Vec<Completion>,
    ) -> Result<(), EngineError> {
        if self.unsent > 0 {
            self.send_all()?;
        }
        if self.inflight > 0 {
            self.recv_some(false)?;
        }
        while self.ready.is_empty() && self.inflight > 0 {
            let now = Instant::now();
            if now >= deadline || !self.readable_within(deadline - now)? {
                break;
            }
            self.recv_some(false)?;
        }
        self.ring_release_zc()?;
        out.append(&mut self.ready);
        Ok(())
    }

    /// Whether a reply arrives within `d` (poll for POLLIN).
    pub(super) fn readable_within(&mut self, d: Duration) -> Result<bool, EngineError> {
        // On the ring, the wait takes the reply in too.
        if self.ring.is_some() {
            return self.ring_wait(d);
        }
        // Decrypted replies already inside the TLS session: a poll would not see them.
        if self.sock.tls.as_ref().is_some_and(|t| t.has_buffered()) {
            return Ok(true);
        }
        let ts = Timespec {
            tv_sec: 0,
            tv_nsec: d.as_nanos().min(999_999_999) as _,
        };
        let mut pfd = [PollFd::new(&self.sock, PollFlags::IN)];
        match rustix::event::poll(&mut pfd, Some(&ts)) {
            Ok(n) => Ok(n > 0),
            Err(Errno::INTR) => Ok(false),
            Err(e) => Err(self.io_error(e.into())),
        }
    }

    /// Waits until the socket takes more data, reading replies that arrive meanwhile.
    pub(super) fn wait_writable(&mut self) -> Result<(), EngineError> {
        let ts = Timespec {
            tv_sec: self.timeout.as_secs() as _,
            tv_nsec: self.timeout.subsec_nanos() as _,
        };
        let mut pfd = [PollFd::new(&self.sock, PollFlags::IN | PollFlags::OUT)];
        match rustix::event::poll(&mut pfd, Some(&ts)) {
            Ok(0) => return Err(self.timed_out()),
            Ok(_) => {}
            Err(Errno::INTR) => return Ok(()),
            Err(e) => return Err(self.io_error(e.into())),
        }
        if pfd[0]
            .revents()
            .intersects(PollFlags::IN | PollFlags::HUP | PollFlags::ERR)
        {
            self.recv_some(false)?;
        }
        Ok(())
    }
}
