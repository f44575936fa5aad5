//! The socket side of a queue: sending a batch (one `sendmsg` of an iovec list, or through
//! the TLS session) and receiving replies (large `recv`s, READ data straight into the arena).

use std::io;

use sanbench_engine::EngineError;

use super::{NbdQueue, Recv, Seg, DIRECT_MIN, IOV_BATCH};

impl NbdQueue {
    /// Sends every queued segment, draining replies whenever the socket is full.
    pub(super) fn send_all(&mut self) -> Result<(), EngineError> {
        if self.sock.tls.is_some() {
            return self.send_all_tls();
        }
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
    pub(super) fn recv_some(&mut self, block: bool) -> Result<(), EngineError> {
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

    /// `recv` into `len` bytes at `ptr` (decrypted bytes with TLS); 0 only for a nonblocking
    /// call with nothing to read.
    fn recv_into(&mut self, ptr: *mut u8, len: usize, flags: i32) -> Result<usize, EngineError> {
        let fd = self.sock.fd();
        loop {
            self.recvs += 1;
            let r = match &mut self.sock.tls {
                // SAFETY: callers pass a region of `len` writable bytes they own exclusively.
                Some(t) => t.recv(
                    fd,
                    unsafe { std::slice::from_raw_parts_mut(ptr, len) },
                    flags,
                ),
                None => {
                    // SAFETY: as above.
                    let r = unsafe { libc::recv(fd, ptr.cast(), len, flags) };
                    if r < 0 {
                        Err(io::Error::last_os_error())
                    } else {
                        Ok(r as usize)
                    }
                }
            };
            let e = match r {
                Ok(0) => return Err(self.disconnected("server closed the connection")),
                Ok(n) => return Ok(n),
                Err(e) => e,
            };
            let again = e.raw_os_error() == Some(libc::EAGAIN)
                || matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                );
            match e.raw_os_error() {
                Some(libc::EINTR) => {}
                _ if again && flags & libc::MSG_DONTWAIT != 0 => return Ok(0),
                _ if again => return Err(self.timed_out()),
                _ => return Err(self.io_error(e)),
            }
        }
    }

    /// `send_all` through TLS: segments go into the session as plaintext (as much as its
    /// output limit takes), the records leave in `sendmsg`s of up to 64 of them; a full socket
    /// is waited for while replies are drained, as in plaintext.
    fn send_all_tls(&mut self) -> Result<(), EngineError> {
        let fd = self.sock.fd();
        let (mut seg, mut skip) = (0usize, 0usize);
        loop {
            let Some(t) = self.sock.tls.as_mut() else {
                return Err(self.protocol("TLS session missing"));
            };
            let mut full = false;
            while seg < self.segs.len() && !full {
                let data: &[u8] = match self.segs[seg] {
                    Seg::Hdr { start, len } => &self.hdrs[start..start + len],
                    // SAFETY: bounds were checked against the arena in `queue_request`; the
                    // scheduler does not modify a WRITE's source region while it is in flight.
                    Seg::Data { buf, len } => unsafe { self.arena.slice(buf, len) },
                };
                let n = t.push(&data[skip..]);
                let n = match n {
                    Ok(n) => n,
                    Err(e) => return Err(self.io_error(e)),
                };
                skip += n;
                if skip == data.len() {
                    seg += 1;
                    skip = 0;
                } else {
                    full = true;
                }
            }
            self.sends += 1;
            let Some(t) = self.sock.tls.as_mut() else {
                return Err(self.protocol("TLS session missing"));
            };
            match t.flush(fd, libc::MSG_DONTWAIT) {
                Ok(true) if seg == self.segs.len() => break,
                Ok(true) => {}
                Ok(false) => self.wait_writable()?,
                Err(e) => return Err(self.io_error(e)),
            }
        }
        self.segs.clear();
        self.hdrs.clear();
        self.unsent = 0;
        Ok(())
    }
}
