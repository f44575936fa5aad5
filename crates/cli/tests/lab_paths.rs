//! `sanbench lab` end to end, as root, with several paths (the helpers: lab_support/). Never
//! skipped: a host without `ip`, `tc` or root fails here with the reason.
//!
//! Multipath and faults: two 1 Gbit/s paths to one iSCSI target (`--paths a,b`), a run over
//! both while path b is pulled (`--fault 1s:b:down,2.5s:b:up`, a silent blackhole) with
//! `--verify`: the path fails over and comes back, nothing is lost.

mod lab_support;

use std::path::Path;

use lab_support::*;
use serde_json::Value;

#[test]
#[cfg_attr(
    not(feature = "lab"),
    ignore = "lab tier: needs root, ip, tc and nbdkit"
)]
fn two_paths_survive_a_pulled_cable_and_lose_nothing() {
    require_host();
    let _lab = one_lab();
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("lab.json");
    let _guard = Down(state.clone());
    ok(
        sanbench()
            .args(["lab", "up", "--link", "a=1gbit", "--link", "b=1gbit"])
            .args([
                "--paths",
                "a,b",
                "--targets",
                "iscsi,nvme",
                "--size",
                "256M",
            ])
            .arg("--state")
            .arg(&state)
            .output()
            .unwrap(),
        "lab up --paths a,b",
    );
    // One namespace behind both links; the lab file names both paths and each alone.
    let mp = lab_target(&state, "iscsi@a+b");
    let uri = mp["uri"].as_str().unwrap().to_string();
    assert!(
        uri.starts_with("iscsi://10.213.0.2:3260,10.213.1.2:3260/"),
        "{uri}"
    );
    assert_eq!(mp["paths"].as_array().unwrap().len(), 2);
    assert_eq!(mp["link"]["rate_bits"], 2_000_000_000u64);
    assert_eq!(
        lab_target(&state, "iscsi@b")["uri"],
        mp["paths"][1]["uri"],
        "each path alone"
    );
    let ns = list(&["ip", "netns", "list"]);
    assert!(ns.contains("sblab-a+b") && !ns.contains("sblab-a "), "{ns}");

    // `lab fault`: at once, one line; bad input one line, exit 2.
    let lab = |args: &[&str]| {
        sanbench()
            .arg("lab")
            .args(args)
            .arg("--state")
            .arg(&state)
            .output()
            .unwrap()
    };
    let out = ok(lab(&["fault", "b", "down"]), "lab fault b down");
    assert_eq!(out.lines().count(), 1, "{out}");
    assert!(out.contains("now down"), "{out}");
    let st = ok(lab(&["status"]), "lab status");
    assert!(st.contains("FAULT down (kernel: blackhole)"), "{st}");
    ok(lab(&["fault", "b", "up"]), "lab fault b up");
    assert!(!ok(lab(&["status"]), "lab status").contains("FAULT"));
    for (args, words) in [
        (&["fault", "c", "down"][..], "no link 'c'"),
        (&["fault", "b", "sideways"], "unknown"),
        (&["fault", "b", "loss=200"], "percentage"),
    ] {
        let out = lab(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(words), "{err}");
    }

    // A run over both paths while b is pulled for 1.5 s. b is noticed after path_timeout
    // (0.3 s of silence), its I/Os go to a; after the backoff its reconnection's SYN is
    // retransmitted about a second later, past the 'up', and b is reinstated.
    let run = sanbench()
        .args([
            "run", "--bs", "4k", "--read", "50", "--qd", "16", "--size", "32M",
        ])
        .args([
            "--time",
            "4",
            "--ramp",
            "0.5",
            "--baseline",
            "0",
            "--verify",
        ])
        .args(["--fault", "1s:b:down,2.5s:b:up", "--lab"])
        .arg(&state)
        .args(["--json", "-", "--quiet"])
        .arg(format!("{uri}?path_timeout=300ms"))
        .output()
        .unwrap();
    let doc: Value = serde_json::from_str(&ok(run, "run with --fault")).unwrap();
    let faults = doc["faults"].as_array().expect("faults recorded");
    assert_eq!(faults.len(), 2, "{faults:?}");
    for (f, (action, at)) in faults.iter().zip([("down", 1000.0), ("up", 2500.0)]) {
        assert_eq!(f["link"], "b");
        assert_eq!(f["action"], action);
        assert!(f.get("error").is_none(), "{f}");
        // Never early; late by the time six tc processes take (10-30 ms idle, several
        // hundred on a host with six times more work than cores).
        let off = f["offset_ms"].as_f64().unwrap();
        assert!((at..at + 900.0).contains(&off), "{action} at {off} ms");
        assert!(f["at"].as_str().unwrap().ends_with('Z'));
    }
    let down_ms = faults[0]["at_unix_ms"].as_u64().unwrap();
    let up_ms = faults[1]["at_unix_ms"].as_u64().unwrap();
    // Wall clock and window offsets tell the same story.
    let gap = faults[1]["offset_ms"].as_f64().unwrap() - faults[0]["offset_ms"].as_f64().unwrap();
    assert!(
        ((up_ms - down_ms) as f64 - gap).abs() < 5.0,
        "{gap} ms vs {} ms",
        up_ms - down_ms
    );
    let r = &doc["results"][0];
    let mp = &r["multipath"];
    let events: Vec<(u64, &str, u64)> = mp["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["path"].as_u64().unwrap(),
                e["event"].as_str().unwrap(),
                e["at_unix_ms"].as_u64().unwrap(),
            )
        })
        .collect();
    let failed = events
        .iter()
        .find(|e| e.0 == 1 && e.1 == "failed")
        .unwrap_or_else(|| panic!("path b never failed: {events:?}"));
    assert!(failed.2 >= down_ms, "{events:?}");
    let back = events
        .iter()
        .find(|e| e.0 == 1 && e.1 == "reinstated")
        .unwrap_or_else(|| panic!("path b never came back: {events:?}"));
    assert!(
        back.2 >= up_ms,
        "reinstated while the cable was out: {events:?}"
    );
    assert!(
        !events.iter().any(|e| e.0 == 0),
        "path a never failed: {events:?}"
    );
    assert_eq!(mp["failed_no_path"], 0);
    assert!(mp["paths"][1]["reissued"].as_u64().unwrap() > 0, "{mp}");
    // The disruption, measured from the fault: detected one path_timeout (300 ms) after the
    // pull (plus the housekeeping's wake-up), failed over at once after that; the goal is a
    // failover within path_timeout + 50 ms, the bound here leaves a loaded host room.
    let d = &r["disruption"];
    assert_eq!(d["cause"], "fault", "{d}");
    let detected = d["detected_ms"].as_f64().unwrap();
    let failover = d["failover_ms"].as_f64().unwrap();
    assert!(
        (250.0..1500.0).contains(&detected),
        "detected {detected} ms: {d}"
    );
    assert!(failover >= detected && failover - detected < 500.0, "{d}");
    let kinds: Vec<&str> = d["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds.iter().filter(|k| **k == "fault").count(),
        2,
        "{kinds:?}"
    );
    assert!(d["pre_fault_iops"].as_f64().unwrap() > 0.0, "{d}");
    assert_eq!(d["paths"].as_array().unwrap().len(), 2);
    assert_eq!(d["bad_blocks"], 0);
    // Nothing lost: every I/O completed, every read checked out.
    assert!(r["write"]["ios"].as_u64().unwrap() > 0);
    assert_eq!(r["read"]["errors"].as_u64().unwrap_or(0), 0);
    let v = &r["verify"];
    assert!(v["reads"].as_u64().unwrap() > 0, "{v}");
    assert_eq!(v["bad_blocks"].as_array().unwrap().len(), 0, "{v}");
    for (class, n) in v["bad"].as_object().unwrap() {
        assert_eq!(n.as_u64(), Some(0), "{class}: {v}");
    }
    // The schedule left b up: nothing to set back, and the lab file says so.
    assert!(lab_target(&state, "iscsi@a+b")["uri"] == uri.as_str());
    let st: Value = serde_json::from_str(&std::fs::read_to_string(&state).unwrap()).unwrap();
    assert!(st["links"][1].get("impairment").is_none(), "{st}");

    failover_suite_on_the_lab(&state, dir.path());

    let down = ok(lab(&["down"]), "lab down");
    assert!(down.contains("deleted namespace sblab-a+b"), "{down}");
    assert_eq!(leftovers(), Vec::<String>::new());
}

#[test]
fn fault_schedules_are_refused_before_any_io() {
    let dir = tempfile::tempdir().unwrap();
    let none = dir.path().join("none.json");
    for (fault, words) in [
        ("1s:b:off", "unknown"),
        ("1s-b-down", "AT:LINK:ACTION"),
        ("10:b:down", "needs a unit"),
        ("1s:b:loss=x", "percentage"),
    ] {
        // mem: would run at once; bad input must stop it before.
        let out = sanbench()
            .args(["run", "--time", "2", "--quiet", "--fault", fault, "--lab"])
            .arg(&none)
            .arg("mem:16M")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{fault}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(words), "{fault}: {err}");
    }
    // --lab alone means nothing to run.
    let out = sanbench()
        .args(["run", "--time", "1", "--lab"])
        .arg(&none)
        .arg("mem:16M")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = sanbench()
        .args([
            "compare",
            "--no-store",
            "--fault",
            "1s:b:sideways",
            "mem:16M",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("sideways"));
}

/// The failover suite on the two-path lab, shortened: each two-path target's cells pull path
/// 2 (link b) at a third of the window and put it back at two thirds; the single-link
/// targets skip both workloads (they have no path 2). Every closed-loop cell of the two-path
/// targets carries a disruption measured from its fault; the comparison asks the failover
/// question and the report draws the timelines.
fn failover_suite_on_the_lab(state: &Path, dir: &Path) {
    // A 2 s window needs a path timeout well inside a third of it: the lab file's two-path
    // URIs get one (the default, 5 s, suits the suite's 30 s windows).
    let mut lab: Value = serde_json::from_str(&std::fs::read_to_string(state).unwrap()).unwrap();
    for t in lab["targets"].as_array_mut().unwrap() {
        let u = t["uri"].as_str().unwrap().to_string();
        if u.contains(',') {
            t["uri"] = Value::from(format!("{u}?path_timeout=300ms"));
        }
    }
    let lab_file = dir.join("lab-short.json");
    std::fs::write(&lab_file, lab.to_string()).unwrap();
    let out_dir = dir.join("failover");
    let out = sanbench()
        .args(["compare", "--suite", "failover", "--lab"])
        .arg(&lab_file)
        .args([
            "--time", "2", "--ramp", "0.3", "--repeat", "2", "--size", "32M",
        ])
        .args(["--no-store", "--no-monitor", "--out"])
        .arg(&out_dir)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("note: iscsi@a skips failover-4k-random"),
        "{err}"
    );
    let cmp: Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("results.json")).unwrap())
            .unwrap();
    let cells = cmp["cells"].as_array().unwrap();
    for t in ["iscsi@a+b", "nvme@a+b"] {
        let closed: Vec<&Value> = cells
            .iter()
            .filter(|c| c["target"] == t && c.get("load_pct").is_none())
            .collect();
        assert_eq!(closed.len(), 4, "{t}: 2 workloads x 2 rounds");
        for c in closed {
            let d = &c["result"]["disruption"];
            assert_eq!(d["cause"], "fault", "{t}: {d}");
            let faults = c["result"]["faults"].as_array().unwrap();
            assert_eq!(faults.len(), 2, "{t}");
            assert_eq!(faults[0]["link"], "b");
            assert!(
                d["detected_ms"].as_f64().is_some(),
                "{t} {}: {d}",
                c["workload"]
            );
            assert_eq!(d["bad_blocks"], Value::Null, "not verified: {d}");
        }
    }
    assert!(
        cells
            .iter()
            .all(|c| !c["target"].as_str().unwrap().ends_with("@a")),
        "single-link targets skip"
    );
    let qs = cmp["questions"].as_array().unwrap();
    assert!(
        qs.iter()
            .any(|q| q["family"] == "failover" && q["metric"] == "stall_ms"),
        "{qs:?}"
    );
    let html = std::fs::read_to_string(out_dir.join("report.html")).unwrap();
    assert!(html.contains("id=\"disruption\""));
    assert!(
        html.contains("b down"),
        "the fault is marked on the timeline"
    );
}
