//! What the interval tests share: a plan over given targets with a log interval, and a sink
//! that keeps every interval it is handed.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use sanbench_engine::run::{Interval, IntervalRecord, IntervalSink};
use sanbench_engine::spec::{Segment, Workload};
use sanbench_engine::{RunPlan, Target};

pub fn plan(targets: Vec<Arc<dyn Target>>, ramp_ms: u64, time_ms: u64, iv: Duration) -> RunPlan {
    let workload = Workload {
        name: None,
        segments: vec![Segment {
            weight: 1,
            read_bs: 4096,
            write_bs: 4096,
            read_pct: 70.0,
            random_pct: 100.0,
            align: None,
            trim_pct: 0.0,
            write_zeroes_pct: 0.0,
        }],
        qd: 4,
        workers: 2,
        ramp: Duration::from_millis(ramp_ms),
        time: Duration::from_millis(time_ms),
        span: None,
        flush_every: 0,
        fua_pct: 0.0,
        rate: None,
        arrival: sanbench_engine::run::pacer::Arrival::Fixed,
    };
    RunPlan {
        log_interval: iv,
        ..RunPlan::new(workload, targets)
    }
}

/// One interval as handed to the sink: (target, index, start, length, statistics).
pub type Kept = (usize, u64, u64, u64, Interval);

/// Keeps every interval it is handed.
#[derive(Default)]
pub struct Keep(pub Mutex<Vec<Kept>>);

impl IntervalSink for Keep {
    fn interval(&self, r: &IntervalRecord<'_>) {
        self.0
            .lock()
            .unwrap()
            .push((r.target, r.index, r.start_ns, r.len_ns, r.stats.clone()));
    }
}
