//! The run's result document (`sanbench_doc::run`, re-exported here) built from a
//! [`RunOutput`]: per target, and the aggregate of all targets.

use sanbench_stats::littles_law_deviation;

use crate::engine::TargetInfo;
use crate::run::{DirStats, RunOutput, Second, TargetRun};
pub use sanbench_doc::run::*;

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
        histogram: Some(Histogram(both.clone())),
        histogram_ns: Vec::new(),
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
            .collect(),
        // The per-path bins are the disruption's input, not the result's.
        multipath: sanbench_doc::multipath::MultipathReport::from_queue_stats(&t.queue_stats)
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
        service_histogram: t.open_loop.map(|_| Histogram(service.clone())),
        issue_lag_histogram: t.open_loop.map(|_| Histogram(lag.clone())),
        service_histogram_ns: Vec::new(),
        issue_lag_histogram_ns: Vec::new(),
        flush: (t.flush.ios > 0).then(|| dir_result(&t.flush, secs, false)),
        fua: (t.fua.ios > 0).then(|| dir_result(&t.fua, secs, false)),
        trim: (t.trim.ios > 0).then(|| dir_result(&t.trim, secs, t.open_loop.is_some())),
        write_zeroes: (t.write_zeroes.ios > 0)
            .then(|| dir_result(&t.write_zeroes, secs, t.open_loop.is_some())),
        trim_histogram: (t.trim.ios > 0).then(|| Histogram(t.trim.hist.clone())),
        write_zeroes_histogram: (t.write_zeroes.ios > 0)
            .then(|| Histogram(t.write_zeroes.hist.clone())),
        allocation_after: t.allocation_after.clone(),
        verify: t.verify.clone(),
        bottleneck: None,
        replay: t.replay.as_ref().map(|r| {
            // Every op's lag: trims are arrivals of the trace too.
            let mut all = lag.clone();
            all.merge(&t.trim.lag);
            let mut serv = service.clone();
            serv.merge(&t.trim.hist);
            r.doc(Some(&all), serv.quantile(0.5) as f64)
        }),
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
        trim: DirStats::default(),
        write_zeroes: DirStats::default(),
        allocation_after: None,
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
        replay: None,
    };
    for t in &out.targets {
        all.read.ios += t.read.ios;
        all.read.bytes += t.read.bytes;
        all.read.hist.merge(&t.read.hist);
        all.write.ios += t.write.ios;
        all.write.bytes += t.write.bytes;
        all.write.hist.merge(&t.write.hist);
        all.trim.merge(&t.trim);
        all.write_zeroes.merge(&t.write_zeroes);
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
