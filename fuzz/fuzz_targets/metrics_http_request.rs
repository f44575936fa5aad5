//! The metrics endpoint's request head parser (`--metrics-listen`): any bytes are a request,
//! "incomplete" or one error, without a panic; nothing beyond the size bound is ever needed,
//! a request's path is a prefix-free slice of its target (no query), and its `Accept` value
//! always negotiates a format (OpenMetrics only when it names it).
#![no_main]

use libfuzzer_sys::fuzz_target;
use sanbench_metrics::expo::Format;
use sanbench_metrics::http::{parse, HttpError, MAX_HEAD};

fuzz_target!(|data: &[u8]| {
    match parse(data) {
        Ok(Some((req, used))) => {
            assert!(used <= data.len() && used <= MAX_HEAD + 4);
            assert!(req.path.starts_with('/') && !req.path.contains('?'));
            assert!(req.minor <= 1);
            let f = Format::negotiate(req.accept);
            if f == Format::OpenMetrics {
                let a = req.accept.unwrap_or_default().to_ascii_lowercase();
                assert!(a.contains("application/openmetrics-text"), "{a}");
            }
        }
        Ok(None) => assert!(data.len() < MAX_HEAD),
        Err(HttpError::TooLarge) => assert!(data.len() >= MAX_HEAD),
        Err(_) => {}
    }
});
