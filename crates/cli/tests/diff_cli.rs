//! `sanbench diff` and `compare --against` on stored runs: whether one run's findings held up
//! in another (reproduced, inconclusive, reversed), after the figure-by-figure diff; and
//! report.html's "Earlier runs" when compare records beside earlier runs of its suite.

use assert_cmd::Command;
use sanbench_store::fixture::sample_comparison;
use sanbench_store::Store;

fn sanbench() -> Command {
    Command::cargo_bin("sanbench").unwrap()
}

const NBD: &str = "NBD <ram> & co";

/// Run 1: the fixture. Run 2: the same, but NBD's sequential reads a third as fast (its lead
/// over FC and iSCSI there turns) and FC's database IOPS swinging from round to round (nothing
/// decided about FC there).
fn store_two_runs(db: &std::path::Path) {
    let mut store = Store::open(db).unwrap();
    let a = sample_comparison();
    let b = sanbench_store::fixture::sample_rerun();
    assert_eq!(store.save(&a).unwrap().to_string(), "1");
    assert_eq!(store.save(&b).unwrap().to_string(), "2");
}

/// The line of the replication table about `claim`.
fn line<'a>(out: &'a str, claim: &str) -> &'a str {
    out.lines()
        .find(|l| l.contains(claim))
        .unwrap_or_else(|| panic!("no line about {claim:?} in\n{out}"))
}

#[test]
fn diff_says_which_findings_held_up() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("results.db");
    store_two_runs(&db);
    let o = sanbench()
        .args(["diff", "1", "2", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    // The figure-by-figure diff is still there, first.
    let diff_at = out.find("workload").unwrap();
    let repl_at = out
        .find("Findings of run 1 in run 2:")
        .expect("replication table");
    assert!(diff_at < repl_at, "{out}");
    let repl = &out[repl_at..];
    assert!(line(repl, &format!("{NBD} vs FC 8G: bandwidth")).ends_with("reversed"));
    assert!(line(repl, "FC 8G vs iSCSI 10G: IOPS").ends_with("inconclusive"));
    assert!(line(
        repl,
        "Sequential write, 1 MiB, QD 12: FC 8G / iSCSI 10G MB/s"
    )
    .ends_with("reproduced"));
    assert!(line(
        repl,
        &format!("Sequential read, 1 MiB, QD 12: FC 8G / {NBD} MB/s")
    )
    .ends_with("reversed"));
    assert!(repl.contains("only in run 2: FC 8G shows"), "{repl}");
    // A run against itself: everything reproduced.
    let o = sanbench()
        .args(["diff", "1", "1", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    let summary = out.lines().last().unwrap();
    assert!(
        summary.contains("0 inconclusive, 0 reversed, 0 differ, 0 not in run 1; 0 findings only"),
        "{summary}"
    );
}

#[test]
fn compare_against_a_stored_run_and_beside_earlier_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("results.db");
    store_two_runs(&db);
    let suite = tmp.path().join("s.toml");
    std::fs::write(
        &suite,
        r#"
name = "tiny"
time = "200ms"
ramp = "0s"
[[workload]]
id = "rr"
group = "iops"
qd = 4
segment = [{ bs = "4k", read = 100, random = 100 }]
"#,
    )
    .unwrap();
    let compare = |out: &str, against: &str| {
        let mut c = sanbench();
        c.args([
            "compare",
            "--suite",
            suite.to_str().unwrap(),
            "--repeat",
            "2",
        ])
        .args(["--baseline", "0", "--quiet", "--db"])
        .arg(&db)
        .arg("--out")
        .arg(tmp.path().join(out))
        .args(["a=mem:16M", "b=mem:16M"]);
        if !against.is_empty() {
            c.args(["--against", against]);
        }
        c.output().unwrap()
    };
    // An unknown run is refused before anything runs.
    let bad = compare("bad", "99");
    assert_eq!(bad.status.code(), Some(2));
    assert!(!tmp.path().join("bad").exists());
    // Against the fixture run: none of its targets ran here.
    let o = compare("one", "1");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    let at = out.find("Findings of run 1 in this run:").expect("table");
    assert!(
        line(&out[at..], "FC 8G vs iSCSI 10G: IOPS").ends_with("not in this run"),
        "{out}"
    );
    // The first comparison of suite "tiny" has no earlier run; the second shows the first.
    let first = std::fs::read_to_string(tmp.path().join("one/report.html")).unwrap();
    assert!(!first.contains("id=\"earlier-runs\""));
    let o = compare("two", "");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let second = std::fs::read_to_string(tmp.path().join("two/report.html")).unwrap();
    assert!(second.contains("id=\"earlier-runs\""));
    assert!(
        second.contains("data-run=\"3\""),
        "the first tiny run is run 3"
    );
    assert!(!second.contains("data-run=\"1\"") && !second.contains("data-run=\"2\""));
    // The stored run judges as the report written at its end did: two rounds, not the none
    // the header held when the run began.
    let r = sanbench()
        .args(["report", "3", "--db"])
        .arg(&db)
        .arg("--out")
        .arg(tmp.path().join("again"))
        .output()
        .unwrap();
    let r = String::from_utf8_lossy(&r.stdout);
    assert!(!r.contains("One round"), "{r}");
    let json = std::fs::read_to_string(tmp.path().join("again/results.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["design"]["rounds"], 2, "{}", v["design"]);
}

#[test]
fn report_names_a_missing_file_as_one() {
    // `report` takes RUN|FILE: a path that is not there is a missing file, a bare word a run
    // id that is not one; each one line, exit 2.
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("r.db");
    store_two_runs(&db);
    let report = |arg: &str| {
        sanbench()
            .args(["report", arg, "--db"])
            .arg(&db)
            .arg("--out")
            .arg(tmp.path().join("out"))
            .output()
            .unwrap()
    };
    for (arg, says) in [
        (
            "/nonexistent/results.json",
            "'/nonexistent/results.json' is neither a result file (no such file) nor a run id",
        ),
        ("results.json", "is neither a result file (no such file)"),
        ("abc", "'abc' is not a run id (see 'sanbench history')"),
        ("9", "no run 9"),
    ] {
        let o = report(arg);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{arg}: {err}");
        assert_eq!(err.lines().count(), 1, "{arg}: {err}");
        assert!(err.contains(says), "{arg}: {err}");
    }
    assert!(!tmp.path().join("out").exists());
}

#[test]
fn reading_commands_leave_a_missing_store_missing() {
    // A mistyped --db: history says nothing is recorded there, report and diff refuse in one
    // line (exit 2); none of them creates the file or its directory.
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("typo/r.db");
    let o = sanbench()
        .args(["history", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).contains("no runs recorded in"));
    let out = tmp.path().join("out");
    let out = out.to_str().unwrap();
    for args in [&["report", "1", "--out", out][..], &["diff", "1", "2"][..]] {
        let o = sanbench().args(args).arg("--db").arg(&db).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("no results store at"), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }
    assert!(
        !tmp.path().join("typo").exists(),
        "a reading command created the store"
    );
}
