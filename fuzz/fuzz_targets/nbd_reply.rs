//! Transmission-phase replies (simple and structured chunks) as the client decodes them.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sanbench_nbd::wire::transmission::{Chunk, ReplyHeader};
use sanbench_nbd::wire::Parsed;

fuzz_target!(|data: &[u8]| {
    let mut rest = data;
    while let Ok(Parsed::Done { value, len }) = ReplyHeader::decode(rest) {
        assert!(len <= rest.len());
        rest = &rest[len..];
        if let ReplyHeader::Structured { kind, len, .. } = value {
            let n = (len as usize).min(rest.len());
            if let Ok(Chunk::OffsetData { data, .. }) = Chunk::decode(kind, &rest[..n]) {
                assert!(data.len() + 8 == n);
            }
            rest = &rest[n..];
        }
    }
});
