//! Steady-state detection after SNIA SSS PTS 2.0: a window of the last 5 rounds is steady when its
//! data excursion (max − min) is within 20 % of the window's mean and the least-squares line's
//! excursion over the window (|slope| × (rounds − 1)) is within 10 % of the mean.

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SteadyState {
    pub steady: bool,
    /// (max − min) / mean over the window.
    pub range_ratio: f64,
    /// |slope| × (window − 1) / mean over the window.
    pub slope_ratio: f64,
    /// How many samples formed the window.
    pub window: usize,
}

/// Judges the last `window` values of `samples` (5 for the PTS rounds). Returns `None` when there
/// are fewer samples than the window or the mean is not positive.
pub fn steady_state(samples: &[f64], window: usize) -> Option<SteadyState> {
    if window < 2 || samples.len() < window {
        return None;
    }
    let w = &samples[samples.len() - window..];
    let n = w.len() as f64;
    let mean = w.iter().sum::<f64>() / n;
    if mean.is_nan() || mean <= 0.0 {
        return None;
    }
    let max = w.iter().cloned().fold(f64::MIN, f64::max);
    let min = w.iter().cloned().fold(f64::MAX, f64::min);
    let xm = (n - 1.0) / 2.0;
    let (mut sxy, mut sxx) = (0.0, 0.0);
    for (i, y) in w.iter().enumerate() {
        let dx = i as f64 - xm;
        sxy += dx * (y - mean);
        sxx += dx * dx;
    }
    let slope = sxy / sxx;
    let range_ratio = (max - min) / mean;
    let slope_ratio = slope.abs() * (n - 1.0) / mean;
    Some(SteadyState {
        steady: range_ratio <= 0.20 && slope_ratio <= 0.10,
        range_ratio,
        slope_ratio,
        window,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flat_is_steady() {
        let s = steady_state(&[100.0, 101.0, 99.0, 100.0, 100.0], 5).unwrap();
        assert!(s.steady);
        assert!((s.range_ratio - 0.02).abs() < 1e-9);
    }

    #[test]
    fn rising_is_not_steady() {
        // Range 16 % of the mean passes, but the trend is 4 × 4 = 16 % of it: not steady.
        let s = steady_state(&[92.0, 96.0, 100.0, 104.0, 108.0], 5).unwrap();
        assert!(s.range_ratio <= 0.20);
        assert!((s.slope_ratio - 0.16).abs() < 1e-9);
        assert!(!s.steady);
    }

    #[test]
    fn too_few_samples() {
        assert!(steady_state(&[1.0, 2.0], 5).is_none());
        assert!(steady_state(&[0.0; 5], 5).is_none());
    }
}
