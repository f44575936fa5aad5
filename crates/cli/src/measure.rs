//! One process's measurement, what `run`, `compare` and `crosscheck` share: the workload from
//! flags or a spec file, the targets opened (engine flags to file options) and preconditioned,
//! the plan run with the progress line, the host monitor and the `--fault` schedule, and the
//! run's document (built here too for a merged MPI result, from the merged output).

use sanbench_engine::poison;
use std::sync::{Arc, Mutex};

use anyhow::Context as _;
use sanbench_doc::spec_toml::{Defaults, SegmentFile, WorkloadFile};
use sanbench_engine::file::{EngineKind, FileOptions};
use sanbench_engine::result::{aggregate, rfc3339, target_result, ProcessCpu, RunDoc, SCHEMA};
use sanbench_engine::units::Bytes;
use sanbench_engine::{Observer, Progress, RunOutput, RunPlan, Workload};

use sanbench_engine::precondition::Report;

use crate::args::{EngineArgs, RunArgs};
use crate::context::Context;
use crate::error::{usage, CliError};
use crate::faults::{FaultRun, Faults};
use crate::monitoring::MonitorSetup;
use crate::precondition::DataPlan;
use crate::progress::ProgressLine;
use sanbench_engine::disruption::Fault;
use sanbench_engine::result::FaultRecord;
use sanbench_monitor::sampler::Baseline;
use sanbench_monitor::MonitorHandle;

/// Builds the workload: a spec file, or one segment from flags; load and timing flags override.
pub fn workload_from_args(a: &RunArgs) -> Result<Workload, CliError> {
    let seg_flags = a.bs.is_some()
        || a.read_bs.is_some()
        || a.write_bs.is_some()
        || a.read.is_some()
        || a.trim.is_some()
        || a.write_zeroes.is_some()
        || a.random.is_some()
        || a.align.is_some();
    if let Some(w) = &a.fio_workload {
        return fio_workload(a, w.clone(), seg_flags);
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

/// Records the process's own CPU time at the window's edges, marks the monitor's window, and
/// draws progress.
struct RunObserver<'a> {
    progress: &'a ProgressLine,
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
        self.progress.draw(p);
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

/// File-target options from the engine flags.
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

pub fn io_timeout(e: &EngineArgs) -> Result<std::time::Duration, CliError> {
    Ok(e.io_timeout.0)
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
    progress: &ProgressLine,
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
    progress.clear();
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
    };
    plan.stream_cpus = crate::placement::plan_streams(f.cpus, f.cpus_policy, p.rank, streams);
    plan
}

/// Runs one process's part and returns its document and the run's output (for merging).
pub fn measure(cx: &Context, a: &RunArgs, m: Measure<'_>) -> Result<(RunDoc, RunOutput), CliError> {
    let w = workload_from_args(a)?;
    let size = a.size.map(|b| b.0);
    let mut data_args = a.data.clone();
    if !m.precondition {
        data_args.precondition = "none".into();
    }
    let data = DataPlan::from_args(&data_args)?;
    let opts = file_options(&a.engine, size, w.has_writes() || data.writes())?;
    let io_timeout = io_timeout(&a.engine)?;
    // Before any target opens: a schedule that cannot run is bad input.
    let faults = Faults::prepare(&a.faults, a.lab.as_deref(), &[("the run".into(), w.time)])?;
    // Before any target opens: a log that cannot be created is bad input. (Under MPI the
    // ranks other than 0 spool their lines for rank 0's log.)
    let watch = cx.open_watch(&a.watch, m.rank)?;
    // Nor can a result file that could not be written at the end (the process that reports).
    if let (Some(path), None | Some(0)) = (&a.json, m.rank) {
        crate::outfile::check_writable("--json", path)?;
    }
    let targets = crate::targets::open_targets(cx, m.targets, &opts)?;
    // Before the precondition writes anything: an op a target lacks is bad input.
    for t in &targets {
        sanbench_engine::run::check_ops(&w, &**t)?;
    }
    if let Some(wt) = &watch {
        wt.for_run(m.targets);
    }
    let json_to_stdout = a.json.as_deref().is_some_and(|p| p.as_os_str() == "-");
    let progress = Arc::new(ProgressLine::with_mode(
        m.quiet,
        a.live.progress,
        json_to_stdout,
    ));
    let mut reports = Vec::with_capacity(targets.len());
    let spans: Vec<u64> = targets
        .iter()
        .map(|t| w.span.unwrap_or(t.info().size).min(t.info().size))
        .collect();
    let crate::precondition::Verifiers {
        run_id,
        per_target: verify,
    } = crate::precondition::verifiers(&data, &targets, &spans, std::iter::once(&w))?;
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
            io_timeout,
            &progress,
            m.quiet,
            verify[ti].as_deref(),
        )?;
        reports.push(rep);
    }
    let mut plan = plan(
        Planned {
            workload: w.clone(),
            targets,
            io_timeout,
            data: data.spec,
            run_id,
            verify,
            sync: m.sync,
            raw_latencies: m.raw_latencies,
            rank: m.rank,
        },
        &Shared {
            seed: a.seed,
            log_interval: a.watch.log_interval.0,
            cpus: a.cpus.as_ref(),
            cpus_policy: a.cpus_policy,
        },
    );
    cx.record_stream_cpus(plan.cpu_of_each_stream());
    // Under MPI only rank 0 has every rank's figures, and only at the end: no partial saves.
    let partial = match (&plan.sync, &a.json) {
        (None, Some(path)) if saves_to(path) => crate::partial::Partial::start(
            a.live.save_every.0,
            &plan,
            saver(&plan, path, &reports, cx.placement()),
        ),
        _ => None,
    };
    plan.intervals = crate::sinks::join(vec![crate::watch::sink(&watch), progress.sink()]);
    plan.saves = partial.as_ref().map(|p| p.saves());
    let mon = crate::monitoring::setup(&a.monitor)?;
    let done = execute_output(cx, &plan, &progress, mon.as_ref(), None, faults.as_ref());
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
