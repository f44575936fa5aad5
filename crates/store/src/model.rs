//! The comparison document, `"schema": "sanbench.compare/1"`: every workload of a suite run on
//! every target, possibly repeated. It is what `compare` writes as `results.json`, what the
//! store keeps, and what the report renders. Field names are public interface: extend, never
//! rename.

use serde::{Deserialize, Serialize};

use sanbench_engine::result::TargetResult;
use sanbench_engine::spec::Workload;
use sanbench_stats::SteadyState;

pub const COMPARE_SCHEMA: &str = "sanbench.compare/1";

/// One target of a comparison, as the user named it (`NAME=URI`, or the URI itself).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TargetEntry {
    /// Short name used in tables, charts and findings ("iSCSI 10G").
    pub name: String,
    pub uri: String,
    /// Environment manifest and negotiated parameters (from the first run on this target).
    #[serde(default)]
    pub manifest: serde_json::Value,
    /// The lab link the target sits behind, when it came from `--lab` (rate, MTU, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<serde_json::Value>,
    /// Idle host figures measured before this target's runs (CPU busy %, watts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<serde_json::Value>,
    /// A reference ceiling (`--reference NAME`, `ref:NAME=TARGET`): shown in tables and charts,
    /// never the subject or object of a finding, not graded on the report card.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reference: bool,
}

/// One workload of the suite.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkloadEntry {
    /// Stable id within the suite ("seq-read-1m").
    pub id: String,
    /// Human title ("Sequential read, 1 MiB, QD 12").
    pub title: String,
    /// Group used to average findings ("bandwidth", "database", "latency", ...).
    pub group: String,
    pub spec: Workload,
    /// Targets used at once for this workload when the suite sweeps 1 vs N targets
    /// (None: each target alone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub targets_at_once: Option<u32>,
}

/// One measured cell: a workload on a target, one repetition.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Cell {
    pub workload: String,
    pub target: String,
    /// 0-based repetition number.
    pub repeat: u32,
    pub result: TargetResult,
    /// Time-based steady-state check over the per-second IOPS series.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steady: Option<SteadyState>,
    /// A point of a response-time curve (`--curve`): the percentage of the target's
    /// closed-loop maximum it was run at, open loop. `None`: a closed-loop cell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_pct: Option<f64>,
    /// Under MPI: each rank's own figures for this cell (`result` is all ranks merged).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<sanbench_engine::hosts::HostResult>,
}

/// The whole comparison.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub schema: String,
    pub sanbench_version: String,
    /// RFC 3339 UTC.
    pub started_at: String,
    /// The exact command that reproduces the run.
    pub command: Vec<String>,
    pub suite: String,
    pub suite_description: String,
    pub repeat: u32,
    pub targets: Vec<TargetEntry>,
    pub workloads: Vec<WorkloadEntry>,
    /// Cells in the order they ran (interleaved: drift falls on all targets alike).
    pub cells: Vec<Cell>,
    /// Host environment manifest (kernel, CPU, memory, ...).
    #[serde(default)]
    pub manifest: serde_json::Value,
    /// True when the run stopped before every cell ran.
    #[serde(default)]
    pub incomplete: bool,
    /// Response-time curve levels (percent of each target's closed-loop maximum), when the
    /// comparison ran them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub curve: Vec<f64>,
}

impl Comparison {
    /// The cells of one workload on one target, all repetitions.
    pub fn cells_of<'a>(
        &'a self,
        workload: &'a str,
        target: &'a str,
    ) -> impl Iterator<Item = &'a Cell> + 'a {
        self.cells
            .iter()
            .filter(move |c| c.workload == workload && c.target == target && c.load_pct.is_none())
    }

    /// The curve points of one workload on one target at one level, all repetitions.
    pub fn curve_cells_of<'a>(
        &'a self,
        workload: &'a str,
        target: &'a str,
        pct: f64,
    ) -> impl Iterator<Item = &'a Cell> + 'a {
        self.cells.iter().filter(move |c| {
            c.workload == workload && c.target == target && c.load_pct == Some(pct)
        })
    }
}
