//! Data integrity verification against real peers: every fault an nbdkit plugin injects is
//! found within the run that meets it, named, at the right offset, with exit code 3; a clean
//! target gives no bad block; a file and a tgtd LUN corrupted between runs are caught by
//! `sanbench verify`; data fio wrote is foreign, not a crash. With trims and write-zeroes in
//! the mix, a trimmed block reads zeros or its old data (zeros where the target promises
//! them) on every built-in server, and a target that returns junk after a trim is caught.

use std::path::Path;
use std::process::{Command as Proc, Stdio};
use std::time::Duration;

use assert_cmd::Command;
use sanbench_testkit::Served;
use serde_json::Value;

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
    json_of(&[
        "run",
        &uri,
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
        "4",
        "--time",
        "2s",
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

fn patch(path: &Path, at: u64, bytes: &[u8]) {
    use std::io::{Seek, SeekFrom, Write};
    let mut f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.seek(SeekFrom::Start(at)).unwrap();
    f.write_all(bytes).unwrap();
    f.sync_all().unwrap();
}

fn read_at(path: &Path, at: u64, len: usize) -> Vec<u8> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(path).unwrap();
    f.seek(SeekFrom::Start(at)).unwrap();
    let mut b = vec![0u8; len];
    f.read_exact(&mut b).unwrap();
    b
}

/// Flips a byte at 1 MiB + 100, copies the block at 4 KiB over 8 KiB, zeros 12 KiB.
fn corrupt(path: &Path) {
    let mut b = read_at(path, (1 << 20) + 100, 1);
    b[0] ^= 0xff;
    patch(path, (1 << 20) + 100, &b);
    let blk = read_at(path, 4096, 4096);
    patch(path, 8192, &blk);
    patch(path, 12288, &[0u8; 4096]);
}

fn expect_corruption(doc: &Value, code: i32, err: &str) {
    assert_eq!(code, 3, "{err}");
    let v = &doc["targets"][0]["verify"];
    assert_eq!(bad_offsets(v, "wrong_data"), vec![1 << 20], "{v}");
    assert_eq!(bad_offsets(v, "misplaced").len(), 8, "{v}");
    assert!(bad_offsets(v, "misplaced")
        .iter()
        .all(|o| (8192..12288).contains(o)));
    assert_eq!(bad_offsets(v, "never_written").len(), 8, "{v}");
    assert_eq!(v["bad"]["foreign"], 0, "{v}");
}

#[test]
fn a_file_corrupted_between_runs_is_caught() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let f = dir.path().join("disk");
    let fs = f.to_str().unwrap();
    let (code, doc, err) = json_of(&[
        "run", fs, "--size", "4M", "--verify", "--read", "50", "--random", "100", "--bs", "4k",
        "--qd", "8", "--time", "1s", "--ramp", "0s", "--quiet",
    ]);
    assert_eq!(code, 0, "{err}");
    let run_id = doc["run_id"].as_str().unwrap().to_string();
    let (code, v, err) = json_of(&["verify", fs, "--run-id", &run_id, "--quiet"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(v["targets"][0]["verify"]["units"], 8192);
    // Another run's id: every block is foreign.
    let (code, v, _) = json_of(&["verify", fs, "--run-id", "0123456789abcdef", "--quiet"]);
    assert_eq!(code, 3);
    assert!(
        v["targets"][0]["verify"]["bad"]["foreign"]
            .as_u64()
            .unwrap()
            >= 1024
    );
    corrupt(&f);
    let (code, v, err) = json_of(&["verify", fs, "--run-id", &run_id]);
    expect_corruption(&v, code, &err);
    assert!(err.contains("misplaced") && err.contains("0x1000"), "{err}");
}

#[test]
#[cfg_attr(not(feature = "interop"), ignore = "interop tier: needs fio")]
fn data_fio_wrote_is_foreign() {
    sanbench_testkit::require("fio", "fio");
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let f = dir.path().join("fio.dat");
    let st = Proc::new("fio")
        .args([
            "--name=w",
            "--rw=write",
            "--bs=64k",
            "--size=2M",
            "--verify=crc32c",
        ])
        .arg(format!("--filename={}", f.display()))
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
    let (code, v, err) = json_of(&["verify", f.to_str().unwrap(), "--quiet"]);
    assert_eq!(code, 3, "{err}");
    let v = &v["targets"][0]["verify"];
    assert_eq!(v["bad"]["foreign"], 4096, "{v}");
    assert!(!err.contains("panicked"));
}

#[test]
#[cfg_attr(not(feature = "interop"), ignore = "interop tier: needs tgtd")]
fn a_tgtd_lun_corrupted_between_runs_is_caught() {
    let tgt = sanbench_testkit::Tgtd::start(8 << 20);
    let uri = tgt.uri();
    let (code, doc, err) = json_of(&[
        "run",
        &uri,
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
        "8",
        "--time",
        "1s",
        "--ramp",
        "0s",
        "--quiet",
    ]);
    assert_eq!(code, 0, "{err}");
    let run_id = doc["run_id"].as_str().unwrap().to_string();
    let (code, _, err) = json_of(&["verify", &uri, "--run-id", &run_id, "--quiet"]);
    assert_eq!(code, 0, "{err}");
    corrupt(tgt.image());
    let (code, v, err) = json_of(&["verify", &uri, "--run-id", &run_id, "--quiet"]);
    expect_corruption(&v, code, &err);
}

/// `sanbench serve nbd --file` on `port` (the same port again after a restart).
fn serve_file(file: &Path, port: u16) -> Served {
    Served::start(
        env!("CARGO_BIN_EXE_sanbench"),
        &[
            "nbd",
            "--size",
            "16M",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--file",
            file.to_str().unwrap(),
        ],
    )
}

#[test]
fn a_server_killed_mid_run_verifies_from_the_kept_state() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let (img, state) = (dir.path().join("disk.img"), dir.path().join("map.vs"));
    let port = sanbench_testkit::free_port();
    let uri = format!("nbd://127.0.0.1:{port}");
    let server = serve_file(&img, port);
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_sanbench"))
        .args(["run", &uri, "--verify-state"])
        .arg(&state)
        .args([
            "--flush-every",
            "16",
            "--read",
            "50",
            "--random",
            "100",
            "--bs",
            "4k",
            "--qd",
            "8",
            "--time",
            "20s",
            "--ramp",
            "0s",
            "--quiet",
            "--no-monitor",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Into the measured window (after the fill), then kill -9 the server under load.
    std::thread::sleep(Duration::from_secs(3));
    drop(server);
    let out = run.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "the run must fail with its server: {err}"
    );
    let _server = serve_file(&img, port);
    let st = state.to_str().unwrap();
    let (code, v, err) = json_of(&["verify", &uri, "--verify-state", st]);
    assert_eq!(code, 0, "{err}");
    let v = &v["targets"][0]["verify"];
    assert_eq!(v["units"], 32768, "{v}");
    assert_eq!(
        v["units_unknown"], 0,
        "the fill is part of the session: {v}"
    );
    // One corrupted block of the file is found, at its offset.
    let mut b = read_at(&img, (1 << 20) + 100, 1);
    b[0] ^= 0xff;
    patch(&img, (1 << 20) + 100, &b);
    let (code, v, err) = json_of(&["verify", &uri, "--verify-state", st, "--quiet"]);
    assert_eq!(code, 3, "{err}");
    let v = &v["targets"][0]["verify"];
    assert_eq!(bad_offsets(v, "wrong_data"), vec![1 << 20], "{v}");
    assert_eq!(v["bad"]["wrong_data"], 1, "{v}");
}

#[test]
fn a_verification_session_continues_and_catches_a_lost_write() {
    // Run 1 writes with a state file; the file target then loses one block's last write
    // (its older content put back); the state's generations name it stale.
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let (f, state) = (dir.path().join("disk"), dir.path().join("map.vs"));
    let fs = f.to_str().unwrap();
    let st = state.to_str().unwrap();
    let base = [
        "--verify-state",
        st,
        "--read",
        "0",
        "--random",
        "0",
        "--bs",
        "64k",
        "--qd",
        "4",
        "--time",
        "1s",
        "--ramp",
        "0s",
        "--quiet",
        "--no-monitor",
    ];
    let (code, doc, err) = json_of(&[&["run", fs, "--size", "1M"][..], &base[..]].concat());
    assert_eq!(code, 0, "{err}");
    // The map keeps 63 generations: a block put back a multiple of 63 writes carries its
    // current generation and cannot be called stale (README). Nor can content of the block's
    // durable generation: the fill that preconditioned the new file was flushed, so every
    // block's durable generation is 1, and after a restart the durable generation is accepted.
    // A run writes block 0 a number of times set by the clock, so run again until the content
    // put back (what block 0 held before the last run) has neither the current generation
    // (bytes 28..32 of the unit's stamp) nor generation 1; each try misses with a chance of
    // about 2 in 63, five in a row do not.
    let generation = |b: &[u8]| u32::from_le_bytes(b[28..32].try_into().unwrap());
    let mut old = read_at(&f, 0, 65536);
    let mut cur = old.clone();
    for _ in 0..5 {
        assert!((1..=63).contains(&generation(&old)), "{}", generation(&old));
        let (code, doc2, err) = json_of(&[&["run", fs][..], &base[..]].concat());
        assert_eq!(code, 0, "{err}");
        assert_eq!(
            doc["run_id"], doc2["run_id"],
            "the second run continues the session"
        );
        assert!(err.is_empty() || !err.contains("panicked"));
        cur = read_at(&f, 0, 65536);
        // A write of block 0 cut off at the run's end leaves its cell "this generation or the
        // one before" (EITHER beside the 6-bit generation): the one before is accepted too.
        use sanbench_engine::verify::map::{EITHER, GEN};
        let cell = sanbench_engine::verify::state::read_current_cell(&state, 0)
            .unwrap()
            .expect("the state file exists after a run");
        let either_prev = (cell & EITHER != 0).then(|| (cell & GEN).saturating_sub(1) as u32);
        if generation(&cur) != generation(&old)
            && generation(&old) != 1
            && either_prev != Some(generation(&old))
        {
            break;
        }
        old = cur.clone();
    }
    assert_ne!(
        generation(&cur),
        generation(&old),
        "five runs each wrote block 0 a multiple of 63 times"
    );
    assert_ne!(
        generation(&old),
        1,
        "five runs each left block 0 at generation 1"
    );
    patch(&f, 0, &old);
    let (code, v, err) = json_of(&["verify", fs, "--verify-state", st, "--quiet"]);
    assert_eq!(code, 3, "{err}");
    let v = &v["targets"][0]["verify"];
    // A whole 64 KiB write put back: 128 stale units (the first 20 kept with details).
    assert_eq!(v["bad"]["stale"], 128, "{v}");
    assert!(bad_offsets(v, "stale").iter().all(|o| *o < 65536), "{v}");
    // Part of a write put back is torn: the granule holds two generations.
    patch(&f, 0, &cur);
    patch(&f, 0, &old[..4096]);
    let (code, v, _) = json_of(&["verify", fs, "--verify-state", st, "--quiet"]);
    assert_eq!(code, 3);
    let v = &v["targets"][0]["verify"];
    assert_eq!(
        (v["bad"]["torn"].as_u64(), v["bad"]["stale"].as_u64()),
        (Some(8), Some(0)),
        "{v}"
    );
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
