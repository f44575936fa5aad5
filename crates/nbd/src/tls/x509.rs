//! X.509 through rustls with the ring provider: loading nbdkit's / libnbd's certificate
//! directories, and a rustls connection as a [`Session`].

use std::io::{self, Read};
use std::path::Path;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{
    CertificateDer, CertificateRevocationListDer, PrivateKeyDer, ServerName, UnixTime,
};
use rustls::server::WebPkiClientVerifier;
use rustls::{DigitallySignedStruct, SignatureScheme};

use super::kernel::{Cipher, Keys, TLS12, TLS13};
use super::{ClientTls, ConnectorKind, Session, TlsError};

/// Ciphertext a session may hold unsent before it takes no more plaintext.
const SEND_LIMIT: usize = 4 << 20;
/// Where Debian keeps the system's trusted CAs (used when no certificate directory is given).
const SYSTEM_CA: &str = "/etc/ssl/certs/ca-certificates.crt";

/// ring's cipher suites, or those of them named in `SANBENCH_TLS_SUITES` (comma-separated,
/// as rustls spells them: `TLS13_CHACHA20_POLY1305_SHA256`,
/// `TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256`, ...): tests choose a version and cipher with
/// it (the kernel TLS guest test runs TLS 1.2 and ChaCha20 besides the default).
fn provider() -> Arc<CryptoProvider> {
    let mut p = rustls::crypto::ring::default_provider();
    if let Some(names) = std::env::var_os("SANBENCH_TLS_SUITES") {
        let names = names.to_string_lossy();
        p.cipher_suites.retain(|s| {
            let name = format!("{:?}", s.suite());
            names.split(',').any(|n| n.trim() == name)
        });
    }
    Arc::new(p)
}

fn certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bad = |e: &dyn std::fmt::Display| TlsError::Credentials(format!("{}: {e}", path.display()));
    let v: Vec<_> = CertificateDer::pem_file_iter(path)
        .map_err(|e| bad(&e))?
        .collect::<Result<_, _>>()
        .map_err(|e| bad(&e))?;
    if v.is_empty() {
        return Err(bad(&"no PEM certificate in it"));
    }
    Ok(v)
}

fn key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_file(path)
        .map_err(|e| TlsError::Credentials(format!("{}: {e}", path.display())))
}

fn setup(e: rustls::Error) -> TlsError {
    TlsError::Setup(e.to_string())
}

/// The CAs of DIR/ca-cert.pem (or another bundle) as a root store.
fn roots(ca: &Path) -> Result<rustls::RootCertStore, TlsError> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in certs(ca)? {
        roots
            .add(cert)
            .map_err(|e| TlsError::Credentials(format!("{}: {e}", ca.display())))?;
    }
    Ok(roots)
}

/// The certificate revocation lists of DIR/ca-crl.pem, optional as in nbdkit, qemu and libnbd
/// (none when the file is absent).
fn crls(dir: &Path) -> Result<Vec<CertificateRevocationListDer<'static>>, TlsError> {
    let path = dir.join("ca-crl.pem");
    if !path.exists() {
        return Ok(Vec::new());
    }
    let bad = |e: &dyn std::fmt::Display| TlsError::Credentials(format!("{}: {e}", path.display()));
    let v: Vec<_> = CertificateRevocationListDer::pem_file_iter(&path)
        .map_err(|e| bad(&e))?
        .collect::<Result<_, _>>()
        .map_err(|e| bad(&e))?;
    if v.is_empty() {
        return Err(bad(&"no PEM certificate revocation list in it"));
    }
    Ok(v)
}

/// A server's configuration from DIR/server-cert.pem and DIR/server-key.pem. With
/// `verify_peer` (nbdkit's `--tls-verify-peer`), every client must present a certificate
/// that DIR/ca-cert.pem signed and DIR/ca-crl.pem (when present) does not revoke, else its
/// handshake fails. As with GnuTLS, a certificate no list speaks for is not refused for that.
pub(super) fn server(dir: &Path, verify_peer: bool) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let chain = certs(&dir.join("server-cert.pem"))?;
    let key = key(&dir.join("server-key.pem"))?;
    let builder = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(setup)?;
    let builder = if verify_peer {
        let ca = dir.join("ca-cert.pem");
        let verifier =
            WebPkiClientVerifier::builder_with_provider(Arc::new(roots(&ca)?), provider())
                .with_crls(crls(dir)?)
                .allow_unknown_revocation_status()
                .build()
                .map_err(|e| TlsError::Credentials(format!("{}: {e}", ca.display())))?;
        builder.with_client_cert_verifier(verifier)
    } else {
        builder.with_no_client_auth()
    };
    let mut cfg = builder
        .with_single_cert(chain, key)
        .map_err(|e| TlsError::Credentials(format!("{}: {e}", dir.display())))?;
    // The kernel's TLS takes the keys after the handshake (kernel.rs).
    cfg.enable_secret_extraction = true;
    // NBD never resumes a session; a ticket would only be one more record for a client whose
    // kernel already has the keys to take as a control message.
    cfg.send_tls13_tickets = 0;
    Ok(Arc::new(cfg))
}

/// A client's configuration: DIR/ca-cert.pem (else the system's CAs) and DIR/ca-crl.pem when
/// present to verify the server, and DIR/client-cert.pem with DIR/client-key.pem when
/// present, as libnbd does.
pub(super) fn client(dir: Option<&Path>, c: &ClientTls) -> Result<ConnectorKind, TlsError> {
    let builder = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(setup)?;
    let builder = if c.verify_peer {
        let ca = dir.map_or_else(|| SYSTEM_CA.into(), |d| d.join("ca-cert.pem"));
        let revoked = dir.map_or_else(|| Ok(Vec::new()), crls)?;
        let verifier =
            WebPkiServerVerifier::builder_with_provider(Arc::new(roots(&ca)?), provider())
                .with_crls(revoked)
                .allow_unknown_revocation_status()
                .build()
                .map_err(|e| TlsError::Credentials(format!("{}: {e}", ca.display())))?;
        builder.with_webpki_verifier(verifier)
    } else {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyServer(provider())))
    };
    let client_cert = dir
        .map(|d| (d.join("client-cert.pem"), d.join("client-key.pem")))
        .filter(|(c, k)| c.exists() && k.exists());
    let mut config = match client_cert {
        Some((c, k)) => builder
            .with_client_auth_cert(certs(&c)?, key(&k)?)
            .map_err(|e| TlsError::Credentials(format!("{}: {e}", c.display())))?,
        None => builder.with_no_client_auth(),
    };
    config.enable_secret_extraction = true;
    let name = ServerName::try_from(c.hostname.clone())
        .map_err(|_| TlsError::Credentials(format!("'{}' is not a host name", c.hostname)))?;
    Ok(ConnectorKind::X509 {
        config: Arc::new(config),
        name,
    })
}

pub(super) fn client_session(
    config: &Arc<rustls::ClientConfig>,
    name: ServerName<'static>,
) -> Result<Box<dyn Session>, TlsError> {
    let c = rustls::ClientConnection::new(config.clone(), name).map_err(setup)?;
    Ok(Box::new(Rustls::new(c.into())))
}

pub(super) fn server_session(
    config: &Arc<rustls::ServerConfig>,
) -> Result<Box<dyn Session>, TlsError> {
    let c = rustls::ServerConnection::new(config.clone()).map_err(setup)?;
    Ok(Box::new(Rustls::new(c.into())))
}

struct Rustls {
    conn: rustls::Connection,
    /// Decrypted bytes not yet read (from the last `process_new_packets`).
    plain: usize,
}

impl Rustls {
    fn new(mut conn: rustls::Connection) -> Rustls {
        conn.set_buffer_limit(Some(SEND_LIMIT));
        Rustls { conn, plain: 0 }
    }
}

impl Session for Rustls {
    fn read_tls(&mut self, rd: &mut dyn Read) -> io::Result<usize> {
        self.conn.read_tls(rd)
    }

    fn process(&mut self) -> Result<(), String> {
        let st = self.conn.process_new_packets().map_err(|e| e.to_string())?;
        self.plain = st.plaintext_bytes_to_read();
        Ok(())
    }

    fn read_plain(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.conn.reader().read(buf)?;
        self.plain = self.plain.saturating_sub(n);
        Ok(n)
    }

    fn write_plain(&mut self, data: &[u8]) -> io::Result<usize> {
        io::Write::write(&mut self.conn.writer(), data)
    }

    fn wants_write(&self) -> bool {
        self.conn.wants_write()
    }

    fn write_tls(&mut self, wr: &mut dyn io::Write) -> io::Result<usize> {
        self.conn.write_tls(wr)
    }

    fn is_handshaking(&self) -> bool {
        self.conn.is_handshaking()
    }

    fn has_buffered(&self) -> bool {
        self.plain > 0
    }

    fn close_notify(&mut self) {
        self.conn.send_close_notify();
    }

    fn describe(&self) -> String {
        let v = self
            .conn
            .protocol_version()
            .map_or("TLS".into(), |v| format!("{v:?}"));
        let s = self
            .conn
            .negotiated_cipher_suite()
            .map_or(String::new(), |s| format!(" {:?}", s.suite()));
        format!("{v}{s} (X.509)")
    }

    fn kernel_suite(&self) -> Result<(u16, Cipher), String> {
        use rustls::CipherSuite as S;
        let v = match self.conn.protocol_version() {
            Some(rustls::ProtocolVersion::TLSv1_3) => TLS13,
            Some(rustls::ProtocolVersion::TLSv1_2) => TLS12,
            v => return Err(format!("the kernel's TLS has no {v:?}")),
        };
        let s = self
            .conn
            .negotiated_cipher_suite()
            .ok_or("no cipher suite negotiated")?
            .suite();
        let c = match s {
            S::TLS13_AES_128_GCM_SHA256
            | S::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
            | S::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 => Cipher::Aes128Gcm,
            S::TLS13_AES_256_GCM_SHA384
            | S::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384
            | S::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384 => Cipher::Aes256Gcm,
            S::TLS13_CHACHA20_POLY1305_SHA256
            | S::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256
            | S::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256 => Cipher::Chacha20Poly1305,
            s => return Err(format!("the kernel's TLS has no {s:?}")),
        };
        Ok((v, c))
    }

    fn extract(self: Box<Self>) -> Result<(Keys, Keys), String> {
        let s = self
            .conn
            .dangerous_extract_secrets()
            .map_err(|e| e.to_string())?;
        Ok((keys(s.tx)?, keys(s.rx)?))
    }
}

fn keys((seq, secrets): (u64, rustls::ConnectionTrafficSecrets)) -> Result<Keys, String> {
    use rustls::ConnectionTrafficSecrets as T;
    let (cipher, key, iv) = match secrets {
        T::Aes128Gcm { key, iv } => (Cipher::Aes128Gcm, key, iv),
        T::Aes256Gcm { key, iv } => (Cipher::Aes256Gcm, key, iv),
        T::Chacha20Poly1305 { key, iv } => (Cipher::Chacha20Poly1305, key, iv),
        _ => return Err("a cipher the kernel's TLS does not take".into()),
    };
    Ok(Keys {
        cipher,
        key: key.as_ref().to_vec(),
        iv: iv
            .as_ref()
            .try_into()
            .map_err(|_| "an IV of other than 12 bytes".to_string())?,
        seq,
    })
}

/// `tls-verify-peer=false`: any certificate is accepted, signatures are still checked (the
/// connection is encrypted, but to whoever answered).
#[derive(Debug)]
struct AnyServer(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyServer {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
