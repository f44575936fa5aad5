//! One iSCSI connection: the socket side and the dispatch of each PDU to the part of the
//! protocol it belongs to (RFC 7143 §4, §10–11). Beside it: `conn/login.rs` the login phase
//! and text negotiation, `conn/tmf.rs` task management, `conn/io.rs` the SCSI data path (with
//! `conn/data_out.rs` what a Data-Out may carry and `conn/data_in.rs` a Data-In PDU), and
//! `conn/recv.rs` the receive buffer.
//!
//! The loop reads as much as the socket has into one buffer, frames and handles every complete
//! PDU in it, appends all responses to one output buffer and writes it with one call: under
//! queue depth 32 one syscall pair serves many commands. Replies leave through blockstore's
//! [`Out`]: a read's data from a RAM store is referenced where it lies and the kernel copies it
//! into the socket once (from a file store, or under a data digest, it is copied into the
//! buffer once); see [`data_in`]. Any framing or protocol error closes only this connection.

use std::collections::{HashMap, VecDeque};
use std::io::Read;
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sanbench_blockstore::delay::DueQueue;
use sanbench_blockstore::out::Out;

use super::Shared;
use crate::wire::bhs::{Bhs, BHS_LEN};
use crate::wire::codes::{logout_response, reject_reason};
use crate::wire::framer::{encode_pdu, parse_pdu, FrameConfig, Parsed, PduRef};
use crate::wire::layout::RESERVED_TAG;
use crate::wire::login::{SessionType, TargetLogin, CMD_WINDOW};
use crate::wire::pdu_ctl::{LogoutRequest, LogoutResponse, NopIn, NopOut, Reject};
use crate::wire::WireError;

mod data_in;
mod data_out;
mod delayed;
mod io;
mod login;
mod recv;
mod tmf;

use io::{Referenced, WriteTask};
use login::Session;
use recv::RecvBuf;

/// The receive buffer's first size and the send buffer's flush threshold.
const RBUF: usize = 1 << 20;
/// How long one read waits before the loop looks at the stop flag again.
const READ_WAIT: Duration = Duration::from_millis(200);

/// Serves connection `number` (counted from 0 as accepted: the seed of its delays' jitter).
pub(super) fn serve(stream: TcpStream, shared: Arc<Shared>, stop: Arc<AtomicBool>, number: u64) {
    let _ = stream.set_nodelay(true);
    let _ = stream.set_read_timeout(Some(READ_WAIT));
    let held = shared.cfg.delay.map(|d| DueQueue::new(d, number));
    if held.is_some() {
        // Replies leave at their due time: the default 50 µs timer slack would add to each.
        // A failure only costs precision.
        let _ = rustix::thread::set_current_timer_slack(std::num::NonZeroU64::new(1000));
    }
    let metrics = shared.counters.connect_tcp(number, &stream);
    let mut c = Conn {
        metrics,
        stream,
        shared,
        out: Out::new(RBUF),
        refs: Vec::new(),
        rx: FrameConfig::default(),
        tx: FrameConfig::default(),
        login: None,
        session: None,
        stat_sn: 0,
        exp_cmd_sn: 0,
        tasks: HashMap::new(),
        failed_itts: VecDeque::new(),
        next_ttt: 1,
        close: false,
        held,
        arrived: Instant::now(),
    };
    let _ = c.run(&stop);
}

struct Conn {
    stream: TcpStream,
    shared: Arc<Shared>,
    /// Everything this connection sends, in the order it was produced.
    out: Out,
    /// Store ranges that Data-In waiting in `out` references.
    refs: Vec<Referenced>,
    rx: FrameConfig,
    tx: FrameConfig,
    /// The login in progress (between the first Login Request and full feature phase).
    login: Option<TargetLogin>,
    /// Set when login reached full feature phase.
    session: Option<Session>,
    stat_sn: u32,
    exp_cmd_sn: u32,
    /// Write commands still collecting Data-Out, by ITT.
    tasks: HashMap<u32, WriteTask>,
    /// ITTs of write tasks ended for a bad Data-Out: the rest of their data is dropped quietly.
    failed_itts: VecDeque<u32>,
    next_ttt: u32,
    close: bool,
    /// With a delay: SCSI statuses (and their data) held until due (`conn/delayed.rs`).
    held: Option<DueQueue<Vec<u8>>>,
    /// When the bytes read last arrived: the PDUs they complete were received then.
    arrived: Instant,
    /// `serve --metrics-listen`: this connection's I/O counters.
    metrics: Option<sanbench_blockstore::counters::ConnCounters>,
}

/// Serial number arithmetic (RFC 1982) on 32-bit sequence numbers.
fn sn_lt(a: u32, b: u32) -> bool {
    a != b && b.wrapping_sub(a) < 1 << 31
}

impl Conn {
    /// Reads, frames and handles PDUs until the peer leaves, a send fails, a PDU ends the
    /// connection (logout, a framing error) or `stop` is set.
    fn run(&mut self, stop: &AtomicBool) -> Result<(), WireError> {
        let mut rb = RecvBuf::new(RBUF);
        while !self.close && !stop.load(Ordering::Relaxed) {
            if self.held.is_some() && !self.wait_delayed() {
                continue;
            }
            match self.stream.read(rb.spare()) {
                Ok(0) => return Ok(()),
                Ok(n) => {
                    rb.filled(n);
                    if self.held.is_some() {
                        self.arrived = Instant::now();
                    }
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock
                            | std::io::ErrorKind::TimedOut
                            | std::io::ErrorKind::Interrupted
                    ) =>
                {
                    continue
                }
                Err(_) => return Ok(()),
            }
            loop {
                match parse_pdu(rb.pending(), &self.rx) {
                    Ok(Parsed::Complete { pdu, consumed }) => {
                        let before = self.held.as_ref().map(|_| self.before(pdu.header));
                        self.handle(pdu);
                        rb.consume(consumed);
                        if let Some(b) = before {
                            self.hold_reply(b, stop);
                        }
                        if self.close {
                            break;
                        }
                        if self.out.full() {
                            self.flush();
                        }
                    }
                    Ok(Parsed::Incomplete { needed }) => {
                        rb.reserve(needed);
                        break;
                    }
                    Err(WireError::DataDigest { pdu_len, .. }) => {
                        let h = rb.header().unwrap_or([0; BHS_LEN]);
                        self.reject(reject_reason::DATA_DIGEST, &h);
                        rb.consume(pdu_len);
                    }
                    Err(e) => {
                        self.flush();
                        return Err(e);
                    }
                }
            }
            rb.rewind_if_empty();
            self.flush();
            if let Some(m) = &self.metrics {
                let held = self.held.as_ref().map_or(0, |h| h.len());
                m.set_inflight((self.tasks.len() + held) as u64);
            }
        }
        Ok(())
    }

    /// Sends everything queued, in order; a failed send closes the connection.
    fn flush(&mut self) {
        if !self.out.is_empty() && self.out.send(&self.stream).is_err() {
            self.close = true;
        }
        self.refs.clear();
    }

    fn max_cmd_sn(&self) -> u32 {
        self.exp_cmd_sn.wrapping_add(CMD_WINDOW - 1)
    }

    fn next_stat_sn(&mut self) -> u32 {
        let s = self.stat_sn;
        self.stat_sn = s.wrapping_add(1);
        s
    }

    fn send(&mut self, bhs: Bhs, data: &[u8]) {
        encode_pdu(self.out.buf(), &bhs.encode(), &[], data, &self.tx);
    }

    /// A Reject (§11.17) carrying the header of the PDU it refuses.
    fn reject(&mut self, reason: u8, header: &[u8; BHS_LEN]) {
        let r = Reject {
            reason,
            stat_sn: self.stat_sn,
            exp_cmd_sn: self.exp_cmd_sn,
            max_cmd_sn: self.max_cmd_sn(),
            data_sn: 0,
        };
        self.send(Bhs::Reject(r), header);
    }

    /// Hands one PDU to the phase it belongs to: before full feature phase only Login
    /// Requests; a discovery session takes no SCSI commands, data or task management.
    fn handle(&mut self, pdu: PduRef<'_>) {
        let bhs = match pdu.decode() {
            Ok(b) => b,
            Err(_) => {
                if self.session.is_some() {
                    self.reject(reject_reason::INVALID_PDU_FIELD, pdu.header);
                } else {
                    self.close = true;
                }
                return;
            }
        };
        let Some(sess) = &self.session else {
            match bhs {
                Bhs::LoginRequest(req) => self.on_login(&req, pdu.data),
                _ => self.close = true,
            }
            return;
        };
        let discovery = sess.login.session_type == SessionType::Discovery;
        match bhs {
            Bhs::ScsiCommand(cmd) if !discovery => {
                let p = &sess.login.params;
                let imm = pdu.data.len() as u32;
                // §13.10-13.11: immediate data only when negotiated, only with W, never past
                // FirstBurstLength or EDTL; unsolicited Data-Out only with InitialR2T=No.
                let bad = (imm > 0
                    && (!cmd.write
                        || !p.immediate_data
                        || imm > p.first_burst_length
                        || imm > cmd.expected_data_len))
                    || (!cmd.final_ && p.initial_r2t);
                if bad {
                    self.check_cmd_sn(cmd.immediate, cmd.cmd_sn);
                    return self.reject(reject_reason::PROTOCOL_ERROR, pdu.header);
                }
                if self.check_cmd_sn(cmd.immediate, cmd.cmd_sn) {
                    self.on_command(cmd, pdu.data);
                }
            }
            Bhs::DataOut(d) if !discovery => self.on_data_out(&d, pdu.data, pdu.header),
            Bhs::NopOut(n) => self.on_nop_out(&n, pdu.data),
            Bhs::TaskMgmtRequest(t) if !discovery => {
                if self.check_cmd_sn(t.immediate, t.cmd_sn) {
                    self.on_tmf(&t);
                }
            }
            Bhs::TextRequest(t) => {
                if self.check_cmd_sn(t.immediate, t.cmd_sn) {
                    self.on_text(&t, pdu.data, discovery);
                }
            }
            Bhs::LogoutRequest(l) => self.on_logout(&l),
            Bhs::LoginRequest(_) => {
                self.reject(reject_reason::PROTOCOL_ERROR, pdu.header);
                self.close = true;
            }
            _ => self.reject(reject_reason::COMMAND_NOT_SUPPORTED, pdu.header),
        }
    }

    /// §4.2.2.1: a non-immediate command outside [ExpCmdSN, MaxCmdSN] is silently ignored.
    fn check_cmd_sn(&mut self, immediate: bool, sn: u32) -> bool {
        if immediate {
            return true;
        }
        if sn_lt(sn, self.exp_cmd_sn) || sn_lt(self.max_cmd_sn(), sn) {
            return false;
        }
        if sn == self.exp_cmd_sn {
            self.exp_cmd_sn = self.exp_cmd_sn.wrapping_add(1);
        }
        true
    }

    /// §11.18: a ping with an ITT is answered with its data; one without (the answer to a
    /// target's NOP-In) is not.
    fn on_nop_out(&mut self, n: &NopOut, data: &[u8]) {
        if n.itt != RESERVED_TAG && self.check_cmd_sn(n.immediate, n.cmd_sn) {
            let r = NopIn {
                lun: n.lun,
                itt: n.itt,
                ttt: RESERVED_TAG,
                stat_sn: self.next_stat_sn(),
                exp_cmd_sn: self.exp_cmd_sn,
                max_cmd_sn: self.max_cmd_sn(),
            };
            self.send(Bhs::NopIn(r), data);
        }
    }

    /// §11.14-11.15: the connection closes after the Logout Response.
    fn on_logout(&mut self, l: &LogoutRequest) {
        self.check_cmd_sn(l.immediate, l.cmd_sn);
        let r = LogoutResponse {
            response: logout_response::CLOSED,
            itt: l.itt,
            stat_sn: self.next_stat_sn(),
            exp_cmd_sn: self.exp_cmd_sn,
            max_cmd_sn: self.max_cmd_sn(),
            time2wait: 0,
            time2retain: 0,
        };
        self.send(Bhs::LogoutResponse(r), &[]);
        self.close = true;
    }
}
