//! Target URIs as the user writes them: `null:[SIZE]`, `mem:SIZE`, `file:PATH`, a bare path,
//! and the network schemes (`nbd://`, `iscsi://`, ...). Parsing only: the engine opens the
//! local ones (`sanbench_engine::uri`), other crates the network ones; the fio job writer
//! reads them too.

use std::path::PathBuf;

use crate::parse_size;

/// Size a `null:` target reports when none is given: large enough that random offsets spread.
pub const DEFAULT_NULL_SIZE: u64 = 1 << 40;

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
    /// A scheme the engine does not open itself (`nbd`, `iscsi`, ...), with the whole URI.
    Network {
        scheme: String,
        uri: String,
    },
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

#[cfg(test)]
mod tests {
    use super::*;

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
