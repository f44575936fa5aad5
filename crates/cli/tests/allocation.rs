//! What the targets report about never-written space reaches the result: `sanbench run` over a
//! sparse file (SEEK_DATA) and over nbdkit's sparse memory plugin (NBD base:allocation) says
//! the span holds holes, and how it knows.

use std::process::{Command as Proc, Stdio};
use std::time::{Duration, Instant};

use assert_cmd::Command;
use sanbench_testkit::Peer;
use serde_json::Value;

fn read_run(target: &str) -> Value {
    let out = Command::cargo_bin("sanbench")
        .unwrap()
        .args([
            "run", target, "--read", "100", "--time", "300ms", "--ramp", "0",
        ])
        .args(["--no-monitor", "--quiet", "--json", "-"])
        .output()
        .unwrap();
    sanbench_testkit::ok_json(&out)
}

#[test]
fn a_sparse_file_reads_as_holes() {
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let f = dir.path().join("sparse.img");
    std::fs::File::create(&f).unwrap().set_len(8 << 20).unwrap();
    let doc = read_run(f.to_str().unwrap());
    let pre = &doc["results"][0]["precondition"];
    assert_eq!(pre["state"], "holes", "{pre}");
    assert_eq!(pre["allocation"]["method"], "SEEK_DATA");
    assert_eq!(pre["allocation"]["unwritten_bytes"], 8u64 << 20);
}

#[test]
#[cfg_attr(not(feature = "interop"), ignore = "interop tier: needs nbdkit")]
fn nbdkit_memory_reads_as_holes() {
    sanbench_testkit::require("nbdkit", "nbdkit");
    // A Unix socket in a directory of its own: no loopback port to race another test for (a
    // port picked free can be taken before nbdkit binds it, and the probe then reached
    // someone else's listener: once, "connection refused" right after it connected).
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("nbdkit.sock");
    let mut server = Peer(
        Proc::new("nbdkit")
            .args(["-f", "-U"])
            .arg(&sock)
            .args(["memory", "16M"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::os::unix::net::UnixStream::connect(&sock).is_err() {
        assert!(
            server.0.try_wait().unwrap().is_none(),
            "nbdkit exited before it listened"
        );
        assert!(Instant::now() < deadline, "nbdkit did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    let doc = read_run(&format!("nbd+unix:///?socket={}", sock.display()));
    let pre = &doc["results"][0]["precondition"];
    assert_eq!(pre["state"], "holes", "{pre}");
    assert_eq!(pre["allocation"]["method"], "NBD base:allocation");
    assert_eq!(pre["allocation"]["checked_bytes"], 16u64 << 20);
    assert_eq!(pre["allocation"]["unwritten_bytes"], 16u64 << 20);
}
