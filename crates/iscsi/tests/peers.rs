//! Interop tests against real peers: libiscsi's tools and tgtd (packages libiscsi-bin, tgt).
//! A missing tool fails the test with a message naming the package; nothing is skipped.

use std::io::{BufRead, BufReader};

use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use sanbench_iscsi::target::{Target, TargetConfig};
use sanbench_iscsi::wire::chap::Credentials;

const IQN: &str = "iqn.2026-11.io.sanbench:ram";
const I1: &str = "iqn.2007-10.com.github:sahlberg:libiscsi:iscsi-test";
const I2: &str = "iqn.2007-10.com.github:sahlberg:libiscsi:iscsi-test-2";

struct Running {
    port: u16,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn start(lun_size: u64) -> Running {
    start_cfg(TargetConfig {
        lun_size,
        ..TargetConfig::default()
    })
}

fn start_cfg(cfg: TargetConfig) -> Running {
    let cfg = TargetConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        ..cfg
    };
    let t = Target::bind(cfg).expect("bind target");
    let port = t.local_addr().port();
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let thread = Some(std::thread::spawn(move || t.run(s).expect("target run")));
    Running { port, stop, thread }
}

use sanbench_testkit::{require, Tgtd};

fn output(cmd: &mut Command) -> String {
    let o = cmd.output().expect("run tool");
    let s = String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{cmd:?} failed: {s}");
    s
}

#[test]
#[cfg_attr(not(feature = "interop"), ignore = "interop tier: needs libiscsi-bin")]
fn iscsi_ls_inq_readcapacity() {
    require("iscsi-ls", "libiscsi-bin");
    let t = start(1 << 30);
    let url = format!("iscsi://127.0.0.1:{}", t.port);
    let ls = output(Command::new("iscsi-ls").args(["-s", &url]));
    assert!(ls.contains(IQN), "{ls}");
    let lun = format!("{url}/{IQN}/0");
    let inq = output(Command::new("iscsi-inq").arg(&lun));
    assert!(
        inq.contains("Vendor:SANBENCH") && inq.contains("DIRECT_ACCESS"),
        "{inq}"
    );
    let rc = output(Command::new("iscsi-readcapacity16").arg(&lun));
    assert!(
        rc.contains("LOGICAL BLOCK LENGTH IN BYTES:512") && rc.contains("Total size:1073741824"),
        "{rc}"
    );
}

#[test]
#[cfg_attr(not(feature = "interop"), ignore = "interop tier: needs libiscsi-bin")]
fn libiscsi_chap_header_digest_and_two_luns() {
    require("iscsi-inq", "libiscsi-bin");
    let chap = Some(Credentials::new("bench", "secret123456"));
    let t = start_cfg(TargetConfig {
        luns: 2,
        chap,
        ..TargetConfig::default()
    });
    let base = format!("127.0.0.1:{}/{IQN}", t.port);
    let inq = output(Command::new("iscsi-inq").arg(format!("iscsi://bench%secret123456@{base}/1")));
    assert!(inq.contains("Vendor:SANBENCH"), "{inq}");
    let bad = Command::new("iscsi-inq")
        .arg(format!("iscsi://bench%wrongsecret1@{base}/1"))
        .output()
        .unwrap();
    assert!(!bad.status.success(), "wrong CHAP secret was accepted");
    let noauth = Command::new("iscsi-inq")
        .arg(format!("iscsi://{base}/0"))
        .output()
        .unwrap();
    assert!(!noauth.status.success(), "login without CHAP was accepted");
    let rc = output(Command::new("iscsi-readcapacity16").arg(format!(
        "iscsi://bench%secret123456@{base}/0?header_digest=crc32c"
    )));
    assert!(rc.contains("LOGICAL BLOCK LENGTH IN BYTES:512"), "{rc}");
    let ls = output(Command::new("iscsi-ls").args([
        "-s",
        &format!("iscsi://bench%secret123456@127.0.0.1:{}", t.port),
    ]));
    assert!(ls.contains("Lun:0") && ls.contains("Lun:1"), "{ls}");
}

/// Mutual CHAP with libiscsi (`target_user`, `target_password`): libiscsi checks the target's
/// answer to its challenge, so a target secret it does not expect must fail the login.
#[test]
#[cfg_attr(not(feature = "interop"), ignore = "interop tier: needs libiscsi-bin")]
fn libiscsi_mutual_chap() {
    require("iscsi-inq", "libiscsi-bin");
    let t = start_cfg(TargetConfig {
        chap: Some(Credentials::new("bench", "secret123456")),
        target_chap: Some(Credentials::new("tgt", "target-secret-2")),
        ..TargetConfig::default()
    });
    let url = |target: &str| {
        format!(
            "iscsi://bench%secret123456@127.0.0.1:{}/{IQN}/0?target_user=tgt&target_password={target}",
            t.port
        )
    };
    let inq = output(Command::new("iscsi-inq").arg(url("target-secret-2")));
    assert!(inq.contains("Vendor:SANBENCH"), "{inq}");
    let bad = Command::new("iscsi-inq")
        .arg(url("not-the-secret"))
        .output()
        .unwrap();
    assert!(
        !bad.status.success(),
        "libiscsi accepted a target that proved another secret"
    );
    // Without credentials of its own the target refuses initiators that ask for them.
    let one_way = start_cfg(TargetConfig {
        chap: Some(Credentials::new("bench", "secret123456")),
        ..TargetConfig::default()
    });
    let refused = Command::new("iscsi-inq")
        .arg(format!(
            "iscsi://bench%secret123456@127.0.0.1:{}/{IQN}/0?target_user=tgt&target_password=x",
            one_way.port
        ))
        .output()
        .unwrap();
    assert!(
        !refused.status.success(),
        "mutual CHAP without target credentials"
    );
}

#[test]
#[cfg_attr(not(feature = "interop"), ignore = "interop tier: needs libiscsi-bin")]
fn sparse_100_gib_lun() {
    require("iscsi-readcapacity16", "libiscsi-bin");
    let t = start(100 << 30);
    let lun = format!("iscsi://127.0.0.1:{}/{IQN}/0", t.port);
    let rc = output(Command::new("iscsi-readcapacity16").arg(&lun));
    assert!(rc.contains("Total size:107374182400"), "{rc}");
}

/// Runs iscsi-perf for a few seconds (line-buffered through stdbuf, since it prints to a
/// pipe), kills it by pid and returns the best "iops average" it printed.
fn perf(url: &str) -> f64 {
    require("stdbuf", "coreutils");
    let mut child: Child = Command::new("stdbuf")
        .args(["-oL", "iscsi-perf", "-m", "32", "-b", "8", "-r", url])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn iscsi-perf");
    let out = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut best = 0.0f64;
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if let Some(v) = line.split("iops average").nth(1) {
                let n: f64 = v
                    .split_whitespace()
                    .next()
                    .and_then(|x| x.parse().ok())
                    .unwrap_or(0.0);
                best = best.max(n);
            }
        }
        best
    });
    std::thread::sleep(Duration::from_secs(4));
    let _ = child.kill();
    let _ = child.wait();
    reader.join().unwrap_or(0.0)
}

#[test]
#[cfg_attr(not(feature = "interop"), ignore = "interop tier: needs libiscsi-bin")]
fn iscsi_perf_runs() {
    require("iscsi-perf", "libiscsi-bin");
    let t = start(1 << 30);
    let iops = perf(&format!("iscsi://127.0.0.1:{}/{IQN}/0", t.port));
    eprintln!("iscsi-perf 4 KiB QD32 read: {iops} IOPS");
    assert!(iops > 1000.0, "iscsi-perf reported {iops} IOPS");
}

/// Compliance tests sanbench's target passed without skipping when skips were first counted.
const PASSED_RUN_FLOOR: u32 = 146;

/// What one run of the compliance suite reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Compliance {
    total: u32,
    ran: u32,
    /// What CUnit calls passed: it includes the skipped tests.
    passed: u32,
    failed: u32,
    /// Tests that printed `[SKIPPED]` (a command the target does not implement, a
    /// precondition it does not meet): CUnit counts them as passed, we count them apart.
    skipped: u32,
}

impl Compliance {
    /// Passed and not skipped: the tests whose checks really ran and held.
    fn passed_run(&self) -> u32 {
        self.passed - self.skipped
    }
}

/// Tests (by the `Test: NAME ...` lines) whose output holds `[SKIPPED]`. libiscsi logs skips
/// to stdout in the same stream as CUnit's progress, so a skip lands between its test's
/// `Test:` line and the next.
fn skipped_tests(out: &str) -> u32 {
    let mut n = 0;
    let mut counted = true;
    for l in out.lines() {
        if l.contains("Test: ") {
            counted = false;
        }
        if l.contains("[SKIPPED]") && !counted {
            n += 1;
            counted = true;
        }
    }
    n
}

#[test]
fn skipped_tests_are_counted_once_each() {
    let out = "    [SKIPPED] before any test\nSuite: S\n  Test: A ...passed\n  Test: B ...    \
               [SKIPPED] x\n    [SKIPPED] x\npassed\n  Test: C ...    [SKIPPED] y\npassed\n";
    assert_eq!(skipped_tests(out), 2);
}

/// Runs the compliance suite against `url`.
fn test_cu(url: &str) -> Compliance {
    test_cu_suite(url, "ALL")
}

/// Runs the tests of `suite` (`-t`, e.g. `SCSI.Unmap`) against `url`.
fn test_cu_suite(url: &str, suite: &str) -> Compliance {
    let o = Command::new("iscsi-test-cu")
        .args(["--dataloss", "-i", I1, "-I", I2, "-t", suite, url])
        .stdin(Stdio::null())
        .output()
        .expect("run iscsi-test-cu");
    let s = String::from_utf8_lossy(&o.stdout).to_string();
    let line = s
        .lines()
        .find(|l| l.trim_start().starts_with("tests "))
        .unwrap_or_else(|| panic!("no summary line in:\n{s}"));
    let n: Vec<u32> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    assert!(n.len() >= 4, "bad summary line {line:?}");
    for l in s
        .lines()
        .filter(|l| l.contains("FAILED") || l.contains("Test:") && l.ends_with("FAILED"))
    {
        eprintln!("{l}");
    }
    let c = Compliance {
        total: n[0],
        ran: n[1],
        passed: n[2],
        failed: n[3],
        skipped: skipped_tests(&s),
    };
    assert!(c.skipped <= c.passed, "{c:?}");
    c
}

#[test]
#[cfg_attr(
    not(feature = "interop"),
    ignore = "interop tier: needs iscsi-test-cu and tgtd"
)]
fn compliance_against_tgtd() {
    require("iscsi-test-cu", "libiscsi-bin");
    let t = start(1 << 30);
    let ours = test_cu(&format!("iscsi://127.0.0.1:{}/{IQN}/0", t.port));
    drop(t);
    let g = Tgtd::start(1 << 30);
    let theirs = test_cu(&g.uri());
    drop(g);
    eprintln!(
        "iscsi-test-cu of {} tests: sanbench {} passed, {} skipped, {} failed; \
         tgtd {} passed, {} skipped, {} failed",
        ours.total,
        ours.passed_run(),
        ours.skipped,
        ours.failed,
        theirs.passed_run(),
        theirs.skipped,
        theirs.failed
    );
    assert_eq!(ours.total, ours.ran, "not every test ran: {ours:?}");
    // Skipped tests checked nothing, so the passes compared are those that ran. Counted that
    // way tgtd passes more (it implements commands that sanbench's target answers INVALID
    // OPCODE, whose tests then skip), and fails some that sanbench passes: the test holds
    // sanbench to no failures, no more failures than tgtd, and no fewer real passes than it
    // had when skips were first counted apart (2026-11-23: 146 passed, 84 skipped).
    assert_eq!(ours.failed, 0, "{ours:?}");
    assert!(ours.failed <= theirs.failed, "{ours:?} vs tgtd {theirs:?}");
    assert!(
        ours.passed_run() >= PASSED_RUN_FLOOR,
        "sanbench passed {} (+{} skipped), fewer than {PASSED_RUN_FLOOR}",
        ours.passed_run(),
        ours.skipped
    );
}

#[test]
#[cfg_attr(not(feature = "interop"), ignore = "interop tier: needs iscsi-test-cu")]
fn unmap_and_write_same_suites_pass_against_sanbench_target() {
    require("iscsi-test-cu", "libiscsi-bin");
    let t = start(64 << 20);
    let url = format!("iscsi://127.0.0.1:{}/{IQN}/0", t.port);
    // UNMAP (Simple, VPD, ZeroBlocks) and WRITE SAME(16) with and without UNMAP: what the
    // trims and write-zeroes of a run send. Tests that need more than one logical block per
    // physical block (LBPPB) skip, as they do against tgtd.
    for (suite, at_least) in [("SCSI.Unmap", 2), ("SCSI.WriteSame16", 7)] {
        let c = test_cu_suite(&url, suite);
        eprintln!("{suite}: {c:?}");
        assert_eq!((c.total, c.failed), (c.ran, 0), "{suite}: {c:?}");
        assert!(c.passed_run() >= at_least, "{suite}: {c:?}");
    }
}
