//! Running external tools (ipmitool, ethtool, ip, a user's power command) with a time limit.
//!
//! Commands are given as argv vectors so tests can substitute a fake script. A BMC that does not
//! answer can keep ipmitool waiting for many seconds; the sampler must not hang on it, so every
//! command is killed at its deadline.

use crate::error::{MonitorError, Result};
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs `argv` and returns its stdout; non-zero exit, failure to start, or the deadline are
/// errors that carry stderr's first line.
pub fn run(argv: &[String], timeout: Duration) -> Result<String> {
    let shown = argv.join(" ");
    let (prog, args) = argv
        .split_first()
        .ok_or_else(|| MonitorError::Invalid("empty command".into()))?;
    let mut child = Command::new(prog)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| MonitorError::Command {
            cmd: shown.clone(),
            reason: format!("cannot start: {e}"),
        })?;
    // Output is small (a few lines); read it on helper threads so a full pipe cannot block the
    // child while we wait for it.
    let mut out = child.stdout.take();
    let mut err = child.stderr.take();
    let out_t = std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(o) = out.as_mut() {
            let _ = o.read_to_string(&mut s);
        }
        s
    });
    let err_t = std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(e) = err.as_mut() {
            let _ = e.read_to_string(&mut s);
        }
        s
    });
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break st,
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(MonitorError::Command {
                    cmd: shown,
                    reason: format!("no answer within {:.1} s", timeout.as_secs_f64()),
                });
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(2)),
            Err(e) => {
                return Err(MonitorError::Command {
                    cmd: shown,
                    reason: e.to_string(),
                })
            }
        }
    };
    let stdout = out_t.join().unwrap_or_default();
    let stderr = err_t.join().unwrap_or_default();
    if !status.success() {
        let first = stderr.lines().next().unwrap_or("").trim();
        return Err(MonitorError::Command {
            cmd: shown,
            reason: format!("{status}: {first}"),
        });
    }
    Ok(stdout)
}

/// `sh -c LINE` as an argv.
pub fn shell(line: &str) -> Vec<String> {
    vec!["sh".into(), "-c".into(), line.into()]
}

/// The first decimal number in `text` (e.g. `"PDU outlet 3: 123.5 W"` → 123.5).
pub fn first_number(text: &str) -> Option<f64> {
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_digit() {
            let neg = i > 0 && b[i - 1] == b'-';
            let start = if neg { i - 1 } else { i };
            let mut j = i;
            while j < b.len() && b[j].is_ascii_digit() {
                j += 1;
            }
            if j + 1 < b.len() && b[j] == b'.' && b[j + 1].is_ascii_digit() {
                j += 1;
                while j < b.len() && b[j].is_ascii_digit() {
                    j += 1;
                }
            }
            return text[start..j].parse().ok();
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers() {
        assert_eq!(first_number("123.5 W"), Some(123.5));
        assert_eq!(first_number("outlet: 87W\n"), Some(87.0));
        assert_eq!(first_number("-3.25"), Some(-3.25));
        assert_eq!(first_number("v1.2"), Some(1.2));
        assert_eq!(first_number("12."), Some(12.0));
        assert_eq!(first_number("none"), None);
    }

    #[test]
    fn runs_and_fails_clearly() {
        let out = run(&shell("echo 42"), Duration::from_secs(5)).unwrap();
        assert_eq!(out.trim(), "42");
        let e = run(&shell("echo oops >&2; exit 3"), Duration::from_secs(5)).unwrap_err();
        assert!(e.to_string().contains("oops"), "{e}");
        let e = run(&shell("sleep 5"), Duration::from_millis(100)).unwrap_err();
        assert!(e.to_string().contains("no answer"), "{e}");
        let e = run(&["/nonexistent/tool".into()], Duration::from_secs(1)).unwrap_err();
        assert!(e.to_string().contains("cannot start"), "{e}");
    }
}
