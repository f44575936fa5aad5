//! Host monitoring through `sanbench run` on the real procfs.

use assert_cmd::Command;
use serde_json::Value;

fn run(args: &[&str]) -> Value {
    let out = Command::cargo_bin("sanbench")
        .unwrap()
        .args(["run", "--json", "-", "--quiet"])
        .args(args)
        .output()
        .unwrap();
    sanbench_testkit::ok_json(&out)
}

#[test]
fn a_cpu_burning_run_is_attributed_to_sanbench_threads() {
    // null: keeps its stream thread busy the whole window.
    let doc = run(&["null:", "--qd", "32", "--time", "2", "--baseline", "500ms"]);
    let r = &doc["results"][0];
    let groups = r["cpu"]["groups"].as_array().unwrap();
    let me = groups
        .iter()
        .find(|g| g["name"] == "self")
        .expect("self group");
    let cpu_s = me["cpu_s"].as_f64().unwrap();
    // Up to one core for 2 s; at least some of it even on a loaded machine (0.33 CPU-s was
    // seen at a load average of 11 on 2 cores).
    assert!(
        cpu_s > 0.15 && cpu_s < 2.6,
        "self used {cpu_s} CPU-s in a 2 s window"
    );
    let threads = me["top_threads"].as_array().unwrap();
    let top = threads[0]["name"].as_str().unwrap();
    assert!(
        top.starts_with(&sanbench_engine::run::stream_thread_name(0, 0)),
        "busiest thread {top}: {threads:?}"
    );
    let top_s = threads[0]["cpu_s"].as_f64().unwrap();
    // Every other thread of sanbench (main, monitor) is nearly idle.
    let rest: f64 = threads[1..]
        .iter()
        .map(|t| t["cpu_s"].as_f64().unwrap())
        .sum();
    assert!(
        top_s > 0.3 && rest < 0.1 * top_s,
        "stream {top_s} s, others {rest} s"
    );
    // System-wide figures and the derived efficiency are present.
    assert!(r["cpu"]["busy_pct"].as_f64().unwrap() > 20.0);
    assert!(r["efficiency"]["cpu_us_per_io_gross"].as_f64().unwrap() > 0.0);
    assert_eq!(
        doc["manifest"]["cpu_count"].as_u64().unwrap() as usize,
        num_cpus()
    );
    assert!(doc["manifest"]["kernel"].is_string());
}

fn num_cpus() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

#[test]
fn a_power_command_is_measured_not_modeled() {
    let doc = run(&[
        "mem:64M",
        "--time",
        "2",
        "--baseline",
        "1s",
        "--monitor-interval",
        "200ms",
        "--power-cmd",
        "echo 42.5 W",
    ]);
    let p = &doc["results"][0]["power"];
    assert_eq!(p["source"], "command");
    assert_eq!(p["modeled"], false);
    assert!((p["avg_w"].as_f64().unwrap() - 42.5).abs() < 1e-6, "{p}");
    assert!((p["idle_w"].as_f64().unwrap() - 42.5).abs() < 1e-6);
    // Constant power: nothing above idle, so no per-watt efficiency can be claimed.
    assert!(p["joules_above_idle"].as_f64().unwrap().abs() < 1e-6);
    assert!(doc["results"][0]["efficiency"]["iops_per_watt"].is_null());
}

#[test]
fn without_a_meter_power_is_labeled_modeled() {
    let doc = run(&[
        "mem:64M",
        "--time",
        "1",
        "--baseline",
        "300ms",
        "--power",
        "model",
    ]);
    let r = &doc["results"][0];
    assert_eq!(r["power"]["modeled"], true);
    assert_eq!(r["efficiency"]["power_modeled"], true);
}

#[test]
fn a_broken_power_command_is_a_note_not_a_number() {
    let doc = run(&[
        "mem:64M",
        "--time",
        "1",
        "--baseline",
        "300ms",
        "--power-cmd",
        "false",
    ]);
    let p = &doc["results"][0]["power"];
    assert!(p["avg_w"].is_null(), "{p}");
    assert!(p["note"].as_str().unwrap().len() > 5, "{p}");
}

/// Busy loops, one per core, killed by process id when dropped.
struct Burners(Vec<std::process::Child>);

impl Drop for Burners {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[test]
fn a_host_busy_before_the_run_is_flagged_and_warned_about() {
    // A quarter of the cores (at least one) busy through the idle baseline and the run: "busy
    // minus baseline" no longer measures the run, so the result says so instead of claiming an
    // absurd efficiency. (Not every core: other tests of this binary run beside this one.)
    let _burn = Burners(
        (0..num_cpus().div_ceil(4))
            .map(|_| {
                std::process::Command::new("sh")
                    .args(["-c", "while :; do :; done"])
                    .spawn()
                    .unwrap()
            })
            .collect(),
    );
    std::thread::sleep(std::time::Duration::from_millis(200));
    let out = Command::cargo_bin("sanbench")
        .unwrap()
        .args(["run", "mem:64M", "--time", "1", "--baseline", "500ms"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("warning: the host was") && text.contains("busy before the run"),
        "{text}"
    );
    let doc = run(&["mem:64M", "--time", "1", "--baseline", "500ms"]);
    let r = &doc["results"][0];
    assert!(
        r["cpu"]["baseline_busy_pct"].as_f64().unwrap() > 15.0,
        "{}",
        r["cpu"]
    );
    assert_eq!(r["efficiency"]["host_not_idle"], true);
}

/// A process beside the run, named: the result counts its CPU in `cpu.others` under its name
/// and the run warns about it. The burner is a copy of sh under a name of its own, so that
/// no other process of the host is taken for it.
#[test]
fn other_processes_during_the_window_are_counted_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let sh = dir.path().join("busy-neighbour");
    std::fs::copy("/bin/sh", &sh).unwrap();
    let _burn = Burners(vec![std::process::Command::new(&sh)
        .args(["-c", "while :; do :; done"])
        .spawn()
        .unwrap()]);
    std::thread::sleep(std::time::Duration::from_millis(200));
    let out = Command::cargo_bin("sanbench")
        .unwrap()
        .args(["run", "mem:64M", "--time", "2", "--json", "-"])
        .output()
        .unwrap();
    let doc = sanbench_testkit::ok_json(&out);
    let o = &doc["results"][0]["cpu"]["others"];
    let mine = o["top"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "busy-neighbour")
        .unwrap_or_else(|| panic!("{o}"));
    // A busy loop over a 2 s window: about 2 s on an idle host, its share of two cores on a
    // busy one (0.14 s at load 14, 2026-11-29, beside two builds): so only more than nothing.
    let cpu = mine["cpu_s"].as_f64().unwrap();
    assert!(cpu > 0.0 && cpu <= o["cpu_s"].as_f64().unwrap(), "{o}");
    assert_eq!(mine["processes"], 1);
    assert!(o["pct_of_core"].as_f64().unwrap() >= 15.0, "{o}");
    let text =
        String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("warning: other processes used") && text.contains("busy-neighbour"),
        "{text}"
    );
}

#[test]
fn monitors_refuses_a_device_that_is_not_there() {
    let out = Command::cargo_bin("sanbench")
        .unwrap()
        .args(["monitors", "/dev/sanbench-no-such-disk"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("device /dev/sanbench-no-such-disk: ")
            && stdout.contains("sanbench-no-such-disk"),
        "{stdout}"
    );
}
