//! What the monitor reports: the window's CPU, network, power and disk figures, the
//! per-interval series and the idle baseline (serialized into a run's `cpu`, `net`, `power`
//! blocks).

use crate::disk::DiskReport;
use crate::net::NetReport;
use crate::power::PowerReport;
use crate::procs::GroupThread;
use serde::{Deserialize, Serialize};

pub use sanbench_doc::host::{Baseline, CpuReport, SeriesPoint};

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
