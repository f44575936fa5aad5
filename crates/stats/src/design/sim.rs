//! Seeded simulation of whole comparisons, the evidence that the plan's error rates are what
//! `docs/MEASURE.md` claims: the test suite runs it (A/A false findings, power, carry-over,
//! optional stopping, and the noise of issue 40), and `findings_sim`
//! (scripts/bench_findings.py) prints the figures.
//!
//! The noise model follows what storage benchmarks on this project's 2-core VM show: per cell
//! `ln y = μ_t,w + ρ_r + s_slot + Σ carry + σ_t e_t,w,r`, with a round effect `ρ_r` (the machine
//! drifting; sd 0.10), a slot effect rising with the slot (warm-up: +2 % per slot), a carry-over
//! on the cell right after given targets (whatever workload it belongs to), a per-target noise
//! level (drawn from a range, or given per target), and a per-target-and-workload noise `e`
//! that may persist from round to round (AR(1) with coefficient `phi`) and may have heavy or
//! skewed tails (Student's t with 3 degrees of freedom, log-normal), scaled to unit variance.

use std::time::Duration;

use super::analysis::{judge_workload, Margins, Table, Verdict};
use super::plan::{look_of, look_share, looks, Config, Plan, Repeat, Stop};
use super::rng::Rng;
use super::scenario::Noise;
pub use super::scenario::{Scenario, Tails};

/// What one simulated comparison concluded.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Outcome {
    /// Questions and averages with a wrong verdict: "higher"/"lower" whose true ratio is not
    /// beyond the margin on that side (a false finding), or "equivalent" whose true ratio is
    /// not within it; and all with a "higher"/"lower" verdict.
    pub false_findings: usize,
    pub findings: usize,
    /// Questions and averages whose true ratio lies outside their interval.
    pub misses: usize,
    /// Per-workload questions whose true ratio is beyond the margin (the effect's), found in
    /// the right direction with the truth inside the interval.
    pub effect_found: usize,
    pub effect_questions: usize,
    /// The same for the findings' averages (per group and pair) whose true ratio is beyond
    /// the margin.
    pub effect_avg_found: usize,
    pub effect_avgs: usize,
    /// Per pair of targets (a < b, row-major over the upper triangle): the per-workload
    /// questions whose interval missed its truth, and the error each question spent at the
    /// analysis judged (so a pair's miss rate can be set against its bound, twice that: the
    /// intervals are the verdicts' under the partitioning principle, `interval::critical`).
    pub pair_misses: Vec<usize>,
    pub pair_questions: Vec<usize>,
    pub question_alpha: f64,
    pub rounds: u32,
    pub stop: Option<Stop>,
}

/// Index of pair (a, b), a < b, among the `t (t - 1) / 2` pairs of `t` targets.
pub fn pair_index(a: usize, b: usize, t: usize) -> usize {
    a * (2 * t - a - 1) / 2 + (b - a - 1)
}

/// Runs one comparison of the scenario with this seed through the real [`Plan`], and judges
/// its answers and averages (the same analysis the report prints).
pub fn run(sc: &Scenario, seed: u64) -> Outcome {
    judged(sc, &simulate(sc, seed))
}

/// Runs one comparison of the scenario through the real [`Plan`] and returns the plan.
pub fn simulate(sc: &Scenario, seed: u64) -> Plan {
    let mut noise = Noise::new(sc, seed);
    let groups: Vec<usize> = (0..sc.workloads).map(|w| usize::from(w >= 2)).collect();
    // A cell's nominal time is a second.
    let nominal = Duration::from_secs((sc.workloads * sc.targets) as u64);
    let cfg = Config {
        workloads: sc.workloads,
        targets: sc.targets,
        compared: (sc.references..sc.targets).collect(),
        groups: groups.clone(),
        seed,
        repeat: sc.repeat,
        budget: sc.budget.map(|(b, _)| nominal.mul_f64(b)),
        nominal_round: if sc.budget.is_some() {
            nominal
        } else {
            Duration::ZERO
        },
        min_effect: sc.min_effect,
    };
    let cell = Duration::from_secs_f64(sc.budget.map_or(0.0, |(_, slow)| slow));
    let mut plan = Plan::new(cfg).expect("valid scenario");
    plan.set_alpha_primary(sc.alpha);
    let mut now = Duration::ZERO;
    while let Some(s) = plan.next(now) {
        now += cell;
        match noise.figure(sc, &s) {
            (f, Some(ios)) => plan.record_counted(&s, Some(f), ios),
            (f, None) => plan.record(&s, Some(f)),
        }
    }
    plan
}

/// What a finished simulated comparison concluded, against the scenario's truth.
fn judged(sc: &Scenario, plan: &Plan) -> Outcome {
    let groups: Vec<usize> = (0..sc.workloads).map(|w| usize::from(w >= 2)).collect();
    let m = (1.0 + sc.min_effect).ln();
    let pairs = sc.targets * sc.targets.saturating_sub(1) / 2;
    let family = super::plan::primary_family(sc.workloads, 2, sc.targets - sc.references);
    let mut o = Outcome {
        rounds: plan.rounds_started(),
        stop: plan.stopped(),
        pair_misses: vec![0; pairs],
        pair_questions: vec![0; pairs],
        question_alpha: super::plan::question_alpha(sc.alpha, family, &plan.design()),
        ..Outcome::default()
    };
    let mut judged: Vec<(f64, super::analysis::Judged, bool)> = Vec::new();
    for a in plan.answers() {
        let truth = sc.truth[a.workload][a.a] - sc.truth[a.workload][a.b];
        let p = pair_index(a.a.min(a.b), a.a.max(a.b), sc.targets);
        o.pair_questions[p] += 1;
        if (truth - a.judged.estimate).abs() > a.judged.half_width {
            o.pair_misses[p] += 1;
        }
        judged.push((truth, a.judged, true));
    }
    for (g, a, b, j) in plan.summaries() {
        let ws: Vec<usize> = (0..sc.workloads).filter(|&w| groups[w] == g).collect();
        let truth = ws
            .iter()
            .map(|&w| sc.truth[w][a] - sc.truth[w][b])
            .sum::<f64>()
            / ws.len().max(1) as f64;
        judged.push((truth, j, false));
    }
    for (truth, j, question) in judged {
        // At the margin itself a finding is false (it claims more than the margin), and so is
        // an equivalence (it claims less).
        let wrong = match j.verdict {
            Verdict::Higher => truth <= m + 1e-12,
            Verdict::Lower => truth >= -m - 1e-12,
            Verdict::Equivalent => truth.abs() >= m - 1e-12,
            Verdict::Inconclusive => false,
        };
        o.findings += usize::from(matches!(j.verdict, Verdict::Higher | Verdict::Lower));
        o.false_findings += usize::from(wrong);
        if (truth - j.estimate).abs() > j.half_width {
            o.misses += 1;
        }
        if truth.abs() > m + 1e-12 {
            let right = (truth > 0.0 && j.verdict == Verdict::Higher)
                || (truth < 0.0 && j.verdict == Verdict::Lower);
            let found = usize::from(right && (truth - j.estimate).abs() <= j.half_width);
            if question {
                o.effect_questions += 1;
                o.effect_found += found;
            } else {
                o.effect_avgs += 1;
                o.effect_avg_found += found;
            }
        }
    }
    o
}

/// Rates over `n` seeded comparisons.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Rates {
    pub comparisons: usize,
    /// Share of comparisons with at least one wrong verdict (the family-wise error the
    /// verdicts hold at `α`).
    pub any_false: f64,
    /// Share of comparisons with at least one interval that missed its truth (held at `2α`:
    /// the verdicts' intervals cover at `1 − 2α` or more).
    pub any_miss: f64,
    /// Share of the effect's questions found (power).
    pub power: f64,
    /// Share of the effect's averages found.
    pub avg_power: f64,
    pub mean_rounds: f64,
    pub decided: f64,
    /// The worst pair's per-question miss rate over the bound each question's interval holds
    /// at (twice the error it spent): 1 or below where every pair's intervals hold at their
    /// stated level.
    pub worst_pair_miss_ratio: f64,
}

pub fn rates(sc: &Scenario, n: usize, seed: u64) -> Rates {
    let mut r = Rates {
        comparisons: n,
        ..Rates::default()
    };
    let (mut found, mut questions, mut avg_found, mut avgs) = (0usize, 0usize, 0usize, 0usize);
    let pairs = sc.targets * sc.targets.saturating_sub(1) / 2;
    let (mut pm, mut pq, mut nominal) =
        (vec![0usize; pairs], vec![0usize; pairs], vec![0.0; pairs]);
    for i in 0..n {
        let o = run(sc, seed.wrapping_add(i as u64 * 0x9E37));
        for p in 0..pairs {
            pm[p] += o.pair_misses[p];
            pq[p] += o.pair_questions[p];
            nominal[p] += 2.0 * o.question_alpha * o.pair_questions[p] as f64;
        }
        r.any_false += f64::from(u8::from(o.false_findings > 0));
        r.any_miss += f64::from(u8::from(o.misses > 0));
        r.mean_rounds += f64::from(o.rounds);
        r.decided += f64::from(u8::from(o.stop == Some(Stop::Decided)));
        found += o.effect_found;
        questions += o.effect_questions;
        avg_found += o.effect_avg_found;
        avgs += o.effect_avgs;
    }
    let n = n.max(1) as f64;
    r.any_false /= n;
    r.any_miss /= n;
    r.mean_rounds /= n;
    r.decided /= n;
    r.worst_pair_miss_ratio = (0..pairs)
        .filter(|&p| pq[p] > 0 && nominal[p] > 0.0)
        .map(|p| pm[p] as f64 / nominal[p])
        .fold(0.0, f64::max);
    r.avg_power = avg_found as f64 / avgs.max(1) as f64;
    r.power = if questions == 0 {
        0.0
    } else {
        found as f64 / questions as f64
    };
    r
}

/// Peeking at one question (two identical targets, one workload, `alpha` 5 %) as a user
/// stopping "when it is significant" would: whether an interval excluded a ratio of 1 by more
/// than the margin at any look up to `max_rounds`. `spending`: the plan's looks (one per Latin
/// square, each spending its share); otherwise a fixed-sample t interval after every round at
/// the full 5 % (the naive procedure optional stopping breaks).
pub fn peeking_finds(sc: &Scenario, seed: u64, max_rounds: u32, spending: bool) -> bool {
    let mut rng = Rng::new(seed);
    let sig: Vec<f64> = (0..sc.targets)
        .map(|_| sc.sigma.0 + (sc.sigma.1 - sc.sigma.0) * rng.uniform())
        .collect();
    let order = super::williams::Order::new(sc.workloads, sc.targets, seed);
    let mut table = Table::new(sc.workloads, sc.targets, 1);
    let compared: Vec<usize> = (0..sc.targets).collect();
    let square = order.square_len();
    let k = looks(Repeat::Auto { max: max_rounds }, square);
    for r in 0..max_rounds {
        let re = sc.round_sd * rng.normal();
        for s in order.round(r) {
            let y = 5.0
                + sc.truth[s.workload][s.target]
                + re
                + sc.slot_step * s.slot as f64
                + sig[s.target] * rng.normal();
            table.set(s.workload, s.target, r as usize, y.exp());
        }
        let n = r + 1;
        let alpha = if spending {
            if n % square != 0 && n != max_rounds {
                continue;
            }
            super::plan::ALPHA * look_share(look_of(n, square, k), k)
        } else {
            super::plan::ALPHA
        };
        let mg = Margins {
            min_effect: sc.min_effect,
            alpha,
            project: false,
        };
        for w in 0..sc.workloads {
            let found = judge_workload(&table, w, &compared, mg)
                .iter()
                .any(|a| matches!(a.judged.verdict, Verdict::Higher | Verdict::Lower));
            if found {
                return true;
            }
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::super::plan::ALPHA_PRIMARY;
    use super::*;

    // 1,000 comparisons each (the bar); `cargo test` builds this crate optimized.
    const N: usize = 1000;

    /// A scenario of [`Scenario::noisy`] by name.
    fn noisy(alpha: f64, name: &str) -> Scenario {
        Scenario::noisy(alpha)
            .into_iter()
            .find(|(n, _)| *n == name)
            .expect("scenario")
            .1
    }

    #[test]
    fn a_noisy_pair_keeps_its_coverage_beside_a_quiet_one() {
        // sd 0.15, 0.15, 0.05; one look at 30 rounds at a family error of 20 %, where each
        // question's nominal miss rate (0.95 %) is measurable. One pooled sd gave the noisy
        // pair 2.9x its nominal misses (5.2x at 4 %). Variances moderated across every pair
        // and workload at once (Smyth's prior over all fifteen, the pairs' unequal noise
        // taken for sampling spread) 1.58x; moderated per pair across its workloads, 0.89x.
        let sc = noisy(0.20, "A/A, sd 0.15/0.15/0.05 (3x), 30 fixed rounds");
        let r = rates(&sc, 400, 40);
        assert!(r.worst_pair_miss_ratio <= 1.3, "{r:?}");
        assert!(r.any_miss <= 0.40, "{r:?}");
    }

    #[test]
    fn carry_over_with_the_truth_at_the_margin_is_removed_not_balanced() {
        // Target 1 truly 1.1x (the margin): a "better" is false. Carry-over after target 0
        // (8 %), then after every target (+8, -8, +4 %). Without a carry-over term the
        // intervals missed in 22 % and 60 % of comparisons at 20 % (8 % and 34 % at 4 %).
        for alpha in [0.20, 0.04] {
            for name in [
                "truth at the margin, carry 8 % after one target",
                "truth at the margin, carry after every target",
            ] {
                let r = rates(&noisy(alpha, name), 300, 40);
                assert!(
                    r.any_false <= alpha && r.any_miss <= 2.0 * alpha,
                    "{name} {alpha}: {r:?}"
                );
            }
        }
    }

    #[test]
    fn the_design_records_the_carry_over_it_removed() {
        // 8 % after target 0 only: centred over the three targets, +5.5 % after target 0 and
        // -2.6 % after each of the others.
        let mut sc = Scenario::demo_aa();
        sc.carry = vec![(0, 0.08)];
        sc.repeat = Repeat::Fixed(30);
        let c = simulate(&sc, 5).design().carry_over;
        assert_eq!(c.len(), 3);
        let c: Vec<f64> = c.into_iter().map(|x| x.expect("estimable")).collect();
        assert!(c[0] > 0.03 && c[0] < 0.08, "{c:?}");
        assert!(c[1] < 0.0 && c[2] < 0.0 && c[1] > -0.06, "{c:?}");
        // Without carry-over, nothing near the warning's half-margin.
        sc.carry.clear();
        let c = simulate(&sc, 5).design().carry_over;
        assert!(
            c.iter().all(|x| x.expect("estimable").abs() < 0.03),
            "{c:?}"
        );
    }

    #[test]
    fn rounds_that_persist_widen_the_intervals() {
        // AR(1) 0.3 across rounds, per target and workload: treating rounds as independent
        // missed in 16-25 % of comparisons at 20 % and 10-11 % at 4 %; AR(1) 0.5 in 45-59 %
        // at 20 %. Widening by each question's own lag-1 estimate (with Satterthwaite's
        // degrees of freedom taken after the widening) still missed at AR(1) 0.5 in 0.072 at
        // 4 %, and each question 6.9x its nominal rate at 20 % (these 400 seeds); the pair's
        // estimate pooled over its workloads and Bartlett's degrees of freedom: 0.010, 1.7x;
        // with the moderated variances as well, 0.018, 2.0x.
        for (name, alpha) in [
            ("A/A, AR(1) 0.3", 0.20),
            ("A/A, AR(1) 0.3", 0.04),
            ("A/A, AR(1) 0.5", 0.20),
            ("A/A, AR(1) 0.5", 0.04),
        ] {
            let r = rates(&noisy(alpha, name), 400, 40);
            assert!(
                r.any_false <= alpha && r.any_miss <= 2.0 * alpha,
                "{name} {alpha}: {r:?}"
            );
            if alpha > 0.1 {
                assert!(r.worst_pair_miss_ratio <= 3.0, "{name} {alpha}: {r:?}");
            }
        }
        // And the autocorrelation is seen, not only paid for.
        let mut sc = noisy(0.20, "A/A, AR(1) 0.5");
        sc.repeat = Repeat::Fixed(30);
        let seen = simulate(&sc, 3)
            .answers()
            .iter()
            .filter(|a| a.judged.lag1 > 0.2)
            .count();
        assert!(seen >= 8, "{seen} of 15");
    }

    #[test]
    fn heavy_and_skewed_tails_keep_the_error() {
        // A guard, not a fix: main held these too (t(3) 0.043, log-normal 0.035 missing at
        // 20 %), and the model's changes must not lose them.
        for name in ["A/A, t(3) tails", "A/A, log-normal tails"] {
            let r = rates(&noisy(0.20, name), 200, 40);
            assert!(r.any_false <= 0.20 && r.any_miss <= 0.40, "{name}: {r:?}");
        }
    }

    #[test]
    fn few_ios_counted_alike_every_round_keep_the_intervals() {
        // 22-29 I/Os a cell, most rounds counting the same: the window's cut is a bias of up to
        // 1/N that no number of rounds averages out. The variance floor 1/(3N²) it replaces
        // missed in 0.988 of comparisons at 20 % and 0.970 at 4 % (findings_sim, 400 each);
        // with the bias bound, in none.
        for alpha in [0.20, 0.04] {
            let r = rates(&Scenario::counted(alpha), 200, 41);
            assert!(
                r.any_miss <= 2.0 * alpha && r.any_false <= alpha,
                "{alpha}: {r:?}"
            );
        }
        // The same counts with the demo's noise (rounds, slots, 5-15 % a cell) vary from round
        // to round: the bias bound (about 2/N) is then a small part of the width.
        let mut sc = Scenario::counted(0.20);
        sc.round_sd = 0.10;
        sc.slot_step = 0.02;
        sc.sigma = (0.05, 0.15);
        let r = rates(&sc, 200, 42);
        assert!(r.any_miss <= 0.40, "{r:?}");
    }

    #[test]
    fn budgets_that_stop_mid_square_keep_the_error_and_spend_the_rest() {
        // Partial squares (4, 5, 7 targets) and the demo's shape (5 targets of which 2
        // references, 10 rounds in its budget), A/A at 20 %.
        for (name, sc) in Scenario::shapes(0.20) {
            let r = rates(&sc, 150, 50);
            assert!(r.any_false <= 0.20 && r.any_miss <= 0.40, "{name}: {r:?}");
        }
        // A true 1.3x at the demo's budget: with the looks counted from --max-repeat and each
        // look its own share, 0.042 of its questions were found (findings_sim, 400); with the
        // looks the budget fits and the rest spent at its stop, 0.154.
        // The averages the findings lead with: a regression of round means on the carry-over
        // and slot columns had no degrees of freedom left at 10 rounds of 5 targets (unbounded
        // or undecided nearly always: 4 of 600 averages decided); the workloads' own
        // contrasts with the rounds as clusters find 0.507 of the effect's (findings_sim, 400).
        // Honest degrees of freedom under the widening for persistence (issue 40, AR(1) 0.5)
        // cost some of it: 0.090 of the questions and 0.498 of the averages (findings_sim,
        // 400). Each pair's variances moderated across its workloads (Smyth 2004) lend each
        // question the others' degrees of freedom: 0.289 of the questions. Each question's
        // verdicts at its whole error (the partitioning principle): 0.355 and 0.586.
        let (_, demo) = Scenario::shapes(ALPHA_PRIMARY).pop().expect("demo");
        let r = rates(&demo.with_effect(1.3), 150, 51);
        assert!(r.any_false <= 0.05, "{r:?}");
        assert!(r.power >= 0.18, "{r:?}");
        assert!(r.avg_power >= 0.30, "{r:?}");
    }

    #[test]
    fn aa_comparisons_rarely_make_a_finding() {
        let r = rates(&Scenario::demo_aa(), N, 1);
        assert!(r.any_false <= 0.05, "{r:?}");
        // Every interval (15 questions a comparison) covers its truth in >= 90 % of
        // comparisons (the verdicts' intervals: 1 - 2α, `interval::critical`).
        assert!(r.any_miss <= 0.10, "{r:?}");
    }

    #[test]
    fn a_true_1_3x_is_found_with_its_ratio_inside_the_interval() {
        let r = rates(&Scenario::demo_effect(1.3), N, 2);
        assert!(r.any_false <= 0.05, "{r:?}");
        assert!(r.power >= super::super::POWER_1_3X_FLOOR, "{r:?}");
    }

    #[test]
    fn carry_over_alone_makes_no_finding() {
        let mut sc = Scenario::demo_aa();
        sc.carry = vec![(0, 0.08)]; // 8 % on whatever follows target 0
        sc.slot_step = 0.05;
        let r = rates(&sc, N, 3);
        assert!(r.any_false <= 0.05, "{r:?}");
    }

    #[test]
    fn peeking_with_a_fixed_sample_test_inflates_false_findings_and_the_plan_does_not() {
        // Significance alone (a margin of ~0) on one question, looked at up to 20 rounds.
        let mut sc = Scenario::demo_aa();
        sc.workloads = 1;
        sc.targets = 2;
        sc.truth = vec![vec![0.0; 2]];
        sc.min_effect = 1e-6;
        let share = |sequential: bool| {
            (0..N as u64)
                .filter(|&s| peeking_finds(&sc, 1000 + s, 20, sequential))
                .count() as f64
                / N as f64
        };
        let (naive, plan) = (share(false), share(true));
        assert!(naive > 0.05, "naive peeking: {naive}");
        assert!(plan <= 0.05, "group-sequential: {plan} (naive {naive})");
    }
}
