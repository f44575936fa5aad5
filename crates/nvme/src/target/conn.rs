//! One connection (one queue pair): the ICReq/ICResp exchange, then PDUs in and out until the
//! host closes, the controller goes away or the host breaks the protocol. A broken PDU ends the
//! connection with a C2HTermReq naming the error (NVMe/TCP 1.0 §3.6.2.9, §3.7: fatal errors);
//! a bad command only fails that command with a status.
//!
//! Replies gather in `out` and go out when no whole PDU is left to handle, so a pipelining
//! host's commands are answered in one `sendmsg` (read data referenced in the store:
//! `sanbench_blockstore::out`).

use std::collections::HashMap;
use std::io;
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use zerocopy::little_endian::{U16, U32};

use super::ctrl::{Shared, ADMIN_QUEUE_SIZE};
use super::queue::{fatal, Conn, End};
use crate::recv::RecvBuf;
use crate::wire::cmd::{Command, DataPtr};
use crate::wire::header::{
    digest_bits, flags, pdu_type, zeroed, CapsuleCmd, CommonHeader, DataHdr, IcResp, TermReq,
};
use crate::wire::pdu::{encode_pdu, parse_pdu, Pdu, RxConfig, TxConfig};
use crate::wire::status::Status;
use crate::wire::{fes, Parsed};
use sanbench_blockstore::delay::DueQueue;
use sanbench_blockstore::out::Out;

mod delayed;

/// Before its ICReq, and between commands when the queue has no keep-alive, a host may be
/// silent this long.
const IDLE_LIMIT: Duration = Duration::from_secs(30);

/// Serves connection `number` (counted from 0 as accepted: the seed of its delays' jitter),
/// accepted on port `port` (0-based, in `--listen` order).
pub(crate) fn serve(
    s: TcpStream,
    sh: Arc<Shared>,
    stop: Arc<AtomicBool>,
    number: u64,
    port: usize,
) -> Result<(), End> {
    let _ = s.set_nodelay(true);
    let held = sh.cfg.delay.map(|d| DueQueue::new(d, number));
    if held.is_some() {
        // Completions leave at their due time: the default 50 µs timer slack would add to
        // each. A failure only costs precision.
        let _ = rustix::thread::set_current_timer_slack(std::num::NonZeroU64::new(1000));
    }
    s.set_read_timeout(Some(Duration::from_millis(200)))?;
    s.set_write_timeout(Some(sh.cfg.send_timeout))?;
    let metrics = sh.counters.connect_tcp(number, &s);
    let mut c = Conn {
        metrics,
        s,
        sh,
        stop,
        rx: RxConfig {
            header_digest: false,
            data_digest: false,
            max_data: 0,
        },
        tx: TxConfig::default(),
        out: Out::new(256 * 1024),
        q: None,
        sqhd: 0,
        pending: HashMap::new(),
        next_ttag: 0,
        aers: std::collections::VecDeque::new(),
        port,
        held,
        arrived: Instant::now(),
        r2ts: 0,
    };
    let r = c.run();
    if let Some(q) = c.q.take() {
        if q.qid == 0 {
            c.sh.remove_ctrl(&q.ctrl);
        } else {
            q.ctrl.release_queue(q.qid);
        }
    }
    match r {
        Ok(()) | Err(End::Closed) => Ok(()),
        Err(e) => Err(e),
    }
}

impl Conn {
    fn run(&mut self) -> Result<(), End> {
        let mut rb = RecvBuf::new(1 << 20);
        let mut ic_done = false;
        let mut last_rx = Instant::now();
        loop {
            let r = match parse_pdu(rb.data(), &self.rx) {
                Ok(Parsed::Complete { pdu, consumed }) => {
                    let before = self.held.as_ref().map(|_| self.before());
                    let r = pdu
                        .decode()
                        .map_err(End::from)
                        .and_then(|p| self.handle(p, &mut ic_done));
                    if let (Ok(()), Some(b)) = (&r, before) {
                        self.hold_reply(b);
                    }
                    r.map(|()| consumed)
                }
                Ok(Parsed::Incomplete { needed }) => {
                    super::admin::report_events(self);
                    self.flush()?;
                    if let Some(m) = &self.metrics {
                        let held = self.held.as_ref().map_or(0, |h| h.len());
                        m.set_inflight((self.pending.len() + held) as u64);
                    }
                    if self.held.is_some() && !self.wait_delayed()? {
                        self.check_alive(ic_done, last_rx)?;
                    } else if self.fill(&mut rb, needed)? {
                        last_rx = Instant::now();
                        self.arrived = last_rx;
                    } else {
                        self.check_alive(ic_done, last_rx)?;
                    }
                    Ok(0)
                }
                Err(e) => Err(End::from(e)),
            };
            match r {
                Ok(n) => rb.consume(n),
                Err(e) => {
                    if let End::Fatal { fes, fei, .. } = &e {
                        let d = rb.data();
                        self.term(*fes, *fei, &d[..d.len().min(128)]);
                    }
                    return Err(e);
                }
            }
            if self.out.full() {
                self.flush()?;
            }
        }
    }

    /// Reads what the socket has; false on a timeout.
    fn fill(&mut self, rb: &mut RecvBuf, needed: usize) -> Result<bool, End> {
        match rb.fill(&mut self.s, needed) {
            Ok(0) => Err(End::Closed),
            Ok(_) => Ok(true),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) =>
            {
                Ok(false)
            }
            Err(e) => Err(End::Io(e)),
        }
    }

    fn check_alive(&self, ic_done: bool, last_rx: Instant) -> Result<(), End> {
        if self.stop.load(Ordering::Relaxed) {
            return Err(End::Closed);
        }
        let now = Instant::now();
        match &self.q {
            Some(q) if q.ctrl.dead.load(Ordering::Relaxed) => Err(End::Closed),
            Some(q) if q.qid == 0 && q.ctrl.keep_alive_expired(now) => {
                self.sh.remove_ctrl(&q.ctrl);
                Err(End::Io(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "keep-alive timeout expired",
                )))
            }
            Some(q) if q.ctrl.kato_ms.load(Ordering::Relaxed) != 0 => Ok(()),
            _ if !ic_done || self.q.is_none() => {
                if now.duration_since(last_rx) > IDLE_LIMIT {
                    Err(End::Io(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "host silent before connecting",
                    )))
                } else {
                    Ok(())
                }
            }
            _ => Ok(()),
        }
    }

    fn flush(&mut self) -> Result<(), End> {
        if !self.out.is_empty() {
            self.out.send(&self.s)?;
        }
        Ok(())
    }

    /// Sends a C2HTermReq carrying the offending header, best effort (the connection closes).
    fn term(&mut self, fes: u16, fei: u32, offending: &[u8]) {
        let mut t: TermReq = zeroed();
        t.ch = CommonHeader::new(pdu_type::C2H_TERM_REQ);
        t.fes = U16::new(fes);
        t.fei = U32::new(fei);
        let _ = self.flush();
        encode_pdu(self.out.buf(), &t, offending, &self.tx);
        let _ = self.flush();
    }

    fn handle(&mut self, p: Pdu<'_>, ic_done: &mut bool) -> Result<(), End> {
        if !*ic_done {
            let Pdu::IcReq(req) = p else {
                return Err(fatal(
                    fes::PDU_SEQUENCE_ERROR,
                    0,
                    "first PDU is not an ICReq",
                ));
            };
            let hd = req.digest & digest_bits::HDGST_ENABLE != 0;
            let dd = req.digest & digest_bits::DDGST_ENABLE != 0;
            let mut r: IcResp = zeroed();
            r.ch = CommonHeader::new(pdu_type::IC_RESP);
            r.cpda = 0;
            r.digest = req.digest & (digest_bits::HDGST_ENABLE | digest_bits::DDGST_ENABLE);
            r.maxh2cdata = U32::new(self.sh.cfg.max_h2c_data);
            encode_pdu(self.out.buf(), &r, &[], &self.tx);
            // A data digest covers bytes fixed when it is computed: copy them.
            self.out.zero_copy = !dd;
            self.rx = RxConfig {
                header_digest: hd,
                data_digest: dd,
                max_data: self.sh.cfg.max_h2c_data.max(self.sh.cfg.in_capsule),
            };
            self.tx = TxConfig {
                header_digest: hd,
                data_digest: dd,
                pda: req.hpda,
            };
            *ic_done = true;
            return Ok(());
        }
        match p {
            Pdu::CapsuleCmd(c, data) => self.command(&c, data),
            Pdu::H2cData(h, data) => self.h2c_data(&h, data),
            Pdu::H2cTermReq(..) => Err(End::Closed),
            other => {
                let name = match other {
                    Pdu::IcReq(_) => "a second ICReq",
                    Pdu::IcResp(_) => "an ICResp",
                    Pdu::C2hTermReq(..) => "a C2HTermReq",
                    Pdu::CapsuleResp(_) => "a CapsuleResp",
                    Pdu::C2hData(..) => "a C2HData",
                    _ => "an R2T",
                };
                Err(fatal(
                    fes::INVALID_HEADER_FIELD,
                    0,
                    format!("{name}, a PDU a host does not send here"),
                ))
            }
        }
    }

    fn command(&mut self, c: &CapsuleCmd, data: &[u8]) -> Result<(), End> {
        let sqe = &c.sqe;
        let cid = sqe.command_id.get();
        let qsize = self.q.as_ref().map_or(ADMIN_QUEUE_SIZE, |q| q.size).max(1);
        self.sqhd = (self.sqhd + 1) % qsize;
        let admin = self.q.as_ref().is_none_or(|q| q.qid == 0);
        let cmd = match Command::parse(sqe, admin) {
            Ok(c) => c,
            Err(st) => return self.resp(cid, st, 0),
        };
        if self.q.is_none() && !matches!(cmd, Command::Connect(_)) {
            return self.resp(cid, Status::CMD_SEQ_ERROR, 0);
        }
        let dp = match DataPtr::parse(&sqe.dptr) {
            Ok(d) => d,
            Err(st) => return self.resp(cid, st, 0),
        };
        let limit = if admin { 8192 } else { self.sh.cfg.in_capsule } as usize;
        match dp {
            DataPtr::InCapsule { offset, len } => {
                if offset != 0 {
                    return self.resp(cid, Status::SGL_INVALID_OFFSET, 0);
                }
                if len as usize != data.len() || data.len() > limit {
                    return self.resp(cid, Status::SGL_INVALID_DATA, 0);
                }
            }
            DataPtr::Transport { .. } if !data.is_empty() => {
                return self.resp(cid, Status::SGL_INVALID_DATA, 0)
            }
            DataPtr::Transport { .. } => {}
        }
        if self.pending.values().any(|p| p.cid == cid) {
            return self.resp(cid, Status::CMDID_CONFLICT, 0);
        }
        match cmd {
            Command::Connect(c) => self.connect(cid, &c, data),
            cmd if admin => super::admin::handle(self, cid, cmd, dp),
            cmd => super::io::handle(self, cid, cmd, dp, data),
        }
    }

    fn h2c_data(&mut self, h: &DataHdr, data: &[u8]) -> Result<(), End> {
        let ttag = h.ttag.get();
        let Some(w) = self.pending.get_mut(&ttag) else {
            return Err(fatal(
                fes::INVALID_HEADER_FIELD,
                10,
                "H2CData for an unknown transfer tag",
            ));
        };
        if w.cid != h.command_id.get() {
            return Err(fatal(
                fes::INVALID_HEADER_FIELD,
                8,
                "H2CData command id differs from its R2T's",
            ));
        }
        if data.len() > self.sh.cfg.max_h2c_data as usize {
            return Err(fatal(
                fes::R2T_LIMIT_EXCEEDED,
                16,
                "H2CData above MAXH2CDATA",
            ));
        }
        let off = h.data_offset.get() as usize;
        if off != w.buf.len() || off + data.len() > w.len {
            return Err(fatal(
                fes::DATA_OUT_OF_RANGE,
                12,
                "H2CData outside what the R2T asked for",
            ));
        }
        // Allocated when the data comes, not at the R2T: a host that never sends it costs
        // nothing.
        if w.buf.capacity() == 0 {
            w.buf.reserve_exact(w.len);
        }
        w.buf.extend_from_slice(data);
        let done = w.buf.len() == w.len;
        if done != (h.ch.flags & flags::LAST_PDU != 0) {
            return Err(fatal(
                fes::INVALID_HEADER_FIELD,
                1,
                "LAST_PDU flag does not match the end of the data",
            ));
        }
        if done {
            if let Some(w) = self.pending.remove(&ttag) {
                let st = super::io::finish_write(&self.sh, &w);
                super::io::count(self, w.counted, st == crate::wire::status::Status::SUCCESS);
                self.resp(w.cid, st, 0)?;
            }
        }
        Ok(())
    }
}
