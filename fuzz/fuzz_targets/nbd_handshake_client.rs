//! Bytes a server sends during the handshake, as the client decodes them.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sanbench_nbd::wire::handshake::{ExportNameReply, Greeting, OptionReply};
use sanbench_nbd::wire::Parsed;

fuzz_target!(|data: &[u8]| {
    if let Ok(Parsed::Done { len, .. }) = Greeting::decode(data) {
        assert!(len <= data.len());
    }
    // Walk a stream of option replies as the client would.
    let mut rest = data;
    while let Ok(Parsed::Done { len, .. }) = OptionReply::decode(rest) {
        assert!(len > 0 && len <= rest.len());
        rest = &rest[len..];
    }
    for nz in [false, true] {
        if let Ok(Parsed::Done { len, .. }) = ExportNameReply::decode(data, nz) {
            assert!(len <= data.len());
        }
    }
});
