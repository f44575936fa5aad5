//! Latency figures in microseconds, and the CPU of the sanbench process: what a target's
//! result and a rank's row both carry.

use serde::{Deserialize, Serialize};

use sanbench_stats::LatencyHistogram;

/// Latency figures in microseconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LatencyUs {
    pub mean: f64,
    pub min: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub p9999: f64,
    pub max: f64,
    pub stdev: f64,
}

impl LatencyUs {
    pub fn from_hist(h: &LatencyHistogram) -> LatencyUs {
        let s = h.summary();
        let us = |ns: u64| ns as f64 / 1000.0;
        LatencyUs {
            mean: s.mean / 1000.0,
            min: us(s.min),
            p50: us(s.p50),
            p90: us(s.p90),
            p99: us(s.p99),
            p999: us(s.p999),
            p9999: us(s.p9999),
            max: us(s.max),
            stdev: s.stdev / 1000.0,
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ProcessCpu {
    pub user_s: f64,
    pub system_s: f64,
    /// I/Os completed in the window per CPU-second of the sanbench process.
    pub ios_per_cpu_s: f64,
    /// CPU-µs of the sanbench process per I/O.
    pub cpu_us_per_io: f64,
}

impl ProcessCpu {
    /// The process's CPU over a window in which `ios` I/Os completed.
    pub fn new(user_s: f64, system_s: f64, ios: u64) -> ProcessCpu {
        let cpu_s = user_s + system_s;
        ProcessCpu {
            user_s,
            system_s,
            ios_per_cpu_s: if cpu_s > 0.0 { ios as f64 / cpu_s } else { 0.0 },
            cpu_us_per_io: if ios > 0 {
                cpu_s * 1e6 / ios as f64
            } else {
                0.0
            },
        }
    }
}
