//! The queue's socket on io_uring ([`RingConn`]): the batch's SENDMSG and the next RECV are
//! queued and go to the kernel in the `io_uring_enter` that also waits for the reply, so a
//! round trip costs one system call instead of a `sendmsg` and a `recv`.
//!
//! What the kernel may touch, and when: a SENDMSG reads `hdrs`, the arena regions of the
//! batch's WRITEs and the `iov`/`msg` kept here, so none of them changes until its completion
//! (`submit` first waits the send out, which on loopback has always completed during the
//! enter that submitted it); a RECV writes either the free tail of the receive buffer or the
//! rest of one in-flight READ's arena region, and nothing is parsed or moved in the receive
//! buffer until it completes. Dropping the queue cancels both and waits them out.

use std::time::{Duration, Instant};

use sanbench_io::sockring::Done;
use sanbench_io::{EngineError, RingConn};

use super::{NbdQueue, Recv, Seg, DIRECT_MIN};

/// Where the posted receive writes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum RecvTo {
    /// The receive buffer's free tail.
    Buf,
    /// The rest of the READ being received (`Recv::Data`), straight into the arena.
    Direct,
}

pub(crate) struct RingSide {
    conn: RingConn,
    /// The send in the kernel: the segment and the offset in it where it started, and its
    /// length.
    send: Option<(usize, usize, usize)>,
    recv: Option<RecvTo>,
    done: Vec<Done>,
}

impl RingSide {
    /// On `shared` when given and it takes the socket, else on a ring of its own.
    pub(crate) fn open(
        fd: std::os::fd::RawFd,
        shared: Option<&sanbench_io::SharedRing>,
    ) -> Result<RingSide, String> {
        Ok(RingSide {
            conn: RingConn::open_on(fd, shared)?,
            send: None,
            recv: None,
            done: Vec::with_capacity(4),
        })
    }

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

    /// Whether a caller polling the ring fd would miss work: entries not yet submitted.
    pub(crate) fn needs_enter(&self) -> bool {
        self.conn.needs_enter()
    }

    /// The send in the kernel went zero-copy (`SANBENCH_SOCKRING_FEATURES=sendzc`).
    pub(crate) fn zero_copy_in_flight(&self) -> bool {
        self.conn.zero_copy_in_flight()
    }

    pub(crate) fn recv_posted(&self) -> bool {
        self.recv.is_some()
    }

    /// Cancels what is in flight and waits for it (the buffers go next). False when the
    /// kernel may still write into them: the caller keeps them.
    #[must_use]
    pub(crate) fn drain(&mut self) -> bool {
        self.send = None;
        self.recv = None;
        self.conn.drain()
    }
}

impl NbdQueue {
    fn ring(&mut self) -> &mut RingSide {
        self.ring.as_mut().expect("ring mode")
    }

    /// `send_all` on the ring: the queued segments become one SENDMSG, submitted by the next
    /// enter.
    pub(super) fn ring_send_all(&mut self) -> Result<(), EngineError> {
        self.ring_finish_send()?;
        if self.segs.is_empty() {
            return Ok(());
        }
        self.ring_push_send(0, 0)?;
        self.unsent = 0;
        Ok(())
    }

    /// Pushes a SENDMSG of the segments from `seg` (skipping `skip` bytes of it).
    fn ring_push_send(&mut self, seg: usize, skip: usize) -> Result<(), EngineError> {
        let hdrs = self.hdrs.as_ptr();
        let arena = &self.arena;
        let bufs = self.segs[seg..].iter().enumerate().map(|(i, s)| {
            let (ptr, len) = match *s {
                Seg::Hdr { start, len } => (hdrs.wrapping_add(start), len),
                // SAFETY: bounds were checked against the arena in `queue_request`; the
                // scheduler does not modify a WRITE's source region while it is in flight,
                // and the kernel only reads it.
                Seg::Data { buf, len } => (unsafe { arena.slice(buf, len) }.as_ptr(), len),
            };
            let off = if i == 0 { skip } else { 0 };
            (ptr.wrapping_add(off), len - off)
        });
        // Kernel TLS refuses MSG_WAITALL on a send (EOPNOTSUPP); a short send is pushed again
        // by `ring_sent` anyway.
        let flags = if self.sock.ktls { 0 } else { libc::MSG_WAITALL };
        let r = self.ring.as_mut().expect("ring mode");
        // SAFETY: `hdrs` and the arena regions stay untouched while `send` is Some (every
        // change to them waits in `ring_finish_send` first), and drop drains the ring before
        // any of them goes.
        let pushed = unsafe { r.conn.send(bufs, flags) };
        match pushed {
            Ok(total) => {
                r.send = Some((seg, skip, total));
                Ok(())
            }
            Err(e) => Err(self.io_error(e)),
        }
    }

    /// Waits until no send is in the kernel, so that the header buffer and the segments may
    /// change. On loopback the completion is already there and no system call is made.
    pub(super) fn ring_finish_send(&mut self) -> Result<(), EngineError> {
        let deadline = Instant::now() + self.timeout;
        while self.ring.as_ref().is_some_and(|r| r.send.is_some()) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(self.timed_out());
            }
            let r = self.ring();
            let n = if r.conn.needs_enter() { 0 } else { 1 };
            r.conn.enter(n, left).map_err(|e| self.io_error(e))?;
            self.ring_take()?;
        }
        if self.segs.is_empty() {
            return Ok(());
        }
        if self.unsent == 0 {
            self.segs.clear();
            self.hdrs.clear();
        }
        Ok(())
    }

    /// Before completions go to the scheduler: a zero-copy send still reading arena regions
    /// is waited out to its notification, so a WRITE it carried is handed back (and its
    /// region reused) only once the kernel no longer reads it. Over TCP the peer's reply
    /// already carries the acknowledgement that frees the pages, but the notification's
    /// completion may come after the reply's, so the queue waits for it rather than assume.
    pub(super) fn ring_release_zc(&mut self) -> Result<(), EngineError> {
        if self.ready.is_empty() || !self.ring.as_ref().is_some_and(|r| r.zero_copy_in_flight()) {
            return Ok(());
        }
        self.ring_finish_send()
    }

    /// Posts the next receive unless one is in the kernel: into the rest of a large READ
    /// when nothing is buffered, else into the receive buffer's free tail (moving what is
    /// buffered to the front when the tail is short).
    fn ring_post_recv(&mut self) -> Result<(), EngineError> {
        if self.ring.as_ref().is_some_and(|r| r.recv.is_some()) {
            return Ok(());
        }
        if let Recv::Data { at, remaining, .. } = self.state {
            if self.rpos == self.rlen && remaining >= DIRECT_MIN {
                // SAFETY: the region belongs to the in-flight READ being received (checked
                // against the I/O's range when its header was parsed); the scheduler does not
                // touch it until the completion is reaped, and drop drains the ring first.
                let dst = unsafe { self.arena.slice_mut(at, remaining) }.as_mut_ptr();
                let r = self.ring();
                // SAFETY: as above: the READ's own region, exclusively ours until completion.
                let pushed = unsafe { r.conn.recv(dst, remaining) };
                r.recv = Some(RecvTo::Direct);
                return pushed.map_err(|e| self.io_error(e));
            }
        }
        if self.rpos == self.rlen {
            self.rpos = 0;
            self.rlen = 0;
        } else if self.rpos > 0 && self.rbuf.len() - self.rlen < 4096 {
            self.rbuf.copy_within(self.rpos..self.rlen, 0);
            self.rlen -= self.rpos;
            self.rpos = 0;
        }
        let room = self.rbuf.len() - self.rlen;
        let ptr = self.rbuf[self.rlen..].as_mut_ptr();
        let r = self.ring();
        // SAFETY: the free tail of the receive buffer, which nothing reads or moves until this
        // receive completes (parsing runs on completions only); drop drains the ring first.
        let pushed = unsafe { r.conn.recv(ptr, room) };
        r.recv = Some(RecvTo::Buf);
        pushed.map_err(|e| self.io_error(e))
    }

    /// Submits what is queued, waits up to `wait` for a reply (zero: only looks), and handles
    /// what completed. Returns whether a receive completed.
    pub(super) fn ring_wait(&mut self, wait: Duration) -> Result<bool, EngineError> {
        if wait.is_zero() {
            return self.ring_look();
        }
        let deadline = Instant::now() + wait;
        if self.inflight > 0 {
            self.ring_post_recv()?;
        }
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            self.ring()
                .conn
                .wait_recv(left)
                .map_err(|e| self.io_error(e))?;
            if self.ring_take()? {
                return Ok(true);
            }
            if Instant::now() >= deadline {
                return Ok(false);
            }
        }
    }

    /// A look without waiting (`reap(0)`, multipath's pass over the ready paths): what has
    /// completed is taken first, then the next receive is posted and submitted with any
    /// queued send in one enter, so the ring is left with a receive in the kernel and the
    /// caller's next poll of the ring fd covers this path (no second pass to post it).
    fn ring_look(&mut self) -> Result<bool, EngineError> {
        let mut got = self.ring_take()?;
        if self.inflight > 0 {
            self.ring_post_recv()?;
        }
        let r = self.ring();
        if r.conn.needs_enter() {
            r.conn
                .enter(0, Duration::ZERO)
                .map_err(|e| self.io_error(e))?;
            got |= self.ring_take()?;
        }
        Ok(got)
    }

    /// Handles the completions in the ring; true if a receive brought bytes.
    fn ring_take(&mut self) -> Result<bool, EngineError> {
        let r = self.ring();
        let mut done = std::mem::take(&mut r.done);
        r.conn.take(&mut done);
        let mut got = false;
        let mut r = Ok(());
        for d in done.drain(..) {
            if r.is_err() {
                continue;
            }
            r = match d {
                Done::Sent(res) => self.ring_sent(res),
                Done::Received(res) => self.ring_received(res).map(|()| got = true),
            };
        }
        self.ring().done = done;
        r.map(|()| got)
    }

    fn ring_sent(&mut self, res: i32) -> Result<(), EngineError> {
        self.sends += 1;
        let Some((mut seg, mut skip, total)) = self.ring().send.take() else {
            return Ok(());
        };
        if res < 0 {
            return Err(self.errno(-res));
        }
        let mut sent = res as usize;
        if sent >= total && seg + self.ring().conn.iov_count() >= self.segs.len() {
            return Ok(());
        }
        // A short send (a signal, or more segments than one SENDMSG takes): the rest again.
        while sent > 0 && seg < self.segs.len() {
            let len = match self.segs[seg] {
                Seg::Hdr { len, .. } | Seg::Data { len, .. } => len,
            };
            if sent >= len - skip {
                sent -= len - skip;
                seg += 1;
                skip = 0;
            } else {
                skip += sent;
                sent = 0;
            }
        }
        self.ring_push_send(seg, skip)
    }

    fn ring_received(&mut self, res: i32) -> Result<(), EngineError> {
        self.recvs += 1;
        let Some(to) = self.ring().recv.take() else {
            return Ok(());
        };
        let n = match res {
            0 => return Err(self.disconnected("server closed the connection")),
            r if r == -libc::EINTR || r == -libc::EAGAIN => return Ok(()),
            // Kernel TLS holds a record other than data (a ticket, close_notify): taken aside
            // here, and the next receive is posted as after EAGAIN.
            r if r == -libc::EIO && self.sock.ktls => {
                return match crate::tls::control_record(self.sock.fd()) {
                    Ok(crate::tls::Control::Skip) => Ok(()),
                    Ok(crate::tls::Control::Closed) => {
                        Err(self.disconnected("server closed the connection"))
                    }
                    Err(e) => Err(self.io_error(e)),
                };
            }
            r if r < 0 => return Err(self.errno(-r)),
            r => r as usize,
        };
        match (to, &self.state) {
            (
                RecvTo::Direct,
                &Recv::Data {
                    tag,
                    at,
                    remaining,
                    done,
                },
            ) => {
                let n = n.min(remaining);
                self.landed(tag, at, remaining, done, n);
                Ok(())
            }
            (RecvTo::Direct, Recv::Header) => Err(self.protocol("receive state lost")),
            (RecvTo::Buf, _) => {
                self.rlen = (self.rlen + n).min(self.rbuf.len());
                self.process()
            }
        }
    }

    fn errno(&self, e: i32) -> EngineError {
        self.io_error(std::io::Error::from_raw_os_error(e))
    }
}
