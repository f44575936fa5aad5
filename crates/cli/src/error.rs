//! The CLI's error: a one-line message and the exit code it maps to.

use sanbench_engine::{EngineError, RunError};

#[derive(Debug)]
pub enum CliError {
    /// Bad usage or input: exit code 2.
    Usage(String),
    /// The run (or the command) failed: exit code 1.
    Failed(anyhow::Error),
    /// The run completed but data did not verify: exit code 3.
    Unverified(String),
}

impl CliError {
    pub fn code(&self) -> u8 {
        match self {
            CliError::Usage(_) => 2,
            CliError::Failed(_) => 1,
            CliError::Unverified(_) => 3,
        }
    }

    /// One line: the error and its causes, joined.
    pub fn message(&self) -> String {
        match self {
            CliError::Usage(m) | CliError::Unverified(m) => m.replace('\n', " "),
            CliError::Failed(e) => format!("{e:#}").replace('\n', " "),
        }
    }
}

impl From<EngineError> for CliError {
    fn from(e: EngineError) -> Self {
        if e.is_usage() {
            CliError::Usage(e.to_string())
        } else {
            CliError::Failed(e.into())
        }
    }
}

impl From<RunError> for CliError {
    fn from(e: RunError) -> Self {
        if e.is_usage() {
            CliError::Usage(e.error.to_string())
        } else {
            CliError::Failed(e.into())
        }
    }
}

impl From<anyhow::Error> for CliError {
    fn from(e: anyhow::Error) -> Self {
        CliError::Failed(e)
    }
}

pub fn usage(msg: impl Into<String>) -> CliError {
    CliError::Usage(msg.into())
}
