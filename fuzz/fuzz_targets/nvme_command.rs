#![no_main]
//! Types any 64 bytes as an SQE on the admin and an I/O queue, with its SGL; the bytes after
//! it as Connect data and as Dataset Management ranges.
use libfuzzer_sys::fuzz_target;
use sanbench_nvme::wire::cmd::{Command, DataPtr, DsmRange, DSM_RANGE_LEN};
use sanbench_nvme::wire::fabrics::{nqn_str, ConnectData};
use sanbench_nvme::wire::header::Sqe;
use zerocopy::FromBytes;

fuzz_target!(|data: &[u8]| {
    let Ok((sqe, rest)) = Sqe::read_from_prefix(data) else { return };
    let _ = Command::parse(&sqe, true);
    let _ = Command::parse(&sqe, false);
    let _ = DataPtr::parse(&sqe.dptr);
    assert_eq!(DsmRange::parse_all(rest).count(), rest.len() / DSM_RANGE_LEN);
    if let Ok(d) = ConnectData::parse(rest) {
        let _ = nqn_str(&d.subsysnqn);
        let _ = nqn_str(&d.hostnqn);
    }
});
