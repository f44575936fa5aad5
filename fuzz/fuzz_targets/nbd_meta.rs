//! Metadata context bytes: the data of NBD_OPT_LIST/SET_META_CONTEXT as the server decodes
//! it, and NBD_REPLY_TYPE_BLOCK_STATUS payloads as the client decodes them.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sanbench_nbd::wire::meta::{BlockStatus, MetaContextRequest};

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = MetaContextRequest::decode(data) {
        // Decoding is exact: re-encoding gives the same bytes back.
        let mut again = Vec::new();
        m.encode(&mut again);
        assert_eq!(&again[..], data);
    }
    if let Ok(s) = BlockStatus::decode(data) {
        assert!(!s.extents.is_empty() && s.extents.iter().all(|e| e.len > 0));
        assert_eq!(s.extents.len() * 8 + 4, data.len());
        let mut again = Vec::new();
        s.encode(0, 0, &mut again);
        assert_eq!(&again[20..], data);
    }
});
