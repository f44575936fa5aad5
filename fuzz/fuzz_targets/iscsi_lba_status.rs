#![no_main]
//! GET LBA STATUS parameter data as the initiator decodes it from a target's Data-In.
use libfuzzer_sys::fuzz_target;
use sanbench_iscsi::scsi::lba_status::decode;

fuzz_target!(|data: &[u8]| {
    if let Ok(ds) = decode(data) {
        assert!(ds.len() * 16 + 8 <= data.len());
        assert!(ds.iter().all(|d| d.blocks > 0 && d.provisioning < 16));
    }
});
