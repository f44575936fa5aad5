//! Replication: reproduced, inconclusive, reversed, differs, not in B, not comparable.

use super::*;
use crate::Options;
use sanbench_doc::Comparison;
use sanbench_store::fixture::sample_comparison;

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

/// Run B of the hand-made pair (`fixture::sample_rerun`): NBD's sequential reads a third of
/// A's (the direction against FC and iSCSI turns), FC's database IOPS swinging from round to
/// round (nothing decided about FC there), sequential writes as in A.
fn run_b() -> Comparison {
    sanbench_store::fixture::sample_rerun()
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
    let bad: Vec<_> = r
        .rows
        .iter()
        .filter(|x| x.outcome != Outcome::Reproduced)
        .collect();
    assert_eq!(r.count(Outcome::Reproduced), r.rows.len(), "{bad:#?}");
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

/// A pair split within a category: NBD ahead of FC in sequential reads, FC ahead in
/// sequential writes, one "better" finding each way in A. B without NBD's read lead (its
/// reads swing from round to round) keeps FC's write lead: NBD's claim is undecided in B,
/// not reversed, since FC's finding in B is about other tests. B where FC also wins the
/// reads reverses it.
#[test]
fn a_finding_each_way_is_reversed_only_on_its_own_tests() {
    let scale = |c: &mut Comparison, workload: &str, target: &str, by: &dyn Fn(usize) -> f64| {
        for cell in &mut c.cells {
            let round = cell.round.unwrap_or(cell.repeat) as usize;
            if cell.workload == workload && cell.target == target {
                cell.result.mb_per_s *= by(round);
                cell.result.iops *= by(round);
            }
        }
    };
    let mut a = sample_comparison();
    scale(&mut a, "seq-write-1m", NBD, &|_| 0.3);
    let ra = Report::new(&a, &Options::default());
    let bw = |r: &Report, better: &str| {
        r.findings
            .iter()
            .find(|f| f.label == "bandwidth" && f.better == better && f.kind == "better")
            .map(|f| f.workloads.clone())
    };
    assert_eq!(bw(&ra, NBD), Some(vec!["seq-read-1m".to_string()]));
    assert_eq!(bw(&ra, "FC 8G"), Some(vec!["seq-write-1m".to_string()]));
    let claim = format!("{NBD} vs FC 8G: bandwidth");

    let mut b = a.clone();
    scale(&mut b, "seq-read-1m", NBD, &|r| [1.0, 2.5, 0.3][r % 3]);
    let rb = Report::new(&b, &Options::default());
    assert_eq!(bw(&rb, NBD), None, "{:#?}", rb.findings);
    assert!(bw(&rb, "FC 8G").is_some());
    let r = replicate(&ra, &rb);
    assert_eq!(outcome(&r, &claim), Outcome::Inconclusive);
    let row = r.rows.iter().find(|x| x.claim == claim).unwrap();
    assert!(row.note.contains("on other tests"), "{row:?}");
    // FC's own write lead reproduces.
    assert_eq!(
        outcome(&r, &format!("FC 8G vs {NBD}: bandwidth")),
        Outcome::Reproduced
    );

    let mut b = a.clone();
    scale(&mut b, "seq-read-1m", NBD, &|_| 0.2);
    let rb = Report::new(&b, &Options::default());
    assert_eq!(
        bw(&rb, "FC 8G").map(|mut w| {
            w.sort();
            w
        }),
        Some(vec!["seq-read-1m".to_string(), "seq-write-1m".to_string()])
    );
    assert_eq!(outcome(&replicate(&ra, &rb), &claim), Outcome::Reversed);
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
