//! NBD URIs as libnbd writes them (its nbd_connect_uri page): `nbd://HOST[:PORT][/EXPORT]`,
//! `nbd+unix:///EXPORT?socket=PATH`, and with TLS `nbds://[USER@]HOST[:PORT][/EXPORT]` and
//! `nbds+unix://[USER@]/EXPORT?socket=PATH` with the keys `tls-certificates=DIR`,
//! `tls-psk-file=FILE`, `tls-verify-peer=false`, `tls-hostname=NAME`, and sanbench's own
//! `ktls=auto|off` (whether the kernel may make the TLS records after the handshake).

use std::path::PathBuf;

use sanbench_io::EngineError;

use super::Addr;
use crate::tls::{ClientTls, Credentials, KtlsMode};

/// What a URI names.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct NbdUri {
    pub addr: Addr,
    pub export: String,
    /// Asked for with `nbds`: TLS or nothing.
    pub tls: Option<ClientTls>,
}

/// Splits an NBD URI into address, export name and TLS settings.
pub(super) fn parse_uri(uri: &str) -> Result<NbdUri, EngineError> {
    let bad = |why: &str| EngineError::Invalid(format!("{uri}: {why}"));
    let (scheme, rest) = uri.split_once("://").ok_or_else(|| {
        bad("expected nbd://HOST[:PORT][/EXPORT] or nbd+unix:///EXPORT?socket=PATH")
    })?;
    let (tls, unix) = match scheme {
        "nbd" => (false, false),
        "nbds" => (true, false),
        "nbd+unix" => (false, true),
        "nbds+unix" => (true, true),
        _ => {
            return Err(bad(
                "expected nbd://HOST[:PORT][/EXPORT] or nbd+unix:///EXPORT?socket=PATH \
                 (nbds:// and nbds+unix:// for TLS)",
            ))
        }
    };
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (authority, export) = rest.split_once('/').unwrap_or((rest, ""));
    let (user, host) = match authority.rsplit_once('@') {
        Some((u, h)) => (Some(unescape(u)), h),
        None => (None, authority),
    };
    let mut socket = None;
    let mut t = ClientTls {
        credentials: None,
        verify_peer: true,
        hostname: String::new(),
        username: user.filter(|u| !u.is_empty()),
        ktls: KtlsMode::Auto,
    };
    for kv in query.split('&').filter(|s| !s.is_empty()) {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        let v = unescape(v);
        let both = |t: &ClientTls| t.credentials.is_some();
        match k {
            "socket" if unix && !v.is_empty() => socket = Some(PathBuf::from(v)),
            "tls-certificates" if tls && !v.is_empty() && !both(&t) => {
                t.credentials = Some(Credentials::Certificates(v.into()))
            }
            "tls-psk-file" if tls && !v.is_empty() && !both(&t) => {
                t.credentials = Some(Credentials::Psk(v.into()))
            }
            "tls-verify-peer" if tls => {
                t.verify_peer = match v.as_str() {
                    "true" | "1" | "yes" | "on" => true,
                    "false" | "0" | "no" | "off" => false,
                    _ => return Err(bad("tls-verify-peer is true or false")),
                }
            }
            "tls-hostname" if tls && !v.is_empty() => t.hostname = v,
            "ktls" if tls => t.ktls = v.parse().map_err(|e: String| bad(&e))?,
            "tls-certificates" | "tls-psk-file" if tls => {
                return Err(bad(
                    "give one of tls-certificates=DIR and tls-psk-file=FILE",
                ))
            }
            k if (k.starts_with("tls-") || k == "ktls") && !tls => {
                return Err(bad(&format!("{k} needs an nbds:// URI (TLS)")))
            }
            k => {
                return Err(bad(&format!(
                    "unknown key '{k}' (socket for nbd+unix; tls-certificates, tls-psk-file, \
                     tls-verify-peer, tls-hostname, ktls for nbds)"
                )))
            }
        }
    }
    let addr = if unix {
        if !host.is_empty() && host != "localhost" {
            return Err(bad(
                "a unix-socket URI has no host (nbd+unix:///EXPORT?socket=PATH)",
            ));
        }
        Addr::Unix(socket.ok_or_else(|| bad("missing ?socket=PATH"))?)
    } else {
        let (h, a) = tcp(host).map_err(bad)?;
        if t.hostname.is_empty() {
            t.hostname = h;
        }
        a
    };
    if t.hostname.is_empty() {
        t.hostname = "localhost".into();
    }
    Ok(NbdUri {
        addr,
        export: unescape(export),
        tls: tls.then_some(t),
    })
}

/// `HOST[:PORT]` (IPv6 as `[::1]`): the bare host and the address to connect to.
fn tcp(authority: &str) -> Result<(String, Addr), &'static str> {
    if authority.is_empty() {
        return Err("missing host");
    }
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (h, tail) = v6.split_once(']').ok_or("unclosed [ in host")?;
        (h.to_string(), tail.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), Some(p)),
            None => (authority.to_string(), None),
        }
    };
    let port: u16 = match port {
        Some(p) => p.parse().map_err(|_| "bad port")?,
        None => 10809,
    };
    let addr = if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    Ok((host, Addr::Tcp(addr)))
}

/// Percent-decoding for export names, paths and user names.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = b
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok());
        match (b[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(v)) => {
                out.push(v);
                i += 3;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(u: &str) -> (Addr, String) {
        let p = parse_uri(u).unwrap();
        assert!(p.tls.is_none());
        (p.addr, p.export)
    }

    #[test]
    fn uris() {
        assert_eq!(
            t("nbd://localhost"),
            (Addr::Tcp("localhost:10809".into()), "".into())
        );
        assert_eq!(
            t("nbd://127.0.0.1:1234/disk"),
            (Addr::Tcp("127.0.0.1:1234".into()), "disk".into())
        );
        assert_eq!(
            t("nbd://[::1]:99/a%20b"),
            (Addr::Tcp("[::1]:99".into()), "a b".into())
        );
        assert_eq!(
            t("nbd://[::1]"),
            (Addr::Tcp("[::1]:10809".into()), "".into())
        );
        assert_eq!(
            t("nbd+unix:///exp?socket=/tmp/s.sock"),
            (Addr::Unix("/tmp/s.sock".into()), "exp".into())
        );
        for bad in [
            "file:///x",
            "nbd://",
            "nbd://h:port",
            "nbd+unix:///x",
            "nbd://[::1",
            "nbd://h/x?tls-certificates=/d",
            "nbds://h/x?tls-certificates=/a&tls-psk-file=/b",
            "nbds://h/x?tls-verify-peer=maybe",
            "nbds://h/x?frobnicate=1",
            "nbd://h/x?ktls=off",
            "nbds://h/x?ktls=maybe",
        ] {
            assert!(parse_uri(bad).unwrap_err().is_usage(), "{bad}");
        }
    }

    #[test]
    fn tls_uris() {
        let p = parse_uri("nbds://alice@127.0.0.1:99/e?tls-psk-file=/k%20s").unwrap();
        assert_eq!(p.addr, Addr::Tcp("127.0.0.1:99".into()));
        assert_eq!(p.export, "e");
        let tls = p.tls.unwrap();
        assert_eq!(tls.username.as_deref(), Some("alice"));
        assert_eq!(tls.credentials, Some(Credentials::Psk("/k s".into())));
        assert_eq!(tls.hostname, "127.0.0.1");
        assert!(tls.verify_peer);
        let p = parse_uri(
            "nbds://h/?tls-certificates=/pki&tls-verify-peer=false&tls-hostname=srv.example",
        )
        .unwrap();
        let tls = p.tls.unwrap();
        assert_eq!(
            tls.credentials,
            Some(Credentials::Certificates("/pki".into()))
        );
        assert!(!tls.verify_peer);
        assert_eq!(tls.hostname, "srv.example");
        assert_eq!(tls.ktls, KtlsMode::Auto);
        let p = parse_uri("nbds://h/?ktls=off").unwrap();
        assert_eq!(p.tls.unwrap().ktls, KtlsMode::Off);
        let p = parse_uri("nbds+unix:///x?socket=/tmp/s").unwrap();
        assert_eq!(p.addr, Addr::Unix("/tmp/s".into()));
        assert_eq!(p.tls.unwrap().hostname, "localhost");
    }
}
