//! TLS with pre-shared keys, as nbdkit's `--tls-psk` and libnbd's `tls-psk-file` do it:
//! GnuTLS's psktool file (`username:hexkey` per line). The file format is read in every build;
//! the sessions need OpenSSL (feature `tls-psk`), since rustls has no PSK cipher suites.
//!
//! Interoperation with GnuTLS (nbdkit, libnbd): TLS 1.3 with an external PSK (OpenSSL's PSK
//! callbacks serve TLS 1.3 with SHA-256 suites, GnuTLS's default for a psktool key), and
//! TLS 1.2 `PSK`/`DHE-PSK`/`ECDHE-PSK` suites for peers that stop at 1.2. OpenSSL is driven
//! through memory buffers ([`Pipe`]), like rustls, so the socket stays the caller's.

use std::borrow::Cow;
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

/// The longest key: psktool makes keys of up to 512 bytes, as many as OpenSSL takes
/// (`PSK_MAX_PSK_LEN`).
pub const MAX_KEY_LEN: usize = 512;
/// The longest identity GnuTLS (nbdkit, libnbd) accepts (its `MAX_USERNAME_SIZE`).
pub const MAX_IDENTITY_LEN: usize = 128;

/// Parses a psktool file as GnuTLS reads it (nbdkit's `--tls-psk`): one `username:hexkey` per
/// line, the username ending at the first `:`, or `#HEXUSER:hexkey` for a username in hex
/// (GnuTLS 3.7's form for names with a colon). Blank lines and other `#` lines (comments,
/// which GnuTLS never matches) are skipped; a line may end in trailing blanks, and in CR LF as
/// libnbd takes it (GnuTLS's server side, nbdkit's, does not: the key fails to decode there).
/// Refused, naming the line but never the key: no colon, an empty or blank-edged username or
/// one over [`MAX_IDENTITY_LEN`] bytes, a key that is empty, not hex, of an odd number of
/// digits or over [`MAX_KEY_LEN`] bytes, and a file with no key. When a username appears
/// twice, its first line counts (as in GnuTLS).
pub fn parse_keys(text: &str, shown: &str) -> Result<Vec<PskEntry>, TlsError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim_end();
        let bad = |why: &str| TlsError::Credentials(format!("{shown} line {}: {why}", i + 1));
        let (identity, hex) = match hex_identity(line) {
            Some(found) => found.map_err(|why| bad(&why))?,
            None if line.is_empty() || line.starts_with('#') => continue,
            None => {
                let (u, k) = line
                    .split_once(':')
                    .ok_or_else(|| bad("expected username:hexkey"))?;
                (Cow::Borrowed(u), k)
            }
        };
        if identity.is_empty() {
            return Err(bad("empty username"));
        }
        if identity.starts_with(char::is_whitespace) || identity.ends_with(char::is_whitespace) {
            return Err(bad("the username begins or ends with white space"));
        }
        if identity.len() > MAX_IDENTITY_LEN {
            return Err(bad(
                "the username is longer than 128 bytes (GnuTLS's limit)",
            ));
        }
        if hex.is_empty() {
            return Err(bad("empty key (expected username:hexkey)"));
        }
        // Before decoding: a huge line costs no allocation.
        if hex.len() > 2 * MAX_KEY_LEN {
            return Err(bad("the key is longer than 512 bytes (psktool's limit)"));
        }
        let key = decode_hex(hex).map_err(|why| bad(&format!("the key: {why}")))?;
        out.push(PskEntry {
            identity: identity.into_owned(),
            key,
        });
    }
    if out.is_empty() {
        return Err(TlsError::Credentials(format!("{shown}: no keys in it")));
    }
    Ok(out)
}

/// `#HEXUSER:hexkey`: the decoded username and the key's text; None when the line is not of
/// that form (a `#` line is then a comment).
fn hex_identity(line: &str) -> Option<Result<(Cow<'_, str>, &str), String>> {
    let (user, key) = line.strip_prefix('#')?.split_once(':')?;
    if user.is_empty() || !user.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    Some(
        decode_hex(user)
            .and_then(|u| String::from_utf8(u).map_err(|_| "it is not UTF-8 text"))
            .map(|u| (Cow::Owned(u), key))
            .map_err(|why| format!("the username in hex: {why}")),
    )
}

/// Decodes hex digits of either case (an empty string is no bytes); the errors never quote
/// the input, which may be a key.
fn decode_hex(hex: &str) -> Result<Vec<u8>, &'static str> {
    let digit = |b: u8| (b as char).to_digit(16);
    if !hex.bytes().all(|b| digit(b).is_some()) {
        return Err("not hexadecimal (digits 0-9, a-f)");
    }
    if !hex.len().is_multiple_of(2) {
        return Err("an odd number of hex digits");
    }
    Ok(hex
        .as_bytes()
        .chunks_exact(2)
        .filter_map(|p| Some((digit(p[0])? << 4 | digit(p[1])?) as u8))
        .collect())
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

    fn err(text: &str) -> String {
        match parse_keys(text, "f") {
            Ok(k) => panic!("{text:?} parsed: {k:?}"),
            Err(e) => e.to_string(),
        }
    }

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

    /// What psktool writes (and GnuTLS reads) parses; CR LF endings and trailing blanks too.
    #[test]
    fn psktool_output_and_line_endings() {
        let k = parse_keys(
            "psk_identity:88f3824b3e5659f52d00e959bacab954b6540344\r\n  \nu2:0a0B \t\n",
            "f",
        )
        .unwrap();
        assert_eq!(k[0].identity, "psk_identity");
        assert_eq!(k[0].key.len(), 20);
        assert_eq!(k[0].key[..3], [0x88, 0xf3, 0x82]);
        assert_eq!(k[1].identity, "u2");
        assert_eq!(k[1].key, [0x0a, 0x0b]);
    }

    /// The username ends at the first colon, as GnuTLS reads it: a colon in the key's place
    /// is not hex; a name with a colon is written in hex behind '#'.
    #[test]
    fn username_ends_at_the_first_colon() {
        assert!(err("a:b:00").contains("not hexadecimal"));
        let k = parse_keys("#613a62:0102\n", "f").unwrap();
        assert_eq!(k[0].identity, "a:b");
        assert_eq!(k[0].key, [1, 2]);
        // Comments, including ones with a colon, are skipped.
        let k = parse_keys("# note: rotate monthly\n#\nu:00\n", "f").unwrap();
        assert_eq!(k.len(), 1);
        assert!(err("#616:00").contains("username in hex: an odd number"));
        assert!(err("#ff:00").contains("username in hex: it is not UTF-8"));
        assert!(
            err("#:00\n").contains("no keys"),
            "an empty hex name is a comment"
        );
    }

    /// Each refusal says what is wrong, with the line number.
    #[test]
    fn refusals_are_clear() {
        let cases = [
            ("u:00\nnocolon", "line 2: expected username:hexkey"),
            (":0011", "line 1: empty username"),
            (" u:00", "begins or ends with white space"),
            ("u\t:00", "begins or ends with white space"),
            ("u:", "empty key"),
            ("u:abc", "an odd number of hex digits"),
            ("u:0g", "not hexadecimal"),
            ("u:+f", "not hexadecimal"),
            ("u:0x00", "not hexadecimal"),
            ("u:00 11", "not hexadecimal"),
            ("u:0\u{e9}0", "not hexadecimal"),
            ("u:\u{e9}\u{e9}", "not hexadecimal"),
            ("# only a comment\n\n", "f: no keys in it"),
        ];
        for (text, want) in cases {
            let e = err(text);
            assert!(e.contains(want), "{text:?}: {e}");
        }
    }

    /// Size limits: 512-byte keys (psktool's largest) and 128-byte names (GnuTLS's largest)
    /// are taken, one more is refused, and a huge key is refused without being decoded.
    #[test]
    fn limits() {
        let key = "ab".repeat(MAX_KEY_LEN);
        let name = "n".repeat(MAX_IDENTITY_LEN);
        let k = parse_keys(&format!("{name}:{key}"), "f").unwrap();
        assert_eq!((k[0].identity.len(), k[0].key.len()), (128, 512));
        assert!(err(&format!("u:{key}ab")).contains("longer than 512 bytes"));
        assert!(err(&format!("{name}n:00")).contains("longer than 128 bytes"));
        assert!(err(&format!("u:{}", "zz".repeat(1 << 20))).contains("longer than 512"));
    }

    /// A name given twice: the first line counts, as in GnuTLS.
    #[test]
    fn first_line_of_a_name_counts() {
        let k = parse_keys("u:01\nu:02\n", "f").unwrap();
        assert_eq!(k.iter().find(|e| e.identity == "u").unwrap().key, [1]);
    }
}
