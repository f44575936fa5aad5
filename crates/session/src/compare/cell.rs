//! One cell of a comparison: its targets opened, its plan run (with the histogram log, the
//! live line's p99 and, under `--save-every`, results.json rewritten with the cell so far as
//! `in_progress`), its result named and judged against its lab link.

use std::sync::Arc;

use anyhow::Context as _;

use sanbench_engine::suite::SuiteWorkload;
use sanbench_engine::verify::Verifier;
use sanbench_monitor::sampler::Baseline;

use super::book::{CellRun, CellSave};
use super::config::CompareConfig;
use super::suite_faults::SuiteFaults;
use crate::context::Context;
use crate::error::CliError;
use crate::events::Events;
use crate::job::{Job, Part};
use crate::measure::execute_output;
use crate::monitoring::MonitorSetup;
use crate::precondition::DataPlan;

/// What every cell of one comparison shares.
pub(crate) struct CellCtx<'a> {
    /// The command's context (placement, watch, metrics, `mem:` targets).
    pub(crate) context: &'a Context,
    pub(crate) a: &'a CompareConfig,
    pub(crate) data: &'a DataPlan,
    pub(crate) progress: &'a Arc<dyn Events>,
    pub(crate) mon: Option<&'a MonitorSetup>,
    /// Per target (index as in the comparison): its verifier under `--verify`.
    pub(crate) verify: &'a [Option<Arc<Verifier>>],
    pub(crate) run_id: Option<u64>,
    /// How this process runs (under MPI each cell a synchronized phase, gathered to rank 0)
    /// and the targets as given (`{rank}`, `{host}` unexpanded), by index.
    pub(crate) job: &'a dyn Job,
    pub(crate) templates: &'a [String],
    /// `--hist-log`: where every cell's intervals go, and the round that runs now (its tag).
    pub(crate) watch: Option<&'a Arc<crate::watch::Watch>>,
    pub(crate) round: std::cell::Cell<u32>,
    /// `--fault`: fired in every cell's window, recorded in the cell's result.
    pub(crate) faults: Option<&'a Arc<crate::faults::Faults>>,
    /// A suite's faults, per (workload, target): fired in those cells instead.
    pub(crate) suite_faults: &'a SuiteFaults,
    /// Per target (index as in the comparison): its lab link, whose rate the bottleneck
    /// judges the link's bytes against.
    pub(crate) links: &'a [Option<sanbench_doc::compare::LinkInfo>],
}

/// Runs one cell; `None` on the ranks of an MPI job other than 0 (rank 0 has the result).
pub(crate) fn run_cell(
    cx: &CellCtx<'_>,
    w: &SuiteWorkload,
    ti: usize,
    uri: &str,
    name: &str,
    baseline: &mut Option<Baseline>,
    save: Option<CellSave>,
) -> Result<Option<CellRun>, CliError> {
    let (a, progress, mon) = (cx.a, cx.progress, cx.mon);
    let n = w.targets_at_once.unwrap_or(1) as usize;
    let opts = a.files(w.workload.has_writes() || cx.data.writes());
    let targets = match w.paths {
        Some(k) => (0..n)
            .map(|_| crate::targets::open_paths(uri, k))
            .collect::<Result<Vec<_>, _>>()?,
        None => crate::targets::open_targets(cx.context, &vec![uri.to_string(); n], &opts)?,
    };
    if let Some(wt) = cx.watch {
        wt.for_cell(&w.id, cx.round.get(), name, n);
    }
    let mut plan = crate::measure::plan(
        crate::measure::Planned {
            workload: w.workload.clone(),
            targets,
            io_timeout: a.io_timeout,
            data: cx.data.spec,
            run_id: cx.run_id,
            // n copies of one target share its map (they drive one store).
            verify: vec![cx.verify[ti].clone(); n],
            sync: cx.job.sync(),
            raw_latencies: false,
            rank: cx.job.rank(),
        },
        &crate::measure::Shared {
            seed: a.seed,
            log_interval: a.watch.log_interval,
            cpus: a.cpus.as_ref(),
            cpus_policy: a.cpus_policy,
        },
    );
    // A trace workload replays its trace (opened and scanned when the suite was loaded).
    plan.replay = w.trace.as_ref().and_then(|t| t.replay.clone());
    let partial = save.and_then(|s| {
        crate::partial::Partial::start(a.live.save_every, &plan, s.writer(&plan, name, n))
    });
    plan.intervals = crate::sinks::join(vec![
        crate::watch::sink(&cx.watch.cloned()),
        crate::events::interval_sink(progress),
    ]);
    plan.saves = partial.as_ref().map(|p| p.saves());
    let faults = cx.suite_faults.fire.get(&(w.id.clone(), ti)).or(cx.faults);
    let done = execute_output(cx.context, &plan, &**progress, mon, *baseline, faults);
    // The last save is written before the cell is filed (results.json is rewritten then).
    if let Some(p) = &partial {
        p.finish();
    }
    let (mut doc, used, out) = done?;
    if baseline.is_none() {
        *baseline = used;
    }
    if cx.job.in_job() {
        let templates = vec![cx.templates[ti].clone(); n];
        let watch = cx.context.watch();
        let part = Part {
            workload: &w.workload,
            templates: &templates,
            doc,
            output: out,
            monitor_only: false,
            raw_latencies: false,
            watch: watch.as_deref(),
        };
        match cx.job.gather(part)? {
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
    r.faults = std::mem::take(&mut doc.faults);
    lab_link_rate(&mut r, cx.links.get(ti).and_then(Option::as_ref));
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

/// A lab target's bottleneck judged again with its link's rate: the shaping (tc) is not
/// something the interface reports, so the monitor alone cannot know it.
fn lab_link_rate(
    r: &mut sanbench_engine::result::TargetResult,
    link: Option<&sanbench_doc::compare::LinkInfo>,
) {
    let (Some(l), Some(b)) = (link, &r.bottleneck) else {
        return;
    };
    let rate = l.rate_bits;
    let source = format!("lab link {}", l.name);
    let open = r.open_loop.as_ref().map(|o| (o.valid, o.asked_iops));
    r.bottleneck = Some(sanbench_analysis::bottleneck::with_link_rate(
        b, rate, &source, open,
    ));
}
