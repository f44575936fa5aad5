#![no_main]
//! Frames PDUs from arbitrary bytes under every digest setting, types every header, splits AHS.
use libfuzzer_sys::fuzz_target;
use sanbench_iscsi::wire::bhs::Bhs;
use sanbench_iscsi::wire::framer::{parse_ahs, parse_pdu, FrameConfig, Parsed};

fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else { return };
    let cfg = FrameConfig {
        header_digest: flags & 1 != 0,
        data_digest: flags & 2 != 0,
        max_recv_data_segment_length: if flags & 4 != 0 { 512 } else { 1 << 24 },
    };
    let mut buf = rest;
    while let Ok(Parsed::Complete { pdu, consumed }) = parse_pdu(buf, &cfg) {
        assert!(consumed > 0 && consumed <= buf.len());
        if let Ok(b) = Bhs::decode(pdu.header) {
            assert_eq!(Bhs::decode(&b.encode()).as_ref(), Ok(&b));
        }
        let _ = parse_ahs(pdu.ahs);
        buf = &buf[consumed..];
    }
});
