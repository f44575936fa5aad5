//! What a SCSI command produced ([`Outcome`]) and the LUN's block size and transfer limits:
//! the command set (`lun`), the INQUIRY and MODE SENSE data (`inquiry`) and the connection's
//! data path all use them.

use crate::scsi::sense::Sense;

pub const BLOCK: u64 = 512;
/// Largest transfer we accept in one command (VPD B0 MAXIMUM TRANSFER LENGTH, in blocks).
pub const MAX_XFER_BLOCKS: u32 = 128 * 1024;
pub const MAX_UNMAP_BLOCKS: u32 = 1 << 20;
/// MAXIMUM UNMAP BLOCK DESCRIPTOR COUNT (Block Limits VPD page).
pub const MAX_UNMAP_DESCRIPTORS: usize = 256;

/// What a command produced.
pub enum Outcome {
    Good,
    /// Data-In assembled in memory (already cut to the allocation length).
    Data(Vec<u8>),
    /// Data-In straight from the store: `len` bytes at byte offset `off`.
    Read {
        off: u64,
        len: usize,
    },
    Check(Sense),
    Conflict,
}
