//! A run's output as bytes, and the merge of several processes' outputs into one (rank 0 of an
//! MPI run merges every rank's). Histograms travel in HdrHistogram's V2 serialization
//! (`sanbench_stats::histogram_wire`) and are merged bucket by bucket, so the merged
//! percentiles are those of every I/O of every process recorded together: never an average
//! of percentiles.

use super::{RunOutput, Second, TargetRun};

/// Bytes that are not a run output of this sanbench version.
#[derive(Debug, thiserror::Error)]
#[error("a run output from another process does not decode: {0}")]
pub struct WireError(String);

/// The output as bytes (JSON with the histograms as base64 V2).
pub fn encode(out: &RunOutput) -> Vec<u8> {
    // Every field serializes (no maps with non-string keys, no non-finite floats that
    // serde_json refuses: those come out as null).
    serde_json::to_vec(out).unwrap_or_default()
}

pub fn decode(b: &[u8]) -> Result<RunOutput, WireError> {
    serde_json::from_slice(b).map_err(|e| WireError(e.to_string()))
}

/// Adds one process's run of a target into the merged one: counts and histograms add, the
/// per-second series add second by second, the slots kept busy and the sampled mean in
/// flight add (each process kept its own in flight at the same time).
pub fn merge_target(into: &mut TargetRun, o: &TargetRun) {
    into.read.merge(&o.read);
    into.write.merge(&o.write);
    into.flush.merge(&o.flush);
    into.fua.merge(&o.fua);
    into.trim.merge(&o.trim);
    into.write_zeroes.merge(&o.write_zeroes);
    if into.series.len() < o.series.len() {
        into.series.resize(o.series.len(), Second::default());
    }
    for (a, b) in into.series.iter_mut().zip(&o.series) {
        a.add(b);
    }
    into.outstanding += o.outstanding;
    into.mean_outstanding = match (into.mean_outstanding, o.mean_outstanding) {
        (Some(a), Some(b)) => Some(a + b),
        _ => None,
    };
    into.queue_stats.extend(o.queue_stats.iter().cloned());
    match (&mut into.verify, &o.verify) {
        (Some(a), Some(b)) => a.merge(b),
        (None, Some(b)) => into.verify = Some(b.clone()),
        _ => {}
    }
    if let (Some((ra, _)), Some((rb, _))) = (&mut into.open_loop, &o.open_loop) {
        *ra += rb;
    }
    into.raw_ns.extend_from_slice(&o.raw_ns);
    into.timeline.merge(&o.timeline);
    into.pacing_ns += o.pacing_ns;
    // An interval's summary holds percentiles, which do not add: the processes' intervals
    // are not merged (yet), and the merged output claims none rather than one process's.
    into.intervals.clear();
    into.path_intervals.clear();
}

/// Merges the outputs of processes that ran the same plan in step (target `i` of each is the
/// same target, or the same template expanded per process). The window is the mean of those
/// that ran I/O; a process without targets (one that only measured its host) adds nothing.
/// `None` when there is nothing to merge.
pub fn merge(outs: &[RunOutput]) -> Option<RunOutput> {
    let first = outs.first()?;
    // The base: the first output that ran I/O (every other one adds into it).
    let base = outs.iter().position(|o| !o.targets.is_empty()).unwrap_or(0);
    let mut merged = outs[base].clone();
    for (i, o) in outs.iter().enumerate() {
        if i != base {
            for (m, t) in merged.targets.iter_mut().zip(&o.targets) {
                merge_target(m, t);
            }
        }
    }
    // Each process counted over its own window (they end a poll and a message apart, more
    // on a loaded host): the totals' rates use the mean window of those that ran I/O, so
    // total IOPS stays the sum of the processes' own rates.
    let runs: Vec<&RunOutput> = outs.iter().filter(|o| !o.targets.is_empty()).collect();
    merged.window = match runs.len() {
        0 => first.window,
        n => runs.iter().map(|o| o.window).sum::<std::time::Duration>() / n as u32,
    };
    merged.stopped_early = outs.iter().any(|o| o.stopped_early);
    merged.all_intervals.clear();
    merged.started_at = outs.iter().map(|o| o.started_at).min()?;
    merged.clock_started_at = outs.iter().map(|o| o.clock_started_at).min()?;
    Some(merged)
}
