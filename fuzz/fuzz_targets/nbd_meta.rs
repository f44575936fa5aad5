//! Metadata-context payloads and block status chunks: what a server decodes from a client's
//! NBD_OPT_SET_META_CONTEXT, and what the client decodes from the server's replies.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sanbench_nbd::wire::meta::{BlockStatus, MetaContext, MetaContextQuery};

fuzz_target!(|data: &[u8]| {
    if let Ok(q) = MetaContextQuery::decode(data) {
        let mut again = Vec::new();
        q.encode(&mut again);
        assert_eq!(again, data);
    }
    let _ = MetaContext::decode(data);
    if let Ok(bs) = BlockStatus::decode(data) {
        assert_eq!(bs.extents().count() * 8 + 4, data.len());
        assert!(bs.extents().all(|e| e.length > 0));
    }
});
