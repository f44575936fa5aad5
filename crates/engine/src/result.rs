//! The JSON document a run produces (`"schema": "sanbench.run/1"`), and its construction from a
//! [`RunOutput`]. Field names are public interface: extend, never rename.

use serde::{Deserialize, Serialize};

use sanbench_stats::{littles_law_deviation, LatencyHistogram};

use crate::engine::TargetInfo;
use crate::run::{DirStats, RunOutput, Second, TargetRun};
use crate::spec::Workload;

pub const SCHEMA: &str = "sanbench.run/1";

/// Latency figures in microseconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencyUs {
    pub mean: f64,
    pub min: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub p9999: f64,
    pub max: f64,
    pub stdev: f64,
}

impl LatencyUs {
    pub fn from_hist(h: &LatencyHistogram) -> LatencyUs {
        let s = h.summary();
        let us = |ns: u64| ns as f64 / 1000.0;
        LatencyUs {
            mean: s.mean / 1000.0,
            min: us(s.min),
            p50: us(s.p50),
            p90: us(s.p90),
            p99: us(s.p99),
            p999: us(s.p999),
            p9999: us(s.p9999),
            max: us(s.max),
            stdev: s.stdev / 1000.0,
        }
    }
}

/// One direction (reads or writes) of one result.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
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
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
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
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
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

/// Efficiency figures of the studies (definitions in docs/MEASURE.md and the monitor crate);
/// `None` where no measurement supports them. CPU % is system-wide busy % of all cores minus the
/// idle baseline; watts are above the idle baseline.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Efficiency {
    pub iops_per_cpu_pct: Option<f64>,
    pub mb_per_s_per_cpu_pct: Option<f64>,
    pub cpu_us_per_io: Option<f64>,
    pub core_pct_per_1000_iops: Option<f64>,
    pub iops_per_watt: Option<f64>,
    pub mb_per_s_per_watt: Option<f64>,
    /// The CPU % the ratios above divide by.
    pub cpu_pct: Option<f64>,
    pub cpu_baseline_subtracted: bool,
    /// The idle baseline was busy (more than 10 % of all cores): the figures above idle cannot
    /// separate this run from other load on the host (see the monitor crate).
    pub host_not_idle: bool,
    /// CPU-µs per I/O without subtracting the idle baseline.
    pub cpu_us_per_io_gross: Option<f64>,
    /// True when the watts come from the utilization model, not a meter.
    pub power_modeled: bool,
    /// Open loop: the share of all cores the streams spent spinning for their schedule
    /// (`pacing_cpu_s` over the window), taken out of `cpu_pct` and every figure above idle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pacing_cpu_pct: Option<f64>,
}

/// One target's result (or the aggregate over all targets).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
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
    /// Non-empty histogram buckets as [highest ns of bucket, count], reads and writes together,
    /// so a report can recompute any percentile.
    pub histogram_ns: Vec<(u64, u64)>,
    pub littles_law: LittlesLaw,
    pub timeseries: Vec<Sample>,
    /// Per interval of `--log-interval` (absent for merged MPI runs, whose hosts carry their
    /// own): I/Os, bytes and errors per op, p50 / p99 / max latency (reads and writes
    /// together). On a long window, per `intervals_step_s` (a multiple of the interval that
    /// keeps at most `RunPlan::max_intervals` of them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub intervals: Vec<crate::run::IntervalSummary>,
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
    pub queues: Vec<serde_json::Value>,
    /// Host CPU over the window (filled by the monitors).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub net: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power: Option<serde_json::Value>,
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
    /// Open loop: the service-time and issue-lag histograms, as `histogram_ns` (which then
    /// holds response time).
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
    /// What `--verify` found: reads checked, bad blocks per class, the first bad blocks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify: Option<crate::verify::VerifyReport>,
    /// A target over several portals: I/Os and bytes per path, I/Os reissued after a path
    /// failed, and the paths' events (failed, reinstated) with their times.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multipath: Option<crate::multipath::report::MultipathReport>,
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
}

/// Most the issue lag's p99 may be for an open-loop point to be valid: beyond it, the
/// generator, not the target, shaped the arrivals.
pub const LAG_P99_BOUND_US: f64 = 100.0;
/// Most the achieved rate may fall short of the asked one for a valid point.
pub const RATE_SHORTFALL: f64 = 0.02;

/// An open-loop load point.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
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
    fn judge(asked: f64, achieved: f64, arrival: String, lag_p99_us: f64) -> OpenLoop {
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
#[derive(Clone, Debug, Serialize, Deserialize)]
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
    pub data: crate::stamp::DataSpec,
    pub results: Vec<TargetResult>,
    /// All targets together (present when there is more than one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub all: Option<TargetResult>,
    /// Peak resident memory of the sanbench process, bytes.
    pub peak_rss_bytes: u64,
    /// CPU time of the sanbench process over the measured window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process_cpu: Option<ProcessCpu>,
    /// The environment manifest (filled by the monitors).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest: Option<serde_json::Value>,
    /// Host monitoring beyond the per-result blocks: idle baseline, per-interval series.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<serde_json::Value>,
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
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
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

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcessCpu {
    pub user_s: f64,
    pub system_s: f64,
    /// I/Os completed in the window per CPU-second of the sanbench process.
    pub ios_per_cpu_s: f64,
    /// CPU-µs of the sanbench process per I/O.
    pub cpu_us_per_io: f64,
}

impl ProcessCpu {
    /// The process's CPU over a window in which `ios` I/Os completed.
    pub fn new(user_s: f64, system_s: f64, ios: u64) -> ProcessCpu {
        let cpu_s = user_s + system_s;
        ProcessCpu {
            user_s,
            system_s,
            ios_per_cpu_s: if cpu_s > 0.0 { ios as f64 / cpu_s } else { 0.0 },
            cpu_us_per_io: if ios > 0 {
                cpu_s * 1e6 / ios as f64
            } else {
                0.0
            },
        }
    }
}

fn dir_result(d: &DirStats, secs: f64, open: bool) -> DirResult {
    let per_s = |x: f64| if secs > 0.0 { x / secs } else { 0.0 };
    DirResult {
        ios: d.ios,
        bytes: d.bytes,
        iops: per_s(d.ios as f64),
        mb_per_s: per_s(d.bytes as f64) / 1e6,
        mib_per_s: per_s(d.bytes as f64) / (1u64 << 20) as f64,
        latency_us: LatencyUs::from_hist(if open { &d.response } else { &d.hist }),
        service_us: open.then(|| LatencyUs::from_hist(&d.hist)),
        issue_lag_us: open.then(|| LatencyUs::from_hist(&d.lag)),
    }
}

fn samples(series: &[Second]) -> Vec<Sample> {
    series
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let ios = s.read_ios + s.write_ios;
            Sample {
                t: i as u32,
                iops: ios as f64,
                mb_per_s: (s.read_bytes + s.write_bytes) as f64 / 1e6,
                read_iops: s.read_ios as f64,
                write_iops: s.write_ios as f64,
                lat_mean_us: if ios > 0 {
                    s.lat_sum_ns as f64 / ios as f64 / 1000.0
                } else {
                    0.0
                },
            }
        })
        .collect()
}

/// Builds the result of one target (or, with `info = None`, of an aggregate).
pub fn target_result(t: &TargetRun, secs: f64, with_info: bool) -> TargetResult {
    let mut service = t.read.hist.clone();
    service.merge(&t.write.hist);
    let mut lag = t.read.lag.clone();
    lag.merge(&t.write.lag);
    // Open loop: the headline latency is response time, from the intended issue time.
    let both = match t.open_loop {
        Some(_) => {
            let mut r = t.read.response.clone();
            r.merge(&t.write.response);
            r
        }
        None => service.clone(),
    };
    let ios = t.read.ios + t.write.ios;
    let bytes = t.read.bytes + t.write.bytes;
    let iops = if secs > 0.0 { ios as f64 / secs } else { 0.0 };
    // In-flight counts cover submitted I/Os only: Little's law uses the service time.
    let mean_s = service.mean_ns() / 1e9;
    TargetResult {
        target: t.info.uri.clone(),
        engine: t.info.engine.clone(),
        seconds: secs,
        ios,
        bytes,
        iops,
        mb_per_s: if secs > 0.0 {
            bytes as f64 / secs / 1e6
        } else {
            0.0
        },
        mib_per_s: if secs > 0.0 {
            bytes as f64 / secs / (1u64 << 20) as f64
        } else {
            0.0
        },
        read: dir_result(&t.read, secs, t.open_loop.is_some()),
        write: dir_result(&t.write, secs, t.open_loop.is_some()),
        latency_us: LatencyUs::from_hist(&both),
        latency_ms_buckets: both.ms_buckets(24),
        histogram_ns: both.buckets(),
        littles_law: LittlesLaw {
            outstanding: t.outstanding,
            mean_outstanding: t.mean_outstanding,
            implied: iops * mean_s,
            deviation: littles_law_deviation(
                t.mean_outstanding.unwrap_or(t.outstanding as f64),
                iops,
                mean_s,
            ),
        },
        timeseries: samples(&t.series),
        intervals: t.intervals.clone(),
        intervals_step_s: (!t.intervals.is_empty()).then(|| t.intervals_step_ns as f64 / 1e9),
        window_start_unix_ms: (t.timeline.window_start_unix_ns > 0)
            .then_some(t.timeline.window_start_unix_ns / 1_000_000),
        info: with_info.then(|| t.info.clone()),
        // A multipath queue's report goes to `multipath`, merged, not once per queue here.
        queues: t
            .queue_stats
            .iter()
            .map(|m| {
                let mut m = m.clone();
                m.remove(crate::multipath::report::STATS_KEY);
                m
            })
            .filter(|m| !m.is_empty())
            .map(|m| serde_json::to_value(m).unwrap_or_default())
            .collect(),
        // The per-path bins are the disruption's input, not the result's.
        multipath: crate::multipath::report::MultipathReport::from_queue_stats(&t.queue_stats)
            .map(|mut m| {
                m.paths.iter_mut().for_each(|p| p.bins_10ms.clear());
                m.epoch_unix_ns = 0;
                for (p, iv) in m.paths.iter_mut().zip(&t.path_intervals) {
                    p.intervals = iv.clone();
                }
                m
            })
            // A result part-way has no queue's report yet: its paths' intervals all the same.
            .or_else(|| {
                let m = crate::multipath::report::MultipathReport::from_info;
                (t.queue_stats.is_empty() && !t.path_intervals.is_empty())
                    .then(|| m(&t.info.params, &t.path_intervals))
                    .flatten()
            }),
        faults: Vec::new(),
        disruption: crate::disruption::of_target(t, (secs * 1e9) as u64, &[]),
        cpu: None,
        net: None,
        power: None,
        efficiency: Efficiency::default(),
        precondition: None,
        pacing_cpu_s: (t.open_loop.is_some() || t.pacing_ns > 0).then(|| t.pacing_ns as f64 / 1e9),
        open_loop: t.open_loop.map(|(asked, arrival)| {
            OpenLoop::judge(
                asked,
                iops,
                arrival.to_string(),
                LatencyUs::from_hist(&lag).p99,
            )
        }),
        service_us: t.open_loop.map(|_| LatencyUs::from_hist(&service)),
        issue_lag_us: t.open_loop.map(|_| LatencyUs::from_hist(&lag)),
        service_histogram_ns: if t.open_loop.is_some() {
            service.buckets()
        } else {
            Vec::new()
        },
        issue_lag_histogram_ns: if t.open_loop.is_some() {
            lag.buckets()
        } else {
            Vec::new()
        },
        flush: (t.flush.ios > 0).then(|| dir_result(&t.flush, secs, false)),
        fua: (t.fua.ios > 0).then(|| dir_result(&t.fua, secs, false)),
        verify: t.verify.clone(),
        bottleneck: None,
    }
}

/// Merges every target of a run into one aggregate `TargetRun` (named `all`).
pub fn aggregate(out: &RunOutput) -> TargetRun {
    let mut all = TargetRun {
        info: TargetInfo {
            uri: "all".into(),
            engine: "all".into(),
            ..TargetInfo::default()
        },
        read: DirStats::default(),
        write: DirStats::default(),
        flush: DirStats::default(),
        fua: DirStats::default(),
        series: Vec::new(),
        outstanding: 0,
        mean_outstanding: None,
        queue_stats: Vec::new(),
        verify: None,
        open_loop: None,
        intervals: out.all_intervals.clone(),
        intervals_step_ns: out.all_intervals_step_ns,
        path_intervals: Vec::new(),
        raw_ns: Vec::new(),
        timeline: Default::default(),
        pacing_ns: 0,
    };
    for t in &out.targets {
        all.read.ios += t.read.ios;
        all.read.bytes += t.read.bytes;
        all.read.hist.merge(&t.read.hist);
        all.write.ios += t.write.ios;
        all.write.bytes += t.write.bytes;
        all.write.hist.merge(&t.write.hist);
        all.outstanding += t.outstanding;
        all.pacing_ns += t.pacing_ns;
        all.mean_outstanding = match (all.mean_outstanding, t.mean_outstanding) {
            (None, m) if std::ptr::eq(t, &out.targets[0]) => m,
            (Some(a), Some(b)) => Some(a + b),
            _ => None,
        };
        if all.series.len() < t.series.len() {
            all.series.resize(t.series.len(), Second::default());
        }
        for (a, b) in all.series.iter_mut().zip(&t.series) {
            a.read_ios += b.read_ios;
            a.write_ios += b.write_ios;
            a.read_bytes += b.read_bytes;
            a.write_bytes += b.write_bytes;
            a.lat_sum_ns += b.lat_sum_ns;
        }
    }
    all
}

/// UTC with milliseconds: `2026-11-22T09:14:23.250Z`.
pub use sanbench_stats::time::rfc3339_millis as rfc3339;
