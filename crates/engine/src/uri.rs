//! Target URIs: `null:[SIZE]`, `mem:SIZE`, `file:PATH`, a bare path, and the network schemes
//! (`nbd://`, `iscsi://`, ...) that other crates open.

use std::path::PathBuf;
use std::sync::Arc;

use crate::engine::Target;
use crate::error::EngineError;
use crate::file::{FileOptions, FileTarget};
use crate::mem::MemTarget;
use crate::null::{NullTarget, DEFAULT_NULL_SIZE};
use crate::units::parse_size;

/// A parsed target URI.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TargetUri {
    Null {
        size: u64,
    },
    Mem {
        size: u64,
    },
    File {
        path: PathBuf,
    },
    /// A scheme this crate does not open itself (`nbd`, `iscsi`, ...), with the whole URI.
    Network {
        scheme: String,
        uri: String,
    },
}

/// Query keys whose values are secrets (libiscsi's `target_password`, and the like).
const SECRET_KEYS: &[&str] = &["password", "target_password", "secret", "target_secret"];

/// A string fit to record or print: in every `scheme://USER%SECRET@` (libiscsi's form) or
/// `USER:SECRET@` the secret becomes `***`, and so does the value of every secret query key.
/// Results are meant to be published; a CHAP secret must never be in them. Works on a bare
/// URI, on `NAME=URI` and on any command-line argument. An engine whose URIs carry
/// credentials sets its `TargetInfo::uri` through this (the iSCSI initiator does).
pub fn redact(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find("://") {
        out.push_str(&rest[..i + 3]);
        rest = &rest[i + 3..];
        let auth_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let authority = &rest[..auth_end];
        match authority.rfind('@') {
            Some(at) => {
                let cred = &authority[..at];
                match cred.find(['%', ':']) {
                    Some(sep) => {
                        out.push_str(&cred[..=sep]);
                        out.push_str("***");
                    }
                    None => out.push_str(cred),
                }
                out.push_str(&authority[at..]);
            }
            None => out.push_str(authority),
        }
        rest = &rest[auth_end..];
        let uri_end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        let (path, query) = match rest[..uri_end].split_once('?') {
            Some((p, q)) => (p, Some(q)),
            None => (&rest[..uri_end], None),
        };
        out.push_str(path);
        if let Some(q) = query {
            out.push('?');
            let parts: Vec<String> = q
                .split('&')
                .map(|kv| match kv.split_once('=') {
                    Some((k, _)) if SECRET_KEYS.contains(&k.to_ascii_lowercase().as_str()) => {
                        format!("{k}=***")
                    }
                    _ => kv.to_string(),
                })
                .collect();
            out.push_str(&parts.join("&"));
        }
        rest = &rest[uri_end..];
    }
    out.push_str(rest);
    out
}

/// Parses a target as the user wrote it.
pub fn parse_target(s: &str) -> Result<TargetUri, String> {
    if s.is_empty() {
        return Err("empty target".into());
    }
    if let Some(rest) = s.strip_prefix("null:") {
        let size = if rest.is_empty() {
            DEFAULT_NULL_SIZE
        } else {
            parse_size(rest).map_err(|e| format!("target '{s}': {e}"))?
        };
        return Ok(TargetUri::Null { size });
    }
    if let Some(rest) = s.strip_prefix("mem:") {
        if rest.is_empty() {
            return Err(format!("target '{s}': give a size, e.g. mem:1G"));
        }
        let size = parse_size(rest).map_err(|e| format!("target '{s}': {e}"))?;
        if size == 0 {
            return Err(format!("target '{s}': size must be above 0"));
        }
        return Ok(TargetUri::Mem { size });
    }
    if let Some(rest) = s.strip_prefix("file:") {
        let path = rest.strip_prefix("//").unwrap_or(rest);
        if path.is_empty() {
            return Err(format!("target '{s}': give a path"));
        }
        return Ok(TargetUri::File { path: path.into() });
    }
    if let Some((scheme, _)) = s.split_once("://") {
        let valid = !scheme.is_empty()
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c));
        if valid {
            return Ok(TargetUri::Network {
                scheme: scheme.to_ascii_lowercase(),
                uri: s.to_string(),
            });
        }
    }
    if s.starts_with('/') || s.starts_with('.') || !s.contains(':') {
        return Ok(TargetUri::File { path: s.into() });
    }
    Err(format!(
        "target '{s}' is not understood (use null:, mem:SIZE, a path, file:PATH, nbd://, iscsi://)"
    ))
}

/// Opens a local target (null, mem, file or block device).
pub fn open_local(
    uri: &str,
    t: &TargetUri,
    opts: &FileOptions,
) -> Result<Arc<dyn Target>, EngineError> {
    Ok(match t {
        TargetUri::Null { size } => Arc::new(NullTarget::new(uri, *size)),
        TargetUri::Mem { size } => Arc::new(MemTarget::new(uri, *size)?),
        TargetUri::File { path } => Arc::new(FileTarget::open(uri, path, opts)?),
        TargetUri::Network { scheme, .. } => {
            return Err(EngineError::Invalid(format!(
                "{uri}: the {scheme} engine is not built into this sanbench"
            )))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_never_reach_a_result() {
        let cases = [
            (
                "iscsi://bob%s3cr3t@10.0.0.1:3260/iqn.x:y/1",
                "iscsi://bob%***@10.0.0.1:3260/iqn.x:y/1",
            ),
            (
                "tgt=iscsi://bob%s3cr3t@h/iqn.x/0?target_user=t&target_password=pw&digest=crc32c",
                "tgt=iscsi://bob%***@h/iqn.x/0?target_user=t&target_password=***&digest=crc32c",
            ),
            (
                "iscsi://u:p@[::1]:3260/iqn.x/0",
                "iscsi://u:***@[::1]:3260/iqn.x/0",
            ),
            (
                "iscsi://h/iqn.x/0?Password=x",
                "iscsi://h/iqn.x/0?Password=***",
            ),
            (
                "nbd://127.0.0.1:10809/export",
                "nbd://127.0.0.1:10809/export",
            ),
            ("mem:1G", "mem:1G"),
            ("--bs=4k", "--bs=4k"),
            (
                "a iscsi://x%y@h/i/0 b nbd://h:1/e",
                "a iscsi://x%***@h/i/0 b nbd://h:1/e",
            ),
        ];
        for (raw, want) in cases {
            assert_eq!(redact(raw), want, "{raw}");
        }
    }

    #[test]
    fn parses() {
        assert_eq!(
            parse_target("null:").unwrap(),
            TargetUri::Null {
                size: DEFAULT_NULL_SIZE
            }
        );
        assert_eq!(
            parse_target("mem:1G").unwrap(),
            TargetUri::Mem { size: 1 << 30 }
        );
        assert_eq!(
            parse_target("/dev/shm/x").unwrap(),
            TargetUri::File {
                path: "/dev/shm/x".into()
            }
        );
        assert_eq!(
            parse_target("file:///tmp/a").unwrap(),
            TargetUri::File {
                path: "/tmp/a".into()
            }
        );
        assert_eq!(
            parse_target("data.img").unwrap(),
            TargetUri::File {
                path: "data.img".into()
            }
        );
        assert!(matches!(
            parse_target("nbd://127.0.0.1:10809/x").unwrap(),
            TargetUri::Network { scheme, .. } if scheme == "nbd"
        ));
        for bad in ["", "mem:", "mem:0", "mem:lots", "file:", "bogus:thing"] {
            assert!(parse_target(bad).is_err(), "{bad}");
        }
    }
}
