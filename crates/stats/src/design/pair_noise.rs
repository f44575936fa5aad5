//! One pair's noise on one workload, before anything is borrowed from the other workloads:
//! the variance of the contrast `τ_a − τ_b` from the pair's own noise (each target its own σ),
//! its Satterthwaite degrees of freedom, and the pair's residual differences in round order
//! (where persistence across rounds shows). [`super::analysis`] turns it into an interval,
//! widened for the lag-1 autocorrelation it is given.

use super::interval::{bartlett, inflation, unbounded, Fit, Judged, Margins};
use super::pair_fit::{fit_pair, PairFit};
use super::table::Table;

/// What a pair's interval on one workload needs.
#[derive(Clone, Debug)]
pub(super) struct PairNoise {
    pub(super) estimate: f64,
    /// Rounds in which both targets were measured.
    pub(super) n: usize,
    /// The estimate's variance as if rounds were independent.
    pub(super) var: f64,
    /// Satterthwaite's degrees of freedom of `var`, as if rounds were independent; 0 when
    /// the fit left none (the interval is unbounded).
    pub(super) df: f64,
    /// The pair's residual differences `e_a − e_b` in round order.
    pub(super) lag: Vec<f64>,
    /// The largest counting bias of the estimate.
    pub(super) bias: f64,
}

impl PairNoise {
    /// The interval and verdict with the variance widened for lag-1 autocorrelation `phi` by
    /// an AR(1) mean's factor `(1 + φ)/(1 − φ)`, and its degrees of freedom cut by Bartlett's
    /// `(1 − φ²)/(1 + φ²)` (a variance estimated from an AR(1) series varies as one from that
    /// many fewer independent rounds; M. S. Bartlett, "On the theoretical specification and
    /// sampling properties of autocorrelated time-series", JRSS Suppl. 8 (1946) 27-41).
    ///
    /// The degrees of freedom are the unwidened variance's: Satterthwaite's
    /// `ν = V²/Σ(part²/df)` computed after the widening multiplied ν by the factor squared
    /// (9x at φ = 0.5), a t quantile far too small just where the noise persists (issue 40).
    pub(super) fn judge(&self, phi: f64, phi_df: f64, mg: Margins) -> Judged {
        if self.df <= 0.0 {
            return unbounded(self.estimate, self.n);
        }
        let n = self.n as f64;
        let f = Fit {
            estimate: self.estimate,
            v1: 1.0,
            // Degrees of freedom grow with the rounds in proportion.
            df_per_round: self.df * bartlett(phi_df) / n,
            df_lost: 0.0,
            ms: self.var * inflation(phi) * n,
            n: self.n,
            bias: self.bias,
        };
        let hw = f.half_width_at(self.n, f.ms, mg);
        Judged {
            lag1: phi,
            ..f.judge(mg, hw)
        }
    }
}

/// One pair's noise on workload `w`: the two-way model with a first-order carry-over term over
/// every compared target's cells in the rounds where both were measured (`fit_pair`), each
/// target with its own noise. `None` without a common round or an estimable contrast.
pub(super) fn pair_noise(
    t: &Table,
    w: usize,
    compared: &[usize],
    a: usize,
    b: usize,
) -> Option<PairNoise> {
    let PairFit {
        estimate,
        cells,
        fit,
        rounds,
        targets,
        resid_df,
        shrink,
        bias,
    } = fit_pair(t, w, compared, a, b)?;
    let n = rounds.len();
    let resid = |r: usize, c: usize| {
        cells
            .iter()
            .position(|&x| x == (r, c))
            .map(|i| fit.resid[i])
    };
    // The pair's residual differences in round order: where persistence across rounds shows.
    let lag: Vec<f64> = rounds
        .iter()
        .filter_map(|&r| Some(resid(r, a)? - resid(r, b)?))
        .collect();
    if resid_df <= 0.0 {
        return Some(PairNoise {
            estimate,
            n,
            var: f64::NAN,
            df: 0.0,
            lag,
            bias,
        });
    }
    // Each target's own noise. Within a round the residuals of two targets differ by their
    // two noises alone (the round's effect and the round's mean cancel), so the mean square
    // of that difference estimates σ_u² + σ_v², and with three or more targets each σ_t²
    // follows from those sums (with two, each gets half). Residuals of a heteroscedastic
    // two-way model taken one target at a time would mix the noisy targets' noise into the
    // quiet one's.
    let k = targets.len();
    let mut v = vec![vec![0.0; k]; k];
    for u in 0..k {
        for x in u + 1..k {
            let (mut ss, mut m) = (0.0, 0.0);
            for &r in &rounds {
                if let (Some(eu), Some(ex)) = (resid(r, targets[u]), resid(r, targets[x])) {
                    ss += (eu - ex).powi(2);
                    m += 1.0;
                }
            }
            let vv = if m > 0.0 { ss / (m * shrink) } else { 0.0 };
            v[u][x] = vv;
            v[x][u] = vv;
        }
    }
    // a's and b's cells carry nearly all the estimate's weight, about equally: their part is
    // the pair's own V_ab (its own noise, with its own degrees of freedom); the other
    // targets' small part uses their σ_t².
    let ia = targets.iter().position(|&x| x == a)?;
    let ib = targets.iter().position(|&x| x == b)?;
    let (mut var, mut denom) = (0.0, 0.0);
    let mut pair_weight = 0.0;
    for (ti, &tt) in targets.iter().enumerate() {
        let weight: f64 = cells
            .iter()
            .zip(&fit.last_weights)
            .filter(|(&(_, c), _)| c == tt)
            .map(|(_, wt)| wt * wt)
            .sum();
        if ti == ia || ti == ib {
            pair_weight += weight;
            continue;
        }
        let (mut acc, mut cnt) = (0.0, 0.0);
        for u in 0..k {
            for x in u + 1..k {
                if u != ti && x != ti {
                    acc += (v[ti][u] + v[ti][x] - v[u][x]) / 2.0;
                    cnt += 1.0;
                }
            }
        }
        let s2 = (acc / cnt).max(0.0);
        var += weight * s2;
        denom += (weight * s2).powi(2) / (resid_df / k as f64);
    }
    let s2_pair = v[ia][ib] / 2.0;
    var += pair_weight * s2_pair;
    denom += (pair_weight * s2_pair).powi(2) / (n as f64 * shrink).max(1e-9);
    let df = if denom > 0.0 {
        var * var / denom
    } else {
        resid_df
    };
    Some(PairNoise {
        estimate,
        n,
        var,
        df,
        lag,
        bias,
    })
}
