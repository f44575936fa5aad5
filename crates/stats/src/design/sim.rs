//! Seeded simulation of whole comparisons, the evidence that the plan's error rates are what
//! `docs/MEASURE.md` claims: the test suite runs it (A/A false findings, power, carry-over,
//! optional stopping), and `sanbench-findings-sim` (scripts/bench_findings.py) prints the figures.
//!
//! The noise model follows what this project's 2-core VM shows: per cell `ln y = μ_t,w + ρ_r +
//! s_slot + carry + σ_t ε`, with a round effect `ρ_r` (the machine drifting; sd 0.10), a slot
//! effect rising with the slot (warm-up: +2 % per slot), a carry-over on the cell right after one
//! given target, and a per-target noise level drawn from 0.05-0.15 (heteroscedastic: the pooled
//! model's assumption is deliberately broken).

use std::time::Duration;

use super::analysis::{judge_workload, Margins, Table, Verdict};
use super::plan::{look_of, look_share, looks, Config, Plan, Repeat, Stop};
use super::rng::Rng;

/// One simulated comparison's shape and truth.
#[derive(Clone, Debug)]
pub struct Scenario {
    pub workloads: usize,
    pub targets: usize,
    /// Log of each target's true figure relative to target 0, per workload (`[w][t]`).
    pub truth: Vec<Vec<f64>>,
    /// Per-target noise sd range (log scale): each target draws its own from it.
    pub sigma: (f64, f64),
    pub round_sd: f64,
    /// Log effect added per slot position (warm-up).
    pub slot_step: f64,
    /// (target, log effect): the effect on whichever cell runs right after that target.
    pub carry: Option<(usize, f64)>,
    pub repeat: Repeat,
    pub min_effect: f64,
}

impl Scenario {
    /// The demo's shape: five workloads in two groups, three compared targets, identical.
    pub fn demo_aa() -> Scenario {
        Scenario {
            workloads: 5,
            targets: 3,
            truth: vec![vec![0.0; 3]; 5],
            sigma: (0.05, 0.15),
            round_sd: 0.10,
            slot_step: 0.02,
            carry: None,
            repeat: Repeat::Auto {
                max: super::DEFAULT_MAX_REPEAT,
            },
            min_effect: 0.10,
        }
    }

    /// Target 1 is `ratio` times targets 0 and 2 on every workload.
    pub fn demo_effect(ratio: f64) -> Scenario {
        let mut s = Scenario::demo_aa();
        for w in s.truth.iter_mut() {
            w[1] = ratio.ln();
        }
        s
    }
}

/// What one simulated comparison concluded.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Outcome {
    /// Questions with a "higher"/"lower" verdict whose true ratio is within the margin
    /// (a false finding), and all with such a verdict.
    pub false_findings: usize,
    pub findings: usize,
    /// Questions whose true ratio lies outside their interval.
    pub misses: usize,
    /// Questions of pair (0, 1) or (1, 2) (the effect's pairs) found in the right direction
    /// with the truth inside the interval.
    pub effect_found: usize,
    pub effect_questions: usize,
    pub rounds: u32,
    pub stop: Option<Stop>,
}

/// Runs one comparison of the scenario with this seed through the real [`Plan`].
pub fn run(sc: &Scenario, seed: u64) -> Outcome {
    let mut rng = Rng::new(seed);
    let sig: Vec<f64> = (0..sc.targets)
        .map(|_| sc.sigma.0 + (sc.sigma.1 - sc.sigma.0) * rng.uniform())
        .collect();
    let cfg = Config {
        workloads: sc.workloads,
        targets: sc.targets,
        compared: (0..sc.targets).collect(),
        groups: (0..sc.workloads).map(|w| usize::from(w >= 2)).collect(),
        seed,
        repeat: sc.repeat,
        budget: None,
        nominal_round: Duration::ZERO,
        min_effect: sc.min_effect,
    };
    let mut plan = Plan::new(cfg).expect("valid scenario");
    let mut round_effect = 0.0;
    let mut last_round = u32::MAX;
    let mut prev: Option<usize> = None;
    while let Some(s) = plan.next(Duration::ZERO) {
        if s.round != last_round {
            round_effect = sc.round_sd * rng.normal();
            last_round = s.round;
        }
        let mut y = 5.0 + sc.truth[s.workload][s.target] + round_effect;
        y += sc.slot_step * s.slot as f64;
        if let (Some((ct, eff)), Some(p)) = (sc.carry, prev) {
            if p == ct {
                y += eff;
            }
        }
        y += sig[s.target] * rng.normal();
        prev = Some(s.target);
        plan.record(&s, Some(y.exp()));
    }
    let m = (1.0 + sc.min_effect).ln();
    let mut o = Outcome {
        rounds: plan.rounds_started(),
        stop: plan.stopped(),
        ..Outcome::default()
    };
    for a in plan.answers() {
        let truth = sc.truth[a.workload][a.a] - sc.truth[a.workload][a.b];
        let j = a.judged;
        let decided = matches!(j.verdict, Verdict::Higher | Verdict::Lower);
        if decided {
            o.findings += 1;
            if truth.abs() <= m {
                o.false_findings += 1;
            }
        }
        if (truth - j.estimate).abs() > j.half_width {
            o.misses += 1;
        }
        if truth.abs() > m {
            o.effect_questions += 1;
            let right = (truth > 0.0 && j.verdict == Verdict::Higher)
                || (truth < 0.0 && j.verdict == Verdict::Lower);
            if right && (truth - j.estimate).abs() <= j.half_width {
                o.effect_found += 1;
            }
        }
    }
    o
}

/// Rates over `n` seeded comparisons.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Rates {
    pub comparisons: usize,
    /// Share of comparisons with at least one false finding (the family-wise error).
    pub any_false: f64,
    /// Share of comparisons with at least one interval that missed its truth.
    pub any_miss: f64,
    /// Share of the effect's questions found (power).
    pub power: f64,
    pub mean_rounds: f64,
    pub decided: f64,
}

pub fn rates(sc: &Scenario, n: usize, seed: u64) -> Rates {
    let mut r = Rates {
        comparisons: n,
        ..Rates::default()
    };
    let (mut found, mut questions) = (0usize, 0usize);
    for i in 0..n {
        let o = run(sc, seed.wrapping_add(i as u64 * 0x9E37));
        r.any_false += f64::from(u8::from(o.false_findings > 0));
        r.any_miss += f64::from(u8::from(o.misses > 0));
        r.mean_rounds += f64::from(o.rounds);
        r.decided += f64::from(u8::from(o.stop == Some(Stop::Decided)));
        found += o.effect_found;
        questions += o.effect_questions;
    }
    let n = n.max(1) as f64;
    r.any_false /= n;
    r.any_miss /= n;
    r.mean_rounds /= n;
    r.decided /= n;
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
    use super::*;

    // 1,000 comparisons each (the bar); `cargo test` builds this crate optimized.
    const N: usize = 1000;

    #[test]
    fn aa_comparisons_rarely_make_a_finding() {
        let r = rates(&Scenario::demo_aa(), N, 1);
        assert!(r.any_false <= 0.05, "{r:?}");
        // Every interval (15 questions a comparison) covers its truth in >= 95 % of comparisons.
        assert!(r.any_miss <= 0.05, "{r:?}");
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
        sc.carry = Some((0, 0.08)); // 8 % on whatever follows target 0
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
