//! The one place the lab runs host tools (`ip`, `tc`, `ethtool`, `tgtadm`). Everything goes
//! through [`Runner`], so tests can swap in [`Recorder`] and read back every argv the lab
//! would have run, and so a failure always names the exact command.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::error::LabError;

/// An argv: program name first (resolved on the PATH and in the sbin directories).
pub type Argv = Vec<String>;

/// Builds an argv from string pieces.
pub fn argv<I, S>(parts: I) -> Argv
where
    I: IntoIterator<Item = S>,
    S: Into<String>,
{
    parts.into_iter().map(Into::into).collect()
}

/// Runs a command to completion.
pub trait Runner {
    /// Runs `argv`; `Ok(stdout)` when it exits 0, else [`LabError::Command`] with its stderr.
    fn run(&self, argv: &[String]) -> Result<String, LabError>;
}

/// Runs commands on this host.
#[derive(Debug, Default, Clone, Copy)]
pub struct System;

impl Runner for System {
    fn run(&self, argv: &[String]) -> Result<String, LabError> {
        let Some((prog, args)) = argv.split_first() else {
            return Err(LabError::Input("empty command".into()));
        };
        let path = which(prog).unwrap_or_else(|| PathBuf::from(prog));
        let out = Command::new(&path)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map_err(|source| LabError::Spawn {
                argv: argv.join(" "),
                source,
            })?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            let err = String::from_utf8_lossy(&out.stderr);
            let line = err
                .lines()
                .map(str::trim)
                .find(|l| !l.is_empty())
                .unwrap_or("no message")
                .to_string();
            Err(LabError::Command {
                argv: argv.join(" "),
                stderr: format!("{line} ({})", out.status),
            })
        }
    }
}

/// Records every argv and answers with canned output: for tests of what the lab would run.
#[derive(Default)]
pub struct Recorder {
    pub calls: RefCell<Vec<Argv>>,
    /// (argv prefix, stdout) pairs; the first whose prefix matches answers. Default: "".
    pub answers: Vec<(Argv, String)>,
    /// Commands (exact argv) that fail, each with the first line of its stderr, as `ip`
    /// would with "RTNETLINK answers: ...".
    pub fail: Vec<(Argv, String)>,
}

impl Recorder {
    /// A recorder where `argv` fails as `ip` does without the privilege.
    pub fn failing(argv: Argv) -> Recorder {
        Recorder {
            fail: vec![(argv, "RTNETLINK answers: Operation not permitted".into())],
            ..Recorder::default()
        }
    }
}

impl Runner for Recorder {
    fn run(&self, argv: &[String]) -> Result<String, LabError> {
        self.calls.borrow_mut().push(argv.to_vec());
        if let Some((_, err)) = self.fail.iter().find(|(a, _)| a.as_slice() == argv) {
            return Err(LabError::Command {
                argv: argv.join(" "),
                stderr: format!("{err} (exit status: 2)"),
            });
        }
        Ok(self
            .answers
            .iter()
            .find(|(p, _)| argv.starts_with(p))
            .map(|(_, out)| out.clone())
            .unwrap_or_default())
    }
}

/// Where a program is: the PATH first, then the sbin directories (a non-root PATH often
/// lacks them, and `ip`/`tc` live there).
pub fn which(prog: &str) -> Option<PathBuf> {
    if prog.contains('/') {
        let p = PathBuf::from(prog);
        return is_executable(&p).then_some(p);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(PathBuf::from))
        .map(|d| d.join(prog))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// Checks what the lab needs on this host: root, `ip`, `tc`, and `ethtool` when offloads are
/// switched off. The error says exactly what is missing and where to get it.
pub fn preflight(need_ethtool: bool) -> Result<(), LabError> {
    let mut missing = Vec::new();
    // SAFETY: geteuid() has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        missing.push("root (CAP_NET_ADMIN, to create network namespaces; run it with sudo)".into());
    }
    for (prog, pkg) in [("ip", "iproute2"), ("tc", "iproute2")] {
        if which(prog).is_none() {
            missing.push(format!("`{prog}` (package {pkg})"));
        }
    }
    if need_ethtool && which("ethtool").is_none() {
        missing.push("`ethtool` (package ethtool, for offload=off)".into());
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(LabError::Missing(format!(
            "the lab needs {}",
            missing.join(" and ")
        )))
    }
}

/// True when `err` only says the thing to delete is already gone.
pub fn is_gone(err: &LabError) -> bool {
    match err {
        LabError::Command { stderr, .. } => {
            let s = stderr.to_ascii_lowercase();
            s.contains("cannot find device")
                || s.contains("no such file")
                || s.contains("does not exist")
                || s.contains("cannot open network namespace")
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorder_keeps_argv_and_answers_by_prefix() {
        let r = Recorder {
            answers: vec![(argv(["ip", "netns", "list"]), "sblab-a\n".into())],
            ..Recorder::default()
        };
        assert_eq!(r.run(&argv(["ip", "netns", "list"])).unwrap(), "sblab-a\n");
        assert_eq!(r.run(&argv(["tc", "qdisc"])).unwrap(), "");
        assert_eq!(r.calls.borrow().len(), 2);
    }

    #[test]
    fn system_errors_name_the_command() {
        let e = System
            .run(&argv(["sh", "-c", "echo nope >&2; exit 3"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("sh -c") && e.contains("nope"), "{e}");
        let e = System
            .run(&argv(["/nonexistent/prog"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("cannot run"), "{e}");
        assert_eq!(System.run(&argv(["echo", "hi"])).unwrap(), "hi\n");
    }

    #[test]
    fn finds_sbin_tools() {
        assert!(which("sh").is_some());
        assert!(which("no-such-program-sanbench").is_none());
    }
}
