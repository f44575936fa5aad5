//! The SCSI generic driver's v3 request (`struct sg_io_hdr`, include/scsi/sg.h) and how its
//! outcome becomes the engine's errno and a message: the SCSI status, the host adapter's and
//! the driver's statuses, and the sense data decoded (sense key, ASC/ASCQ named for the ones a
//! block workload meets).

use crate::scsi::sense::{key, status, Sense};

/// `SG_IO`: the blocking request ioctl.
pub const SG_IO: u32 = 0x2285;

/// `dxfer_direction` values.
pub mod dir {
    pub const NONE: i32 = -1;
    pub const TO_DEV: i32 = -2;
    pub const FROM_DEV: i32 = -3;
}

/// `struct sg_io_hdr` (64-bit layout: 88 bytes).
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub struct SgIoHdr {
    pub interface_id: i32,
    pub dxfer_direction: i32,
    pub cmd_len: u8,
    pub mx_sb_len: u8,
    pub iovec_count: u16,
    pub dxfer_len: u32,
    pub dxferp: *mut u8,
    pub cmdp: *const u8,
    pub sbp: *mut u8,
    pub timeout: u32,
    pub flags: u32,
    pub pack_id: i32,
    pub usr_ptr: *mut u8,
    pub status: u8,
    pub masked_status: u8,
    pub msg_status: u8,
    pub sb_len_wr: u8,
    pub host_status: u16,
    pub driver_status: u16,
    pub resid: i32,
    pub duration: u32,
    pub info: u32,
}

#[cfg(target_pointer_width = "64")]
const _: () = {
    assert!(core::mem::size_of::<SgIoHdr>() == 88);
    assert!(core::mem::offset_of!(SgIoHdr, dxferp) == 16);
    assert!(core::mem::offset_of!(SgIoHdr, timeout) == 40);
    assert!(core::mem::offset_of!(SgIoHdr, status) == 64);
    assert!(core::mem::offset_of!(SgIoHdr, resid) == 72);
};

impl SgIoHdr {
    /// A request for `cdb` moving `data` in direction `dir` (`dir::NONE` with an empty
    /// slice), its sense data going to `sense`, failing after `timeout_ms`.
    pub fn new(
        cdb: &[u8],
        dir: i32,
        data: (*mut u8, u32),
        sense: &mut [u8],
        timeout_ms: u32,
    ) -> SgIoHdr {
        SgIoHdr {
            interface_id: b'S' as i32,
            dxfer_direction: dir,
            cmd_len: cdb.len() as u8,
            mx_sb_len: sense.len().min(255) as u8,
            iovec_count: 0,
            dxfer_len: data.1,
            dxferp: data.0,
            cmdp: cdb.as_ptr(),
            sbp: sense.as_mut_ptr(),
            timeout: timeout_ms,
            flags: 0,
            pack_id: 0,
            usr_ptr: std::ptr::null_mut(),
            status: 0,
            masked_status: 0,
            msg_status: 0,
            sb_len_wr: 0,
            host_status: 0,
            driver_status: 0,
            resid: 0,
            duration: 0,
            info: 0,
        }
    }
}

/// A request's outcome, read from the header after `SG_IO` returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub status: u8,
    pub host_status: u16,
    pub driver_status: u16,
    pub sense: Option<Sense>,
    pub resid: i32,
}

/// `host_status` values (the kernel's DID_*), named for messages.
fn host_name(h: u16) -> &'static str {
    match h {
        0x01 => "no connect",
        0x02 => "bus busy",
        0x03 => "timed out",
        0x04 => "bad target",
        0x05 => "aborted",
        0x06 => "parity error",
        0x07 => "host error",
        0x08 => "reset",
        0x0b => "soft error (retry)",
        0x0e => "transport disrupted",
        0x0f => "transport failfast",
        0x11 => "transport marginal",
        _ => "host status",
    }
}

/// The sense keys by name (SPC-5 Table 52).
fn key_name(k: u8) -> &'static str {
    match k {
        key::NO_SENSE => "NO SENSE",
        0x1 => "RECOVERED ERROR",
        key::NOT_READY => "NOT READY",
        key::MEDIUM_ERROR => "MEDIUM ERROR",
        key::HARDWARE_ERROR => "HARDWARE ERROR",
        key::ILLEGAL_REQUEST => "ILLEGAL REQUEST",
        key::UNIT_ATTENTION => "UNIT ATTENTION",
        key::DATA_PROTECT => "DATA PROTECT",
        0x8 => "BLANK CHECK",
        key::ABORTED_COMMAND => "ABORTED COMMAND",
        key::MISCOMPARE => "MISCOMPARE",
        _ => "sense key",
    }
}

/// The additional sense codes a block workload meets (SPC-5 Annex F), by (ASC, ASCQ).
fn asc_name(asc: u8, ascq: u8) -> Option<&'static str> {
    Some(match (asc, ascq) {
        (0x04, _) => "logical unit not ready",
        (0x0c, 0x00) => "write error",
        (0x11, 0x00) => "unrecovered read error",
        (0x1a, 0x00) => "parameter list length error",
        (0x20, 0x00) => "invalid command operation code",
        (0x21, 0x00) => "logical block address out of range",
        (0x24, 0x00) => "invalid field in CDB",
        (0x25, 0x00) => "logical unit not supported",
        (0x26, 0x00) => "invalid field in parameter list",
        (0x27, _) => "write protected",
        (0x28, 0x00) => "not ready to ready change, medium may have changed",
        (0x29, _) => "power on, reset, or bus device reset occurred",
        (0x2a, _) => "parameters changed",
        (0x3a, _) => "medium not present",
        (0x44, 0x00) => "internal target failure",
        _ => return None,
    })
}

impl Outcome {
    pub fn read(h: &SgIoHdr, sense: &[u8]) -> Outcome {
        let n = (h.sb_len_wr as usize).min(sense.len());
        Outcome::from_parts(
            h.status,
            h.host_status,
            h.driver_status,
            &sense[..n],
            h.resid,
        )
    }

    /// The outcome of the statuses and the sense bytes written (of either header).
    pub fn from_parts(
        status: u8,
        host_status: u16,
        driver_status: u16,
        sense: &[u8],
        resid: i32,
    ) -> Outcome {
        Outcome {
            status,
            host_status,
            driver_status,
            sense: (!sense.is_empty()).then(|| Sense::decode(sense)).flatten(),
            resid,
        }
    }

    /// Whether the command completed as asked (GOOD, or CHECK CONDITION with RECOVERED
    /// ERROR / NO SENSE: the data moved).
    pub fn ok(&self) -> bool {
        if self.host_status != 0 {
            return false;
        }
        match self.status {
            status::GOOD | status::CONDITION_MET => true,
            status::CHECK_CONDITION => {
                matches!(self.sense, Some(s) if s.key == key::NO_SENSE || s.key == 0x1)
            }
            _ => self.driver_status & 0x0f == 0 && self.status == 0,
        }
    }

    /// The errno the engine completes the I/O with: 0, or what Linux's block layer gives the
    /// same failure (blk_status_to_errno of scsi_result_to_blk_status).
    pub fn errno(&self) -> i32 {
        if self.ok() {
            return 0;
        }
        if self.host_status != 0 {
            return match self.host_status {
                0x03 => -libc::ETIMEDOUT,
                0x01 | 0x0e | 0x0f | 0x11 => -libc::ENOLINK,
                _ => -libc::EIO,
            };
        }
        match self.status {
            status::BUSY | status::TASK_SET_FULL => -libc::EBUSY,
            status::RESERVATION_CONFLICT => -libc::EBADE,
            _ => match self.sense {
                Some(s) if s.key == key::ILLEGAL_REQUEST && s.asc == 0x20 => -libc::EOPNOTSUPP,
                Some(s) if s.key == key::ILLEGAL_REQUEST && s.asc == 0x21 => -libc::ERANGE,
                Some(s) if s.key == key::ILLEGAL_REQUEST => -libc::EINVAL,
                Some(s) if s.key == key::DATA_PROTECT => -libc::EROFS,
                Some(s) if s.key == key::MISCOMPARE => -libc::EILSEQ,
                Some(s) if s.key == key::NOT_READY => -libc::EAGAIN,
                _ => -libc::EIO,
            },
        }
    }

    /// One line saying what went wrong.
    pub fn describe(&self) -> String {
        if self.host_status != 0 {
            return format!(
                "{} (host status {:#04x})",
                host_name(self.host_status),
                self.host_status
            );
        }
        let st = match self.status {
            status::GOOD => "GOOD",
            status::CHECK_CONDITION => "CHECK CONDITION",
            status::BUSY => "BUSY",
            status::RESERVATION_CONFLICT => "RESERVATION CONFLICT",
            status::TASK_SET_FULL => "TASK SET FULL",
            status::TASK_ABORTED => "TASK ABORTED",
            _ => "status",
        };
        let mut s = format!("{st} ({:#04x})", self.status);
        match self.sense {
            Some(sense) => {
                s.push_str(&format!(
                    ": {}, ASC/ASCQ {:02x}h/{:02x}h",
                    key_name(sense.key),
                    sense.asc,
                    sense.ascq
                ));
                if let Some(n) = asc_name(sense.asc, sense.ascq) {
                    s.push_str(&format!(" ({n})"));
                }
                if let Some(f) = sense.field {
                    s.push_str(&format!(
                        ", field at {} byte {}",
                        if f.in_cdb { "CDB" } else { "parameter" },
                        f.byte
                    ));
                }
            }
            None if self.status == status::CHECK_CONDITION => s.push_str(": no sense data"),
            None => {}
        }
        if self.driver_status != 0 {
            s.push_str(&format!(", driver status {:#04x}", self.driver_status));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(status: u8, host: u16, sense: Option<Sense>) -> Outcome {
        Outcome {
            status,
            host_status: host,
            driver_status: if sense.is_some() { 0x08 } else { 0 },
            sense,
            resid: 0,
        }
    }

    #[test]
    fn good_and_recovered_complete() {
        assert_eq!(outcome(0, 0, None).errno(), 0);
        let rec = Sense::new(0x1, 0x17, 0x01);
        assert_eq!(outcome(status::CHECK_CONDITION, 0, Some(rec)).errno(), 0);
    }

    #[test]
    fn sense_becomes_errno_and_a_clear_line() {
        let o = outcome(status::CHECK_CONDITION, 0, Some(Sense::LBA_OUT_OF_RANGE));
        assert_eq!(o.errno(), -libc::ERANGE);
        assert_eq!(
            o.describe(),
            "CHECK CONDITION (0x02): ILLEGAL REQUEST, ASC/ASCQ 21h/00h (logical block address \
             out of range), driver status 0x08"
        );
        let o = outcome(
            status::CHECK_CONDITION,
            0,
            Some(Sense::INVALID_FIELD_IN_CDB.with_field(true, 1, None)),
        );
        assert_eq!(o.errno(), -libc::EINVAL);
        assert!(
            o.describe()
                .contains("invalid field in CDB), field at CDB byte 1"),
            "{}",
            o.describe()
        );
        let o = outcome(status::CHECK_CONDITION, 0, Some(Sense::INVALID_OPCODE));
        assert_eq!(o.errno(), -libc::EOPNOTSUPP);
        let o = outcome(status::CHECK_CONDITION, 0, Some(Sense::READ_ERROR));
        assert_eq!(o.errno(), -libc::EIO);
        assert!(o.describe().contains("MEDIUM ERROR"), "{}", o.describe());
        let o = outcome(status::CHECK_CONDITION, 0, None);
        assert_eq!(o.errno(), -libc::EIO);
        assert!(o.describe().ends_with("no sense data"), "{}", o.describe());
    }

    #[test]
    fn host_and_status_failures() {
        let o = outcome(0, 0x03, None);
        assert_eq!(
            (o.errno(), o.describe().as_str()),
            (-libc::ETIMEDOUT, "timed out (host status 0x03)")
        );
        assert_eq!(outcome(0, 0x0e, None).errno(), -libc::ENOLINK);
        assert_eq!(outcome(status::BUSY, 0, None).errno(), -libc::EBUSY);
        assert_eq!(
            outcome(status::RESERVATION_CONFLICT, 0, None).errno(),
            -libc::EBADE
        );
    }

    #[test]
    fn sense_read_from_the_header_is_bounded() {
        let mut sense = Sense::LBA_OUT_OF_RANGE.fixed().to_vec();
        let cdb = [0u8; 16];
        let mut h = SgIoHdr::new(&cdb, dir::NONE, (std::ptr::null_mut(), 0), &mut sense, 1000);
        assert_eq!(
            (h.interface_id, h.cmd_len, h.mx_sb_len),
            (b'S' as i32, 16, 18)
        );
        h.status = status::CHECK_CONDITION;
        // The driver claims more sense than the buffer holds: only the buffer is read.
        h.sb_len_wr = 200;
        let o = Outcome::read(&h, &sense);
        assert_eq!(o.sense, Some(Sense::LBA_OUT_OF_RANGE));
        h.sb_len_wr = 0;
        assert_eq!(Outcome::read(&h, &sense).sense, None);
    }
}
