//! Findings on small, hand-made comparisons whose answers can be worked out on paper.

use super::*;
use crate::findings::Finding;
use crate::fmt::fmt_ratio;
use sanbench_doc::run::{Efficiency, TargetResult};
use sanbench_doc::{Cell, TargetEntry};
use sanbench_store::fixture::sample_comparison;

/// A comparison of targets `names`, workloads `(id, group)`, and per cell (workload, target)
/// the values of every repetition, used for MB/s, IOPS, latency and efficiencies alike. A single
/// value stands for three repetitions 0.5 % around it (findings need three).
fn doc(names: &[&str], workloads: &[(&str, &str)], values: &[(&str, &str, &[f64])]) -> Comparison {
    static PROTO: std::sync::OnceLock<Comparison> = std::sync::OnceLock::new();
    let mut cmp = PROTO.get_or_init(sample_comparison).clone();
    cmp.cells.clear();
    cmp.targets = names
        .iter()
        .map(|n| TargetEntry {
            name: n.to_string(),
            ..TargetEntry::default()
        })
        .collect();
    let proto = cmp.workloads[0].clone();
    cmp.workloads = workloads
        .iter()
        .map(|(id, g)| WorkloadEntry {
            id: id.to_string(),
            title: format!("test {id}"),
            group: g.to_string(),
            ..proto.clone()
        })
        .collect();
    cmp.cells.clear();
    for (w, t, xs) in values {
        let xs: Vec<f64> = match xs {
            [x] => vec![x * 0.995, *x, x * 1.005],
            _ => xs.to_vec(),
        };
        for (i, &x) in xs.iter().enumerate() {
            let mut r = TargetResult {
                iops: x,
                mb_per_s: x,
                // Counted from many I/Os: the figures' resolution is not what these test.
                ios: 1_000_000,
                efficiency: Efficiency {
                    iops_per_cpu_pct: Some(x),
                    mb_per_s_per_cpu_pct: Some(x),
                    iops_per_watt: Some(x),
                    mb_per_s_per_watt: Some(x),
                    ..Efficiency::default()
                },
                ..TargetResult::default()
            };
            r.latency_us.mean = x;
            r.latency_us.p99 = x;
            cmp.cells.push(Cell {
                workload: w.to_string(),
                target: t.to_string(),
                repeat: i as u32,
                round: Some(i as u32),
                slot: None,
                started_at: None,
                result: r,
                steady: None,
                load_pct: None,
                hosts: Vec::new(),
            });
        }
    }
    cmp
}

fn find<'a>(fs: &'a [Finding], label: &str, better: &str) -> Option<&'a Finding> {
    fs.iter()
        .find(|f| f.label == label && f.better == better && f.kind == "better")
}

/// The findings of a comparison judged at this margin (`an` is kept for the tests' shape).
fn findings(cmp: &Comparison, _an: &Analysis, min_effect: f64) -> Vec<Finding> {
    let mut cmp = cmp.clone();
    let mut d = crate::questions::design_of(&cmp);
    d.min_effect = min_effect;
    cmp.design = Some(d);
    let j = crate::questions::judge(&cmp);
    crate::findings::findings(&cmp, &j, min_effect)
}

#[test]
fn average_and_maximum_over_winning_tests() {
    let cmp = doc(
        &["A", "B"],
        &[
            ("w1", "bandwidth"),
            ("w2", "bandwidth"),
            ("w3", "bandwidth"),
        ],
        &[
            ("w1", "A", &[400.0]),
            ("w1", "B", &[100.0]),
            ("w2", "A", &[200.0]),
            ("w2", "B", &[100.0]),
            ("w3", "A", &[300.0]),
            ("w3", "B", &[100.0]),
        ],
    );
    let an = Analysis::new(&cmp);
    let fs = findings(&cmp, &an, 0.10);
    let f = find(&fs, "bandwidth", "A").unwrap();
    assert_eq!((f.tests, f.compared), (3, 3));
    // The geometric mean over every test of the category, not the mean of the winners.
    assert!((f.average - 24f64.cbrt()).abs() < 1e-9, "{}", f.average);
    assert!((f.max - 4.0).abs() < 1e-9 && f.max_workload == "w1");
    assert_eq!(
        f.text,
        "A shows 2.9x [2.9-2.9] greater bandwidth than B (3 of 3 tests; maximum 4.0x in test w1)"
    );
    assert!(find(&fs, "bandwidth", "B").is_none());
    // Efficiency on bandwidth workloads takes the bandwidth flavour.
    assert!(find(&fs, "bandwidth CPU efficiency", "A").is_some());
    assert!(find(&fs, "bandwidth power efficiency", "A").is_some());
    // No IOPS-flavoured workloads: no IOPS or database findings.
    assert!(fs
        .iter()
        .all(|f| f.label != "IOPS" && !f.label.contains("database")));
}

#[test]
fn inside_the_noise_is_excluded() {
    let cmp = doc(
        &["A", "B"],
        &[("w1", "database"), ("w2", "database"), ("w3", "database")],
        &[
            // 5 % apart: under the 10 % floor.
            ("w1", "A", &[105.0]),
            ("w1", "B", &[100.0]),
            // 50 % apart but the repetitions are all over the place.
            ("w2", "A", &[100.0, 200.0, 150.0]),
            ("w2", "B", &[100.0, 100.0, 100.0]),
            // Clearly apart.
            ("w3", "A", &[200.0, 202.0, 201.0]),
            ("w3", "B", &[100.0, 101.0, 100.5]),
        ],
    );
    let an = Analysis::new(&cmp);
    let fs = findings(&cmp, &an, 0.10);
    let f = find(&fs, "IOPS", "A").unwrap();
    assert_eq!((f.tests, f.compared, f.inconclusive), (1, 3, 1));
    assert_eq!(f.max_workload, "w3");
    // The average over all three (1.4x) has an interval reaching below 1: the sentence leads
    // with the one test won, not with the average.
    assert!(
        f.text
            .starts_with("A shows greater IOPS than B on 1 of 3 tests (maximum 2.0x in test w3); over all 3: 1.4x ["),
        "{}",
        f.text
    );
    assert!(f.text.ends_with("], inconclusive"), "{}", f.text);
    assert_eq!(find(&fs, "database CPU efficiency", "A").unwrap().tests, 1);
    // 5 % apart with no spread between rounds: within the margin, said so.
    let eq = fs
        .iter()
        .find(|f| f.kind == "equivalent" && f.label == "IOPS")
        .unwrap();
    assert_eq!(
        eq.text,
        "A and B are within 10 % on 1 of 3 IOPS tests; 1 inconclusive"
    );
    // With a floor above w3's 100 % difference nothing is left.
    let fs = findings(&cmp, &an, 1.01);
    assert!(find(&fs, "IOPS", "A").is_none());
}

#[test]
fn latency_lower_is_better() {
    let cmp = doc(
        &["Fast", "Slow"],
        &[("w1", "latency")],
        &[("w1", "Fast", &[100.0]), ("w1", "Slow", &[250.0])],
    );
    let an = Analysis::new(&cmp);
    let fs = findings(&cmp, &an, 0.10);
    let f = find(&fs, "p99 latency", "Fast").unwrap();
    assert!((f.average - 2.5).abs() < 1e-9);
    assert!(
        f.text
            .starts_with("Fast shows 2.5x [2.5-2.5] lower p99 latency than Slow"),
        "{}",
        f.text
    );
    assert!(find(&fs, "p99 latency", "Slow").is_none());
    // Mean latency is never asked: closed loop, it restates IOPS.
    assert!(fs.iter().all(|f| f.label != "latency"));
    // ... while Slow has the greater IOPS in this made-up document.
    assert!(find(&fs, "IOPS", "Slow").is_some());
}

#[test]
fn both_directions_never_contradict() {
    let cmp = doc(
        &["A", "B"],
        &[("w1", "bandwidth"), ("w2", "bandwidth")],
        &[
            ("w1", "A", &[400.0]),
            ("w1", "B", &[100.0]),
            ("w2", "A", &[100.0]),
            ("w2", "B", &[200.0]),
        ],
    );
    let an = Analysis::new(&cmp);
    let fs = findings(&cmp, &an, 0.10);
    let a = find(&fs, "bandwidth", "A").unwrap();
    let b = find(&fs, "bandwidth", "B").unwrap();
    assert_eq!((a.tests, a.max_workload.as_str()), (1, "w1"));
    assert_eq!((b.tests, b.max_workload.as_str()), (1, "w2"));
}

#[test]
fn missing_efficiency_gives_no_finding() {
    let mut cmp = doc(
        &["A", "B"],
        &[("w1", "database")],
        &[("w1", "A", &[300.0]), ("w1", "B", &[100.0])],
    );
    for c in &mut cmp.cells {
        c.result.efficiency = Efficiency::default();
        if c.target == "B" {
            c.result.efficiency.iops_per_cpu_pct = Some(5.0);
        }
    }
    let an = Analysis::new(&cmp);
    let fs = findings(&cmp, &an, 0.10);
    assert!(find(&fs, "IOPS", "A").is_some());
    assert!(fs.iter().all(|f| f.category != Category::CpuEfficiency));
    assert!(fs.iter().all(|f| f.category != Category::PowerEfficiency));
}

#[test]
fn odd_values_do_not_crash() {
    let cmp = doc(
        &["A", "B", "C"],
        &[
            ("w1", "database"),
            ("w2", "bandwidth"),
            ("empty", "database"),
        ],
        &[
            ("w1", "A", &[f64::NAN, 100.0]),
            ("w1", "B", &[0.0]),
            ("w1", "C", &[f64::INFINITY]),
            ("w2", "A", &[0.0]),
            ("w2", "B", &[0.0]),
        ],
    );
    let an = Analysis::new(&cmp);
    // NaN is dropped, so A's mean is 100 from one value.
    assert_eq!(an.metric("w1", "A", Metric::Iops).unwrap().mean, 100.0);
    assert!(an.metric("w1", "C", Metric::Iops).is_none());
    assert!(an.get("empty", "A").is_none());
    let fs = findings(&cmp, &an, 0.10);
    // A beats B's zero on w1 is not a ratio: no finding can divide by zero.
    assert!(fs
        .iter()
        .all(|f| f.average.is_finite() && f.max.is_finite()));
    assert!(fs.iter().all(|f| f.max_workload != "w2"));
}

#[test]
fn modeled_power_makes_no_finding_of_its_own() {
    // In the fixture NBD's power is modeled, the others' measured.
    let cmp = sample_comparison();
    let an = Analysis::new(&cmp);
    let fs = findings(&cmp, &an, 0.10);
    let power: Vec<&Finding> = fs
        .iter()
        .filter(|f| f.category == Category::PowerEfficiency)
        .collect();
    assert!(!power.is_empty(), "measured power keeps its findings");
    for f in power {
        assert!(
            !f.better.starts_with("NBD") && !f.worse.starts_with("NBD"),
            "{}",
            f.text
        );
        assert!(!f.modeled_power && !f.text.contains("modeled"));
    }
}

#[test]
fn references_are_neither_subject_nor_object() {
    let mut cmp = doc(
        &["RAM", "A", "B"],
        &[("w1", "database"), ("w2", "bandwidth")],
        &[
            ("w1", "RAM", &[1000.0]),
            ("w1", "A", &[200.0]),
            ("w1", "B", &[100.0]),
            ("w2", "RAM", &[1000.0]),
            ("w2", "A", &[200.0]),
            ("w2", "B", &[100.0]),
        ],
    );
    cmp.targets[0].reference = true;
    let an = Analysis::new(&cmp);
    let fs = findings(&cmp, &an, 0.10);
    assert!(find(&fs, "IOPS", "A").is_some());
    assert!(fs.iter().all(|f| f.better != "RAM" && f.worse != "RAM"));
}

#[test]
fn one_round_gives_no_findings_and_says_so() {
    let mut one = doc(
        &["A", "B"],
        &[("w1", "database")],
        &[("w1", "A", &[400.0]), ("w1", "B", &[100.0])],
    );
    one.cells.retain(|c| c.repeat == 0);
    let r = crate::Report::new(&one, &crate::Options::default());
    assert!(r.findings.is_empty());
    assert_eq!(
        r.withheld.as_deref(),
        Some("one round: no noise estimate, no findings")
    );
    // Two rounds bound an interval: a 4x difference with no spread is found.
    let two = doc(
        &["A", "B"],
        &[("w1", "database")],
        &[("w1", "A", &[400.0, 404.0]), ("w1", "B", &[100.0, 101.0])],
    );
    let an = Analysis::new(&two);
    assert!(find(&findings(&two, &an, 0.10), "IOPS", "A").is_some());
}

// The method's error rates by seeded simulation: analysis_sim_tests.rs.
#[path = "analysis_sim_tests.rs"]
mod sim;

/// A target measured on a host that was busy before its runs: its throughput still counts, its
/// CPU and power efficiency (figures above idle) do not, and the report says why.
#[test]
fn a_busy_baseline_keeps_efficiency_out_of_findings() {
    let mut cmp = doc(
        &["A", "B", "C"],
        &[("w1", "bandwidth"), ("w2", "bandwidth")],
        &[
            ("w1", "A", &[400.0]),
            ("w1", "B", &[100.0]),
            ("w1", "C", &[50.0]),
            ("w2", "A", &[200.0]),
            ("w2", "B", &[100.0]),
            ("w2", "C", &[50.0]),
        ],
    );
    for c in cmp.cells.iter_mut().filter(|c| c.target == "A") {
        c.result.efficiency.host_not_idle = true;
        c.result.cpu = Some(sanbench_doc::host::CpuReport {
            baseline_busy_pct: Some(97.25),
            ..Default::default()
        });
    }
    let an = Analysis::new(&cmp);
    let fs = findings(&cmp, &an, 0.10);
    assert!(find(&fs, "bandwidth", "A").is_some());
    for f in &fs {
        if matches!(
            f.category,
            Category::CpuEfficiency | Category::PowerEfficiency
        ) {
            assert!(f.better != "A" && f.worse != "A", "{}", f.text);
        }
    }
    // B and C, both measured on an idle host, are still compared.
    assert!(find(&fs, "bandwidth CPU efficiency", "B").is_some());
    assert!(an.metric("w1", "A", Metric::MbPerCpu).is_none());
    assert!(an.metric("w1", "A", Metric::MbPerS).is_some());
    let cav = caveats(&cmp);
    assert_eq!(cav.len(), 1, "{cav:?}");
    assert!(cav[0].starts_with("A (9"), "{}", cav[0]);
    assert!(
        cav[0].contains(": the host was not idle before its runs"),
        "{}",
        cav[0]
    );
    assert!(cav[0].contains("97.2 % busy") || cav[0].contains("97.3 % busy"));
    assert!(caveats(&sample_comparison()).is_empty());
}

#[test]
fn ratio_formatting() {
    assert_eq!(fmt_ratio(3.94), "3.9x");
    assert_eq!(fmt_ratio(10.2), "10x");
    assert_eq!(fmt_ratio(1.05), "1.05x");
    assert_eq!(fmt_ratio(7.06), "7.1x");
}

/// Whether an interval holds 1 is the verdict: a bound just off 1 keeps the digits that say
/// which side it is on (a finding printed "[1.00-1.1]" with its low bound at 1.0027 read as
/// touching 1).
#[test]
fn interval_bounds_near_one_stay_on_their_side() {
    use crate::findings::fmt_interval;
    assert_eq!(fmt_interval(Some(1.0027), Some(1.12)), "[1.003-1.1]");
    assert_eq!(fmt_interval(Some(0.91), Some(0.9981)), "[0.91-0.998]");
    assert_eq!(
        fmt_interval(Some(0.99996), Some(1.00004)),
        "[0.9999-1.0001]"
    );
    assert_eq!(fmt_interval(Some(0.9996), Some(1.3)), "[0.9996-1.3]");
    // Elsewhere as before.
    assert_eq!(fmt_interval(Some(1.0), Some(2.2)), "[1.00-2.2]");
    assert_eq!(fmt_interval(Some(0.87), Some(1.04)), "[0.87-1.04]");
    assert_eq!(fmt_interval(Some(1e-4), Some(2e3)), "[<0.001->999]");
    assert_eq!(fmt_interval(None, Some(2.0)), "[unbounded]");
}

/// Cells with faults ask how long the failover stalled: A's 40 ms against B's 2 s over four
/// rounds is a finding in the words, with both stalls and the ratio's interval; the
/// secondary family gives it half its error.
#[test]
fn a_failover_stall_finding_names_both_stalls_and_the_paths() {
    use sanbench_doc::disruption::Disruption;
    use sanbench_doc::multipath::{MultipathReport, PathReport};
    let mut cmp = doc(
        &["A", "B"],
        &[("failover-4k", "random")],
        &[
            ("failover-4k", "A", &[1000.0, 1010.0, 990.0, 1005.0]),
            ("failover-4k", "B", &[1000.0, 995.0, 1008.0, 1002.0]),
        ],
    );
    let stalls = |t: &str| -> [f64; 4] {
        if t == "A" {
            [38.0, 42.0, 40.0, 41.0]
        } else {
            [2100.0, 1900.0, 2000.0, 2050.0]
        }
    };
    for c in &mut cmp.cells {
        let s = stalls(&c.target)[c.repeat as usize];
        c.result.disruption = Some(Disruption {
            cause: "fault".into(),
            stall_ms: s,
            ..Disruption::default()
        });
        c.result.multipath = Some(MultipathReport {
            paths: vec![PathReport::default(); 2],
            ..MultipathReport::default()
        });
    }
    let an = Analysis::new(&cmp);
    let fs = findings(&cmp, &an, 0.10);
    let f = find(&fs, "failover stall", "A").unwrap_or_else(|| panic!("{fs:#?}"));
    assert!(
        f.text
            .starts_with("With 2 paths, A's failover stalls I/O for 40 ms ["),
        "{}",
        f.text
    );
    assert!(f.text.contains("vs B's 2.0 s ["), "{}", f.text);
    assert!(f.text.contains("] shorter; 1 of 1 tests)"), "{}", f.text);
    // About 50x, and the interval holds it.
    assert!((f.average - 2012.0 / 40.2).abs() < 3.0, "{}", f.average);
    assert!(f.ci_low.unwrap() < f.average && f.average < f.ci_high.unwrap());
    let j = crate::questions::judge(&cmp);
    let q = j.questions.iter().find(|q| q.family == "failover").unwrap();
    assert_eq!(q.metric, "stall_ms");
    // Half the secondary family's 1 %, over one question and one average.
    assert!((q.alpha - 0.005 / 2.0).abs() < 1e-12, "{}", q.alpha);
    let s = j
        .questions
        .iter()
        .find(|q| q.family == "secondary")
        .unwrap();
    assert!(s.alpha < 0.01 / 2.0, "{}", s.alpha);
    // Without faults there is no failover question, and the secondary keeps its 1 %.
    for c in &mut cmp.cells {
        c.result.disruption = None;
    }
    let j = crate::questions::judge(&cmp);
    assert!(j.questions.iter().all(|q| q.family != "failover"));
}

// How an average that does not lead is worded: analysis_wording_tests.rs.
#[path = "analysis_wording_tests.rs"]
mod wording;

// The caveats: analysis_caveat_tests.rs.
#[path = "analysis_caveat_tests.rs"]
mod caveat;

/// Carry-over of 12 % on whatever runs right after A (cells carry their slots, so the report
/// rebuilds the run order): the report estimates it (+8 % centred over three targets) and
/// warns for A alone (B and C, -4 % each, are inside half the margin).
#[test]
fn a_target_that_speeds_what_follows_it_is_named() {
    let names = ["A", "B", "C"];
    let rows = [
        [0, 1, 2],
        [1, 2, 0],
        [2, 0, 1],
        [0, 2, 1],
        [2, 1, 0],
        [1, 0, 2],
    ];
    let mut cmp = doc(&names, &[("w1", "bandwidth"), ("w2", "bandwidth")], &[]);
    let mut prev: Option<usize> = None;
    let mut k = 0u32;
    for round in 0..12u32 {
        for (w, wid) in ["w1", "w2"].iter().enumerate() {
            let row = rows[(round as usize + 3 * w) % 6];
            for (slot, &t) in row.iter().enumerate() {
                k += 1;
                let noise = 1.0 + 0.01 * (f64::from(k * 7919 % 13) - 6.0) / 6.0;
                let carry = if prev == Some(0) { 1.12 } else { 1.0 };
                let x = 1000.0 * noise * carry;
                let mut one = doc(&names, &[(wid, "bandwidth")], &[(wid, names[t], &[x])]);
                let mut cell = one.cells.swap_remove(0);
                cell.round = Some(round);
                cell.repeat = round;
                cell.slot = Some(slot as u32);
                cmp.cells.push(cell);
                prev = Some(t);
            }
        }
    }
    let (est, warn) = crate::questions::carry_over(&cmp);
    let a = est[0].expect("estimable");
    assert!((a - 0.08).abs() < 0.03, "{est:?}");
    assert_eq!(warn.len(), 1, "{warn:?}");
    assert!(warn[0].starts_with("A: the cell right after it ran") && warn[0].contains("faster"));
    let report = crate::Report::new(&cmp, &crate::Options::default());
    assert!(report.caveats.iter().any(|c| c == &warn[0]));
}
