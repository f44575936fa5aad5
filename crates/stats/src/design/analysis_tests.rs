//! Unit tests of [`super`]: verdicts, round effects, missing cells, projection, counting floor, averages.
use super::*;

fn mg() -> Margins {
    Margins {
        min_effect: 0.10,
        alpha: 0.05,
        project: true,
    }
}

#[test]
fn t_quantiles_match_tables() {
    assert!((t_quantile(0.975, 4.0) - 2.776).abs() < 1e-3);
    assert!((t_quantile(0.975, 30.0) - 2.042).abs() < 1e-3);
}

#[test]
fn the_partitioning_critical_value_lies_between_the_one_and_two_sided_quantiles() {
    // The demo's ten rounds: each question's error 0.00159 at 9 degrees of freedom.
    let (a, df) = (0.00159, 9.0);
    let (one, two) = (t_quantile(1.0 - a, df), t_quantile(1.0 - a / 2.0, df));
    assert!(
        (two - 4.46).abs() < 0.01 && (one - 3.98).abs() < 0.01,
        "{one} {two}"
    );
    // No margin: the two-sided quantile (the interval at 1 − α); an infinitely wide one:
    // the one-sided quantile.
    assert_eq!(critical(a, df, 0.0), two);
    assert!((critical(a, df, f64::INFINITY) - one).abs() < 1e-6);
    // Between them, the worst-case error of the three verdicts is exactly α.
    let tail = |x: f64| 0.5 * crate::student_t_two_sided_p(x, df);
    for shift in [0.5, 1.0, 2.0, 4.0] {
        let c = critical(a, df, shift);
        assert!(c > one && c < two, "{shift}: {c}");
        assert!((tail(c) + tail(c + shift) - a).abs() < 1e-9, "{shift}: {c}");
    }
    assert!(critical(a, df, 2.0) < critical(a, df, 1.0));
    // A margin of two standard errors each side (a shift of 4) already leaves nearly only
    // the one-sided quantile.
    assert!(critical(a, df, 4.0) - one < 0.01 * one);
}

#[test]
fn verdicts_follow_the_interval() {
    let m = 1.1f64.ln();
    assert_eq!(verdict(0.5, 0.1, 0.1), Verdict::Higher);
    assert_eq!(verdict(-0.5, 0.1, 0.1), Verdict::Lower);
    assert_eq!(verdict(0.0, m * 0.9, 0.1), Verdict::Equivalent);
    assert_eq!(verdict(0.2, 0.15, 0.1), Verdict::Inconclusive);
    assert_eq!(verdict(0.0, f64::INFINITY, 0.1), Verdict::Inconclusive);
}

#[test]
fn round_effects_cancel_and_the_ratio_is_exact_without_noise() {
    // Target 1 is 1.8x target 0 in every round; rounds drift by a factor of 3.
    let mut t = Table::new(1, 3, 4);
    for r in 0..4 {
        let drift = 1.0 + r as f64;
        t.set(0, 0, r, 100.0 * drift);
        t.set(
            0,
            1,
            r,
            180.0 * drift * (1.0 + 0.01 * ((r % 2) as f64 - 0.5)),
        );
        t.set(
            0,
            2,
            r,
            100.0 * drift * (1.0 + 0.01 * ((r % 2) as f64 - 0.5)),
        );
    }
    let ans = judge_workload(&t, 0, &[0, 1, 2], mg());
    assert_eq!(ans.len(), 3);
    let a01 = ans.iter().find(|a| (a.a, a.b) == (0, 1)).unwrap().judged;
    assert!((a01.ratio() - 1.0 / 1.8).abs() < 0.01, "{}", a01.ratio());
    assert_eq!(a01.verdict, Verdict::Lower);
    assert!(a01.low() < 1.0 / 1.8 && a01.high() > 1.0 / 1.8);
    let a12 = ans.iter().find(|a| (a.a, a.b) == (1, 2)).unwrap().judged;
    assert_eq!(a12.verdict, Verdict::Higher);
    assert_eq!(a12.rounds, 4);
}

#[test]
fn incomplete_rounds_are_left_out_and_one_round_decides_nothing() {
    let mut t = Table::new(1, 2, 3);
    t.set(0, 0, 0, 10.0);
    t.set(0, 1, 0, 20.0);
    t.set(0, 0, 1, 10.0); // round 1 lacks target 1
    let a = judge_workload(&t, 0, &[0, 1], mg());
    assert_eq!(a[0].judged.rounds, 1);
    assert_eq!(a[0].judged.verdict, Verdict::Inconclusive);
    assert!(a[0].judged.half_width.is_infinite());
    // Non-positive figures are missing, not logs of nonsense.
    t.set(0, 1, 1, 0.0);
    assert_eq!(t.get(0, 1, 1), None);
}

#[test]
fn projection_says_how_many_more_rounds() {
    let mut t = Table::new(1, 2, 3);
    for (r, (x, y)) in [(100.0, 125.0), (100.0, 140.0), (100.0, 118.0)]
        .into_iter()
        .enumerate()
    {
        t.set(0, 0, r, x);
        t.set(0, 1, r, y);
    }
    let j = judge_workload(&t, 0, &[0, 1], mg())[0].judged;
    assert_eq!(j.verdict, Verdict::Inconclusive);
    let more = j.more_rounds.expect("decidable");
    assert!((1..100).contains(&more), "{more}");
}

#[test]
fn identical_counts_do_not_make_an_interval_of_zero_width() {
    // 29 and 22 I/Os in every round: no spread at all, but each count is only known to
    // about one I/O, so the interval keeps that width.
    let mut t = Table::new(1, 2, 4);
    for r in 0..4 {
        t.set_counted(0, 0, r, 29.0 / 0.3, 29);
        t.set_counted(0, 1, r, 22.0 / 0.3, 22);
    }
    let j = judge_workload(&t, 0, &[0, 1], mg())[0].judged;
    assert!(j.half_width > 0.02, "{j:?}");
    assert!(
        j.low() < 29.0 / 22.0 * 0.98 && j.high() > 29.0 / 22.0 * 1.02,
        "{j:?}"
    );
    // Every ratio the counts allow (each true count within one I/O of what was counted, the
    // same in every round: a bias no round averages out) lies inside, whatever the rounds.
    assert!(j.low() <= 28.0 / 23.0 && j.high() >= 30.0 / 21.0, "{j:?}");
    let mut many = Table::new(1, 2, 40);
    for r in 0..40 {
        many.set_counted(0, 0, r, 29.0 / 0.3, 29);
        many.set_counted(0, 1, r, 22.0 / 0.3, 22);
    }
    let j = judge_workload(&many, 0, &[0, 1], mg())[0].judged;
    assert!(j.low() <= 28.0 / 23.0 && j.high() >= 30.0 / 21.0, "{j:?}");
    // Without counts (figures of unknown resolution) nothing changes.
    let mut u = Table::new(1, 2, 4);
    for r in 0..4 {
        u.set(0, 0, r, 29.0 / 0.3);
        u.set(0, 1, r, 22.0 / 0.3);
    }
    assert!(judge_workload(&u, 0, &[0, 1], mg())[0].judged.half_width < 1e-9);
}

#[test]
fn summary_is_the_geometric_mean_over_workloads() {
    let mut t = Table::new(2, 2, 6);
    for r in 0..6 {
        let e = 1.0 + 0.02 * (r % 3) as f64;
        t.set(0, 0, r, 200.0 * e);
        t.set(0, 1, r, 100.0);
        t.set(1, 0, r, 800.0 / e);
        t.set(1, 1, r, 100.0);
    }
    let s = judge_summary(&t, &[0, 1], &[0, 1], 0, 1, mg()).unwrap();
    assert!((s.ratio() - 4.0).abs() < 0.01, "{}", s.ratio());
    assert_eq!(s.rounds, 6);
    assert_eq!(s.verdict, Verdict::Higher);
}

/// Six compared targets of which four skip the workloads (the lab's failover suite: the
/// single-link targets have no second path), two rounds, the two that ran in slots 3 and 4,
/// then 1 and 2: every slot holds one round of one target, so the slot terms absorb the
/// contrast, with or without carry-over. The pair is still asked, by the two-way model (it
/// had no answer at all, and the suite no questions; lab_paths.rs).
#[test]
fn a_pair_whose_slots_confound_it_is_still_answered() {
    let mut t = Table::new(2, 6, 2);
    // (round, workload, slot, target) in run order.
    let order = [
        (0, 0, 3, 3),
        (0, 0, 4, 0),
        (0, 1, 3, 0),
        (0, 1, 5, 3),
        (1, 0, 1, 0),
        (1, 0, 2, 3),
        (1, 1, 1, 0),
        (1, 1, 3, 3),
    ];
    for (i, &(r, w, slot, tg)) in order.iter().enumerate() {
        let base = if w == 0 { 50_000.0 } else { 170.0 };
        let noise = 1.0 + 0.01 * (i % 3) as f64;
        t.set(w, tg, r, base * noise * if tg == 0 { 1.05 } else { 1.0 });
        t.set_slot(w, tg, r, slot);
        if i > 0 {
            t.set_prev(w, tg, r, order[i - 1].3);
        }
    }
    for w in 0..2 {
        let a = judge_workload(&t, w, &[0, 1, 2, 3, 4, 5], mg());
        assert_eq!(a.len(), 1, "workload {w}");
        assert_eq!((a[0].a, a[0].b), (0, 3));
        assert!(a[0].judged.ratio() > 1.0, "{:?}", a[0].judged);
    }
}

/// One workload, so the run's first cell has no predecessor and no carry-over column is
/// redundant: the carry-over of a target that halves the cell after it is still estimated
/// (it was not before: every single-workload comparison reported none).
#[test]
fn carry_over_on_one_workload_is_estimated() {
    let rows = [
        [0, 1, 2],
        [1, 2, 0],
        [2, 0, 1],
        [0, 2, 1],
        [2, 1, 0],
        [1, 0, 2],
    ];
    let mut t = Table::new(1, 3, 6);
    let mut prev: Option<usize> = None;
    let mut k = 0u32;
    for (r, row) in rows.iter().enumerate() {
        for (slot, &c) in row.iter().enumerate() {
            k += 1;
            let noise = 1.0 + 0.01 * (f64::from(k * 7919 % 13) - 6.0) / 6.0;
            let carry = if prev == Some(2) { 0.5 } else { 1.0 };
            t.set(0, c, r, 100.0 * noise * carry);
            t.set_slot(0, c, r, slot);
            if let Some(p) = prev {
                t.set_prev(0, c, r, p);
            }
            prev = Some(c);
        }
    }
    let est = carry_over_by_target(&t);
    let c = est[2].expect("estimable");
    // ln 0.5 centred over three targets: 2/3 of it, a cell after target 2 about 37 % lower
    // than after the average target.
    assert!(
        (c - ((2.0 / 3.0) * 0.5f64.ln()).exp_m1()).abs() < 0.05,
        "{est:?}"
    );
    assert!(est[0].unwrap() > 0.0 && est[1].unwrap() > 0.0, "{est:?}");
}
