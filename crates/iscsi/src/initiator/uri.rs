//! `iscsi://[USER%SECRET@]HOST[:PORT]/IQN/LUN`, the libiscsi URI form (without its `?`
//! options). The IQN may contain `:`; HOST may be an IPv6 literal in brackets.
//!
//! A command line is visible to every user of the host (`ps`, /proc/PID/cmdline), so the
//! secret can instead be named: `USER%@FILE@HOST` reads it from FILE (its first line; the path
//! may hold `/` but not `@`) and `USER%$VAR@HOST` from the environment variable VAR.

use std::net::{SocketAddr, ToSocketAddrs};

use sanbench_io::EngineError;

use crate::wire::chap::Credentials;

/// Default iSCSI port (RFC 7143 §13.1, IANA).
pub const DEFAULT_PORT: u16 = 3260;

/// A parsed `iscsi://` URI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IscsiUri {
    pub host: String,
    pub port: u16,
    pub iqn: String,
    pub lun: u16,
    /// CHAP credentials when the URI carries `USER%SECRET@` (or names the secret's file or
    /// variable).
    pub chap: Option<Credentials>,
}

fn invalid(uri: &str, why: &str) -> EngineError {
    EngineError::Invalid(format!(
        "{}: {why} (expected iscsi://[USER%SECRET@]HOST[:PORT]/IQN/LUN)",
        sanbench_io::redact::redact(uri)
    ))
}

impl IscsiUri {
    pub fn parse(uri: &str) -> Result<IscsiUri, EngineError> {
        let rest = uri
            .strip_prefix("iscsi://")
            .ok_or_else(|| invalid(uri, "not an iscsi:// URI"))?;
        // USER%@FILE@: the file's path may hold '/', so it is cut out before the authority.
        let (file_cred, rest) = match rest.split_once("%@") {
            Some((user, after)) if !user.contains('/') => {
                let (file, rest) = after
                    .split_once('@')
                    .ok_or_else(|| invalid(uri, "USER%@FILE must be followed by @HOST"))?;
                if user.is_empty() || file.is_empty() {
                    return Err(invalid(uri, "empty CHAP user or secret file"));
                }
                let secret = secret_from_file(file).map_err(|e| invalid(uri, &e))?;
                (Some(Credentials::new(user, secret)), rest)
            }
            _ => (None, rest),
        };
        let (authority, path) = rest
            .split_once('/')
            .ok_or_else(|| invalid(uri, "missing /IQN/LUN"))?;
        let (chap, hostport) = match authority.rsplit_once('@') {
            Some(_) if file_cred.is_some() => {
                return Err(invalid(uri, "more than one set of credentials"))
            }
            Some((cred, hp)) => {
                let (user, secret) = cred
                    .split_once('%')
                    .ok_or_else(|| invalid(uri, "credentials must be USER%SECRET"))?;
                if user.is_empty() || secret.is_empty() {
                    return Err(invalid(uri, "empty CHAP user or secret"));
                }
                let secret = match secret.strip_prefix('$') {
                    Some(var) => secret_from_env(var).map_err(|e| invalid(uri, &e))?,
                    None => secret.to_string(),
                };
                (Some(Credentials::new(user, secret)), hp)
            }
            None => (file_cred, authority),
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

/// A CHAP secret from the first line of `path` (a trailing newline is not part of it).
pub fn secret_from_file(path: &str) -> Result<String, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("CHAP secret file {path}: {e}"))?;
    let line = text.lines().next().unwrap_or("").trim_end_matches('\r');
    if line.is_empty() {
        return Err(format!("CHAP secret file {path} is empty"));
    }
    Ok(line.to_string())
}

/// A CHAP secret from the environment variable `var`.
pub fn secret_from_env(var: &str) -> Result<String, String> {
    match std::env::var(var) {
        Ok(s) if !s.is_empty() => Ok(s),
        Ok(_) => Err(format!("CHAP secret variable {var} is empty")),
        Err(_) => Err(format!("CHAP secret variable {var} is not set")),
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
        assert_eq!(u.chap, Some(Credentials::new("bob", "s3cr3t")));
        // A parsed URI may be logged with {:?}: the secret is not in it.
        let d = format!("{u:?}");
        assert!(d.contains("bob") && !d.contains("s3cr3t"), "{d}");
        let u = IscsiUri::parse("iscsi://localhost/iqn.x/7").unwrap();
        assert_eq!((u.port, u.lun), (3260, 7));
    }

    #[test]
    fn secrets_come_from_a_file_or_the_environment() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("secret");
        std::fs::write(&f, "fr0m-a-f1le\nignored\n").unwrap();
        let uri = format!("iscsi://bob%@{}@127.0.0.1:3261/iqn.x:y/0", f.display());
        let u = IscsiUri::parse(&uri).unwrap();
        assert_eq!(u.chap, Some(Credentials::new("bob", "fr0m-a-f1le")));
        assert_eq!(
            (u.host.as_str(), u.port, u.iqn.as_str()),
            ("127.0.0.1", 3261, "iqn.x:y")
        );
        // The redacted form names the file, never its contents.
        assert!(!sanbench_io::redact::redact(&uri).contains("fr0m"));

        std::env::set_var("SANBENCH_TEST_URI_SECRET", "fr0m-env");
        let u = IscsiUri::parse("iscsi://bob%$SANBENCH_TEST_URI_SECRET@h/iqn.x/1").unwrap();
        assert_eq!(u.chap, Some(Credentials::new("bob", "fr0m-env")));

        // Missing or empty sources are bad input, naming the source and not a secret.
        std::fs::write(&f, "\n").unwrap();
        let missing = dir.path().join("nope");
        for bad in [
            format!("iscsi://bob%@{}@h/iqn/0", f.display()),
            format!("iscsi://bob%@{}@h/iqn/0", missing.display()),
            format!("iscsi://bob%@{}", missing.display()),
            "iscsi://bob%$SANBENCH_TEST_URI_UNSET@h/iqn/0".to_string(),
        ] {
            let e = IscsiUri::parse(&bad).unwrap_err();
            assert!(e.is_usage(), "{bad}: {e}");
            assert!(
                e.to_string().contains("CHAP secret") || e.to_string().contains("@HOST"),
                "{e}"
            );
        }
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
