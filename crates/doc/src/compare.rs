//! The comparison document, `"schema": "sanbench.compare/3"`: every workload of a suite run on
//! every target, possibly repeated. It is what `compare` writes as `results.json`, what the
//! store keeps, and what the report renders. Field names are public interface: extend, never
//! rename.
//!
//! A version 3 document is written with what every cell of a target repeats once, in the
//! target's `shared`, and loads with it put back into every cell ([`crate::shared`]): the
//! typed [`Comparison`] is the same for every version, and no reader sees `shared`.

use serde::{Deserialize, Serialize};

use crate::run::TargetResult;
use crate::spec::Workload;
use sanbench_stats::design::plan::Design;
use sanbench_stats::SteadyState;

/// The version this crate writes (see the crate's docs for what each version changed).
pub const COMPARE_SCHEMA: &str = "sanbench.compare/3";

/// Every version this crate reads, oldest first.
pub const COMPARE_SCHEMAS: [&str; 3] = ["sanbench.compare/1", "sanbench.compare/2", COMPARE_SCHEMA];

/// Whether a document of this `schema` is written with its targets' `shared` blocks (version
/// 3 on; an unknown version is refused by the readers that check, and read as written here).
fn shares(schema: &str) -> bool {
    !matches!(schema, "sanbench.compare/1" | "sanbench.compare/2")
}

/// One target of a comparison, as the user named it (`NAME=URI`, or the URI itself).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TargetEntry {
    /// Short name used in tables, charts and findings ("iSCSI 10G").
    pub name: String,
    pub uri: String,
    /// The target's facts and negotiated parameters (from the first run on this target).
    #[serde(default)]
    pub manifest: Option<sanbench_io::TargetInfo>,
    /// The lab link the target sits behind, when it came from `--lab` (rate, MTU, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<LinkInfo>,
    /// Idle host figures measured before this target's runs (CPU busy %, watts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<crate::host::Baseline>,
    /// A reference ceiling (`--reference NAME`, `ref:NAME=TARGET`): shown in tables and charts,
    /// never the subject or object of a finding, not graded on the report card.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reference: bool,
    /// Version 3 documents: the result blocks (`info`, `precondition`, `cpu`, `power`, `net`,
    /// `efficiency`, or the part of them) that every cell of this target holds, written once
    /// here; each of its cells' `result` is a JSON merge patch (RFC 7386) over them. sanbench
    /// puts them back into every cell when it loads the document.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared: Option<serde_json::Map<String, serde_json::Value>>,
}

/// The link a target sits behind, as the comparison document records it (`TargetEntry.link`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LinkInfo {
    pub name: String,
    /// Shaped line rate, bits per second, both directions.
    pub rate_bits: u64,
    pub mtu: u32,
    /// Segmentation and checksum offloads on (true) or off.
    pub offload: bool,
    /// One more forwarding element (a bridge) on the path.
    pub switched: bool,
}

/// One workload of the suite.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
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
    /// Paths to each target (the suite's `paths`; None: the target as given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paths: Option<u32>,
}

/// One measured cell: a workload on a target, one repetition.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Cell {
    pub workload: String,
    pub target: String,
    /// 0-based repetition number (the round of the design).
    pub repeat: u32,
    /// The round again, by the design's name for it (closed-loop cells of comparisons since the
    /// Williams order; `repeat` stays for older readers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round: Option<u32>,
    /// 0-based position of this target within its workload's round (the Williams row).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot: Option<u32>,
    /// When the cell started (RFC 3339 UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
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
    pub hosts: Vec<crate::hosts::HostResult>,
}

/// The whole comparison.
// Serialized through crate::shared (the impls below): a version 3 document is written with
// its targets' shared blocks and loads with them put back into its cells.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(remote = "Self")]
#[schemars(rename = "Comparison")]
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
    pub manifest: Option<crate::manifest::Manifest>,
    /// True when the run stopped before every cell ran.
    #[serde(default)]
    pub incomplete: bool,
    /// Response-time curve levels (percent of each target's closed-loop maximum), when the
    /// comparison ran them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub curve: Vec<f64>,
    /// The design the cells followed: order, seed, rounds, why it stopped, the margins and
    /// error rates the questions were judged with (comparisons since the Williams order).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub design: Option<Design>,
    /// `compare --require-headroom`: the report warns, at its top, about every cell limited by
    /// something other than the interconnect or the target under test (`bottleneck`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub require_headroom: bool,
    /// `false` while the comparison is still going: results.json is rewritten after every
    /// cell and, within a cell, every `--save-every`, so a killed comparison leaves this.
    /// Absent in the finished document (`incomplete` then says whether every cell ran).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub complete: Option<bool>,
    /// The cell that was running when the document was written (its figures so far, its
    /// result marked by `complete: false` above): never among `cells`, so nothing judged
    /// reads it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_progress: Option<Box<Cell>>,
}

/// One question: is target `a` different from `b` on this workload by this figure? Derived
/// from the cells by the report (`questions` in results.json), never stored.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Question {
    pub workload: String,
    /// The figure: "mb_per_s", "iops", "lat_p99_us", "iops_per_cpu", ...
    pub metric: String,
    /// "primary" (throughput) or "secondary" (tail latency, CPU and power efficiency): each
    /// family spends its own share of the comparison's 5 % error.
    pub family: String,
    pub a: String,
    pub b: String,
    /// a's figure over b's: the geometric mean over the rounds.
    pub ratio: f64,
    /// The simultaneous interval of the ratio; `None` while the data cannot bound it.
    pub ci_low: Option<f64>,
    pub ci_high: Option<f64>,
    /// From a's side: "better", "worse", "equivalent" (within the margin), "inconclusive".
    pub verdict: String,
    /// The better target's name, for "better" and "worse".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub better: Option<String>,
    /// Complete rounds the answer used.
    pub rounds: u32,
    /// For an inconclusive answer: rounds more that would likely decide it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub more_rounds: Option<u32>,
    /// The error this question's interval was drawn at.
    pub alpha: f64,
    /// The lag-1 autocorrelation of the pair's residuals across rounds (bias-corrected) when
    /// positive: the larger of this question's own and the pair's pooled over its workloads
    /// (since issue 40's third pass); the interval was widened by `(1 + φ) / (1 − φ)` in
    /// variance for it (rounds that persist carry less information than independent ones).
    /// Absent when 0 and in documents written before issue 40.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lag1: Option<f64>,
}

impl Serialize for Comparison {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if !shares(&self.schema) {
            return Comparison::serialize(self, s);
        }
        let mut v = Comparison::serialize(self, serde_json::value::Serializer)
            .map_err(serde::ser::Error::custom)?;
        crate::shared::compact(&mut v);
        v.serialize(s)
    }
}

impl<'de> Deserialize<'de> for Comparison {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut v = serde_json::Value::deserialize(d)?;
        if shares(v.get("schema").and_then(|s| s.as_str()).unwrap_or_default()) {
            crate::shared::expand(&mut v);
        }
        Comparison::deserialize(v).map_err(serde::de::Error::custom)
    }
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
