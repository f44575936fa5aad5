//! Data-path PDUs (RFC 7143 §11.3–11.9, §11.16): SCSI Command/Response, Data-Out/In, R2T, SNACK.
//!
//! Each struct holds every non-reserved field of its header. `decode` takes the full 48-byte
//! header; `encode` writes all bytes except TotalAHSLength/DataSegmentLength (set by the framer).

use super::{be32, be64, put32, put64, WireError};

pub(crate) fn bad(opcode: u8, offset: usize, reason: &'static str) -> WireError {
    WireError::InvalidField {
        opcode,
        offset,
        reason,
    }
}

/// SCSI Command (0x01), §11.3.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScsiCommand {
    pub immediate: bool,
    pub final_: bool,
    pub read: bool,
    pub write: bool,
    /// Task attribute (0 untagged, 1 simple, 2 ordered, 3 head of queue, 4 ACA).
    pub attr: u8,
    pub lun: u64,
    pub itt: u32,
    pub expected_data_len: u32,
    pub cmd_sn: u32,
    pub exp_stat_sn: u32,
    pub cdb: [u8; 16],
}

impl ScsiCommand {
    pub fn decode(h: &[u8; 48]) -> Result<Self, WireError> {
        let p = ScsiCommand {
            immediate: h[0] & 0x40 != 0,
            final_: h[1] & 0x80 != 0,
            read: h[1] & 0x40 != 0,
            write: h[1] & 0x20 != 0,
            attr: h[1] & 0x07,
            lun: be64(h, 8),
            itt: be32(h, 16),
            expected_data_len: be32(h, 20),
            cmd_sn: be32(h, 24),
            exp_stat_sn: be32(h, 28),
            cdb: h[32..48].try_into().unwrap_or([0; 16]),
        };
        p.validate()?;
        Ok(p)
    }
    /// §11.3.1: F must be set when W is clear (no unsolicited data can follow).
    pub fn validate(&self) -> Result<(), WireError> {
        if !self.final_ && !self.write {
            return Err(bad(0x01, 1, "F clear without W"));
        }
        if self.attr > 4 {
            return Err(bad(0x01, 1, "reserved task attribute"));
        }
        Ok(())
    }
    pub fn encode(&self, h: &mut [u8; 48]) {
        h[0] = 0x01 | if self.immediate { 0x40 } else { 0 };
        h[1] = (self.final_ as u8) << 7
            | (self.read as u8) << 6
            | (self.write as u8) << 5
            | (self.attr & 7);
        put64(h, 8, self.lun);
        put32(h, 16, self.itt);
        put32(h, 20, self.expected_data_len);
        put32(h, 24, self.cmd_sn);
        put32(h, 28, self.exp_stat_sn);
        h[32..48].copy_from_slice(&self.cdb);
    }
}

/// Residual information shared by SCSI Response and Data-In (§11.4.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Residual {
    pub overflow: bool,
    pub underflow: bool,
    pub count: u32,
}

impl Residual {
    /// Residual for a transfer of `done` bytes where the initiator expected `expected`.
    pub fn of(expected: u32, done: u32) -> Residual {
        match done.cmp(&expected) {
            std::cmp::Ordering::Equal => Residual::default(),
            std::cmp::Ordering::Less => Residual {
                overflow: false,
                underflow: true,
                count: expected - done,
            },
            std::cmp::Ordering::Greater => Residual {
                overflow: true,
                underflow: false,
                count: done - expected,
            },
        }
    }
}

/// SCSI Response (0x21), §11.4.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScsiResponse {
    pub bidi_overflow: bool,
    pub bidi_underflow: bool,
    pub residual: Residual,
    /// 0 = command completed at target, 1 = target failure.
    pub response: u8,
    pub status: u8,
    pub itt: u32,
    pub snack_tag: u32,
    pub stat_sn: u32,
    pub exp_cmd_sn: u32,
    pub max_cmd_sn: u32,
    pub exp_data_sn: u32,
    pub bidi_residual: u32,
}

impl ScsiResponse {
    pub fn decode(h: &[u8; 48]) -> Result<Self, WireError> {
        let p = ScsiResponse {
            bidi_overflow: h[1] & 0x10 != 0,
            bidi_underflow: h[1] & 0x08 != 0,
            residual: Residual {
                overflow: h[1] & 0x04 != 0,
                underflow: h[1] & 0x02 != 0,
                count: be32(h, 44),
            },
            response: h[2],
            status: h[3],
            itt: be32(h, 16),
            snack_tag: be32(h, 20),
            stat_sn: be32(h, 24),
            exp_cmd_sn: be32(h, 28),
            max_cmd_sn: be32(h, 32),
            exp_data_sn: be32(h, 36),
            bidi_residual: be32(h, 40),
        };
        if p.residual.overflow && p.residual.underflow {
            return Err(bad(0x21, 1, "both O and U set"));
        }
        if p.bidi_overflow && p.bidi_underflow {
            return Err(bad(0x21, 1, "both o and u set"));
        }
        if h[1] & 0x80 == 0 {
            return Err(bad(0x21, 1, "F bit clear"));
        }
        Ok(p)
    }
    pub fn encode(&self, h: &mut [u8; 48]) {
        h[0] = 0x21;
        h[1] = 0x80
            | (self.bidi_overflow as u8) << 4
            | (self.bidi_underflow as u8) << 3
            | (self.residual.overflow as u8) << 2
            | (self.residual.underflow as u8) << 1;
        h[2] = self.response;
        h[3] = self.status;
        put32(h, 16, self.itt);
        put32(h, 20, self.snack_tag);
        put32(h, 24, self.stat_sn);
        put32(h, 28, self.exp_cmd_sn);
        put32(h, 32, self.max_cmd_sn);
        put32(h, 36, self.exp_data_sn);
        put32(h, 40, self.bidi_residual);
        put32(h, 44, self.residual.count);
    }
}

/// SCSI Data-Out (0x05), §11.7.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataOut {
    pub final_: bool,
    pub lun: u64,
    pub itt: u32,
    pub ttt: u32,
    pub exp_stat_sn: u32,
    pub data_sn: u32,
    pub buffer_offset: u32,
}

impl DataOut {
    pub fn decode(h: &[u8; 48]) -> Result<Self, WireError> {
        if h[0] & 0x40 != 0 {
            return Err(bad(0x05, 0, "Data-Out cannot be immediate"));
        }
        Ok(DataOut {
            final_: h[1] & 0x80 != 0,
            lun: be64(h, 8),
            itt: be32(h, 16),
            ttt: be32(h, 20),
            exp_stat_sn: be32(h, 28),
            data_sn: be32(h, 36),
            buffer_offset: be32(h, 40),
        })
    }
    pub fn encode(&self, h: &mut [u8; 48]) {
        h[0] = 0x05;
        h[1] = (self.final_ as u8) << 7;
        put64(h, 8, self.lun);
        put32(h, 16, self.itt);
        put32(h, 20, self.ttt);
        put32(h, 28, self.exp_stat_sn);
        put32(h, 36, self.data_sn);
        put32(h, 40, self.buffer_offset);
    }
}

/// SCSI Data-In (0x25), §11.7. With `status` set (S bit) it also completes the command
/// ("phase collapse"), carrying status, StatSN and the residual.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataIn {
    pub final_: bool,
    pub ack: bool,
    pub residual: Residual,
    /// SCSI status when the S bit is set.
    pub status: Option<u8>,
    pub lun: u64,
    pub itt: u32,
    pub ttt: u32,
    pub stat_sn: u32,
    pub exp_cmd_sn: u32,
    pub max_cmd_sn: u32,
    pub data_sn: u32,
    pub buffer_offset: u32,
}

impl DataIn {
    pub fn decode(h: &[u8; 48]) -> Result<Self, WireError> {
        let s = h[1] & 0x01 != 0;
        let p = DataIn {
            final_: h[1] & 0x80 != 0,
            ack: h[1] & 0x40 != 0,
            residual: Residual {
                overflow: h[1] & 0x04 != 0,
                underflow: h[1] & 0x02 != 0,
                count: be32(h, 44),
            },
            status: s.then_some(h[3]),
            lun: be64(h, 8),
            itt: be32(h, 16),
            ttt: be32(h, 20),
            stat_sn: be32(h, 24),
            exp_cmd_sn: be32(h, 28),
            max_cmd_sn: be32(h, 32),
            data_sn: be32(h, 36),
            buffer_offset: be32(h, 40),
        };
        if s && !p.final_ {
            return Err(bad(0x25, 1, "S bit without F bit"));
        }
        if p.residual.overflow && p.residual.underflow {
            return Err(bad(0x25, 1, "both O and U set"));
        }
        Ok(p)
    }
    pub fn encode(&self, h: &mut [u8; 48]) {
        h[0] = 0x25;
        h[1] = (self.final_ as u8) << 7
            | (self.ack as u8) << 6
            | (self.residual.overflow as u8) << 2
            | (self.residual.underflow as u8) << 1
            | self.status.is_some() as u8;
        h[3] = self.status.unwrap_or(0);
        put64(h, 8, self.lun);
        put32(h, 16, self.itt);
        put32(h, 20, self.ttt);
        put32(h, 24, self.stat_sn);
        put32(h, 28, self.exp_cmd_sn);
        put32(h, 32, self.max_cmd_sn);
        put32(h, 36, self.data_sn);
        put32(h, 40, self.buffer_offset);
        put32(h, 44, self.residual.count);
    }
}

/// Ready To Transfer (0x31), §11.8.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct R2t {
    pub lun: u64,
    pub itt: u32,
    pub ttt: u32,
    pub stat_sn: u32,
    pub exp_cmd_sn: u32,
    pub max_cmd_sn: u32,
    pub r2t_sn: u32,
    pub buffer_offset: u32,
    pub desired_len: u32,
}

impl R2t {
    pub fn decode(h: &[u8; 48]) -> Result<Self, WireError> {
        let p = R2t {
            lun: be64(h, 8),
            itt: be32(h, 16),
            ttt: be32(h, 20),
            stat_sn: be32(h, 24),
            exp_cmd_sn: be32(h, 28),
            max_cmd_sn: be32(h, 32),
            r2t_sn: be32(h, 36),
            buffer_offset: be32(h, 40),
            desired_len: be32(h, 44),
        };
        if p.desired_len == 0 {
            return Err(bad(0x31, 44, "zero Desired Data Transfer Length"));
        }
        if p.ttt == 0xffff_ffff {
            return Err(bad(0x31, 20, "reserved Target Transfer Tag"));
        }
        Ok(p)
    }
    pub fn encode(&self, h: &mut [u8; 48]) {
        h[0] = 0x31;
        h[1] = 0x80;
        put64(h, 8, self.lun);
        put32(h, 16, self.itt);
        put32(h, 20, self.ttt);
        put32(h, 24, self.stat_sn);
        put32(h, 28, self.exp_cmd_sn);
        put32(h, 32, self.max_cmd_sn);
        put32(h, 36, self.r2t_sn);
        put32(h, 40, self.buffer_offset);
        put32(h, 44, self.desired_len);
    }
}

/// SNACK Request (0x10), §11.16.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snack {
    /// 0 Data/R2T, 1 Status, 2 DataACK, 3 R-Data.
    pub snack_type: u8,
    pub lun: u64,
    pub itt: u32,
    pub ttt: u32,
    pub exp_stat_sn: u32,
    pub beg_run: u32,
    pub run_length: u32,
}

impl Snack {
    pub fn decode(h: &[u8; 48]) -> Result<Self, WireError> {
        let t = h[1] & 0x0f;
        if t > 3 {
            return Err(bad(0x10, 1, "reserved SNACK type"));
        }
        Ok(Snack {
            snack_type: t,
            lun: be64(h, 8),
            itt: be32(h, 16),
            ttt: be32(h, 20),
            exp_stat_sn: be32(h, 28),
            beg_run: be32(h, 40),
            run_length: be32(h, 44),
        })
    }
    pub fn encode(&self, h: &mut [u8; 48]) {
        h[0] = 0x10;
        h[1] = 0x80 | (self.snack_type & 0x0f);
        put64(h, 8, self.lun);
        put32(h, 16, self.itt);
        put32(h, 20, self.ttt);
        put32(h, 28, self.exp_stat_sn);
        put32(h, 40, self.beg_run);
        put32(h, 44, self.run_length);
    }
}
