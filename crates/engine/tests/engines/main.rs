//! Every local engine moves real data: what is written reads back identical, at many offsets,
//! with several I/Os in flight. And the scheduler ends a run on a dead target or a failed I/O.

use std::sync::Arc;
use std::time::Duration;

use sanbench_engine::arena::fill_random;
use sanbench_engine::file::{EngineKind, FileOptions, FileTarget};
use sanbench_engine::mem::MemTarget;
use sanbench_engine::{Arena, Completion, Io, Op, Queue, QueueConfig, Target};

// The scheduler's tests over fake targets; `manual_clock` is shared with `intervals`.
#[path = "../support/manual_clock.rs"]
mod manual_clock;
mod scheduler;

const BS: usize = 8192;
const DEPTH: u32 = 16;

fn qcfg(arena: Arc<Arena>) -> QueueConfig {
    QueueConfig {
        worker: 0,
        depth: DEPTH,
        max_len: BS as u32,
        arena,
        io_timeout: Duration::from_secs(10),
        socket_ring: None,
    }
}

fn reap_all(q: &mut dyn Queue, n: usize) -> Vec<Completion> {
    let mut out = Vec::new();
    while out.len() < n {
        q.reap(1, &mut out).expect("reap");
    }
    out
}

/// Writes DEPTH distinct random blocks at scattered offsets in one batch, reads them back in
/// another, and compares byte for byte.
fn write_read_back(t: &dyn Target) {
    let arena = Arc::new(Arena::new(2 * DEPTH as usize * BS));
    let src_len = DEPTH as usize * BS;
    // SAFETY: no I/O in flight yet.
    fill_random(unsafe { arena.slice_mut(0, src_len) }, 11);
    let mut q = t.open_queue(&qcfg(arena.clone())).expect("open queue");
    let offsets: Vec<u64> = (0..DEPTH as u64)
        .map(|i| (i * 37 % 61) * BS as u64 * 3)
        .collect();
    let writes: Vec<Io> = (0..DEPTH)
        .map(|i| Io {
            fua: false,
            tag: i,
            op: Op::Write,
            offset: offsets[i as usize],
            len: BS as u32,
            buf: i as usize * BS,
        })
        .collect();
    q.submit(&writes).unwrap();
    let done = reap_all(&mut *q, DEPTH as usize);
    assert!(done.iter().all(|c| c.result == 0), "{done:?}");
    let reads: Vec<Io> = (0..DEPTH)
        .map(|i| Io {
            fua: false,
            tag: i,
            op: Op::Read,
            offset: offsets[i as usize],
            len: BS as u32,
            buf: src_len + i as usize * BS,
        })
        .collect();
    q.submit(&reads).unwrap();
    let done = reap_all(&mut *q, DEPTH as usize);
    assert!(done.iter().all(|c| c.result == 0), "{done:?}");
    for (i, off) in offsets.iter().enumerate() {
        // SAFETY: all I/O has completed.
        let (w, r) = unsafe { (arena.slice(i * BS, BS), arena.slice(src_len + i * BS, BS)) };
        assert!(w == r, "block {i} at offset {off} differs");
    }
    q.close().unwrap();
}

#[test]
fn mem_reads_back_what_it_wrote() {
    let t = MemTarget::new("mem:64M", 64 << 20).unwrap();
    write_read_back(&t);
}

fn file_target(engine: EngineKind, direct: Option<bool>) -> (tempfile::TempDir, FileTarget) {
    // /var/tmp is disk-backed (O_DIRECT works); /dev/shm is tmpfs (it does not).
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let path = dir.path().join("target.img");
    let opts = FileOptions {
        size: Some(8 << 20),
        engine,
        direct,
        force: false,
        writes: true,
        keep_cache: false,
    };
    let t = FileTarget::open("file", &path, &opts).unwrap();
    assert_eq!(t.info().size, 8 << 20);
    (dir, t)
}

#[test]
fn io_uring_file_reads_back_what_it_wrote() {
    let (_d, t) = file_target(EngineKind::Uring, None);
    assert_eq!(t.info().engine, "io_uring");
    write_read_back(&t);
}

#[test]
fn io_uring_direct_file_reads_back_what_it_wrote() {
    let (_d, t) = file_target(EngineKind::Uring, Some(true));
    write_read_back(&t);
}

#[test]
fn sync_file_reads_back_what_it_wrote() {
    let (_d, t) = file_target(EngineKind::Sync, None);
    assert_eq!(t.info().engine, "sync");
    write_read_back(&t);
}

#[test]
fn created_file_is_sparse_and_reports_its_holes() {
    let (_d, t) = file_target(EngineKind::Sync, None);
    assert_eq!(t.info().params["created"], true);
    let a = t
        .allocation(0, 8 << 20)
        .unwrap()
        .expect("files report holes");
    assert_eq!(a.method, "SEEK_DATA");
    assert_eq!((a.checked_bytes, a.unwritten_bytes), (8 << 20, 8 << 20));
    write_read_back(&t);
    let a = t.allocation(0, 8 << 20).unwrap().unwrap();
    assert!(a.unwritten_bytes < 8 << 20, "{a:?}");
}

fn reopen(path: &std::path::Path, direct: Option<bool>, keep_cache: bool) -> FileTarget {
    let opts = FileOptions {
        direct,
        keep_cache,
        ..FileOptions::default()
    };
    FileTarget::open("file", path, &opts).unwrap()
}

#[test]
fn invalidate_cache_drops_the_span_unless_kept() {
    use sanbench_engine::page_cache::{resident_pages, DROPPED, KEPT};
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let path = dir.path().join("warm.img");
    let len = 2 << 20;
    std::fs::write(&path, vec![5u8; len]).unwrap();
    let warm = || {
        std::fs::read(&path).unwrap();
        let f = std::fs::File::open(&path).unwrap();
        assert_eq!(resident_pages(&f, len).unwrap(), len / 4096);
        f
    };
    let f = warm();
    let t = reopen(&path, None, true);
    assert_eq!(
        t.invalidate_cache(len as u64).unwrap().as_deref(),
        Some(KEPT)
    );
    assert_eq!(resident_pages(&f, len).unwrap(), len / 4096);
    let t = reopen(&path, None, false);
    assert_eq!(
        t.invalidate_cache(len as u64).unwrap().as_deref(),
        Some(DROPPED)
    );
    assert_eq!(resident_pages(&f, len).unwrap(), 0);
    // O_DIRECT: nothing cached, nothing to do.
    let f = warm();
    let t = reopen(&path, Some(true), false);
    assert_eq!(t.invalidate_cache(len as u64).unwrap(), None);
    assert_eq!(resident_pages(&f, len).unwrap(), len / 4096);
    let p = &t.info().params;
    assert!(p["alignment"].as_u64().unwrap() >= 512, "{p:?}");
    assert!(p["alignment_source"].as_str().unwrap() != "", "{p:?}");
    assert_eq!(t.info().block_size as u64, p["alignment"].as_u64().unwrap());
}

#[test]
fn missing_file_without_size_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let err = FileTarget::open("x", &dir.path().join("nope"), &FileOptions::default())
        .err()
        .expect("a missing file without --size must fail");
    assert!(err.is_usage());
    assert!(err.to_string().contains("--size"), "{err}");
}
