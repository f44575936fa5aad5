#![no_main]
//! Types any 16 bytes as a completion entry the way a host reads one from a CapsuleResp: the
//! status (and its message), and the result as the properties the host reads (CAP).
use libfuzzer_sys::fuzz_target;
use sanbench_nvme::wire::fabrics::prop;
use sanbench_nvme::wire::header::Cqe;
use sanbench_nvme::wire::status::Status;
use zerocopy::FromBytes;

fuzz_target!(|data: &[u8]| {
    let Ok((cqe, _)) = Cqe::read_from_prefix(data) else { return };
    let st = Status::from_field(cqe.status.get());
    assert_eq!(Status::from_field(st.to_field()), st);
    let _ = (st.is_success(), st.to_string());
    let cap = cqe.result.get();
    let _ = (prop::cap_mqes(cap), prop::cap_timeout_ms(cap));
});
