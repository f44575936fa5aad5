//! Waiting on the socket without reading blindly: for a reply within a bound (held requests),
//! or for room to send while draining replies (a full socket).

use std::io;
use std::time::Duration;

use sanbench_engine::EngineError;

use super::NbdQueue;

impl NbdQueue {
    /// Whether a reply arrives within `d` (ppoll for POLLIN).
    pub(super) fn readable_within(&mut self, d: Duration) -> Result<bool, EngineError> {
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
