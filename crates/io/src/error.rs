//! Typed errors of the engine crate. The CLI maps `Usage`-like errors to exit code 2 and
//! everything that happens once I/O started to exit code 1.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum EngineError {
    #[error("cannot open {path}: {source}")]
    Open {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot connect to {addr}: {reason}")]
    Connect { addr: String, reason: String },
    #[error("{peer}: protocol error: {reason}")]
    Protocol { peer: String, reason: String },
    #[error("{op} at offset {offset} failed: {source}")]
    Io {
        op: &'static str,
        offset: u64,
        #[source]
        source: std::io::Error,
    },
    #[error("no completion within {secs:.1} s from {peer}: the target is dead or silent")]
    Timeout { peer: String, secs: f64 },
    #[error("connection to {peer} lost: {reason}")]
    Disconnected { peer: String, reason: String },
    /// I/Os that came back from a path with a path-related status (`PATH_ERROR`): the path's
    /// access state no longer serves them (a multipath target takes the path out).
    #[error("{peer}: {ios} I/O(s) came back with a path-related status (the path no longer serves I/O: NVMe ANA state)")]
    PathStatus { peer: String, ios: u64 },
    #[error("{0} is not supported by this engine")]
    Unsupported(&'static str),
    /// Bad input discovered while opening: the CLI exits with code 2.
    #[error("{0}")]
    Invalid(String),
    /// Refusal to write to a device that holds data (CLI exit code 2).
    #[error("{0}")]
    Refused(String),
    #[error("{context}: {source}")]
    Sys {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

impl EngineError {
    /// True when the error means the user's input was wrong (exit code 2) rather than the run
    /// failing (exit code 1).
    pub fn is_usage(&self) -> bool {
        matches!(self, EngineError::Invalid(_) | EngineError::Refused(_))
    }

    pub fn sys(context: impl Into<String>, source: std::io::Error) -> Self {
        EngineError::Sys {
            context: context.into(),
            source,
        }
    }
}
