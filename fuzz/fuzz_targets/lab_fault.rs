//! `--fault AT:LINK:ACTION` schedules and `lab fault` actions as the lab parses them (a
//! command line, a script): any text is taken or refused without a panic; what is taken
//! prints back to itself (AT, link, action), in time order; a refusal is one line. The
//! kernel's `tc qdisc show` text, which the lab reads back, never panics its reader.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sanbench_lab::fault::{leaf_kind, parse_schedule, FaultAction, Scheduled};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    match parse_schedule(&[text.to_string()]) {
        Ok(s) => {
            assert!(s.windows(2).all(|w| w[0].at <= w[1].at));
            for f in &s {
                let again = Scheduled::parse(&f.to_string()).expect("prints back");
                assert_eq!(&again, f);
            }
        }
        Err(e) => assert!(!e.to_string().contains('\n') || text.contains('\n'), "{e}"),
    }
    if let Ok(a) = FaultAction::parse(&text) {
        assert_eq!(FaultAction::parse(&a.to_string()).unwrap(), a);
    }
    let _ = leaf_kind(&text);
});
