//! CDB encoding, the initiator's side of [`Cdb`]: the inverse of [`Cdb::decode`] for every
//! variant (proptested in `cdb.rs`).

use super::cdb::{cdb_len, op, Cdb, CdbLen};

impl Cdb {
    /// Encodes into a 16-byte buffer (shorter CDBs leave the tail zero) and returns the CDB
    /// length actually used.
    pub fn encode(&self) -> ([u8; 16], usize) {
        let mut b = [0u8; 16];
        let p16 =
            |b: &mut [u8; 16], o: usize, v: u16| b[o..o + 2].copy_from_slice(&v.to_be_bytes());
        let p32 =
            |b: &mut [u8; 16], o: usize, v: u32| b[o..o + 4].copy_from_slice(&v.to_be_bytes());
        let p64 =
            |b: &mut [u8; 16], o: usize, v: u64| b[o..o + 8].copy_from_slice(&v.to_be_bytes());
        let flags =
            |protect: u8, dpo: bool, fua: bool| protect << 5 | (dpo as u8) << 4 | (fua as u8) << 3;
        use op::*;
        match *self {
            Cdb::TestUnitReady => b[0] = TEST_UNIT_READY,
            Cdb::RequestSense { desc, alloc_len } => {
                b[0] = REQUEST_SENSE;
                b[1] = desc as u8;
                b[4] = alloc_len;
            }
            Cdb::Inquiry {
                evpd,
                page,
                alloc_len,
            } => {
                b[0] = INQUIRY;
                b[1] = evpd as u8;
                b[2] = page;
                p16(&mut b, 3, alloc_len);
            }
            Cdb::ModeSense {
                ten,
                dbd,
                llbaa,
                pc,
                page,
                subpage,
                alloc_len,
            } => {
                b[0] = if ten { MODE_SENSE10 } else { MODE_SENSE6 };
                b[1] = (dbd as u8) << 3 | ((llbaa && ten) as u8) << 4;
                b[2] = pc << 6 | (page & 0x3f);
                b[3] = subpage;
                if ten {
                    p16(&mut b, 7, alloc_len);
                } else {
                    b[4] = alloc_len as u8;
                }
            }
            Cdb::StartStopUnit {
                immed,
                power_condition,
                loej,
                start,
            } => {
                b[0] = START_STOP_UNIT;
                b[1] = immed as u8;
                b[4] = power_condition << 4 | (loej as u8) << 1 | start as u8;
            }
            Cdb::ReadCapacity10 => b[0] = READ_CAPACITY10,
            Cdb::ReadCapacity16 { alloc_len } => {
                b[0] = SERVICE_ACTION_IN16;
                b[1] = SA_READ_CAPACITY16;
                p32(&mut b, 10, alloc_len);
            }
            Cdb::GetLbaStatus { lba, alloc_len } => {
                b[0] = SERVICE_ACTION_IN16;
                b[1] = SA_GET_LBA_STATUS;
                p64(&mut b, 2, lba);
                p32(&mut b, 10, alloc_len);
            }
            Cdb::Read {
                len,
                lba,
                blocks,
                protect,
                dpo,
                fua,
            }
            | Cdb::Write {
                len,
                lba,
                blocks,
                protect,
                dpo,
                fua,
                verify: false,
            } => {
                let read = matches!(self, Cdb::Read { .. });
                encode_rw(
                    &mut b,
                    len,
                    lba,
                    blocks,
                    if read {
                        [READ6, READ10, READ12, READ16]
                    } else {
                        [WRITE6, WRITE10, WRITE12, WRITE16]
                    },
                );
                if len != CdbLen::L6 {
                    b[1] = flags(protect, dpo, fua);
                }
            }
            Cdb::Write {
                len,
                lba,
                blocks,
                protect,
                dpo,
                ..
            } => {
                encode_rw(
                    &mut b,
                    len,
                    lba,
                    blocks,
                    [WRITE6, WRITE_VERIFY10, WRITE_VERIFY12, WRITE_VERIFY16],
                );
                b[1] = flags(protect, dpo, false);
            }
            Cdb::Verify {
                len,
                lba,
                blocks,
                protect,
                dpo,
                bytchk,
            } => {
                encode_rw(
                    &mut b,
                    len,
                    lba,
                    blocks,
                    [VERIFY10, VERIFY10, VERIFY12, VERIFY16],
                );
                b[1] = flags(protect, dpo, false) | (bytchk & 3) << 1;
            }
            Cdb::SynchronizeCache {
                sixteen,
                lba,
                blocks,
                immed,
            } => {
                b[0] = if sixteen {
                    SYNCHRONIZE_CACHE16
                } else {
                    SYNCHRONIZE_CACHE10
                };
                b[1] = (immed as u8) << 1;
                if sixteen {
                    p64(&mut b, 2, lba);
                    p32(&mut b, 10, blocks);
                } else {
                    p32(&mut b, 2, lba as u32);
                    p16(&mut b, 7, blocks as u16);
                }
            }
            Cdb::WriteSame {
                sixteen,
                lba,
                blocks,
                protect,
                anchor,
                unmap,
                ndob,
            } => {
                b[0] = if sixteen { WRITE_SAME16 } else { WRITE_SAME10 };
                b[1] = protect << 5
                    | (anchor as u8) << 4
                    | (unmap as u8) << 3
                    | (ndob && sixteen) as u8;
                if sixteen {
                    p64(&mut b, 2, lba);
                    p32(&mut b, 10, blocks);
                } else {
                    p32(&mut b, 2, lba as u32);
                    p16(&mut b, 7, blocks as u16);
                }
            }
            Cdb::Unmap { anchor, param_len } => {
                b[0] = UNMAP;
                b[1] = anchor as u8;
                p16(&mut b, 7, param_len);
            }
            Cdb::CompareAndWrite {
                lba,
                blocks,
                protect,
                dpo,
                fua,
            } => {
                b[0] = COMPARE_AND_WRITE;
                b[1] = flags(protect, dpo, fua);
                p64(&mut b, 2, lba);
                b[13] = blocks;
            }
            Cdb::ReportLuns { select, alloc_len } => {
                b[0] = REPORT_LUNS;
                b[2] = select;
                p32(&mut b, 6, alloc_len);
            }
            Cdb::PersistentReserveIn { action, alloc_len } => {
                b[0] = PERSISTENT_RESERVE_IN;
                b[1] = action & 0x1f;
                p16(&mut b, 7, alloc_len);
            }
            Cdb::PersistentReserveOut {
                action,
                scope,
                rtype,
                param_len,
            } => {
                b[0] = PERSISTENT_RESERVE_OUT;
                b[1] = action & 0x1f;
                b[2] = scope << 4 | (rtype & 0x0f);
                p32(&mut b, 5, param_len);
            }
        }
        (b, cdb_len(b[0]))
    }
}

fn encode_rw(b: &mut [u8; 16], len: CdbLen, lba: u64, blocks: u32, ops: [u8; 4]) {
    match len {
        CdbLen::L6 => {
            b[0] = ops[0];
            b[1..4].copy_from_slice(&(lba as u32 & 0x1f_ffff).to_be_bytes()[1..]);
            b[4] = blocks as u8;
        }
        CdbLen::L10 => {
            b[0] = ops[1];
            b[2..6].copy_from_slice(&(lba as u32).to_be_bytes());
            b[7..9].copy_from_slice(&(blocks as u16).to_be_bytes());
        }
        CdbLen::L12 => {
            b[0] = ops[2];
            b[2..6].copy_from_slice(&(lba as u32).to_be_bytes());
            b[6..10].copy_from_slice(&blocks.to_be_bytes());
        }
        CdbLen::L16 => {
            b[0] = ops[3];
            b[2..10].copy_from_slice(&lba.to_be_bytes());
            b[10..14].copy_from_slice(&blocks.to_be_bytes());
        }
    }
}
