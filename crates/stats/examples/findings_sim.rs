//! Prints the design's simulated error rates and power (scripts/bench_findings.py runs it).
//!
//! `findings_sim [comparisons] [max-repeat] [noisy-comparisons] [only]`: the demo-shaped
//! figures of issue 22, then the table of issue 40's noise scenarios at a family error of 20 %
//! (where a rate is measurable) and 4 % (the primary family's). With `only`, the table's rows
//! whose name contains it, and nothing else.
use sanbench_stats::design::analysis::t_quantile;
use sanbench_stats::design::plan::{look_share, rest_share, Repeat, ALPHA_PRIMARY};
use sanbench_stats::design::sim::peeking_finds;
use sanbench_stats::design::sim::{rates, Scenario};

fn main() {
    let arg = |i: usize| {
        std::env::args()
            .nth(i)
            .and_then(|s| s.parse::<usize>().ok())
    };
    let n = arg(1).unwrap_or(1000);
    let max = arg(2).map_or(sanbench_stats::design::DEFAULT_MAX_REPEAT, |m| m as u32);
    let noisy_n = arg(3).unwrap_or(n);
    let only = std::env::args().nth(4);
    let with = |mut s: Scenario| {
        if matches!(s.repeat, Repeat::Auto { .. }) {
            s.repeat = Repeat::Auto { max };
        }
        s
    };
    if only.is_none() {
        issue_22(n, &with);
    }
    noisy(noisy_n, &with, only.as_deref().unwrap_or(""));
    shapes(noisy_n, only.as_deref().unwrap_or(""));
}

/// The shapes a budget stops: family-wise error at 20 % and 5 % (A/A) and power for a true
/// 1.3x at the shipped 4 %.
fn shapes(n: usize, only: &str) {
    // The demo's spending at its budget stop: 21 primary questions and averages, 10 rounds
    // (look 2), 6 looks counted from --max-repeat 30 and that look's share, or 3 looks from
    // the 12 rounds the budget fits and the rest spent at the stop.
    let q = ALPHA_PRIMARY / 21.0;
    let (old, new) = (q * look_share(2, 6), q * rest_share(2, 3));
    println!(
        "\ndemo at 10 rounds: each question's error {old:.2e} -> {new:.2e}; critical t (df 9) {:.2} -> {:.2}, (df 30) {:.2} -> {:.2}",
        t_quantile(1.0 - old / 2.0, 9.0),
        t_quantile(1.0 - new / 2.0, 9.0),
        t_quantile(1.0 - old / 2.0, 30.0),
        t_quantile(1.0 - new / 2.0, 30.0)
    );
    println!("\nshapes a budget stops, {n} comparisons each (5 workloads, --max-repeat 30):");
    println!(
        "| shape | A/A at 20 %: false finding, interval missing | A/A at 5 % | 1.3x at 4 %: power, averages' power, false finding | rounds |"
    );
    println!("|---|---:|---:|---:|---:|");
    let at = |alpha: f64| Scenario::shapes(alpha).into_iter();
    for (((name, s20), (_, s5)), (_, s4)) in at(0.20).zip(at(0.05)).zip(at(ALPHA_PRIMARY)) {
        if !name.contains(only) {
            continue;
        }
        let (a, b) = (rates(&s20, n, 50), rates(&s5, n, 50));
        let e = rates(&s4.with_effect(1.3), n, 51);
        println!(
            "| {name} | {:.3}, {:.3} | {:.3}, {:.3} | {:.3}, {:.3}, {:.3} | {:.1} |",
            a.any_false,
            a.any_miss,
            b.any_false,
            b.any_miss,
            e.power,
            e.avg_power,
            e.any_false,
            e.mean_rounds
        );
    }
}

/// The figures of issue 22: A/A, peeking, carry-over alone, power by ratio.
fn issue_22(n: usize, with: &dyn Fn(Scenario) -> Scenario) {
    let aa = rates(&with(Scenario::demo_aa()), n, 1);
    println!(
        "A/A: comparisons with a false finding {:.3}, with a missed interval {:.3}, rounds {:.1}",
        aa.any_false, aa.any_miss, aa.mean_rounds
    );
    let mut one = Scenario::demo_aa();
    one.workloads = 1;
    one.targets = 2;
    one.truth = vec![vec![0.0; 2]];
    one.min_effect = 1e-6;
    for spending in [false, true] {
        let found = (0..n as u64)
            .filter(|&s| peeking_finds(&one, 1000 + s, 20, spending))
            .count();
        println!(
            "one A/A question, significance looked at up to 20 rounds, {}: false findings {:.3}",
            if spending {
                "group-sequential spending"
            } else {
                "fixed-sample t after every round"
            },
            found as f64 / n as f64
        );
    }
    let mut carry = Scenario::demo_aa();
    carry.carry = vec![(0, 0.08)];
    carry.slot_step = 0.05;
    let c = rates(&with(carry), n, 3);
    println!(
        "carry-over 8 % after target 0, slot +5 %: comparisons with a false finding {:.3}",
        c.any_false
    );
    for ratio in [1.1, 1.2, 1.3, 1.5, 1.8] {
        let r = rates(&with(Scenario::demo_effect(ratio)), n, 2);
        println!(
            "{ratio}x: power {:.3}, averages' power {:.3}, false {:.3}, rounds {:.1}, decided {:.3}",
            r.power, r.avg_power, r.any_false, r.mean_rounds, r.decided
        );
    }
}

/// The table of issue 40's noise scenarios.
fn noisy(noisy_n: usize, with: &dyn Fn(Scenario) -> Scenario, only: &str) {
    println!(
        "\nissue 40's noise, {noisy_n} comparisons each (demo shape: 5 workloads, 3 targets):"
    );
    println!(
        "| scenario | family error | any false finding | any interval missing its truth | worst pair's misses / nominal | rounds |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    for alpha in [0.20, ALPHA_PRIMARY] {
        for (name, sc) in Scenario::noisy(alpha) {
            if !name.contains(only) {
                continue;
            }
            let r = rates(&with(sc), noisy_n, 40);
            println!(
                "| {name} | {:.0} % | {:.3} | {:.3} | {:.2} | {:.1} |",
                alpha * 100.0,
                r.any_false,
                r.any_miss,
                r.worst_pair_miss_ratio,
                r.mean_rounds
            );
        }
    }
}
