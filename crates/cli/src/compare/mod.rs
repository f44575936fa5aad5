//! `sanbench compare`: every workload of a suite on every target, interleaved so that drift
//! falls on all targets alike, repeated for confidence intervals, recorded cell by cell.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use sanbench_engine::result::rfc3339;
use sanbench_engine::suite::{self, Suite, SuiteWorkload};
use sanbench_engine::verify::Verifier;
use sanbench_engine::RunPlan;
use sanbench_store::{Comparison, TargetEntry, WorkloadEntry, COMPARE_SCHEMA};

use sanbench_engine::precondition::Report;

use crate::args::CompareArgs;
use crate::error::{usage, CliError};
use crate::monitoring::MonitorSetup;
use crate::precondition::DataPlan;
use crate::progress::ProgressLine;
use crate::run_cmd::{execute_output, file_options, io_timeout};

mod book;
pub(crate) use book::{Book, CellRun};
use sanbench_monitor::sampler::Baseline;

/// Splits `NAME=TARGET`. The name may not contain ':' or '/', so URIs holding '=' stay whole.
/// Without a name the target is named by its URI, secrets masked (`uri::redact`).
pub fn split_named(s: &str) -> (String, String) {
    if let Some((name, uri)) = s.split_once('=') {
        if !name.is_empty() && !name.contains([':', '/']) && !uri.is_empty() {
            return (name.to_string(), uri.to_string());
        }
    }
    (sanbench_engine::uri::redact(s), s.to_string())
}

/// The order cells run in: repetition by repetition, workload by workload, and within a
/// workload the targets rotated by one each time, so that no target always runs first (or
/// right after another's writes).
pub fn interleaved_order(
    workloads: usize,
    targets: usize,
    repeat: u32,
) -> Vec<(u32, usize, usize)> {
    let mut v = Vec::with_capacity(workloads * targets * repeat as usize);
    let mut k = 0usize;
    for r in 0..repeat {
        for w in 0..workloads {
            for i in 0..targets {
                v.push((r, w, (i + k) % targets.max(1)));
            }
            k += 1;
        }
    }
    v
}

pub struct Prepared {
    pub suite: Suite,
    pub targets: Vec<(String, String)>,
    /// Per target (same order): a reference ceiling, never compared in the findings.
    pub references: Vec<bool>,
    /// Per target (same order): the lab link it sits behind, for targets from `--lab`.
    pub links: Vec<Option<serde_json::Value>>,
}

pub fn prepare(a: &CompareArgs) -> Result<Prepared, CliError> {
    let mut suite = match &a.fio_suite {
        Some(s) => s.clone(),
        None => suite::load(&a.suite).map_err(usage)?,
    };
    let time = a.time.map(|d| d.0);
    let ramp = a.ramp.map(|d| d.0);
    if time.is_some_and(|t| t.is_zero()) {
        return Err(usage("--time must be longer than zero"));
    }
    suite.scale(time, ramp);
    for w in suite.workloads.iter_mut() {
        if w.workload.has_writes() {
            if let Some(n) = a.data.flush_every {
                w.workload.flush_every = n;
            }
            if let Some(p) = a.data.fua {
                w.workload.fua_pct = p.0;
            }
            w.workload.validate().map_err(usage)?;
        }
    }
    if a.repeat == 0 {
        return Err(usage("--repeat must be at least 1"));
    }
    let mut references = Vec::new();
    let mut targets: Vec<(String, String)> = a
        .targets
        .iter()
        .map(|t| {
            let (is_ref, t) = match t.strip_prefix("ref:") {
                Some(rest) => (true, rest),
                None => (false, t.as_str()),
            };
            references.push(is_ref);
            split_named(t)
        })
        .collect();
    let mut links = vec![None; targets.len()];
    if let Some(path) = &a.lab {
        for t in sanbench_lab::load_lab_targets(path).map_err(|e| usage(e.to_string()))? {
            targets.push((t.name, t.uri));
            links.push(serde_json::to_value(&t.link).ok());
            references.push(false);
        }
    }
    let mut names = std::collections::HashSet::new();
    for (n, _) in &targets {
        if !names.insert(n.clone()) {
            return Err(usage(format!(
                "two targets are named '{n}'; name them NAME=TARGET"
            )));
        }
    }
    for name in &a.reference {
        match targets.iter().position(|(n, _)| n == name) {
            Some(i) => references[i] = true,
            None => {
                return Err(usage(format!(
                    "--reference {name}: no target is named '{name}' (name targets NAME=TARGET)"
                )))
            }
        }
    }
    if !references.is_empty() && references.iter().all(|r| *r) {
        return Err(usage(
            "every target is a reference: nothing is left to compare",
        ));
    }
    Ok(Prepared {
        suite,
        targets,
        references,
        links,
    })
}

/// What every cell of one comparison shares.
pub(crate) struct CellCtx<'a> {
    pub(crate) a: &'a CompareArgs,
    pub(crate) data: &'a DataPlan,
    pub(crate) size: Option<u64>,
    pub(crate) progress: &'a ProgressLine,
    pub(crate) mon: Option<&'a MonitorSetup>,
    /// Per target (index as in the comparison): its verifier under `--verify`.
    pub(crate) verify: &'a [Option<Arc<Verifier>>],
    pub(crate) run_id: Option<u64>,
    /// Under MPI: the job (each cell a synchronized phase, gathered to rank 0) and the
    /// targets as given (`{rank}`, `{host}` unexpanded), by index.
    pub(crate) job: Option<&'a dyn crate::ranks::Ranked>,
    pub(crate) templates: &'a [String],
}

/// The curve levels: `--curve` or the suite's `curve`, both checked and ordered where they
/// were read (`LoadLevels`).
fn curve_levels(a: &CompareArgs, s: &Suite) -> Vec<f64> {
    a.curve
        .as_ref()
        .map_or_else(|| s.curve.clone(), |l| l.0.clone())
}

/// Runs one cell; `None` on the ranks of an MPI job other than 0 (rank 0 has the result).
pub(crate) fn run_cell(
    cx: &CellCtx<'_>,
    w: &SuiteWorkload,
    ti: usize,
    uri: &str,
    name: &str,
    baseline: &mut Option<Baseline>,
) -> Result<Option<CellRun>, CliError> {
    let (a, size, progress, mon) = (cx.a, cx.size, cx.progress, cx.mon);
    let n = w.targets_at_once.unwrap_or(1) as usize;
    let opts = file_options(&a.engine, size, w.workload.has_writes() || cx.data.writes())?;
    let uris = vec![uri.to_string(); n];
    let targets = crate::targets::open_targets(&uris, &opts)?;
    let plan = RunPlan {
        workload: w.workload.clone(),
        targets,
        io_timeout: io_timeout(&a.engine)?,
        seed: a.seed,
        data: cx.data.spec,
        stop: crate::signals::stop_flag(),
        run_id: cx.run_id,
        // n copies of one target share its map (they drive one store).
        verify: vec![cx.verify[ti].clone(); n],
        clock: None,
        sync: cx.job.map(|j| j.sync()),
        raw_latencies: false,
    };
    let (mut doc, used, out) = execute_output(&plan, progress, mon, *baseline)?;
    if baseline.is_none() {
        *baseline = used;
    }
    if let Some(job) = cx.job {
        let templates = vec![cx.templates[ti].clone(); n];
        match job.gather(&w.workload, &templates, doc, out)? {
            Some(merged) => doc = merged,
            None => return Ok(None),
        }
    }
    let hosts = std::mem::take(&mut doc.hosts);
    let manifest = doc.manifest.clone();
    let mut r = if n == 1 {
        doc.results.into_iter().next().context("no result")?
    } else {
        let mut all = doc.all.context("no aggregate result")?;
        for v in doc.results.iter().filter_map(|r| r.verify.as_ref()) {
            match all.verify.as_mut() {
                None => all.verify = Some(v.clone()),
                Some(a) => a.merge(v),
            }
        }
        all
    };
    r.target = name.to_string();
    if r.engine == "all" {
        r.engine = format!("{} x{n}", plan.targets[0].info().engine);
        r.info = Some(plan.targets[0].info().clone());
    }
    Ok(Some(CellRun {
        result: r,
        manifest,
        hosts,
    }))
}

/// Preconditions every target once, before its first cell (or says why not): the report goes
/// into every cell of the target.
fn precondition_all(
    a: &CompareArgs,
    p: &Prepared,
    data: &DataPlan,
    size: Option<u64>,
    progress: &ProgressLine,
) -> Result<(Vec<Report>, crate::precondition::Verifiers), CliError> {
    let ws = &p.suite.workloads;
    let writes = ws.iter().any(|w| w.workload.has_writes());
    let reads = ws.iter().any(|w| w.workload.has_reads());
    let opts = file_options(&a.engine, size, writes || data.writes())?;
    let timeout = io_timeout(&a.engine)?;
    let plan = crate::precondition::fill_plan(data.mode, &p.suite.precondition);
    let mut targets = Vec::with_capacity(p.targets.len());
    let mut spans = Vec::with_capacity(p.targets.len());
    for (_, uri) in &p.targets {
        let t = crate::targets::open_targets(std::slice::from_ref(uri), &opts)?
            .pop()
            .context("no target opened")?;
        let total = t.info().size;
        spans.push(
            ws.iter()
                .map(|w| w.workload.span.unwrap_or(total).min(total))
                .max()
                .unwrap_or(total),
        );
        targets.push(t);
    }
    let vs =
        crate::precondition::verifiers(data, &targets, &spans, ws.iter().map(|w| &w.workload))?;
    let mut out = Vec::with_capacity(p.targets.len());
    for (ti, ((name, _), t)) in p.targets.iter().zip(&targets).enumerate() {
        let (rep, _) = crate::precondition::run(
            &**t,
            name,
            spans[ti],
            data,
            plan,
            reads,
            timeout,
            progress,
            a.quiet,
            vs.per_target[ti].as_deref(),
        )?;
        out.push(rep);
    }
    Ok((out, vs))
}

pub fn run(mut a: CompareArgs) -> Result<(), CliError> {
    crate::fio_cmd::resolve_compare(&mut a)?;
    let job = crate::ranks::job();
    let rank0 = job.as_ref().is_none_or(|j| j.rank() == 0);
    if !rank0 {
        // Only rank 0 prints, writes files and touches the store.
        a.quiet = true;
        a.no_store = true;
    }
    let mut p = prepare(&a)?;
    let data = DataPlan::from_args(&a.data)?;
    let size = a.size.map(|b| b.0);
    let mon = crate::monitoring::setup(&a.monitor)?;
    // One idle baseline per target, measured before its first workload and reused after.
    let baselines: Vec<Option<Baseline>> = vec![None; p.targets.len()];
    let curve = curve_levels(&a, &p.suite);
    let curve_stop = a.curve_stop.0;
    if job.is_some() && !curve.is_empty() {
        return Err(usage(
            "a response-time curve does not run as an MPI job yet: drop --curve (or the \
             suite's curve)",
        ));
    }
    if rank0 {
        std::fs::create_dir_all(&a.out)
            .map_err(|e| usage(format!("cannot create {}: {e}", a.out.display())))?;
    }
    let stop = crate::signals::stop_flag();
    let cmp = Comparison {
        schema: COMPARE_SCHEMA.into(),
        sanbench_version: env!("CARGO_PKG_VERSION").into(),
        started_at: rfc3339(std::time::SystemTime::now()),
        command: std::env::args()
            .map(|a| sanbench_engine::uri::redact(&a))
            .collect(),
        suite: p.suite.name.clone(),
        suite_description: p.suite.description.clone(),
        repeat: a.repeat,
        targets: p
            .targets
            .iter()
            .zip(&p.links)
            .zip(&p.references)
            .map(|(((n, u), link), &reference)| TargetEntry {
                name: n.clone(),
                uri: sanbench_engine::uri::redact(u),
                link: link.clone(),
                reference,
                ..TargetEntry::default()
            })
            .collect(),
        workloads: p
            .suite
            .workloads
            .iter()
            .map(|w| WorkloadEntry {
                id: w.id.clone(),
                title: w.title.clone(),
                group: w.group.clone(),
                spec: w.workload.clone(),
                targets_at_once: w.targets_at_once,
            })
            .collect(),
        cells: Vec::new(),
        manifest: serde_json::Value::Null,
        incomplete: false,
        curve: curve.clone(),
    };
    let recorder = if a.no_store {
        None
    } else {
        Some(crate::store_cmd::Recorder::begin(a.db.as_deref(), &cmp)?)
    };
    let order = interleaved_order(p.suite.workloads.len(), p.targets.len(), a.repeat);
    let per_cell: Vec<Duration> = p
        .suite
        .workloads
        .iter()
        .map(|w| w.workload.ramp + w.workload.time)
        .collect();
    let mut left: Duration = order.iter().map(|(_, w, _)| per_cell[*w]).sum();
    let progress = ProgressLine::new(a.quiet);
    // Under MPI: each rank's targets (`{rank}`, `{host}` expanded); targets all ranks share
    // are preconditioned by rank 0 alone.
    let templates: Vec<String> = p.targets.iter().map(|(_, u)| u.clone()).collect();
    let mut pre_data = data.clone();
    if let Some(j) = &job {
        for (_, u) in p.targets.iter_mut() {
            *u = crate::ranks::expand(u, j.rank(), j.host());
        }
        if !rank0 && !crate::ranks::per_rank(&templates) {
            pre_data.mode = sanbench_engine::precondition::Mode::None;
        }
    }
    let (preconditions, vs) = precondition_all(&a, &p, &pre_data, size, &progress)?;
    let mut book = Book {
        cmp,
        recorder,
        out: &a.out,
        quiet: a.quiet,
        preconditions,
        baselines,
        bad_blocks: 0,
        writes: rank0,
    };
    let cx = CellCtx {
        a: &a,
        data: &data,
        size,
        progress: &progress,
        mon: mon.as_ref(),
        verify: &vs.per_target,
        run_id: vs.run_id,
        job: job.as_deref(),
        templates: &templates,
    };
    let mut failure = None;
    for (i, (rep, wi, ti)) in order.iter().enumerate() {
        let stopped = stop.load(std::sync::atomic::Ordering::Relaxed);
        // Under MPI rank 0 decides for every rank, so all reach the cell's barrier or none.
        if !job.as_ref().map_or(!stopped, |j| j.go_on(!stopped)) {
            break;
        }
        let w = &p.suite.workloads[*wi];
        let (name, uri) = &p.targets[*ti];
        if !a.quiet {
            eprintln!(
                "[{}/{}] {} on {name}{} ({} left)",
                i + 1,
                order.len(),
                w.id,
                if a.repeat > 1 {
                    format!(", repetition {}/{}", rep + 1, a.repeat)
                } else {
                    String::new()
                },
                fmt_dur(left)
            );
        }
        match run_cell(&cx, w, *ti, uri, name, &mut book.baselines[*ti]) {
            Ok(Some(cell)) => {
                book.record(*ti, &w.id, *rep, None, cell)?;
            }
            Ok(None) => {}
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
        left = left.saturating_sub(per_cell[*wi]);
    }
    let closed_cells = book.cmp.cells.len();
    if failure.is_none() && !curve.is_empty() && !stop.load(std::sync::atomic::Ordering::Relaxed) {
        // Curves are refused under MPI (checked before the cells): no job here.
        let cx = CellCtx { job: None, ..cx };
        let plan = crate::curve::CurvePlan {
            levels: curve.clone(),
            stop_us: curve_stop.as_secs_f64() * 1e6,
        };
        failure = crate::curve::run(&cx, &p, &plan, &mut book).err();
    }
    let Book {
        mut cmp,
        mut recorder,
        bad_blocks,
        ..
    } = book;
    if !rank0 {
        return failure.map_or(Ok(()), Err);
    }
    cmp.incomplete = closed_cells < order.len() || failure.is_some();
    if let Some(rec) = recorder.as_mut() {
        rec.finish(cmp.incomplete)?;
    }
    let files = sanbench_report::render_dir(&cmp, &a.out, &sanbench_report::Options::default())
        .context("writing the report")?;
    if !a.quiet {
        out!("{}", crate::output::compare_table(&cmp));
    }
    outln!();
    crate::store_cmd::print_findings(&cmp);
    outln!();
    for f in &files {
        outln!("wrote {}", f.display());
    }
    if let Some(rec) = &recorder {
        outln!("recorded as run {} in {}", rec.run, rec.path.display());
    }
    if let Some(e) = failure {
        return Err(e);
    }
    if bad_blocks > 0 {
        return Err(CliError::Unverified(format!(
            "data did not verify: {bad_blocks} bad blocks (see each cell's verify block in results.json)"
        )));
    }
    Ok(())
}

fn fmt_dur(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, s % 3600 / 60)
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(split_named("fast=mem:1G"), ("fast".into(), "mem:1G".into()));
        assert_eq!(split_named("mem:1G"), ("mem:1G".into(), "mem:1G".into()));
        let u = "nbd+unix:///x?socket=/tmp/s";
        assert_eq!(split_named(u), (u.into(), u.into()));
        assert_eq!(
            split_named("/dev/sdb"),
            ("/dev/sdb".into(), "/dev/sdb".into())
        );
    }

    #[test]
    fn order_is_interleaved_and_complete() {
        let o = interleaved_order(3, 3, 2);
        assert_eq!(o.len(), 18);
        // Every target runs every workload in every repetition exactly once.
        for r in 0..2 {
            for w in 0..3 {
                let mut ts: Vec<usize> = o
                    .iter()
                    .filter(|(rr, ww, _)| *rr == r && *ww == w)
                    .map(|x| x.2)
                    .collect();
                ts.sort();
                assert_eq!(ts, vec![0, 1, 2]);
            }
        }
        // The first target of each workload rotates.
        let firsts: Vec<usize> = o.chunks(3).map(|c| c[0].2).collect();
        assert_eq!(firsts, vec![0, 1, 2, 0, 1, 2]);
    }
}
