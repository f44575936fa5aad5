//! Little's law on real runs: IOPS x mean latency (the "implied" outstanding I/Os) is within 5 %
//! of the mean outstanding I/Os, which the coordinator samples at Poisson instants independently
//! of the latency timestamps (so a latency that leaves out part of an I/O's life, or counts
//! I/Os the window did not hold, shows up here as a deviation).
//!
//! One test, its runs one after another, in a file of its own: the sampler runs on its own
//! thread, and on a 2-core machine crowded by parallel tests its samples would lean towards
//! the instants when the stream thread blocks (all I/Os in flight). Three seconds per run give
//! ~1,500 samples, a standard error of ~1 % even for `mem:`, whose in-flight count swings from
//! QD to 0 within microseconds. `null:` is left out: its I/Os complete in tens of nanoseconds,
//! below what a clock read brackets, so the ratio there says nothing about the measurement.
//! For the same reason `mem:` runs 16 KiB I/Os here (latency ~5 µs): at 4 KiB and ~4M IOPS
//! (latency ~1.7 µs) the in-flight count's window runs ~0.1 µs per batch longer than the
//! latency stamps (the clock reads and the count's stores are a few instructions apart), which
//! is 1-6 % there, measured on a loaded 2-core VM.

use serde_json::Value;

fn run(args: &[&str]) -> Value {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sanbench"))
        .args([
            "run", "--json", "-", "--quiet", "--ramp", "200ms", "--time", "3s",
        ])
        .args(["--baseline", "0", "--no-monitor"])
        .args(args)
        .output()
        .unwrap();
    sanbench_testkit::ok_json(&out)
}

/// Checks the law on every result of `doc`, from its own figures (not the document's
/// `deviation` field alone, so a wrong `implied` cannot hide a wrong IOPS or latency).
fn check(what: &str, doc: &Value) {
    for r in doc["results"].as_array().unwrap() {
        let iops = r["iops"].as_f64().unwrap();
        let mean_s = r["latency_us"]["mean"].as_f64().unwrap() / 1e6;
        let ll = &r["littles_law"];
        let sampled = ll["mean_outstanding"]
            .as_f64()
            .unwrap_or_else(|| panic!("{what}: no sampled mean outstanding in {ll}"));
        let implied = iops * mean_s;
        let dev = (implied - sampled).abs() / sampled;
        assert!(
            dev <= 0.05,
            "{what}: IOPS {iops:.0} x mean latency {:.2} µs = {implied:.3} outstanding, \
             sampled {sampled:.3}: {:.1} % apart",
            mean_s * 1e6,
            dev * 100.0
        );
        let stated = ll["deviation"].as_f64().unwrap();
        assert!(
            (stated - dev).abs() < 1e-3,
            "{what}: document says {stated}, figures give {dev}"
        );
        assert!(sampled <= ll["outstanding"].as_f64().unwrap() + 1e-9);
    }
}

#[test]
fn iops_times_mean_latency_is_the_sampled_mean_outstanding() {
    check(
        "mem: 16k 50/50 QD 8",
        &run(&[
            "mem:64M", "--qd", "8", "--read", "50", "--random", "100", "--bs", "16k",
        ]),
    );
    check(
        "mem: 64k reads 4k writes QD 4",
        &run(&[
            "mem:64M",
            "--qd",
            "4",
            "--read-bs",
            "64k",
            "--write-bs",
            "4k",
            "--read",
            "70",
        ]),
    );
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let f = dir.path().join("disk");
    let fs = f.to_str().unwrap();
    for engine in ["sync", "auto"] {
        check(
            &format!("file, {engine} engine, 4k 50/50 QD 8"),
            &run(&[
                fs, "--size", "16M", "--engine", engine, "--qd", "8", "--read", "50", "--random",
                "100", "--bs", "4k",
            ]),
        );
    }
}
