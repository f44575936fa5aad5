//! One iSCSI connection: login, then the full feature phase (RFC 7143 §4, §10–11).
//!
//! The loop reads as much as the socket has into one buffer, frames and handles every complete
//! PDU in it, appends all responses to one output buffer and writes it with one call: under
//! queue depth 32 one syscall pair serves many commands. Replies leave through blockstore's
//! [`Out`]: a read's data from a RAM store is referenced where it lies and the kernel copies it
//! into the socket once (from a file store, or under a data digest, it is copied into the
//! buffer once); see [`data_in`]. Any framing or protocol error closes only this connection.

use std::collections::HashMap;
use std::io::Read;
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use sanbench_blockstore::out::Out;

use super::lun::{Lun, Outcome};
use super::Shared;
use crate::scsi::cdb::{op, Cdb, CdbError};
use crate::scsi::sense::{status, Sense};
use crate::wire::bhs::{decode_lun, Bhs, BHS_LEN};
use crate::wire::discovery::{send_targets, TargetRecord};
use crate::wire::framer::{encode_pdu, parse_pdu, FrameConfig, Parsed, PduRef};
use crate::wire::login::{LoginOutcome, SessionType, TargetLogin, CMD_WINDOW};
use crate::wire::pdu::*;
use crate::wire::pdu_ctl::*;
use crate::wire::{keys, text, WireError};

mod data_in;
mod data_out;
mod io;

use data_out::Burst;

const RBUF: usize = 1 << 20;
/// Largest EDTL we buffer for one write command.
const MAX_WRITE: u32 = super::lun::MAX_XFER_BLOCKS * 512;
/// Most Data-Out bytes one connection may have buffered for incomplete writes.
const MAX_BUFFERED: usize = 256 << 20;

pub(super) fn serve(stream: TcpStream, shared: Arc<Shared>, stop: Arc<AtomicBool>) {
    let _ = stream.set_nodelay(true);
    let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
    let mut c = Conn {
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
        failed_itts: Default::default(),
        next_ttt: 1,
        close: false,
    };
    let _ = c.run(&stop);
}

struct WriteTask {
    cmd: ScsiCommand,
    cdb: Cdb,
    lun: usize,
    buf: Vec<u8>,
    received: u32,
    want: u32,
    unsolicited_done: bool,
    /// The outstanding R2T.
    r2t: Option<Burst>,
    r2t_sn: u32,
    unsol_data_sn: u32,
}

struct Conn {
    stream: TcpStream,
    shared: Arc<Shared>,
    /// Everything this connection sends, in the order it was produced.
    out: Out,
    /// Store ranges (LUN, start, end) that Data-In waiting in `out` references.
    refs: Vec<(usize, u64, u64)>,
    rx: FrameConfig,
    tx: FrameConfig,
    login: Option<TargetLogin>,
    session: Option<(LoginOutcome, String)>,
    stat_sn: u32,
    exp_cmd_sn: u32,
    tasks: HashMap<u32, WriteTask>,
    /// ITTs of write tasks ended for a bad Data-Out: the rest of their data is dropped quietly.
    failed_itts: std::collections::VecDeque<u32>,
    next_ttt: u32,
    close: bool,
}

/// Serial number arithmetic (RFC 1982) on 32-bit sequence numbers.
fn sn_lt(a: u32, b: u32) -> bool {
    a != b && b.wrapping_sub(a) < 1 << 31
}

impl Conn {
    fn run(&mut self, stop: &AtomicBool) -> Result<(), WireError> {
        let mut rbuf = vec![0u8; RBUF];
        let (mut start, mut end) = (0usize, 0usize);
        while !self.close && !stop.load(Ordering::Relaxed) {
            if end == rbuf.len() {
                rbuf.copy_within(start..end, 0);
                end -= start;
                start = 0;
            }
            match self.stream.read(&mut rbuf[end..]) {
                Ok(0) => return Ok(()),
                Ok(n) => end += n,
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
                match parse_pdu(&rbuf[start..end], &self.rx) {
                    Ok(Parsed::Complete { pdu, consumed }) => {
                        self.handle(pdu);
                        start += consumed;
                        if self.close {
                            break;
                        }
                        if self.out.full() {
                            self.flush();
                        }
                    }
                    Ok(Parsed::Incomplete { needed }) => {
                        let have = end - start;
                        if have + needed > rbuf.len() {
                            rbuf.resize(have + needed, 0);
                        }
                        if start > 0 && end + needed > rbuf.len() {
                            rbuf.copy_within(start..end, 0);
                            end = have;
                            start = 0;
                        }
                        break;
                    }
                    Err(WireError::DataDigest { pdu_len, .. }) => {
                        let h: [u8; BHS_LEN] = rbuf[start..start + BHS_LEN]
                            .try_into()
                            .unwrap_or([0; BHS_LEN]);
                        self.reject(reject_reason::DATA_DIGEST, &h);
                        start += pdu_len;
                    }
                    Err(e) => {
                        self.flush();
                        return Err(e);
                    }
                }
            }
            if start == end {
                start = 0;
                end = 0;
            }
            self.flush();
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
        let Some((sess, _)) = &self.session else {
            match bhs {
                Bhs::LoginRequest(req) => self.on_login(&req, pdu.data),
                _ => self.close = true,
            }
            return;
        };
        let discovery = sess.session_type == SessionType::Discovery;
        match bhs {
            Bhs::ScsiCommand(cmd) if !discovery => {
                let p = &sess.params;
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
            Bhs::NopOut(n) => {
                if n.itt != 0xffff_ffff && self.check_cmd_sn(n.immediate, n.cmd_sn) {
                    let r = NopIn {
                        lun: n.lun,
                        itt: n.itt,
                        ttt: 0xffff_ffff,
                        stat_sn: self.next_stat_sn(),
                        exp_cmd_sn: self.exp_cmd_sn,
                        max_cmd_sn: self.max_cmd_sn(),
                    };
                    self.send(Bhs::NopIn(r), pdu.data);
                }
            }
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
            Bhs::LogoutRequest(l) => {
                self.check_cmd_sn(l.immediate, l.cmd_sn);
                let r = LogoutResponse {
                    response: 0,
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

    fn on_login(&mut self, req: &LoginRequest, data: &[u8]) {
        let sh = self.shared.clone();
        // The first StatSN is drawn from the OS as the CHAP challenges are; without it the
        // login fails (target error) rather than starting from a guessable number.
        let mut s = [0u8; 4];
        let seeded = self.login.is_some() || crate::os_random(&mut s).is_ok();
        let login = self.login.get_or_insert_with(|| {
            let tsih = sh.next_tsih.fetch_add(1, Ordering::Relaxed).max(1);
            TargetLogin::new(sh.login.clone(), tsih, u32::from_be_bytes(s) & 0xffff)
        });
        let reply = if seeded {
            login.on_request(req, data, &mut crate::os_random)
        } else {
            login.refuse(req, crate::wire::login::status::TARGET_ERROR)
        };
        encode_pdu(
            self.out.buf(),
            &Bhs::LoginResponse(reply.header.clone()).encode(),
            &[],
            &reply.data,
            &self.tx,
        );
        if reply.is_failure() {
            self.close = true;
            return;
        }
        if let Some(o) = reply.outcome {
            let p = &o.params;
            self.rx = FrameConfig {
                header_digest: p.header_digest,
                data_digest: p.data_digest,
                max_recv_data_segment_length: p.our_max_recv_data_segment_length,
            };
            self.tx = FrameConfig {
                max_recv_data_segment_length: p.peer_max_recv_data_segment_length,
                ..self.rx
            };
            // A data digest covers the data as sent: it is computed on a copy.
            self.out.zero_copy = !self.tx.data_digest;
            self.stat_sn = o.next_stat_sn;
            self.exp_cmd_sn = o.exp_cmd_sn;
            let nexus = format!("{},i,0x{:012x}", o.initiator_name, o.isid);
            self.session = Some((o, nexus));
            self.login = None;
        }
    }

    fn on_text(&mut self, t: &TextRequest, data: &[u8], discovery: bool) {
        let mut out = Vec::new();
        if let Ok(pairs) = text::decode(data) {
            if let Some(v) = text::get(&pairs, "SendTargets") {
                let recs = [TargetRecord {
                    name: self.shared.cfg.iqn.clone(),
                    addresses: vec![self.shared.portal.clone()],
                }];
                let cur = self.session.as_ref().and_then(|s| s.0.target_name.clone());
                text::encode(&send_targets(v, &recs, discovery, cur.as_deref()), &mut out);
            }
            // Renegotiation in full feature phase (§6.1): only MaxRecvDataSegmentLength among
            // our keys may change; login-only keys are rejected, unknown keys not understood.
            let mut answers = Vec::new();
            for p in pairs.iter().filter(|p| p.key != "SendTargets") {
                let ans = match keys::key_def(&p.key) {
                    None => "NotUnderstood".to_string(),
                    Some(def) if p.key == "MaxRecvDataSegmentLength" => {
                        match keys::parse_num(def, &p.value) {
                            Ok(n) => {
                                self.tx.max_recv_data_segment_length = n as u32;
                                self.rx.max_recv_data_segment_length.to_string()
                            }
                            Err(_) => "Reject".to_string(),
                        }
                    }
                    Some(def) if def.scope == keys::Scope::Any => "Irrelevant".to_string(),
                    Some(_) => "Reject".to_string(),
                };
                answers.push(text::Pair::new(p.key.clone(), ans));
            }
            text::encode(&answers, &mut out);
        }
        let r = TextResponse {
            final_: true,
            cont: false,
            lun: t.lun,
            itt: t.itt,
            ttt: 0xffff_ffff,
            stat_sn: self.next_stat_sn(),
            exp_cmd_sn: self.exp_cmd_sn,
            max_cmd_sn: self.max_cmd_sn(),
        };
        self.send(Bhs::TextResponse(r), &out);
    }

    fn on_tmf(&mut self, t: &TaskMgmtRequest) {
        use crate::wire::codes::{tmf_function as f, tmf_response as r};
        let response = match t.function {
            // A task that already completed "does not exist" (§11.6.1); one whose command has
            // not arrived yet (RefCmdSN not below ExpCmdSN) counts as aborted.
            f::ABORT_TASK => {
                if self.tasks.remove(&t.ref_task_tag).is_some()
                    || !sn_lt(t.ref_cmd_sn, self.exp_cmd_sn)
                {
                    r::COMPLETE
                } else {
                    r::TASK_DOES_NOT_EXIST
                }
            }
            f::ABORT_TASK_SET
            | f::CLEAR_TASK_SET
            | f::LOGICAL_UNIT_RESET
            | f::TARGET_WARM_RESET
            | f::TARGET_COLD_RESET => {
                self.tasks.clear();
                r::COMPLETE
            }
            f::CLEAR_ACA | f::TASK_REASSIGN => r::FUNCTION_NOT_SUPPORTED,
            _ => r::REJECTED,
        };
        let r = TaskMgmtResponse {
            response,
            itt: t.itt,
            stat_sn: self.next_stat_sn(),
            exp_cmd_sn: self.exp_cmd_sn,
            max_cmd_sn: self.max_cmd_sn(),
        };
        self.send(Bhs::TaskMgmtResponse(r), &[]);
        if t.function == crate::wire::codes::tmf_function::TARGET_COLD_RESET {
            self.close = true;
        }
    }

    fn respond(&mut self, cmd: &ScsiCommand, st: u8, sense: Option<Sense>, residual: Residual) {
        let mut data = Vec::new();
        if let Some(s) = sense {
            let f = s.fixed();
            data.extend_from_slice(&(f.len() as u16).to_be_bytes());
            data.extend_from_slice(&f);
        }
        let r = ScsiResponse {
            bidi_overflow: false,
            bidi_underflow: false,
            residual,
            response: 0,
            status: st,
            itt: cmd.itt,
            snack_tag: 0,
            stat_sn: self.next_stat_sn(),
            exp_cmd_sn: self.exp_cmd_sn,
            max_cmd_sn: self.max_cmd_sn(),
            exp_data_sn: 0,
            bidi_residual: 0,
        };
        self.send(Bhs::ScsiResponse(r), &data);
    }

    fn check(&mut self, cmd: &ScsiCommand, s: Sense) {
        self.respond(cmd, status::CHECK_CONDITION, Some(s), Residual::default());
    }
}
