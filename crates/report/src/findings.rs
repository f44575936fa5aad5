//! The studies' "Key Findings", kept to what survives the noise.
//!
//! A finding compares an ordered pair of targets A, B in one category. Per workload of the
//! category it takes the ratio of means (A/B where higher is better, B/A for latency) and keeps
//! the workload only when A is better **and** the difference is real: significant under
//! Welch's t-test on the log of the figures (noise is a share of a figure; a ratio is a
//! difference of logs) with the family-wise error of the whole comparison held at [`ALPHA`]
//! (Holm's step-down over every (pair, category, workload) question it asks: identical targets
//! make any finding at most 5 % of the time), **and** larger
//! than `min_rel` (default 10 %: an effect below the machine's run-to-run noise is not worth a
//! sentence even when it is real). If any workload is kept, the finding reads `"A shows 3.9x
//! greater bandwidth power efficiency than B (average over 6 tests; maximum 7.1x in single-port
//! random read)"`: the arithmetic mean of the kept ratios, their count, and the largest with
//! its workload. Workloads where B is better count towards B's finding, never against A's.
//!
//! What never makes a finding:
//! * fewer than [`MIN_REPEATS`] repetitions of a cell (no noise estimate: [`withheld`] says so);
//! * a reference target (`TargetEntry::reference`, a ceiling such as RAM shown beside the
//!   targets under comparison);
//! * modeled power: the utilization model is linear in CPU, so a "power efficiency" finding
//!   on it would restate the CPU-efficiency finding in watts. Measured power keeps its own.

use serde::Serialize;

use sanbench_stats::{holm, welch_p, MeanCi};
use sanbench_store::{Comparison, WorkloadEntry};

use crate::analysis::{flavour, Analysis, Category, Flavour};

/// Repetitions a cell needs before any finding is drawn from it.
pub const MIN_REPEATS: usize = 3;
/// Family-wise error rate of one comparison's findings.
pub const ALPHA: f64 = 0.05;

/// One key finding.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Finding {
    pub category: Category,
    /// "bandwidth", "IOPS", "latency", "bandwidth CPU efficiency", "database power efficiency".
    pub label: String,
    pub better: String,
    pub worse: String,
    /// Mean of the ratios over the workloads where `better` wins outside the noise.
    pub average: f64,
    pub tests: usize,
    /// Workloads where both targets had the figure.
    pub compared: usize,
    pub max: f64,
    pub max_workload: String,
    pub max_title: String,
    /// Either side's power figure in a counted workload is modeled (never, since modeled power
    /// makes no findings; kept for the document's shape).
    pub modeled_power: bool,
    /// The sentence, in the studies' form.
    pub text: String,
}

/// Formats a ratio as the studies did: "3.9x", "10x"; two decimals when one would say "1.0x".
pub fn fmt_ratio(r: f64) -> String {
    if r >= 9.95 {
        format!("{r:.0}x")
    } else if r < 1.095 {
        format!("{r:.2}x")
    } else {
        format!("{r:.1}x")
    }
}

/// Why a comparison has no findings at all, when that is for want of repetitions:
/// "one repetition: no noise estimate, no findings".
pub fn withheld(cmp: &Comparison, an: &Analysis) -> Option<String> {
    let fewest = an.stats.values().map(|s| s.repeats).min()?;
    (fewest < MIN_REPEATS).then(|| match fewest {
        1 => "one repetition: no noise estimate, no findings".to_string(),
        n => format!(
            "{n} repetitions: too few for a noise estimate (findings need {MIN_REPEATS}), no \
             findings{}",
            if cmp.incomplete {
                " (the comparison stopped early)"
            } else {
                ""
            }
        ),
    })
}

/// How findings are drawn, for the report's methods note.
pub fn method(min_rel: f64) -> String {
    format!(
        "A finding averages the ratio over the tests where one target is better by more than \
         {} % and the difference is significant: Welch's t-test on the logarithm of the figure \
         over the repetitions, with Holm's correction holding the chance of any false finding in \
         the whole comparison at {} %. Findings need at least {MIN_REPEATS} repetitions. \
         Reference targets are ceilings: shown, never compared. Efficiency uses MB/s on \
         bandwidth tests and IOPS on database tests, per CPU % and per watt above idle; modeled \
         power makes no findings of its own (the model restates CPU).",
        crate::fmt::short(min_rel * 100.0),
        crate::fmt::short(ALPHA * 100.0)
    )
}

/// The sentence shown where there are no findings.
pub fn none_text(withheld: Option<&str>) -> String {
    match withheld {
        Some(w) => format!("{}{}.", w[..1].to_uppercase(), &w[1..]),
        None => "No difference between the targets is outside the noise.".into(),
    }
}

/// The label of a category over workloads of one flavour; `database` names the IOPS flavour
/// when every workload of it belongs to the "database" group, as in Third I/O.
fn label(c: Category, f: Flavour, all_database: bool) -> String {
    let io = if all_database { "database" } else { "IOPS" };
    match (c, f) {
        (Category::Bandwidth, _) => "bandwidth".into(),
        (Category::Iops, _) => "IOPS".into(),
        (Category::Latency, _) => "latency".into(),
        (Category::CpuEfficiency, Flavour::Bandwidth) => "bandwidth CPU efficiency".into(),
        (Category::CpuEfficiency, Flavour::Io) => format!("{io} CPU efficiency"),
        (Category::PowerEfficiency, Flavour::Bandwidth) => "bandwidth power efficiency".into(),
        (Category::PowerEfficiency, Flavour::Io) => format!("{io} power efficiency"),
    }
}

/// The ratio by which A beats B on one workload when it exceeds `min_rel`; `None` when either
/// lacks the figure, a denominator is zero, or B is at least as good. (Significance is judged
/// separately, over the whole comparison.)
pub fn winning_ratio(a: &MeanCi, b: &MeanCi, lower_is_better: bool, min_rel: f64) -> Option<f64> {
    let (num, den) = if lower_is_better {
        (b.mean, a.mean)
    } else {
        (a.mean, b.mean)
    };
    if !(num.is_finite() && den.is_finite()) || den <= 0.0 || num <= den {
        return None;
    }
    let r = num / den;
    (r - 1.0 > min_rel).then_some(r)
}

/// One question the comparison asks: is target `a` different from `b` on this workload in
/// this category? Targets are in comparison order (`a` before `b`), so each is asked once.
struct Question<'a> {
    cat: Category,
    workload: &'a str,
    a: &'a str,
    b: &'a str,
    p: f64,
}

/// Every key finding of a comparison, ordered by category, then flavour, then average ratio.
pub fn findings(cmp: &Comparison, an: &Analysis, min_rel: f64) -> Vec<Finding> {
    if withheld(cmp, an).is_some() {
        return Vec::new();
    }
    let graded: Vec<&str> = cmp
        .targets
        .iter()
        .filter(|t| !t.reference)
        .map(|t| t.name.as_str())
        .collect();
    // Every question first, so that Holm's correction sees the whole family.
    let mut qs: Vec<Question> = Vec::new();
    for cat in Category::ALL {
        for w in &cmp.workloads {
            let Some(m) = cat.metric(flavour(w)) else {
                continue;
            };
            for (i, a) in graded.iter().enumerate() {
                for b in &graded[i + 1..] {
                    let (Some(sa), Some(sb)) = (an.get(&w.id, a), an.get(&w.id, b)) else {
                        continue;
                    };
                    if cat == Category::PowerEfficiency && (sa.modeled_power || sb.modeled_power) {
                        continue;
                    }
                    let (Some(ma), Some(mb)) = (sa.log_metrics.get(&m), sb.log_metrics.get(&m))
                    else {
                        continue;
                    };
                    if let Some(p) = welch_p(ma, mb) {
                        qs.push(Question {
                            cat,
                            workload: &w.id,
                            a,
                            b,
                            p,
                        });
                    }
                }
            }
        }
    }
    let p: Vec<f64> = qs.iter().map(|q| q.p).collect();
    let significant: Vec<(Category, &str, &str, &str)> = qs
        .iter()
        .zip(holm(&p, ALPHA))
        .filter(|(_, s)| *s)
        .map(|(q, _)| (q.cat, q.workload, q.a, q.b))
        .collect();
    let is_significant = |cat: Category, w: &str, x: &str, y: &str| {
        significant
            .iter()
            .any(|&(c, sw, a, b)| c == cat && sw == w && ((a, b) == (x, y) || (a, b) == (y, x)))
    };

    let mut out = Vec::new();
    for cat in Category::ALL {
        let flavours: &[Option<Flavour>] = match cat {
            Category::Latency => &[None],
            _ => &[Some(Flavour::Bandwidth), Some(Flavour::Io)],
        };
        for &fl in flavours {
            let ws: Vec<&WorkloadEntry> = cmp
                .workloads
                .iter()
                .filter(|w| fl.is_none_or(|f| flavour(w) == f))
                .filter(|w| cat.metric(flavour(w)).is_some())
                .collect();
            if ws.is_empty() {
                continue;
            }
            let all_db = ws.iter().all(|w| w.group.eq_ignore_ascii_case("database"));
            let lbl = label(cat, fl.unwrap_or(Flavour::Io), all_db);
            let mut group = Vec::new();
            for a in &graded {
                for b in &graded {
                    if a == b {
                        continue;
                    }
                    let pair = Pair {
                        cat,
                        label: &lbl,
                        a,
                        b,
                    };
                    if let Some(f) = pair.finding(&ws, an, min_rel, &is_significant) {
                        group.push(f);
                    }
                }
            }
            group.sort_by(|x, y| y.average.total_cmp(&x.average));
            out.extend(group);
        }
    }
    out
}

struct Pair<'a> {
    cat: Category,
    label: &'a str,
    a: &'a str,
    b: &'a str,
}

impl Pair<'_> {
    fn finding(
        &self,
        ws: &[&WorkloadEntry],
        an: &Analysis,
        min_rel: f64,
        significant: &dyn Fn(Category, &str, &str, &str) -> bool,
    ) -> Option<Finding> {
        let (cat, a, b) = (self.cat, self.a, self.b);
        let mut ratios: Vec<(f64, &WorkloadEntry)> = Vec::new();
        let mut compared = 0;
        for w in ws {
            let m = cat.metric(flavour(w))?;
            let (Some(sa), Some(sb)) = (an.get(&w.id, a), an.get(&w.id, b)) else {
                continue;
            };
            if cat == Category::PowerEfficiency && (sa.modeled_power || sb.modeled_power) {
                continue;
            }
            let (Some(ma), Some(mb)) = (sa.get(m), sb.get(m)) else {
                continue;
            };
            compared += 1;
            if let Some(r) = winning_ratio(ma, mb, m.lower_is_better(), min_rel) {
                if significant(cat, &w.id, a, b) {
                    ratios.push((r, w));
                }
            }
        }
        if ratios.is_empty() {
            return None;
        }
        let average = ratios.iter().map(|r| r.0).sum::<f64>() / ratios.len() as f64;
        let (max, max_w) = *ratios.iter().max_by(|x, y| x.0.total_cmp(&y.0))?;
        let direction = if cat == Category::Latency {
            "lower"
        } else {
            "greater"
        };
        let tests = ratios.len();
        let text = format!(
            "{a} shows {} {direction} {} than {b} (average over {tests} test{}; maximum {} in {})",
            fmt_ratio(average),
            self.label,
            if tests == 1 { "" } else { "s" },
            fmt_ratio(max),
            max_w.title,
        );
        Some(Finding {
            category: cat,
            label: self.label.to_string(),
            better: a.to_string(),
            worse: b.to_string(),
            average,
            tests,
            compared,
            max,
            max_workload: max_w.id.clone(),
            max_title: max_w.title.clone(),
            modeled_power: false,
            text,
        })
    }
}
