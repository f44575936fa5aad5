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
            CliError::Failed(e) => {
                // A cause its parent's message already spells out (a thiserror "{source}"
                // that is also the #[source]) is not repeated.
                let mut msg = e.to_string();
                for cause in e.chain().skip(1) {
                    let c = cause.to_string();
                    if !msg.contains(&c) {
                        msg.push_str(": ");
                        msg.push_str(&c);
                    }
                }
                msg.replace('\n', " ")
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cause_already_in_the_message_is_not_repeated() {
        let e = RunError {
            target: "nvme+tcp://h/n".into(),
            worker: 0,
            error: EngineError::Disconnected {
                peer: "h:4420".into(),
                reason: "Connection reset by peer".into(),
            },
        };
        let m = CliError::Failed(anyhow::Error::new(e).context("the run failed")).message();
        assert_eq!(
            m,
            "the run failed: nvme+tcp://h/n (worker 0): connection to h:4420 lost: \
             Connection reset by peer"
        );
    }
}
