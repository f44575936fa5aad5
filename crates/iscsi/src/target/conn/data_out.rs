//! What a Data-Out PDU may carry, checked against what the target asked for (RFC 7143).
//!
//! The target negotiates DataPDUInOrder=Yes and DataSequenceInOrder=Yes (§13.19-13.20), so
//! within a task every Data-Out continues exactly where the previous data ended: its Buffer
//! Offset is the number of bytes received so far (§11.7.5), its DataSN counts from 0 within each
//! R2T's sequence and within the unsolicited burst (§11.7.4), its Target Transfer Tag is that of
//! the outstanding R2T, or 0xffffffff for unsolicited data, which only InitialR2T=No allows and
//! never past FirstBurstLength (§13.11, §13.14); data answering an R2T stays inside the R2T's
//! Desired Data Transfer Length (§11.8.4), and F ends each sequence no earlier than that
//! (§11.7.1).
//!
//! A violation is answered in two parts. The PDU itself is rejected (§11.17.1: Protocol Error
//! for a sequence or offset violation, Invalid PDU Field for a tag that names no transfer). At
//! ErrorRecoveryLevel 0 the task cannot be recovered, and a Reject alone must not end an active
//! task (§7.8: "If the target decides to terminate the task, a Response PDU ... must be
//! returned"), so the command then ends with CHECK CONDITION, ABORTED COMMAND and the
//! additional sense code that names the fault (SPC-4 4Bh: DATA PHASE ERROR, INVALID TARGET PORT
//! TRANSFER TAG RECEIVED, TOO MUCH WRITE DATA, DATA OFFSET ERROR; iSCSI's own 0Ch/0Ch
//! UNEXPECTED UNSOLICITED DATA and 0Ch/0Dh NOT ENOUGH UNSOLICITED DATA, §11.4.7.2).

use crate::scsi::sense::Sense;
use crate::wire::codes::reject_reason;
use crate::wire::layout::RESERVED_TAG;
use crate::wire::pdu::DataOut;

/// The Target Transfer Tag of unsolicited data (§11.7.3).
pub const UNSOLICITED_TTT: u32 = RESERVED_TAG;

/// The R2T a task is waiting on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Burst {
    pub ttt: u32,
    /// DataSN the next Data-Out of this sequence must carry.
    pub next_sn: u32,
    /// Buffer offset where the R2T's range ends (its offset + Desired Data Transfer Length).
    pub end: u32,
}

/// Where a write task stands, as far as its next Data-Out is concerned.
#[derive(Debug, Clone, Copy)]
pub struct Expect {
    /// Bytes received so far: the next Data-Out's Buffer Offset.
    pub received: u32,
    /// The command's Expected Data Transfer Length.
    pub edtl: u32,
    /// The outstanding R2T, if any.
    pub burst: Option<Burst>,
    /// The unsolicited burst is over (F seen, or the command had F with no unsolicited data).
    pub unsolicited_done: bool,
    /// DataSN the next unsolicited Data-Out must carry.
    pub unsol_data_sn: u32,
    /// FirstBurstLength: unsolicited data (immediate included) ends there.
    pub first_burst: u32,
}

/// A Data-Out the target did not ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Violation {
    /// Its TTT is neither the outstanding R2T's nor 0xffffffff.
    UnknownTtt { got: u32 },
    /// Unsolicited data after the unsolicited burst ended.
    UnexpectedUnsolicited,
    /// DataSN out of order within the sequence.
    DataSn { expected: u32, got: u32 },
    /// Buffer Offset not where the previous data ended (DataPDUInOrder=Yes).
    Offset { expected: u32, got: u32 },
    /// Data past the R2T's range, FirstBurstLength or the Expected Data Transfer Length.
    TooMuch { end: u64, limit: u32 },
    /// F set before the R2T's range was complete.
    EndedEarly { end: u64, limit: u32 },
}

impl Violation {
    /// The Reject reason for the PDU (§11.17.1).
    pub fn reject_reason(&self) -> u8 {
        match self {
            Violation::UnknownTtt { .. } => reject_reason::INVALID_PDU_FIELD,
            _ => reject_reason::PROTOCOL_ERROR,
        }
    }

    /// The sense data the task ends with (ABORTED COMMAND).
    pub fn sense(&self) -> Sense {
        match self {
            Violation::UnknownTtt { .. } => Sense::INVALID_TTT_RECEIVED,
            Violation::UnexpectedUnsolicited => Sense::UNEXPECTED_UNSOLICITED_DATA,
            Violation::DataSn { .. } => Sense::DATA_PHASE_ERROR,
            Violation::Offset { .. } => Sense::DATA_OFFSET_ERROR,
            Violation::TooMuch { .. } => Sense::TOO_MUCH_WRITE_DATA,
            Violation::EndedEarly { .. } => Sense::NOT_ENOUGH_UNSOLICITED_DATA,
        }
    }
}

/// Checks one Data-Out carrying `len` bytes against what the task expects.
pub fn check(e: &Expect, d: &DataOut, len: usize) -> Result<(), Violation> {
    let (expected_sn, limit) = match e.burst {
        Some(b) if d.ttt == b.ttt => (b.next_sn, b.end),
        _ if d.ttt != UNSOLICITED_TTT => return Err(Violation::UnknownTtt { got: d.ttt }),
        Some(_) => return Err(Violation::UnexpectedUnsolicited),
        None if e.unsolicited_done => return Err(Violation::UnexpectedUnsolicited),
        None => (e.unsol_data_sn, e.first_burst.min(e.edtl)),
    };
    if d.data_sn != expected_sn {
        return Err(Violation::DataSn {
            expected: expected_sn,
            got: d.data_sn,
        });
    }
    if d.buffer_offset != e.received {
        return Err(Violation::Offset {
            expected: e.received,
            got: d.buffer_offset,
        });
    }
    let end = d.buffer_offset as u64 + len as u64;
    let limit = limit.min(e.edtl);
    if end > limit as u64 {
        return Err(Violation::TooMuch { end, limit });
    }
    if e.burst.is_some() && d.final_ && end < limit as u64 {
        return Err(Violation::EndedEarly { end, limit });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(ttt: u32, sn: u32, off: u32, final_: bool) -> DataOut {
        DataOut {
            final_,
            lun: 0,
            itt: 1,
            ttt,
            exp_stat_sn: 0,
            data_sn: sn,
            buffer_offset: off,
        }
    }

    #[test]
    fn each_violation_is_named() {
        let r2t = Expect {
            received: 8192,
            edtl: 65536,
            burst: Some(Burst {
                ttt: 7,
                next_sn: 1,
                end: 16384,
            }),
            unsolicited_done: true,
            unsol_data_sn: 0,
            first_burst: 65536,
        };
        assert_eq!(check(&r2t, &d(7, 1, 8192, true), 8192), Ok(()));
        assert_eq!(check(&r2t, &d(7, 1, 8192, false), 4096), Ok(()));
        let bad = [
            (d(8, 1, 8192, true), 8192, Violation::UnknownTtt { got: 8 }),
            (
                d(UNSOLICITED_TTT, 0, 8192, true),
                8192,
                Violation::UnexpectedUnsolicited,
            ),
            (
                d(7, 0, 8192, true),
                8192,
                Violation::DataSn {
                    expected: 1,
                    got: 0,
                },
            ),
            (
                d(7, 1, 4096, false),
                4096,
                Violation::Offset {
                    expected: 8192,
                    got: 4096,
                },
            ),
            (
                d(7, 1, 8192, true),
                8704,
                Violation::TooMuch {
                    end: 16896,
                    limit: 16384,
                },
            ),
            (
                d(7, 1, 8192, true),
                4096,
                Violation::EndedEarly {
                    end: 12288,
                    limit: 16384,
                },
            ),
        ];
        for (pdu, len, v) in bad {
            assert_eq!(check(&r2t, &pdu, len), Err(v), "{pdu:?}");
        }
        // Unsolicited: up to FirstBurstLength, never after F.
        let unsol = Expect {
            received: 512,
            burst: None,
            unsolicited_done: false,
            first_burst: 4096,
            ..r2t
        };
        assert_eq!(
            check(&unsol, &d(UNSOLICITED_TTT, 0, 512, true), 3584),
            Ok(())
        );
        assert_eq!(
            check(&unsol, &d(UNSOLICITED_TTT, 0, 512, true), 4096),
            Err(Violation::TooMuch {
                end: 4608,
                limit: 4096
            })
        );
        let done = Expect {
            unsolicited_done: true,
            ..unsol
        };
        assert_eq!(
            check(&done, &d(UNSOLICITED_TTT, 0, 512, true), 512),
            Err(Violation::UnexpectedUnsolicited)
        );
        // Offsets near u32::MAX do not wrap.
        let edge = Expect {
            received: u32::MAX,
            ..unsol
        };
        assert!(check(&edge, &d(UNSOLICITED_TTT, 0, u32::MAX, true), 4096).is_err());
    }
}
