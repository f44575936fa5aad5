//! Results written before the result document had a crate of its own (main at 9a6bb39:
//! crates/doc/tests/fixtures/v1, never regenerated) still render (`report FILE`, `report ID`)
//! and diff against a comparison run now.

use std::io::Read;
use std::path::{Path, PathBuf};

use assert_cmd::Command;

fn sanbench() -> Command {
    Command::cargo_bin("sanbench").unwrap()
}

/// The fixture `name`, gunzipped into `dir`.
fn unpack(name: &str, dir: &Path) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../doc/tests/fixtures/v1")
        .join(format!("{name}.gz"));
    let mut bytes = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&src).unwrap())
        .read_to_end(&mut bytes)
        .unwrap();
    let out = dir.join(name);
    std::fs::write(&out, bytes).unwrap();
    out
}

#[test]
fn old_result_files_render() {
    let tmp = tempfile::tempdir().unwrap();
    for (name, target) in [
        ("run-verify.json", "null:"),
        ("run-open.json", "mem:64M"),
        ("run-multipath.json", "nbd://127.0.0.1"),
        ("compare-results.json", "mem:256M"),
    ] {
        let file = unpack(name, tmp.path());
        let out = tmp.path().join(format!("report-{name}"));
        let o = sanbench()
            .arg("report")
            .arg(&file)
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let html = std::fs::read_to_string(out.join("report.html")).unwrap();
        assert!(html.contains("<html"), "{name}");
        let md = std::fs::read_to_string(out.join("report.md")).unwrap();
        assert!(
            md.contains(target),
            "{name}: {target} is named in report.md"
        );
    }
}

#[test]
fn an_old_stored_run_renders_and_diffs_against_a_new_one() {
    let tmp = tempfile::tempdir().unwrap();
    let db = unpack("store.db", tmp.path());
    let o = sanbench()
        .args(["report", "1", "--db"])
        .arg(&db)
        .arg("--out")
        .arg(tmp.path().join("old"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // The same two names as the stored comparison (its nbd target was a sanbench NBD server
    // over RAM; here both are in-process RAM disks: the diff compares by name).
    let o = sanbench()
        .args([
            "compare", "--suite", "quick", "--repeat", "1", "--time", "300ms",
        ])
        .args(["--ramp", "0", "--db"])
        .arg(&db)
        .arg("--out")
        .arg(tmp.path().join("new"))
        .args(["ram=mem:256M", "nbd=mem:256M"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = sanbench()
        .args(["diff", "1", "2", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("seq-read-1m"), "{text}");
}
