//! The scheduler: one thread per (worker, target) stream, each keeping `qd` I/Os in flight on
//! its own [`Queue`], recording every completion's latency into per-stream histograms.
//!
//! Iometer's model is "each worker drives every target with `qd` outstanding I/Os". sanbench
//! keeps that load shape but gives every (worker, target) pair its own thread, so that a slow
//! target never delays the completions of a fast one on the same worker.
//!
//! * [`check`]: the plan against each target's geometry;
//! * [`shared`]: what the threads share;
//! * `coordinator`: the coordinating thread's loop (window, progress, the sampled in-flight
//!   counts of the Little's-law check);
//! * [`stream`]: one stream's loop (timing, stamped write data, counting);
//! * [`interval`]: the window cut into intervals (`--log-interval`): per-stream current
//!   statistics handed over at each edge and merged per target by the coordinator
//!   (`collect`), their summaries bounded in number whatever the window's length
//!   ([`summaries`]); the result formed from them once ([`snapshot`]: part-way for
//!   `--save-every`, and at the end);
//! * [`sync`]: the hooks that run a plan in step with other processes (MPI ranks);
//! * [`wire`]: a run's output as bytes (histograms in HdrHistogram's V2 format) and the merge
//!   of several processes' outputs.

mod ahead;
mod check;
pub mod clock;
mod collect;
mod coordinator;
mod fused;
mod inflight;
pub mod interval;
mod layout;
mod open;
pub mod pacer;
mod replay;
mod shared;
mod snapshot;
mod spin;
mod state;
mod stream;
mod stream_verify;
pub mod summaries;
pub mod sync;
pub mod timeline;
mod wait;
pub mod wire;
#[cfg(test)]
mod wire_tests;

use crate::poison;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use crate::engine::Target;
use crate::error::EngineError;
use crate::spec::Workload;
use crate::stamp::DataSpec;

pub use check::{check_ops, check_plan};
use coordinator::coordinate;
pub use interval::{Interval, IntervalRecord, IntervalSink, IntervalSummary, PathStats};
pub(crate) use layout::{stamp_slot, Layout};
use shared::{Live, Shared};
pub use snapshot::{SaveSink, Saves};
use state::StreamCtx;
use stream::stream;

mod names;
mod output;
pub use names::{is_stream_thread, stream_thread_name, STREAM_THREAD_PREFIX};
pub use output::{DirStats, RunError, RunOutput, Second, TargetRun};

/// Everything one run needs.
pub struct RunPlan {
    pub workload: Workload,
    pub targets: Vec<Arc<dyn Target>>,
    /// Longest wait for any completion before a queue gives up.
    pub io_timeout: Duration,
    pub seed: u64,
    /// What write payloads look like (unique and incompressible by default).
    pub data: DataSpec,
    /// Set from outside (Ctrl-C) to end the run early; the window then ends where it stopped.
    pub stop: Arc<AtomicBool>,
    /// The id stamped into every write; `None`: a fresh one from the OS. A verified run takes
    /// its verifiers' id.
    pub run_id: Option<u64>,
    /// Per target (by index; empty or `None`: not verified): the generation map and checks of
    /// `--verify`, kept by the caller across runs (the cells of a comparison).
    pub verify: Vec<Option<Arc<crate::verify::Verifier>>>,
    /// The run's clock; `None`: the real one, started when the queues are open. Tests pass a
    /// [`clock::Manual`] that their fake target advances (closed loop only: the open loop
    /// sleeps on the real clock).
    pub clock: Option<Arc<dyn clock::Clock>>,
    /// Runs the plan in step with other processes (the start barrier, the window's end
    /// decided by one of them); `None`: this process alone.
    pub sync: Option<Arc<dyn sync::PhaseSync>>,
    /// Test hook for small runs: keep every counted read and write latency (service time,
    /// ns; at most `state::RAW_CAP` per stream) in `TargetRun::raw_ns`, so a test can check
    /// merged percentiles against the raw values. Off in every real run.
    pub raw_latencies: bool,
    /// The length of the window's intervals (`--log-interval`): each target's statistics
    /// per interval are summarized in `TargetRun::intervals` and handed to `intervals`.
    pub log_interval: Duration,
    /// Where finished intervals go as they finish (a histogram log, a metrics endpoint).
    pub intervals: Option<Arc<dyn IntervalSink>>,
    /// Most interval summaries the result keeps per series (target, path, all targets):
    /// a longer window is summarized at a coarser step ([`summaries`]; default
    /// [`summaries::MAX_SUMMARIES`]). The sink gets every interval regardless.
    pub max_intervals: usize,
    /// The result so far, handed on every so much window time (`--save-every`); `None`: only
    /// at the end.
    pub saves: Option<Saves>,
    /// fio's `cpus_allowed_policy=split`: stream k (worker × targets + target) runs on CPU
    /// `stream_cpus[k % len]` alone, pinned before it opens its queue (so the io-wq workers an
    /// io_uring queue starts share it). Empty: the streams run wherever the process may (the
    /// scheduler's choice; with two streams on two CPUs it sometimes keeps both on one for a
    /// whole run: docs/BENCHMARKS.md, issue 26).
    pub stream_cpus: Vec<usize>,
    /// Replay a trace instead of drawing I/Os from the workload (crate::replay; the workload
    /// is then `Replay::workload`'s: one worker).
    pub replay: Option<crate::replay::Replay>,
}

impl RunPlan {
    /// `workload` on `targets` with every other setting plain: a 5 s I/O timeout, seed 1,
    /// unique data, never stopped, the real clock, no verification, synchronization, sinks or
    /// saves, 1 s intervals, streams wherever the process may run. Tests and examples start
    /// from it (`RunPlan { field, ..RunPlan::new(w, t) }`); the CLI sets every field itself.
    pub fn new(workload: Workload, targets: Vec<Arc<dyn Target>>) -> RunPlan {
        RunPlan {
            workload,
            targets,
            io_timeout: Duration::from_secs(5),
            seed: 1,
            data: DataSpec::default(),
            stop: Arc::new(AtomicBool::new(false)),
            run_id: None,
            verify: Vec::new(),
            clock: None,
            sync: None,
            raw_latencies: false,
            log_interval: Duration::from_secs(1),
            intervals: None,
            max_intervals: summaries::MAX_SUMMARIES,
            saves: None,
            stream_cpus: Vec::new(),
            replay: None,
        }
    }

    /// The CPU stream `k` (worker × targets + target) is pinned to, if any.
    pub fn stream_cpu(&self, k: usize) -> Option<usize> {
        (!self.stream_cpus.is_empty()).then(|| self.stream_cpus[k % self.stream_cpus.len()])
    }

    /// The CPU of each stream of the plan, in stream order (empty when none is pinned).
    pub fn cpu_of_each_stream(&self) -> Vec<usize> {
        let n = self.workload.workers as usize * self.targets.len();
        (0..n).filter_map(|k| self.stream_cpu(k)).collect()
    }
}

/// The shortest `--log-interval`.
pub const MIN_LOG_INTERVAL: Duration = Duration::from_millis(10);

/// Called by the scheduler's coordinating thread; monitors hook in here.
pub trait Observer: Sync {
    /// Ramp-up is over: the measured window starts now.
    fn window_started(&self) {}
    /// The measured window ends now.
    fn window_ended(&self) {}
    /// About once a second.
    fn progress(&self, _p: &Progress) {}
}

/// A do-nothing observer.
pub struct NoObserver;
impl Observer for NoObserver {}

#[derive(Clone, Debug)]
pub struct Progress {
    pub elapsed: Duration,
    pub ramping: bool,
    pub remaining: Duration,
    /// Completions and bytes in the last second, all targets.
    pub iops: f64,
    pub bytes_per_s: f64,
}

struct StreamOut {
    target: usize,
    series: Vec<Second>,
    timeline: timeline::Timeline,
    stats: std::collections::BTreeMap<String, serde_json::Value>,
    verify: Option<crate::verify::VerifyReport>,
    raw: Option<Vec<u64>>,
    pacing_ns: u64,
    replay: Option<crate::replay::ReplayRun>,
}

/// Runs the plan to completion.
pub fn run(plan: &RunPlan, observer: &dyn Observer) -> Result<RunOutput, RunError> {
    let spans = check_plan(plan)?;
    let w = &plan.workload;
    let bad = |target: &str, error: EngineError| RunError {
        target: target.to_string(),
        worker: 0,
        error,
    };
    plan.data
        .validate()
        .map_err(|e| bad("data", EngineError::Invalid(e)))?;
    let run_id = match plan.run_id {
        Some(id) => id,
        None => crate::stamp::new_run_id().map_err(|e| {
            bad(
                "run id",
                EngineError::sys("getrandom for the run's id failed", e),
            )
        })?,
    };
    if plan.log_interval < MIN_LOG_INTERVAL {
        return Err(bad(
            "log interval",
            EngineError::Invalid(format!(
                "the log interval must be at least {} ms",
                MIN_LOG_INTERVAL.as_millis()
            )),
        ));
    }
    let verifier = |ti: usize| plan.verify.get(ti).cloned().flatten();
    if let Some(why) = replay_refuses(plan) {
        return Err(bad("replay", EngineError::Invalid(why.into())));
    }
    if plan.clock.is_some() && w.rate.is_some() {
        return Err(bad(
            "clock",
            EngineError::Invalid("an open-loop run needs the real clock".into()),
        ));
    }
    for ti in 0..plan.targets.len() {
        if let Some(v) = verifier(ti) {
            if v.run_id != run_id {
                return Err(bad(
                    "verify",
                    EngineError::Invalid("a verified run must stamp its verifier's run id".into()),
                ));
            }
            if let Some(why) = crate::verify::unverifiable(w, v.unit, plan.data.dedupe_pct) {
                return Err(bad(&plan.targets[ti].info().uri, EngineError::Invalid(why)));
            }
        }
    }
    // Before any queue opens: caches the engine controls are dropped for the span.
    let mut cache_notes = Vec::new();
    for (t, &span) in plan.targets.iter().zip(&spans) {
        cache_notes.push(
            t.invalidate_cache(span)
                .map_err(|e| bad(&t.info().uri, e))?,
        );
    }
    let ramp_ns = w.ramp.as_nanos() as u64;
    let end_ns = ramp_ns + w.time.as_nanos() as u64;
    let n_streams = w.workers as usize * plan.targets.len();
    let barrier = Arc::new(Barrier::new(n_streams + 1));
    let shared = Shared::new(
        plan.stop.clone(),
        if plan.sync.is_some() {
            u64::MAX
        } else {
            end_ns
        },
    );
    if plan.replay.is_some() {
        shared.replaying.store(n_streams, Ordering::Relaxed);
    }
    let lives: Vec<Arc<Live>> = (0..n_streams).map(|_| Live::new()).collect();
    let started_at = SystemTime::now();
    let iv_ns = plan.log_interval.as_nanos().min(u64::MAX as u128) as u64;
    let (iv_tx, iv_rx) = std::sync::mpsc::channel();
    let shelves: Vec<(usize, usize)> = plan
        .targets
        .iter()
        .map(|t| (w.workers as usize, interval::path_count(t.info())))
        .collect();
    let pool = interval::Pool::new(&shelves);
    let pool = if w.has_trims() || w.has_write_zeroes() {
        pool.with_discards()
    } else {
        pool
    };
    let infos = plan
        .targets
        .iter()
        .zip(cache_notes)
        .map(|(t, note)| {
            let mut info = t.info().clone();
            if let Some(n) = note {
                info.params.insert("page_cache".into(), n.into());
            }
            info
        })
        .collect();
    let mut collector = collect::Collector::new(
        collect::Cut {
            len_ns: iv_ns,
            planned_ns: w.time.as_nanos().min(u64::MAX as u128) as u64,
            cap: plan.max_intervals,
        },
        snapshot::Base {
            infos,
            outstanding: w.workers as u64 * w.qd as u64,
            open_loop: w.rate.map(|r| (r, w.arrival)),
            started_at,
            run_id,
            ramp: w.ramp,
        },
        w.rate.is_some(),
        collect::Io {
            sink: plan.intervals.as_deref(),
            saves: plan.saves.as_ref(),
            rx: iv_rx,
            pool: &pool,
            lives: lives.clone(),
        },
    );

    let (outs, samples, clock_started_at) = thread::scope(|scope| {
        let mut handles = Vec::new();
        for worker in 0..w.workers as usize {
            for (ti, target) in plan.targets.iter().enumerate() {
                let k = worker * plan.targets.len() + ti;
                let ctx = StreamCtx {
                    worker,
                    target_idx: ti,
                    target: target.clone(),
                    workload: w,
                    data: plan.data,
                    run_id,
                    span: spans[ti],
                    seed: plan.seed,
                    io_timeout: plan.io_timeout,
                    ramp_ns,
                    end_ns,
                    barrier: barrier.clone(),
                    shared: shared.clone(),
                    live: lives[k].clone(),
                    verify: verifier(ti),
                    raw_latencies: plan.raw_latencies,
                    stream_idx: k,
                    cpu: plan.stream_cpu(k),
                    iv_ns,
                    iv_tx: iv_tx.clone(),
                    pool: &pool,
                    replay: plan.replay.as_ref(),
                };
                let h = thread::Builder::new()
                    .name(stream_thread_name(worker, ti))
                    .spawn_scoped(scope, move || stream(ctx))
                    .expect("spawn stream thread");
                handles.push(h);
            }
        }
        // All queues opened (or failed to).
        barrier.wait();
        if let (Some(sync), false) = (&plan.sync, shared.abort.load(Ordering::Relaxed)) {
            if let Err(error) = sync.start() {
                shared.fail(RunError {
                    target: "synchronized start".into(),
                    worker: 0,
                    error,
                });
            }
        }
        let clock_started_at = SystemTime::now();
        collector.window_start = clock_started_at + w.ramp;
        let t0 = Instant::now();
        let _ = shared.start.set(t0);
        let _ = shared.clock.set(
            plan.clock
                .clone()
                .unwrap_or_else(|| Arc::new(clock::Monotonic(t0))),
        );
        barrier.wait();
        let samples = (!shared.abort.load(Ordering::Relaxed)).then(|| {
            coordinate(
                (ramp_ns, end_ns),
                &shared,
                &lives,
                observer,
                plan.seed,
                plan.sync.as_deref(),
                &mut collector,
            )
        });
        shared.close_window();
        let outs = handles
            .into_iter()
            .filter_map(|h| h.join().ok().flatten())
            .collect::<Vec<_>>();
        (outs, samples, clock_started_at)
    });
    drop(iv_tx);
    let first_error = poison::lock(&shared.first_error).take();
    let elapsed_ns = shared.clock.get().map(|c| c.now_ns()).unwrap_or(0);
    // Ctrl-C: the window ends where the streams stopped counting, not after the drain.
    let elapsed_ns = match shared.stopped_at.load(Ordering::Relaxed) {
        0 => elapsed_ns,
        at => elapsed_ns.min(at),
    };
    // A synchronized run's window ends where it heard the end (a little before or after its
    // own plan's end).
    let stopped_early = plan.stop.load(Ordering::Relaxed) && elapsed_ns < end_ns;
    let end_ns = match shared.end_at.load(Ordering::Relaxed) {
        u64::MAX => end_ns,
        at => at.max(ramp_ns),
    };
    // Every completion counted lies inside the window (see `RunOutput::window`).
    let end_at = elapsed_ns
        .min(end_ns)
        .max(shared.counted_below.load(Ordering::Relaxed));
    let window = Duration::from_nanos(end_at.max(ramp_ns) - ramp_ns);
    // Every stream has sent its last interval: all of them go out, a failed run's too (the
    // histogram log then shows what led up to the failure).
    collector.poll(Some(window.as_nanos() as u64));
    if let Some(e) = first_error {
        return Err(e);
    }

    let mut out = collector.finish(window.as_nanos() as u64);
    out.stopped_early = stopped_early;
    out.clock_started_at = clock_started_at;
    let n_t = plan.targets.len();
    for (ti, t) in out.targets.iter_mut().enumerate() {
        // Stream i drives target i % targets (see the spawn loop above).
        t.mean_outstanding = samples.as_ref().and_then(|s| {
            (0..w.workers as usize)
                .map(|k| s.mean(k * n_t + ti))
                .sum::<Option<f64>>()
        });
        t.verify = verifier(ti).map(|v| v.report());
        // After trims, what the target says it holds (space returned is what they are for);
        // outside the window, and an answer it cannot give is no error of the run.
        if w.has_trims() || w.has_write_zeroes() {
            let span = spans.get(ti).copied().unwrap_or(t.info.size);
            t.allocation_after = plan.targets[ti]
                .allocation_after_discards(0, span)
                .ok()
                .flatten();
        }
    }
    let targets = &mut out.targets;
    let window_start_unix_ns = (clock_started_at + w.ramp)
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    for (ti, t) in targets.iter_mut().enumerate() {
        let of_target = outs.iter().filter(|o| o.target == ti).map(|o| &o.timeline);
        t.timeline = timeline::Timeline::merge_all(of_target).unwrap_or_default();
        t.timeline.window_start_unix_ns = window_start_unix_ns;
    }
    // The per-second series: the collector's (whole seconds of intervals), or, when the
    // intervals do not fit whole seconds, the streams' own added up.
    let own_series = !snapshot::Seconds::fit(iv_ns);
    for o in outs {
        let t = &mut targets[o.target];
        if own_series {
            if t.series.len() < o.series.len() {
                t.series.resize(o.series.len(), Second::default());
            }
            for (a, b) in t.series.iter_mut().zip(&o.series) {
                a.add(b);
            }
        }
        t.queue_stats.push(o.stats);
        if let (Some(tv), Some(ov)) = (&mut t.verify, &o.verify) {
            tv.merge(ov);
        }
        t.raw_ns.extend(o.raw.unwrap_or_default());
        t.pacing_ns += o.pacing_ns;
        if o.replay.is_some() {
            t.replay = o.replay;
        }
    }
    let whole_secs = (window.as_nanos() / 1_000_000_000) as usize;
    for t in targets.iter_mut() {
        // Keep whole seconds only; a partial last second would read as a dip.
        t.series.truncate(whole_secs.max(1));
    }
    Ok(out)
}

/// Why a plan cannot replay its trace (`None`: it can, or it replays none).
fn replay_refuses(plan: &RunPlan) -> Option<&'static str> {
    plan.replay.as_ref()?;
    if plan.workload.workers != 1 {
        Some("a replay runs one stream per target (workers 1)")
    } else if plan.sync.is_some() {
        Some("a replay does not run in step with other processes (MPI) yet")
    } else if plan.clock.is_some() && !plan.replay.as_ref()?.afap {
        Some("a timed replay needs the real clock")
    } else if plan.workload.ramp > Duration::ZERO || plan.workload.flush_every > 0 {
        Some("a replay has no ramp and no flushes of its own")
    } else {
        None
    }
}
