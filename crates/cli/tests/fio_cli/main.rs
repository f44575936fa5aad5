//! fio job files at the command line, against the real fio: `run --fio` and its refusals (one
//! line per option, exit 2), `compare --fio`, `--emit-fio` jobs that fio runs with the same
//! I/O mix, `suite show --fio` that fio parses, and `crosscheck` on a tmpfs file and on
//! `sanbench serve nbd` through fio's nbd engine.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command as Proc;

use assert_cmd::Command;
use sanbench_testkit::fio;
use serde_json::Value;

mod crosscheck;

fn sanbench() -> Command {
    Command::cargo_bin("sanbench").unwrap()
}

/// `sanbench run` with its document on stdout, quiet, no monitors: add the workload.
fn run_json() -> Command {
    let mut c = sanbench();
    c.args(["run", "--no-monitor", "--json", "-", "-q"]);
    c
}

fn shm_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("sanbench-fio-test")
        .tempdir_in("/dev/shm")
        .unwrap()
}

#[test]
fn every_unmapped_option_is_named_on_a_line_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let job = dir.path().join("j.fio");
    std::fs::write(
        &job,
        "[global]\nioengine=null\nsize=1g\nthinktime=10\n[a]\nrw=randread\ntime_based\n\
         runtime=1\nio_submit_mode=offload\ngtod_reduce=1\n",
    )
    .unwrap();
    let o = sanbench()
        .args(["run", "--no-monitor", "--fio"])
        .arg(&job)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 4, "{err}");
    for (opt, line) in [("thinktime", 0), ("io_submit_mode", 1), ("gtod_reduce", 2)] {
        assert_eq!(
            lines.iter().filter(|l| l.contains(opt)).count(),
            1,
            "{opt}: {err}"
        );
        assert!(lines[line].ends_with(&format!("(--fio-ignore {opt} runs without it)")));
        assert!(lines[line].contains(&format!("[a] {opt}=")), "{err}");
    }
    assert!(
        lines[3].contains("3 fio options sanbench does not map"),
        "{err}"
    );
    // Ignored by name, the job runs.
    let doc = sanbench_testkit::ok_json(
        &run_json()
            .args(["--time", "0.3s", "--fio"])
            .arg(&job)
            .args(["--fio-ignore", "thinktime,io_submit_mode,gtod_reduce"])
            .output()
            .unwrap(),
    );
    assert_eq!(
        doc["results"][0]["target"].as_str(),
        Some("null:1073741824")
    );
}

#[test]
fn a_job_section_is_the_run() {
    let dir = shm_dir();
    let img = dir.path().join("t.img");
    let job = dir.path().join("j.fio");
    std::fs::write(
        dir.path().join("common.fio"),
        "size=16m\nioengine=io_uring\n",
    )
    .unwrap();
    std::fs::write(
        &job,
        "[global]\nfilename=${SB_TEST_IMG}\ninclude common.fio\ntime_based\nruntime=400ms\n\
         [mix]\nrw=randrw\nrwmixwrite=25\nbssplit=4k/75:16k/25\niodepth=4\nnumjobs=2\n\
         [seq]\nrw=write\nbs=64k\n",
    )
    .unwrap();
    let doc = sanbench_testkit::ok_json(
        &run_json()
            .env("SB_TEST_IMG", &img)
            .args(["--section", "mix", "--fio"])
            .arg(&job)
            .output()
            .unwrap(),
    );
    let spec = &doc["spec"];
    assert_eq!(spec["qd"], 4);
    assert_eq!(spec["workers"], 2);
    assert_eq!(spec["span"], 16 << 20);
    let segs: Vec<(u64, u64, f64)> = spec["segments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["read_bs"].as_u64().unwrap(),
                s["weight"].as_u64().unwrap(),
                s["read_pct"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(segs, [(4096, 3, 75.0), (16384, 1, 75.0)]);
    assert_eq!(doc["results"][0]["engine"], "io_uring");
    // Several sections and none chosen.
    let o = sanbench()
        .env("SB_TEST_IMG", &img)
        .args(["run", "--fio"])
        .arg(&job)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("2 job sections (mix, seq)"));
    // compare --fio: one workload per section.
    let out = dir.path().join("report");
    let o = sanbench()
        .env("SB_TEST_IMG", &img)
        .args([
            "compare",
            "--repeat",
            "1",
            "--no-store",
            "--no-monitor",
            "-q",
            "--fio",
        ])
        .arg(&job)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let results = std::fs::read_to_string(out.join("results.json")).unwrap();
    assert!(results.contains("\"mix\"") && results.contains("\"seq\""));
}

/// Reads and writes of each size in fio's I/O log (`--write_iolog`, format version 3).
fn iolog_mix(path: &Path) -> BTreeMap<(String, u64), u64> {
    let mut m = BTreeMap::new();
    for l in std::fs::read_to_string(path).unwrap().lines().skip(1) {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() == 5 && (f[2] == "read" || f[2] == "write") {
            *m.entry((f[2].to_string(), f[4].parse().unwrap()))
                .or_default() += 1;
        }
    }
    m
}

#[test]
#[cfg_attr(not(feature = "interop"), ignore = "interop tier: needs fio")]
fn the_exported_job_does_the_same_io_mix_under_fio() {
    let fio = fio();
    let dir = shm_dir();
    let img = dir.path().join("t.img");
    let spec = dir.path().join("s.toml");
    let job = dir.path().join("out.fio");
    let log = dir.path().join("io.log");
    // Three sizes in bssplit shares, reads and writes of the same sizes, 65 % reads.
    std::fs::write(
        &spec,
        "qd = 4\n[[segment]]\nweight = 2\nbs = \"4k\"\nread = 65\nrandom = 100\nalign = \"4k\"\n\
         [[segment]]\nweight = 1\nbs = \"8k\"\nread = 65\nrandom = 100\nalign = \"4k\"\n\
         [[segment]]\nweight = 1\nbs = \"64k\"\nread = 65\nrandom = 100\nalign = \"4k\"\n",
    )
    .unwrap();
    let doc = sanbench_testkit::ok_json(
        &run_json()
            .args(["--time", "1s", "--size", "32m"])
            .arg(&img)
            .arg("--spec")
            .arg(&spec)
            .arg("--emit-fio")
            .arg(&job)
            .output()
            .unwrap(),
    );
    let text = std::fs::read_to_string(&job).unwrap();
    assert!(text.contains("bssplit=4k/50:8k/25:64k/25\n"), "{text}");
    let o = Proc::new(fio)
        .arg("--output-format=json")
        .arg(format!("--write_iolog={}", log.display()))
        .arg(&job)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let j: Value = serde_json::from_slice(&o.stdout).unwrap();
    let (r, w) = (
        j["jobs"][0]["read"]["total_ios"].as_f64().unwrap(),
        j["jobs"][0]["write"]["total_ios"].as_f64().unwrap(),
    );
    let res = &doc["results"][0];
    let (sr, sw) = (
        res["read"]["ios"].as_f64().unwrap(),
        res["write"]["ios"].as_f64().unwrap(),
    );
    let (fio_reads, sb_reads) = (r / (r + w), sr / (sr + sw));
    assert!((fio_reads - 0.65).abs() < 0.02, "fio reads {fio_reads}");
    assert!(
        (fio_reads - sb_reads).abs() < 0.02,
        "fio {fio_reads} sanbench {sb_reads}"
    );
    // Sizes: fio's own log of every I/O, against the spec's shares, per direction.
    let mix = iolog_mix(&log);
    for dir in ["read", "write"] {
        let n: u64 = mix
            .iter()
            .filter(|(k, _)| k.0 == dir)
            .map(|(_, v)| *v)
            .sum();
        assert!(n > 1000, "{dir}: {n} I/Os logged");
        for (bs, want) in [(4096, 0.5), (8192, 0.25), (65536, 0.25)] {
            let got = mix.get(&(dir.to_string(), bs)).copied().unwrap_or(0) as f64 / n as f64;
            assert!(
                (got - want).abs() < 0.02,
                "{dir} {bs}: {got} of {n}, want {want}"
            );
        }
        let other = mix
            .iter()
            .filter(|(k, _)| k.0 == dir && ![4096, 8192, 65536].contains(&k.1))
            .count();
        assert_eq!(other, 0, "{mix:?}");
    }
}

#[test]
#[cfg_attr(not(feature = "interop"), ignore = "interop tier: needs fio")]
fn suite_jobs_parse_in_fio_and_run_in_sanbench() {
    let fio = fio();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("quick.fio");
    let o = sanbench()
        .args(["suite", "show", "quick", "--fio"])
        .output()
        .unwrap();
    assert!(o.status.success());
    std::fs::write(&file, &o.stdout).unwrap();
    let p = Proc::new(fio)
        .env("TARGET", "/dev/shm/sanbench-fio-parse-only")
        .arg("--parse-only")
        .arg(&file)
        .output()
        .unwrap();
    assert!(p.status.success(), "{}", String::from_utf8_lossy(&p.stderr));
    let doc = sanbench_testkit::ok_json(
        &run_json()
            .args(["--time", "0.2s", "--ramp", "0s"])
            .args(["null:1G", "--section", "database-4k", "--fio"])
            .arg(&file)
            .output()
            .unwrap(),
    );
    assert_eq!(doc["spec"]["segments"][0]["read_pct"], 67.0);
}

/// fio's `cpus_allowed` and `cpus_allowed_policy=split`: `--cpus-policy split` writes both into
/// the exported job (fio splits only a set it was given, so without `--cpus` the set is every
/// CPU sanbench may use), fio takes the job, and `run --fio` reads them back into the run's
/// placement, recorded in the manifest.
#[test]
#[cfg_attr(not(feature = "interop"), ignore = "interop tier: needs fio")]
fn split_placement_goes_out_to_fio_and_comes_back() {
    let dir = shm_dir();
    let img = dir.path().join("t.img");
    let img = img.to_str().unwrap();
    let job = dir.path().join("split.fio");
    let run = |extra: &[&str]| sanbench_testkit::ok_json(&run_json().args(extra).output().unwrap());
    let flags = [
        "--size",
        "16m",
        "--time",
        "300ms",
        "--bs",
        "4k",
        "--qd",
        "2",
        "--workers",
        "2",
    ];
    let with = |more: &[&'static str]| -> Vec<&str> { flags.iter().chain(more).copied().collect() };
    let mut args = with(&["--cpus-policy", "split", "--emit-fio"]);
    args.extend([job.to_str().unwrap(), img]);
    let doc = run(&args);
    let text = std::fs::read_to_string(&job).unwrap();
    assert!(text.contains("\ncpus_allowed_policy=split\n"), "{text}");
    let listed = text
        .lines()
        .find_map(|l| l.strip_prefix("cpus_allowed="))
        .expect("cpus_allowed")
        .to_string();
    let placement = &doc["manifest"]["placement"];
    assert_eq!(placement["policy"], "split", "{placement}");
    assert_eq!(placement["cpus"], listed.as_str(), "{placement}");
    // Each of the two streams on the next CPU of the list, in turn.
    let cpus: Vec<u64> = listed
        .split(',')
        .flat_map(|p| match p.split_once('-') {
            Some((a, b)) => (a.parse().unwrap()..=b.parse().unwrap()).collect::<Vec<u64>>(),
            None => vec![p.parse().unwrap()],
        })
        .collect();
    let want: Vec<u64> = (0..2).map(|k| cpus[k % cpus.len()]).collect();
    assert_eq!(
        placement["stream_cpus"],
        serde_json::json!(want),
        "{placement}"
    );
    // fio runs it as written.
    let o = Proc::new(fio())
        .args(["--output-format=json", "--runtime=200ms"])
        .arg(&job)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // And back: the job's placement is the run's.
    let doc = run(&["--fio", job.to_str().unwrap()]);
    let placement = &doc["manifest"]["placement"];
    assert_eq!(placement["policy"], "split", "{placement}");
    assert_eq!(placement["cpus"], listed.as_str(), "{placement}");
    // Without the policy nothing is written and nothing recorded.
    let plain = dir.path().join("plain.fio");
    let mut args = with(&["--emit-fio"]);
    args.extend([plain.to_str().unwrap(), img]);
    let doc = run(&args);
    assert!(!std::fs::read_to_string(&plain)
        .unwrap()
        .contains("cpus_allowed"));
    assert!(
        doc["manifest"].get("placement").is_none(),
        "{}",
        doc["manifest"]
    );
}

/// `--emit-fio` for passthrough targets: fio's io_uring_cmd engine (cmd_type=nvme) for
/// nvme-ng: and its sg engine for sg:, jobs fio parses. The job is written before the target
/// opens, so devices that are not here still give their jobs (the run then exits 2).
#[test]
#[cfg_attr(not(feature = "interop"), ignore = "interop tier: needs fio")]
fn passthrough_jobs_parse_in_fio() {
    let fio = fio();
    let dir = tempfile::tempdir().unwrap();
    for (target, engine) in [
        ("nvme-ng:/dev/sanbench-no-ng0n1", "io_uring_cmd"),
        ("sg:/dev/sanbench-no-sg9", "sg"),
    ] {
        let job = dir.path().join(format!("{engine}.fio"));
        let o = sanbench()
            .args([
                "run",
                "--no-monitor",
                "-q",
                "--read",
                "70",
                "--bs",
                "4k",
                "--qd",
                "4",
            ])
            .args(["--time", "1s", "--emit-fio"])
            .arg(&job)
            .arg(target)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{o:?}");
        let text = std::fs::read_to_string(&job).unwrap();
        assert!(text.contains(&format!("\nioengine={engine}\n")), "{text}");
        let p = Proc::new(fio)
            .arg("--parse-only")
            .arg(&job)
            .output()
            .unwrap();
        assert!(
            p.status.success(),
            "{text}\n{}",
            String::from_utf8_lossy(&p.stderr)
        );
    }
}
