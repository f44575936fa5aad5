//! sanbench's NBD server with TLS (`serve nbd --tls ...`) against libnbd's clients (nbdinfo,
//! nbdcopy) using libnbd's URI keys, and the refusals: a plaintext client of a server that
//! requires TLS, a client with credentials the server does not trust.

mod tls;

use std::process::Command;

use sanbench_testkit::require;
use tls::{pki, run, stderr, Serve};

fn nbdinfo_json(uri: &str) -> serde_json::Value {
    let out = run(Command::new("timeout").args(["30", "nbdinfo", "--json", uri]));
    assert!(out.status.success(), "nbdinfo {uri}: {}", stderr(&out));
    serde_json::from_slice(&out.stdout).expect("nbdinfo json")
}

#[test]
#[cfg_attr(
    not(feature = "interop"),
    ignore = "interop tier: needs openssl and nbdinfo"
)]
fn nbdinfo_negotiates_tls_with_certificates() {
    require("nbdinfo", "libnbd-bin");
    let pki = pki("sanbench-test-ca");
    let dir = pki.path().display().to_string();
    let srv = Serve::start("16M", &["--tls", "require", "--tls-certificates", &dir]);
    assert!(srv.line.contains("TLS required"), "{}", srv.line);
    for host in ["localhost", "127.0.0.1"] {
        let uri = format!("nbds://{host}:{}/?tls-certificates={dir}", srv.port());
        let v = nbdinfo_json(&uri);
        assert_eq!(v["TLS"], true, "{v}");
        let e = &v["exports"][0];
        assert_eq!(e["export-size"], 16u64 << 20, "{v}");
        // Negotiated inside TLS: structured replies and base:allocation.
        assert_eq!(e["can_df"], true, "{v}");
    }
}

/// `--delay` over TLS: the connection reads from the TLS session without blocking before it
/// waits for the next due reply (decrypted requests may wait there, unseen by a poll).
#[test]
#[cfg_attr(not(feature = "interop"), ignore = "interop tier: needs openssl")]
fn delayed_replies_over_tls() {
    let pki = pki("sanbench-test-ca");
    let dir = pki.path().display().to_string();
    let srv = Serve::start("8M", &["--tls-certificates", &dir, "--delay", "2ms"]);
    assert!(srv.line.contains("replies delayed 2ms"), "{}", srv.line);
    let uri = format!("nbds://localhost:{}/?tls-certificates={dir}", srv.port());
    let out = run(Command::new(tls::bin())
        .args(["run", &uri, "--qd", "4", "--time", "1s", "--ramp", "100ms"])
        .args(["--read", "50", "--precondition", "none", "--verify"])
        .args(["--quiet", "--no-monitor", "--baseline", "0", "--json", "-"]));
    let doc = sanbench_testkit::ok_json(&out);
    let r = &doc["results"][0];
    let min = r["latency_us"]["min"].as_f64().unwrap();
    let iops = r["iops"].as_f64().unwrap();
    assert!(min >= 2000.0, "{min} µs under a 2 ms delay");
    // QD 4 at 2 ms: about 2,000 IOPS; one at a time would be at most 500.
    assert!(iops > 1000.0, "{iops} IOPS at QD 4: replies held in turn");
    assert_eq!(r["verify"]["bad_blocks"], serde_json::json!([]), "{r}");
    srv.stop();
}

#[test]
#[cfg_attr(
    not(feature = "interop"),
    ignore = "interop tier: needs openssl and nbdcopy"
)]
fn nbdcopy_round_trip_over_tls() {
    require("nbdcopy", "libnbd-bin");
    let pki = pki("sanbench-test-ca");
    let dir = pki.path().display().to_string();
    let srv = Serve::start("24M", &["--tls-certificates", &dir]);
    let uri = format!("nbds://localhost:{}/?tls-certificates={dir}", srv.port());
    let t = tempfile::tempdir().unwrap();
    let (src, back) = (t.path().join("src"), t.path().join("back"));
    let data: Vec<u8> = (0..24u32 << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(&src, &data).unwrap();
    let o = run(Command::new("timeout")
        .args(["60", "nbdcopy"])
        .arg(&src)
        .arg(&uri));
    assert!(o.status.success(), "nbdcopy to server: {}", stderr(&o));
    let o = run(Command::new("timeout")
        .args(["60", "nbdcopy", &uri])
        .arg(&back));
    assert!(o.status.success(), "nbdcopy from server: {}", stderr(&o));
    assert!(
        std::fs::read(&back).unwrap() == data,
        "data read back differs"
    );
}

#[test]
#[cfg_attr(
    not(feature = "interop"),
    ignore = "interop tier: needs openssl and nbdinfo"
)]
fn require_refuses_plaintext_and_on_serves_both() {
    require("nbdinfo", "libnbd-bin");
    let pki = pki("sanbench-test-ca");
    let dir = pki.path().display().to_string();
    let srv = Serve::start("4M", &["--tls", "require", "--tls-certificates", &dir]);
    let plain = format!("nbd://127.0.0.1:{}/", srv.port());
    let o = run(Command::new("timeout").args(["30", "nbdinfo", &plain]));
    assert!(!o.status.success(), "plaintext nbdinfo was served");
    // sanbench's own client says why, with exit 1.
    let o = tls::sanbench_bounded(&["run", &plain, "--time", "200ms", "--no-monitor"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("requires TLS"), "{}", stderr(&o));

    let srv = Serve::start("4M", &["--tls", "on", "--tls-certificates", &dir]);
    let v = nbdinfo_json(&format!("nbd://127.0.0.1:{}/", srv.port()));
    assert_eq!(v["TLS"], false, "{v}");
    let v = nbdinfo_json(&format!(
        "nbds://localhost:{}/?tls-certificates={dir}",
        srv.port()
    ));
    assert_eq!(v["TLS"], true, "{v}");
}

#[test]
#[cfg_attr(
    not(feature = "interop"),
    ignore = "interop tier: needs openssl and nbdinfo"
)]
fn a_client_that_does_not_trust_the_server_fails() {
    require("nbdinfo", "libnbd-bin");
    let ours = pki("sanbench-test-ca");
    let other = pki("another-ca");
    let srv = Serve::start(
        "4M",
        &["--tls-certificates", &ours.path().display().to_string()],
    );
    let uri = format!(
        "nbds://localhost:{}/?tls-certificates={}",
        srv.port(),
        other.path().display()
    );
    let o = run(Command::new("timeout").args(["30", "nbdinfo", &uri]));
    assert!(!o.status.success(), "nbdinfo trusted a foreign CA");
    // The server is still there for the next client.
    let good = format!(
        "nbds://localhost:{}/?tls-certificates={}",
        srv.port(),
        ours.path().display()
    );
    assert_eq!(nbdinfo_json(&good)["TLS"], true);
}

#[test]
fn bad_tls_flags_are_usage_errors() {
    let t = tempfile::tempdir().unwrap();
    let missing = t.path().join("none").display().to_string();
    for args in [
        vec!["--tls", "require"],
        vec!["--tls", "sometimes"],
        vec!["--tls", "off", "--tls-certificates", "/tmp"],
        vec!["--tls-certificates", missing.as_str()],
    ] {
        let mut a = vec!["serve", "nbd", "--size", "1M", "--listen", "127.0.0.1:0"];
        a.extend(args.iter().copied());
        let o = tls::sanbench_bounded(&a);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        // One line (clap's own errors add the "see --help" line).
        let e = stderr(&o);
        let lines: Vec<&str> = e.trim().lines().collect();
        assert!(
            lines.len() == 1 || lines[1].contains("--help"),
            "{args:?}: {e}"
        );
    }
}
