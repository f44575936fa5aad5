//! `sanbench serve nvme` driven by `sanbench run` over `nvme+tcp://`, every read's data
//! checked (--verify), with and without digests, writes in the capsule and on R2Ts, several
//! workers (one I/O queue each); then the server's summary on SIGINT. `sanbench discover`
//! against the same target's discovery controller.

use std::process::Command;

use sanbench_testkit::Served;

fn bin() -> std::path::PathBuf {
    assert_cmd::cargo::cargo_bin("sanbench")
}

/// `sanbench serve nvme` (32 MiB) on a free loopback port; its URI names namespace 1.
fn serve_with(extra: &[&str]) -> Served {
    let mut args = vec!["nvme", "--size", "32M", "--listen", "127.0.0.1:0"];
    args.extend(extra);
    let s = Served::start(bin(), &args);
    assert!(s.uri.ends_with("/1"), "{}", s.line);
    s
}

fn serve() -> Served {
    serve_with(&[])
}

fn run(uri: &str, args: &[&str]) -> serde_json::Value {
    let out = Command::new(bin())
        .args([
            "run",
            uri,
            "--time",
            "1s",
            "--ramp",
            "0",
            "--quiet",
            "--no-monitor",
        ])
        .args(["--verify", "--json", "-"])
        .args(args)
        .output()
        .unwrap();
    sanbench_testkit::ok_json(&out)
}

#[test]
fn run_verify_against_serve_nvme() {
    let server = serve();
    let uri = server.uri.clone();
    // 4 KiB writes go in the capsule, 128 KiB ones on R2Ts; reads of both are checked.
    let v = run(
        &uri,
        &[
            "--precondition",
            "fill",
            "--bs",
            "4k",
            "--read",
            "50",
            "--qd",
            "8",
        ],
    );
    let r = &v["results"][0];
    assert_eq!(r["info"]["params"]["model"], "SANBENCH", "{v}");
    assert_eq!(r["info"]["params"]["in_capsule_bytes"], 8192);
    assert!(
        r["queues"][0]["in_capsule_writes"].as_u64().unwrap() > 0,
        "{v}"
    );
    assert!(r["verify"]["reads"].as_u64().unwrap() > 0, "{v}");
    assert_eq!(r["verify"]["bad_blocks"], serde_json::json!([]), "{v}");
    let digests = format!("{uri}?digest=header,data");
    let v = run(
        &digests,
        &[
            "--bs",
            "128k",
            "--read",
            "50",
            "--qd",
            "4",
            "--workers",
            "3",
        ],
    );
    let r = &v["results"][0];
    assert_eq!(r["info"]["params"]["header_digest"], true, "{v}");
    assert_eq!(r["info"]["params"]["data_digest"], true);
    assert!(r["queues"][0]["r2t_writes"].as_u64().unwrap() > 0, "{v}");
    assert!(r["verify"]["reads"].as_u64().unwrap() > 0, "{v}");
    assert_eq!(r["verify"]["bad_blocks"], serde_json::json!([]), "{v}");
    let err = server.interrupt();
    assert!(err.contains("0 ended by an error"), "{err}");
}

#[test]
fn discover_lists_the_subsystem() {
    let server = serve();
    let uri = server.uri.clone();
    // nvme+tcp://127.0.0.1:PORT/NQN/1 -> nvme+tcp://127.0.0.1:PORT
    let base = uri.splitn(4, '/').take(3).collect::<Vec<_>>().join("/");
    let out = Command::new(bin())
        .args(["discover", "--json", &base])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let recs = v.as_array().unwrap();
    assert_eq!(recs.len(), 1, "{v}");
    assert_eq!(recs[0]["trtype"], "tcp");
    assert_eq!(recs[0]["adrfam"], "ipv4");
    assert_eq!(recs[0]["subtype"], "nvm subsystem");
    assert_eq!(recs[0]["traddr"], "127.0.0.1");
    assert_eq!(recs[0]["subnqn"], "nqn.2026-11.io.sanbench:ram");
    assert_eq!(
        format!("{}/1", recs[0]["uri"].as_str().unwrap()),
        uri,
        "{v}"
    );
    // The text form names the URI `run` opens.
    let out = Command::new(bin())
        .args(["discover", &base])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("1 record(s)") && text.contains(&uri[..uri.len() - 2]),
        "{text}"
    );
    // Bad input: one line, exit 2; nothing listening: exit 1.
    for (args, code) in [
        (vec!["discover", "nbd://127.0.0.1"], 2),
        (vec!["discover", &format!("{base}/nqn.other")], 2),
        (vec!["discover", "nvme+tcp://127.0.0.1:1"], 1),
    ] {
        let out = Command::new(bin()).args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }
    server.interrupt();
}

#[test]
fn namespaces_each_run_on_their_own() {
    let server = serve_with(&["--namespaces", "2"]);
    let uri = server.uri.clone();
    let second = format!("{}/2", &uri[..uri.len() - 2]);
    let v = run(&second, &["--bs", "64k", "--read", "50", "--qd", "2"]);
    let r = &v["results"][0];
    assert_eq!(r["info"]["params"]["nsid"], 2, "{v}");
    assert_eq!(r["info"]["size"], 32 << 20, "{v}");
    assert!(r["verify"]["reads"].as_u64().unwrap() > 0, "{v}");
    assert_eq!(r["verify"]["bad_blocks"], serde_json::json!([]), "{v}");
    // Namespace 3 does not exist: the run fails with one line.
    let out = Command::new(bin())
        .args([
            "run",
            &format!("{}/3", &uri[..uri.len() - 2]),
            "--time",
            "1s",
        ])
        .args(["--quiet", "--no-monitor"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stderr).lines().count(), 1);
    server.interrupt();
    let out = Command::new(bin())
        .args(["serve", "nvme", "--size", "1M", "--namespaces", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(String::from_utf8_lossy(&out.stderr).lines().count(), 1);
}

fn run_plain(uri: &str) -> serde_json::Value {
    let out = Command::new(bin())
        .args(["run", uri, "--time", "300ms", "--ramp", "0", "--quiet"])
        .args(["--no-monitor", "--bs", "64k", "--json", "-"])
        .output()
        .unwrap();
    sanbench_testkit::ok_json(&out)
}

#[test]
fn a_written_namespace_is_not_filled_again() {
    let server = serve();
    let uri = server.uri.clone();
    // Fresh: NUSE 0, so the first run fills the span; then NUSE = NSZE and the next run
    // measures at once.
    let v = run_plain(&uri);
    assert_eq!(
        v["results"][0]["precondition"]["state"], "preconditioned",
        "{v}"
    );
    let v = run_plain(&uri);
    let p = &v["results"][0]["precondition"];
    assert_eq!(p["state"], "reported_written", "{v}");
    assert_eq!(
        p["allocation"]["method"], "Identify Namespace (NUSE)",
        "{v}"
    );
    server.interrupt();
}
