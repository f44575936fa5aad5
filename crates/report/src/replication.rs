//! Does a finding hold up in another run? For every Key Finding of run A, and every throughput
//! question A decided, what run B says about the same claim:
//! * **reproduced**: the same verdict in the same direction, and the two intervals overlap;
//! * **inconclusive**: B asked the same question but decided nothing;
//! * **reversed**: B decided the opposite direction;
//! * **differs**: B decided something else (equivalence where A found a difference, or the
//!   other way round), or the same direction with intervals that do not overlap (the size of
//!   the effect did not reproduce);
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

use sanbench_store::Question;

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

/// What B says about one finding of A.
fn finding_row(f: &Finding, b: &Report) -> Row {
    let like = |g: &&Finding| same_key(f, g);
    let same = b.findings.iter().filter(like).find(|g| {
        g.kind == f.kind
            && if f.kind == "equivalent" {
                same_pair(f, g)
            } else {
                g.better == f.better && g.worse == f.worse
            }
    });
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
    let (outcome, in_b, note) = if let Some(g) = same {
        // Both intervals on f.better's side (an equivalence may list the pair the other way).
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
    } else if let Some(g) = opposite {
        (Outcome::Reversed, finding_text(g), String::new())
    } else if let Some(g) = other {
        let note = if g.kind == "equivalent" {
            "B: equivalent".to_string()
        } else {
            format!("B: {} better", g.better)
        };
        (Outcome::Differs, finding_text(g), note)
    } else if asked {
        (Outcome::Inconclusive, "no finding".into(), String::new())
    } else {
        (Outcome::NotInB, "not compared".into(), String::new())
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
mod tests {
    use super::*;
    use crate::Options;
    use sanbench_store::fixture::sample_comparison;
    use sanbench_store::Comparison;

    const NBD: &str = "NBD <ram> & co";

    fn outcome(r: &Replication, claim: &str) -> Outcome {
        r.rows
            .iter()
            .find(|x| x.claim == claim)
            .unwrap_or_else(|| {
                let claims: Vec<&str> = r.rows.iter().map(|x| x.claim.as_str()).collect();
                panic!("no {claim:?} in {claims:#?}")
            })
            .outcome
    }

    /// Run B of the hand-made pair: NBD's sequential reads a third of A's (the direction
    /// against FC and iSCSI turns), FC's database IOPS swinging from round to round (nothing
    /// decided about FC there), sequential writes as in A.
    fn run_b() -> Comparison {
        let mut b = sample_comparison();
        for c in &mut b.cells {
            let round = c.round.unwrap_or(c.repeat) as usize;
            if c.workload == "seq-read-1m" && c.target == NBD {
                c.result.mb_per_s /= 3.0;
                c.result.iops /= 3.0;
            }
            if c.workload.starts_with("db-") && c.target == "FC 8G" {
                let f = [1.0, 1.6, 0.6][round % 3];
                c.result.iops *= f;
                c.result.mb_per_s *= f;
            }
        }
        b
    }

    #[test]
    fn a_run_reproduces_itself() {
        let a = sample_comparison();
        let (ra, rb) = (
            Report::new(&a, &Options::default()),
            Report::new(&a, &Options::default()),
        );
        let r = replicate(&ra, &rb);
        assert!(!r.rows.is_empty());
        assert_eq!(r.count(Outcome::Reproduced), r.rows.len());
        assert!(r.only_in_b.is_empty());
        // Every finding, then every decided throughput question.
        assert_eq!(
            r.rows.iter().filter(|x| x.kind == "finding").count(),
            ra.findings.len()
        );
    }

    #[test]
    fn reproduced_inconclusive_and_reversed() {
        let (a, b) = (sample_comparison(), run_b());
        let (ra, rb) = (
            Report::new(&a, &Options::default()),
            Report::new(&b, &Options::default()),
        );
        let r = replicate(&ra, &rb);
        // Questions: sequential writes untouched; reads turned; FC's database IOPS undecided.
        assert_eq!(
            outcome(&r, "Sequential write, 1 MiB, QD 12: FC 8G / iSCSI 10G MB/s"),
            Outcome::Reproduced
        );
        assert_eq!(
            outcome(
                &r,
                &format!("Sequential read, 1 MiB, QD 12: FC 8G / {NBD} MB/s")
            ),
            Outcome::Reversed
        );
        assert_eq!(
            outcome(
                &r,
                &format!("Sequential read, 1 MiB, QD 12: iSCSI 10G / {NBD} MB/s")
            ),
            Outcome::Reversed
        );
        assert_eq!(
            outcome(&r, "Database 8 KiB 67/33, QD 16: FC 8G / iSCSI 10G IOPS"),
            Outcome::Inconclusive
        );
        // Findings: NBD's edge over FC in bandwidth (reads) turns into FC's; FC's IOPS lead
        // over iSCSI is found nowhere in B; FC's CPU efficiency over iSCSI holds.
        assert_eq!(
            outcome(&r, &format!("{NBD} vs FC 8G: bandwidth")),
            Outcome::Reversed
        );
        assert_eq!(
            outcome(&r, "FC 8G vs iSCSI 10G: IOPS"),
            Outcome::Inconclusive
        );
        assert_eq!(
            outcome(&r, "FC 8G vs iSCSI 10G: bandwidth CPU efficiency"),
            Outcome::Reproduced
        );
        // What B found that A did not: FC ahead of NBD in bandwidth.
        assert!(
            r.only_in_b.iter().any(|t| t.starts_with("FC 8G shows")
                && t.contains(&format!("greater bandwidth than {NBD}"))),
            "{:#?}",
            r.only_in_b
        );
        // The other way round, B's claims against A: the reversal is symmetric.
        let back = replicate(&rb, &ra);
        assert_eq!(
            outcome(
                &back,
                &format!("Sequential read, 1 MiB, QD 12: FC 8G / {NBD} MB/s")
            ),
            Outcome::Reversed
        );
        assert_eq!(
            render_text(&Replication::default(), "run 1", "run 2"),
            "run 1 has no findings and decided no throughput question.\n"
        );
        let text = render_text(&r, "run 1", "run 2");
        assert!(text.contains("reversed") && text.contains("inconclusive"));
        assert!(text.contains("only in run 2: FC 8G shows"));
    }

    /// A run whose host CPU was counted from busy ticks against one measured as the window
    /// less idle: CPU and power efficiency findings are not compared, the others are.
    #[test]
    fn efficiency_measured_two_ways_is_not_comparable() {
        let cpu = |now: bool| sanbench_store::fixture::cpu_block(!now);
        let mut a = sample_comparison();
        a.cells.iter_mut().for_each(|c| c.result.cpu = cpu(false));
        let mut b = a.clone();
        b.cells.iter_mut().for_each(|c| c.result.cpu = cpu(true));
        let (ra, rb) = (
            Report::new(&a, &Options::default()),
            Report::new(&b, &Options::default()),
        );
        let r = replicate(&ra, &rb);
        let eff = |c: Category| matches!(c, Category::CpuEfficiency | Category::PowerEfficiency);
        assert!(ra.findings.iter().any(|f| eff(f.category)));
        for (f, row) in ra.findings.iter().zip(&r.rows) {
            let want = if eff(f.category) {
                Outcome::NotComparable
            } else {
                Outcome::Reproduced
            };
            assert_eq!(row.outcome, want, "{row:?}");
        }
        let text = render_text(&r, "run 1", "run 2");
        assert!(
            text.contains("not comparable (host CPU measured two ways"),
            "{text}"
        );
        assert!(
            text.contains("CPU and power efficiency claims not compared"),
            "{text}"
        );
        // Measured the same way: every claim reproduces.
        let r = replicate(&rb, &rb);
        assert_eq!(r.count(Outcome::Reproduced), r.rows.len());
    }

    #[test]
    fn a_pair_listed_the_other_way_round_still_matches() {
        let a = sample_comparison();
        let mut b = a.clone();
        b.targets.reverse();
        let (ra, rb) = (
            Report::new(&a, &Options::default()),
            Report::new(&b, &Options::default()),
        );
        let r = replicate(&ra, &rb);
        assert_eq!(r.count(Outcome::Reproduced), r.rows.len(), "{r:#?}");
    }

    #[test]
    fn targets_b_did_not_run_are_not_in_b() {
        let a = sample_comparison();
        let mut b = a.clone();
        b.targets.retain(|t| t.name != "iSCSI 10G");
        b.cells.retain(|c| c.target != "iSCSI 10G");
        let (ra, rb) = (
            Report::new(&a, &Options::default()),
            Report::new(&b, &Options::default()),
        );
        let r = replicate(&ra, &rb);
        assert_eq!(outcome(&r, "FC 8G vs iSCSI 10G: IOPS"), Outcome::NotInB);
        assert_eq!(
            outcome(&r, "Sequential write, 1 MiB, QD 12: FC 8G / iSCSI 10G MB/s"),
            Outcome::NotInB
        );
    }
}
