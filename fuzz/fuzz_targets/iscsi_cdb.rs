#![no_main]
//! Decodes CDBs and sense data; decoded CDBs must survive encode -> decode.
use libfuzzer_sys::fuzz_target;
use sanbench_iscsi::scsi::cdb::Cdb;
use sanbench_iscsi::scsi::sense::Sense;

fuzz_target!(|data: &[u8]| {
    if let Ok(c) = Cdb::decode(data) {
        let (b, n) = c.encode();
        assert_eq!(Cdb::decode(&b[..n]), Ok(c));
    }
    let _ = Sense::decode(data);
});
