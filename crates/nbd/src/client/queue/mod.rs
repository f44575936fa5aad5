//! One NBD connection driven as a [`Queue`].
//!
//! Cookies are the scheduler's tags, so a reply finds its I/O by indexing a table. The I/O path
//! is built for few system calls and no allocation per I/O:
//!
//! * `submit` encodes the batch's request headers into one reused buffer and sends headers and
//!   WRITE payloads (straight from the arena) with one `sendmsg` of an iovec list. If the socket
//!   is full, it polls for writability *and* readability and drains replies meanwhile, so a
//!   server that blocks on sending replies can never deadlock against us.
//! * `reap` reads with large `recv`s into a receive buffer and parses every reply in it; READ
//!   data is copied from there into the I/O's arena region, or, for the rest of a large payload,
//!   received directly into the arena.
//! * The socket stays blocking with `SO_RCVTIMEO` = the I/O timeout: a wait for replies is one
//!   `recv`, and a silent server turns into [`EngineError::Timeout`] after exactly that long.
//!   Sends that must not block use `MSG_DONTWAIT`.
//! * Over io_uring (`SocketLayer::Uring`, [`ring`]) the same buffers are handed to a ring
//!   instead: the batch's SENDMSG and the next RECV go in with the `io_uring_enter` that waits
//!   for the reply, one system call per round trip.

use std::collections::BTreeMap;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use sanbench_io::{Arena, Completion, EngineError, Io, Op, Queue, QueueConfig, SocketLayer};
use serde_json::json;

use super::handshake::Negotiated;
use super::{ClientOptions, Stream};
use crate::tls::Wait;
use crate::wire::handshake::tflags;
use crate::wire::transmission::{cmd, cmd_flags, Request, REQUEST_LEN};

/// iovecs per `sendmsg`.
const IOV_BATCH: usize = 64;
/// READ data longer than this that is not yet buffered is received straight into the arena.
const DIRECT_MIN: usize = 16 * 1024;
/// Longest a request held for company (`submit_batch`) waits for a reply to arrive before it
/// is sent alone.
const HOLD_MAX: Duration = Duration::from_micros(50);

mod replies;
mod ring;
mod sock;
mod wait;

#[derive(Clone, Copy)]
struct Slot {
    active: bool,
    op: Op,
    offset: u64,
    len: u32,
    buf: usize,
    /// Error gathered from structured error chunks (negative errno).
    error: i32,
}

/// A piece of the outgoing byte stream: request headers or a WRITE's data in the arena.
#[derive(Clone, Copy)]
enum Seg {
    Hdr { start: usize, len: usize },
    Data { buf: usize, len: usize },
}

enum Recv {
    Header,
    /// READ data to place at arena offset `at`; `done` completes the I/O at the end.
    Data {
        tag: u32,
        at: usize,
        remaining: usize,
        done: bool,
    },
}

pub(crate) struct NbdQueue {
    sock: Stream,
    peer: String,
    arena: Arc<Arena>,
    timeout: Duration,
    flags: u16,
    write_flags: u16,
    slots: Vec<Slot>,
    /// Requests taken (their slots active), and how many of them are not yet sent.
    inflight: usize,
    unsent: usize,
    submit_batch: usize,
    ready: Vec<Completion>,
    hdrs: Vec<u8>,
    segs: Vec<Seg>,
    rbuf: Box<[u8]>,
    rpos: usize,
    rlen: usize,
    state: Recv,
    sends: u64,
    recvs: u64,
    direct_bytes: u64,
    /// The socket on io_uring, or `None` for the poll loop.
    ring: Option<Box<ring::RingSide>>,
    /// Why io_uring was asked for and not used.
    fallback: Option<String>,
    /// `close` ran: the connection ends in an orderly way.
    closed: bool,
}

impl NbdQueue {
    pub(crate) fn new(
        sock: Stream,
        peer: String,
        neg: &Negotiated,
        rest: &[u8],
        cfg: &QueueConfig,
        opts: &ClientOptions,
        layer: SocketLayer,
    ) -> Result<NbdQueue, EngineError> {
        let timeout = cfg.io_timeout.max(Duration::from_millis(1));
        sock.sock
            .set_read_timeout(timeout)
            .map_err(|e| EngineError::sys(format!("{peer}: set receive timeout"), e))?;
        let depth = cfg.depth.max(1) as usize;
        let size = opts.recv_buffer.max(64 * 1024).max(rest.len());
        let mut rbuf = vec![0u8; size].into_boxed_slice();
        rbuf[..rest.len()].copy_from_slice(rest);
        let write_flags = if opts.fua && neg.flags & tflags::SEND_FUA != 0 {
            cmd_flags::FUA
        } else {
            0
        };
        let idle = Slot {
            active: false,
            op: Op::Read,
            offset: 0,
            len: 0,
            buf: 0,
            error: 0,
        };
        let (ring, fallback) = match layer {
            SocketLayer::Poll => (None, None),
            // The ring sends and receives on the socket itself: records a TLS session in user
            // space must make would go out as plaintext. Never, whatever open chose.
            SocketLayer::Uring if sock.tls.is_some() => (
                None,
                Some("this connection's TLS records stayed in user space".to_string()),
            ),
            SocketLayer::Uring => match ring::RingSide::open(sock.fd(), cfg.socket_ring.as_ref()) {
                Ok(r) => (Some(Box::new(r)), None),
                Err(e) => (None, Some(e)),
            },
        };
        Ok(NbdQueue {
            sock,
            peer,
            arena: cfg.arena.clone(),
            timeout,
            flags: neg.flags,
            write_flags,
            slots: vec![idle; depth],
            inflight: 0,
            unsent: 0,
            submit_batch: opts.submit_batch.max(1) as usize,
            ready: Vec::with_capacity(depth),
            hdrs: Vec::with_capacity(depth * REQUEST_LEN),
            segs: Vec::with_capacity(depth * 2),
            rbuf,
            rpos: 0,
            rlen: rest.len(),
            state: Recv::Header,
            sends: 0,
            recvs: 0,
            direct_bytes: 0,
            ring,
            fallback,
            closed: false,
        })
    }

    fn protocol(&self, reason: impl Into<String>) -> EngineError {
        EngineError::Protocol {
            peer: self.peer.clone(),
            reason: reason.into(),
        }
    }

    fn disconnected(&self, reason: impl Into<String>) -> EngineError {
        EngineError::Disconnected {
            peer: self.peer.clone(),
            reason: reason.into(),
        }
    }

    fn timed_out(&self) -> EngineError {
        EngineError::Timeout {
            peer: self.peer.clone(),
            secs: self.timeout.as_secs_f64(),
        }
    }

    fn io_error(&self, e: io::Error) -> EngineError {
        match e.raw_os_error() {
            Some(libc::EPIPE) | Some(libc::ECONNRESET) | Some(libc::ENOTCONN) => {
                self.disconnected(e.to_string())
            }
            _ => EngineError::sys(format!("{}: socket", self.peer), e),
        }
    }

    /// `n` of the `remaining` bytes of READ `tag`'s chunk landed at arena offset `at` (read
    /// straight into the arena, by recv or by the ring): the receive state moves on, and the
    /// I/O completes when the chunk that ends it is whole.
    fn landed(&mut self, tag: u32, at: usize, remaining: usize, done: bool, n: usize) {
        self.direct_bytes += n as u64;
        self.state = Recv::Data {
            tag,
            at: at + n,
            remaining: remaining - n,
            done,
        };
        if n == remaining {
            self.state = Recv::Header;
            if done {
                let e = self.slots[tag as usize].error;
                self.complete(tag, e);
            }
        }
    }

    fn complete(&mut self, tag: u32, result: i32) {
        self.slots[tag as usize].active = false;
        self.inflight -= 1;
        self.ready.push(Completion { tag, result });
    }

    /// Adds one request (and its payload) to the outgoing batch.
    fn queue_request(&mut self, io: &Io) -> Result<(), EngineError> {
        if self.slots.get(io.tag as usize).is_none_or(|s| s.active) {
            return Err(EngineError::Invalid(format!(
                "tag {} is in flight or not below the depth",
                io.tag
            )));
        }
        let (command, flags) = match io.op {
            Op::Read => (cmd::READ, 0),
            Op::Write if io.fua && self.flags & tflags::SEND_FUA == 0 => {
                return Err(EngineError::Unsupported(
                    "FUA writes on an NBD export without SEND_FUA",
                ))
            }
            Op::Write if io.fua => (cmd::WRITE, self.write_flags | cmd_flags::FUA),
            Op::Write => (cmd::WRITE, self.write_flags),
            Op::Flush if self.flags & tflags::SEND_FLUSH == 0 => {
                // Nothing to make durable on a server without a write cache.
                self.ready.push(Completion {
                    tag: io.tag,
                    result: 0,
                });
                return Ok(());
            }
            Op::Flush => (cmd::FLUSH, 0),
            Op::Trim if self.flags & tflags::SEND_TRIM == 0 => {
                return Err(EngineError::Unsupported(
                    "TRIM on an NBD export without SEND_TRIM",
                ))
            }
            Op::Trim => (cmd::TRIM, 0),
            Op::WriteZeroes if self.flags & tflags::SEND_WRITE_ZEROES == 0 => {
                return Err(EngineError::Unsupported(
                    "WRITE_ZEROES on an NBD export without SEND_WRITE_ZEROES",
                ))
            }
            // FAST_ZERO where offered: the server fails it (ENOTSUP) rather than write the
            // zeros out, so what is measured is zeroing, never a disguised write. No NO_HOLE:
            // the server may give the space back, as a thin target does.
            Op::WriteZeroes if self.flags & tflags::SEND_FAST_ZERO != 0 => {
                (cmd::WRITE_ZEROES, cmd_flags::FAST_ZERO)
            }
            Op::WriteZeroes => (cmd::WRITE_ZEROES, 0),
        };
        let data = matches!(io.op, Op::Read | Op::Write);
        if data
            && io
                .buf
                .checked_add(io.len as usize)
                .is_none_or(|e| e > self.arena.len())
        {
            return Err(EngineError::Invalid(format!(
                "I/O buffer {}+{} outside the arena",
                io.buf, io.len
            )));
        }
        let (offset, len) = if io.op == Op::Flush {
            (0, 0)
        } else {
            (io.offset, io.len)
        };
        let start = self.hdrs.len();
        Request {
            flags,
            cmd: command,
            cookie: io.tag.into(),
            offset,
            len,
        }
        .encode(&mut self.hdrs);
        match self.segs.last_mut() {
            Some(Seg::Hdr { start: s, len: l }) if *s + *l == start => *l += REQUEST_LEN,
            _ => self.segs.push(Seg::Hdr {
                start,
                len: REQUEST_LEN,
            }),
        }
        if io.op == Op::Write && io.len > 0 {
            self.segs.push(Seg::Data {
                buf: io.buf,
                len: io.len as usize,
            });
        }
        self.slots[io.tag as usize] = Slot {
            active: true,
            op: io.op,
            offset: io.offset,
            len: io.len,
            buf: io.buf,
            error: 0,
        };
        self.inflight += 1;
        self.unsent += 1;
        Ok(())
    }

    /// Sends the queued requests unless they may wait for company: while more than half the
    /// depth is outstanding at the server, up to `submit_batch` new requests are held so that
    /// one `sendmsg` (and one server wake-up) carries them all.
    fn flush_due(&mut self) -> Result<(), EngineError> {
        if self.segs.is_empty() {
            return Ok(());
        }
        let on_wire = self.inflight - self.unsent.min(self.inflight);
        if self.unsent >= self.submit_batch || on_wire <= self.slots.len() / 2 {
            self.send_all()?;
        }
        Ok(())
    }
}

impl Queue for NbdQueue {
    fn submit(&mut self, ios: &[Io]) -> Result<(), EngineError> {
        if self.ring.is_some() {
            // The header buffer is about to grow: no send may be reading it.
            self.ring_finish_send()?;
        }
        for io in ios {
            self.queue_request(io)?;
        }
        self.flush_due()
    }

    fn reap(&mut self, min: usize, out: &mut Vec<Completion>) -> Result<(), EngineError> {
        let want = min.min(self.ready.len() + self.inflight);
        // Held requests are released once half the depth or less is outstanding, so a wait
        // below always has replies to come.
        self.flush_due()?;
        if want == 0 && self.inflight > 0 {
            self.recv_some(false)?;
        }
        while self.ready.len() < want && self.ring.is_some() {
            // On the ring a wait for a reply is also the wait a held request makes for company.
            let hold = self.unsent > 0;
            let got = self.ring_wait(if hold { HOLD_MAX } else { self.timeout })?;
            if !got && hold {
                self.send_all()?;
            } else if !got {
                return Err(self.timed_out());
            }
            self.flush_due()?;
        }
        while self.ready.len() < want {
            // Held requests wait for company only as long as a reply is about to arrive: on a
            // slow target the wait for the next completion would land in their latency.
            if self.unsent > 0 && !self.readable_within(HOLD_MAX)? {
                self.send_all()?;
            }
            self.recv_some(true)?;
            self.flush_due()?;
        }
        self.ring_release_zc()?;
        out.append(&mut self.ready);
        Ok(())
    }

    fn reap_until(
        &mut self,
        deadline: std::time::Instant,
        out: &mut Vec<Completion>,
    ) -> Result<(), EngineError> {
        self.reap_by(deadline, out)
    }

    fn readiness(&self) -> Option<sanbench_io::Readiness<'_>> {
        use std::os::fd::AsFd;
        if let Some(r) = &self.ring {
            return Some(sanbench_io::Readiness {
                fd: r.fd(),
                write: false,
                // Entries not yet in the kernel (a deferred send, no receive posted) make no
                // completion: reap(0) has to enter first.
                held: !self.ready.is_empty()
                    || r.needs_enter()
                    || (self.inflight > 0 && !r.recv_posted()),
            });
        }
        Some(sanbench_io::Readiness {
            fd: self.sock.as_fd(),
            write: false,
            // Replies decrypted inside the TLS session: the socket no longer shows them.
            held: !self.ready.is_empty()
                || self.sock.tls.as_ref().is_some_and(|t| t.has_buffered()),
        })
    }

    fn stats(&self) -> BTreeMap<String, serde_json::Value> {
        let mut m = BTreeMap::new();
        m.insert("nbd_send_calls".into(), json!(self.sends));
        m.insert("nbd_recv_calls".into(), json!(self.recvs));
        m.insert("nbd_direct_recv_bytes".into(), json!(self.direct_bytes));
        m.insert("nbd_submit_batch".into(), json!(self.submit_batch));
        let layer = if self.ring.is_some() {
            SocketLayer::Uring
        } else {
            SocketLayer::Poll
        };
        m.insert("nbd_socket".into(), json!(layer.name()));
        if self.sock.ktls || self.sock.tls.is_some() {
            let records = if self.sock.ktls { "kernel" } else { "user" };
            m.insert("nbd_tls_records".into(), json!(records));
        }
        if let Some(r) = &self.ring {
            m.insert("nbd_ring_enters".into(), json!(r.enters()));
            m.insert("nbd_ring_setup".into(), json!(r.mode()));
            m.insert(
                "nbd_socket_ring".into(),
                json!(sanbench_io::sockring::ring_kind(r.shared())),
            );
        }
        if let Some(f) = &self.fallback {
            m.insert("nbd_socket_fallback".into(), json!(f));
        }
        m
    }

    fn close(&mut self) -> Result<(), EngineError> {
        self.closed = true;
        let mut h = [0u8; REQUEST_LEN];
        Request {
            flags: 0,
            cmd: cmd::DISC,
            cookie: 0,
            offset: 0,
            len: 0,
        }
        .encode_to(&mut h);
        if self.ring.is_some() {
            self.ring_finish_send()?;
        }
        let fd = self.sock.fd();
        if let Some(t) = &mut self.sock.tls {
            let r = t.send_all(fd, &h);
            t.close(fd);
            return r.map_err(|e| self.io_error(e));
        }
        let r = rustix::net::send(&self.sock, &h, Wait::Block.send_flags());
        if self.sock.ktls {
            crate::tls::close_notify(fd);
        }
        match r {
            Ok(_) => Ok(()),
            Err(e) => Err(self.io_error(e.into())),
        }
    }
}

impl Drop for NbdQueue {
    /// The ring may still hold a receive into the receive buffer or the arena (a queue
    /// dropped after an error): it is cancelled and waited out before they go. A ring queue
    /// dropped without `close` is a failed path being abandoned (multipath): its socket is
    /// reset (SO_LINGER 0), as multipath does through `readiness` for a poll-loop queue
    /// (whose readiness fd is the socket; a ring queue's is the ring), so that nothing the
    /// socket still holds reaches the server after the I/Os are reissued elsewhere.
    fn drop(&mut self) {
        if let Some(r) = &mut self.ring {
            if !r.drain() {
                // Operations the ring could not cancel (dropped on a thread other than its
                // own, or a kernel that did not answer within the limit) may still write into
                // the receive buffer or the arena: both stay allocated for the rest of the
                // process rather than be reused under the kernel.
                std::mem::forget(std::mem::take(&mut self.rbuf));
                std::mem::forget(self.arena.clone());
            }
            if !self.closed {
                let _ =
                    rustix::net::sockopt::set_socket_linger(&self.sock.sock, Some(Duration::ZERO));
            }
        }
    }
}
