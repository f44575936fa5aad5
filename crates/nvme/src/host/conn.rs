//! The host side of one NVMe/TCP connection: the ICReq/ICResp exchange, sending capsules and
//! H2CData, and receiving R2T, C2HData and CapsuleResp PDUs as [`Event`]s. Every wait has the
//! connection's timeout, so a dead controller is a typed [`HostError::Timeout`].

use std::io::{self, Read};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::io::Errno;
use rustix::net::{RecvFlags, SendFlags};

use zerocopy::little_endian::{U16, U32};

use super::HostError;

mod ring;
use crate::recv::RecvBuf;
use crate::wire::cmd::DataPtr;
use crate::wire::header::{
    digest_bits, flags, pdu_type, zeroed, CapsuleCmd, CommonHeader, Cqe, DataHdr, IcReq, Sqe,
};
use crate::wire::pdu::{encode_pdu, parse_pdu, Pdu, PduRef, RxConfig, TxConfig};
use crate::wire::Parsed;

/// What a host asks for when it connects.
#[derive(Debug, Clone)]
pub struct HostOptions {
    pub header_digest: bool,
    pub data_digest: bool,
    pub hostnqn: String,
    pub hostid: [u8; 16],
    /// Every wait (connect, a reply) ends with [`HostError::Timeout`] after this long.
    pub timeout: Duration,
    /// Keep-alive timeout asked of the controller (ms); 0 for none.
    pub kato_ms: u32,
}

impl Default for HostOptions {
    fn default() -> Self {
        HostOptions {
            header_digest: false,
            data_digest: false,
            hostnqn: "nqn.2014-08.org.nvmexpress:uuid:5a9b0000-0000-4000-8000-73616e62656e".into(),
            hostid: *b"sanbench-host-id",
            timeout: Duration::from_secs(30),
            kato_ms: 0,
        }
    }
}

/// A received PDU, as the host needs it.
#[derive(Debug)]
pub enum Event<'a> {
    R2t {
        cid: u16,
        ttag: u16,
        offset: u32,
        len: u32,
    },
    Data {
        cid: u16,
        offset: u32,
        data: &'a [u8],
        /// The controller sent SUCCESS: no CapsuleResp follows.
        success: bool,
    },
    Resp(Cqe),
}

pub struct Connection {
    pub(super) s: TcpStream,
    rx: RxConfig,
    tx: TxConfig,
    pub(super) rbuf: RecvBuf,
    /// Length of the PDU the last event borrowed from `rbuf`, consumed at the next receive.
    last: usize,
    pub(super) wbuf: Vec<u8>,
    /// How long a send may make no progress.
    pub(super) timeout: Duration,
    /// How long a receive may wait (the socket's read timeout).
    pub(super) read_timeout: Duration,
    /// The sends and receives on io_uring ([`Connection::use_ring`]), else the poll loop.
    pub(super) ring: Option<Box<ring::HostRing>>,
    /// Ended in an orderly way ([`Connection::mark_closed`]).
    pub(super) closed: bool,
    /// MAXH2CDATA from the ICResp.
    pub maxh2cdata: u32,
    /// The most data a command may carry in its capsule (0 before Identify says).
    pub in_capsule: usize,
    /// The controller accepted the Connect that disabled SQ flow control.
    pub sqflow_disabled: bool,
    pub header_digest: bool,
    pub data_digest: bool,
}

impl Connection {
    /// The socket, for a caller that waits on several connections at once.
    /// On a ring, the ring's fd ([`Connection::ring_needs_look`] says when polling it is not
    /// enough).
    pub fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd;
        self.ring_fd().unwrap_or(self.s.as_fd())
    }

    /// The connection ends in an orderly way (the queue's `close`): dropping it then closes
    /// the socket rather than resetting it.
    pub fn mark_closed(&mut self) {
        self.closed = true;
    }

    /// Connects and exchanges ICReq/ICResp; the digests asked for are required.
    pub fn open(addr: SocketAddr, o: &HostOptions) -> Result<Connection, HostError> {
        let s = TcpStream::connect_timeout(&addr, o.timeout).map_err(|e| {
            if e.kind() == io::ErrorKind::TimedOut {
                HostError::Timeout("connecting")
            } else {
                HostError::Io(e)
            }
        })?;
        let _ = s.set_nodelay(true);
        s.set_read_timeout(Some(o.timeout))?;
        s.set_write_timeout(Some(o.timeout))?;
        let mut c = Connection {
            s,
            rx: RxConfig {
                header_digest: false,
                data_digest: false,
                max_data: 0,
            },
            tx: TxConfig::default(),
            rbuf: RecvBuf::new(1 << 20),
            last: 0,
            wbuf: Vec::with_capacity(64 * 1024),
            timeout: o.timeout,
            read_timeout: o.timeout,
            ring: None,
            closed: false,
            maxh2cdata: 0,
            in_capsule: 0,
            sqflow_disabled: false,
            header_digest: o.header_digest,
            data_digest: o.data_digest,
        };
        let mut req: IcReq = zeroed();
        req.ch = CommonHeader::new(pdu_type::IC_REQ);
        req.digest = if o.header_digest {
            digest_bits::HDGST_ENABLE
        } else {
            0
        } | if o.data_digest {
            digest_bits::DDGST_ENABLE
        } else {
            0
        };
        encode_pdu(&mut c.wbuf, &req, &[], &c.tx);
        c.flush()?;
        let resp = c.next_pdu(|p| match p {
            Pdu::IcResp(r) => Ok(r),
            other => Err(HostError::Protocol(format!(
                "expected an ICResp, got {other:?}"
            ))),
        })?;
        let hd = resp.digest & digest_bits::HDGST_ENABLE != 0;
        let dd = resp.digest & digest_bits::DDGST_ENABLE != 0;
        if hd != o.header_digest || dd != o.data_digest {
            return Err(HostError::Protocol(format!(
                "asked for header digest {} and data digest {}, the controller granted {hd} and {dd}",
                o.header_digest, o.data_digest
            )));
        }
        c.maxh2cdata = resp.maxh2cdata.get();
        c.rx = RxConfig {
            header_digest: hd,
            data_digest: dd,
            max_data: 4 << 20,
        };
        c.tx = TxConfig {
            header_digest: hd,
            data_digest: dd,
            pda: resp.cpda,
        };
        Ok(c)
    }

    pub fn set_timeout(&mut self, t: Duration) -> Result<(), HostError> {
        self.s.set_read_timeout(Some(t))?;
        self.read_timeout = t;
        Ok(())
    }

    /// Queues a command capsule; `data` goes in the capsule (the SGL says so).
    pub fn send_cmd(&mut self, mut sqe: Sqe, data: &[u8]) {
        if !data.is_empty() {
            sqe.dptr = DataPtr::InCapsule {
                offset: 0,
                len: data.len() as u32,
            }
            .to_desc();
        }
        let mut c: CapsuleCmd = zeroed();
        c.ch = CommonHeader::new(pdu_type::CAPSULE_CMD);
        c.sqe = sqe;
        encode_pdu(&mut self.wbuf, &c, data, &self.tx);
    }

    /// Queues H2CData PDUs answering an R2T for `data` (the asked range), in pieces of at most
    /// MAXH2CDATA, the last one flagged.
    pub fn send_h2c(&mut self, cid: u16, ttag: u16, offset: u32, data: &[u8]) {
        let piece = (self.maxh2cdata as usize).max(4096);
        let mut at = 0;
        while at < data.len() {
            let n = piece.min(data.len() - at);
            let mut h: DataHdr = zeroed();
            h.ch = CommonHeader::new(pdu_type::H2C_DATA);
            if at + n == data.len() {
                h.ch.flags = flags::LAST_PDU;
            }
            h.command_id = U16::new(cid);
            h.ttag = U16::new(ttag);
            h.data_offset = U32::new(offset + at as u32);
            h.data_length = U32::new(n as u32);
            encode_pdu(&mut self.wbuf, &h, &data[at..at + n], &self.tx);
            at += n;
        }
    }

    /// Sends what is queued. While the socket cannot take more, whatever the controller sends
    /// meanwhile is read into the receive buffer (parsed later by [`Connection::recv`]): a
    /// controller blocked sending C2HData for our reads while we are blocked sending H2CData
    /// for our writes would otherwise wait on each other until a send timeout (1 MiB mixed
    /// I/O at QD 32 did). The receive buffer holds at most what is in flight.
    pub fn flush(&mut self) -> Result<(), HostError> {
        if self.ring.is_some() {
            return self.ring_flush();
        }
        let mut at = 0;
        let mut stalled_since: Option<Instant> = None;
        while at < self.wbuf.len() {
            match rustix::net::send(
                &self.s,
                &self.wbuf[at..],
                SendFlags::DONTWAIT | SendFlags::NOSIGNAL,
            ) {
                Ok(n) => {
                    at += n;
                    stalled_since = None;
                    continue;
                }
                Err(Errno::AGAIN) => {}
                Err(Errno::INTR) => continue,
                Err(e) => return Err(HostError::from_io(e.into())),
            }
            let since = *stalled_since.get_or_insert_with(Instant::now);
            let left = self.timeout.saturating_sub(since.elapsed());
            if left.is_zero() {
                return Err(HostError::Timeout("sending"));
            }
            let mut fds = [PollFd::new(&self.s, PollFlags::OUT | PollFlags::IN)];
            let ts = Timespec::try_from(left).unwrap_or(Timespec {
                tv_sec: i32::MAX as _,
                tv_nsec: 0,
            });
            match rustix::event::poll(&mut fds, Some(&ts)) {
                Ok(_) | Err(Errno::INTR) => {}
                Err(e) => return Err(HostError::from_io(e.into())),
            }
            if fds[0]
                .revents()
                .intersects(PollFlags::IN | PollFlags::ERR | PollFlags::HUP)
            {
                match self.rbuf.fill(&mut NoWait(&self.s), 64 * 1024) {
                    Ok(0) => return Err(HostError::Closed),
                    Ok(_) => stalled_since = None,
                    Err(e)
                        if matches!(
                            e.kind(),
                            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                        ) => {}
                    Err(e) => return Err(HostError::from_io(e)),
                }
            }
        }
        self.wbuf.clear();
        Ok(())
    }

    /// Bytes received and not yet consumed (a whole PDU may be among them).
    pub fn buffered(&self) -> usize {
        self.rbuf.data().len() - self.last
    }

    /// True when a whole PDU is buffered, so [`Connection::recv`] returns without waiting.
    pub fn has_pdu(&self) -> bool {
        let b = &self.rbuf.data()[self.last..];
        b.len() >= 8 && b.len() >= u32::from_le_bytes([b[4], b[5], b[6], b[7]]) as usize
    }

    /// Reads what the socket has without waiting; false when it had nothing.
    pub fn try_fill(&mut self) -> Result<bool, HostError> {
        if self.ring.is_some() {
            return self.ring_try_fill();
        }
        // MSG_DONTWAIT: one system call, where switching the socket's mode took two more.
        match self.rbuf.fill(&mut NoWait(&self.s), 64 * 1024) {
            Ok(0) => Err(HostError::Closed),
            Ok(_) => Ok(true),
            Err(e) => match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(false),
                _ => Err(HostError::Io(e)),
            },
        }
    }

    /// Waits for the next PDU.
    pub fn recv(&mut self) -> Result<Event<'_>, HostError> {
        self.next_pdu(|p| {
            Ok(match p {
                Pdu::R2t(r) => Event::R2t {
                    cid: r.command_id.get(),
                    ttag: r.ttag.get(),
                    offset: r.r2t_offset.get(),
                    len: r.r2t_length.get(),
                },
                Pdu::C2hData(h, data) => Event::Data {
                    cid: h.command_id.get(),
                    offset: h.data_offset.get(),
                    data,
                    success: h.ch.flags & flags::SUCCESS != 0,
                },
                Pdu::CapsuleResp(r) => Event::Resp(r.cqe),
                Pdu::C2hTermReq(t, _) => {
                    return Err(HostError::Terminated {
                        fes: t.fes.get(),
                        fei: t.fei.get(),
                    })
                }
                other => {
                    return Err(HostError::Protocol(format!(
                        "unexpected PDU from the controller: {other:?}"
                    )))
                }
            })
        })
    }

    /// Reads until one whole PDU is buffered, then hands it to `f` typed.
    fn next_pdu<'a, T>(
        &'a mut self,
        f: impl FnOnce(Pdu<'a>) -> Result<T, HostError>,
    ) -> Result<T, HostError> {
        self.rbuf.consume(self.last);
        self.last = 0;
        let (hlen, data_start, data_len, t, fl) = loop {
            let b = self.rbuf.data();
            match parse_pdu(b, &self.rx)? {
                Parsed::Complete { pdu, consumed } => {
                    self.last = consumed;
                    let start = pdu.data.as_ptr() as usize - b.as_ptr() as usize;
                    break (
                        pdu.header.len(),
                        start,
                        pdu.data.len(),
                        pdu.pdu_type,
                        pdu.flags,
                    );
                }
                Parsed::Incomplete { needed } => self.fill(needed)?,
            }
        };
        let b = self.rbuf.data();
        let p = PduRef {
            pdu_type: t,
            flags: fl,
            header: &b[..hlen],
            data: &b[data_start..data_start + data_len],
        };
        f(p.decode()?)
    }

    fn fill(&mut self, needed: usize) -> Result<(), HostError> {
        if self.ring.is_some() {
            return self.ring_fill(needed);
        }
        match self.rbuf.fill(&mut self.s, needed) {
            Ok(0) => Err(HostError::Closed),
            Ok(_) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(()),
            Err(e) => Err(HostError::from_io(e)),
        }
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.ring_drop();
    }
}

/// Reads from a blocking socket without waiting (MSG_DONTWAIT), leaving its mode alone.
struct NoWait<'a>(&'a TcpStream);

impl Read for NoWait<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        rustix::net::recv(self.0, buf, RecvFlags::DONTWAIT)
            .map(|(n, _)| n)
            .map_err(io::Error::from)
    }
}
