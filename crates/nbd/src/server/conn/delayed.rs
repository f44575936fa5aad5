//! `serve nbd --delay`: the socket side of held replies. Each request is carried out when it
//! arrives; its reply is moved out of the send buffer into the connection's
//! [`DueQueue`](sanbench_blockstore::delay::DueQueue), and the loop waits for the next
//! requests or the earliest due reply, whichever comes first (see
//! [`sanbench_blockstore::delay`] for the semantics). Coalescing is off meanwhile: this wait
//! takes its place.

use std::io;
use std::os::unix::io::AsRawFd;
use std::sync::atomic::Ordering;
use std::time::Instant;

use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::net::RecvFlags;

use super::super::POLL;
use super::{Conn, End, R};
use crate::error::NbdError;
use crate::tls::Wait;

impl Conn<'_> {
    /// Holds the reply bytes a request appended to the send buffer since `start`, when
    /// replies are delayed (a no-op otherwise).
    pub(super) fn hold_since(&mut self, start: usize) {
        let Some(q) = &mut self.held else { return };
        if self.out.len() > start {
            q.hold(self.arrived, self.out.split_off(start));
        }
    }

    /// Sends the replies due, then waits for more requests, sending each reply as it falls
    /// due meanwhile. Returns once bytes were read.
    pub(super) fn wait_delayed(&mut self) -> R<()> {
        loop {
            self.release_due()?;
            if self.read_nowait()? {
                return Ok(());
            }
            let Some(q) = &self.held else {
                return self.read_more(None);
            };
            let wait = q.wait(Instant::now(), POLL);
            let ts = Timespec {
                tv_sec: wait.as_secs() as _,
                tv_nsec: wait.subsec_nanos() as _,
            };
            // Whatever ends the wait (bytes, the time, EINTR), the loop looks again.
            let _ = rustix::event::poll(&mut [PollFd::new(&self.sock, PollFlags::IN)], Some(&ts));
            if self.shutdown.load(Ordering::Relaxed) {
                return Err(End::Clean);
            }
        }
    }

    /// Every held reply, each at its time (before the connection ends on DISC).
    pub(super) fn drain_held(&mut self) -> R<()> {
        while let Some(due) = self.held.as_ref().and_then(|q| q.next_due()) {
            let now = Instant::now();
            if due > now {
                std::thread::sleep(due - now);
            }
            self.release_due()?;
        }
        Ok(())
    }

    fn release_due(&mut self) -> R<()> {
        let Some(q) = &mut self.held else {
            return Ok(());
        };
        let now = Instant::now();
        while let Some(reply) = q.pop_due(now) {
            self.out.extend_from_slice(&reply);
        }
        self.flush_out()
    }

    /// Takes in what the socket (or the TLS session) holds without blocking, and notes when it
    /// arrived; false when there was nothing.
    fn read_nowait(&mut self) -> R<bool> {
        self.make_room();
        let fd = self.sock.as_raw_fd();
        loop {
            let buf = &mut self.rbuf[self.rlen..];
            // A TLS session may hold decrypted requests that a poll of the socket cannot see,
            // so it is asked first, never blocking.
            let r = match &mut self.tls {
                Some(t) => t.recv(fd, buf, Wait::Never),
                None if self.ktls => crate::tls::kernel_recv(fd, buf, Wait::Never),
                None => rustix::net::recv(&self.sock, buf, RecvFlags::DONTWAIT)
                    .map(|(_, n)| n)
                    .map_err(io::Error::from),
            };
            match r {
                Ok(0) => return Err(End::Clean),
                Ok(n) => {
                    self.rlen += n;
                    self.arrived = Instant::now();
                    return Ok(true);
                }
                Err(e) => match e.kind() {
                    io::ErrorKind::Interrupted => {}
                    io::ErrorKind::WouldBlock => return Ok(false),
                    io::ErrorKind::ConnectionReset => return Err(End::Clean),
                    _ => {
                        return Err(End::Fail(NbdError::io(
                            format!("read from {}", self.peer),
                            e,
                        )))
                    }
                },
            }
        }
    }
}
