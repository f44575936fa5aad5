//! A latency histogram as one MPI rank sends it to rank 0 (sum, min, max, then HdrHistogram's
//! V2 serialization): any bytes decode or are refused without a panic, and what decodes
//! encodes back to a histogram with the same figures, and merges into another.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sanbench_stats::LatencyHistogram;

fuzz_target!(|data: &[u8]| {
    let Ok(h) = LatencyHistogram::from_bytes(data) else {
        return;
    };
    let again = LatencyHistogram::from_bytes(&h.to_bytes()).expect("own bytes decode");
    assert_eq!(again.count(), h.count());
    assert_eq!(again.summary(), h.summary());
    let mut merged = LatencyHistogram::new();
    merged.merge(&h);
    merged.merge(&again);
    let _ = merged.summary();
});
