//! The client over io_uring sockets (`SocketLayer::Uring`), asked for explicitly: data reads
//! back through it, it makes fewer system calls than I/Os, a peer cut mid-I/O is a clean
//! `Disconnected`, a silent one a `Timeout` after the I/O timeout. (The interop tests run on
//! either layer through `SANBENCH_SOCKET`; docs/TESTING.md.) All of them run a second time
//! with `SANBENCH_SOCKRING_FEATURES=sendzc,multishot`.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{pattern, OurServer};
use sanbench_io::{
    Arena, Completion, EngineError, Io, Op, Queue, QueueConfig, RingFeatures, SockRing,
};
use sanbench_nbd::{open, ClientOptions, SocketLayer};
use sanbench_testkit::Forwarder;

const BS: usize = 256 * 1024;

fn uring() -> Option<ClientOptions> {
    if let Err(e) = SockRing::probe() {
        eprintln!("skipped: this kernel cannot run the io_uring socket layer: {e}");
        return None;
    }
    Some(ClientOptions {
        socket: SocketLayer::Uring,
        ..Default::default()
    })
}

/// Every test here again with zero-copy sends and the multishot receive forced on (the
/// writes of 64 KiB and more go SENDMSG_ZC, every receive comes through the buffer ring).
#[test]
fn every_test_passes_again_with_sendzc_and_multishot() {
    if uring().is_none() {
        return;
    }
    let asked = "sendzc,multishot";
    if let (_, Some(why)) = RingFeatures::parse(asked).unwrap().choose() {
        eprintln!("skipped: {why}");
        return;
    }
    let r = sanbench_testkit::rerun_with_env(
        &[(sanbench_io::sockring::conn::FEATURES_ENV, asked)],
        &["--skip", "every_test_passes_again"],
    );
    assert!(r.is_ok(), "{}", r.unwrap_err());
}

fn qcfg(depth: u32, arena: &Arc<Arena>, timeout: Duration) -> QueueConfig {
    QueueConfig {
        worker: 0,
        depth,
        max_len: BS as u32,
        arena: arena.clone(),
        io_timeout: timeout,
        socket_ring: None,
    }
}

fn wait_all(q: &mut dyn Queue, n: usize) -> Result<Vec<Completion>, EngineError> {
    let mut out = Vec::new();
    while out.len() < n {
        q.reap(n - out.len(), &mut out)?;
    }
    Ok(out)
}

#[test]
fn data_reads_back_over_the_ring_in_fewer_enters_than_ios() {
    let Some(opts) = uring() else { return };
    let srv = OurServer::ram(64 << 20, "");
    let t = open(&srv.uri(""), &opts).expect("open");
    assert_eq!(t.info().params["socket"], "uring");
    // Under the rerun below: the features asked are the ones that ran, or the info says why
    // not (both on this binary's kernels, which have them all, so it is the former).
    let (on, why) = RingFeatures::from_env().choose();
    assert_eq!(t.info().params["socket_features"], on.name().as_str());
    assert_eq!(
        why.is_some(),
        t.info().params.contains_key("socket_features_fallback")
    );
    let depth = 32u32;
    let arena = Arc::new(Arena::new(2 * depth as usize * BS));
    let mut q = t
        .open_queue(&qcfg(depth, &arena, Duration::from_secs(10)))
        .expect("queue");
    // Lengths from 512 bytes (several replies per receive) to 256 KiB (received straight
    // into the arena), unaligned offsets.
    let lens = [512u32, 4096, 1000, 65536, 262144, 3000, 16384, 131072];
    let ios: Vec<Io> = (0..depth)
        .map(|i| Io {
            fua: false,
            tag: i,
            op: Op::Write,
            offset: u64::from(i) * 1_048_573,
            len: lens[i as usize % lens.len()],
            buf: i as usize * BS,
        })
        .collect();
    for io in &ios {
        let p = pattern(io.len as usize, u64::from(io.tag));
        // SAFETY: the queue has nothing in flight; this region is the write's own.
        unsafe { arena.slice_mut(io.buf, p.len()) }.copy_from_slice(&p);
    }
    // In two batches, the second submitted while the first is in flight.
    q.submit(&ios[..16]).unwrap();
    q.submit(&ios[16..]).unwrap();
    let done = wait_all(q.as_mut(), ios.len()).unwrap();
    assert!(done.iter().all(|c| c.result == 0), "{done:?}");
    let reads: Vec<Io> = ios
        .iter()
        .map(|io| Io {
            op: Op::Read,
            buf: (depth + io.tag) as usize * BS,
            ..*io
        })
        .collect();
    q.submit(&reads).unwrap();
    let done = wait_all(q.as_mut(), reads.len()).unwrap();
    assert!(done.iter().all(|c| c.result == 0), "{done:?}");
    for io in &reads {
        // SAFETY: every read has completed; nothing is in flight.
        let got = unsafe { arena.slice(io.buf, io.len as usize) };
        assert!(
            got == &pattern(io.len as usize, u64::from(io.tag))[..],
            "tag {}",
            io.tag
        );
    }
    let stats = q.stats();
    assert_eq!(stats["nbd_socket"], "uring");
    let enters = stats["nbd_ring_enters"].as_u64().unwrap();
    assert!(enters > 0 && enters < 64, "{enters} enters for 64 I/Os");
    q.close().unwrap();
}

/// Reads in flight through a relay that is cut: the reap fails as `Disconnected`, at once,
/// and dropping the queue waits out what the ring still had in flight.
#[test]
fn a_peer_cut_mid_io_is_a_clean_disconnect() {
    let Some(opts) = uring() else { return };
    let srv = OurServer::ram(64 << 20, "");
    let relay = Forwarder::start(srv.addr);
    let t = open(&format!("nbd://{}/", relay.addr()), &opts).expect("open");
    let arena = Arc::new(Arena::new(16 * BS));
    let mut q = t
        .open_queue(&qcfg(16, &arena, Duration::from_secs(10)))
        .unwrap();
    let reads: Vec<Io> = (0..16u32)
        .map(|i| Io {
            fua: false,
            tag: i,
            op: Op::Read,
            offset: u64::from(i) * BS as u64,
            len: BS as u32,
            buf: i as usize * BS,
        })
        .collect();
    q.submit(&reads).unwrap();
    wait_all(q.as_mut(), 16).unwrap();
    q.submit(&reads).unwrap();
    relay.cut();
    let t0 = Instant::now();
    let err = wait_all(q.as_mut(), 16).expect_err("a cut connection must fail");
    assert!(matches!(err, EngineError::Disconnected { .. }), "{err}");
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    drop(q);
}

#[test]
fn a_silent_peer_times_out_after_the_io_timeout() {
    let Some(opts) = uring() else { return };
    let srv = OurServer::ram(1 << 20, "");
    let relay = Forwarder::start(srv.addr);
    let t = open(&format!("nbd://{}/", relay.addr()), &opts).expect("open");
    let arena = Arc::new(Arena::new(BS));
    let mut q = t
        .open_queue(&qcfg(4, &arena, Duration::from_millis(300)))
        .unwrap();
    relay.silence();
    q.submit(&[Io {
        fua: false,
        tag: 0,
        op: Op::Read,
        offset: 0,
        len: 4096,
        buf: 0,
    }])
    .unwrap();
    let t0 = Instant::now();
    let err = wait_all(q.as_mut(), 1).expect_err("a silent peer must time out");
    assert!(matches!(err, EngineError::Timeout { .. }), "{err}");
    let took = t0.elapsed();
    assert!(
        took >= Duration::from_millis(250) && took < Duration::from_secs(3),
        "took {took:?}"
    );
}
