//! A [`Session`] driven over a socket's file descriptor with the caller's [`Wait`]: blocking
//! calls obey the socket's `SO_RCVTIMEO`/`SO_SNDTIMEO`, `MSG_DONTWAIT` calls never wait, and
//! `EAGAIN` comes back as it would from `recv`/`send`, so the plaintext and the TLS paths of a
//! connection share their waiting logic.

use std::io;
use std::os::fd::{BorrowedFd, RawFd};
use std::time::Instant;

use rustix::net::{self, RecvFlags, SendFlags};

use super::kernel::{self, Control};
use super::{Session, TlsError};

/// How a socket call may wait: up to the socket's own timeouts, or not at all
/// (`MSG_DONTWAIT`, `EAGAIN` when it would block).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wait {
    Block,
    Never,
}

impl Wait {
    pub(crate) fn recv_flags(self) -> RecvFlags {
        match self {
            Wait::Block => RecvFlags::empty(),
            Wait::Never => RecvFlags::DONTWAIT,
        }
    }

    /// Never `SIGPIPE`: a closed peer is an `EPIPE` error.
    pub(crate) fn send_flags(self) -> SendFlags {
        match self {
            Wait::Block => SendFlags::NOSIGNAL,
            Wait::Never => SendFlags::NOSIGNAL | SendFlags::DONTWAIT,
        }
    }
}

/// One `recv`/`send` on a descriptor the caller owns, as `Read`/`Write` for the session.
struct Fd<'a> {
    fd: BorrowedFd<'a>,
    wait: Wait,
}

impl Fd<'_> {
    fn new(fd: RawFd, wait: Wait) -> Fd<'static> {
        Fd {
            // SAFETY: every caller passes the descriptor of a socket it owns and keeps open
            // for the duration of the call that uses this `Fd`.
            fd: unsafe { BorrowedFd::borrow_raw(fd) },
            wait,
        }
    }

    fn send_flags(&self) -> SendFlags {
        self.wait.send_flags()
    }
}

impl io::Read for Fd<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        Ok(net::recv(self.fd, buf, self.wait.recv_flags())?.0)
    }
}

impl io::Write for Fd<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        Ok(net::send(self.fd, buf, self.send_flags())?)
    }

    /// Several TLS records in one `sendmsg`.
    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        let mut control = net::SendAncillaryBuffer::default();
        Ok(net::sendmsg(
            self.fd,
            bufs,
            &mut control,
            self.send_flags(),
        )?)
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

/// Ciphertext taken from the socket per `recv` on the data path. rustls reads about 4 KiB per
/// call of its own; one large `recv` fed to it from memory saves most of the system calls
/// (measured: a 1 MiB read took some 250 of them).
const CIPHER_BUF: usize = 256 * 1024;

/// What became of a session offered to the kernel ([`Tls::into_kernel`]).
pub(crate) enum Handover {
    /// The kernel makes and opens the records now: the socket carries plaintext, read with
    /// [`kernel_recv`].
    Kernel,
    /// Still in user space, and why.
    User(Tls, String),
}

/// `recv` on a socket whose records the kernel makes: a control record (which fails a plain
/// `recv` with `EIO`) is taken aside; the peer's close_notify reads as the end of the stream.
pub(crate) fn kernel_recv(fd: RawFd, buf: &mut [u8], wait: Wait) -> io::Result<usize> {
    let sock = Fd::new(fd, wait);
    loop {
        match net::recv(sock.fd, &mut *buf, wait.recv_flags()) {
            Ok((_, n)) => return Ok(n.min(buf.len())),
            Err(rustix::io::Errno::IO) => match kernel::control_record(fd)? {
                Control::Skip => {}
                Control::Closed => return Ok(0),
            },
            Err(e) => return Err(e.into()),
        }
    }
}

/// A TLS connection over a socket the caller keeps.
pub(crate) struct Tls {
    s: Box<dyn Session>,
    /// Ciphertext received and not yet given to the session: `cin[cpos..clen]`.
    cin: Box<[u8]>,
    cpos: usize,
    clen: usize,
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
        let mut t = Tls {
            s,
            cin: vec![0u8; CIPHER_BUF].into_boxed_slice(),
            cpos: 0,
            clen: 0,
        };
        while t.s.is_handshaking() {
            if t.s.wants_write() {
                t.s.write_tls(&mut Fd::new(fd, Wait::Block))?;
                continue;
            }
            match t.s.read_tls(&mut Fd::new(fd, Wait::Block)) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the peer closed the connection during the TLS handshake",
                    ))
                }
                Ok(_) => {
                    if let Err(e) = t.s.process() {
                        // Best effort: the alert tells the peer why.
                        let _ = t.flush(fd, Wait::Never);
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

    /// Decrypted bytes into `buf`: those buffered first, else ciphertext from one `recv`
    /// of up to [`CIPHER_BUF`]. `Ok(0)`: the peer closed; `EAGAIN`/timeout errors as `recv`
    /// gives them.
    pub(crate) fn recv(&mut self, fd: RawFd, buf: &mut [u8], wait: Wait) -> io::Result<usize> {
        loop {
            match self.s.read_plain(buf) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                // The peer closed without close_notify: a truncation, reported as a close.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(0),
                Err(e) => return Err(e),
            }
            if self.cpos == self.clen {
                let n = io::Read::read(&mut Fd::new(fd, wait), &mut self.cin)?;
                if n == 0 {
                    return Ok(0);
                }
                (self.cpos, self.clen) = (0, n);
            }
            let n = self.s.read_tls(&mut &self.cin[self.cpos..self.clen])?;
            if n == 0 {
                // The session takes nothing more (close_notify received).
                return Ok(0);
            }
            self.cpos += n;
            if let Err(e) = self.s.process() {
                let _ = self.flush(fd, Wait::Never);
                return Err(tls_error(e));
            }
            if self.s.wants_write() {
                // Post-handshake messages (key updates): sent when the socket has room.
                self.flush(fd, Wait::Never)?;
            }
        }
    }

    /// Takes plaintext to send (all of it, or what fits before the session's output limit).
    pub(crate) fn push(&mut self, data: &[u8]) -> io::Result<usize> {
        self.s.write_plain(data)
    }

    /// Sends pending ciphertext; false when the socket took less than all of it
    /// ([`Wait::Never`]) or timed out.
    pub(crate) fn flush(&mut self, fd: RawFd, wait: Wait) -> io::Result<bool> {
        while self.s.wants_write() {
            match self.s.write_tls(&mut Fd::new(fd, wait)) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if would_block(&e) => return Ok(false),
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    fn flush_blocking(&mut self, fd: RawFd) -> io::Result<()> {
        if self.flush(fd, Wait::Block)? {
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
        self.cpos < self.clen || self.s.has_buffered()
    }

    /// Sends close_notify (best effort, never blocks).
    pub(crate) fn close(&mut self, fd: RawFd) {
        self.s.close_notify();
        let _ = self.flush(fd, Wait::Never);
    }

    pub(crate) fn describe(&self) -> String {
        self.s.describe()
    }

    /// Hands the records to the kernel when it can make them (the `tls` module, the
    /// session's version and cipher) and nothing waits inside the session; else the session
    /// comes back with the reason. Called where the protocol has the peer waiting for us (the
    /// NBD handshake over, no request sent yet), so no record is in flight. Err: the keys
    /// left the session but the kernel refused them after its check passed (the connection
    /// is lost).
    pub(crate) fn into_kernel(self, fd: RawFd) -> io::Result<Handover> {
        if self.has_buffered() || self.s.wants_write() {
            return Ok(Handover::User(
                self,
                "bytes were waiting inside the TLS session".into(),
            ));
        }
        let (version, cipher) = match self.s.kernel_suite() {
            Ok(v) => v,
            Err(why) => return Ok(Handover::User(self, why)),
        };
        if let Err(why) = kernel::attach(fd).and_then(|()| kernel::check(version, cipher)) {
            return Ok(Handover::User(self, why));
        }
        let (tx, rx) = self.s.extract().map_err(tls_error)?;
        kernel::install(fd, version, true, &tx)?;
        kernel::install(fd, version, false, &rx)?;
        Ok(Handover::Kernel)
    }
}

impl From<TlsError> for io::Error {
    fn from(e: TlsError) -> io::Error {
        io::Error::other(e.to_string())
    }
}
