//! `Target::allocation` over NBD against real servers: nbdkit's sparse memory plugin and
//! qemu-nbd over a sparse raw image report as holes exactly what was never written; a server
//! without structured replies (so without metadata contexts) answers `None`.

mod common;

use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use common::{free_port, nbdkit_memory, pattern, qemu_nbd, Peer};
use sanbench_io::{Arena, Io, Op, QueueConfig, Target};
use sanbench_nbd::{open, ClientOptions};

const BS: u64 = 64 * 1024;

/// Writes one 64 KiB block of non-zero data at each offset through a data-path queue.
fn write_blocks(t: &dyn Target, offsets: &[u64]) {
    let arena = Arc::new(Arena::new(offsets.len() * BS as usize));
    for i in 0..offsets.len() {
        // SAFETY (test): nothing in flight yet.
        unsafe { arena.slice_mut(i * BS as usize, BS as usize) }
            .copy_from_slice(&pattern(BS as usize, i as u64 + 1));
    }
    let cfg = QueueConfig {
        worker: 0,
        depth: offsets.len() as u32,
        max_len: BS as u32,
        arena: arena.clone(),
        io_timeout: Duration::from_secs(10),
        socket_ring: None,
    };
    let mut q = t.open_queue(&cfg).expect("open queue");
    let ios: Vec<Io> = offsets
        .iter()
        .enumerate()
        .map(|(i, &offset)| Io {
            fua: false,
            tag: i as u32,
            op: Op::Write,
            offset,
            len: BS as u32,
            buf: i * BS as usize,
        })
        .collect();
    q.submit(&ios).unwrap();
    let mut done = Vec::new();
    while done.len() < ios.len() {
        q.reap(1, &mut done).unwrap();
    }
    assert!(done.iter().all(|c| c.result == 0), "{done:?}");
    q.close().unwrap();
}

/// Unwritten bytes before and after writing `offsets`, over the whole export and over ranges
/// around the written blocks.
fn holes_match_what_was_written(uri: &str, offsets: &[u64]) {
    let t = open(uri, &ClientOptions::default()).expect("open");
    let size = t.info().size;
    let a = t
        .allocation(0, size)
        .unwrap()
        .expect("the server offers base:allocation");
    assert_eq!(a.method, "NBD base:allocation");
    assert_eq!(
        (a.checked_bytes, a.unwritten_bytes),
        (size, size),
        "{uri}: nothing written yet"
    );
    write_blocks(&*t, offsets);
    let a = t.allocation(0, size).unwrap().unwrap();
    assert_eq!(a.checked_bytes, size);
    assert_eq!(
        a.unwritten_bytes,
        size - offsets.len() as u64 * BS,
        "{uri}: unwritten = size - what was written"
    );
    // Inside one written block; across its start; past the end of the export (clipped).
    let o = offsets[0];
    assert_eq!(t.allocation(o, BS).unwrap().unwrap().unwritten_bytes, 0);
    if o >= BS {
        let across = t.allocation(o - BS, 2 * BS).unwrap().unwrap();
        assert_eq!((across.checked_bytes, across.unwritten_bytes), (2 * BS, BS));
    }
    let tail = t.allocation(size - BS, 1 << 40).unwrap().unwrap();
    assert_eq!(tail.checked_bytes, BS);
}

#[test]
fn nbdkit_memory_reports_unwritten_space() {
    let p = nbdkit_memory("64M");
    holes_match_what_was_written(&p.uri(""), &[0, 1 << 20, 5 << 20, (64 << 20) - BS]);
}

#[test]
fn a_range_over_2_gib_goes_out_in_pieces() {
    // 6 GiB: at least three BLOCK_STATUS requests (32-bit lengths, 2 GiB each at most).
    let p = nbdkit_memory("6G");
    holes_match_what_was_written(&p.uri(""), &[3 << 20, (2 << 30) + BS, (5 << 30) - BS]);
}

#[test]
fn qemu_nbd_reports_unwritten_space_of_a_sparse_image() {
    let (p, _dir) = qemu_nbd("img", 32 << 20);
    holes_match_what_was_written(&p.uri("img"), &[BS, 8 << 20, (32 << 20) - BS]);
}

#[test]
fn no_structured_replies_means_no_answer() {
    common::require("nbdkit", "nbdkit");
    let port = free_port();
    let mut cmd = Command::new("nbdkit");
    cmd.args(["-f", "-i", "127.0.0.1", "-p", &port.to_string(), "--no-sr"])
        .args(["memory", "16M"]);
    let p = Peer::start(cmd, port);
    let t = open(&p.uri(""), &ClientOptions::default()).unwrap();
    assert_eq!(t.allocation(0, 16 << 20).unwrap(), None);
    // The data path is untouched by the query's connection.
    write_blocks(&*t, &[0, BS]);
}
