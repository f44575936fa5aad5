//! The lab's error: what failed, with the command or file it concerned.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// A `--link` specification that does not parse or breaks a rule.
    #[error("--link {spec}: {reason}")]
    Spec { spec: String, reason: String },
    /// A bad `--targets` list or other bad input.
    #[error("{0}")]
    Input(String),
    /// Something the lab needs that this host lacks (root, `ip`, `tc`, `ethtool`, a peer).
    #[error("{0}")]
    Missing(String),
    /// A command (`ip`, `tc`, `ethtool`, `tgtadm`) exited with an error.
    #[error("`{argv}` failed: {stderr}")]
    Command { argv: String, stderr: String },
    /// A command could not be started at all.
    #[error("cannot run `{argv}`: {source}")]
    Spawn {
        argv: String,
        #[source]
        source: std::io::Error,
    },
    /// A target started but its port never accepted a connection, or it died.
    #[error("{name}: {reason}")]
    Target { name: String, reason: String },
    /// The state or lab file.
    #[error("{}: {reason}", path.display())]
    File { path: PathBuf, reason: String },
}

impl LabError {
    /// True for errors the user fixes by changing the command line or the host (exit code 2).
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            LabError::Spec { .. }
                | LabError::Input(_)
                | LabError::Missing(_)
                | LabError::File { .. }
        )
    }
}
