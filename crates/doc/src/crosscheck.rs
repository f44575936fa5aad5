//! The document `sanbench crosscheck --json` writes (`sanbench.crosscheck/1`): the same
//! workload run by sanbench and by fio on one target, each repetition's figures, and the
//! ratios of their medians with each ratio's interval and verdict against the tolerance.

use serde::{Deserialize, Serialize};

use crate::spec::Workload;

/// The `schema` of a crosscheck document.
pub const CROSSCHECK_SCHEMA: &str = "sanbench.crosscheck/1";

/// A crosscheck, as `--json` writes it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CrosscheckDoc {
    pub schema: String,
    /// The target, secrets masked.
    pub target: String,
    /// The workload both tools ran.
    pub spec: Workload,
    pub spec_description: String,
    /// The fio job fio ran (what `--emit-fio` writes).
    pub fio_job: String,
    pub tolerance_pct: f64,
    /// Repetitions per tool.
    pub repetitions: usize,
    /// Why the repetitions stopped: `fixed`, `decided`, `max_rounds` or `budget`.
    pub stop: String,
    /// Each of sanbench's repetitions, in order.
    pub sanbench: Vec<Repetition>,
    /// Each of fio's repetitions, in order.
    pub fio: Vec<Repetition>,
    pub medians: Medians,
    /// Every ratio and both Little's-law deviations within the tolerance.
    pub agree: bool,
}

/// One tool's figures in one repetition.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Repetition {
    pub iops: f64,
    pub mean_us: f64,
    pub p99_us: f64,
    /// Mean I/Os in flight: measured by sanbench, configured for fio (iodepth x numjobs);
    /// `null` in an open loop for fio.
    pub in_flight: Option<f64>,
    /// |IOPS x mean latency - in flight| / in flight.
    pub littles_law: Option<f64>,
    /// fio's: which latency the p99 is of (`lat_ns`, or `clat_ns` from an fio without
    /// total-latency percentiles).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_from: Option<String>,
    /// fio's: how its p99 was had (`histogram` or `percentile tables`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_method: Option<String>,
}

/// The medians of both tools and what they show.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Medians {
    pub iops: Ratio,
    pub mean_us: Ratio,
    pub p99_us: Ratio,
    pub littles_law_sanbench: Little,
    pub littles_law_fio: Little,
}

/// One figure's medians and their ratio sanbench / fio.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Ratio {
    pub sanbench: f64,
    pub fio: f64,
    pub ratio: f64,
    /// The ratio of the medians within the tolerance.
    pub ok: bool,
    /// The ratio's interval (from two repetitions on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<RatioInterval>,
}

/// A ratio's simultaneous interval by `compare`'s model and what it shows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RatioInterval {
    pub ratio: f64,
    pub ci_low: f64,
    pub ci_high: f64,
    /// `within` (the whole interval inside the tolerance: TOST), `outside`, `inconclusive`.
    pub verdict: String,
    /// About how many more repetitions would likely decide an inconclusive ratio.
    pub more_repetitions: Option<u32>,
    /// The error it was judged at.
    pub alpha: f64,
}

/// A tool's median deviation from Little's law.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Little {
    /// `null` where the in-flight mean is not known (fio in an open loop).
    pub deviation: Option<f64>,
    pub ok: bool,
}
