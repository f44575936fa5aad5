//! Watching a run from the terminal and long runs (issue 25): the live line on a terminal
//! (a pty from `script`) with the interval's p99 beside IOPS and MB/s, appended lines when
//! asked, nothing when quiet or redirected; the result rewritten part-way so that a run or a
//! comparison killed with SIGKILL leaves a readable document marked incomplete, which
//! `sanbench report` reads and says is incomplete.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

fn bin() -> PathBuf {
    assert_cmd::cargo::cargo_bin("sanbench")
}

/// A short run on a RAM target without the host monitor (its idle baseline takes seconds).
fn run_args(time: &str) -> Vec<String> {
    [
        "run",
        "mem:16M",
        "--time",
        time,
        "--ramp",
        "0",
        "--no-monitor",
        "--log-interval",
        "100ms",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// What a command printed on a terminal: run under `script`, which gives it a pty for stdin,
/// stdout and stderr alike and copies what it wrote to our stdout.
fn on_a_terminal(args: &[String]) -> String {
    let cmd = std::iter::once(bin().display().to_string())
        .chain(args.iter().cloned())
        .collect::<Vec<_>>()
        .join(" ");
    let out = Command::new("script")
        .args(["-qfec", &cmd, "/dev/null"])
        .stdin(Stdio::null())
        .output()
        .expect("script (util-linux) gives the run a terminal");
    assert!(out.status.success(), "{cmd}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// "p99 850 µs", "p99 1.23 ms": a measured latency, not "-".
fn has_p99(s: &str) -> bool {
    s.split("p99 ").skip(1).any(|rest| {
        let mut w = rest.split_whitespace();
        let (Some(v), Some(unit)) = (w.next(), w.next()) else {
            return false;
        };
        v.parse::<f64>().is_ok_and(|v| v > 0.0) && ["ns", "µs", "ms", "s"].contains(&unit)
    })
}

#[test]
fn the_live_line_is_drawn_in_place_on_a_terminal_with_the_intervals_p99() {
    let out = on_a_terminal(&run_args("3s"));
    let live: Vec<&str> = out.split('\r').filter(|l| l.starts_with("[run ")).collect();
    assert!(
        live.len() >= 2,
        "one line a second, rewritten in place: {out:?}"
    );
    for l in &live {
        assert!(
            l.contains(" IOPS ") && l.contains(" MB/s ") && l.contains("left"),
            "{l}"
        );
    }
    assert!(
        live.iter().any(|l| has_p99(l)),
        "the interval's p99: {live:?}"
    );
    // The summary follows the cleared line.
    assert!(out.contains("IOPS") && out.contains("mem:16M"));
    // --quiet: nothing at all, terminal or not.
    let mut q = run_args("2s");
    q.push("--quiet".into());
    let out = on_a_terminal(&q);
    assert!(!out.contains("[run") && !out.contains("IOPS"), "{out:?}");
}

#[test]
fn lines_are_appended_when_asked_and_redirected_output_is_unchanged() {
    let out = Command::new(bin())
        .args(run_args("3s"))
        .args(["--progress", "lines"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains('\r'), "appended, not rewritten: {err:?}");
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("[run ")).collect();
    assert!(lines.len() >= 2, "{err}");
    assert!(lines.iter().any(|l| has_p99(l)), "{lines:?}");
    // Not a terminal and not asked: no progress anywhere.
    let out = Command::new(bin()).args(run_args("2s")).output().unwrap();
    assert!(out.status.success());
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!all.contains("[run") && !all.contains('\r'), "{all}");
}

fn read(path: &Path) -> Option<Value> {
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

/// Waits (generously: the machine is shared) until `ready` holds for the document at `path`.
fn wait_for(child: &mut Child, path: &Path, ready: impl Fn(&Value) -> bool) -> Value {
    let start = Instant::now();
    loop {
        if let Some(v) = read(path).filter(|v| ready(v)) {
            return v;
        }
        if let Some(st) = child.try_wait().unwrap() {
            panic!("exited ({st}) before {} was ready", path.display());
        }
        assert!(
            start.elapsed() < Duration::from_secs(90),
            "{} never became ready",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The intervals follow one another without gaps from the window's start, and add up to
/// the result's I/Os; the window is as long as they are.
fn check_intervals(r: &Value, seconds: f64) {
    let iv = r["intervals"].as_array().unwrap();
    assert!(!iv.is_empty());
    let mut end = 0.0;
    let mut ios = 0;
    for i in iv {
        // Seven significant digits each (doc::json::SIGNIFICANT).
        assert!((i["t"].as_f64().unwrap() - end).abs() < 1e-5, "{i}");
        end += i["len"].as_f64().unwrap();
        ios += i["read_ios"].as_u64().unwrap() + i["write_ios"].as_u64().unwrap();
    }
    assert_eq!(ios, r["ios"].as_u64().unwrap());
    assert!((end - seconds).abs() < 1e-5, "{end} vs {seconds}");
}

fn report_says_incomplete(path: &Path, dir: &Path) -> String {
    let out = Command::new(bin())
        .args([
            "report",
            path.to_str().unwrap(),
            "--out",
            dir.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(stdout.contains("is incomplete"), "{stdout}");
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(md.contains("> **Not finished**"), "{md}");
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("id=\"unfinished\"") && html.contains("id=\"timelines\""));
    md
}

#[test]
fn a_run_killed_mid_window_leaves_a_readable_partial_result() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");
    let mut child = Command::new(bin())
        .args(run_args("60s"))
        .args(["--save-every", "300ms", "--quiet", "--json"])
        .arg(&json)
        .spawn()
        .unwrap();
    let doc = wait_for(&mut child, &json, |v| v["seconds"].as_f64() >= Some(1.0));
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    // Whatever the kill interrupted, the file is the last whole document.
    let after = read(&json).expect("valid JSON after SIGKILL");
    assert!(after["seconds"].as_f64() >= doc["seconds"].as_f64());
    assert_eq!(after["complete"], false);
    let secs = after["seconds"].as_f64().unwrap();
    assert!(secs < 60.0);
    let r = &after["results"][0];
    check_intervals(r, secs);
    assert!(r["latency_us"]["p99"].as_f64() > Some(0.0));
    let md = report_says_incomplete(&json, &dir.path().join("report"));
    assert!(
        md.contains(&format!("the first {}", secs_text(secs))),
        "{md}"
    );
    // A run that finishes: its last write is the whole document, without the marker.
    let done = dir.path().join("done.json");
    let out = Command::new(bin())
        .args(run_args("1s"))
        .args(["--save-every", "200ms", "--quiet", "--json"])
        .arg(&done)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let v = read(&done).unwrap();
    assert!(v.get("complete").is_none(), "{}", v["complete"]);
    check_intervals(&v["results"][0], v["seconds"].as_f64().unwrap());
}

/// How the report prints a figure of seconds (three significant digits).
fn secs_text(s: f64) -> String {
    if s >= 100.0 {
        format!("{s:.0}")
    } else if s >= 10.0 {
        format!("{s:.1}")
    } else {
        format!("{s:.2}")
    }
}

#[test]
fn a_comparison_killed_mid_cell_keeps_the_running_cell_as_in_progress() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("cmp");
    let mut child = Command::new(bin())
        .args([
            "compare",
            "--suite",
            "quick",
            "--repeat",
            "1",
            "--time",
            "60s",
            "--ramp",
            "0",
            "--no-monitor",
            "--no-store",
            "--quiet",
            "--log-interval",
            "100ms",
            "--save-every",
            "300ms",
            "--out",
        ])
        .arg(&out)
        .args(["a=mem:16M", "b=mem:16M"])
        .spawn()
        .unwrap();
    let results = out.join("results.json");
    wait_for(&mut child, &results, |v| {
        v["in_progress"]["result"]["seconds"].as_f64() >= Some(1.0)
    });
    child.kill().unwrap();
    child.wait().unwrap();
    let v = read(&results).expect("valid JSON after SIGKILL");
    assert_eq!(v["complete"], false);
    assert_eq!(
        v["cells"].as_array().unwrap().len(),
        0,
        "the first cell never finished"
    );
    let cell = &v["in_progress"];
    assert_eq!(cell["workload"], v["workloads"][0]["id"]);
    let r = &cell["result"];
    check_intervals(r, r["seconds"].as_f64().unwrap());
    report_says_incomplete(&results, &dir.path().join("report"));
}

/// Sums of a list of interval summaries per start (`t`, in ms), reads and writes together.
fn ios_by_t(ivs: &Value) -> std::collections::BTreeMap<u64, u64> {
    let mut m = std::collections::BTreeMap::new();
    for iv in ivs.as_array().expect("intervals") {
        let t = (iv["t"].as_f64().unwrap() * 1000.0).round() as u64;
        *m.entry(t).or_default() +=
            iv["read_ios"].as_u64().unwrap() + iv["write_ios"].as_u64().unwrap();
    }
    m
}

#[test]
fn a_killed_multipath_run_s_partial_result_has_its_paths_and_all_targets_intervals() {
    let served = sanbench_testkit::Served::start(
        bin(),
        &[
            "nbd",
            "--size",
            "16M",
            "--listen",
            "127.0.0.1:0",
            "--listen",
            "127.0.0.1:0",
        ],
    );
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");
    // A multipath target and a second one: the partial result has the paths' intervals and
    // those of both targets together.
    let mut child = Command::new(bin())
        .args([
            "run",
            &format!("{}?policy=round-robin", served.uri),
            "mem:16M",
        ])
        .args(["--time", "60s", "--ramp", "0", "--read", "70", "--qd", "4"])
        .args(["--log-interval", "100ms", "--save-every", "300ms"])
        .args([
            "--quiet",
            "--no-monitor",
            "--precondition",
            "none",
            "--json",
        ])
        .arg(&json)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    wait_for(&mut child, &json, |v| v["seconds"].as_f64() >= Some(1.0));
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let v = read(&json).expect("valid JSON after SIGKILL");
    assert_eq!(v["complete"], false);
    let secs = v["seconds"].as_f64().unwrap();
    assert!((1.0..60.0).contains(&secs), "{secs}");
    let r = &v["results"][0];
    check_intervals(r, secs);
    let paths = r["multipath"]["paths"].as_array().expect("multipath.paths");
    assert_eq!(paths.len(), 2, "{r}");
    let target = ios_by_t(&r["intervals"]);
    let mut of_paths = std::collections::BTreeMap::new();
    for (i, p) in paths.iter().enumerate() {
        let per_path = ios_by_t(&p["intervals"]);
        // Round-robin: both paths carry I/O in the window so far.
        let sum: u64 = per_path.values().sum();
        assert!(sum > 0, "path {i}: {p}");
        assert_eq!(p["ios"].as_u64(), Some(sum), "path {i}");
        for (t, n) in per_path {
            *of_paths.entry(t).or_insert(0) += n;
        }
    }
    // Interval by interval, the paths add up to their target.
    assert_eq!(of_paths, target);
    // All targets together: each interval is the sum of both targets'.
    let mut both = target.clone();
    for (t, n) in ios_by_t(&v["results"][1]["intervals"]) {
        *both.entry(t).or_insert(0) += n;
    }
    let all = &v["all"];
    assert_eq!(ios_by_t(&all["intervals"]), both, "{all}");
    check_intervals(all, secs);
}
