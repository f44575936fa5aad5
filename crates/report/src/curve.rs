//! Response time under load (`compare --curve`): per workload, per target, per level, the
//! open-loop points' achieved rate and response time over the repetitions, for the SPC-style
//! table and the response-time vs IOPS chart ("hockey stick").

use sanbench_store::Comparison;

/// One level of one target's curve, averaged over its repetitions.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    pub pct: f64,
    pub asked_iops: f64,
    pub achieved_iops: f64,
    pub mean_us: f64,
    pub p99_us: f64,
    /// Every repetition's point was valid (rate met, issue lag within its bound).
    pub valid: bool,
    pub repeats: usize,
}

/// One target's curve on one workload.
#[derive(Clone, Debug, PartialEq)]
pub struct Curve {
    pub workload: String,
    pub target: String,
    pub points: Vec<Point>,
}

fn mean(v: impl Iterator<Item = f64>) -> f64 {
    let (n, s) = v.fold((0usize, 0.0), |(n, s), x| (n + 1, s + x));
    if n == 0 {
        0.0
    } else {
        s / n as f64
    }
}

/// Every curve of the comparison, in workload then target order (empty without `--curve`).
pub fn curves(c: &Comparison) -> Vec<Curve> {
    let mut out = Vec::new();
    for w in &c.workloads {
        for t in &c.targets {
            let points: Vec<Point> = c
                .curve
                .iter()
                .filter_map(|&pct| {
                    let cells: Vec<_> = c.curve_cells_of(&w.id, &t.name, pct).collect();
                    if cells.is_empty() {
                        return None;
                    }
                    let rs = || cells.iter().map(|c| &c.result);
                    Some(Point {
                        pct,
                        asked_iops: mean(
                            rs().map(|r| r.open_loop.as_ref().map_or(0.0, |o| o.asked_iops)),
                        ),
                        achieved_iops: mean(rs().map(|r| r.iops)),
                        mean_us: mean(rs().map(|r| r.latency_us.mean)),
                        p99_us: mean(rs().map(|r| r.latency_us.p99)),
                        valid: rs().all(|r| r.open_loop.as_ref().is_some_and(|o| o.valid)),
                        repeats: cells.len(),
                    })
                })
                .collect();
            if !points.is_empty() {
                out.push(Curve {
                    workload: w.id.clone(),
                    target: t.name.clone(),
                    points,
                });
            }
        }
    }
    out
}

/// The least mean response time at the lowest level (SPC-1's "least response time"), per
/// target of one workload.
pub fn least_response(curves: &[Curve], workload: &str) -> Vec<(String, f64)> {
    curves
        .iter()
        .filter(|c| c.workload == workload)
        .filter_map(|c| Some((c.target.clone(), c.points.first()?.mean_us)))
        .collect()
}
