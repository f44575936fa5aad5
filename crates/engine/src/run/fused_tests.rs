//! The fused path writes exactly what the ordinary path writes, and reads back what it finds.

use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::arena::Arena;
use crate::engine::{Completion, Op, Queue, QueueConfig, Target};
use crate::mem::MemTarget;
use crate::run::layout::{stamp_slot, Layout};
use crate::run::stream_verify::StreamVerify;
use crate::stamp::{fill_pool, DataSpec, UNIT};
use crate::verify::Verifier;

const RUN: u64 = 0x0123_4567_89ab_cdef;
const DISK: u64 = 1 << 20;

struct Side {
    queue: Box<dyn Queue>,
    arena: Arc<Arena>,
    stamper: Stamper,
}

fn side(lay: &Layout, data: &DataSpec, unit: Option<usize>) -> Side {
    let target = MemTarget::new("mem:1M", DISK).unwrap();
    let arena = Arc::new(Arena::new(lay.total));
    // SAFETY: no queue holds the arena yet.
    fill_pool(unsafe { arena.slice_mut(lay.pool_base, lay.pool_len) }, RUN);
    let queue = target
        .open_queue(&QueueConfig {
            worker: 2,
            depth: 1,
            max_len: lay.slot as u32,
            arena: arena.clone(),
            io_timeout: Duration::from_secs(1),
            socket_ring: None,
        })
        .unwrap();
    let mut stamper = Stamper::new(data, RUN, 2);
    if let Some(u) = unit {
        stamper = stamper.with_unit(u);
    }
    Side {
        queue,
        arena,
        stamper,
    }
}

fn io(op: Op, offset: u64, len: u32) -> Io {
    Io {
        tag: 0,
        op,
        offset,
        len,
        buf: 0,
        fua: false,
    }
}

/// The whole disk, read by the ordinary path.
fn disk(s: &mut Side, lay: &Layout) -> Vec<u8> {
    let mut out = Vec::new();
    let mut done: Vec<Completion> = Vec::new();
    for at in (0..DISK).step_by(lay.slot) {
        s.queue
            .submit(&[io(Op::Read, at, lay.slot as u32)])
            .unwrap();
        s.queue.reap(1, &mut done).unwrap();
        // SAFETY: the read has completed.
        out.extend_from_slice(unsafe { s.arena.slice(0, lay.slot) });
    }
    assert!(done.iter().all(|c| c.result == 0));
    out
}

#[test]
fn fused_writes_are_byte_for_byte_the_ordinary_writes() {
    let specs = [
        DataSpec::default(),
        DataSpec {
            dedupe_pct: 40.0,
            compress_pct: 0.0,
        },
        DataSpec {
            dedupe_pct: 0.0,
            compress_pct: 33.3,
        },
        DataSpec {
            dedupe_pct: 25.0,
            compress_pct: 60.0,
        },
    ];
    // Odd transfer sizes too: shorter than a stamp, shorter than a unit, a unit and a bit.
    let writes: [(u64, u32); 9] = [
        (0, 4096),
        (8192, 16384),
        (40960, 512),
        (65536 + 7, 13),
        (131072 + 1, 4096 + 513),
        (200_000, 39),
        (300_000, 1_000),
        (400_384, 12_288),
        (DISK - 4096, 4096),
    ];
    let lay = Layout::new(16384, 16384, 1);
    for data in specs {
        // Unverified (4 KiB units, generation 0), and verified with 512 B and 4 KiB units
        // (a logical block of 4 KiB), each granule's generation in its units' stamps.
        for unit in [None, Some(512u32), Some(4096)] {
            let (mut slow, mut fast) = (
                side(&lay, &data, unit.map(|u| u as usize)),
                side(&lay, &data, unit.map(|u| u as usize)),
            );
            let u = unit.unwrap_or(512);
            let v = Arc::new(Verifier::new(RUN, u, u as u64, DISK));
            let shift = u.trailing_zeros();
            let mut sv = StreamVerify::new(&v, 1, 0);
            let mut done = Vec::new();
            for (n, &(offset, len)) in writes.iter().enumerate() {
                let first = offset >> shift;
                let cells: Vec<u8> = (first..=(offset + len as u64) >> shift)
                    .map(|g| (g as usize + n) as u8 % 63 + 1)
                    .collect();
                let gen_of = |o: u64| match unit {
                    Some(_) => cells[((o >> shift) - first) as usize] as u32,
                    None => 0,
                };
                // SAFETY: nothing is in flight on tag 0.
                let buf = unsafe {
                    stamp_slot(&slow.arena, &lay, &mut slow.stamper, 0, offset, len, gen_of)
                };
                slow.queue
                    .submit(&[Io {
                        buf,
                        ..io(Op::Write, offset, len)
                    }])
                    .unwrap();
                sv.cells[0] = cells.clone();
                let verify = unit.is_some().then_some(&mut sv);
                // SAFETY: the pool is only read.
                let pool = unsafe { fast.arena.slice(lay.pool_base, lay.pool_len) };
                let mut d = StreamData {
                    stamper: &mut fast.stamper,
                    pool,
                    verify,
                };
                fast.queue
                    .submit_fused(&[io(Op::Write, offset, len)], &mut d)
                    .unwrap();
                slow.queue.reap(1, &mut done).unwrap();
                fast.queue.reap(1, &mut done).unwrap();
            }
            assert!(done.iter().all(|c| c.result == 0));
            let (a, b) = (disk(&mut slow, &lay), disk(&mut fast, &lay));
            assert!(a.iter().any(|&x| x != 0), "nothing was written");
            if let Some(i) = (0..a.len()).find(|&i| a[i] != b[i]) {
                panic!("{data:?}, unit {unit:?}: the fused write differs at byte {i}");
            }
        }
    }
}

#[test]
fn fused_reads_copy_and_check() {
    let lay = Layout::new(UNIT as u64 * 2, UNIT as u64 * 2, 1);
    let v = Arc::new(Verifier::new(RUN, 512, 4096, DISK));
    let mut s = side(&lay, &DataSpec::default(), Some(512));
    let mut sv = StreamVerify::new(&v, 1, 0);
    let mut done = Vec::new();
    sv.cells[0] = vec![5, 5];
    // SAFETY: the pool is only read.
    let pool = unsafe { s.arena.slice(lay.pool_base, lay.pool_len) };
    let mut d = StreamData {
        stamper: &mut s.stamper,
        pool,
        verify: Some(&mut sv),
    };
    s.queue
        .submit_fused(&[io(Op::Write, 8192, 8192)], &mut d)
        .unwrap();
    // Clean, then expecting a newer generation in the second granule.
    for (cells, stale) in [(vec![5, 5], 0), (vec![5, 6], 8)] {
        d.verify.as_deref_mut().unwrap().cells[0] = cells;
        s.queue
            .submit_fused(&[io(Op::Read, 8192, 8192)], &mut d)
            .unwrap();
        let sv = d.verify.as_deref_mut().unwrap();
        assert!(sv.checked[0]);
        assert_eq!(sv.rep.bad.stale, stale);
    }
    let rep = &d.verify.as_deref().unwrap().rep;
    assert_eq!((rep.reads, rep.units, rep.bytes), (2, 32, 16384));
    s.queue.reap(3, &mut done).unwrap();
    assert_eq!(done.len(), 3);
    // What the read put in the arena is what the disk holds.
    // SAFETY: the reads have completed.
    let got = unsafe { s.arena.slice(0, 8192) }.to_vec();
    let all = disk(&mut s, &lay);
    assert_eq!(got, all[8192..16384]);
}
