//! A latency histogram as a result document carries it (HdrHistogram's V2 compressed encoding
//! in base64, `histogram` of sanbench.run/2): any text decodes or is refused without a panic
//! or a large allocation, and what decodes encodes back to the same buckets. The bytes are
//! tried both as the text itself and base64-encoded (to reach the zlib stream and the V2
//! header behind it).
#![no_main]

use base64::Engine as _;
use libfuzzer_sys::fuzz_target;
use sanbench_stats::LatencyHistogram;

fuzz_target!(|data: &[u8]| {
    let encoded = base64::engine::general_purpose::STANDARD.encode(data);
    let texts = [String::from_utf8_lossy(data).into_owned(), encoded];
    for text in &texts {
        let Ok(h) = LatencyHistogram::from_hdr_base64(text) else {
            continue;
        };
        let again = LatencyHistogram::from_hdr_base64(&h.to_hdr_base64()).expect("own text decodes");
        assert_eq!(again.buckets(), h.buckets());
        let _ = again.summary();
    }
});
