//! Unit tests of [`super`]: rounds, stopping, spending over looks, the budget's looks.
use super::*;

fn cfg(repeat: Repeat) -> Config {
    Config {
        workloads: 2,
        targets: 3,
        compared: vec![0, 1, 2],
        groups: vec![0, 0],
        seed: 9,
        repeat,
        budget: None,
        nominal_round: Duration::from_secs(6),
        min_effect: 0.10,
    }
}

#[test]
fn fixed_runs_every_cell_of_every_round_once() {
    let mut p = Plan::new(cfg(Repeat::Fixed(4))).unwrap();
    let mut n = 0;
    while let Some(s) = p.next(Duration::ZERO) {
        assert_eq!(s.round, n / 6);
        p.record(&s, Some(100.0));
        n += 1;
    }
    assert_eq!(n, 24);
    assert_eq!(p.stopped(), Some(Stop::Fixed));
}

#[test]
fn auto_stops_when_decided_at_a_square_boundary() {
    let mut p = Plan::new(cfg(Repeat::Auto { max: 30 })).unwrap();
    let mut k = 0u32;
    while let Some(s) = p.next(Duration::ZERO) {
        // Target t is 2^t times target 0, with a little noise: quickly decided.
        let noise = 1.0 + 0.01 * ((k * 7919 % 13) as f64 - 6.0) / 6.0;
        p.record(&s, Some(100.0 * (1u32 << s.target) as f64 * noise));
        k += 1;
    }
    assert_eq!(p.stopped(), Some(Stop::Decided));
    assert_eq!(p.rounds_started() % 3, 0);
    assert!(p.rounds_started() < 30);
    assert!(p
        .answers()
        .iter()
        .all(|a| a.judged.verdict == Verdict::Lower));
}

#[test]
fn auto_stops_at_the_cap_and_at_the_budget() {
    let mut p = Plan::new(cfg(Repeat::Auto { max: 5 })).unwrap();
    let mut k = 0u32;
    while let Some(s) = p.next(Duration::ZERO) {
        // Identical targets with noise far above the margin: never decided in 5 rounds.
        k = k.wrapping_mul(1_103_515_245).wrapping_add(12345);
        p.record(&s, Some(100.0 * (1.0 + (k >> 16) as f64 / 65536.0)));
    }
    assert_eq!(p.stopped(), Some(Stop::MaxRounds));
    assert_eq!(p.rounds_started(), 5);

    let mut c = cfg(Repeat::Auto { max: 50 });
    c.budget = Some(Duration::from_secs(30));
    let mut p = Plan::new(c).unwrap();
    let mut t = Duration::ZERO;
    while let Some(s) = p.next(t) {
        t += Duration::from_secs(2); // 12 s a round: rounds 1 and 2 fit, a third would not
        p.record(
            &s,
            Some(100.0 + (s.round * 7 + s.target as u32 * 3) as f64 % 11.0),
        );
    }
    assert_eq!(p.stopped(), Some(Stop::Budget));
    assert_eq!(p.rounds_started(), 2);
}

#[test]
fn a_workload_a_target_skips_does_not_keep_the_comparison_going() {
    // Target 2 has no figure on workload 1 (it does not run it): the pairs it touches
    // there ask nothing, the others are quickly decided, and the plan stops decided.
    let mut p = Plan::new(cfg(Repeat::Auto { max: 30 })).unwrap();
    let mut k = 0u32;
    while let Some(s) = p.next(Duration::ZERO) {
        let noise = 1.0 + 0.01 * ((k * 7919 % 13) as f64 - 6.0) / 6.0;
        let skipped = s.workload == 1 && s.target == 2;
        p.record(
            &s,
            (!skipped).then(|| 100.0 * (1u32 << s.target) as f64 * noise),
        );
        k += 1;
    }
    assert_eq!(p.stopped(), Some(Stop::Decided));
    assert!(p.rounds_started() < 30);
    assert_eq!(p.answers().len(), 3 + 1);
}

#[test]
fn an_interrupted_round_is_judged_as_the_next_look() {
    let mut p = Plan::new(cfg(Repeat::Auto { max: 30 })).unwrap();
    // Three complete rounds (one square: look 1), then one cell of the fourth.
    for _ in 0..3 * 6 + 1 {
        let s = p.next(Duration::ZERO).unwrap();
        p.record(&s, Some(100.0 + s.round as f64));
    }
    assert_eq!(p.design().rounds, 3);
    let k = looks(Repeat::Auto { max: 30 }, 3);
    let family = primary_family(2, 1, 3);
    let want = ALPHA_PRIMARY / family as f64 * look_share(2, k);
    assert!(
        (p.margins().alpha - want).abs() < 1e-15,
        "{}",
        p.margins().alpha
    );
}

#[test]
fn bad_configurations_are_refused() {
    assert_eq!(
        Plan::new(cfg(Repeat::Fixed(0))).err(),
        Some(PlanError::NoRounds)
    );
    assert_eq!(
        Plan::new(cfg(Repeat::Auto { max: 1 })).err(),
        Some(PlanError::MaxTooSmall)
    );
    let mut c = cfg(Repeat::Fixed(3));
    c.min_effect = 1.5;
    assert_eq!(Plan::new(c).err(), Some(PlanError::MinEffect));
    let mut c = cfg(Repeat::Fixed(3));
    c.budget = Some(Duration::from_secs(1));
    assert!(matches!(
        Plan::new(c).err(),
        Some(PlanError::BudgetTooShort { .. })
    ));
}

#[test]
fn spending_over_looks_adds_up_to_the_question_error() {
    for (max, t) in [(20, 3), (20, 5), (7, 2), (30, 4)] {
        let k = looks(Repeat::Auto { max }, t);
        let total: f64 = (1..=k).map(|i| look_share(i, k)).sum();
        assert!((total - 1.0).abs() < 1e-12, "{max} {t}");
        assert_eq!(look_of(max, t, k), k);
        assert_eq!(look_of(t, t, k), 1);
        // Between looks: judged as the next one.
        assert_eq!(look_of(t + 1, t, k), 2.min(k));
        // What the earlier looks left is the rest, down to the last look's own share.
        for i in 1..=k {
            let before: f64 = (1..i).map(|j| look_share(j, k)).sum();
            assert!((before + rest_share(i, k) - 1.0).abs() < 1e-12);
        }
        assert!((rest_share(k, k) - look_share(k, k)).abs() < 1e-12);
    }
    assert_eq!(looks(Repeat::Fixed(3), 5), 1);
    assert_eq!(look_share(1, 1), 1.0);
}

#[test]
fn a_budget_sets_the_looks_and_its_stop_spends_the_rest() {
    // 6 s nominal rounds in a 40 s budget: 6 rounds fit, 2 looks of 3-round squares (not
    // --max-repeat 30's 10). Rounds really take 12 s: the budget stops after 3 rounds,
    // look 1 of 2, which spends all of the question's error.
    let mut c = cfg(Repeat::Auto { max: 30 });
    c.budget = Some(Duration::from_secs(40));
    let mut p = Plan::new(c.clone()).unwrap();
    assert_eq!(p.design().looks, Some(2));
    let mut t = Duration::ZERO;
    while let Some(s) = p.next(t) {
        t += Duration::from_secs(2);
        // Identical targets, noise far above the margin: never decided.
        p.record(
            &s,
            Some(100.0 * (1.0 + 0.5 * ((s.round * 7 + s.target as u32) % 5) as f64)),
        );
    }
    assert_eq!(p.stopped(), Some(Stop::Budget));
    assert_eq!(p.rounds_started(), 3);
    let family = primary_family(2, 1, 3);
    let full = ALPHA_PRIMARY / family as f64;
    assert!(
        (p.margins().alpha - full).abs() < 1e-15,
        "{}",
        p.margins().alpha
    );
    // The report's re-judging reads the same from the recorded design.
    assert!((question_alpha(ALPHA_PRIMARY, family, &p.design()) - full).abs() < 1e-15);
    // A decided stop spends its look's share only; documents without `looks` (written
    // before) are judged as they were.
    let mut d = p.design();
    d.stop = Stop::Decided.key().into();
    assert!((question_alpha(ALPHA_PRIMARY, family, &d) - full / 3.0).abs() < 1e-15);
    d.stop = Stop::Budget.key().into();
    d.looks = None;
    let k = looks(Repeat::Auto { max: 30 }, 3);
    assert!((question_alpha(ALPHA_PRIMARY, family, &d) - full * look_share(1, k)).abs() < 1e-15);
    // Rounds faster than the nominal one never run past the looks counted: the cap.
    let mut p = Plan::new(c).unwrap();
    while let Some(s) = p.next(Duration::ZERO) {
        p.record(
            &s,
            Some(100.0 * (1.0 + 0.5 * ((s.round * 7 + s.target as u32) % 5) as f64)),
        );
    }
    assert_eq!(p.stopped(), Some(Stop::Budget));
    assert_eq!(p.rounds_started(), 6);
}

#[test]
fn family_counts_questions_and_averages() {
    // The demo: five workloads in two groups, three compared targets (three pairs).
    assert_eq!(primary_family(5, 2, 3), 21);
    assert!((primary_alpha(5, 2, 3) - 0.04 / 21.0).abs() < 1e-15);
    assert_eq!(primary_family(5, 2, 1), 0);
}
