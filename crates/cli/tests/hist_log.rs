//! `--log-interval` and `--hist-log` from the outside (issue 25): the log is read back by the
//! `hdrhistogram` Python package (scripts/deps.sh installs it) and its intervals merged give
//! the run's own percentiles and I/O count; a server stopped (SIGSTOP) for 300 ms mid-run
//! shows in exactly the intervals the stop covered; a multipath target's intervals per path
//! add up to each path's I/Os and to the target's, in the result and in the log's tags.

use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime};

use sanbench_testkit::Served;
use serde_json::Value;

fn bin() -> std::path::PathBuf {
    assert_cmd::cargo::cargo_bin("sanbench")
}

/// Reads a histogram log with the Python package: the merged figures and every interval.
const READ_LOG: &str = r#"
import json, math, sys
from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogReader
ref = HdrHistogram(1, 3600 * 10**9, 3)
r = HistogramLogReader(sys.argv[1], ref)
total = HdrHistogram(1, 3600 * 10**9, 3)
ivs = []
# Nearest rank, ceil(q n), as sanbench (and Rust's hdrhistogram) define a percentile; the
# package's own get_value_at_percentile rounds the rank half up, which lands on a neighbouring
# bucket in a sparse tail.
def at(h, q):
    rank, seen = max(1, math.ceil(q * h.get_total_count())), 0
    for i in range(h.counts_len):
        seen += h.get_count_at_index(i)
        if seen >= rank:
            return h.get_highest_equivalent_value(h.get_value_from_index(i))
    return 0
while True:
    h = r.get_next_interval_histogram()
    if h is None:
        break
    total.add(h)
    ivs.append({"start": h.get_start_time_stamp() / 1000.0, "count": h.get_total_count(),
                "max": h.get_max_value(), "tag": h.get_tag()})
print(json.dumps({"start_time": r.get_start_time_sec(), "count": total.get_total_count(),
                  "p50": at(total, 0.5), "p99": at(total, 0.99), "p999": at(total, 0.999), "max": total.get_max_value(),
                  "intervals": ivs}))
"#;

fn read_log(path: &std::path::Path) -> Value {
    serde_json::from_slice(&sanbench_testkit::hdr_python(READ_LOG, &[path])).unwrap()
}

fn run_args(uri: &str, dir: &std::path::Path, time: &str) -> Command {
    let mut c = Command::new(bin());
    c.args(["run", uri, "--time", time, "--ramp", "200ms", "--qd", "4"])
        .args(["--log-interval", "100ms", "--hist-log"])
        .arg(dir.join("run.hlog"))
        .arg("--json")
        .arg(dir.join("run.json"))
        .args([
            "--quiet",
            "--no-monitor",
            "--baseline",
            "0",
            "--precondition",
            "none",
        ]);
    c
}

#[test]
#[cfg_attr(
    not(feature = "interop"),
    ignore = "interop tier: needs python3 with hdrhistogram"
)]
fn the_log_read_by_python_gives_the_run_s_percentiles_and_count() {
    let dir = tempfile::tempdir().unwrap();
    let st = run_args("mem:16m", dir.path(), "1s")
        .args(["--read", "70"])
        .status()
        .unwrap();
    assert!(st.success());
    let doc: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("run.json")).unwrap()).unwrap();
    let r = &doc["results"][0];
    let log = read_log(&dir.path().join("run.hlog"));
    assert_eq!(log["count"].as_u64(), r["ios"].as_u64(), "{log}");
    let close = |what: &str, py: &Value, us: &Value| {
        let (a, b) = (py.as_f64().unwrap(), us.as_f64().unwrap() * 1000.0);
        // Both are the histogram's values: equal but for the exact max the run keeps
        // beside its buckets (within the histogram's 0.1 %).
        assert!(
            (a - b).abs() <= b * 0.001 + 1.0,
            "{what}: python {a} ns, sanbench {b} ns"
        );
    };
    let lat = &r["latency_us"];
    close("p50", &log["p50"], &lat["p50"]);
    close("p99", &log["p99"], &lat["p99"]);
    close("p999", &log["p999"], &lat["p999"]);
    close("max", &log["max"], &lat["max"]);
    // The result's intervals are the log's, and add up to the run's I/Os.
    let ivs = r["intervals"].as_array().unwrap();
    let py = log["intervals"].as_array().unwrap();
    assert_eq!(ivs.len(), py.len());
    let mut sum = 0;
    for (a, b) in ivs.iter().zip(py) {
        let n = a["read_ios"].as_u64().unwrap() + a["write_ios"].as_u64().unwrap();
        assert_eq!(Some(n), b["count"].as_u64());
        sum += n;
    }
    assert_eq!(Some(sum), r["ios"].as_u64());
}

#[test]
fn a_bad_log_interval_or_log_path_is_one_line_and_exit_2() {
    for args in [
        vec!["--log-interval", "5ms"],
        vec!["--log-interval", "soon"],
        vec!["--hist-log", "/nonexistent-dir/x.hlog"],
    ] {
        let out = Command::new(bin())
            .args(["run", "mem:1m", "--time", "100ms", "--no-monitor"])
            .args(&args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
    }
}

fn secs_since(t: SystemTime, base: f64) -> f64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
        - base
}

#[test]
#[cfg_attr(
    not(feature = "interop"),
    ignore = "interop tier: needs python3 with hdrhistogram"
)]
fn a_server_stopped_for_300ms_shows_in_exactly_the_intervals_it_covered() {
    let served = Served::start(bin(), &["nbd", "--size", "16M", "--listen", "127.0.0.1:0"]);
    let dir = tempfile::tempdir().unwrap();
    let mut run = run_args(&served.uri, dir.path(), "3s")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let pid = served.pid() as libc::pid_t;
    let stopped = SystemTime::now();
    // SAFETY: signals to the child this test started, by its process id.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    std::thread::sleep(Duration::from_millis(300));
    let resumed = SystemTime::now();
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    assert!(run.wait().unwrap().success());
    let doc: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("run.json")).unwrap()).unwrap();
    let log = read_log(&dir.path().join("run.hlog"));
    // The log's start time is the window's start: the stop in the window's seconds.
    let base = log["start_time"].as_f64().unwrap();
    let (a, b) = (secs_since(stopped, base), secs_since(resumed, base));
    assert!(
        a > 0.3 && b < 2.7,
        "the stop fell inside the window: {a} .. {b}"
    );
    let ivs = doc["results"][0]["intervals"].as_array().unwrap();
    let mut slow = Vec::new();
    for iv in ivs {
        let (t, len) = (iv["t"].as_f64().unwrap(), iv["len"].as_f64().unwrap());
        let ios = iv["read_ios"].as_u64().unwrap() + iv["write_ios"].as_u64().unwrap();
        let max = iv["max_us"].as_f64().unwrap();
        // Wholly inside the stop: nothing completed (so no interval at all, or an empty one).
        if t > a + 0.01 && t + len < b - 0.01 {
            assert_eq!(ios, 0, "{iv}");
        }
        // Before it, or after the one that saw the held I/Os complete: nothing slow. (A loaded
        // host wakes the resumed server and the client late: the held I/Os were seen completing
        // 45 ms after SIGCONT in a full suite run beside three builds.)
        if t + len < a - 0.01 || t > b + 0.3 {
            assert!(max < 150_000.0, "stop {a:.3}..{b:.3}: {iv}");
        }
        if max >= 250_000.0 {
            slow.push((t, len));
        }
    }
    // The I/Os held by the stop completed just after it, in the interval that holds its end.
    assert!(!slow.is_empty(), "stop {a:.3}..{b:.3}: {ivs:?}");
    for (t, len) in &slow {
        assert!(
            *t <= b + 0.25 && t + len >= b - 0.01,
            "{t} {len} vs {a:.3}..{b:.3}"
        );
    }
    served.interrupt();
}

#[test]
#[cfg_attr(
    not(feature = "interop"),
    ignore = "interop tier: needs python3 with hdrhistogram"
)]
fn compare_logs_every_cell_tagged_with_workload_round_and_target() {
    let dir = tempfile::tempdir().unwrap();
    let suite = dir.path().join("s.toml");
    std::fs::write(
        &suite,
        "name = \"one\"\ndescription = \"one workload\"\ntime = \"300ms\"\nramp = \"0s\"\n\
         [[workload]]\nid = \"rr\"\ngroup = \"iops\"\nqd = 4\n\
         segment = [{ bs = \"4k\", read = 100, random = 100 }]\n",
    )
    .unwrap();
    let hlog = dir.path().join("c.hlog");
    let out = dir.path().join("out");
    let st = Command::new(bin())
        .args(["compare", "--repeat", "1", "--suite"])
        .arg(&suite)
        .args(["--baseline", "0", "--quiet", "--no-store", "--no-monitor"])
        .args(["--log-interval", "100ms", "--hist-log"])
        .arg(&hlog)
        .arg("--out")
        .arg(&out)
        .args(["a=mem:16M", "b=mem:16M"])
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
    let text = std::fs::read_to_string(&hlog).unwrap();
    for t in ["Tag=rr/r1/a,", "Tag=rr/r1/b,"] {
        assert!(text.lines().any(|l| l.starts_with(t)), "{t}: {text}");
    }
    let doc: Value =
        serde_json::from_slice(&std::fs::read(out.join("results.json")).unwrap()).unwrap();
    let ios: u64 = doc["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["result"]["ios"].as_u64().unwrap())
        .sum();
    assert_eq!(read_log(&hlog)["count"].as_u64(), Some(ios));
}

#[test]
#[cfg_attr(
    not(feature = "interop"),
    ignore = "interop tier: needs python3 with hdrhistogram"
)]
fn a_multipath_target_s_intervals_add_up_per_path_in_the_result_and_the_log() {
    let served = Served::start(
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
    let (workers, qd) = (2u64, 4u64);
    let st = Command::new(bin())
        .args(["run", &format!("{}?policy=round-robin", served.uri)])
        .args(["--time", "1s", "--ramp", "0", "--read", "70"])
        .args(["--qd", &qd.to_string(), "--workers", &workers.to_string()])
        .args(["--log-interval", "100ms", "--hist-log"])
        .arg(dir.path().join("run.hlog"))
        .arg("--json")
        .arg(dir.path().join("run.json"))
        .args([
            "--quiet",
            "--no-monitor",
            "--baseline",
            "0",
            "--precondition",
            "none",
        ])
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
    let doc: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("run.json")).unwrap()).unwrap();
    let r = &doc["results"][0];
    let ios = |iv: &Value| iv["read_ios"].as_u64().unwrap() + iv["write_ios"].as_u64().unwrap();
    let target: Vec<(f64, u64)> = r["intervals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|iv| (iv["t"].as_f64().unwrap(), ios(iv)))
        .collect();
    let paths = r["multipath"]["paths"].as_array().expect("multipath.paths");
    assert_eq!(paths.len(), 2, "{r}");
    let mut all = 0;
    for (i, p) in paths.iter().enumerate() {
        let ivs = p["intervals"].as_array().expect("a path's intervals");
        let sum: u64 = ivs.iter().map(ios).sum();
        let carried = p["ios"].as_u64().unwrap();
        // Each path's intervals hold every I/O it completed in the window: all it carried but
        // those still in flight when the window closed.
        assert!(
            sum > 100 && sum <= carried && carried - sum <= workers * qd,
            "path {i}: intervals {sum}, carried {carried}"
        );
        for iv in ivs {
            // Every path interval is one of the target's, and no larger.
            let t = iv["t"].as_f64().unwrap();
            // The result's times are written to seven significant digits.
            let of_target = target.iter().find(|x| (x.0 - t).abs() < 1e-6);
            assert!(of_target.is_some_and(|x| x.1 >= ios(iv)), "path {i}: {iv}");
        }
        all += sum;
    }
    // The paths add up to the target, exactly.
    assert_eq!(Some(all), r["ios"].as_u64());
    for (t, n) in &target {
        let of_paths: u64 = paths
            .iter()
            .flat_map(|p| p["intervals"].as_array().unwrap())
            .filter(|iv| (iv["t"].as_f64().unwrap() - t).abs() < 1e-6)
            .map(ios)
            .sum();
        assert_eq!(of_paths, *n, "interval at {t}");
    }
    // The log: the target's lines untagged, each path's tagged pN, adding up the same way.
    let log = read_log(&dir.path().join("run.hlog"));
    let by_tag = |tag: Option<&str>| -> u64 {
        log["intervals"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|iv| iv["tag"].as_str() == tag)
            .map(|iv| iv["count"].as_u64().unwrap())
            .sum()
    };
    assert_eq!(Some(by_tag(None)), r["ios"].as_u64(), "{log}");
    assert_eq!(
        by_tag(Some("p0")) + by_tag(Some("p1")),
        by_tag(None),
        "{log}"
    );
    for (i, p) in paths.iter().enumerate() {
        let sum: u64 = p["intervals"].as_array().unwrap().iter().map(ios).sum();
        assert_eq!(by_tag(Some(&format!("p{i}"))), sum, "path {i}");
    }
    served.interrupt();
}
