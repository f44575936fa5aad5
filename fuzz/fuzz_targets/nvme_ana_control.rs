#![no_main]
//! The control socket's request and reply parsers (`serve nvme --control`) on any text: one
//! line of error or a typed value, never a panic; a request's settings print back to a
//! request that parses the same.
use libfuzzer_sys::fuzz_target;
use sanbench_nvme::target::control::{parse_reply, parse_request, Request};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match parse_request(text) {
        Ok(Request::Set(s)) => {
            let line: String = std::iter::once("ana".to_string())
                .chain(s.iter().map(|a| format!("{}={}", a.port, a.state)))
                .collect::<Vec<_>>()
                .join(" ");
            assert_eq!(parse_request(&line), Ok(Request::Set(s)));
        }
        Ok(Request::Get) => {}
        Err(e) => assert!(!e.contains('\n'), "{e}"),
    }
    let _ = parse_reply(text);
});
