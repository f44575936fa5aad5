//! The 48-byte Basic Header Segment (RFC 7143 §11.2) and the typed view over it.
//!
//! [`Bhs`] is one enum over every opcode's struct (see [`super::pdu`] and [`super::pdu_ctl`]).
//! `decode` reads every non-reserved field and validates what the RFC makes invalid; `encode`
//! writes a header with TotalAHSLength and DataSegmentLength zero: the framer fills those in
//! because they describe the bytes that follow, not the command.

use super::layout::BasicHeader;
use super::pdu::*;
use super::pdu_ctl::*;
use super::WireError;
use zerocopy::FromBytes;

/// Length of the Basic Header Segment.
pub const BHS_LEN: usize = 48;

/// Opcodes (RFC 7143 §11.2.1.2). Initiator opcodes are below 0x20.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Opcode {
    NopOut = 0x00,
    ScsiCommand = 0x01,
    TaskMgmtRequest = 0x02,
    LoginRequest = 0x03,
    TextRequest = 0x04,
    DataOut = 0x05,
    LogoutRequest = 0x06,
    Snack = 0x10,
    NopIn = 0x20,
    ScsiResponse = 0x21,
    TaskMgmtResponse = 0x22,
    LoginResponse = 0x23,
    TextResponse = 0x24,
    DataIn = 0x25,
    LogoutResponse = 0x26,
    R2t = 0x31,
    AsyncMessage = 0x32,
    Reject = 0x3f,
}

impl Opcode {
    pub fn from_u8(v: u8) -> Result<Opcode, WireError> {
        use Opcode::*;
        Ok(match v & 0x3f {
            0x00 => NopOut,
            0x01 => ScsiCommand,
            0x02 => TaskMgmtRequest,
            0x03 => LoginRequest,
            0x04 => TextRequest,
            0x05 => DataOut,
            0x06 => LogoutRequest,
            0x10 => Snack,
            0x20 => NopIn,
            0x21 => ScsiResponse,
            0x22 => TaskMgmtResponse,
            0x23 => LoginResponse,
            0x24 => TextResponse,
            0x25 => DataIn,
            0x26 => LogoutResponse,
            0x31 => R2t,
            0x32 => AsyncMessage,
            0x3f => Reject,
            o => return Err(WireError::UnknownOpcode { opcode: o }),
        })
    }
}

/// The fields every opcode shares, or `None` for fewer than 48 bytes.
fn basic(h: &[u8]) -> Option<&BasicHeader> {
    BasicHeader::ref_from_prefix(h).ok().map(|(b, _)| b)
}

/// Raw accessors valid for every opcode, used by the framer before typing the header. Each
/// reads 0 from a slice shorter than 48 bytes.
pub fn raw_opcode(h: &[u8]) -> u8 {
    basic(h).map_or(0, |b| b.opcode & 0x3f)
}
/// TotalAHSLength in bytes (the field counts 4-byte words).
pub fn raw_ahs_len(h: &[u8]) -> usize {
    basic(h).map_or(0, |b| b.total_ahs_len as usize * 4)
}
pub fn raw_data_len(h: &[u8]) -> u32 {
    basic(h).map_or(0, BasicHeader::data_len)
}
pub fn raw_itt(h: &[u8]) -> u32 {
    basic(h).map_or(0, |b| b.itt.get())
}

/// Encodes a LUN number into the 8-byte SAM LUN structure: peripheral addressing below 256,
/// flat space addressing up to 16383 (SAM-5 §4.7), as Linux and libiscsi do.
pub fn encode_lun(lun: u16) -> u64 {
    if lun < 256 {
        (lun as u64) << 48
    } else {
        (0x4000 | (lun as u64 & 0x3fff)) << 48
    }
}

/// Decodes the first level of a SAM LUN structure (peripheral or flat addressing).
pub fn decode_lun(raw: u64) -> u16 {
    let top = (raw >> 48) as u16;
    match top >> 14 {
        0 | 1 => top & 0x3fff,
        _ => u16::MAX,
    }
}

/// A typed Basic Header Segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bhs {
    NopOut(NopOut),
    ScsiCommand(ScsiCommand),
    TaskMgmtRequest(TaskMgmtRequest),
    LoginRequest(LoginRequest),
    TextRequest(TextRequest),
    DataOut(DataOut),
    LogoutRequest(LogoutRequest),
    Snack(Snack),
    NopIn(NopIn),
    ScsiResponse(ScsiResponse),
    TaskMgmtResponse(TaskMgmtResponse),
    LoginResponse(LoginResponse),
    TextResponse(TextResponse),
    DataIn(DataIn),
    LogoutResponse(LogoutResponse),
    R2t(R2t),
    AsyncMessage(AsyncMessage),
    Reject(Reject),
}

impl Bhs {
    /// Decodes and validates a header. Never panics; the slice must hold at least 48 bytes or
    /// an error is returned.
    pub fn decode(h: &[u8]) -> Result<Bhs, WireError> {
        let h: &[u8; BHS_LEN] =
            h.get(..BHS_LEN)
                .and_then(|s| s.try_into().ok())
                .ok_or(WireError::InvalidField {
                    opcode: h.first().map_or(0, |b| b & 0x3f),
                    offset: h.len(),
                    reason: "header shorter than 48 bytes",
                })?;
        Ok(match Opcode::from_u8(h[0])? {
            Opcode::NopOut => Bhs::NopOut(NopOut::decode(h)?),
            Opcode::ScsiCommand => Bhs::ScsiCommand(ScsiCommand::decode(h)?),
            Opcode::TaskMgmtRequest => Bhs::TaskMgmtRequest(TaskMgmtRequest::decode(h)?),
            Opcode::LoginRequest => Bhs::LoginRequest(LoginRequest::decode(h)?),
            Opcode::TextRequest => Bhs::TextRequest(TextRequest::decode(h)?),
            Opcode::DataOut => Bhs::DataOut(DataOut::decode(h)?),
            Opcode::LogoutRequest => Bhs::LogoutRequest(LogoutRequest::decode(h)?),
            Opcode::Snack => Bhs::Snack(Snack::decode(h)?),
            Opcode::NopIn => Bhs::NopIn(NopIn::decode(h)?),
            Opcode::ScsiResponse => Bhs::ScsiResponse(ScsiResponse::decode(h)?),
            Opcode::TaskMgmtResponse => Bhs::TaskMgmtResponse(TaskMgmtResponse::decode(h)?),
            Opcode::LoginResponse => Bhs::LoginResponse(LoginResponse::decode(h)?),
            Opcode::TextResponse => Bhs::TextResponse(TextResponse::decode(h)?),
            Opcode::DataIn => Bhs::DataIn(DataIn::decode(h)?),
            Opcode::LogoutResponse => Bhs::LogoutResponse(LogoutResponse::decode(h)?),
            Opcode::R2t => Bhs::R2t(R2t::decode(h)?),
            Opcode::AsyncMessage => Bhs::AsyncMessage(AsyncMessage::decode(h)?),
            Opcode::Reject => Bhs::Reject(Reject::decode(h)?),
        })
    }

    /// Encodes into 48 bytes with TotalAHSLength and DataSegmentLength zero.
    pub fn encode(&self) -> [u8; BHS_LEN] {
        match self {
            Bhs::NopOut(p) => p.to_bytes(),
            Bhs::ScsiCommand(p) => p.to_bytes(),
            Bhs::TaskMgmtRequest(p) => p.to_bytes(),
            Bhs::LoginRequest(p) => p.to_bytes(),
            Bhs::TextRequest(p) => p.to_bytes(),
            Bhs::DataOut(p) => p.to_bytes(),
            Bhs::LogoutRequest(p) => p.to_bytes(),
            Bhs::Snack(p) => p.to_bytes(),
            Bhs::NopIn(p) => p.to_bytes(),
            Bhs::ScsiResponse(p) => p.to_bytes(),
            Bhs::TaskMgmtResponse(p) => p.to_bytes(),
            Bhs::LoginResponse(p) => p.to_bytes(),
            Bhs::TextResponse(p) => p.to_bytes(),
            Bhs::DataIn(p) => p.to_bytes(),
            Bhs::LogoutResponse(p) => p.to_bytes(),
            Bhs::R2t(p) => p.to_bytes(),
            Bhs::AsyncMessage(p) => p.to_bytes(),
            Bhs::Reject(p) => p.to_bytes(),
        }
    }

    pub fn opcode(&self) -> Opcode {
        match self {
            Bhs::NopOut(_) => Opcode::NopOut,
            Bhs::ScsiCommand(_) => Opcode::ScsiCommand,
            Bhs::TaskMgmtRequest(_) => Opcode::TaskMgmtRequest,
            Bhs::LoginRequest(_) => Opcode::LoginRequest,
            Bhs::TextRequest(_) => Opcode::TextRequest,
            Bhs::DataOut(_) => Opcode::DataOut,
            Bhs::LogoutRequest(_) => Opcode::LogoutRequest,
            Bhs::Snack(_) => Opcode::Snack,
            Bhs::NopIn(_) => Opcode::NopIn,
            Bhs::ScsiResponse(_) => Opcode::ScsiResponse,
            Bhs::TaskMgmtResponse(_) => Opcode::TaskMgmtResponse,
            Bhs::LoginResponse(_) => Opcode::LoginResponse,
            Bhs::TextResponse(_) => Opcode::TextResponse,
            Bhs::DataIn(_) => Opcode::DataIn,
            Bhs::LogoutResponse(_) => Opcode::LogoutResponse,
            Bhs::R2t(_) => Opcode::R2t,
            Bhs::AsyncMessage(_) => Opcode::AsyncMessage,
            Bhs::Reject(_) => Opcode::Reject,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// decode ∘ encode is the identity on every header that decodes.
        #[test]
        fn roundtrip_any_header(bytes in proptest::collection::vec(any::<u8>(), 48), op in 0u8..0x40) {
            let mut h = bytes.clone();
            h[0] = (h[0] & 0xc0) | op;
            if let Ok(b) = Bhs::decode(&h) {
                let enc = b.encode();
                prop_assert_eq!(Bhs::decode(&enc).unwrap(), b);
            }
        }

        #[test]
        fn lun_roundtrip(lun in 0u16..16384) {
            prop_assert_eq!(decode_lun(encode_lun(lun)), lun);
        }
    }

    #[test]
    fn short_header_is_an_error() {
        assert!(Bhs::decode(&[0u8; 47]).is_err());
        assert!(Bhs::decode(&[]).is_err());
    }
}
