//! Two runs side by side (`RUN_A` vs `RUN_B`): per workload, target and metric the change in
//! percent and whether it is outside the noise, by the same rule as the key findings.

use std::fmt::Write as _;

use serde::Serialize;

use sanbench_doc::Comparison;
use sanbench_stats::{ratio_outside_noise, MeanCi};

use crate::analysis::{Analysis, Metric};

/// The metrics a diff shows, in order.
pub const DIFF_METRICS: [Metric; 6] = [
    Metric::MbPerS,
    Metric::Iops,
    Metric::LatMeanUs,
    Metric::LatP99Us,
    Metric::IopsPerCpu,
    Metric::IopsPerWatt,
];

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DiffRow {
    pub workload: String,
    pub target: String,
    pub metric: Metric,
    pub a: MeanCi,
    pub b: MeanCi,
    /// (b − a) ÷ a × 100; `None` when a is zero.
    pub change_pct: Option<f64>,
    pub outside_noise: bool,
    /// B is better than A (lower for latency), judged only when outside the noise.
    pub improved: Option<bool>,
    /// Why A and B cannot be compared on this metric, when they cannot (then not judged).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_comparable: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Diff {
    pub rows: Vec<DiffRow>,
    /// (workload, target) cells present in only one of the runs.
    pub only_in_a: Vec<(String, String)>,
    pub only_in_b: Vec<(String, String)>,
    /// What a reader must know about the two runs together.
    pub notes: Vec<String>,
}

/// Whether a metric rests on the host's CPU (itself, or the power model that follows it).
fn rests_on_cpu(m: Metric) -> bool {
    matches!(m, Metric::IopsPerCpu | Metric::IopsPerWatt)
}

/// Compares run A with run B, matching cells by workload id and target name.
pub fn diff(a: &Comparison, b: &Comparison, min_rel: f64) -> Diff {
    let (an_a, an_b) = (Analysis::new(a), Analysis::new(b));
    let mut out = Diff::default();
    // One run's host CPU counted from busy ticks, the other's as the window less idle: a
    // change in CPU (or modeled power) efficiency between them is partly the method's.
    let ticks = |c: &Comparison| crate::analysis::ticked_cells(c) > 0;
    let a_ticked = ticks(a);
    let methods_differ = a_ticked != ticks(b);
    if methods_differ {
        let (old, new) = if a_ticked { ("A", "B") } else { ("B", "A") };
        out.notes.push(format!(
            "{old}'s host CPU was counted from busy ticks (an earlier sanbench), {new}'s as the \
             window less idle: their CPU and power efficiency are not compared (docs/MEASURE.md, \
             CPU)"
        ));
    }
    for ((w, t), sa) in &an_a.stats {
        let Some(sb) = an_b.stats.get(&(w.clone(), t.clone())) else {
            out.only_in_a.push((w.clone(), t.clone()));
            continue;
        };
        for m in DIFF_METRICS {
            let (Some(ma), Some(mb)) = (sa.get(m), sb.get(m)) else {
                continue;
            };
            let change_pct = (ma.mean != 0.0).then(|| (mb.mean - ma.mean) / ma.mean * 100.0);
            let not_comparable =
                (methods_differ && rests_on_cpu(m)).then(|| "CPU measured two ways".to_string());
            let outside_noise = not_comparable.is_none() && ratio_outside_noise(ma, mb, min_rel);
            let improved = outside_noise.then(|| {
                if m.lower_is_better() {
                    mb.mean < ma.mean
                } else {
                    mb.mean > ma.mean
                }
            });
            out.rows.push(DiffRow {
                workload: w.clone(),
                target: t.clone(),
                metric: m,
                a: *ma,
                b: *mb,
                change_pct,
                outside_noise,
                improved,
                not_comparable,
            });
        }
    }
    for k in an_b.stats.keys() {
        if !an_a.stats.contains_key(k) {
            out.only_in_b.push(k.clone());
        }
    }
    out
}

fn fmt_ci(m: &MeanCi) -> String {
    let v = sanbench_units::fmt::num(m.mean);
    if m.n > 1 {
        format!("{v} ± {}", sanbench_units::fmt::num(m.ci95))
    } else {
        v
    }
}

/// A plain-text table for the terminal.
pub fn render_text(d: &Diff) -> String {
    let header = [
        "workload", "target", "metric", "A", "B", "change", "verdict",
    ];
    let mut rows: Vec<[String; 7]> = Vec::new();
    for r in &d.rows {
        let verdict = match (&r.not_comparable, r.improved) {
            (Some(why), _) => why.as_str(),
            (None, None) => "inside the noise",
            (None, Some(true)) => "better",
            (None, Some(false)) => "worse",
        };
        rows.push([
            r.workload.clone(),
            r.target.clone(),
            r.metric.label().to_string(),
            fmt_ci(&r.a),
            fmt_ci(&r.b),
            r.change_pct
                .map(|c| format!("{c:+.1} %"))
                .unwrap_or_else(|| "n/a".into()),
            verdict.into(),
        ]);
    }
    let mut s = crate::fmt::text_table(&header.map(String::from), &rows);
    for (label, cells) in [("only in A", &d.only_in_a), ("only in B", &d.only_in_b)] {
        for (w, t) in cells {
            let _ = writeln!(s, "{label}: {w} on {t}");
        }
    }
    for n in &d.notes {
        let _ = writeln!(s, "note: {n}");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use sanbench_store::fixture::sample_comparison;

    #[test]
    fn identical_runs_are_inside_the_noise() {
        let a = sample_comparison();
        let d = diff(&a, &a, 0.10);
        assert_eq!(d.rows.len(), 4 * 3 * DIFF_METRICS.len());
        assert!(d
            .rows
            .iter()
            .all(|r| !r.outside_noise && r.change_pct == Some(0.0)));
        assert!(d.only_in_a.is_empty() && d.only_in_b.is_empty());
    }

    #[test]
    fn doubled_iops_and_halved_latency_are_improvements() {
        let a = sample_comparison();
        let mut b = a.clone();
        b.cells.retain(|c| c.target != "iSCSI 10G");
        for c in b.cells.iter_mut().filter(|c| c.target == "FC 8G") {
            c.result.iops *= 2.0;
            c.result.latency_us.mean /= 2.0;
        }
        let d = diff(&a, &b, 0.10);
        let row = |m: Metric| {
            d.rows
                .iter()
                .find(|r| r.workload == "db-8k-qd4" && r.target == "FC 8G" && r.metric == m)
                .unwrap()
        };
        let iops = row(Metric::Iops);
        assert!((iops.change_pct.unwrap() - 100.0).abs() < 1e-9);
        assert_eq!(iops.improved, Some(true));
        let lat = row(Metric::LatMeanUs);
        assert!((lat.change_pct.unwrap() + 50.0).abs() < 1e-9);
        assert_eq!(lat.improved, Some(true));
        assert_eq!(row(Metric::MbPerS).improved, None);
        assert_eq!(d.only_in_a.len(), 4);
        let text = render_text(&d);
        assert!(text.contains("+100.0 %"));
        assert!(text.contains("only in A: db-8k-qd16 on iSCSI 10G"));
        assert!(d.notes.is_empty());
    }

    /// A run whose host CPU was counted from busy ticks (its breakdown has no `tick_busy_pct`)
    /// against one measured as the window less idle: CPU and power efficiency are not judged,
    /// and a note says why; the rest is.
    #[test]
    fn cpu_efficiency_measured_two_ways_is_not_judged() {
        let cpu = |now: bool| sanbench_store::fixture::cpu_block(!now);
        let mut a = sample_comparison();
        a.cells.iter_mut().for_each(|c| c.result.cpu = cpu(false));
        let mut b = a.clone();
        for c in b.cells.iter_mut() {
            c.result.cpu = cpu(true);
            c.result.iops *= 2.0;
            c.result.efficiency.iops_per_cpu_pct =
                c.result.efficiency.iops_per_cpu_pct.map(|x| x * 2.0);
        }
        let d = diff(&a, &b, 0.10);
        assert_eq!(d.notes.len(), 1, "{:?}", d.notes);
        assert_eq!(
            d.notes[0],
            "A's host CPU was counted from busy ticks (an earlier sanbench), B's as the window \
             less idle: their CPU and power efficiency are not compared (docs/MEASURE.md, CPU)"
        );
        for r in &d.rows {
            let cpu_based = matches!(r.metric, Metric::IopsPerCpu | Metric::IopsPerWatt);
            assert_eq!(r.not_comparable.is_some(), cpu_based, "{r:?}");
            if cpu_based {
                assert_eq!((r.outside_noise, r.improved), (false, None));
            }
        }
        assert!(d
            .rows
            .iter()
            .any(|r| r.metric == Metric::Iops && r.improved == Some(true)));
        let text = render_text(&d);
        assert!(text.contains("CPU measured two ways"));
        assert!(text.contains("note: A's host CPU"));
        // Both measured the same way: judged as ever.
        let d = diff(&b, &b, 0.10);
        assert!(d.notes.is_empty() && d.rows.iter().all(|r| r.not_comparable.is_none()));
    }
}
