//! The page cache between runs, seen with util-linux's fincore: by default every run starts with
//! its span dropped from the cache (fio's invalidate=1), so a read workload measures storage;
//! `--no-invalidate` keeps it. The file lives on a disk filesystem (tmpfs pages cannot be
//! dropped).

use std::path::Path;
use std::process::Command as Proc;

use assert_cmd::Command;
use serde_json::Value;

const LEN: u64 = 64 << 20;
const PAGES: u64 = LEN / 4096;

/// Pages of `path` in the page cache, as fincore counts them.
fn resident_pages(path: &Path) -> u64 {
    let out = Proc::new("fincore")
        .args(["--noheadings", "--raw", "--output", "PAGES"])
        .arg(path)
        .output()
        .expect("fincore (util-linux) must be installed");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

/// A short QD 1 random 4 KiB read run: it touches far fewer pages than the file has.
fn read_run(path: &Path, extra: &[&str]) -> Value {
    let out = Command::cargo_bin("sanbench")
        .unwrap()
        .arg("run")
        .arg(path)
        .args([
            "--read", "100", "--random", "100", "--bs", "4k", "--qd", "1",
        ])
        .args([
            "--workers",
            "1",
            "--ramp",
            "0",
            "--time",
            "200ms",
            "--no-monitor",
        ])
        .args(["--quiet", "--json", "-"])
        .args(extra)
        .output()
        .unwrap();
    sanbench_testkit::ok_json(&out)
}

#[test]
fn each_run_starts_with_the_span_out_of_the_page_cache() {
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let path = dir.path().join("warm.img");
    std::fs::write(&path, vec![0x5au8; LEN as usize]).unwrap();
    std::fs::read(&path).unwrap();
    assert_eq!(resident_pages(&path), PAGES, "read it: all resident");

    let kept = read_run(&path, &["--no-invalidate"]);
    let r = &kept["results"][0];
    assert_eq!(
        r["info"]["params"]["page_cache"],
        "page cache kept (--no-invalidate)"
    );
    assert_eq!(resident_pages(&path), PAGES);

    let dropped = read_run(&path, &[]);
    let r = &dropped["results"][0];
    assert_eq!(
        r["info"]["params"]["page_cache"],
        "page cache dropped for the span (posix_fadvise DONTNEED)"
    );
    // What is resident now is what this run read back in (with some readahead), not the file.
    let ios = r["read"]["ios"].as_u64().unwrap();
    let resident = resident_pages(&path);
    assert!(
        resident < PAGES && resident <= ios + 1024,
        "{resident} of {PAGES} pages resident after a run of {ios} reads"
    );
}

#[test]
fn direct_runs_say_nothing_about_the_cache() {
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let path = dir.path().join("direct.img");
    std::fs::write(&path, vec![1u8; 1 << 20]).unwrap();
    let doc = read_run(&path, &["--direct"]);
    let p = &doc["results"][0]["info"]["params"];
    assert!(p.get("page_cache").is_none(), "{p}");
    assert!(p["alignment"].as_u64().unwrap() >= 512, "{p}");
}

#[test]
fn compare_drops_the_cache_before_every_cell_unless_kept() {
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let path = dir.path().join("cmp.img");
    std::fs::write(&path, vec![2u8; 8 << 20]).unwrap();
    for (flag, want) in [
        (
            None,
            "page cache dropped for the span (posix_fadvise DONTNEED)",
        ),
        (Some("--no-invalidate"), "page cache kept (--no-invalidate)"),
    ] {
        let out_dir = dir.path().join("report");
        let mut c = Command::cargo_bin("sanbench").unwrap();
        c.args(["compare", "--repeat", "1"])
            .arg(&path)
            .args(["--suite", "quick", "--time", "200ms", "--ramp", "0"])
            .args(["--no-monitor", "--no-store", "--quiet", "--out"])
            .arg(&out_dir)
            .args(flag);
        let out = c.output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut doc: Value =
            serde_json::from_slice(&std::fs::read(out_dir.join("results.json")).unwrap()).unwrap();
        // Each cell whole, as readers load it (version 3: `targets[].shared`).
        sanbench_doc::shared::expand(&mut doc);
        let cells = doc["cells"].as_array().unwrap();
        assert!(cells.len() > 1);
        for cell in cells {
            assert_eq!(
                cell["result"]["info"]["params"]["page_cache"], want,
                "{flag:?}"
            );
        }
    }
}
