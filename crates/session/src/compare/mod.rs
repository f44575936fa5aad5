//! `sanbench compare`: every workload of a suite on every target, round after round in the
//! order of a Williams design, for as many rounds as the questions need, recorded cell by cell.
//! The design (order, stopping, verdicts) is `sanbench_stats::design`'s plan: this module only
//! drives it. Below it: the comparison as given ([`prepared`]), one cell run ([`cell`]) and
//! the cells filed ([`book`]), which the response-time curve (curve.rs) uses too, after the
//! closed-loop cells.

use std::time::Duration;

use anyhow::Context as _;
use sanbench_engine::result::rfc3339;
use sanbench_store::{Comparison, TargetEntry, COMPARE_SCHEMA};

use sanbench_engine::precondition::Report;

use crate::context::Context;
use crate::error::{usage, CliError};
use crate::events::Events;
use crate::precondition::DataPlan;
pub use config::CompareConfig;

pub(crate) mod book;
pub(crate) mod cell;
pub mod config;
pub mod design;
pub mod prepared;
mod suite_faults;
use book::{Book, Place};
use cell::{run_cell, CellCtx};
use prepared::Prepared;
use sanbench_monitor::sampler::Baseline;

/// Preconditions every target once, before its first cell (or says why not): the report goes
/// into every cell of the target.
fn precondition_all(
    cx: &Context,
    a: &CompareConfig,
    p: &Prepared,
    data: &DataPlan,
    progress: &dyn Events,
) -> Result<(Vec<Report>, crate::precondition::Verifiers), CliError> {
    let ws = &p.suite.workloads;
    let writes = ws.iter().any(|w| w.workload.has_writes());
    let reads = ws.iter().any(|w| w.workload.has_reads());
    let opts = a.files(writes || data.writes());
    let timeout = a.io_timeout;
    let plan = crate::precondition::fill_plan(data.mode, &p.suite.precondition);
    let mut targets = Vec::with_capacity(p.targets.len());
    let mut spans = Vec::with_capacity(p.targets.len());
    for (name, uri) in &p.targets {
        let t = crate::targets::open_targets(cx, std::slice::from_ref(uri), &opts)?
            .pop()
            .context("no target opened")?;
        // Before the precondition writes anything: an op a target lacks is bad input, and so
        // is a trace that does not fit the target.
        let total = t.info().size;
        for w in ws {
            sanbench_engine::run::check_ops(&w.workload, &*t)?;
            if let Some(r) = w.trace.as_ref().and_then(|t| t.replay.as_ref()) {
                let block = t.info().block_size as u64;
                sanbench_engine::replay::trace::map::Mapping::new(r.map, &r.summary, total, block)
                    .map_err(|e| usage(format!("workload {} on {name}: {e}", w.id)))?;
            }
        }
        spans.push(
            ws.iter()
                .map(|w| w.workload.span.unwrap_or(total).min(total))
                .max()
                .unwrap_or(total),
        );
        targets.push(t);
    }
    let traces: Vec<_> = ws
        .iter()
        .filter_map(|w| w.trace.as_ref()?.replay.as_ref())
        .collect();
    let vs = crate::precondition::verifiers(
        data,
        &targets,
        &spans,
        ws.iter().map(|w| &w.workload),
        &traces,
    )?;
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

/// A finished comparison, on the process that reports.
pub struct Compared {
    pub cmp: Comparison,
    /// The report's files, written to the configuration's `out`.
    pub files: Vec<std::path::PathBuf>,
    /// The run it was recorded as, and the store's path (`None`: not stored).
    pub recorded: Option<(sanbench_store::RunId, std::path::PathBuf)>,
    /// `--against ID`: that stored run, to show which of its findings this one reproduced.
    pub against: Option<(String, Comparison)>,
    /// What failed after cells had results (a cell, the watch, data that did not verify):
    /// the comparison and its files stand, the command fails ([`Compared::outcome`]).
    pub failure: Option<CliError>,
}

impl Compared {
    /// `Ok` when nothing failed, else the failure (its exit code).
    pub fn outcome(self) -> Result<(), CliError> {
        self.failure.map_or(Ok(()), Err)
    }
}

/// Runs the comparison `config` in `context`: its cells, the report and results files in its
/// `out` directory, the store. Prints nothing but its plan and notes (the binary renders the
/// table and the findings of what it returns). Returns the finished comparison on the process
/// that reports (alone, or rank 0 of an MPI job), `None` on the other ranks.
pub fn execute(context: &Context, config: &CompareConfig) -> Result<Option<Compared>, CliError> {
    context.apply_placement(config.cpus.as_ref(), config.cpus_policy)?;
    let job = context.job();
    let rank0 = job.reports();
    let mut a = config.clone();
    if !rank0 {
        // Only rank 0 prints, writes files and touches the store.
        a.quiet = true;
        a.no_store = true;
    }
    let started = std::time::Instant::now();
    // The run to replicate, read before anything runs: an unknown id is refused at once.
    let against = match a.against.as_deref().filter(|_| rank0) {
        Some(id) => Some((id, crate::store_io::load(a.db.as_deref(), id)?)),
        None => None,
    };
    let mut p = a.prepared.clone();
    // The plan first: a design that cannot run is refused before anything runs.
    let mut plan = design::plan(&a, &p, rank0)?;
    if job.in_job() && !a.faults.is_empty() {
        return Err(usage(
            "--fault does not run as an MPI job yet: compare without mpirun or srun",
        ));
    }
    if let Some(w) = p.suite.workloads.iter().find(|w| w.trace.is_some()) {
        if job.in_job() {
            return Err(usage(format!(
                "workload {}: a trace replay does not run as an MPI job yet: compare without \
                 mpirun or srun",
                w.id
            )));
        }
    }
    let windows: Vec<(String, Duration)> = p
        .suite
        .workloads
        .iter()
        .map(|w| (w.id.clone(), w.workload.time))
        .collect();
    let faults = crate::faults::Faults::prepare(&a.faults, a.lab.as_deref(), &windows)?;
    let suite_faults = suite_faults::prepare(&a, &p, job.in_job())?;
    let data = a.data.clone();
    let mon = a.monitor.clone();
    // Rank 0 alone writes files; the other ranks spool their histogram log's lines for it.
    let watch = context.open_watch(&a.watch, job.rank())?;
    // One idle baseline per target, measured before its first workload and reused after.
    let baselines: Vec<Option<Baseline>> = vec![None; p.targets.len()];
    let curve = a.curve.clone();
    let curve_stop = a.curve_stop;
    if job.in_job() && !curve.is_empty() {
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
        repeat: match a.repeat {
            crate::compare::config::RepeatArg::Fixed(n) => n,
            crate::compare::config::RepeatArg::Auto => 0,
        },
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
            .map(prepared::workload_entry)
            .collect(),
        cells: Vec::new(),
        manifest: None,
        incomplete: false,
        curve: curve.clone(),
        design: Some(plan.design()),
        require_headroom: a.require_headroom,
        complete: Some(false),
        in_progress: None,
    };
    let recorder = if a.no_store {
        None
    } else {
        Some(crate::store_io::Recorder::begin(a.db.as_deref(), &cmp)?)
    };
    let per_cell: Vec<Duration> = p
        .suite
        .workloads
        .iter()
        .map(|w| w.workload.ramp + w.workload.time)
        .collect();
    let progress = context.events(a.quiet, a.live.progress, false);
    // Under MPI: each rank's targets (`{rank}`, `{host}` expanded); targets all ranks share
    // are preconditioned by rank 0 alone.
    let templates: Vec<String> = p.targets.iter().map(|(_, u)| u.clone()).collect();
    let mut pre_data = data.clone();
    if job.in_job() {
        for (_, u) in p.targets.iter_mut() {
            *u = job.expand(u);
        }
        if !rank0 && !crate::ranks::per_rank(&templates) {
            pre_data.mode = sanbench_engine::precondition::Mode::None;
        }
    }
    let (preconditions, vs) = precondition_all(context, &a, &p, &pre_data, &*progress)?;
    if !a.quiet && rank0 {
        let width = crate::fit::width();
        eprintln!(
            "{}",
            crate::fit::wrap(&design::line(&plan, &a), width, "", "  ")
        );
        let time = design::time_line(&a, &per_cell, p.targets.len(), started.elapsed());
        eprintln!("{}", crate::fit::wrap(&time, width, "", "  "));
    }
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
        context,
        a: &a,
        data: &data,
        progress: &progress,
        mon: mon.as_ref(),
        verify: &vs.per_target,
        run_id: vs.run_id,
        job,
        templates: &templates,
        watch: watch.as_ref(),
        round: std::cell::Cell::new(0),
        faults: faults.as_ref(),
        suite_faults: &suite_faults,
        links: &p.links,
    };
    let mut failure = None;
    loop {
        let stopped = stop.load(std::sync::atomic::Ordering::Relaxed);
        let next = if stopped {
            None
        } else {
            plan.next(started.elapsed())
        };
        // Under MPI rank 0 decides for every rank (only it has the figures the plan judges),
        // so all reach the cell's barrier or none; the other ranks' plans run the same order.
        if !job.go_on(next.is_some()) {
            break;
        }
        let Some(s) = next else { break };
        let w = &p.suite.workloads[s.workload];
        let (name, uri) = &p.targets[s.target];
        if !a.quiet {
            eprintln!(
                "{}",
                design::cell_line(&a, &p, &s, &per_cell, started.elapsed())
            );
        }
        let place = Place {
            round: s.round,
            slot: Some(s.slot as u32),
            started_at: Some(rfc3339(std::time::SystemTime::now())),
            load_pct: None,
        };
        cx.round.set(s.round);
        if let Some(why) = cx.suite_faults.skip.get(&(w.id.clone(), s.target)) {
            if s.round == 0 && !a.quiet {
                eprintln!("note: {name} skips {}: {why}", w.id);
            }
            plan.record(&s, None);
            continue;
        }
        if w.paths.is_some() && !crate::targets::takes_paths(uri) {
            // A target without portals has no paths to use: the workload is not its.
            if s.round == 0 && !a.quiet {
                eprintln!(
                    "note: {name} skips {}: only targets with portals (iSCSI, NVMe/TCP, NBD) \
                     run a suite's path workloads",
                    w.id
                );
            }
            plan.record(&s, None);
            continue;
        }
        let save = book.cell_save(
            (s.target, &w.id),
            &place,
            job.in_job(),
            (a.live.save_every, w.workload.time),
        );
        match run_cell(
            &cx,
            w,
            s.target,
            uri,
            name,
            &mut book.baselines[s.target],
            save,
        ) {
            Ok(Some(cell)) => {
                let m = sanbench_report::questions::primary_metric(
                    sanbench_report::analysis::flavour(&book.cmp.workloads[s.workload]),
                );
                let r = book.record(s.target, &w.id, place, cell)?;
                plan.record_counted(&s, m.of(r), r.ios);
                book.cmp.repeat = book.cmp.repeat.max(s.round + 1);
                book.cmp.design = Some(plan.design());
            }
            Ok(None) => {}
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    book.cmp.design = Some(plan.design());
    let complete = plan.stopped().is_some();
    if failure.is_none() && !curve.is_empty() && !stop.load(std::sync::atomic::Ordering::Relaxed) {
        // Curves are refused under MPI (checked before the cells): alone here.
        let cx = CellCtx {
            job: &crate::job::Local,
            ..cx
        };
        let plan = crate::curve::CurvePlan {
            levels: curve.clone(),
            stop_us: curve_stop.as_secs_f64() * 1e6,
        };
        failure = crate::curve::run(&cx, &p, &plan, &mut book).err();
    }
    if let Some(wt) = &watch {
        if let Err(e) = wt.finish() {
            failure.get_or_insert(e);
        }
    }
    let Book {
        mut cmp,
        mut recorder,
        bad_blocks,
        ..
    } = book;
    if !rank0 {
        return failure.map_or(Ok(None), Err);
    }
    cmp.incomplete = !complete || failure.is_some();
    // The finished document: no longer one written part-way.
    cmp.complete = None;
    if let Some(rec) = recorder.as_mut() {
        rec.finish(&cmp)?;
    }
    let earlier = recorder
        .as_ref()
        .map(|rec| rec.earlier_runs(&cmp))
        .unwrap_or_default();
    let files = sanbench_report::render_dir_with_earlier(
        &cmp,
        &a.out,
        &sanbench_report::Options::default(),
        &earlier,
    )
    .context("writing the report")?;
    if failure.is_none() && bad_blocks > 0 {
        failure = Some(CliError::Unverified(format!(
            "data did not verify: {bad_blocks} bad blocks (see each cell's verify block in results.json)"
        )));
    }
    Ok(Some(Compared {
        cmp,
        files,
        recorded: recorder.map(|rec| (rec.run, rec.path)),
        against: against.map(|(id, run)| (id.to_string(), run)),
        failure,
    }))
}
