//! Every NVMe/TCP PDU header, the NVMe submission queue entry and completion queue entry,
//! declared once as `#[repr(C)]` little-endian structs (zerocopy), so the same declaration
//! reads and writes them. Offsets follow NVMe/TCP 1.0 §3.6 and NVMe Base 2.0 §4.2/§4.6; each is
//! asserted at compile time, as Linux's include/linux/nvme-tcp.h builds them.

use core::mem::{offset_of, size_of};
use zerocopy::little_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// PDU types (§3.6.1).
pub mod pdu_type {
    pub const IC_REQ: u8 = 0x00;
    pub const IC_RESP: u8 = 0x01;
    pub const H2C_TERM_REQ: u8 = 0x02;
    pub const C2H_TERM_REQ: u8 = 0x03;
    pub const CAPSULE_CMD: u8 = 0x04;
    pub const CAPSULE_RESP: u8 = 0x05;
    pub const H2C_DATA: u8 = 0x06;
    pub const C2H_DATA: u8 = 0x07;
    pub const R2T: u8 = 0x09;
}

/// Common header flags (§3.6.1).
pub mod flags {
    /// A header digest follows the header.
    pub const HDGSTF: u8 = 0x01;
    /// A data digest follows the data.
    pub const DDGSTF: u8 = 0x02;
    /// H2CData / C2HData: the last PDU of the transfer.
    pub const LAST_PDU: u8 = 0x04;
    /// C2HData: the command succeeded; no CapsuleResp follows.
    pub const SUCCESS: u8 = 0x08;
}

/// ICReq/ICResp digest bits.
pub mod digest_bits {
    pub const HDGST_ENABLE: u8 = 0x01;
    pub const DDGST_ENABLE: u8 = 0x02;
}

macro_rules! wire_struct {
    ($(#[$m:meta])* pub struct $name:ident { $($(#[$fm:meta])* pub $f:ident : $t:ty),* $(,)? }) => {
        $(#[$m])*
        #[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug, PartialEq, Eq)]
        #[repr(C)]
        pub struct $name { $($(#[$fm])* pub $f: $t),* }
    };
}

wire_struct! {
    /// The 8 bytes every PDU starts with.
    pub struct CommonHeader {
        pub pdu_type: u8,
        pub flags: u8,
        /// Header length, without the header digest.
        pub hlen: u8,
        /// PDU data offset: where the data starts, 0 without data.
        pub pdo: u8,
        /// PDU length: header, digests, padding and data.
        pub plen: U32,
    }
}

wire_struct! {
    /// Initialize Connection Request (§3.6.2.2).
    pub struct IcReq {
        pub ch: CommonHeader,
        /// PDU format version, 0.
        pub pfv: U16,
        /// Host PDU data alignment, 0's based in dwords.
        pub hpda: u8,
        pub digest: u8,
        /// Maximum outstanding R2Ts per command, 0's based.
        pub maxr2t: U32,
        pub rsvd: [u8; 112],
    }
}

wire_struct! {
    /// Initialize Connection Response (§3.6.2.3).
    pub struct IcResp {
        pub ch: CommonHeader,
        pub pfv: U16,
        /// Controller PDU data alignment, 0's based in dwords.
        pub cpda: u8,
        pub digest: u8,
        /// Largest H2CData payload the controller accepts (bytes).
        pub maxh2cdata: U32,
        pub rsvd: [u8; 112],
    }
}

wire_struct! {
    /// H2CTermReq / C2HTermReq (§3.6.2.4-5); the offending header follows as data.
    pub struct TermReq {
        pub ch: CommonHeader,
        /// Fatal error status.
        pub fes: U16,
        /// Fatal error information (the offset of the bad field for FES 1).
        pub fei: U32,
        pub rsvd: [u8; 10],
    }
}

wire_struct! {
    /// An SGL descriptor as NVMe/TCP uses it in DPTR (NVMe Base §4.3.2).
    pub struct SglDesc {
        /// In-capsule data: the offset into the capsule's data; transport blocks: 0.
        pub addr: U64,
        pub length: U32,
        pub rsvd: [u8; 3],
        /// Descriptor type (high nibble) and subtype (low nibble).
        pub sgl_type: u8,
    }
}

wire_struct! {
    /// Submission queue entry (64 bytes, NVMe Base §4.2).
    pub struct Sqe {
        pub opcode: u8,
        /// Fused (bits 1:0) and PSDT (bits 7:6; 01b: SGL, the only kind fabrics use).
        pub flags: u8,
        pub command_id: U16,
        /// Namespace id; Fabrics commands keep their FCTYPE in its first byte.
        pub nsid: U32,
        pub cdw2: U32,
        pub cdw3: U32,
        pub mptr: U64,
        pub dptr: SglDesc,
        pub cdw10: U32,
        pub cdw11: U32,
        pub cdw12: U32,
        pub cdw13: U32,
        pub cdw14: U32,
        pub cdw15: U32,
    }
}

wire_struct! {
    /// Completion queue entry (16 bytes, NVMe Base §4.6).
    pub struct Cqe {
        /// Command-specific result: DW0 (low) and DW1 (high).
        pub result: U64,
        pub sq_head: U16,
        pub sq_id: U16,
        pub command_id: U16,
        /// Phase (bit 0), status code (8:1), status code type (11:9), CRD, More, DNR (bit 15).
        pub status: U16,
    }
}

wire_struct! {
    /// CapsuleCmd (§3.6.2.6): the SQE, then in-capsule data at PDO.
    pub struct CapsuleCmd {
        pub ch: CommonHeader,
        pub sqe: Sqe,
    }
}

wire_struct! {
    /// CapsuleResp (§3.6.2.7).
    pub struct CapsuleResp {
        pub ch: CommonHeader,
        pub cqe: Cqe,
    }
}

wire_struct! {
    /// H2CData and C2HData (§3.6.2.8, §3.6.2.9): one piece of a command's data.
    pub struct DataHdr {
        pub ch: CommonHeader,
        pub command_id: U16,
        /// Transfer tag from the R2T (H2CData); reserved in C2HData.
        pub ttag: U16,
        pub data_offset: U32,
        pub data_length: U32,
        pub rsvd: [u8; 4],
    }
}

wire_struct! {
    /// Ready to Transfer (§3.6.2.10): the controller asks for a range of a write's data.
    pub struct R2t {
        pub ch: CommonHeader,
        pub command_id: U16,
        pub ttag: U16,
        pub r2t_offset: U32,
        pub r2t_length: U32,
        pub rsvd: [u8; 4],
    }
}

pub const COMMON_HEADER_LEN: usize = 8;
pub const IC_LEN: usize = 128;
pub const TERM_REQ_HLEN: usize = 24;
pub const CAPSULE_CMD_HLEN: usize = 72;
pub const CAPSULE_RESP_HLEN: usize = 24;
pub const DATA_HLEN: usize = 24;
pub const R2T_HLEN: usize = 24;
pub const SQE_LEN: usize = 64;
pub const CQE_LEN: usize = 16;
/// The most a TermReq may carry as data: the offending header and its digest (§3.6.2.4).
pub const TERM_REQ_MAX_DATA: usize = 152 - TERM_REQ_HLEN;

const _: () = {
    assert!(size_of::<CommonHeader>() == COMMON_HEADER_LEN);
    assert!(offset_of!(CommonHeader, plen) == 4);
    assert!(size_of::<IcReq>() == IC_LEN);
    assert!(offset_of!(IcReq, pfv) == 8);
    assert!(offset_of!(IcReq, hpda) == 10);
    assert!(offset_of!(IcReq, digest) == 11);
    assert!(offset_of!(IcReq, maxr2t) == 12);
    assert!(size_of::<IcResp>() == IC_LEN);
    assert!(offset_of!(IcResp, cpda) == 10);
    assert!(offset_of!(IcResp, maxh2cdata) == 12);
    assert!(size_of::<TermReq>() == TERM_REQ_HLEN);
    assert!(offset_of!(TermReq, fes) == 8);
    assert!(offset_of!(TermReq, fei) == 10);
    assert!(size_of::<SglDesc>() == 16);
    assert!(offset_of!(SglDesc, length) == 8);
    assert!(offset_of!(SglDesc, sgl_type) == 15);
    assert!(size_of::<Sqe>() == SQE_LEN);
    assert!(offset_of!(Sqe, command_id) == 2);
    assert!(offset_of!(Sqe, nsid) == 4);
    assert!(offset_of!(Sqe, mptr) == 16);
    assert!(offset_of!(Sqe, dptr) == 24);
    assert!(offset_of!(Sqe, cdw10) == 40);
    assert!(offset_of!(Sqe, cdw15) == 60);
    assert!(size_of::<Cqe>() == CQE_LEN);
    assert!(offset_of!(Cqe, sq_head) == 8);
    assert!(offset_of!(Cqe, command_id) == 12);
    assert!(offset_of!(Cqe, status) == 14);
    assert!(size_of::<CapsuleCmd>() == CAPSULE_CMD_HLEN);
    assert!(offset_of!(CapsuleCmd, sqe) == 8);
    assert!(size_of::<CapsuleResp>() == CAPSULE_RESP_HLEN);
    assert!(size_of::<DataHdr>() == DATA_HLEN);
    assert!(offset_of!(DataHdr, ttag) == 10);
    assert!(offset_of!(DataHdr, data_offset) == 12);
    assert!(offset_of!(DataHdr, data_length) == 16);
    assert!(size_of::<R2t>() == R2T_HLEN);
    assert!(offset_of!(R2t, r2t_offset) == 12);
    assert!(offset_of!(R2t, r2t_length) == 16);
};

/// The header length each PDU type must declare, `None` for an unknown type.
pub fn hlen_of(pdu_type: u8) -> Option<usize> {
    use pdu_type::*;
    Some(match pdu_type {
        IC_REQ | IC_RESP => IC_LEN,
        H2C_TERM_REQ | C2H_TERM_REQ => TERM_REQ_HLEN,
        CAPSULE_CMD => CAPSULE_CMD_HLEN,
        CAPSULE_RESP => CAPSULE_RESP_HLEN,
        H2C_DATA | C2H_DATA => DATA_HLEN,
        R2T => R2T_HLEN,
        _ => return None,
    })
}

/// A zeroed value of a header, to fill in.
pub fn zeroed<T: FromBytes>() -> T {
    T::new_zeroed()
}

impl CommonHeader {
    pub fn new(pdu_type: u8) -> Self {
        CommonHeader {
            pdu_type,
            flags: 0,
            hlen: hlen_of(pdu_type).unwrap_or(0) as u8,
            pdo: 0,
            plen: U32::new(0),
        }
    }
}
