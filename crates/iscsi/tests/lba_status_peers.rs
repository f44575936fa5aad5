//! `Target::allocation` over iSCSI (GET LBA STATUS on a session of its own) against sanbench's
//! own target, which tracks what was written, and against tgtd over a sparse backing file.

mod initiator_support;

use std::sync::Arc;
use std::time::Duration;

use initiator_support::{qcfg, Ours};
use sanbench_io::{Arena, Io, Op, Target};
use sanbench_iscsi::initiator::{open, InitiatorOptions};
use sanbench_testkit::Tgtd;

const BS: u64 = 64 * 1024;

/// Writes one 64 KiB block of non-zero data at each offset through a data-path queue.
fn write_blocks(t: &dyn Target, offsets: &[u64]) {
    let arena = Arc::new(Arena::new(offsets.len() * BS as usize));
    // SAFETY (test): nothing in flight yet.
    unsafe { arena.slice_mut(0, arena.len()) }.fill(0xa5);
    let mut q = t
        .open_queue(&qcfg(offsets.len() as u32, &arena, Duration::from_secs(10)))
        .expect("open queue");
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

#[test]
fn our_target_reports_exactly_what_was_never_written() {
    let size = 64 << 20;
    let t = Ours::start(size, None);
    let target = open(&t.uri(None), &InitiatorOptions::default()).expect("open");
    assert_eq!(target.info().params["lbpme"], true);
    assert_eq!(target.info().params["vendor"], "SANBENCH");
    let a = target
        .allocation(0, size)
        .unwrap()
        .expect("LBPME=1: answers");
    assert_eq!(a.method, "GET LBA STATUS");
    assert_eq!((a.checked_bytes, a.unwritten_bytes), (size, size));
    // Many small extents: more than one answer's worth (the target sends at most 64).
    let offsets: Vec<u64> = (0..100).map(|i| i * 2 * BS).collect();
    write_blocks(target.as_ref(), &offsets);
    let a = target.allocation(0, size).unwrap().unwrap();
    assert_eq!(a.checked_bytes, size);
    assert_eq!(a.unwritten_bytes, size - 100 * BS);
    assert_eq!(
        target
            .allocation(2 * BS, BS)
            .unwrap()
            .unwrap()
            .unwritten_bytes,
        0
    );
    let across = target.allocation(BS / 2, BS).unwrap().unwrap();
    assert_eq!((across.checked_bytes, across.unwritten_bytes), (BS, BS / 2));
    // The data path still works after the query's session came and went.
    write_blocks(target.as_ref(), &[size - BS]);
}

#[test]
#[cfg_attr(not(feature = "interop"), ignore = "interop tier: needs tgtd")]
fn tgtd_without_thin_provisioning_cannot_tell() {
    let t = Tgtd::start(16 << 20);
    let target = open(&t.uri(), &InitiatorOptions::default()).expect("open tgtd");
    assert_eq!(target.info().params["vendor"], "IET");
    assert_eq!(target.info().params["lbpme"], false);
    assert_eq!(target.allocation(0, 16 << 20).unwrap(), None);
}

#[test]
#[cfg_attr(not(feature = "interop"), ignore = "interop tier: needs tgtd")]
fn tgtd_thin_provisioned_over_a_sparse_file() {
    let size = 32 << 20;
    let t = Tgtd::start(size);
    t.set_lun_param("thin_provisioning", "1");
    let target = open(&t.uri(), &InitiatorOptions::default()).expect("open tgtd");
    eprintln!("tgtd params: {:?}", target.info().params);
    assert_eq!(target.info().params["lbpme"], true);
    let before = target.allocation(0, size).unwrap();
    eprintln!("tgtd, nothing written: {before:?}");
    let offsets = [0, 4 << 20, size - BS];
    write_blocks(target.as_ref(), &offsets);
    let after = target.allocation(0, size).unwrap();
    eprintln!(
        "tgtd, {} KiB written: {after:?}",
        offsets.len() as u64 * BS / 1024
    );
    let before = before.expect("tgtd answers GET LBA STATUS");
    let after = after.unwrap();
    assert_eq!((before.checked_bytes, before.unwritten_bytes), (size, size));
    assert_eq!(after.unwritten_bytes, size - offsets.len() as u64 * BS);
}
