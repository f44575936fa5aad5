//! The receiving half of a [`Session`]: each PDU the target sends in the full feature phase
//! (Data-In into the arena, SCSI Response, R2T, NOP-In, Reject, Async Message, Logout Response),
//! checked against the task it names (RFC 7143 §11.3-11.10, §11.17) before it touches any
//! state. The sending half (command numbering, Data-Out, the output buffer) is in
//! [`super`].

use sanbench_io::EngineError;

use super::{Dir, Session, LOGOUT_ITT, NO_TAG, PING_ITT};
use crate::scsi::sense::{status, Sense};
use crate::wire::bhs::Bhs;
use crate::wire::codes::{async_event, reject_text};
use crate::wire::framer::PduRef;
use crate::wire::pdu::{DataIn, R2t, ScsiResponse};
use crate::wire::pdu_ctl::{NopIn, NopOut};

impl Session {
    /// Handles one received PDU.
    pub(crate) fn on_pdu(&mut self, pdu: PduRef<'_>) -> Result<(), EngineError> {
        let bhs = pdu
            .decode()
            .map_err(|e| self.link.proto(format!("bad PDU from target: {e}")))?;
        match bhs {
            Bhs::DataIn(d) => self.on_data_in(&d, pdu.data)?,
            Bhs::ScsiResponse(r) => self.on_response(&r, pdu.data)?,
            Bhs::R2t(r) => self.on_r2t(&r)?,
            Bhs::NopIn(n) => self.on_nop_in(&n, pdu.data),
            Bhs::Reject(r) => {
                let what = pdu.data.first().map_or(0, |b| b & 0x3f);
                return Err(self.link.proto(format!(
                    "target rejected a PDU (opcode {what:#04x}): reason {:#04x} ({})",
                    r.reason,
                    reject_text(r.reason)
                )));
            }
            Bhs::AsyncMessage(a) => {
                self.update_sn(a.exp_cmd_sn, a.max_cmd_sn);
                self.got_stat_sn(a.stat_sn);
                self.counters.async_events += 1;
                match a.event {
                    async_event::CONNECTION_DROPPED | async_event::SESSION_DROPPED => {
                        return Err(self.link.lost(format!(
                            "target announced it drops the connection (async event {})",
                            a.event
                        )))
                    }
                    async_event::NEGOTIATION_REQUESTED => {
                        return Err(self.link.proto("target requests renegotiation"))
                    }
                    _ => {}
                }
            }
            Bhs::LogoutResponse(l) if l.itt == LOGOUT_ITT => {
                self.got_stat_sn(l.stat_sn);
                self.logged_out = true;
            }
            b => {
                return Err(self
                    .link
                    .proto(format!("unexpected {:?} in full feature phase", b.opcode())))
            }
        }
        self.drain_pending();
        Ok(())
    }

    fn on_data_in(&mut self, d: &DataIn, data: &[u8]) -> Result<(), EngineError> {
        self.update_sn(d.exp_cmd_sn, d.max_cmd_sn);
        self.counters.data_in_pdus += 1;
        let t = *self.task(d.itt, "Data-In")?;
        if t.dir != Some(Dir::In) {
            return Err(self
                .link
                .proto(format!("Data-In for write ITT {:#x}", d.itt)));
        }
        if d.data_sn != t.next_data_sn {
            return Err(self.link.proto(format!(
                "Data-In DataSN {} for ITT {:#x}, expected {}",
                d.data_sn, d.itt, t.next_data_sn
            )));
        }
        let end = d.buffer_offset as u64 + data.len() as u64;
        if end > t.len as u64 {
            return Err(self.link.proto(format!(
                "Data-In bytes {}..{end} beyond the {} expected for ITT {:#x}",
                d.buffer_offset, t.len, d.itt
            )));
        }
        if !data.is_empty() {
            // SAFETY: the region lies inside this read's arena region (checked above and in
            // `build`); the scheduler gives the queue exclusive use of it until completion.
            let dst = unsafe {
                self.arena
                    .slice_mut(t.buf + d.buffer_offset as usize, data.len())
            };
            dst.copy_from_slice(data);
        }
        let task = &mut self.tasks[d.itt as usize];
        task.got += data.len() as u32;
        task.next_data_sn += 1;
        if let Some(st) = d.status {
            self.got_stat_sn(d.stat_sn);
            self.complete(d.itt, 0, st, None);
        }
        Ok(())
    }

    fn on_response(&mut self, r: &ScsiResponse, data: &[u8]) -> Result<(), EngineError> {
        self.update_sn(r.exp_cmd_sn, r.max_cmd_sn);
        self.got_stat_sn(r.stat_sn);
        let t = *self.task(r.itt, "SCSI Response")?;
        if t.dir == Some(Dir::In) && r.status == status::GOOD && r.exp_data_sn != t.next_data_sn {
            return Err(self.link.proto(format!(
                "SCSI Response ExpDataSN {} for ITT {:#x} after {} Data-In PDUs",
                r.exp_data_sn, r.itt, t.next_data_sn
            )));
        }
        // Sense data: a 2-byte length, then the sense bytes (§11.4.7.2).
        let sense = (data.len() >= 2)
            .then(|| {
                let n = u16::from_be_bytes([data[0], data[1]]) as usize;
                data.get(2..2 + n).and_then(Sense::decode)
            })
            .flatten();
        self.complete(r.itt, r.response, r.status, sense);
        Ok(())
    }

    fn on_r2t(&mut self, r: &R2t) -> Result<(), EngineError> {
        self.update_sn(r.exp_cmd_sn, r.max_cmd_sn);
        self.counters.r2ts += 1;
        let t = *self.task(r.itt, "R2T")?;
        if t.dir != Some(Dir::Out) {
            return Err(self.link.proto(format!("R2T for read ITT {:#x}", r.itt)));
        }
        if r.r2t_sn != t.next_r2t_sn {
            return Err(self.link.proto(format!(
                "R2TSN {} for ITT {:#x}, expected {}",
                r.r2t_sn, r.itt, t.next_r2t_sn
            )));
        }
        let end = r.buffer_offset as u64 + r.desired_len as u64;
        if end > t.len as u64 {
            return Err(self.link.proto(format!(
                "R2T asks for bytes {}..{end} of a {}-byte write (ITT {:#x})",
                r.buffer_offset, t.len, r.itt
            )));
        }
        self.tasks[r.itt as usize].next_r2t_sn += 1;
        self.urgent = true;
        self.data_out(r.itt, r.ttt, r.buffer_offset, end as u32);
        Ok(())
    }

    fn on_nop_in(&mut self, n: &NopIn, data: &[u8]) {
        self.update_sn(n.exp_cmd_sn, n.max_cmd_sn);
        if n.itt == PING_ITT {
            self.got_stat_sn(n.stat_sn);
            self.ping_outstanding = false;
        }
        if n.ttt != NO_TAG {
            // The target pings us: answer with its TTT and data (§11.18), immediate so the
            // answer needs no CmdSN.
            self.counters.nop_in_answered += 1;
            let out = NopOut {
                immediate: true,
                lun: n.lun,
                itt: NO_TAG,
                ttt: n.ttt,
                cmd_sn: self.cmd_sn,
                exp_stat_sn: self.exp_stat_sn,
            };
            self.push(Bhs::NopOut(out), data);
        }
    }
}
