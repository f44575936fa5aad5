//! What a multipath target's paths carried and what happened to them: each queue reports its
//! own (through `Queue::stats`, under the key `multipath`), and the result merges the queues
//! into one [`MultipathReport`] per target (`multipath` in `sanbench.run/1`).

use serde::{Deserialize, Serialize};

/// The key of a multipath queue's report in its `Queue::stats`.
pub const STATS_KEY: &str = "multipath";

/// One path's figures over the run (all queues of the target together).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PathReport {
    /// The path's single-portal URI, secrets masked.
    pub uri: String,
    /// I/Os completed on this path (every completion of the run, ramp and drain included).
    pub ios: u64,
    pub bytes: u64,
    /// I/Os that were in flight on this path when it failed and were sent again elsewhere.
    pub reissued: u64,
    /// Times the path was taken out, and brought back.
    pub failures: u64,
    pub reinstatements: u64,
    /// Its throughput estimate at the end (service-time's), bytes per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimated_bytes_per_s: Option<f64>,
    /// Mean and largest latency of the I/Os it completed, from their sending on this path to
    /// their completion (a reissued I/O's time on the failed path is not in it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_mean_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_max_us: Option<f64>,
    /// Completions per 10 ms from the target's epoch ([`MultipathReport::epoch_unix_ns`]):
    /// the disruption analysis' per-path timeline. Taken out of the run's result once used.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bins_10ms: Vec<u32>,
    /// The path's access state at the end of the run as its target reported it (NVMe ANA:
    /// "optimized", "non-optimized", "inaccessible", "persistent-loss", "change"); absent
    /// when the target reports none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_state: Option<String>,
    /// I/Os that came back with a path-related status (NVMe ANA inaccessible, ...): each
    /// took the path out and was sent again on another.
    #[serde(default)]
    pub path_errors: u64,
    /// The window's intervals of this path (`--log-interval`, at the target's step): the
    /// reads and writes it completed and their latency as the stream measured it, so that
    /// every interval's paths add up to the target's. Filled by the result, not the queue.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub intervals: Vec<crate::interval::IntervalSummary>,
}

/// A path's state change, as it happened.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PathEvent {
    /// UTC, RFC 3339 with milliseconds.
    pub at: String,
    /// Milliseconds since the Unix epoch (for ordering and arithmetic).
    pub at_unix_ms: u64,
    /// Index into `paths`.
    pub path: usize,
    /// The worker whose queue saw it (each queue has its own connection per path).
    pub worker: usize,
    /// "failed" (the path was taken out: the failure was detected), "failed_over" (the
    /// first I/O sent again from this path completed on another), "reinstated",
    /// "reconnect_failed", or "access_state" (the target reported another access state for
    /// the path: `access_state` is the new one, `reason` the old).
    pub event: String,
    /// Why (the error that failed the path).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// With "access_state": the state the path is now in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_state: Option<String>,
}

/// A multipath target's paths, merged over its queues.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MultipathReport {
    /// The path selector ("round-robin", "queue-length", "service-time").
    pub policy: String,
    /// "immediate" or "manual".
    pub failback: String,
    pub paths: Vec<PathReport>,
    /// I/Os sent again on another path, all paths together.
    pub reissued: u64,
    /// I/Os failed because no path was left past `no_path_retry`.
    pub failed_no_path: u64,
    pub events: Vec<PathEvent>,
    /// Where the paths' `bins_10ms` start, ns since the Unix epoch.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub epoch_unix_ns: u64,
}

/// Adds 10 ms bins of completions, the longer series setting the length.
pub fn add_bins(into: &mut Vec<u32>, o: &[u32]) {
    if into.len() < o.len() {
        into.resize(o.len(), 0);
    }
    for (a, b) in into.iter_mut().zip(o) {
        *a = a.saturating_add(*b);
    }
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

impl MultipathReport {
    /// Adds another queue's report of the same target.
    pub fn merge(&mut self, o: &MultipathReport) {
        if self.paths.is_empty() {
            self.policy = o.policy.clone();
            self.failback = o.failback.clone();
            self.paths = o
                .paths
                .iter()
                .map(|p| PathReport {
                    uri: p.uri.clone(),
                    estimated_bytes_per_s: None,
                    ..PathReport::default()
                })
                .collect();
        }
        for (a, b) in self.paths.iter_mut().zip(&o.paths) {
            // Means weighted by the I/Os behind them.
            a.latency_mean_us = match (a.latency_mean_us, b.latency_mean_us) {
                (Some(x), Some(y)) if a.ios + b.ios > 0 => {
                    Some((x * a.ios as f64 + y * b.ios as f64) / (a.ios + b.ios) as f64)
                }
                (x, y) => x.or(y),
            };
            a.latency_max_us = match (a.latency_max_us, b.latency_max_us) {
                (Some(x), Some(y)) => Some(x.max(y)),
                (x, y) => x.or(y),
            };
            a.ios += b.ios;
            a.bytes += b.bytes;
            a.reissued += b.reissued;
            a.failures += b.failures;
            a.reinstatements += b.reinstatements;
            a.path_errors += b.path_errors;
            if b.access_state.is_some() {
                a.access_state = b.access_state.clone();
            }
            a.estimated_bytes_per_s = match (a.estimated_bytes_per_s, b.estimated_bytes_per_s) {
                (Some(x), Some(y)) => Some(x + y),
                (x, y) => x.or(y),
            };
        }
        for (a, b) in self.paths.iter_mut().zip(&o.paths) {
            add_bins(&mut a.bins_10ms, &b.bins_10ms);
        }
        if self.epoch_unix_ns == 0 {
            self.epoch_unix_ns = o.epoch_unix_ns;
        }
        self.reissued += o.reissued;
        self.failed_no_path += o.failed_no_path;
        self.events.extend(o.events.iter().cloned());
        self.events.sort_by_key(|e| e.at_unix_ms);
    }

    /// The merged report of every queue's stats that carry one (`None`: not multipath).
    pub fn from_queue_stats<'a>(
        stats: impl IntoIterator<Item = &'a std::collections::BTreeMap<String, serde_json::Value>>,
    ) -> Option<MultipathReport> {
        let mut all: Option<MultipathReport> = None;
        for m in stats {
            let Some(v) = m.get(STATS_KEY) else { continue };
            let Ok(r) = serde_json::from_value::<MultipathReport>(v.clone()) else {
                continue;
            };
            all.get_or_insert_with(MultipathReport::default).merge(&r);
        }
        all
    }

    /// A result formed part-way (`--save-every`), before any queue has reported: the paths
    /// as the target named them (its `multipath.*` info params), each with its intervals so
    /// far and, as `ios` and `bytes`, what those intervals add up to (the window so far, where
    /// a finished run's count every completion). `None` for a target of one path.
    pub fn from_info(
        params: &std::collections::BTreeMap<String, serde_json::Value>,
        path_intervals: &[Vec<crate::interval::IntervalSummary>],
    ) -> Option<MultipathReport> {
        let uris = params.get(sanbench_io::params::PATHS)?.as_array()?;
        let text = |k: &str| {
            params
                .get(k)
                .and_then(|v| v.as_str())
                .unwrap_or_default()
                .to_string()
        };
        let paths = uris
            .iter()
            .enumerate()
            .map(|(i, u)| {
                let intervals = path_intervals.get(i).cloned().unwrap_or_default();
                PathReport {
                    uri: u.as_str().unwrap_or_default().to_string(),
                    ios: intervals.iter().map(|s| s.read_ios + s.write_ios).sum(),
                    bytes: intervals.iter().map(|s| s.read_bytes + s.write_bytes).sum(),
                    intervals,
                    ..PathReport::default()
                }
            })
            .collect();
        Some(MultipathReport {
            policy: text("multipath.policy"),
            failback: text("multipath.failback"),
            paths,
            ..MultipathReport::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queues_merge_path_by_path_and_events_in_time_order() {
        let q = |ios, at| MultipathReport {
            policy: "round-robin".into(),
            failback: "immediate".into(),
            paths: vec![
                PathReport {
                    uri: "a".into(),
                    ios,
                    bytes: ios * 10,
                    latency_mean_us: Some(ios as f64),
                    latency_max_us: Some(ios as f64 * 2.0),
                    ..PathReport::default()
                },
                PathReport {
                    uri: "b".into(),
                    ios: 1,
                    reissued: 2,
                    path_errors: 1,
                    access_state: Some("inaccessible".into()),
                    ..PathReport::default()
                },
            ],
            reissued: 2,
            failed_no_path: 0,
            events: vec![PathEvent {
                at_unix_ms: at,
                event: "failed".into(),
                ..PathEvent::default()
            }],
            epoch_unix_ns: 0,
        };
        let stats: Vec<std::collections::BTreeMap<String, serde_json::Value>> =
            [q(5, 20), q(7, 10)]
                .iter()
                .map(|r| [(STATS_KEY.to_string(), serde_json::to_value(r).unwrap())].into())
                .chain([Default::default()])
                .collect();
        let m = MultipathReport::from_queue_stats(&stats).unwrap();
        assert_eq!(m.paths[0].ios, 12);
        assert_eq!(m.paths[0].bytes, 120);
        // (5 × 5 + 7 × 7) / 12
        assert!((m.paths[0].latency_mean_us.unwrap() - 74.0 / 12.0).abs() < 1e-9);
        assert_eq!(m.paths[0].latency_max_us, Some(14.0));
        assert_eq!(m.paths[1].reissued, 4);
        assert_eq!(m.paths[1].path_errors, 2);
        assert_eq!(m.paths[1].access_state.as_deref(), Some("inaccessible"));
        assert_eq!(m.paths[0].access_state, None);
        assert_eq!(m.reissued, 4);
        assert_eq!(m.policy, "round-robin");
        let at: Vec<_> = m.events.iter().map(|e| e.at_unix_ms).collect();
        assert_eq!(at, [10, 20]);
        assert_eq!(
            MultipathReport::from_queue_stats(&[Default::default()]),
            None
        );
    }
}

#[cfg(test)]
mod compat {
    use super::*;

    /// A report written before the access fields existed still reads (serde defaults).
    #[test]
    fn older_reports_read_without_the_access_fields() {
        let old = r#"{"uri":"a","ios":1,"bytes":2,"reissued":0,"failures":0,"reinstatements":0}"#;
        let p: PathReport = serde_json::from_str(old).unwrap();
        assert_eq!((p.access_state, p.path_errors), (None, 0));
        let e: PathEvent = serde_json::from_str(
            r#"{"at":"x","at_unix_ms":1,"path":0,"worker":0,"event":"failed"}"#,
        )
        .unwrap();
        assert_eq!(e.access_state, None);
    }
}
