//! The run's result as one constructor, taken twice: part-way through the window (a save,
//! `--save-every`: the coordinator's [`Collector`](super::collect) forms the window so far at
//! an instant every target has emitted up to, and hands it to the plan's [`SaveSink`]) and
//! at its end. Both come from the same totals and summaries, so a partial result is the final
//! one restricted to the intervals it covers; the end only adds what only the end knows
//! (queue stats, verification, raw latencies, mean in flight, timelines, and the streams' own
//! per-second series when the intervals do not fit whole seconds).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::interval::{Interval, IntervalSummary};
use super::{pacer, RunOutput, Second, TargetRun};
use crate::engine::TargetInfo;

/// Where the result so far goes while the window runs. Called on the run's coordinating
/// thread, about every [`Saves::every`] of window time: hand the output on (a channel to a
/// writer thread), do not write it here.
pub trait SaveSink: Send + Sync {
    fn save(&self, out: RunOutput);
}

/// A plan's saves part-way (`--save-every`).
#[derive(Clone)]
pub struct Saves {
    /// Window time between saves.
    pub every: Duration,
    pub to: Arc<dyn SaveSink>,
}

/// What every result of a plan starts from, part-way or final.
pub(super) struct Base {
    /// Per target (the engine's page-cache note included).
    pub(super) infos: Vec<TargetInfo>,
    /// I/Os kept in flight per target (workers × qd).
    pub(super) outstanding: u64,
    pub(super) open_loop: Option<(f64, pacer::Arrival)>,
    pub(super) started_at: SystemTime,
    pub(super) run_id: u64,
    pub(super) ramp: Duration,
}

impl Base {
    /// Target `i`'s result from its totals and summaries; what only the end knows is empty.
    pub(super) fn target_run(
        &self,
        i: usize,
        totals: Interval,
        (intervals, intervals_step_ns): (Vec<IntervalSummary>, u64),
        path_intervals: Vec<Vec<IntervalSummary>>,
        series: Vec<Second>,
    ) -> TargetRun {
        TargetRun {
            info: self.infos[i].clone(),
            read: totals.read,
            write: totals.write,
            flush: totals.flush,
            fua: totals.fua,
            trim: totals
                .discards
                .as_ref()
                .map_or_else(Default::default, |d| d.trim.clone()),
            write_zeroes: totals
                .discards
                .map_or_else(Default::default, |d| d.write_zeroes),
            allocation_after: None,
            series,
            outstanding: self.outstanding,
            mean_outstanding: None,
            queue_stats: Vec::new(),
            verify: None,
            open_loop: self.open_loop,
            intervals,
            intervals_step_ns,
            path_intervals,
            raw_ns: Vec::new(),
            timeline: Default::default(),
            pacing_ns: 0,
            replay: None,
        }
    }

    /// The run's output over a window of `window_ns` that started at `window_start`.
    pub(super) fn output(
        &self,
        window_start: SystemTime,
        window_ns: u64,
        targets: Vec<TargetRun>,
        (all_intervals, all_intervals_step_ns): (Vec<IntervalSummary>, u64),
    ) -> RunOutput {
        RunOutput {
            started_at: self.started_at,
            window: Duration::from_nanos(window_ns),
            stopped_early: false,
            clock_started_at: window_start.checked_sub(self.ramp).unwrap_or(window_start),
            run_id: self.run_id,
            targets,
            all_intervals,
            all_intervals_step_ns,
        }
    }
}

/// Per target, the window's seconds formed from its intervals: the result's per-second
/// `series`, part-way and final. Only when the intervals fit whole seconds (any length that
/// divides one second: the default 1 s, 10 ms, ...); otherwise the streams keep their own
/// series (run/state.rs) as before. Kept per target rather than per stream, so a day's run
/// holds 86,400 seconds per target whatever the number of workers.
pub(super) struct Seconds {
    per_target: Vec<Vec<Second>>,
    /// Open loop: the headline latency is the response time (as the streams' series had it).
    open_loop: bool,
}

impl Seconds {
    /// Whether intervals of `len_ns` fit whole seconds.
    pub(super) fn fit(len_ns: u64) -> bool {
        len_ns > 0 && 1_000_000_000 % len_ns == 0
    }

    /// `None` when intervals of `len_ns` straddle seconds. Room for the planned window is
    /// reserved up front (address space; pages are touched as seconds pass).
    pub(super) fn new(
        len_ns: u64,
        n_targets: usize,
        open_loop: bool,
        planned_ns: u64,
    ) -> Option<Seconds> {
        let room = (planned_ns / 1_000_000_000).saturating_add(2).min(1 << 24) as usize;
        Seconds::fit(len_ns).then(|| Seconds {
            per_target: (0..n_targets).map(|_| Vec::with_capacity(room)).collect(),
            open_loop,
        })
    }

    /// Adds interval `iv` of target `t`, which starts `start_ns` into the window. The latency
    /// sum is exact: the histograms keep the sum of what they recorded.
    pub(super) fn push(&mut self, t: usize, start_ns: u64, iv: &Interval) {
        let sec = (start_ns / 1_000_000_000) as usize;
        let series = &mut self.per_target[t];
        if series.len() <= sec {
            series.resize(sec + 1, Second::default());
        }
        let s = &mut series[sec];
        let (rd, wr) = (&iv.read, &iv.write);
        s.read_ios += rd.ios;
        s.write_ios += wr.ios;
        s.read_bytes += rd.bytes;
        s.write_bytes += wr.bytes;
        s.lat_sum_ns += if self.open_loop {
            rd.response.sum_ns() + wr.response.sum_ns()
        } else {
            rd.hist.sum_ns() + wr.hist.sum_ns()
        };
    }

    /// Target `t`'s whole seconds of a window `window_ns` long (a partial last second would
    /// read as a dip), seconds without a completion included as zeros.
    pub(super) fn of(&self, t: usize, window_ns: u64) -> Vec<Second> {
        let whole = ((window_ns / 1_000_000_000) as usize).max(1);
        let s = &self.per_target[t];
        let mut out = s[..s.len().min(whole)].to_vec();
        out.resize(whole, Second::default());
        out
    }
}
