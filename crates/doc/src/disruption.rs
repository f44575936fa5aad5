//! The disruption block of a result (`disruption`): what a fault or a stall did to a target's
//! I/O. The analysis that fills it is `sanbench_analysis::disruption` (definitions there and in
//! docs/MEASURE.md, "Disruption").

use serde::{Deserialize, Serialize};

/// One thing that happened, on the window's clock.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Event {
    /// Milliseconds since the measured window started.
    pub offset_ms: f64,
    /// UTC, RFC 3339 with milliseconds.
    pub at: String,
    /// "fault", or a path's "failed" (detected and taken out), "failed_over", "reinstated",
    /// "reconnect_failed".
    pub event: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<String>,
    /// The fault's action, or why a path failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// A span without completions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Stall {
    pub start_ms: f64,
    pub ms: f64,
}

/// Open loop: what the longest stall left to catch up.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CatchUp {
    /// I/Os whose response time includes the stall.
    pub ios: u64,
    /// The asked rate, and the highest completion rate (per 10 ms bin) in the second after.
    pub offered_iops: f64,
    pub peak_iops: f64,
    /// From the stall's end until every I/O that arrived before it had completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drained_ms: Option<f64>,
}

/// The result's `disruption` of one target.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Disruption {
    /// "fault" (faults were fired), "path" (none were, and a path failed, came back or
    /// changed its access state by itself in the window) or "stall" (neither: a stall was
    /// seen).
    pub cause: String,
    /// The timeline: completions per `bin_ms` from `from_ms` (since the window started), all
    /// paths, then per path (multipath targets), then arrivals (open loop).
    pub bin_ms: u32,
    pub from_ms: f64,
    pub completions: Vec<u32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<Vec<u32>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub arrivals: Vec<u32>,
    pub events: Vec<Event>,
    /// The longest span with no completion (0 when there was none of 10 ms or more).
    pub stall_ms: f64,
    pub stall_start_ms: f64,
    /// Every stall at or above the threshold, in time order (at most 20: the longest).
    pub stalls: Vec<Stall>,
    pub stall_threshold_ms: f64,
    /// The worst latency of the window (response time in an open loop).
    pub worst_latency_ms: f64,
    /// I/Os sent again on another path, and I/Os failed (no path left past no_path_retry).
    pub reissued: u64,
    pub failed: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detected_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failover_ms: Option<f64>,
    /// Completions per second before the first fault (or stall).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pre_fault_iops: Option<f64>,
    /// From the fault (or stall) until throughput was back within 10 % of `pre_fault_iops`;
    /// `None` with `pre_fault_iops` known: not back before the window ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovered_ms: Option<f64>,
    /// Throughput held between the stall's end and recovery (or the window's end), as a
    /// fraction of `pre_fault_iops`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub degraded_ratio: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catch_up: Option<CatchUp>,
    /// `--verify`: reads checked over the run, and blocks found bad (0: no acknowledged write
    /// was lost across the disruption).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified_reads: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bad_blocks: Option<u64>,
    /// The timeline stopped at its cap (a very long window) or dropped short gaps.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
}
