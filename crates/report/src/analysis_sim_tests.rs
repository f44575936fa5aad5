//! Findings on synthetic comparisons with known true ratios and noise: how often identical
//! targets make a finding (the family-wise error) and how often a real difference is found.

use super::*;

/// Gaussian draws (Box-Muller over wyrand-like bits), seeded, for synthetic repetitions.
struct Normal(u64);

impl Normal {
    fn uniform(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }
    fn draw(&mut self, mean: f64, cv: f64) -> f64 {
        let (u, v) = (self.uniform(), self.uniform());
        mean * (1.0 + cv * (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos())
    }
}

/// A quick-suite-shaped comparison of two targets, `rounds` rounds, `ratio` between their true
/// means and `cv` run-to-run noise.
fn synthetic(rng: &mut Normal, ratio: f64, cv: f64, rounds: usize) -> Comparison {
    let ws = [
        ("rand-read-4k", "iops"),
        ("database-4k", "database"),
        ("seq-read-1m", "bandwidth"),
        ("seq-write-1m", "bandwidth"),
        ("latency-4k", "latency"),
    ];
    let mut values: Vec<(String, String, Vec<f64>)> = Vec::new();
    for (w, _) in ws {
        for (t, m) in [("A", 1000.0 * ratio), ("B", 1000.0)] {
            values.push((
                w.into(),
                t.into(),
                (0..rounds).map(|_| rng.draw(m, cv)).collect(),
            ));
        }
    }
    let values: Vec<(&str, &str, &[f64])> = values
        .iter()
        .map(|(w, t, v)| (w.as_str(), t.as_str(), v.as_slice()))
        .collect();
    doc(&["A", "B"], &ws, &values)
}

#[test]
fn identical_targets_with_15_percent_noise_almost_never_make_a_finding() {
    let mut rng = Normal(7);
    let trials = 400;
    let with_findings = (0..trials)
        .filter(|_| {
            let cmp = synthetic(&mut rng, 1.0, 0.15, 3);
            !findings(&cmp, &Analysis::new(&cmp), 0.10).is_empty()
        })
        .count();
    // The family-wise error is held at ALPHA (5 %), and the 10 % floor removes more.
    assert!(
        with_findings <= 20,
        "{with_findings} of {trials} A/A comparisons made findings"
    );
}

#[test]
fn a_real_2x_difference_with_10_percent_noise_is_found() {
    let mut rng = Normal(11);
    let trials = 100;
    let found = (0..trials)
        .filter(|_| {
            let cmp = synthetic(&mut rng, 2.0, 0.10, 10);
            let fs = findings(&cmp, &Analysis::new(&cmp), 0.10);
            find(&fs, "IOPS", "A").is_some() && find(&fs, "bandwidth", "A").is_some()
        })
        .count();
    // Ten rounds at 10 % noise per cell (14 % on the paired ratio): each 2x question's
    // interval is about ±0.18 on the log scale at its 0.57 % error, well clear of the margin.
    assert!(found >= 90, "found in {found} of {trials}");
}

/// One test won by 1.3x and four within 2 %: a true average of 1.07x, a difference smaller than
/// the margin. At 2 % noise over six rounds its interval lies above 1 nearly always; the
/// sentence must still lead with the test won, never with the average (a lead is a claim
/// beyond the margin, which here is false), and say the average is smaller than the margin.
#[test]
fn an_average_inside_the_margin_never_leads() {
    let mut rng = Normal(23);
    let ws = ["w1", "w2", "w3", "w4", "w5"];
    let truth = [1.3, 1.02, 1.02, 1.02, 1.02];
    let trials = 200;
    let (mut led, mut smaller, mut reaching, mut undecided, mut won) = (0, 0, 0, 0, 0);
    for _ in 0..trials {
        let mut values: Vec<(String, String, Vec<f64>)> = Vec::new();
        for (w, r) in ws.iter().zip(truth) {
            for (t, m) in [("A", 1000.0 * r), ("B", 1000.0)] {
                let xs = (0..6).map(|_| rng.draw(m, 0.02)).collect();
                values.push((w.to_string(), t.into(), xs));
            }
        }
        let values: Vec<(&str, &str, &[f64])> = values
            .iter()
            .map(|(w, t, v)| (w.as_str(), t.as_str(), v.as_slice()))
            .collect();
        let groups: Vec<(&str, &str)> = ws.iter().map(|w| (*w, "bandwidth")).collect();
        let cmp = doc(&["A", "B"], &groups, &values);
        let fs = findings(&cmp, &Analysis::new(&cmp), 0.10);
        let Some(f) = find(&fs, "bandwidth", "A") else {
            continue;
        };
        won += 1;
        led += usize::from(f.text.starts_with("A shows 1."));
        smaller += usize::from(f.text.ends_with(", greater by less than 10 %"));
        reaching += usize::from(f.text.ends_with(", greater, not shown beyond 10 %"));
        undecided += usize::from(f.text.ends_with(", inconclusive"));
    }
    // Measured (seed 23): won 200, led 0; "greater by less than 10 %" 136, "greater, not
    // shown beyond 10 %" 64 (the interval reaching 1.1). Under the earlier rule (lead when
    // the interval lies above 1) the sentence led in all 200. Since the carry-over and slot
    // terms (issue 40) six rounds of two targets leave the average fewer degrees of freedom:
    // 9 of 200 averages are inconclusive (their interval reaching below 1), and 87 (not 136)
    // shown smaller than the margin: the price of widening for autocorrelation estimated from
    // six rounds (and of the carry-over and slot terms' degrees of freedom). The widening's
    // honest degrees of freedom (Satterthwaite's before it, Bartlett's cut for persistence;
    // issue 40, AR(1) 0.5) win the 1.3x test in 181 of 200 (all 200 before).
    assert!(won >= 170, "the 1.3x test was won in {won} of {trials}");
    assert!(led <= 4, "the average led in {led} of {won}");
    assert_eq!(
        smaller + reaching + undecided + led,
        won,
        "every sentence says one of the four"
    );
    assert!(
        smaller >= won / 3,
        "{smaller} of {won} said smaller than the margin"
    );
}
