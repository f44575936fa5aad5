//! Trims and write-zeroes in the access specification, end to end: a 70/20/10
//! read/write/trim mix against the `mem:` RAM disk and against the built-in NBD server counts
//! each op apart (trims in neither IOPS nor MB/s of the reads and writes) and gives space
//! back (the target reports more of its span unwritten after the window, and the server's
//! store holds less). A target without the op is refused before any I/O: tests/iscsi_trim.rs
//! (tgtd without thin provisioning).

use std::process::Command;

use sanbench_testkit::{ok_json, wait_port, Peer, Served};
use serde_json::Value;

mod trim_support;
use trim_support::{allocated, trims_only_at_qd_32};

fn bin() -> std::path::PathBuf {
    assert_cmd::cargo::cargo_bin("sanbench")
}

/// A 70/20/10 read/write/trim mix of 64 KiB random I/Os (whole chunks of the built-in
/// servers' store, so a trim can free one) on `target`, with `extra` flags.
fn mix(target: &str, extra: &[&str]) -> std::process::Output {
    Command::new(bin())
        .args(["run", target, "--bs", "64k", "--read", "70", "--trim", "10"])
        .args([
            "--random", "100", "--qd", "4", "--time", "500ms", "--ramp", "0",
        ])
        .args(extra)
        .args(["--no-monitor", "--quiet", "--json", "-"])
        .output()
        .unwrap()
}

/// Checks the per-op counts of one result: every op ran in about its share (wide margins:
/// a few thousand I/Os on a loaded VM), trims apart from the reads' and writes' figures.
fn check_counts(r: &Value) {
    let n = |v: &Value| v["ios"].as_u64().unwrap_or(0);
    let (reads, writes, trims) = (n(&r["read"]), n(&r["write"]), n(&r["trim"]));
    let all = reads + writes + trims;
    assert!(all >= 200, "too few I/Os to judge: {r}");
    let share = |x: u64| 100.0 * x as f64 / all as f64;
    assert!(
        (60.0..80.0).contains(&share(reads)),
        "reads {}",
        share(reads)
    );
    assert!(
        (12.0..28.0).contains(&share(writes)),
        "writes {}",
        share(writes)
    );
    assert!(
        (4.0..16.0).contains(&share(trims)),
        "trims {}",
        share(trims)
    );
    // Trims are counted apart: the target's I/Os and bytes are the reads' and writes'.
    assert_eq!(r["ios"].as_u64().unwrap(), reads + writes, "{r}");
    assert_eq!(r["trim"]["bytes"].as_u64().unwrap(), trims * 65536);
    assert!(r["trim"]["latency_us"]["p50"].as_f64().unwrap() > 0.0);
    let h =
        sanbench_stats::LatencyHistogram::from_hdr_base64(r["trim_histogram"].as_str().unwrap())
            .unwrap();
    assert_eq!(h.count(), trims);
    assert!(r.get("write_zeroes").is_none(), "none asked: {r}");
}

#[test]
fn mem_mix_counts_each_op_and_gives_pages_back() {
    let doc = ok_json(&mix("mem:32M", &[]));
    let r = &doc["results"][0];
    check_counts(r);
    let after = &r["allocation_after"];
    assert_eq!(after["method"], "smaps Anonymous", "{after}");
    // Before the window the RAM disk is touched whole (populated, or filled by the
    // precondition); trims of 64 KiB give whole pages back.
    let before = r["precondition"]["allocation"]["unwritten_bytes"]
        .as_u64()
        .unwrap_or(0);
    let unwritten = after["unwritten_bytes"].as_u64().unwrap();
    assert!(
        unwritten > before,
        "before {before}, after {unwritten}: {after}"
    );
    assert_eq!(doc["spec"]["segments"][0]["trim_pct"], 10.0);
}

#[test]
fn write_zeroes_on_mem_counts_apart() {
    let out = Command::new(bin())
        .args(["run", "mem:16M", "--bs", "4k", "--read", "50"])
        .args(["--write-zeroes", "25", "--time", "300ms", "--ramp", "0"])
        .args(["--no-monitor", "--quiet", "--json", "-"])
        .output()
        .unwrap();
    let doc = ok_json(&out);
    let r = &doc["results"][0];
    let z = r["write_zeroes"]["ios"].as_u64().unwrap();
    let all = r["ios"].as_u64().unwrap() + z;
    let share = 100.0 * z as f64 / all as f64;
    assert!(
        (15.0..35.0).contains(&share),
        "write-zeroes {share} % of {all}"
    );
    assert!(r.get("trim").is_none());
}

/// 300 ms of 1 MiB sequential writes on `uri`: every chunk of a small store allocated.
fn fill(uri: &str) {
    let fill = Command::new(bin())
        .args(["run", uri, "--read", "0", "--random", "0", "--bs", "1M"])
        .args(["--time", "300ms", "--ramp", "0", "--no-monitor", "--quiet"])
        .output()
        .unwrap();
    assert!(
        fill.status.success(),
        "{}",
        String::from_utf8_lossy(&fill.stderr)
    );
}

#[test]
fn nbd_server_mix_counts_each_op_and_frees_chunks() {
    let size = 8u64 << 20;
    let server = Served::start(bin(), &["nbd", "--size", "8M", "--listen", "127.0.0.1:0"]);
    let uri = format!("nbd://{}", server.addr());
    // Fill the store first, so that every chunk is allocated before the mix.
    fill(&uri);
    let doc = ok_json(&mix(&uri, &["--precondition", "none"]));
    let r = &doc["results"][0];
    check_counts(r);
    let after = &r["allocation_after"];
    assert_eq!(after["method"], "NBD base:allocation", "{after}");
    assert!(after["unwritten_bytes"].as_u64().unwrap() > 0, "{after}");
    let held = allocated(&server.interrupt());
    assert!(held < size, "the store still holds {held} of {size} bytes");
    // What the server holds and what it reported to the client agree.
    assert_eq!(held, size - after["unwritten_bytes"].as_u64().unwrap());
}

#[test]
fn nbd_server_offers_fast_zero_and_takes_write_zeroes() {
    let server = Served::start(bin(), &["nbd", "--size", "4M", "--listen", "127.0.0.1:0"]);
    let uri = format!("nbd://{}", server.addr());
    let out = Command::new(bin())
        .args([
            "run",
            &uri,
            "--bs",
            "64k",
            "--read",
            "0",
            "--write-zeroes",
            "50",
        ])
        .args(["--time", "300ms", "--ramp", "0", "--precondition", "none"])
        .args(["--no-monitor", "--quiet", "--json", "-"])
        .output()
        .unwrap();
    let doc = ok_json(&out);
    let r = &doc["results"][0];
    let flags = r["info"]["params"]["transmission_flags"].to_string();
    assert!(flags.contains("SEND_FAST_ZERO"), "{flags}");
    let (z, w) = (
        r["write_zeroes"]["ios"].as_u64().unwrap(),
        r["write"]["ios"].as_u64().unwrap(),
    );
    assert!(z > 0 && w > 0, "{r}");
    assert_eq!(r["write_zeroes"]["bytes"].as_u64().unwrap(), z * 65536);
    server.interrupt();
}

#[test]
fn nvme_server_takes_deallocates_and_write_zeroes() {
    let size = 8u64 << 20;
    let server = Served::start(bin(), &["nvme", "--size", "8M", "--listen", "127.0.0.1:0"]);
    let doc = ok_json(&mix(&server.uri, &["--write-zeroes", "5"]));
    let r = &doc["results"][0];
    let n = |k: &str| r[k]["ios"].as_u64().unwrap_or(0);
    assert!(n("trim") > 0 && n("write_zeroes") > 0, "{r}");
    assert_eq!(r["ios"].as_u64().unwrap(), n("read") + n("write"));
    // The precondition filled the namespace; deallocated 64 KiB ranges are whole chunks of
    // the store, and write-zeroes without a "keep" flag may free them too.
    let held = allocated(&server.interrupt());
    assert!(held < size, "the store still holds {held} of {size} bytes");
}

#[test]
fn nvme_trims_of_one_batch_share_a_dataset_management_command() {
    let server = Served::start(bin(), &["nvme", "--size", "8M", "--listen", "127.0.0.1:0"]);
    let doc = trims_only_at_qd_32(&server.uri);
    let r = &doc["results"][0];
    let trims = r["trim"]["ios"].as_u64().unwrap_or(0);
    assert!(trims > 100, "{r}");
    let dsms: u64 = r["queues"]
        .as_array()
        .expect("per-queue facts")
        .iter()
        .map(|q| q["dsm_commands"].as_u64().expect("dsm_commands"))
        .sum();
    assert!(
        dsms < trims,
        "{dsms} DSM commands for {trims} trims: none carried more than one range"
    );
    let p = &r["info"]["params"];
    assert_eq!(p["trim_reads_zeros"], true, "{p}");
    assert_eq!(p["write_zeroes_deac"], true, "{p}");
    server.interrupt();
}

#[test]
fn shares_beyond_100_percent_are_refused() {
    let out = Command::new(bin())
        .args([
            "run",
            "null:",
            "--read",
            "80",
            "--trim",
            "15",
            "--write-zeroes",
            "10",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("more than 100"), "{err}");
}

#[test]
#[cfg_attr(not(feature = "interop"), ignore = "interop tier: needs nbdkit")]
fn nbdkit_memory_takes_trims_and_write_zeroes() {
    sanbench_testkit::require("nbdkit", "nbdkit");
    let port = sanbench_testkit::free_port();
    let _server = Peer(
        Command::new("nbdkit")
            .args(["-f", "-i", "127.0.0.1", "-p", &port.to_string()])
            .args(["memory", "16M"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_port(port);
    let uri = format!("nbd://127.0.0.1:{port}");
    // Filled first (auto only checks someone else's export), so every trim has something to
    // give back.
    let doc = ok_json(&mix(
        &uri,
        &["--write-zeroes", "5", "--precondition", "fill"],
    ));
    let r = &doc["results"][0];
    let n = |k: &str| r[k]["ios"].as_u64().unwrap_or(0);
    assert!(n("trim") > 0 && n("write_zeroes") > 0, "{r}");
    assert_eq!(r["ios"].as_u64().unwrap(), n("read") + n("write"));
    assert_eq!(r["precondition"]["state"], "preconditioned", "{r}");
    let flags = r["info"]["params"]["transmission_flags"].to_string();
    assert!(flags.contains("SEND_WRITE_ZEROES"), "{flags}");
    let after = &r["allocation_after"];
    assert_eq!(after["method"], "NBD base:allocation", "{after}");
    assert!(after["unwritten_bytes"].as_u64().unwrap() > 0, "{after}");
}

/// A trim-only workload against the built-in NBD server: the fio job sanbench writes for
/// it trims under the real fio (its nbd engine; fio 3.33 fails trims on a regular file), and
/// both give the store's chunks back.
#[test]
#[cfg_attr(not(feature = "interop"), ignore = "interop tier: needs fio")]
fn fio_runs_the_trim_job_sanbench_writes() {
    sanbench_testkit::require("fio", "fio");
    let size = 16u64 << 20;
    let server = Served::start(bin(), &["nbd", "--size", "16M", "--listen", "127.0.0.1:0"]);
    let uri = format!("nbd://{}", server.addr());
    fill(&uri);
    let dir = tempfile::tempdir().unwrap();
    let job = dir.path().join("t.fio");
    let out = Command::new(bin())
        .args([
            "run", &uri, "--bs", "64k", "--trim", "100", "--time", "300ms",
        ])
        .args(["--ramp", "0", "--qd", "4", "--precondition", "none"])
        .args(["--no-monitor", "--quiet", "--json", "-", "--emit-fio"])
        .arg(&job)
        .output()
        .unwrap();
    let doc = ok_json(&out);
    let r = &doc["results"][0];
    assert!(r["trim"]["ios"].as_u64().unwrap() > 0, "{r}");
    assert_eq!(r["ios"], 0, "no reads or writes: {r}");
    let text = std::fs::read_to_string(&job).unwrap();
    assert!(text.contains("\nrw=randtrim\n"), "{text}");
    let o = Command::new("fio")
        .arg("--output-format=json")
        .arg(&job)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // fio's nbd engine says "connected" on stdout before the document.
    let text = String::from_utf8_lossy(&o.stdout);
    let j: Value = serde_json::from_str(&text[text.find('{').unwrap()..]).unwrap();
    let t = &j["jobs"][0];
    assert_eq!(t["error"], 0, "{t}");
    assert!(t["trim"]["total_ios"].as_u64().unwrap() > 0, "{t}");
    assert_eq!(t["read"]["total_ios"], 0);
    assert_eq!(t["write"]["total_ios"], 0);
    let held = allocated(&server.interrupt());
    assert!(held < size, "the store still holds {held} of {size} bytes");
}

/// A file (on /var/tmp's disk file system, which has both fallocate modes): trims punch holes
/// that SEEK_DATA sees after the window, and write-zeroes run, over io_uring and the sync
/// threads alike.
#[test]
fn a_file_takes_trims_and_write_zeroes_by_fallocate() {
    for engine in ["io_uring", "sync"] {
        let dir = tempfile::tempdir_in("/var/tmp").unwrap();
        let img = dir.path().join("t.img");
        let out = Command::new(bin())
            .args(["run", img.to_str().unwrap(), "--size", "16m", "--bs", "64k"])
            .args(["--read", "50", "--trim", "25", "--write-zeroes", "25"])
            .args(["--engine", engine, "--time", "300ms", "--ramp", "0"])
            .args(["--no-monitor", "--quiet", "--json", "-"])
            .output()
            .unwrap();
        let doc = ok_json(&out);
        let r = &doc["results"][0];
        let n = |k: &str| r[k]["ios"].as_u64().unwrap_or(0);
        assert!(n("trim") > 0 && n("write_zeroes") > 0, "{engine}: {r}");
        assert_eq!(
            r["ios"].as_u64().unwrap(),
            n("read"),
            "{engine}: no data writes"
        );
        let p = r["info"]["params"]["discard"].as_str().unwrap_or("");
        assert!(p.contains("PUNCH_HOLE"), "{engine}: {p}");
        let after = &r["allocation_after"];
        assert_eq!(after["method"], "SEEK_DATA", "{engine}: {after}");
        assert!(
            after["unwritten_bytes"].as_u64().unwrap() > 0,
            "{engine}: {after}"
        );
    }
}

/// A loop device over a sparse file in /dev/shm, detached on drop: a block device whose
/// discards punch holes in the file, so the space a trim gave back can be read (st_blocks).
struct Loop {
    dev: String,
    img: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Loop {
    fn new(size: u64) -> Loop {
        let dir = tempfile::tempdir_in("/dev/shm").unwrap();
        let img = dir.path().join("loop.img");
        std::fs::File::create(&img).unwrap().set_len(size).unwrap();
        let out = Command::new("losetup")
            .args(["-f", "--show"])
            .arg(&img)
            .output()
            .expect("losetup (util-linux) runs");
        assert!(
            out.status.success(),
            "losetup: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let dev = String::from_utf8(out.stdout).unwrap().trim().to_string();
        Loop {
            dev,
            img,
            _dir: dir,
        }
    }

    fn allocated(&self) -> u64 {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(&self.img).unwrap().blocks() * 512
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = Command::new("losetup").args(["-d", &self.dev]).status();
    }
}

/// Whether this kernel has io_uring's block discard (Linux 6.12).
fn kernel_at_least(major: u32, minor: u32) -> bool {
    let r = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let mut v = r
        .split(|c: char| !c.is_ascii_digit())
        .map(|x| x.parse::<u32>().unwrap_or(0));
    (v.next().unwrap_or(0), v.next().unwrap_or(0)) >= (major, minor)
}

/// A trim on a block device is a discard, not a punched hole (a zero-out): on io_uring as
/// its block discard command where the kernel has it, else, and on the sync engine's threads,
/// by BLKDISCARD. The loop device passes each discard to its file, so the space comes back;
/// a verified mix passes (a discarded block may read its old data or zeros).
#[test]
#[cfg_attr(
    not(feature = "interop"),
    ignore = "interop tier: needs a loop device (root)"
)]
fn a_block_device_takes_trims_as_discards() {
    // One device for both engines: a loop device just detached can still be busy when the
    // next `losetup -f` hands it out again.
    let lo = Loop::new(16 << 20);
    for engine in ["io_uring", "sync"] {
        let run = |args: &[&str]| {
            let out = Command::new(bin())
                .args([
                    "run", &lo.dev, "--engine", engine, "--bs", "64k", "--qd", "4",
                ])
                .args(args)
                .args(["--ramp", "0", "--no-monitor", "--quiet", "--json", "-"])
                .output()
                .unwrap();
            ok_json(&out)
        };
        // Filled, then trimmed in a pass of sequential 64 KiB trims over the whole span.
        run(&["--precondition", "fill", "--read", "100", "--time", "100ms"]);
        let full = lo.allocated();
        assert!(
            full >= 15 << 20,
            "{engine}: the fill allocated {full} bytes"
        );
        let doc = run(&[
            "--read", "0", "--trim", "100", "--random", "0", "--time", "1s",
        ]);
        let r = &doc["results"][0];
        assert!(
            r["trim"]["bytes"].as_u64().unwrap() >= 16 << 20,
            "{engine}: {r}"
        );
        let after = lo.allocated();
        assert!(
            after <= 1 << 20,
            "{engine}: {after} bytes still allocated after the trims"
        );
        let p = r["info"]["params"]["discard"].as_str().unwrap_or("");
        let want = if engine == "io_uring" && kernel_at_least(6, 12) {
            "BLOCK_URING_CMD_DISCARD"
        } else {
            "BLKDISCARD"
        };
        assert!(p.contains(want), "{engine}: {p}");
        // A verified mix: every read holds what was last written, zeros, or (after a
        // discard) either.
        let doc = run(&[
            "--precondition",
            "fill",
            "--read",
            "40",
            "--trim",
            "10",
            "--write-zeroes",
            "10",
            "--time",
            "500ms",
            "--verify",
        ]);
        let r = &doc["results"][0];
        assert!(r["trim"]["ios"].as_u64().unwrap() > 0, "{engine}: {r}");
    }
}
