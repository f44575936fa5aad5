//! Errors of the server side (the client reports [`sanbench_io::EngineError`]).

use thiserror::Error;

use crate::wire::WireError;

#[derive(Debug, Error)]
pub enum NbdError {
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    #[error("protocol error from {peer}: {source}")]
    Wire {
        peer: String,
        #[source]
        source: WireError,
    },
    #[error("{peer}: {reason}")]
    Protocol { peer: String, reason: String },
    /// The TLS handshake after `NBD_OPT_STARTTLS` failed (the server logs these).
    #[error("{peer}: TLS handshake failed: {reason}")]
    TlsHandshake { peer: String, reason: String },
    #[error("invalid configuration: {0}")]
    Config(String),
}

impl NbdError {
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        NbdError::Io {
            context: context.into(),
            source,
        }
    }
}
