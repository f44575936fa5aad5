//! Typed errors of the monitor crate.
//!
//! Monitors run beside a benchmark: a missing or unreadable file must never abort the run or turn
//! into a made-up figure. Callers therefore usually convert an error into a `note` in the report
//! (see [`MonitorError::note`]) and leave the figure as `None`.

use std::path::{Path, PathBuf};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum MonitorError {
    /// A procfs/sysfs/device file could not be opened or read.
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A file was read but its content is not what the kernel documents.
    #[error("{path}: cannot parse: {reason}")]
    Parse { path: String, reason: String },
    /// An external command (ipmitool, ethtool, a power command) failed or printed nonsense.
    #[error("command `{cmd}` failed: {reason}")]
    Command { cmd: String, reason: String },
    /// A source exists in principle but is not usable here (no meter, no BMC, no RAPL).
    #[error("{0}")]
    Unavailable(String),
    /// Bad configuration from the user (CLI exit code 2).
    #[error("{0}")]
    Invalid(String),
    #[error("{context}: {source}")]
    Sys {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

impl MonitorError {
    pub fn read(path: &Path, source: std::io::Error) -> Self {
        MonitorError::Read {
            path: path.to_path_buf(),
            source,
        }
    }

    pub fn parse(path: impl AsRef<Path>, reason: impl Into<String>) -> Self {
        MonitorError::Parse {
            path: path.as_ref().display().to_string(),
            reason: reason.into(),
        }
    }

    pub fn sys(context: impl Into<String>, source: std::io::Error) -> Self {
        MonitorError::Sys {
            context: context.into(),
            source,
        }
    }

    /// True when the user's configuration is wrong (exit code 2) rather than the host lacking
    /// something.
    pub fn is_usage(&self) -> bool {
        matches!(self, MonitorError::Invalid(_))
    }

    /// One line for a report's `note` field, with a hint where the cause is well known.
    pub fn note(&self) -> String {
        match self {
            MonitorError::Read { path, source }
                if source.kind() == std::io::ErrorKind::PermissionDenied =>
            {
                let hint = if path.ends_with("energy_uj") {
                    " (RAPL energy_uj is readable by root only since Linux 5.10, CVE-2020-8694: \
                     run as root or grant read access)"
                } else {
                    " (permission denied: run as root or grant read access)"
                };
                format!("cannot read {}{hint}", path.display())
            }
            other => other.to_string(),
        }
    }
}

pub type Result<T, E = MonitorError> = std::result::Result<T, E>;
