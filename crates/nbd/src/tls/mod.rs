//! NBD over TLS (proto.md "TLS support"): credentials, the two TLS libraries behind one
//! [`Session`] trait, and [`Tls`], a session driven over a socket's file descriptor.
//!
//! * X.509 through rustls (ring provider, pure Rust, in every build), with nbdkit's and
//!   libnbd's directory layout: `ca-cert.pem`, `server-cert.pem`, `server-key.pem`,
//!   `client-cert.pem`, `client-key.pem` ([`x509`]).
//! * Pre-shared keys (GnuTLS's psktool file, `username:hexkey` lines) through OpenSSL behind the
//!   `tls-psk` feature ([`psk`]): rustls has no PSK cipher suites.
//!
//! Both libraries are driven as byte engines, never given the socket: ciphertext comes in by
//! `read_tls`, goes out by `write_tls`, plaintext in and out beside it. So the connection code
//! keeps its own socket handling (timeouts, `MSG_DONTWAIT`, polling both directions to avoid a
//! send/receive deadlock), and a plaintext connection carries no TLS object at all: its data
//! path is unchanged (`Option<Tls>` is `None`, one branch per system call).

mod kernel;
mod stream;
mod x509;

pub mod psk;

pub use kernel::{available as kernel_tls_available, KtlsMode, Records};

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use thiserror::Error;

pub(crate) use kernel::{close_notify, control_record, Control};
pub(crate) use stream::{kernel_recv, Handover, Tls, Wait};

/// TLS problems: credentials that cannot be loaded (bad input) or a failed handshake.
#[derive(Debug, Error)]
pub enum TlsError {
    /// A credential file is missing or does not parse.
    #[error("TLS credentials: {0}")]
    Credentials(String),
    /// Pre-shared keys were asked for in a build without them.
    #[error(
        "TLS with pre-shared keys needs sanbench built with `--features tls-psk` (OpenSSL); \
         X.509 certificates work in every build"
    )]
    PskNotBuilt,
    #[error("TLS set-up: {0}")]
    Setup(String),
    /// Client certificates were asked for with pre-shared keys.
    #[error(
        "verifying client certificates needs X.509 credentials (a certificate directory with \
         ca-cert.pem); a pre-shared key already authenticates the client"
    )]
    VerifyPeerNeedsX509,
}

/// `--tls` of a server (nbdkit's `--tls=off|on|require`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlsMode {
    /// No TLS: `NBD_OPT_STARTTLS` is answered `NBD_REP_ERR_UNSUP`.
    Off,
    /// TLS offered: a client may upgrade with `NBD_OPT_STARTTLS` or stay in plaintext.
    On,
    /// TLS required: before `NBD_OPT_STARTTLS` every option but `NBD_OPT_ABORT` is answered
    /// `NBD_REP_ERR_TLS_REQD` and `NBD_OPT_EXPORT_NAME` closes the connection.
    Require,
}

impl std::str::FromStr for TlsMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "off" => Ok(TlsMode::Off),
            "on" => Ok(TlsMode::On),
            "require" => Ok(TlsMode::Require),
            _ => Err(format!("'{s}' is not a TLS mode (off, on, require)")),
        }
    }
}

/// Where a side's credentials come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Credentials {
    /// A directory in nbdkit's / libnbd's layout (X.509).
    Certificates(PathBuf),
    /// A psktool key file (`username:hexkey` per line).
    Psk(PathBuf),
}

/// What a client asked for with `nbds://` and libnbd's URI keys.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientTls {
    /// `tls-certificates=DIR` or `tls-psk-file=FILE`; None: the system's CA bundle.
    pub credentials: Option<Credentials>,
    /// `tls-verify-peer=false` accepts any server certificate (X.509 only).
    pub verify_peer: bool,
    /// The name the server's certificate must carry (`tls-hostname=`, else the URI's host).
    pub hostname: String,
    /// The PSK identity (`nbds://USER@HOST`, else the login name).
    pub username: Option<String>,
    /// `ktls=auto|off`: whether the kernel may make the records after the handshake.
    pub ktls: KtlsMode,
}

/// A client's loaded credentials: every connection of a target shares them.
#[derive(Clone)]
pub struct Connector {
    inner: Arc<ConnectorKind>,
    ktls: KtlsMode,
}

enum ConnectorKind {
    X509 {
        config: Arc<rustls::ClientConfig>,
        name: rustls::pki_types::ServerName<'static>,
    },
    #[cfg(feature = "tls-psk")]
    Psk(psk::PskClient),
}

impl fmt::Debug for Connector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match *self.inner {
            ConnectorKind::X509 { .. } => "Connector(X.509)",
            #[cfg(feature = "tls-psk")]
            ConnectorKind::Psk(_) => "Connector(PSK)",
        })
    }
}

impl Connector {
    /// Loads the client's credentials (once per target).
    pub fn new(c: &ClientTls) -> Result<Connector, TlsError> {
        let kind = match &c.credentials {
            Some(Credentials::Psk(file)) => psk_client(c, file)?,
            Some(Credentials::Certificates(dir)) => x509::client(Some(dir), c)?,
            None => x509::client(None, c)?,
        };
        Ok(Connector {
            inner: Arc::new(kind),
            ktls: c.ktls,
        })
    }

    pub(crate) fn ktls(&self) -> KtlsMode {
        self.ktls
    }

    pub(crate) fn is_psk(&self) -> bool {
        !matches!(*self.inner, ConnectorKind::X509 { .. })
    }

    pub(crate) fn session(&self) -> Result<Box<dyn Session>, TlsError> {
        match &*self.inner {
            ConnectorKind::X509 { config, name } => x509::client_session(config, name.clone()),
            #[cfg(feature = "tls-psk")]
            ConnectorKind::Psk(p) => p.session(),
        }
    }
}

#[cfg(feature = "tls-psk")]
fn psk_client(c: &ClientTls, file: &std::path::Path) -> Result<ConnectorKind, TlsError> {
    let user = match &c.username {
        Some(u) => u.clone(),
        None => psk::login_name().ok_or_else(|| {
            TlsError::Credentials("no PSK identity: give it as nbds://USER@HOST".into())
        })?,
    };
    Ok(ConnectorKind::Psk(psk::PskClient::new(file, &user)?))
}

#[cfg(not(feature = "tls-psk"))]
fn psk_client(_: &ClientTls, _: &std::path::Path) -> Result<ConnectorKind, TlsError> {
    Err(TlsError::PskNotBuilt)
}

/// A server's loaded credentials.
#[derive(Clone)]
pub struct Acceptor {
    inner: Arc<AcceptorKind>,
}

enum AcceptorKind {
    X509(Arc<rustls::ServerConfig>),
    #[cfg(feature = "tls-psk")]
    Psk(psk::PskServer),
}

impl fmt::Debug for Acceptor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match *self.inner {
            AcceptorKind::X509(_) => "Acceptor(X.509)",
            #[cfg(feature = "tls-psk")]
            AcceptorKind::Psk(_) => "Acceptor(PSK)",
        })
    }
}

impl Acceptor {
    /// Loads the server's credentials (once, before listening). `verify_peer` (nbdkit's
    /// `--tls-verify-peer`) makes every client present a certificate signed by the
    /// directory's `ca-cert.pem`: X.509 only, since a pre-shared key already authenticates
    /// the client.
    pub fn new(c: &Credentials, verify_peer: bool) -> Result<Acceptor, TlsError> {
        let kind = match c {
            Credentials::Certificates(dir) => AcceptorKind::X509(x509::server(dir, verify_peer)?),
            Credentials::Psk(_) if verify_peer => return Err(TlsError::VerifyPeerNeedsX509),
            #[cfg(feature = "tls-psk")]
            Credentials::Psk(file) => AcceptorKind::Psk(psk::PskServer::new(file)?),
            #[cfg(not(feature = "tls-psk"))]
            Credentials::Psk(_) => return Err(TlsError::PskNotBuilt),
        };
        Ok(Acceptor {
            inner: Arc::new(kind),
        })
    }

    pub(crate) fn session(&self) -> Result<Box<dyn Session>, TlsError> {
        match &*self.inner {
            AcceptorKind::X509(config) => x509::server_session(config),
            #[cfg(feature = "tls-psk")]
            AcceptorKind::Psk(p) => p.session(),
        }
    }
}

/// One TLS connection as a byte engine (rustls and OpenSSL alike).
pub(crate) trait Session: Send {
    /// Takes ciphertext from `rd` (one read); `Ok(0)` at end of stream.
    fn read_tls(&mut self, rd: &mut dyn std::io::Read) -> std::io::Result<usize>;
    /// Processes the ciphertext taken in: handshake steps, decryption. Err: the TLS error
    /// (a bad record, an alert from the peer, a failed handshake).
    fn process(&mut self) -> Result<(), String>;
    /// Decrypted bytes; `WouldBlock` when none are buffered, `Ok(0)` after close_notify.
    fn read_plain(&mut self, buf: &mut [u8]) -> std::io::Result<usize>;
    /// Takes plaintext to encrypt; fewer bytes (or 0) when its output buffer is full.
    fn write_plain(&mut self, data: &[u8]) -> std::io::Result<usize>;
    fn wants_write(&self) -> bool;
    /// Writes ciphertext to `wr` (one write).
    fn write_tls(&mut self, wr: &mut dyn std::io::Write) -> std::io::Result<usize>;
    fn is_handshaking(&self) -> bool;
    /// Whether decrypted bytes (or undecrypted input) wait inside the session.
    fn has_buffered(&self) -> bool;
    fn close_notify(&mut self);
    /// Protocol version and cipher suite, for the result's parameters.
    fn describe(&self) -> String;
    /// The protocol version and cipher as the kernel's TLS names them; Err: why this session
    /// cannot hand its records to the kernel.
    fn kernel_suite(&self) -> Result<(u16, kernel::Cipher), String>;
    /// The traffic keys and sequence numbers, (tx, rx); the session is gone after this.
    fn extract(self: Box<Self>) -> Result<(kernel::Keys, kernel::Keys), String>;
}

#[cfg(all(test, not(feature = "tls-psk")))]
mod tests {
    use super::*;

    /// Without the feature, PSK is refused up front with the fix in the message.
    #[test]
    fn psk_needs_the_feature() {
        let e = Acceptor::new(&Credentials::Psk("/nonexistent".into()), false).unwrap_err();
        assert!(e.to_string().contains("--features tls-psk"), "{e}");
        let c = ClientTls {
            credentials: Some(Credentials::Psk("/nonexistent".into())),
            verify_peer: true,
            hostname: "localhost".into(),
            username: Some("u".into()),
            ktls: KtlsMode::Auto,
        };
        let e = Connector::new(&c).unwrap_err();
        assert!(e.to_string().contains("--features tls-psk"), "{e}");
    }
}
