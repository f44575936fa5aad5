//! The socket side of a queue: sending a batch (one `sendmsg` of an iovec list, or through
//! the TLS session) and receiving replies (large `recv`s, READ data straight into the arena).

use std::io::{self, IoSlice};
use std::time::Duration;

use rustix::io::Errno;
use rustix::net::SendAncillaryBuffer;

use sanbench_io::EngineError;

use crate::tls::Wait;

use super::{NbdQueue, Recv, Seg, DIRECT_MIN, IOV_BATCH};

impl NbdQueue {
    /// Sends every queued segment, draining replies whenever the socket is full.
    pub(super) fn send_all(&mut self) -> Result<(), EngineError> {
        if self.ring.is_some() {
            return self.ring_send_all();
        }
        if self.sock.tls.is_some() {
            return self.send_all_tls();
        }
        let (mut seg, mut skip) = (0usize, 0usize);
        while seg < self.segs.len() {
            let r = {
                let mut iov = [IoSlice::new(&[]); IOV_BATCH];
                let mut n = 0;
                for (i, s) in self.segs[seg..].iter().take(IOV_BATCH).enumerate() {
                    let data: &[u8] = match *s {
                        Seg::Hdr { start, len } => &self.hdrs[start..start + len],
                        // SAFETY: bounds were checked against the arena in `queue_request`; the
                        // scheduler does not modify a WRITE's source region while it is in
                        // flight, and the kernel only reads it.
                        Seg::Data { buf, len } => unsafe { self.arena.slice(buf, len) },
                    };
                    iov[i] = IoSlice::new(&data[if i == 0 { skip } else { 0 }..]);
                    n += 1;
                }
                rustix::net::sendmsg(
                    &self.sock,
                    &iov[..n],
                    &mut SendAncillaryBuffer::default(),
                    Wait::Never.send_flags(),
                )
            };
            self.sends += 1;
            match r {
                Ok(sent) => {
                    let mut sent = sent;
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
                }
                Err(Errno::INTR) => {}
                Err(Errno::AGAIN) => self.wait_writable()?,
                Err(e) => return Err(self.io_error(e.into())),
            }
        }
        self.segs.clear();
        self.hdrs.clear();
        self.unsent = 0;
        Ok(())
    }

    /// One `recv` (blocking up to the I/O timeout unless `block` is false), then parses.
    pub(super) fn recv_some(&mut self, block: bool) -> Result<(), EngineError> {
        if self.ring.is_some() {
            let wait = if block { self.timeout } else { Duration::ZERO };
            if !self.ring_wait(wait)? && block {
                return Err(self.timed_out());
            }
            return Ok(());
        }
        let wait = if block { Wait::Block } else { Wait::Never };
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
                let n = self.recv_into(dst.as_mut_ptr(), remaining, wait)?;
                self.landed(tag, at, remaining, done, n);
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
        let n = self.recv_into(ptr, room, wait)?;
        self.rlen += n;
        self.process()
    }

    /// `recv` into `len` bytes at `ptr` (decrypted bytes with TLS); 0 only for a nonblocking
    /// call with nothing to read.
    fn recv_into(&mut self, ptr: *mut u8, len: usize, wait: Wait) -> Result<usize, EngineError> {
        let fd = self.sock.fd();
        loop {
            self.recvs += 1;
            // SAFETY: callers pass a region of `len` writable bytes they own exclusively.
            let buf = unsafe { std::slice::from_raw_parts_mut(ptr, len) };
            let r = match &mut self.sock.tls {
                Some(t) => t.recv(fd, buf, wait),
                None => rustix::net::recv(&self.sock.sock, &mut *buf, wait.recv_flags())
                    .map(|(_, n)| n.min(len))
                    .map_err(io::Error::from),
            };
            let e = match r {
                Ok(0) => return Err(self.disconnected("server closed the connection")),
                Ok(n) => return Ok(n),
                Err(e) => e,
            };
            // A record other than data on a kernel TLS socket (taken aside, then receive again).
            let e = if self.sock.ktls && e.raw_os_error() == Some(libc::EIO) {
                match crate::tls::kernel_recv(fd, buf, wait) {
                    Ok(0) => return Err(self.disconnected("server closed the connection")),
                    Ok(n) => return Ok(n),
                    Err(e) => e,
                }
            } else {
                e
            };
            // EAGAIN: nothing yet (nonblocking) or SO_RCVTIMEO passed (blocking).
            let again = matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            );
            match e.kind() {
                io::ErrorKind::Interrupted => {}
                _ if again && wait == Wait::Never => return Ok(0),
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
            match t.flush(fd, Wait::Never) {
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
