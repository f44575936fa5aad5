//! Moderated variances: one pair's variances on several workloads, each squeezed towards a
//! common prior estimated from all of them, with the prior's degrees of freedom added to each
//! (the empirical Bayes of G. K. Smyth, "Linear models and empirical Bayes methods for
//! assessing differential expression in microarray experiments", Statistical Applications in
//! Genetics and Molecular Biology 3 (2004) article 3, section 6; limma's `squeezeVar`).
//!
//! The model: each workload's true variance `σ_g²` is drawn from a scaled inverse χ² with
//! `d0` degrees of freedom around `s0²`, and its estimate `s_g²` is `σ_g² χ²_{d_g}/d_g`. Then
//! `ln s_g² − ψ(d_g/2) + ln(d_g/2)` has mean `ln s0² − ψ(d0/2) + ln(d0/2)` and variance
//! `ψ'(d_g/2) + ψ'(d0/2)`: the moments of those values give `d0` and `s0²`, and the posterior
//! variance `(d0 s0² + d_g s_g²)/(d0 + d_g)` gives a t statistic with `d0 + d_g` degrees of
//! freedom. When the workloads' variances spread no more than their own sampling makes them
//! (`d0` infinite in Smyth's estimate), the prior is all there is; here `d0` is capped so that
//! a workload never claims more degrees of freedom than all the workloads' together have
//! (`d0 ≤ Σ_{h≠g} d_h`): with five workloads, not millions of genes, the prior's own
//! estimate is not exact.

/// `(s², df)` per workload, squeezed: `(posterior s², d0 + df)`. Returned unchanged when
/// fewer than three have a positive variance and degrees of freedom (no spread to estimate
/// the prior's from), or any has none.
pub(super) fn squeeze(v: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let g = v.len();
    if g < 3
        || v.iter()
            .any(|&(s2, d)| !(s2 > 0.0 && d > 0.0 && s2.is_finite()))
    {
        return v.to_vec();
    }
    let e: Vec<f64> = v
        .iter()
        .map(|&(s2, d)| s2.ln() - digamma(d / 2.0) + (d / 2.0).ln())
        .collect();
    let gf = g as f64;
    let mean = e.iter().sum::<f64>() / gf;
    let spread = e.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (gf - 1.0);
    let sampling = v.iter().map(|&(_, d)| trigamma(d / 2.0)).sum::<f64>() / gf;
    let excess = spread - sampling;
    let (d0, s02) = if excess > 0.0 {
        let d0 = 2.0 * trigamma_inverse(excess);
        (d0, (mean + digamma(d0 / 2.0) - (d0 / 2.0).ln()).exp())
    } else {
        (f64::INFINITY, mean.exp())
    };
    let total: f64 = v.iter().map(|x| x.1).sum();
    v.iter()
        .map(|&(s2, d)| {
            let d0 = d0.min(total - d);
            ((d0 * s02 + d * s2) / (d0 + d), d0 + d)
        })
        .collect()
}

/// The digamma function ψ (recurrence to x ≥ 10, then its asymptotic series).
fn digamma(mut x: f64) -> f64 {
    let mut acc = 0.0;
    while x < 10.0 {
        acc -= 1.0 / x;
        x += 1.0;
    }
    let x2 = 1.0 / (x * x);
    acc + x.ln() - 0.5 / x - x2 * (1.0 / 12.0 - x2 * (1.0 / 120.0 - x2 / 252.0))
}

/// The trigamma function ψ' (recurrence to x ≥ 10, then its asymptotic series).
fn trigamma(mut x: f64) -> f64 {
    let mut acc = 0.0;
    while x < 10.0 {
        acc += 1.0 / (x * x);
        x += 1.0;
    }
    let x2 = 1.0 / (x * x);
    acc + 1.0 / x + x2 / 2.0 + x2 / x * (1.0 / 6.0 - x2 * (1.0 / 30.0 - x2 / 42.0))
}

/// The x > 0 with ψ'(x) = y (ψ' decreases from ∞ to 0), by bisection on ln x.
fn trigamma_inverse(y: f64) -> f64 {
    let (mut lo, mut hi) = (-30.0f64, 30.0f64);
    for _ in 0..100 {
        let mid = 0.5 * (lo + hi);
        if trigamma(mid.exp()) > y {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    (0.5 * (lo + hi)).exp()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn special_functions_match_tables() {
        // ψ(1) = −γ, ψ'(1) = π²/6, ψ(1/2) = −γ − 2 ln 2, ψ'(1/2) = π²/2.
        let gamma = 0.577_215_664_901_532_9;
        assert!((digamma(1.0) + gamma).abs() < 1e-9);
        assert!((digamma(0.5) + gamma + 2.0 * 2f64.ln()).abs() < 1e-9);
        let pi2 = std::f64::consts::PI.powi(2);
        assert!((trigamma(1.0) - pi2 / 6.0).abs() < 1e-9);
        assert!((trigamma(0.5) - pi2 / 2.0).abs() < 1e-9);
        for x in [0.01, 0.7, 3.0, 40.0] {
            assert!(
                (trigamma_inverse(trigamma(x)) / x - 1.0).abs() < 1e-9,
                "{x}"
            );
        }
    }

    #[test]
    fn alike_variances_pool_and_unlike_ones_keep_their_own() {
        // Five estimates of one variance on 20 df each: the prior absorbs them, each gets
        // the others' degrees of freedom (capped at the total).
        let alike = [
            (1.0, 20.0),
            (1.2, 20.0),
            (0.9, 20.0),
            (1.1, 20.0),
            (0.95, 20.0),
        ];
        let s = squeeze(&alike);
        for &(p, d) in &s {
            assert!(
                (d - 100.0).abs() < 1e-9 && (p - 1.03).abs() < 0.1,
                "{p} on {d}"
            );
        }
        let range = |v: &[(f64, f64)]| {
            let it = || v.iter().map(|x| x.0);
            it().fold(f64::MIN, f64::max) - it().fold(f64::MAX, f64::min)
        };
        assert!(range(&s) < 0.3 * range(&alike), "{s:?}");
        // Variances 100x apart: far more spread than 20 df make; little borrowed.
        let unlike = [
            (1.0, 20.0),
            (100.0, 20.0),
            (1.0, 20.0),
            (100.0, 20.0),
            (10.0, 20.0),
        ];
        let s = squeeze(&unlike);
        for (&(s2, _), &(p, d)) in unlike.iter().zip(&s) {
            assert!(d < 22.0 && (p / s2 - 1.0).abs() < 0.1, "{s2} -> {p} on {d}");
        }
        // Too few, or a zero: unchanged.
        assert_eq!(squeeze(&alike[..2]), alike[..2].to_vec());
        let mut zero = alike.to_vec();
        zero[0].0 = 0.0;
        assert_eq!(squeeze(&zero), zero);
    }
}
