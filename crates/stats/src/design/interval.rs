//! A contrast's interval and verdict, apart from the models that estimate it
//! ([`super::analysis`]): the three verdicts and the margins they are judged against, Student's
//! t interval at the caller's error and how many more rounds would likely decide it, and the
//! widening for rounds whose noise persists (lag-1 autocorrelation). See the analysis module's
//! docs for the model and the sources.

use serde::{Deserialize, Serialize};

/// The three verdicts, for the ordered pair (a, b) of a question.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// a's figure is higher than b's by more than the margin, over the whole interval.
    Higher,
    /// a's figure is lower than b's by more than the margin, over the whole interval.
    Lower,
    /// Within ± the margin over the whole interval.
    Equivalent,
    /// Neither: more rounds needed.
    Inconclusive,
}

/// What the verdicts are judged against.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Margins {
    /// The smallest relative difference worth a finding (0.10: 10 %), also the equivalence
    /// margin.
    pub min_effect: f64,
    /// The error this one question may spend (its share of the family's).
    pub alpha: f64,
    /// Estimate how many more rounds would decide an inconclusive question (the report wants
    /// it; the plan's stopping rule does not, and it costs a few quantiles per question).
    pub project: bool,
}

/// One interval on the log scale with its verdict.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Judged {
    /// ln(a / b): the log of the geometric-mean ratio.
    pub estimate: f64,
    /// Half-width of the interval on the log scale (infinite while unbounded).
    pub half_width: f64,
    /// Complete rounds the estimate used.
    pub rounds: usize,
    pub verdict: Verdict,
    /// Rounds beyond `rounds` that would likely decide an inconclusive question (the same
    /// estimate and noise, a narrower interval); `None` when decided, or not within 1000.
    pub more_rounds: Option<u32>,
    /// The lag-1 autocorrelation the interval was widened for (bias-corrected, 0 when not
    /// positive or too few rounds): the larger of the contrast's own residuals' across rounds
    /// and the pair's pooled over the workloads judged together; the interval's variance was
    /// multiplied by `(1 + φ) / (1 − φ)` and its degrees of freedom by `(1 − φ²)/(1 + φ²)`.
    pub lag1: f64,
}

impl Judged {
    pub fn ratio(&self) -> f64 {
        self.estimate.exp()
    }
    pub fn low(&self) -> f64 {
        (self.estimate - self.half_width).exp()
    }
    pub fn high(&self) -> f64 {
        (self.estimate + self.half_width).exp()
    }
}

/// The verdict on an interval `estimate ± half_width` (log scale).
pub fn verdict(estimate: f64, half_width: f64, min_effect: f64) -> Verdict {
    let m = (1.0 + min_effect).ln();
    let (lo, hi) = (estimate - half_width, estimate + half_width);
    if !half_width.is_finite() {
        Verdict::Inconclusive
    } else if lo > m {
        Verdict::Higher
    } else if hi < -m {
        Verdict::Lower
    } else if lo > -m && hi < m {
        Verdict::Equivalent
    } else {
        Verdict::Inconclusive
    }
}

/// The data a contrast's interval needs, and how it grows with rounds (for the projection).
#[derive(Clone, Copy, Debug)]
pub(super) struct Fit {
    pub(super) estimate: f64,
    /// Variance factor per round: the estimate's variance is `v1 / n` in units of σ².
    pub(super) v1: f64,
    /// Residual degrees of freedom: `df_per_round · n − df_lost` after `n` rounds.
    pub(super) df_per_round: f64,
    pub(super) df_lost: f64,
    /// Residual mean square (σ² estimate; 0 when df = 0).
    pub(super) ms: f64,
    pub(super) n: usize,
    /// The largest bias the estimate may carry whatever the rounds (counting's, see
    /// `Table::count_bias`): added to the half-width, never shrinking with `n`.
    pub(super) bias: f64,
}

impl Fit {
    /// The interval's half-width after `n` rounds with residual mean square `ms`, at the
    /// critical value of [`critical`] for the question's error and margin, widened by the
    /// bias bound: the estimate's error is a noise the t quantile bounds at the level plus a
    /// bias at most `bias`, so the sum bounds it at the level (the conservative, "simple"
    /// form of a bias-aware interval: Armstrong and Kolesár, "Simple and honest confidence
    /// intervals in nonparametric regression", Quantitative Economics 11 (2020) 1-39).
    pub(super) fn half_width_at(&self, n: usize, ms: f64, mg: Margins) -> f64 {
        let df = self.df_per_round * n as f64 - self.df_lost;
        if df <= 0.0 || !(mg.alpha > 0.0 && mg.alpha < 1.0) {
            return f64::INFINITY;
        }
        let se = (ms * self.v1 / n as f64).sqrt();
        let m = (1.0 + mg.min_effect).ln();
        critical(mg.alpha, df, 2.0 * m / se) * se + self.bias
    }

    pub(super) fn judge(&self, mg: Margins, hw: f64) -> Judged {
        let v = verdict(self.estimate, hw, mg.min_effect);
        // The interval narrows with n, so the first deciding n is found by bisection.
        let decides = |n: usize| {
            let hw = self.half_width_at(n, self.ms, mg);
            verdict(self.estimate, hw, mg.min_effect) != Verdict::Inconclusive
        };
        let more_rounds =
            (mg.project && v == Verdict::Inconclusive && self.ms > 0.0 && decides(self.n + 1000))
                .then(|| {
                    let (mut lo, mut hi) = (self.n, self.n + 1000);
                    while hi - lo > 1 {
                        let mid = (lo + hi) / 2;
                        if decides(mid) {
                            hi = mid;
                        } else {
                            lo = mid;
                        }
                    }
                    (hi - self.n) as u32
                });
        Judged {
            estimate: self.estimate,
            half_width: hw,
            rounds: self.n,
            verdict: v,
            more_rounds,
            lag1: 0.0,
        }
    }
}

/// The critical value of a question's interval `estimate ± c·se` under the partitioning
/// principle (Finner and Strassburger, "The partitioning principle: a powerful tool in
/// multiple decision theory", Annals of Statistics 30 (2002) 1194-1213). A question's three
/// hypotheses partition the ratio's range: beyond the margin `m` one way, the other way, and
/// within it; exactly one is true, so each is tested at the question's full error `α` and
/// the verdicts read off one interval are wrong with probability at most `α`:
/// - "higher" (lower end above `m`) is wrong when the truth is at most `m`: the lower end
///   exceeds the truth, one-sided, `P(T > c)`; "lower" alike;
/// - "equivalent" (the interval inside `±m`) is wrong when the truth is beyond `m`: one of
///   the two one-sided tests (Schuirmann's TOST) failed, `P(T > c)`;
/// - a truth within `±m` is wrongly judged beyond it on either side: at worst (the truth at
///   `m`) `P(T > c) + P(T > c + 2m/se)`, which `c` solves equal to `α`.
///
/// So `c` lies between the one-sided quantile (a margin many standard errors wide, where
/// decisions are made) and the two-sided one (no margin: `shift = 0`), which an interval
/// holding at `1 − α` would need: a verdict needs `c` where it used to need the two-sided
/// quantile, about 10 % narrower at the demo's error. The interval itself covers its truth
/// with probability at least `1 − 2α` (and at most `1 − α`), which is what the report states.
pub fn critical(alpha: f64, df: f64, shift: f64) -> f64 {
    let tail = |c: f64| 0.5 * crate::student_t_two_sided_p(c, df);
    let size = |c: f64| {
        tail(c)
            + if shift.is_finite() {
                tail(c + shift)
            } else {
                0.0
            }
    };
    let (mut lo, mut hi) = (
        t_quantile(1.0 - alpha, df),
        t_quantile(1.0 - alpha / 2.0, df),
    );
    // No margin (or a NaN from a zero standard error's 0/0): the two-sided quantile.
    if shift.is_nan() || shift <= 0.0 {
        return hi;
    }
    // size() falls as c grows; at `lo` it is above α (or just at it for a wide margin), at
    // `hi` at most α.
    for _ in 0..60 {
        let mid = 0.5 * (lo + hi);
        if size(mid) > alpha {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    hi
}

/// Student's t quantile `q` (> 0.5) for `df` degrees of freedom, by bisection on the
/// distribution function.
pub fn t_quantile(q: f64, df: f64) -> f64 {
    let two_sided = 2.0 * (1.0 - q);
    let (mut lo, mut hi) = (0.0f64, 1e7f64);
    for _ in 0..64 {
        let mid = 0.5 * (lo + hi);
        if crate::student_t_two_sided_p(mid, df) > two_sided {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// The lag-1 autocorrelation of a series of residuals, corrected for its small-sample bias
/// (about `−(1 + 3φ)/n`, Marriott and Pope 1954) and floored at 0 (a negative one is not used
/// to narrow an interval): the AR(1) coefficient the interval is widened for.
pub fn lag1(e: &[f64]) -> f64 {
    lag1_pooled(&[e])
}

/// [`lag1`] from several series of the same process: the mean of their bias-corrected
/// estimates, then floored and capped (flooring each first would bias the mean upwards: at six
/// rounds a series without autocorrelation gives 0 or more, never less).
pub(super) fn lag1_pooled(series: &[&[f64]]) -> f64 {
    let est: Vec<f64> = series.iter().filter_map(|e| lag1_corrected(e)).collect();
    if est.is_empty() {
        return 0.0;
    }
    (est.iter().sum::<f64>() / est.len() as f64).clamp(0.0, LAG1_MAX)
}

/// The bias-corrected lag-1 autocorrelation, unclamped; `None` below 4 values or without
/// spread.
fn lag1_corrected(e: &[f64]) -> Option<f64> {
    let n = e.len();
    if n < 4 {
        return None;
    }
    let ss: f64 = e.iter().map(|x| x * x).sum();
    if ss <= 0.0 {
        return None;
    }
    let r1 = e.windows(2).map(|w| w[0] * w[1]).sum::<f64>() / ss;
    let nf = n as f64;
    // No pretest (widening only when the estimate is "significant"): one was tried and left
    // AR(1) 0.5 at twice its error for little power back (docs/BENCHMARKS.md).
    Some((nf * r1 + 1.0) / (nf - 3.0))
}

/// The largest lag-1 autocorrelation the widening believes (beyond it the factor explodes on
/// an estimate from a few rounds).
const LAG1_MAX: f64 = 0.8;

/// The variance of a mean of an AR(1) series over that of independent rounds, for large n.
pub(super) fn inflation(phi: f64) -> f64 {
    (1.0 + phi) / (1.0 - phi)
}

/// The degrees of freedom of a variance estimated from an AR(1) series over those of as many
/// independent values, for large n (Bartlett 1946): `(1 − φ²)/(1 + φ²)`.
pub(super) fn bartlett(phi: f64) -> f64 {
    (1.0 - phi * phi) / (1.0 + phi * phi)
}

/// An interval not yet bounded (no residual degrees of freedom).
pub(super) fn unbounded(estimate: f64, n: usize) -> Judged {
    Judged {
        estimate,
        half_width: f64::INFINITY,
        rounds: n,
        verdict: Verdict::Inconclusive,
        more_rounds: None,
        lag1: 0.0,
    }
}
