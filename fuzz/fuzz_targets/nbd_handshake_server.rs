//! Bytes a client sends during the handshake, as the server decodes them.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sanbench_nbd::wire::handshake::{decode_client_flags, ClientOption};
use sanbench_nbd::wire::Parsed;

fuzz_target!(|data: &[u8]| {
    let mut rest = data;
    if let Ok(Parsed::Done { len, .. }) = decode_client_flags(rest) {
        rest = &rest[len..];
    }
    while let Ok(Parsed::Done { value, len }) = ClientOption::decode(rest) {
        assert!(len > 0 && len <= rest.len());
        // Re-encoding a decoded option must give the same bytes back, except for
        // ABORT (which ignores its payload).
        let mut again = Vec::new();
        value.encode(&mut again);
        if !matches!(value, ClientOption::Abort) {
            assert_eq!(&again[..], &rest[..len]);
        }
        rest = &rest[len..];
    }
});
