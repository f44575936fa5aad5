//! A target's disruption (`sanbench_analysis::disruption`, re-exported here): the analysis
//! is pure and lives in the analysis crate; this takes its input from a target's run.

pub use sanbench_analysis::disruption::*;

use crate::multipath::report::MultipathReport;
use crate::run::TargetRun;

/// The disruption of one target's run, with the faults fired in its window.
pub fn of_target(t: &TargetRun, window_ns: u64, faults: &[Fault]) -> Option<Disruption> {
    let mp = MultipathReport::from_queue_stats(&t.queue_stats);
    let mut service = t.read.hist.clone();
    service.merge(&t.write.hist);
    let worst = match t.open_loop {
        Some(_) => {
            let mut r = t.read.response.clone();
            r.merge(&t.write.response);
            r.max_ns()
        }
        None => service.max_ns(),
    };
    analyse(&Input {
        timeline: &t.timeline,
        multipath: mp.as_ref(),
        faults,
        window_ns,
        median_ns: service.quantile(0.5),
        worst_ns: worst,
        offered_iops: t.open_loop.map(|(r, _)| r),
        verify: t.verify.as_ref().map(|v| (v.reads, v.bad_total())),
    })
}
