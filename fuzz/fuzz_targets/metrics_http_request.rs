//! The metrics endpoint's request head parser (`--metrics-listen`): any bytes are a request,
//! "incomplete" or one error, without a panic; nothing beyond the size bound is ever needed,
//! and a request's path is a prefix-free slice of its target (no query).
#![no_main]

use libfuzzer_sys::fuzz_target;
use sanbench_metrics::http::{parse, HttpError, MAX_HEAD};

fuzz_target!(|data: &[u8]| {
    match parse(data) {
        Ok(Some((req, used))) => {
            assert!(used <= data.len() && used <= MAX_HEAD + 4);
            assert!(req.path.starts_with('/') && !req.path.contains('?'));
            assert!(req.minor <= 1);
        }
        Ok(None) => assert!(data.len() < MAX_HEAD),
        Err(HttpError::TooLarge) => assert!(data.len() >= MAX_HEAD),
        Err(_) => {}
    }
});
