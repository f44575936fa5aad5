#![no_main]
//! Decodes any bytes as a discovery log page (what `sanbench discover` reads from a network
//! peer).
use libfuzzer_sys::fuzz_target;
use sanbench_nvme::wire::discovery;

fuzz_target!(|data: &[u8]| {
    if let Ok((_, recs)) = discovery::decode(data) {
        for r in recs {
            let _ = (r.trtype_name(), r.adrfam_name(), r.subtype_name());
        }
    }
});
