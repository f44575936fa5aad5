#![no_main]
//! What the sg: and bsg: engines read back from the kernel after a command: the statuses and
//! the sense data a device wrote, made into an errno and one line; and the VPD pages they
//! read at open (Block Limits, Logical Block Provisioning).
use libfuzzer_sys::fuzz_target;
use sanbench_iscsi::scsi::vpd::{BlockLimits, Provisioning};
use sanbench_iscsi::sg::io_hdr::Outcome;

fuzz_target!(|data: &[u8]| {
    if data.len() < 9 {
        return;
    }
    let (head, sense) = data.split_at(9);
    let resid = i32::from_le_bytes([head[5], head[6], head[7], head[8]]);
    let o = Outcome::from_parts(
        head[0],
        u16::from_le_bytes([head[1], head[2]]),
        u16::from_le_bytes([head[3], head[4]]),
        sense,
        resid,
    );
    let e = o.errno();
    assert!(e <= 0);
    assert_eq!(e == 0, o.ok());
    let line = o.describe();
    assert!(!line.contains('\n'));
    let _ = BlockLimits::decode(data);
    let _ = Provisioning::decode(data);
});
