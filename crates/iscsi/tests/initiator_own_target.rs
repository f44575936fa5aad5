//! The initiator against sanbench's own target (in-process, 127.0.0.1:0): data integrity with
//! CRC32C header and data digests, CHAP (right and wrong secret), and a listener that never
//! answers (login must time out quickly).

mod initiator_support;

use std::net::TcpListener;
use std::time::{Duration, Instant};

use initiator_support::{assert_layer, features_rerun, layers, write_read_verify, Ours};
use sanbench_io::EngineError;
use sanbench_iscsi::initiator::{open, Digest, InitiatorOptions};

const SIZE: u64 = 256 << 20;

fn digests() -> InitiatorOptions {
    InitiatorOptions {
        header_digest: Digest::Crc32c,
        data_digest: Digest::Crc32c,
        ..InitiatorOptions::default()
    }
}

/// Each layer asked for explicitly (`sockio=`): the poll loop and io_uring.
#[test]
fn data_with_digests() {
    for layer in layers() {
        data_with_digests_on(layer);
    }
}

fn data_with_digests_on(layer: sanbench_io::SocketLayer) {
    let t = Ours::start(SIZE, None);
    let opts = InitiatorOptions {
        socket: layer,
        ..digests()
    };
    let target = open(&t.uri(None), &opts).expect("open our target");
    let info = target.info();
    assert_eq!(info.params["socket"], layer.name());
    if layer == sanbench_io::SocketLayer::Uring {
        // The features asked (under the rerun: both) are the ones that ran.
        let on = sanbench_io::RingFeatures::from_env_chosen().name();
        assert_eq!(info.params["socket_features"], on.as_str());
    }
    eprintln!("our target info: {info:#?}");
    assert_eq!((info.size, info.block_size), (SIZE, 512));
    assert_eq!(info.params["HeaderDigest"], "CRC32C");
    assert_eq!(info.params["DataDigest"], "CRC32C");
    assert_eq!(info.params["InitialR2T"], "No");
    assert_eq!(info.params["ImmediateData"], "Yes");
    assert_eq!(info.params["vendor"], "SANBENCH");
    assert!(info.max_transfer.is_some_and(|m| m >= 1 << 20));
    let rep = write_read_verify(target.as_ref(), 64);
    eprintln!("ours: {} reads, {} out of order", rep.ios, rep.out_of_order);
    assert_layer(&rep, layer);
}

#[test]
fn data_without_digests_or_coalescing() {
    for layer in layers() {
        let t = Ours::start(SIZE, None);
        let opts = InitiatorOptions {
            submit_batch: 1,
            socket: layer,
            ..InitiatorOptions::default()
        };
        let target = open(&t.uri(None), &opts).expect("open");
        assert_eq!(target.info().params["HeaderDigest"], "None");
        let rep = write_read_verify(target.as_ref(), 32);
        assert_layer(&rep, layer);
    }
}

/// The data tests again with zero-copy sends and the multishot receive forced on.
#[test]
fn data_tests_pass_again_with_sendzc_and_multishot() {
    features_rerun("data_with", "data_tests_pass_again");
    features_rerun("data_without", "data_tests_pass_again");
}

#[test]
fn chap_login() {
    let t = Ours::start(SIZE, Some(("alice", "secret-of-12")));
    let target = open(&t.uri(Some(("alice", "secret-of-12"))), &digests()).expect("CHAP login");
    assert_eq!(target.info().params["auth"], "CHAP");
    write_read_verify(target.as_ref(), 16);

    let e = open(
        &t.uri(Some(("alice", "wrong-secret"))),
        &InitiatorOptions::default(),
    )
    .err()
    .expect("a wrong secret must fail");
    eprintln!("wrong secret: {e}");
    assert!(matches!(e, EngineError::Connect { .. }), "{e:?}");
    assert!(e.to_string().contains("authentication failed"), "{e}");

    let e = open(&t.uri(None), &InitiatorOptions::default())
        .err()
        .expect("no secret must fail");
    eprintln!("no secret: {e}");
    assert!(matches!(e, EngineError::Connect { .. }), "{e:?}");
}

#[test]
fn unknown_target_name() {
    let t = Ours::start(SIZE, None);
    let uri = format!("iscsi://{}/iqn.2026-11.nobody:here/0", t.addr);
    let e = open(&uri, &InitiatorOptions::default())
        .err()
        .expect("must fail");
    assert!(e.to_string().contains("target not found"), "{e}");
}

#[test]
fn missing_lun_is_invalid() {
    let t = Ours::start(SIZE, None);
    let uri = format!("iscsi://{}/{}/5", t.addr, t.iqn);
    let e = open(&uri, &InitiatorOptions::default())
        .err()
        .expect("must fail");
    assert!(e.is_usage(), "{e:?}");
}

#[test]
fn silent_listener_times_out() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    // Accept and hold the connection without ever answering.
    let holder = std::thread::spawn(move || l.accept().map(|(s, _)| s));
    let opts = InitiatorOptions {
        login_timeout: Duration::from_millis(300),
        ..InitiatorOptions::default()
    };
    let t0 = Instant::now();
    let e = open(&format!("iscsi://{addr}/iqn.x:y/0"), &opts)
        .err()
        .expect("must time out");
    eprintln!("silent: {e}");
    assert!(matches!(e, EngineError::Timeout { .. }), "{e:?}");
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    drop(holder.join());
}

#[test]
fn refused_connection() {
    let port = sanbench_testkit::free_port();
    let e = open(
        &format!("iscsi://127.0.0.1:{port}/iqn.x:y/0"),
        &InitiatorOptions::default(),
    )
    .err()
    .expect("nothing listens");
    assert!(matches!(e, EngineError::Connect { .. }), "{e:?}");
}
