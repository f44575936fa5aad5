//! A run's output as an MPI rank sends it to rank 0 (JSON, histograms as base64 V2): any bytes
//! decode or are refused without a panic, and what decodes merges with itself (as rank 0
//! merges every rank's) and encodes again.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sanbench_engine::run::wire;

fuzz_target!(|data: &[u8]| {
    let Ok(out) = wire::decode(data) else {
        return;
    };
    if let Some(m) = wire::merge(&[out.clone(), out]) {
        let _ = wire::decode(&wire::encode(&m));
    }
});
