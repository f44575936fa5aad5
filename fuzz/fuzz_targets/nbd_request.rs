//! Transmission-phase requests as the server decodes them (headers and skipped payloads).
#![no_main]

use libfuzzer_sys::fuzz_target;
use sanbench_nbd::wire::transmission::Request;
use sanbench_nbd::wire::Parsed;

fuzz_target!(|data: &[u8]| {
    let mut rest = data;
    while let Ok(Parsed::Done { value, len }) = Request::decode(rest) {
        assert!(len <= rest.len());
        let mut again = Vec::new();
        value.encode(&mut again);
        assert_eq!(&again[..], &rest[..len]);
        rest = &rest[len..];
        if value.has_payload() {
            let skip = (value.len as usize).min(rest.len());
            rest = &rest[skip..];
        }
    }
});
