//! Data integrity verification against real peers: every fault an nbdkit plugin injects is
//! found within the run that meets it, named, at the right offset, with exit code 3; a clean
//! target gives no bad block; a file and a tgtd LUN corrupted between runs are caught by
//! `sanbench verify`; data fio wrote is foreign, not a crash. With trims and write-zeroes in
//! the mix, a trimmed block reads zeros or its old data (zeros where the target promises
//! them) on every built-in server, and a target that returns junk after a trim is caught.

use std::path::Path;

use assert_cmd::Command;
use sanbench_testkit::Served;
use serde_json::Value;

mod across_runs;

fn sanbench() -> Command {
    Command::cargo_bin("sanbench").unwrap()
}

/// Runs sanbench with `--json -`; returns the exit code, the document and stderr.
fn json_of(args: &[&str]) -> (i32, Value, String) {
    let out = sanbench()
        .args(args)
        .args(["--json", "-"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    let doc = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no JSON ({e}); stderr: {err}"));
    (out.status.code().unwrap_or(-1), doc, err)
}

fn verify_of(doc: &Value) -> &Value {
    let v = &doc["results"][0]["verify"];
    assert!(v.is_object(), "no verify block in {doc}");
    v
}

const AT: u64 = 64 << 10;
const DEST: u64 = 128 << 10;

/// nbdkit serving 1 MiB through the fault plugin, the fault at block `AT`.
fn faulty(fault: &str) -> (sanbench_testkit::NbdkitPython, String) {
    let plugin = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/faulty.py");
    let n = sanbench_testkit::NbdkitPython::start(
        &plugin,
        &[
            "size=1M".into(),
            format!("fault={fault}"),
            format!("at={AT}"),
            format!("dest={DEST}"),
        ],
    );
    let uri = n.uri.clone();
    (n, uri)
}

/// A verified 4 KiB random 50/50 run on a faulty export; the first write of every block is
/// the fill, so every later write to the fault's block meets the fault.
fn run_on(fault: &str) -> (i32, Value, String) {
    let (_server, uri) = faulty(fault);
    filled_verified_run(&uri, "4", "2s")
}

/// A verified 4 KiB random 50/50 run on `uri` at depth `qd` for `time`, every block filled
/// first.
fn filled_verified_run(uri: &str, qd: &str, time: &str) -> (i32, Value, String) {
    json_of(&[
        "run",
        uri,
        "--verify",
        "--precondition",
        "fill",
        "--read",
        "50",
        "--random",
        "100",
        "--bs",
        "4k",
        "--qd",
        qd,
        "--time",
        time,
        "--ramp",
        "0s",
        "--quiet",
    ])
}

fn bad_offsets(v: &Value, class: &str) -> Vec<u64> {
    v["bad_blocks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["class"] == class)
        .map(|b| b["offset"].as_u64().unwrap())
        .collect()
}

#[test]
#[cfg_attr(not(feature = "interop"), ignore = "interop tier: needs nbdkit")]
fn every_injected_fault_is_found_and_named() {
    // A correct export first: nothing found.
    let (code, doc, err) = run_on("none");
    let v = verify_of(&doc);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        v["bad"],
        serde_json::json!({"wrong_data": 0, "misplaced": 0, "stale": 0,
        "torn": 0, "never_written": 0, "foreign": 0})
    );
    assert!(v["reads"].as_u64().unwrap() > 1000, "{v}");

    let block = AT..AT + 4096;
    for (fault, class, at) in [
        ("flip", "wrong_data", AT..AT + 512),
        ("drop", "stale", block.clone()),
        ("stale", "stale", block.clone()),
        ("tear", "torn", AT + 2048..AT + 4096),
        ("misdirect", "misplaced", DEST..DEST + 4096),
    ] {
        let (code, doc, err) = run_on(fault);
        let v = verify_of(&doc);
        assert_eq!(code, 3, "{fault}: exit code; {err}");
        assert!(err.contains("data did not verify"), "{fault}: {err}");
        let offs = bad_offsets(v, class);
        assert!(!offs.is_empty(), "{fault}: no {class} block in {v}");
        assert!(
            offs.iter().all(|o| at.contains(o)),
            "{fault}: {class} at {offs:?}, expected within {at:?}"
        );
        // Nothing else is blamed, except the block a misdirected write left behind.
        let total: u64 = v["bad"]
            .as_object()
            .unwrap()
            .values()
            .map(|n| n.as_u64().unwrap())
            .sum();
        let this = v["bad"][class].as_u64().unwrap();
        if fault == "misdirect" {
            assert!(
                bad_offsets(v, "stale").iter().all(|o| block.contains(o)),
                "{v}"
            );
            let from = v["bad_blocks"]
                .as_array()
                .unwrap()
                .iter()
                .find(|b| b["class"] == "misplaced")
                .unwrap()["found"]["offset"]
                .as_u64()
                .unwrap();
            assert!(block.contains(&from), "misplaced data came from {from}");
        } else {
            assert_eq!(total, this, "{fault}: {v}");
        }
    }
}

#[test]
fn a_clean_ram_disk_verifies_under_load() {
    let (code, doc, err) = json_of(&[
        "run",
        "mem:64M",
        "--verify",
        "--read",
        "70",
        "--random",
        "100",
        "--bs",
        "4k",
        "--qd",
        "32",
        "--workers",
        "2",
        "--time",
        "3s",
        "--ramp",
        "0s",
        "--quiet",
    ]);
    assert_eq!(code, 0, "{err}");
    let v = verify_of(&doc);
    assert_eq!(v["bad_blocks"].as_array().unwrap().len(), 0, "{v}");
    let reads = v["reads"].as_u64().unwrap();
    let ios = doc["results"][0]["ios"].as_u64().unwrap();
    eprintln!("verified {reads} reads of {ios} I/Os");
    assert!(reads > 100_000, "{reads} reads");
    assert_eq!(v["unit"], 512);
    assert_eq!(v["granule"], 4096);
    assert_eq!(v["map_bytes_per_tib"], 1u64 << 28);
    // Mixed sizes: the map's granule is the largest every I/O is aligned to.
    let (code, doc, err) = json_of(&[
        "run",
        "mem:16M",
        "--verify",
        "--read",
        "50",
        "--random",
        "100",
        "--read-bs",
        "8k",
        "--write-bs",
        "2k",
        "--qd",
        "8",
        "--time",
        "1s",
        "--ramp",
        "0s",
        "--quiet",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(verify_of(&doc)["granule"], 2048);
}

#[test]
fn bad_input_is_refused_with_exit_2() {
    for args in [
        &["run", "mem:1M", "--verify", "--dedupe", "50", "--time", "1"][..],
        &["run", "mem:1M", "--verify", "--bs", "700", "--time", "1"][..],
        &["verify", "mem:1M", "--run-id", "xyz"][..],
    ] {
        let out = sanbench().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

/// `compare --suite quick --verify` of `targets`, one round of `time` per cell, its report in
/// `out`; its results.json.
fn verified_quick_comparison(out: &std::path::Path, time: &str, targets: &[&str]) -> Value {
    let run = sanbench()
        .args([
            "compare", "--repeat", "1", "--suite", "quick", "--time", time,
        ])
        .args([
            "--ramp",
            "0.1s",
            "--no-store",
            "--verify",
            "--quiet",
            "--out",
        ])
        .arg(out)
        .args(targets)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{err}");
    serde_json::from_slice(&std::fs::read(out.join("results.json")).unwrap()).unwrap()
}

#[test]
fn a_verified_comparison_checks_every_cell_and_reports_it() {
    let dir = tempfile::tempdir().unwrap();
    let doc = verified_quick_comparison(dir.path(), "0.5s", &["a=mem:32M", "b=mem:48M"]);
    let cells = doc["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 10);
    for c in cells {
        let v = &c["result"]["verify"];
        assert_eq!(v["bad"]["wrong_data"], 0, "{c}");
        // The fill before the first cell makes every block known to every later cell.
        assert_eq!(v["units_unknown"], 0, "{v}");
    }
    let reads: u64 = cells
        .iter()
        .map(|c| c["result"]["verify"]["reads"].as_u64().unwrap())
        .sum();
    assert!(reads > 1000, "{reads}");
    let md = std::fs::read_to_string(dir.path().join("report.md")).unwrap();
    assert!(md.contains("## Data verification"), "{md}");
}

/// Two targets that are one store (the same `mem:` URI is one RAM disk) share one verifier:
/// each sees the other's writes. With a verifier each, every block the other target wrote was
/// "stale" (179,792 false bad blocks in one run).
#[test]
fn two_targets_on_one_store_share_the_verification() {
    let dir = tempfile::tempdir().unwrap();
    let doc = verified_quick_comparison(dir.path(), "0.4s", &["a=mem:16M", "b=mem:16M"]);
    let cells = doc["cells"].as_array().unwrap();
    assert!(cells
        .iter()
        .any(|c| c["result"]["write"]["ios"].as_u64() > Some(0)));
    for c in cells {
        let bad = &c["result"]["verify"]["bad"];
        let total: u64 = bad
            .as_object()
            .unwrap()
            .values()
            .map(|v| v.as_u64().unwrap())
            .sum();
        assert_eq!(total, 0, "{}/{}: {bad}", c["workload"], c["target"]);
    }
}

/// A verified 4 KiB random mix with trims and write-zeroes on `uri`.
fn discard_mix(uri: &str, time: &str) -> (i32, Value, String) {
    json_of(&[
        "run",
        uri,
        "--verify",
        "--precondition",
        "fill",
        "--read",
        "50",
        "--trim",
        "20",
        "--write-zeroes",
        "5",
        "--random",
        "100",
        "--bs",
        "4k",
        "--qd",
        "8",
        "--time",
        time,
        "--ramp",
        "0s",
        "--quiet",
    ])
}

#[test]
fn trims_and_write_zeroes_verify_on_every_built_in_server() {
    for (kind, promised) in [("nbd", false), ("iscsi", true), ("nvme", true)] {
        let server = Served::start(
            assert_cmd::cargo::cargo_bin("sanbench"),
            &[kind, "--size", "4M", "--listen", "127.0.0.1:0"],
        );
        let uri = if kind == "nbd" {
            format!("nbd://{}", server.addr())
        } else {
            server.uri.clone()
        };
        let (code, doc, err) = discard_mix(&uri, "700ms");
        assert_eq!(code, 0, "{kind}: {err}");
        let r = &doc["results"][0];
        let v = verify_of(&doc);
        assert_eq!(v["bad_blocks"].as_array().unwrap().len(), 0, "{kind}: {v}");
        assert!(v["reads"].as_u64().unwrap() > 100, "{kind}: {v}");
        assert!(r["trim"]["ios"].as_u64().unwrap() > 20, "{kind}: {r}");
        let p = &r["info"]["params"];
        assert_eq!(
            p["trim_reads_zeros"].as_bool().unwrap_or(false),
            promised,
            "{kind}: {p}"
        );
        server.interrupt();
    }
    let (code, doc, err) = discard_mix("mem:8M", "500ms");
    assert_eq!(code, 0, "mem: {err}");
    assert_eq!(verify_of(&doc)["bad_blocks"].as_array().unwrap().len(), 0);
}

#[test]
#[cfg_attr(not(feature = "interop"), ignore = "interop tier: needs nbdkit")]
fn junk_after_a_trim_is_caught() {
    let (_clean, uri) = faulty("none");
    let (code, doc, err) = discard_mix(&uri, "2s");
    assert_eq!(code, 0, "a correct trimming export: {err}");
    assert!(doc["results"][0]["trim"]["ios"].as_u64().unwrap() > 50);
    let (_junk, uri) = faulty("trimjunk");
    let (code, doc, err) = discard_mix(&uri, "2s");
    assert_eq!(code, 3, "exit code; {err}");
    let v = verify_of(&doc);
    let offs = bad_offsets(v, "foreign");
    assert!(!offs.is_empty(), "no foreign block in {v}");
    assert!(
        offs.iter().all(|o| (AT..AT + 4096).contains(o)),
        "foreign at {offs:?}, expected within the trimmed block at {AT}"
    );
}
