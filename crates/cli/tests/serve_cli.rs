//! `sanbench serve nbd|iscsi` from the outside: --prealloc, and the summary line printed on
//! SIGINT, which ends with the bytes the store holds (scripts precondition a server, stop it
//! and read that figure).

use std::process::Command;

use sanbench_testkit::Served;

fn bin() -> std::path::PathBuf {
    assert_cmd::cargo::cargo_bin("sanbench")
}

/// A `sanbench serve` on a free loopback port, which announces how to stop it.
fn serve(args: &[&str]) -> Served {
    let mut all = args.to_vec();
    all.extend(["--listen", "127.0.0.1:0"]);
    let s = Served::start(bin(), &all);
    assert!(s.line.contains("Ctrl-C"), "{}", s.line);
    s
}

/// "allocated N bytes" from the summary line.
fn allocated(stderr: &str) -> u64 {
    stderr
        .split("allocated ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no allocated bytes in {stderr:?}"))
}

#[test]
fn nbd_summary_reports_what_a_fill_allocated() {
    let server = serve(&["nbd", "--size", "8M"]);
    let uri = format!("nbd://{}", server.addr());
    let out = Command::new(bin())
        .args(["run", &uri, "--read", "0", "--random", "0", "--bs", "64k"])
        .args(["--qd", "4", "--time", "500ms", "--ramp", "0", "--quiet"])
        .args(["--no-monitor", "--json", "-"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = server.interrupt();
    assert!(err.contains("sanbench nbd server: stopped ("), "{err}");
    assert_eq!(allocated(&err), 8 << 20, "{err}");
}

#[test]
fn prealloc_holds_the_whole_store_from_the_start() {
    let server = serve(&["iscsi", "--size", "4M", "--prealloc"]);
    let err = server.interrupt();
    assert!(
        err.contains("sanbench iscsi target: stopped (0 connections"),
        "{err}"
    );
    assert_eq!(allocated(&err), 4 << 20, "{err}");
    let server = serve(&["nbd", "--size", "2M", "--prealloc"]);
    assert_eq!(allocated(&server.interrupt()), 2 << 20);
    let server = serve(&["iscsi", "--size", "4M"]);
    assert_eq!(allocated(&server.interrupt()), 0);
}

#[test]
fn prealloc_beyond_memory_is_refused() {
    let out = Command::new(bin())
        .args(["serve", "nbd", "--size", "64P", "--prealloc"])
        .args(["--listen", "127.0.0.1:0"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("memory available"), "{err}");
}

fn run_json(uri: &str, extra: &[&str]) -> serde_json::Value {
    let out = Command::new(bin())
        .args([
            "run", uri, "--read", "100", "--time", "300ms", "--ramp", "0s",
        ])
        .args(["--json", "-", "--quiet"])
        .args(extra)
        .output()
        .unwrap();
    sanbench_testkit::ok_json(&out)
}

/// `--precondition auto` (the default) writes sanbench's own servers before a read workload:
/// afterwards each server holds the whole span, and the next run finds it reported written.
#[test]
fn auto_precondition_fills_sanbench_servers_once() {
    let size: u64 = 32 << 20;
    for kind in ["nbd", "iscsi"] {
        let server = serve(&[kind, "--size", "32M"]);
        let addr = server.addr().to_string();
        let uri = match kind {
            "nbd" => format!("nbd://{addr}"),
            _ => format!("iscsi://{addr}/iqn.2026-11.io.sanbench:ram/0"),
        };
        let first = run_json(&uri, &[]);
        let pre = &first["results"][0]["precondition"];
        assert_eq!(pre["state"], "preconditioned", "{kind}: {pre}");
        assert_eq!(pre["bytes"], size, "{kind}");
        let second = run_json(&uri, &[]);
        let pre = &second["results"][0]["precondition"];
        assert_eq!(pre["state"], "reported_written", "{kind}: {pre}");
        assert_eq!(pre["preconditioned"], false, "{kind}");
        let err = server.interrupt();
        assert_eq!(allocated(&err), size, "{kind}: {err}");
    }
}
