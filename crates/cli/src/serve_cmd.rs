//! `sanbench serve nbd|iscsi|nvme`: the built-in RAM-disk targets, in the foreground until Ctrl-C or
//! SIGTERM, then a clean exit with a summary line that ends with the bytes the store holds
//! ("allocated N bytes"): scripts precondition a server, stop it and read that figure.
//!
//! The ready line (the URI) is the only thing a server writes to stdout, through `outln!`
//! like every command: it is informational, so a reader that has gone away (a closed pipe)
//! does not stop the server. It keeps serving until Ctrl-C or SIGTERM and then
//! exits 0 as it would have (tests/closed_pipe.rs).

use std::net::SocketAddr;

use anyhow::Context;
use sanbench_engine::units::format_size;
use sanbench_iscsi::wire::chap::Credentials;

use crate::args::{ReplyDelay, ServeCommand, ServeIscsiArgs, ServeNbdArgs, ServeNvmeArgs};
use sanbench_session::error::{usage, CliError};

pub fn run(cmd: ServeCommand) -> Result<(), CliError> {
    // Before any server thread exists: they all inherit the affinity.
    let cpus = match &cmd {
        ServeCommand::Nbd(a) => a.cpus.as_ref(),
        ServeCommand::Iscsi(a) => a.cpus.as_ref(),
        ServeCommand::Nvme(a) => a.cpus.as_ref(),
    };
    if let Some(list) = cpus {
        sanbench_session::placement::pin_process(list, "--cpus")?;
    }
    match cmd {
        ServeCommand::Nbd(a) => nbd(a),
        ServeCommand::Iscsi(a) => iscsi(a),
        ServeCommand::Nvme(a) => nvme(a),
    }
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

/// The portals of a multi-portal URI: `H1:P1,H2:P2` (IPv6 in brackets, as `SocketAddr`
/// prints it).
fn portals(addrs: &[SocketAddr]) -> String {
    addrs
        .iter()
        .map(|a| a.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// The ready line's note of `--delay` and `--cpus`, empty without them.
fn extras(d: ReplyDelay, cpus: Option<&sanbench_session::placement::CpuList>) -> String {
    let mut s =
        d.0.map_or(String::new(), |d| format!(", replies delayed {d}"));
    if let Some(c) = cpus {
        s.push_str(&format!(", pinned to {}", c.phrase()));
    }
    s
}

fn nbd(a: ServeNbdArgs) -> Result<(), CliError> {
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
    let tls = cfg.tls;
    let metrics = a
        .metrics_listen
        .map(sanbench_session::serve_metrics::bind)
        .transpose()?;
    let server = sanbench_nbd::Server::bind(cfg).map_err(|e| usage(e.to_string()))?;
    let metrics_note = match metrics {
        Some(m) => {
            let note = m.note();
            let st = server.stats();
            m.serve("nbd", server.counters(), move || st.allocated_bytes())?;
            note
        }
        None => String::new(),
    };
    let addr = portals(&server.local_addrs());
    let backing = match (&a.file, a.prealloc) {
        (Some(p), _) => format!("file {}", p.display()),
        (None, false) => "RAM, allocated as written".into(),
        (None, true) => "RAM, preallocated".into(),
    };
    // Before the ready line: whoever reads it may send SIGINT at once.
    let stop = sanbench_session::signals::stop_flag();
    outln!(
        "sanbench nbd server: {}://{addr}/{} ({}, {}{}{}{}{}{metrics_note}); Ctrl-C to stop",
        if tls == TlsMode::Require {
            "nbds"
        } else {
            "nbd"
        },
        a.export,
        format_size(server.size()),
        backing,
        if a.read_only { ", read-only" } else { "" },
        match tls {
            TlsMode::Off => "",
            TlsMode::On => ", TLS offered",
            TlsMode::Require => ", TLS required",
        },
        if a.tls_verify_peer {
            ", client certificates verified"
        } else {
            ""
        },
        extras(a.delay, a.cpus.as_ref())
    );
    let stats = server.stats();
    server.run(stop).context("nbd server")?;
    eprintln!(
        "sanbench nbd server: stopped ({} connections, {} ended by an error, {} coalesced waits, \
         allocated {} bytes)",
        stats.connections.load(std::sync::atomic::Ordering::Relaxed),
        stats.failed.load(std::sync::atomic::Ordering::Relaxed),
        stats.coalesced_waits(),
        stats.allocated_bytes()
    );
    Ok(())
}

fn iscsi(a: ServeIscsiArgs) -> Result<(), CliError> {
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
    let (cfg_chap, cfg_target_chap) = (chap.is_some(), target_chap.is_some());
    let listen = listen_addrs(&a.listen)?;
    let cfg = sanbench_iscsi::target::TargetConfig {
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
    };
    let metrics = a
        .metrics_listen
        .map(sanbench_session::serve_metrics::bind)
        .transpose()?;
    let t = sanbench_iscsi::target::Target::bind(cfg).map_err(|e| usage(e.to_string()))?;
    let metrics_note = match metrics {
        Some(m) => {
            let note = m.note();
            let st = t.stats();
            m.serve("iscsi", t.counters(), move || st.allocated_bytes())?;
            note
        }
        None => String::new(),
    };
    let addr = portals(&t.local_addrs());
    // Before the ready line: whoever reads it may send SIGINT at once.
    let stop = sanbench_session::signals::stop_flag();
    outln!(
        "sanbench iscsi target: iscsi://{addr}/{}/0 ({} LUN{} of {}, {}{}{}{metrics_note}); Ctrl-C \
         to stop",
        a.iqn,
        a.luns,
        if a.luns == 1 { "" } else { "s" },
        format_size(lun_size),
        match (&a.file, a.prealloc) {
            (Some(p), _) => format!("LUN 0 on file {}", p.display()),
            (None, false) => "RAM, allocated as written".into(),
            (None, true) => "RAM, preallocated".into(),
        },
        match (cfg_chap, cfg_target_chap) {
            (true, true) => ", CHAP required, mutual CHAP offered",
            (true, false) => ", CHAP required",
            _ => "",
        },
        extras(a.delay, a.cpus.as_ref())
    );
    let stats = t.stats();
    t.run(stop).context("iscsi target")?;
    eprintln!(
        "sanbench iscsi target: stopped ({} connections, allocated {} bytes)",
        stats.connections.load(std::sync::atomic::Ordering::Relaxed),
        stats.allocated_bytes()
    );
    Ok(())
}

fn nvme(a: ServeNvmeArgs) -> Result<(), CliError> {
    let size = match (&a.size, &a.file) {
        (Some(s), _) => s.0,
        (None, Some(_)) => 0,
        (None, None) => return Err(usage("give --size (or --file to serve a file)")),
    };
    if size < 512 && a.file.is_none() {
        return Err(usage("--size must be at least 512 bytes"));
    }
    let listen = listen_addrs(&a.listen)?;
    let cfg = sanbench_nvme::target::TargetConfig {
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
    };
    let metrics = a
        .metrics_listen
        .map(sanbench_session::serve_metrics::bind)
        .transpose()?;
    let t = sanbench_nvme::target::Target::bind(cfg).map_err(|e| usage(e.to_string()))?;
    let metrics_note = match metrics {
        Some(m) => {
            let note = m.note();
            let st = t.stats();
            m.serve("nvme", t.counters(), move || st.allocated_bytes())?;
            note
        }
        None => String::new(),
    };
    let addr = portals(&t.local_addrs());
    // Dropped (the socket file removed) when the target has stopped.
    let control = a
        .control
        .as_deref()
        .map(|p| sanbench_nvme::target::ControlServer::start(p, t.ana_control()))
        .transpose()
        .map_err(|e| usage(e.to_string()))?;
    let ana = t.ana_control().states();
    let ana_note = if a.ana.is_empty() && control.is_none() {
        String::new()
    } else {
        let states: Vec<String> = ana
            .iter()
            .map(|p| format!("{} {}", p.index, p.state))
            .collect();
        format!(
            ", ANA {}{}",
            states.join(", "),
            control.as_ref().map_or(String::new(), |c| format!(
                ", control {}",
                c.path().display()
            ))
        )
    };
    // Discovery answers on every port; the first is the one to name.
    let first = t.local_addr();
    // Before the ready line: whoever reads it may send SIGINT at once.
    let stop = sanbench_session::signals::stop_flag();
    outln!(
        "sanbench nvme target: nvme+tcp://{addr}/{}/1 ({}, {}{}{}{metrics_note}); discovery at \
         nvme+tcp://{first}; Ctrl-C to stop",
        a.nqn,
        match t.namespaces() {
            1 => format_size(t.size()),
            n => format!(
                "namespaces 1-{n} (the URI's last part), {} each",
                format_size(t.size())
            ),
        },
        match (&a.file, a.prealloc) {
            (Some(p), _) => format!("file {}", p.display()),
            (None, false) => "RAM, allocated as written".into(),
            (None, true) => "RAM, preallocated".into(),
        },
        extras(a.delay, a.cpus.as_ref()),
        ana_note,
    );
    let stats = t.stats();
    t.run(stop).context("nvme target")?;
    drop(control);
    eprintln!(
        "sanbench nvme target: stopped ({} connections, {} ended by an error, allocated {} bytes)",
        stats.connections.load(std::sync::atomic::Ordering::Relaxed),
        stats.failed.load(std::sync::atomic::Ordering::Relaxed),
        stats.allocated_bytes()
    );
    Ok(())
}
