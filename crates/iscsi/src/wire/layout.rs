//! Every Basic Header Segment layout (RFC 7143 §11), declared once as a 48-byte `#[repr(C)]`
//! big-endian struct (zerocopy), so the same declaration reads and writes a header. Each
//! struct's size and the offsets of the fields its section places are asserted at compile
//! time, as SPDK's iscsi_spec.h and Linux's include/scsi/iscsi_proto.h build them.
//!
//! The typed values in [`super::pdu`] and [`super::pdu_ctl`] sit on top: [`typed_pdu!`] declares
//! a value's fields once and derives both directions for the ones a layout holds under the same
//! name; only flag bits, enums and split fields are written by hand.

use core::mem::{offset_of, size_of};
use zerocopy::big_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

macro_rules! layout {
    ($(#[$m:meta])* pub struct $name:ident { $($(#[$fm:meta])* pub $f:ident : $t:ty),* $(,)? }) => {
        $(#[$m])*
        #[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug, PartialEq, Eq)]
        #[repr(C)]
        pub struct $name { $($(#[$fm])* pub $f: $t),* }
    };
}

/// Declares a PDU's typed value over its layout. Fields under `hand` are read and written by
/// the PDU's own `decode`/`encode` (flag bits, enums, fields split across bytes); fields under
/// `wire` have a field of the same name in the layout and convert with `From` both ways
/// (`U32` and `u32`, ...), so each is named once. `from_layout` fills the `hand` fields with
/// their defaults for `decode` to override; `to_layout` leaves every other byte zero; `encode`
/// writes what the PDU's own `to_bytes` (opcode, flags, hand fields) makes of it.
macro_rules! typed_pdu {
    (
        $(#[$m:meta])*
        pub struct $name:ident : $layout:ty {
            hand { $( $(#[$hm:meta])* pub $h:ident : $ht:ty, )* }
            wire { $( $(#[$wm:meta])* pub $w:ident : $wt:ty, )* }
        }
    ) => {
        $(#[$m])*
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub struct $name {
            $( $(#[$hm])* pub $h: $ht, )*
            $( $(#[$wm])* pub $w: $wt, )*
        }

        impl $name {
            fn from_layout(l: &$layout) -> Self {
                $name {
                    $( $h: Default::default(), )*
                    $( $w: l.$w.into(), )*
                }
            }
            fn to_layout(&self) -> $layout {
                let mut l = <$layout as zerocopy::FromZeros>::new_zeroed();
                $( l.$w = self.$w.into(); )*
                l
            }
            /// Writes the header (the PDU's own `to_bytes`) into `h`.
            pub fn encode(&self, h: &mut [u8; 48]) {
                *h = self.to_bytes();
            }
        }
    };
}
pub(crate) use typed_pdu;

/// Byte 0: the I (immediate) bit beside the 6-bit opcode (§11.2.1.1).
pub const IMMEDIATE: u8 = 0x40;
/// Byte 1: the F (final) bit most PDUs carry (§11.2.1.2).
pub const FINAL: u8 = 0x80;
/// The reserved tag value (§11.2.1.8): "no task" / "no transfer".
pub const RESERVED_TAG: u32 = 0xffff_ffff;

layout! {
    /// The fields every BHS shares (§11.2.1): what the framer reads before typing a header.
    pub struct BasicHeader {
        pub opcode: u8,
        pub flags: u8,
        pub opcode_specific: [u8; 2],
        /// TotalAHSLength in 4-byte words (§11.2.1.4).
        pub total_ahs_len: u8,
        /// DataSegmentLength, 24-bit big-endian (§11.2.1.5).
        pub data_seg_len: [u8; 3],
        pub lun_or_specific: [u8; 8],
        pub itt: U32,
        pub specific: [u8; 28],
    }
}

impl BasicHeader {
    pub fn data_len(&self) -> u32 {
        let [a, b, c] = self.data_seg_len;
        u32::from_be_bytes([0, a, b, c])
    }
    pub fn set_data_len(&mut self, len: u32) {
        let [_, a, b, c] = len.to_be_bytes();
        self.data_seg_len = [a, b, c];
    }
}

layout! {
    /// SCSI Command (§11.3).
    pub struct ScsiCommandHdr {
        pub opcode: u8,
        /// F, R, W and the task attribute.
        pub flags: u8,
        pub rsvd2: [u8; 2],
        pub total_ahs_len: u8,
        pub data_seg_len: [u8; 3],
        pub lun: U64,
        pub itt: U32,
        pub expected_data_len: U32,
        pub cmd_sn: U32,
        pub exp_stat_sn: U32,
        pub cdb: [u8; 16],
    }
}

layout! {
    /// SCSI Response (§11.4).
    pub struct ScsiResponseHdr {
        pub opcode: u8,
        /// F, o, u, O, U.
        pub flags: u8,
        pub response: u8,
        pub status: u8,
        pub total_ahs_len: u8,
        pub data_seg_len: [u8; 3],
        pub rsvd8: [u8; 8],
        pub itt: U32,
        pub snack_tag: U32,
        pub stat_sn: U32,
        pub exp_cmd_sn: U32,
        pub max_cmd_sn: U32,
        pub exp_data_sn: U32,
        pub bidi_residual: U32,
        pub residual_count: U32,
    }
}

layout! {
    /// SCSI Data-Out (§11.7).
    pub struct DataOutHdr {
        pub opcode: u8,
        pub flags: u8,
        pub rsvd2: [u8; 2],
        pub total_ahs_len: u8,
        pub data_seg_len: [u8; 3],
        pub lun: U64,
        pub itt: U32,
        pub ttt: U32,
        pub rsvd24: [u8; 4],
        pub exp_stat_sn: U32,
        pub rsvd32: [u8; 4],
        pub data_sn: U32,
        pub buffer_offset: U32,
        pub rsvd44: [u8; 4],
    }
}

layout! {
    /// SCSI Data-In (§11.7).
    pub struct DataInHdr {
        pub opcode: u8,
        /// F, A, O, U, S.
        pub flags: u8,
        pub rsvd2: u8,
        pub status: u8,
        pub total_ahs_len: u8,
        pub data_seg_len: [u8; 3],
        pub lun: U64,
        pub itt: U32,
        pub ttt: U32,
        pub stat_sn: U32,
        pub exp_cmd_sn: U32,
        pub max_cmd_sn: U32,
        pub data_sn: U32,
        pub buffer_offset: U32,
        pub residual_count: U32,
    }
}

layout! {
    /// Ready To Transfer (§11.8).
    pub struct R2tHdr {
        pub opcode: u8,
        pub flags: u8,
        pub rsvd2: [u8; 2],
        pub total_ahs_len: u8,
        pub data_seg_len: [u8; 3],
        pub lun: U64,
        pub itt: U32,
        pub ttt: U32,
        pub stat_sn: U32,
        pub exp_cmd_sn: U32,
        pub max_cmd_sn: U32,
        pub r2t_sn: U32,
        pub buffer_offset: U32,
        pub desired_len: U32,
    }
}

layout! {
    /// SNACK Request (§11.16).
    pub struct SnackHdr {
        pub opcode: u8,
        /// F and the SNACK type.
        pub flags: u8,
        pub rsvd2: [u8; 2],
        pub total_ahs_len: u8,
        pub data_seg_len: [u8; 3],
        pub lun: U64,
        pub itt: U32,
        pub ttt: U32,
        pub rsvd24: [u8; 4],
        pub exp_stat_sn: U32,
        pub rsvd32: [u8; 8],
        pub beg_run: U32,
        pub run_length: U32,
    }
}

layout! {
    /// NOP-Out (§11.18).
    pub struct NopOutHdr {
        pub opcode: u8,
        pub flags: u8,
        pub rsvd2: [u8; 2],
        pub total_ahs_len: u8,
        pub data_seg_len: [u8; 3],
        pub lun: U64,
        pub itt: U32,
        pub ttt: U32,
        pub cmd_sn: U32,
        pub exp_stat_sn: U32,
        pub rsvd32: [u8; 16],
    }
}

layout! {
    /// NOP-In (§11.19).
    pub struct NopInHdr {
        pub opcode: u8,
        pub flags: u8,
        pub rsvd2: [u8; 2],
        pub total_ahs_len: u8,
        pub data_seg_len: [u8; 3],
        pub lun: U64,
        pub itt: U32,
        pub ttt: U32,
        pub stat_sn: U32,
        pub exp_cmd_sn: U32,
        pub max_cmd_sn: U32,
        pub rsvd36: [u8; 12],
    }
}

layout! {
    /// Task Management Function Request (§11.5).
    pub struct TaskMgmtRequestHdr {
        pub opcode: u8,
        /// F and the function.
        pub flags: u8,
        pub rsvd2: [u8; 2],
        pub total_ahs_len: u8,
        pub data_seg_len: [u8; 3],
        pub lun: U64,
        pub itt: U32,
        pub ref_task_tag: U32,
        pub cmd_sn: U32,
        pub exp_stat_sn: U32,
        pub ref_cmd_sn: U32,
        pub exp_data_sn: U32,
        pub rsvd40: [u8; 8],
    }
}

layout! {
    /// Task Management Function Response (§11.6).
    pub struct TaskMgmtResponseHdr {
        pub opcode: u8,
        pub flags: u8,
        pub response: u8,
        pub rsvd3: u8,
        pub total_ahs_len: u8,
        pub data_seg_len: [u8; 3],
        pub rsvd8: [u8; 8],
        pub itt: U32,
        pub rsvd20: [u8; 4],
        pub stat_sn: U32,
        pub exp_cmd_sn: U32,
        pub max_cmd_sn: U32,
        pub rsvd36: [u8; 12],
    }
}

layout! {
    /// Login Request (§11.12).
    pub struct LoginRequestHdr {
        pub opcode: u8,
        /// T, C, CSG, NSG.
        pub flags: u8,
        pub version_max: u8,
        pub version_min: u8,
        pub total_ahs_len: u8,
        pub data_seg_len: [u8; 3],
        pub isid: [u8; 6],
        pub tsih: U16,
        pub itt: U32,
        pub cid: U16,
        pub rsvd22: [u8; 2],
        pub cmd_sn: U32,
        pub exp_stat_sn: U32,
        pub rsvd32: [u8; 16],
    }
}

layout! {
    /// Login Response (§11.13).
    pub struct LoginResponseHdr {
        pub opcode: u8,
        /// T, C, CSG, NSG.
        pub flags: u8,
        pub version_max: u8,
        pub version_active: u8,
        pub total_ahs_len: u8,
        pub data_seg_len: [u8; 3],
        pub isid: [u8; 6],
        pub tsih: U16,
        pub itt: U32,
        pub rsvd20: [u8; 4],
        pub stat_sn: U32,
        pub exp_cmd_sn: U32,
        pub max_cmd_sn: U32,
        pub status_class: u8,
        pub status_detail: u8,
        pub rsvd38: [u8; 10],
    }
}

layout! {
    /// Text Request (§11.10).
    pub struct TextRequestHdr {
        pub opcode: u8,
        /// F, C.
        pub flags: u8,
        pub rsvd2: [u8; 2],
        pub total_ahs_len: u8,
        pub data_seg_len: [u8; 3],
        pub lun: U64,
        pub itt: U32,
        pub ttt: U32,
        pub cmd_sn: U32,
        pub exp_stat_sn: U32,
        pub rsvd32: [u8; 16],
    }
}

layout! {
    /// Text Response (§11.11).
    pub struct TextResponseHdr {
        pub opcode: u8,
        /// F, C.
        pub flags: u8,
        pub rsvd2: [u8; 2],
        pub total_ahs_len: u8,
        pub data_seg_len: [u8; 3],
        pub lun: U64,
        pub itt: U32,
        pub ttt: U32,
        pub stat_sn: U32,
        pub exp_cmd_sn: U32,
        pub max_cmd_sn: U32,
        pub rsvd36: [u8; 12],
    }
}

layout! {
    /// Logout Request (§11.14).
    pub struct LogoutRequestHdr {
        pub opcode: u8,
        /// F and the reason code.
        pub flags: u8,
        pub rsvd2: [u8; 2],
        pub total_ahs_len: u8,
        pub data_seg_len: [u8; 3],
        pub rsvd8: [u8; 8],
        pub itt: U32,
        pub cid: U16,
        pub rsvd22: [u8; 2],
        pub cmd_sn: U32,
        pub exp_stat_sn: U32,
        pub rsvd32: [u8; 16],
    }
}

layout! {
    /// Logout Response (§11.15).
    pub struct LogoutResponseHdr {
        pub opcode: u8,
        pub flags: u8,
        pub response: u8,
        pub rsvd3: u8,
        pub total_ahs_len: u8,
        pub data_seg_len: [u8; 3],
        pub rsvd8: [u8; 8],
        pub itt: U32,
        pub rsvd20: [u8; 4],
        pub stat_sn: U32,
        pub exp_cmd_sn: U32,
        pub max_cmd_sn: U32,
        pub rsvd36: [u8; 4],
        pub time2wait: U16,
        pub time2retain: U16,
        pub rsvd44: [u8; 4],
    }
}

layout! {
    /// Asynchronous Message (§11.9).
    pub struct AsyncMessageHdr {
        pub opcode: u8,
        pub flags: u8,
        pub rsvd2: [u8; 2],
        pub total_ahs_len: u8,
        pub data_seg_len: [u8; 3],
        pub lun: U64,
        /// Always the reserved tag.
        pub itt: U32,
        pub rsvd20: [u8; 4],
        pub stat_sn: U32,
        pub exp_cmd_sn: U32,
        pub max_cmd_sn: U32,
        pub event: u8,
        pub vcode: u8,
        pub param1: U16,
        pub param2: U16,
        pub param3: U16,
        pub rsvd44: [u8; 4],
    }
}

layout! {
    /// Reject (§11.17).
    pub struct RejectHdr {
        pub opcode: u8,
        pub flags: u8,
        pub reason: u8,
        pub rsvd3: u8,
        pub total_ahs_len: u8,
        pub data_seg_len: [u8; 3],
        pub rsvd8: [u8; 8],
        /// Always the reserved tag.
        pub itt: U32,
        pub rsvd20: [u8; 4],
        pub stat_sn: U32,
        pub exp_cmd_sn: U32,
        pub max_cmd_sn: U32,
        /// DataSN/R2TSN or reserved.
        pub data_sn: U32,
        pub rsvd40: [u8; 8],
    }
}

/// Offsets every layout shares with [`BasicHeader`] (§11.2.1).
macro_rules! assert_common {
    ($($t:ty),*) => {$(
        assert!(size_of::<$t>() == 48);
        assert!(offset_of!($t, flags) == 1);
        assert!(offset_of!($t, total_ahs_len) == 4);
        assert!(offset_of!($t, data_seg_len) == 5);
        assert!(offset_of!($t, itt) == 16);
    )*};
}

const _: () = {
    assert_common!(
        BasicHeader,
        ScsiCommandHdr,
        ScsiResponseHdr,
        DataOutHdr,
        DataInHdr,
        R2tHdr,
        SnackHdr,
        NopOutHdr,
        NopInHdr,
        TaskMgmtRequestHdr,
        TaskMgmtResponseHdr,
        LoginRequestHdr,
        LoginResponseHdr,
        TextRequestHdr,
        TextResponseHdr,
        LogoutRequestHdr,
        LogoutResponseHdr,
        AsyncMessageHdr,
        RejectHdr
    );
    // §11.3
    assert!(offset_of!(ScsiCommandHdr, lun) == 8);
    assert!(offset_of!(ScsiCommandHdr, expected_data_len) == 20);
    assert!(offset_of!(ScsiCommandHdr, cmd_sn) == 24);
    assert!(offset_of!(ScsiCommandHdr, exp_stat_sn) == 28);
    assert!(offset_of!(ScsiCommandHdr, cdb) == 32);
    // §11.4
    assert!(offset_of!(ScsiResponseHdr, response) == 2);
    assert!(offset_of!(ScsiResponseHdr, status) == 3);
    assert!(offset_of!(ScsiResponseHdr, snack_tag) == 20);
    assert!(offset_of!(ScsiResponseHdr, stat_sn) == 24);
    assert!(offset_of!(ScsiResponseHdr, exp_cmd_sn) == 28);
    assert!(offset_of!(ScsiResponseHdr, max_cmd_sn) == 32);
    assert!(offset_of!(ScsiResponseHdr, exp_data_sn) == 36);
    assert!(offset_of!(ScsiResponseHdr, bidi_residual) == 40);
    assert!(offset_of!(ScsiResponseHdr, residual_count) == 44);
    // §11.7 (Data-Out)
    assert!(offset_of!(DataOutHdr, lun) == 8);
    assert!(offset_of!(DataOutHdr, ttt) == 20);
    assert!(offset_of!(DataOutHdr, exp_stat_sn) == 28);
    assert!(offset_of!(DataOutHdr, data_sn) == 36);
    assert!(offset_of!(DataOutHdr, buffer_offset) == 40);
    // §11.7 (Data-In)
    assert!(offset_of!(DataInHdr, status) == 3);
    assert!(offset_of!(DataInHdr, lun) == 8);
    assert!(offset_of!(DataInHdr, ttt) == 20);
    assert!(offset_of!(DataInHdr, stat_sn) == 24);
    assert!(offset_of!(DataInHdr, exp_cmd_sn) == 28);
    assert!(offset_of!(DataInHdr, max_cmd_sn) == 32);
    assert!(offset_of!(DataInHdr, data_sn) == 36);
    assert!(offset_of!(DataInHdr, buffer_offset) == 40);
    assert!(offset_of!(DataInHdr, residual_count) == 44);
    // §11.8
    assert!(offset_of!(R2tHdr, lun) == 8);
    assert!(offset_of!(R2tHdr, ttt) == 20);
    assert!(offset_of!(R2tHdr, stat_sn) == 24);
    assert!(offset_of!(R2tHdr, r2t_sn) == 36);
    assert!(offset_of!(R2tHdr, buffer_offset) == 40);
    assert!(offset_of!(R2tHdr, desired_len) == 44);
    // §11.16
    assert!(offset_of!(SnackHdr, ttt) == 20);
    assert!(offset_of!(SnackHdr, exp_stat_sn) == 28);
    assert!(offset_of!(SnackHdr, beg_run) == 40);
    assert!(offset_of!(SnackHdr, run_length) == 44);
    // §11.18, §11.19
    assert!(offset_of!(NopOutHdr, lun) == 8);
    assert!(offset_of!(NopOutHdr, ttt) == 20);
    assert!(offset_of!(NopOutHdr, cmd_sn) == 24);
    assert!(offset_of!(NopOutHdr, exp_stat_sn) == 28);
    assert!(offset_of!(NopInHdr, ttt) == 20);
    assert!(offset_of!(NopInHdr, stat_sn) == 24);
    assert!(offset_of!(NopInHdr, max_cmd_sn) == 32);
    // §11.5, §11.6
    assert!(offset_of!(TaskMgmtRequestHdr, ref_task_tag) == 20);
    assert!(offset_of!(TaskMgmtRequestHdr, cmd_sn) == 24);
    assert!(offset_of!(TaskMgmtRequestHdr, ref_cmd_sn) == 32);
    assert!(offset_of!(TaskMgmtRequestHdr, exp_data_sn) == 36);
    assert!(offset_of!(TaskMgmtResponseHdr, response) == 2);
    assert!(offset_of!(TaskMgmtResponseHdr, stat_sn) == 24);
    assert!(offset_of!(TaskMgmtResponseHdr, max_cmd_sn) == 32);
    // §11.12, §11.13
    assert!(offset_of!(LoginRequestHdr, version_max) == 2);
    assert!(offset_of!(LoginRequestHdr, version_min) == 3);
    assert!(offset_of!(LoginRequestHdr, isid) == 8);
    assert!(offset_of!(LoginRequestHdr, tsih) == 14);
    assert!(offset_of!(LoginRequestHdr, cid) == 20);
    assert!(offset_of!(LoginRequestHdr, cmd_sn) == 24);
    assert!(offset_of!(LoginRequestHdr, exp_stat_sn) == 28);
    assert!(offset_of!(LoginResponseHdr, version_active) == 3);
    assert!(offset_of!(LoginResponseHdr, isid) == 8);
    assert!(offset_of!(LoginResponseHdr, tsih) == 14);
    assert!(offset_of!(LoginResponseHdr, stat_sn) == 24);
    assert!(offset_of!(LoginResponseHdr, max_cmd_sn) == 32);
    assert!(offset_of!(LoginResponseHdr, status_class) == 36);
    assert!(offset_of!(LoginResponseHdr, status_detail) == 37);
    // §11.10, §11.11
    assert!(offset_of!(TextRequestHdr, ttt) == 20);
    assert!(offset_of!(TextRequestHdr, cmd_sn) == 24);
    assert!(offset_of!(TextRequestHdr, exp_stat_sn) == 28);
    assert!(offset_of!(TextResponseHdr, ttt) == 20);
    assert!(offset_of!(TextResponseHdr, stat_sn) == 24);
    assert!(offset_of!(TextResponseHdr, max_cmd_sn) == 32);
    // §11.14, §11.15
    assert!(offset_of!(LogoutRequestHdr, cid) == 20);
    assert!(offset_of!(LogoutRequestHdr, cmd_sn) == 24);
    assert!(offset_of!(LogoutRequestHdr, exp_stat_sn) == 28);
    assert!(offset_of!(LogoutResponseHdr, response) == 2);
    assert!(offset_of!(LogoutResponseHdr, stat_sn) == 24);
    assert!(offset_of!(LogoutResponseHdr, time2wait) == 40);
    assert!(offset_of!(LogoutResponseHdr, time2retain) == 42);
    // §11.9
    assert!(offset_of!(AsyncMessageHdr, lun) == 8);
    assert!(offset_of!(AsyncMessageHdr, stat_sn) == 24);
    assert!(offset_of!(AsyncMessageHdr, event) == 36);
    assert!(offset_of!(AsyncMessageHdr, vcode) == 37);
    assert!(offset_of!(AsyncMessageHdr, param1) == 38);
    assert!(offset_of!(AsyncMessageHdr, param2) == 40);
    assert!(offset_of!(AsyncMessageHdr, param3) == 42);
    // §11.17
    assert!(offset_of!(RejectHdr, reason) == 2);
    assert!(offset_of!(RejectHdr, stat_sn) == 24);
    assert!(offset_of!(RejectHdr, data_sn) == 36);
};
