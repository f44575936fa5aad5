//! `iscsi://[USER%SECRET@]HOST[:PORT]/IQN/LUN`, the libiscsi URI form (without its `?`
//! options). The IQN may contain `:`; HOST may be an IPv6 literal in brackets.

use std::net::{SocketAddr, ToSocketAddrs};

use sanbench_engine::EngineError;

/// Default iSCSI port (RFC 7143 §13.1, IANA).
pub const DEFAULT_PORT: u16 = 3260;

/// A parsed `iscsi://` URI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IscsiUri {
    pub host: String,
    pub port: u16,
    pub iqn: String,
    pub lun: u16,
    /// CHAP (user, secret) when the URI carries `USER%SECRET@`.
    pub chap: Option<(String, String)>,
}

fn invalid(uri: &str, why: &str) -> EngineError {
    EngineError::Invalid(format!(
        "{}: {why} (expected iscsi://[USER%SECRET@]HOST[:PORT]/IQN/LUN)",
        sanbench_engine::uri::redact(uri)
    ))
}

impl IscsiUri {
    pub fn parse(uri: &str) -> Result<IscsiUri, EngineError> {
        let rest = uri
            .strip_prefix("iscsi://")
            .ok_or_else(|| invalid(uri, "not an iscsi:// URI"))?;
        let (authority, path) = rest
            .split_once('/')
            .ok_or_else(|| invalid(uri, "missing /IQN/LUN"))?;
        let (chap, hostport) = match authority.rsplit_once('@') {
            Some((cred, hp)) => {
                let (user, secret) = cred
                    .split_once('%')
                    .ok_or_else(|| invalid(uri, "credentials must be USER%SECRET"))?;
                if user.is_empty() || secret.is_empty() {
                    return Err(invalid(uri, "empty CHAP user or secret"));
                }
                (Some((user.to_string(), secret.to_string())), hp)
            }
            None => (None, authority),
        };
        let (host, port) = split_host_port(hostport).ok_or_else(|| invalid(uri, "bad port"))?;
        if host.is_empty() {
            return Err(invalid(uri, "missing host"));
        }
        let (iqn, lun) = path
            .rsplit_once('/')
            .ok_or_else(|| invalid(uri, "missing /LUN after the IQN"))?;
        if iqn.is_empty() {
            return Err(invalid(uri, "missing IQN"));
        }
        let lun: u16 = lun
            .parse()
            .ok()
            .filter(|l| *l < 16384)
            .ok_or_else(|| invalid(uri, "LUN must be a number below 16384"))?;
        Ok(IscsiUri {
            host: host.to_string(),
            port,
            iqn: iqn.to_string(),
            lun,
            chap,
        })
    }

    /// `HOST:PORT` as written (brackets kept for IPv6), for messages and `TargetInfo`.
    pub fn portal(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    /// Resolves the portal to the first address.
    pub fn resolve(&self) -> Result<SocketAddr, EngineError> {
        (self.host.as_str(), self.port)
            .to_socket_addrs()
            .map_err(|e| EngineError::Connect {
                addr: self.portal(),
                reason: format!("cannot resolve: {e}"),
            })?
            .next()
            .ok_or_else(|| EngineError::Connect {
                addr: self.portal(),
                reason: "no address".into(),
            })
    }
}

fn split_host_port(s: &str) -> Option<(&str, u16)> {
    if let Some(v6) = s.strip_prefix('[') {
        let (host, rest) = v6.split_once(']')?;
        return match rest.strip_prefix(':') {
            Some(p) => Some((host, p.parse().ok()?)),
            None if rest.is_empty() => Some((host, DEFAULT_PORT)),
            None => None,
        };
    }
    match s.rsplit_once(':') {
        Some((h, p)) => Some((h, p.parse().ok()?)),
        None => Some((s, DEFAULT_PORT)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_forms() {
        let u = IscsiUri::parse("iscsi://127.0.0.1:3261/iqn.2026-11.test:ram1/1").unwrap();
        assert_eq!(u.host, "127.0.0.1");
        assert_eq!(u.port, 3261);
        assert_eq!(u.iqn, "iqn.2026-11.test:ram1");
        assert_eq!(u.lun, 1);
        assert_eq!(u.chap, None);
        let u = IscsiUri::parse("iscsi://bob%s3cr3t@[::1]/iqn.x:y/0").unwrap();
        assert_eq!(u.host, "::1");
        assert_eq!(u.port, DEFAULT_PORT);
        assert_eq!(u.portal(), "[::1]:3260");
        assert_eq!(u.chap, Some(("bob".into(), "s3cr3t".into())));
        let u = IscsiUri::parse("iscsi://localhost/iqn.x/7").unwrap();
        assert_eq!((u.port, u.lun), (3260, 7));
    }

    #[test]
    fn rejects_bad_uris() {
        for bad in [
            "nbd://h/iqn/0",
            "iscsi://h",
            "iscsi://h/iqn",
            "iscsi://h/iqn/x",
            "iscsi://h:99999/iqn/0",
            "iscsi://bob@h/iqn/0",
            "iscsi:///iqn/0",
            "iscsi://h//0",
            "iscsi://h/iqn/16384",
        ] {
            let e = IscsiUri::parse(bad).unwrap_err();
            assert!(e.is_usage(), "{bad}: {e}");
        }
    }
}
