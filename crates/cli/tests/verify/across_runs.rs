//! What a verification keeps from one run to the next: a file and a tgtd LUN corrupted
//! between runs are caught by `sanbench verify`, data fio wrote is foreign, a server killed
//! mid-run verifies from the kept state, and a session continued over runs catches a lost
//! write.

use std::path::Path;
use std::process::{Command as Proc, Stdio};
use std::time::Duration;

use sanbench_testkit::Served;
use serde_json::Value;

use super::{bad_offsets, filled_verified_run, json_of};

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
    let (code, doc, err) = filled_verified_run(&uri, "8", "1s");
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
