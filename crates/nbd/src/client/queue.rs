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

use std::collections::BTreeMap;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use sanbench_engine::{Arena, Completion, EngineError, Io, Op, Queue, QueueConfig};
use serde_json::json;

use super::handshake::Negotiated;
use super::{ClientOptions, Sock};
use crate::wire::handshake::tflags;
use crate::wire::transmission::{
    chunk, cmd, cmd_flags, Chunk, ReplyHeader, Request, CHUNK_HEADER_LEN, REQUEST_LEN,
};
use crate::wire::{errno, Parsed, MAX_CHUNK_META};

/// iovecs per `sendmsg`.
const IOV_BATCH: usize = 64;
/// READ data longer than this that is not yet buffered is received straight into the arena.
const DIRECT_MIN: usize = 16 * 1024;
/// Longest a request held for company (`submit_batch`) waits for a reply to arrive before it
/// is sent alone.
const HOLD_MAX: Duration = Duration::from_micros(50);

#[path = "queue_wait.rs"]
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
    sock: Sock,
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
}

impl NbdQueue {
    pub(crate) fn new(
        sock: Sock,
        peer: String,
        neg: &Negotiated,
        rest: &[u8],
        cfg: &QueueConfig,
        opts: &ClientOptions,
    ) -> Result<NbdQueue, EngineError> {
        let timeout = cfg.io_timeout.max(Duration::from_millis(1));
        sock.set_read_timeout(timeout)
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

    /// Sends every queued segment, draining replies whenever the socket is full.
    fn send_all(&mut self) -> Result<(), EngineError> {
        let (mut seg, mut skip) = (0usize, 0usize);
        while seg < self.segs.len() {
            let mut iov = [libc::iovec {
                iov_base: std::ptr::null_mut(),
                iov_len: 0,
            }; IOV_BATCH];
            let mut n = 0;
            for (i, s) in self.segs[seg..].iter().take(IOV_BATCH).enumerate() {
                let (ptr, len) = match *s {
                    Seg::Hdr { start, len } => (self.hdrs[start..].as_ptr(), len),
                    // SAFETY: bounds were checked against the arena in `queue_request`; the
                    // scheduler does not modify a WRITE's source region while it is in flight,
                    // and the kernel only reads it.
                    Seg::Data { buf, len } => (unsafe { self.arena.slice(buf, len) }.as_ptr(), len),
                };
                let off = if i == 0 { skip } else { 0 };
                iov[i] = libc::iovec {
                    iov_base: ptr.wrapping_add(off) as *mut libc::c_void,
                    iov_len: len - off,
                };
                n += 1;
            }
            // SAFETY: a zeroed msghdr is valid; we point it at `n` initialised iovecs that
            // outlive the call.
            let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
            msg.msg_iov = iov.as_mut_ptr();
            msg.msg_iovlen = n as _;
            // SAFETY: `msg` describes memory that stays valid for the call (hdrs and the arena,
            // both owned by or shared with self).
            let r = unsafe {
                libc::sendmsg(
                    self.sock.fd(),
                    &msg,
                    libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
                )
            };
            self.sends += 1;
            if r >= 0 {
                let mut sent = r as usize;
                while sent > 0 && seg < self.segs.len() {
                    let len = match self.segs[seg] {
                        Seg::Hdr { len, .. } | Seg::Data { len, .. } => len,
                    };
                    let left = len - skip;
                    if sent >= left {
                        sent -= left;
                        seg += 1;
                        skip = 0;
                    } else {
                        skip += sent;
                        sent = 0;
                    }
                }
                continue;
            }
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EINTR) => {}
                Some(libc::EAGAIN) => self.wait_writable()?,
                _ => return Err(self.io_error(e)),
            }
        }
        self.segs.clear();
        self.hdrs.clear();
        self.unsent = 0;
        Ok(())
    }

    /// One `recv` (blocking up to the I/O timeout unless `block` is false), then parses.
    fn recv_some(&mut self, block: bool) -> Result<(), EngineError> {
        let flags = if block { 0 } else { libc::MSG_DONTWAIT };
        if let Recv::Data {
            tag,
            at,
            remaining,
            done,
        } = self.state
        {
            if self.rpos == self.rlen && remaining >= DIRECT_MIN {
                // SAFETY: the region belongs to the in-flight READ `tag` (checked against the
                // I/O's range when the chunk header was parsed); the scheduler does not touch it
                // until the completion is reaped.
                let dst = unsafe { self.arena.slice_mut(at, remaining) };
                let n = self.recv_into(dst.as_mut_ptr(), remaining, flags)?;
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
                return Ok(());
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
        let n = self.recv_into(ptr, room, flags)?;
        self.rlen += n;
        self.process()
    }

    /// `recv` into `len` bytes at `ptr`; 0 only for a nonblocking call with nothing to read.
    fn recv_into(&mut self, ptr: *mut u8, len: usize, flags: i32) -> Result<usize, EngineError> {
        loop {
            self.recvs += 1;
            // SAFETY: callers pass a region of `len` writable bytes they own exclusively.
            let r = unsafe { libc::recv(self.sock.fd(), ptr.cast(), len, flags) };
            if r > 0 {
                return Ok(r as usize);
            }
            if r == 0 {
                return Err(self.disconnected("server closed the connection"));
            }
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EINTR) => {}
                Some(libc::EAGAIN) if flags & libc::MSG_DONTWAIT != 0 => return Ok(0),
                Some(libc::EAGAIN) => return Err(self.timed_out()),
                _ => return Err(self.io_error(e)),
            }
        }
    }

    /// Parses every complete reply in the receive buffer.
    fn process(&mut self) -> Result<(), EngineError> {
        loop {
            if let Recv::Data {
                tag,
                at,
                remaining,
                done,
            } = self.state
            {
                let n = remaining.min(self.rlen - self.rpos);
                if n > 0 {
                    // SAFETY: as in `recv_some`: the READ's own region, checked at its header.
                    let dst = unsafe { self.arena.slice_mut(at, n) };
                    dst.copy_from_slice(&self.rbuf[self.rpos..self.rpos + n]);
                    self.rpos += n;
                }
                if n < remaining {
                    self.state = Recv::Data {
                        tag,
                        at: at + n,
                        remaining: remaining - n,
                        done,
                    };
                    return Ok(());
                }
                self.state = Recv::Header;
                if done {
                    let e = self.slots[tag as usize].error;
                    self.complete(tag, e);
                }
            }
            let avail = &self.rbuf[self.rpos..self.rlen];
            let h = match ReplyHeader::decode(avail) {
                Ok(Parsed::Done { value, len }) => (value, len),
                Ok(Parsed::Incomplete { .. }) => return Ok(()),
                Err(e) => return Err(self.protocol(e.to_string())),
            };
            if !self.header(h)? {
                return Ok(());
            }
        }
    }

    fn slot_of(&self, cookie: u64) -> Result<(u32, Slot), EngineError> {
        match self.slots.get(cookie as usize) {
            Some(s) if s.active => Ok((cookie as u32, *s)),
            _ => Err(self.protocol(format!("reply for unknown cookie {cookie}"))),
        }
    }

    /// Handles one reply header; false when more bytes are needed first.
    fn header(&mut self, (h, hlen): (ReplyHeader, usize)) -> Result<bool, EngineError> {
        let (tag, slot) = self.slot_of(h.cookie())?;
        match h {
            ReplyHeader::Simple { error, .. } => {
                self.rpos += hlen;
                if error == 0 && slot.op == Op::Read && slot.len > 0 {
                    self.state = Recv::Data {
                        tag,
                        at: slot.buf,
                        remaining: slot.len as usize,
                        done: true,
                    };
                } else {
                    self.complete(tag, errno::to_result(error));
                }
            }
            ReplyHeader::Structured {
                flags, kind, len, ..
            } => {
                let done = flags & chunk::FLAG_DONE != 0;
                if kind == chunk::OFFSET_DATA {
                    if self.rlen - self.rpos < CHUNK_HEADER_LEN + 8 {
                        return Ok(false);
                    }
                    let at = self.rpos + CHUNK_HEADER_LEN;
                    let Ok(Chunk::OffsetData { offset, .. }) =
                        Chunk::decode(kind, &self.rbuf[at..at + 8])
                    else {
                        return Err(self.protocol("short OFFSET_DATA chunk"));
                    };
                    let n = (len as u64).saturating_sub(8);
                    let within = offset.wrapping_sub(slot.offset);
                    if slot.op != Op::Read
                        || len < 8
                        || offset < slot.offset
                        || within + n > slot.len as u64
                    {
                        return Err(self.protocol(format!(
                            "OFFSET_DATA {offset}+{n} outside READ {}+{}",
                            slot.offset, slot.len
                        )));
                    }
                    self.rpos += CHUNK_HEADER_LEN + 8;
                    self.state = Recv::Data {
                        tag,
                        at: slot.buf + within as usize,
                        remaining: n as usize,
                        done,
                    };
                    return Ok(true);
                }
                if len > MAX_CHUNK_META {
                    return Err(self.protocol(format!("chunk type {kind} of {len} bytes")));
                }
                let total = CHUNK_HEADER_LEN + len as usize;
                if self.rlen - self.rpos < total {
                    return Ok(false);
                }
                let payload = &self.rbuf[self.rpos + CHUNK_HEADER_LEN..self.rpos + total];
                let c = Chunk::decode(kind, payload).map_err(|e| self.protocol(e.to_string()))?;
                match c {
                    Chunk::None => {}
                    Chunk::OffsetHole { offset, size } => {
                        let within = offset.wrapping_sub(slot.offset);
                        if slot.op != Op::Read
                            || offset < slot.offset
                            || within + u64::from(size) > u64::from(slot.len)
                        {
                            return Err(self.protocol("OFFSET_HOLE outside its READ"));
                        }
                        // SAFETY: the READ's own region, bounds checked just above.
                        let dst = unsafe {
                            self.arena
                                .slice_mut(slot.buf + within as usize, size as usize)
                        };
                        dst.fill(0);
                    }
                    Chunk::Error { error, .. } | Chunk::ErrorOffset { error, .. } => {
                        self.slots[tag as usize].error = errno::to_result(error).min(-1);
                    }
                    Chunk::Other { kind, .. } if kind & chunk::ERROR_BIT != 0 => {
                        self.slots[tag as usize].error = -libc::EINVAL;
                    }
                    Chunk::OffsetData { .. } | Chunk::Other { .. } => {
                        return Err(self.protocol(format!("unexpected chunk type {kind}")))
                    }
                }
                self.rpos += total;
                if done {
                    let e = self.slots[tag as usize].error;
                    self.complete(tag, e);
                }
            }
        }
        Ok(true)
    }
}

impl Queue for NbdQueue {
    fn submit(&mut self, ios: &[Io]) -> Result<(), EngineError> {
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
        while self.ready.len() < want {
            // Held requests wait for company only as long as a reply is about to arrive: on a
            // slow target the wait for the next completion would land in their latency.
            if self.unsent > 0 && !self.readable_within(HOLD_MAX)? {
                self.send_all()?;
            }
            self.recv_some(true)?;
            self.flush_due()?;
        }
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

    fn stats(&self) -> BTreeMap<String, serde_json::Value> {
        let mut m = BTreeMap::new();
        m.insert("nbd_send_calls".into(), json!(self.sends));
        m.insert("nbd_recv_calls".into(), json!(self.recvs));
        m.insert("nbd_direct_recv_bytes".into(), json!(self.direct_bytes));
        m.insert("nbd_submit_batch".into(), json!(self.submit_batch));
        m
    }

    fn close(&mut self) -> Result<(), EngineError> {
        let mut h = [0u8; REQUEST_LEN];
        Request {
            flags: 0,
            cmd: cmd::DISC,
            cookie: 0,
            offset: 0,
            len: 0,
        }
        .encode_to(&mut h);
        // SAFETY: sends from a local buffer valid for the call.
        let r = unsafe {
            libc::send(
                self.sock.fd(),
                h.as_ptr().cast(),
                h.len(),
                libc::MSG_NOSIGNAL,
            )
        };
        if r < 0 {
            return Err(self.io_error(io::Error::last_os_error()));
        }
        Ok(())
    }
}
