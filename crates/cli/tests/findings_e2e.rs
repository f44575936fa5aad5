//! The design end to end on targets with a known service time (`serve nbd --delay`): a real
//! 1.3x difference is found, with an interval that contains the true ratio, by `--repeat auto`;
//! two identical targets are never found different; and bad design values are refused before
//! anything runs.
//!
//! At queue depth 1 an I/O against `--delay 10ms` takes 10 ms plus the client's and the loopback's
//! overhead `o` (~0.1 ms on an idle host, milliseconds on a loaded one), so 10 ms vs 13 ms gives
//! a true IOPS ratio of (13 + o) / (10 + o): 1.297 idle, 1.25 at o = 2 ms. The test takes `o`
//! from the fast target's own mean latency (the client's clock) and checks that the interval
//! contains the ratio that implies. The servers add a uniform jitter of up to 1 ms (mean 0.5
//! ms: 10.5 vs 13.5 ms) and the cells last 1 s (~95 and ~74 I/Os): with fixed delays and 300 ms
//! cells every round counted 29 and 22 I/Os, a ratio of 1.318 with no spread at all, an
//! interval of zero width around a figure quantized 3 % away from the truth.

use std::process::Command;

use sanbench_testkit::Served;
use serde_json::Value;

fn bin() -> std::path::PathBuf {
    assert_cmd::cargo::cargo_bin("sanbench")
}

fn serve(delay: &str) -> Served {
    Served::start(
        bin(),
        &[
            "nbd",
            "--size",
            "8M",
            "--listen",
            "127.0.0.1:0",
            "--delay",
            delay,
        ],
    )
}

/// One QD 1 random-read workload, 1 s a cell (tests/peers/qd1.toml).
fn suite(_dir: &std::path::Path) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/qd1.toml")
}

fn compare(dir: &std::path::Path, targets: &[String], extra: &[&str]) -> (Value, String) {
    let out = dir.join("out");
    let o = Command::new(bin())
        .arg("compare")
        .arg("--suite")
        .arg(suite(dir))
        .args([
            "--no-store",
            "--baseline",
            "0",
            "--no-monitor",
            "--precondition",
            "none",
        ])
        .arg("--out")
        .arg(&out)
        .args(extra)
        .args(targets)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        o.status.success(),
        "{}\n{stdout}",
        String::from_utf8_lossy(&o.stderr)
    );
    let doc = serde_json::from_slice(&std::fs::read(out.join("results.json")).unwrap()).unwrap();
    (doc, stdout)
}

#[test]
fn a_true_1_3x_is_found_with_its_ratio_inside_the_interval() {
    let (fast, slow) = (serve("10ms,1ms"), serve("13ms,1ms"));
    let tmp = tempfile::tempdir().unwrap();
    let (doc, stdout) = compare(
        tmp.path(),
        &[format!("fast={}", fast.uri), format!("slow={}", slow.uri)],
        &["--max-repeat", "20"],
    );
    let q = &doc["questions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["family"] == "primary")
        .unwrap()
        .clone();
    eprintln!("{q}\n{stdout}");
    assert_eq!(q["verdict"], "better", "{q}");
    let (lo, hi) = (
        q["ci_low"].as_f64().unwrap(),
        q["ci_high"].as_f64().unwrap(),
    );
    let fast_ms: Vec<f64> = doc["cells"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["target"] == "fast")
        .map(|c| c["result"]["latency_us"]["mean"].as_f64().unwrap() / 1000.0)
        .collect();
    let o = (fast_ms.iter().sum::<f64>() / fast_ms.len() as f64 - 10.5).max(0.0);
    let truth = (13.5 + o) / (10.5 + o);
    assert!(
        lo <= truth && truth <= hi,
        "[{lo}, {hi}] misses the true ratio {truth} (overhead {o} ms): {q}"
    );
    // auto stopped because it was decided, at a Latin-square boundary, before the cap.
    assert_eq!(doc["design"]["stop"], "decided", "{}", doc["design"]);
    let rounds = doc["design"]["rounds"].as_u64().unwrap();
    assert!(rounds % 2 == 0 && rounds < 20, "{rounds}");
    assert!(stdout.contains("fast shows 1."), "{stdout}");
    assert!(
        stdout.contains("greater IOPS than slow (1 of 1 tests"),
        "{stdout}"
    );
    assert!(
        stdout.contains("stopped: every throughput question decided."),
        "{stdout}"
    );
    // Every cell says where it ran; every round ran both targets, each slot once.
    for r in 0..rounds {
        let mut slots: Vec<u64> = doc["cells"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["round"] == r)
            .map(|c| c["slot"].as_u64().unwrap())
            .collect();
        slots.sort();
        assert_eq!(slots, vec![0, 1], "round {r}");
    }
}

#[test]
fn identical_targets_are_never_found_different() {
    let (a, b) = (serve("10ms"), serve("10ms"));
    let tmp = tempfile::tempdir().unwrap();
    let (doc, _) = compare(
        tmp.path(),
        &[format!("a={}", a.uri), format!("b={}", b.uri)],
        &["--max-repeat", "6"],
    );
    for q in doc["questions"].as_array().unwrap() {
        assert!(
            q["verdict"] == "equivalent" || q["verdict"] == "inconclusive",
            "{q}"
        );
    }
    assert!(doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .all(|f| f["kind"] == "equivalent"));
}

#[test]
fn bad_design_values_are_refused_before_anything_runs() {
    let tmp = tempfile::tempdir().unwrap();
    for (args, want) in [
        (vec!["--repeat", "0"], "--repeat"),
        (vec!["--repeat", "x"], "neither auto nor a number"),
        (vec!["--budget=-1s"], "--budget"),
        (vec!["--min-effect", "150%"], "--min-effect"),
        (vec!["--min-effect", "0"], "--min-effect"),
        (vec!["--max-repeat", "1"], "--max-repeat"),
        // Two targets x one workload of 1.05 s: one round is 2.1 s.
        (vec!["--budget", "1s"], "shorter than one round"),
    ] {
        let out = tmp.path().join("never");
        let o = Command::new(bin())
            .arg("compare")
            .arg("--suite")
            .arg(suite(tmp.path()))
            .args(["--no-store", "--out"])
            .arg(&out)
            .args(&args)
            .args(["a=mem:8M", "b=mem:8M"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(!out.exists(), "{args:?} ran something");
    }
}
