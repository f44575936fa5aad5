//! The monitors' blocks of a result: the host's CPU (`cpu`), network (`net`) and power
//! (`power`) over the window, and the run's `host` block (idle baseline, per-interval series).
//! The monitor crate measures them (`sanbench_monitor`, definitions in docs/MEASURE.md); the
//! report and the terminal read them typed.

use serde::{Deserialize, Serialize};

/// One point of the per-interval series.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SeriesPoint {
    /// Seconds since the monitor was created.
    pub t_s: f64,
    /// System-wide busy % since the previous point (100 = all cores).
    pub busy_pct: f64,
    pub watts: Option<f64>,
}

/// The `cpu` block of a report.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
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

/// Idle figures measured by [`Monitor::baseline`].
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Baseline {
    pub seconds: f64,
    pub busy_pct: f64,
    pub idle_w: Option<f64>,
}

/// Shares of elapsed time over a window, in percent (0..=100).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct CpuBreakdown {
    /// (elapsed − idle − iowait − steal) ÷ elapsed, elapsed being the window's length when
    /// known (see the module's notes), else the ticks' total.
    pub busy_pct: f64,
    /// What the busy ticks alone said: (total − idle − iowait − steal) ÷ total of the ticks.
    /// Absent from results written before host busy was the window less idle (they counted
    /// busy ticks, and `busy_pct` is that count).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tick_busy_pct: Option<f64>,
    pub user_pct: f64,
    pub nice_pct: f64,
    pub system_pct: f64,
    pub irq_pct: f64,
    pub softirq_pct: f64,
    pub steal_pct: f64,
    pub iowait_pct: f64,
    pub idle_pct: f64,
}

/// One core's share over a window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CoreUsage {
    pub cpu: u32,
    #[serde(flatten)]
    pub pct: CpuBreakdown,
}

/// CPU of one group over the window.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
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

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ThreadReport {
    pub pid: u32,
    pub tid: u32,
    pub name: String,
    pub cpu_s: f64,
    /// Seconds runnable but waiting for a CPU (schedstat's run delay), where the kernel says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_s: Option<f64>,
    /// Other names the thread had during the window (a kworker's workqueues), oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub seen_as: Vec<String>,
}

/// The processes of one name.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct OtherProcesses {
    /// comm (`/proc/PID/stat`'s name).
    pub name: String,
    /// How many processes of that name ran in the window.
    pub processes: usize,
    pub cpu_s: f64,
}

/// CPU of every process in no group over the window (`cpu.others` of a result).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct Others {
    pub cpu_s: f64,
    /// `cpu_s` over the window's length, in percent of one core.
    pub pct_of_core: f64,
    /// The names that used the most, largest first (at most [`Others::TOP`]).
    pub top: Vec<OtherProcesses>,
}

/// Other processes from this share of one core on, averaged over a window, are worth a
/// warning: on a quiet host the daemons add up to a few per cent at most.
pub const NOTABLE_PCT: f64 = 10.0;

impl Others {
    /// The most names kept.
    pub const TOP: usize = 5;

    /// At least [`NOTABLE_PCT`] of a core.
    pub fn notable(&self) -> bool {
        self.pct_of_core >= NOTABLE_PCT
    }

    /// The names with their CPU: "cargo 4.0 s, rustc 4.0 s (2 processes)".
    pub fn names(&self) -> String {
        // Names under 0.05 s (a daemon's tick) say nothing; the first is always named.
        let parts: Vec<String> = self
            .top
            .iter()
            .enumerate()
            .filter(|(i, o)| *i == 0 || o.cpu_s >= 0.05)
            .map(|(_, o)| {
                let n = if o.processes > 1 {
                    format!(" ({} processes)", o.processes)
                } else {
                    String::new()
                };
                format!("{} {:.1} s{n}", o.name, o.cpu_s)
            })
            .collect();
        parts.join(", ")
    }

    /// Several windows together (the cells of a comparison): CPU and each name's CPU summed,
    /// the largest share of a core kept, and for each name the most processes one window saw
    /// (the same process runs through many windows).
    pub fn merge<'a>(all: impl IntoIterator<Item = &'a Others>) -> Others {
        let mut m = Others::default();
        let mut by_name = Vec::new();
        for o in all {
            m.cpu_s += o.cpu_s;
            m.pct_of_core = m.pct_of_core.max(o.pct_of_core);
            for p in &o.top {
                tally(&mut by_name, &p.name, p.processes, p.cpu_s, usize::max);
            }
        }
        m.top = largest(by_name);
        m
    }
}

/// Adds `processes` processes of `name` that used `cpu_s` to `by_name`, their counts joined
/// by `count` (a sum within a window, the most of any window across windows).
pub fn tally(
    by_name: &mut Vec<OtherProcesses>,
    name: &str,
    processes: usize,
    cpu_s: f64,
    count: fn(usize, usize) -> usize,
) {
    match by_name.iter_mut().find(|o| o.name == name) {
        Some(o) => {
            o.processes = count(o.processes, processes);
            o.cpu_s += cpu_s;
        }
        None => by_name.push(OtherProcesses {
            name: name.to_string(),
            processes,
            cpu_s,
        }),
    }
}

/// The names that used any CPU, largest first, at most [`Others::TOP`].
pub fn largest(mut by_name: Vec<OtherProcesses>) -> Vec<OtherProcesses> {
    by_name.retain(|o| o.cpu_s > 0.0);
    by_name.sort_by(|a, b| b.cpu_s.total_cmp(&a.cpu_s).then(a.name.cmp(&b.name)));
    by_name.truncate(Others::TOP);
    by_name
}

/// Cumulative counters of one interface.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct NetCounters {
    pub rx_bytes: u64,
    pub rx_packets: u64,
    pub tx_bytes: u64,
    pub tx_packets: u64,
}

impl NetCounters {
    pub fn since(&self, e: &NetCounters) -> NetCounters {
        NetCounters {
            rx_bytes: self.rx_bytes.saturating_sub(e.rx_bytes),
            rx_packets: self.rx_packets.saturating_sub(e.rx_packets),
            tx_bytes: self.tx_bytes.saturating_sub(e.tx_bytes),
            tx_packets: self.tx_packets.saturating_sub(e.tx_packets),
        }
    }

    pub fn add(&mut self, o: &NetCounters) {
        self.rx_bytes += o.rx_bytes;
        self.rx_packets += o.rx_packets;
        self.tx_bytes += o.tx_bytes;
        self.tx_packets += o.tx_packets;
    }

    /// rx + tx bytes.
    pub fn bytes(&self) -> u64 {
        self.rx_bytes + self.tx_bytes
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct IfaceUsage {
    pub name: String,
    #[serde(flatten)]
    pub counters: NetCounters,
}

/// Traffic over the window.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct NetReport {
    /// Every interface present at both ends of the window.
    pub interfaces: Vec<IfaceUsage>,
    /// Sum over all interfaces except `lo` (loopback counts local traffic twice).
    pub total: NetCounters,
    /// Set when the counters could not be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl NetReport {
    /// Counters summed over the named interfaces (e.g. the one carrying the target's traffic).
    pub fn sum_of(&self, names: &[&str]) -> NetCounters {
        let mut t = NetCounters::default();
        for i in self
            .interfaces
            .iter()
            .filter(|i| names.contains(&i.name.as_str()))
        {
            t.add(&i.counters);
        }
        t
    }
}

/// The power block of a report.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct PowerReport {
    /// `rapl`, `ipmi-dcmi`, `wattsup`, `command`, `model`, or `none`.
    pub source: String,
    /// True when every figure here is an estimate from the utilization model.
    pub modeled: bool,
    /// Average power over the idle baseline.
    pub idle_w: Option<f64>,
    /// Average power over the measured window (energy ÷ time).
    pub avg_w: Option<f64>,
    /// Energy over the window.
    pub joules: Option<f64>,
    /// `joules − idle_w × window seconds`: the energy the work cost.
    pub joules_above_idle: Option<f64>,
    /// `avg_w − idle_w`.
    pub w_above_idle: Option<f64>,
    /// Readings taken inside the window (bounds included).
    pub samples: usize,
    /// Why a figure is missing: source absent, failed mid-run, window not covered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// A run's `host` block: the idle baseline it measured (or reused), the window's length on
/// the monitor's clock and the per-interval series of busy % and watts.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct HostBlock {
    pub baseline: Option<Baseline>,
    pub window_s: f64,
    pub series: Vec<SeriesPoint>,
}
