//! `serve nbd|iscsi|nvme` as a library function: the built-in RAM-disk (or file) targets,
//! served until the stop flag (Ctrl-C or SIGTERM) is raised, then stopped cleanly with a
//! summary that ends with the bytes the store holds ("allocated N bytes": scripts
//! precondition a server, stop it and read that figure).
//!
//! The configuration is the protocol crate's own server configuration, built and checked
//! once by the binary (crates/cli from_args/serve.rs). The ready line (the URI and what is
//! served) goes to the caller's `ready` as soon as the server listens: the binary prints it
//! to stdout, the only thing a server writes there.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::Context;
use sanbench_blockstore::delay::Delay;
use sanbench_engine::units::format_size;

use crate::error::{usage, CliError};
use crate::placement::CpuList;

/// Which server, configured.
pub enum Server {
    Nbd(sanbench_nbd::ServerConfig),
    Iscsi(sanbench_iscsi::target::TargetConfig),
    Nvme {
        target: sanbench_nvme::target::TargetConfig,
        /// The ANA control socket (`serve nvme --control`).
        control: Option<PathBuf>,
    },
}

/// Everything one `serve` needs, typed.
pub struct ServeConfig {
    pub server: Server,
    /// The server's Prometheus endpoint.
    pub metrics_listen: Option<SocketAddr>,
    /// The CPUs the server's threads run on (the process is pinned before any exists).
    pub cpus: Option<CpuList>,
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

/// The ready line's note of a reply delay and the CPUs, empty without them.
fn extras(d: Option<Delay>, cpus: Option<&CpuList>) -> String {
    let mut s = d.map_or(String::new(), |d| format!(", replies delayed {d}"));
    if let Some(c) = cpus {
        s.push_str(&format!(", pinned to {}", c.phrase()));
    }
    s
}

/// What backs the store, as the ready line says it.
fn backing(file: Option<&std::path::Path>, prealloc: bool, file_word: &str) -> String {
    match (file, prealloc) {
        (Some(p), _) => format!("{file_word} {}", p.display()),
        (None, false) => "RAM, allocated as written".into(),
        (None, true) => "RAM, preallocated".into(),
    }
}

/// Serves until `stop` is raised (the binary passes its Ctrl-C / SIGTERM flag,
/// [`crate::signals::stop_flag`]): `ready` gets the ready line once the server listens, before
/// anything is served; the summary line of the stopped server is returned.
pub fn execute(
    c: ServeConfig,
    stop: Arc<AtomicBool>,
    ready: &mut dyn FnMut(&str),
) -> Result<String, CliError> {
    // Before any server thread exists: they all inherit the affinity.
    if let Some(list) = &c.cpus {
        crate::placement::pin_process(list, "--cpus")?;
    }
    let metrics = c
        .metrics_listen
        .map(crate::serve_metrics::bind)
        .transpose()?;
    let cpus = c.cpus.as_ref();
    match c.server {
        Server::Nbd(cfg) => nbd(cfg, metrics, cpus, stop, ready),
        Server::Iscsi(cfg) => iscsi(cfg, metrics, cpus, stop, ready),
        Server::Nvme { target, control } => nvme(target, control, metrics, cpus, stop, ready),
    }
}

fn nbd(
    cfg: sanbench_nbd::ServerConfig,
    metrics: Option<crate::serve_metrics::Bound>,
    cpus: Option<&CpuList>,
    stop: Arc<AtomicBool>,
    ready: &mut dyn FnMut(&str),
) -> Result<String, CliError> {
    use sanbench_nbd::server::TlsMode;
    let tls = cfg.tls;
    // Who will make the TLS records, as far as the kernel can tell before any client came:
    // each connection hands over after its handshake (X.509 sessions with a cipher the
    // kernel has).
    let records = match (tls, cfg.ktls) {
        (TlsMode::Off, _) => String::new(),
        (_, sanbench_nbd::server::KtlsMode::Off) => {
            ", TLS records in user space (--ktls off)".into()
        }
        (_, _) => match sanbench_nbd::tls::kernel_tls_available() {
            Ok(()) => ", TLS records by the kernel".into(),
            Err(why) => format!(", TLS records in user space ({why})"),
        },
    };
    let (export, read_only, verify_peer, delay) = (
        cfg.export.clone(),
        cfg.read_only,
        cfg.tls_verify_peer,
        cfg.delay,
    );
    let backing = backing(cfg.file.as_deref(), cfg.prealloc, "file");
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
    ready(&format!(
        "sanbench nbd server: {}://{addr}/{export} ({}, {backing}{}{}{}{}{}{metrics_note}); \
         Ctrl-C to stop",
        if tls == TlsMode::Require {
            "nbds"
        } else {
            "nbd"
        },
        format_size(server.size()),
        if read_only { ", read-only" } else { "" },
        match tls {
            TlsMode::Off => "",
            TlsMode::On => ", TLS offered",
            TlsMode::Require => ", TLS required",
        },
        if verify_peer {
            ", client certificates verified"
        } else {
            ""
        },
        records,
        extras(delay, cpus)
    ));
    let stats = server.stats();
    server.run(stop).context("nbd server")?;
    Ok(format!(
        "sanbench nbd server: stopped ({} connections, {} ended by an error, {} coalesced waits, \
         allocated {} bytes{})",
        stats.connections.load(Ordering::Relaxed),
        stats.failed.load(Ordering::Relaxed),
        stats.coalesced_waits(),
        stats.allocated_bytes(),
        match stats.kernel_tls_connections() {
            0 => String::new(),
            n => format!(", {n} with kernel TLS records"),
        }
    ))
}

fn iscsi(
    cfg: sanbench_iscsi::target::TargetConfig,
    metrics: Option<crate::serve_metrics::Bound>,
    cpus: Option<&CpuList>,
    stop: Arc<AtomicBool>,
    ready: &mut dyn FnMut(&str),
) -> Result<String, CliError> {
    let (iqn, luns, lun_size, delay) = (cfg.iqn.clone(), cfg.luns, cfg.lun_size, cfg.delay);
    let backing = backing(cfg.file.as_deref(), cfg.prealloc, "LUN 0 on file");
    let chap = match (cfg.chap.is_some(), cfg.target_chap.is_some()) {
        (true, true) => ", CHAP required, mutual CHAP offered",
        (true, false) => ", CHAP required",
        _ => "",
    };
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
    ready(&format!(
        "sanbench iscsi target: iscsi://{addr}/{iqn}/0 ({luns} LUN{} of {}, {backing}{chap}{}\
         {metrics_note}); Ctrl-C to stop",
        if luns == 1 { "" } else { "s" },
        format_size(lun_size),
        extras(delay, cpus)
    ));
    let stats = t.stats();
    t.run(stop).context("iscsi target")?;
    Ok(format!(
        "sanbench iscsi target: stopped ({} connections, allocated {} bytes)",
        stats.connections.load(Ordering::Relaxed),
        stats.allocated_bytes()
    ))
}

fn nvme(
    cfg: sanbench_nvme::target::TargetConfig,
    control: Option<PathBuf>,
    metrics: Option<crate::serve_metrics::Bound>,
    cpus: Option<&CpuList>,
    stop: Arc<AtomicBool>,
    ready: &mut dyn FnMut(&str),
) -> Result<String, CliError> {
    let (nqn, delay, ana_given) = (cfg.nqn.clone(), cfg.delay, !cfg.ana.is_empty());
    let backing = backing(cfg.file.as_deref(), cfg.prealloc, "file");
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
    let control = control
        .as_deref()
        .map(|p| sanbench_nvme::target::ControlServer::start(p, t.ana_control()))
        .transpose()
        .map_err(|e| usage(e.to_string()))?;
    let ana = t.ana_control().states();
    let ana_note = if !ana_given && control.is_none() {
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
    ready(&format!(
        "sanbench nvme target: nvme+tcp://{addr}/{nqn}/1 ({}, {backing}{}{ana_note}{metrics_note}); \
         discovery at nvme+tcp://{first}; Ctrl-C to stop",
        match t.namespaces() {
            1 => format_size(t.size()),
            n => format!(
                "namespaces 1-{n} (the URI's last part), {} each",
                format_size(t.size())
            ),
        },
        extras(delay, cpus),
    ));
    let stats = t.stats();
    t.run(stop).context("nvme target")?;
    drop(control);
    Ok(format!(
        "sanbench nvme target: stopped ({} connections, {} ended by an error, allocated {} bytes)",
        stats.connections.load(Ordering::Relaxed),
        stats.failed.load(Ordering::Relaxed),
        stats.allocated_bytes()
    ))
}
