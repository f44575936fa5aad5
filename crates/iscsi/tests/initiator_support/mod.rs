//! Shared pieces of the initiator's interop tests: tgtd (from sanbench-testkit), our own target
//! on a thread, and a write/read/verify driver that behaves like the scheduler (tags below
//! depth, one arena region per tag).

#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use sanbench_io::arena::fill_random;
use sanbench_io::{Arena, Completion, Io, Op, Queue, QueueConfig, Target};
use sanbench_iscsi::target::{Target as OurTarget, TargetConfig};
use sanbench_iscsi::wire::chap::Credentials;

/// Arena bytes per tag: the largest I/O the tests issue.
pub const SLOT: usize = 1 << 20;

/// Our own target on 127.0.0.1:0 in a thread; stopped and joined when dropped.
pub struct Ours {
    pub addr: SocketAddr,
    pub iqn: String,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Ours {
    pub fn start(size: u64, chap: Option<(&str, &str)>) -> Ours {
        let cfg = TargetConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            lun_size: size,
            chap: chap.map(|(u, s)| Credentials::new(u, s)),
            ..TargetConfig::default()
        };
        let iqn = cfg.iqn.clone();
        let t = OurTarget::bind(cfg).expect("bind our target");
        let addr = t.local_addr();
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = Some(std::thread::spawn(move || {
            let _ = t.run(s);
        }));
        Ours {
            addr,
            iqn,
            stop,
            thread,
        }
    }

    pub fn uri(&self, cred: Option<(&str, &str)>) -> String {
        let c = cred.map_or(String::new(), |(u, s)| format!("{u}%{s}@"));
        format!("iscsi://{c}{}/{}/0", self.addr, self.iqn)
    }
}

impl Drop for Ours {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

pub fn qcfg(depth: u32, arena: &Arc<Arena>, timeout: Duration) -> QueueConfig {
    QueueConfig {
        worker: 0,
        depth,
        max_len: SLOT as u32,
        arena: arena.clone(),
        io_timeout: timeout,
        socket_ring: None,
    }
}

/// What a data run saw.
#[derive(Debug, Default)]
pub struct RunReport {
    pub ios: usize,
    /// Completions that arrived before an I/O submitted earlier.
    pub out_of_order: usize,
    /// The queue's stats after the read pass (`write_read_verify`; empty otherwise).
    pub stats: std::collections::BTreeMap<String, serde_json::Value>,
}

/// Drives `ios` through `q` with at most `depth` in flight, like the scheduler: each I/O uses
/// the arena slot of its tag. `before` prepares a slot before submission, `after` checks it on
/// completion.
pub fn drive(
    q: &mut dyn Queue,
    arena: &Arena,
    depth: u32,
    ios: &[(Op, u64, u32, u64)],
    mut before: impl FnMut(&mut [u8], u64, Op),
    mut after: impl FnMut(&[u8], u64, Op, i32),
) -> RunReport {
    let mut free: Vec<u32> = (0..depth).rev().collect();
    let mut slot_io: Vec<Option<(usize, u64)>> = vec![None; depth as usize];
    let mut next = 0usize;
    let mut seq = 0u64;
    let mut rep = RunReport::default();
    let mut done: Vec<Completion> = Vec::new();
    let mut finished = 0;
    while finished < ios.len() {
        let mut batch = Vec::new();
        while next < ios.len() && batch.len() < 8 {
            let Some(tag) = free.pop() else { break };
            let (op, offset, len, seed) = ios[next];
            let buf = tag as usize * SLOT;
            // SAFETY (test): the slot of a free tag is not in flight.
            before(unsafe { arena.slice_mut(buf, len as usize) }, seed, op);
            batch.push(Io {
                fua: false,
                tag,
                op,
                offset,
                len,
                buf,
            });
            slot_io[tag as usize] = Some((next, seq));
            seq += 1;
            next += 1;
        }
        if !batch.is_empty() {
            q.submit(&batch).expect("submit");
        }
        done.clear();
        q.reap(1, &mut done).expect("reap");
        let mut oldest = slot_io.iter().flatten().map(|s| s.1).min().unwrap_or(0);
        for c in &done {
            let (i, s) = slot_io[c.tag as usize]
                .take()
                .expect("completion for a free tag");
            if s != oldest {
                rep.out_of_order += 1;
            }
            oldest = slot_io.iter().flatten().map(|s| s.1).min().unwrap_or(0);
            let (op, _, len, seed) = ios[i];
            // SAFETY (test): the I/O completed.
            after(
                unsafe { arena.slice(c.tag as usize * SLOT, len as usize) },
                seed,
                op,
                c.result,
            );
            free.push(c.tag);
            finished += 1;
        }
    }
    rep.ios = ios.len();
    rep
}

/// Sizes from 512 B to 1 MiB: above MaxRecvDataSegmentLength and FirstBurstLength, so reads
/// span several Data-In PDUs and writes need R2Ts.
pub const SIZES: [u32; 8] = [
    512,
    4096,
    3 * 512,
    64 * 1024,
    128 * 1024 + 512,
    300 * 1024,
    768 * 1024,
    1 << 20,
];

/// Writes random patterns at scattered, non-overlapping offsets at depth 32, reads them back
/// and compares. Returns the read pass's report.
pub fn write_read_verify(target: &dyn Target, count: usize) -> RunReport {
    let depth = 32u32;
    let arena = Arc::new(Arena::new(depth as usize * SLOT));
    let mut q = target
        .open_queue(&qcfg(depth, &arena, Duration::from_secs(20)))
        .expect("open queue");
    let size = target.info().size;
    let stride = size / count as u64 / 4096 * 4096;
    assert!(stride >= 2 * SLOT as u64, "LUN too small for {count} I/Os");
    let ios: Vec<(Op, u64, u32, u64)> = (0..count)
        .map(|i| {
            let len = SIZES[i % SIZES.len()];
            // Scattered: a pseudo-random sector inside each stride, order shuffled below.
            let jitter = (i as u64 * 0x9e37_79b9) % ((stride - len as u64) / 512) * 512;
            (Op::Write, i as u64 * stride + jitter, len, 1000 + i as u64)
        })
        .collect();
    let mut order: Vec<usize> = (0..count).collect();
    order.sort_by_key(|&i| (i as u64 * 0x5851_f42d) % 1009);
    let writes: Vec<_> = order.iter().map(|&i| ios[i]).collect();
    let w = drive(
        q.as_mut(),
        &arena,
        depth,
        &writes,
        |buf, seed, _| fill_random(buf, seed),
        |_, seed, _, r| assert_eq!(r, 0, "write of pattern {seed} failed"),
    );
    let reads: Vec<_> = writes
        .iter()
        .map(|&(_, o, l, s)| (Op::Read, o, l, s))
        .collect();
    let mut want = vec![0u8; SLOT];
    let r = drive(
        q.as_mut(),
        &arena,
        depth,
        &reads,
        |buf, _, _| buf.fill(0xee),
        |buf, seed, _, res| {
            assert_eq!(res, 0, "read of pattern {seed} failed");
            fill_random(&mut want[..buf.len()], seed);
            assert!(buf == &want[..buf.len()], "pattern {seed} read back wrong");
        },
    );
    let stats = q.stats();
    eprintln!("write pass {w:?}, read pass {r:?}, queue stats {stats:?}");
    q.close().expect("logout");
    RunReport { stats, ..r }
}

/// The socket layers this kernel runs: the poll loop, and io_uring where it has what the
/// layer needs (else said on stderr).
pub fn layers() -> Vec<sanbench_io::SocketLayer> {
    // A rerun with io_uring features forced on (`features_rerun`) runs the ring alone.
    if std::env::var_os(sanbench_io::sockring::conn::FEATURES_ENV).is_some() {
        return vec![sanbench_io::SocketLayer::Uring];
    }
    let mut v = vec![sanbench_io::SocketLayer::Poll];
    match sanbench_io::SockRing::probe() {
        Ok(()) => v.push(sanbench_io::SocketLayer::Uring),
        Err(e) => eprintln!("io_uring layer skipped: {e}"),
    }
    v
}

/// Runs this binary's tests matching `filter` again on io_uring with zero-copy sends and the
/// multishot receive forced on (`SANBENCH_SOCKRING_FEATURES=sendzc,multishot`), when the
/// kernel has them; `caller` is the calling test's name, skipped in the rerun.
pub fn features_rerun(filter: &str, caller: &str) {
    let asked = "sendzc,multishot";
    if sanbench_io::SockRing::probe().is_err() {
        return;
    }
    if let (_, Some(why)) = sanbench_io::RingFeatures::parse(asked).unwrap().choose() {
        eprintln!("skipped: {why}");
        return;
    }
    let r = sanbench_testkit::rerun_with_env(
        &[(sanbench_io::sockring::conn::FEATURES_ENV, asked)],
        &[filter, "--skip", caller],
    );
    assert!(r.is_ok(), "{}", r.unwrap_err());
}

/// Checks that a run used `layer`, and on the ring that it took fewer `io_uring_enter`s than
/// the poll loop would have made system calls (a send and a receive per round trip).
pub fn assert_layer(rep: &RunReport, layer: sanbench_io::SocketLayer) {
    assert_eq!(rep.stats["iscsi.socket"], layer.name(), "{:?}", rep.stats);
    if layer == sanbench_io::SocketLayer::Uring {
        let enters = rep.stats["iscsi.ring_enters"].as_u64().unwrap();
        let calls =
            rep.stats["iscsi.sends"].as_u64().unwrap() + rep.stats["iscsi.recvs"].as_u64().unwrap();
        assert!(
            enters > 0 && enters < calls,
            "{enters} enters, {calls} sends and receives"
        );
    }
}
