//! What the process tracker groups and reports: `--watch` specifications, the default
//! kernel-thread patterns, and the per-group and per-thread figures of a window.

use serde::{Deserialize, Serialize};

/// What a `--watch` argument names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WatchSpec {
    Pid(u32),
    Name(String),
}

impl WatchSpec {
    /// All digits → pid, anything else → a process name.
    pub fn parse(s: &str) -> WatchSpec {
        match s.parse::<u32>() {
            Ok(p) => WatchSpec::Pid(p),
            Err(_) => WatchSpec::Name(s.to_string()),
        }
    }

    pub(super) fn matches(&self, pid: u32, comm: &str) -> bool {
        match self {
            WatchSpec::Pid(p) => *p == pid,
            // comm is truncated to 15 bytes (TASK_COMM_LEN − 1), so compare the prefix too.
            WatchSpec::Name(n) => comm == n || (comm.len() == 15 && n.starts_with(comm)),
        }
    }

    pub(super) fn label(&self) -> String {
        match self {
            WatchSpec::Pid(p) => format!("watch:{p}"),
            WatchSpec::Name(n) => format!("watch:{n}"),
        }
    }
}

/// Default kernel-thread patterns: storage workqueue kworkers, NBD receive threads, softirq
/// threads and io_uring workers.
pub fn default_kernel_patterns() -> Vec<String> {
    [
        "kworker/*iscsi*",
        "kworker/*nvme_tcp*",
        "kworker/*nvme-wq*",
        "kworker/*nbd*",
        "knbd*",
        "ksoftirqd/*",
        "iou-wrk-*",
        "iou-sqp-*",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// CPU of one group over the window.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GroupReport {
    pub name: String,
    /// user + system seconds.
    pub cpu_s: f64,
    pub user_s: f64,
    pub system_s: f64,
    /// cpu_s ÷ window seconds × 100: percent of one core (may exceed 100).
    pub pct_of_core: f64,
    /// Distinct threads seen during the window (including ones that exited).
    pub threads: usize,
    /// Distinct processes seen during the window.
    pub processes: usize,
    /// Part of `cpu_s` that is also counted in a self/watch group (io_uring threads).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overlap_cpu_s: Option<f64>,
    /// The busiest threads, for attribution.
    pub top_threads: Vec<ThreadReport>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ThreadReport {
    pub pid: u32,
    pub tid: u32,
    pub name: String,
    pub cpu_s: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watch_specs() {
        assert_eq!(WatchSpec::parse("123"), WatchSpec::Pid(123));
        let w = WatchSpec::parse("tgtd");
        assert!(w.matches(5, "tgtd"));
        assert!(!w.matches(5, "tgtd2"));
        // comm truncated to 15 bytes.
        let w = WatchSpec::parse("a-very-long-process-name");
        assert!(w.matches(5, "a-very-long-pro"));
    }
}
