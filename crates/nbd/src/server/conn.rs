//! One client connection: handshake, then the transmission loop.
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

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::unix::io::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::coalesce::{Coalesce, Outcome};
use super::Shared;
use crate::error::NbdError;
use crate::wire::handshake::{
    hflags, info, opt, rep, tflags, ClientOption, ExportNameReply, GoRequest, Greeting, Info,
    OptionReply, ReplyBody,
};
use crate::wire::transmission::{chunk, cmd, cmd_flags, Chunk, ReplyHeader, Request};
use crate::wire::{errno, handshake, Parsed, WireError};

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
    sh: &'a Shared,
    shutdown: &'a AtomicBool,
    peer: String,
    rbuf: Box<[u8]>,
    rpos: usize,
    rlen: usize,
    out: Vec<u8>,
    structured: bool,
    no_zeroes: bool,
    /// A WRITE whose payload is still arriving.
    pending: Option<PendingWrite>,
    coalesce: Coalesce,
    /// Coalesced waits, added to the server's total when the connection ends (no counter is
    /// shared by connections on the data path).
    coalesced: u64,
    /// `SO_RCVLOWAT` as last set on the socket.
    lowat: usize,
}

struct PendingWrite {
    cookie: u64,
    offset: u64,
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
    ) -> Conn<'a> {
        Conn {
            sock,
            sh,
            shutdown,
            peer,
            rbuf: vec![0u8; RBUF].into_boxed_slice(),
            rpos: 0,
            rlen: 0,
            out: Vec::with_capacity(64 * 1024),
            structured: false,
            no_zeroes: false,
            pending: None,
            coalesce: Coalesce::default(),
            coalesced: 0,
            lowat: 1,
        }
    }

    pub(crate) fn run(mut self) -> R<()> {
        let r = match self.handshake() {
            Ok(true) => self.transmission(),
            Ok(false) => Ok(()),
            Err(e) => Err(e),
        };
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
        if self.rpos == self.rlen {
            self.rpos = 0;
            self.rlen = 0;
        } else if self.rlen == self.rbuf.len() || self.rpos > self.rbuf.len() / 2 {
            self.rbuf.copy_within(self.rpos..self.rlen, 0);
            self.rlen -= self.rpos;
            self.rpos = 0;
        }
        loop {
            match self.sock.read(&mut self.rbuf[self.rlen..]) {
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

    fn flush_out(&mut self) -> R<()> {
        if self.out.is_empty() {
            return Ok(());
        }
        let r = self.sock.write_all(&self.out);
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

    /// Negotiates; true when the client entered transmission.
    fn handshake(&mut self) -> R<bool> {
        let deadline = Some(Instant::now() + HANDSHAKE_TIMEOUT);
        Greeting {
            flags: hflags::FIXED_NEWSTYLE | hflags::NO_ZEROES,
        }
        .encode(&mut self.out);
        self.flush_out()?;
        let flags = loop {
            match handshake::decode_client_flags(self.avail()) {
                Ok(Parsed::Done { value, len }) => {
                    self.rpos += len;
                    break value;
                }
                Ok(Parsed::Incomplete { .. }) => self.read_more(deadline)?,
                Err(e) => return self.wire(e),
            }
        };
        self.no_zeroes = flags & handshake::cflags::NO_ZEROES != 0;
        for _ in 0..MAX_OPTIONS {
            let option = loop {
                match ClientOption::decode(self.avail()) {
                    Ok(Parsed::Done { value, len }) => {
                        self.rpos += len;
                        break value;
                    }
                    Ok(Parsed::Incomplete { .. }) => self.read_more(deadline)?,
                    Err(e @ WireError::TooLong { .. }) => {
                        // Framing can no longer be trusted: say why, then hang up.
                        let option = crate::wire::be32(self.avail(), 8);
                        self.reply(option, rep::ERR_TOO_BIG, "option too long");
                        let _ = self.flush_out();
                        return self.wire(e);
                    }
                    Err(e) => return self.wire(e),
                }
            };
            if self.option(option)? {
                return Ok(true);
            }
            self.flush_out()?;
        }
        self.fail("too many options")
    }

    fn reply(&mut self, option: u32, code: u32, message: &str) {
        OptionReply {
            option,
            body: ReplyBody::Error {
                code,
                message: message.into(),
            },
        }
        .encode(&mut self.out);
    }

    fn ack(&mut self, option: u32) {
        OptionReply {
            option,
            body: ReplyBody::Ack,
        }
        .encode(&mut self.out);
    }

    fn tflags(&self) -> u16 {
        let mut f = tflags::HAS_FLAGS
            | tflags::SEND_FLUSH
            | tflags::SEND_FUA
            | tflags::SEND_TRIM
            | tflags::SEND_WRITE_ZEROES
            | tflags::CAN_MULTI_CONN;
        if self.sh.cfg.read_only {
            f |= tflags::READ_ONLY;
        }
        if self.structured {
            f |= tflags::SEND_DF;
        }
        f
    }

    fn name_ok(&self, name: &str) -> bool {
        name.is_empty() || name == self.sh.cfg.export
    }

    /// Answers one option; true when transmission starts.
    fn option(&mut self, option: ClientOption) -> R<bool> {
        let n = option.number();
        match option {
            ClientOption::ExportName(name) => {
                if !self.name_ok(&name) {
                    return self.fail(format!("unknown export {name:?}"));
                }
                ExportNameReply {
                    size: self.sh.size,
                    flags: self.tflags(),
                }
                .encode(self.no_zeroes, &mut self.out);
                self.flush_out()?;
                return Ok(true);
            }
            ClientOption::Abort => {
                self.ack(n);
                let _ = self.flush_out();
                return Err(End::Clean);
            }
            ClientOption::List => {
                OptionReply {
                    option: n,
                    body: ReplyBody::Server {
                        name: self.sh.cfg.export.clone(),
                        details: self.sh.cfg.description.clone(),
                    },
                }
                .encode(&mut self.out);
                self.ack(n);
            }
            ClientOption::Info(go) => {
                self.info(n, &go);
            }
            ClientOption::Go(go) => {
                if self.info(n, &go) {
                    self.flush_out()?;
                    return Ok(true);
                }
            }
            ClientOption::StructuredReply => {
                if self.structured {
                    self.reply(n, rep::ERR_INVALID, "structured replies already negotiated");
                } else {
                    self.structured = true;
                    self.ack(n);
                }
            }
            ClientOption::Other { option, .. } => {
                let known = matches!(
                    option,
                    opt::EXPORT_NAME | opt::LIST | opt::INFO | opt::GO | opt::STRUCTURED_REPLY
                );
                if known {
                    self.reply(option, rep::ERR_INVALID, "malformed option");
                } else {
                    self.reply(option, rep::ERR_UNSUP, "option not supported");
                }
            }
        }
        Ok(false)
    }

    /// Answers INFO or GO; true on success.
    fn info(&mut self, n: u32, go: &GoRequest) -> bool {
        if !self.name_ok(&go.name) {
            self.reply(n, rep::ERR_UNKNOWN, "no such export");
            return false;
        }
        let cfg = &self.sh.cfg;
        let mut items = vec![
            Info::Export {
                size: self.sh.size,
                flags: self.tflags(),
            },
            Info::BlockSize {
                min: cfg.min_block,
                preferred: cfg.preferred_block,
                max_payload: cfg.max_payload,
            },
        ];
        if go.requests.contains(&info::NAME) {
            items.push(Info::Name(cfg.export.clone()));
        }
        if go.requests.contains(&info::DESCRIPTION) && !cfg.description.is_empty() {
            items.push(Info::Description(cfg.description.clone()));
        }
        for i in items {
            OptionReply {
                option: n,
                body: ReplyBody::Info(i),
            }
            .encode(&mut self.out);
        }
        self.ack(n);
        true
    }

    fn transmission(&mut self) -> R<()> {
        loop {
            let (mut found, mut bytes, mut written) = (0u32, 0u64, 0u64);
            loop {
                if self.pending.is_some() {
                    if !self.take_payload()? {
                        break;
                    }
                    continue;
                }
                let req = match Request::decode(self.avail()) {
                    Ok(Parsed::Done { value, len }) => {
                        self.rpos += len;
                        value
                    }
                    Ok(Parsed::Incomplete { .. }) => break,
                    Err(e) => return self.wire(e),
                };
                found += 1;
                if matches!(req.cmd, cmd::READ | cmd::WRITE) {
                    bytes += u64::from(req.len);
                }
                if req.cmd == cmd::WRITE {
                    written += u64::from(req.len);
                }
                if !self.request(req)? {
                    return Ok(());
                }
                if self.out.len() >= FLUSH_AT {
                    self.flush_out()?;
                }
            }
            self.flush_out()?;
            self.wait_for_requests(found, bytes, written)?;
        }
    }

    /// Waits for the next requests, coalescing wake-ups when the client pipelines (see
    /// [`super::coalesce`]).
    fn wait_for_requests(&mut self, found: u32, bytes: u64, written: u64) -> R<()> {
        let Some(deadline) = self.sh.cfg.coalesce else {
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
        let mut pfd = libc::pollfd {
            fd: self.sock.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: deadline.as_nanos().min(999_999_999) as libc::c_long,
        };
        // SAFETY: one valid pollfd and timespec for the duration of the call.
        let n = unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) };
        let filled = n > 0;
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
        let v = bytes as libc::c_int;
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
            // SAFETY: the pointer and length describe the receive buffer, which we own.
            let n = unsafe {
                libc::recv(
                    self.sock.as_raw_fd(),
                    self.rbuf.as_mut_ptr().cast(),
                    self.rbuf.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if n > 0 {
                self.rlen = n as usize;
                return Ok(true);
            }
            if n == 0 {
                return Err(End::Clean);
            }
            let e = io::Error::last_os_error();
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

    /// Consumes as much of a pending WRITE's payload as has arrived; true when it completed.
    fn take_payload(&mut self) -> R<bool> {
        let Some(p) = self.pending.as_mut() else {
            return Ok(true);
        };
        let n = (self.rlen - self.rpos).min(p.remaining as usize);
        if n == 0 {
            return Ok(false);
        }
        if p.error == 0 {
            let data = &self.rbuf[self.rpos..self.rpos + n];
            if let Err(e) = self.sh.store.write(p.offset, data, p.fua) {
                p.error = errno::from_io(&e);
            }
        }
        self.rpos += n;
        p.offset += n as u64;
        p.remaining -= n as u32;
        if p.remaining > 0 {
            return Ok(false);
        }
        let (cookie, error) = (p.cookie, p.error);
        self.pending = None;
        self.simple(cookie, error);
        Ok(true)
    }

    fn simple(&mut self, cookie: u64, error: u32) {
        ReplyHeader::Simple { error, cookie }.encode(&mut self.out);
    }

    /// The NBD error for a request, or 0 when it may run.
    fn check(&self, r: &Request) -> u32 {
        let cfg = &self.sh.cfg;
        let mut allowed = cmd_flags::FUA;
        match r.cmd {
            cmd::READ if self.structured => allowed |= cmd_flags::DF,
            cmd::WRITE_ZEROES => allowed |= cmd_flags::NO_HOLE,
            cmd::READ | cmd::WRITE | cmd::TRIM | cmd::FLUSH => {}
            _ => return errno::EINVAL,
        }
        if r.flags & !allowed != 0 {
            return errno::EINVAL;
        }
        let writes = matches!(r.cmd, cmd::WRITE | cmd::TRIM | cmd::WRITE_ZEROES);
        if writes && cfg.read_only {
            return errno::EPERM;
        }
        if r.cmd == cmd::FLUSH {
            return 0;
        }
        if r.cmd == cmd::READ && r.len > cfg.max_payload {
            return errno::EOVERFLOW;
        }
        let past_end = r
            .offset
            .checked_add(r.len.into())
            .is_none_or(|end| end > self.sh.size);
        if past_end {
            return if matches!(r.cmd, cmd::WRITE | cmd::WRITE_ZEROES) {
                errno::ENOSPC
            } else {
                errno::EINVAL
            };
        }
        let align = u64::from(cfg.min_block.max(1));
        if !r.offset.is_multiple_of(align) || !u64::from(r.len).is_multiple_of(align) {
            return errno::EINVAL;
        }
        0
    }

    /// Executes one request; false after DISC.
    fn request(&mut self, r: Request) -> R<bool> {
        if r.cmd == cmd::DISC {
            let _ = self.flush_out();
            return Ok(false);
        }
        if r.cmd == cmd::WRITE && r.len > self.sh.cfg.max_payload {
            return self.fail(format!(
                "WRITE of {} bytes exceeds the maximum payload",
                r.len
            ));
        }
        let error = self.check(&r);
        let fua = r.flags & cmd_flags::FUA != 0;
        if r.cmd == cmd::WRITE {
            self.pending = Some(PendingWrite {
                cookie: r.cookie,
                offset: r.offset,
                remaining: r.len,
                fua,
                error,
            });
            self.take_payload()?;
            return Ok(true);
        }
        if error != 0 {
            self.error_reply(&r, error);
            return Ok(true);
        }
        let store = &self.sh.store;
        let result = match r.cmd {
            cmd::READ => return self.read(&r).map(|()| true),
            cmd::FLUSH => store.flush(),
            cmd::TRIM => store.zero(r.offset, r.len.into(), false),
            cmd::WRITE_ZEROES => {
                let keep = r.flags & cmd_flags::NO_HOLE != 0;
                store.zero(r.offset, r.len.into(), keep).and_then(|()| {
                    if fua {
                        store.flush()
                    } else {
                        Ok(())
                    }
                })
            }
            _ => Err(io::Error::from_raw_os_error(libc::EINVAL)),
        };
        let error = result.err().map_or(0, |e| errno::from_io(&e));
        self.simple(r.cookie, error);
        Ok(true)
    }

    fn error_reply(&mut self, r: &Request, error: u32) {
        if self.structured && r.cmd == cmd::READ {
            Chunk::Error {
                error,
                message: b"",
            }
            .encode(chunk::FLAG_DONE, r.cookie, &mut self.out);
        } else {
            self.simple(r.cookie, error);
        }
    }

    fn read(&mut self, r: &Request) -> R<()> {
        let start = self.out.len();
        if self.structured {
            ReplyHeader::Structured {
                flags: chunk::FLAG_DONE,
                kind: chunk::OFFSET_DATA,
                cookie: r.cookie,
                len: r.len + 8,
            }
            .encode(&mut self.out);
            self.out.extend_from_slice(&r.offset.to_be_bytes());
        } else {
            self.simple(r.cookie, 0);
        }
        let at = self.out.len();
        self.out.resize(at + r.len as usize, 0);
        if let Err(e) = self.sh.store.read(r.offset, &mut self.out[at..]) {
            self.out.truncate(start);
            self.error_reply(r, errno::from_io(&e));
        }
        Ok(())
    }
}
