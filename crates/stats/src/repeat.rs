//! Repetitions: mean with a Student-t 95 % confidence interval, and whether two results differ by
//! more than their noise.

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct MeanCi {
    pub n: usize,
    pub mean: f64,
    /// Half-width of the 95 % confidence interval (0 when n < 2: unknown, not zero noise).
    pub ci95: f64,
    pub stdev: f64,
}

/// Two-sided 97.5 % quantiles of Student's t for 1..=30 degrees of freedom.
const T975: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
    2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
    2.052, 2.048, 2.045, 2.042,
];

fn t975(df: usize) -> f64 {
    match df {
        0 => f64::INFINITY,
        1..=30 => T975[df - 1],
        31..=60 => 2.00,
        61..=120 => 1.98,
        _ => 1.96,
    }
}

pub fn mean_ci95(xs: &[f64]) -> MeanCi {
    let n = xs.len();
    if n == 0 {
        return MeanCi {
            n,
            mean: 0.0,
            ci95: 0.0,
            stdev: 0.0,
        };
    }
    let mean = xs.iter().sum::<f64>() / n as f64;
    if n < 2 {
        return MeanCi {
            n,
            mean,
            ci95: 0.0,
            stdev: 0.0,
        };
    }
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    let stdev = var.sqrt();
    MeanCi {
        n,
        mean,
        ci95: t975(n - 1) * stdev / (n as f64).sqrt(),
        stdev,
    }
}

/// True when `a` and `b` differ by more than their combined noise: their 95 % intervals do not
/// overlap, and additionally the relative difference exceeds `min_rel` (a floor for single runs,
/// whose noise is unknown; the machine here varies 10-20 % run to run).
pub fn ratio_outside_noise(a: &MeanCi, b: &MeanCi, min_rel: f64) -> bool {
    let lo = a.mean.min(b.mean);
    let hi = a.mean.max(b.mean);
    if lo <= 0.0 {
        return hi > 0.0;
    }
    let rel = (hi - lo) / lo;
    let separated = (a.mean - b.mean).abs() > a.ci95 + b.ci95;
    separated && rel > min_rel
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ci_matches_hand_computation() {
        // mean 10, sample stdev 1.5811 (values 8..12), t(4) = 2.776
        let m = mean_ci95(&[8.0, 9.0, 10.0, 11.0, 12.0]);
        assert_eq!(m.n, 5);
        assert!((m.mean - 10.0).abs() < 1e-12);
        assert!((m.stdev - 1.5811388).abs() < 1e-6);
        assert!((m.ci95 - 2.776 * 1.5811388 / 5f64.sqrt()).abs() < 1e-6);
    }

    #[test]
    fn noise_judgement() {
        let a = mean_ci95(&[100.0, 102.0, 98.0]);
        let b = mean_ci95(&[101.0, 99.0, 103.0]);
        assert!(!ratio_outside_noise(&a, &b, 0.05));
        let c = mean_ci95(&[200.0, 202.0, 198.0]);
        assert!(ratio_outside_noise(&a, &c, 0.05));
        // Single runs: only the floor decides.
        let s1 = mean_ci95(&[100.0]);
        let s2 = mean_ci95(&[103.0]);
        assert!(!ratio_outside_noise(&s1, &s2, 0.05));
        assert!(ratio_outside_noise(&s1, &mean_ci95(&[150.0]), 0.05));
    }
}
