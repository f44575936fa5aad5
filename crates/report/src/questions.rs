//! Every question a comparison answers, judged by the design's analysis
//! (`sanbench_stats::design`): per workload and pair of compared targets, the ratio of a figure
//! with its simultaneous interval and verdict.
//!
//! Two families share the comparison's 5 % family-wise error, each by Bonferroni over its own
//! questions and, under `--repeat auto`, by the plan's spending over looks:
//! * **primary** (4 %): throughput, MB/s on bandwidth workloads and IOPS on the others, one
//!   question per workload and pair, plus one average per group (bandwidth, IOPS) and pair;
//!   these decide when an adaptive comparison stops;
//! * **secondary** (1 %): p99 latency, CPU efficiency, and measured power efficiency, with
//!   their averages (0.5 % when the comparison ran response-time curves: their findings take
//!   the other half, [`CURVE_ALPHA`]); when cells fired faults (`--fault`), half of what
//!   the secondary family has goes to a third family,
//! * **failover**: per workload with faults, the longest stall of each cell (lower is
//!   better; a cell without a stall of 10 ms counts as 10 ms, the timeline's floor).
//!
//! Mean latency is never asked: in a closed loop it is queue depth over IOPS (Little's law), the
//! primary question again, and asking it would spend the error twice on one measurement.
//! Modeled power is never asked either (the model is linear in CPU: CPU efficiency again).

use std::collections::BTreeSet;

use sanbench_doc::{Comparison, Question};
use sanbench_stats::design::analysis::{
    judge_summary, judge_workloads, Judged, Margins, Table, Verdict,
};
use sanbench_stats::design::plan::{question_alpha, Design, ALPHA, ALPHA_PRIMARY, ALPHA_SECONDARY};

use crate::analysis::{flavour, power_is_modeled, Category, Flavour, Metric};

/// The error the response-time curve findings share (Holm, [`crate::curve`]): half of the
/// secondary family's, which the secondary questions then leave to them when a comparison ran
/// curves.
pub const CURVE_ALPHA: f64 = ALPHA_SECONDARY / 2.0;

/// A finding's average: the geometric mean of a pair's ratio over a group's workloads.
#[derive(Clone, Debug, PartialEq)]
pub struct Average {
    pub category: Category,
    pub flavour: Flavour,
    pub a: String,
    pub b: String,
    /// On a's figure over b's (raw, not oriented).
    pub judged: Judged,
    pub lower_is_better: bool,
    /// Workloads averaged.
    pub tests: usize,
}

/// The questions and averages of one comparison.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Judgement {
    pub questions: Vec<Question>,
    pub averages: Vec<Average>,
}

/// The design a document ran with; documents from before the Williams order ran a fixed
/// number of repetitions at a 10 % margin.
pub fn design_of(cmp: &Comparison) -> Design {
    cmp.design.clone().unwrap_or_else(|| {
        let rounds = cmp.cells.iter().map(|c| c.repeat + 1).max().unwrap_or(0);
        Design {
            order: "rotation".into(),
            seed: 0,
            square_len: cmp.targets.len().max(1) as u32,
            balance_len: cmp.targets.len().max(1) as u32,
            fixed: Some(cmp.repeat.max(rounds)),
            max_repeat: None,
            budget_s: None,
            min_effect: 0.10,
            rounds,
            stop: "fixed".into(),
            alpha: ALPHA,
            alpha_primary: ALPHA_PRIMARY,
            carry_over: Vec::new(),
            looks: None,
        }
    })
}

/// The lag-1 autocorrelation above which the report says the rounds persisted.
pub const LAG1_SEEN: f64 = 0.3;

/// A caveat when some questions' rounds were autocorrelated (a target's noise persisting from
/// round to round): their intervals were widened for it.
pub fn autocorrelation(j: &Judgement) -> Option<String> {
    let seen: Vec<f64> = j
        .questions
        .iter()
        .filter_map(|q| q.lag1.filter(|&p| p >= LAG1_SEEN))
        .collect();
    let worst = seen.iter().copied().fold(0.0, f64::max);
    (!seen.is_empty()).then(|| {
        format!(
            "{} of {} questions saw their rounds persist (lag-1 autocorrelation up to {worst:.2}): \
             a target's noise carried from one round to the next, so rounds told less than \
             independent ones would; their intervals are widened for it (results.json: lag1).",
            seen.len(),
            j.questions.len()
        )
    })
}

/// Per target, the estimated first-order carry-over on the throughput figures
/// ([`sanbench_stats::design::analysis::carry_over_by_target`]), and a warning for each one
/// at least half the margin: the model removes it from the verdicts, but a target that slows
/// (or speeds) whatever runs after it disturbs the comparison (a shared cache, a flush left
/// behind, a server still busy) and is worth knowing about.
pub fn carry_over(cmp: &Comparison) -> (Vec<Option<f64>>, Vec<String>) {
    let d = design_of(cmp);
    let rounds = rounds_of(cmp);
    let metrics: Vec<Option<Metric>> = cmp
        .workloads
        .iter()
        .map(|w| Some(primary_metric(flavour(w))))
        .collect();
    let est = sanbench_stats::design::analysis::carry_over_by_target(&table(cmp, &metrics, rounds));
    let warn = est
        .iter()
        .zip(&cmp.targets)
        .filter_map(|(e, t)| {
            let e = (*e)?;
            (e.abs() >= d.min_effect / 2.0).then(|| {
                format!(
                    "{}: the cell right after it ran {:.1} % {} than after the average target \
                     (first-order carry-over, estimated from the run order); the verdicts \
                     remove it, but the targets disturb each other: a shared cache, writes \
                     left to flush, or a server still busy.",
                    t.name,
                    e.abs() * 100.0,
                    if e > 0.0 { "faster" } else { "slower" }
                )
            })
        })
        .collect();
    (est, warn)
}

/// The primary figure of a workload: MB/s for bandwidth, IOPS otherwise.
pub fn primary_metric(f: Flavour) -> Metric {
    match f {
        Flavour::Bandwidth => Metric::MbPerS,
        Flavour::Io => Metric::Iops,
    }
}

/// One metric's question set: which metric, for which workloads, under which category.
struct Ask {
    category: Category,
    /// Per workload: the metric asked, if any.
    metrics: Vec<Option<Metric>>,
}

fn table(cmp: &Comparison, metrics: &[Option<Metric>], rounds: usize) -> Table {
    let mut t = Table::new(cmp.workloads.len(), cmp.targets.len(), rounds.max(1));
    for c in cmp.cells.iter().filter(|c| c.load_pct.is_none()) {
        let (Some(w), Some(ti)) = (
            cmp.workloads.iter().position(|w| w.id == c.workload),
            cmp.targets.iter().position(|t| t.name == c.target),
        ) else {
            continue;
        };
        let Some(m) = metrics[w] else { continue };
        if matches!(m, Metric::IopsPerWatt | Metric::MbPerWatt) && power_is_modeled(&c.result) {
            continue;
        }
        if let Some(v) = m.of(&c.result) {
            let r = c.round.unwrap_or(c.repeat) as usize;
            if matches!(m, Metric::Iops | Metric::MbPerS) {
                t.set_counted(w, ti, r, v, c.result.ios);
            } else {
                t.set(w, ti, r, v);
            }
        }
    }
    // The run order (round, then workload, then slot, as the plan hands cells out): each
    // cell's slot and the target of the cell before it, the model's period and carry-over
    // regressors. Documents without slots (before the Williams order) have neither.
    let mut order: Vec<(usize, usize, usize, usize)> = cmp
        .cells
        .iter()
        .filter(|c| c.load_pct.is_none())
        .filter_map(|c| {
            let w = cmp.workloads.iter().position(|w| w.id == c.workload)?;
            let ti = cmp.targets.iter().position(|t| t.name == c.target)?;
            let slot = c.slot? as usize;
            Some((c.round.unwrap_or(c.repeat) as usize, w, slot, ti))
        })
        .collect();
    order.sort_unstable();
    order.dedup();
    for (i, &(r, w, slot, ti)) in order.iter().enumerate() {
        t.set_slot(w, ti, r, slot);
        if i > 0 {
            t.set_prev(w, ti, r, order[i - 1].3);
        }
    }
    t
}

/// Rounds the comparison holds cells of (an old document's repetitions count as rounds).
fn rounds_of(cmp: &Comparison) -> usize {
    cmp.cells
        .iter()
        .map(|c| c.round.unwrap_or(c.repeat) as usize + 1)
        .max()
        .unwrap_or(0)
}

/// Judges every question of the comparison.
pub fn judge(cmp: &Comparison) -> Judgement {
    let mut d = design_of(cmp);
    let compared: Vec<usize> = (0..cmp.targets.len())
        .filter(|&i| !cmp.targets[i].reference)
        .collect();
    let rounds = rounds_of(cmp);
    // Cells of a round the comparison did not complete (Ctrl-C, an error) are judged as that
    // round's look, as the plan does: at the completed rounds' share the look they already
    // had would spend its error twice (issue 40).
    d.rounds = d.rounds.max(rounds as u32);
    let flavours: Vec<Flavour> = cmp.workloads.iter().map(flavour).collect();
    let primary = vec![Ask {
        category: Category::Bandwidth,
        metrics: flavours.iter().map(|&f| Some(primary_metric(f))).collect(),
    }];
    let per_flavour = |bw: Metric, io: Metric| -> Vec<Option<Metric>> {
        flavours
            .iter()
            .map(|f| Some(if *f == Flavour::Bandwidth { bw } else { io }))
            .collect()
    };
    let secondary = vec![
        Ask {
            category: Category::Latency,
            metrics: vec![Some(Metric::LatP99Us); flavours.len()],
        },
        Ask {
            category: Category::CpuEfficiency,
            metrics: per_flavour(Metric::MbPerCpu, Metric::IopsPerCpu),
        },
        Ask {
            category: Category::PowerEfficiency,
            metrics: per_flavour(Metric::MbPerWatt, Metric::IopsPerWatt),
        },
    ];
    // Workloads whose closed-loop cells fired faults ask how long the failover stalled.
    let faulted: Vec<Option<Metric>> = cmp
        .workloads
        .iter()
        .map(|w| {
            cmp.cells
                .iter()
                .any(|c| {
                    c.workload == w.id
                        && c.load_pct.is_none()
                        && c.result
                            .disruption
                            .as_ref()
                            .is_some_and(|d| d.cause == "fault")
                })
                .then_some(Metric::StallMs)
        })
        .collect();
    let secondary_alpha = if cmp.curve.is_empty() {
        ALPHA_SECONDARY
    } else {
        ALPHA_SECONDARY - CURVE_ALPHA
    };
    // The failover questions take half of what the secondary family has (Bonferroni).
    let (secondary_alpha, failover_alpha) = if faulted.iter().any(Option::is_some) {
        (secondary_alpha / 2.0, secondary_alpha / 2.0)
    } else {
        (secondary_alpha, 0.0)
    };
    let failover = vec![Ask {
        category: Category::Failover,
        metrics: faulted,
    }];
    let mut out = Judgement::default();
    for (family, family_alpha, asks) in [
        ("primary", ALPHA_PRIMARY, primary),
        ("secondary", secondary_alpha, secondary),
        ("failover", failover_alpha, failover),
    ] {
        if family_alpha <= 0.0 {
            continue;
        }
        judge_family(
            cmp,
            &d,
            &compared,
            rounds,
            family,
            family_alpha,
            &asks,
            &mut out,
        );
    }
    out
}

#[allow(clippy::too_many_arguments)]
fn judge_family(
    cmp: &Comparison,
    d: &Design,
    compared: &[usize],
    rounds: usize,
    family: &str,
    family_alpha: f64,
    asks: &[Ask],
    out: &mut Judgement,
) {
    let pairs = compared.len() * compared.len().saturating_sub(1) / 2;
    if pairs == 0 {
        return;
    }
    // First which questions have data at all (a metric nobody measured asks nothing), so that
    // the family's size, and with it each question's error, is known before any is judged.
    let tables: Vec<Table> = asks
        .iter()
        .map(|a| table(cmp, &a.metrics, rounds))
        .collect();
    let mut asked: Vec<(usize, usize)> = Vec::new(); // (ask, workload)
    let mut groups: BTreeSet<(usize, Flavour)> = BTreeSet::new();
    for (ai, a) in asks.iter().enumerate() {
        for (w, m) in a.metrics.iter().enumerate() {
            // Asked when two compared targets have the figure in a common round.
            let has = m.is_some()
                && (0..rounds).any(|r| {
                    compared
                        .iter()
                        .filter(|&&t| tables[ai].get(w, t, r).is_some())
                        .count()
                        >= 2
                });
            if has {
                asked.push((ai, w));
                groups.insert((ai, flavour(&cmp.workloads[w])));
            }
        }
    }
    // The primary family's size is fixed by the design (every workload asks), as the plan counted.
    let size = if family == "primary" {
        (cmp.workloads.len() + distinct_flavours(cmp)) * pairs
    } else {
        (asked.len() + groups.len()) * pairs
    };
    let mg = Margins {
        min_effect: d.min_effect,
        alpha: question_alpha(family_alpha, size, d),
        project: true,
    };
    // Each metric's workloads judged together, as the plan judges them: a pair's persistence
    // across rounds is estimated from all its workloads.
    let mut metrics: Vec<usize> = asked.iter().map(|&(ai, _)| ai).collect();
    metrics.dedup();
    for ai in metrics {
        let ws: Vec<usize> = asked
            .iter()
            .filter(|&&(a, _)| a == ai)
            .map(|&(_, w)| w)
            .collect();
        for ans in judge_workloads(&tables[ai], &ws, compared, mg) {
            let w = ans.workload;
            let m = asks[ai].metrics[w].expect("asked");
            out.questions.push(question(
                cmp,
                family,
                m,
                &ans.judged,
                w,
                ans.a,
                ans.b,
                mg.alpha,
            ));
        }
    }
    for &(ai, fl) in &groups {
        let ws: Vec<usize> = asked
            .iter()
            .filter(|&&(a, w)| a == ai && flavour(&cmp.workloads[w]) == fl)
            .map(|&(_, w)| w)
            .collect();
        let m = asks[ai].metrics[ws[0]].expect("asked");
        for i in 0..compared.len() {
            for j in i + 1..compared.len() {
                if let Some(judged) =
                    judge_summary(&tables[ai], &ws, compared, compared[i], compared[j], mg)
                {
                    out.averages.push(Average {
                        category: if family == "primary" {
                            if fl == Flavour::Bandwidth {
                                Category::Bandwidth
                            } else {
                                Category::Iops
                            }
                        } else {
                            asks[ai].category
                        },
                        flavour: fl,
                        a: cmp.targets[compared[i]].name.clone(),
                        b: cmp.targets[compared[j]].name.clone(),
                        judged,
                        lower_is_better: m.lower_is_better(),
                        tests: ws.len(),
                    });
                }
            }
        }
    }
}

fn distinct_flavours(cmp: &Comparison) -> usize {
    cmp.workloads
        .iter()
        .map(flavour)
        .collect::<BTreeSet<_>>()
        .len()
}

#[allow(clippy::too_many_arguments)]
fn question(
    cmp: &Comparison,
    family: &str,
    m: Metric,
    j: &Judged,
    w: usize,
    a: usize,
    b: usize,
    alpha: f64,
) -> Question {
    let (a, b) = (&cmp.targets[a].name, &cmp.targets[b].name);
    let (verdict, better) = oriented(j.verdict, m.lower_is_better(), a, b);
    let bounded = j.half_width.is_finite();
    Question {
        workload: cmp.workloads[w].id.clone(),
        metric: serde_json::to_value(m)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default(),
        family: family.into(),
        a: a.clone(),
        b: b.clone(),
        ratio: j.ratio(),
        ci_low: bounded.then(|| j.low()),
        ci_high: bounded.then(|| j.high()),
        verdict: verdict.into(),
        better,
        rounds: j.rounds as u32,
        more_rounds: j.more_rounds,
        alpha,
        lag1: (j.lag1 > 0.0).then_some(j.lag1),
    }
}

/// A verdict on a's figure over b's, from a's side: "better" / "worse" / "equivalent" /
/// "inconclusive", and the better target's name.
pub fn oriented(
    v: Verdict,
    lower_is_better: bool,
    a: &str,
    b: &str,
) -> (&'static str, Option<String>) {
    match (v, lower_is_better) {
        (Verdict::Higher, false) | (Verdict::Lower, true) => ("better", Some(a.to_string())),
        (Verdict::Higher, true) | (Verdict::Lower, false) => ("worse", Some(b.to_string())),
        (Verdict::Equivalent, _) => ("equivalent", None),
        (Verdict::Inconclusive, _) => ("inconclusive", None),
    }
}

/// The metric a question asks about.
pub fn metric_of(q: &Question) -> Option<Metric> {
    Metric::ALL.into_iter().find(|m| {
        serde_json::to_value(m)
            .ok()
            .is_some_and(|v| v.as_str() == Some(q.metric.as_str()))
    })
}

/// A question's ratio and interval turned so that above 1 favours a (for latency: b's figure
/// over a's), so that "right of 1" and "above 1" mean the same on every figure.
pub fn oriented_ratio(q: &Question) -> (f64, Option<f64>, Option<f64>) {
    let flip = metric_of(q).is_some_and(Metric::lower_is_better);
    if flip {
        (
            1.0 / q.ratio,
            q.ci_high.map(|h| 1.0 / h),
            q.ci_low.map(|l| 1.0 / l),
        )
    } else {
        (q.ratio, q.ci_low, q.ci_high)
    }
}

/// "1.8x [1.5-2.2] better": the oriented ratio, its interval and the verdict from a's side.
pub fn summary(q: &Question) -> String {
    let (r, lo, hi) = oriented_ratio(q);
    format!(
        "{} {} {}",
        crate::fmt::fmt_ratio(r),
        crate::fmt::fmt_interval(lo, hi),
        q.verdict
    )
}

/// One line of a workload's verdict table: the pair, "1.8x [1.5-2.2]" and the verdict from
/// the pair's first target's side (with the rounds that would likely decide it).
pub struct VerdictLine {
    pub pair: String,
    pub ratio: String,
    pub verdict: String,
}

/// The throughput verdicts of one workload (the primary questions), for the results tables;
/// the figure's label ("MB/s", "IOPS") is the first of the pair.
pub fn verdict_lines(j: &Judgement, workload: &str) -> (String, Vec<VerdictLine>) {
    let qs: Vec<&Question> = j
        .questions
        .iter()
        .filter(|q| q.family == "primary" && q.workload == workload)
        .collect();
    let figure = qs
        .first()
        .and_then(|q| metric_of(q))
        .map_or(String::new(), |m| m.label().to_string());
    let lines = qs
        .iter()
        .map(|q| VerdictLine {
            pair: format!("{} / {}", q.a, q.b),
            ratio: format!(
                "{} {}",
                crate::fmt::fmt_ratio(q.ratio),
                crate::fmt::fmt_interval(q.ci_low, q.ci_high)
            ),
            verdict: match q.more_rounds.filter(|_| q.verdict == "inconclusive") {
                Some(m) => format!("inconclusive (~{m} more rounds)"),
                None => q.verdict.clone(),
            },
        })
        .collect();
    (figure, lines)
}
