//! NVMe commands as NVMe/TCP carries them: opcodes, the SGL descriptors a TCP capsule may hold,
//! [`Command::parse`] (an SQE typed, or the status to complete it with), its inverse
//! [`Command::to_sqe`] (the one encoder: the host's builders go through it), and the Dataset
//! Management range. Command fields: NVMe Base 2.0 §5 (admin), NVM Command Set 1.0 §3 (I/O),
//! NVMe over Fabrics 1.1 §3 (Fabrics commands, whose FCTYPE sits where the NSID would be).

use super::fabrics::Connect;
use super::header::Sqe;
// The opcodes, the data pointer and the bare SQE builder live in `sqe` (Connect encodes
// through them too); every user names them here.
pub use super::sqe::{admin, fctype, feature, io, sgl, sqe, DataPtr, FLAGS_SGL};
use super::status::Status;
use core::mem::{offset_of, size_of};
use zerocopy::little_endian::{U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// A block range of a Read, Write or Write Zeroes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rw {
    pub nsid: u32,
    pub slba: u64,
    /// Number of logical blocks (1-based here; 0's based on the wire).
    pub nlb: u32,
    pub fua: bool,
}

/// An SQE typed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Connect(Connect),
    PropertyGet {
        eight: bool,
        offset: u32,
    },
    PropertySet {
        eight: bool,
        offset: u32,
        value: u64,
    },
    Identify {
        cns: u8,
        cntid: u16,
        nsid: u32,
        csi: u8,
    },
    SetFeatures {
        fid: u8,
        cdw11: u32,
        nsid: u32,
    },
    GetFeatures {
        fid: u8,
        sel: u8,
        nsid: u32,
    },
    GetLogPage {
        lid: u8,
        lsp: u8,
        /// Retain Asynchronous Event: reading the page does not clear the event that
        /// announced it.
        rae: bool,
        /// Number of dwords, 1-based (the wire's 0's based NUMD can ask for 2^32).
        numd: u64,
        offset: u64,
        nsid: u32,
    },
    AsyncEvent,
    KeepAlive,
    Abort,
    Read(Rw),
    Write(Rw),
    Flush {
        nsid: u32,
    },
    WriteZeroes(Rw),
    /// Dataset Management: `nr` ranges (1-based), deallocate bit.
    Dsm {
        nsid: u32,
        nr: u32,
        deallocate: bool,
    },
}

impl Command {
    /// Types `sqe`, received on the admin queue when `admin`. Unknown opcodes get
    /// INVALID_OPCODE; fused commands and PRP data pointers INVALID_FIELD.
    pub fn parse(sqe: &Sqe, admin: bool) -> Result<Command, Status> {
        if sqe.flags & 0x03 != 0 || (sqe.flags & 0xc0) != FLAGS_SGL {
            return Err(Status::INVALID_FIELD);
        }
        let nsid = sqe.nsid.get();
        let c10 = sqe.cdw10.get();
        let c11 = sqe.cdw11.get();
        let c12 = sqe.cdw12.get();
        let c13 = sqe.cdw13.get();
        if sqe.opcode == admin::FABRICS {
            let fct = nsid as u8;
            // ATTRIB bits 2:0, the property's size: 000b 4 bytes, 001b 8, the rest reserved.
            let eight = || match c10 & 7 {
                0 => Ok(false),
                1 => Ok(true),
                _ => Err(Status::INVALID_FIELD),
            };
            return Ok(match fct {
                fctype::CONNECT => Command::Connect(Connect::from_sqe(sqe)),
                fctype::PROPERTY_GET if admin => Command::PropertyGet {
                    eight: eight()?,
                    offset: c11,
                },
                fctype::PROPERTY_SET if admin => Command::PropertySet {
                    eight: eight()?,
                    offset: c11,
                    value: c12 as u64 | (c13 as u64) << 32,
                },
                _ => return Err(Status::INVALID_OPCODE),
            });
        }
        let rw = || Rw {
            nsid,
            slba: c10 as u64 | (c11 as u64) << 32,
            nlb: (c12 & 0xffff) + 1,
            fua: c12 & (1 << 30) != 0,
        };
        Ok(if admin {
            match sqe.opcode {
                admin::IDENTIFY => Command::Identify {
                    cns: c10 as u8,
                    cntid: (c10 >> 16) as u16,
                    nsid,
                    csi: (c11 >> 24) as u8,
                },
                admin::SET_FEATURES => Command::SetFeatures {
                    fid: c10 as u8,
                    cdw11: c11,
                    nsid,
                },
                admin::GET_FEATURES => Command::GetFeatures {
                    fid: c10 as u8,
                    sel: ((c10 >> 8) & 7) as u8,
                    nsid,
                },
                admin::GET_LOG_PAGE => Command::GetLogPage {
                    lid: c10 as u8,
                    lsp: ((c10 >> 8) & 0x7f) as u8,
                    rae: c10 & (1 << 15) != 0,
                    numd: ((c10 >> 16) | ((c11 & 0xffff) << 16)) as u64 + 1,
                    offset: c12 as u64 | (c13 as u64) << 32,
                    nsid,
                },
                admin::ASYNC_EVENT => Command::AsyncEvent,
                admin::KEEP_ALIVE => Command::KeepAlive,
                admin::ABORT => Command::Abort,
                _ => return Err(Status::INVALID_OPCODE),
            }
        } else {
            match sqe.opcode {
                io::READ => Command::Read(rw()),
                io::WRITE => Command::Write(rw()),
                io::FLUSH => Command::Flush { nsid },
                io::WRITE_ZEROES => Command::WriteZeroes(rw()),
                io::DSM => Command::Dsm {
                    nsid,
                    nr: (c10 & 0xff) + 1,
                    deallocate: c11 & 4 != 0,
                },
                _ => return Err(Status::INVALID_OPCODE),
            }
        })
    }

    /// The SQE [`Command::parse`] types as this command (on the admin queue for the admin
    /// commands and Property Get/Set, on an I/O queue for the NVM commands), with every bit
    /// it does not read zero: the one encoder of each command's fields. `data` is the SGL; a
    /// Connect's `data_len` is what parse reads back from it. Counts that are 0's based on
    /// the wire (NLB, NUMD, NR) are 1-based here; each value is clamped (0 is sent as 1) or
    /// masked to what its field holds.
    pub fn to_sqe(&self, command_id: u16, data: DataPtr) -> Sqe {
        let (opcode, nsid, c10, c11, c12, c13) = match *self {
            Command::Connect(c) => {
                let mut s = c.to_sqe(command_id);
                s.dptr = data.to_desc();
                return s;
            }
            Command::Read(rw) => return rw_sqe(io::READ, command_id, rw, data),
            Command::Write(rw) => return rw_sqe(io::WRITE, command_id, rw, data),
            Command::WriteZeroes(rw) => return rw_sqe(io::WRITE_ZEROES, command_id, rw, data),
            Command::PropertyGet { eight, offset } => (
                admin::FABRICS,
                fctype::PROPERTY_GET as u32,
                eight as u32,
                offset,
                0,
                0,
            ),
            Command::PropertySet {
                eight,
                offset,
                value,
            } => (
                admin::FABRICS,
                fctype::PROPERTY_SET as u32,
                eight as u32,
                offset,
                value as u32,
                (value >> 32) as u32,
            ),
            Command::Identify {
                cns,
                cntid,
                nsid,
                csi,
            } => (
                admin::IDENTIFY,
                nsid,
                cns as u32 | (cntid as u32) << 16,
                (csi as u32) << 24,
                0,
                0,
            ),
            Command::SetFeatures { fid, cdw11, nsid } => {
                (admin::SET_FEATURES, nsid, fid as u32, cdw11, 0, 0)
            }
            Command::GetFeatures { fid, sel, nsid } => (
                admin::GET_FEATURES,
                nsid,
                fid as u32 | ((sel & 7) as u32) << 8,
                0,
                0,
                0,
            ),
            Command::GetLogPage {
                lid,
                lsp,
                rae,
                numd,
                offset,
                nsid,
            } => {
                let numd0 = numd.clamp(1, 1 << 32) - 1;
                (
                    admin::GET_LOG_PAGE,
                    nsid,
                    lid as u32
                        | ((lsp & 0x7f) as u32) << 8
                        | (rae as u32) << 15
                        | ((numd0 & 0xffff) as u32) << 16,
                    (numd0 >> 16) as u32,
                    offset as u32,
                    (offset >> 32) as u32,
                )
            }
            Command::AsyncEvent => (admin::ASYNC_EVENT, 0, 0, 0, 0, 0),
            Command::KeepAlive => (admin::KEEP_ALIVE, 0, 0, 0, 0, 0),
            Command::Abort => (admin::ABORT, 0, 0, 0, 0, 0),
            Command::Flush { nsid } => (io::FLUSH, nsid, 0, 0, 0, 0),
            Command::Dsm {
                nsid,
                nr,
                deallocate,
            } => (
                io::DSM,
                nsid,
                nr.clamp(1, 256) - 1,
                (deallocate as u32) << 2,
                0,
                0,
            ),
        };
        let mut s = sqe(opcode, command_id, nsid, data);
        s.cdw10.set(c10);
        s.cdw11.set(c11);
        s.cdw12.set(c12);
        s.cdw13.set(c13);
        s
    }
}

/// One Dataset Management range (NVM Command Set 1.0 §3.2.3, figure 39): 16 bytes of the
/// command's data. NLB here is a count, not 0's based.
#[derive(
    FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug, PartialEq, Eq,
)]
#[repr(C)]
pub struct DsmRange {
    /// Context attributes.
    pub cattr: U32,
    pub nlb: U32,
    pub slba: U64,
}

pub const DSM_RANGE_LEN: usize = 16;

const _: () = {
    assert!(size_of::<DsmRange>() == DSM_RANGE_LEN);
    assert!(offset_of!(DsmRange, nlb) == 4);
    assert!(offset_of!(DsmRange, slba) == 8);
};

impl DsmRange {
    pub fn new(slba: u64, nlb: u32) -> DsmRange {
        DsmRange {
            cattr: U32::new(0),
            nlb: U32::new(nlb),
            slba: U64::new(slba),
        }
    }

    /// The whole ranges in a DSM command's data (a partial range at the end is not one).
    pub fn parse_all(data: &[u8]) -> impl Iterator<Item = DsmRange> + '_ {
        data.chunks_exact(DSM_RANGE_LEN)
            .filter_map(|c| DsmRange::read_from_bytes(c).ok())
    }
}

/// Read, Write or Write Zeroes of `rw.nlb` blocks.
pub fn rw_sqe(opcode: u8, command_id: u16, rw: Rw, data: DataPtr) -> Sqe {
    let mut s = sqe(opcode, command_id, rw.nsid, data);
    s.cdw10.set(rw.slba as u32);
    s.cdw11.set((rw.slba >> 32) as u32);
    s.cdw12
        .set((rw.nlb.clamp(1, 1 << 16) - 1) | if rw.fua { 1 << 30 } else { 0 });
    s
}

pub fn identify_sqe(command_id: u16, cns: u8, nsid: u32, len: u32) -> Sqe {
    Command::Identify {
        cns,
        cntid: 0,
        nsid,
        csi: 0,
    }
    .to_sqe(command_id, DataPtr::Transport { len })
}

pub fn set_features_sqe(command_id: u16, fid: u8, cdw11: u32) -> Sqe {
    Command::SetFeatures {
        fid,
        cdw11,
        nsid: 0,
    }
    .to_sqe(command_id, DataPtr::Transport { len: 0 })
}

pub fn property_get_sqe(command_id: u16, offset: u32, eight: bool) -> Sqe {
    Command::PropertyGet { eight, offset }.to_sqe(command_id, DataPtr::Transport { len: 0 })
}

pub fn property_set_sqe(command_id: u16, offset: u32, value: u64, eight: bool) -> Sqe {
    Command::PropertySet {
        eight,
        offset,
        value,
    }
    .to_sqe(command_id, DataPtr::Transport { len: 0 })
}

#[cfg(test)]
#[path = "cmd_tests.rs"]
mod tests;
