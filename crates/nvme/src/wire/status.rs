//! Completion status (NVMe Base 2.0 §4.6.1.2): a status code type and a status code, carried in
//! CQE bits 11:1 with Do Not Retry in bit 15. Values are written as Linux writes them
//! (`SCT << 8 | SC`), so they can be compared with its nvme.h and traces.

/// A completion status: `sct << 8 | sc`, plus DNR.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Status {
    pub code: u16,
    pub dnr: bool,
}

impl Status {
    pub const SUCCESS: Status = Status::new(0x000);
    pub const INVALID_OPCODE: Status = Status::new(0x001);
    pub const INVALID_FIELD: Status = Status::new(0x002);
    pub const CMDID_CONFLICT: Status = Status::new(0x003);
    pub const DATA_XFER_ERROR: Status = Status::new(0x004);
    pub const INTERNAL: Status = Status::new(0x006);
    pub const INVALID_NS: Status = Status::new(0x00b);
    pub const CMD_SEQ_ERROR: Status = Status::new(0x00c);
    pub const SGL_INVALID_DATA: Status = Status::new(0x00f);
    pub const SGL_INVALID_TYPE: Status = Status::new(0x011);
    pub const SGL_INVALID_OFFSET: Status = Status::new(0x016);
    pub const LBA_RANGE: Status = Status::new(0x080);
    pub const CAP_EXCEEDED: Status = Status::new(0x081);
    /// Command specific: invalid queue identifier.
    pub const QID_INVALID: Status = Status::new(0x101);
    /// Command specific: invalid queue size.
    pub const QUEUE_SIZE: Status = Status::new(0x102);
    pub const ASYNC_LIMIT: Status = Status::new(0x105);
    pub const FEATURE_NOT_CHANGEABLE: Status = Status::new(0x10e);
    pub const INVALID_LOG_PAGE: Status = Status::new(0x109);
    /// Fabrics Connect: incompatible format.
    pub const CONNECT_FORMAT: Status = Status::new(0x180);
    pub const CONNECT_CTRL_BUSY: Status = Status::new(0x181);
    pub const CONNECT_INVALID_PARAM: Status = Status::new(0x182);
    pub const CONNECT_INVALID_HOST: Status = Status::new(0x184);
    /// Path related (SCT 3h): the namespace is in the ANA Persistent Loss state through this
    /// controller. Do Not Retry is clear: the host retries on another path (Linux's
    /// `nvme_decide_disposition` completes a DNR status with an error instead of failing over).
    pub const ANA_PERSISTENT_LOSS: Status = Status::path(0x301);
    /// Path related: ANA Inaccessible.
    pub const ANA_INACCESSIBLE: Status = Status::path(0x302);
    /// Path related: ANA Transition (the state is changing).
    pub const ANA_TRANSITION: Status = Status::path(0x303);

    /// A status with Do Not Retry set (every error sanbench's target returns is permanent, but
    /// for the path-related ones: [`Status::path`]).
    pub const fn new(code: u16) -> Status {
        Status {
            code,
            dnr: code != 0,
        }
    }

    /// A path-related status (SCT 3h), DNR clear: the command may succeed on another path.
    pub const fn path(code: u16) -> Status {
        Status { code, dnr: false }
    }

    /// Whether the status is path related (SCT 3h): the path failed the command, not the
    /// namespace's media.
    pub fn is_path_error(self) -> bool {
        self.sct() == 3
    }

    pub fn is_success(self) -> bool {
        self.code == 0
    }

    pub fn sct(self) -> u8 {
        ((self.code >> 8) & 7) as u8
    }

    pub fn sc(self) -> u8 {
        self.code as u8
    }

    /// The CQE status field (phase bit 0 clear).
    pub fn to_field(self) -> u16 {
        ((self.code & 0x7ff) << 1) | if self.dnr { 0x8000 } else { 0 }
    }

    pub fn from_field(f: u16) -> Status {
        Status {
            code: (f >> 1) & 0x7ff,
            dnr: f & 0x8000 != 0,
        }
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = match self.code {
            0x000 => "success",
            0x001 => "invalid opcode",
            0x002 => "invalid field",
            0x003 => "command id conflict",
            0x004 => "data transfer error",
            0x006 => "internal error",
            0x00b => "invalid namespace",
            0x00c => "command sequence error",
            0x00f => "SGL data length invalid",
            0x011 => "SGL descriptor type invalid",
            0x016 => "SGL offset invalid",
            0x080 => "LBA out of range",
            0x081 => "capacity exceeded",
            0x101 => "invalid queue identifier",
            0x102 => "invalid queue size",
            0x180 => "connect: incompatible format",
            0x181 => "connect: controller busy",
            0x182 => "connect: invalid parameters",
            0x184 => "connect: invalid host",
            0x301 => "ANA persistent loss",
            0x302 => "ANA inaccessible",
            0x303 => "ANA transition",
            _ => "status",
        };
        write!(f, "{name} (sct {:#x} sc {:#04x})", self.sct(), self.sc())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_round_trip() {
        for code in [0u16, 0x002, 0x101, 0x182, 0x7ff] {
            let s = Status::new(code);
            assert_eq!(Status::from_field(s.to_field()), s);
        }
        // Linux: status 0x4004 (DNR | data transfer error) sits in the CQE shifted by one.
        assert_eq!(Status::DATA_XFER_ERROR.to_field(), 0x8008);
        assert_eq!(Status::CONNECT_INVALID_PARAM.sct(), 1);
        // Linux's NVME_SC_ANA_INACCESSIBLE, without DNR (so the host fails over).
        assert_eq!(Status::ANA_INACCESSIBLE.to_field(), 0x302 << 1);
        assert!(Status::ANA_TRANSITION.is_path_error() && !Status::LBA_RANGE.is_path_error());
    }

    use proptest::prelude::*;

    proptest! {
        /// decode(encode(v)) == v for every status the field can hold (SCT 3 bits, SC 8), with
        /// or without DNR; the phase bit is left clear for the sender to set.
        #[test]
        fn status_round_trip(code in 0u16..0x800, dnr in any::<bool>()) {
            let s = Status { code, dnr };
            let f = s.to_field();
            prop_assert_eq!(Status::from_field(f), s);
            prop_assert_eq!(f & 1, 0);
            prop_assert_eq!((s.sct() as u16) << 8 | s.sc() as u16, code);
        }
    }

    /// encode(decode(f)) == f for every status field but for the bits a status does not keep:
    /// the phase tag (bit 0), Command Retry Delay (13:12) and More (14), which sanbench's
    /// target never sets and whose absence changes nothing its host does with a status.
    #[test]
    fn every_field_round_trips() {
        for f in 0..=u16::MAX {
            assert_eq!(Status::from_field(f).to_field(), f & 0x8ffe, "{f:#06x}");
        }
    }
}
