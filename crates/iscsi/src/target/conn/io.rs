//! The SCSI data path of a connection: commands, immediate data, R2T and Data-Out collection,
//! Data-In with status (RFC 7143 §10.7, §11.4, §11.7-11.8). Kept beside [`super`] which owns
//! the socket loop and the dispatch of PDUs.

use std::ops::Range;

use super::data_in::{self, Payload};
use super::data_out::{self, Burst};
use super::Conn;
use crate::scsi::cdb::{op, Cdb, CdbError};
use crate::scsi::sense::{status, Sense};
use crate::target::lun::Lun;
use crate::target::outcome::{Outcome, BLOCK, MAX_XFER_BLOCKS};
use crate::wire::bhs::{decode_lun, encode_lun, Bhs, BHS_LEN};
use crate::wire::codes::{reject_reason, scsi_response};
use crate::wire::keys::SessionParams;
use crate::wire::layout::RESERVED_TAG;
use crate::wire::pdu::{DataIn, DataOut, R2t, Residual, ScsiCommand, ScsiResponse};
use sanbench_blockstore::counters::Op;

/// Largest EDTL we buffer for one write command.
const MAX_WRITE: u32 = MAX_XFER_BLOCKS * BLOCK as u32;
/// Most Data-Out bytes one connection may have buffered for incomplete writes.
const MAX_BUFFERED: usize = 256 << 20;
/// Bad Data-Out is remembered for this many tasks (their later Data-Out dropped quietly).
const FAILED_ITTS: usize = 64;
/// Standard INQUIRY byte 0 for a LUN that does not exist (SPC-5 §6.7.2): peripheral
/// qualifier 011b (not capable of a device here), device type 1Fh (unknown).
const NO_LUN_PERIPHERAL: u8 = 0x7f;

/// A write command collecting its Data-Out.
pub(super) struct WriteTask {
    cmd: ScsiCommand,
    cdb: Cdb,
    lun: usize,
    /// The data, EDTL bytes, filled from the front (DataPDUInOrder=Yes).
    buf: Vec<u8>,
    received: u32,
    /// Bytes the command needs (the rest of the EDTL is residual).
    want: u32,
    unsolicited_done: bool,
    /// The outstanding R2T.
    r2t: Option<Burst>,
    r2t_sn: u32,
    unsol_data_sn: u32,
}

/// Store bytes that Data-In queued in the connection's `Out` references, not yet sent.
pub(super) struct Referenced {
    lun: usize,
    bytes: Range<u64>,
}

impl Conn {
    pub(super) fn on_command(&mut self, cmd: ScsiCommand, imm: &[u8]) {
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
                v[0] = NO_LUN_PERIPHERAL;
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
            let max_burst = match &self.session {
                Some(s) => s.login.params.max_burst_length,
                None => SessionParams::default().max_burst_length,
            };
            let len = (t.want - t.received).min(max_burst);
            let ttt = self.next_ttt;
            self.next_ttt = self.next_ttt.wrapping_add(1).max(1);
            t.r2t = Some(Burst {
                ttt,
                next_sn: 0,
                end: t.received + len,
            });
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

    /// A Data-Out: checked against what was asked (see [`data_out`]); a violation rejects
    /// the PDU and ends its task with CHECK CONDITION.
    pub(super) fn on_data_out(&mut self, d: &DataOut, data: &[u8], header: &[u8; BHS_LEN]) {
        let Some(mut t) = self.tasks.remove(&d.itt) else {
            // The rest of a task already ended for a bad Data-Out: dropped. Otherwise the ITT
            // names no write in progress: no task to end, the PDU alone is rejected.
            if !self.failed_itts.contains(&d.itt) {
                self.reject(reject_reason::INVALID_PDU_FIELD, header);
            }
            return;
        };
        let first_burst = self
            .session
            .as_ref()
            .map_or(0, |s| s.login.params.first_burst_length);
        let expect = data_out::Expect {
            received: t.received,
            edtl: t.buf.len() as u32,
            burst: t.r2t,
            unsolicited_done: t.unsolicited_done,
            unsol_data_sn: t.unsol_data_sn,
            first_burst,
        };
        if let Err(v) = data_out::check(&expect, d, data.len()) {
            self.reject(v.reject_reason(), header);
            if self.failed_itts.len() >= FAILED_ITTS {
                self.failed_itts.pop_front();
            }
            self.failed_itts.push_back(d.itt);
            return self.check(&t.cmd.clone(), v.sense());
        }
        let end = d.buffer_offset as usize + data.len();
        t.buf[d.buffer_offset as usize..end].copy_from_slice(data);
        t.received += data.len() as u32;
        match &mut t.r2t {
            Some(b) => {
                b.next_sn += 1;
                if d.final_ || end as u32 >= b.end {
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
        // Reads queued before this command may reference the bytes it changes; commands of
        // one connection take effect in order here, so those reads get their bytes copied
        // first (no send: a send per write cost 1.4x the target's CPU per I/O in a 70/30 mix).
        if !self.refs.is_empty() && !leaves_store_as_is(cdb) {
            let hit = match writes(cdb) {
                Some(w) => self
                    .refs
                    .iter()
                    .any(|r| r.lun == lun && r.bytes.start < w.end && w.start < r.bytes.end),
                None => true,
            };
            if hit {
                self.out.copy_referenced();
                self.refs.clear();
            }
        }
        let sh = self.shared.clone();
        let nexus = self.session.as_ref().map_or("", |s| s.nexus.as_str());
        let outcome = sh.luns[lun].execute(cdb, data, nexus);
        if let (Some(m), Some((op, bytes))) = (&self.metrics, counted(cdb, &outcome, data)) {
            m.io(
                lun,
                op,
                bytes,
                !matches!(outcome, Outcome::Check(_) | Outcome::Conflict),
            );
        }
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
                self.send_data(cmd, n, res, &Payload::Bytes(&v));
            }
            Outcome::Read { off, len } => {
                let res = Residual::of(edtl, len as u32);
                let n = len.min(edtl as usize);
                let sh = self.shared.clone();
                let lun_no = decode_lun(cmd.lun) as usize;
                let lun = &sh.luns[lun_no];
                let p = Payload::Store {
                    store: &lun.store,
                    off,
                };
                let before = self.out.referenced();
                self.send_data(cmd, n, res, &p);
                if self.out.referenced() > before {
                    self.refs.push(Referenced {
                        lun: lun_no,
                        bytes: off..off + n as u64,
                    });
                }
            }
        }
    }

    /// Data-In PDUs of at most the initiator's MaxRecvDataSegmentLength; the last carries the
    /// status (phase collapse, §11.7.4). Framed by [`data_in::frame`]: RAM-store data is
    /// referenced, not copied, unless a data digest was negotiated.
    fn send_data(&mut self, cmd: &ScsiCommand, n: usize, res: Residual, payload: &Payload<'_>) {
        if n == 0 {
            return self.respond(cmd, status::GOOD, None, res);
        }
        // Whole blocks per PDU: initiators like aligned offsets.
        let max = (self.tx.max_recv_data_segment_length as usize & !511).max(512);
        // Data-In sequences end every MaxBurstLength bytes with the F bit (§11.7.1).
        let burst = self
            .session
            .as_ref()
            .map_or(n, |s| s.login.params.max_burst_length as usize)
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
                ttt: RESERVED_TAG,
                stat_sn: if last { self.next_stat_sn() } else { 0 },
                exp_cmd_sn: self.exp_cmd_sn,
                max_cmd_sn: self.max_cmd_sn(),
                data_sn,
                buffer_offset: off as u32,
            };
            data_in::frame(&mut self.out, &d.to_bytes(), payload, off, len, &self.tx);
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
            v.extend_from_slice(&encode_lun(i as u16).to_be_bytes());
        }
        v.truncate(alloc as usize);
        self.data_in(cmd, Outcome::Data(v), 0);
    }

    /// A SCSI Response with status `st` and, for CHECK CONDITION, its sense data.
    fn respond(&mut self, cmd: &ScsiCommand, st: u8, sense: Option<Sense>, residual: Residual) {
        let mut data = Vec::new();
        if let Some(s) = sense {
            // §11.4.7.1: SenseLength, then the sense data.
            let f = s.fixed();
            data.extend_from_slice(&(f.len() as u16).to_be_bytes());
            data.extend_from_slice(&f);
        }
        let r = ScsiResponse {
            bidi_overflow: false,
            bidi_underflow: false,
            residual,
            response: scsi_response::COMMAND_COMPLETED,
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

/// The counted op of a command and its bytes (`serve --metrics-listen`); `None` for
/// commands that are not I/O (INQUIRY, READ CAPACITY, ...).
fn counted(cdb: &Cdb, outcome: &Outcome, data: &[u8]) -> Option<(Op, u64)> {
    let blocks = |b: u32| u64::from(b) * BLOCK;
    Some(match *cdb {
        Cdb::Read { .. } => match outcome {
            Outcome::Read { len, .. } => (Op::Read, *len as u64),
            _ => (Op::Read, 0),
        },
        Cdb::Write { .. } | Cdb::CompareAndWrite { .. } => (Op::Write, data.len() as u64),
        Cdb::SynchronizeCache { .. } => (Op::Flush, 0),
        Cdb::WriteSame {
            unmap: true,
            blocks: b,
            ..
        } => (Op::Trim, blocks(b)),
        Cdb::WriteSame { blocks: b, .. } => (Op::Zero, blocks(b)),
        Cdb::Unmap { .. } => (Op::Trim, 0),
        _ => return None,
    })
}

/// The store bytes a command writes, when the CDB says (a count of 0 blocks means something
/// else for some of them: unknown).
fn writes(cdb: &Cdb) -> Option<Range<u64>> {
    let (lba, blocks) = match *cdb {
        Cdb::Write { lba, blocks, .. } | Cdb::WriteSame { lba, blocks, .. } => (lba, blocks),
        Cdb::CompareAndWrite { lba, blocks, .. } => (lba, u32::from(blocks)),
        _ => return None,
    };
    (blocks > 0).then(|| {
        let start = lba.saturating_mul(BLOCK);
        start..start.saturating_add(u64::from(blocks) * BLOCK)
    })
}

/// Commands that never change the store's bytes: a read queued before them may still be sent
/// from the store after they run. Before any other command (and any added later) queued reads
/// get their bytes copied, unless [`writes`] shows it misses them.
fn leaves_store_as_is(cdb: &Cdb) -> bool {
    matches!(
        cdb,
        Cdb::Read { .. }
            | Cdb::Verify { .. }
            | Cdb::Inquiry { .. }
            | Cdb::TestUnitReady
            | Cdb::RequestSense { .. }
            | Cdb::ModeSense { .. }
            | Cdb::ReadCapacity10
            | Cdb::ReadCapacity16 { .. }
            | Cdb::GetLbaStatus { .. }
            | Cdb::SynchronizeCache { .. }
            | Cdb::ReportLuns { .. }
            | Cdb::PersistentReserveIn { .. }
    )
}
