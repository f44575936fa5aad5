//! `sanbench run ARGS` as a [`RunConfig`].

use std::time::Duration;

use sanbench_doc::spec_toml::{Defaults, SegmentFile, WorkloadFile};
use sanbench_engine::file::{EngineKind, FileOptions};
use sanbench_engine::units::Bytes;
use sanbench_engine::Workload;

use crate::args::{EngineArgs, RunArgs};
use sanbench_session::error::{usage, CliError};
use sanbench_session::faults::Faults;
use sanbench_session::placement::CpusPolicy;
use sanbench_session::run_config::RunConfig;

/// The configuration of `sanbench run ARGS`: a `--fio` job resolved (its targets unless
/// the command line names them, its engine, data and CPU settings, its size), the
/// workload built once, every value checked before any target opens.
pub fn run(mut a: RunArgs) -> Result<RunConfig, CliError> {
    let fio_workload = crate::fio_cmd::resolve_run(&mut a)?;
    let workload = workload_of(&a, fio_workload)?;
    let data = super::data::data_plan(&a.data)?;
    let size = a.size.map(|b| b.0);
    let files = file_options(&a.engine, size, workload.has_writes() || data.writes())?;
    // Before any target opens: a schedule that cannot run is bad input.
    let faults = Faults::prepare(
        &a.faults,
        a.lab.as_deref(),
        &[("the run".into(), workload.time)],
    )?;
    let monitor = super::data::monitor(&a.monitor)?;
    let mut fio_setup = crate::fio_cmd::setup_of(&a.engine, &a.data, &a.targets);
    fio_setup.cpus_split = a.cpus_policy == CpusPolicy::Split;
    fio_setup.cpus = (a.cpus.is_some() || fio_setup.cpus_split)
        .then(|| sanbench_session::placement::split_set(a.cpus.as_ref()).to_string());
    Ok(RunConfig {
        targets: a.targets,
        workload,
        files,
        io_timeout: io_timeout(&a.engine)?,
        data,
        faults,
        watch: (&a.watch).into(),
        live: (&a.live).into(),
        monitor,
        seed: a.seed,
        cpus: a.cpus,
        cpus_policy: a.cpus_policy,
        json: a.json,
        quiet: a.quiet,
        monitor_only_ranks: a.monitor_only_ranks,
        emit_fio: a.emit_fio,
        fio_setup,
    })
}

/// How targets open, from the engine flags: `writes` when the workload or the precondition
/// writes (write-safety check, opened read-write).
pub fn file_options(
    e: &EngineArgs,
    size: Option<u64>,
    writes: bool,
) -> Result<FileOptions, CliError> {
    let engine: EngineKind = e.engine.parse().map_err(usage)?;
    Ok(FileOptions {
        size,
        engine,
        direct: if e.direct {
            Some(true)
        } else if e.buffered {
            Some(false)
        } else {
            None
        },
        force: e.force,
        writes,
        keep_cache: e.no_invalidate,
    })
}

pub fn io_timeout(e: &EngineArgs) -> Result<Duration, CliError> {
    Ok(e.io_timeout.0)
}

/// Builds the workload: a fio job's, a spec file, or one segment from flags; load and timing
/// flags override.
fn workload_of(a: &RunArgs, fio: Option<Workload>) -> Result<Workload, CliError> {
    let seg_flags = a.bs.is_some()
        || a.read_bs.is_some()
        || a.write_bs.is_some()
        || a.read.is_some()
        || a.trim.is_some()
        || a.write_zeroes.is_some()
        || a.random.is_some()
        || a.align.is_some();
    if let Some(w) = fio {
        return fio_workload(a, w, seg_flags);
    }
    let mut file = match &a.spec {
        Some(path) => {
            if seg_flags {
                return Err(usage(
                    "--bs, --read-bs, --write-bs, --read, --trim, --write-zeroes, --random and \
                     --align describe one segment; put them in the --spec file instead",
                ));
            }
            let text = std::fs::read_to_string(path)
                .map_err(|e| usage(format!("cannot read {}: {e}", path.display())))?;
            WorkloadFile::parse(&text).map_err(|e| usage(format!("{}: {e}", path.display())))?
        }
        None => WorkloadFile {
            segments: vec![SegmentFile {
                weight: Some(1),
                bs: Some(a.bs.unwrap_or(Bytes(4096))),
                read_bs: a.read_bs,
                write_bs: a.write_bs,
                // Unset: what trims and write-zeroes leave (SegmentFile::into_segment).
                read: a.read.map(|p| p.0),
                random: Some(a.random.map_or(100.0, |p| p.0)),
                align: a.align,
                trim: a.trim.map(|p| p.0),
                write_zeroes: a.write_zeroes.map(|p| p.0),
            }],
            ..WorkloadFile::default()
        },
    };
    if a.qd.is_some() {
        file.qd = a.qd;
    }
    if a.workers.is_some() {
        file.workers = a.workers;
    }
    if a.ramp.is_some() {
        file.ramp = a.ramp;
    }
    if a.time.is_some() {
        file.time = a.time;
    }
    if a.size.is_some() {
        file.size = a.size;
    }
    if a.data.flush_every.is_some() {
        file.flush_every = a.data.flush_every;
    }
    if a.data.fua.is_some() {
        file.fua = a.data.fua.map(|p| p.0);
    }
    if a.rate.is_some() {
        file.rate = a.rate;
    }
    if a.arrival.is_some() {
        file.arrival = a.arrival;
    }
    let w = file.into_workload(&Defaults::default()).map_err(usage)?;
    w.validate().map_err(usage)?;
    Ok(w)
}

/// The workload of a fio job with the load and timing flags over it.
fn fio_workload(a: &RunArgs, mut w: Workload, seg_flags: bool) -> Result<Workload, CliError> {
    if seg_flags {
        return Err(usage(
            "--bs, --read-bs, --write-bs, --read, --trim, --write-zeroes, --random and --align \
             describe one segment; with --fio the job file gives them",
        ));
    }
    w.qd = a.qd.unwrap_or(w.qd);
    w.workers = a.workers.unwrap_or(w.workers);
    w.ramp = a.ramp.map_or(w.ramp, |d| d.0);
    w.time = a.time.map_or(w.time, |d| d.0);
    w.span = a.size.map(|b| b.0).or(w.span);
    w.flush_every = a.data.flush_every.unwrap_or(w.flush_every);
    w.fua_pct = a.data.fua.map_or(w.fua_pct, |p| p.0);
    w.rate = a.rate.or(w.rate);
    w.arrival = a.arrival.unwrap_or(w.arrival);
    if w.time.is_zero() {
        return Err(usage(format!(
            "fio job [{}] gives no runtime (fio would run one pass over size; sanbench runs for \
             a time): set runtime= and time_based=1, or give --time",
            w.name.as_deref().unwrap_or("?")
        )));
    }
    w.validate().map_err(usage)?;
    Ok(w)
}
