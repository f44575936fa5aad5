#![no_main]
//! Decodes any bytes as an ANA log page (what the host reads from a controller), and checks
//! that a page it accepts re-encodes to one that decodes the same, with and without RGO.
use libfuzzer_sys::fuzz_target;
use sanbench_nvme::wire::ana::AnaLog;

fuzz_target!(|data: &[u8]| {
    if let Ok(log) = AnaLog::decode(data) {
        assert!(log.len() <= data.len());
        let again = AnaLog::decode(&log.encode(false)).expect("re-encoded page");
        assert_eq!(again, log);
        let groups = AnaLog::decode(&log.encode(true)).expect("groups only");
        assert_eq!(groups.groups.len(), log.groups.len());
        let _ = log.state_of(1, 1);
    }
});
