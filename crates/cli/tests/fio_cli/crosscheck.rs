//! `sanbench crosscheck` against the real fio: one row each and Little's law for both, on a
//! tmpfs file, repeated until the intervals decide, and through fio's nbd engine.

use sanbench_testkit::{fio, Served};
use serde_json::Value;

use super::{sanbench, shm_dir};

/// The crosschecks one at a time: on 2 cores, two at once starve fio's single thread.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn crosscheck(target: &str, extra: &[&str], tolerance: &str) -> std::process::Output {
    sanbench()
        .args([
            "crosscheck",
            target,
            "--repeat",
            "1",
            "--time",
            "1s",
            "--ramp",
            "0.2s",
        ])
        .args(["--tolerance", tolerance, "--fio-bin", fio()])
        .args(extra)
        .args(if extra.contains(&"--db") {
            None
        } else {
            Some("--no-store")
        })
        .output()
        .unwrap()
}

/// Both tools ran and were compared: one row each, Little's law holding for both (a closed
/// loop keeps its depth whatever the machine's load), and exit 0 or exit 1 for a ratio
/// outside the tolerance, never a failed run. Returns stdout.
fn compared(o: &std::process::Output) -> String {
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    let err = String::from_utf8_lossy(&o.stderr);
    let rows = |tool: &str| {
        out.lines()
            .filter(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                f.len() > 2 && f[0].parse::<u32>().is_ok() && f[1] == tool
            })
            .count()
    };
    assert_eq!((rows("sanbench"), rows("fio")), (1, 1), "{out}{err}");
    let little = out
        .lines()
        .filter(|l| l.starts_with("Little's law") && l.ends_with("  ok"))
        .count();
    assert_eq!(little, 2, "{out}");
    match o.status.code() {
        Some(0) => assert!(out.contains("verdict: sanbench and fio agree"), "{out}"),
        Some(1) => assert!(err.contains("crosscheck: outside the"), "{out}{err}"),
        c => panic!("exit {c:?}: {out}{err}"),
    }
    out
}

#[test]
#[cfg_attr(not(feature = "interop"), ignore = "interop tier: needs fio")]
fn crosscheck_on_a_tmpfs_file() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = shm_dir();
    let img = dir.path().join("t.img");
    let img = img.to_str().unwrap();
    let args = ["--size", "64m", "--bs", "4k", "--read", "70", "--qd", "4"];
    let db = dir.path().join("db.sqlite");
    let db = db.to_str().unwrap();
    let with_db: Vec<&str> = args.iter().copied().chain(["--db", db]).collect();
    let out = compared(&crosscheck(img, &with_db, "1000"));
    assert!(out.contains("4KiB 70% read 100% random, QD 4"), "{out}");
    // Kept in the store as a comparison of sanbench and fio, which `report` renders.
    assert!(out.contains("recorded as run 1 in"), "{out}");
    let rep = dir.path().join("report");
    let o = sanbench()
        .args(["report", "1", "--db", db, "--out"])
        .arg(&rep)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let results = std::fs::read_to_string(rep.join("results.json")).unwrap();
    let cmp: Value = serde_json::from_str(&results).unwrap();
    let cells: Vec<&str> = cmp["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["target"].as_str().unwrap())
        .collect();
    assert_eq!(cells, ["sanbench", "fio"]);
    assert!(cmp["cells"][1]["result"]["iops"].as_f64().unwrap() > 0.0);
    // fio's p99 is of its total latency (`--lat_percentiles=1`), sanbench's span: its clat
    // starts after the submitting call.
    let js = dir.path().join("xc.json");
    let with_json: Vec<&str> = args
        .iter()
        .copied()
        .chain(["--json", js.to_str().unwrap()])
        .collect();
    compared(&crosscheck(img, &with_json, "1000"));
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&js).unwrap()).unwrap();
    assert_eq!(doc["fio"][0]["p99_from"], "lat_ns", "{doc:#}");
    // A 70/30 mix: the joint p99 from fio's histogram (json+), not its per-direction tables.
    assert_eq!(doc["fio"][0]["p99_method"], "histogram", "{doc:#}");
    assert!(doc["sanbench"][0].get("p99_from").is_none(), "{doc:#}");
    // No tolerance: no two measurements are equal, so the check fails with exit 1.
    let o = crosscheck(img, &args, "0");
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("outside the 0 % tolerance"));
}

/// `--repeat auto`: repetitions in pairs until the intervals decide all three ratios. With a
/// tolerance no pair of runs can miss (5000 %: a p99 on a loaded 2-core host once spread over [0.08-12.4] after 12 repetitions), an early look decides, before --max-repeat;
/// --max-repeat 1 leaves no noise estimate and is refused.
#[test]
#[cfg_attr(not(feature = "interop"), ignore = "interop tier: needs fio")]
fn crosscheck_repeats_until_decided() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = shm_dir();
    let img = dir.path().join("t.img");
    let js = dir.path().join("xc.json");
    let run_with = |fio_bin: &str, extra: &[&str]| {
        sanbench()
            .arg("crosscheck")
            .arg(&img)
            .args(["--size", "16m", "--bs", "4k", "--qd", "2", "--time", "0.5s"])
            .args(["--ramp", "0s", "--no-store", "--fio-bin", fio_bin, "--json"])
            .arg(&js)
            .args(["--repeat", "auto"])
            .args(extra)
            .output()
            .unwrap()
    };
    let run = |extra: &[&str]| run_with(fio(), extra);
    let o = run(&["--max-repeat", "12", "--tolerance", "5000"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&js).unwrap()).unwrap();
    // The first look (two repetitions, one degree of freedom) rarely decides even this; a
    // quiet machine decides at the second (four), a busy one (sanbench's IOPS over 2.8x apart
    // between repetitions, in a full suite run) at the third, and one as noisy as a suite
    // run once was (13.8k-31.5k IOPS between repetitions, with the degrees of freedom cut for
    // persistence) at the last: at a look, decided.
    let n = doc["repetitions"].as_u64().unwrap();
    assert!(n.is_multiple_of(2) && (2..=12).contains(&n), "{out}");
    assert_eq!(doc["stop"], "decided", "{out}");
    assert!(
        out.contains(&format!(
            "stopped after {n} repetitions: every ratio decided"
        )),
        "{out}"
    );
    assert_eq!(doc["sanbench"].as_array().unwrap().len() as u64, n);
    // Look k of six spends 2k / (6 x 7) of each ratio's 5 % / 3.
    let alpha = doc["medians"]["iops"]["interval"]["alpha"]
        .as_f64()
        .unwrap();
    let k = (n / 2) as f64;
    assert!(
        (alpha - 0.05 / 3.0 * 2.0 * k / 42.0).abs() < 1e-12,
        "{alpha}"
    );
    // An fio that reports no histogram (json without the +): the p99 comes from its percentile
    // tables, and the crosscheck says so.
    let plain = dir.path().join("fio-json");
    std::fs::write(
        &plain,
        format!(
            "#!/bin/sh\nfor a; do shift; [ \"$a\" = --output-format=json+ ] && a=--output-format=json; \
             set -- \"$@\" \"$a\"; done\nexec {} \"$@\"\n",
            fio()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&plain, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let o = run_with(
        plain.to_str().unwrap(),
        &["--max-repeat", "2", "--tolerance", "1000", "--read", "50"],
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("note: this fio reported no latency histogram"),
        "{out}"
    );
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&js).unwrap()).unwrap();
    assert_eq!(doc["fio"][0]["p99_method"], "percentile tables", "{out}");
    let o = run(&["--max-repeat", "1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--max-repeat must be at least 2"));
    // --budget: a tolerance of 0 never decides; after the first pair (two windows of 0.5 s and
    // the tools' start-up) a second would not fit 2 s, so it stops there and says why.
    let o = run(&["--max-repeat", "10", "--tolerance", "0", "--budget", "2s"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("stopped by --budget after 2 repetitions"),
        "{out}"
    );
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&js).unwrap()).unwrap();
    assert_eq!(
        (doc["repetitions"].as_u64(), doc["stop"].as_str()),
        (Some(2), Some("budget"))
    );
    // Shorter than one pair of windows: refused before any I/O.
    let o = run(&["--budget", "900ms"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("shorter than one pair of repetitions"),
        "{err}"
    );
}

#[test]
#[cfg_attr(not(feature = "interop"), ignore = "interop tier: needs fio")]
fn crosscheck_through_fios_nbd_engine() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let bin = env!("CARGO_BIN_EXE_sanbench");
    let server = Served::start(bin, &["nbd", "--size", "64M", "--listen", "127.0.0.1:0"]);
    let o = crosscheck(
        &server.uri,
        &["--bs", "4k", "--read", "50", "--qd", "4"],
        "15",
    );
    let out = compared(&o);
    assert!(out.contains("nbd://127.0.0.1:"), "{out}");
}
