//! A timed replay's fidelity on `serve nbd --delay`: what the delay makes true (service
//! time, rate), and what held the replay when it fell behind: the depth (`qd_limited`) or,
//! verified, the overlapping I/Os (`overlap_limited`), never this host for either.

use assert_cmd::Command;
use serde_json::Value;

fn replay_json(args: &[&str]) -> Value {
    let o = Command::cargo_bin("sanbench")
        .unwrap()
        .arg("replay")
        .args(args)
        .args(["--json", "-", "-q"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// `sanbench serve nbd` (16 MiB) taking 1 ms over every I/O.
fn nbd_taking_1ms() -> sanbench_testkit::Served {
    sanbench_testkit::Served::start(
        assert_cmd::cargo::cargo_bin("sanbench"),
        &[
            "nbd",
            "--size",
            "16M",
            "--listen",
            "127.0.0.1:0",
            "--delay",
            "1ms",
        ],
    )
}

#[test]
fn fidelity_on_a_delayed_target_matches_the_delay() {
    let served = nbd_taking_1ms();
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.iolog");
    // 1000 I/Os, one every 500 µs: 0.5 s at 2000 per second, about 2 in flight.
    let mut text = String::from("fio version 3 iolog\n");
    for i in 0..1000u64 {
        text += &format!("{} /f read {} 4096\n", i * 500, (i * 7919 % 4000) * 4096);
    }
    std::fs::write(&trace, &text).unwrap();
    let t = trace.to_str().unwrap();
    let doc = replay_json(&[t, &served.uri, "--qd", "16"]);
    let r = &doc["results"][0];
    let p = &r["replay"];
    assert_eq!(p["replayed_ops"]["read"].as_u64(), Some(1000));
    // The delay is a floor of every service time; margins for a loaded 2-core machine.
    let service_p50 = r["service_us"]["p50"].as_f64().unwrap();
    assert!((1000.0..8000.0).contains(&service_p50), "{service_p50}");
    assert!(
        r["latency_us"]["min"].as_f64().unwrap() >= 1000.0,
        "{}",
        r["latency_us"]
    );
    let ratio = p["rate_ratio"].as_f64().unwrap();
    assert!(ratio > 0.6 && ratio < 1.05, "{ratio}");
    assert!(p["held_by_qd"].as_u64().unwrap() < 100, "{p}");
    let doc = replay_json(&[t, &served.uri, "--qd", "1"]);
    let p = &doc["results"][0]["replay"];
    assert_eq!(p["qd_limited"], Value::Bool(true), "{p}");
    assert_eq!(p["host_limited"], Value::Bool(false), "{p}");
    // At most one I/O per millisecond: at most half the trace's rate.
    assert!(p["rate_ratio"].as_f64().unwrap() < 0.55, "{p}");
    assert!(p["note"].as_str().unwrap().contains("--qd"), "{p}");
}

/// A verified timed replay whose I/Os each overlap the one before, on a target that takes
/// 1 ms: every I/O waits for its predecessor, so the replay falls behind, and says the
/// overlap held it (the target's service time), not this host nor the depth.
#[test]
fn a_verified_replay_held_by_overlaps_is_overlap_limited() {
    let served = nbd_taking_1ms();
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("same.iolog");
    // 300 writes and reads of one block, one every 200 µs: five times what 1 ms each allows.
    let mut text = String::from("fio version 3 iolog\n");
    for i in 0..300u64 {
        let op = ["write", "read"][(i % 2) as usize];
        text += &format!("{} /f {op} 0 4096\n", i * 200);
    }
    std::fs::write(&trace, &text).unwrap();
    let doc = replay_json(&[
        trace.to_str().unwrap(),
        &served.uri,
        "--verify",
        "--qd",
        "16",
    ]);
    let p = &doc["results"][0]["replay"];
    assert_eq!(p["overlap_limited"], Value::Bool(true), "{p}");
    assert_eq!(p["qd_limited"], Value::Bool(false), "{p}");
    let late = &p["late_ios"];
    let (overlap, host) = (
        late["overlap"].as_u64().unwrap(),
        late["host"].as_u64().unwrap(),
    );
    assert!(overlap > 200 && overlap > host, "{p}");
    assert!(p["held_by_overlap"].as_u64().unwrap() > 200, "{p}");
    assert!(p["note"].as_str().unwrap().contains("overlapping"), "{p}");
}
