//! Statistics per (workload, target); the studies' "Key Findings" built on them live in
//! [`crate::findings`].
//!
//! Categories and their workloads: bandwidth (MB/s) over the bandwidth-flavoured workloads,
//! IOPS over the IOPS-flavoured ones (for one workload MB/s and IOPS give the same ratio, so
//! each is counted once), latency (mean) over all, and CPU and power efficiency split by
//! flavour as Third I/O did: "bandwidth CPU efficiency" (MB/s per CPU %) and "database CPU
//! efficiency" (IOPS per CPU %).

use std::collections::BTreeMap;

use serde::Serialize;

use sanbench_doc::host::{Others, NOTABLE_PCT as OTHERS_NOTABLE_PCT};
use sanbench_doc::run::TargetResult;
use sanbench_doc::{Comparison, WorkloadEntry};
use sanbench_stats::{mean_ci95, MeanCi};

/// A figure taken from every repetition of a cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    MbPerS,
    Iops,
    LatMeanUs,
    LatP99Us,
    IopsPerCpu,
    MbPerCpu,
    IopsPerWatt,
    MbPerWatt,
    /// The longest stall of a cell in which a fault was fired (ms; at least 10, the shortest
    /// span the timeline records): a failover's cost.
    StallMs,
}

impl Metric {
    pub const ALL: [Metric; 9] = [
        Metric::MbPerS,
        Metric::Iops,
        Metric::LatMeanUs,
        Metric::LatP99Us,
        Metric::IopsPerCpu,
        Metric::MbPerCpu,
        Metric::IopsPerWatt,
        Metric::MbPerWatt,
        Metric::StallMs,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Metric::MbPerS => "MB/s",
            Metric::Iops => "IOPS",
            Metric::LatMeanUs => "mean latency (µs)",
            Metric::LatP99Us => "p99 latency (µs)",
            Metric::IopsPerCpu => "IOPS per CPU %",
            Metric::MbPerCpu => "MB/s per CPU %",
            Metric::IopsPerWatt => "IOPS per W",
            Metric::MbPerWatt => "MB/s per W",
            Metric::StallMs => "failover stall (ms)",
        }
    }

    pub fn lower_is_better(self) -> bool {
        matches!(self, Metric::LatMeanUs | Metric::LatP99Us | Metric::StallMs)
    }

    /// Whether the figure is CPU or power above the host's idle baseline.
    pub fn above_idle(self) -> bool {
        matches!(
            self,
            Metric::IopsPerCpu | Metric::MbPerCpu | Metric::IopsPerWatt | Metric::MbPerWatt
        )
    }

    /// The figure of one result; `None` when not measured, not finite, or meaningless (latency
    /// of a cell that completed no I/O; CPU and power above idle when the host was not idle
    /// before the run, see [`caveats`]).
    pub fn of(self, r: &TargetResult) -> Option<f64> {
        let e = &r.efficiency;
        if self.above_idle() && e.host_not_idle {
            return None;
        }
        let v = match self {
            Metric::MbPerS => Some(r.mb_per_s),
            Metric::Iops => Some(r.iops),
            Metric::LatMeanUs => (r.ios > 0).then_some(r.latency_us.mean),
            Metric::LatP99Us => (r.ios > 0).then_some(r.latency_us.p99),
            Metric::IopsPerCpu => e.iops_per_cpu_pct,
            Metric::MbPerCpu => e.mb_per_s_per_cpu_pct,
            Metric::IopsPerWatt => e.iops_per_watt,
            Metric::MbPerWatt => e.mb_per_s_per_watt,
            Metric::StallMs => r
                .disruption
                .as_ref()
                .filter(|d| d.cause == "fault")
                .map(|d| d.stall_ms.max(STALL_FLOOR_MS)),
        };
        v.filter(|x| x.is_finite() && *x >= 0.0)
    }
}

/// The shortest stall the run's timeline records: a cell without one counts as this.
pub const STALL_FLOOR_MS: f64 = 10.0;

/// Whether a workload is judged by its bandwidth or by its I/O rate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Flavour {
    Bandwidth,
    Io,
}

/// Bandwidth-like groups by name; otherwise large transfers (>= 64 KiB) mean bandwidth.
pub fn flavour(w: &WorkloadEntry) -> Flavour {
    let g = w.group.to_ascii_lowercase();
    if ["bandwidth", "throughput", "sequential", "streaming"].contains(&g.as_str()) {
        Flavour::Bandwidth
    } else if ["database", "iops", "oltp", "latency", "random"].contains(&g.as_str()) {
        Flavour::Io
    } else if w.spec.max_bs() >= 64 << 10 {
        Flavour::Bandwidth
    } else {
        Flavour::Io
    }
}

/// The five categories of findings and of the report card.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    Bandwidth,
    Iops,
    Latency,
    CpuEfficiency,
    PowerEfficiency,
    /// The failover stall of cells with faults: findings, not the report card (not in
    /// [`Category::ALL`], whose order is the card's weights').
    Failover,
}

impl Category {
    pub const ALL: [Category; 5] = [
        Category::Bandwidth,
        Category::Iops,
        Category::Latency,
        Category::CpuEfficiency,
        Category::PowerEfficiency,
    ];

    /// The key used in JSON and the page (`data-category`).
    pub fn key(self) -> &'static str {
        match self {
            Category::Bandwidth => "bandwidth",
            Category::Iops => "iops",
            Category::Latency => "latency",
            Category::CpuEfficiency => "cpu_efficiency",
            Category::PowerEfficiency => "power_efficiency",
            Category::Failover => "failover",
        }
    }

    pub fn title(self) -> &'static str {
        match self {
            Category::Bandwidth => "Bandwidth",
            Category::Iops => "IOPS",
            Category::Latency => "Latency",
            Category::CpuEfficiency => "CPU efficiency",
            Category::PowerEfficiency => "Power efficiency",
            Category::Failover => "Failover",
        }
    }

    /// The metric this category judges a workload of the given flavour by, if it judges it.
    pub fn metric(self, f: Flavour) -> Option<Metric> {
        match (self, f) {
            (Category::Bandwidth, Flavour::Bandwidth) => Some(Metric::MbPerS),
            (Category::Iops, Flavour::Io) => Some(Metric::Iops),
            (Category::Bandwidth, _) | (Category::Iops, _) => None,
            (Category::Latency, _) => Some(Metric::LatMeanUs),
            (Category::CpuEfficiency, Flavour::Bandwidth) => Some(Metric::MbPerCpu),
            (Category::CpuEfficiency, Flavour::Io) => Some(Metric::IopsPerCpu),
            (Category::PowerEfficiency, Flavour::Bandwidth) => Some(Metric::MbPerWatt),
            (Category::PowerEfficiency, Flavour::Io) => Some(Metric::IopsPerWatt),
            (Category::Failover, _) => Some(Metric::StallMs),
        }
    }
}

/// Mean ± 95 % CI of every metric of one workload on one target.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CellStats {
    pub repeats: usize,
    pub metrics: BTreeMap<Metric, MeanCi>,
    /// The same figures on a log scale (mean and spread of ln x over positive values): the
    /// significance test works on these, where run-to-run noise is a share of the figure and
    /// a ratio is a difference.
    pub log_metrics: BTreeMap<Metric, MeanCi>,
    /// Any repetition's power figure is modeled, not measured.
    pub modeled_power: bool,
    /// Mean share of I/Os per 1 ms bucket (0..24 ms, then >= 24 ms), over repetitions.
    pub ms_buckets: Vec<f64>,
}

impl CellStats {
    pub fn get(&self, m: Metric) -> Option<&MeanCi> {
        self.metrics.get(&m)
    }
}

/// Whether a result's power figure says it is modeled.
pub fn power_is_modeled(r: &TargetResult) -> bool {
    r.power.as_ref().is_some_and(|p| p.modeled)
}

/// What a reader must know before trusting the figures, one sentence each: today, targets whose
/// idle baseline showed a busy host, so that their CPU and power efficiency (figures above
/// idle) are left out of the findings, the report card and the charts.
pub fn caveats(cmp: &Comparison) -> Vec<String> {
    let mut out = Vec::new();
    // Spans that hold never-written space, where a read workload ran: zeros that never touched
    // the medium (the precondition step's finding, per target).
    for t in &cmp.targets {
        let holes = cmp.cells.iter().find(|c| {
            c.target == t.name
                && c.result.read.ios > 0
                && c.result
                    .precondition
                    .as_ref()
                    .is_some_and(|p| p.state == sanbench_doc::precondition::SpanState::Holes)
        });
        if let Some(p) = holes.and_then(|c| c.result.precondition.as_ref()) {
            out.push(format!("{}: {}", t.name, p.note));
        }
    }
    let ticked = ticked_cells(cmp);
    if ticked > 0 {
        out.push(format!(
            "{ticked} of {} cells were measured by an earlier sanbench that counted host CPU from \
             busy ticks, which miss or multiply short bursts of work between idle spells (low \
             queue depths, open loops) by their phase against the scheduler tick: their CPU \
             and power efficiency can be far off, and do not compare with figures measured \
             since (window less idle; docs/MEASURE.md, CPU).",
            cmp.cells.len()
        ));
    }
    // One sentence for every target whose host was busy before its runs (a loaded host
    // busies them all: the same sentence five times was noise).
    let mut busy = Vec::new();
    for t in &cmp.targets {
        let busiest = cmp
            .cells
            .iter()
            .filter(|c| c.target == t.name && c.result.efficiency.host_not_idle)
            .filter_map(|c| c.result.cpu.as_ref()?.baseline_busy_pct)
            .fold(None, |m: Option<f64>, b| Some(m.map_or(b, |m| m.max(b))));
        if let Some(b) = busiest {
            busy.push(format!("{} ({b:.1} % busy)", t.name));
        }
    }
    if !busy.is_empty() {
        let its = if busy.len() == 1 { "its" } else { "their" };
        out.push(format!(
            "{}: the host was not idle before {its} runs (busiest idle baseline), so {its} \
             CPU and power figures above idle cannot be told apart from the other load; {its} \
             CPU and power efficiency are left out of the findings, the report card and the \
             charts. Re-run on a quiet host.",
            busy.join(", ")
        ));
    }
    if let Some(text) = others_caveat(cmp) {
        out.push(text);
    }
    out
}

/// Cells that ran beside other processes (at least [`OTHERS_NOTABLE_PCT`] of a core, by the
/// monitor's count of the processes in no group: monitor's procs/others.rs), who they were,
/// and what that means for the figures.
fn others_caveat(cmp: &Comparison) -> Option<String> {
    let flagged: Vec<Others> = cmp
        .cells
        .iter()
        .filter_map(|c| c.result.cpu.as_ref()?.others.clone())
        .filter(Others::notable)
        .collect();
    if flagged.is_empty() {
        return None;
    }
    let all = Others::merge(&flagged);
    Some(format!(
        "{} of {} cells ran beside other processes using at least {} % of a core (up to {:.0} %; \
         in those cells: {}). Their load is in those cells' figures and in the noise that \
         widens every interval; if one of them serves a target on this host, name it with \
         --watch so that its CPU counts as the target's, otherwise re-run on a quiet host.",
        flagged.len(),
        cmp.cells.len(),
        OTHERS_NOTABLE_PCT,
        all.pct_of_core,
        all.names()
    ))
}

/// Cells whose host CPU was counted from busy ticks: results written before host busy was the
/// window less idle (stop 36) carry a CPU breakdown without `tick_busy_pct` (monitor's cpu.rs).
pub fn ticked_cells(cmp: &Comparison) -> usize {
    cmp.cells
        .iter()
        .filter(|c| {
            c.result
                .cpu
                .as_ref()
                // A breakdown was written (an all-zero one is a block without it) and has
                // no tick_busy_pct.
                .is_some_and(|v| {
                    v.breakdown.tick_busy_pct.is_none() && v.breakdown != Default::default()
                })
        })
        .count()
}

/// Statistics of a comparison, keyed by (workload id, target name).
#[derive(Clone, Debug, Default)]
pub struct Analysis {
    pub stats: BTreeMap<(String, String), CellStats>,
}

impl Analysis {
    pub fn new(cmp: &Comparison) -> Analysis {
        let mut stats = BTreeMap::new();
        for w in &cmp.workloads {
            for t in &cmp.targets {
                let cells: Vec<&TargetResult> =
                    cmp.cells_of(&w.id, &t.name).map(|c| &c.result).collect();
                if cells.is_empty() {
                    continue;
                }
                stats.insert((w.id.clone(), t.name.clone()), cell_stats(&cells));
            }
        }
        Analysis { stats }
    }

    pub fn get(&self, workload: &str, target: &str) -> Option<&CellStats> {
        self.stats.get(&(workload.to_string(), target.to_string()))
    }

    pub fn metric(&self, workload: &str, target: &str, m: Metric) -> Option<&MeanCi> {
        self.get(workload, target).and_then(|s| s.get(m))
    }
}

/// Summarises the repetitions of one cell.
pub fn cell_stats(results: &[&TargetResult]) -> CellStats {
    let mut metrics = BTreeMap::new();
    let mut log_metrics = BTreeMap::new();
    for m in Metric::ALL {
        let xs: Vec<f64> = results.iter().filter_map(|r| m.of(r)).collect();
        if !xs.is_empty() {
            metrics.insert(m, mean_ci95(&xs));
        }
        let logs: Vec<f64> = xs.iter().filter(|x| **x > 0.0).map(|x| x.ln()).collect();
        if logs.len() == xs.len() && !logs.is_empty() {
            log_metrics.insert(m, mean_ci95(&logs));
        }
    }
    let mut ms_buckets: Vec<f64> = Vec::new();
    let mut n = 0.0_f64;
    for r in results.iter().filter(|r| !r.latency_ms_buckets.is_empty()) {
        if ms_buckets.len() < r.latency_ms_buckets.len() {
            ms_buckets.resize(r.latency_ms_buckets.len(), 0.0);
        }
        for (a, b) in ms_buckets.iter_mut().zip(&r.latency_ms_buckets) {
            *a += if b.is_finite() { *b } else { 0.0 };
        }
        n += 1.0;
    }
    ms_buckets.iter_mut().for_each(|x| *x /= n.max(1.0));
    CellStats {
        repeats: results.len(),
        metrics,
        log_metrics,
        modeled_power: results.iter().any(|r| power_is_modeled(r)),
        ms_buckets,
    }
}

#[cfg(test)]
#[path = "analysis_tests.rs"]
mod tests;
