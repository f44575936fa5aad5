//! A closed pipe is not a crash: every printing command ends quietly when stdout's reader goes
//! away (`sanbench suite show thirdio-2008 | head -3`), as ripgrep does: no panic, no
//! backtrace, the exit code the command would have had.
//!
//! Each command runs twice: once with a reader that is gone before the first write (EPIPE on
//! the first line, deterministic), once with a reader that takes one line and closes (what
//! `| head -1` does).
//!
//! Servers (`serve nbd|iscsi|nvme`) print one line, their URI, and then serve until Ctrl-C.
//! That line is informational: when its reader is gone, the server keeps serving (a `run`
//! against it succeeds) and still stops on SIGINT with exit 0 and its summary on stderr; the
//! same for the three kinds.

use std::io::{BufRead, BufReader, Read};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sanbench_testkit::Served;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sanbench"))
}

/// Runs `args` with stdout into a pipe whose reader has already gone; returns (code, stderr).
fn reader_gone(args: &[&str]) -> (i32, String) {
    let (r, w) = std::io::pipe().unwrap();
    drop(r);
    let out = bin()
        .args(args)
        .stdin(Stdio::null())
        .stdout(w)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs `args`, reads one line of stdout and closes it; returns (code, first line, stderr).
fn head_1(args: &[&str]) -> (i32, String, String) {
    let mut child = bin()
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    // The reader is dropped here: what the command writes next meets a closed pipe.
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let code = child.wait().unwrap().code().unwrap_or(-1);
    (code, line, err)
}

fn quiet(args: &[&str], codes: &[i32]) {
    let (code, err) = reader_gone(args);
    assert!(
        !err.contains("panicked") && !err.contains("Broken pipe") && !err.contains("backtrace"),
        "{args:?} with no reader: {err}"
    );
    assert!(codes.contains(&code), "{args:?} exit {code}: {err}");
    let (code, line, err) = head_1(args);
    assert!(!line.is_empty(), "{args:?} printed nothing: {err}");
    assert!(
        !err.contains("panicked") && !err.contains("Broken pipe"),
        "{args:?} | head -1: {err}"
    );
    assert!(
        codes.contains(&code),
        "{args:?} | head -1 exit {code}: {err}"
    );
}

/// `compare` of a one-workload suite on mem: (200 ms, no idle baseline, modeled power): well
/// under a second. Writes the suite into `dir`; the report goes to `dir/out`.
fn compare_args(dir: &Path) -> Vec<String> {
    let suite = dir.join("s.toml");
    std::fs::write(
        &suite,
        "name = \"one\"\ndescription = \"one\"\ntime = \"200ms\"\nramp = \"0s\"\n\
         [[workload]]\nid = \"rr\"\ngroup = \"iops\"\nqd = 4\n\
         segment = [{ bs = \"4k\", read = 100, random = 100 }]\n",
    )
    .unwrap();
    let out = dir.join("out");
    [
        "compare",
        "--repeat",
        "1",
        "--suite",
        suite.to_str().unwrap(),
        "--baseline",
        "0",
        "--power",
        "model",
        "--out",
        out.to_str().unwrap(),
        "a=mem:8M",
    ]
    .map(String::from)
    .to_vec()
}

/// A store with one more recorded run (the first call: run 1, the second: run 2).
fn store(dir: &Path) -> String {
    let db = dir.join("r.db");
    let o = bin()
        .args(compare_args(dir))
        .args(["--quiet", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    db.to_str().unwrap().to_string()
}

#[test]
fn suite_and_monitors_end_quietly_on_a_closed_pipe() {
    quiet(&["suite", "list"], &[0]);
    quiet(&["suite", "show", "thirdio-2008"], &[0]);
    quiet(&["monitors"], &[0]);
    // The front door's long outputs (issue 41).
    quiet(&["completions", "bash"], &[0]);
    quiet(&["help", "targets"], &[0]);
}

#[test]
fn history_and_report_end_quietly_on_a_closed_pipe() {
    let tmp = tempfile::tempdir().unwrap();
    let db = store(tmp.path());
    quiet(&["history", "--db", &db], &[0]);
    let out = tmp.path().join("re");
    quiet(
        &["report", "1", "--db", &db, "--out", out.to_str().unwrap()],
        &[0],
    );
}

#[test]
fn run_and_verify_json_end_quietly_on_a_closed_pipe() {
    quiet(
        &[
            "run", "null:", "--time", "300ms", "--ramp", "0s", "--json", "-",
        ],
        &[0],
    );
    quiet(&["run", "null:", "--time", "300ms", "--ramp", "0s"], &[0]);
    // Nothing was written to a fresh mem: target: every block unwritten, exit code 3.
    quiet(
        &[
            "verify",
            "mem:1M",
            "--run-id",
            "0123456789abcdef",
            "--json",
            "-",
        ],
        &[3],
    );
}

#[test]
fn compare_and_diff_end_quietly_on_a_closed_pipe() {
    let tmp = tempfile::tempdir().unwrap();
    let mut args = compare_args(tmp.path());
    args.push("--no-store".into());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    quiet(&args, &[0]);
    // Runs 1 and 2 in one store.
    let db = store(tmp.path());
    store(tmp.path());
    quiet(&["diff", "1", "2", "--db", &db], &[0]);
}

#[test]
fn demo_ends_quietly_on_a_closed_pipe() {
    // Five targets, five workloads of 100 ms, one repetition: about 10 s a time. Not --quiet:
    // the table comes first, so `| head -1` closes the pipe while there is more to write.
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("demo");
    quiet(
        &[
            "demo",
            "--time",
            "100ms",
            "--ramp",
            "0s",
            "--size",
            "16M",
            "--repeat",
            "1",
            "--no-store",
            "--out",
            out.to_str().unwrap(),
        ],
        &[0],
    );
}

/// `sanbench serve KIND` with a 1 MiB store, listening on `listen` (`127.0.0.1:0`: a port of
/// the kernel's choosing, which the URI line names).
fn serve_args(kind: &str, listen: &str) -> Vec<String> {
    ["serve", kind, "--size", "1M", "--listen", listen]
        .map(String::from)
        .to_vec()
}

/// The URI `run` opens on a server of `kind` at `addr`, with the servers' default names.
fn run_uri(kind: &str, addr: &str) -> String {
    match kind {
        "nbd" => format!("nbd://{addr}"),
        "iscsi" => format!("iscsi://{addr}/iqn.2026-11.io.sanbench:ram/0"),
        "nvme" => format!("nvme+tcp://{addr}/nqn.2026-11.io.sanbench:ram/1"),
        other => unreachable!("{other}"),
    }
}

/// Waits up to `limit` for `child` to exit; kills it (by its own handle) if it does not.
fn wait_for(child: &mut std::process::Child, limit: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the server did not stop within {limit:?} of SIGINT");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A server whose stdout reader is gone before its URI line: it keeps serving, and SIGINT
/// stops it with exit 0, no panic.
fn serve_reader_gone(kind: &str) {
    let port = sanbench_testkit::free_port();
    let addr = format!("127.0.0.1:{port}");
    let (r, w) = std::io::pipe().unwrap();
    drop(r);
    let mut child = bin()
        .args(serve_args(kind, &addr))
        .stdin(Stdio::null())
        .stdout(w)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr_of = |child: &mut std::process::Child| {
        let mut err = String::new();
        if let Some(mut e) = child.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        err
    };
    // No URI line to wait for: the listener accepting says the server is up.
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Some(st) = child.try_wait().unwrap() {
            panic!(
                "serve {kind} with no reader exited ({st}): {}",
                stderr_of(&mut child)
            );
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("serve {kind} with no reader: not listening on {addr} after 10 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // Still serving after the URI line met the closed pipe.
    let run = bin()
        .args([
            "run",
            &run_uri(kind, &addr),
            "--time",
            "200ms",
            "--ramp",
            "0s",
        ])
        .args(["--quiet", "--no-monitor"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    if !run.status.success() {
        let _ = child.kill();
        let _ = child.wait();
        panic!(
            "run against serve {kind} with no reader: {}\nserver: {}",
            String::from_utf8_lossy(&run.stderr),
            stderr_of(&mut child)
        );
    }
    // The run got an answer, so the server's signal handlers are in place: SIGINT stops it
    // cleanly rather than killing it.
    // SAFETY: kill(2) on our own child's process id, which stays ours until we wait for it.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let status = wait_for(&mut child, Duration::from_secs(20));
    let err = stderr_of(&mut child);
    assert_eq!(status.code(), Some(0), "serve {kind} with no reader: {err}");
    assert!(
        !err.contains("panicked") && !err.contains("Broken pipe") && !err.contains("backtrace"),
        "serve {kind} with no reader: {err}"
    );
    assert!(err.contains("stopped"), "serve {kind}: no summary: {err}");
}

/// `sanbench serve KIND | head -1`: the URI line is read, the reader closes, SIGINT stops the
/// server with exit 0 and no panic.
fn serve_head_1(kind: &str) {
    let args = serve_args(kind, "127.0.0.1:0");
    let args: Vec<&str> = args[1..].iter().map(String::as_str).collect();
    let server = Served::start(env!("CARGO_BIN_EXE_sanbench"), &args);
    assert!(server.line.contains("Ctrl-C to stop"), "{}", server.line);
    let err = server.interrupt();
    assert!(
        !err.contains("panicked") && !err.contains("Broken pipe") && !err.contains("backtrace"),
        "serve {kind} | head -1: {err}"
    );
    assert!(err.contains("stopped"), "serve {kind}: no summary: {err}");
}

#[test]
fn servers_keep_serving_when_the_uri_line_has_no_reader() {
    for kind in ["nbd", "iscsi", "nvme"] {
        serve_reader_gone(kind);
        serve_head_1(kind);
    }
}

#[test]
fn discover_ends_quietly_on_a_closed_pipe() {
    let server = Served::start(
        env!("CARGO_BIN_EXE_sanbench"),
        &["nvme", "--size", "1M", "--listen", "127.0.0.1:0"],
    );
    let base = format!("nvme+tcp://{}", server.addr());
    quiet(&["discover", &base], &[0]);
    quiet(&["discover", "--json", &base], &[0]);
    let err = server.interrupt();
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
#[cfg_attr(not(feature = "lab"), ignore = "lab tier: needs root and ip")]
fn lab_status_ends_quietly_on_a_closed_pipe() {
    // `lab status` only reads (`ip netns`, `ip link`, the state file): with no lab recorded it
    // prints one line. Like every lab command it needs root (CI runs the tests as root).
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("lab.json");
    quiet(&["lab", "status", "--state", state.to_str().unwrap()], &[0]);
}
