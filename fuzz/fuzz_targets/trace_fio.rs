//! fio iologs (v2 and v3) as `sanbench replay` reads them, through the checks of trace_common.rs.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "trace_common.rs"]
mod common;

fuzz_target!(|data: &[u8]| common::check(sanbench_trace::Format::Fio, data));
