#![no_main]
//! The Block Limits (B0h) and Logical Block Provisioning (B2h) VPD pages as the initiator
//! decodes them from a target's Data-In, and the granule arithmetic their fields feed.
use libfuzzer_sys::fuzz_target;
use sanbench_iscsi::scsi::vpd::{granular, BlockLimits, Provisioning};

fuzz_target!(|data: &[u8]| {
    if let Some(l) = BlockLimits::decode(data) {
        if data.len() < 24 {
            assert_eq!(l.max_unmap_lbas, 0);
        }
        let lba = l.max_write_same;
        if let Some((s, n)) = granular(lba, l.max_transfer as u64, l.unmap_granularity, l.unmap_alignment.unwrap_or(0)) {
            assert!(s >= lba && n > 0 && s + n <= lba + l.max_transfer as u64);
        }
    }
    if let Some(p) = Provisioning::decode(data) {
        assert!(p.lbprz < 8 && p.kind < 8);
    }
});
