//! Whether two repeated measurements differ: Welch's t-test, and Holm's step-down correction
//! when a comparison asks many such questions at once.
//!
//! A comparison of four targets over a five-workload suite asks dozens of "is A different from
//! B here?" questions; at 5 % each, some would come out "yes" for identical targets by chance
//! alone. Holm–Bonferroni keeps the chance of even one false "yes" in the whole family below
//! alpha, and is uniformly more powerful than plain Bonferroni.

use crate::MeanCi;

/// Two-sided p-value of Welch's t-test for the difference of two means (unequal variances),
/// from the summaries of the two samples. `None` when either has fewer than 2 values.
pub fn welch_p(a: &MeanCi, b: &MeanCi) -> Option<f64> {
    if a.n < 2 || b.n < 2 {
        return None;
    }
    let va = a.stdev * a.stdev / a.n as f64;
    let vb = b.stdev * b.stdev / b.n as f64;
    let se2 = va + vb;
    let diff = (a.mean - b.mean).abs();
    if !(se2.is_finite() && diff.is_finite()) {
        return None;
    }
    if se2 == 0.0 {
        // No spread at all: any difference is certain, none is none.
        return Some(if diff > 0.0 { 0.0 } else { 1.0 });
    }
    let t = diff / se2.sqrt();
    let df = se2 * se2 / (va * va / (a.n - 1) as f64 + vb * vb / (b.n - 1) as f64);
    Some(student_t_two_sided_p(t, df))
}

/// P(|T| >= t) for Student's t with `df` degrees of freedom (df may be fractional).
pub fn student_t_two_sided_p(t: f64, df: f64) -> f64 {
    if !t.is_finite() {
        return 0.0;
    }
    let x = df / (df + t * t);
    reg_incomplete_beta(x, df / 2.0, 0.5).clamp(0.0, 1.0)
}

/// Holm's step-down procedure: which of the hypotheses with these p-values are rejected at
/// family-wise error `alpha`.
pub fn holm(p: &[f64], alpha: f64) -> Vec<bool> {
    let m = p.len();
    let mut idx: Vec<usize> = (0..m).collect();
    idx.sort_by(|&i, &j| p[i].total_cmp(&p[j]));
    let mut out = vec![false; m];
    for (k, &i) in idx.iter().enumerate() {
        if p[i] <= alpha / (m - k) as f64 {
            out[i] = true;
        } else {
            break;
        }
    }
    out
}

/// The regularized incomplete beta function I_x(a, b), by Lentz's continued fraction
/// (Numerical Recipes §6.4), using the symmetry relation for fast convergence.
fn reg_incomplete_beta(x: f64, a: f64, b: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let ln_front = ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln();
    let front = ln_front.exp();
    if x < (a + 1.0) / (a + b + 2.0) {
        front * beta_cf(x, a, b) / a
    } else {
        1.0 - front * beta_cf(1.0 - x, b, a) / b
    }
}

fn beta_cf(x: f64, a: f64, b: f64) -> f64 {
    const TINY: f64 = 1e-300;
    let (qab, qap, qam) = (a + b, a + 1.0, a - 1.0);
    let mut c = 1.0;
    let mut d = 1.0 - qab * x / qap;
    if d.abs() < TINY {
        d = TINY;
    }
    d = 1.0 / d;
    let mut h = d;
    for m in 1..300 {
        let m = m as f64;
        let m2 = 2.0 * m;
        let aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1.0 + aa * d;
        if d.abs() < TINY {
            d = TINY;
        }
        c = 1.0 + aa / c;
        if c.abs() < TINY {
            c = TINY;
        }
        d = 1.0 / d;
        h *= d * c;
        let aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1.0 + aa * d;
        if d.abs() < TINY {
            d = TINY;
        }
        c = 1.0 + aa / c;
        if c.abs() < TINY {
            c = TINY;
        }
        d = 1.0 / d;
        let del = d * c;
        h *= del;
        if (del - 1.0).abs() < 1e-12 {
            break;
        }
    }
    h
}

/// ln Γ(x) for x > 0 (Lanczos, g = 7, n = 9; about 15 significant digits).
fn ln_gamma(x: f64) -> f64 {
    const G: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // Reflection: Γ(x)Γ(1−x) = π / sin(πx).
        return (std::f64::consts::PI / (std::f64::consts::PI * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut s = G[0];
    for (i, g) in G.iter().enumerate().skip(1) {
        s += g / (x + i as f64);
    }
    let t = x + 7.5;
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + s.ln()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mean_ci95;

    #[test]
    fn t_distribution_matches_tables() {
        // Two-sided 5 % critical values: df 4 → 2.776, df 10 → 2.228, df 30 → 2.042.
        for (t, df) in [(2.776, 4.0), (2.228, 10.0), (2.042, 30.0)] {
            let p = student_t_two_sided_p(t, df);
            assert!((p - 0.05).abs() < 5e-4, "t {t} df {df}: p {p}");
        }
        // df 1 is Cauchy: P(|T| >= 1) = 0.5.
        assert!((student_t_two_sided_p(1.0, 1.0) - 0.5).abs() < 1e-9);
        assert!((student_t_two_sided_p(0.0, 5.0) - 1.0).abs() < 1e-12);
        assert!((ln_gamma(5.0) - 24f64.ln()).abs() < 1e-12);
        assert!((ln_gamma(0.5) - std::f64::consts::PI.sqrt().ln()).abs() < 1e-12);
    }

    #[test]
    fn welch_on_known_samples() {
        // Textbook: equal-size samples with a clear difference.
        let a = mean_ci95(&[27.5, 21.0, 19.0, 23.6, 17.0, 17.9, 16.9, 20.1, 21.9, 22.6]);
        let b = mean_ci95(&[27.1, 22.0, 20.8, 23.4, 23.4, 23.5, 25.8, 22.0, 24.8, 20.2]);
        let p = welch_p(&a, &b).unwrap();
        // By hand: t = -2.0357, Welch df = 15.50; between the tables' 0.05 (2.131 at df 15)
        // and 0.10 (1.753): p = 0.0593.
        assert!((p - 0.0593).abs() < 0.001, "{p}");
        assert_eq!(welch_p(&mean_ci95(&[1.0]), &b), None);
        let same = mean_ci95(&[5.0, 5.0, 5.0]);
        assert_eq!(welch_p(&same, &same), Some(1.0));
        assert_eq!(welch_p(&same, &mean_ci95(&[6.0, 6.0, 6.0])), Some(0.0));
    }

    #[test]
    fn holm_steps_down() {
        // m = 4: thresholds 0.0125, 0.0167, 0.025, 0.05 in p order.
        assert_eq!(
            holm(&[0.01, 0.04, 0.015, 0.2], 0.05),
            vec![true, false, true, false]
        );
        assert_eq!(holm(&[0.03, 0.01], 0.05), vec![true, true]);
        assert_eq!(holm(&[0.03, 0.04], 0.05), vec![false, false]);
        // Stops at the first failure: 0.03 > 0.05/2 ends it, though 0.04 < 0.05/1.
        assert_eq!(holm(&[0.04, 0.01, 0.03], 0.05), vec![false, true, false]);
        assert!(holm(&[], 0.05).is_empty());
    }
}
