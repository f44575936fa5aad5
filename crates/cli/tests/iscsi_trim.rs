//! Trims and write-zeroes over iSCSI (issue 42, item 1): UNMAP with several descriptors per
//! command and WRITE SAME(16), within the LUN's Block Limits and Logical Block Provisioning
//! pages, against sanbench's own target (space returned: its `allocated N bytes` drops) and
//! tgtd (thin provisioned: its sparse image shrinks; not: the op is refused before any I/O).

use std::process::Command;

use sanbench_testkit::{ok_json, Served, Tgtd};
use serde_json::Value;

mod trim_support;
use trim_support::{allocated, trims_only_at_qd_32};

fn bin() -> std::path::PathBuf {
    assert_cmd::cargo::cargo_bin("sanbench")
}

/// A run on `target` at QD 16 for `time`, with `extra` flags (the mix, sizes).
fn run(target: &str, time: &str, extra: &[&str]) -> std::process::Output {
    Command::new(bin())
        .args(["run", target, "--qd", "16"])
        .args(["--time", time, "--ramp", "0"])
        .args(extra)
        .args(["--no-monitor", "--quiet", "--json", "-"])
        .output()
        .unwrap()
}

fn ios(r: &Value, op: &str) -> u64 {
    r[op]["ios"].as_u64().unwrap_or(0)
}

#[test]
fn sanbench_target_takes_unmap_and_write_same_and_gives_space_back() {
    let size = 8u64 << 20;
    let server = Served::start(bin(), &["iscsi", "--size", "8M", "--listen", "127.0.0.1:0"]);
    // The precondition fills the LUN, then a mix with trims and write-zeroes.
    let out = run(
        &server.uri,
        "500ms",
        &[
            "--bs",
            "64k",
            "--read",
            "50",
            "--trim",
            "20",
            "--write-zeroes",
            "10",
        ],
    );
    let doc = ok_json(&out);
    let r = &doc["results"][0];
    let p = &r["info"]["params"];
    assert_eq!(p["trim_by"], "UNMAP", "{p}");
    assert_eq!(p["write_zeroes_by"], "WRITE SAME(16)", "{p}");
    assert_eq!(p["lbprz"], true, "{p}");
    assert_eq!(p["block_limits.max_unmap_descriptors"], 256, "{p}");
    let (t, z) = (ios(r, "trim"), ios(r, "write_zeroes"));
    assert!(t > 20 && z > 10, "trims {t}, write-zeroes {z}: {r}");
    assert_eq!(r["ios"].as_u64().unwrap(), ios(r, "read") + ios(r, "write"));
    assert_eq!(r["trim"]["bytes"].as_u64().unwrap(), t * 65536);
    assert_eq!(r["write_zeroes"]["bytes"].as_u64().unwrap(), z * 65536);
    let held = allocated(&server.interrupt());
    assert!(held < size, "the store still holds {held} of {size} bytes");
    // What the target reported unwritten after the window is what it no longer holds.
    let after = &r["allocation_after"];
    assert_eq!(after["method"], "GET LBA STATUS", "{after}");
    assert_eq!(held, size - after["unwritten_bytes"].as_u64().unwrap());
}

#[test]
fn trims_of_one_batch_share_an_unmap() {
    // Trims only, 4 KiB, QD 32: the scheduler hands the queue batches, and each batch's trims
    // go out as one UNMAP with a descriptor each, so fewer commands than trims cross.
    let server = Served::start(bin(), &["iscsi", "--size", "8M", "--listen", "127.0.0.1:0"]);
    let doc = trims_only_at_qd_32(&server.uri);
    let r = &doc["results"][0];
    let trims = ios(r, "trim");
    assert!(trims > 100, "{r}");
    let qs = r["queues"].as_array().expect("per-queue facts");
    let commands: u64 = qs
        .iter()
        .map(|q| q["iscsi.commands"].as_u64().expect("iscsi.commands"))
        .sum();
    assert!(
        commands < trims,
        "{commands} commands for {trims} trims: no UNMAP carried more than one"
    );
    server.interrupt();
}

#[test]
#[cfg_attr(not(feature = "interop"), ignore = "interop tier: needs tgtd")]
fn tgtd_without_thin_provisioning_refuses_trims_before_any_io() {
    let t = Tgtd::start(16 << 20);
    let out = run(
        &t.uri(),
        "300ms",
        &["--bs", "64k", "--read", "50", "--trim", "10"],
    );
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("does not offer trim"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    // Nothing was written: the sparse image holds no blocks.
    use std::os::unix::fs::MetadataExt;
    assert_eq!(std::fs::metadata(t.image()).unwrap().blocks(), 0);
}

#[test]
#[cfg_attr(not(feature = "interop"), ignore = "interop tier: needs tgtd")]
fn tgtd_thin_provisioned_takes_unmap_and_its_image_shrinks() {
    use std::os::unix::fs::MetadataExt;
    let size = 16u64 << 20;
    let t = Tgtd::start(size);
    t.set_lun_param("thin_provisioning", "1");
    let held = || std::fs::metadata(t.image()).unwrap().blocks() * 512;
    // Fill the image first (1 MiB sequential writes), then trim most of it.
    let fill = run(
        &t.uri(),
        "300ms",
        &[
            "--read",
            "0",
            "--random",
            "0",
            "--bs",
            "1M",
            "--precondition",
            "none",
        ],
    );
    assert!(
        fill.status.success(),
        "{}",
        String::from_utf8_lossy(&fill.stderr)
    );
    let before = held();
    assert!(before >= size / 2, "the fill wrote {before} bytes");
    let doc = ok_json(&run(
        &t.uri(),
        "500ms",
        &[
            "--bs",
            "64k",
            "--read",
            "0",
            "--trim",
            "80",
            "--precondition",
            "none",
        ],
    ));
    let r = &doc["results"][0];
    let p = &r["info"]["params"];
    assert_eq!(p["trim_by"], "UNMAP", "{p}");
    assert!(ios(r, "trim") > 20, "{r}");
    let after = held();
    assert!(
        after < before,
        "tgtd's image held {before} bytes, now {after}"
    );
}
