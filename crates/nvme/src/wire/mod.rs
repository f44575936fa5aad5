//! Sans-I/O NVMe/TCP wire format.
//!
//! Entry points:
//! * [`pdu::parse_pdu`] takes received bytes and returns [`Parsed::Incomplete`] with how many
//!   more bytes are needed, or a complete [`pdu::PduRef`] after checking the header length of
//!   its type, the PDU data offset, the size limit and both digests; [`pdu::PduRef::decode`]
//!   types it as a [`pdu::Pdu`].
//! * [`pdu::encode_pdu`] appends one PDU (header, header digest, alignment padding, data, data
//!   digest) to an output buffer, filling in `hlen`, `pdo`, `plen` and the digest flags.
//! * [`header`] declares every PDU header and the 64-byte SQE / 16-byte CQE once, as zerocopy
//!   structs; [`cmd`] types an SQE as a command (and builds them), [`status`] names completion
//!   statuses, [`fabrics`] holds Connect data and the controller properties, [`identify`] the
//!   Identify data structures, [`discovery`] the discovery log page, [`ana`] the ANA log page
//!   and states.

pub mod ana;
pub mod cmd;
pub mod discovery;
pub mod fabrics;
pub mod header;
pub mod identify;
pub mod pdu;
pub mod sqe;
pub mod status;

use thiserror::Error;

/// Result of a decoding attempt on a buffer that may hold only part of a PDU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parsed<T> {
    /// `needed` more bytes must be appended before the PDU is complete.
    Incomplete { needed: usize },
    /// A whole PDU, which used the first `consumed` bytes of the buffer.
    Complete { pdu: T, consumed: usize },
}

/// Everything that can be wrong with bytes received from a peer. The `fes` method gives the
/// Fatal Error Status a receiver puts in the H2C/C2HTermReq it sends before closing.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum WireError {
    #[error("unknown PDU type {pdu_type:#04x}")]
    UnknownType { pdu_type: u8 },
    #[error("PDU type {pdu_type:#04x}: invalid field at byte {offset}: {reason}")]
    InvalidField {
        pdu_type: u8,
        offset: usize,
        reason: &'static str,
    },
    #[error("PDU type {pdu_type:#04x}: PDU length {plen} exceeds the limit of {max}")]
    TooLong { pdu_type: u8, plen: u32, max: u32 },
    #[error(
        "PDU type {pdu_type:#04x}: header digest mismatch (got {got:#010x}, computed {want:#010x})"
    )]
    HeaderDigest { pdu_type: u8, got: u32, want: u32 },
    #[error(
        "PDU type {pdu_type:#04x}: data digest mismatch (got {got:#010x}, computed {want:#010x})"
    )]
    DataDigest { pdu_type: u8, got: u32, want: u32 },
    #[error("{what}: {len} bytes where {want} are required")]
    Length {
        what: &'static str,
        len: usize,
        want: usize,
    },
    /// A value the field cannot hold (an NQN with a NUL in it), refused before it is sent.
    #[error("{what}: {reason}")]
    Unrepresentable {
        what: &'static str,
        reason: &'static str,
    },
}

/// Fatal Error Status values of H2C/C2HTermReq (NVMe/TCP 1.0 §3.6.2.9).
pub mod fes {
    pub const INVALID_HEADER_FIELD: u16 = 0x01;
    pub const PDU_SEQUENCE_ERROR: u16 = 0x02;
    pub const HEADER_DIGEST_ERROR: u16 = 0x03;
    pub const DATA_OUT_OF_RANGE: u16 = 0x04;
    pub const R2T_LIMIT_EXCEEDED: u16 = 0x05;
    pub const UNSUPPORTED_PARAMETER: u16 = 0x06;
}

impl WireError {
    /// The Fatal Error Status and Fatal Error Information (byte offset of the bad field) to
    /// report in the TermReq sent before closing the connection. A data digest error has no
    /// status of its own; like Linux, the receiver treats it as fatal too.
    pub fn fes(&self) -> (u16, u32) {
        match self {
            WireError::UnknownType { .. } => (fes::INVALID_HEADER_FIELD, 0),
            WireError::InvalidField { offset, .. } => (fes::INVALID_HEADER_FIELD, *offset as u32),
            WireError::TooLong { .. } => (fes::INVALID_HEADER_FIELD, 4),
            WireError::HeaderDigest { .. } => (fes::HEADER_DIGEST_ERROR, 0),
            WireError::DataDigest { .. } => (fes::INVALID_HEADER_FIELD, 0),
            WireError::Length { .. } | WireError::Unrepresentable { .. } => {
                (fes::INVALID_HEADER_FIELD, 0)
            }
        }
    }
}

/// CRC32C as the digests use it; it goes on the wire little-endian.
pub fn crc32c(bytes: &[u8]) -> u32 {
    crc32c::crc32c(bytes)
}
