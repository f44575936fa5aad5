//! What a run returns: per target its counts, histograms, per-second series, intervals and
//! timeline ([`TargetRun`]), all targets together ([`RunOutput`]), and what survives a failed
//! run ([`RunError`]). `crate::result` turns it into the result document.

use std::time::{Duration, SystemTime};

use sanbench_stats::LatencyHistogram;

use crate::engine::TargetInfo;
use crate::error::EngineError;

use super::{pacer, timeline, IntervalSummary};

/// Counts of one direction of one target.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct DirStats {
    pub ios: u64,
    pub bytes: u64,
    /// Completions that failed (a run ends at the first).
    #[serde(default)]
    pub errors: u64,
    /// Service time: completion minus submission.
    pub hist: LatencyHistogram,
    /// Open loop only: response time (completion minus intended issue time) and issue lag
    /// (submission minus intended time).
    pub response: LatencyHistogram,
    pub lag: LatencyHistogram,
}

impl DirStats {
    /// Nothing completed or failed.
    pub fn is_empty(&self) -> bool {
        self.ios == 0 && self.errors == 0
    }

    pub(crate) fn merge(&mut self, o: &DirStats) {
        self.ios += o.ios;
        self.bytes += o.bytes;
        self.errors += o.errors;
        self.hist.merge(&o.hist);
        self.response.merge(&o.response);
        self.lag.merge(&o.lag);
    }
}

/// One second of the measured window.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Second {
    pub read_ios: u64,
    pub write_ios: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub lat_sum_ns: u128,
}

impl Second {
    pub(crate) fn add(&mut self, o: &Second) {
        self.read_ios += o.read_ios;
        self.write_ios += o.write_ios;
        self.read_bytes += o.read_bytes;
        self.write_bytes += o.write_bytes;
        self.lat_sum_ns += o.lat_sum_ns;
    }
}

/// What the run measured on one target, all workers merged.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct TargetRun {
    pub info: TargetInfo,
    pub read: DirStats,
    pub write: DirStats,
    /// Flushes (`flush_every`): counted apart, not in IOPS or MB/s.
    pub flush: DirStats,
    /// FUA writes (`fua_pct`), also counted in `write`.
    pub fua: DirStats,
    /// Trims and write-zeroes: counted apart, not in the reads' and writes' IOPS or MB/s.
    /// Left out of the MPI wire when none ran (the message of a run without them unchanged).
    #[serde(default, skip_serializing_if = "DirStats::is_empty")]
    pub trim: DirStats,
    #[serde(default, skip_serializing_if = "DirStats::is_empty")]
    pub write_zeroes: DirStats,
    /// A workload with trims or write-zeroes: what the target reported about the span's
    /// holes after the window, where it can tell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocation_after: Option<crate::engine::Allocation>,
    pub series: Vec<Second>,
    /// I/Os kept in flight on this target (workers × qd).
    pub outstanding: u64,
    /// Mean I/Os in flight over the window, sampled at random instants (time-weighted).
    pub mean_outstanding: Option<f64>,
    /// Per-queue engine facts (completion paths, negotiated per-connection values).
    pub queue_stats: Vec<std::collections::BTreeMap<String, serde_json::Value>>,
    /// What the verification found (verified runs only; every read, ramp included).
    pub verify: Option<crate::verify::VerifyReport>,
    /// Open loop: the asked rate (I/Os per second on this target) and the arrivals.
    pub open_loop: Option<(f64, pacer::Arrival)>,
    /// Per interval of the window (`RunPlan::log_interval`, or a multiple of it on a long
    /// window: `intervals_step_ns`): counts and latency figures.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub intervals: Vec<IntervalSummary>,
    /// The length each of `intervals` covers (the last may be shorter).
    #[serde(default)]
    pub intervals_step_ns: u64,
    /// A multipath target: per path (as its `multipath` report orders them), the same
    /// summaries of the I/Os that path completed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub path_intervals: Vec<Vec<IntervalSummary>>,
    /// The raw latencies of the test hook (`RunPlan::raw_latencies`), in no order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub raw_ns: Vec<u64>,
    /// Completions per 10 ms and the spans in which none came (all streams merged).
    #[serde(default)]
    pub timeline: timeline::Timeline,
    /// Open loop: nanoseconds the streams spent spinning for their next arrival inside the
    /// window, summed (run/open.rs): the generator's pacing, which CPU efficiency leaves out.
    #[serde(default)]
    pub pacing_ns: u64,
    /// A replay: what this target's stream issued (crate::replay).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay: Option<crate::replay::ReplayRun>,
}

/// The outcome of a run.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct RunOutput {
    pub started_at: SystemTime,
    /// Length of the measured window actually run (shorter than planned when stopped early).
    ///
    /// Every I/O counted completed inside it, and every interval summary lies within it, so
    /// IOPS is exactly I/Os / window: a stream counts a completion only when its clock
    /// reading is before the end as it sees it (I/Os reaped at or after it are not counted,
    /// open loop and closed loop alike). Where a stream counted past the instant the
    /// coordinator took for the end, because it saw that end late (a synchronized run: the
    /// coordinator reads the clock, then publishes the end), the window reaches on to just
    /// after the last completion counted, as fio's runtime covers the I/Os a job did.
    pub window: Duration,
    pub stopped_early: bool,
    /// Wall-clock time when the run's clock started (ramp and window count from there): in a
    /// synchronized run, this process's exit from the start barrier.
    pub clock_started_at: SystemTime,
    /// The run's id (from the OS), stamped into every block it writes.
    pub run_id: u64,
    pub targets: Vec<TargetRun>,
    /// Several targets: the intervals of all of them together (as `TargetRun::intervals`),
    /// and their step.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub all_intervals: Vec<IntervalSummary>,
    #[serde(default)]
    pub all_intervals_step_ns: u64,
}

/// A run that failed: which stream, and why.
#[derive(Debug, thiserror::Error)]
#[error("{target} (worker {worker}): {error}")]
pub struct RunError {
    pub target: String,
    pub worker: usize,
    #[source]
    pub error: EngineError,
}

impl RunError {
    pub fn is_usage(&self) -> bool {
        self.error.is_usage()
    }
}
