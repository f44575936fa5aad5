//! OpenSSL sessions with pre-shared keys, driven through memory buffers.

use std::io::{self, Read, Write};
use std::path::Path;
use std::sync::Arc;

use openssl::ssl::{
    HandshakeError, MidHandshakeSslStream, Ssl, SslContext, SslMethod, SslStream, SslVerifyMode,
    SslVersion,
};

use super::{load_keys, PskEntry};
use crate::tls::kernel::{Cipher, Keys};
use crate::tls::{Session, TlsError};

/// Ciphertext held unsent before the session takes no more plaintext.
const SEND_LIMIT: usize = 4 << 20;
/// TLS 1.2 suites: what GnuTLS's NORMAL:+PSK:+DHE-PSK:+ECDHE-PSK offers that OpenSSL has.
const TLS12_PSK: &str = "ECDHE-PSK-CHACHA20-POLY1305:DHE-PSK-AES256-GCM-SHA384:\
DHE-PSK-AES128-GCM-SHA256:PSK-AES256-GCM-SHA384:PSK-AES128-GCM-SHA256";

fn setup(e: openssl::error::ErrorStack) -> TlsError {
    TlsError::Setup(e.to_string())
}

fn context(method: SslMethod) -> Result<openssl::ssl::SslContextBuilder, TlsError> {
    let mut b = SslContext::builder(method).map_err(setup)?;
    b.set_min_proto_version(Some(SslVersion::TLS1_2))
        .map_err(setup)?;
    b.set_cipher_list(TLS12_PSK).map_err(setup)?;
    // TLS 1.3 with a callback PSK must use a SHA-256 suite.
    b.set_ciphersuites("TLS_AES_128_GCM_SHA256:TLS_CHACHA20_POLY1305_SHA256")
        .map_err(setup)?;
    b.set_verify(SslVerifyMode::NONE);
    Ok(b)
}

fn copy_key(key: &[u8], out: &mut [u8]) -> Result<usize, openssl::error::ErrorStack> {
    match out.get_mut(..key.len()) {
        Some(dst) => {
            dst.copy_from_slice(key);
            Ok(key.len())
        }
        None => Err(openssl::error::ErrorStack::get()),
    }
}

pub(crate) struct PskClient {
    ctx: SslContext,
}

impl PskClient {
    /// The client's identity and its key from the file's line for `user`.
    pub(crate) fn new(file: &Path, user: &str) -> Result<PskClient, TlsError> {
        let keys = load_keys(file)?;
        let entry = keys
            .into_iter()
            .find(|e| e.identity == user)
            .ok_or_else(|| {
                TlsError::Credentials(format!(
                    "{}: no key for user '{user}' (give it as nbds://USER@HOST)",
                    file.display()
                ))
            })?;
        let mut b = context(SslMethod::tls_client())?;
        let mut id = entry.identity.clone().into_bytes();
        id.push(0);
        b.set_psk_client_callback(move |_ssl, _hint, identity, psk| {
            match identity.get_mut(..id.len()) {
                Some(dst) => dst.copy_from_slice(&id),
                None => return Err(openssl::error::ErrorStack::get()),
            }
            copy_key(&entry.key, psk)
        });
        Ok(PskClient { ctx: b.build() })
    }

    pub(crate) fn session(&self) -> Result<Box<dyn Session>, TlsError> {
        let ssl = Ssl::new(&self.ctx).map_err(setup)?;
        Ok(Box::new(Ossl::start(ssl.connect(Pipe::default()))?))
    }
}

pub(crate) struct PskServer {
    ctx: SslContext,
}

impl PskServer {
    pub(crate) fn new(file: &Path) -> Result<PskServer, TlsError> {
        let keys: Arc<Vec<PskEntry>> = Arc::new(load_keys(file)?);
        let mut b = context(SslMethod::tls_server())?;
        b.set_psk_server_callback(move |_ssl, identity, psk| {
            let id = identity.and_then(|i| std::str::from_utf8(i).ok());
            match keys.iter().find(|e| Some(e.identity.as_str()) == id) {
                Some(e) => copy_key(&e.key, psk),
                // Unknown identity: 0 bytes of key fails the handshake.
                None => Ok(0),
            }
        });
        Ok(PskServer { ctx: b.build() })
    }

    pub(crate) fn session(&self) -> Result<Box<dyn Session>, TlsError> {
        let ssl = Ssl::new(&self.ctx).map_err(setup)?;
        Ok(Box::new(Ossl::start(ssl.accept(Pipe::default()))?))
    }
}

/// The memory "socket" OpenSSL reads ciphertext from and writes ciphertext to.
#[derive(Default)]
struct Pipe {
    inb: Vec<u8>,
    ipos: usize,
    outb: Vec<u8>,
}

impl Read for Pipe {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let avail = &self.inb[self.ipos..];
        if avail.is_empty() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let n = avail.len().min(buf.len());
        buf[..n].copy_from_slice(&avail[..n]);
        self.ipos += n;
        if self.ipos == self.inb.len() {
            self.inb.clear();
            self.ipos = 0;
        }
        Ok(n)
    }
}

impl Write for Pipe {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.outb.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

enum State {
    Mid(MidHandshakeSslStream<Pipe>),
    Done(SslStream<Pipe>),
    Failed,
}

struct Ossl {
    st: State,
    /// An end of stream seen on the socket.
    eof: bool,
    /// The alert of a failed handshake, still to be sent.
    failed_out: Vec<u8>,
}

impl Ossl {
    fn start(r: Result<SslStream<Pipe>, HandshakeError<Pipe>>) -> Result<Ossl, TlsError> {
        let st = match r {
            Ok(s) => State::Done(s),
            Err(HandshakeError::WouldBlock(m)) => State::Mid(m),
            Err(HandshakeError::SetupFailure(e)) => return Err(setup(e)),
            Err(HandshakeError::Failure(m)) => return Err(TlsError::Setup(m.error().to_string())),
        };
        Ok(Ossl {
            st,
            eof: false,
            failed_out: Vec::new(),
        })
    }

    fn pipe(&mut self) -> Option<&mut Pipe> {
        match &mut self.st {
            State::Mid(m) => Some(m.get_mut()),
            State::Done(s) => Some(s.get_mut()),
            State::Failed => None,
        }
    }

    fn pipe_ref(&self) -> Option<&Pipe> {
        match &self.st {
            State::Mid(m) => Some(m.get_ref()),
            State::Done(s) => Some(s.get_ref()),
            State::Failed => None,
        }
    }
}

fn failed() -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, "TLS session failed")
}

impl Session for Ossl {
    fn read_tls(&mut self, rd: &mut dyn Read) -> io::Result<usize> {
        let mut buf = [0u8; 16 * 1024];
        let n = rd.read(&mut buf)?;
        if n == 0 {
            self.eof = true;
        }
        let p = self.pipe().ok_or_else(failed)?;
        p.inb.extend_from_slice(&buf[..n]);
        Ok(n)
    }

    fn process(&mut self) -> Result<(), String> {
        if let State::Mid(_) = self.st {
            let State::Mid(m) = std::mem::replace(&mut self.st, State::Failed) else {
                unreachable!()
            };
            match m.handshake() {
                Ok(s) => self.st = State::Done(s),
                Err(HandshakeError::WouldBlock(m)) => self.st = State::Mid(m),
                Err(HandshakeError::Failure(mut m)) => {
                    // Keep the alert OpenSSL wrote, so that it reaches the peer.
                    self.failed_out = std::mem::take(&mut m.get_mut().outb);
                    return Err(m.error().to_string());
                }
                Err(HandshakeError::SetupFailure(e)) => return Err(e.to_string()),
            }
        }
        Ok(())
    }

    fn read_plain(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let eof = self.eof;
        match &mut self.st {
            State::Done(s) => match s.read(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock && eof => {
                    Err(io::ErrorKind::UnexpectedEof.into())
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => Err(e),
                Err(e) => Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("TLS: {e}"),
                )),
                r => r,
            },
            _ => Err(io::ErrorKind::WouldBlock.into()),
        }
    }

    fn write_plain(&mut self, data: &[u8]) -> io::Result<usize> {
        match &mut self.st {
            State::Done(s) if s.get_ref().outb.len() >= SEND_LIMIT => Ok(0),
            State::Done(s) => s.write(data),
            _ => Err(failed()),
        }
    }

    fn wants_write(&self) -> bool {
        !self.failed_out.is_empty() || self.pipe_ref().is_some_and(|p| !p.outb.is_empty())
    }

    fn write_tls(&mut self, wr: &mut dyn Write) -> io::Result<usize> {
        let out = if self.failed_out.is_empty() {
            &mut self.pipe().ok_or_else(failed)?.outb
        } else {
            &mut self.failed_out
        };
        let n = wr.write(out)?;
        out.drain(..n);
        Ok(n)
    }

    fn is_handshaking(&self) -> bool {
        matches!(self.st, State::Mid(_))
    }

    fn has_buffered(&self) -> bool {
        match &self.st {
            State::Done(s) => s.ssl().pending() > 0 || !s.get_ref().inb.is_empty(),
            _ => false,
        }
    }

    fn close_notify(&mut self) {
        if let State::Done(s) = &mut self.st {
            let _ = s.shutdown();
        }
    }

    fn describe(&self) -> String {
        match &self.st {
            State::Done(s) => {
                let ssl = s.ssl();
                let c = ssl.current_cipher().map_or("", |c| c.name());
                format!("{} {c} (PSK)", ssl.version_str())
            }
            _ => "TLS (PSK)".into(),
        }
    }

    fn kernel_suite(&self) -> Result<(u16, Cipher), String> {
        Err("PSK sessions (OpenSSL over memory buffers) keep their records in user space".into())
    }

    fn extract(self: Box<Self>) -> Result<(Keys, Keys), String> {
        Err("no key export from OpenSSL sessions".into())
    }
}
