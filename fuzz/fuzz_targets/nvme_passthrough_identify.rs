#![no_main]
//! The Identify data the nvme-ng: engine reads from a controller through the admin ioctl:
//! the namespace's geometry, the controller's offers, and the NVM command set's limits
//! (CNS 06h), with the command limits derived from them.
use libfuzzer_sys::fuzz_target;
use sanbench_nvme::ng::cmd::{Geometry, Offers, MAX_DSM_RANGES, MAX_NLB};
use sanbench_nvme::wire::identify::IdCtrlNvm;

fuzz_target!(|data: &[u8]| {
    let geo = Geometry::decode(data);
    if let Some(g) = geo {
        assert!((9..=16).contains(&g.lbads) && g.blocks > 0);
    }
    let Some(mut o) = Offers::decode(data) else {
        return;
    };
    o.nvm = IdCtrlNvm::decode(data).ok();
    let lbads = geo.map_or(9, |g| g.lbads);
    let wz = o.write_zeroes_blocks(lbads);
    assert!((1..=MAX_NLB).contains(&wz));
    assert!((1..=MAX_DSM_RANGES).contains(&o.dsm_ranges()));
    assert!(o.dsm_range_blocks() >= 1 && o.dsm_blocks() >= 1);
    let _ = o.max_transfer();
});
