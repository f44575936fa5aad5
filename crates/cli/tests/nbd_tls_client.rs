//! sanbench's `nbds://` client against real TLS servers (nbdkit, qemu-nbd) and its own: data
//! written through TLS reads back equal (`--verify`), and every refusal is a clear error with
//! exit 1, within a bounded time, never a fallback to plaintext.

mod tls;

use tls::{
    host_records, pki, result_records, result_tls, sanbench_bounded, sanbench_verify_run, stderr,
    Peer, Serve,
};

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

#[test]
#[cfg_attr(
    not(feature = "interop"),
    ignore = "interop tier: needs openssl and nbdkit"
)]
fn against_nbdkit_with_certificates() {
    let pki = pki("sanbench-test-ca");
    let dir = pki.path().display().to_string();
    let kit = Peer::nbdkit(&s(&["--tls=require", &format!("--tls-certificates={dir}")]));
    for host in ["localhost", "127.0.0.1"] {
        let uri = format!("nbds://{host}:{}/?tls-certificates={dir}", kit.port);
        let o = sanbench_verify_run(&uri);
        assert!(o.status.success(), "{uri}: {}", stderr(&o));
        assert!(result_tls(&o).contains("X.509"), "{}", result_tls(&o));
        // With the tls module, the kernel's records against GnuTLS's.
        assert_eq!(result_records(&o), host_records());
    }
    // The same server in plaintext: refused by nbdkit, said clearly by sanbench.
    let plain = format!("nbd://127.0.0.1:{}/", kit.port);
    let o = sanbench_bounded(&["run", &plain, "--time", "200ms", "--no-monitor"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("requires TLS"), "{}", stderr(&o));
}

#[test]
#[cfg_attr(
    not(feature = "interop"),
    ignore = "interop tier: needs openssl and nbdkit"
)]
fn nbds_unix_against_nbdkit() {
    let pki = pki("sanbench-test-ca");
    let dir = pki.path().display().to_string();
    let sock = pki.path().join("nbd.sock");
    let _kit = Peer::nbdkit_unix(
        &sock,
        &s(&["--tls=require", &format!("--tls-certificates={dir}")]),
    );
    // No host in the URI: the certificate is checked for "localhost".
    let uri = format!(
        "nbds+unix:///?socket={}&tls-certificates={dir}",
        sock.display()
    );
    let o = sanbench_verify_run(&uri);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(result_tls(&o).contains("X.509"), "{}", result_tls(&o));
    // A unix socket has no kernel TLS (TCP only): the records stay in user space, saying why.
    assert_eq!(
        result_records(&o),
        "user (kernel TLS needs a TCP connection)"
    );
}

#[test]
#[cfg_attr(
    not(feature = "interop"),
    ignore = "interop tier: needs openssl and qemu-nbd"
)]
fn against_qemu_nbd_with_client_certificates() {
    let pki = pki("sanbench-test-ca");
    let dir = pki.path().display().to_string();
    let img_dir = tempfile::tempdir().unwrap();
    let img = img_dir.path().join("disk.img");
    std::fs::File::create(&img)
        .unwrap()
        .set_len(64 << 20)
        .unwrap();
    let port = sanbench_testkit::free_port();
    // qemu verifies the client's certificate too (verify-peer defaults to yes): sanbench
    // presents client-cert.pem from the same directory, as libnbd does.
    let q = Peer::start(
        "qemu-nbd",
        "qemu-utils",
        &s(&[
            "-f",
            "raw",
            "-x",
            "disk",
            "-b",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "--persistent",
            "--object",
            &format!("tls-creds-x509,id=tls0,dir={dir},endpoint=server"),
            "--tls-creds",
            "tls0",
            &img.display().to_string(),
        ]),
        port,
    );
    let uri = format!("nbds://127.0.0.1:{}/disk?tls-certificates={dir}", q.port);
    let o = sanbench_verify_run(&uri);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(result_tls(&o).contains("TLS"), "{}", result_tls(&o));
}

#[test]
#[cfg_attr(not(feature = "interop"), ignore = "interop tier: needs openssl")]
fn against_its_own_server() {
    let pki = pki("sanbench-test-ca");
    let dir = pki.path().display().to_string();
    let srv = Serve::start("32M", &["--tls", "require", "--tls-certificates", &dir]);
    let uri = format!("nbds://localhost:{}/?tls-certificates={dir}", srv.port());
    let o = sanbench_verify_run(&uri);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(result_tls(&o).contains("X.509"), "{}", result_tls(&o));
    // Kernel TLS where this host has it (its tls module), else user space saying why; both
    // sides forced to user space by their switches.
    assert_eq!(result_records(&o), host_records());
    let off = Serve::start("32M", &["--tls-certificates", &dir, "--ktls", "off"]);
    assert!(
        off.line.contains("TLS records in user space (--ktls off)"),
        "{}",
        off.line
    );
    let uri = format!(
        "nbds://localhost:{}/?tls-certificates={dir}&ktls=off",
        off.port()
    );
    let o = sanbench_verify_run(&uri);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(result_records(&o), "user (ktls=off)");
}

#[test]
#[cfg_attr(
    not(feature = "interop"),
    ignore = "interop tier: needs openssl and nbdkit"
)]
fn nbds_never_falls_back_to_plaintext() {
    let pki = pki("sanbench-test-ca");
    let dir = pki.path().display().to_string();
    // nbdkit without TLS, and sanbench's server with TLS off: both refuse STARTTLS.
    let kit = Peer::nbdkit(&[]);
    let srv = Serve::start("4M", &[]);
    for port in [kit.port.to_string(), srv.port().to_string()] {
        let uri = format!("nbds://localhost:{port}/?tls-certificates={dir}");
        let o = sanbench_bounded(&["run", &uri, "--time", "200ms", "--no-monitor"]);
        assert_eq!(o.status.code(), Some(1), "{uri}: {}", stderr(&o));
        let e = stderr(&o);
        assert!(e.contains("never falls back to plaintext"), "{e}");
        assert_eq!(e.trim().lines().count(), 1, "{e}");
    }
}

#[test]
#[cfg_attr(
    not(feature = "interop"),
    ignore = "interop tier: needs openssl and nbdkit"
)]
fn an_untrusted_server_certificate_fails_unless_verification_is_off() {
    let ours = pki("sanbench-test-ca");
    let other = pki("another-ca");
    let kit = Peer::nbdkit(&s(&[
        "--tls=require",
        &format!("--tls-certificates={}", ours.path().display()),
    ]));
    let uri = format!(
        "nbds://localhost:{}/?tls-certificates={}",
        kit.port,
        other.path().display()
    );
    let o = sanbench_bounded(&["run", &uri, "--time", "200ms", "--no-monitor"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("TLS handshake"), "{}", stderr(&o));
    // A name the certificate does not carry fails the same way.
    let uri = format!(
        "nbds://localhost:{}/?tls-certificates={}&tls-hostname=elsewhere.example",
        kit.port,
        ours.path().display()
    );
    let o = sanbench_bounded(&["run", &uri, "--time", "200ms", "--no-monitor"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    // tls-verify-peer=false: encrypted to whoever answered.
    let uri = format!(
        "nbds://localhost:{}/?tls-certificates={}&tls-verify-peer=false",
        kit.port,
        other.path().display()
    );
    let o = sanbench_verify_run(&uri);
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn bad_tls_uris_are_usage_errors() {
    let t = tempfile::tempdir().unwrap();
    for uri in [
        format!(
            "nbds://localhost:1/?tls-certificates={}/none",
            t.path().display()
        ),
        "nbds://localhost:1/?tls-verify-peer=perhaps".to_string(),
        "nbd://localhost:1/?tls-certificates=/tmp".to_string(),
        "nbds://localhost:1/?ktls=maybe".to_string(),
        "nbd://localhost:1/?ktls=off".to_string(),
    ] {
        let o = sanbench_bounded(&["run", &uri, "--time", "200ms", "--no-monitor"]);
        assert_eq!(o.status.code(), Some(2), "{uri}: {}", stderr(&o));
        assert_eq!(
            stderr(&o).trim().lines().count(),
            1,
            "{uri}: {}",
            stderr(&o)
        );
    }
}
