//! Processes the lab starts and stops: spawned in their own process group (a Ctrl-C at the
//! terminal must not take the targets down mid-comparison), identified by pid *and* start
//! time (field 22 of /proc/PID/stat), so that a pid the kernel has recycled since is never
//! signalled.

use std::fs::File;
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::cmd::which;
use crate::error::LabError;

/// Starts `argv` in the background, stdout and stderr to `log`. Returns (pid, start time).
pub fn spawn(argv: &[String], log: &Path) -> Result<(u32, u64), LabError> {
    let joined = argv.join(" ");
    let Some((prog, args)) = argv.split_first() else {
        return Err(LabError::Input("empty command".into()));
    };
    let out = File::create(log).map_err(|e| LabError::File {
        path: log.to_path_buf(),
        reason: format!("cannot create log: {e}"),
    })?;
    let err = out.try_clone().map_err(|e| LabError::File {
        path: log.to_path_buf(),
        reason: e.to_string(),
    })?;
    let path = which(prog).unwrap_or_else(|| prog.into());
    let child = Command::new(path)
        .args(args)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .process_group(0)
        .spawn()
        .map_err(|source| LabError::Spawn {
            argv: joined,
            source,
        })?;
    let pid = child.id();
    // The child is not waited for: it outlives `lab up` and is stopped by pid in `down`.
    drop(child);
    let start = start_time(pid).unwrap_or(0);
    Ok((pid, start))
}

/// Field 22 (starttime, clock ticks after boot) of /proc/PID/stat, and whether it is a zombie.
fn stat(pid: u32) -> Option<(u64, bool)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: split after the last ')'.
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let state = *fields.first()?;
    let start = fields.get(19)?.parse().ok()?;
    Some((start, state == "Z" || state == "X"))
}

/// The start time of a live process.
pub fn start_time(pid: u32) -> Option<u64> {
    stat(pid).map(|(s, _)| s)
}

/// True when `pid` runs and is the process that started at `start` (0: any).
pub fn alive(pid: u32, start: u64) -> bool {
    match stat(pid) {
        Some((s, zombie)) => !zombie && (start == 0 || s == start),
        None => false,
    }
}

fn signal(pid: u32, sig: i32) {
    let Ok(p) = libc::pid_t::try_from(pid) else {
        return;
    };
    if p <= 1 {
        return;
    }
    // SAFETY: kill() has no memory-safety preconditions; p is a single positive pid.
    unsafe {
        libc::kill(p, sig);
    }
}

fn wait_gone(pid: u32, start: u64, limit: Duration) -> bool {
    let t0 = Instant::now();
    while t0.elapsed() < limit {
        if !alive(pid, start) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    !alive(pid, start)
}

/// Stops the process `pid` that started at `start`: `sig` first, SIGKILL if it has not gone
/// after two seconds. Returns false if it was already gone (or the pid is someone else's now).
pub fn stop(pid: u32, start: u64, sig: i32) -> bool {
    if !alive(pid, start) {
        return false;
    }
    signal(pid, sig);
    if !wait_gone(pid, start, Duration::from_secs(2)) && sig != libc::SIGKILL {
        signal(pid, libc::SIGKILL);
        wait_gone(pid, start, Duration::from_secs(2));
    }
    true
}

/// Waits until `addr` accepts a TCP connection, `limit` at most; gives up at once when the
/// process serving it has died (its log's last line says why).
pub fn wait_port(
    name: &str,
    addr: SocketAddr,
    pid: u32,
    start: u64,
    log: &Path,
    limit: Duration,
) -> Result<(), LabError> {
    let t0 = Instant::now();
    loop {
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return Ok(());
        }
        if !alive(pid, start) {
            return Err(LabError::Target {
                name: name.into(),
                reason: format!("exited before listening on {addr}: {}", last_line(log)),
            });
        }
        if t0.elapsed() > limit {
            return Err(LabError::Target {
                name: name.into(),
                reason: format!(
                    "{addr} did not accept connections within {} s ({})",
                    limit.as_secs(),
                    last_line(log)
                ),
            });
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The pid (and start time) of a server that daemonizes: read from its `pidfile` once the
/// launcher (`pid`) has written it.
pub fn daemon_pid(
    name: &str,
    pid: u32,
    start: u64,
    pidfile: &Path,
    log: &Path,
    limit: Duration,
) -> Result<(u32, u64), LabError> {
    let t0 = Instant::now();
    loop {
        let d = std::fs::read_to_string(pidfile)
            .ok()
            .and_then(|t| t.trim().parse::<u32>().ok());
        if let Some((d, s)) = d.and_then(|d| start_time(d).map(|s| (d, s))) {
            return Ok((d, s));
        }
        let why = if !alive(pid, start) {
            // The launcher is gone: a pid file should be there by now, so look once more.
            std::thread::sleep(Duration::from_millis(100));
            if std::fs::metadata(pidfile).is_ok() && t0.elapsed() < limit {
                continue;
            }
            format!("exited without writing {}", pidfile.display())
        } else if t0.elapsed() > limit {
            format!(
                "no pid in {} after {} s",
                pidfile.display(),
                limit.as_secs()
            )
        } else {
            std::thread::sleep(Duration::from_millis(20));
            continue;
        };
        return Err(LabError::Target {
            name: name.into(),
            reason: format!("{why} ({})", last_line(log)),
        });
    }
}

/// The last non-empty line of a log, for error messages.
pub fn last_line(log: &Path) -> String {
    std::fs::read_to_string(log)
        .ok()
        .and_then(|t| {
            t.lines()
                .rev()
                .map(str::trim)
                .find(|l| !l.is_empty())
                .map(String::from)
        })
        .unwrap_or_else(|| format!("no output in {}", log.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spawn_and_stop_by_pid_and_start_time() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("sleep.log");
        let (pid, start) = spawn(&["sleep".into(), "30".into()], &log).unwrap();
        assert!(start > 0);
        assert!(alive(pid, start));
        // A different start time is a different process: left alone.
        assert!(!stop(pid, start + 1, libc::SIGTERM));
        assert!(alive(pid, start));
        assert!(stop(pid, start, libc::SIGTERM));
        assert!(!alive(pid, start));
        assert!(!stop(pid, start, libc::SIGTERM), "idempotent");
    }

    #[test]
    fn port_wait_notices_a_dead_server() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("x.log");
        let argv: Vec<String> = ["sh", "-c", "echo bind failed >&2; exit 1"]
            .map(String::from)
            .into();
        let (pid, start) = spawn(&argv, &log).unwrap();
        // Loopback port 9 (discard) is not served here; the process exits at once.
        let e = wait_port(
            "x",
            "127.0.0.1:9".parse().unwrap(),
            pid,
            start,
            &log,
            Duration::from_secs(5),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("bind failed") || e.contains("within"), "{e}");
        let _ = stop(pid, start, libc::SIGKILL);
    }

    #[test]
    fn stat_parses_odd_command_names() {
        assert!(start_time(std::process::id()).is_some());
        assert!(start_time(u32::MAX).is_none());
    }
}
