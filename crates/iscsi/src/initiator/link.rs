//! The socket side of one initiator connection: connect and login (blocking, bounded by the
//! login timeout), then the primitives the full feature phase is built on: a non-blocking send
//! of whatever is queued, a receive buffer read in large pieces and framed in place, and a wait
//! for readability (and writability while output is pending).
//!
//! Sends use `MSG_DONTWAIT` so a batch never blocks on a full socket while the target is itself
//! blocked sending us data: the caller keeps reading while output is pending.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::io::Errno;
use rustix::net::{RecvFlags, SendFlags};
use sanbench_io::EngineError;

use crate::wire::bhs::{Bhs, BHS_LEN};
use crate::wire::framer::{encode_pdu, parse_pdu, FrameConfig, Parsed, PduRef};
use crate::wire::login::LoginOutcome;
use crate::wire::login_initiator::{InitiatorLogin, InitiatorLoginConfig, InitiatorStep};
use crate::wire::pdu_ctl::LoginResponse;
use crate::wire::WireError;

mod ring;

/// Bytes of receive buffer beyond two largest PDUs: enough for 32 4 KiB Data-Ins per read.
const RBUF_MIN: usize = 1 << 20;

/// A framed receive buffer: bytes `start..end` are received and not yet consumed.
pub(crate) struct RecvBuf {
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// A receive on a ring writes at `end` ([`spare`](Self::spare) handed it out): nothing
    /// moves the bytes or `end` until it lands.
    posted: bool,
}

impl RecvBuf {
    /// `max_pdu` is the largest PDU the peer may send us (our MaxRecvDataSegmentLength plus
    /// header, digests and padding).
    pub fn new(max_pdu: usize) -> RecvBuf {
        RecvBuf {
            buf: vec![0; RBUF_MIN.max(2 * max_pdu)],
            start: 0,
            end: 0,
            posted: false,
        }
    }

    /// A placeholder without storage.
    pub fn empty() -> RecvBuf {
        RecvBuf {
            buf: Vec::new(),
            start: 0,
            end: 0,
            posted: false,
        }
    }

    /// The next complete PDU, if any, and how many bytes it used.
    pub fn parse(&self, cfg: &FrameConfig) -> Result<Option<(PduRef<'_>, usize)>, WireError> {
        self.parse_at(0, cfg)
    }

    /// Like [`parse`](Self::parse), `used` bytes past the unconsumed start.
    pub fn parse_at(
        &self,
        used: usize,
        cfg: &FrameConfig,
    ) -> Result<Option<(PduRef<'_>, usize)>, WireError> {
        match parse_pdu(&self.buf[self.start + used..self.end], cfg)? {
            Parsed::Complete { pdu, consumed } => Ok(Some((pdu, consumed))),
            Parsed::Incomplete { .. } => Ok(None),
        }
    }

    pub fn consume(&mut self, n: usize) {
        self.start += n;
        if self.start >= self.end && !self.posted {
            self.start = 0;
            self.end = 0;
        }
    }

    /// Free space to receive into, moving a partial PDU to the front when the tail is short.
    fn space(&mut self) -> &mut [u8] {
        if self.buf.len() - self.end < self.buf.len() / 2 && self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        &mut self.buf[self.end..]
    }

    fn filled(&mut self, n: usize) {
        self.end += n;
    }

    /// Free space handed to a receive the kernel carries out later: until
    /// [`landed`](Self::landed) the buffer neither moves nor compacts.
    fn spare(&mut self) -> (*mut u8, usize) {
        let space = self.space();
        let r = (space.as_mut_ptr(), space.len());
        self.posted = true;
        r
    }

    /// The receive handed [`spare`](Self::spare) room brought `n` bytes (0 when it failed).
    fn landed(&mut self, n: usize) {
        self.posted = false;
        self.end = (self.end + n).min(self.buf.len());
        if self.start >= self.end {
            self.start = 0;
            self.end = 0;
        }
    }

    /// The storage, taken out (left empty) by an owner that must keep it for the process's
    /// life because a receive may still write into it.
    fn take_storage(&mut self) -> Vec<u8> {
        self.start = 0;
        self.end = 0;
        std::mem::take(&mut self.buf)
    }
}

/// Outcome of one receive attempt.
pub(crate) enum Recv {
    Data,
    /// Nothing arrived within the wait.
    Idle,
}

/// The TCP connection and its name for messages.
pub(crate) struct Link {
    pub stream: TcpStream,
    /// `HOST:PORT (IQN)`, used in every error.
    pub peer: String,
    /// The sends and receives on io_uring ([`Link::use_ring`]), else the poll loop.
    pub ring: Option<Box<ring::LinkRing>>,
}

impl Link {
    pub fn proto(&self, reason: impl Into<String>) -> EngineError {
        EngineError::Protocol {
            peer: self.peer.clone(),
            reason: reason.into(),
        }
    }

    pub fn lost(&self, reason: impl Into<String>) -> EngineError {
        EngineError::Disconnected {
            peer: self.peer.clone(),
            reason: reason.into(),
        }
    }

    fn io_err(&self, e: std::io::Error) -> EngineError {
        self.lost(e.to_string())
    }

    /// Sends as much of `buf` as the socket takes now; returns the count.
    pub fn send_some(&self, buf: &[u8]) -> Result<usize, EngineError> {
        loop {
            match rustix::net::send(&self.stream, buf, SendFlags::DONTWAIT | SendFlags::NOSIGNAL) {
                Ok(n) => return Ok(n),
                Err(Errno::AGAIN) => return Ok(0),
                Err(Errno::INTR) => continue,
                Err(e) => return Err(self.io_err(e.into())),
            }
        }
    }

    /// Receives into `rx`. With `blocking` the socket's read timeout bounds the wait; otherwise
    /// only what has already arrived is taken.
    pub fn recv(&mut self, rx: &mut RecvBuf, blocking: bool) -> Result<Recv, EngineError> {
        if self.ring.is_some() {
            return self.ring_recv(rx, blocking);
        }
        let space = rx.space();
        let r = if blocking {
            (&self.stream).read(space)
        } else {
            rustix::net::recv(&self.stream, &mut *space, RecvFlags::DONTWAIT)
                .map(|(_, n)| n)
                .map_err(std::io::Error::from)
        };
        match r {
            Ok(0) => Err(self.lost("the target closed the connection")),
            Ok(n) => {
                rx.filled(n);
                Ok(Recv::Data)
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) =>
            {
                Ok(Recv::Idle)
            }
            Err(e) => Err(self.io_err(e)),
        }
    }

    /// Whether bytes arrive within `d` (ppoll for POLLIN, nanosecond timeout, capped at 1 s;
    /// on a ring the receive into `rx` waits, and the next [`recv`](Self::recv) returns
    /// what it brought).
    pub fn readable_within(&mut self, rx: &mut RecvBuf, d: Duration) -> Result<bool, EngineError> {
        if self.ring.is_some() {
            return self.ring_readable_within(rx, d);
        }
        let mut p = [PollFd::new(&self.stream, PollFlags::IN)];
        let ts = Timespec {
            tv_sec: 0,
            tv_nsec: d.as_nanos().min(999_999_999) as _,
        };
        match rustix::event::poll(&mut p, Some(&ts)) {
            Ok(n) => Ok(n > 0),
            Err(rustix::io::Errno::INTR) => Ok(false),
            Err(e) => Err(self.io_err(e.into())),
        }
    }

    /// Waits up to `timeout` until the socket is readable or (with `want_write`) writable.
    /// Returns (readable, writable); an error or hang-up counts as readable (the read
    /// then reports it).
    pub fn wait(
        &mut self,
        rx: &mut RecvBuf,
        want_write: bool,
        timeout: Duration,
    ) -> Result<(bool, bool), EngineError> {
        if self.ring.is_some() {
            return self.ring_wait(rx, timeout);
        }
        let events = if want_write {
            PollFlags::IN | PollFlags::OUT
        } else {
            PollFlags::IN
        };
        let mut p = [PollFd::new(&self.stream, events)];
        let ts = Timespec::try_from(timeout.max(Duration::from_millis(1))).unwrap_or(Timespec {
            tv_sec: i32::MAX as _,
            tv_nsec: 0,
        });
        match rustix::event::poll(&mut p, Some(&ts)) {
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => return Ok((false, false)),
            Err(e) => return Err(self.io_err(e.into())),
        }
        let r = p[0].revents();
        let err = r.intersects(PollFlags::ERR | PollFlags::HUP);
        Ok((r.contains(PollFlags::IN) || err, r.contains(PollFlags::OUT)))
    }
}

/// A logged-in connection ready for the full feature phase.
pub(crate) struct LoggedIn {
    pub link: Link,
    pub rx: RecvBuf,
    pub outcome: LoginOutcome,
    /// ExpCmdSN and MaxCmdSN from the last Login Response: the first CmdSN window.
    pub exp_cmd_sn: u32,
    pub max_cmd_sn: u32,
}

/// Connects and logs in; every step is bounded by `timeout`.
pub(crate) fn login(
    addr: SocketAddr,
    peer: String,
    cfg: InitiatorLoginConfig,
    timeout: Duration,
) -> Result<LoggedIn, EngineError> {
    let stream = TcpStream::connect_timeout(&addr, timeout).map_err(|e| EngineError::Connect {
        addr: peer.clone(),
        reason: e.to_string(),
    })?;
    let setup = |e: std::io::Error| EngineError::Connect {
        addr: peer.clone(),
        reason: format!("socket setup: {e}"),
    };
    stream.set_nodelay(true).map_err(setup)?;
    stream.set_read_timeout(Some(timeout)).map_err(setup)?;
    stream.set_write_timeout(Some(timeout)).map_err(setup)?;
    let mut link = Link {
        stream,
        peer,
        ring: None,
    };
    let deadline = Instant::now() + timeout;
    let mut rx = RecvBuf::new(64 * 1024);
    let frame = FrameConfig::default();
    let mut login = InitiatorLogin::new(cfg.clone());
    let (mut req, mut data) = login.start();
    let mut out = Vec::with_capacity(1024);
    for _ in 0..16 {
        out.clear();
        encode_pdu(
            &mut out,
            &Bhs::LoginRequest(req).encode(),
            &[],
            &data,
            &frame,
        );
        (&link.stream).write_all(&out).map_err(|e| link.io_err(e))?;
        let resp = loop {
            if let Some((pdu, n)) = rx.parse(&frame).map_err(|e| link.proto(e.to_string()))? {
                let resp = match pdu.decode().map_err(|e| link.proto(e.to_string()))? {
                    Bhs::LoginResponse(r) => (r, pdu.data.to_vec()),
                    b => {
                        return Err(
                            link.proto(format!("expected a Login Response, got {:?}", b.opcode()))
                        )
                    }
                };
                rx.consume(n);
                break resp;
            }
            if Instant::now() >= deadline {
                return Err(timeout_err(&link, timeout));
            }
            if let Recv::Idle = link.recv(&mut rx, true)? {
                if Instant::now() >= deadline {
                    return Err(timeout_err(&link, timeout));
                }
            }
        };
        let (resp, rdata): (LoginResponse, Vec<u8>) = resp;
        if !resp.status.is_success() {
            let note = if resp.status.is_redirect() {
                "; redirect is not supported"
            } else {
                ""
            };
            return Err(EngineError::Connect {
                addr: link.peer.clone(),
                reason: format!("login refused: {}{note}", resp.status),
            });
        }
        if resp.cont {
            return Err(link.proto("continued Login Response text is not supported"));
        }
        let step = login
            .on_response(&resp, &rdata, &mut crate::os_random)
            .map_err(|e| EngineError::Connect {
                addr: link.peer.clone(),
                reason: format!("login failed: {e}"),
            })?;
        match step {
            InitiatorStep::Send(q, d) => (req, data) = (q, d),
            InitiatorStep::Done(outcome) => {
                let max_pdu =
                    outcome.params.our_max_recv_data_segment_length as usize + BHS_LEN + 16;
                let mut big = RecvBuf::new(max_pdu);
                // Anything after the final Login Response belongs to the full feature phase.
                let rest = &rx.buf[rx.start..rx.end];
                big.buf[..rest.len()].copy_from_slice(rest);
                big.end = rest.len();
                return Ok(LoggedIn {
                    link,
                    rx: big,
                    outcome,
                    exp_cmd_sn: resp.exp_cmd_sn,
                    max_cmd_sn: resp.max_cmd_sn,
                });
            }
        }
    }
    Err(link.proto("login did not complete in 16 exchanges"))
}

fn timeout_err(link: &Link, t: Duration) -> EngineError {
    EngineError::Timeout {
        peer: format!("{} during login", link.peer),
        secs: t.as_secs_f64(),
    }
}
