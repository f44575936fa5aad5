//! Does a finding hold up in another run? For every Key Finding of run A, and every throughput
//! question A decided, what run B says about the same claim:
//! * **reproduced**: the same verdict in the same direction, on at least one of the same
//!   tests, and the two intervals overlap;
//! * **inconclusive**: B asked the same question but decided none of A's tests (a finding
//!   each way of one pair is common: each side won some tests; B's finding the other way on
//!   other tests is not a reversal of A's);
//! * **reversed**: B decided the opposite direction on one of A's tests;
//! * **differs**: B decided something else on A's tests (equivalence where A found a
//!   difference, or the other way round), the same direction only on other tests, or the
//!   same direction with intervals that do not overlap (the size of the effect did not
//!   reproduce);
//! * **not in B**: B did not compare those targets on that figure;
//! * **not comparable**: a CPU or power efficiency finding where one run's host CPU was
//!   counted from busy ticks (an earlier sanbench) and the other's as the window less idle.
//!
//! Plus the findings B has that A lacks. The runs are matched by target name and workload id,
//! in either order of a pair. Overlap is a plain reading, not a test: two simultaneous
//! intervals that overlap do not prove the ratios equal, and ones that do not overlap differ
//! at about the family's error rate or less.

use std::fmt::Write as _;

use serde::Serialize;

use sanbench_doc::Question;

use crate::analysis::Category;
use crate::findings::{fmt_interval, fmt_ratio, Finding};
use crate::questions::{metric_of, summary};
use crate::Report;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Reproduced,
    Inconclusive,
    Reversed,
    Differs,
    NotInB,
    NotComparable,
}

impl Outcome {
    pub fn label(self) -> &'static str {
        match self {
            Outcome::Reproduced => "reproduced",
            Outcome::Inconclusive => "inconclusive",
            Outcome::Reversed => "reversed",
            Outcome::Differs => "differs",
            Outcome::NotInB => "not in B",
            Outcome::NotComparable => "not comparable",
        }
    }
}

/// One claim of A and what B says about it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    /// "finding" or "question".
    pub kind: String,
    /// The claim, briefly: "NBD vs iSCSI: bandwidth", "seq-write-1m: NBD / iSCSI MB/s".
    pub claim: String,
    pub in_a: String,
    pub in_b: String,
    pub outcome: Outcome,
    /// Why, where the outcome alone does not say: "intervals do not overlap", "B: equivalent".
    pub note: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Replication {
    pub rows: Vec<Row>,
    /// The findings of B with no like finding in A (their sentences).
    pub only_in_b: Vec<String>,
}

impl Replication {
    pub fn count(&self, o: Outcome) -> usize {
        self.rows.iter().filter(|r| r.outcome == o).count()
    }
}

/// An earlier run of the same suite and targets, and how it bears on this run's findings
/// (this run is A, the earlier one B).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Earlier {
    pub run: String,
    pub started_at: String,
    pub replication: Replication,
}

fn overlap(a: (Option<f64>, Option<f64>), b: (Option<f64>, Option<f64>)) -> bool {
    match (a, b) {
        // Up to rounding: the same figures judged in another order of the targets give the
        // same interval to the last few bits.
        ((Some(l1), Some(h1)), (Some(l2), Some(h2))) => {
            l1 <= h2 * (1.0 + 1e-9) && l2 <= h1 * (1.0 + 1e-9)
        }
        // An unbounded interval excludes nothing.
        _ => true,
    }
}

fn same_key(f: &Finding, g: &Finding) -> bool {
    f.category == g.category && f.label == g.label
}

fn same_pair(f: &Finding, g: &Finding) -> bool {
    (f.better == g.better && f.worse == g.worse) || (f.better == g.worse && f.worse == g.better)
}

fn finding_text(f: &Finding) -> String {
    if f.kind == "equivalent" {
        format!("within the margin on {} of {} tests", f.tests, f.compared)
    } else {
        format!(
            "{} better, {} {} ({} of {} tests)",
            f.better,
            fmt_ratio(f.average),
            fmt_interval(f.ci_low, f.ci_high),
            f.tests,
            f.compared
        )
    }
}

/// Whether two findings count a test on the same workload.
fn share_a_test(f: &Finding, g: &Finding) -> bool {
    g.workloads.iter().any(|w| f.workloads.contains(w))
}

/// What B says about one finding of A, judged on the tests A's finding counts: a pair can
/// hold a finding each way in one category (each side won some tests), so B's finding the
/// other way round reverses A's only where it is about one of A's tests.
fn finding_row(f: &Finding, b: &Report) -> Row {
    let like = |g: &&Finding| same_key(f, g);
    let same_claim = |g: &&Finding| {
        g.kind == f.kind
            && if f.kind == "equivalent" {
                same_pair(f, g)
            } else {
                g.better == f.better && g.worse == f.worse
            }
    };
    // A category can hold the same claim twice (p99 latency asked per flavour): the one on
    // A's tests first, so that a run never differs from itself.
    let same = b
        .findings
        .iter()
        .filter(like)
        .filter(same_claim)
        .find(|g| share_a_test(f, g))
        .or_else(|| b.findings.iter().filter(like).find(same_claim));
    let opposite = b.findings.iter().filter(like).find(|g| {
        f.kind == "better" && g.kind == "better" && g.better == f.worse && g.worse == f.better
    });
    let other = b
        .findings
        .iter()
        .filter(like)
        .find(|g| g.kind != f.kind && same_pair(f, g));
    let asked = b.judgement.averages.iter().any(|av| {
        av.category == f.category
            && ((av.a == f.better && av.b == f.worse) || (av.a == f.worse && av.b == f.better))
    });
    let on_other_tests = |g: &Finding| format!("B: {} on other tests", finding_text(g));
    let (outcome, in_b, note) = match (same, opposite, other) {
        (Some(g), _, _) if share_a_test(f, g) => {
            // Both intervals on f.better's side (an equivalence may list the pair the other
            // way).
            let gi = if g.better == f.better {
                (g.ci_low, g.ci_high)
            } else {
                (g.ci_high.map(|h| 1.0 / h), g.ci_low.map(|l| 1.0 / l))
            };
            if overlap((f.ci_low, f.ci_high), gi) {
                (Outcome::Reproduced, finding_text(g), String::new())
            } else {
                (
                    Outcome::Differs,
                    finding_text(g),
                    "intervals do not overlap".to_string(),
                )
            }
        }
        (_, Some(g), _) if share_a_test(f, g) => {
            (Outcome::Reversed, finding_text(g), String::new())
        }
        (_, _, Some(g)) if share_a_test(f, g) => {
            let note = if g.kind == "equivalent" {
                "B: equivalent".to_string()
            } else {
                format!("B: {} better", g.better)
            };
            (Outcome::Differs, finding_text(g), note)
        }
        // The same claim, but won on other tests than A's: the size and place of the
        // effect did not reproduce.
        (Some(g), _, _) => (
            Outcome::Differs,
            finding_text(g),
            "on other tests than A's".to_string(),
        ),
        (_, Some(g), _) | (_, _, Some(g)) if asked => (
            Outcome::Inconclusive,
            "no finding".into(),
            on_other_tests(g),
        ),
        _ if asked => (Outcome::Inconclusive, "no finding".into(), String::new()),
        _ => (Outcome::NotInB, "not compared".into(), String::new()),
    };
    Row {
        kind: "finding".into(),
        claim: format!("{} vs {}: {}", f.better, f.worse, f.label),
        in_a: finding_text(f),
        in_b,
        outcome,
        note,
    }
}

/// B's question in A's order of the pair (ratio, interval and verdict turned if B has it the
/// other way round).
fn in_a_order(q: &Question, a: &str, b: &str) -> Option<Question> {
    if q.a == a && q.b == b {
        return Some(q.clone());
    }
    if q.a != b || q.b != a {
        return None;
    }
    let mut t = q.clone();
    std::mem::swap(&mut t.a, &mut t.b);
    t.ratio = 1.0 / q.ratio;
    t.ci_low = q.ci_high.map(|h| 1.0 / h);
    t.ci_high = q.ci_low.map(|l| 1.0 / l);
    t.verdict = match q.verdict.as_str() {
        "better" => "worse".into(),
        "worse" => "better".into(),
        v => v.into(),
    };
    Some(t)
}

/// What B says about one decided question of A.
fn question_row(q: &Question, a: &Report, b: &Report) -> Row {
    let title = a
        .cmp
        .workloads
        .iter()
        .find(|w| w.id == q.workload)
        .map_or(q.workload.as_str(), |w| w.title.as_str());
    let figure = metric_of(q).map_or(q.metric.as_str(), |m| m.label());
    let theirs = b
        .judgement
        .questions
        .iter()
        .filter(|x| x.family == q.family && x.workload == q.workload && x.metric == q.metric)
        .find_map(|x| in_a_order(x, &q.a, &q.b));
    let (outcome, in_b, note) = match &theirs {
        None => (Outcome::NotInB, "not asked".to_string(), String::new()),
        Some(t) if t.verdict == "inconclusive" => {
            (Outcome::Inconclusive, summary(t), String::new())
        }
        Some(t) if t.verdict == q.verdict => {
            if overlap((q.ci_low, q.ci_high), (t.ci_low, t.ci_high)) {
                (Outcome::Reproduced, summary(t), String::new())
            } else {
                (
                    Outcome::Differs,
                    summary(t),
                    "intervals do not overlap".to_string(),
                )
            }
        }
        Some(t)
            if matches!(
                (q.verdict.as_str(), t.verdict.as_str()),
                ("better", "worse") | ("worse", "better")
            ) =>
        {
            (Outcome::Reversed, summary(t), String::new())
        }
        Some(t) => (Outcome::Differs, summary(t), format!("B: {}", t.verdict)),
    };
    Row {
        kind: "question".into(),
        claim: format!("{title}: {} / {} {figure}", q.a, q.b),
        in_a: summary(q),
        in_b,
        outcome,
        note,
    }
}

/// Every finding of A, then every primary question A decided, against B.
pub fn replicate(a: &Report, b: &Report) -> Replication {
    // One run's host CPU counted from busy ticks, the other's as the window less idle: their
    // CPU and power efficiency findings say as much about the method as about the targets.
    let ticked = |r: &Report| crate::analysis::ticked_cells(r.cmp) > 0;
    let two_ways = ticked(a) != ticked(b);
    let mut rows: Vec<Row> = a
        .findings
        .iter()
        .map(|f| {
            let mut row = finding_row(f, b);
            if two_ways
                && matches!(
                    f.category,
                    Category::CpuEfficiency | Category::PowerEfficiency
                )
            {
                row.outcome = Outcome::NotComparable;
                row.note = "host CPU measured two ways: busy ticks in one run".into();
            }
            row
        })
        .collect();
    rows.extend(
        a.judgement
            .questions
            .iter()
            .filter(|q| q.family == "primary" && q.verdict != "inconclusive")
            .map(|q| question_row(q, a, b)),
    );
    let only_in_b = b
        .findings
        .iter()
        .filter(|g| {
            !a.findings.iter().any(|f| {
                same_key(f, g)
                    && f.kind == g.kind
                    && if g.kind == "equivalent" {
                        same_pair(f, g)
                    } else {
                        f.better == g.better && f.worse == g.worse
                    }
            })
        })
        .map(|g| g.text.clone())
        .collect();
    Replication { rows, only_in_b }
}

/// A plain-text table for the terminal, with a count of each outcome.
pub fn render_text(r: &Replication, a: &str, b: &str) -> String {
    if r.rows.is_empty() {
        let mut s = format!("{a} has no findings and decided no throughput question.\n");
        for t in &r.only_in_b {
            let _ = writeln!(s, "only in {b}: {t}");
        }
        return s;
    }
    let header = ["", "claim", a, b, "outcome"].map(String::from);
    let rows: Vec<[String; 5]> = r
        .rows
        .iter()
        .map(|x| {
            [
                x.kind.clone(),
                x.claim.clone(),
                x.in_a.clone(),
                x.in_b.clone(),
                match (x.outcome, x.note.is_empty()) {
                    (Outcome::NotInB, _) => format!("not in {b}"),
                    (o, true) => o.label().to_string(),
                    (o, false) => format!("{} ({})", o.label(), x.note),
                },
            ]
        })
        .collect();
    let mut s = crate::fmt::text_table(&header, &rows);
    for t in &r.only_in_b {
        let _ = writeln!(s, "only in {b}: {t}");
    }
    let _ = writeln!(
        s,
        "{} claims of {a}: {} reproduced, {} inconclusive, {} reversed, {} differ, {} not in {b}; \
         {} findings only in {b}",
        r.rows.len(),
        r.count(Outcome::Reproduced),
        r.count(Outcome::Inconclusive),
        r.count(Outcome::Reversed),
        r.count(Outcome::Differs),
        r.count(Outcome::NotInB),
        r.only_in_b.len()
    );
    let apart = r.count(Outcome::NotComparable);
    if apart > 0 {
        let _ = writeln!(
            s,
            "{apart} CPU and power efficiency claims not compared: one run's host CPU was \
             counted from busy ticks (docs/MEASURE.md, CPU)"
        );
    }
    s
}

#[cfg(test)]
#[path = "replication_tests.rs"]
mod tests;
