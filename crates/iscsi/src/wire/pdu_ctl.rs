//! Control PDUs (RFC 7143 §11.5–11.6, §11.9–11.15, §11.17–11.19): NOP, Task Management, Login,
//! Text, Logout, Async Message, Reject. Layouts (offsets) are in [`super::layout`].

/// Also at its old path: the integration tests name it `pdu_ctl::reject_reason`.
pub use super::codes::reject_reason;
use super::codes::LoginStatus;
use super::layout::*;
use super::pdu::{bad, bit};
use super::WireError;
use zerocopy::{transmute, transmute_ref};

typed_pdu! {
    /// NOP-Out (0x00), §11.18.
    pub struct NopOut: NopOutHdr {
        hand {
            pub immediate: bool,
        }
        wire {
            pub lun: u64,
            pub itt: u32,
            pub ttt: u32,
            pub cmd_sn: u32,
            pub exp_stat_sn: u32,
        }
    }
}

impl NopOut {
    pub fn decode(h: &[u8; 48]) -> Result<Self, WireError> {
        let l: &NopOutHdr = transmute_ref!(h);
        let p = NopOut {
            immediate: l.opcode & IMMEDIATE != 0,
            ..Self::from_layout(l)
        };
        if l.flags & FINAL == 0 {
            return Err(bad(0x00, 1, "F bit clear"));
        }
        // §11.18.1: a NOP-Out that is not a ping response must carry a valid ITT, and a ping
        // response (TTT valid) must carry ITT 0xffffffff.
        if p.itt == RESERVED_TAG && p.ttt == RESERVED_TAG {
            return Err(bad(0x00, 16, "ITT and TTT both reserved"));
        }
        if p.ttt != RESERVED_TAG && p.itt != RESERVED_TAG {
            return Err(bad(0x00, 20, "ping response with a valid ITT"));
        }
        Ok(p)
    }
    pub fn to_bytes(&self) -> [u8; 48] {
        let mut l = self.to_layout();
        l.opcode = bit(self.immediate, IMMEDIATE);
        l.flags = FINAL;
        transmute!(l)
    }
}

typed_pdu! {
    /// NOP-In (0x20), §11.19.
    pub struct NopIn: NopInHdr {
        hand {}
        wire {
            pub lun: u64,
            pub itt: u32,
            pub ttt: u32,
            pub stat_sn: u32,
            pub exp_cmd_sn: u32,
            pub max_cmd_sn: u32,
        }
    }
}

impl NopIn {
    pub fn decode(h: &[u8; 48]) -> Result<Self, WireError> {
        let l: &NopInHdr = transmute_ref!(h);
        if l.flags & FINAL == 0 {
            return Err(bad(0x20, 1, "F bit clear"));
        }
        Ok(Self::from_layout(l))
    }
    pub fn to_bytes(&self) -> [u8; 48] {
        let mut l = self.to_layout();
        l.opcode = 0x20;
        l.flags = FINAL;
        transmute!(l)
    }
}

typed_pdu! {
    /// Task Management Function Request (0x02), §11.5; functions in
    /// [`super::codes::tmf_function`].
    pub struct TaskMgmtRequest: TaskMgmtRequestHdr {
        hand {
            pub immediate: bool,
            pub function: u8,
        }
        wire {
            pub lun: u64,
            pub itt: u32,
            pub ref_task_tag: u32,
            pub cmd_sn: u32,
            pub exp_stat_sn: u32,
            pub ref_cmd_sn: u32,
            pub exp_data_sn: u32,
        }
    }
}

impl TaskMgmtRequest {
    pub fn decode(h: &[u8; 48]) -> Result<Self, WireError> {
        let l: &TaskMgmtRequestHdr = transmute_ref!(h);
        let (immediate, function) = final_code(0x02, l.opcode, l.flags)?;
        Ok(TaskMgmtRequest {
            immediate,
            function,
            ..Self::from_layout(l)
        })
    }
    pub fn to_bytes(&self) -> [u8; 48] {
        let mut l = self.to_layout();
        (l.opcode, l.flags) = put_final_code(0x02, self.immediate, self.function);
        transmute!(l)
    }
}

typed_pdu! {
    /// Task Management Function Response (0x22), §11.6; responses in
    /// [`super::codes::tmf_response`].
    pub struct TaskMgmtResponse: TaskMgmtResponseHdr {
        hand {}
        wire {
            pub response: u8,
            pub itt: u32,
            pub stat_sn: u32,
            pub exp_cmd_sn: u32,
            pub max_cmd_sn: u32,
        }
    }
}

impl TaskMgmtResponse {
    pub fn decode(h: &[u8; 48]) -> Result<Self, WireError> {
        Ok(Self::from_layout(transmute_ref!(h)))
    }
    pub fn to_bytes(&self) -> [u8; 48] {
        let mut l = self.to_layout();
        l.opcode = 0x22;
        l.flags = FINAL;
        transmute!(l)
    }
}

/// Login stages (CSG/NSG values, §11.12.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Stage {
    #[default]
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

/// The T, C, CSG and NSG bits of a Login Request or Response (§11.12.1–11.12.3).
struct LoginFlags {
    transit: bool,
    cont: bool,
    csg: Stage,
    nsg: Stage,
}

impl LoginFlags {
    fn read(flags: u8, opcode: u8) -> Result<LoginFlags, WireError> {
        let transit = flags & 0x80 != 0;
        let cont = flags & 0x40 != 0;
        if transit && cont {
            return Err(bad(opcode, 1, "T and C both set"));
        }
        let csg = Stage::from_bits(flags >> 2, 1, opcode)?;
        // NSG is only meaningful with T set (§11.12.3).
        let nsg = if transit {
            Stage::from_bits(flags, 1, opcode)?
        } else {
            csg
        };
        Ok(LoginFlags {
            transit,
            cont,
            csg,
            nsg,
        })
    }
    fn bits(transit: bool, cont: bool, csg: Stage, nsg: Stage) -> u8 {
        bit(transit, 0x80) | bit(cont, 0x40) | (csg as u8) << 2 | bit(transit, nsg as u8)
    }
}

/// The 6-byte ISID in the low 48 bits of a u64.
fn get_isid(b: [u8; 6]) -> u64 {
    let mut a = [0u8; 8];
    a[2..].copy_from_slice(&b);
    u64::from_be_bytes(a)
}
fn put_isid(isid: u64) -> [u8; 6] {
    let b = isid.to_be_bytes();
    [b[2], b[3], b[4], b[5], b[6], b[7]]
}

/// Bytes 0-1 of a request whose byte 1 is the F bit (required) and a 7-bit code (Task
/// Management's function, §11.5.1; Logout's reason, §11.14.1): the I bit and the code.
fn final_code(op: u8, l_opcode: u8, l_flags: u8) -> Result<(bool, u8), WireError> {
    if l_flags & FINAL == 0 {
        return Err(bad(op, 1, "F bit clear"));
    }
    Ok((l_opcode & IMMEDIATE != 0, l_flags & 0x7f))
}

/// Bytes 0-1 of such a request: the opcode with the I bit, then F and the code.
fn put_final_code(op: u8, immediate: bool, code: u8) -> (u8, u8) {
    (op | bit(immediate, IMMEDIATE), FINAL | (code & 0x7f))
}

typed_pdu! {
    /// Login Request (0x03), §11.12.
    pub struct LoginRequest: LoginRequestHdr {
        hand {
            pub transit: bool,
            pub cont: bool,
            pub csg: Stage,
            pub nsg: Stage,
            /// 6-byte Initiator Session ID in the low 48 bits.
            pub isid: u64,
        }
        wire {
            pub version_max: u8,
            pub version_min: u8,
            pub tsih: u16,
            pub itt: u32,
            pub cid: u16,
            pub cmd_sn: u32,
            pub exp_stat_sn: u32,
        }
    }
}

impl LoginRequest {
    pub fn decode(h: &[u8; 48]) -> Result<Self, WireError> {
        let l: &LoginRequestHdr = transmute_ref!(h);
        let f = LoginFlags::read(l.flags, 0x03)?;
        if f.csg == Stage::FullFeature {
            return Err(bad(0x03, 1, "CSG cannot be full feature phase"));
        }
        if f.transit && (f.nsg as u8) <= (f.csg as u8) {
            return Err(bad(0x03, 1, "NSG does not advance past CSG"));
        }
        Ok(LoginRequest {
            transit: f.transit,
            cont: f.cont,
            csg: f.csg,
            nsg: f.nsg,
            isid: get_isid(l.isid),
            ..Self::from_layout(l)
        })
    }
    pub fn to_bytes(&self) -> [u8; 48] {
        let mut l = self.to_layout();
        // Login Requests are always immediate (§11.12).
        l.opcode = 0x03 | IMMEDIATE;
        l.flags = LoginFlags::bits(self.transit, self.cont, self.csg, self.nsg);
        l.isid = put_isid(self.isid);
        transmute!(l)
    }
}

typed_pdu! {
    /// Login Response (0x23), §11.13. `status` is the header's Status-Class and
    /// Status-Detail bytes (0/0 success, class 1 redirect, 2 initiator error, 3 target error).
    pub struct LoginResponse: LoginResponseHdr {
        hand {
            pub transit: bool,
            pub cont: bool,
            pub csg: Stage,
            pub nsg: Stage,
            pub isid: u64,
            pub status: LoginStatus,
        }
        wire {
            pub version_max: u8,
            pub version_active: u8,
            pub tsih: u16,
            pub itt: u32,
            pub stat_sn: u32,
            pub exp_cmd_sn: u32,
            pub max_cmd_sn: u32,
        }
    }
}

impl LoginResponse {
    pub fn decode(h: &[u8; 48]) -> Result<Self, WireError> {
        let l: &LoginResponseHdr = transmute_ref!(h);
        let f = LoginFlags::read(l.flags, 0x23)?;
        Ok(LoginResponse {
            transit: f.transit,
            cont: f.cont,
            csg: f.csg,
            nsg: f.nsg,
            isid: get_isid(l.isid),
            status: LoginStatus {
                class: l.status_class,
                detail: l.status_detail,
            },
            ..Self::from_layout(l)
        })
    }
    pub fn to_bytes(&self) -> [u8; 48] {
        let mut l = self.to_layout();
        l.opcode = 0x23;
        l.flags = LoginFlags::bits(self.transit, self.cont, self.csg, self.nsg);
        l.isid = put_isid(self.isid);
        l.status_class = self.status.class;
        l.status_detail = self.status.detail;
        transmute!(l)
    }
}

typed_pdu! {
    /// Text Request (0x04), §11.10.
    pub struct TextRequest: TextRequestHdr {
        hand {
            pub immediate: bool,
            pub final_: bool,
            pub cont: bool,
        }
        wire {
            pub lun: u64,
            pub itt: u32,
            pub ttt: u32,
            pub cmd_sn: u32,
            pub exp_stat_sn: u32,
        }
    }
}

impl TextRequest {
    pub fn decode(h: &[u8; 48]) -> Result<Self, WireError> {
        let l: &TextRequestHdr = transmute_ref!(h);
        let p = TextRequest {
            immediate: l.opcode & IMMEDIATE != 0,
            final_: l.flags & FINAL != 0,
            cont: l.flags & 0x40 != 0,
            ..Self::from_layout(l)
        };
        if p.final_ && p.cont {
            return Err(bad(0x04, 1, "F and C both set"));
        }
        Ok(p)
    }
    pub fn to_bytes(&self) -> [u8; 48] {
        let mut l = self.to_layout();
        l.opcode = 0x04 | bit(self.immediate, IMMEDIATE);
        l.flags = bit(self.final_, FINAL) | bit(self.cont, 0x40);
        transmute!(l)
    }
}

typed_pdu! {
    /// Text Response (0x24), §11.11.
    pub struct TextResponse: TextResponseHdr {
        hand {
            pub final_: bool,
            pub cont: bool,
        }
        wire {
            pub lun: u64,
            pub itt: u32,
            pub ttt: u32,
            pub stat_sn: u32,
            pub exp_cmd_sn: u32,
            pub max_cmd_sn: u32,
        }
    }
}

impl TextResponse {
    pub fn decode(h: &[u8; 48]) -> Result<Self, WireError> {
        let l: &TextResponseHdr = transmute_ref!(h);
        let p = TextResponse {
            final_: l.flags & FINAL != 0,
            cont: l.flags & 0x40 != 0,
            ..Self::from_layout(l)
        };
        if p.final_ && p.cont {
            return Err(bad(0x24, 1, "F and C both set"));
        }
        Ok(p)
    }
    pub fn to_bytes(&self) -> [u8; 48] {
        let mut l = self.to_layout();
        l.opcode = 0x24;
        l.flags = bit(self.final_, FINAL) | bit(self.cont, 0x40);
        transmute!(l)
    }
}

typed_pdu! {
    /// Logout Request (0x06), §11.14. Reasons: 0 close session, 1 close connection, 2 remove
    /// connection for recovery.
    pub struct LogoutRequest: LogoutRequestHdr {
        hand {
            pub immediate: bool,
            pub reason: u8,
        }
        wire {
            pub itt: u32,
            pub cid: u16,
            pub cmd_sn: u32,
            pub exp_stat_sn: u32,
        }
    }
}

impl LogoutRequest {
    pub fn decode(h: &[u8; 48]) -> Result<Self, WireError> {
        let l: &LogoutRequestHdr = transmute_ref!(h);
        let (immediate, reason) = final_code(0x06, l.opcode, l.flags)?;
        Ok(LogoutRequest {
            immediate,
            reason,
            ..Self::from_layout(l)
        })
    }
    pub fn to_bytes(&self) -> [u8; 48] {
        let mut l = self.to_layout();
        (l.opcode, l.flags) = put_final_code(0x06, self.immediate, self.reason);
        transmute!(l)
    }
}

typed_pdu! {
    /// Logout Response (0x26), §11.15.
    pub struct LogoutResponse: LogoutResponseHdr {
        hand {}
        wire {
            pub response: u8,
            pub itt: u32,
            pub stat_sn: u32,
            pub exp_cmd_sn: u32,
            pub max_cmd_sn: u32,
            pub time2wait: u16,
            pub time2retain: u16,
        }
    }
}

impl LogoutResponse {
    pub fn decode(h: &[u8; 48]) -> Result<Self, WireError> {
        Ok(Self::from_layout(transmute_ref!(h)))
    }
    pub fn to_bytes(&self) -> [u8; 48] {
        let mut l = self.to_layout();
        l.opcode = 0x26;
        l.flags = FINAL;
        transmute!(l)
    }
}

typed_pdu! {
    /// Asynchronous Message (0x32), §11.9.
    pub struct AsyncMessage: AsyncMessageHdr {
        hand {}
        wire {
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
    }
}

impl AsyncMessage {
    pub fn decode(h: &[u8; 48]) -> Result<Self, WireError> {
        Ok(Self::from_layout(transmute_ref!(h)))
    }
    pub fn to_bytes(&self) -> [u8; 48] {
        let mut l = self.to_layout();
        l.opcode = 0x32;
        l.flags = FINAL;
        l.itt.set(RESERVED_TAG);
        transmute!(l)
    }
}

typed_pdu! {
    /// Reject (0x3f), §11.17. The data segment carries the rejected header.
    /// Reasons: 0x02 data digest error, 0x03 SNACK reject, 0x04 protocol error, 0x05 command not
    /// supported, 0x06 immediate command reject, 0x07 task in progress, 0x08 invalid data ack,
    /// 0x09 invalid PDU field, 0x0a long operation reject, 0x0b negotiation reset, 0x0c waiting for
    /// logout.
    pub struct Reject: RejectHdr {
        hand {}
        wire {
            pub reason: u8,
            pub stat_sn: u32,
            pub exp_cmd_sn: u32,
            pub max_cmd_sn: u32,
            pub data_sn: u32,
        }
    }
}

impl Reject {
    pub fn decode(h: &[u8; 48]) -> Result<Self, WireError> {
        Ok(Self::from_layout(transmute_ref!(h)))
    }
    pub fn to_bytes(&self) -> [u8; 48] {
        let mut l = self.to_layout();
        l.opcode = 0x3f;
        l.flags = FINAL;
        l.itt.set(RESERVED_TAG);
        transmute!(l)
    }
}
