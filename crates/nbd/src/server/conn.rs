//! One client connection: the socket side (reading, waiting, writing replies); the handshake
//! (`conn/handshake.rs`) and the transmission phase (`conn/transmission.rs`) are beside it.
//!
//! The loop is built for few system calls per I/O: one `read` takes in as many requests as the
//! socket holds (a pipelining client sends its whole batch at once), every complete request in
//! the buffer is executed, and all their replies leave in one `write`. For a client that sends
//! its requests one at a time but keeps many in flight, the connection waits for several to
//! gather before it wakes (see `coalesce.rs`). WRITE payloads are
//! copied from the receive buffer into the store as they arrive, so a connection's memory is
//! its receive buffer ([`RBUF`]) plus a send buffer that holds one batch of replies (at most
//! about [`FLUSH_AT`] plus the largest READ, itself at most the advertised maximum payload).
//!
//! A client that breaks framing (bad magic, unknown client flags, an option longer than
//! [`MAX_OPTION_LEN`](crate::wire::MAX_OPTION_LEN), a WRITE longer than the maximum payload) is disconnected; a request that
//! is well framed but wrong gets the NBD error the spec asks for and the connection goes on.

mod delayed;
mod handshake;
mod starttls;
mod transmission;

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::unix::io::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::net::RecvFlags;
use sanbench_blockstore::counters::ConnCounters;
use sanbench_blockstore::delay::DueQueue;

use super::coalesce::{Coalesce, Outcome};
use super::Shared;
use crate::error::NbdError;
use crate::tls::{kernel_recv, Tls, Wait};
use crate::wire::WireError;

/// Receive buffer: room for a large batch of 4 KiB writes.
pub(crate) const RBUF: usize = 256 * 1024;
/// Send the replies gathered so far once they exceed this.
pub(crate) const FLUSH_AT: usize = 1024 * 1024;
/// A client must finish the handshake within this time.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);
/// Options accepted before a client is considered to be stalling.
const MAX_OPTIONS: usize = 256;

/// How a connection ended.
pub(crate) enum End {
    /// Client left (DISC, ABORT, EOF) or the server is stopping.
    Clean,
    Fail(NbdError),
}

type R<T> = Result<T, End>;

pub(crate) struct Conn<'a> {
    sock: TcpStream,
    /// The TLS session after `NBD_OPT_STARTTLS`; None: plaintext, straight on the socket.
    tls: Option<Tls>,
    /// The kernel makes the TLS records (after the handshake): the socket carries plaintext.
    ktls: bool,
    sh: &'a Shared,
    shutdown: &'a AtomicBool,
    peer: String,
    rbuf: Box<[u8]>,
    rpos: usize,
    rlen: usize,
    out: Vec<u8>,
    structured: bool,
    /// `base:allocation` was selected with `NBD_OPT_SET_META_CONTEXT` (context id
    /// [`handshake::BASE_ALLOCATION_ID`]).
    meta: bool,
    no_zeroes: bool,
    /// A WRITE whose payload is still arriving.
    pending: Option<PendingWrite>,
    coalesce: Coalesce,
    /// Coalesced waits, added to the server's total when the connection ends (no counter is
    /// shared by connections on the data path).
    coalesced: u64,
    /// `SO_RCVLOWAT` as last set on the socket.
    lowat: usize,
    /// When the handshake (TLS included) must be over.
    deadline: Instant,
    /// With `--delay`: replies held until due (`conn/delayed.rs`); None answers at once.
    held: Option<DueQueue<Vec<u8>>>,
    /// When the bytes read last arrived: the requests they complete were received then.
    arrived: Instant,
    /// `serve --metrics-listen`: this connection's I/O counters.
    pub(super) metrics: Option<ConnCounters>,
}

struct PendingWrite {
    cookie: u64,
    offset: u64,
    /// The write's length (counted when it completes) and what is still to come.
    len: u32,
    remaining: u32,
    fua: bool,
    /// Error decided from the header; the payload is then read and dropped.
    error: u32,
}

impl<'a> Conn<'a> {
    pub(crate) fn new(
        sock: TcpStream,
        sh: &'a Shared,
        shutdown: &'a AtomicBool,
        peer: String,
        number: u64,
    ) -> Conn<'a> {
        let now = Instant::now();
        let metrics = sh.counters.get().map(|c| {
            let portal = sock.local_addr().map_or(String::new(), |a| a.to_string());
            c.connect(number, peer.clone(), portal)
        });
        Conn {
            metrics,
            sock,
            tls: None,
            ktls: false,
            sh,
            shutdown,
            peer,
            rbuf: vec![0u8; RBUF].into_boxed_slice(),
            rpos: 0,
            rlen: 0,
            out: Vec::with_capacity(64 * 1024),
            structured: false,
            meta: false,
            no_zeroes: false,
            pending: None,
            coalesce: Coalesce::default(),
            coalesced: 0,
            lowat: 1,
            deadline: now + HANDSHAKE_TIMEOUT,
            held: sh.cfg.delay.map(|d| DueQueue::new(d, number)),
            arrived: now,
        }
    }

    pub(crate) fn run(mut self) -> R<()> {
        let r = match self.handshake() {
            Ok(true) => self.handover().and_then(|()| self.transmission()),
            Ok(false) => Ok(()),
            Err(e) => Err(e),
        };
        if let Some(t) = &mut self.tls {
            t.close(self.sock.as_raw_fd());
        } else if self.ktls {
            crate::tls::close_notify(self.sock.as_raw_fd());
        }
        self.sh
            .coalesced
            .fetch_add(self.coalesced, Ordering::Relaxed);
        r
    }

    fn fail<T>(&self, reason: impl Into<String>) -> R<T> {
        Err(End::Fail(NbdError::Protocol {
            peer: self.peer.clone(),
            reason: reason.into(),
        }))
    }

    fn wire<T>(&self, source: WireError) -> R<T> {
        Err(End::Fail(NbdError::Wire {
            peer: self.peer.clone(),
            source,
        }))
    }

    /// Reads more bytes into the receive buffer (blocking, waking up to watch the shutdown flag).
    fn read_more(&mut self, deadline: Option<Instant>) -> R<()> {
        self.make_room();
        let fd = self.sock.as_raw_fd();
        loop {
            let buf = &mut self.rbuf[self.rlen..];
            let r = match &mut self.tls {
                Some(t) => t.recv(fd, buf, Wait::Block),
                None if self.ktls => kernel_recv(fd, buf, Wait::Block),
                None => self.sock.read(buf),
            };
            match r {
                Ok(0) => return Err(End::Clean),
                Ok(n) => {
                    self.rlen += n;
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    if self.shutdown.load(Ordering::Relaxed) {
                        return Err(End::Clean);
                    }
                    if deadline.is_some_and(|d| Instant::now() > d) {
                        return self.fail("handshake timed out");
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::ConnectionReset => return Err(End::Clean),
                Err(e) => {
                    return Err(End::Fail(NbdError::io(
                        format!("read from {}", self.peer),
                        e,
                    )))
                }
            }
        }
    }

    /// Moves unread bytes to the front when the buffer is empty or its room is running out.
    fn make_room(&mut self) {
        if self.rpos == self.rlen {
            self.rpos = 0;
            self.rlen = 0;
        } else if self.rlen == self.rbuf.len() || self.rpos > self.rbuf.len() / 2 {
            self.rbuf.copy_within(self.rpos..self.rlen, 0);
            self.rlen -= self.rpos;
            self.rpos = 0;
        }
    }

    fn flush_out(&mut self) -> R<()> {
        if self.out.is_empty() {
            return Ok(());
        }
        let r = match &mut self.tls {
            Some(t) => t.send_all(self.sock.as_raw_fd(), &self.out),
            None => self.sock.write_all(&self.out),
        };
        self.out.clear();
        match r {
            Ok(()) => Ok(()),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset
                ) =>
            {
                Err(End::Clean)
            }
            Err(e) => Err(End::Fail(NbdError::io(
                format!("write to {}", self.peer),
                e,
            ))),
        }
    }

    fn avail(&self) -> &[u8] {
        &self.rbuf[self.rpos..self.rlen]
    }

    /// Waits for the next requests, coalescing wake-ups when the client pipelines (see
    /// [`super::coalesce`]).
    fn wait_for_requests(&mut self, found: u32, bytes: u64, written: u64) -> R<()> {
        if let Some(m) = &self.metrics {
            let held = self.held.as_ref().map_or(0, |h| h.len());
            m.set_inflight((held + usize::from(self.pending.is_some())) as u64);
        }
        if self.held.is_some() {
            return self.wait_delayed();
        }
        // Coalescing counts bytes on the socket: TLS records are not requests, and a session
        // may hold decrypted requests a poll cannot see. A TLS connection wakes per arrival
        // (with the kernel's records too: its wake-ups are per record, not per byte).
        let plain = self.tls.is_none() && !self.ktls;
        let Some(deadline) = self.sh.cfg.coalesce.filter(|_| plain) else {
            return self.read_more(None);
        };
        let want = self.coalesce.plan(found, bytes, written, Instant::now());
        // Only whole requests are counted: a partial request or WRITE payload is read plainly.
        if want <= 1 || self.pending.is_some() || self.rpos != self.rlen {
            self.coalesce.done(Outcome::Plain);
            self.set_lowat(1);
            return self.read_more(None);
        }
        self.set_lowat(self.coalesce.low_water(want));
        self.coalesced += 1;
        let ts = Timespec {
            tv_sec: 0,
            tv_nsec: deadline.as_nanos().min(999_999_999) as _,
        };
        let mut pfd = [PollFd::new(&self.sock, PollFlags::IN)];
        // EINTR or an error: as if nothing came; `read_now` finds out what the socket holds.
        let filled = rustix::event::poll(&mut pfd, Some(&ts)).is_ok_and(|n| n > 0);
        if self.read_now()? {
            self.coalesce.done(if filled {
                Outcome::Filled
            } else {
                Outcome::Short
            });
            return Ok(());
        }
        self.coalesce.done(Outcome::Idle);
        self.set_lowat(1);
        self.read_more(None)
    }

    /// Sets `SO_RCVLOWAT` (a no-op when unchanged; a failure only costs coalescing).
    fn set_lowat(&mut self, bytes: usize) {
        if self.lowat == bytes {
            return;
        }
        let v = bytes.min(i32::MAX as usize) as libc::c_int;
        // rustix has no SO_RCVLOWAT setter (1.1), so this one option goes through libc.
        // SAFETY: a valid socket and a c_int option value of the size given.
        unsafe {
            libc::setsockopt(
                self.sock.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVLOWAT,
                (&v as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        self.lowat = bytes;
    }

    /// Takes in what the socket holds without blocking; false when it held nothing.
    fn read_now(&mut self) -> R<bool> {
        debug_assert_eq!(self.rpos, self.rlen);
        self.rpos = 0;
        self.rlen = 0;
        loop {
            let e = match rustix::net::recv(&self.sock, &mut self.rbuf[..], RecvFlags::DONTWAIT) {
                Ok((_, 0)) => return Err(End::Clean),
                Ok((_, n)) => {
                    self.rlen = n.min(self.rbuf.len());
                    return Ok(true);
                }
                Err(e) => io::Error::from(e),
            };
            match e.kind() {
                io::ErrorKind::Interrupted => {}
                io::ErrorKind::WouldBlock => return Ok(false),
                io::ErrorKind::ConnectionReset => return Err(End::Clean),
                _ => {
                    return Err(End::Fail(NbdError::io(
                        format!("read from {}", self.peer),
                        e,
                    )))
                }
            }
        }
    }
}
