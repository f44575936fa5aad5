//! An I/O queue's connection on io_uring ([`RingConn`]): a flush hands the encoded PDUs to a
//! SEND that the next wait submits together with the RECV for the controller's answer, so a
//! round trip is one `io_uring_enter` instead of a `sendmsg`, a `recv` and (when the answer
//! is late) a blocking wait.
//!
//! What the kernel may touch, and when: a SEND reads the batch's PDUs, swapped out of the
//! buffer that takes new ones into the ring's (`RingConn::send_buf`), so encoding goes on
//! while it is in the kernel; a RECV
//! writes the receive buffer's free tail, which `RecvBuf::spare` keeps in place until it lands.
//! Dropping the connection cancels both and waits them out; if that fails both buffers are
//! kept for the rest of the process.

use std::time::{Duration, Instant};

use sanbench_io::sockring::Done;
use sanbench_io::RingConn;

use super::Connection;
use crate::host::HostError;

/// A receive asks for at least this much room (one read takes a batch of 4 KiB replies).
const RECV_ROOM: usize = 64 * 1024;

pub(crate) struct HostRing {
    conn: RingConn,
    done: Vec<Done>,
}

impl HostRing {
    pub(crate) fn mode(&self) -> &'static str {
        self.conn.mode()
    }

    pub(crate) fn enters(&self) -> u64 {
        self.conn.enters()
    }

    /// Whether the ring is the stream's shared one.
    pub(crate) fn shared(&self) -> bool {
        self.conn.shared()
    }
}

impl Connection {
    /// Moves this connection's sends and receives onto a ring of its own. Called before any
    /// I/O (nothing queued, nothing buffered but what the socket gave already).
    pub fn use_ring(&mut self) -> Result<(), String> {
        self.use_ring_on(None)
    }

    /// [`use_ring`](Self::use_ring) on `shared` when given and it takes the socket (a
    /// multipath stream's ring), else on a ring of its own.
    pub fn use_ring_on(&mut self, shared: Option<&sanbench_io::SharedRing>) -> Result<(), String> {
        use std::os::fd::AsRawFd;
        let conn = RingConn::open_on(self.s.as_raw_fd(), shared)?;
        self.ring = Some(Box::new(HostRing {
            conn,
            done: Vec::with_capacity(4),
        }));
        Ok(())
    }

    /// The ring, if the connection is on one (for its stats).
    pub(crate) fn ring(&self) -> Option<&HostRing> {
        self.ring.as_deref()
    }

    /// Whether a caller polling the ring fd would miss something: entries not submitted, or
    /// no receive in the kernel to complete.
    pub fn ring_needs_look(&self) -> bool {
        self.ring
            .as_ref()
            .is_some_and(|r| r.conn.needs_enter() || !r.conn.receiving())
    }

    pub(super) fn ring_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        self.ring.as_ref().map(|r| r.conn.fd())
    }

    fn hr(&mut self) -> &mut HostRing {
        self.ring.as_mut().expect("ring mode")
    }

    /// `flush` on the ring: waits out the send still in the kernel (on loopback it completed
    /// inside the last wait, so no system call), then hands the queued PDUs to a new one.
    pub(super) fn ring_flush(&mut self) -> Result<(), HostError> {
        if self.wbuf.is_empty() {
            return Ok(());
        }
        self.ring_finish_send()?;
        let r = self.ring.as_mut().expect("ring mode");
        let sent = r.conn.send_buf(&mut self.wbuf, libc::MSG_WAITALL);
        match sent.map_err(HostError::from_io)? {
            true => Ok(()),
            false => Err(HostError::Protocol("a send still in the kernel".into())),
        }
    }

    /// Waits until no send is in the kernel, receiving meanwhile (a controller blocked
    /// sending us data would otherwise never read what we send).
    fn ring_finish_send(&mut self) -> Result<(), HostError> {
        let deadline = Instant::now() + self.timeout;
        loop {
            self.ring_take()?;
            if !self.hr().conn.sending() {
                return Ok(());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(HostError::Timeout("sending"));
            }
            self.ring_post_recv(RECV_ROOM)?;
            self.hr().conn.enter(1, left).map_err(HostError::from_io)?;
        }
    }

    fn ring_post_recv(&mut self, needed: usize) -> Result<(), HostError> {
        if self.hr().conn.receiving() {
            return Ok(());
        }
        let (ptr, len) = self.rbuf.spare(needed.max(RECV_ROOM));
        let r = self.ring.as_mut().expect("ring mode");
        // SAFETY: the receive buffer's free tail, which `spare` keeps in place and nothing
        // reads until `landed`; drop drains the ring before the buffer goes.
        let pushed = unsafe { r.conn.recv(ptr, len) };
        if pushed.is_err() {
            self.rbuf.landed(0);
        }
        pushed.map_err(HostError::from_io)
    }

    /// Handles what completed; true when a receive brought bytes.
    fn ring_take(&mut self) -> Result<bool, HostError> {
        let r = self.hr();
        let mut done = std::mem::take(&mut r.done);
        r.conn.take(&mut done);
        let mut got = false;
        let mut res = Ok(());
        for d in done.drain(..) {
            let step = match d {
                Done::Sent(n) => self.ring_sent(n),
                Done::Received(n) => self.ring_received(n).map(|g| got |= g),
            };
            if res.is_ok() {
                res = step;
            }
        }
        self.hr().done = done;
        res.map(|()| got)
    }

    /// A short send goes on inside the ring: only a failure is news.
    fn ring_sent(&mut self, n: i32) -> Result<(), HostError> {
        if n < 0 {
            return Err(HostError::from_io(std::io::Error::from_raw_os_error(-n)));
        }
        Ok(())
    }

    fn ring_received(&mut self, n: i32) -> Result<bool, HostError> {
        match n {
            0 => {
                self.rbuf.landed(0);
                Err(HostError::Closed)
            }
            n if n == -libc::EINTR || n == -libc::EAGAIN => {
                self.rbuf.landed(0);
                Ok(false)
            }
            n if n < 0 => {
                self.rbuf.landed(0);
                Err(HostError::from_io(std::io::Error::from_raw_os_error(-n)))
            }
            n => {
                self.rbuf.landed(n as usize);
                Ok(true)
            }
        }
    }

    /// `fill` on the ring: one receive's worth, waiting up to the timeout.
    pub(super) fn ring_fill(&mut self, needed: usize) -> Result<(), HostError> {
        let deadline = Instant::now() + self.read_timeout;
        loop {
            if self.ring_take()? {
                return Ok(());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(HostError::Timeout("a reply"));
            }
            self.ring_post_recv(needed)?;
            self.hr().conn.wait_recv(left).map_err(HostError::from_io)?;
        }
    }

    /// `try_fill` on the ring: takes what came, and leaves a receive in the kernel (submitted)
    /// so that the ring fd shows the next bytes to a caller polling it.
    pub(super) fn ring_try_fill(&mut self) -> Result<bool, HostError> {
        let mut got = self.ring_take()?;
        self.ring_post_recv(RECV_ROOM)?;
        if self.hr().conn.needs_enter() {
            self.hr()
                .conn
                .enter(0, Duration::ZERO)
                .map_err(HostError::from_io)?;
            got |= self.ring_take()?;
        }
        Ok(got)
    }

    /// Before the buffers go: cancels and waits out what the ring holds; if the kernel may
    /// still touch them, they are kept. An I/O queue dropped without `close` is a failed path
    /// being abandoned: its socket is reset (SO_LINGER 0), which multipath cannot do through
    /// the ring fd it polls, so nothing the socket holds reaches the controller after the
    /// I/Os are reissued elsewhere.
    pub(super) fn ring_drop(&mut self) {
        let Some(r) = self.ring.as_mut() else {
            return;
        };
        if !r.conn.drain() {
            std::mem::forget(self.rbuf.take_storage());
        }
        if !self.closed {
            let _ = rustix::net::sockopt::set_socket_linger(&self.s, Some(Duration::ZERO));
        }
    }
}
