//! Flush and FUA as workload operations, seen by a real NBD server: nbdkit's log filter
//! records every request with its flags.

use std::process::{Command as Proc, Stdio};
use std::time::{Duration, Instant};

use assert_cmd::Command;
use serde_json::Value;

#[test]
#[cfg_attr(not(feature = "interop"), ignore = "interop tier: needs nbdkit")]
fn flushes_and_fua_writes_reach_the_server_as_asked() {
    sanbench_testkit::require("nbdkit", "nbdkit");
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("nbd.log");
    // A Unix socket of its own: no port to race for (once in a full suite the run was refused
    // a connection on the TCP port the probe below had just reached, nbdkit still running).
    let sock = dir.path().join("nbdkit.sock");
    let mut server = Proc::new("nbdkit")
        .args(["-f", "-U"])
        .arg(&sock)
        .args(["--filter=log", "memory"])
        .args(["16M".to_string(), format!("logfile={}", log.display())])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.path().join("nbdkit.err")).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::os::unix::net::UnixStream::connect(&sock).is_err() {
        assert!(Instant::now() < deadline, "nbdkit did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = Command::cargo_bin("sanbench")
        .unwrap()
        .args(["run", &format!("nbd+unix:///?socket={}", sock.display())])
        .args([
            "--fua",
            "25",
            "--flush-every",
            "8",
            "--read",
            "0",
            "--bs",
            "4k",
            "--qd",
            "4",
            "--time",
            "1s",
            "--ramp",
            "0s",
            "--precondition",
            "none",
            "--quiet",
            "--no-monitor",
            "--json",
            "-",
        ])
        .output()
        .unwrap();
    // Say whether nbdkit was still running when the run failed, and what it said.
    let alive = matches!(server.try_wait(), Ok(None));
    let _ = server.kill();
    let _ = server.wait();
    assert!(
        out.status.success(),
        "{}nbdkit on {} {} at the end of the run; its stderr: {}",
        String::from_utf8_lossy(&out.stderr),
        sock.display(),
        if alive { "still running" } else { "had exited" },
        std::fs::read_to_string(dir.path().join("nbdkit.err")).unwrap_or_default()
    );
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let r = &doc["results"][0];
    let text = std::fs::read_to_string(&log).unwrap();
    // Request lines (not the "...Write id=N return=0" replies).
    let requests = |op: &str, flag: &str| {
        text.lines()
            .filter(|l| l.contains(&format!(" {op} id=")) && l.contains(flag))
            .count()
    };
    let (fua, plain) = (requests("Write", "fua=1"), requests("Write", "fua=0"));
    let flushes = requests("Flush", "");
    let writes = fua + plain;
    assert!(writes > 500, "{writes} writes");
    let share = fua as f64 / writes as f64;
    assert!(
        (share - 0.25).abs() < 0.05,
        "{fua} of {writes} writes had FUA"
    );
    let per_flush = writes as f64 / flushes.max(1) as f64;
    assert!(
        (7.0..=9.0).contains(&per_flush),
        "{writes} writes, {flushes} flushes"
    );
    // The result counts them apart, inside the window.
    assert!(r["fua"]["ios"].as_u64().unwrap() > 0, "{r}");
    assert!(r["flush"]["ios"].as_u64().unwrap() > 0, "{r}");
    assert!(r["fua"]["latency_us"]["mean"].as_f64().unwrap() > 0.0);
}

#[test]
fn fua_writes_to_a_file_use_dsync_and_are_counted() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("f");
    for engine in ["io_uring", "sync"] {
        let out = Command::cargo_bin("sanbench")
            .unwrap()
            .arg("run")
            .arg(&f)
            .args([
                "--size",
                "8M",
                "--engine",
                engine,
                "--fua",
                "100",
                "--read",
                "0",
                "--bs",
                "4k",
                "--qd",
                "4",
                "--time",
                "0.5s",
                "--ramp",
                "0s",
                "--quiet",
                "--no-monitor",
                "--json",
                "-",
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        let r = &doc["results"][0];
        assert_eq!(
            r["fua"]["ios"], r["write"]["ios"],
            "{engine}: every write FUA: {r}"
        );
    }
    let out = Command::cargo_bin("sanbench")
        .unwrap()
        .args(["run", "mem:1M", "--fua", "101", "--read", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}
