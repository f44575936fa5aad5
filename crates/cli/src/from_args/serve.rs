//! `sanbench serve nbd|iscsi|nvme ARGS` as a [`ServeConfig`]: the protocol crate's server
//! configuration, every flag checked (sizes, listen addresses, TLS, CHAP) before anything
//! binds.

use std::net::SocketAddr;

use sanbench_iscsi::wire::chap::Credentials;
use sanbench_session::error::{usage, CliError};
use sanbench_session::serve::{ServeConfig, Server};

use crate::args::{ServeCommand, ServeIscsiArgs, ServeNbdArgs, ServeNvmeArgs};

/// The configuration of `sanbench serve ARGS`.
pub fn serve(cmd: ServeCommand) -> Result<ServeConfig, CliError> {
    Ok(match cmd {
        ServeCommand::Nbd(a) => ServeConfig {
            metrics_listen: a.metrics_listen,
            cpus: a.cpus.clone(),
            server: Server::Nbd(nbd(a)?),
        },
        ServeCommand::Iscsi(a) => ServeConfig {
            metrics_listen: a.metrics_listen,
            cpus: a.cpus.clone(),
            server: Server::Iscsi(iscsi(a)?),
        },
        ServeCommand::Nvme(a) => ServeConfig {
            metrics_listen: a.metrics_listen,
            cpus: a.cpus.clone(),
            server: Server::Nvme {
                control: a.control.clone(),
                target: nvme(a)?,
            },
        },
    })
}

/// Every `--listen` address, in order (clap gives at least the default one).
fn listen_addrs(list: &[String]) -> Result<Vec<SocketAddr>, CliError> {
    let addrs = list
        .iter()
        .map(|s| {
            s.parse().map_err(|_| {
                usage(format!(
                    "--listen: '{s}' is not an address like 127.0.0.1:10809"
                ))
            })
        })
        .collect::<Result<Vec<SocketAddr>, _>>()?;
    if addrs.is_empty() {
        return Err(usage("--listen: give at least one address"));
    }
    Ok(addrs)
}

fn nbd(a: ServeNbdArgs) -> Result<sanbench_nbd::ServerConfig, CliError> {
    let size = match (&a.size, &a.file) {
        (Some(s), _) => s.0,
        (None, Some(_)) => 0,
        (None, None) => return Err(usage("give --size (or --file to serve a file)")),
    };
    if size == 0 && a.file.is_none() {
        return Err(usage("--size must be above 0"));
    }
    let listen = listen_addrs(&a.listen)?;
    let mut cfg = match &a.file {
        Some(p) => sanbench_nbd::ServerConfig::file(listen[0], p.clone(), size),
        None => sanbench_nbd::ServerConfig::ram(listen[0], size),
    };
    cfg.also_listen = listen[1..].to_vec();
    cfg.export = a.export.clone();
    cfg.read_only = a.read_only;
    cfg.prealloc = a.prealloc;
    let coalesce = a.coalesce.0;
    cfg.coalesce = (!coalesce.is_zero()).then_some(coalesce);
    cfg.delay = a.delay.0;
    use sanbench_nbd::server::{Credentials, TlsMode};
    cfg.tls_credentials = match (&a.tls_certificates, &a.tls_psk) {
        (Some(d), _) => Some(Credentials::Certificates(d.clone())),
        (None, Some(f)) => Some(Credentials::Psk(f.clone())),
        (None, None) => None,
    };
    cfg.tls = match (a.tls, &cfg.tls_credentials) {
        (Some(TlsMode::Off), Some(_)) => {
            return Err(usage("--tls off: leave out --tls-certificates / --tls-psk"))
        }
        (Some(TlsMode::On | TlsMode::Require), None) => {
            return Err(usage(
                "--tls on/require needs --tls-certificates DIR or --tls-psk FILE",
            ));
        }
        (Some(m), _) => m,
        (None, Some(_)) => TlsMode::Require,
        (None, None) => TlsMode::Off,
    };
    if a.tls_verify_peer && a.tls_certificates.is_none() {
        return Err(usage(
            "--tls-verify-peer checks client certificates: give --tls-certificates DIR \
             (with ca-cert.pem); a --tls-psk key already authenticates the client",
        ));
    }
    cfg.tls_verify_peer = a.tls_verify_peer;
    cfg.ktls = a.ktls;
    Ok(cfg)
}

fn iscsi(a: ServeIscsiArgs) -> Result<sanbench_iscsi::target::TargetConfig, CliError> {
    let lun_size = match (&a.size, &a.file) {
        (Some(s), _) => s.0,
        (None, Some(f)) => std::fs::metadata(f)
            .map(|m| m.len())
            .map_err(|e| usage(format!("--file {}: {e}", f.display())))?,
        (None, None) => return Err(usage("give --size (or --file to serve a file)")),
    };
    if lun_size < 512 {
        return Err(usage("--size must be at least 512 bytes"));
    }
    if a.luns == 0 || a.luns > 255 {
        return Err(usage("--luns must be between 1 and 255"));
    }
    let credentials = |flag: &str, v: Option<&str>| {
        v.map(|c| {
            c.split_once(':')
                .filter(|(u, s)| !u.is_empty() && !s.is_empty())
                .map(|(u, s)| Credentials::new(u, s))
                .ok_or_else(|| usage(format!("{flag} takes NAME:SECRET")))
        })
        .transpose()
    };
    // A flag's value, or the first line of its file (a command line is visible to every user
    // of the host; a file can be readable by its owner only).
    let from_file = |flag: &str, f: Option<&std::path::PathBuf>| {
        f.map(|f| {
            std::fs::read_to_string(f)
                .map_err(|e| usage(format!("{flag} {}: {e}", f.display())))
                .map(|t| t.lines().next().unwrap_or("").trim_end().to_string())
        })
        .transpose()
    };
    let chap_text = match from_file("--chap-file", a.chap_file.as_ref())? {
        Some(t) => Some(t),
        None => a.chap.clone(),
    };
    let target_text = match from_file("--target-chap-file", a.target_chap_file.as_ref())? {
        Some(t) => Some(t),
        None => a.target_chap.clone(),
    };
    let chap = credentials("--chap", chap_text.as_deref())?;
    let target_chap = credentials("--target-chap", target_text.as_deref())?;
    match (&chap, &target_chap) {
        (None, Some(_)) => {
            return Err(usage(
                "--target-chap (mutual CHAP) needs --chap: initiators authenticate first",
            ))
        }
        // RFC 7143 §12.1.3: a secret that authenticates initiators must not authenticate
        // the target.
        (Some(i), Some(t)) if i.secret == t.secret => {
            return Err(usage("--chap and --target-chap must use different secrets"))
        }
        _ => {}
    }
    let listen = listen_addrs(&a.listen)?;
    Ok(sanbench_iscsi::target::TargetConfig {
        listen: listen[0],
        also_listen: listen[1..].to_vec(),
        iqn: a.iqn.clone(),
        luns: a.luns,
        lun_size,
        chap,
        target_chap,
        file: a.file.clone(),
        prealloc: a.prealloc,
        delay: a.delay.0,
    })
}

fn nvme(a: ServeNvmeArgs) -> Result<sanbench_nvme::target::TargetConfig, CliError> {
    let size = match (&a.size, &a.file) {
        (Some(s), _) => s.0,
        (None, Some(_)) => 0,
        (None, None) => return Err(usage("give --size (or --file to serve a file)")),
    };
    if size < 512 && a.file.is_none() {
        return Err(usage("--size must be at least 512 bytes"));
    }
    let listen = listen_addrs(&a.listen)?;
    Ok(sanbench_nvme::target::TargetConfig {
        listen: listen[0],
        also_listen: listen[1..].to_vec(),
        nqn: a.nqn.clone(),
        size,
        namespaces: a.namespaces,
        file: a.file.clone(),
        prealloc: a.prealloc,
        delay: a.delay.0,
        ana: a.ana.clone(),
        ..Default::default()
    })
}
