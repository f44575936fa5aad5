//! Issue 40 end to end: three targets that serve alike, one of which slows whatever is served
//! right after it (first-order carry-over, injected by nbdkit's Python plugin
//! tests/peers/carry.py: a server still busy, a cache left cold). In a Williams order that
//! carry-over falls on the other two targets whenever they follow it, so a model without a
//! carry-over term would find the disturbing target faster than both (by about a third of
//! the carry: here ln 2 / 3, twice the 10 % margin). The comparison must find no difference,
//! estimate the carry-over of the target that causes it, and say so.

use std::path::Path;
use std::process::Command;

use sanbench_testkit::NbdkitPython;
use serde_json::Value;

#[test]
#[cfg_attr(
    not(feature = "interop"),
    ignore = "interop tier: needs nbdkit's Python plugin"
)]
fn carry_over_is_removed_and_named_not_found_as_a_difference() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("c-was-here");
    std::fs::write(&state, b"").unwrap();
    // Backdated: nothing has been served by c yet.
    let long_ago = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1);
    std::fs::File::options()
        .write(true)
        .open(&state)
        .unwrap()
        .set_modified(long_ago)
        .unwrap();
    let plugin = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/carry.py");
    // 10 ms a read everywhere; within 1.2 s of c's last read another 10 ms (the whole next
    // cell: 1 s plus its ramp).
    let server = |name: &str| {
        NbdkitPython::start(
            &plugin,
            &[
                format!("name={name}"),
                format!("state={}", state.display()),
                "after=c".into(),
                "delay=10".into(),
                "carry=10".into(),
                "for=1200".into(),
            ],
        )
    };
    let (a, b, c) = (server("a"), server("b"), server("c"));
    let suite = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/qd1.toml");
    let out = tmp.path().join("out");
    let o = Command::new(assert_cmd::cargo::cargo_bin("sanbench"))
        .args(["compare", "--suite"])
        .arg(&suite)
        .args([
            "--no-store",
            "--no-monitor",
            "--precondition",
            "none",
            "--repeat",
            "6",
        ])
        .arg("--out")
        .arg(&out)
        .args([
            format!("a={}", a.uri),
            format!("b={}", b.uri),
            format!("c={}", c.uri),
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        o.status.success(),
        "{}\n{stdout}",
        String::from_utf8_lossy(&o.stderr)
    );
    let doc: Value =
        serde_json::from_slice(&std::fs::read(out.join("results.json")).unwrap()).unwrap();
    // The carry-over was real: cells right after c ran at about half the rate.
    let cells = doc["cells"].as_array().unwrap();
    let mut after_c = Vec::new();
    let mut other = Vec::new();
    let mut order: Vec<&Value> = cells.iter().collect();
    order.sort_by_key(|c| (c["round"].as_u64(), c["slot"].as_u64()));
    for w in order.windows(2) {
        let iops = w[1]["result"]["iops"].as_f64().unwrap();
        if w[1]["target"] != "c" {
            if w[0]["target"] == "c" {
                after_c.push(iops);
            } else {
                other.push(iops);
            }
        }
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    assert!(
        !after_c.is_empty() && mean(&after_c) < 0.8 * mean(&other),
        "no carry-over to measure: after c {after_c:?}, otherwise {other:?}"
    );
    // No difference found: every question equivalent or undecided.
    for q in doc["questions"].as_array().unwrap() {
        assert!(
            q["verdict"] == "equivalent" || q["verdict"] == "inconclusive",
            "a difference found between identical targets: {q}\n{stdout}"
        );
    }
    // c's carry-over is estimated and named (the cells after it ran slower).
    assert!(
        stdout.contains("c: the cell right after it ran") && stdout.contains("slower"),
        "{stdout}"
    );
}
