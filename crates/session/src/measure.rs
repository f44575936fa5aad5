//! One process's measurement, what `run`, `compare` and `crosscheck` share: from a run's
//! configuration (run_config.rs), the targets opened and preconditioned,
//! the plan run with the progress line, the host monitor and the `--fault` schedule, and the
//! run's document (built here too for a merged MPI result, from the merged output).

use sanbench_engine::poison;
use std::sync::{Arc, Mutex};

use anyhow::Context as _;
use sanbench_engine::result::{aggregate, rfc3339, target_result, ProcessCpu, RunDoc, SCHEMA};
use sanbench_engine::{Observer, Progress, RunOutput, RunPlan, Workload};

use sanbench_engine::precondition::Report;

use crate::context::Context;
use crate::error::CliError;
use crate::events::{Event, Events};
use crate::faults::{FaultRun, Faults};
use crate::monitoring::MonitorSetup;
use crate::run_config::RunConfig;
use sanbench_engine::disruption::Fault;
use sanbench_engine::result::FaultRecord;
use sanbench_monitor::sampler::Baseline;
use sanbench_monitor::MonitorHandle;

/// Records the process's own CPU time at the window's edges, marks the monitor's window, and
/// draws progress.
struct RunObserver<'a> {
    progress: &'a dyn Events,
    /// `--metrics-listen`: the endpoint's registry, given the monitor's power readings.
    metrics: Option<&'a sanbench_metrics::registry::Registry>,
    monitor: Option<&'a MonitorHandle>,
    /// `--fault`: the schedule's thread starts and stops with the window.
    faults: Option<&'a FaultRun>,
    at_start: Mutex<Option<(f64, f64)>>,
    at_end: Mutex<Option<(f64, f64)>>,
}

fn self_cpu() -> (f64, f64) {
    // SAFETY: getrusage fills the struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    (t(ru.ru_utime), t(ru.ru_stime))
}

pub fn peak_rss_bytes() -> u64 {
    // SAFETY: getrusage fills the struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    ru.ru_maxrss.max(0) as u64 * 1024
}

impl Observer for RunObserver<'_> {
    fn window_started(&self) {
        if let Some(m) = self.monitor {
            m.window_start();
        }
        *poison::lock(&self.at_start) = Some(self_cpu());
        if let Some(f) = self.faults {
            f.window_started();
        }
    }
    fn window_ended(&self) {
        if let Some(m) = self.monitor {
            m.window_end();
        }
        *poison::lock(&self.at_end) = Some(self_cpu());
        if let Some(f) = self.faults {
            f.window_ended();
        }
    }
    fn progress(&self, p: &Progress) {
        self.progress.event(&Event::Progress(p));
        // `--metrics-listen`: the monitor's last power reading.
        if let Some(r) = self.metrics {
            crate::metrics::host_power(r, self.monitor.and_then(|m| m.last_power()));
        }
    }
}

pub fn build_doc(
    w: &Workload,
    data: &sanbench_engine::stamp::DataSpec,
    out: &RunOutput,
    cpu: Option<((f64, f64), (f64, f64))>,
) -> RunDoc {
    let secs = out.window.as_secs_f64();
    let results: Vec<_> = out
        .targets
        .iter()
        .map(|t| target_result(t, secs, true))
        .collect();
    let total_ios: u64 = results.iter().map(|r| r.ios).sum();
    // Several targets, or none (a rank that only measures its host): the aggregate carries
    // the host's figures.
    let all = (out.targets.len() != 1).then(|| target_result(&aggregate(out), secs, false));
    let process_cpu = cpu.map(|((u0, s0), (u1, s1))| ProcessCpu::new(u1 - u0, s1 - s0, total_ios));
    RunDoc {
        schema: SCHEMA.into(),
        sanbench_version: env!("CARGO_PKG_VERSION").into(),
        started_at: rfc3339(out.started_at),
        command: std::env::args()
            .map(|a| sanbench_engine::uri::redact(&a))
            .collect(),
        spec: w.clone(),
        spec_description: w.describe(),
        seconds: secs,
        stopped_early: out.stopped_early,
        run_id: format!("{:016x}", out.run_id),
        data: *data,
        results,
        all,
        peak_rss_bytes: peak_rss_bytes(),
        process_cpu,
        manifest: None,
        host: None,
        hosts: Vec::new(),
        mpi: None,
        faults: Vec::new(),
        complete: None,
    }
}

pub fn write_json(doc: &RunDoc, path: &std::path::Path) -> Result<(), CliError> {
    let text = sanbench_doc::json::to_string(doc).context("serializing the result")?;
    if path.as_os_str() == "-" {
        crate::stdout::write_bytes(format!("{text}\n").as_bytes());
    } else if std::fs::symlink_metadata(path).is_ok_and(|m| !m.file_type().is_file()) {
        // Not a plain file (/dev/null, a FIFO, /dev/stdout, a symbolic link): written in
        // place. A rename over it would replace the device or the link with a regular file.
        std::fs::write(path, format!("{text}\n").as_bytes())
            .with_context(|| format!("writing {}", path.display()))?;
    } else {
        // Write beside and rename, so a crash never leaves half a document.
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, text.as_bytes())
            .and_then(|_| std::fs::rename(&tmp, path))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// Puts each target's precondition report into its result and into the manifest.
/// `placement`: the context's (`Context::placement`), for a document without a manifest.
pub fn attach_precondition(
    doc: &mut RunDoc,
    reports: Vec<Report>,
    placement: Option<serde_json::Value>,
) {
    let mut by_target = std::collections::BTreeMap::new();
    for (r, rep) in doc.results.iter_mut().zip(reports) {
        by_target.insert(r.target.clone(), rep.clone());
        r.precondition = Some(rep);
    }
    match doc.manifest.as_mut() {
        Some(m) => m.precondition = by_target,
        None => {
            // No host manifest (--no-monitor): the placement still goes in, as the figures
            // depend on it.
            let mut m = sanbench_doc::manifest::Manifest {
                precondition: by_target,
                ..Default::default()
            };
            if let Some(p) = placement {
                m.extra.insert("placement".into(), p);
            }
            doc.manifest = Some(m);
        }
    }
}

/// Judges each target's disruption again with the faults that fired (a run without faults
/// keeps the stall-only judgement `target_result` made). A fault's time is taken from its
/// wall clock against the window's, as the path events' are.
fn attach_disruption(doc: &mut RunDoc, out: &RunOutput, fired: &[FaultRecord]) {
    if fired.is_empty() {
        return;
    }
    let window_ns = out.window.as_nanos() as u64;
    for (r, t) in doc.results.iter_mut().zip(&out.targets) {
        let start_ms = t.timeline.window_start_unix_ns as f64 / 1e6;
        let faults: Vec<Fault> = fired
            .iter()
            .filter(|f| f.error.is_none())
            .map(|f| Fault {
                offset_ms: f.at_unix_ms as f64 - start_ms,
                at: f.at.clone(),
                link: f.link.clone(),
                action: f.action.clone(),
            })
            .collect();
        r.disruption = sanbench_engine::disruption::of_target(t, window_ns, &faults);
    }
}

/// Runs a plan with the progress line, the process-CPU observer, the host monitor and the
/// `--fault` schedule, and builds its document. Returns the idle baseline used, for reuse on
/// the same target, and the run's output (what an MPI rank sends to rank 0).
pub fn execute_output(
    cx: &Context,
    plan: &RunPlan,
    progress: &dyn Events,
    mon: Option<&MonitorSetup>,
    reuse_baseline: Option<Baseline>,
    faults: Option<&Arc<Faults>>,
) -> Result<(RunDoc, Option<Baseline>, RunOutput), CliError> {
    let running = mon
        .map(|m| crate::monitoring::start(m, reuse_baseline))
        .transpose()?;
    let fault_run = faults.map(FaultRun::new);
    let obs = RunObserver {
        progress,
        metrics: cx.metrics().map(|r| &**r),
        monitor: running.as_ref().map(|r| &r.handle),
        faults: fault_run.as_ref(),
        at_start: Mutex::new(None),
        at_end: Mutex::new(None),
    };
    let out = sanbench_engine::run(plan, &obs);
    progress.event(&Event::Ended);
    let cpu = match (*poison::lock(&obs.at_start), *poison::lock(&obs.at_end)) {
        (Some(s), Some(e)) => Some((s, e)),
        _ => None,
    };
    // Failed or not, the links are set back before anything else runs.
    let fired = fault_run.map(FaultRun::finish).unwrap_or_default();
    let out = out?;
    let mut doc = build_doc(&plan.workload, &plan.data, &out, cpu);
    attach_disruption(&mut doc, &out, &fired);
    doc.faults = fired;
    let mut baseline = None;
    if let Some(r) = running {
        baseline = r.baseline;
        let report = r
            .handle
            .finish()
            .map_err(|e| CliError::Failed(anyhow::anyhow!("host monitor: {e}")))?;
        crate::monitoring::fill(&mut doc, &report, r.baseline);
        crate::monitoring::manifest(&mut doc, cx.placement());
        crate::bottleneck::attach(&mut doc, &report);
    }
    Ok((doc, baseline, out))
}

/// What one process of a run does: open its targets, precondition them, run the plan with the
/// host monitor. `quiet` silences progress; `sync` runs the plan in step with other processes
/// (MPI ranks), whose rank 0 alone preconditions targets they share (`precondition: false` on
/// the others).
pub struct Measure<'a> {
    pub targets: &'a [String],
    pub quiet: bool,
    pub sync: Option<std::sync::Arc<dyn sanbench_engine::run::sync::PhaseSync>>,
    pub precondition: bool,
    pub raw_latencies: bool,
    /// This process's rank in an MPI job (`None`: alone).
    pub rank: Option<u32>,
}

/// The flags `run` and `compare` share that shape a plan.
pub struct Shared<'a> {
    pub seed: u64,
    pub log_interval: std::time::Duration,
    pub cpus: Option<&'a crate::placement::CpuList>,
    pub cpus_policy: crate::placement::CpusPolicy,
}

/// What one run (or one cell of a comparison) measures: its workload, the targets opened for
/// it and the data they hold.
pub struct Planned {
    pub workload: Workload,
    pub targets: Vec<Arc<dyn sanbench_engine::Target>>,
    pub io_timeout: std::time::Duration,
    pub data: sanbench_engine::stamp::DataSpec,
    pub run_id: Option<u64>,
    pub verify: Vec<Option<Arc<sanbench_engine::verify::Verifier>>>,
    pub sync: Option<Arc<dyn sanbench_engine::run::sync::PhaseSync>>,
    pub raw_latencies: bool,
    /// This process's rank in an MPI job (the ranks of one host deal its CPUs out in turn).
    pub rank: Option<u32>,
}

/// The engine's plan for a run or a cell: the one place it is built, so that `run` and
/// `compare` measure the same way (stop flag, interval cap, each stream's CPU).
pub fn plan(p: Planned, f: &Shared<'_>) -> RunPlan {
    let streams = p.workload.workers as usize * p.targets.len();
    let mut plan = RunPlan {
        workload: p.workload,
        targets: p.targets,
        io_timeout: p.io_timeout,
        seed: f.seed,
        data: p.data,
        stop: crate::signals::stop_flag(),
        run_id: p.run_id,
        verify: p.verify,
        clock: None,
        sync: p.sync,
        raw_latencies: p.raw_latencies,
        log_interval: f.log_interval,
        intervals: None,
        max_intervals: sanbench_engine::run::summaries::MAX_SUMMARIES,
        saves: None,
        stream_cpus: Vec::new(),
        replay: None,
    };
    plan.stream_cpus = crate::placement::plan_streams(f.cpus, f.cpus_policy, p.rank, streams);
    plan
}

/// Runs one process's part and returns its document and the run's output (for merging).
pub fn measure(
    cx: &Context,
    c: &RunConfig,
    m: Measure<'_>,
) -> Result<(RunDoc, RunOutput), CliError> {
    let w = &c.workload;
    // A rank that does not precondition opens its targets as its workload alone needs.
    let mut data = c.data.clone();
    let mut opts = c.files.clone();
    if !m.precondition {
        data.mode = sanbench_engine::precondition::Mode::None;
        opts.writes = w.has_writes() || data.writes();
    }
    // Before any target opens: a log that cannot be created is bad input. (Under MPI the
    // ranks other than 0 spool their lines for rank 0's log.)
    let watch = cx.open_watch(&c.watch, m.rank)?;
    // Nor can a result file that could not be written at the end (the process that reports).
    if let (Some(path), None | Some(0)) = (&c.json, m.rank) {
        crate::outfile::check_writable("--json", path)?;
    }
    let targets = crate::targets::open_targets(cx, m.targets, &opts)?;
    // Before the precondition writes anything: an op a target lacks is bad input.
    for t in &targets {
        sanbench_engine::run::check_ops(w, &**t)?;
    }
    if let Some(wt) = &watch {
        wt.for_run(m.targets);
    }
    let progress = cx.events(m.quiet, c.live.progress, c.json_to_stdout());
    let mut reports = Vec::with_capacity(targets.len());
    let spans: Vec<u64> = targets
        .iter()
        .map(|t| w.span.unwrap_or(t.info().size).min(t.info().size))
        .collect();
    let crate::precondition::Verifiers {
        run_id,
        per_target: verify,
    } = crate::precondition::verifiers(&data, &targets, &spans, std::iter::once(w), &[])?;
    for (ti, t) in targets.iter().enumerate() {
        let info = t.info();
        let span = spans[ti];
        let (rep, _) = crate::precondition::run(
            &**t,
            &info.uri,
            span,
            &data,
            crate::precondition::fill_plan(data.mode, "fill"),
            w.has_reads(),
            c.io_timeout,
            &*progress,
            m.quiet,
            verify[ti].as_deref(),
        )?;
        reports.push(rep);
    }
    let mut plan = plan(
        Planned {
            workload: w.clone(),
            targets,
            io_timeout: c.io_timeout,
            data: data.spec,
            run_id,
            verify,
            sync: m.sync,
            raw_latencies: m.raw_latencies,
            rank: m.rank,
        },
        &Shared {
            seed: c.seed,
            log_interval: c.watch.log_interval,
            cpus: c.cpus.as_ref(),
            cpus_policy: c.cpus_policy,
        },
    );
    cx.record_stream_cpus(plan.cpu_of_each_stream());
    // Under MPI only rank 0 has every rank's figures, and only at the end: no partial saves.
    let partial = match (&plan.sync, &c.json) {
        (None, Some(path)) if saves_to(path) => crate::partial::Partial::start(
            c.live.save_every,
            &plan,
            saver(&plan, path, &reports, cx.placement()),
        ),
        _ => None,
    };
    plan.intervals = crate::sinks::join(vec![
        crate::watch::sink(&watch),
        crate::events::interval_sink(&progress),
    ]);
    plan.saves = partial.as_ref().map(|p| p.saves());
    let done = execute_output(
        cx,
        &plan,
        &*progress,
        c.monitor.as_ref(),
        None,
        c.faults.as_ref(),
    );
    if let Some(p) = &partial {
        p.finish();
    }
    if let Some(wt) = &watch {
        wt.finish()?;
    }
    let (mut doc, _, out) = done?;
    attach_precondition(&mut doc, reports, cx.placement());
    Ok((doc, out))
}

/// Whether `--json PATH` is rewritten part-way: a plain file (or one not there yet), not
/// stdout or a device.
fn saves_to(path: &std::path::Path) -> bool {
    path.as_os_str() != "-"
        && std::fs::symlink_metadata(path).map_or(true, |m| m.file_type().is_file())
}

/// `--save-every`: the result so far as the run's document, marked `"complete": false`.
fn saver(
    plan: &RunPlan,
    path: &std::path::Path,
    reports: &[Report],
    placement: Option<serde_json::Value>,
) -> crate::partial::Write {
    let (w, data) = (plan.workload.clone(), plan.data);
    let (path, reports) = (path.to_path_buf(), reports.to_vec());
    Box::new(move |out: RunOutput| {
        let mut doc = build_doc(&w, &data, &out, None);
        doc.complete = Some(false);
        attach_precondition(&mut doc, reports.clone(), placement.clone());
        write_json(&doc, &path)
    })
}
