//! What the monitor reports: the window's CPU, network, power and disk figures, the
//! per-interval series and the idle baseline (serialized into a run's `cpu`, `net`, `power`
//! blocks).

use crate::cpu::{CoreUsage, CpuBreakdown};
use crate::disk::DiskReport;
use crate::net::NetReport;
use crate::power::PowerReport;
use crate::procs::{GroupReport, GroupThread, Others};
use serde::{Deserialize, Serialize};

/// One point of the per-interval series.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct SeriesPoint {
    /// Seconds since the monitor was created.
    pub t_s: f64,
    /// System-wide busy % since the previous point (100 = all cores).
    pub busy_pct: f64,
    pub watts: Option<f64>,
}

/// The `cpu` block of a report.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuReport {
    pub clk_tck: u64,
    /// Cores online during the window.
    pub cores: usize,
    /// System-wide busy % of all cores over the window (100 = every core busy).
    pub busy_pct: f64,
    /// Busy CPU-seconds summed over cores.
    pub busy_cpu_s: f64,
    /// busy % over the idle baseline, if one was measured.
    pub baseline_busy_pct: Option<f64>,
    /// `busy_pct − baseline_busy_pct`, at least 0: the CPU the run cost (docs/MEASURE.md).
    pub busy_above_idle_pct: Option<f64>,
    /// user / nice / system / irq / softirq / steal / iowait / idle shares.
    pub breakdown: CpuBreakdown,
    pub per_core: Vec<CoreUsage>,
    /// self, each watch, kernel.
    pub groups: Vec<GroupReport>,
    /// The processes in none of those groups: the load beside the measurement (a lower
    /// bound; procs/others.rs). Absent from results written before it was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub others: Option<Others>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// Everything the monitor measured for one run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MonitorReport {
    pub window_s: f64,
    /// Window bounds on the series' time axis.
    pub window_start_s: f64,
    pub window_end_s: f64,
    pub cpu: CpuReport,
    pub net: NetReport,
    pub power: PowerReport,
    pub series: Vec<SeriesPoint>,
    /// Block devices that did I/O in the window (/proc/diskstats).
    #[serde(default)]
    pub disks: DiskReport,
    /// Every thread of the process groups (self, watches) over the window: the bottleneck
    /// attribution's evidence (the groups keep only their busiest).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub threads: Vec<GroupThread>,
}

/// Idle figures measured by [`Monitor::baseline`].
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Baseline {
    pub seconds: f64,
    pub busy_pct: f64,
    pub idle_w: Option<f64>,
}
