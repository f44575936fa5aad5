//! SCSI sense data (SPC-5 §4.4): fixed (0x70) and descriptor (0x72) formats, and the status
//! codes the target returns.

/// SCSI status codes (SAM-5 §5.3).
pub mod status {
    pub const GOOD: u8 = 0x00;
    pub const CHECK_CONDITION: u8 = 0x02;
    pub const CONDITION_MET: u8 = 0x04;
    pub const BUSY: u8 = 0x08;
    pub const RESERVATION_CONFLICT: u8 = 0x18;
    pub const TASK_SET_FULL: u8 = 0x28;
    pub const TASK_ABORTED: u8 = 0x40;
}

/// Sense keys.
pub mod key {
    pub const NO_SENSE: u8 = 0x0;
    pub const NOT_READY: u8 = 0x2;
    pub const MEDIUM_ERROR: u8 = 0x3;
    pub const HARDWARE_ERROR: u8 = 0x4;
    pub const ILLEGAL_REQUEST: u8 = 0x5;
    pub const UNIT_ATTENTION: u8 = 0x6;
    pub const DATA_PROTECT: u8 = 0x7;
    pub const ABORTED_COMMAND: u8 = 0xb;
    pub const MISCOMPARE: u8 = 0xe;
}

/// Sense data as a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sense {
    pub key: u8,
    pub asc: u8,
    pub ascq: u8,
    /// INFORMATION field (e.g. the offset of a miscompare).
    pub info: Option<u64>,
    /// Sense-key specific field pointer: the field found invalid.
    pub field: Option<FieldPointer>,
}

/// Where the invalid field is (SPC-5 §4.4.2.4.2, the sense-key specific bytes of ILLEGAL
/// REQUEST).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldPointer {
    /// In the CDB (C/D set), not in the parameter data.
    pub in_cdb: bool,
    pub byte: u16,
    /// The field's highest bit within the byte, when the pointer names one (BPV).
    pub bit: Option<u8>,
}

impl FieldPointer {
    fn decode(b: [u8; 3]) -> FieldPointer {
        FieldPointer {
            in_cdb: b[0] & 0x40 != 0,
            byte: u16::from_be_bytes([b[1], b[2]]),
            bit: (b[0] & 8 != 0).then_some(b[0] & 7),
        }
    }
}

impl Sense {
    pub const fn new(key: u8, asc: u8, ascq: u8) -> Sense {
        Sense {
            key,
            asc,
            ascq,
            info: None,
            field: None,
        }
    }
    pub const INVALID_OPCODE: Sense = Sense::new(key::ILLEGAL_REQUEST, 0x20, 0x00);
    pub const LBA_OUT_OF_RANGE: Sense = Sense::new(key::ILLEGAL_REQUEST, 0x21, 0x00);
    pub const INVALID_FIELD_IN_CDB: Sense = Sense::new(key::ILLEGAL_REQUEST, 0x24, 0x00);
    pub const INVALID_FIELD_IN_PARAM: Sense = Sense::new(key::ILLEGAL_REQUEST, 0x26, 0x00);
    pub const PARAM_LIST_LENGTH_ERROR: Sense = Sense::new(key::ILLEGAL_REQUEST, 0x1a, 0x00);
    pub const LUN_NOT_SUPPORTED: Sense = Sense::new(key::ILLEGAL_REQUEST, 0x25, 0x00);
    pub const SAVING_PARAMS_UNSUPPORTED: Sense = Sense::new(key::ILLEGAL_REQUEST, 0x39, 0x00);
    pub const MISCOMPARE_VERIFY: Sense = Sense::new(key::MISCOMPARE, 0x1d, 0x00);
    pub const WRITE_ERROR: Sense = Sense::new(key::MEDIUM_ERROR, 0x0c, 0x00);
    pub const READ_ERROR: Sense = Sense::new(key::MEDIUM_ERROR, 0x11, 0x00);
    pub const INSUFFICIENT_REGISTRATION_RESOURCES: Sense =
        Sense::new(key::ILLEGAL_REQUEST, 0x55, 0x04);
    pub const NO_SENSE: Sense = Sense::new(key::NO_SENSE, 0, 0);
    /// INVALID RELEASE OF PERSISTENT RESERVATION (SPC-5 §6.17.3).
    pub const INVALID_RELEASE_OF_PR: Sense = Sense::new(key::ILLEGAL_REQUEST, 0x26, 0x04);
    // A Data-Out the target did not ask for (SPC-5 4Bh, iSCSI's own 0Ch in RFC 7143 §11.4.7.2).
    pub const DATA_PHASE_ERROR: Sense = Sense::new(key::ABORTED_COMMAND, 0x4b, 0x00);
    pub const INVALID_TTT_RECEIVED: Sense = Sense::new(key::ABORTED_COMMAND, 0x4b, 0x01);
    pub const TOO_MUCH_WRITE_DATA: Sense = Sense::new(key::ABORTED_COMMAND, 0x4b, 0x02);
    pub const DATA_OFFSET_ERROR: Sense = Sense::new(key::ABORTED_COMMAND, 0x4b, 0x05);
    pub const UNEXPECTED_UNSOLICITED_DATA: Sense = Sense::new(key::ABORTED_COMMAND, 0x0c, 0x0c);
    pub const NOT_ENOUGH_UNSOLICITED_DATA: Sense = Sense::new(key::ABORTED_COMMAND, 0x0c, 0x0d);

    pub fn with_info(mut self, info: u64) -> Sense {
        self.info = Some(info);
        self
    }
    pub fn with_field(mut self, in_cdb: bool, byte: u16, bit: Option<u8>) -> Sense {
        self.field = Some(FieldPointer { in_cdb, byte, bit });
        self
    }

    fn sks(&self) -> Option<[u8; 3]> {
        self.field.map(|f| {
            let b0 = 0x80 | (f.in_cdb as u8) << 6 | f.bit.map_or(0, |b| 0x08 | (b & 7));
            let [hi, lo] = f.byte.to_be_bytes();
            [b0, hi, lo]
        })
    }

    /// Fixed format sense data, 18 bytes.
    pub fn fixed(&self) -> [u8; 18] {
        let mut b = [0u8; 18];
        b[0] = 0x70 | if self.info.is_some() { 0x80 } else { 0 };
        b[2] = self.key & 0x0f;
        if let Some(i) = self.info {
            b[3..7].copy_from_slice(&(i as u32).to_be_bytes());
        }
        b[7] = 10;
        b[12] = self.asc;
        b[13] = self.ascq;
        if let Some(s) = self.sks() {
            b[15..18].copy_from_slice(&s);
        }
        b
    }

    /// Descriptor format sense data: header plus information and sense-key specific
    /// descriptors when present.
    pub fn descriptor(&self) -> Vec<u8> {
        let mut b = vec![0x72, self.key & 0x0f, self.asc, self.ascq, 0, 0, 0, 0];
        if let Some(i) = self.info {
            b.extend_from_slice(&[0x00, 0x0a, 0x80, 0]);
            b.extend_from_slice(&i.to_be_bytes());
        }
        if let Some(s) = self.sks() {
            b.extend_from_slice(&[0x02, 0x06, 0, 0, s[0], s[1], s[2], 0]);
        }
        b[7] = (b.len() - 8) as u8;
        b
    }

    /// Decodes fixed or descriptor sense data. Never panics; `None` when unrecognisable.
    pub fn decode(b: &[u8]) -> Option<Sense> {
        match b.first()? & 0x7f {
            0x70 | 0x71 if b.len() >= 14 => {
                let info =
                    (b[0] & 0x80 != 0).then(|| u32::from_be_bytes([b[3], b[4], b[5], b[6]]) as u64);
                let field = (b.len() >= 18 && b[15] & 0x80 != 0)
                    .then(|| FieldPointer::decode([b[15], b[16], b[17]]));
                Some(Sense {
                    key: b[2] & 0x0f,
                    asc: b[12],
                    ascq: b[13],
                    info,
                    field,
                })
            }
            0x72 | 0x73 if b.len() >= 8 => {
                let mut s = Sense::new(b[1] & 0x0f, b[2], b[3]);
                let end = (8 + b[7] as usize).min(b.len());
                let mut d = 8;
                while d + 2 <= end {
                    let len = b[d + 1] as usize;
                    let body = b.get(d + 2..d + 2 + len)?;
                    match b[d] {
                        0 if len >= 10 => {
                            let mut a = [0u8; 8];
                            a.copy_from_slice(&body[2..10]);
                            s.info = Some(u64::from_be_bytes(a));
                        }
                        2 if len >= 5 && body[2] & 0x80 != 0 => {
                            s.field = Some(FieldPointer::decode([body[2], body[3], body[4]]));
                        }
                        _ => {}
                    }
                    d += 2 + len;
                }
                Some(s)
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn both_formats_roundtrip() {
        let s = Sense::INVALID_FIELD_IN_CDB
            .with_field(true, 2, Some(3))
            .with_info(77);
        assert_eq!(Sense::decode(&s.fixed()), Some(s));
        assert_eq!(Sense::decode(&s.descriptor()), Some(s));
        let s = Sense::LBA_OUT_OF_RANGE;
        assert_eq!(Sense::decode(&s.fixed()), Some(s));
        assert_eq!(Sense::decode(&s.descriptor()), Some(s));
    }

    proptest! {
        #[test]
        fn decode_never_panics(b in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = Sense::decode(&b);
        }
    }
}
