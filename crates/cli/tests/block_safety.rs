//! The refusal to destroy data, on real loop devices (needs root, as CI has): a device holding a
//! filesystem, a partition table, or mounted, is not written without --force; one that is
//! mounted is not written even with it (O_EXCL). And O_DIRECT alignment from the device.

use std::path::{Path, PathBuf};
use std::process::Command as Proc;

use assert_cmd::Command;

struct Loop {
    dev: String,
    _dir: tempfile::TempDir,
    mnt: Option<PathBuf>,
}

impl Loop {
    fn new(prepare: impl FnOnce(&Path)) -> Loop {
        Loop::with(&[], prepare)
    }

    /// A loop device over a fresh 32 MiB image, with extra losetup arguments.
    fn with(losetup_args: &[&str], prepare: impl FnOnce(&Path)) -> Loop {
        let dir = tempfile::tempdir_in("/var/tmp").unwrap();
        let img = dir.path().join("disk.img");
        std::fs::write(&img, vec![0u8; 32 << 20]).unwrap();
        prepare(&img);
        let out = Proc::new("losetup")
            .args(["-f", "--show"])
            .args(losetup_args)
            .arg(&img)
            .output()
            .expect("losetup (util-linux) must be installed");
        assert!(
            out.status.success(),
            "losetup failed (these tests need root): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Loop {
            dev: String::from_utf8(out.stdout).unwrap().trim().to_string(),
            _dir: dir,
            mnt: None,
        }
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        if let Some(m) = &self.mnt {
            let _ = Proc::new("umount").arg(m).status();
        }
        let _ = Proc::new("losetup").args(["-d", &self.dev]).status();
    }
}

fn write_run(dev: &str, force: bool) -> std::process::Output {
    let mut c = Command::cargo_bin("sanbench").unwrap();
    c.args([
        "run", dev, "--read", "0", "--bs", "4k", "--time", "300ms", "--quiet",
    ]);
    if force {
        c.arg("--force");
    }
    c.output().unwrap()
}

fn assert_refused(dev: &str, why: &str) {
    let out = write_run(dev, false);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("refusing to write"), "{err}");
    assert!(err.contains(why), "{err}");
    assert!(err.contains("--force"), "{err}");
}

fn mkfs(img: &Path) {
    let ok = Proc::new("mkfs.ext4")
        .args(["-q", "-F"])
        .arg(img)
        .status()
        .expect("mkfs.ext4 (e2fsprogs) must be installed");
    assert!(ok.success());
}

#[test]
fn refuses_a_filesystem_unless_forced() {
    let l = Loop::new(mkfs);
    assert_refused(&l.dev, "ext2/3/4 filesystem");
    // Reading is always allowed.
    let mut c = Command::cargo_bin("sanbench").unwrap();
    c.args(["run", &l.dev, "--time", "300ms", "--quiet"])
        .assert()
        .success();
    let out = write_run(&l.dev, true);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn refuses_a_partition_table() {
    let l = Loop::new(|img| {
        // A GPT header signature at LBA 1.
        let mut data = std::fs::read(img).unwrap();
        data[512..520].copy_from_slice(b"EFI PART");
        std::fs::write(img, data).unwrap();
    });
    assert_refused(&l.dev, "partition table");
}

#[test]
fn refuses_a_mounted_device() {
    let mut l = Loop::new(mkfs);
    let mnt = tempfile::tempdir().unwrap().keep();
    let ok = Proc::new("mount").arg(&l.dev).arg(&mnt).status().unwrap();
    assert!(ok.success(), "mount failed");
    l.mnt = Some(mnt.clone());
    assert_refused(&l.dev, &format!("mounted at {}", mnt.display()));
}

#[test]
fn writes_to_a_blank_device_with_o_direct() {
    let l = Loop::new(|_| {});
    let out = Command::cargo_bin("sanbench")
        .unwrap()
        .args([
            "run", &l.dev, "--read", "50", "--time", "500ms", "--quiet", "--json", "-",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let info = &doc["results"][0]["info"];
    assert_eq!(info["params"]["kind"], "block device");
    assert_eq!(info["params"]["direct"], true);
    assert_eq!(info["size"], 32 << 20);
}

#[test]
fn the_kernel_refuses_a_mounted_device_even_when_forced() {
    let mut l = Loop::new(mkfs);
    let mnt = tempfile::tempdir().unwrap().keep();
    let ok = Proc::new("mount").arg(&l.dev).arg(&mnt).status().unwrap();
    assert!(ok.success(), "mount failed");
    l.mnt = Some(mnt);
    // --force skips sanbench's own checks; the exclusive open still fails with EBUSY.
    let out = write_run(&l.dev, true);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!("refusing to write to {}", l.dev)),
        "{err}"
    );
    assert!(err.contains("busy") && err.contains("O_EXCL"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
}

fn run_doc(args: &[&str]) -> serde_json::Value {
    let out = Command::cargo_bin("sanbench")
        .unwrap()
        .args([
            "run",
            "--time",
            "300ms",
            "--quiet",
            "--no-monitor",
            "--json",
            "-",
        ])
        .args(args)
        .output()
        .unwrap();
    sanbench_testkit::ok_json(&out)
}

#[test]
fn direct_io_aligns_to_the_device_block() {
    let l = Loop::with(&["--sector-size", "4096"], |_| {});
    let doc = run_doc(&[&l.dev, "--read", "50", "--bs", "4k"]);
    let info = &doc["results"][0]["info"];
    assert_eq!(info["block_size"], 4096);
    assert_eq!(info["params"]["alignment"], 4096);
    let src = info["params"]["alignment_source"].as_str().unwrap();
    // A loop device's physical block is its logical one.
    assert!(src.starts_with("BLKSSZGET"), "{src}");
    assert_eq!(info["params"]["exclusive"], true);
    // Below the logical block, O_DIRECT would fail mid-run: refused before it starts.
    let out = Command::cargo_bin("sanbench")
        .unwrap()
        .args(["run", &l.dev, "--bs", "512", "--time", "300ms", "--quiet"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("block size"), "{err}");
    // Buffered: the page cache takes any alignment, and a read-only open is not exclusive.
    let doc = run_doc(&[&l.dev, "--buffered", "--bs", "512"]);
    let info = &doc["results"][0]["info"];
    assert_eq!(info["block_size"], 1);
    assert_eq!(info["params"]["exclusive"], false);
    assert_eq!(
        info["params"]["page_cache"],
        "page cache dropped for the span (posix_fadvise DONTNEED)"
    );
}

#[test]
fn one_device_as_several_targets_shares_the_exclusive_open() {
    // Suites drive one device as several targets at once (`targets = [4, 8]`): the kernel
    // refuses a second exclusive open, so the targets share the process's one.
    let l = Loop::new(|_| {});
    let doc = run_doc(&[&l.dev, &l.dev, "--read", "50", "--bs", "4k"]);
    let results = doc["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    for r in results {
        assert_eq!(r["info"]["params"]["exclusive"], true);
        assert!(r["write"]["ios"].as_u64().unwrap() > 0, "{r}");
    }
}
