//! `sanbench run` from the outside: the JSON document, exit codes and one-line errors.

use assert_cmd::Command;
use sanbench_testkit::Served;
use serde_json::Value;

mod chap;

fn sanbench() -> Command {
    Command::cargo_bin("sanbench").unwrap()
}

fn run_json(args: &[&str]) -> Value {
    let out = sanbench()
        .args(["run", "--json", "-", "--quiet"])
        .args(args)
        .output()
        .unwrap();
    sanbench_testkit::ok_json(&out)
}

#[test]
fn null_run_writes_the_documented_fields() {
    let doc = run_json(&["null:", "--qd", "32", "--time", "1", "--bs", "4k"]);
    assert_eq!(doc["schema"], "sanbench.run/2");
    let r = &doc["results"][0];
    assert_eq!(r["target"], "null:");
    for f in ["seconds", "iops", "mb_per_s", "mib_per_s"] {
        assert!(r[f].as_f64().unwrap() > 0.0, "{f}");
    }
    for f in ["mean", "p50", "p90", "p99", "p999", "p9999", "max"] {
        assert!(r["latency_us"][f].is_number(), "latency_us.{f}");
    }
    assert!(r["read"]["ios"].as_u64().unwrap() > 100_000);
    assert_eq!(r["write"]["ios"], 0);
    assert_eq!(r["timeseries"].as_array().unwrap().len(), 1);
    assert_eq!(r["littles_law"]["outstanding"], 32);
    assert_eq!(r["latency_ms_buckets"].as_array().unwrap().len(), 25);
    assert!(doc["peak_rss_bytes"].as_u64().unwrap() > 0);
    assert!(doc["process_cpu"]["cpu_us_per_io"].as_f64().unwrap() > 0.0);
    let mbps = r["mb_per_s"].as_f64().unwrap();
    let iops = r["iops"].as_f64().unwrap();
    // Both written to seven significant digits (doc::json::SIGNIFICANT): equal within that.
    assert!(
        (mbps - iops * 4096.0 / 1e6).abs() / mbps < 2e-6,
        "MB/s is decimal"
    );
    // MiB/s is binary: 1.048576 apart, which decimal MB/s mislabelled would not be.
    let mibps = r["mib_per_s"].as_f64().unwrap();
    assert!((mbps / mibps - 1.048576).abs() < 1e-5, "{mbps} {mibps}");
}

#[test]
fn mixed_sizes_and_several_targets() {
    let doc = run_json(&[
        "mem:32M",
        "mem:16M",
        "--read-bs",
        "4k",
        "--write-bs",
        "16k",
        "--read",
        "50",
        "--random",
        "0",
        "--qd",
        "4",
        "--workers",
        "2",
        "--time",
        "1",
    ]);
    let results = doc["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    for r in results {
        let rb = r["read"]["bytes"].as_u64().unwrap();
        let ri = r["read"]["ios"].as_u64().unwrap();
        let wb = r["write"]["bytes"].as_u64().unwrap();
        let wi = r["write"]["ios"].as_u64().unwrap();
        assert_eq!(rb, ri * 4096);
        assert_eq!(wb, wi * 16384);
        // Mixed workloads keep both streams in a proportion near the spec.
        let share = ri as f64 / (ri + wi) as f64;
        assert!((share - 0.5).abs() < 0.05, "{share}");
    }
    let all = &doc["all"];
    let sum: u64 = results.iter().map(|r| r["ios"].as_u64().unwrap()).sum();
    assert_eq!(all["ios"].as_u64().unwrap(), sum);
    assert_eq!(all["littles_law"]["outstanding"], 16);
}

#[test]
fn spec_file_drives_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("nwc.toml");
    std::fs::write(
        &spec,
        r#"
name = "nwc-custom"
qd = 4
time = "1s"
[[segment]]
weight = 33
bs = "512"
read = 100
[[segment]]
weight = 34
bs = "2k"
read = 67
random = 100
[[segment]]
weight = 33
bs = "64k"
read = 100
"#,
    )
    .unwrap();
    let doc = run_json(&["mem:64M", "--spec", spec.to_str().unwrap()]);
    assert_eq!(doc["spec"]["name"], "nwc-custom");
    assert_eq!(doc["spec"]["segments"].as_array().unwrap().len(), 3);
    assert_eq!(doc["spec"]["qd"], 4);
    let r = &doc["results"][0];
    assert!(r["write"]["ios"].as_u64().unwrap() > 0);
}

#[test]
fn file_target_is_created_at_size() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.img");
    let p = path.to_str().unwrap();
    let doc = run_json(&[p, "--size", "4M", "--time", "1", "--read", "70"]);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 4 << 20);
    // Created sparse, then filled by the precondition step (auto: the file is sanbench's own).
    assert_eq!(doc["results"][0]["info"]["params"]["created"], true);
    assert_eq!(doc["results"][0]["precondition"]["state"], "preconditioned");
    assert_eq!(doc["results"][0]["precondition"]["bytes"], 4u64 << 20);
    let engine = doc["results"][0]["engine"].as_str().unwrap();
    assert!(engine == "io_uring" || engine == "sync");
}

fn expect_usage_error(args: &[&str], needle: &str) {
    let out = sanbench().args(args).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{args:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(needle), "{args:?}: {err}");
    assert!(
        err.trim_end().lines().count() <= 2,
        "{args:?}: one clear line, got {err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn bad_input_exits_2_with_one_line() {
    expect_usage_error(&["run", "mem:1G", "--bs", "4q"], "unknown unit");
    expect_usage_error(&["run", "mem:1G", "--qd", "0"], "queue depth");
    expect_usage_error(&["run", "mem:1G", "--read", "120"], "between 0 and 100");
    expect_usage_error(&["run", "mem:1G", "--time", "soon"], "duration");
    expect_usage_error(&["run", "mem:", "--time", "1"], "give a size");
    expect_usage_error(&["run", "bogus:thing"], "not understood");
    expect_usage_error(&["run", "/nonexistent/dir/x"], "--size");
    expect_usage_error(&["run", "mem:1M", "--bs", "4M"], "smaller than the largest");
    expect_usage_error(&["run", "mem:1G", "--engine", "warp"], "unknown engine");
    expect_usage_error(
        &["run", "mem:1G", "--spec", "/nonexistent.toml"],
        "cannot read",
    );
    expect_usage_error(&["run"], "not provided: <TARGET>");
    expect_usage_error(&["diff", "1"], "not provided: <RUN_B>");
    // --curve is parsed where it enters, with the other flags: its error comes before the
    // suite is read (the suite named here does not exist).
    expect_usage_error(
        &[
            "compare",
            "--repeat",
            "1",
            "null:",
            "--suite",
            "/nonexistent.toml",
            "--curve",
            "10,abc",
        ],
        "--curve <PCT,PCT,...>': 'abc' is not a percentage",
    );
    expect_usage_error(
        &["compare", "--repeat", "1", "null:", "--curve", "0,50"],
        "0 is not a load level between 0 and 200 %",
    );
    expect_usage_error(&["run", "mem:1G", "--frobnicate"], "frobnicate");
    // A result file that could not be written at the end is refused before the run (it
    // once ran the whole window and then failed to write, losing the result).
    let t0 = std::time::Instant::now();
    expect_usage_error(
        &[
            "run",
            "mem:64M",
            "--time",
            "20",
            "--json",
            "/nonexistent/dir/r.json",
        ],
        "--json /nonexistent/dir/r.json: there is no directory /nonexistent/dir",
    );
    assert!(
        t0.elapsed() < std::time::Duration::from_secs(10),
        "it ran first"
    );
    expect_usage_error(
        &["verify", "mem:64M", "--json", "/nonexistent/dir/v.json"],
        "there is no directory",
    );
    // Query options of network targets are checked before anything connects.
    expect_usage_error(
        &["run", "nbd://127.0.0.1:9/?submit_batch=0"],
        "submit_batch must be",
    );
    expect_usage_error(
        &["run", "nbd://127.0.0.1:9/?tls=on"],
        "unknown option 'tls'",
    );
    expect_usage_error(
        &["run", "iscsi://127.0.0.1:9/iqn.x:y/1?submit_batch=x"],
        "submit_batch must be",
    );
}

#[test]
fn spec_file_errors_name_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("bad.toml");
    std::fs::write(&spec, "qd = 4\n[[segment]]\nbs = \"4k\"\nreed = 50\n").unwrap();
    expect_usage_error(
        &["run", "mem:1G", "--spec", spec.to_str().unwrap()],
        "line 4: unknown field `reed`",
    );
    // Weights whose sum overflows the generator's 32-bit scale are bad input, not a skew.
    std::fs::write(
        &spec,
        "[[segment]]\nbs = \"4k\"\nweight = 4294967295\n\
         [[segment]]\nbs = \"8k\"\nweight = 4294967295\n",
    )
    .unwrap();
    expect_usage_error(
        &["run", "mem:1G", "--spec", spec.to_str().unwrap()],
        "segment weights sum to 8589934590",
    );
}

/// Built with the mpi feature, the same variables would make the binary join a job.
#[cfg(not(feature = "mpi"))]
#[test]
fn started_as_one_of_several_ranks_without_mpi_is_refused() {
    for (k, n, rk) in [
        ("OMPI_COMM_WORLD_SIZE", "4", "OMPI_COMM_WORLD_RANK"),
        ("SLURM_STEP_NUM_TASKS", "2", "SLURM_PROCID"),
    ] {
        let out = assert_cmd::Command::cargo_bin("sanbench")
            .unwrap()
            .args(["run", "null:", "--time", "1"])
            .env(k, n)
            .env(rk, "1")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains("without the mpi feature"), "{err}");
    }
}

/// The same under a real mpirun (when Open MPI is installed): every rank refuses, none runs a
/// benchmark of its own, and the job exits 2 as each rank does. This test file is compiled
/// without the mpi feature only (scripts/test.sh: `cargo test -p sanbench --test run_cli --
/// mpi`), so `cargo_bin` is the default build.
#[cfg(not(feature = "mpi"))]
#[test]
#[cfg_attr(not(feature = "interop"), ignore = "interop tier: needs mpirun")]
fn under_a_real_mpirun_without_mpi_every_rank_refuses() {
    sanbench_testkit::require("mpirun", "openmpi-bin");
    let out = std::process::Command::new("mpirun")
        .args(["--oversubscribe", "-n", "2", "--mca", "btl", "self,vader"])
        .args(["--mca", "oob_tcp_if_include", "lo"])
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .arg(assert_cmd::cargo::cargo_bin("sanbench"))
        .args(["run", "null:", "--time", "1"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    // mpirun returns the exit code of the first rank to exit non-zero (Open MPI's mpirun(1),
    // "exit status"; it prints that rank and code) and aborts the rest; every rank refuses
    // with 2, so whichever is first, the job's code is 2 (Open MPI 4.1.4: 25 runs out of 25).
    assert_eq!(out.status.code(), Some(2), "{err}");
    // Each rank that got as far as its check says why; the first to exit has mpirun abort the
    // other, which on a crowded host can be before it printed (one message in a run beside
    // other tests, 2026-11-29). No rank ran I/O either way.
    let said = err.matches("without the mpi feature").count();
    assert!((1..=2).contains(&said), "{err}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("IOPS"));
}

/// Ctrl-C: the first ends the run cleanly (exit 0, the result written, the window ending where
/// it stopped); while that stop waits on a target that went silent (a stopped server), a
/// second one ends the process at once with exit 130 instead of waiting out --io-timeout.
#[test]
fn ctrl_c_stops_cleanly_and_a_second_one_at_once() {
    use std::process::{Command as Std, Stdio};
    use std::time::{Duration, Instant};
    let bin = assert_cmd::cargo::cargo_bin("sanbench");
    let signal = |pid: u32, sig: i32| {
        // SAFETY: kill(2) on a child we started and have not reaped.
        assert_eq!(unsafe { libc::kill(pid as i32, sig) }, 0);
    };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    let mut c = Std::new(&bin)
        .args([
            "run",
            "mem:64M",
            "--time",
            "30",
            "--quiet",
            "--no-monitor",
            "--json",
        ])
        .arg(&out)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let t = Instant::now();
    signal(c.id(), libc::SIGINT);
    let st = c.wait().unwrap();
    assert_eq!(st.code(), Some(0), "first Ctrl-C: a clean stop");
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let secs = doc["results"][0]["seconds"].as_f64().unwrap();
    assert!(
        secs > 0.2 && secs < 5.0,
        "window {secs} s, not the asked 30"
    );

    let server = Served::start(&bin, &["nbd", "--size", "64M", "--listen", "127.0.0.1:0"]);
    let mut c = Std::new(&bin)
        .args([
            "run",
            "--time",
            "30",
            "--quiet",
            "--no-monitor",
            "--io-timeout",
            "60s",
        ])
        .args(["--precondition", "none", "--qd", "4"])
        .arg(&server.uri)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    signal(server.pid(), libc::SIGSTOP);
    std::thread::sleep(Duration::from_millis(300));
    signal(c.id(), libc::SIGINT);
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        c.try_wait().unwrap().is_none(),
        "the clean stop waits for the silent target"
    );
    let t = Instant::now();
    signal(c.id(), libc::SIGINT);
    let st = c.wait().unwrap();
    signal(server.pid(), libc::SIGCONT);
    drop(server);
    assert_eq!(st.code(), Some(130), "second Ctrl-C: at once");
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
}

/// Stopped during the ramp: a clean stop with an empty window, said so, and no interval
/// summaries (not one of 1 ns at 0 s).
#[test]
fn ctrl_c_during_the_ramp_gives_an_empty_window_without_intervals() {
    use std::process::{Command as Std, Stdio};
    let bin = assert_cmd::cargo::cargo_bin("sanbench");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    let mut c = Std::new(&bin)
        .args(["run", "mem:16M", "--time", "30s", "--ramp", "20s"])
        .args(["--log-interval", "1s", "--quiet", "--no-monitor", "--json"])
        .arg(&out)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    // SAFETY: kill(2) on a child we started and have not reaped.
    assert_eq!(unsafe { libc::kill(c.id() as i32, libc::SIGINT) }, 0);
    assert_eq!(c.wait().unwrap().code(), Some(0));
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(doc["stopped_early"], true, "{doc}");
    let r = &doc["results"][0];
    assert_eq!(
        (r["seconds"].as_f64(), r["ios"].as_u64()),
        (Some(0.0), Some(0))
    );
    assert!(
        r.get("intervals")
            .is_none_or(|v| v.as_array().is_some_and(|a| a.is_empty())),
        "{}",
        r["intervals"]
    );
}

/// `--json` to something that is not a plain file is written in place: a FIFO stays a FIFO and
/// its reader gets the document, a symbolic link stays a link and its target gets it. (The
/// write-beside-and-rename of a plain file would have replaced them, and `--json /dev/null`
/// run as root would have turned /dev/null into a regular file.)
#[test]
fn json_to_a_fifo_or_a_link_writes_through_it() {
    use std::os::unix::fs::FileTypeExt;
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap())
    };
    let args = [
        "run",
        "null:",
        "--time",
        "200ms",
        "--quiet",
        "--no-monitor",
        "--json",
    ];
    sanbench().args(args).arg(&fifo).assert().success();
    // Before joining the reader, which would wait forever on a FIFO nobody opened.
    let t = std::fs::symlink_metadata(&fifo).unwrap().file_type();
    assert!(t.is_fifo(), "the FIFO was replaced: {t:?}");
    let doc: Value = serde_json::from_str(&reader.join().unwrap()).unwrap();
    assert_eq!(doc["schema"], "sanbench.run/2");

    let target = dir.path().join("target.json");
    let link = dir.path().join("latest.json");
    std::fs::write(&target, "old").unwrap();
    std::os::unix::fs::symlink(&target, &link).unwrap();
    sanbench().args(args).arg(&link).assert().success();
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&target).unwrap()).unwrap();
    assert_eq!(doc["schema"], "sanbench.run/2");
}
