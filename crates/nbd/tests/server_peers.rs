//! Our server probed and driven by real NBD clients: nbdinfo, nbdcopy, fio's nbd engine.

mod common;

use std::process::Command;

use common::{pattern, require, OurServer};

#[test]
fn nbdinfo_sees_size_name_and_flags() {
    require("nbdinfo", "libnbd-bin");
    let srv = OurServer::ram(64 << 20, "ramdisk");
    let out = Command::new("nbdinfo")
        .arg("--json")
        .arg(srv.uri("ramdisk"))
        .output()
        .expect("run nbdinfo");
    assert!(
        out.status.success(),
        "nbdinfo failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("nbdinfo json");
    assert_eq!(v["protocol"], "newstyle-fixed", "{v}");
    let e = &v["exports"][0];
    assert_eq!(e["export-name"], "ramdisk", "{v}");
    assert_eq!(e["export-size"], 64u64 << 20, "{v}");
    assert_eq!(e["is_read_only"], false, "{v}");
    assert_eq!(e["can_multi_conn"], true, "{v}");
    assert_eq!(e["can_flush"], true, "{v}");
    assert_eq!(e["can_fua"], true, "{v}");
    assert_eq!(e["can_trim"], true, "{v}");
    assert_eq!(e["can_zero"], true, "{v}");
    assert_eq!(e["block_size_maximum"], 32u64 << 20, "{v}");
    assert_eq!(v["TLS"], false, "{v}");
}

#[test]
fn nbdinfo_lists_the_export() {
    require("nbdinfo", "libnbd-bin");
    let srv = OurServer::ram(1 << 20, "listed");
    let out = Command::new("nbdinfo")
        .args(["--list", "--json"])
        .arg(srv.uri(""))
        .output()
        .expect("run nbdinfo");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["exports"][0]["export-name"], "listed", "{v}");
}

#[test]
fn nbdcopy_round_trip() {
    require("nbdcopy", "libnbd-bin");
    let size = 24 << 20;
    let srv = OurServer::ram(size, "");
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src.bin");
    let back = dir.path().join("back.bin");
    let data = pattern(size as usize, 42);
    std::fs::write(&src, &data).unwrap();
    let st = Command::new("nbdcopy")
        .arg(&src)
        .arg(srv.uri(""))
        .status()
        .unwrap();
    assert!(st.success(), "nbdcopy to server failed");
    let st = Command::new("nbdcopy")
        .arg(srv.uri(""))
        .arg(&back)
        .status()
        .unwrap();
    assert!(st.success(), "nbdcopy from server failed");
    let got = std::fs::read(&back).unwrap();
    assert!(got == data, "data read back differs");
    // Written once: about the export size in chunks, nothing more.
    let alloc = srv.stats.allocated_bytes();
    assert!(alloc <= size + (64 << 10), "allocated {alloc}");
}

#[test]
fn fio_randrw_verify() {
    require("fio", "fio");
    let srv = OurServer::ram(64 << 20, "");
    let out = Command::new("fio")
        .args([
            "--name=verify",
            "--ioengine=nbd",
            &format!("--uri={}", srv.uri("")),
            "--rw=randrw",
            "--bs=4k",
            "--iodepth=32",
            "--size=16M",
            "--verify=crc32c",
            "--do_verify=1",
            "--verify_fatal=1",
            "--verify_state_save=0",
            "--output-format=json",
        ])
        .output()
        .expect("run fio");
    assert!(
        out.status.success(),
        "fio failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    // fio may print notes before the JSON document.
    let text = String::from_utf8_lossy(&out.stdout);
    let json = &text[text.find('{').expect("fio printed no JSON")..];
    let v: serde_json::Value = serde_json::from_str(json).expect("fio json");
    let job = &v["jobs"][0];
    assert_eq!(job["error"], 0, "{job}");
    assert!(job["write"]["total_ios"].as_u64().unwrap() > 0, "{job}");
    assert!(job["read"]["total_ios"].as_u64().unwrap() > 0, "{job}");
}

/// fio at QD 32 for long enough that the server coalesces its wake-ups: data still verifies.
/// fio at QD 1 (each request waits for its reply): the server never waits for a second one.
#[test]
fn fio_pipelined_wakes_are_coalesced_and_qd1_never_is() {
    require("fio", "fio");
    let run = |srv: &OurServer, rw: &str, qd: &str, extra: &[&str]| {
        let uri = format!("--uri={}", srv.uri(""));
        let depth = format!("--iodepth={qd}");
        let mut args = vec![
            "--name=c",
            "--ioengine=nbd",
            uri.as_str(),
            "--bs=4k",
            depth.as_str(),
            "--size=16M",
            "--output-format=json",
        ];
        args.push(rw);
        args.extend_from_slice(extra);
        let out = Command::new("fio").args(&args).output().expect("run fio");
        assert!(
            out.status.success(),
            "fio {args:?} failed: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
    };
    // Waits are counted as connections end: each server is stopped (threads joined) first.
    let srv = OurServer::ram(64 << 20, "");
    run(&srv, "--rw=randread", "1", &["--time_based", "--runtime=1"]);
    let stats = srv.stats.clone();
    drop(srv);
    assert_eq!(stats.coalesced_waits(), 0, "a QD 1 client was made to wait");
    let srv = OurServer::ram(64 << 20, "");
    run(
        &srv,
        "--rw=randwrite",
        "32",
        &[
            "--verify=crc32c",
            "--do_verify=1",
            "--verify_fatal=1",
            "--verify_state_save=0",
            "--loops=8",
        ],
    );
    let stats = srv.stats.clone();
    drop(srv);
    assert!(stats.coalesced_waits() > 0, "no coalescing at QD 32");
}
