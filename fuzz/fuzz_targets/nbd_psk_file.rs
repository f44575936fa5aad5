//! psktool key files (`--tls-psk FILE`, `tls-psk-file=`) as the NBD TLS code parses them:
//! any text is taken or refused without a panic, what is taken is within psktool's and
//! GnuTLS's limits, and writing the keys back out parses to the same keys.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sanbench_nbd::tls::psk::{parse_keys, PskEntry, MAX_IDENTITY_LEN, MAX_KEY_LEN};

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A line for `e`, its name in hex behind '#' when it could not stand as itself (a colon or a
/// control character in it, or a leading '#').
fn line(e: &PskEntry) -> String {
    let plain =
        !e.identity.starts_with('#') && !e.identity.chars().any(|c| c == ':' || c.is_control());
    if !plain {
        format!("#{}:{}\n", hex(e.identity.as_bytes()), hex(&e.key))
    } else {
        format!("{}:{}\n", e.identity, hex(&e.key))
    }
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let Ok(keys) = parse_keys(&text, "fuzz") else {
        return;
    };
    assert!(!keys.is_empty());
    for e in &keys {
        assert!(!e.identity.is_empty() && e.identity.len() <= MAX_IDENTITY_LEN);
        assert!(!e.key.is_empty() && e.key.len() <= MAX_KEY_LEN);
    }
    let again: String = keys.iter().map(line).collect();
    assert_eq!(parse_keys(&again, "again").ok(), Some(keys));
});
