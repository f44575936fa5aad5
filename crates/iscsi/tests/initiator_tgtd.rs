//! The initiator against tgtd (package tgt), a real iSCSI target: open/probe, negotiated
//! parameters, data integrity at depth 32 with 512 B..1 MiB I/Os, CHECK CONDITION past the end,
//! and the failure modes of a target that stops (timeout) or dies (disconnect).

mod initiator_support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use initiator_support::{assert_layer, features_rerun, layers, qcfg, write_read_verify, SLOT};
use sanbench_io::{Arena, Completion, EngineError, Io, Op, SocketLayer};
use sanbench_iscsi::initiator::{open, InitiatorOptions};
use sanbench_iscsi::wire::chap::Credentials;
use sanbench_testkit::Tgtd;

const SIZE: u64 = 256 << 20;

/// The options with the socket layer asked for explicitly.
fn on(layer: SocketLayer) -> InitiatorOptions {
    InitiatorOptions {
        socket: layer,
        ..InitiatorOptions::default()
    }
}

/// On each socket layer, asked for explicitly.
/// The data and digest tests again with zero-copy sends and the multishot receive forced on.
#[test]
fn data_tests_pass_again_with_sendzc_and_multishot() {
    features_rerun("info_params_and_data", "data_tests_pass_again");
    features_rerun("crc32c_digests", "data_tests_pass_again");
}

#[test]
fn info_params_and_data() {
    for layer in layers() {
        info_params_and_data_on(layer);
    }
}

fn info_params_and_data_on(layer: SocketLayer) {
    let t = Tgtd::start(SIZE);
    let target = open(&t.uri(), &on(layer)).expect("open tgtd LUN");
    let info = target.info();
    assert_eq!(info.params["socket"], layer.name());
    eprintln!("tgtd info: {info:#?}");
    assert_eq!(info.engine, "iscsi");
    assert_eq!(info.size, SIZE);
    assert_eq!(info.block_size, 512);
    assert!(!info.read_only);
    let p = &info.params;
    for k in [
        "MaxRecvDataSegmentLength.initiator",
        "MaxRecvDataSegmentLength.target",
        "MaxBurstLength",
        "FirstBurstLength",
        "ImmediateData",
        "InitialR2T",
        "HeaderDigest",
        "DataDigest",
        "MaxOutstandingR2T",
        "ErrorRecoveryLevel",
        "target_name",
        "portal",
        "tsih",
        "vendor",
        "product",
    ] {
        assert!(p.contains_key(k), "param {k} missing: {p:?}");
    }
    assert_eq!(p["target_name"], t.iqn.as_str());
    assert_eq!(p["vendor"], "IET");
    assert_eq!(p["HeaderDigest"], "None");
    let rep = write_read_verify(target.as_ref(), 96);
    eprintln!(
        "tgtd: {} reads, {} completed out of order",
        rep.ios, rep.out_of_order
    );
    assert_layer(&rep, layer);
}

#[test]
fn read_past_end_is_check_condition() {
    let t = Tgtd::start(16 << 20);
    let target = open(&t.uri(), &InitiatorOptions::default()).expect("open");
    let arena = Arc::new(Arena::new(2 * SLOT));
    let mut q = target
        .open_queue(&qcfg(2, &arena, Duration::from_secs(10)))
        .unwrap();
    let size = target.info().size;
    let ios = [
        Io {
            fua: false,
            tag: 0,
            op: Op::Read,
            offset: size,
            len: 4096,
            buf: 0,
        },
        Io {
            fua: false,
            tag: 1,
            op: Op::Read,
            offset: size - 512,
            len: 512,
            buf: SLOT,
        },
    ];
    q.submit(&ios).unwrap();
    let mut out: Vec<Completion> = Vec::new();
    while out.len() < 2 {
        q.reap(2 - out.len(), &mut out).expect("reap");
    }
    out.sort_by_key(|c| c.tag);
    assert_eq!(out[0].result, -libc::EIO);
    assert_eq!(out[1].result, 0);
    let st = q.stats();
    assert_eq!(st["iscsi.check_conditions"], 1);
    // LOGICAL BLOCK ADDRESS OUT OF RANGE.
    let sense = st["iscsi.last_sense"].as_str().unwrap().to_string();
    assert!(sense.contains("asc 0x21"), "{sense}");
    q.close().unwrap();
}

/// Keeps 32 reads in flight until `stop` says so or an error arrives; returns the error.
fn run_until_error(q: &mut dyn sanbench_io::Queue, on_first: impl FnOnce()) -> EngineError {
    let mut on_first = Some(on_first);
    let mut out = Vec::new();
    let ios: Vec<Io> = (0..32)
        .map(|t| Io {
            fua: false,
            tag: t,
            op: Op::Read,
            offset: t as u64 * 65536,
            len: 65536,
            buf: t as usize * 65536,
        })
        .collect();
    if let Err(e) = q.submit(&ios) {
        return e;
    }
    for _ in 0..100_000 {
        out.clear();
        if let Err(e) = q.reap(1, &mut out) {
            return e;
        }
        if let Some(f) = on_first.take() {
            f();
        }
        let again: Vec<Io> = out.iter().map(|c| ios[c.tag as usize]).collect();
        if let Err(e) = q.submit(&again) {
            return e;
        }
    }
    panic!("no error after 100000 rounds");
}

#[test]
fn killed_target_is_disconnected() {
    for layer in layers() {
        killed_target_on(layer);
    }
}

fn killed_target_on(layer: SocketLayer) {
    let mut t = Tgtd::start(16 << 20);
    let target = open(&t.uri(), &on(layer)).expect("open");
    let arena = Arc::new(Arena::new(32 * 65536));
    let mut q = target
        .open_queue(&qcfg(32, &arena, Duration::from_secs(5)))
        .unwrap();
    let t0 = Instant::now();
    let pid = t.pid();
    let e = run_until_error(q.as_mut(), || {
        // SAFETY: kill(2) on tgtd's pid, a child of this test.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    });
    eprintln!("after kill: {e}");
    assert!(matches!(e, EngineError::Disconnected { .. }), "{e:?}");
    assert!(e.to_string().contains(&t.iqn), "error names the peer: {e}");
    assert!(t0.elapsed() < Duration::from_secs(4));
    t.kill();
}

#[test]
fn stopped_target_times_out() {
    for layer in layers() {
        stopped_target_on(layer);
    }
}

fn stopped_target_on(layer: SocketLayer) {
    let t = Tgtd::start(16 << 20);
    let target = open(&t.uri(), &on(layer)).expect("open");
    let arena = Arc::new(Arena::new(32 * 65536));
    let mut q = target
        .open_queue(&qcfg(32, &arena, Duration::from_millis(700)))
        .unwrap();
    let t0 = Instant::now();
    let e = run_until_error(q.as_mut(), || t.signal(libc::SIGSTOP));
    eprintln!("after SIGSTOP: {e}");
    assert!(matches!(e, EngineError::Timeout { .. }), "{e:?}");
    assert!(t0.elapsed() < Duration::from_secs(3));
    let st = q.stats();
    assert!(st["iscsi.pings"].as_u64().unwrap() >= 1, "{st:?}");
    assert_eq!(st["iscsi.socket"], layer.name());
}

/// CHAP against tgtd, one-way and mutual (tgtd's outgoing account): the initiator proves its
/// secret, and when asked to, checks the target's proof of its own secret.
#[test]
fn chap_one_way_and_mutual() {
    let t = Tgtd::start(16 << 20);
    t.require_chap("bench", "bench-secret-1", Some(("tgt", "target-secret-2")));
    let uri = |cred: &str| t.uri().replacen("iscsi://", &format!("iscsi://{cred}@"), 1);
    let opts = |target_chap: Option<(&str, &str)>| InitiatorOptions {
        target_chap: target_chap.map(|(u, s)| Credentials::new(u, s)),
        ..InitiatorOptions::default()
    };
    // Without credentials, or with a wrong secret, tgtd refuses the login.
    assert!(open(&t.uri(), &opts(None)).is_err());
    assert!(open(&uri("bench%wrong-secret-9"), &opts(None)).is_err());
    // One-way: the initiator proves itself.
    let one = open(&uri("bench%bench-secret-1"), &opts(None)).expect("one-way CHAP");
    assert_eq!(one.info().params["auth"], "CHAP");
    write_read_verify(one.as_ref(), 8);
    // Mutual: tgtd proves itself with its outgoing account, and data moves.
    let both = open(
        &uri("bench%bench-secret-1"),
        &opts(Some(("tgt", "target-secret-2"))),
    )
    .expect("mutual CHAP");
    assert_eq!(both.info().params["auth"], "CHAP (mutual)");
    write_read_verify(both.as_ref(), 8);
    // A target that does not know the secret we expect is refused by the initiator.
    let e = open(
        &uri("bench%bench-secret-1"),
        &opts(Some(("tgt", "not-the-target-secret"))),
    )
    .map(|_| ())
    .expect_err("a target with the wrong secret must be refused");
    assert!(e.to_string().contains("target failed mutual CHAP"), "{e}");
    let e = open(
        &uri("bench%bench-secret-1"),
        &opts(Some(("someone-else", "target-secret-2"))),
    )
    .map(|_| ())
    .expect_err("a target with the wrong name must be refused");
    assert!(e.to_string().contains("target failed mutual CHAP"), "{e}");
}

/// Header and data digests (CRC32C) against tgtd: negotiated, and data verified at depth with
/// transfers up to 1 MiB (R2T, Data-Out and Data-In all carry digests).
#[test]
fn crc32c_digests() {
    use sanbench_iscsi::initiator::Digest;
    let t = Tgtd::start(SIZE);
    let opts = InitiatorOptions {
        header_digest: Digest::Crc32c,
        data_digest: Digest::Crc32c,
        ..InitiatorOptions::default()
    };
    // tgtd offers no digests unless told: asked for them, the login fails rather than the
    // run measuring something else than what was asked.
    let e = open(&t.uri(), &opts)
        .map(|_| ())
        .expect_err("digests that tgtd does not offer");
    assert!(e.to_string().contains("HeaderDigest"), "{e}");
    t.set_param("HeaderDigest", "CRC32C,None");
    t.set_param("DataDigest", "CRC32C,None");
    for layer in layers() {
        let opts = InitiatorOptions {
            socket: layer,
            ..opts.clone()
        };
        let target = open(&t.uri(), &opts).expect("open tgtd LUN with digests");
        let p = &target.info().params;
        assert_eq!(p["HeaderDigest"], "CRC32C", "{p:?}");
        assert_eq!(p["DataDigest"], "CRC32C", "{p:?}");
        let rep = write_read_verify(target.as_ref(), 48);
        assert_layer(&rep, layer);
    }
}
