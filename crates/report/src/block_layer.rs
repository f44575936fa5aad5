//! What the block layer cost: a comparison that ran a block device beside its passthrough
//! device (`/dev/nvme0n1` and `nvme-ng:/dev/ng0n1`, `/dev/sdb` and `sg:/dev/sg1`) sent the same
//! workload down the same transport to the same medium, once through the kernel's block layer
//! and once around it, so the difference per I/O is what the block layer added (docs/MEASURE.md,
//! "The block layer's cost").
//!
//! The pair is found from the manifests: a passthrough target names its block device
//! (`block_device`), a block device opened as a file names its path (`path`). Each round's
//! cells are paired (the Williams order puts both in every round), and the cost is the median
//! of the rounds' differences with their range: a description of what was measured, not a
//! verdict (the throughput questions judge the pair like any other).

use serde::Serialize;
use std::collections::BTreeMap;

use sanbench_doc::{Cell, Comparison, TargetEntry};

/// The parameter naming a passthrough target's block device.
const BLOCK_DEVICE: &str = "block_device";

/// A figure over the rounds: the median of the per-round values and their range.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Spread {
    fn of(mut v: Vec<f64>) -> Option<Spread> {
        v.retain(|x| x.is_finite());
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Some(Spread {
            median,
            min: v[0],
            max: v[n - 1],
        })
    }
}

/// The block layer's cost on one workload: block device minus passthrough, per I/O.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Cost {
    pub workload: String,
    /// The block device's target name.
    pub block: String,
    /// The passthrough device's target name.
    pub passthrough: String,
    /// The device both reach (`/dev/nvme0n1`).
    pub device: String,
    /// Rounds with both cells.
    pub rounds: u32,
    /// Mean latency, block minus passthrough (µs).
    pub latency_mean_us: Spread,
    /// Median latency, block minus passthrough (µs).
    pub latency_p50_us: Spread,
    /// p99 latency, block minus passthrough (µs).
    pub latency_p99_us: Spread,
    /// Initiator CPU per I/O, block minus passthrough (µs), where both cells measured it.
    pub cpu_us_per_io: Option<Spread>,
    /// The block device's IOPS over the passthrough device's.
    pub iops_ratio: Spread,
}

fn param<'a>(t: &'a TargetEntry, key: &str) -> Option<&'a str> {
    t.manifest.as_ref()?.params.get(key)?.as_str()
}

/// Pairs of (block target, passthrough target, device) in the comparison.
pub fn pairs(cmp: &Comparison) -> Vec<(&TargetEntry, &TargetEntry, String)> {
    let mut out = Vec::new();
    for p in &cmp.targets {
        let Some(dev) = param(p, BLOCK_DEVICE) else {
            continue;
        };
        for b in &cmp.targets {
            if b.name != p.name
                && param(b, BLOCK_DEVICE).is_none()
                && param(b, "path").is_some_and(|path| same_device(path, dev))
            {
                out.push((b, p, dev.to_string()));
            }
        }
    }
    out
}

/// Whether two device paths name the same node (`/dev/nvme0n1` and `/dev//nvme0n1`; a link
/// resolved where it exists on this host).
fn same_device(a: &str, b: &str) -> bool {
    let norm = |s: &str| {
        let p = std::path::Path::new(s);
        std::fs::canonicalize(p).unwrap_or_else(|_| p.components().collect())
    };
    a == b || norm(a) == norm(b)
}

fn round_of(c: &Cell) -> u32 {
    c.round.unwrap_or(c.repeat)
}

/// A target's cells of one workload that did I/O, by round.
fn by_round<'a>(
    cmp: &'a Comparison,
    workload: &'a str,
    target: &'a str,
) -> BTreeMap<u32, &'a Cell> {
    cmp.cells_of(workload, target)
        .filter(|c| c.result.ios > 0)
        .map(|c| (round_of(c), c))
        .collect()
}

/// The block layer's cost per workload and pair, in the comparison's order.
pub fn costs(cmp: &Comparison) -> Vec<Cost> {
    let mut out = Vec::new();
    for (b, p, device) in pairs(cmp) {
        for w in &cmp.workloads {
            let (bs, ps) = (by_round(cmp, &w.id, &b.name), by_round(cmp, &w.id, &p.name));
            let both: Vec<(&Cell, &Cell)> = bs
                .iter()
                .filter_map(|(r, bc)| ps.get(r).map(|pc| (*bc, *pc)))
                .collect();
            if both.is_empty() {
                continue;
            }
            let diff = |f: &dyn Fn(&Cell) -> f64| {
                Spread::of(both.iter().map(|(bc, pc)| f(bc) - f(pc)).collect())
            };
            let cpu: Vec<f64> = both
                .iter()
                .filter_map(|(bc, pc)| {
                    Some(bc.result.efficiency.cpu_us_per_io? - pc.result.efficiency.cpu_us_per_io?)
                })
                .collect();
            let cpu = if cpu.len() == both.len() {
                Spread::of(cpu)
            } else {
                None
            };
            let (Some(mean), Some(p50), Some(p99), Some(iops)) = (
                diff(&|c| c.result.latency_us.mean),
                diff(&|c| c.result.latency_us.p50),
                diff(&|c| c.result.latency_us.p99),
                Spread::of(
                    both.iter()
                        .filter(|(_, pc)| pc.result.iops > 0.0)
                        .map(|(bc, pc)| bc.result.iops / pc.result.iops)
                        .collect(),
                ),
            ) else {
                continue;
            };
            out.push(Cost {
                workload: w.id.clone(),
                block: b.name.clone(),
                passthrough: p.name.clone(),
                device: device.clone(),
                rounds: both.len() as u32,
                latency_mean_us: mean,
                latency_p50_us: p50,
                latency_p99_us: p99,
                cpu_us_per_io: cpu,
                iops_ratio: iops,
            });
        }
    }
    out
}

/// "+3.1 µs (+2.0 to +4.4)": a difference's median and range.
pub fn fmt_us(s: &Spread) -> String {
    if s.min == s.max {
        format!("{:+.1} µs", s.median)
    } else {
        format!("{:+.1} µs ({:+.1} to {:+.1})", s.median, s.min, s.max)
    }
}

/// "0.94x (0.90-0.97)": a ratio's median and range.
pub fn fmt_ratio(s: &Spread) -> String {
    if s.min == s.max {
        format!("{:.2}x", s.median)
    } else {
        format!("{:.2}x ({:.2}-{:.2})", s.median, s.min, s.max)
    }
}

/// One line per cost, for a terminal or a list: "4k-randread: /dev/nvme0n1 through the block
/// layer against nvme-ng:/dev/ng0n1: latency +3.1 µs mean, ...".
pub fn lines(costs: &[Cost]) -> Vec<String> {
    costs
        .iter()
        .map(|c| {
            let cpu = c
                .cpu_us_per_io
                .as_ref()
                .map_or_else(String::new, |s| format!(", CPU {} per I/O", fmt_us(s)));
            format!(
                "{}: {} against {}: latency {} mean, {} p50, {} p99{}; IOPS {} ({} round{})",
                c.workload,
                c.block,
                c.passthrough,
                fmt_us(&c.latency_mean_us),
                fmt_us(&c.latency_p50_us),
                fmt_us(&c.latency_p99_us),
                cpu,
                fmt_ratio(&c.iops_ratio),
                c.rounds,
                if c.rounds == 1 { "" } else { "s" }
            )
        })
        .collect()
}

#[cfg(test)]
#[path = "block_layer_tests.rs"]
mod tests;
