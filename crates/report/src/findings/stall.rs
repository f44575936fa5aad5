//! A failover finding's stalls: each target's stall over the faulted cells of the finding's
//! workloads, as its sentence prints them ("A's failover stalls I/O for 40 ms [30-55]").

use sanbench_doc::Comparison;

/// One target's failover stall over some workloads' faulted cells: the geometric mean with
/// its 95 % interval (Student's t on the logs; descriptive: the finding's ratio carries the
/// simultaneous interval), and how many paths its cells had.
pub(super) struct StallSummary {
    pub(super) mean_ms: f64,
    low_ms: Option<f64>,
    high_ms: Option<f64>,
    pub(super) paths: Option<usize>,
}

impl StallSummary {
    /// "40 ms [30-55]", "2.1 s [1.8-2.5]": the interval in the mean's unit.
    pub(super) fn text(&self) -> String {
        let (scale, unit, digits) = if self.mean_ms >= 1000.0 {
            (1000.0, "s", 1)
        } else {
            (1.0, "ms", 0)
        };
        let f = |ms: f64| format!("{:.digits$}", ms / scale);
        match (self.low_ms, self.high_ms) {
            (Some(l), Some(h)) => format!("{} {unit} [{}-{}]", f(self.mean_ms), f(l), f(h)),
            _ => format!("{} {unit}", f(self.mean_ms)),
        }
    }
}

pub(super) fn stall_of(cmp: &Comparison, target: &str, workloads: &[&str]) -> Option<StallSummary> {
    let cells: Vec<&sanbench_doc::Cell> = cmp
        .cells
        .iter()
        .filter(|c| {
            c.target == target && c.load_pct.is_none() && workloads.contains(&c.workload.as_str())
        })
        .collect();
    let logs: Vec<f64> = cells
        .iter()
        .filter_map(|c| crate::analysis::Metric::StallMs.of(&c.result))
        .map(f64::ln)
        .collect();
    if logs.is_empty() {
        return None;
    }
    let m = sanbench_stats::mean_ci95(&logs);
    let bounded = m.n >= 2;
    let mut paths = cells
        .iter()
        .filter_map(|c| c.result.multipath.as_ref().map(|m| m.paths.len()));
    let first = paths.next();
    Some(StallSummary {
        mean_ms: m.mean.exp(),
        low_ms: bounded.then(|| (m.mean - m.ci95).exp()),
        high_ms: bounded.then(|| (m.mean + m.ci95).exp()),
        paths: first.filter(|&p| paths.all(|q| q == p)),
    })
}
