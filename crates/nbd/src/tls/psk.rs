//! TLS with pre-shared keys, as nbdkit's `--tls-psk` and libnbd's `tls-psk-file` do it:
//! GnuTLS's psktool file (`username:hexkey` per line). The file format is read in every build;
//! the sessions need OpenSSL (feature `tls-psk`), since rustls has no PSK cipher suites.
//!
//! Interoperation with GnuTLS (nbdkit, libnbd): TLS 1.3 with an external PSK (OpenSSL's PSK
//! callbacks serve TLS 1.3 with SHA-256 suites, GnuTLS's default for a psktool key), and
//! TLS 1.2 `PSK`/`DHE-PSK`/`ECDHE-PSK` suites for peers that stop at 1.2. OpenSSL is driven
//! through memory buffers ([`Pipe`]), like rustls, so the socket stays the caller's.

use std::path::Path;

use super::TlsError;

/// One psktool line.
#[derive(Clone, PartialEq, Eq)]
pub struct PskEntry {
    pub identity: String,
    pub key: Vec<u8>,
}

impl std::fmt::Debug for PskEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PskEntry({}, ***)", self.identity)
    }
}

/// Parses a psktool file: `identity:hexkey` lines; blank lines and `#` comments skipped. Errors
/// name the line, never the key.
pub fn parse_keys(text: &str, shown: &str) -> Result<Vec<PskEntry>, TlsError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = |why: &str| TlsError::Credentials(format!("{shown} line {}: {why}", i + 1));
        let (id, hex) = line
            .rsplit_once(':')
            .ok_or_else(|| bad("expected username:hexkey"))?;
        if id.is_empty() {
            return Err(bad("empty username"));
        }
        if hex.is_empty() || hex.len() % 2 != 0 || hex.len() > 2 * 256 {
            return Err(bad(
                "the key must be an even number of hex digits (at most 512)",
            ));
        }
        let key = (0..hex.len())
            .step_by(2)
            .map(|j| u8::from_str_radix(&hex[j..j + 2], 16))
            .collect::<Result<Vec<u8>, _>>()
            .map_err(|_| bad("the key is not hexadecimal"))?;
        out.push(PskEntry {
            identity: id.to_string(),
            key,
        });
    }
    if out.is_empty() {
        return Err(TlsError::Credentials(format!("{shown}: no keys in it")));
    }
    Ok(out)
}

/// Reads and parses a psktool file.
pub fn load_keys(path: &Path) -> Result<Vec<PskEntry>, TlsError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .map_err(|e| TlsError::Credentials(format!("{shown}: {e}")))?;
    parse_keys(&text, &shown)
}

/// The login name, libnbd's default PSK identity.
pub fn login_name() -> Option<String> {
    ["LOGNAME", "USER"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|s| !s.is_empty()))
}

#[cfg(feature = "tls-psk")]
pub(super) use ossl::{PskClient, PskServer};

#[cfg(feature = "tls-psk")]
#[path = "psk_openssl.rs"]
mod ossl;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn psktool_lines() {
        let k = parse_keys("# c\n\nalice:00ff10\nbob:DEADbeef\n", "f").unwrap();
        assert_eq!(k.len(), 2);
        assert_eq!(k[0].identity, "alice");
        assert_eq!(k[0].key, vec![0, 0xff, 0x10]);
        assert_eq!(k[1].key, vec![0xde, 0xad, 0xbe, 0xef]);
        assert!(!format!("{:?}", k[0]).contains("ff"));
        for bad in ["alice", ":00", "a:0", "a:zz", "a:", ""] {
            assert!(parse_keys(bad, "f").is_err(), "{bad:?}");
        }
        let e = parse_keys("a:00\nb:secretZZ", "f").unwrap_err().to_string();
        assert!(e.contains("line 2") && !e.contains("secret"), "{e}");
    }
}
