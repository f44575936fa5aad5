//! Rank 0 of an MPI job moves the other ranks' histogram log lines to its log's base time
//! (`sanbench_stats::hist_log::rebase`): any text is a line moved or `None`, without a panic,
//! and a moved line is one line of the interval log's form with everything but its start
//! kept byte for byte.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sanbench_stats::hist_log::rebase;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    for line in text.lines() {
        for base in [0.0, 1_700_000_000.0, f64::MAX, -1.0] {
            if let Some(out) = rebase(line, base) {
                assert!(out.ends_with('\n') && out.matches('\n').count() == 1, "{out:?}");
                let tail = |l: &str| {
                    let l = l.strip_prefix("Tag=").map_or(l, |r| r.split_once(',').unwrap().1);
                    l.split_once(',').unwrap().1.to_string()
                };
                assert_eq!(tail(out.trim_end()), tail(line));
            }
        }
    }
});
