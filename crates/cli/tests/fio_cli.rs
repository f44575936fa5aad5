//! fio job files at the command line, against the real fio: `run --fio` and its refusals (one
//! line per option, exit 2), `compare --fio`, `--emit-fio` jobs that fio runs with the same
//! I/O mix, `suite show --fio` that fio parses, and `crosscheck` on a tmpfs file and on
//! `sanbench serve nbd` through fio's nbd engine.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command as Proc;

use assert_cmd::Command;
use sanbench_testkit::Served;
use serde_json::Value;

fn sanbench() -> Command {
    Command::cargo_bin("sanbench").unwrap()
}

fn shm_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("sanbench-fio-test")
        .tempdir_in("/dev/shm")
        .unwrap()
}

/// fio, waiting for it while another process installs it.
fn fio() -> &'static str {
    for _ in 0..120 {
        if Path::new("/usr/bin/fio").exists() {
            return "/usr/bin/fio";
        }
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
    panic!("fio is not installed (scripts/deps.sh installs it)");
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
        &sanbench()
            .args([
                "run",
                "--no-monitor",
                "--json",
                "-",
                "-q",
                "--time",
                "0.3s",
                "--fio",
            ])
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
        &sanbench()
            .env("SB_TEST_IMG", &img)
            .args([
                "run",
                "--no-monitor",
                "--json",
                "-",
                "-q",
                "--section",
                "mix",
                "--fio",
            ])
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
        &sanbench()
            .args([
                "run",
                "--no-monitor",
                "--json",
                "-",
                "-q",
                "--time",
                "1s",
                "--size",
                "32m",
            ])
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
        &sanbench()
            .args([
                "run",
                "--no-monitor",
                "--json",
                "-",
                "-q",
                "--time",
                "0.2s",
                "--ramp",
                "0s",
            ])
            .args(["null:1G", "--section", "database-4k", "--fio"])
            .arg(&file)
            .output()
            .unwrap(),
    );
    assert_eq!(doc["spec"]["segments"][0]["read_pct"], 67.0);
}

/// The crosschecks one at a time: on 2 cores, two at once starve fio's single thread.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn crosscheck(target: &str, extra: &[&str], tolerance: &str) -> std::process::Output {
    sanbench()
        .args([
            "crosscheck",
            target,
            "--repeat",
            "1",
            "--time",
            "1s",
            "--ramp",
            "0.2s",
        ])
        .args(["--tolerance", tolerance, "--fio-bin", fio()])
        .args(extra)
        .args(if extra.contains(&"--db") {
            None
        } else {
            Some("--no-store")
        })
        .output()
        .unwrap()
}

/// Both tools ran and were compared: one row each, Little's law holding for both (a closed
/// loop keeps its depth whatever the machine's load), and exit 0 or exit 1 for a ratio
/// outside the tolerance, never a failed run. Returns stdout.
fn compared(o: &std::process::Output) -> String {
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    let err = String::from_utf8_lossy(&o.stderr);
    let rows = |tool: &str| {
        out.lines()
            .filter(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                f.len() > 2 && f[0].parse::<u32>().is_ok() && f[1] == tool
            })
            .count()
    };
    assert_eq!((rows("sanbench"), rows("fio")), (1, 1), "{out}{err}");
    let little = out
        .lines()
        .filter(|l| l.starts_with("Little's law") && l.ends_with("  ok"))
        .count();
    assert_eq!(little, 2, "{out}");
    match o.status.code() {
        Some(0) => assert!(out.contains("verdict: sanbench and fio agree"), "{out}"),
        Some(1) => assert!(err.contains("crosscheck: outside the"), "{out}{err}"),
        c => panic!("exit {c:?}: {out}{err}"),
    }
    out
}

#[test]
#[cfg_attr(not(feature = "interop"), ignore = "interop tier: needs fio")]
fn crosscheck_on_a_tmpfs_file() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = shm_dir();
    let img = dir.path().join("t.img");
    let img = img.to_str().unwrap();
    let args = ["--size", "64m", "--bs", "4k", "--read", "70", "--qd", "4"];
    let db = dir.path().join("db.sqlite");
    let db = db.to_str().unwrap();
    let with_db: Vec<&str> = args.iter().copied().chain(["--db", db]).collect();
    let out = compared(&crosscheck(img, &with_db, "1000"));
    assert!(out.contains("4KiB 70% read 100% random, QD 4"), "{out}");
    // Kept in the store as a comparison of sanbench and fio, which `report` renders.
    assert!(out.contains("recorded as run 1 in"), "{out}");
    let rep = dir.path().join("report");
    let o = sanbench()
        .args(["report", "1", "--db", db, "--out"])
        .arg(&rep)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let results = std::fs::read_to_string(rep.join("results.json")).unwrap();
    let cmp: Value = serde_json::from_str(&results).unwrap();
    let cells: Vec<&str> = cmp["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["target"].as_str().unwrap())
        .collect();
    assert_eq!(cells, ["sanbench", "fio"]);
    assert!(cmp["cells"][1]["result"]["iops"].as_f64().unwrap() > 0.0);
    // fio's p99 is of its total latency (`--lat_percentiles=1`), sanbench's span: its clat
    // starts after the submitting call.
    let js = dir.path().join("xc.json");
    let with_json: Vec<&str> = args
        .iter()
        .copied()
        .chain(["--json", js.to_str().unwrap()])
        .collect();
    compared(&crosscheck(img, &with_json, "1000"));
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&js).unwrap()).unwrap();
    assert_eq!(doc["fio"][0]["p99_from"], "lat_ns", "{doc:#}");
    // A 70/30 mix: the joint p99 from fio's histogram (json+), not its per-direction tables.
    assert_eq!(doc["fio"][0]["p99_method"], "histogram", "{doc:#}");
    assert!(doc["sanbench"][0].get("p99_from").is_none(), "{doc:#}");
    // No tolerance: no two measurements are equal, so the check fails with exit 1.
    let o = crosscheck(img, &args, "0");
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("outside the 0 % tolerance"));
}

/// `--repeat auto`: repetitions in pairs until the intervals decide all three ratios. With a
/// tolerance no pair of runs can miss (5000 %: a p99 on a loaded 2-core host once spread over [0.08-12.4] after 12 repetitions), an early look decides, before --max-repeat;
/// --max-repeat 1 leaves no noise estimate and is refused.
#[test]
#[cfg_attr(not(feature = "interop"), ignore = "interop tier: needs fio")]
fn crosscheck_repeats_until_decided() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = shm_dir();
    let img = dir.path().join("t.img");
    let js = dir.path().join("xc.json");
    let run_with = |fio_bin: &str, extra: &[&str]| {
        sanbench()
            .arg("crosscheck")
            .arg(&img)
            .args(["--size", "16m", "--bs", "4k", "--qd", "2", "--time", "0.5s"])
            .args(["--ramp", "0s", "--no-store", "--fio-bin", fio_bin, "--json"])
            .arg(&js)
            .args(["--repeat", "auto"])
            .args(extra)
            .output()
            .unwrap()
    };
    let run = |extra: &[&str]| run_with(fio(), extra);
    let o = run(&["--max-repeat", "12", "--tolerance", "5000"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&js).unwrap()).unwrap();
    // The first look (two repetitions, one degree of freedom) rarely decides even this; a
    // quiet machine decides at the second (four), a busy one (sanbench's IOPS over 2.8x apart
    // between repetitions, in a full suite run) at the third, and one as noisy as a suite
    // run once was (13.8k-31.5k IOPS between repetitions, with the degrees of freedom cut for
    // persistence) at the last: at a look, decided.
    let n = doc["repetitions"].as_u64().unwrap();
    assert!(n.is_multiple_of(2) && (2..=12).contains(&n), "{out}");
    assert_eq!(doc["stop"], "decided", "{out}");
    assert!(
        out.contains(&format!(
            "stopped after {n} repetitions: every ratio decided"
        )),
        "{out}"
    );
    assert_eq!(doc["sanbench"].as_array().unwrap().len() as u64, n);
    // Look k of six spends 2k / (6 x 7) of each ratio's 5 % / 3.
    let alpha = doc["medians"]["iops"]["interval"]["alpha"]
        .as_f64()
        .unwrap();
    let k = (n / 2) as f64;
    assert!(
        (alpha - 0.05 / 3.0 * 2.0 * k / 42.0).abs() < 1e-12,
        "{alpha}"
    );
    // An fio that reports no histogram (json without the +): the p99 comes from its percentile
    // tables, and the crosscheck says so.
    let plain = dir.path().join("fio-json");
    std::fs::write(
        &plain,
        format!(
            "#!/bin/sh\nfor a; do shift; [ \"$a\" = --output-format=json+ ] && a=--output-format=json; \
             set -- \"$@\" \"$a\"; done\nexec {} \"$@\"\n",
            fio()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&plain, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let o = run_with(
        plain.to_str().unwrap(),
        &["--max-repeat", "2", "--tolerance", "1000", "--read", "50"],
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("note: this fio reported no latency histogram"),
        "{out}"
    );
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&js).unwrap()).unwrap();
    assert_eq!(doc["fio"][0]["p99_method"], "percentile tables", "{out}");
    let o = run(&["--max-repeat", "1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--max-repeat must be at least 2"));
    // --budget: a tolerance of 0 never decides; after the first pair (two windows of 0.5 s and
    // the tools' start-up) a second would not fit 2 s, so it stops there and says why.
    let o = run(&["--max-repeat", "10", "--tolerance", "0", "--budget", "2s"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("stopped by --budget after 2 repetitions"),
        "{out}"
    );
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&js).unwrap()).unwrap();
    assert_eq!(
        (doc["repetitions"].as_u64(), doc["stop"].as_str()),
        (Some(2), Some("budget"))
    );
    // Shorter than one pair of windows: refused before any I/O.
    let o = run(&["--budget", "900ms"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("shorter than one pair of repetitions"),
        "{err}"
    );
}

#[test]
#[cfg_attr(not(feature = "interop"), ignore = "interop tier: needs fio")]
fn crosscheck_through_fios_nbd_engine() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let bin = env!("CARGO_BIN_EXE_sanbench");
    let server = Served::start(bin, &["nbd", "--size", "64M", "--listen", "127.0.0.1:0"]);
    let o = crosscheck(
        &server.uri,
        &["--bs", "4k", "--read", "50", "--qd", "4"],
        "15",
    );
    let out = compared(&o);
    assert!(out.contains("nbd://127.0.0.1:"), "{out}");
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
    let run = |extra: &[&str]| {
        sanbench_testkit::ok_json(
            &sanbench()
                .args(["run", "--no-monitor", "--json", "-", "-q"])
                .args(extra)
                .output()
                .unwrap(),
        )
    };
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
