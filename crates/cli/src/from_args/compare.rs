//! `sanbench compare ARGS` as a [`CompareConfig`].

use crate::args::CompareArgs;
use sanbench_session::compare::config::CompareConfig;
use sanbench_session::compare::prepared::{prepare, scale};
use sanbench_session::error::{usage, CliError};

use super::run::{file_options, io_timeout};

/// The configuration of `sanbench compare ARGS`.
pub fn compare(mut a: CompareArgs) -> Result<CompareConfig, CliError> {
    let fio_suite = crate::fio_cmd::resolve_compare(&mut a)?;
    let mut suite = match fio_suite {
        Some(s) => s,
        None => sanbench_engine::suite::load(&a.suite).map_err(usage)?,
    };
    scale(
        &mut suite,
        a.time.map(|d| d.0),
        a.ramp.map(|d| d.0),
        a.data.flush_every,
        a.data.fua.map(|p| p.0),
    )?;
    let prepared = prepare(suite, &a.targets, &a.reference, a.lab.as_deref())?;
    let data = super::data::data_plan(&a.data)?;
    let size = a.size.map(|b| b.0);
    let mut monitor = super::data::monitor(&a.monitor)?;
    // The lab's servers run on this host: watched (by pid), their CPU is the targets'
    // (the bottleneck's target side), not load beside the comparison (`cpu.others`).
    if let (Some(m), Some(path)) = (monitor.as_mut(), &a.lab) {
        if let Ok(Some(state)) = sanbench_lab::state::LabState::load(path) {
            for p in &state.processes {
                let spec = p.pid.to_string();
                if !m.cfg.watch.contains(&spec) {
                    m.cfg.watch.push(spec);
                }
            }
        }
    }
    // The curve levels: `--curve` or the suite's `curve`, both checked and ordered where
    // they were read (`LoadLevels`).
    let curve = a
        .curve
        .as_ref()
        .map_or_else(|| prepared.suite.curve.clone(), |l| l.0.clone());
    Ok(CompareConfig {
        prepared,
        against: a.against,
        repeat: a.repeat,
        max_repeat: a.max_repeat,
        budget: a.budget,
        min_effect: a.min_effect,
        curve,
        curve_stop: a.curve_stop.0,
        out: a.out,
        db: a.db,
        no_store: a.no_store,
        files: file_options(&a.engine, size, false)?,
        io_timeout: io_timeout(&a.engine)?,
        data,
        monitor,
        faults: a.faults,
        lab: a.lab,
        watch: (&a.watch).into(),
        live: (&a.live).into(),
        seed: a.seed,
        cpus: a.cpus,
        cpus_policy: a.cpus_policy,
        require_headroom: a.require_headroom,
        quiet: a.quiet,
    })
}
