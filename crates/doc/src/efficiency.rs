//! The efficiency figures of the studies (definitions in docs/MEASURE.md): work per CPU and
//! per watt. One type: the monitor computes it (`sanbench_monitor::efficiency`), every result
//! and host row carries it.

use serde::{Deserialize, Serialize};

/// Efficiency figures of the studies (definitions in docs/MEASURE.md and the monitor crate);
/// `None` where no measurement supports them. CPU % is system-wide busy % of all cores minus the
/// idle baseline; watts are above the idle baseline.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct Efficiency {
    pub iops_per_cpu_pct: Option<f64>,
    pub mb_per_s_per_cpu_pct: Option<f64>,
    pub cpu_us_per_io: Option<f64>,
    pub core_pct_per_1000_iops: Option<f64>,
    pub iops_per_watt: Option<f64>,
    pub mb_per_s_per_watt: Option<f64>,
    /// The CPU % the ratios above divide by.
    pub cpu_pct: Option<f64>,
    pub cpu_baseline_subtracted: bool,
    /// The idle baseline was busy (more than 10 % of all cores): the figures above idle cannot
    /// separate this run from other load on the host (see the monitor crate).
    pub host_not_idle: bool,
    /// CPU-µs per I/O without subtracting the idle baseline.
    pub cpu_us_per_io_gross: Option<f64>,
    /// True when the watts come from the utilization model, not a meter.
    pub power_modeled: bool,
    /// Open loop: the share of all cores the streams spent spinning for their schedule
    /// (`pacing_cpu_s` over the window), taken out of `cpu_pct` and every figure above idle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pacing_cpu_pct: Option<f64>,
}
