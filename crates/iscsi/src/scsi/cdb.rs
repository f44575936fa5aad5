//! SCSI CDB decode/encode for the commands sanbench's target serves and its initiator sends
//! (SBC-4, SPC-5). Decoding never panics; errors name the opcode and the byte at fault so a
//! target can return INVALID FIELD IN CDB with a field pointer.

use thiserror::Error;

/// Why a CDB cannot be executed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CdbError {
    #[error("empty CDB")]
    Empty,
    #[error("opcode {opcode:#04x}: CDB of {len} bytes is too short")]
    Short { opcode: u8, len: usize },
    #[error("opcode {opcode:#04x} (service action {sa:?}) not supported")]
    InvalidOpcode { opcode: u8, sa: Option<u8> },
    #[error("opcode {opcode:#04x}: invalid field at byte {byte}")]
    InvalidField {
        opcode: u8,
        byte: u16,
        bit: Option<u8>,
    },
}

pub mod op {
    pub const TEST_UNIT_READY: u8 = 0x00;
    pub const REQUEST_SENSE: u8 = 0x03;
    pub const READ6: u8 = 0x08;
    pub const WRITE6: u8 = 0x0a;
    pub const INQUIRY: u8 = 0x12;
    pub const MODE_SENSE6: u8 = 0x1a;
    pub const START_STOP_UNIT: u8 = 0x1b;
    pub const READ_CAPACITY10: u8 = 0x25;
    pub const READ10: u8 = 0x28;
    pub const WRITE10: u8 = 0x2a;
    pub const WRITE_VERIFY10: u8 = 0x2e;
    pub const VERIFY10: u8 = 0x2f;
    pub const SYNCHRONIZE_CACHE10: u8 = 0x35;
    pub const WRITE_SAME10: u8 = 0x41;
    pub const UNMAP: u8 = 0x42;
    pub const MODE_SENSE10: u8 = 0x5a;
    pub const PERSISTENT_RESERVE_IN: u8 = 0x5e;
    pub const PERSISTENT_RESERVE_OUT: u8 = 0x5f;
    pub const READ16: u8 = 0x88;
    pub const COMPARE_AND_WRITE: u8 = 0x89;
    pub const WRITE16: u8 = 0x8a;
    pub const WRITE_VERIFY16: u8 = 0x8e;
    pub const VERIFY16: u8 = 0x8f;
    pub const SYNCHRONIZE_CACHE16: u8 = 0x91;
    pub const WRITE_SAME16: u8 = 0x93;
    pub const SERVICE_ACTION_IN16: u8 = 0x9e;
    pub const REPORT_LUNS: u8 = 0xa0;
    pub const READ12: u8 = 0xa8;
    pub const WRITE12: u8 = 0xaa;
    pub const WRITE_VERIFY12: u8 = 0xae;
    pub const VERIFY12: u8 = 0xaf;
    /// Service actions of SERVICE ACTION IN(16).
    pub const SA_READ_CAPACITY16: u8 = 0x10;
    pub const SA_GET_LBA_STATUS: u8 = 0x12;
}

/// Which of the 6/10/12/16-byte forms a read/write/verify used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CdbLen {
    L6 = 6,
    L10 = 10,
    L12 = 12,
    L16 = 16,
}

/// A decoded CDB.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cdb {
    TestUnitReady,
    RequestSense {
        desc: bool,
        alloc_len: u8,
    },
    Inquiry {
        evpd: bool,
        page: u8,
        alloc_len: u16,
    },
    ModeSense {
        ten: bool,
        dbd: bool,
        llbaa: bool,
        pc: u8,
        page: u8,
        subpage: u8,
        alloc_len: u16,
    },
    StartStopUnit {
        immed: bool,
        power_condition: u8,
        loej: bool,
        start: bool,
    },
    ReadCapacity10,
    ReadCapacity16 {
        alloc_len: u32,
    },
    GetLbaStatus {
        lba: u64,
        alloc_len: u32,
    },
    Read {
        len: CdbLen,
        lba: u64,
        blocks: u32,
        protect: u8,
        dpo: bool,
        fua: bool,
    },
    /// WRITE, or WRITE AND VERIFY when `verify` (FUA is implied there).
    Write {
        len: CdbLen,
        lba: u64,
        blocks: u32,
        protect: u8,
        dpo: bool,
        fua: bool,
        verify: bool,
    },
    Verify {
        len: CdbLen,
        lba: u64,
        blocks: u32,
        protect: u8,
        dpo: bool,
        bytchk: u8,
    },
    SynchronizeCache {
        sixteen: bool,
        lba: u64,
        blocks: u32,
        immed: bool,
    },
    WriteSame {
        sixteen: bool,
        lba: u64,
        blocks: u32,
        protect: u8,
        anchor: bool,
        unmap: bool,
        ndob: bool,
    },
    Unmap {
        anchor: bool,
        param_len: u16,
    },
    CompareAndWrite {
        lba: u64,
        blocks: u8,
        protect: u8,
        dpo: bool,
        fua: bool,
    },
    ReportLuns {
        select: u8,
        alloc_len: u32,
    },
    PersistentReserveIn {
        action: u8,
        alloc_len: u16,
    },
    PersistentReserveOut {
        action: u8,
        scope: u8,
        rtype: u8,
        param_len: u32,
    },
}

fn be16(b: &[u8], o: usize) -> u16 {
    u16::from_be_bytes([b[o], b[o + 1]])
}
fn be32(b: &[u8], o: usize) -> u32 {
    u32::from_be_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}
fn be64(b: &[u8], o: usize) -> u64 {
    (be32(b, o) as u64) << 32 | be32(b, o + 4) as u64
}

/// Length of a CDB given its opcode's group code (SPC-5 §4.2.5.1).
pub fn cdb_len(opcode: u8) -> usize {
    match opcode >> 5 {
        0 => 6,
        1 | 2 => 10,
        4 => 16,
        5 => 12,
        _ => 16,
    }
}

impl Cdb {
    /// Decodes a CDB (the 16 bytes of a SCSI Command PDU, or more with an extended-CDB AHS).
    pub fn decode(b: &[u8]) -> Result<Cdb, CdbError> {
        let opcode = *b.first().ok_or(CdbError::Empty)?;
        let need = cdb_len(opcode);
        if b.len() < need {
            return Err(CdbError::Short {
                opcode,
                len: b.len(),
            });
        }
        let inval = |byte: u16, bit: Option<u8>| CdbError::InvalidField { opcode, byte, bit };
        let protect = b[1] >> 5;
        let dpo = b[1] & 0x10 != 0;
        let fua = b[1] & 0x08 != 0;
        use op::*;
        Ok(match opcode {
            TEST_UNIT_READY => Cdb::TestUnitReady,
            REQUEST_SENSE => Cdb::RequestSense {
                desc: b[1] & 1 != 0,
                alloc_len: b[4],
            },
            INQUIRY => {
                if b[1] & 0x02 != 0 {
                    return Err(inval(1, Some(1)));
                }
                let evpd = b[1] & 1 != 0;
                if !evpd && b[2] != 0 {
                    return Err(inval(2, None));
                }
                Cdb::Inquiry {
                    evpd,
                    page: b[2],
                    alloc_len: be16(b, 3),
                }
            }
            MODE_SENSE6 | MODE_SENSE10 => {
                let ten = opcode == MODE_SENSE10;
                Cdb::ModeSense {
                    ten,
                    dbd: b[1] & 0x08 != 0,
                    llbaa: ten && b[1] & 0x10 != 0,
                    pc: b[2] >> 6,
                    page: b[2] & 0x3f,
                    subpage: b[3],
                    alloc_len: if ten { be16(b, 7) } else { b[4] as u16 },
                }
            }
            START_STOP_UNIT => Cdb::StartStopUnit {
                immed: b[1] & 1 != 0,
                power_condition: b[4] >> 4,
                loej: b[4] & 2 != 0,
                start: b[4] & 1 != 0,
            },
            READ_CAPACITY10 => {
                if b[8] & 1 == 0 && be32(b, 2) != 0 {
                    return Err(inval(2, None));
                }
                Cdb::ReadCapacity10
            }
            SERVICE_ACTION_IN16 => match b[1] & 0x1f {
                SA_READ_CAPACITY16 => Cdb::ReadCapacity16 {
                    alloc_len: be32(b, 10),
                },
                SA_GET_LBA_STATUS => Cdb::GetLbaStatus {
                    lba: be64(b, 2),
                    alloc_len: be32(b, 10),
                },
                sa => {
                    return Err(CdbError::InvalidOpcode {
                        opcode,
                        sa: Some(sa),
                    })
                }
            },
            READ6 | WRITE6 => {
                let lba = (be32(b, 0) & 0x1f_ffff) as u64;
                let blocks = if b[4] == 0 { 256 } else { b[4] as u32 };
                if opcode == READ6 {
                    Cdb::Read {
                        len: CdbLen::L6,
                        lba,
                        blocks,
                        protect: 0,
                        dpo: false,
                        fua: false,
                    }
                } else {
                    Cdb::Write {
                        len: CdbLen::L6,
                        lba,
                        blocks,
                        protect: 0,
                        dpo: false,
                        fua: false,
                        verify: false,
                    }
                }
            }
            READ10 => Cdb::Read {
                len: CdbLen::L10,
                lba: be32(b, 2) as u64,
                blocks: be16(b, 7) as u32,
                protect,
                dpo,
                fua,
            },
            READ12 => Cdb::Read {
                len: CdbLen::L12,
                lba: be32(b, 2) as u64,
                blocks: be32(b, 6),
                protect,
                dpo,
                fua,
            },
            READ16 => Cdb::Read {
                len: CdbLen::L16,
                lba: be64(b, 2),
                blocks: be32(b, 10),
                protect,
                dpo,
                fua,
            },
            WRITE10 | WRITE_VERIFY10 => Cdb::Write {
                len: CdbLen::L10,
                lba: be32(b, 2) as u64,
                blocks: be16(b, 7) as u32,
                protect,
                dpo,
                fua: fua && opcode == WRITE10,
                verify: opcode == WRITE_VERIFY10,
            },
            WRITE12 | WRITE_VERIFY12 => Cdb::Write {
                len: CdbLen::L12,
                lba: be32(b, 2) as u64,
                blocks: be32(b, 6),
                protect,
                dpo,
                fua: fua && opcode == WRITE12,
                verify: opcode == WRITE_VERIFY12,
            },
            WRITE16 | WRITE_VERIFY16 => Cdb::Write {
                len: CdbLen::L16,
                lba: be64(b, 2),
                blocks: be32(b, 10),
                protect,
                dpo,
                fua: fua && opcode == WRITE16,
                verify: opcode == WRITE_VERIFY16,
            },
            VERIFY10 | VERIFY12 | VERIFY16 => {
                let bytchk = (b[1] >> 1) & 3;
                let (len, lba, blocks) = match opcode {
                    VERIFY10 => (CdbLen::L10, be32(b, 2) as u64, be16(b, 7) as u32),
                    VERIFY12 => (CdbLen::L12, be32(b, 2) as u64, be32(b, 6)),
                    _ => (CdbLen::L16, be64(b, 2), be32(b, 10)),
                };
                Cdb::Verify {
                    len,
                    lba,
                    blocks,
                    protect,
                    dpo,
                    bytchk,
                }
            }
            SYNCHRONIZE_CACHE10 => Cdb::SynchronizeCache {
                sixteen: false,
                lba: be32(b, 2) as u64,
                blocks: be16(b, 7) as u32,
                immed: b[1] & 2 != 0,
            },
            SYNCHRONIZE_CACHE16 => Cdb::SynchronizeCache {
                sixteen: true,
                lba: be64(b, 2),
                blocks: be32(b, 10),
                immed: b[1] & 2 != 0,
            },
            WRITE_SAME10 | WRITE_SAME16 => {
                let sixteen = opcode == WRITE_SAME16;
                Cdb::WriteSame {
                    sixteen,
                    lba: if sixteen {
                        be64(b, 2)
                    } else {
                        be32(b, 2) as u64
                    },
                    blocks: if sixteen {
                        be32(b, 10)
                    } else {
                        be16(b, 7) as u32
                    },
                    protect,
                    anchor: b[1] & 0x10 != 0,
                    unmap: b[1] & 0x08 != 0,
                    ndob: sixteen && b[1] & 0x01 != 0,
                }
            }
            UNMAP => Cdb::Unmap {
                anchor: b[1] & 1 != 0,
                param_len: be16(b, 7),
            },
            COMPARE_AND_WRITE => Cdb::CompareAndWrite {
                lba: be64(b, 2),
                blocks: b[13],
                protect,
                dpo,
                fua,
            },
            REPORT_LUNS => Cdb::ReportLuns {
                select: b[2],
                alloc_len: be32(b, 6),
            },
            PERSISTENT_RESERVE_IN => Cdb::PersistentReserveIn {
                action: b[1] & 0x1f,
                alloc_len: be16(b, 7),
            },
            PERSISTENT_RESERVE_OUT => Cdb::PersistentReserveOut {
                action: b[1] & 0x1f,
                scope: b[2] >> 4,
                rtype: b[2] & 0x0f,
                param_len: be32(b, 5),
            },
            _ => return Err(CdbError::InvalidOpcode { opcode, sa: None }),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Whatever decodes re-encodes to a CDB that decodes to the same value.
        #[test]
        fn roundtrip(mut b in proptest::collection::vec(any::<u8>(), 16), op in any::<u8>()) {
            b[0] = op;
            if let Ok(c) = Cdb::decode(&b) {
                let (enc, n) = c.encode();
                prop_assert_eq!(Cdb::decode(&enc[..n]), Ok(c));
            }
        }

        #[test]
        fn never_panics(b in proptest::collection::vec(any::<u8>(), 0..20)) {
            let _ = Cdb::decode(&b);
        }
    }

    #[test]
    fn read10() {
        let c = Cdb::decode(&[0x28, 0x08, 0, 0, 1, 0, 0, 0, 8, 0]).unwrap();
        assert_eq!(
            c,
            Cdb::Read {
                len: CdbLen::L10,
                lba: 256,
                blocks: 8,
                protect: 0,
                dpo: false,
                fua: true
            }
        );
        assert_eq!(
            Cdb::decode(&[0x28, 0]),
            Err(CdbError::Short {
                opcode: 0x28,
                len: 2
            })
        );
        assert!(matches!(
            Cdb::decode(&[0xff; 16]),
            Err(CdbError::InvalidOpcode { .. })
        ));
    }
}
