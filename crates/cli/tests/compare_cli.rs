//! `compare`, the results store and re-rendering, from the outside.

use assert_cmd::Command;
use sanbench_testkit::Served;
use serde_json::Value;

fn sanbench() -> Command {
    Command::cargo_bin("sanbench").unwrap()
}

fn results(dir: &std::path::Path) -> Value {
    serde_json::from_slice(&std::fs::read(dir.join("results.json")).unwrap()).unwrap()
}

#[test]
fn compare_stores_reports_and_rerenders_the_same_figures() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("results.db");
    let out = tmp.path().join("out");
    let suite = tmp.path().join("s.toml");
    std::fs::write(
        &suite,
        r#"
name = "two"
description = "two workloads"
time = "400ms"
ramp = "0s"
[[workload]]
id = "rr"
group = "iops"
qd = 8
segment = [{ bs = "4k", read = 100, random = 100 }]
[[sweep]]
id = "seq"
group = "bandwidth"
qd = [1, 4]
segment = [{ bs = "64k", read = 100, random = 0 }]
"#,
    )
    .unwrap();
    let o = sanbench()
        .args([
            "compare",
            "--suite",
            suite.to_str().unwrap(),
            "--repeat",
            "2",
        ])
        .args(["--baseline", "0", "--power", "model", "--quiet"])
        .arg("--db")
        .arg(&db)
        .arg("--out")
        .arg(&out)
        .args(["a=mem:64M", "b=mem:32M"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("recorded as run"), "{stdout}");
    for f in ["report.html", "report.md", "results.json", "results.csv"] {
        assert!(out.join(f).exists(), "{f}");
    }
    let doc = results(&out);
    assert_eq!(doc["schema"], "sanbench.compare/3");
    // 3 workloads (one plus a two-point QD sweep) x 2 targets x 2 repetitions.
    assert_eq!(doc["cells"].as_array().unwrap().len(), 12);
    assert_eq!(doc["workloads"].as_array().unwrap().len(), 3);
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("report-card"));

    // History lists the run; report re-renders it from the store with identical figures.
    let h = sanbench()
        .args(["history", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let h = String::from_utf8_lossy(&h.stdout);
    assert!(h.contains("two") && h.contains("a, b"), "{h}");
    let out2 = tmp.path().join("again");
    sanbench()
        .args(["report", "1", "--db"])
        .arg(&db)
        .arg("--out")
        .arg(&out2)
        .assert()
        .success();
    let again = results(&out2);
    assert_eq!(again["cells"], doc["cells"]);
    assert_eq!(
        std::fs::read_to_string(out.join("results.csv")).unwrap(),
        std::fs::read_to_string(out2.join("results.csv")).unwrap()
    );

    // A second run, then a diff of the two.
    sanbench()
        .args([
            "compare",
            "--repeat",
            "1",
            "--suite",
            suite.to_str().unwrap(),
            "--baseline",
            "0",
            "--quiet",
        ])
        .arg("--db")
        .arg(&db)
        .arg("--out")
        .arg(tmp.path().join("out3"))
        .args(["a=mem:64M", "b=mem:32M"])
        .assert()
        .success();
    let d = sanbench()
        .args(["diff", "1", "2", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert!(d.status.success(), "{}", String::from_utf8_lossy(&d.stderr));
    assert!(String::from_utf8_lossy(&d.stdout).contains("rr"));
    // Unknown runs are usage errors.
    let bad = sanbench()
        .args(["report", "99", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn suite_commands_and_bad_input() {
    let o = sanbench().args(["suite", "list"]).output().unwrap();
    let s = String::from_utf8_lossy(&o.stdout);
    for n in [
        "quick",
        "thirdio-2008",
        "ibm-xiv-2014",
        "demartek-lsi-2011",
        "nwc-2003",
        "qlogic-fcoe-2010",
        "snia-pts-iops",
        "nvme-vs-iscsi",
    ] {
        assert!(s.contains(n), "{n} missing: {s}");
    }
    let o = sanbench()
        .args(["suite", "show", "nwc-2003"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&o.stdout).contains("nwc-custom"));
    let o = sanbench().args(["suite", "show", "nope"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    let o = sanbench()
        .args([
            "compare",
            "--repeat",
            "1",
            "--suite",
            "quick",
            "x=mem:1G",
            "x=mem:2G",
            "--no-store",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("two targets are named"));
}

fn compare_json(tmp: &std::path::Path, args: &[&str]) -> (Value, String) {
    compare_suite_json(
        tmp,
        &["--suite", "quick", "--time", "300ms", "--ramp", "100ms"],
        args,
    )
}

/// `compare` with `suite` (the suite and its time options) and `args`, to a JSON document.
fn compare_suite_json(tmp: &std::path::Path, suite: &[&str], args: &[&str]) -> (Value, String) {
    let out = tmp.join("out");
    let mut c = sanbench();
    c.arg("compare");
    if !args.contains(&"--repeat") {
        // One round unless the test asks for more (compare's default runs until decided).
        c.args(["--repeat", "1"]);
    }
    let o = c
        .args(suite)
        .args(["--no-store", "--quiet"])
        .arg("--out")
        .arg(&out)
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        o.status.success(),
        "{}\n{stdout}",
        String::from_utf8_lossy(&o.stderr)
    );
    (results(&out), stdout)
}

/// Identical targets (A/A) over the quick suite with three repetitions: no finding.
#[test]
fn identical_targets_make_no_finding() {
    let tmp = tempfile::tempdir().unwrap();
    let (doc, stdout) = compare_json(tmp.path(), &["--repeat", "3", "a=mem:64M", "b=mem:64M"]);
    assert_eq!(doc["cells"].as_array().unwrap().len(), 5 * 2 * 3);
    // No target is found better; "within the margin" (equivalent) is a true statement here.
    assert!(
        doc["findings"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["kind"] == "equivalent"),
        "A/A findings: {}",
        doc["findings"]
    );
    for q in doc["questions"].as_array().unwrap() {
        assert!(
            q["verdict"] == "equivalent" || q["verdict"] == "inconclusive",
            "{q}"
        );
    }
    assert!(stdout.contains("Key Findings"), "{stdout}");
}

/// One repetition gives tables, no findings, and says why.
#[test]
fn one_repetition_withholds_findings() {
    let tmp = tempfile::tempdir().unwrap();
    let (doc, stdout) = compare_json(tmp.path(), &["fast=mem:64M", "slow=null:64M"]);
    assert!(doc["findings"].as_array().unwrap().is_empty());
    assert_eq!(
        doc["findings_withheld"],
        "one round: no noise estimate, no findings"
    );
    assert!(
        stdout.contains("One round: no noise estimate, no findings."),
        "{stdout}"
    );
}

/// A reference is in the tables and on the card's scale, never in a finding.
#[test]
fn references_are_never_in_a_finding() {
    let tmp = tempfile::tempdir().unwrap();
    let (doc, _) = compare_json(
        tmp.path(),
        &[
            "--repeat",
            "3",
            "ref:ceiling=null:64M",
            "ram=mem:64M",
            "file=/dev/shm/sanbench-ref-test.img",
            "--size",
            "64M",
        ],
    );
    let _ = std::fs::remove_file("/dev/shm/sanbench-ref-test.img");
    let targets = doc["targets"].as_array().unwrap();
    assert_eq!(targets[0]["reference"], true);
    assert!(targets[1].get("reference").is_none_or(|r| r == false));
    for f in doc["findings"].as_array().unwrap() {
        assert_ne!(f["better"], "ceiling", "{f}");
        assert_ne!(f["worse"], "ceiling", "{f}");
    }
    // The ceiling's cells are there, as in any table.
    assert!(doc["cells"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["target"] == "ceiling"));
    let html = std::fs::read_to_string(tmp.path().join("out/report.html")).unwrap();
    assert!(html.contains("data-reference=\"ceiling\""));
    assert!(html.contains("ceiling (reference)"));
    // --reference naming no target is bad input.
    let o = sanbench()
        .args(["compare", "a=mem:16M", "--reference", "nope", "--no-store"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
}

/// The built-in `nvme-vs-iscsi` suite end to end over the three built-in servers, each a
/// `sanbench serve` child: every workload (4 and 8 instances of a target at once included)
/// ran on NBD, iSCSI and NVMe/TCP and moved data. 108 cells: about 30 s with the shortest
/// cells that reliably complete I/O in a debug build. With no ramp, the 96 outstanding 1 MiB
/// writes of an x8 cell over iSCSI complete together after up to ~90 ms, so a 50 ms window saw
/// none; 50 ms of ramp fills the queues first (the fewest I/Os of a cell was then ~100). No
/// idle baseline or monitors: they add ~10 s and are not what this checks.
#[test]
fn nvme_vs_iscsi_suite_runs_on_the_built_in_servers() {
    let bin = assert_cmd::cargo::cargo_bin("sanbench");
    let size = ["--size", "16M", "--listen", "127.0.0.1:0"];
    let servers: Vec<(&str, Served)> = ["nbd", "iscsi", "nvme"]
        .into_iter()
        .map(|kind| {
            let mut args = vec![kind];
            args.extend(size);
            (kind, Served::start(&bin, &args))
        })
        .collect();
    let targets: Vec<String> = servers
        .iter()
        .map(|(kind, s)| format!("{kind}={}", s.uri))
        .collect();
    let targets: Vec<&str> = targets.iter().map(String::as_str).collect();
    let tmp = tempfile::tempdir().unwrap();
    let (doc, _) = compare_suite_json(
        tmp.path(),
        &[
            "--suite",
            "nvme-vs-iscsi",
            // The x8 sequential cells keep 96 MiB of 1 MiB I/Os in flight: on a loaded
            // 2-core host the first of them completes after ~0.3 s (seen: none in a 100 ms
            // window after a 50 ms ramp while other builds ran).
            "--time",
            "300ms",
            "--ramp",
            "200ms",
            "--baseline",
            "0",
            "--no-monitor",
        ],
        &targets,
    );
    assert_eq!(doc["suite"], "nvme-vs-iscsi");
    assert_eq!(doc["incomplete"], false);
    let workloads: Vec<&str> = doc["workloads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["id"].as_str().unwrap())
        .collect();
    // Third I/O: 6 sweeps on 4 and 8 instances; Demartek: 4 sweeps over 6 block sizes.
    assert_eq!(workloads.len(), 6 * 2 + 4 * 6, "{workloads:?}");
    let cells = doc["cells"].as_array().unwrap();
    assert_eq!(cells.len(), workloads.len() * servers.len());
    // Every cell ran; nearly all completed I/O in their 300 ms (under a load of 13 from
    // other builds one x8 cell of 1 MiB I/Os completed none in its window: a broken server
    // would complete none anywhere).
    for (kind, _) in &servers {
        let mut empty = Vec::new();
        for w in &workloads {
            let c = cells
                .iter()
                .find(|c| c["workload"] == *w && c["target"] == *kind)
                .unwrap_or_else(|| panic!("no cell of {w} on {kind}"));
            if c["result"]["iops"].as_f64().unwrap() <= 0.0 {
                empty.push(*w);
            }
        }
        assert!(
            empty.len() * 10 <= workloads.len(),
            "{kind}: no I/O completed in {empty:?}"
        );
    }
    for (_, s) in servers {
        s.interrupt();
    }
}

/// `--cpus-policy split` (fio's cpus_allowed_policy): every cell's streams on a CPU each, and
/// the comparison's manifest says so; without it nothing is recorded.
#[test]
fn split_placement_is_recorded_in_the_comparison() {
    let tmp = tempfile::tempdir().unwrap();
    let (doc, _) = compare_json(
        tmp.path(),
        &["--cpus-policy", "split", "a=mem:16M", "b=mem:16M"],
    );
    let p = &doc["manifest"]["placement"];
    assert_eq!(p["policy"], "split", "{p}");
    assert!(p["cpus"].as_str().is_some_and(|c| !c.is_empty()), "{p}");
    let tmp = tempfile::tempdir().unwrap();
    let (doc, _) = compare_json(tmp.path(), &["a=mem:16M", "b=mem:16M"]);
    assert!(
        doc["manifest"].get("placement").is_none(),
        "{}",
        doc["manifest"]
    );
}
