#![no_main]
//! Frames NVMe/TCP PDUs from arbitrary bytes under every digest setting and types each one.
use libfuzzer_sys::fuzz_target;
use sanbench_nvme::wire::pdu::{parse_pdu, RxConfig};
use sanbench_nvme::wire::Parsed;

fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else { return };
    let cfg = RxConfig {
        header_digest: flags & 1 != 0,
        data_digest: flags & 2 != 0,
        max_data: if flags & 4 != 0 { 512 } else { 1 << 20 },
    };
    let mut buf = rest;
    while let Ok(Parsed::Complete { pdu, consumed }) = parse_pdu(buf, &cfg) {
        assert!(consumed > 0 && consumed <= buf.len());
        let _ = pdu.decode();
        buf = &buf[consumed..];
    }
});
