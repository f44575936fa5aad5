//! A replay's memory is flat whatever the trace's length (issue 42: fio #25, large traces
//! run out of memory): a trace of two million I/Os, generated here, peaks at the same
//! resident size as one ten times shorter, far below what holding the longer trace would
//! cost. (docs/BENCHMARKS.md has a 10 GiB trace replayed from a FIFO.)

use std::io::Write;
use std::path::Path;

use assert_cmd::Command;
use serde_json::Value;

/// Writes a fio v3 iolog of `n` I/Os to `path` and returns its size in bytes: reads,
/// writes and trims of 4-16 KiB across 1 GiB, one per µs.
fn generate(path: &Path, n: u64) -> u64 {
    let f = std::fs::File::create(path).unwrap();
    let mut w = std::io::BufWriter::with_capacity(1 << 20, f);
    w.write_all(b"fio version 3 iolog\n0 /dev/x add\n").unwrap();
    for i in 0..n {
        let op = ["read", "write", "read", "trim"][(i % 4) as usize];
        let off = (i.wrapping_mul(2_654_435_761) % 262_144) * 4096;
        writeln!(w, "{i} /dev/x {op} {off} {}", 4096 << (i % 3)).unwrap();
    }
    w.flush().unwrap();
    std::fs::metadata(path).unwrap().len()
}

/// Replays `n` generated I/Os as fast as possible on `null:`; the document and the trace's
/// size in bytes.
fn replay_generated(dir: &Path, n: u64) -> (Value, u64) {
    let trace = dir.join(format!("trace-{n}.iolog"));
    let bytes = generate(&trace, n);
    let out = Command::cargo_bin("sanbench")
        .unwrap()
        .args(["replay", trace.to_str().unwrap(), "null:", "--afap"])
        .args(["--qd", "16", "--json", "-", "-q"])
        .timeout(std::time::Duration::from_secs(300))
        .output()
        .unwrap();
    std::fs::remove_file(&trace).unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (serde_json::from_slice(&out.stdout).unwrap(), bytes)
}

#[test]
fn memory_is_flat_for_a_trace_ten_times_longer() {
    let dir = tempfile::tempdir().unwrap();
    let (short_n, long_n) = (200_000, 2_000_000);
    let (short, short_bytes) = replay_generated(dir.path(), short_n);
    let (long, long_bytes) = replay_generated(dir.path(), long_n);
    for (doc, n) in [(&short, short_n), (&long, long_n)] {
        let p = &doc["results"][0]["replay"];
        assert_eq!(p["complete"], Value::Bool(true), "{p}");
        assert_eq!(p["replayed_ops"]["read"].as_u64(), Some(n / 2), "{p}");
        assert_eq!(p["trace_ops"]["trim"].as_u64(), Some(n / 4), "{p}");
    }
    let rss = |d: &Value| d["peak_rss_bytes"].as_u64().unwrap();
    let (short_rss, long_rss) = (rss(&short), rss(&long));
    assert!(short_rss > 0);
    // Holding the longer trace's extra records, even in an eighth of the bytes of their
    // text (4 or 5 bytes each), would add this much: the replay may add less (allocator
    // noise).
    let extra = (long_bytes - short_bytes) / 8;
    assert!(extra > 6 << 20, "{long_bytes} {short_bytes}");
    assert!(
        long_rss < short_rss + extra,
        "peak RSS {long_rss} B for {long_n} I/Os ({long_bytes} B of trace) against {short_rss} B for {short_n} ({short_bytes} B)"
    );
}
