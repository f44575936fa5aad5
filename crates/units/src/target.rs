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
    /// A device driven with native commands beside its block device (`nvme-ng:/dev/ngXnY`,
    /// `sg:/dev/sgN`), opened by the protocol crate of its command set.
    Passthrough {
        kind: Passthrough,
        path: PathBuf,
    },
    /// A scheme the engine does not open itself (`nbd`, `iscsi`, ...), with the whole URI.
    Network {
        scheme: String,
        uri: String,
    },
}

/// The passthrough interfaces, by URI scheme.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Passthrough {
    /// NVMe I/O commands over io_uring URING_CMD on a namespace's generic device.
    NvmeNg,
    /// SCSI commands over SG_IO on a SCSI generic device.
    Sg,
    /// SCSI commands over SG_IO (`struct sg_io_v4`) on a bsg device.
    Bsg,
}

impl Passthrough {
    pub const ALL: [Passthrough; 3] = [Passthrough::NvmeNg, Passthrough::Sg, Passthrough::Bsg];

    /// The URI scheme, without the colon.
    pub fn scheme(self) -> &'static str {
        match self {
            Passthrough::NvmeNg => "nvme-ng",
            Passthrough::Sg => "sg",
            Passthrough::Bsg => "bsg",
        }
    }

    /// What the path must name, for messages.
    fn example(self) -> &'static str {
        match self {
            Passthrough::NvmeNg => "/dev/ng0n1",
            Passthrough::Sg => "/dev/sg0",
            Passthrough::Bsg => "/dev/bsg/0:0:0:0",
        }
    }
}

fn parse_passthrough(s: &str, kind: Passthrough, rest: &str) -> Result<TargetUri, String> {
    let scheme = kind.scheme();
    let ex = kind.example();
    let path = rest.strip_prefix("//").unwrap_or(rest);
    if path.is_empty() {
        return Err(format!("target '{s}': give the device, e.g. {scheme}:{ex}"));
    }
    if !path.starts_with('/') {
        return Err(format!(
            "target '{s}': the device must be an absolute path, e.g. {scheme}:{ex}"
        ));
    }
    if path.contains(['?', '#']) || path.chars().any(char::is_whitespace) {
        return Err(format!(
            "target '{s}': {scheme}: takes a device path and no options, e.g. {scheme}:{ex}"
        ));
    }
    Ok(TargetUri::Passthrough {
        kind,
        path: path.into(),
    })
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
    for kind in Passthrough::ALL {
        if let Some(rest) = s
            .strip_prefix(kind.scheme())
            .and_then(|r| r.strip_prefix(':'))
        {
            return parse_passthrough(s, kind, rest);
        }
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
        "target '{s}' is not understood (use null:, mem:SIZE, a path, file:PATH, nbd://, iscsi://, nvme+tcp://, nvme-ng:/dev/ngXnY, \
         sg:/dev/sgN)"
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

    #[test]
    fn passthrough_devices() {
        assert_eq!(
            parse_target("nvme-ng:/dev/ng0n1").unwrap(),
            TargetUri::Passthrough {
                kind: Passthrough::NvmeNg,
                path: "/dev/ng0n1".into()
            }
        );
        assert_eq!(
            parse_target("sg:///dev/sg3").unwrap(),
            TargetUri::Passthrough {
                kind: Passthrough::Sg,
                path: "/dev/sg3".into()
            }
        );
        assert_eq!(
            parse_target("bsg:/dev/bsg/0:0:2:0").unwrap(),
            TargetUri::Passthrough {
                kind: Passthrough::Bsg,
                path: "/dev/bsg/0:0:2:0".into()
            }
        );
        for (bad, says) in [
            ("bsg:", "give the device, e.g. bsg:/dev/bsg/0:0:0:0"),
            ("nvme-ng:", "give the device, e.g. nvme-ng:/dev/ng0n1"),
            ("sg:", "give the device, e.g. sg:/dev/sg0"),
            ("nvme-ng:ng0n1", "absolute path"),
            ("sg:/dev/sg0?qd=4", "no options"),
            ("nvme-ng:/dev/ng0 n1", "no options"),
        ] {
            let e = parse_target(bad).unwrap_err();
            assert!(e.contains(says) && !e.contains('\n'), "{bad}: {e}");
        }
        // Not a passthrough scheme, only a prefix of one.
        assert!(parse_target("sgx:/dev/sg0").is_err());
    }
}
