//! One interval sink for a plan from several: the histogram log and metrics (watch.rs) and the
//! live line's p99 (progress.rs) each take every finished interval; a plan holds one sink.
//! (The result saved part-way, partial.rs, is the engine's own snapshot: `RunPlan::saves`.)

use std::sync::Arc;

use sanbench_engine::run::{IntervalRecord, IntervalSink};

struct Tee(Vec<Arc<dyn IntervalSink>>);

impl IntervalSink for Tee {
    fn interval(&self, r: &IntervalRecord<'_>) {
        for s in &self.0 {
            s.interval(r);
        }
    }
}

/// The sinks that are there, as one; `None` when none is (the run then hands its intervals
/// to nobody).
pub fn join(sinks: Vec<Option<Arc<dyn IntervalSink>>>) -> Option<Arc<dyn IntervalSink>> {
    let mut v: Vec<Arc<dyn IntervalSink>> = sinks.into_iter().flatten().collect();
    match v.len() {
        0 => None,
        1 => v.pop(),
        _ => Some(Arc::new(Tee(v))),
    }
}
