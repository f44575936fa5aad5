//! Response time under load (`compare --curve`): per workload, per target, per level, the
//! open-loop points' achieved rate and response time over the repetitions, for the SPC-style
//! table and the response-time vs IOPS chart ("hockey stick").

use sanbench_doc::Comparison;
use sanbench_stats::{holm, mean_ci95, welch_p};

use crate::analysis::Category;
use crate::findings::{fmt_ratio, Finding};
use crate::questions::CURVE_ALPHA;

/// Repetitions a curve point needs before a curve finding is drawn from it.
pub const MIN_REPEATS: usize = 3;

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

impl Point {
    /// The point's cells after its target's, as text: load, asked IOPS, achieved IOPS (with
    /// ✗ when a repetition missed its rate or lagged), mean and p99 µs.
    pub fn cells(&self) -> [String; 5] {
        [
            format!("{} %", self.pct),
            format!("{:.0}", self.asked_iops),
            format!(
                "{:.0}{}",
                self.achieved_iops,
                if self.valid { "" } else { " ✗" }
            ),
            format!("{:.1}", self.mean_us),
            format!("{:.1}", self.p99_us),
        ]
    }
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

/// Findings on the curves: "At 80 % of its maximum, A's p99 response time is 3.2x lower than
/// B's (4 KiB random read)". One question per (workload, level, pair of graded targets) with
/// at least [`MIN_REPEATS`] valid repetitions each: Welch's test on the log of the p99s, Holm
/// over every curve question of the comparison (the curve findings are their own family at
/// [`CURVE_ALPHA`]: half the secondary family's share, so that everything the report prints
/// keeps 5 % together), and a difference larger than `min_rel`.
pub fn findings(c: &Comparison, min_rel: f64) -> Vec<Finding> {
    let graded: Vec<&str> = c
        .targets
        .iter()
        .filter(|t| !t.reference)
        .map(|t| t.name.as_str())
        .collect();
    // (workload, pct, a, b, p, mean p99 of a, of b)
    let mut qs: Vec<(usize, f64, &str, &str, f64, f64, f64)> = Vec::new();
    let p99s = |w: &str, t: &str, pct: f64| -> Option<Vec<f64>> {
        let v: Vec<&sanbench_doc::run::TargetResult> =
            c.curve_cells_of(w, t, pct).map(|c| &c.result).collect();
        let valid = v
            .iter()
            .all(|r| r.open_loop.as_ref().is_some_and(|o| o.valid));
        (valid && v.len() >= MIN_REPEATS && v.iter().all(|r| r.latency_us.p99 > 0.0))
            .then(|| v.iter().map(|r| r.latency_us.p99).collect())
    };
    for (wi, w) in c.workloads.iter().enumerate() {
        for &pct in &c.curve {
            for (i, a) in graded.iter().enumerate() {
                for b in &graded[i + 1..] {
                    let (Some(xa), Some(xb)) = (p99s(&w.id, a, pct), p99s(&w.id, b, pct)) else {
                        continue;
                    };
                    let la: Vec<f64> = xa.iter().map(|x| x.ln()).collect();
                    let lb: Vec<f64> = xb.iter().map(|x| x.ln()).collect();
                    if let Some(p) = welch_p(&mean_ci95(&la), &mean_ci95(&lb)) {
                        let m = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
                        qs.push((wi, pct, a, b, p, m(&xa), m(&xb)));
                    }
                }
            }
        }
    }
    let ps: Vec<f64> = qs.iter().map(|q| q.4).collect();
    let mut out = Vec::new();
    for (q, sig) in qs.iter().zip(holm(&ps, CURVE_ALPHA)) {
        let &(wi, pct, a, b, _, ma, mb) = q;
        let (better, worse, r) = if ma < mb {
            (a, b, mb / ma)
        } else {
            (b, a, ma / mb)
        };
        if !sig || r - 1.0 <= min_rel {
            continue;
        }
        let w = &c.workloads[wi];
        out.push(Finding {
            category: Category::Latency,
            label: format!("p99 response time at {pct} % load"),
            kind: "better".into(),
            better: better.to_string(),
            worse: worse.to_string(),
            average: r,
            ci_low: None,
            ci_high: None,
            tests: 1,
            compared: 1,
            inconclusive: 0,
            workloads: vec![w.id.clone()],
            max: r,
            max_workload: w.id.clone(),
            max_title: w.title.clone(),
            modeled_power: false,
            text: format!(
                "At {pct} % of its maximum, {better}'s p99 response time is {} lower than \
                 {worse}'s ({})",
                fmt_ratio(r),
                w.title
            ),
        });
    }
    out.sort_by(|x, y| y.average.total_cmp(&x.average));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use sanbench_doc::run::{OpenLoop, TargetResult};
    use sanbench_doc::Cell;
    use sanbench_store::fixture::sample_comparison;

    fn with_curve(p99: &[(&str, [f64; 3])]) -> Comparison {
        let mut c = sample_comparison();
        c.curve = vec![80.0];
        let w = c.workloads[0].id.clone();
        for (t, xs) in p99 {
            for (rep, &x) in xs.iter().enumerate() {
                let mut r = TargetResult {
                    iops: 1000.0,
                    open_loop: Some(OpenLoop {
                        asked_iops: 1000.0,
                        achieved_iops: 1000.0,
                        valid: true,
                        ..OpenLoop::default()
                    }),
                    ..TargetResult::default()
                };
                r.latency_us.p99 = x;
                r.latency_us.mean = x / 3.0;
                c.cells.push(Cell {
                    workload: w.clone(),
                    target: t.to_string(),
                    repeat: rep as u32,
                    round: None,
                    slot: None,
                    started_at: None,
                    result: r,
                    steady: None,
                    load_pct: Some(80.0),
                    hosts: Vec::new(),
                });
            }
        }
        c
    }

    #[test]
    fn a_real_difference_at_a_level_is_a_finding_and_noise_is_not() {
        let names: Vec<String> = sample_comparison()
            .targets
            .iter()
            .map(|t| t.name.clone())
            .collect();
        let (a, b) = (names[0].as_str(), names[1].as_str());
        let c = with_curve(&[(a, [100.0, 102.0, 98.0]), (b, [320.0, 330.0, 310.0])]);
        let f = findings(&c, 0.10);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(
            f[0].text.starts_with(&format!(
                "At 80 % of its maximum, {a}'s p99 response time is 3.2x lower than {b}'s"
            )),
            "{}",
            f[0].text
        );
        let curves = curves(&c);
        assert_eq!(curves.len(), 2);
        assert_eq!(curves[0].points[0].repeats, 3);
        // Within the noise: nothing.
        let c = with_curve(&[(a, [100.0, 130.0, 90.0]), (b, [110.0, 95.0, 125.0])]);
        assert!(findings(&c, 0.10).is_empty());
        // An invalid point never makes a finding.
        let mut c = with_curve(&[(a, [100.0, 102.0, 98.0]), (b, [320.0, 330.0, 310.0])]);
        if let Some(o) = c.cells.last_mut().unwrap().result.open_loop.as_mut() {
            o.valid = false;
        }
        assert!(findings(&c, 0.10).is_empty());
    }
}
