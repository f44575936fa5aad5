//! NVMe ANA end to end: `sanbench serve nvme` with two ports, one non-optimized, driven by
//! `sanbench run` over the two-portal URI, the states changed at run time through
//! `sanbench ana --control`. Round-robin is asked for, so only the states keep I/O off a path.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sanbench_testkit::Served;
use serde_json::Value;

fn bin() -> std::path::PathBuf {
    assert_cmd::cargo::cargo_bin("sanbench")
}

/// `sanbench serve nvme` on two loopback ports with a control socket.
fn serve(ctl: &Path, extra: &[&str]) -> Served {
    let mut args = vec![
        "nvme",
        "--size",
        "32M",
        "--listen",
        "127.0.0.1:0",
        "--listen",
        "127.0.0.1:0",
        "--control",
        ctl.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    Served::start(bin(), &args)
}

fn run_cmd(uri: &str, secs: &str) -> Command {
    let mut c = Command::new(bin());
    c.args([
        "run",
        &format!("{uri}?policy=round-robin"),
        "--ramp",
        "0",
        "--quiet",
        "--no-monitor",
        "--verify",
        "--json",
        "-",
        "--time",
        secs,
        "--read",
        "50",
        "--qd",
        "8",
        "--workers",
        "2",
    ]);
    c
}

fn ana(ctl: &Path, settings: &[&str]) -> Output {
    Command::new(bin())
        .args(["ana", "--control", ctl.to_str().unwrap()])
        .args(settings)
        .output()
        .unwrap()
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn ios(r: &Value) -> Vec<u64> {
    r["multipath"]["paths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["ios"].as_u64().unwrap())
        .collect()
}

fn checked(r: &Value) {
    assert!(r["verify"]["reads"].as_u64().unwrap() > 0, "{r}");
    assert_eq!(r["verify"]["bad_blocks"], serde_json::json!([]), "{r}");
    assert_eq!(r["multipath"]["failed_no_path"], 0, "{r}");
}

#[test]
fn io_keeps_to_the_optimized_port_and_moves_when_it_becomes_inaccessible() {
    let dir = tempfile::tempdir().unwrap();
    let ctl = dir.path().join("ctl.sock");
    let server = serve(&ctl, &["--ana", "2=non-optimized"]);
    assert!(server.line.contains("2 non-optimized"), "{}", server.line);

    // Both paths up, one optimized: it carries everything.
    let v = sanbench_testkit::ok_json(&run_cmd(&server.uri, "1s").output().unwrap());
    let r = &v["results"][0];
    checked(r);
    let n = ios(r);
    assert!(n[0] > 100 && n[1] == 0, "{n:?}: {r}");
    let ps = &r["multipath"]["paths"];
    assert_eq!(ps[0]["access_state"], "optimized", "{r}");
    assert_eq!(ps[1]["access_state"], "non-optimized", "{r}");

    // Mid-run the optimized port becomes inaccessible, then optimized again.
    let child = run_cmd(&server.uri, "5s")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let gone_at = now_ms();
    let out = ana(&ctl, &["1=inaccessible"]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines().next().unwrap().ends_with(" inaccessible"),
        "{text}"
    );
    std::thread::sleep(Duration::from_millis(1500));
    let back_at = now_ms();
    assert!(ana(&ctl, &["1=optimized"]).status.success());
    let out = child.wait_with_output().unwrap();
    // No I/O error: the run succeeded, and every read found what was written.
    let v = sanbench_testkit::ok_json(&out);
    let r = &v["results"][0];
    checked(r);
    let m = &r["multipath"];
    let n = ios(r);
    assert!(n[0] > 100 && n[1] > 100, "both carried I/O: {n:?}");
    let events = m["events"].as_array().unwrap();
    let changed = |to: &str| -> Vec<u64> {
        events
            .iter()
            .filter(|e| e["event"] == "access_state" && e["path"] == 0 && e["access_state"] == to)
            .map(|e| e["at_unix_ms"].as_u64().unwrap())
            .collect()
    };
    // Each worker (its own connections) saw both changes, soon after they were made (the
    // change notice or the first I/O refused; 3 s is a wide margin on a loaded host).
    let gone = changed("inaccessible");
    let back = changed("optimized");
    assert_eq!((gone.len(), back.len()), (2, 2), "{m}");
    assert!(
        gone.iter()
            .all(|&t| t + 50 >= gone_at && t < gone_at + 3000),
        "{gone:?} vs {gone_at}: {m}"
    );
    assert!(
        back.iter()
            .all(|&t| t + 50 >= back_at && t < back_at + 3000),
        "{back:?} vs {back_at}: {m}"
    );
    assert!(
        events.iter().all(|e| e["path"] == 0),
        "nothing happened to the non-optimized path: {m}"
    );
    assert_eq!(m["paths"][0]["access_state"], "optimized", "{m}");
    // What was in flight on the port when it changed came back with the path status and
    // went to the other port (the failure says so).
    let errs = m["paths"][0]["path_errors"].as_u64().unwrap();
    let failed: Vec<&Value> = events.iter().filter(|e| e["event"] == "failed").collect();
    assert!(m["reissued"].as_u64().unwrap() >= errs, "{m}");
    assert!(
        failed.iter().all(|e| e["reason"]
            .as_str()
            .unwrap()
            .contains("path-related status")),
        "{m}"
    );
    assert_eq!(errs > 0, !failed.is_empty(), "{m}");

    // Optimized again: the non-optimized port is left alone once more.
    let v = sanbench_testkit::ok_json(&run_cmd(&server.uri, "1s").output().unwrap());
    let n = ios(&v["results"][0]);
    assert!(n[0] > 100 && n[1] == 0, "{n:?}");
    let err = server.interrupt();
    assert!(!ctl.exists(), "the socket is removed at exit: {err}");
}

#[test]
fn bad_ana_input_is_one_line_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let one_line = |out: &Output, want: &str| {
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{want}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(err.contains(want), "{want}: {err}");
    };
    let serve_bad = |args: &[&str]| {
        Command::new(bin())
            .args(["serve", "nvme", "--size", "1M", "--listen", "127.0.0.1:0"])
            .args(args)
            .output()
            .unwrap()
    };
    one_line(&serve_bad(&["--ana", "2=optimized"]), "unknown port 2");
    one_line(&serve_bad(&["--ana", "1=blue"]), "ANA state 'blue'");
    one_line(&serve_bad(&["--ana", "first=optimized"]), "index");
    let file = dir.path().join("plain");
    std::fs::write(&file, "x").unwrap();
    one_line(
        &serve_bad(&["--control", file.to_str().unwrap()]),
        "not a socket",
    );

    let ctl = dir.path().join("ctl.sock");
    let server = serve(&ctl, &[]);
    one_line(&ana(&ctl, &["3=inaccessible"]), "unknown port 3");
    // All or none: port 1 is not changed when port 3 is refused.
    one_line(
        &ana(&ctl, &["1=inaccessible", "3=optimized"]),
        "unknown port 3",
    );
    one_line(&ana(&ctl, &["1=blue"]), "ANA state 'blue'");
    one_line(&ana(&ctl, &["1"]), "PORT=STATE");
    one_line(&ana(&dir.path().join("none.sock"), &[]), "no such socket");
    let out = ana(&ctl, &[]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    let states: Vec<&str> = text
        .lines()
        .map(|l| l.rsplit(' ').next().unwrap())
        .collect();
    assert_eq!(states, ["optimized", "optimized"], "{text}");
    // A second server cannot take a socket that answers.
    let again = Command::new(bin())
        .args(["serve", "nvme", "--size", "1M", "--listen", "127.0.0.1:0"])
        .args(["--control", ctl.to_str().unwrap()])
        .output()
        .unwrap();
    one_line(&again, "another server answers");
    server.interrupt();
}
