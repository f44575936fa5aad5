//! Client certificates (nbdkit's `--tls-verify-peer`), both ways against real peers:
//! libnbd's nbdinfo and nbdcopy against `sanbench serve nbd --tls-verify-peer`, and sanbench's
//! client against `nbdkit --tls-verify-peer`. A client whose certificate the server's CA
//! signed is served; one without a certificate, or with one from another CA, is refused (the
//! server logs one line and goes on serving others).

mod tls;

use std::process::Command;

use sanbench_testkit::require;
use tls::{ca_only, foreign_client, pki, run, sanbench_bounded, stderr, Peer, Serve};

fn nbdinfo(uri: &str) -> std::process::Output {
    require("nbdinfo", "libnbd-bin");
    run(Command::new("timeout").args(["30", "nbdinfo", "--json", uri]))
}

fn uri(port: &str, dir: &std::path::Path) -> String {
    format!(
        "nbds://localhost:{port}/?tls-certificates={}",
        dir.display()
    )
}

#[test]
fn libnbd_with_a_client_certificate_is_served_and_without_one_refused() {
    let ours = pki("sanbench-test-ca");
    let other = pki("another-ca");
    let dir = ours.path().display().to_string();
    let srv = Serve::start(
        "8M",
        &[
            "--tls",
            "require",
            "--tls-certificates",
            &dir,
            "--tls-verify-peer",
        ],
    );
    assert!(
        srv.line
            .contains("TLS required, client certificates verified"),
        "{}",
        srv.line
    );
    let good = uri(srv.port(), ours.path());
    let o = nbdinfo(&good);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["TLS"], true, "{v}");
    assert_eq!(v["exports"][0]["export-size"], 8u64 << 20, "{v}");

    // No client certificate, then one that another CA signed: both trust the server.
    let none = ca_only(ours.path());
    let foreign = foreign_client(ours.path(), other.path());
    for (what, d) in [("no certificate", &none), ("another CA", &foreign)] {
        let o = nbdinfo(&uri(srv.port(), d.path()));
        assert!(!o.status.success(), "{what}: nbdinfo was served");
        // The server goes on serving a client it trusts.
        let o = nbdinfo(&good);
        assert!(o.status.success(), "after {what}: {}", stderr(&o));
    }

    // nbdcopy writes and reads back through a verified connection.
    require("nbdcopy", "libnbd-bin");
    let t = tempfile::tempdir().unwrap();
    let (src, back) = (t.path().join("src"), t.path().join("back"));
    let data: Vec<u8> = (0..8u32 << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8)
        .collect();
    std::fs::write(&src, &data).unwrap();
    let o = run(Command::new("timeout")
        .args(["60", "nbdcopy"])
        .arg(&src)
        .arg(&good));
    assert!(o.status.success(), "nbdcopy to server: {}", stderr(&o));
    let o = run(Command::new("timeout")
        .args(["60", "nbdcopy", &good])
        .arg(&back));
    assert!(o.status.success(), "nbdcopy from server: {}", stderr(&o));
    assert!(
        std::fs::read(&back).unwrap() == data,
        "data read back differs"
    );

    // One line per refused client, saying why.
    let log = srv.stop();
    let refused: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("TLS handshake failed"))
        .collect();
    assert_eq!(refused.len(), 2, "{log}");
    assert!(
        refused.iter().all(|l| l.contains("certificate")),
        "{refused:?}"
    );
    assert!(log.contains("2 ended by an error"), "{log}");
}

#[test]
fn sanbench_presents_its_client_certificate_to_nbdkit() {
    let ours = pki("sanbench-test-ca");
    let other = pki("another-ca");
    let kit = Peer::nbdkit(&[
        "--tls=require".to_string(),
        format!("--tls-certificates={}", ours.path().display()),
        "--tls-verify-peer".to_string(),
    ]);
    let port = kit.port.to_string();
    let o = tls::sanbench_verify_run(&uri(&port, ours.path()));
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        tls::result_tls(&o).contains("X.509"),
        "{}",
        tls::result_tls(&o)
    );

    let none = ca_only(ours.path());
    let foreign = foreign_client(ours.path(), other.path());
    for d in [&none, &foreign] {
        let u = uri(&port, d.path());
        let o = sanbench_bounded(&["run", &u, "--time", "200ms", "--no-monitor"]);
        assert_eq!(o.status.code(), Some(1), "{u}: {}", stderr(&o));
        let e = stderr(&o);
        assert_eq!(e.trim().lines().count(), 1, "{e}");
        assert!(e.contains("client-cert.pem"), "{e}");
    }
}

/// sanbench's client against its own server: the refusal arrives as a TLS alert.
#[test]
fn sanbench_against_its_own_verifying_server() {
    let ours = pki("sanbench-test-ca");
    let dir = ours.path().display().to_string();
    let srv = Serve::start("8M", &["--tls-certificates", &dir, "--tls-verify-peer"]);
    let o = tls::sanbench_verify_run(&uri(srv.port(), ours.path()));
    assert!(o.status.success(), "{}", stderr(&o));
    let none = ca_only(ours.path());
    let u = uri(srv.port(), none.path());
    let o = sanbench_bounded(&["run", &u, "--time", "200ms", "--no-monitor"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("client-cert.pem"), "{}", stderr(&o));
    let log = srv.stop();
    assert!(
        log.contains("TLS handshake failed: peer sent no certificates"),
        "{log}"
    );
}

#[test]
fn verify_peer_needs_certificates_and_only_nbd_has_it() {
    let ours = pki("sanbench-test-ca");
    let dir = ours.path().display().to_string();
    let no_ca = tempfile::tempdir().unwrap();
    for f in ["server-cert.pem", "server-key.pem"] {
        std::fs::copy(ours.path().join(f), no_ca.path().join(f)).unwrap();
    }
    let no_ca = no_ca.path().display().to_string();
    let psk = tls::psk_file(ours.path(), "keys.psk", "alice", "00112233");
    let psk = psk.display().to_string();
    let nbd = |extra: &[&str]| {
        let mut a = vec!["serve", "nbd", "--size", "1M", "--listen", "127.0.0.1:0"];
        a.extend(extra);
        a.push("--tls-verify-peer");
        sanbench_bounded(&a)
    };
    for (o, want) in [
        (nbd(&[]), "give --tls-certificates DIR"),
        (nbd(&["--tls-psk", &psk]), "give --tls-certificates DIR"),
        (nbd(&["--tls-certificates", &no_ca]), "ca-cert.pem"),
        (
            nbd(&["--tls", "off", "--tls-certificates", &dir]),
            "--tls off",
        ),
    ] {
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        let e = stderr(&o);
        assert_eq!(e.trim().lines().count(), 1, "{e}");
        assert!(e.contains(want), "{want}: {e}");
    }
    // iSCSI and NVMe/TCP have no TLS: the flag is unknown to them.
    for cmd in ["iscsi", "nvme"] {
        let o = sanbench_bounded(&["serve", cmd, "--size", "1M", "--tls-verify-peer"]);
        assert_eq!(o.status.code(), Some(2), "{cmd}: {}", stderr(&o));
        assert!(stderr(&o).contains("--tls-verify-peer"), "{}", stderr(&o));
    }
}

/// DIR/ca-crl.pem (optional, as in nbdkit): an empty list changes nothing, a revoked client
/// certificate is refused by sanbench's server as by nbdkit, and sanbench's client refuses a
/// server whose certificate its own DIR/ca-crl.pem revokes.
#[test]
fn revocation_lists_are_honoured() {
    let ours = pki("sanbench-test-ca");
    let dir = ours.path().display().to_string();
    let serve = || Serve::start("4M", &["--tls-certificates", &dir, "--tls-verify-peer"]);
    tls::crl(ours.path(), &[]);
    let srv = serve();
    let o = nbdinfo(&uri(srv.port(), ours.path()));
    assert!(o.status.success(), "empty CRL: {}", stderr(&o));
    drop(srv);

    tls::crl(ours.path(), &["client"]);
    let srv = serve();
    let o = nbdinfo(&uri(srv.port(), ours.path()));
    assert!(
        !o.status.success(),
        "a revoked client certificate was served"
    );
    let log = srv.stop();
    assert!(
        log.contains("TLS handshake failed") && log.contains("Revoked"),
        "{log}"
    );
    // nbdkit refuses the same certificate: the list means what sanbench takes it to mean.
    let kit = Peer::nbdkit(&[
        "--tls=require".to_string(),
        format!("--tls-certificates={dir}"),
        "--tls-verify-peer".to_string(),
    ]);
    let o = nbdinfo(&uri(&kit.port.to_string(), ours.path()));
    assert!(
        !o.status.success(),
        "nbdkit served a revoked client certificate"
    );

    // The client side: nbdkit's server certificate revoked in the client's own list.
    tls::crl(ours.path(), &["server"]);
    let kit = Peer::nbdkit(&[
        "--tls=require".to_string(),
        format!("--tls-certificates={dir}"),
    ]);
    let u = uri(&kit.port.to_string(), ours.path());
    let o = sanbench_bounded(&["run", &u, "--time", "200ms", "--no-monitor"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("Revoked"), "{}", stderr(&o));
    // libnbd refuses it too.
    assert!(
        !nbdinfo(&u).status.success(),
        "libnbd accepted a revoked server"
    );
}
