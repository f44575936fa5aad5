//! `sanbench run`: the configuration built once from the arguments (run_config.rs), this
//! process's measurement (measure.rs), alone or as one rank of an MPI job (job/: rank 0 gets
//! the merged result), reported. [`execute`] is the library's run: typed configuration in,
//! typed document out, nothing printed but the progress line (off when `quiet`).

use sanbench_engine::result::RunDoc;

use crate::context::Context;
use crate::error::{usage, CliError};
use crate::job::Part;
use crate::measure::{measure, Measure};
use crate::run_config::RunConfig;

/// Runs `c` in `cx`: the document on the process that reports (alone, or rank 0 of an MPI
/// job, with every rank's figures), `None` on the other ranks. Pins the process to `c.cpus`
/// and writes `--emit-fio` first.
pub fn execute(cx: &Context, c: &RunConfig) -> Result<Option<RunDoc>, CliError> {
    cx.apply_placement(c.cpus.as_ref(), c.cpus_policy)?;
    if let Some(path) = &c.emit_fio {
        c.write_fio_job(path)?;
    }
    let job = cx.job();
    if job.in_job() && c.faults.is_some() {
        return Err(usage(
            "--fault does not run as an MPI job yet: run it without mpirun or srun",
        ));
    }
    // Under MPI: ranks named by `--monitor-only-ranks` run a plan without targets, so they
    // take part in the phases and measure their host; the others open their targets
    // (`{rank}` and `{host}` expanded).
    let monitor_only = job.monitor_only(c.monitor_only_ranks.as_deref())?;
    let targets: Vec<String> = if monitor_only {
        Vec::new()
    } else {
        c.targets.iter().map(|t| job.expand(t)).collect()
    };
    let raw_latencies = job.raw_latencies();
    let (doc, output) = measure(
        cx,
        c,
        Measure {
            targets: &targets,
            quiet: c.quiet || !job.reports(),
            sync: job.sync(),
            // Targets every rank shares are preconditioned once, by rank 0 (the others wait
            // at the start barrier meanwhile).
            precondition: job.reports() || crate::ranks::per_rank(&c.targets),
            raw_latencies,
            rank: job.rank(),
        },
    )?;
    // The workload as it ran (rank 0's, the same on every rank).
    let w = doc.spec.clone();
    let watch = cx.watch();
    let part = Part {
        workload: &w,
        templates: &c.targets,
        doc,
        output,
        monitor_only,
        raw_latencies,
        watch: watch.as_deref(),
    };
    // Rank 0 (or the process alone) has the one result.
    job.gather(part)
}
