//! `sanbench run`: this process's measurement (measure.rs), alone or as one rank of an MPI
//! job (job/: rank 0 gets the merged result), reported.

use sanbench_engine::result::RunDoc;

use crate::args::RunArgs;
use crate::context::Context;
use crate::error::{usage, CliError};
use crate::job::Part;
use crate::measure::{measure, workload_from_args, write_json, Measure};

/// Prints and writes a finished run's document (the process that reports: the only one, or
/// rank 0), and its exit code for data that did not verify.
pub fn report(a: &RunArgs, doc: &RunDoc) -> Result<(), CliError> {
    if let Some(path) = &a.json {
        write_json(doc, path)?;
    }
    let to_stdout = a.json.as_deref().is_some_and(|p| p.as_os_str() == "-");
    if !a.quiet {
        let s = crate::fit::prose(&crate::output::summary(doc), crate::fit::width());
        if to_stdout {
            eprint!("{s}");
        } else {
            out!("{s}");
        }
    }
    crate::precondition::verdict(doc, a.quiet)
}

pub fn run(cx: &Context, mut a: RunArgs) -> Result<(), CliError> {
    // A job file may name the CPUs (cpus_allowed): read it before pinning.
    crate::fio_cmd::resolve_run(&mut a)?;
    cx.apply_placement(a.cpus.as_ref(), a.cpus_policy)?;
    if let Some(path) = &a.emit_fio {
        crate::fio_cmd::emit(&a, &workload_from_args(&a)?, path)?;
    }
    let job = cx.job();
    if job.in_job() && !a.faults.is_empty() {
        return Err(usage(
            "--fault does not run as an MPI job yet: run it without mpirun or srun",
        ));
    }
    // Under MPI: ranks named by `--monitor-only-ranks` run a plan without targets, so they
    // take part in the phases and measure their host; the others open their targets
    // (`{rank}` and `{host}` expanded).
    let monitor_only = job.monitor_only(a.monitor_only_ranks.as_deref())?;
    let targets: Vec<String> = if monitor_only {
        Vec::new()
    } else {
        a.targets.iter().map(|t| job.expand(t)).collect()
    };
    let raw_latencies = job.raw_latencies();
    let (doc, output) = measure(
        cx,
        &a,
        Measure {
            targets: &targets,
            quiet: a.quiet || !job.reports(),
            sync: job.sync(),
            // Targets every rank shares are preconditioned once, by rank 0 (the others wait
            // at the start barrier meanwhile).
            precondition: job.reports() || crate::ranks::per_rank(&a.targets),
            raw_latencies,
            rank: job.rank(),
        },
    )?;
    // The workload as it ran (rank 0's, the same on every rank).
    let w = doc.spec.clone();
    let watch = cx.watch();
    let part = Part {
        workload: &w,
        templates: &a.targets,
        doc,
        output,
        monitor_only,
        raw_latencies,
        watch: watch.as_deref(),
    };
    // Rank 0 (or the process alone) has the one result.
    let Some(doc) = job.gather(part)? else {
        return Ok(());
    };
    report(&a, &doc)
}
