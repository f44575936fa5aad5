#![no_main]
//! An UNMAP parameter list as the target decodes it from an initiator's Data-Out; what it
//! yields encodes back to a list that decodes the same.
use libfuzzer_sys::fuzz_target;
use sanbench_iscsi::scsi::unmap::{decode, encode};

fuzz_target!(|data: &[u8]| {
    if let Ok(ds) = decode(data, 256) {
        assert!(ds.len() <= 256 && 8 + 16 * ds.len() <= data.len().max(8));
        let ranges: Vec<(u64, u64)> = ds.iter().map(|&(l, n)| (l, n as u64)).collect();
        let mut out = vec![0u8; 8 + 16 * ranges.len()];
        let n = encode(&ranges, &mut out);
        assert_eq!(decode(&out[..n], 256), Ok(ds));
    }
});
