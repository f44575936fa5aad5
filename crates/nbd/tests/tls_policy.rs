//! The server's TLS policy in plaintext, byte by byte (proto.md "TLS support"): with TLS
//! required, every option but STARTTLS and ABORT is answered `NBD_REP_ERR_TLS_REQD` and
//! `NBD_OPT_EXPORT_NAME` ends the connection; STARTTLS with data is invalid; bytes sent behind
//! STARTTLS before the TLS handshake are refused; with TLS off STARTTLS is unsupported, with
//! TLS on plaintext options are served. (The handshakes themselves are tested against libnbd,
//! nbdkit and qemu-nbd in crates/cli/tests/nbd_tls_*.rs.)

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::{require, OurServer};
use sanbench_nbd::server::{Credentials, TlsMode};
use sanbench_nbd::wire::handshake::*;
use sanbench_nbd::wire::Parsed;
use sanbench_nbd::ServerConfig;

/// A server certificate and key (self-signed) in nbdkit's layout.
fn certs(dir: &Path) {
    require("openssl", "openssl");
    let st = Command::new("openssl")
        .current_dir(dir)
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt"])
        .args(["ec_paramgen_curve:prime256v1", "-nodes", "-days", "2"])
        .args(["-keyout", "server-key.pem", "-out", "server-cert.pem"])
        .args([
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost",
        ])
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
}

fn server(mode: TlsMode, dir: &Path) -> OurServer {
    let mut cfg = ServerConfig::ram("127.0.0.1:0".parse().unwrap(), 1 << 20);
    cfg.tls = mode;
    if mode != TlsMode::Off {
        cfg.tls_credentials = Some(Credentials::Certificates(dir.to_path_buf()));
    }
    OurServer::start(cfg)
}

/// Connected past the greeting, client flags sent.
fn connect(addr: SocketAddr) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut g = [0u8; 18];
    s.read_exact(&mut g).unwrap();
    let mut out = Vec::new();
    encode_client_flags(cflags::FIXED_NEWSTYLE | cflags::NO_ZEROES, &mut out);
    s.write_all(&out).unwrap();
    s
}

fn send(s: &mut TcpStream, o: ClientOption) {
    let mut out = Vec::new();
    o.encode(&mut out);
    s.write_all(&out).unwrap();
}

/// The next `n` option replies.
fn replies(s: &mut TcpStream, n: usize) -> Vec<OptionReply> {
    let (mut buf, mut out) = (Vec::new(), Vec::new());
    while out.len() < n {
        if let Parsed::Done { value, len } = OptionReply::decode(&buf).unwrap() {
            buf.drain(..len);
            out.push(value);
            continue;
        }
        let mut b = [0u8; 4096];
        let got = s.read(&mut b).unwrap();
        assert!(got > 0, "server closed instead of replying");
        buf.extend_from_slice(&b[..got]);
    }
    out
}

fn reply(s: &mut TcpStream) -> OptionReply {
    replies(s, 1).remove(0)
}

fn error_code(r: &OptionReply) -> u32 {
    match &r.body {
        ReplyBody::Error { code, .. } => *code,
        b => panic!("expected an error reply, got {b:?}"),
    }
}

/// True when the server closed the connection (EOF or reset) within the timeout.
fn closed(s: &mut TcpStream) -> bool {
    let mut b = [0u8; 256];
    loop {
        match s.read(&mut b) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) => return e.kind() == std::io::ErrorKind::ConnectionReset,
        }
    }
}

fn starttls(data: Vec<u8>) -> ClientOption {
    ClientOption::Other {
        option: opt::STARTTLS,
        data,
    }
}

#[test]
#[cfg_attr(not(feature = "interop"), ignore = "interop tier: needs openssl")]
fn require_answers_tls_reqd_before_starttls() {
    let t = tempfile::tempdir().unwrap();
    certs(t.path());
    let srv = server(TlsMode::Require, t.path());
    let mut s = connect(srv.addr);
    let go = GoRequest {
        name: String::new(),
        requests: vec![],
    };
    for o in [
        ClientOption::List,
        ClientOption::StructuredReply,
        ClientOption::Info(go.clone()),
        ClientOption::Go(go),
    ] {
        let n = o.number();
        send(&mut s, o);
        let r = reply(&mut s);
        assert_eq!(r.option, n);
        assert_eq!(error_code(&r), rep::ERR_TLS_REQD, "option {n}");
    }
    // STARTTLS with data is malformed; the connection goes on.
    send(&mut s, starttls(vec![1]));
    assert_eq!(error_code(&reply(&mut s)), rep::ERR_INVALID);
    // ABORT is allowed in plaintext.
    send(&mut s, ClientOption::Abort);
    assert!(matches!(reply(&mut s).body, ReplyBody::Ack));
    assert!(closed(&mut s));

    // EXPORT_NAME has no error reply: the server hangs up.
    let mut s = connect(srv.addr);
    send(&mut s, ClientOption::ExportName(String::new()));
    assert!(closed(&mut s), "EXPORT_NAME before STARTTLS was served");
}

/// A TLS ClientHello, as a client that jumped the gun would send it.
fn client_hello() -> Vec<u8> {
    let cfg = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(rustls::RootCertStore::empty())
    .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let mut c = rustls::ClientConnection::new(std::sync::Arc::new(cfg), name).unwrap();
    let mut out = Vec::new();
    while c.wants_write() {
        c.write_tls(&mut out).unwrap();
    }
    out
}

#[test]
#[cfg_attr(not(feature = "interop"), ignore = "interop tier: needs openssl")]
fn bytes_behind_starttls_are_refused() {
    let t = tempfile::tempdir().unwrap();
    certs(t.path());
    let srv = server(TlsMode::Require, t.path());
    let mut s = connect(srv.addr);
    // STARTTLS and the ClientHello in one write: the server must not take bytes that were
    // sent before it agreed (in a real attack, plaintext injected by a man in the middle).
    let mut out = Vec::new();
    starttls(vec![]).encode(&mut out);
    out.extend_from_slice(&client_hello());
    s.write_all(&out).unwrap();
    let mut all = Vec::new();
    // Closed at once (not left waiting for a handshake, nor answered).
    s.read_to_end(&mut all)
        .expect("the server closes the connection");
    let (ack, len) = OptionReply::decode(&all).unwrap().done().unwrap();
    assert!(matches!(ack.body, ReplyBody::Ack));
    assert_eq!(all.len(), len, "the server answered the early ClientHello");
    // The same ClientHello sent after the ack gets a ServerHello (the test can fail).
    let mut s = connect(srv.addr);
    send(&mut s, starttls(vec![]));
    assert!(matches!(reply(&mut s).body, ReplyBody::Ack));
    s.write_all(&client_hello()).unwrap();
    let mut b = [0u8; 5];
    s.read_exact(&mut b).unwrap();
    assert_eq!(b[0], 22, "a TLS handshake record");
}

#[test]
#[cfg_attr(not(feature = "interop"), ignore = "interop tier: needs openssl")]
fn off_refuses_starttls_and_on_serves_plaintext() {
    let t = tempfile::tempdir().unwrap();
    certs(t.path());
    let off = server(TlsMode::Off, t.path());
    let mut s = connect(off.addr);
    send(&mut s, starttls(vec![]));
    assert_eq!(error_code(&reply(&mut s)), rep::ERR_UNSUP);

    let on = server(TlsMode::On, t.path());
    let mut s = connect(on.addr);
    send(&mut s, ClientOption::List);
    let r = replies(&mut s, 2);
    assert!(matches!(r[0].body, ReplyBody::Server { .. }), "{:?}", r[0]);
    assert!(matches!(r[1].body, ReplyBody::Ack), "{:?}", r[1]);
}

#[test]
fn tls_needs_credentials_and_off_takes_none() {
    let mut cfg = ServerConfig::ram("127.0.0.1:0".parse().unwrap(), 1 << 20);
    cfg.tls = TlsMode::Require;
    assert!(sanbench_nbd::Server::bind(cfg.clone()).is_err());
    cfg.tls = TlsMode::Off;
    cfg.tls_credentials = Some(Credentials::Certificates("/nonexistent".into()));
    assert!(sanbench_nbd::Server::bind(cfg.clone()).is_err());
    cfg.tls = TlsMode::On;
    let e = sanbench_nbd::Server::bind(cfg).err().unwrap().to_string();
    assert!(e.contains("/nonexistent"), "{e}");
}

/// Client certificates are verified only with TLS and X.509 credentials, against the
/// directory's ca-cert.pem, which must then be there.
#[test]
#[cfg_attr(not(feature = "interop"), ignore = "interop tier: needs openssl")]
fn verify_peer_needs_tls_certificates_and_a_ca() {
    let t = tempfile::tempdir().unwrap();
    certs(t.path());
    let mut cfg = ServerConfig::ram("127.0.0.1:0".parse().unwrap(), 1 << 20);
    cfg.tls_verify_peer = true;
    let e = sanbench_nbd::Server::bind(cfg.clone())
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("needs TLS"), "{e}");
    cfg.tls = TlsMode::Require;
    cfg.tls_credentials = Some(Credentials::Psk(t.path().join("keys.psk")));
    let e = sanbench_nbd::Server::bind(cfg.clone())
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("X.509"), "{e}");
    // certs() makes a self-signed server certificate and no ca-cert.pem.
    cfg.tls_credentials = Some(Credentials::Certificates(t.path().to_path_buf()));
    let e = sanbench_nbd::Server::bind(cfg.clone())
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("ca-cert.pem"), "{e}");
    std::fs::copy(
        t.path().join("server-cert.pem"),
        t.path().join("ca-cert.pem"),
    )
    .unwrap();
    assert!(sanbench_nbd::Server::bind(cfg).is_ok());
}
