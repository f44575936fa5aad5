//! Waiting on the socket without reading blindly: for a reply within a bound (held requests),
//! or for room to send while draining replies (a full socket).

use std::io;
use std::time::{Duration, Instant};

use sanbench_engine::{Completion, EngineError};

use super::NbdQueue;

impl NbdQueue {
    /// `Queue::reap_until`: what completes by `deadline`, sleeping in ppoll meanwhile. Held
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
        out.append(&mut self.ready);
        Ok(())
    }

    /// Whether a reply arrives within `d` (ppoll for POLLIN).
    pub(super) fn readable_within(&mut self, d: Duration) -> Result<bool, EngineError> {
        // Decrypted replies already inside the TLS session: a poll would not see them.
        if self.sock.tls.as_ref().is_some_and(|t| t.has_buffered()) {
            return Ok(true);
        }
        let mut pfd = libc::pollfd {
            fd: self.sock.fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: d.as_nanos().min(999_999_999) as libc::c_long,
        };
        // SAFETY: one valid pollfd and a timespec, both live for the call; no signal mask.
        let r = unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) };
        if r < 0 {
            let e = io::Error::last_os_error();
            return if e.raw_os_error() == Some(libc::EINTR) {
                Ok(false)
            } else {
                Err(self.io_error(e))
            };
        }
        Ok(r > 0)
    }

    /// Waits until the socket takes more data, reading replies that arrive meanwhile.
    pub(super) fn wait_writable(&mut self) -> Result<(), EngineError> {
        let mut pfd = libc::pollfd {
            fd: self.sock.fd(),
            events: libc::POLLIN | libc::POLLOUT,
            revents: 0,
        };
        let ms = self.timeout.as_millis().min(i32::MAX as u128) as libc::c_int;
        // SAFETY: one valid pollfd for the duration of the call.
        let r = unsafe { libc::poll(&mut pfd, 1, ms) };
        if r == 0 {
            return Err(self.timed_out());
        }
        if r < 0 {
            let e = io::Error::last_os_error();
            return if e.raw_os_error() == Some(libc::EINTR) {
                Ok(())
            } else {
                Err(self.io_error(e))
            };
        }
        if pfd.revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0 {
            self.recv_some(false)?;
        }
        Ok(())
    }
}
