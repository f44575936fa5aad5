//! `sanbench replay` from the outside: a trace replayed on `null:` and `mem:` reproduces its
//! ops, bytes and order (the document's digest against one computed here from the trace);
//! a bad trace is one line naming its line and exit 2; blkparse, blktrace and MSR traces
//! replay (fidelity on a delayed target: replay_fidelity.rs). Interop: fio writes an iolog
//! (`write_iolog`) and sanbench's replay of it issues what fio's own `read_iolog` replay
//! issues.

use std::path::Path;

use assert_cmd::Command;
use sanbench_testkit::fio;
use serde_json::Value;

fn sanbench() -> Command {
    Command::cargo_bin("sanbench").unwrap()
}

/// (op index, offset, length) of every I/O in a v2 or v3 iolog, parsed here independently
/// of crates/trace.
fn ios_of(log: &str) -> Vec<(u8, u64, u64)> {
    let v3 = log.starts_with("fio version 3");
    log.lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let f = if v3 { &f[1..] } else { &f[..] };
            let op = match *f.get(1)? {
                "read" => 0,
                "write" => 1,
                "trim" => 2,
                _ => return None,
            };
            Some((op, f[2].parse().unwrap(), f[3].parse().unwrap()))
        })
        .collect()
}

/// FNV-1a (64) over (op as a byte, offset and length as little-endian u64), as the replay
/// block's `issued_digest` is defined (docs/guide).
fn digest(ios: &[(u8, u64, u64)]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &(op, off, len) in ios {
        let bytes = std::iter::once(op)
            .chain(off.to_le_bytes())
            .chain(len.to_le_bytes());
        for b in bytes {
            h = (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    format!("{h:016x}")
}

fn synthetic(n: u64, gap_us: u64) -> String {
    let mut s = String::from("fio version 3 iolog\n0 /dev/x add\n0 /dev/x open\n");
    for i in 0..n {
        let op = ["read", "write", "read", "trim"][(i % 4) as usize];
        let off = (i * 104_729 % 2000) * 4096;
        let len = 4096 << (i % 3);
        s += &format!("{} /dev/x {op} {off} {len}\n", i * gap_us);
    }
    s
}

fn replay_json(args: &[&str]) -> Value {
    let o = sanbench()
        .arg("replay")
        .args(args)
        .args(["--json", "-", "-q"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

fn check_reproduced(r: &Value, ios: &[(u8, u64, u64)]) {
    let p = &r["replay"];
    for (k, name) in ["read", "write", "trim"].iter().enumerate() {
        let n = ios.iter().filter(|i| i.0 as usize == k).count() as u64;
        let b: u64 = ios.iter().filter(|i| i.0 as usize == k).map(|i| i.2).sum();
        assert_eq!(p["replayed_ops"][name].as_u64(), Some(n), "{name}: {p}");
        assert_eq!(p["replayed_bytes"][name].as_u64(), Some(b), "{name}: {p}");
        assert_eq!(p["trace_ops"][name].as_u64(), Some(n), "{name}: {p}");
    }
    assert_eq!(p["complete"], Value::Bool(true));
    assert_eq!(p["issued_digest"].as_str(), Some(digest(ios).as_str()));
}

#[test]
fn a_replay_on_null_and_mem_reproduces_the_traces_ios_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.iolog");
    let text = synthetic(4000, 20);
    std::fs::write(&trace, &text).unwrap();
    let ios = ios_of(&text);
    for afap in [true, false] {
        let mut args = vec![trace.to_str().unwrap(), "null:", "mem:16M", "--qd", "8"];
        if afap {
            args.push("--afap");
        } else {
            args.extend(["--speed", "4"]);
        }
        let doc = replay_json(&args);
        let results = doc["results"].as_array().unwrap();
        assert_eq!(results.len(), 2);
        for r in results {
            check_reproduced(r, &ios);
            // Every I/O completed inside the window: reads and writes counted as `ios`.
            let rw = ios.iter().filter(|i| i.0 < 2).count() as u64;
            assert_eq!(r["ios"].as_u64(), Some(rw), "{}", r["target"]);
            let mode = r["replay"]["mode"].as_str().unwrap();
            assert_eq!(mode, if afap { "afap" } else { "timed" });
            if !afap {
                // One I/O every 20 µs (50,000 per second) at speed 4: 200,000 asked.
                let asked = r["replay"]["target_iops"].as_f64().unwrap();
                assert!((asked - 200_000.0).abs() < 1.0, "{asked}");
                assert!(r["replay"]["issue_lag_us"]["p99"].as_f64().is_some());
            }
        }
    }
}

#[test]
fn a_bad_trace_is_one_line_naming_its_line_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("bad.csv");
    std::fs::write(
        &trace,
        "128166372003061629,hm,0,Read,0,4096,1\n128166372003061630,hm,0,Erase,0,4096,1\n",
    )
    .unwrap();
    let o = sanbench()
        .args(["replay", trace.to_str().unwrap(), "null:"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("line 2") && err.contains("Erase"), "{err}");
    // Not a trace at all, and a trace past the target's end without --offset-map.
    std::fs::write(&trace, "hello\n").unwrap();
    let o = sanbench()
        .args(["replay", trace.to_str().unwrap(), "null:"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--format"));
    std::fs::write(&trace, synthetic(100, 10)).unwrap();
    let o = sanbench()
        .args(["replay", trace.to_str().unwrap(), "mem:1M", "--afap"])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("--offset-map"));
    // With a map it fits: every I/O still replayed.
    let doc = replay_json(&[
        trace.to_str().unwrap(),
        "mem:1M",
        "--afap",
        "--offset-map",
        "modulo",
    ]);
    let p = &doc["results"][0]["replay"];
    assert_eq!(p["replayed_ops"]["read"].as_u64(), Some(50));
    assert_eq!(p["offset_map"].as_str(), Some("modulo"));
}

#[test]
fn blkparse_blktrace_and_msr_traces_replay() {
    let dir = tempfile::tempdir().unwrap();
    let blk = dir.path().join("t.blkparse");
    std::fs::write(
        &blk,
        "  8,0    3        1     0.000000000   697  Q   W 2048 + 8 [kjournald]\n  \
         8,0    3        2     0.000100000   697  D   W 2048 + 8 [kjournald]\n  \
         8,0    1        3     0.000500000   800  Q  RA 4096 + 16 [cat]\n\
         CPU0 (8,0):\n Reads Queued: 1\n",
    )
    .unwrap();
    let doc = replay_json(&[blk.to_str().unwrap(), "null:"]);
    let p = &doc["results"][0]["replay"];
    assert_eq!(p["format"].as_str(), Some("blkparse"));
    assert_eq!(p["replayed_bytes"]["write"].as_u64(), Some(4096));
    assert_eq!(p["replayed_bytes"]["read"].as_u64(), Some(8192));
    let msr = dir.path().join("t.csv");
    std::fs::write(
        &msr,
        "128166372003061629,hm,0,Read,4096,4096,1\n128166372003071629,hm,0,Write,0,512,1\n",
    )
    .unwrap();
    let doc = replay_json(&[msr.to_str().unwrap(), "null:"]);
    // blktrace's binary records: a queued 8 KiB write, its completion (skipped).
    let bin = dir.path().join("t.blktrace");
    let record = |time: u64, action: u32| {
        let mut v = Vec::new();
        v.extend(0x6561_7407u32.to_le_bytes());
        v.extend(1u32.to_le_bytes());
        v.extend(time.to_le_bytes());
        v.extend(64u64.to_le_bytes());
        v.extend(8192u32.to_le_bytes());
        v.extend(action.to_le_bytes());
        v.extend([0u8; 16]);
        v
    };
    let mut b = record(10, 1 | (0x12 << 16));
    b.extend(record(20, 8 | (0x82 << 16)));
    std::fs::write(&bin, b).unwrap();
    let d = replay_json(&[bin.to_str().unwrap(), "null:"]);
    let p = &d["results"][0]["replay"];
    assert_eq!(p["format"].as_str(), Some("blktrace"));
    assert_eq!(p["replayed_bytes"]["write"].as_u64(), Some(8192));
    assert_eq!(p["replayed_ops"]["read"].as_u64(), Some(0));
    let p = &doc["results"][0]["replay"];
    assert_eq!(p["format"].as_str(), Some("msr"));
    // Two I/Os 1 ms apart.
    assert!((p["trace_seconds"].as_f64().unwrap() - 0.001).abs() < 1e-9);
}

/// Runs fio; fails the test with fio's stderr when fio fails.
fn fio_ok(fio: &mut std::process::Command) {
    let st = fio.output().unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
}

#[test]
#[cfg_attr(not(feature = "interop"), ignore = "interop tier: needs fio")]
fn a_fio_iolog_replays_as_fios_own_read_iolog_does() {
    let dir = tempfile::Builder::new()
        .prefix("sanbench-replay")
        .tempdir_in("/dev/shm")
        .unwrap();
    let file = dir.path().join("data");
    let log = dir.path().join("written.iolog");
    // fio writes the log of a random read/write/trim mix on a file.
    fio_ok(
        std::process::Command::new(fio())
            .args([
                "--name=w",
                "--ioengine=psync",
                "--rw=randrw",
                "--bsrange=4k-64k",
                "--size=8M",
                "--io_size=1G",
                "--number_ios=3000",
                "--randseed=7",
            ])
            .arg(format!("--filename={}", file.display()))
            .arg(format!("--write_iolog={}", log.display())),
    );
    let written = std::fs::read_to_string(&log).unwrap();
    let ios = ios_of(&written);
    assert!(ios.len() >= 3000, "{}", ios.len());
    // fio replays it (read_iolog) and logs what it issued: fio does not write an iolog while
    // it reads one, so its latency log with offsets (one entry per I/O: time, latency,
    // direction, size, offset), in issue order as psync completes each before the next.
    let lat = dir.path().join("fio");
    fio_ok(
        std::process::Command::new(fio())
            .args([
                "--name=r",
                "--ioengine=psync",
                "--replay_no_stall=1",
                "--log_offset=1",
            ])
            .arg(format!("--filename={}", file.display()))
            .arg(format!("--read_iolog={}", log.display()))
            .arg(format!("--write_lat_log={}", lat.display())),
    );
    let lat_log = std::fs::read_to_string(dir.path().join("fio_lat.1.log")).unwrap();
    let fio_ios: Vec<(u8, u64, u64)> = lat_log
        .lines()
        .map(|l| {
            let f: Vec<u64> = l.split(',').map(|x| x.trim().parse().unwrap()).collect();
            (f[2] as u8, f[4], f[3])
        })
        .collect();
    assert_eq!(fio_ios, ios, "fio's own replay issues the log's I/Os");
    // sanbench replays it on the same file, as fast as possible and timed.
    for extra in [&["--afap"][..], &["--speed", "10"][..]] {
        let mut args = vec![log.to_str().unwrap(), file.to_str().unwrap(), "--qd", "1"];
        args.extend_from_slice(extra);
        let doc = replay_json(&args);
        let r = &doc["results"][0];
        check_reproduced(r, &ios);
        // The same I/Os in the same order as fio's own replay.
        assert_eq!(
            r["replay"]["issued_digest"].as_str(),
            Some(digest(&fio_ios).as_str()),
            "fio's replay issued {} I/Os",
            fio_ios.len()
        );
    }
}

/// A timed replay on `serve nbd --delay 1ms` (every reply held 1 ms): with slots to spare
/// the service time is the delay and the replay keeps the trace's rate; at `--qd 1` a trace
/// of two I/Os per millisecond cannot be kept, and the replay says the depth held it.
/// A suite whose second workload replays `trace` (relative to the suite's directory), with
/// `extra` lines in that workload.
fn trace_suite(dir: &Path, trace: &str, extra: &str) -> std::path::PathBuf {
    let suite = dir.join("s.toml");
    std::fs::write(
        &suite,
        format!(
            "name = \"t\"\ntime = \"100ms\"\nramp = \"0s\"\n\n[[workload]]\nid = \"rand\"\n\
             segment = [{{ bs = \"4k\", read = 100, random = 100 }}]\n\n[[workload]]\n\
             id = \"tr\"\ntrace = \"{trace}\"\n{extra}\n"
        ),
    )
    .unwrap();
    suite
}

/// `compare` replays a suite's trace workload on every target, each cell carrying the replay
/// block (what it issued: the trace's ops, bytes and order, by digest), verifies it under
/// `--verify`, and judges its figures as any workload's.
#[test]
fn compare_replays_a_suite_trace_workload_on_every_target() {
    let dir = tempfile::tempdir().unwrap();
    let text = synthetic(2000, 20);
    std::fs::create_dir(dir.path().join("traces")).unwrap();
    std::fs::write(dir.path().join("traces/t.iolog"), &text).unwrap();
    let ios = ios_of(&text);
    let suite = trace_suite(dir.path(), "traces/t.iolog", "afap = true\nqd = 4");
    let out = dir.path().join("out");
    let o = sanbench()
        .current_dir("/")
        .args([
            "compare",
            "--suite",
            suite.to_str().unwrap(),
            "--repeat",
            "3",
        ])
        .args([
            "--no-store",
            "--quiet",
            "--verify",
            "--out",
            out.to_str().unwrap(),
        ])
        // Two stores: mem: targets of one URI are one RAM disk in a process.
        .args(["a=mem:9M", "b=mem:10M"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let doc: Value =
        serde_json::from_slice(&std::fs::read(out.join("results.json")).unwrap()).unwrap();
    let cells = doc["cells"].as_array().unwrap();
    let traced: Vec<&Value> = cells.iter().filter(|c| c["workload"] == "tr").collect();
    assert_eq!(traced.len(), 2 * 3, "{} cells", cells.len());
    for c in &traced {
        let r = &c["result"];
        check_reproduced(r, &ios);
        assert_eq!(r["replay"]["mode"], "afap", "{r}");
        assert_eq!(r["replay"]["qd"], 4);
        assert!(r["replay"]["trace"]
            .as_str()
            .unwrap()
            .ends_with("traces/t.iolog"));
        let rw = ios.iter().filter(|i| i.0 < 2).count() as u64;
        assert_eq!(r["ios"].as_u64(), Some(rw), "{r}");
        assert!(r["iops"].as_f64().unwrap() > 0.0);
        // Verified as a run is: every read of the trace checked, nothing bad.
        let reads = ios.iter().filter(|i| i.0 == 0).count() as u64;
        assert_eq!(
            r["verify"]["reads"].as_u64(),
            Some(reads),
            "{}",
            r["verify"]
        );
        let bad = r["verify"]["bad"].as_object().unwrap();
        assert!(bad.values().all(|x| x == 0), "{}", r["verify"]);
    }
    // The access specification's cells replay nothing.
    assert!(cells
        .iter()
        .filter(|c| c["workload"] == "rand")
        .all(|c| c["result"]["replay"].is_null()));
    // The trace's figures are judged like any workload's: it has questions of its own.
    let qs = doc["questions"].as_array().unwrap();
    assert!(
        qs.iter().any(|q| q["workload"] == "tr"),
        "questions: {}",
        doc["questions"]
    );
}

/// A suite's trace workload with a key it does not take, a key unknown to suites, or a trace
/// that is not there: one line, exit 2, before any I/O (the file target is never made); a
/// trace workload is not expressible as a fio job.
#[test]
fn a_bad_suite_trace_workload_is_one_line_and_exit_2_before_any_io() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("t.iolog"), synthetic(100, 10)).unwrap();
    let img = dir.path().join("x.img");
    let cases = [
        ("t.iolog", "spede = 2.0", "spede"),
        ("t.iolog", "workers = 2", "takes no workers"),
        ("t.iolog", "offset_map = \"sideways\"", "sideways"),
        ("missing.iolog", "", "missing.iolog"),
    ];
    for (trace, extra, says) in cases {
        let suite = trace_suite(dir.path(), trace, extra);
        let o = sanbench()
            .args([
                "compare",
                "--suite",
                suite.to_str().unwrap(),
                "--repeat",
                "1",
            ])
            .args(["--no-store", "--quiet", "--size", "16M"])
            .arg("--out")
            .arg(dir.path().join("out"))
            .arg(&img)
            .arg("null:")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{extra}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains(says), "{says}: {err}");
        assert!(!img.exists(), "{extra}: the target was opened");
    }
    // A trace past the target's end without a map: refused before the precondition writes.
    let suite = trace_suite(dir.path(), "t.iolog", "");
    let o = sanbench()
        .args([
            "compare",
            "--suite",
            suite.to_str().unwrap(),
            "--repeat",
            "1",
        ])
        .args(["--no-store", "--quiet", "--out"])
        .arg(dir.path().join("out"))
        .arg("mem:1M")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("workload tr on mem:1M"), "{err}");
    let o = sanbench()
        .args(["suite", "show", suite.to_str().unwrap(), "--fio"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("not expressible as a fio job"), "{err}");
}

/// `replay --verify`: every replayed write stamped, every read checked, trims known to read
/// zeros or the old data; the trace's ops and order kept (the digest), timed and as fast as
/// possible.
#[test]
fn a_verified_replay_checks_every_read_and_keeps_the_traces_order() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.iolog");
    let text = synthetic(2000, 20);
    std::fs::write(&trace, &text).unwrap();
    let ios = ios_of(&text);
    let reads = ios.iter().filter(|i| i.0 == 0).count() as u64;
    for mode in [&["--afap", "--qd", "8"][..], &["--speed", "4"]] {
        let t = trace.to_str().unwrap();
        let mut args = vec![t, "mem:16M", "--verify"];
        args.extend_from_slice(mode);
        let doc = replay_json(&args);
        // One target: nothing in the arguments was taken for another.
        assert_eq!(doc["results"].as_array().unwrap().len(), 1, "{mode:?}");
        let r = &doc["results"][0];
        check_reproduced(r, &ios);
        let v = &r["verify"];
        assert_eq!(v["reads"].as_u64(), Some(reads), "{mode:?}: {v}");
        assert_eq!(v["unit"], 512, "{v}");
        let bad: u64 = v["bad"]
            .as_object()
            .unwrap()
            .values()
            .map(|x| x.as_u64().unwrap())
            .sum();
        assert_eq!(bad, 0, "{mode:?}: {v}");
    }
}

/// I/Os of a verified replay that overlap one in flight wait for it (counted); the file a
/// verified replay wrote reads back under `verify --run-id`, and a block changed behind its
/// back is caught (exit 3).
#[test]
fn verify_reads_back_what_a_verified_replay_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("o.iolog");
    // Every 4 KiB block of 256 KiB written, then writes and reads over the same blocks.
    let mut text = String::from("fio version 3 iolog\n0 /x add\n0 /x open\n");
    for i in 0..64u64 {
        text += &format!("{i} /x write {} 4096\n", i * 4096);
    }
    for i in 0..100u64 {
        let (op, off, len) = [
            ("write", 0, 4096),
            ("read", 0, 4096),
            ("write", 4096, 8192),
            ("read", 8192, 4096),
        ][(i % 4) as usize];
        text += &format!("{} /x {op} {off} {len}\n", 100 + i);
    }
    std::fs::write(&trace, &text).unwrap();
    let img = dir.path().join("x.img");
    let (t, f) = (trace.to_str().unwrap(), img.to_str().unwrap());
    let doc = replay_json(&[t, f, "--size", "256K", "--afap", "--qd", "8", "--verify"]);
    let r = &doc["results"][0];
    check_reproduced(r, &ios_of(&text));
    assert!(
        r["replay"]["held_by_overlap"].as_u64().unwrap() >= 1,
        "{}",
        r["replay"]
    );
    assert_eq!(r["verify"]["reads"], 50, "{}", r["verify"]);
    let run_id = doc["run_id"].as_str().unwrap();
    let verify = |id: &str| {
        sanbench()
            .args(["verify", f, "--run-id", id, "--quiet"])
            .output()
            .unwrap()
    };
    let o = verify(run_id);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Another run's id: the replay's data is not that run's.
    assert_eq!(verify("0123456789abcdef").status.code(), Some(3));
    let mut bytes = std::fs::read(&img).unwrap();
    bytes[16 * 4096..17 * 4096].fill(0xab);
    std::fs::write(&img, &bytes).unwrap();
    let o = verify(run_id);
    assert_eq!(
        o.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}
