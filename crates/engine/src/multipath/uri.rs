//! Multi-portal URIs: `iscsi://H1[:P1],H2[:P2]/IQN/LUN`, `nvme+tcp://H1,H2/NQN/NSID`,
//! `nbd://H1,H2/EXPORT`, with the multipath keys in the query: `policy=round-robin|
//! queue-length|service-time` (default service-time), `failback=immediate|manual`,
//! `path_timeout=DURATION`, `no_path_retry=DURATION` (default 30 s).
//!
//! Parsing only splits: each portal becomes the single-portal URI its engine already knows
//! (credentials, path and the remaining query keys copied to every one), so no engine learns
//! about multipath. Untrusted input (a command line, a suite file): the fuzz target
//! `multipath_uri` runs it, and every error is one line naming the URI with secrets masked.

use std::time::Duration;

use super::selector::{Config, Failback, Policy};
use crate::units::parse_duration;
use crate::uri::redact;

/// A path with I/O out and no completion for this long fails, unless the URI says otherwise
/// (capped by the run's `--io-timeout`): Linux's defaults detect a silent path in about as
/// long (open-iscsi's 5 s NOP-Out interval and timeout, nvme-tcp's 5 s keep-alive).
pub const DEFAULT_PATH_TIMEOUT: Duration = Duration::from_secs(5);

/// The multipath settings of a URI.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    pub policy: Policy,
    pub failback: Failback,
    /// A path with I/O outstanding and no completion for this long is failed (its I/Os go to
    /// the other paths); `None`: [`DEFAULT_PATH_TIMEOUT`], or the run's I/O timeout when that
    /// is shorter.
    pub path_timeout: Option<Duration>,
    pub no_path_retry: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            policy: Policy::ServiceTime,
            failback: Failback::Immediate,
            path_timeout: None,
            no_path_retry: Config::default().no_path_retry,
        }
    }
}

impl Options {
    /// The selector's configuration for these options.
    pub fn selector(&self) -> Config {
        Config {
            policy: self.policy,
            failback: self.failback,
            no_path_retry: self.no_path_retry,
            ..Config::default()
        }
    }
}

/// A URI naming one target over several portals.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MultipathUri {
    /// One single-portal URI per portal, in the order written.
    pub paths: Vec<String>,
    pub options: Options,
}

/// The query keys this module takes; the rest stay for the engine.
const KEYS: &[&str] = &["policy", "failback", "path_timeout", "no_path_retry"];

/// Splits `uri` when it names several portals or carries a multipath key (`Ok(None)`: an
/// ordinary URI, left to its engine).
pub fn parse(uri: &str) -> Result<Option<MultipathUri>, String> {
    let Some((scheme, rest)) = uri.split_once("://") else {
        return Ok(None);
    };
    // Not a URI (RFC 3986 §3.1 scheme): nothing of ours, left to whoever reads it.
    let scheme_ok = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    if !scheme_ok {
        return Ok(None);
    }
    let auth_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(auth_end);
    let (path, query) = match tail.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (tail, None),
    };
    // (as written, key, value)
    let pairs: Vec<(&str, &str, &str)> = query
        .into_iter()
        .flat_map(|q| q.split('&'))
        .filter(|kv| !kv.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (kv, k, v)
        })
        .collect();
    if !authority.contains(',') && !pairs.iter().any(|(_, k, _)| KEYS.contains(k)) {
        return Ok(None);
    }
    let bad = |why: String| format!("{}: {why}", redact(uri));
    // Credentials end at the last '@' before the first portal's end, so an '@' after a comma
    // is someone naming credentials per portal, which is refused below.
    let first_end = authority.find(',').unwrap_or(authority.len());
    let (userinfo, hosts) = match authority[..first_end].rfind('@') {
        Some(at) => authority.split_at(at + 1),
        None => ("", authority),
    };
    let mut portals: Vec<&str> = Vec::new();
    for h in hosts.split(',') {
        if h.is_empty() {
            return Err(bad("an empty portal in the list (H1[:P1],H2[:P2])".into()));
        }
        if h.contains('@') {
            return Err(bad(
                "credentials go once, before the first portal (USER%SECRET@H1,H2)".into(),
            ));
        }
        if portals.contains(&h) {
            return Err(bad(format!("portal {h} is named twice")));
        }
        portals.push(h);
    }
    let mut o = Options::default();
    let mut keep = Vec::new();
    for (i, &(_, k, _)) in pairs.iter().enumerate() {
        if KEYS.contains(&k) && pairs[..i].iter().any(|&(_, seen, _)| seen == k) {
            return Err(bad(format!("{k} is given twice")));
        }
    }
    for &(kv, k, v) in &pairs {
        match k {
            "policy" => {
                o.policy = match v {
                    "round-robin" => Policy::RoundRobin,
                    "queue-length" => Policy::QueueLength,
                    "service-time" => Policy::ServiceTime,
                    _ => {
                        return Err(bad(format!(
                            "policy '{v}' (use round-robin, queue-length or service-time)"
                        )))
                    }
                }
            }
            "failback" => {
                o.failback = match v {
                    "immediate" => Failback::Immediate,
                    "manual" => Failback::Manual,
                    _ => return Err(bad(format!("failback '{v}' (use immediate or manual)"))),
                }
            }
            "path_timeout" => {
                let d = parse_duration(v).map_err(|e| bad(format!("path_timeout: {e}")))?;
                if d.is_zero() {
                    return Err(bad("path_timeout must be above 0".into()));
                }
                o.path_timeout = Some(d);
            }
            "no_path_retry" => {
                o.no_path_retry =
                    parse_duration(v).map_err(|e| bad(format!("no_path_retry: {e}")))?
            }
            _ => keep.push(kv),
        }
    }
    let query = if keep.is_empty() {
        String::new()
    } else {
        format!("?{}", keep.join("&"))
    };
    let paths = portals
        .iter()
        .map(|h| format!("{scheme}://{userinfo}{h}{path}{query}"))
        .collect();
    Ok(Some(MultipathUri { paths, options: o }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_portals_and_keeps_the_rest_for_the_engine() {
        let m = parse("iscsi://u%s@10.0.0.1:3260,[::1]:3261/iqn.x:y/0?digest=crc32c&policy=queue-length&failback=manual&path_timeout=2s&no_path_retry=5s")
            .unwrap()
            .unwrap();
        assert_eq!(
            m.paths,
            [
                "iscsi://u%s@10.0.0.1:3260/iqn.x:y/0?digest=crc32c",
                "iscsi://u%s@[::1]:3261/iqn.x:y/0?digest=crc32c"
            ]
        );
        assert_eq!(m.options.policy, Policy::QueueLength);
        assert_eq!(m.options.failback, Failback::Manual);
        assert_eq!(m.options.path_timeout, Some(Duration::from_secs(2)));
        assert_eq!(m.options.no_path_retry, Duration::from_secs(5));
        let m = parse("nvme+tcp://h1,h2/nqn.a/1").unwrap().unwrap();
        assert_eq!(m.paths, ["nvme+tcp://h1/nqn.a/1", "nvme+tcp://h2/nqn.a/1"]);
        assert_eq!(m.options, Options::default());
        assert_eq!(m.options.policy, Policy::ServiceTime);
        let m = parse("nbd://h1,h2").unwrap().unwrap();
        assert_eq!(m.paths, ["nbd://h1", "nbd://h2"]);
    }

    #[test]
    fn one_portal_is_multipath_only_when_asked() {
        assert_eq!(parse("nbd://h1/x?submit_batch=2").unwrap(), None);
        assert_eq!(parse("mem:1G").unwrap(), None);
        assert_eq!(parse("?/&//h1,h2/x?failback=manual").unwrap(), None);
        let m = parse("nbd://h1/x?policy=round-robin").unwrap().unwrap();
        assert_eq!(m.paths, ["nbd://h1/x"]);
    }

    #[test]
    fn bad_input_is_one_line_without_the_secret() {
        for (u, want) in [
            ("iscsi://u%hunter2@h1,,h2/i/0", "empty portal"),
            ("iscsi://u%hunter2@h1,h1/i/0", "named twice"),
            ("iscsi://u%hunter2@h1,v@h2/i/0", "credentials go once"),
            ("nbd://h1,h2/?policy=fastest", "policy 'fastest'"),
            ("nbd://h1,h2/?failback=later", "failback 'later'"),
            ("nbd://h1,h2/?path_timeout=0", "above 0"),
            ("nbd://h1,h2/?no_path_retry=soon", "no_path_retry"),
            (
                "nbd://h1,h2/?policy=round-robin&policy=queue-length",
                "policy is given twice",
            ),
            ("nbd://h1/?path_timeout=1s&path_timeout=2s", "given twice"),
        ] {
            let e = parse(u).unwrap_err();
            assert!(e.contains(want), "{u}: {e}");
            assert!(!e.contains("hunter2") && !e.contains('\n'), "{e}");
        }
    }
}
