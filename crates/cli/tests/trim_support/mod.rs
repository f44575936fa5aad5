//! What the trim tests (`iscsi_trim`, `trim_mix`) share: a run of trims only, in batches, on a
//! built-in server, and the space its store says it holds.

use std::process::Command;

use sanbench_testkit::ok_json;
use serde_json::Value;

/// Trims only, 4 KiB, QD 32, for 400 ms on `uri`, nothing written first: the scheduler hands
/// the queue batches of trims. The result document.
pub fn trims_only_at_qd_32(uri: &str) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_sanbench"))
        .args(["run", uri, "--bs", "4k", "--read", "0", "--trim", "100"])
        .args(["--qd", "32", "--time", "400ms", "--ramp", "0"])
        .args([
            "--precondition",
            "none",
            "--no-monitor",
            "--quiet",
            "--json",
            "-",
        ])
        .output()
        .unwrap();
    ok_json(&out)
}

/// "allocated N bytes" from a built-in server's summary line.
pub fn allocated(stderr: &str) -> u64 {
    stderr
        .split("allocated ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no allocated bytes in {stderr:?}"))
}
