//! What a verified read checks: any bytes a target returns (network or disk), against any map
//! cells, must be classified without a panic, and a valid stamp must re-encode to its bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sanbench_engine::stamp::{inspect, Header};
use sanbench_engine::verify::{Checker, Strict, VerifyReport};

fuzz_target!(|data: &[u8]| {
    if data.len() < 4 {
        return;
    }
    let (head, buf) = data.split_at(4);
    if let Header::Stamped(s) = inspect(buf) {
        let mut again = [0u8; 40];
        s.encode(&mut again);
        assert_eq!(&again[..], &buf[..40]);
    }
    let cells: Vec<u8> = head.iter().copied().cycle().take(buf.len() / 512 + 2).collect();
    let strict = match head[0] % 3 {
        0 => Strict::No,
        1 => Strict::Stamped(None),
        _ => Strict::Stamped(Some(7)),
    };
    let io_off = (head[1] as u64) * 512;
    let mut c = Checker::new(7, 512, 512 << (head[2] % 4), strict, false);
    let mut rep = VerifyReport::default();
    c.check_durable(buf, io_off, &cells, &cells[1..], &mut rep);
    assert!(rep.bad_blocks.len() <= 20);
    assert_eq!(rep.bytes, buf.len() as u64);
});
