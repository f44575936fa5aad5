//! Sans-I/O iSCSI wire format (RFC 7143).
//!
//! Entry points for an initiator or a target:
//! * [`framer::parse_pdu`] takes received bytes and returns [`framer::Parsed::Incomplete`] with
//!   how many more bytes are needed, or a complete [`framer::PduRef`] (header, AHS, data segment)
//!   after checking digests and the negotiated MaxRecvDataSegmentLength.
//! * [`bhs::Bhs::decode`] turns the 48-byte header into a typed value (one struct per opcode in
//!   [`pdu`] and [`pdu_ctl`], each over its 48-byte big-endian layout in [`layout`], where the
//!   offsets are declared once and asserted at compile time); [`framer::encode_pdu`] /
//!   [`framer::encode_pdu_with`] append a PDU (header, header digest, data, padding, data
//!   digest) to an output buffer in one piece.
//! * [`text`] encodes/decodes key=value data segments; [`keys`] knows each key's negotiation rule;
//!   [`login`] drives login from either side; [`chap`] computes CHAP responses.

pub mod bhs;
pub mod chap;
pub mod codes;
pub mod digest;
pub mod discovery;
pub mod framer;
pub mod keys;
pub mod layout;
pub mod login;
pub mod login_initiator;
pub mod pdu;
pub mod pdu_ctl;
#[cfg(test)]
mod pdu_tests;
pub mod text;

use thiserror::Error;

/// Everything that can be wrong with bytes received from a peer. Each variant says where.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum WireError {
    #[error("unknown opcode {opcode:#04x}")]
    UnknownOpcode { opcode: u8 },
    #[error("opcode {opcode:#04x}: invalid field at byte {offset}: {reason}")]
    InvalidField {
        opcode: u8,
        offset: usize,
        reason: &'static str,
    },
    #[error(
        "opcode {opcode:#04x}: header digest mismatch (got {got:#010x}, computed {want:#010x})"
    )]
    HeaderDigest { opcode: u8, got: u32, want: u32 },
    /// The PDU is intact but its data is not: `pdu_len` bytes can be skipped (§7.8).
    #[error("opcode {opcode:#04x}: data digest mismatch (got {got:#010x}, computed {want:#010x})")]
    DataDigest {
        opcode: u8,
        got: u32,
        want: u32,
        pdu_len: usize,
    },
    #[error("opcode {opcode:#04x}: data segment of {len} bytes exceeds the limit of {max}")]
    DataTooLong { opcode: u8, len: u32, max: u32 },
    #[error("text at offset {offset}: {reason}")]
    Text { offset: usize, reason: &'static str },
    #[error("key {key}: {reason}")]
    Key { key: String, reason: String },
    #[error("login: {0}")]
    Login(String),
    #[error("AHS at offset {offset}: {reason}")]
    Ahs { offset: usize, reason: &'static str },
}

pub(crate) fn be16(b: &[u8], off: usize) -> u16 {
    u16::from_be_bytes([b[off], b[off + 1]])
}
pub(crate) fn be32(b: &[u8], off: usize) -> u32 {
    u32::from_be_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
}
