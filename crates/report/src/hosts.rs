//! The per-host breakdown of a comparison run as an MPI job: each cell's result is all ranks
//! merged, and its `hosts[]` holds each rank's own figures. Here they are summarised per
//! (workload, target, rank) as means over the repetitions, for the report's "Per host" table.
//! Nothing is shown for a comparison of one host.

use sanbench_doc::Comparison;

/// One rank's mean figures for one workload on one target.
#[derive(Clone, Debug, PartialEq)]
pub struct HostRow {
    pub workload: String,
    pub target: String,
    pub rank: u32,
    pub host: String,
    pub monitor_only: bool,
    pub repeats: usize,
    pub iops: f64,
    pub mb_per_s: f64,
    pub p99_us: f64,
    /// The rank's host: system-wide CPU busy % over its window, when monitored.
    pub cpu_busy_pct: Option<f64>,
    /// Its I/Os per CPU-second of its own process.
    pub ios_per_cpu_s: Option<f64>,
}

/// The table's column titles, in the order of [`HostRow::cells`].
pub const COLUMNS: [&str; 9] = [
    "Workload",
    "Target",
    "Rank",
    "Host",
    "IOPS",
    "MB/s",
    "p99 µs",
    "Host CPU busy",
    "I/Os per CPU-s",
];

impl HostRow {
    /// The row's cells as text, one per [`COLUMNS`] entry (each exporter escapes and marks
    /// them up in its own way).
    pub fn cells(&self) -> [String; 9] {
        let opt = |v: Option<f64>, unit: &str| v.map_or("–".into(), |v| format!("{v:.1}{unit}"));
        [
            self.workload.clone(),
            self.target.clone(),
            self.rank.to_string(),
            self.host.clone(),
            if self.monitor_only {
                "monitor only".to_string()
            } else {
                format!("{:.0}", self.iops)
            },
            format!("{:.1}", self.mb_per_s),
            format!("{:.1}", self.p99_us),
            opt(self.cpu_busy_pct, " %"),
            opt(self.ios_per_cpu_s, ""),
        ]
    }
}

/// The rows, in the order the workloads, targets and ranks appear; empty unless some cell
/// was measured by more than one rank.
pub fn rows(c: &Comparison) -> Vec<HostRow> {
    if !c.cells.iter().any(|cell| cell.hosts.len() > 1) {
        return Vec::new();
    }
    let mut out: Vec<HostRow> = Vec::new();
    let mut sums: Vec<(usize, usize)> = Vec::new(); // (cpu samples, per-cpu samples)
    for cell in c.cells.iter().filter(|c| c.load_pct.is_none()) {
        for h in &cell.hosts {
            let i = match out.iter().position(|r| {
                r.workload == cell.workload && r.target == cell.target && r.rank == h.rank
            }) {
                Some(i) => i,
                None => {
                    out.push(HostRow {
                        workload: cell.workload.clone(),
                        target: cell.target.clone(),
                        rank: h.rank,
                        host: h.host.clone(),
                        monitor_only: h.monitor_only,
                        repeats: 0,
                        iops: 0.0,
                        mb_per_s: 0.0,
                        p99_us: 0.0,
                        cpu_busy_pct: None,
                        ios_per_cpu_s: None,
                    });
                    sums.push((0, 0));
                    out.len() - 1
                }
            };
            let r = &mut out[i];
            r.repeats += 1;
            r.iops += h.iops;
            r.mb_per_s += h.mb_per_s;
            r.p99_us += h.latency_us.p99;
            if let Some(b) = h.cpu.as_ref().map(|c| c.busy_pct) {
                *r.cpu_busy_pct.get_or_insert(0.0) += b;
                sums[i].0 += 1;
            }
            if let Some(p) = &h.process_cpu {
                *r.ios_per_cpu_s.get_or_insert(0.0) += p.ios_per_cpu_s;
                sums[i].1 += 1;
            }
        }
    }
    for (r, (nc, np)) in out.iter_mut().zip(sums) {
        let n = r.repeats as f64;
        r.iops /= n;
        r.mb_per_s /= n;
        r.p99_us /= n;
        r.cpu_busy_pct = r.cpu_busy_pct.map(|v| v / nc.max(1) as f64);
        r.ios_per_cpu_s = r.ios_per_cpu_s.map(|v| v / np.max(1) as f64);
    }
    out.sort_by(|a, b| {
        let wi = |w: &str| c.workloads.iter().position(|x| x.id == w);
        let ti = |t: &str| c.targets.iter().position(|x| x.name == t);
        (wi(&a.workload), ti(&a.target), a.rank).cmp(&(wi(&b.workload), ti(&b.target), b.rank))
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use sanbench_doc::hosts::HostResult;

    #[test]
    fn means_per_rank_and_nothing_for_one_host() {
        let mut c = sanbench_store::fixture::sample_comparison();
        assert!(rows(&c).is_empty());
        for (k, cell) in c.cells.iter_mut().enumerate() {
            cell.hosts = (0..2)
                .map(|rank| HostResult {
                    rank,
                    host: format!("n{rank}"),
                    iops: 100.0 * (rank + 1) as f64 + k as f64,
                    cpu: Some(sanbench_doc::host::CpuReport {
                        busy_pct: 50.0,
                        ..Default::default()
                    }),
                    ..HostResult::default()
                })
                .collect();
        }
        let rows = rows(&c);
        let cells = c.cells.iter().filter(|x| x.load_pct.is_none()).count();
        assert_eq!(rows.iter().map(|r| r.repeats).sum::<usize>(), cells * 2);
        let r1: Vec<&HostRow> = rows.iter().filter(|r| r.rank == 1).collect();
        assert!(r1.iter().all(|r| r.iops > 200.0 && r.host == "n1"));
        assert!(rows.iter().all(|r| r.cpu_busy_pct == Some(50.0)));
    }
}
