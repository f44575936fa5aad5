#![no_main]
//! Decodes any bytes as each Identify data structure a host reads.
use libfuzzer_sys::fuzz_target;
use sanbench_nvme::wire::identify::{decode_ns_descs, decode_ns_list, IdCtrl, IdNs};

fuzz_target!(|data: &[u8]| {
    let _ = IdCtrl::decode(data);
    if let Ok(ns) = IdNs::decode(data) {
        let _ = ns.block_size();
    }
    let _ = decode_ns_list(data);
    let _ = decode_ns_descs(data);
});
