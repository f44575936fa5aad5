//! `sanbench lab up|down|status|fault`: the software test bed (crate `sanbench-lab`). Without
//! root, `ip` or `tc` it says exactly what is missing and exits 2.

use anyhow::Context;
use sanbench_lab::cmd::{preflight, System};
use sanbench_lab::LabConfig;

use crate::args::{LabCommand, LabFaultArgs, LabStateArgs, LabUpArgs};
use sanbench_session::error::CliError;
use sanbench_session::faults::lab_err;

pub fn run(cmd: LabCommand) -> Result<(), CliError> {
    match cmd {
        LabCommand::Up(a) => up(a),
        LabCommand::Down(a) => down(a),
        LabCommand::Status(a) => status(a),
        LabCommand::Fault(a) => fault(a),
    }
}

pub(crate) fn state_path(a: &LabStateArgs) -> std::path::PathBuf {
    a.state.clone().unwrap_or_else(sanbench_lab::default_path)
}

fn up(a: LabUpArgs) -> Result<(), CliError> {
    // Input first, so a typo is reported even where the lab could not run.
    let links = sanbench_lab::parse_links(&a.links).map_err(lab_err)?;
    let targets = sanbench_lab::parse_targets(&a.targets).map_err(lab_err)?;
    if let Some(c) = &a.target_cpus {
        sanbench_session::placement::check(c, "--target-cpus")?;
    }
    let groups = sanbench_lab::parse_paths(&a.paths, &links).map_err(lab_err)?;
    preflight(links.iter().any(|l| !l.offload)).map_err(lab_err)?;
    let exe = std::env::current_exe().context("finding the sanbench binary")?;
    let cfg = LabConfig {
        state_path: state_path(&a.state),
        // A plain byte count: nbdkit, tgtd and sanbench all read it (nbdkit not "1GiB").
        size: a.size.0.to_string(),
        runner: &System,
    };
    let lab = sanbench_lab::up(&cfg, &links, &groups, &targets, &exe.to_string_lossy())
        .map_err(lab_err)?;
    if !lab.cleaned.is_empty() {
        eprintln!(
            "sanbench lab: removed an earlier lab first: {}",
            lab.cleaned.join("; ")
        );
    }
    for l in &lab.state.links {
        outln!(
            "link {:<8} {:>8} mtu {:<5} offloads {:<3} {:<8} host {} {} <-> {} {} in {}",
            l.info.name,
            l.rate,
            l.info.mtu,
            if l.info.offload { "on" } else { "off" },
            if l.info.switched {
                "switched"
            } else {
                "direct"
            },
            l.host_if,
            l.host_addr,
            l.target_addr,
            l.target_if,
            l.namespace
        );
    }
    for t in &lab.state.targets {
        match t.paths.len() {
            0 => outln!("  {:<16} {}", t.name, t.uri),
            n => outln!("  {:<16} {} (multipath, {n} paths)", t.name, t.uri),
        }
    }
    if let Some(c) = &a.target_cpus {
        // Every thread each target has now; threads they make later inherit it.
        for p in &lab.state.processes {
            if let Err(e) = sanbench_session::placement::pin_pid(p.pid, c) {
                eprintln!("sanbench lab: cannot pin {} to {}: {e}", p.name, c.phrase());
            }
        }
        outln!("targets pinned to {}", c.phrase());
    }
    outln!("lab file: {}", lab.path.display());
    outln!(
        "next: sanbench compare --lab {} --suite lab; sanbench lab down{}",
        lab.path.display(),
        match &a.state.state {
            Some(p) => format!(" --state {}", p.display()),
            None => String::new(),
        }
    );
    Ok(())
}

fn down(a: LabStateArgs) -> Result<(), CliError> {
    preflight(false).map_err(lab_err)?;
    let path = state_path(&a);
    let done = sanbench_lab::down(&System, &path).map_err(lab_err)?;
    if done.is_empty() {
        outln!("sanbench lab: nothing to remove");
    }
    for d in &done {
        outln!("{d}");
    }
    Ok(())
}

fn status(a: LabStateArgs) -> Result<(), CliError> {
    preflight(false).map_err(lab_err)?;
    let s = sanbench_lab::status(&System, &state_path(&a)).map_err(lab_err)?;
    out!("{s}");
    Ok(())
}

fn fault(a: LabFaultArgs) -> Result<(), CliError> {
    // The action first, so a typo is reported even where the lab could not run.
    let action = sanbench_lab::FaultAction::parse(&a.action).map_err(lab_err)?;
    preflight(false).map_err(lab_err)?;
    let path = state_path(&a.state);
    let l = sanbench_lab::fault::fault(&System, &path, &a.link, action).map_err(lab_err)?;
    outln!(
        "link {}: {action}: now {} ({} and {} in {})",
        l.info.name,
        l.impairment.describe(),
        l.host_if,
        l.target_if,
        l.namespace
    );
    Ok(())
}
