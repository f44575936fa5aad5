//! Opens target URIs: local ones through the engine crate, network schemes through their
//! crates. The one place that knows which transports this binary was built with: the table
//! [`TRANSPORTS`] (scheme, whether it takes several portals, the opener).

use std::sync::Arc;

use sanbench_engine::file::FileOptions;
use sanbench_engine::multipath;
use sanbench_engine::uri::{open_local, parse_target, TargetUri};
use sanbench_engine::Target;

use crate::context::Context;
use crate::error::{usage, CliError};

/// Opens each of `list`; `mem:` RAM disks are the ones `cx` opened before (a RAM disk lives
/// as long as its context).
pub fn open_targets(
    cx: &Context,
    list: &[String],
    opts: &FileOptions,
) -> Result<Vec<Arc<dyn Target>>, CliError> {
    let mut out = Vec::with_capacity(list.len());
    for s in list {
        let t = parse_target(s).map_err(usage)?;
        let target = match &t {
            TargetUri::Network { scheme, uri } if multipath_scheme(scheme) => {
                match multipath::uri::parse(uri).map_err(usage)? {
                    Some(m) => open_multipath(uri, m)?,
                    None => open_one(cx, s, &t, opts)?,
                }
            }
            _ => open_one(cx, s, &t, opts)?,
        };
        // An engine other than the one asked for (io_uring without extended-argument wait):
        // said once here, and kept in the target's params in every result.
        if let Some(n) = target
            .info()
            .params
            .get("engine_note")
            .and_then(|v| v.as_str())
        {
            eprintln!(
                "note: {}: {n}",
                sanbench_engine::uri::redact(&target.info().uri)
            );
        }
        out.push(target);
    }
    Ok(out)
}

/// Whether `uri` names a target with portals, which a suite's `paths` workloads can reach
/// over several paths.
pub fn takes_paths(uri: &str) -> bool {
    matches!(
        parse_target(uri),
        Ok(TargetUri::Network { scheme, .. }) if multipath_scheme(&scheme)
    )
}

/// Opens `uri` over `k` paths (a suite's `paths`): its portals in turn, so 6 paths over 2
/// portals are 3 connections to each, through the multipath layer even for one path so that
/// 1, 2 and 6 paths are measured alike. The URI's multipath options apply.
pub fn open_paths(uri: &str, k: u32) -> Result<Arc<dyn Target>, CliError> {
    let (portals, options) = match multipath::uri::parse(uri).map_err(usage)? {
        Some(m) => (m.paths, m.options),
        None => (vec![uri.to_string()], multipath::Options::default()),
    };
    let openers = (0..k as usize)
        .map(|i| path_opener(&portals[i % portals.len()]))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Arc::new(multipath::MultipathTarget::new(
        uri, openers, options,
    )?))
}

/// A network transport this binary was built with, by URI scheme: whether its URIs may name
/// several portals (`H1,H2`, with the multipath keys), and how one portal's URI is opened
/// (its options parsed here, once, so that opening it again on a reconnection can only fail
/// as a connection does). The one table of transports: a new one is a row here.
struct Transport {
    scheme: &'static str,
    multipath: bool,
    opener: fn(&str) -> Result<multipath::Opener, CliError>,
}

const TRANSPORTS: &[Transport] = &[
    Transport {
        scheme: "nbd",
        multipath: true,
        opener: nbd_opener,
    },
    Transport {
        scheme: "nbds",
        multipath: true,
        opener: nbd_opener,
    },
    Transport {
        scheme: "nbd+unix",
        multipath: false,
        opener: nbd_opener,
    },
    Transport {
        scheme: "nbds+unix",
        multipath: false,
        opener: nbd_opener,
    },
    Transport {
        scheme: "iscsi",
        multipath: true,
        opener: iscsi_opener,
    },
    Transport {
        scheme: "nvme+tcp",
        multipath: true,
        opener: nvme_opener,
    },
];

fn transport(scheme: &str) -> Option<&'static Transport> {
    TRANSPORTS.iter().find(|t| t.scheme == scheme)
}

/// Whether URIs of `scheme` may name several portals.
fn multipath_scheme(scheme: &str) -> bool {
    transport(scheme).is_some_and(|t| t.multipath)
}

fn nbd_opener(uri: &str) -> Result<multipath::Opener, CliError> {
    let (base, opts) = nbd_options(uri)?;
    Ok(Arc::new(move || {
        sanbench_nbd::open(&base, &opts).map(Arc::from)
    }))
}

fn iscsi_opener(uri: &str) -> Result<multipath::Opener, CliError> {
    let (base, opts) = iscsi_options(uri)?;
    Ok(Arc::new(move || {
        sanbench_iscsi::initiator::open(&base, &opts).map(Arc::from)
    }))
}

fn nvme_opener(uri: &str) -> Result<multipath::Opener, CliError> {
    let uri = uri.to_string();
    Ok(Arc::new(move || {
        sanbench_nvme::initiator::open(&uri).map(Arc::from)
    }))
}

/// One target over several paths: each portal opened as its own URI (and again when a
/// reconnection needs it), then checked to lead to the same logical unit (refused as bad
/// input otherwise).
fn open_multipath(uri: &str, m: multipath::MultipathUri) -> Result<Arc<dyn Target>, CliError> {
    let openers = m
        .paths
        .iter()
        .map(|p| path_opener(p))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Arc::new(multipath::MultipathTarget::new(
        uri, openers, m.options,
    )?))
}

/// Opens one path of a multipath target.
fn path_opener(p: &str) -> Result<multipath::Opener, CliError> {
    let scheme = p.split_once("://").map(|(s, _)| s).unwrap_or_default();
    match transport(scheme).filter(|t| t.multipath) {
        Some(t) => (t.opener)(p),
        None => Err(usage(format!("{p}: not a scheme with several paths"))),
    }
}

/// Opens one single-portal (or local) target.
fn open_one(
    cx: &Context,
    s: &str,
    t: &TargetUri,
    opts: &FileOptions,
) -> Result<Arc<dyn Target>, CliError> {
    Ok(match t {
        TargetUri::Network { scheme, uri } => match transport(scheme) {
            Some(tr) => (tr.opener)(uri)?()?,
            None => {
                return Err(usage(format!(
                    "{s}: the {scheme} engine is not built into this sanbench yet"
                )))
            }
        },
        // A `mem:` RAM disk lives as long as the context: every cell of a comparison (and
        // the preconditioning before them) drives the same one, as it would a real target,
        // instead of a fresh zeroed disk per cell that loses what was written (and
        // `--verify`'s map with it).
        TargetUri::Mem { .. } => cx.mem_target(s, || Ok(open_local(s, t, opts)?))?,
        TargetUri::Passthrough { kind, path } => crate::passthrough::open(s, *kind, path, opts)?,
        _ => open_local(s, t, opts)?,
    })
}

/// Takes sanbench's own query keys out of an NBD URI: `submit_batch` (requests held back to
/// send together), `sockio` (`uring` or `poll`: the socket layer). The rest (`socket=` of `nbd+unix`, libnbd's `tls-*` keys and `ktls` of `nbds`) stays
/// for the NBD crate.
fn nbd_options(uri: &str) -> Result<(String, sanbench_nbd::ClientOptions), CliError> {
    let mut o = sanbench_nbd::ClientOptions::default();
    let Some((base, query)) = uri.split_once('?') else {
        return Ok((uri.to_string(), o));
    };
    let mut keep = Vec::new();
    for kv in query.split('&').filter(|s| !s.is_empty()) {
        match kv.split_once('=').unwrap_or((kv, "")) {
            ("submit_batch", v) => o.submit_batch = submit_batch(uri, v)?,
            ("sockio", v) => {
                o.socket = sanbench_nbd::SocketLayer::parse(v)
                    .ok_or_else(|| usage(format!("{uri}: sockio must be uring or poll")))?
            }
            ("socket", _) => keep.push(kv),
            (k, _) if k.starts_with("tls-") || k == "ktls" => keep.push(kv),
            (k, _) => {
                return Err(usage(format!(
                    "{uri}: unknown option '{k}' (submit_batch, sockio; socket for nbd+unix; \
                     tls-certificates, tls-psk-file, tls-verify-peer, tls-hostname, ktls for nbds)"
                )))
            }
        }
    }
    let base = if keep.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", keep.join("&"))
    };
    Ok((base, o))
}

fn submit_batch(uri: &str, v: &str) -> Result<u32, CliError> {
    v.parse()
        .ok()
        .filter(|n| *n >= 1)
        .ok_or_else(|| usage(format!("{uri}: submit_batch must be a number >= 1")))
}

/// Splits `iscsi://...?digest=crc32c&initiator=IQN` into the URI the initiator opens and its
/// options. Query keys: `digest` (both), `header_digest`, `data_digest` (`crc32c` or `none`),
/// `initiator` (our IQN), `submit_batch` (commands held back to send together), `sockio`
/// (`uring` or `poll`: the socket layer).
fn iscsi_options(
    uri: &str,
) -> Result<(String, sanbench_iscsi::initiator::InitiatorOptions), CliError> {
    use sanbench_iscsi::initiator::{Digest, InitiatorOptions};
    let mut o = InitiatorOptions::default();
    let Some((base, query)) = uri.split_once('?') else {
        return Ok((uri.to_string(), o));
    };
    // Messages name the URI with its secrets masked.
    let shown = sanbench_engine::uri::redact(uri);
    let digest = |v: &str| match v.to_ascii_lowercase().as_str() {
        "crc32c" => Ok(Digest::Crc32c),
        "none" => Ok(Digest::None),
        _ => Err(usage(format!("{shown}: digest '{v}' (use crc32c or none)"))),
    };
    let (mut target_user, mut target_password) = (None, None);
    for kv in query.split('&').filter(|s| !s.is_empty()) {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        match k {
            "digest" => {
                o.header_digest = digest(v)?;
                o.data_digest = digest(v)?;
            }
            "header_digest" => o.header_digest = digest(v)?,
            "data_digest" => o.data_digest = digest(v)?,
            "initiator" if !v.is_empty() => o.initiator_name = v.to_string(),
            "submit_batch" => o.submit_batch = submit_batch(&shown, v)?,
            "sockio" => {
                o.socket = sanbench_nbd::SocketLayer::parse(v)
                    .ok_or_else(|| usage(format!("{shown}: sockio must be uring or poll")))?
            }
            "target_user" if !v.is_empty() => target_user = Some(v.to_string()),
            "target_password" if !v.is_empty() => target_password = Some(v.to_string()),
            // Kept off the command line, which every user of the host can read.
            "target_password_file" if !v.is_empty() => {
                target_password = Some(
                    sanbench_iscsi::initiator::uri::secret_from_file(v)
                        .map_err(|e| usage(format!("{shown}: {e}")))?,
                )
            }
            "target_password_env" if !v.is_empty() => {
                target_password = Some(
                    sanbench_iscsi::initiator::uri::secret_from_env(v)
                        .map_err(|e| usage(format!("{shown}: {e}")))?,
                )
            }
            _ => return Err(usage(format!("{shown}: unknown option '{k}' (digest, header_digest, data_digest, initiator, submit_batch, sockio, target_user, target_password, target_password_file, target_password_env)"))),
        }
    }
    o.target_chap = match (target_user, target_password) {
        (Some(u), Some(p)) => Some(sanbench_iscsi::wire::chap::Credentials::new(u, p)),
        (None, None) => None,
        _ => {
            return Err(usage(format!(
                "{shown}: mutual CHAP takes both target_user and target_password"
            )))
        }
    };
    Ok((base.to_string(), o))
}
