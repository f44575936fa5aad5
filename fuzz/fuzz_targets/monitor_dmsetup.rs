//! `dmsetup table` and `dmsetup status` output of a multipath map, as the monitor parses it
//! to label a dm-multipath device's paths: any text is taken or refused without a panic, and
//! what is taken never lists more paths than the text has words.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sanbench_monitor::transport::dmsetup::{parse_status, parse_table};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let words = text.split_ascii_whitespace().count();
    if let Some(t) = parse_table(&text) {
        let paths: usize = t.groups.iter().map(|g| g.paths.len()).sum();
        assert!(paths + t.features.len() + t.hw_handler.len() <= words);
        assert!(t.groups.iter().all(|g| !g.selector.is_empty()));
    }
    if let Some(s) = parse_status(&text) {
        let paths: usize = s.groups.iter().map(|g| g.paths.len()).sum();
        assert!(paths * 3 <= words);
        assert!(s.groups.iter().flat_map(|g| &g.paths).all(|p| !p.dev.is_empty()));
    }
});
