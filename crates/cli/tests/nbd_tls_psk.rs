//! NBD over TLS with pre-shared keys (psktool files), which needs the `tls-psk` feature
//! (OpenSSL): sanbench's client against `nbdkit --tls=require --tls-psk`, sanbench's server
//! with libnbd's nbdinfo and nbdcopy, and a wrong key failing cleanly on both sides. Without
//! the feature, a PSK flag or URI key is a usage error that says how to build.

mod tls;

#[cfg(feature = "tls-psk")]
use std::process::Command;

use tls::{psk_file, sanbench_bounded, stderr};
#[cfg(feature = "tls-psk")]
use tls::{run, Serve};

/// 32 bytes as psktool makes them.
const KEY: &str = "5a1e7b9c0d2f4e6a8b1c3d5e7f90a2b4c6d8e0f1a3b5c7d9e1f2a4b6c8d0e2f4";
#[cfg(feature = "tls-psk")]
const WRONG: &str = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

#[cfg(feature = "tls-psk")]
#[test]
#[cfg_attr(not(feature = "interop"), ignore = "interop tier: needs nbdkit")]
fn against_nbdkit_with_psk() {
    let t = tempfile::tempdir().unwrap();
    let keys = psk_file(t.path(), "keys.psk", "alice", KEY);
    let wrong = psk_file(t.path(), "wrong.psk", "alice", WRONG);
    let kit = tls::Peer::nbdkit(&[
        "--tls=require".into(),
        format!("--tls-psk={}", keys.display()),
    ]);
    let uri = format!(
        "nbds://alice@localhost:{}/?tls-psk-file={}",
        kit.port,
        keys.display()
    );
    let o = tls::sanbench_verify_run(&uri);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        tls::result_tls(&o).contains("PSK"),
        "{}",
        tls::result_tls(&o)
    );
    // OpenSSL's sessions keep their records in user space, saying so whatever the kernel has.
    let records = tls::result_records(&o);
    assert!(records.starts_with("user (PSK sessions"), "{records}");
    for uri in [
        format!(
            "nbds://alice@localhost:{}/?tls-psk-file={}",
            kit.port,
            wrong.display()
        ),
        format!(
            "nbds://bob@localhost:{}/?tls-psk-file={}",
            kit.port,
            keys.display()
        ),
    ] {
        let o = sanbench_bounded(&["run", &uri, "--time", "200ms", "--no-monitor"]);
        let e = stderr(&o);
        // bob has no key in the file: bad input, refused before connecting.
        let want = if uri.contains("bob@") { 2 } else { 1 };
        assert_eq!(o.status.code(), Some(want), "{uri}: {e}");
        assert_eq!(e.trim().lines().count(), 1, "{e}");
        assert!(!e.contains(KEY) && !e.contains("panicked"), "{e}");
    }
}

#[cfg(feature = "tls-psk")]
#[test]
#[cfg_attr(
    not(feature = "interop"),
    ignore = "interop tier: needs nbdinfo and nbdcopy"
)]
fn nbdinfo_and_nbdcopy_against_a_psk_server() {
    sanbench_testkit::require("nbdcopy", "libnbd-bin");
    let t = tempfile::tempdir().unwrap();
    let keys = psk_file(t.path(), "keys.psk", "alice", KEY);
    let wrong = psk_file(t.path(), "wrong.psk", "alice", WRONG);
    let srv = Serve::start(
        "16M",
        &["--tls", "require", "--tls-psk", &keys.display().to_string()],
    );
    let uri = |f: &std::path::Path| {
        format!(
            "nbds://alice@localhost:{}/?tls-psk-file={}",
            srv.port(),
            f.display()
        )
    };
    let o = run(Command::new("timeout").args(["30", "nbdinfo", "--json", &uri(&keys)]));
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["TLS"], true, "{v}");
    let data: Vec<u8> = (0..16u32 << 20)
        .map(|i| (i.wrapping_mul(40503) >> 7) as u8)
        .collect();
    let (src, back) = (t.path().join("src"), t.path().join("back"));
    std::fs::write(&src, &data).unwrap();
    let o = run(Command::new("timeout")
        .args(["60", "nbdcopy"])
        .arg(&src)
        .arg(uri(&keys)));
    assert!(o.status.success(), "nbdcopy to server: {}", stderr(&o));
    let o = run(Command::new("timeout")
        .args(["60", "nbdcopy", &uri(&keys)])
        .arg(&back));
    assert!(o.status.success(), "nbdcopy from server: {}", stderr(&o));
    assert!(
        std::fs::read(&back).unwrap() == data,
        "data read back differs"
    );
    // A wrong key: refused, and the server goes on serving.
    let o = run(Command::new("timeout").args(["30", "nbdinfo", &uri(&wrong)]));
    assert!(!o.status.success(), "nbdinfo with a wrong key was served");
    assert_eq!(o.status.code(), Some(1), "no hang: {}", stderr(&o));
    // sanbench's own client and server through PSK, data verified.
    let o = tls::sanbench_verify_run(&uri(&keys));
    assert!(o.status.success(), "{}", stderr(&o));
}

/// A psktool file as GnuTLS 3.7 reads it (a comment, the name in hex behind '#'): nbdkit and
/// sanbench's server both take alice's key from it (sanbench's also with CR LF line ends, as
/// libnbd reads them; nbdkit fails those at the handshake); a malformed file is bad input on
/// both of sanbench's sides, said with its line and never its key.
#[cfg(feature = "tls-psk")]
#[test]
#[cfg_attr(
    not(feature = "interop"),
    ignore = "interop tier: needs nbdinfo and nbdkit"
)]
fn psk_files_are_read_as_gnutls_reads_them() {
    let t = tempfile::tempdir().unwrap();
    let plain = psk_file(t.path(), "plain.psk", "alice", KEY);
    // "alice" in hex.
    let (hex, crlf) = (t.path().join("hex.psk"), t.path().join("crlf.psk"));
    std::fs::write(&hex, format!("# rotated monthly\n#616c696365:{KEY}\n")).unwrap();
    std::fs::write(&crlf, format!("# rotated monthly\r\n#616c696365:{KEY}\r\n")).unwrap();
    let kit = tls::Peer::nbdkit(&[
        "--tls=require".into(),
        format!("--tls-psk={}", hex.display()),
    ]);
    let uri = |port: &str, f: &std::path::Path| {
        format!(
            "nbds://alice@localhost:{port}/?tls-psk-file={}",
            f.display()
        )
    };
    let o = tls::sanbench_verify_run(&uri(&kit.port.to_string(), &plain));
    assert!(o.status.success(), "nbdkit: {}", stderr(&o));
    let srv = Serve::start("4M", &["--tls-psk", &crlf.display().to_string()]);
    let o = run(Command::new("timeout").args(["30", "nbdinfo", &uri(srv.port(), &plain)]));
    assert!(o.status.success(), "nbdinfo: {}", stderr(&o));

    let bad = t.path().join("bad.psk");
    std::fs::write(&bad, format!("alice:{KEY}\nbob:{}zz\n", &KEY[..8])).unwrap();
    let b = bad.display().to_string();
    let u = uri(srv.port(), &bad);
    for args in [
        vec![
            "serve",
            "nbd",
            "--size",
            "1M",
            "--listen",
            "127.0.0.1:0",
            "--tls-psk",
            &b,
        ],
        vec!["run", &u, "--time", "200ms", "--no-monitor"],
    ] {
        let o = sanbench_bounded(&args);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {e}");
        assert_eq!(e.trim().lines().count(), 1, "{e}");
        assert!(e.contains("line 2") && e.contains("not hexadecimal"), "{e}");
        assert!(!e.contains(&KEY[..8]), "{e}");
    }
}

#[cfg(not(feature = "tls-psk"))]
#[test]
fn psk_without_the_feature_says_how_to_build() {
    let t = tempfile::tempdir().unwrap();
    let keys = psk_file(t.path(), "keys.psk", "alice", KEY);
    let k = keys.display().to_string();
    let uri = format!("nbds://alice@localhost:1/?tls-psk-file={k}");
    for args in [
        vec![
            "serve",
            "nbd",
            "--size",
            "1M",
            "--listen",
            "127.0.0.1:0",
            "--tls-psk",
            &k,
        ],
        vec!["run", &uri, "--time", "200ms", "--no-monitor"],
    ] {
        let o = sanbench_bounded(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        let e = stderr(&o);
        assert!(e.contains("--features tls-psk"), "{e}");
        assert_eq!(e.trim().lines().count(), 1, "{e}");
    }
}
