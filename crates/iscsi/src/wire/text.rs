//! The key=value text format of Login and Text PDUs (RFC 7143 §6.1, §6.2).
//!
//! A data segment is a sequence of `key=value` strings each terminated by NUL. Keys are at
//! most 63 bytes of `[A-Za-z0-9.\-+@_]`; values at most 255 bytes, except CHAP challenge and
//! response values (binary encodings, up to 1024 bytes of binary in hex) and `TargetAddress`
//! lists in SendTargets answers. A segment split over several PDUs (C bit) is joined by the
//! caller before decoding.

use super::WireError;

/// Largest key name (§6.1).
pub const MAX_KEY_LEN: usize = 63;
/// Largest ordinary value (§6.1).
pub const MAX_VALUE_LEN: usize = 255;
/// Largest CHAP value: "0x" + 2 hex digits per byte of a 1024-byte challenge.
pub const MAX_CHAP_VALUE_LEN: usize = 2 + 2048;
/// Most pairs accepted in one negotiation sequence, so a hostile peer cannot grow our memory.
pub const MAX_PAIRS: usize = 256;

/// One decoded pair. Values stay strings: each key's rule knows how to read its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pair {
    pub key: String,
    pub value: String,
}

impl Pair {
    pub fn new(key: impl Into<String>, value: impl Into<String>) -> Pair {
        Pair {
            key: key.into(),
            value: value.into(),
        }
    }
}

fn key_char_ok(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'.' | b'-' | b'+' | b'@' | b'_')
}

/// Largest value allowed for `key`.
pub fn value_limit(key: &str) -> usize {
    if key.starts_with("CHAP_") {
        MAX_CHAP_VALUE_LEN
    } else if key == "TargetAddress" {
        MAX_VALUE_LEN * 2
    } else {
        MAX_VALUE_LEN
    }
}

/// Decodes a (joined) text data segment. Empty strings between NULs (padding some initiators
/// leave) are skipped; a last pair without its NUL is accepted. Duplicate keys are an error
/// (§6.2: a key may be offered once per negotiation sequence).
pub fn decode(data: &[u8]) -> Result<Vec<Pair>, WireError> {
    let mut out: Vec<Pair> = Vec::new();
    let mut off = 0;
    for item in data.split(|&b| b == 0) {
        let start = off;
        off += item.len() + 1;
        if item.is_empty() {
            continue;
        }
        let eq = item
            .iter()
            .position(|&b| b == b'=')
            .ok_or(WireError::Text {
                offset: start,
                reason: "pair without '='",
            })?;
        let (k, v) = (&item[..eq], &item[eq + 1..]);
        if k.is_empty() || k.len() > MAX_KEY_LEN || !k.iter().all(|&c| key_char_ok(c)) {
            return Err(WireError::Text {
                offset: start,
                reason: "invalid key name",
            });
        }
        let key = std::str::from_utf8(k).map_err(|_| WireError::Text {
            offset: start,
            reason: "key is not UTF-8",
        })?;
        if v.len() > value_limit(key) {
            return Err(WireError::Text {
                offset: start + eq + 1,
                reason: "value too long",
            });
        }
        let value = std::str::from_utf8(v).map_err(|_| WireError::Text {
            offset: start + eq + 1,
            reason: "value is not UTF-8",
        })?;
        if out.iter().any(|p| p.key == key) {
            return Err(WireError::Text {
                offset: start,
                reason: "key repeated",
            });
        }
        if out.len() >= MAX_PAIRS {
            return Err(WireError::Text {
                offset: start,
                reason: "too many keys",
            });
        }
        out.push(Pair::new(key, value));
    }
    Ok(out)
}

/// Appends `key=value\0` for every pair.
pub fn encode(pairs: &[Pair], out: &mut Vec<u8>) {
    for p in pairs {
        out.extend_from_slice(p.key.as_bytes());
        out.push(b'=');
        out.extend_from_slice(p.value.as_bytes());
        out.push(0);
    }
}

/// Convenience: encode into a new buffer.
pub fn encode_vec(pairs: &[Pair]) -> Vec<u8> {
    let mut v = Vec::new();
    encode(pairs, &mut v);
    v
}

/// Looks a key up in decoded pairs.
pub fn get<'a>(pairs: &'a [Pair], key: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|p| p.key == key)
        .map(|p| p.value.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn decodes_login_text() {
        let t = b"InitiatorName=iqn.x\0SessionType=Normal\0\0";
        let p = decode(t).unwrap();
        assert_eq!(
            p,
            vec![
                Pair::new("InitiatorName", "iqn.x"),
                Pair::new("SessionType", "Normal")
            ]
        );
        assert!(decode(b"novalue\0").is_err());
        assert!(decode(b"a=1\0a=2\0").is_err());
        assert!(decode(b"k y=1\0").is_err());
        assert!(decode(&[b'a', b'=', 0xff, 0]).is_err());
    }

    proptest! {
        #[test]
        fn roundtrip(pairs in proptest::collection::btree_map("[A-Za-z][A-Za-z0-9.+@_-]{0,62}", "[ -~&&[^=]]{0,255}", 0..20)) {
            let pairs: Vec<Pair> = pairs.into_iter().map(|(k, v)| Pair::new(k, v)).collect();
            let enc = encode_vec(&pairs);
            prop_assert_eq!(decode(&enc).unwrap(), pairs);
        }

        #[test]
        fn never_panics(data in proptest::collection::vec(any::<u8>(), 0..600)) {
            let _ = decode(&data);
        }
    }
}
