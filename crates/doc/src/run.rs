//! The JSON document a run produces (`"schema": "sanbench.run/2"`): one [`TargetResult`] per
//! target, the aggregate, and the run's facts. Field names are public interface: extend, never
//! rename. The engine builds it from a run's output (`sanbench_engine::result`); the monitors,
//! the CLI and MPI fill in their blocks.

use serde::{Deserialize, Serialize};

use sanbench_io::TargetInfo;

use crate::hosts::HostResult;
pub use crate::latency::{Histogram, LatencyUs, ProcessCpu};
use crate::spec::Workload;

/// The version this crate writes (see the crate's docs for what each version changed).
pub const SCHEMA: &str = "sanbench.run/2";

/// Every version this crate reads, oldest first.
pub const SCHEMAS: [&str; 2] = ["sanbench.run/1", SCHEMA];

/// One direction (reads or writes) of one result.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DirResult {
    pub ios: u64,
    pub bytes: u64,
    pub iops: f64,
    /// Decimal megabytes (10^6 B) per second.
    pub mb_per_s: f64,
    /// Binary mebibytes (2^20 B) per second.
    pub mib_per_s: f64,
    pub latency_us: LatencyUs,
    /// Open loop: service time (completion minus submission; `latency_us` is then the
    /// response time from the intended issue time) and issue lag (submission minus intended).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_us: Option<LatencyUs>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issue_lag_us: Option<LatencyUs>,
}

/// One second of the measured window.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Sample {
    /// Seconds since the window started (the sample covers `[t, t+1)`).
    pub t: u32,
    pub iops: f64,
    pub mb_per_s: f64,
    pub read_iops: f64,
    pub write_iops: f64,
    pub lat_mean_us: f64,
}

/// The Little's-law check of docs/MEASURE.md.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LittlesLaw {
    /// I/O slots the generator keeps busy (workers × queue depth).
    pub outstanding: u64,
    /// Mean I/Os in flight over the window, time-weighted (sampled at random instants),
    /// measured independently of the latencies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_outstanding: Option<f64>,
    /// IOPS × mean latency: the concurrency the measurements imply.
    pub implied: f64,
    /// |implied − mean_outstanding| / mean_outstanding (against `outstanding` when nothing was
    /// sampled); above 0.10 I/Os spend time outside the target's queue.
    pub deviation: Option<f64>,
}

pub use crate::efficiency::Efficiency;

/// One target's result (or the aggregate over all targets).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TargetResult {
    pub target: String,
    pub engine: String,
    pub seconds: f64,
    pub ios: u64,
    pub bytes: u64,
    pub iops: f64,
    pub mb_per_s: f64,
    pub mib_per_s: f64,
    pub read: DirResult,
    pub write: DirResult,
    /// Reads and writes together.
    pub latency_us: LatencyUs,
    /// Share of I/Os per 1 ms bucket, 0..24 ms then ">= 24 ms" (the Demartek study's table).
    pub latency_ms_buckets: Vec<f64>,
    /// Reads and writes together, so a report can recompute any percentile (see
    /// [`Histogram`]; [`TargetResult::latency_histogram`] reads either form). Absent only from
    /// version 1 documents, which carry `histogram_ns` instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub histogram: Option<Histogram>,
    /// Version 1 documents: `histogram`'s buckets as [highest ns of bucket, count]. Not
    /// written since version 2.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub histogram_ns: Vec<(u64, u64)>,
    pub littles_law: LittlesLaw,
    pub timeseries: Vec<Sample>,
    /// Per interval of `--log-interval` (absent for merged MPI runs, whose hosts carry their
    /// own): I/Os, bytes and errors per op, p50 / p99 / max latency (reads and writes
    /// together). On a long window, per `intervals_step_s` (a multiple of the interval that
    /// keeps at most `RunPlan::max_intervals` of them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub intervals: Vec<crate::interval::IntervalSummary>,
    /// The length each of `intervals` covers, in seconds (the last may be shorter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intervals_step_s: Option<f64>,
    /// When the measured window started, ms since the Unix epoch: what `intervals`' `t`, the
    /// path events' `at_unix_ms` and the faults' times are set against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_start_unix_ms: Option<u64>,
    /// Target facts and negotiated parameters (absent for the aggregate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub info: Option<TargetInfo>,
    /// Per-queue engine facts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub queues: Vec<sanbench_io::params::Params>,
    /// Host CPU over the window (filled by the monitors).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<crate::host::CpuReport>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub net: Option<crate::host::NetReport>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power: Option<crate::host::PowerReport>,
    #[serde(default)]
    pub efficiency: Efficiency,
    /// Whether the span held written data before the window (see the precondition module).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub precondition: Option<crate::precondition::Report>,
    /// Open loop (`--rate`): asked and achieved rate, whether the point is valid; then
    /// `latency_us` is response time and these are service time and issue lag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_loop: Option<OpenLoop>,
    /// Open loop: CPU-seconds the streams spent spinning for their next arrival inside the
    /// window (the generator keeping its schedule, run/open.rs), which `efficiency` leaves
    /// out; the aggregate `all` sums its targets'. Absent for a closed loop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pacing_cpu_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_us: Option<LatencyUs>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issue_lag_us: Option<LatencyUs>,
    /// Open loop: the service-time and issue-lag histograms, as `histogram` (which then
    /// holds response time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_histogram: Option<Histogram>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issue_lag_histogram: Option<Histogram>,
    /// Version 1 documents: the open loop's histograms as `histogram_ns`'s pairs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub service_histogram_ns: Vec<(u64, u64)>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub issue_lag_histogram_ns: Vec<(u64, u64)>,
    /// Flushes (`--flush-every`): their count and latency, apart from reads and writes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flush: Option<DirResult>,
    /// FUA writes (`--fua`): their count and latency (they are also in `write`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fua: Option<DirResult>,
    /// Trims (`--trim`): count, IOPS, latency, and the bytes discarded as `bytes` and
    /// `mb_per_s`, counted apart from the bytes reads and writes moved (not in `ios`,
    /// `bytes`, `iops`, `mb_per_s` or `latency_us` above).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trim: Option<DirResult>,
    /// Write-zeroes (`--write-zeroes`): as `trim`, the bytes zeroed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_zeroes: Option<DirResult>,
    /// Their service-time histograms, as `histogram`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trim_histogram: Option<Histogram>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_zeroes_histogram: Option<Histogram>,
    /// A workload with trims or write-zeroes: what the target reported about the span's
    /// holes after the window (the precondition's `allocation` is the one before).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocation_after: Option<sanbench_io::engine::Allocation>,
    /// What `--verify` found: reads checked, bad blocks per class, the first bad blocks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify: Option<crate::verify::VerifyReport>,
    /// A target over several portals: I/Os and bytes per path, I/Os reissued after a path
    /// failed, and the paths' events (failed, reinstated) with their times.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multipath: Option<crate::multipath::MultipathReport>,
    /// What a fault or a stall did to the I/O (only when a fault was fired, or the longest
    /// span without a completion reached the stall threshold): crate::disruption.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disruption: Option<crate::disruption::Disruption>,
    /// A comparison's cell: the lab faults fired during its window (a run keeps them in
    /// `RunDoc::faults`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub faults: Vec<FaultRecord>,
    /// What limited the window and the headroom of every other resource (filled from the
    /// monitors: crate::bottleneck).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bottleneck: Option<crate::bottleneck::Bottleneck>,
    /// `sanbench replay`: the trace, what was replayed and its fidelity (crate::replay).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay: Option<crate::replay::Replay>,
}

/// Most the issue lag's p99 may be for an open-loop point to be valid: beyond it, the
/// generator, not the target, shaped the arrivals.
pub const LAG_P99_BOUND_US: f64 = 100.0;
/// Most the achieved rate may fall short of the asked one for a valid point.
pub const RATE_SHORTFALL: f64 = 0.02;

/// An open-loop load point.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct OpenLoop {
    pub asked_iops: f64,
    pub achieved_iops: f64,
    pub arrival: String,
    /// The bound on the issue lag's p99 this point was held to.
    pub issue_lag_p99_bound_us: f64,
    pub valid: bool,
    /// Why not, when not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub invalid: Vec<String>,
}

impl OpenLoop {
    pub fn judge(asked: f64, achieved: f64, arrival: String, lag_p99_us: f64) -> OpenLoop {
        let mut invalid = Vec::new();
        if achieved < asked * (1.0 - RATE_SHORTFALL) {
            invalid.push(format!(
                "achieved {achieved:.0} I/Os per second, more than {:.0} % below the asked {asked:.0}",
                RATE_SHORTFALL * 100.0
            ));
        }
        if lag_p99_us > LAG_P99_BOUND_US {
            invalid.push(format!(
                "issue lag p99 {lag_p99_us:.1} µs above the bound of {LAG_P99_BOUND_US} µs: the generator fell behind its schedule"
            ));
        }
        OpenLoop {
            asked_iops: asked,
            achieved_iops: achieved,
            arrival,
            issue_lag_p99_bound_us: LAG_P99_BOUND_US,
            valid: invalid.is_empty(),
            invalid,
        }
    }
}

/// The whole document.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunDoc {
    pub schema: String,
    pub sanbench_version: String,
    /// RFC 3339, UTC.
    pub started_at: String,
    pub command: Vec<String>,
    pub spec: Workload,
    pub spec_description: String,
    /// Measured window in seconds (shorter than `spec.time` when stopped early).
    pub seconds: f64,
    pub stopped_early: bool,
    /// The run's id (hex), stamped into every block it wrote.
    #[serde(default)]
    pub run_id: String,
    /// What the written data looked like (unique and incompressible unless asked otherwise).
    #[serde(default)]
    pub data: crate::data::DataSpec,
    pub results: Vec<TargetResult>,
    /// All targets together (present when there is more than one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub all: Option<TargetResult>,
    /// Peak resident memory of the sanbench process, bytes.
    pub peak_rss_bytes: u64,
    /// CPU time of the sanbench process over the measured window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process_cpu: Option<ProcessCpu>,
    /// The environment manifest (filled by the monitors): host facts, the precondition and the
    /// placement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest: Option<crate::manifest::Manifest>,
    /// Host monitoring beyond the per-result blocks: idle baseline, per-interval series.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<crate::host::HostBlock>,
    /// A run of several MPI ranks: each rank's own figures (the totals above are all ranks
    /// merged), and how they ran together.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<crate::hosts::HostResult>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mpi: Option<crate::hosts::MpiInfo>,
    /// Lab faults fired during the measured window (`--fault AT:LINK:ACTION`), in the order
    /// they fired.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub faults: Vec<FaultRecord>,
    /// `false` while the run is still going: the document was written part-way (`--json FILE`
    /// is rewritten every `--save-every` with the intervals so far), so a killed run leaves
    /// this. Absent in the finished document.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub complete: Option<bool>,
}

/// One lab fault fired during a run (`--fault AT:LINK:ACTION`): when it took effect (its
/// `tc` commands had returned) and what it did.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FaultRecord {
    /// UTC, RFC 3339 with milliseconds ([`rfc3339`]).
    pub at: String,
    /// Milliseconds since the Unix epoch, for arithmetic against path events and intervals.
    pub at_unix_ms: u64,
    /// Milliseconds since the measured window started (AT as it happened).
    pub offset_ms: f64,
    /// The lab link (a `--link` name).
    pub link: String,
    /// `down`, `up`, `loss=5%`, `delay=10ms`, `clear`.
    pub action: String,
    /// Why the fault could not be applied (the link then stayed as it was).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// UTC with milliseconds: `2026-11-22T09:14:23.250Z`.
pub use sanbench_stats::time::rfc3339_millis as rfc3339;

impl TargetResult {
    /// The latency histogram (reads and writes together), from `histogram` or, in a version 1
    /// document, from `histogram_ns`'s buckets (each count at its bucket's highest value,
    /// which is what a histogram of the same bounds makes of it).
    pub fn latency_histogram(&self) -> Option<sanbench_stats::LatencyHistogram> {
        if let Some(h) = &self.histogram {
            return Some(h.0.clone());
        }
        (!self.histogram_ns.is_empty()).then(|| {
            let mut h = sanbench_stats::LatencyHistogram::new();
            for &(ns, n) in &self.histogram_ns {
                h.record_n(ns, n);
            }
            h
        })
    }
}

impl HostResult {
    /// A rank's entry from its own document (its aggregate, or its one target).
    pub fn of(doc: &RunDoc, rank: u32, host: &str, monitor_only: bool) -> HostResult {
        let own: Option<&TargetResult> = doc.all.as_ref().or(doc.results.first());
        let mut h = HostResult {
            rank,
            host: host.into(),
            monitor_only,
            targets: doc.results.iter().map(|r| r.target.clone()).collect(),
            seconds: doc.seconds,
            process_cpu: doc.process_cpu.clone(),
            stream_cpus: doc
                .manifest
                .as_ref()
                .and_then(|m| m.extra.get("placement")?.get("stream_cpus")?.as_array())
                .map(|a| {
                    a.iter()
                        .filter_map(|c| c.as_u64())
                        .map(|c| c as usize)
                        .collect()
                })
                .unwrap_or_default(),
            ..HostResult::default()
        };
        if let Some(t) = own {
            h.ios = t.ios;
            h.bytes = t.bytes;
            h.iops = t.iops;
            h.mb_per_s = t.mb_per_s;
            h.latency_us = t.latency_us.clone();
            h.cpu = t.cpu.clone();
            h.net = t.net.clone();
            h.power = t.power.clone();
            h.efficiency = t.efficiency;
            h.intervals = t.intervals.clone();
            h.intervals_step_s = t.intervals_step_s;
        }
        h
    }
}
