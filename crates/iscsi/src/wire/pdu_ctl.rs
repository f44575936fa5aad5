//! Control PDUs (RFC 7143 §11.5–11.6, §11.10–11.15, §11.17–11.19): NOP, Task Management, Login,
//! Text, Logout, Async Message, Reject.

use super::pdu::bad;
use super::{be16, be32, be64, put16, put32, put64, WireError};

/// NOP-Out (0x00), §11.18.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NopOut {
    pub immediate: bool,
    pub lun: u64,
    pub itt: u32,
    pub ttt: u32,
    pub cmd_sn: u32,
    pub exp_stat_sn: u32,
}

impl NopOut {
    pub fn decode(h: &[u8; 48]) -> Result<Self, WireError> {
        let p = NopOut {
            immediate: h[0] & 0x40 != 0,
            lun: be64(h, 8),
            itt: be32(h, 16),
            ttt: be32(h, 20),
            cmd_sn: be32(h, 24),
            exp_stat_sn: be32(h, 28),
        };
        if h[1] & 0x80 == 0 {
            return Err(bad(0x00, 1, "F bit clear"));
        }
        // §11.18.1: a NOP-Out that is not a ping response must carry a valid ITT, and a ping
        // response (TTT valid) must carry ITT 0xffffffff.
        if p.itt == 0xffff_ffff && p.ttt == 0xffff_ffff {
            return Err(bad(0x00, 16, "ITT and TTT both reserved"));
        }
        if p.ttt != 0xffff_ffff && p.itt != 0xffff_ffff {
            return Err(bad(0x00, 20, "ping response with a valid ITT"));
        }
        Ok(p)
    }
    pub fn encode(&self, h: &mut [u8; 48]) {
        h[0] = if self.immediate { 0x40 } else { 0 };
        h[1] = 0x80;
        put64(h, 8, self.lun);
        put32(h, 16, self.itt);
        put32(h, 20, self.ttt);
        put32(h, 24, self.cmd_sn);
        put32(h, 28, self.exp_stat_sn);
    }
}

/// NOP-In (0x20), §11.19.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NopIn {
    pub lun: u64,
    pub itt: u32,
    pub ttt: u32,
    pub stat_sn: u32,
    pub exp_cmd_sn: u32,
    pub max_cmd_sn: u32,
}

impl NopIn {
    pub fn decode(h: &[u8; 48]) -> Result<Self, WireError> {
        if h[1] & 0x80 == 0 {
            return Err(bad(0x20, 1, "F bit clear"));
        }
        Ok(NopIn {
            lun: be64(h, 8),
            itt: be32(h, 16),
            ttt: be32(h, 20),
            stat_sn: be32(h, 24),
            exp_cmd_sn: be32(h, 28),
            max_cmd_sn: be32(h, 32),
        })
    }
    pub fn encode(&self, h: &mut [u8; 48]) {
        h[0] = 0x20;
        h[1] = 0x80;
        put64(h, 8, self.lun);
        put32(h, 16, self.itt);
        put32(h, 20, self.ttt);
        put32(h, 24, self.stat_sn);
        put32(h, 28, self.exp_cmd_sn);
        put32(h, 32, self.max_cmd_sn);
    }
}

/// Task Management Function Request (0x02), §11.5; functions in
/// [`super::codes::tmf_function`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskMgmtRequest {
    pub immediate: bool,
    pub function: u8,
    pub lun: u64,
    pub itt: u32,
    pub ref_task_tag: u32,
    pub cmd_sn: u32,
    pub exp_stat_sn: u32,
    pub ref_cmd_sn: u32,
    pub exp_data_sn: u32,
}

impl TaskMgmtRequest {
    pub fn decode(h: &[u8; 48]) -> Result<Self, WireError> {
        if h[1] & 0x80 == 0 {
            return Err(bad(0x02, 1, "F bit clear"));
        }
        Ok(TaskMgmtRequest {
            immediate: h[0] & 0x40 != 0,
            function: h[1] & 0x7f,
            lun: be64(h, 8),
            itt: be32(h, 16),
            ref_task_tag: be32(h, 20),
            cmd_sn: be32(h, 24),
            exp_stat_sn: be32(h, 28),
            ref_cmd_sn: be32(h, 32),
            exp_data_sn: be32(h, 36),
        })
    }
    pub fn encode(&self, h: &mut [u8; 48]) {
        h[0] = 0x02 | if self.immediate { 0x40 } else { 0 };
        h[1] = 0x80 | (self.function & 0x7f);
        put64(h, 8, self.lun);
        put32(h, 16, self.itt);
        put32(h, 20, self.ref_task_tag);
        put32(h, 24, self.cmd_sn);
        put32(h, 28, self.exp_stat_sn);
        put32(h, 32, self.ref_cmd_sn);
        put32(h, 36, self.exp_data_sn);
    }
}

/// Task Management Function Response (0x22), §11.6; responses in
/// [`super::codes::tmf_response`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskMgmtResponse {
    pub response: u8,
    pub itt: u32,
    pub stat_sn: u32,
    pub exp_cmd_sn: u32,
    pub max_cmd_sn: u32,
}

impl TaskMgmtResponse {
    pub fn decode(h: &[u8; 48]) -> Result<Self, WireError> {
        Ok(TaskMgmtResponse {
            response: h[2],
            itt: be32(h, 16),
            stat_sn: be32(h, 24),
            exp_cmd_sn: be32(h, 28),
            max_cmd_sn: be32(h, 32),
        })
    }
    pub fn encode(&self, h: &mut [u8; 48]) {
        h[0] = 0x22;
        h[1] = 0x80;
        h[2] = self.response;
        put32(h, 16, self.itt);
        put32(h, 24, self.stat_sn);
        put32(h, 28, self.exp_cmd_sn);
        put32(h, 32, self.max_cmd_sn);
    }
}

/// Login stages (CSG/NSG values, §11.12.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    Security = 0,
    Operational = 1,
    FullFeature = 3,
}

impl Stage {
    fn from_bits(v: u8, offset: usize, opcode: u8) -> Result<Stage, WireError> {
        match v & 3 {
            0 => Ok(Stage::Security),
            1 => Ok(Stage::Operational),
            3 => Ok(Stage::FullFeature),
            _ => Err(bad(opcode, offset, "reserved login stage 2")),
        }
    }
}

/// Login Request (0x03), §11.12.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoginRequest {
    pub transit: bool,
    pub cont: bool,
    pub csg: Stage,
    pub nsg: Stage,
    pub version_max: u8,
    pub version_min: u8,
    /// 6-byte Initiator Session ID in the low 48 bits.
    pub isid: u64,
    pub tsih: u16,
    pub itt: u32,
    pub cid: u16,
    pub cmd_sn: u32,
    pub exp_stat_sn: u32,
}

fn get_isid(h: &[u8; 48]) -> u64 {
    be64(h, 8) >> 16
}
fn put_isid(h: &mut [u8; 48], isid: u64) {
    h[8..14].copy_from_slice(&isid.to_be_bytes()[2..]);
}

fn login_flags(transit: bool, cont: bool, csg: Stage, nsg: Stage) -> u8 {
    (transit as u8) << 7
        | (cont as u8) << 6
        | (csg as u8) << 2
        | if transit { nsg as u8 } else { 0 }
}

impl LoginRequest {
    pub fn decode(h: &[u8; 48]) -> Result<Self, WireError> {
        let transit = h[1] & 0x80 != 0;
        let cont = h[1] & 0x40 != 0;
        if transit && cont {
            return Err(bad(0x03, 1, "T and C both set"));
        }
        let csg = Stage::from_bits(h[1] >> 2, 1, 0x03)?;
        // NSG is only meaningful with T set (§11.12.3).
        let nsg = if transit {
            Stage::from_bits(h[1], 1, 0x03)?
        } else {
            csg
        };
        if csg == Stage::FullFeature {
            return Err(bad(0x03, 1, "CSG cannot be full feature phase"));
        }
        if transit && (nsg as u8) <= (csg as u8) {
            return Err(bad(0x03, 1, "NSG does not advance past CSG"));
        }
        Ok(LoginRequest {
            transit,
            cont,
            csg,
            nsg,
            version_max: h[2],
            version_min: h[3],
            isid: get_isid(h),
            tsih: be16(h, 14),
            itt: be32(h, 16),
            cid: be16(h, 20),
            cmd_sn: be32(h, 24),
            exp_stat_sn: be32(h, 28),
        })
    }
    pub fn encode(&self, h: &mut [u8; 48]) {
        h[0] = 0x43;
        h[1] = login_flags(self.transit, self.cont, self.csg, self.nsg);
        h[2] = self.version_max;
        h[3] = self.version_min;
        put_isid(h, self.isid);
        put16(h, 14, self.tsih);
        put32(h, 16, self.itt);
        put16(h, 20, self.cid);
        put32(h, 24, self.cmd_sn);
        put32(h, 28, self.exp_stat_sn);
    }
}

/// Login Response (0x23), §11.13. Status class 0 success, 1 redirect, 2 initiator error,
/// 3 target error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoginResponse {
    pub transit: bool,
    pub cont: bool,
    pub csg: Stage,
    pub nsg: Stage,
    pub version_max: u8,
    pub version_active: u8,
    pub isid: u64,
    pub tsih: u16,
    pub itt: u32,
    pub stat_sn: u32,
    pub exp_cmd_sn: u32,
    pub max_cmd_sn: u32,
    pub status_class: u8,
    pub status_detail: u8,
}

impl LoginResponse {
    pub fn decode(h: &[u8; 48]) -> Result<Self, WireError> {
        let transit = h[1] & 0x80 != 0;
        let cont = h[1] & 0x40 != 0;
        if transit && cont {
            return Err(bad(0x23, 1, "T and C both set"));
        }
        let csg = Stage::from_bits(h[1] >> 2, 1, 0x23)?;
        let nsg = if transit {
            Stage::from_bits(h[1], 1, 0x23)?
        } else {
            csg
        };
        Ok(LoginResponse {
            transit,
            cont,
            csg,
            nsg,
            version_max: h[2],
            version_active: h[3],
            isid: get_isid(h),
            tsih: be16(h, 14),
            itt: be32(h, 16),
            stat_sn: be32(h, 24),
            exp_cmd_sn: be32(h, 28),
            max_cmd_sn: be32(h, 32),
            status_class: h[36],
            status_detail: h[37],
        })
    }
    pub fn encode(&self, h: &mut [u8; 48]) {
        h[0] = 0x23;
        h[1] = login_flags(self.transit, self.cont, self.csg, self.nsg);
        h[2] = self.version_max;
        h[3] = self.version_active;
        put_isid(h, self.isid);
        put16(h, 14, self.tsih);
        put32(h, 16, self.itt);
        put32(h, 24, self.stat_sn);
        put32(h, 28, self.exp_cmd_sn);
        put32(h, 32, self.max_cmd_sn);
        h[36] = self.status_class;
        h[37] = self.status_detail;
    }
}

/// Text Request (0x04), §11.10.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextRequest {
    pub immediate: bool,
    pub final_: bool,
    pub cont: bool,
    pub lun: u64,
    pub itt: u32,
    pub ttt: u32,
    pub cmd_sn: u32,
    pub exp_stat_sn: u32,
}

impl TextRequest {
    pub fn decode(h: &[u8; 48]) -> Result<Self, WireError> {
        let p = TextRequest {
            immediate: h[0] & 0x40 != 0,
            final_: h[1] & 0x80 != 0,
            cont: h[1] & 0x40 != 0,
            lun: be64(h, 8),
            itt: be32(h, 16),
            ttt: be32(h, 20),
            cmd_sn: be32(h, 24),
            exp_stat_sn: be32(h, 28),
        };
        if p.final_ && p.cont {
            return Err(bad(0x04, 1, "F and C both set"));
        }
        Ok(p)
    }
    pub fn encode(&self, h: &mut [u8; 48]) {
        h[0] = 0x04 | if self.immediate { 0x40 } else { 0 };
        h[1] = (self.final_ as u8) << 7 | (self.cont as u8) << 6;
        put64(h, 8, self.lun);
        put32(h, 16, self.itt);
        put32(h, 20, self.ttt);
        put32(h, 24, self.cmd_sn);
        put32(h, 28, self.exp_stat_sn);
    }
}

/// Text Response (0x24), §11.11.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextResponse {
    pub final_: bool,
    pub cont: bool,
    pub lun: u64,
    pub itt: u32,
    pub ttt: u32,
    pub stat_sn: u32,
    pub exp_cmd_sn: u32,
    pub max_cmd_sn: u32,
}

impl TextResponse {
    pub fn decode(h: &[u8; 48]) -> Result<Self, WireError> {
        let p = TextResponse {
            final_: h[1] & 0x80 != 0,
            cont: h[1] & 0x40 != 0,
            lun: be64(h, 8),
            itt: be32(h, 16),
            ttt: be32(h, 20),
            stat_sn: be32(h, 24),
            exp_cmd_sn: be32(h, 28),
            max_cmd_sn: be32(h, 32),
        };
        if p.final_ && p.cont {
            return Err(bad(0x24, 1, "F and C both set"));
        }
        Ok(p)
    }
    pub fn encode(&self, h: &mut [u8; 48]) {
        h[0] = 0x24;
        h[1] = (self.final_ as u8) << 7 | (self.cont as u8) << 6;
        put64(h, 8, self.lun);
        put32(h, 16, self.itt);
        put32(h, 20, self.ttt);
        put32(h, 24, self.stat_sn);
        put32(h, 28, self.exp_cmd_sn);
        put32(h, 32, self.max_cmd_sn);
    }
}

/// Logout Request (0x06), §11.14. Reasons: 0 close session, 1 close connection, 2 remove
/// connection for recovery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogoutRequest {
    pub immediate: bool,
    pub reason: u8,
    pub itt: u32,
    pub cid: u16,
    pub cmd_sn: u32,
    pub exp_stat_sn: u32,
}

impl LogoutRequest {
    pub fn decode(h: &[u8; 48]) -> Result<Self, WireError> {
        if h[1] & 0x80 == 0 {
            return Err(bad(0x06, 1, "F bit clear"));
        }
        Ok(LogoutRequest {
            immediate: h[0] & 0x40 != 0,
            reason: h[1] & 0x7f,
            itt: be32(h, 16),
            cid: be16(h, 20),
            cmd_sn: be32(h, 24),
            exp_stat_sn: be32(h, 28),
        })
    }
    pub fn encode(&self, h: &mut [u8; 48]) {
        h[0] = 0x06 | if self.immediate { 0x40 } else { 0 };
        h[1] = 0x80 | (self.reason & 0x7f);
        put32(h, 16, self.itt);
        put16(h, 20, self.cid);
        put32(h, 24, self.cmd_sn);
        put32(h, 28, self.exp_stat_sn);
    }
}

/// Logout Response (0x26), §11.15.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogoutResponse {
    pub response: u8,
    pub itt: u32,
    pub stat_sn: u32,
    pub exp_cmd_sn: u32,
    pub max_cmd_sn: u32,
    pub time2wait: u16,
    pub time2retain: u16,
}

impl LogoutResponse {
    pub fn decode(h: &[u8; 48]) -> Result<Self, WireError> {
        Ok(LogoutResponse {
            response: h[2],
            itt: be32(h, 16),
            stat_sn: be32(h, 24),
            exp_cmd_sn: be32(h, 28),
            max_cmd_sn: be32(h, 32),
            time2wait: be16(h, 40),
            time2retain: be16(h, 42),
        })
    }
    pub fn encode(&self, h: &mut [u8; 48]) {
        h[0] = 0x26;
        h[1] = 0x80;
        h[2] = self.response;
        put32(h, 16, self.itt);
        put32(h, 24, self.stat_sn);
        put32(h, 28, self.exp_cmd_sn);
        put32(h, 32, self.max_cmd_sn);
        put16(h, 40, self.time2wait);
        put16(h, 42, self.time2retain);
    }
}

/// Asynchronous Message (0x32), §11.9.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AsyncMessage {
    pub lun: u64,
    pub stat_sn: u32,
    pub exp_cmd_sn: u32,
    pub max_cmd_sn: u32,
    pub event: u8,
    pub vcode: u8,
    pub param1: u16,
    pub param2: u16,
    pub param3: u16,
}

impl AsyncMessage {
    pub fn decode(h: &[u8; 48]) -> Result<Self, WireError> {
        Ok(AsyncMessage {
            lun: be64(h, 8),
            stat_sn: be32(h, 24),
            exp_cmd_sn: be32(h, 28),
            max_cmd_sn: be32(h, 32),
            event: h[36],
            vcode: h[37],
            param1: be16(h, 38),
            param2: be16(h, 40),
            param3: be16(h, 42),
        })
    }
    pub fn encode(&self, h: &mut [u8; 48]) {
        h[0] = 0x32;
        h[1] = 0x80;
        put64(h, 8, self.lun);
        put32(h, 16, 0xffff_ffff);
        put32(h, 24, self.stat_sn);
        put32(h, 28, self.exp_cmd_sn);
        put32(h, 32, self.max_cmd_sn);
        h[36] = self.event;
        h[37] = self.vcode;
        put16(h, 38, self.param1);
        put16(h, 40, self.param2);
        put16(h, 42, self.param3);
    }
}

/// Reject (0x3f), §11.17. The data segment carries the rejected header.
/// Reasons: 0x02 data digest error, 0x03 SNACK reject, 0x04 protocol error, 0x05 command not
/// supported, 0x06 immediate command reject, 0x07 task in progress, 0x08 invalid data ack,
/// 0x09 invalid PDU field, 0x0a long operation reject, 0x0b negotiation reset, 0x0c waiting for
/// logout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reject {
    pub reason: u8,
    pub stat_sn: u32,
    pub exp_cmd_sn: u32,
    pub max_cmd_sn: u32,
    pub data_sn: u32,
}

pub mod reject_reason {
    pub const DATA_DIGEST: u8 = 0x02;
    pub const SNACK_REJECT: u8 = 0x03;
    pub const PROTOCOL_ERROR: u8 = 0x04;
    pub const COMMAND_NOT_SUPPORTED: u8 = 0x05;
    pub const IMMEDIATE_REJECT: u8 = 0x06;
    pub const TASK_IN_PROGRESS: u8 = 0x07;
    pub const INVALID_DATA_ACK: u8 = 0x08;
    pub const INVALID_PDU_FIELD: u8 = 0x09;
    pub const LONG_OP_REJECT: u8 = 0x0a;
    pub const NEGOTIATION_RESET: u8 = 0x0b;
    pub const WAITING_FOR_LOGOUT: u8 = 0x0c;
}

impl Reject {
    pub fn decode(h: &[u8; 48]) -> Result<Self, WireError> {
        Ok(Reject {
            reason: h[2],
            stat_sn: be32(h, 24),
            exp_cmd_sn: be32(h, 28),
            max_cmd_sn: be32(h, 32),
            data_sn: be32(h, 36),
        })
    }
    pub fn encode(&self, h: &mut [u8; 48]) {
        h[0] = 0x3f;
        h[1] = 0x80;
        h[2] = self.reason;
        put32(h, 16, 0xffff_ffff);
        put32(h, 24, self.stat_sn);
        put32(h, 28, self.exp_cmd_sn);
        put32(h, 32, self.max_cmd_sn);
        put32(h, 36, self.data_sn);
    }
}
