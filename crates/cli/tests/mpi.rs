//! sanbench as an MPI job (feature `mpi`): `mpirun --oversubscribe -n 3 sanbench run ...` on
//! this machine, against `mem:` (each rank its own), one shared `sanbench serve nbd`, and
//! per-rank files (`{rank}`); the merged percentiles against every rank's raw latencies (the
//! test hook SANBENCH_TEST_RAW_LATENCIES); a monitor-only rank; a failing and a killed rank.
//! Open MPI is kept on loopback and shared memory (`btl self,vader`, `oob_tcp_if_include lo`).
#![cfg(feature = "mpi")]

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use sanbench_testkit::Served;
use serde_json::Value;

fn bin() -> std::path::PathBuf {
    assert_cmd::cargo::cargo_bin("sanbench")
}

/// `mpirun -n N sanbench ARGS...`, as root too, on this host only.
fn mpirun(n: u32, args: &[&str]) -> Command {
    mpirun_with(n, &[], args)
}

/// As [`mpirun`], with options for mpirun itself (`--bind-to none`).
fn mpirun_with(n: u32, launcher: &[&str], args: &[&str]) -> Command {
    sanbench_testkit::require("mpirun", "openmpi-bin");
    let mut c = Command::new("mpirun");
    c.args(["--oversubscribe", "-n", &n.to_string()])
        .args(launcher)
        .args(["--mca", "btl", "self,vader"])
        .args(["--mca", "oob_tcp_if_include", "lo"])
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("OMPI_MCA_btl_vader_single_copy_mechanism", "none")
        .arg(bin())
        .args(args);
    c
}

fn ok(out: &Output) -> (String, String) {
    let (so, se) = (
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    );
    assert!(out.status.success(), "{}\n{so}\n{se}", out.status);
    (so, se)
}

fn doc(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn hosts(d: &Value) -> &Vec<Value> {
    d["hosts"].as_array().expect("hosts[]")
}

/// The totals are the ranks' sums; each rank ran I/O of its own.
fn check_sums(d: &Value, ranks: usize) {
    let h = hosts(d);
    assert_eq!(h.len(), ranks);
    assert_eq!(d["mpi"]["ranks"], ranks as u64);
    let total = d["results"][0]["ios"].as_u64().unwrap();
    let sum: u64 = h.iter().map(|x| x["ios"].as_u64().unwrap()).sum();
    assert_eq!(total, sum, "{h:?}");
    // IOPS: the sum of the ranks' own rates, up to the windows' small differences.
    let iops = d["results"][0]["iops"].as_f64().unwrap();
    let sum_iops: f64 = h.iter().map(|x| x["iops"].as_f64().unwrap()).sum();
    assert!(
        (iops - sum_iops).abs() <= 0.05 * sum_iops,
        "{iops} vs {sum_iops}"
    );
    for x in h.iter().filter(|x| x["monitor_only"] == false) {
        assert!(x["ios"].as_u64().unwrap() > 0, "{x}");
    }
    let spread = d["mpi"]["barrier_exit_spread_us"].as_f64().unwrap();
    assert!((0.0..5e6).contains(&spread), "{spread}");
}

#[test]
fn three_ranks_on_mem_add_up_and_merged_percentiles_are_exact() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let out = mpirun(
        3,
        &[
            "run", "mem:16m", "--time", "600ms", "--ramp", "100ms", "--qd", "4",
        ],
    )
    .args(["--json", json.to_str().unwrap()])
    .env("SANBENCH_TEST_RAW_LATENCIES", dir.path())
    .output()
    .unwrap();
    let (stdout, _) = ok(&out);
    // Only rank 0 prints.
    assert_eq!(stdout.matches("sanbench 0.1.0:").count(), 1, "{stdout}");
    assert!(stdout.contains("rank 2"), "{stdout}");
    let d = doc(&json);
    check_sums(&d, 3);
    let mut raw: Vec<u64> = Vec::new();
    for r in 0..3 {
        let text = std::fs::read_to_string(dir.path().join(format!("rank-{r}.txt"))).unwrap();
        let n0 = raw.len();
        raw.extend(text.lines().map(|l| l.parse::<u64>().unwrap()));
        assert_eq!(
            (raw.len() - n0) as u64,
            hosts(&d)[r]["ios"].as_u64().unwrap(),
            "rank {r}"
        );
    }
    raw.sort_unstable();
    let n = raw.len() as f64;
    let lat = &d["results"][0]["latency_us"];
    for (q, key) in [(0.5, "p50"), (0.99, "p99"), (0.999, "p999")] {
        let exact = raw[((q * n).ceil() as usize).max(1) - 1].max(1);
        let merged = (lat[key].as_f64().unwrap() * 1000.0).round() as u64;
        // HdrHistogram reports the top of the value's bucket (3 significant digits).
        assert!(
            merged >= exact && merged <= exact + exact / 1000 + 1,
            "{key}: merged {merged} ns, all ranks' raw latencies {exact} ns"
        );
    }
}

/// `--cpus-policy split` under MPI: the ranks on this host deal the CPUs out in turn (local
/// rank r of s streams starts at the (r x s)-th CPU of the set), so rank 1's stream does not
/// land on rank 0's CPU; each rank says where its streams ran (`hosts[].stream_cpus`). Open
/// MPI binds each of two ranks to a core of its own by default (then each splits its own);
/// `--bind-to none` gives both the whole machine, the case dealing is for.
#[test]
fn split_placement_deals_the_cpus_across_the_ranks_of_a_host() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let each = |placement: &[&str]| -> Vec<Value> {
        let mut args = vec![
            "run", "mem:16m", "--time", "300ms", "--ramp", "0s", "--qd", "2",
        ];
        args.extend(placement);
        args.extend(["--no-monitor", "--quiet", "--json", json.to_str().unwrap()]);
        ok(&mpirun_with(2, &["--bind-to", "none"], &args)
            .output()
            .unwrap());
        let d = doc(&json);
        hosts(&d).iter().map(|h| h["stream_cpus"].clone()).collect()
    };
    // The first two CPUs this process may use (0 and 1 on a 2-core machine).
    let allowed: Vec<usize> = std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap()
        .trim()
        .split(',')
        .flat_map(|p| match p.split_once('-') {
            Some((a, b)) => (a.parse().unwrap()..=b.parse().unwrap()).collect::<Vec<usize>>(),
            None => vec![p.parse().unwrap()],
        })
        .collect();
    assert!(allowed.len() >= 2, "two CPUs needed: {allowed:?}");
    let two = format!("{},{}", allowed[0], allowed[1]);
    let split = each(&["--cpus", &two, "--cpus-policy", "split"]);
    assert_eq!(
        split,
        [
            serde_json::json!([allowed[0]]),
            serde_json::json!([allowed[1]])
        ]
    );
    // Unpinned: nothing to say.
    assert_eq!(each(&[]), [Value::Null, Value::Null]);
}

#[test]
fn three_ranks_share_one_nbd_server() {
    let server = Served::start(bin(), &["nbd", "--size", "16M", "--listen", "127.0.0.1:0"]);
    let uri = server.uri.clone();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let out = mpirun(
        3,
        &[
            "run", &uri, "--time", "600ms", "--ramp", "100ms", "--qd", "2",
        ],
    )
    .args(["--json", json.to_str().unwrap()])
    .output()
    .unwrap();
    server.interrupt();
    ok(&out);
    let d = doc(&json);
    check_sums(&d, 3);
    for h in hosts(&d) {
        assert_eq!(h["targets"][0], uri.as_str(), "{h}");
    }
}

#[test]
fn rank_in_a_target_drives_a_file_per_rank() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let template = format!("file:{}/t{{rank}}.img", dir.path().display());
    let out = mpirun(
        3,
        &[
            "run", &template, "--size", "4m", "--read", "50", "--time", "400ms", "--ramp", "100ms",
        ],
    )
    .args(["--json", json.to_str().unwrap()])
    .output()
    .unwrap();
    ok(&out);
    let d = doc(&json);
    check_sums(&d, 3);
    assert_eq!(d["results"][0]["target"], template.as_str());
    for r in 0..3 {
        let f = dir.path().join(format!("t{r}.img"));
        assert_eq!(std::fs::metadata(&f).unwrap().len(), 4 << 20, "{f:?}");
        let t = hosts(&d)[r]["targets"][0].as_str().unwrap();
        assert!(t.ends_with(&format!("t{r}.img")), "{t}");
    }
}

/// The target host's view (XIV TOP's in the study): two ranks drive one `serve nbd`, the third
/// runs no I/O and accounts the server's CPU through `--watch PID`.
#[test]
fn a_monitor_only_rank_accounts_a_watched_daemon() {
    let server = Served::start(bin(), &["nbd", "--size", "16M", "--listen", "127.0.0.1:0"]);
    let pid = server.pid().to_string();
    let uri = server.uri.clone();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let out = mpirun(
        3,
        &[
            "run",
            &uri,
            "--time",
            "600ms",
            "--ramp",
            "100ms",
            "--qd",
            "4",
            "--monitor-only-ranks",
            "2",
            "--watch",
            &pid,
        ],
    )
    .args(["--json", json.to_str().unwrap()])
    .output()
    .unwrap();
    server.interrupt();
    ok(&out);
    let d = doc(&json);
    check_sums(&d, 3);
    let m = &hosts(&d)[2];
    assert_eq!(
        (m["monitor_only"].as_bool(), m["ios"].as_u64()),
        (Some(true), Some(0))
    );
    let groups = m["cpu"]["groups"].as_array().expect("CPU groups of rank 2");
    let name = format!("watch:{pid}");
    let g = groups
        .iter()
        .find(|g| g["name"] == name.as_str())
        .unwrap_or_else(|| panic!("no {name} among {groups:?}"));
    let cpu_s = g["cpu_s"].as_f64().unwrap();
    assert!(
        cpu_s > 0.0,
        "the server served two ranks for 0.6 s with no CPU: {g}"
    );
}

#[test]
fn a_monitor_only_rank_reports_its_cpu_and_runs_no_io() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let out = mpirun(
        3,
        &[
            "run",
            "mem:16m",
            "--time",
            "500ms",
            "--monitor-only-ranks",
            "1",
        ],
    )
    .args(["--json", json.to_str().unwrap()])
    .output()
    .unwrap();
    let (stdout, _) = ok(&out);
    assert!(stdout.contains("monitor only"), "{stdout}");
    let d = doc(&json);
    check_sums(&d, 3);
    let m = &hosts(&d)[1];
    assert_eq!(m["monitor_only"], true);
    assert_eq!(m["ios"], 0);
    assert_eq!(m["targets"].as_array().unwrap().len(), 0);
    let busy = m["cpu"]["busy_pct"]
        .as_f64()
        .expect("host CPU of the monitor-only rank");
    assert!((0.0..=100.0).contains(&busy), "{busy}");
    // Bad lists are bad input on every rank: exit non-zero, one clear line each.
    let out = mpirun(
        2,
        &[
            "run",
            "null:",
            "--time",
            "200ms",
            "--monitor-only-ranks",
            "7",
        ],
    )
    .output()
    .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not in a job of 2 ranks"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_failing_rank_ends_the_job_naming_rank_and_host() {
    let dir = tempfile::tempdir().unwrap();
    // Rank 1's directory does not exist: only rank 1 fails to open its target.
    for r in [0, 2] {
        std::fs::create_dir(dir.path().join(format!("r{r}"))).unwrap();
    }
    let template = format!("file:{}/r{{rank}}/t.img", dir.path().display());
    let t0 = Instant::now();
    let out = mpirun(3, &["run", &template, "--size", "1m", "--time", "30s"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("rank 1 of 3 on "), "{err}");
    assert!(t0.elapsed() < Duration::from_secs(20), "{:?}", t0.elapsed());
}

/// Process ids of `sanbench` processes whose parent is `parent`.
fn children(parent: u32) -> Vec<i32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // pid (comm) state ppid ...
        let Some((comm, rest)) = stat.split_once(") ") else {
            continue;
        };
        let ppid = rest
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse::<u32>().ok());
        if comm.ends_with("(sanbench") && ppid == Some(parent) {
            out.push(pid);
        }
    }
    out
}

#[test]
fn killing_a_rank_ends_mpirun_with_an_error_within_20_s() {
    let mut job = mpirun(3, &["run", "mem:16m", "--time", "60s", "-q"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    let ranks = loop {
        let c = children(job.id());
        if c.len() == 3 || t0.elapsed() > Duration::from_secs(15) {
            break c;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(ranks.len(), 3, "ranks under mpirun: {ranks:?}");
    // Let them reach the measured window.
    std::thread::sleep(Duration::from_millis(1500));
    // SAFETY: kill(2) on a process id we just read as our mpirun's child.
    unsafe { libc::kill(ranks[1], libc::SIGKILL) };
    let killed = Instant::now();
    let status = loop {
        if let Some(s) = job.try_wait().unwrap() {
            break Some(s);
        }
        if killed.elapsed() > Duration::from_secs(20) {
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let Some(status) = status else {
        // Stop what we started, by pid, then fail.
        let _ = job.kill();
        let _ = job.wait();
        for p in children(job.id()) {
            // SAFETY: as above.
            unsafe { libc::kill(p, libc::SIGKILL) };
        }
        panic!("mpirun still running 20 s after a rank was killed");
    };
    assert!(!status.success(), "{status}");
}

#[test]
fn compare_cells_are_synchronized_phases_with_a_per_host_report() {
    let dir = tempfile::tempdir().unwrap();
    let suite = dir.path().join("s.toml");
    std::fs::write(
        &suite,
        "name = \"one\"\ndescription = \"one workload\"\ntime = \"300ms\"\nramp = \"0s\"\n\
         [[workload]]\nid = \"rr\"\ngroup = \"iops\"\nqd = 4\n\
         segment = [{ bs = \"4k\", read = 100, random = 100 }]\n",
    )
    .unwrap();
    let out_dir = dir.path().join("out");
    let out = mpirun(
        3,
        &[
            "compare",
            "--repeat",
            "1",
            "--suite",
            suite.to_str().unwrap(),
            "--baseline",
            "0",
            "--power",
            "model",
            "--db",
            dir.path().join("r.db").to_str().unwrap(),
            "--out",
            out_dir.to_str().unwrap(),
            "--log-interval",
            "100ms",
            "--hist-log",
            dir.path().join("c.hlog").to_str().unwrap(),
            "a=mem:8M",
            "b=mem:4M",
        ],
    )
    .output()
    .unwrap();
    let (stdout, _) = ok(&out);
    // Every rank's intervals of every cell in rank 0's log, tagged with the cell and rank.
    let hlog = per_tag(&dir.path().join("c.hlog"));
    for cell in ["rr/r1/a", "rr/r1/b"] {
        for r in 0..3 {
            let tag = format!("{cell}/rank{r}");
            assert!(hlog.get(&tag).is_some_and(|t| t.0 > 0), "{tag}: {hlog:?}");
        }
    }
    // Only rank 0 reports and stores.
    assert_eq!(stdout.matches("recorded as run").count(), 1, "{stdout}");
    let d = doc(&out_dir.join("results.json"));
    let cells = d["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 2);
    for c in cells {
        let h = c["hosts"].as_array().unwrap();
        assert_eq!(h.len(), 3, "{c}");
        let sum: u64 = h.iter().map(|x| x["ios"].as_u64().unwrap()).sum();
        assert_eq!(c["result"]["ios"].as_u64().unwrap(), sum);
        let name = c["target"].as_str().unwrap();
        for (r, x) in h.iter().enumerate() {
            let own: u64 = x["intervals"].as_array().unwrap().iter().map(ios).sum();
            assert_eq!(Some(own), x["ios"].as_u64(), "{x}");
            let tag = format!("rr/r1/{name}/rank{r}");
            assert_eq!(hlog.get(&tag).map(|t| t.0), Some(own), "{tag}");
        }
    }
    let md = std::fs::read_to_string(out_dir.join("report.md")).unwrap();
    assert!(md.contains("## Per host"), "{md}");
    let html = std::fs::read_to_string(out_dir.join("report.html")).unwrap();
    assert!(html.contains("id=\"hosts\""));
    // A response-time curve is refused under MPI, with one clear line per rank.
    let out = mpirun(
        2,
        &[
            "compare",
            "--repeat",
            "1",
            "--suite",
            suite.to_str().unwrap(),
            "--curve",
            "50",
        ],
    )
    .arg("a=mem:8M")
    .output()
    .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--curve"));
}

/// A result interval's reads and writes.
fn ios(iv: &Value) -> u64 {
    iv["read_ios"].as_u64().unwrap() + iv["write_ios"].as_u64().unwrap()
}

/// Per tag of a histogram log (read by the `hdrhistogram` Python package): I/Os, and the
/// first and last interval's start (seconds since the log's start).
fn per_tag(path: &Path) -> std::collections::BTreeMap<String, (u64, f64, f64)> {
    const READ: &str = r#"
import json, sys
from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogReader
r = HistogramLogReader(sys.argv[1], HdrHistogram(1, 3600 * 10**9, 3))
tags = {}
while True:
    h = r.get_next_interval_histogram()
    if h is None:
        break
    t, s = h.get_tag() or "", h.get_start_time_stamp() / 1000.0
    n, a, b = tags.get(t, (0, s, s))
    tags[t] = (n + h.get_total_count(), min(a, s), max(b, s))
base = r.get_start_time_sec()
print(json.dumps({t: (n, a - base, b - base) for t, (n, a, b) in tags.items()}))
"#;
    serde_json::from_slice(&sanbench_testkit::hdr_python(READ, &[path])).unwrap()
}

#[test]
fn each_rank_s_intervals_add_up_to_its_i_os_in_the_result_and_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let hlog = dir.path().join("r.hlog");
    let out = mpirun(
        3,
        &[
            "run",
            "mem:16m",
            "--time",
            "600ms",
            "--ramp",
            "100ms",
            "--qd",
            "4",
            "--log-interval",
            "100ms",
        ],
    )
    .args(["--json", json.to_str().unwrap()])
    .args(["--hist-log", hlog.to_str().unwrap()])
    .output()
    .unwrap();
    ok(&out);
    let d = doc(&json);
    let sum: u64 = hosts(&d).iter().map(|h| h["ios"].as_u64().unwrap()).sum();
    assert_eq!(d["results"][0]["ios"].as_u64(), Some(sum));
    // The merged totals claim no intervals (percentiles do not add); every rank has its own.
    assert!(d["results"][0].get("intervals").is_none(), "{d}");
    let tags = per_tag(&hlog);
    let window = d["seconds"].as_f64().unwrap();
    for (r, h) in hosts(&d).iter().enumerate() {
        let ivs = h["intervals"].as_array().expect("a host's intervals");
        assert!(ivs.len() >= 3, "rank {r}: {h}");
        assert_eq!(h["intervals_step_s"].as_f64(), Some(0.1), "rank {r}");
        let own: u64 = ivs.iter().map(ios).sum();
        assert_eq!(Some(own), h["ios"].as_u64(), "rank {r}");
        // Its lines in rank 0's log, tagged with its rank, inside the window.
        let (n, first, last) = tags[&format!("rank{r}")];
        assert_eq!(n, own, "rank {r}: {tags:?}");
        assert!(
            (0.0..0.2).contains(&first) && last < window + 0.1,
            "rank {r}: {first}..{last} in a window of {window}"
        );
    }
    assert_eq!(tags.len(), 3, "{tags:?}");
}
