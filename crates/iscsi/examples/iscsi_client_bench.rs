//! Drives one iSCSI queue (one session) with 4 KiB random reads at depth 32 for a few seconds and prints IOPS and
//! this process's CPU time per I/O (to set beside `iscsi-perf -m 32 -b 8 -r URI`, which issues READ16 only):
//! `cargo run --release -p sanbench-iscsi --example iscsi_client_bench -- iscsi://127.0.0.1:3261/IQN/1 5 [SUBMIT_BATCH]`

use std::sync::Arc;
use std::time::{Duration, Instant};

use sanbench_engine::{Arena, Io, Op, QueueConfig};
use sanbench_iscsi::initiator::{open, InitiatorOptions};

/// (user, system) CPU seconds of this process.
fn cpu_split() -> (f64, f64) {
    // SAFETY: getrusage fills the zeroed struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer to a rusage for the call.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    (t(ru.ru_utime), t(ru.ru_stime))
}

fn cpu_secs() -> f64 {
    // SAFETY: getrusage fills the zeroed struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer to a rusage for the call.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    t(ru.ru_utime) + t(ru.ru_stime)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let uri = args
        .next()
        .unwrap_or_else(|| "iscsi://127.0.0.1:3261/iqn.2026-11.test:ram1/1".into());
    let secs: u64 = args.next().map_or(5, |s| s.parse().expect("seconds"));
    let submit_batch: u32 = args.next().map_or(8, |s| s.parse().expect("submit batch"));
    let opts = InitiatorOptions {
        submit_batch,
        ..InitiatorOptions::default()
    };
    let t = open(&uri, &opts).expect("open");
    let depth = 32u32;
    let bs = 4096u32;
    let arena = Arc::new(Arena::new(depth as usize * bs as usize));
    let mut q = t
        .open_queue(&QueueConfig {
            worker: 0,
            depth,
            max_len: bs,
            arena,
            io_timeout: Duration::from_secs(10),
        })
        .expect("queue");
    let blocks = (t.info().size.min(256 << 20) / bs as u64).max(1);
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mk = |tag: u32, r: u64| Io {
        tag,
        op: Op::Read,
        offset: (r % blocks) * bs as u64,
        len: bs,
        buf: tag as usize * bs as usize,
    };
    let first: Vec<Io> = (0..depth).map(|tag| mk(tag, next())).collect();
    q.submit(&first).expect("submit");
    let (t0, c0, s0) = (Instant::now(), cpu_secs(), cpu_split());
    let mut done = Vec::with_capacity(depth as usize);
    let mut batch = Vec::with_capacity(depth as usize);
    let mut ios = 0u64;
    while t0.elapsed() < Duration::from_secs(secs) {
        done.clear();
        q.reap(1, &mut done).expect("reap");
        batch.clear();
        for c in &done {
            assert_eq!(c.result, 0);
            batch.push(mk(c.tag, next()));
        }
        ios += done.len() as u64;
        q.submit(&batch).expect("submit");
    }
    let (el, cpu, s1) = (t0.elapsed().as_secs_f64(), cpu_secs() - c0, cpu_split());
    println!(
        "iops={:.0} client_us_per_io={:.2} (user {:.2}, system {:.2}) {:?}",
        ios as f64 / el,
        cpu * 1e6 / ios as f64,
        (s1.0 - s0.0) * 1e6 / ios as f64,
        (s1.1 - s0.1) * 1e6 / ios as f64,
        q.stats()
    );
}
