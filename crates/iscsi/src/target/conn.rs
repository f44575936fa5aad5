//! One iSCSI connection: login, then the full feature phase (RFC 7143 §4, §10–11).
//!
//! The loop reads as much as the socket has into one buffer, frames and handles every complete
//! PDU in it, appends all responses to one output buffer and writes it with one call: under
//! queue depth 32 one syscall pair serves many commands. Reads are copied once, from the store
//! straight into the output buffer. Any framing or protocol error closes only this connection.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::lun::{Lun, Outcome};
use super::Shared;
use crate::scsi::cdb::{op, Cdb, CdbError};
use crate::scsi::sense::{status, Sense};
use crate::wire::bhs::{decode_lun, Bhs, BHS_LEN};
use crate::wire::discovery::{send_targets, TargetRecord};
use crate::wire::framer::{encode_pdu, encode_pdu_with, parse_pdu, FrameConfig, Parsed, PduRef};
use crate::wire::login::{LoginOutcome, SessionType, TargetLogin, CMD_WINDOW};
use crate::wire::pdu::*;
use crate::wire::pdu_ctl::*;
use crate::wire::{keys, text, WireError};

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
        out: Vec::with_capacity(RBUF),
        rx: FrameConfig::default(),
        tx: FrameConfig::default(),
        login: None,
        session: None,
        stat_sn: 0,
        exp_cmd_sn: 0,
        tasks: HashMap::new(),
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
    /// (TTT, next expected DataSN, end offset) of the outstanding R2T.
    r2t: Option<(u32, u32, u32)>,
    r2t_sn: u32,
    unsol_data_sn: u32,
}

struct Conn {
    stream: TcpStream,
    shared: Arc<Shared>,
    out: Vec<u8>,
    rx: FrameConfig,
    tx: FrameConfig,
    login: Option<TargetLogin>,
    session: Option<(LoginOutcome, String)>,
    stat_sn: u32,
    exp_cmd_sn: u32,
    tasks: HashMap<u32, WriteTask>,
    next_ttt: u32,
    close: bool,
}

fn random(b: &mut [u8]) {
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(b))
        .is_err()
    {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        b.iter_mut()
            .enumerate()
            .for_each(|(i, x)| *x = (t >> (i % 16 * 8)) as u8 ^ i as u8);
    }
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

    fn flush(&mut self) {
        if !self.out.is_empty() {
            if self.stream.write_all(&self.out).is_err() {
                self.close = true;
            }
            self.out.clear();
        }
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
        encode_pdu(&mut self.out, &bhs.encode(), &[], data, &self.tx);
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
            Bhs::DataOut(d) if !discovery => self.on_data_out(&d, pdu.data),
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
        let login = self.login.get_or_insert_with(|| {
            let tsih = sh.next_tsih.fetch_add(1, Ordering::Relaxed).max(1);
            let mut s = [0u8; 4];
            random(&mut s);
            TargetLogin::new(sh.login.clone(), tsih, u32::from_be_bytes(s) & 0xffff)
        });
        let reply = login.on_request(req, data, &mut random);
        encode_pdu(
            &mut self.out,
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
        let response = match t.function {
            // A task that already completed "does not exist" (§11.6.1); one whose command has
            // not arrived yet (RefCmdSN not below ExpCmdSN) counts as aborted.
            1 => {
                if self.tasks.remove(&t.ref_task_tag).is_some()
                    || !sn_lt(t.ref_cmd_sn, self.exp_cmd_sn)
                {
                    0
                } else {
                    1
                }
            }
            2 | 4 | 5 | 6 | 7 => {
                self.tasks.clear();
                0
            }
            3 | 8 => 5,
            _ => 255,
        };
        let r = TaskMgmtResponse {
            response,
            itt: t.itt,
            stat_sn: self.next_stat_sn(),
            exp_cmd_sn: self.exp_cmd_sn,
            max_cmd_sn: self.max_cmd_sn(),
        };
        self.send(Bhs::TaskMgmtResponse(r), &[]);
        if t.function == 7 {
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

    fn on_command(&mut self, cmd: ScsiCommand, imm: &[u8]) {
        let lun_no = decode_lun(cmd.lun) as usize;
        let cdb = match Cdb::decode(&cmd.cdb) {
            Ok(c) => c,
            Err(CdbError::InvalidOpcode { .. }) => return self.check(&cmd, Sense::INVALID_OPCODE),
            Err(CdbError::InvalidField { byte, bit, .. }) => {
                return self.check(
                    &cmd,
                    Sense::INVALID_FIELD_IN_CDB.with_field(true, byte, bit),
                )
            }
            Err(_) => return self.check(&cmd, Sense::INVALID_FIELD_IN_CDB),
        };
        if let Cdb::ReportLuns { select, alloc_len } = cdb {
            return self.report_luns(&cmd, select, alloc_len);
        }
        if lun_no >= self.shared.luns.len() {
            if cmd.cdb[0] == op::INQUIRY {
                let mut v = vec![0u8; 36];
                v[0] = 0x7f;
                return self.data_in(&cmd, Outcome::Data(v), 0);
            }
            return self.check(&cmd, Sense::LUN_NOT_SUPPORTED);
        }
        if let Cdb::CompareAndWrite { blocks: 0, .. } = cdb {
            if cmd.expected_data_len > 0 {
                // 256 blocks wrap to 0 in the one-byte field: data without blocks is invalid.
                return self.check(&cmd, Sense::INVALID_FIELD_IN_CDB.with_field(true, 13, None));
            }
        }
        let need = Lun::data_out_len(&cdb) as u32;
        if cmd.write && cmd.expected_data_len > 0 && need > 0 {
            let want = need.min(cmd.expected_data_len);
            if imm.len() as u32 >= want {
                return self.execute(&cmd, &cdb, lun_no, imm);
            }
            if cmd.expected_data_len > MAX_WRITE {
                return self.check(&cmd, Sense::INVALID_FIELD_IN_CDB);
            }
            // Bound the memory one connection can pin with writes whose data never comes.
            let buffered: usize = self.tasks.values().map(|t| t.buf.len()).sum();
            if buffered + cmd.expected_data_len as usize > MAX_BUFFERED {
                return self.respond(&cmd, status::TASK_SET_FULL, None, Residual::default());
            }
            let mut buf = vec![0u8; cmd.expected_data_len as usize];
            let n = imm.len().min(buf.len());
            buf[..n].copy_from_slice(&imm[..n]);
            let mut task = WriteTask {
                unsolicited_done: cmd.final_,
                cmd,
                cdb,
                lun: lun_no,
                buf,
                received: n as u32,
                want,
                r2t: None,
                r2t_sn: 0,
                unsol_data_sn: 0,
            };
            self.advance(&mut task);
            self.tasks.insert(task.cmd.itt, task);
            return;
        }
        self.execute(&cmd, &cdb, lun_no, imm);
    }

    /// Sends the next R2T when the unsolicited part is over and nothing is outstanding.
    fn advance(&mut self, t: &mut WriteTask) {
        if t.unsolicited_done && t.r2t.is_none() && t.received < t.want {
            let p = &self
                .session
                .as_ref()
                .map(|s| s.0.params.clone())
                .unwrap_or_default();
            let len = (t.want - t.received).min(p.max_burst_length);
            let ttt = self.next_ttt;
            self.next_ttt = self.next_ttt.wrapping_add(1).max(1);
            t.r2t = Some((ttt, 0, t.received + len));
            let r = R2t {
                lun: t.cmd.lun,
                itt: t.cmd.itt,
                ttt,
                stat_sn: self.stat_sn,
                exp_cmd_sn: self.exp_cmd_sn,
                max_cmd_sn: self.max_cmd_sn(),
                r2t_sn: t.r2t_sn,
                buffer_offset: t.received,
                desired_len: len,
            };
            t.r2t_sn += 1;
            self.send(Bhs::R2t(r), &[]);
        }
    }

    fn on_data_out(&mut self, d: &DataOut, data: &[u8]) {
        let Some(mut t) = self.tasks.remove(&d.itt) else {
            return;
        };
        let end = d.buffer_offset as u64 + data.len() as u64;
        let ok = match t.r2t {
            _ if end > t.buf.len() as u64 => false,
            Some((ttt, sn, _)) if d.ttt == ttt => d.data_sn == sn,
            None if d.ttt == 0xffff_ffff && !t.unsolicited_done => d.data_sn == t.unsol_data_sn,
            _ => false,
        };
        if !ok {
            // Bad DataSN, offset or TTT: fail the command (ERL 0 cannot recover it).
            return self.check(&t.cmd.clone(), Sense::new(0x0b, 0x0c, 0x0d));
        }
        t.buf[d.buffer_offset as usize..end as usize].copy_from_slice(data);
        t.received += data.len() as u32;
        match &mut t.r2t {
            Some((_, sn, r2t_end)) => {
                *sn += 1;
                if d.final_ || end as u32 >= *r2t_end {
                    t.r2t = None;
                }
            }
            None => {
                t.unsol_data_sn += 1;
                if d.final_ {
                    t.unsolicited_done = true;
                }
            }
        }
        if t.received >= t.want && t.r2t.is_none() && t.unsolicited_done {
            let (cmd, cdb, lun) = (t.cmd.clone(), t.cdb.clone(), t.lun);
            let n = (t.received as usize).min(t.buf.len());
            self.execute(&cmd, &cdb, lun, &t.buf[..n]);
            return;
        }
        self.advance(&mut t);
        self.tasks.insert(d.itt, t);
    }

    fn execute(&mut self, cmd: &ScsiCommand, cdb: &Cdb, lun: usize, data: &[u8]) {
        let sh = self.shared.clone();
        let nexus = self.session.as_ref().map_or("", |s| s.1.as_str());
        let outcome = sh.luns[lun].execute(cdb, data, nexus);
        let need = Lun::data_out_len(cdb) as u32;
        self.data_in(cmd, outcome, need)
    }

    fn data_in(&mut self, cmd: &ScsiCommand, outcome: Outcome, data_out_need: u32) {
        let edtl = cmd.expected_data_len;
        match outcome {
            Outcome::Good => {
                let res = if cmd.write || data_out_need > 0 {
                    Residual::of(edtl, data_out_need)
                } else {
                    Residual::of(edtl, 0)
                };
                self.respond(cmd, status::GOOD, None, res)
            }
            Outcome::Check(s) => self.check(cmd, s),
            Outcome::Conflict => {
                self.respond(cmd, status::RESERVATION_CONFLICT, None, Residual::default())
            }
            Outcome::Data(v) => {
                let res = Residual::of(edtl, v.len() as u32);
                let n = v.len().min(edtl as usize);
                self.send_data(cmd, n, res, |off, dst| {
                    dst.copy_from_slice(&v[off..off + dst.len()])
                });
            }
            Outcome::Read { off, len } => {
                let res = Residual::of(edtl, len as u32);
                let n = len.min(edtl as usize);
                let sh = self.shared.clone();
                let lun = &sh.luns[decode_lun(cmd.lun) as usize];
                self.send_data(cmd, n, res, |o, dst| {
                    if lun.store.read(off + o as u64, dst).is_err() {
                        dst.fill(0);
                    }
                });
            }
        }
    }

    /// Data-In PDUs of at most the initiator's MaxRecvDataSegmentLength; the last carries the
    /// status (phase collapse, §11.7.4).
    fn send_data(
        &mut self,
        cmd: &ScsiCommand,
        n: usize,
        res: Residual,
        mut fill: impl FnMut(usize, &mut [u8]),
    ) {
        if n == 0 {
            return self.respond(cmd, status::GOOD, None, res);
        }
        // Whole blocks per PDU: the store copies words, and initiators like aligned offsets.
        let max = (self.tx.max_recv_data_segment_length as usize & !511).max(512);
        // Data-In sequences end every MaxBurstLength bytes with the F bit (§11.7.1).
        let burst = self
            .session
            .as_ref()
            .map_or(n, |s| s.0.params.max_burst_length as usize)
            .max(512);
        let mut off = 0;
        let mut data_sn = 0;
        while off < n {
            let burst_end = ((off / burst + 1) * burst).min(n);
            let len = (burst_end - off).min(max);
            let last = off + len == n;
            let d = DataIn {
                final_: off + len == burst_end,
                ack: false,
                residual: if last { res } else { Residual::default() },
                status: last.then_some(status::GOOD),
                lun: 0,
                itt: cmd.itt,
                ttt: 0xffff_ffff,
                stat_sn: if last { self.next_stat_sn() } else { 0 },
                exp_cmd_sn: self.exp_cmd_sn,
                max_cmd_sn: self.max_cmd_sn(),
                data_sn,
                buffer_offset: off as u32,
            };
            let mut h = [0u8; BHS_LEN];
            d.encode(&mut h);
            encode_pdu_with(&mut self.out, &h, &[], len, &self.tx, |dst| fill(off, dst));
            off += len;
            data_sn += 1;
        }
    }

    fn report_luns(&mut self, cmd: &ScsiCommand, select: u8, alloc: u32) {
        if select > 2 && !(0x10..=0x12).contains(&select) {
            return self.check(cmd, Sense::INVALID_FIELD_IN_CDB.with_field(true, 2, None));
        }
        if alloc < 16 {
            return self.check(cmd, Sense::INVALID_FIELD_IN_CDB.with_field(true, 6, None));
        }
        let n = if select == 1 || select == 0x11 {
            0
        } else {
            self.shared.luns.len()
        };
        let mut v = Vec::with_capacity(8 + 8 * n);
        v.extend_from_slice(&((n * 8) as u32).to_be_bytes());
        v.extend_from_slice(&[0; 4]);
        for i in 0..n {
            v.extend_from_slice(&crate::wire::bhs::encode_lun(i as u16).to_be_bytes());
        }
        v.truncate(alloc as usize);
        self.data_in(cmd, Outcome::Data(v), 0);
    }
}
