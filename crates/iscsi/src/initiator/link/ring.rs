//! A session's socket on io_uring ([`RingConn`]): a flush hands the encoded PDUs to a SEND
//! that the next wait submits together with the RECV for the target's answer, so a round trip
//! is one `io_uring_enter` where the poll loop makes a `send`, a `ppoll` and a `recv`.
//!
//! The poll loop's primitives keep their meaning: a flush that finds the last send still in
//! the kernel reports the socket full (`blocked`), `wait` waits for either completion, and
//! bytes a completion brought into the receive buffer while the session waited for something
//! else are reported by the next `recv`. What the kernel may touch, and when: a SEND reads the
//! batch's PDUs, swapped out of the session's output buffer into the ring's
//! (`RingConn::send_buf`), so encoding goes on meanwhile; a RECV writes the receive buffer's free tail, which `RecvBuf::spare` keeps in
//! place until it lands. Dropping the session cancels both and waits them out; if that fails
//! both buffers are kept for the rest of the process.

use std::time::Duration;

use sanbench_io::sockring::Done;
use sanbench_io::{EngineError, RingConn};

use super::{Link, Recv, RecvBuf};

pub(crate) struct LinkRing {
    conn: RingConn,
    /// A receive brought bytes that no `recv` has reported yet.
    data: bool,
    /// The socket's read timeout when the ring was opened (the session's tick), kept so that
    /// a wait does not ask the kernel for it.
    tick: Duration,
    done: Vec<Done>,
}

impl LinkRing {
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

    pub(crate) fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.conn.fd()
    }

    /// Whether a caller polling the ring fd would miss something: entries not submitted, no
    /// receive in the kernel, or bytes received and not yet reported.
    pub(crate) fn needs_look(&self) -> bool {
        self.data || self.conn.needs_enter() || !self.conn.receiving()
    }
}

impl Link {
    /// Moves this connection's sends and receives onto `shared` when given and it takes the
    /// socket, else onto a ring of its own (after login).
    pub(crate) fn use_ring(
        &mut self,
        shared: Option<&sanbench_io::SharedRing>,
    ) -> Result<(), String> {
        use std::os::fd::AsRawFd;
        let conn = RingConn::open_on(self.stream.as_raw_fd(), shared)?;
        let tick = self.stream.read_timeout().ok().flatten();
        self.ring = Some(Box::new(LinkRing {
            conn,
            data: false,
            tick: tick.unwrap_or(Duration::from_millis(100)),
            done: Vec::with_capacity(4),
        }));
        Ok(())
    }

    /// How long one wait of the session's loop lasts: the socket's read timeout.
    pub(crate) fn tick(&self) -> Duration {
        match &self.ring {
            Some(r) => r.tick,
            None => self
                .stream
                .read_timeout()
                .ok()
                .flatten()
                .unwrap_or(Duration::from_millis(100)),
        }
    }

    fn lr(&mut self) -> &mut LinkRing {
        self.ring.as_mut().expect("ring mode")
    }

    /// Hands `out` to a send (swapping it with the buffer of the last one, which comes back
    /// empty). False, and `out` untouched, while the last send is still in the kernel.
    pub(crate) fn ring_send(
        &mut self,
        rx: &mut RecvBuf,
        out: &mut Vec<u8>,
    ) -> Result<bool, EngineError> {
        self.ring_take(rx)?;
        let sent = self.lr().conn.send_buf(out, libc::MSG_WAITALL);
        sent.map_err(|e| self.io_err(e))
    }

    fn ring_post_recv(&mut self, rx: &mut RecvBuf) -> Result<(), EngineError> {
        if self.lr().conn.receiving() {
            return Ok(());
        }
        let (ptr, len) = rx.spare();
        // SAFETY: the receive buffer's free tail, which `spare` keeps in place and nothing
        // reads until `landed`; drop drains the ring before the buffer goes.
        let pushed = unsafe { self.lr().conn.recv(ptr, len) };
        if pushed.is_err() {
            rx.landed(0);
        }
        pushed.map_err(|e| self.io_err(e))
    }

    /// Handles what completed: a short send goes on, received bytes are marked for `recv`.
    fn ring_take(&mut self, rx: &mut RecvBuf) -> Result<(), EngineError> {
        let r = self.lr();
        let mut done = std::mem::take(&mut r.done);
        r.conn.take(&mut done);
        let mut res = Ok(());
        for d in done.drain(..) {
            let step = match d {
                Done::Sent(n) if n < 0 => Err(self.errno(-n)),
                // A short send goes on inside the ring.
                Done::Sent(_) => Ok(()),
                Done::Received(0) => {
                    rx.landed(0);
                    Err(self.lost("the target closed the connection"))
                }
                Done::Received(n) if n == -libc::EINTR || n == -libc::EAGAIN => {
                    rx.landed(0);
                    Ok(())
                }
                Done::Received(n) if n < 0 => {
                    rx.landed(0);
                    Err(self.errno(-n))
                }
                Done::Received(n) => {
                    rx.landed(n as usize);
                    self.lr().data = true;
                    Ok(())
                }
            };
            if res.is_ok() {
                res = step;
            }
        }
        self.lr().done = done;
        res
    }

    fn errno(&self, e: i32) -> EngineError {
        self.io_err(std::io::Error::from_raw_os_error(e))
    }

    /// Unless bytes are already received: posts the receive, and waits up to `wait` for it
    /// (`None`: only submits what is queued and looks).
    fn ring_wait_data(
        &mut self,
        rx: &mut RecvBuf,
        wait: Option<Duration>,
    ) -> Result<(), EngineError> {
        self.ring_take(rx)?;
        if self.lr().data {
            return Ok(());
        }
        self.ring_post_recv(rx)?;
        let c = &mut self.lr().conn;
        let w = match wait {
            Some(d) => c.wait_recv(d).map(|_| ()),
            None if c.needs_enter() => c.enter(0, Duration::ZERO).map(|_| ()),
            None => Ok(()),
        };
        w.map_err(|e| self.io_err(e))?;
        self.ring_take(rx)
    }

    /// `recv` on the ring: bytes already received, else a receive that waits (when
    /// `blocking`) up to the socket's read timeout (the session's tick), or only a look.
    pub(super) fn ring_recv(
        &mut self,
        rx: &mut RecvBuf,
        blocking: bool,
    ) -> Result<Recv, EngineError> {
        let wait = blocking.then(|| self.lr().tick);
        self.ring_wait_data(rx, wait)?;
        Ok(if std::mem::take(&mut self.lr().data) {
            Recv::Data
        } else {
            Recv::Idle
        })
    }

    /// `readable_within` on the ring: the receive waits up to `d`; `recv` reports what came.
    pub(super) fn ring_readable_within(
        &mut self,
        rx: &mut RecvBuf,
        d: Duration,
    ) -> Result<bool, EngineError> {
        self.ring_wait_data(rx, Some(d))?;
        Ok(self.lr().data)
    }

    /// `wait` on the ring: until bytes came or the send in the kernel completed, at most
    /// `timeout`. Returns (bytes received, no send in the kernel).
    pub(super) fn ring_wait(
        &mut self,
        rx: &mut RecvBuf,
        timeout: Duration,
    ) -> Result<(bool, bool), EngineError> {
        self.ring_take(rx)?;
        if !self.lr().data {
            self.ring_post_recv(rx)?;
            let w = self
                .lr()
                .conn
                .enter(1, timeout.max(Duration::from_millis(1)));
            w.map_err(|e| self.io_err(e))?;
            self.ring_take(rx)?;
        }
        let r = self.lr();
        Ok((r.data, !r.conn.sending()))
    }

    /// Before the buffers go: cancels and waits out what the ring holds; when the kernel may
    /// still touch them, they are kept for the process's life. A session dropped without a
    /// logout is a failed path being abandoned: its socket is reset (SO_LINGER 0), which
    /// multipath cannot do through the ring fd it polls, so nothing the socket still holds
    /// reaches the target after the I/Os are reissued elsewhere.
    pub(crate) fn ring_drop(&mut self, rx: &mut RecvBuf, logged_out: bool) {
        let Some(r) = self.ring.as_mut() else {
            return;
        };
        if !r.conn.drain() {
            std::mem::forget(rx.take_storage());
        }
        if !logged_out {
            let _ = rustix::net::sockopt::set_socket_linger(&self.stream, Some(Duration::ZERO));
        }
    }
}
