//! Runs the target until killed: `cargo run --release -p sanbench-iscsi --example target -- 127.0.0.1:3260 [SIZE_GIB]`
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use sanbench_iscsi::target::{Target, TargetConfig};

fn main() {
    let mut args = std::env::args().skip(1);
    let mut cfg = TargetConfig::default();
    if let Some(a) = args.next() {
        cfg.listen = a.parse().expect("listen address like 127.0.0.1:3260");
    }
    if let Some(s) = args.next() {
        cfg.lun_size = s.parse::<u64>().expect("size in GiB") << 30;
    }
    let t = Target::bind(cfg).expect("bind");
    eprintln!("listening on {}", t.local_addr());
    t.run(Arc::new(AtomicBool::new(false))).expect("run");
}
