//! What every command's SQE is made of, below both [`super::cmd`] (the commands typed) and
//! [`super::fabrics`] (Connect): the opcodes and Fabrics command types, the feature ids, the
//! SGL data pointer ([`DataPtr`]) and [`sqe`], the bare SQE every encoder starts from.

use super::header::{SglDesc, Sqe};
use super::status::Status;
use zerocopy::little_endian::{U32, U64};
use zerocopy::FromZeros;

/// Admin opcodes.
pub mod admin {
    pub const GET_LOG_PAGE: u8 = 0x02;
    pub const IDENTIFY: u8 = 0x06;
    pub const ABORT: u8 = 0x08;
    pub const SET_FEATURES: u8 = 0x09;
    pub const GET_FEATURES: u8 = 0x0a;
    pub const ASYNC_EVENT: u8 = 0x0c;
    pub const KEEP_ALIVE: u8 = 0x18;
    /// Fabrics commands, admin or I/O queue alike.
    pub const FABRICS: u8 = 0x7f;
}

/// NVM command set opcodes.
pub mod io {
    pub const FLUSH: u8 = 0x00;
    pub const WRITE: u8 = 0x01;
    pub const READ: u8 = 0x02;
    pub const WRITE_ZEROES: u8 = 0x08;
    pub const DSM: u8 = 0x09;
}

/// Fabrics command types.
pub mod fctype {
    pub const PROPERTY_SET: u8 = 0x00;
    pub const CONNECT: u8 = 0x01;
    pub const PROPERTY_GET: u8 = 0x04;
}

/// Feature identifiers.
pub mod feature {
    pub const NUM_QUEUES: u8 = 0x07;
    pub const ASYNC_EVENT_CONFIG: u8 = 0x0b;
    pub const KATO: u8 = 0x0f;
    pub const VOLATILE_WC: u8 = 0x06;
}

/// SGL descriptor type bytes NVMe/TCP uses (NVMe/TCP 1.0 §3.3.3).
pub mod sgl {
    /// Data block, offset subtype: data inside the capsule.
    pub const IN_CAPSULE: u8 = 0x01;
    /// Transport data block, transport-specific subtype A: data moved by R2T/H2CData or C2HData.
    pub const TRANSPORT: u8 = 0x5a;
}

/// PSDT = 01b: the data pointer is an SGL.
pub const FLAGS_SGL: u8 = 0x40;

/// Where a command's data is, as its SGL says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataPtr {
    /// `len` bytes inside the capsule, starting `offset` bytes into its data.
    InCapsule { offset: u64, len: u32 },
    /// `len` bytes moved by the transport (C2HData, or R2T and H2CData).
    Transport { len: u32 },
}

impl DataPtr {
    pub fn len(self) -> u32 {
        match self {
            DataPtr::InCapsule { len, .. } | DataPtr::Transport { len } => len,
        }
    }

    pub fn is_empty(self) -> bool {
        self.len() == 0
    }

    pub fn parse(d: &SglDesc) -> Result<DataPtr, Status> {
        match d.sgl_type {
            sgl::IN_CAPSULE => Ok(DataPtr::InCapsule {
                offset: d.addr.get(),
                len: d.length.get(),
            }),
            sgl::TRANSPORT => {
                if d.addr.get() != 0 {
                    return Err(Status::SGL_INVALID_OFFSET);
                }
                Ok(DataPtr::Transport {
                    len: d.length.get(),
                })
            }
            _ => Err(Status::SGL_INVALID_TYPE),
        }
    }

    pub fn to_desc(self) -> SglDesc {
        let mut d = SglDesc::new_zeroed();
        match self {
            DataPtr::InCapsule { offset, len } => {
                d.addr = U64::new(offset);
                d.length = U32::new(len);
                d.sgl_type = sgl::IN_CAPSULE;
            }
            DataPtr::Transport { len } => {
                d.length = U32::new(len);
                d.sgl_type = sgl::TRANSPORT;
            }
        }
        d
    }
}

/// An SQE with the opcode, command id and an SGL data pointer set, everything else zero.
pub fn sqe(opcode: u8, command_id: u16, nsid: u32, data: DataPtr) -> Sqe {
    let mut s = Sqe::new_zeroed();
    s.opcode = opcode;
    s.flags = FLAGS_SGL;
    s.command_id.set(command_id);
    s.nsid.set(nsid);
    s.dptr = data.to_desc();
    s
}
