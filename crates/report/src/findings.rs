//! The studies' "Key Findings", drawn from the comparison's judged questions
//! ([`crate::questions`]): every sentence rests on intervals that hold together with every
//! other interval the report prints (5 % family-wise error).
//!
//! Per category (bandwidth, IOPS, p99 latency, CPU and measured power efficiency, split by
//! flavour as Third I/O did) and pair of compared targets:
//! * **better**: A wins the workloads whose whole interval lies beyond the margin
//!   (`--min-effect`, 10 %) in A's favour. When the geometric mean over *all* the category's
//!   workloads (not the mean of the winners, which would lean upward) is itself beyond the
//!   margin in A's favour, its whole interval above 1 + margin as a won test's must be, the
//!   sentence leads with it, then how many tests A won and the largest ratio with its
//!   workload: "NBD shows 1.8x [1.5-2.2] greater bandwidth than iSCSI (2 of 2 tests; maximum
//!   1.9x in seq write 1 MiB)". Otherwise it leads with the tests won and says what the
//!   average's interval says, judged against 1 and the margin as a test is: "NBD shows
//!   greater bandwidth than NVMe-TCP on 1 of 2 tests (maximum 1.8x in seq write); over all 2:
//!   1.1x [0.88-1.4], inconclusive" (or "within 10 %", "greater by less than 10 %",
//!   "greater, not shown beyond 10 %", "in B's favour ...": [`average_says`]).
//! * **equivalent**: workloads whose whole interval lies within ± the margin (an equivalence
//!   test, TOST): "NBD and NVMe-TCP are within 10 % on 3 of 5 IOPS tests; 2 inconclusive".
//!
//! What never makes a finding: a reference target (a ceiling shown beside the targets), a
//! comparison of one round (no noise estimate: [`withheld`]), mean latency (closed loop: IOPS
//! again), modeled power (CPU again).

use serde::Serialize;

use sanbench_doc::{Comparison, Question, WorkloadEntry};

use crate::analysis::{flavour, Category, Flavour};
use crate::questions::{Average, Judgement};

pub use crate::fmt::{fmt_interval, fmt_ratio};

mod stall;
use stall::stall_of;

/// Family-wise error of everything the report prints.
pub const ALPHA: f64 = sanbench_stats::design::plan::ALPHA;

/// One key finding.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Finding {
    pub category: Category,
    /// "bandwidth", "IOPS", "p99 latency", "bandwidth CPU efficiency", "database power
    /// efficiency".
    pub label: String,
    /// "better" (a difference beyond the margin) or "equivalent" (within it).
    pub kind: String,
    /// The better target (for "equivalent": the first of the two).
    pub better: String,
    pub worse: String,
    /// The geometric mean of better's ratio over `worse` on every workload of the category
    /// (oriented: above 1 favours `better`).
    pub average: f64,
    /// Its simultaneous interval (`None` while unbounded).
    pub ci_low: Option<f64>,
    pub ci_high: Option<f64>,
    /// Workloads `better` won ("better"), or found within the margin ("equivalent").
    pub tests: usize,
    /// Workloads where both targets had the figure.
    pub compared: usize,
    /// Workloads neither decided nor equivalent.
    pub inconclusive: usize,
    /// The workloads of those `tests` (ids): won for "better", within the margin for
    /// "equivalent". What a replication compares test by test.
    pub workloads: Vec<String>,
    pub max: f64,
    pub max_workload: String,
    pub max_title: String,
    /// Always false: modeled power makes no findings (kept for the document's shape).
    pub modeled_power: bool,
    /// The sentence, in the studies' form.
    pub text: String,
}

/// Why a comparison has no findings at all, when that is for want of rounds.
pub fn withheld(cmp: &Comparison, rounds: u32) -> Option<String> {
    (rounds < 2 && !cmp.cells.is_empty()).then(|| {
        format!(
            "one round: no noise estimate, no findings{}",
            if cmp.incomplete {
                " (the comparison stopped early)"
            } else {
                ""
            }
        )
    })
}

/// How many rounds ran and why the comparison stopped, for the report's methods note.
pub fn rounds_text(d: &sanbench_stats::design::plan::Design) -> String {
    let why = match d.stop.as_str() {
        "fixed" => "as asked (--repeat)".to_string(),
        "decided" => "every throughput question decided".to_string(),
        "max_rounds" => format!(
            "the round cap (--max-repeat {}) before every throughput question was decided",
            d.max_repeat.unwrap_or(0)
        ),
        "budget" => format!(
            "the budget ({:.0} s): another round would not have fit",
            d.budget_s.unwrap_or(0.0)
        ),
        _ => "interrupted before the plan's end".to_string(),
    };
    format!(
        "{} round{} ran ({} order, seed {}); stopped: {why}.",
        d.rounds,
        if d.rounds == 1 { "" } else { "s" },
        if d.order == "williams" {
            "Williams"
        } else {
            "rotated"
        },
        d.seed
    )
}

/// How findings are drawn, for the report's methods note.
pub fn method(min_effect: f64) -> String {
    format!(
        "Targets run in a Williams order (every target in every slot and after every other \
         target equally often). Each question (a workload, two targets, one figure) gets the \
         geometric-mean ratio over the rounds, paired on rounds (a two-way model: the round's \
         drift cancels), with the verdicts' interval: every verdict the report draws is right \
         together with {} % family-wise error (Bonferroni; 4 % for throughput, the primary \
         question, 1 % for p99 latency and CPU and measured power efficiency; under --repeat \
         auto each look spends its share, so stopping when decided keeps the error). A target \
         is better when the whole interval lies beyond {} %, equivalent when it lies within \
         ± {} % (TOST), otherwise inconclusive. Only one of the three can be true, so each is \
         tested at the question's full share (the partitioning principle): the intervals \
         hold together with at least 90 %. Mean latency is not asked (closed loop: queue \
         depth / IOPS, the primary question again); modeled power is not asked (the model \
         restates CPU). A finding's average is the geometric mean over all its category's \
         tests. Reference targets are ceilings: shown, never compared.",
        sanbench_units::fmt::short(ALPHA * 100.0),
        sanbench_units::fmt::short(min_effect * 100.0),
        sanbench_units::fmt::short(min_effect * 100.0),
    )
}

/// The label of a category over workloads of one flavour; `database` names the IOPS flavour
/// when every workload of it belongs to the "database" group, as in Third I/O.
fn label(c: Category, f: Flavour, all_database: bool) -> String {
    let io = if all_database { "database" } else { "IOPS" };
    match (c, f) {
        (Category::Bandwidth, _) => "bandwidth".into(),
        (Category::Iops, _) => "IOPS".into(),
        (Category::Latency, _) => "p99 latency".into(),
        (Category::CpuEfficiency, Flavour::Bandwidth) => "bandwidth CPU efficiency".into(),
        (Category::CpuEfficiency, Flavour::Io) => format!("{io} CPU efficiency"),
        (Category::PowerEfficiency, Flavour::Bandwidth) => "bandwidth power efficiency".into(),
        (Category::PowerEfficiency, Flavour::Io) => format!("{io} power efficiency"),
        (Category::Failover, _) => "failover stall".into(),
    }
}

/// The category a question's metric belongs to.
fn category_of(metric: &str, f: Flavour) -> Option<Category> {
    Some(match metric {
        "mb_per_s" | "iops" => {
            if f == Flavour::Bandwidth {
                Category::Bandwidth
            } else {
                Category::Iops
            }
        }
        "lat_p99_us" => Category::Latency,
        "iops_per_cpu" | "mb_per_cpu" => Category::CpuEfficiency,
        "iops_per_watt" | "mb_per_watt" => Category::PowerEfficiency,
        "stall_ms" => Category::Failover,
        _ => return None,
    })
}

/// Every key finding, by category (primary first), then flavour, then average ratio.
pub fn findings(cmp: &Comparison, j: &Judgement, min_effect: f64) -> Vec<Finding> {
    let mut out = Vec::new();
    for cat in Category::ALL.into_iter().chain([Category::Failover]) {
        for fl in [Flavour::Bandwidth, Flavour::Io] {
            let ws: Vec<&WorkloadEntry> =
                cmp.workloads.iter().filter(|w| flavour(w) == fl).collect();
            let all_db =
                !ws.is_empty() && ws.iter().all(|w| w.group.eq_ignore_ascii_case("database"));
            let lbl = label(cat, fl, all_db);
            let mut group = Vec::new();
            for av in j
                .averages
                .iter()
                .filter(|a| a.category == cat && a.flavour == fl)
            {
                let qs: Vec<&Question> = j
                    .questions
                    .iter()
                    .filter(|q| {
                        q.a == av.a
                            && q.b == av.b
                            && ws.iter().any(|w| w.id == q.workload)
                            && category_of(&q.metric, fl) == Some(cat)
                    })
                    .collect();
                group.extend(pair_findings(cmp, cat, &lbl, av, &qs, min_effect));
            }
            // Differences first; those whose average is decided lead, by that average; the
            // others follow by the share of tests won, then the largest ratio: an order that
            // the noise around an undecided average cannot change.
            group.sort_by(|x, y| {
                let (dx, dy) = (
                    average_decided(x.ci_low, min_effect),
                    average_decided(y.ci_low, min_effect),
                );
                let by_average = y.average.total_cmp(&x.average);
                (x.kind != "better")
                    .cmp(&(y.kind != "better"))
                    .then(dy.cmp(&dx))
                    .then(if dx && dy {
                        by_average
                    } else {
                        (y.tests * x.compared)
                            .cmp(&(x.tests * y.compared))
                            .then(y.max.total_cmp(&x.max))
                            .then(by_average)
                    })
            });
            out.extend(group);
        }
    }
    out
}

/// The findings a terminal shows: the first `per_label` of each label ("bandwidth", "IOPS",
/// ...), labels in the report's order. [`findings`] orders each label's findings strongest
/// first (differences, decided averages, then tests won and the largest ratio), so these are
/// the strongest of each kind, picked by an order the noise around an undecided average
/// cannot change; the report lists them all.
///
/// A pair split within a label (each side won some tests) holds a "better" finding each way,
/// and each one's sentence names the other side's wins: the headline shows the first of the
/// two only, so that its places go to other pairs.
pub fn headline(all: &[Finding], per_label: usize) -> Vec<&Finding> {
    let mut seen: Vec<(&str, usize)> = Vec::new();
    let mut taken: Vec<&Finding> = Vec::new();
    all.iter()
        .filter(|f| {
            let mirror = |g: &&Finding| {
                g.label == f.label
                    && g.kind == "better"
                    && f.kind == "better"
                    && g.better == f.worse
                    && g.worse == f.better
            };
            if taken.iter().any(mirror) {
                return false;
            }
            let i = match seen.iter().position(|(l, _)| *l == f.label) {
                Some(i) => i,
                None => {
                    seen.push((&f.label, 0));
                    seen.len() - 1
                }
            };
            seen[i].1 += 1;
            let keep = seen[i].1 <= per_label;
            if keep {
                taken.push(f);
            }
            keep
        })
        .collect()
}

/// Whether a "better" finding's average (oriented to favour its side) is itself a difference
/// as a test's would be: its whole interval lies beyond the margin (`min_effect`), as a test
/// must to be won. Only then does the sentence lead with the average: an average of
/// 1.07x [1.03-1.10] with a 10 % margin is a difference smaller than what the report calls
/// equivalent, and leading with it read as a win (stop 35).
pub fn average_decided(ci_low: Option<f64>, min_effect: f64) -> bool {
    ci_low.is_some_and(|l| l > 1.0 + min_effect)
}

/// What an average that does not lead says, from its interval oriented to favour the
/// finding's side, judged against 1 and the margin as the tests are (TOST and the
/// minimum-effect test): "within 10 %" (spanning 1, inside the margin), "greater by less
/// than 10 %" (above 1, inside the margin), "greater, not shown beyond 10 %" (above 1,
/// reaching the margin), "in B's favour ..." the same three ways below 1, "inconclusive"
/// (spanning 1 and reaching beyond the margin).
fn average_says(
    lo: Option<f64>,
    hi: Option<f64>,
    min_effect: f64,
    direction: &str,
    other: &str,
) -> String {
    use sanbench_stats::design::analysis::{verdict, Verdict};
    let (Some(lo), Some(hi)) = (lo, hi) else {
        return "inconclusive".into();
    };
    let pct = sanbench_units::fmt::short(min_effect * 100.0);
    // The tests' own verdict on the interval (log scale), then which side of 1 it lies on.
    let (l, h) = (lo.ln(), hi.ln());
    match (
        verdict((l + h) / 2.0, (h - l) / 2.0, min_effect),
        lo > 1.0,
        hi < 1.0,
    ) {
        // Beyond the margin in `side`'s favour leads the sentence and never comes here.
        (Verdict::Higher, ..) => format!("{direction}, beyond {pct} %"),
        (Verdict::Lower, ..) => format!("in {other}'s favour beyond {pct} %"),
        (Verdict::Equivalent, true, _) => format!("{direction} by less than {pct} %"),
        (Verdict::Equivalent, _, true) => format!("in {other}'s favour by less than {pct} %"),
        (Verdict::Equivalent, ..) => format!("within {pct} %"),
        (Verdict::Inconclusive, true, _) => format!("{direction}, not shown beyond {pct} %"),
        (Verdict::Inconclusive, _, true) => {
            format!("in {other}'s favour, not shown beyond {pct} %")
        }
        (Verdict::Inconclusive, ..) => "inconclusive".into(),
    }
}

/// The findings of one pair in one category: a "better" finding for each side that won a
/// test, an "equivalent" one when any test was within the margin.
fn pair_findings(
    cmp: &Comparison,
    cat: Category,
    lbl: &str,
    av: &Average,
    qs: &[&Question],
    min_effect: f64,
) -> Vec<Finding> {
    let mut out = Vec::new();
    let n = qs.len();
    if n == 0 {
        return out;
    }
    let inconclusive = qs.iter().filter(|q| q.verdict == "inconclusive").count();
    let title = |id: &str| {
        cmp.workloads
            .iter()
            .find(|w| w.id == id)
            .map_or_else(|| id.to_string(), |w| w.title.clone())
    };
    let direction = if av.lower_is_better {
        "lower"
    } else {
        "greater"
    };
    // Oriented so that above 1 favours the side whose verdict is `verdict`.
    let orient = |verdict: &str, r: f64| {
        let r = if av.lower_is_better { 1.0 / r } else { r };
        if verdict == "better" {
            r
        } else {
            1.0 / r
        }
    };
    // The tests a side won, with its largest ratio among them.
    let wins = |verdict: &str| {
        let won: Vec<&&Question> = qs.iter().filter(|q| q.verdict == verdict).collect();
        let (max, max_q) = won
            .iter()
            .map(|q| (orient(verdict, q.ratio), **q))
            .max_by(|x, y| x.0.total_cmp(&y.0))?;
        Some((won, max, max_q))
    };
    for (side, other, verdict, theirs) in [
        (&av.a, &av.b, "better", "worse"),
        (&av.b, &av.a, "worse", "better"),
    ] {
        let Some((won, max, max_q)) = wins(verdict) else {
            continue;
        };
        let orient = |r: f64| orient(verdict, r);
        // A pair split in this category: the other side won tests too, and the sentence says
        // so, so that neither reads as the whole story (the terminal shows one of the two).
        let split = wins(theirs).map(|(w, m, q)| {
            format!(
                "{other} on {} (maximum {} in {})",
                w.len(),
                fmt_ratio(m),
                title(&q.workload)
            )
        });
        let avg = orient(av.judged.ratio());
        let (lo, hi) = if av.judged.half_width.is_finite() {
            let (x, y) = (orient(av.judged.low()), orient(av.judged.high()));
            (Some(x.min(y)), Some(x.max(y)))
        } else {
            (None, None)
        };
        let k = won.len();
        let stalls = (cat == Category::Failover)
            .then(|| {
                let ws: Vec<&str> = qs.iter().map(|q| q.workload.as_str()).collect();
                Some((stall_of(cmp, side, &ws)?, stall_of(cmp, other, &ws)?))
            })
            .flatten();
        let text = if let Some((mine, theirs)) = stalls {
            // "With 2 paths, A's failover stalls I/O for 40 ms [30-55] vs B's 2.1 s [1.8-2.5]
            // (52x shorter [40-70]; 1 of 1 tests)"
            let with = match (mine.paths, theirs.paths) {
                (Some(a), Some(b)) if a == b => format!("With {a} paths, "),
                _ => String::new(),
            };
            format!(
                "{with}{side}'s failover stalls I/O for {} vs {other}'s {} ({} {} shorter; {k} of {n} tests)",
                mine.text(),
                theirs.text(),
                fmt_ratio(avg),
                fmt_interval(lo, hi),
            )
        } else if average_decided(lo, min_effect) {
            format!(
                "{side} shows {} {} {direction} {lbl} than {other} ({k} of {n} tests; maximum {} in {}{})",
                fmt_ratio(avg),
                fmt_interval(lo, hi),
                fmt_ratio(max),
                title(&max_q.workload),
                split.map_or_else(String::new, |s| format!("; {s}")),
            )
        } else {
            // The average over the category is not beyond the margin in `side`'s favour: the
            // sentence leads with the tests `side` won, and the average follows with what its
            // interval says, judged as a test is, so that noise around 1 never flips the
            // headline between two runs whose decided tests agree.
            format!(
                "{side} shows {direction} {lbl} than {other} on {k} of {n} tests (maximum {} in {}){}; over all {n}: {} {}, {}",
                fmt_ratio(max),
                title(&max_q.workload),
                split.map_or_else(String::new, |s| format!(", {s}")),
                fmt_ratio(avg),
                fmt_interval(lo, hi),
                average_says(lo, hi, min_effect, direction, other),
            )
        };
        out.push(Finding {
            category: cat,
            label: lbl.to_string(),
            kind: "better".into(),
            better: side.clone(),
            worse: other.clone(),
            average: avg,
            ci_low: lo,
            ci_high: hi,
            tests: k,
            compared: n,
            inconclusive,
            workloads: won.iter().map(|q| q.workload.clone()).collect(),
            max,
            max_workload: max_q.workload.clone(),
            max_title: title(&max_q.workload),
            modeled_power: false,
            text,
        });
    }
    let eq = qs.iter().filter(|q| q.verdict == "equivalent").count();
    if eq > 0 {
        let ratio = av.judged.ratio();
        let bounded = av.judged.half_width.is_finite();
        out.push(Finding {
            category: cat,
            label: lbl.to_string(),
            kind: "equivalent".into(),
            better: av.a.clone(),
            worse: av.b.clone(),
            average: ratio,
            ci_low: bounded.then(|| av.judged.low()),
            ci_high: bounded.then(|| av.judged.high()),
            tests: eq,
            compared: n,
            inconclusive,
            workloads: qs
                .iter()
                .filter(|q| q.verdict == "equivalent")
                .map(|q| q.workload.clone())
                .collect(),
            max: ratio,
            max_workload: String::new(),
            max_title: String::new(),
            modeled_power: false,
            text: format!(
                "{} and {} are within {} % on {eq} of {n} {lbl} tests{}",
                av.a,
                av.b,
                sanbench_units::fmt::short(min_effect * 100.0),
                if inconclusive > 0 {
                    format!("; {inconclusive} inconclusive")
                } else {
                    String::new()
                }
            ),
        });
    }
    out
}

/// The sentence shown where there are no findings: why, and what would decide.
pub fn none_text(withheld: Option<&str>, j: &Judgement) -> String {
    if let Some(w) = withheld {
        return format!("{}{}.", w[..1].to_uppercase(), &w[1..]);
    }
    let primary: Vec<&Question> = j
        .questions
        .iter()
        .filter(|q| q.family == "primary")
        .collect();
    if primary.is_empty() {
        return "No two compared targets: nothing to find.".into();
    }
    let inconclusive = primary
        .iter()
        .filter(|q| q.verdict == "inconclusive")
        .count();
    let more = primary.iter().filter_map(|q| q.more_rounds).min();
    format!(
        "No difference beyond the margin and no equivalence is shown: {inconclusive} of {} \
         throughput questions inconclusive{}.",
        primary.len(),
        match more {
            Some(m) => format!(" (about {m} more rounds would likely decide the closest)"),
            None => String::new(),
        }
    )
}

#[cfg(test)]
#[path = "findings_tests.rs"]
mod tests;
