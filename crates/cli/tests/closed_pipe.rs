//! A closed pipe is not a crash: every printing command ends quietly when stdout's reader goes
//! away (`sanbench suite show thirdio-2008 | head -3`), as ripgrep does: no panic, no
//! backtrace, the exit code the command would have had.
//!
//! Each command runs twice: once with a reader that is gone before the first write (EPIPE on
//! the first line, deterministic), once with a reader that takes one line and closes (what
//! `| head -1` does).

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Command, Stdio};

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

/// A store with one recorded run (a one-workload compare on mem:).
fn store(dir: &Path) -> String {
    let suite = dir.join("s.toml");
    std::fs::write(
        &suite,
        "name = \"one\"\ndescription = \"one\"\ntime = \"200ms\"\nramp = \"0s\"\n\
         [[workload]]\nid = \"rr\"\ngroup = \"iops\"\nqd = 4\n\
         segment = [{ bs = \"4k\", read = 100, random = 100 }]\n",
    )
    .unwrap();
    let db = dir.join("r.db");
    let o = bin()
        .args(["compare", "--suite", suite.to_str().unwrap()])
        .args(["--baseline", "0", "--power", "model", "--quiet", "--db"])
        .arg(&db)
        .arg("--out")
        .arg(dir.join("out"))
        .arg("a=mem:8M")
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
