//! The headline's order and the wording of an average that does not lead.

use super::*;

fn finding(label: &str, kind: &str, average: f64, text: &str) -> Finding {
    Finding {
        category: Category::Bandwidth,
        label: label.into(),
        kind: kind.into(),
        better: "A".into(),
        worse: "B".into(),
        average,
        ci_low: None,
        ci_high: None,
        tests: 1,
        compared: 2,
        inconclusive: 1,
        workloads: vec!["w".into()],
        max: 1.5,
        max_workload: "w".into(),
        max_title: "W".into(),
        modeled_power: false,
        text: text.into(),
    }
}

#[test]
fn the_headline_keeps_the_reports_order_within_each_label() {
    // In the report's order: differences first, whatever the averages. An equivalence
    // with a larger average than the differences once led the terminal's list.
    let all = vec![
        finding("bandwidth", "better", 1.06, "b1"),
        finding("bandwidth", "better", 0.94, "b2"),
        finding("bandwidth", "better", 1.01, "b3"),
        finding("bandwidth", "equivalent", 1.08, "b-eq"),
        finding("IOPS", "equivalent", 1.0, "i-eq"),
        finding("p99 latency", "better", 1.3, "p1"),
    ];
    let texts: Vec<&str> = headline(&all, 2).iter().map(|f| f.text.as_str()).collect();
    assert_eq!(texts, ["b1", "b2", "i-eq", "p1"]);
    assert!(headline(&all, 0).is_empty());
    assert_eq!(headline(&all, 9).len(), all.len());
}

#[test]
fn an_average_that_does_not_lead_says_what_its_interval_says() {
    let says = |lo: f64, hi: f64| average_says(Some(lo), Some(hi), 0.10, "greater", "B");
    // Stop 35's demo: above 1, inside the margin.
    assert_eq!(says(1.03, 1.098), "greater by less than 10 %");
    assert_eq!(says(1.03, 1.2), "greater, not shown beyond 10 %");
    // Spanning 1: inside the margin is equivalence, beyond it nothing is shown.
    assert_eq!(says(0.9997, 1.08), "within 10 %");
    assert_eq!(says(0.95, 1.06), "within 10 %");
    assert_eq!(says(0.88, 1.4), "inconclusive");
    assert_eq!(says(0.85, 1.05), "inconclusive");
    // Below 1: the other side's favour, three ways.
    assert_eq!(says(0.95, 0.98), "in B's favour by less than 10 %");
    assert_eq!(says(0.8, 0.95), "in B's favour, not shown beyond 10 %");
    assert_eq!(says(0.5, 0.8), "in B's favour beyond 10 %");
    // At the margin: not inside it (the tests' strict inequalities, judged on the log scale
    // by the tests' own `verdict`, where ln(1 / 1.1) may round a hair inside −ln 1.1: the
    // lower bound is taken just below it).
    assert_eq!(says(1.01, 1.1), "greater, not shown beyond 10 %");
    assert_eq!(says(0.909, 0.99), "in B's favour, not shown beyond 10 %");
    // Unbounded, and another margin and direction.
    assert_eq!(
        average_says(None, None, 0.10, "greater", "B"),
        "inconclusive"
    );
    assert_eq!(
        average_says(Some(1.01), Some(1.04), 0.05, "lower", "B"),
        "lower by less than 5 %"
    );
}

#[test]
fn only_an_average_beyond_the_margin_is_decided() {
    assert!(average_decided(Some(1.11), 0.10));
    assert!(!average_decided(Some(1.1), 0.10));
    assert!(!average_decided(Some(1.03), 0.10));
    assert!(average_decided(Some(1.03), 0.02));
    assert!(!average_decided(None, 0.0));
}

/// A pair split within a category (NBD ahead of FC on sequential reads, FC ahead on
/// sequential writes): each of the two findings names the other side's win, and the
/// terminal's headline shows one of them, its place going to another pair.
#[test]
fn a_split_pair_says_so_and_heads_once() {
    use crate::{Options, Report};
    const NBD: &str = "NBD <ram> & co";
    let mut c = sanbench_store::fixture::sample_comparison();
    for cell in &mut c.cells {
        if cell.workload == "seq-write-1m" && cell.target == NBD {
            cell.result.mb_per_s *= 0.3;
            cell.result.iops *= 0.3;
        }
    }
    let r = Report::new(&c, &Options::default());
    let bw = |better: &str, worse: &str| {
        r.findings
            .iter()
            .find(|f| {
                f.label == "bandwidth"
                    && f.kind == "better"
                    && f.better == better
                    && f.worse == worse
            })
            .unwrap_or_else(|| panic!("{better} over {worse}: {:#?}", r.findings))
    };
    let (nbd, fc) = (bw(NBD, "FC 8G"), bw("FC 8G", NBD));
    assert!(
        nbd.text.contains("on 1 of 2 tests (maximum")
            && nbd.text.contains("in Sequential read")
            && nbd.text.contains(", FC 8G on 1 (maximum ")
            && nbd.text.contains("in Sequential write"),
        "{}",
        nbd.text
    );
    assert!(
        fc.text.contains(&format!("{NBD} on 1 (maximum ")),
        "{}",
        fc.text
    );
    // A pair that is not split says nothing of the kind.
    let one_way = r
        .findings
        .iter()
        .find(|f| {
            f.kind == "better"
                && !r
                    .findings
                    .iter()
                    .any(|g| g.label == f.label && g.better == f.worse && g.worse == f.better)
        })
        .expect("a finding one way only");
    assert!(
        !one_way.text.contains(&format!(", {} on ", one_way.worse)),
        "{}",
        one_way.text
    );
    assert!(
        !one_way.text.contains(&format!("; {} on ", one_way.worse)),
        "{}",
        one_way.text
    );
    // The headline: one of the two, whatever the number of places.
    for n in [1, 2, 9] {
        let head = headline(&r.findings, n);
        let both = head
            .iter()
            .filter(|f| std::ptr::eq(**f, nbd) || std::ptr::eq(**f, fc));
        assert!(both.count() <= 1, "{n}: {:#?}", head);
    }
    let head = headline(&r.findings, 9);
    assert!(head
        .iter()
        .any(|f| std::ptr::eq(*f, nbd) || std::ptr::eq(*f, fc)));
}
