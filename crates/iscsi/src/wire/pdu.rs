//! Data-path PDUs (RFC 7143 §11.3–11.9, §11.16): SCSI Command/Response, Data-Out/In, R2T, SNACK.
//!
//! Each struct holds every non-reserved field of its header; its layout (offsets) is declared
//! once in [`super::layout`]. `decode` takes the full 48-byte header; `to_bytes` returns one
//! (`encode` writes it into a buffer) with TotalAHSLength/DataSegmentLength zero (the framer
//! sets them) and every reserved byte zero.

use super::layout::*;
use super::WireError;
use zerocopy::{transmute, transmute_ref};

pub(crate) fn bad(opcode: u8, offset: usize, reason: &'static str) -> WireError {
    WireError::InvalidField {
        opcode,
        offset,
        reason,
    }
}

/// `mask` if `on`, else 0: one flag bit of a header byte.
pub(crate) fn bit(on: bool, mask: u8) -> u8 {
    if on {
        mask
    } else {
        0
    }
}

typed_pdu! {
    /// SCSI Command (0x01), §11.3.
    pub struct ScsiCommand: ScsiCommandHdr {
        hand {
            pub immediate: bool,
            pub final_: bool,
            pub read: bool,
            pub write: bool,
            /// Task attribute (0 untagged, 1 simple, 2 ordered, 3 head of queue, 4 ACA).
            pub attr: u8,
        }
        wire {
            pub lun: u64,
            pub itt: u32,
            pub expected_data_len: u32,
            pub cmd_sn: u32,
            pub exp_stat_sn: u32,
            pub cdb: [u8; 16],
        }
    }
}

impl ScsiCommand {
    pub fn decode(h: &[u8; 48]) -> Result<Self, WireError> {
        let l: &ScsiCommandHdr = transmute_ref!(h);
        let p = ScsiCommand {
            immediate: l.opcode & IMMEDIATE != 0,
            final_: l.flags & FINAL != 0,
            read: l.flags & 0x40 != 0,
            write: l.flags & 0x20 != 0,
            attr: l.flags & 0x07,
            ..Self::from_layout(l)
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
    pub fn to_bytes(&self) -> [u8; 48] {
        let mut l = self.to_layout();
        l.opcode = 0x01 | bit(self.immediate, IMMEDIATE);
        l.flags = bit(self.final_, FINAL)
            | bit(self.read, 0x40)
            | bit(self.write, 0x20)
            | (self.attr & 7);
        transmute!(l)
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

    /// Reads the O (0x04) and U (0x02) bits of byte 1 and the count at byte 44.
    fn read(flags: u8, count: u32) -> Residual {
        Residual {
            overflow: flags & 0x04 != 0,
            underflow: flags & 0x02 != 0,
            count,
        }
    }
    fn flag_bits(&self) -> u8 {
        bit(self.overflow, 0x04) | bit(self.underflow, 0x02)
    }
}

typed_pdu! {
    /// SCSI Response (0x21), §11.4.
    pub struct ScsiResponse: ScsiResponseHdr {
        hand {
            pub bidi_overflow: bool,
            pub bidi_underflow: bool,
            pub residual: Residual,
        }
        wire {
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
    }
}

impl ScsiResponse {
    pub fn decode(h: &[u8; 48]) -> Result<Self, WireError> {
        let l: &ScsiResponseHdr = transmute_ref!(h);
        let p = ScsiResponse {
            bidi_overflow: l.flags & 0x10 != 0,
            bidi_underflow: l.flags & 0x08 != 0,
            residual: Residual::read(l.flags, l.residual_count.get()),
            ..Self::from_layout(l)
        };
        if p.residual.overflow && p.residual.underflow {
            return Err(bad(0x21, 1, "both O and U set"));
        }
        if p.bidi_overflow && p.bidi_underflow {
            return Err(bad(0x21, 1, "both o and u set"));
        }
        if l.flags & FINAL == 0 {
            return Err(bad(0x21, 1, "F bit clear"));
        }
        Ok(p)
    }
    pub fn to_bytes(&self) -> [u8; 48] {
        let mut l = self.to_layout();
        l.opcode = 0x21;
        l.flags = FINAL
            | bit(self.bidi_overflow, 0x10)
            | bit(self.bidi_underflow, 0x08)
            | self.residual.flag_bits();
        l.residual_count.set(self.residual.count);
        transmute!(l)
    }
}

typed_pdu! {
    /// SCSI Data-Out (0x05), §11.7.
    pub struct DataOut: DataOutHdr {
        hand {
            pub final_: bool,
        }
        wire {
            pub lun: u64,
            pub itt: u32,
            pub ttt: u32,
            pub exp_stat_sn: u32,
            pub data_sn: u32,
            pub buffer_offset: u32,
        }
    }
}

impl DataOut {
    pub fn decode(h: &[u8; 48]) -> Result<Self, WireError> {
        let l: &DataOutHdr = transmute_ref!(h);
        if l.opcode & IMMEDIATE != 0 {
            return Err(bad(0x05, 0, "Data-Out cannot be immediate"));
        }
        Ok(DataOut {
            final_: l.flags & FINAL != 0,
            ..Self::from_layout(l)
        })
    }
    pub fn to_bytes(&self) -> [u8; 48] {
        let mut l = self.to_layout();
        l.opcode = 0x05;
        l.flags = bit(self.final_, FINAL);
        transmute!(l)
    }
}

typed_pdu! {
    /// SCSI Data-In (0x25), §11.7. With `status` set (S bit) it also completes the command
    /// ("phase collapse"), carrying status, StatSN and the residual.
    pub struct DataIn: DataInHdr {
        hand {
            pub final_: bool,
            pub ack: bool,
            pub residual: Residual,
            /// SCSI status when the S bit is set.
            pub status: Option<u8>,
        }
        wire {
            pub lun: u64,
            pub itt: u32,
            pub ttt: u32,
            pub stat_sn: u32,
            pub exp_cmd_sn: u32,
            pub max_cmd_sn: u32,
            pub data_sn: u32,
            pub buffer_offset: u32,
        }
    }
}

impl DataIn {
    pub fn decode(h: &[u8; 48]) -> Result<Self, WireError> {
        let l: &DataInHdr = transmute_ref!(h);
        let s = l.flags & 0x01 != 0;
        let p = DataIn {
            final_: l.flags & FINAL != 0,
            ack: l.flags & 0x40 != 0,
            residual: Residual::read(l.flags, l.residual_count.get()),
            status: s.then_some(l.status),
            ..Self::from_layout(l)
        };
        if s && !p.final_ {
            return Err(bad(0x25, 1, "S bit without F bit"));
        }
        if p.residual.overflow && p.residual.underflow {
            return Err(bad(0x25, 1, "both O and U set"));
        }
        Ok(p)
    }
    pub fn to_bytes(&self) -> [u8; 48] {
        let mut l = self.to_layout();
        l.opcode = 0x25;
        l.flags = bit(self.final_, FINAL)
            | bit(self.ack, 0x40)
            | self.residual.flag_bits()
            | bit(self.status.is_some(), 0x01);
        l.status = self.status.unwrap_or(0);
        l.residual_count.set(self.residual.count);
        transmute!(l)
    }
}

typed_pdu! {
    /// Ready To Transfer (0x31), §11.8.
    pub struct R2t: R2tHdr {
        hand {}
        wire {
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
    }
}

impl R2t {
    pub fn decode(h: &[u8; 48]) -> Result<Self, WireError> {
        let p = Self::from_layout(transmute_ref!(h));
        if p.desired_len == 0 {
            return Err(bad(0x31, 44, "zero Desired Data Transfer Length"));
        }
        if p.ttt == RESERVED_TAG {
            return Err(bad(0x31, 20, "reserved Target Transfer Tag"));
        }
        Ok(p)
    }
    pub fn to_bytes(&self) -> [u8; 48] {
        let mut l = self.to_layout();
        l.opcode = 0x31;
        l.flags = FINAL;
        transmute!(l)
    }
}

typed_pdu! {
    /// SNACK Request (0x10), §11.16.
    pub struct Snack: SnackHdr {
        hand {
            /// 0 Data/R2T, 1 Status, 2 DataACK, 3 R-Data.
            pub snack_type: u8,
        }
        wire {
            pub lun: u64,
            pub itt: u32,
            pub ttt: u32,
            pub exp_stat_sn: u32,
            pub beg_run: u32,
            pub run_length: u32,
        }
    }
}

impl Snack {
    pub fn decode(h: &[u8; 48]) -> Result<Self, WireError> {
        let l: &SnackHdr = transmute_ref!(h);
        let t = l.flags & 0x0f;
        if t > 3 {
            return Err(bad(0x10, 1, "reserved SNACK type"));
        }
        Ok(Snack {
            snack_type: t,
            ..Self::from_layout(l)
        })
    }
    pub fn to_bytes(&self) -> [u8; 48] {
        let mut l = self.to_layout();
        l.opcode = 0x10;
        l.flags = FINAL | (self.snack_type & 0x0f);
        transmute!(l)
    }
}
