//! The bsg driver's request (`struct sg_io_v4`, include/uapi/linux/bsg.h), sent with the same
//! `SG_IO` ioctl on `/dev/bsg/H:C:T:L`: the CDB as the request, the sense data as the
//! response, and the data in or out (never both: bsg refuses bidirectional SCSI). The kernel
//! fills it from the command's result as sg fills its v3 header (scsi_bsg.c): the SCSI status
//! as `device_status`, the host byte as `transport_status`, so the outcome is read into the
//! same [`Outcome`] and decoded the same way.

use super::io_hdr::{dir, Outcome};

/// `BSG_PROTOCOL_SCSI` and `BSG_SUB_PROTOCOL_SCSI_CMD`.
const PROTOCOL_SCSI: u32 = 0;
const SUB_PROTOCOL_SCSI_CMD: u32 = 0;

/// `struct sg_io_v4` (160 bytes; every pointer a `__u64`).
#[derive(Clone, Copy, Debug, Default)]
#[repr(C)]
pub struct SgIoV4 {
    pub guard: i32,
    pub protocol: u32,
    pub subprotocol: u32,
    pub request_len: u32,
    pub request: u64,
    pub request_tag: u64,
    pub request_attr: u32,
    pub request_priority: u32,
    pub request_extra: u32,
    pub max_response_len: u32,
    pub response: u64,
    pub dout_iovec_count: u32,
    pub dout_xfer_len: u32,
    pub din_iovec_count: u32,
    pub din_xfer_len: u32,
    pub dout_xferp: u64,
    pub din_xferp: u64,
    pub timeout: u32,
    pub flags: u32,
    pub usr_ptr: u64,
    pub spare_in: u32,
    pub driver_status: u32,
    pub transport_status: u32,
    pub device_status: u32,
    pub retry_delay: u32,
    pub info: u32,
    pub duration: u32,
    pub response_len: u32,
    pub din_resid: i32,
    pub dout_resid: i32,
    pub generated_tag: u64,
    pub spare_out: u32,
    pub padding: u32,
}

const _: () = {
    assert!(core::mem::size_of::<SgIoV4>() == 160);
    assert!(core::mem::offset_of!(SgIoV4, request) == 16);
    assert!(core::mem::offset_of!(SgIoV4, response) == 48);
    assert!(core::mem::offset_of!(SgIoV4, dout_xferp) == 72);
    assert!(core::mem::offset_of!(SgIoV4, timeout) == 88);
    assert!(core::mem::offset_of!(SgIoV4, driver_status) == 108);
    assert!(core::mem::offset_of!(SgIoV4, response_len) == 132);
    assert!(core::mem::offset_of!(SgIoV4, din_resid) == 136);
    assert!(core::mem::offset_of!(SgIoV4, generated_tag) == 144);
};

impl SgIoV4 {
    /// A request for `cdb` moving `data` in direction `dir` (a `dir` value of the v3
    /// header), its sense data going to `sense`, failing after `timeout_ms`.
    pub fn new(
        cdb: &[u8],
        dir: i32,
        data: (*mut u8, u32),
        sense: &mut [u8],
        timeout_ms: u32,
    ) -> SgIoV4 {
        let mut h = SgIoV4 {
            guard: b'Q' as i32,
            protocol: PROTOCOL_SCSI,
            subprotocol: SUB_PROTOCOL_SCSI_CMD,
            request_len: cdb.len() as u32,
            request: cdb.as_ptr() as u64,
            max_response_len: sense.len() as u32,
            response: sense.as_mut_ptr() as u64,
            timeout: timeout_ms,
            ..SgIoV4::default()
        };
        match dir {
            dir::TO_DEV => {
                h.dout_xfer_len = data.1;
                h.dout_xferp = data.0 as u64;
            }
            dir::FROM_DEV => {
                h.din_xfer_len = data.1;
                h.din_xferp = data.0 as u64;
            }
            _ => {}
        }
        h
    }

    /// The outcome, with the sense data the kernel wrote to `sense`.
    pub fn outcome(&self, sense: &[u8]) -> Outcome {
        let resid = if self.din_xfer_len > 0 {
            self.din_resid
        } else {
            self.dout_resid
        };
        Outcome::from_parts(
            self.device_status as u8,
            self.transport_status as u16,
            self.driver_status as u16,
            &sense[..(self.response_len as usize).min(sense.len())],
            resid,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scsi::sense::{status, Sense};

    #[test]
    fn data_goes_one_way_and_the_outcome_reads_as_v3s() {
        let cdb = [0x88u8; 16];
        let mut buf = [0u8; 4096];
        let mut sense = [0u8; 64];
        let h = SgIoV4::new(
            &cdb,
            dir::FROM_DEV,
            (buf.as_mut_ptr(), 4096),
            &mut sense,
            500,
        );
        assert_eq!(
            (h.guard, h.request_len, h.max_response_len),
            (b'Q' as i32, 16, 64)
        );
        assert_eq!((h.din_xfer_len, h.dout_xfer_len), (4096, 0));
        let h = SgIoV4::new(&cdb, dir::TO_DEV, (buf.as_mut_ptr(), 512), &mut sense, 500);
        assert_eq!((h.din_xfer_len, h.dout_xfer_len, h.din_xferp), (0, 512, 0));
        let mut h = SgIoV4::new(&cdb, dir::NONE, (std::ptr::null_mut(), 0), &mut sense, 0);
        assert_eq!((h.din_xfer_len, h.dout_xfer_len), (0, 0));
        let fixed = Sense::LBA_OUT_OF_RANGE.fixed();
        sense[..fixed.len()].copy_from_slice(&fixed);
        h.device_status = u32::from(status::CHECK_CONDITION);
        h.driver_status = 0x08;
        // The kernel claims more sense than the buffer: only the buffer is read.
        h.response_len = 1000;
        let o = h.outcome(&sense);
        assert_eq!(o.sense, Some(Sense::LBA_OUT_OF_RANGE));
        assert_eq!(o.errno(), -libc::ERANGE);
        h.response_len = 0;
        h.device_status = 0;
        h.driver_status = 0;
        assert!(h.outcome(&sense).ok());
        h.transport_status = 0x03;
        assert_eq!(h.outcome(&sense).errno(), -libc::ETIMEDOUT);
    }
}
