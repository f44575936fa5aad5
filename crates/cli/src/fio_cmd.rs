//! fio job files at the command line: `run --fio`, `compare --fio` (read through sanbench-fio's
//! sans-I/O parser, the files and the environment from its `FsHost`), `run --emit-fio` and
//! `suite show --fio` (written by its export): the arguments only. docs/FIO.md.

use std::path::Path;

use sanbench_engine::suite::{Suite, SuiteWorkload};
use sanbench_engine::units::Bytes;
use sanbench_engine::Workload;
use sanbench_fio::{self as fio, FioTarget, FsHost, ImportOptions, Imported, Setup};

use crate::args::{CompareArgs, DataArgs, EngineArgs, RunArgs};
use sanbench_session::error::{usage, CliError};

/// Reads and maps every job section (or only the one named; `pick_one`: exactly one, so a
/// file of several needs a name). Every problem is printed on a line of its own; the error
/// then says how many there were.
pub fn load(
    path: &Path,
    ignore: &[String],
    cli_targets: Option<usize>,
    only: Option<&str>,
    pick_one: bool,
) -> Result<Vec<Imported>, CliError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| usage(format!("cannot read {}: {e}", path.display())))?;
    let sections = fio::parse(&text, &path.display().to_string(), &mut FsHost)
        .map_err(|e| usage(e.to_string()))?;
    if sections.is_empty() {
        return Err(usage(format!("{}: no job section", path.display())));
    }
    let names: Vec<&str> = sections.iter().map(|s| s.name.as_str()).collect();
    let sections: Vec<&fio::Section> = match only {
        Some(name) => match sections.iter().find(|s| s.name == name) {
            Some(s) => vec![s],
            None => {
                return Err(usage(format!(
                    "{}: no job section [{name}] (there are: {})",
                    path.display(),
                    names.join(", ")
                )))
            }
        },
        None if pick_one && sections.len() > 1 => {
            return Err(usage(format!(
                "{} has {} job sections ({}): choose one with --section (compare --fio runs \
                 them all)",
                path.display(),
                sections.len(),
                names.join(", ")
            )))
        }
        None => sections.iter().collect(),
    };
    let o = ImportOptions {
        ignore: ignore.to_vec(),
        cli_targets,
    };
    let mut jobs = Vec::new();
    let mut problems = Vec::new();
    for s in sections {
        match fio::import(s, &o) {
            Ok(j) => jobs.push(j),
            Err(p) => problems.extend(p),
        }
    }
    if problems.is_empty() {
        return Ok(jobs);
    }
    let n = problems.len();
    let last = problems.pop().unwrap_or_default();
    for p in &problems {
        eprintln!("sanbench: {p}");
    }
    if n == 1 {
        Err(usage(last))
    } else {
        eprintln!("sanbench: {last}");
        Err(usage(format!(
            "{}: {n} fio options sanbench does not map (above)",
            path.display()
        )))
    }
}

fn notes(j: &Imported) {
    for n in &j.notes {
        eprintln!("note: fio [{}]: {n}", j.name);
    }
}

/// The engine and data flags a job implies, where the command line left their defaults.
fn apply_setup(s: &Setup, e: &mut EngineArgs, d: &mut DataArgs) {
    if e.engine == "auto" {
        if let Some(x) = &s.engine {
            e.engine = x.clone();
        }
    }
    if !e.direct && !e.buffered {
        match s.direct {
            Some(true) => e.direct = true,
            Some(false) => e.buffered = true,
            None => {}
        }
    }
    e.no_invalidate |= s.keep_cache;
    d.verify |= s.verify;
    if d.compress.0 == 0.0 {
        d.compress.0 = s.compress;
    }
    if d.dedupe.0 == 0.0 {
        d.dedupe.0 = s.dedupe;
    }
}

/// A job's `cpus_allowed` and `cpus_allowed_policy=split`; the command line's `--cpus` wins.
fn apply_placement(
    s: &Setup,
    path: &Path,
    cpus: &mut Option<sanbench_session::placement::CpuList>,
    policy: &mut sanbench_session::placement::CpusPolicy,
) -> Result<(), CliError> {
    if cpus.is_none() {
        if let Some(list) = &s.cpus {
            let l = list
                .parse()
                .map_err(|e| usage(format!("{}: cpus_allowed: {e}", path.display())))?;
            *cpus = Some(l);
        }
    }
    if s.cpus_split {
        *policy = sanbench_session::placement::CpusPolicy::Split;
    }
    Ok(())
}

/// `run --fio`: the chosen section gives the run's targets (unless the command line names
/// them), engine and data flags, CPUs and size; its workload is returned for the run's
/// configuration (sanbench_session::run_config) to put the load and timing flags over.
pub fn resolve_run(a: &mut RunArgs) -> Result<Option<Workload>, CliError> {
    let Some(path) = a.fio.clone() else {
        if a.section.is_some() || !a.fio_ignore.is_empty() {
            return Err(usage("--section and --fio-ignore go with --fio JOBFILE"));
        }
        return Ok(None);
    };
    let cli = (!a.targets.is_empty()).then_some(a.targets.len());
    let jobs = load(&path, &a.fio_ignore, cli, a.section.as_deref(), true)?;
    let job = &jobs[0];
    notes(job);
    if a.targets.is_empty() {
        a.targets = job.targets.clone();
    }
    apply_setup(&job.setup, &mut a.engine, &mut a.data);
    apply_placement(&job.setup, &path, &mut a.cpus, &mut a.cpus_policy)?;
    // The job's size is each target's span, and the size fio lays a missing file out at.
    if a.size.is_none() {
        a.size = job.workload.span.map(Bytes);
    }
    Ok(Some(job.workload.clone()))
}

/// `compare --fio`: one suite workload per job section (returned, for the comparison's
/// configuration); targets from the command line, or the ones every section names.
pub fn resolve_compare(a: &mut CompareArgs) -> Result<Option<Suite>, CliError> {
    let Some(path) = a.fio.clone() else {
        return Ok(None);
    };
    let cli = (!a.targets.is_empty() || a.lab.is_some()).then_some(a.targets.len().max(1));
    let jobs = load(&path, &a.fio_ignore, cli, None, false)?;
    let first = &jobs[0];
    for j in &jobs[1..] {
        if j.setup != first.setup {
            return Err(usage(format!(
                "{}: [{}] and [{}] open their targets differently (engine, direct, invalidate, \
                 verify, compression, dedupe, CPUs); compare runs every workload the same way",
                path.display(),
                first.name,
                j.name
            )));
        }
        if cli.is_none() && j.targets != first.targets {
            return Err(usage(format!(
                "{}: [{}] and [{}] name different targets; give the targets on the command line",
                path.display(),
                first.name,
                j.name
            )));
        }
    }
    if let Some(j) = jobs.iter().find(|j| j.workload.time.is_zero()) {
        if a.time.is_none() {
            return Err(usage(format!(
                "{}: [{}] gives no runtime (sanbench runs for a time): set runtime= and \
                 time_based=1, or give --time",
                path.display(),
                j.name
            )));
        }
    }
    jobs.iter().for_each(notes);
    if cli.is_none() {
        a.targets = first.targets.clone();
    }
    apply_setup(&first.setup, &mut a.engine, &mut a.data);
    apply_placement(&first.setup, &path, &mut a.cpus, &mut a.cpus_policy)?;
    if a.size.is_none() {
        a.size = jobs.iter().filter_map(|j| j.workload.span).max().map(Bytes);
    }
    let stem = path
        .file_stem()
        .map_or("fio".into(), |s| s.to_string_lossy().to_string());
    Ok(Some(Suite {
        name: stem,
        description: format!("fio job file {}", path.display()),
        source: Some(path.display().to_string()),
        precondition: "fill".into(),
        curve: Vec::new(),
        workloads: jobs
            .iter()
            .map(|j| SuiteWorkload {
                id: j.name.clone(),
                title: j.workload.describe(),
                group: "fio".into(),
                workload: j.workload.clone(),
                targets_at_once: None,
                paths: None,
                faults: Vec::new(),
                trace: None,
            })
            .collect(),
    }))
}

/// The fio job's opening and data for a run's flags (the inverse of [`apply_setup`]). Without
/// --direct or --buffered, sanbench's defaults said outright for fio, whose own differ: O_DIRECT
/// when a target is a block device, the page cache otherwise.
pub fn setup_of(e: &EngineArgs, d: &DataArgs, targets: &[String]) -> Setup {
    use std::os::unix::fs::FileTypeExt;
    let block = targets.iter().any(|t| {
        let p = t.strip_prefix("file:").unwrap_or(t);
        std::fs::metadata(p).is_ok_and(|m| m.file_type().is_block_device())
    });
    let local = targets
        .iter()
        .all(|t| matches!(FioTarget::of(t), Ok(FioTarget::Path(_))));
    Setup {
        engine: match e.engine.as_str() {
            "sync" => Some("sync".into()),
            _ => Some("io_uring".into()),
        },
        direct: if e.direct {
            Some(true)
        } else if e.buffered {
            Some(false)
        } else if local && !targets.is_empty() {
            Some(block)
        } else {
            None
        },
        keep_cache: e.no_invalidate,
        verify: d.verify,
        compress: d.compress.0,
        dedupe: d.dedupe.0,
        cpus: None,
        cpus_split: false,
    }
}

pub fn suite_text(s: &Suite) -> Result<String, CliError> {
    let mut out =
        sanbench_session::run_config::fio_header(&format!("suite {} ({})", s.name, s.description));
    out.push_str("# Run: TARGET=/path/to/file-or-device fio THIS_FILE\n");
    let t = [FioTarget::Env("TARGET".into())];
    for w in &s.workloads {
        if let Some(tr) = &w.trace {
            // fio's read_iolog reads iolog and blktrace files only, without an offset map or
            // sanbench's timing; a job that pretended to be this replay would measure another.
            return Err(usage(format!(
                "workload {} replays the trace {}: a trace workload is not expressible as a fio \
                 job (fio's read_iolog is a different replay); drop it from the suite, or run \
                 fio --read_iolog on the trace yourself",
                w.id, tr.trace
            )));
        }
        let mut text =
            fio::export_section(&w.id, &w.workload, &t, &Setup::default()).map_err(usage)?;
        if let Some(n) = w.targets_at_once.filter(|n| *n > 1) {
            text.push_str(&format!(
                "# sanbench runs {n} instances of each target at once; fio: {n} files in filename\n"
            ));
        }
        if let Some(n) = w.paths {
            text.push_str(&format!(
                "# sanbench reaches each target over {n} path(s); fio: run it on the multipath \
                 device (dm-multipath or NVMe native) set up with {n} path(s)\n"
            ));
        }
        out.push('\n');
        out.push_str(&text);
        out.push_str("stonewall\n");
    }
    Ok(out)
}
