//! A [`Session`] driven over a socket's file descriptor with the caller's flags: blocking
//! calls obey the socket's `SO_RCVTIMEO`/`SO_SNDTIMEO`, `MSG_DONTWAIT` calls never wait, and
//! `EAGAIN` comes back as it would from `recv`/`send`, so the plaintext and the TLS paths of a
//! connection share their waiting logic.

use std::io;
use std::os::unix::io::RawFd;
use std::time::Instant;

use super::{Session, TlsError};

/// One `recv`/`send` on a descriptor the caller owns, as `Read`/`Write` for the session.
struct Fd {
    fd: RawFd,
    flags: libc::c_int,
}

impl io::Read for Fd {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        // SAFETY: `buf` is a writable region of `buf.len()` bytes for the duration of the call.
        let r = unsafe { libc::recv(self.fd, buf.as_mut_ptr().cast(), buf.len(), self.flags) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(r as usize)
    }
}

impl io::Write for Fd {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let flags = self.flags | libc::MSG_NOSIGNAL;
        // SAFETY: `buf` is a readable region of `buf.len()` bytes for the duration of the call.
        let r = unsafe { libc::send(self.fd, buf.as_ptr().cast(), buf.len(), flags) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(r as usize)
    }

    /// Several TLS records in one `sendmsg`.
    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        // SAFETY: a zeroed msghdr is valid; IoSlice has iovec's layout (std guarantees it on
        // Unix) and the slices outlive the call.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = bufs.as_ptr() as *mut libc::iovec;
        msg.msg_iovlen = bufs.len().min(1024) as _;
        // SAFETY: `msg` describes memory valid for the call.
        let r = unsafe { libc::sendmsg(self.fd, &msg, self.flags | libc::MSG_NOSIGNAL) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(r as usize)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn would_block(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// The error a TLS failure becomes on the connection (`InvalidData`, with the library's words).
fn tls_error(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("TLS: {what}"))
}

/// A TLS connection over a socket the caller keeps.
pub(crate) struct Tls {
    s: Box<dyn Session>,
}

impl Tls {
    /// Runs the handshake over a blocking socket until done or `deadline` passes (reads that
    /// time out are retried until then; `stop` can end the wait early).
    pub(crate) fn handshake(
        fd: RawFd,
        s: Box<dyn Session>,
        deadline: Instant,
        stop: &dyn Fn() -> bool,
    ) -> Result<Tls, io::Error> {
        let mut t = Tls { s };
        while t.s.is_handshaking() {
            if t.s.wants_write() {
                t.s.write_tls(&mut Fd { fd, flags: 0 })?;
                continue;
            }
            match t.s.read_tls(&mut Fd { fd, flags: 0 }) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the peer closed the connection during the TLS handshake",
                    ))
                }
                Ok(_) => {
                    if let Err(e) = t.s.process() {
                        // Best effort: the alert tells the peer why.
                        let _ = t.flush(fd, libc::MSG_DONTWAIT);
                        return Err(tls_error(e));
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if would_block(&e) => {
                    if Instant::now() > deadline || stop() {
                        return Err(io::Error::new(
                            io::ErrorKind::TimedOut,
                            "TLS handshake timed out",
                        ));
                    }
                }
                Err(e) => return Err(e),
            }
        }
        t.flush_blocking(fd)?;
        Ok(t)
    }

    /// Decrypted bytes into `buf`: those buffered first, else ciphertext from one or more
    /// `recv(flags)`. `Ok(0)`: the peer closed; `EAGAIN`/timeout errors as `recv` gives them.
    pub(crate) fn recv(&mut self, fd: RawFd, buf: &mut [u8], flags: i32) -> io::Result<usize> {
        loop {
            match self.s.read_plain(buf) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                // The peer closed without close_notify: a truncation, reported as a close.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(0),
                Err(e) => return Err(e),
            }
            let n = self.s.read_tls(&mut Fd { fd, flags })?;
            if n == 0 {
                return Ok(0);
            }
            if let Err(e) = self.s.process() {
                let _ = self.flush(fd, libc::MSG_DONTWAIT);
                return Err(tls_error(e));
            }
            if self.s.wants_write() {
                // Post-handshake messages (key updates): sent when the socket has room.
                self.flush(fd, libc::MSG_DONTWAIT)?;
            }
        }
    }

    /// Takes plaintext to send (all of it, or what fits before the session's output limit).
    pub(crate) fn push(&mut self, data: &[u8]) -> io::Result<usize> {
        self.s.write_plain(data)
    }

    /// Sends pending ciphertext; false when the socket took less than all of it
    /// (`MSG_DONTWAIT`) or timed out.
    pub(crate) fn flush(&mut self, fd: RawFd, flags: i32) -> io::Result<bool> {
        while self.s.wants_write() {
            match self.s.write_tls(&mut Fd { fd, flags }) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if would_block(&e) => return Ok(false),
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    fn flush_blocking(&mut self, fd: RawFd) -> io::Result<()> {
        if self.flush(fd, 0)? {
            Ok(())
        } else {
            Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "TLS send timed out",
            ))
        }
    }

    /// Sends all of `data` over a blocking socket.
    pub(crate) fn send_all(&mut self, fd: RawFd, mut data: &[u8]) -> io::Result<()> {
        while !data.is_empty() {
            let n = self.push(data)?;
            data = &data[n..];
            self.flush_blocking(fd)?;
        }
        self.flush_blocking(fd)
    }

    /// Whether bytes wait inside the session (a poll on the socket would not see them).
    pub(crate) fn has_buffered(&self) -> bool {
        self.s.has_buffered()
    }

    /// Sends close_notify (best effort, never blocks).
    pub(crate) fn close(&mut self, fd: RawFd) {
        self.s.close_notify();
        let _ = self.flush(fd, libc::MSG_DONTWAIT);
    }

    pub(crate) fn describe(&self) -> String {
        self.s.describe()
    }
}

impl From<TlsError> for io::Error {
    fn from(e: TlsError) -> io::Error {
        io::Error::other(e.to_string())
    }
}
