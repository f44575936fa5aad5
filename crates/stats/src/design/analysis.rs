//! Verdicts on a comparison's questions: for one metric, a table of log figures by workload,
//! target and round, and for every pair of compared targets on every workload the ratio with a
//! simultaneous confidence interval (at the plan's looks) and one of three verdicts.
//!
//! The model (the analysis of a cross-over design, Jones and Kenward ch. 2 and 5), per workload
//! and pair `(a, b)`: `ln y = ρ_round + π_slot + τ_target + λ_prev + ε_target`, over every
//! compared target's cells in the rounds where both a and b were measured, with `ρ` the round's
//! effect (the machine's drift), `π` the slot's (warm-up), `λ_prev` the first-order carry-over
//! of the cell that ran just before, and noise whose variance differs per target. The contrast
//! `τ_a − τ_b` is estimated by least squares (`lsq.rs`) and its variance from the pair's
//! own noise (Satterthwaite's degrees of freedom), widened for lag-1 autocorrelation across
//! rounds. One pooled σ per workload, no carry-over term and independent rounds each broke the
//! stated error under noise storage has (issue 40; docs/MEASURE.md has the figures). The
//! interval is Student's t at the error the caller gives it: the question's share of the
//! family's (Bonferroni) and, under `--repeat auto`, that look's share of the question's (the
//! group-sequential spending of [`super::plan`]); it holds at the planned looks, not at any
//! time one might look.
//!
//! Verdicts, with `m = ln(1 + min_effect)`: **better** when the whole interval lies beyond `m`
//! on one side (a minimum-effect test), **equivalent** when it lies inside `(−m, m)` (two
//! one-sided tests, TOST: the interval at error α makes each one-sided test run at α/2),
//! **inconclusive** otherwise, with an
//! estimate of how many more rounds would likely decide it at the same estimate and noise.

use super::interval::{inflation, lag1_pooled, unbounded, Fit};
pub use super::interval::{lag1, t_quantile, verdict, Judged, Margins, Verdict};
use super::pair_fit::{cells, center, columns, fit_pair, PairFit, Terms};
pub use super::table::Table;

/// One question's answer: workload `workload`, targets `a` and `b` (indices into the table).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Answer {
    pub workload: usize,
    pub a: usize,
    pub b: usize,
    pub judged: Judged,
}

/// Every pair (a < b in `compared`' order) on workload `w`, each from its own rounds and its
/// own noise. Nothing for a pair without a common round.
///
/// Per pair, the rounds in which both targets have a figure (a missing cell drops only the
/// pairs it touches), the differences `d_r = ln a − ln b` (the round's effect cancels), and the
/// pair's own variance of `d` with `n − 1` degrees of freedom: a noisy target's pairs get wide
/// intervals and a quiet pair is not widened by it (one pooled σ for all of a workload's
/// targets under-covered the noisy pairs, issue 40).
///
/// A target with no figure at all on this workload (a metric it does not have, such as power
/// efficiency where its power was modeled) leaves the model; the others are still compared.
pub fn judge_workload(t: &Table, w: usize, compared: &[usize], mg: Margins) -> Vec<Answer> {
    let mut out = Vec::new();
    for (i, &a) in compared.iter().enumerate() {
        for &b in &compared[i + 1..] {
            if let Some(judged) = judge_pair(t, w, compared, a, b, mg) {
                out.push(Answer {
                    workload: w,
                    a,
                    b,
                    judged,
                });
            }
        }
    }
    out
}

/// One pair's contrast on workload `w` (see [`judge_workload`]): the two-way model with a
/// first-order carry-over term over every compared target's cells in the rounds where both
/// were measured, each target with its own noise.
fn judge_pair(
    t: &Table,
    w: usize,
    compared: &[usize],
    a: usize,
    b: usize,
    mg: Margins,
) -> Option<Judged> {
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
    if resid_df <= 0.0 {
        return Some(unbounded(estimate, n));
    }
    // Each target's own noise. Within a round the residuals of two targets differ by their
    // two noises alone (the round's effect and the round's mean cancel), so the mean square
    // of that difference estimates σ_u² + σ_v², and with three or more targets each σ_t²
    // follows from those sums (with two, each gets half). Residuals of a heteroscedastic
    // two-way model taken one target at a time would mix the noisy targets' noise into the
    // quiet one's.
    let k = targets.len();
    let resid = |r: usize, c: usize| {
        cells
            .iter()
            .position(|&x| x == (r, c))
            .map(|i| fit.resid[i])
    };
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
    let n_ab = rounds.len() as f64;
    let s2_pair = v[ia][ib] / 2.0;
    var += pair_weight * s2_pair;
    denom += (pair_weight * s2_pair).powi(2) / (n_ab * shrink).max(1e-9);
    // Rounds are not independent when a target's noise persists (a cache warming over the
    // run, a neighbour's job): the pair's residual differences in round order.
    let lag_resid: Vec<f64> = rounds
        .iter()
        .filter_map(|&r| Some(resid(r, a)? - resid(r, b)?))
        .collect();
    let phi = lag1(&lag_resid);
    var *= inflation(phi);
    let nu = if denom > 0.0 {
        var * var / denom
    } else {
        resid_df
    };
    let f = Fit {
        estimate,
        v1: 1.0,
        // Degrees of freedom grow with the rounds in proportion.
        df_per_round: nu / n as f64,
        df_lost: 0.0,
        ms: var * n as f64,
        n,
        bias,
    };
    let hw = f.half_width_at(n, f.ms, mg.alpha);
    Some(Judged {
        lag1: phi,
        ..f.judge(mg, hw)
    })
}

/// The estimated first-order carry-over on workload `w`, per preceding target: how much higher
/// (log scale) the cell right after that target runs than after the average target, from the
/// two-way model with carry-over over every target's cells. `None` for a target never seen
/// before another cell, and for all when the rounds so far cannot separate carry-over from
/// the targets' effects.
pub fn carry_over(t: &Table, w: usize) -> Vec<Option<f64>> {
    let all: Vec<usize> = (0..t.targets).collect();
    let rounds: Vec<usize> = (0..t.rounds)
        .filter(|&r| all.iter().filter(|&&c| t.get(w, c, r).is_some()).count() >= 2)
        .collect();
    let cells = cells(t, w, &all, &rounds);
    let none = vec![None; t.targets];
    if cells.is_empty() {
        return none;
    }
    let y: Vec<f64> = cells
        .iter()
        .map(|&(r, c)| t.get(w, c, r).unwrap_or(0.0))
        .collect();
    let present: Vec<usize> = all
        .iter()
        .copied()
        .filter(|&c| cells.iter().any(|x| x.1 == c))
        .collect();
    let mut y = y;
    center(&cells, &mut y);
    let mut cols = columns(t, w, &cells, &present[1..], Terms::All, 0);
    cols.pop(); // the `last` column repeats target 0's indicator: not needed here
    let base = present.len() - 1 + t.targets.saturating_sub(1);
    let fit = super::lsq::lsq(&cols, &y);
    let seen: Vec<usize> = (0..t.targets)
        .filter(|&j| cols[base + j].iter().any(|&v| v != 0.0))
        .collect();
    // Where every cell has a predecessor one of the seen predecessors is redundant with the
    // rounds (the reference, 0). Where one cell has none (the run's first, on a comparison of
    // one workload: the run order is per workload) none is, and "after nothing" is the
    // reference; either way only the differences are reported. Any more left out means
    // carry-over is not separable yet.
    let missing: Vec<usize> = seen
        .iter()
        .copied()
        .filter(|&j| fit.coef[base + j].is_none())
        .collect();
    if missing.len() > 1 || seen.len() < 2 {
        return none;
    }
    let lam = |j: usize| fit.coef[base + j].unwrap_or(0.0);
    let mean = seen.iter().map(|&j| lam(j)).sum::<f64>() / seen.len() as f64;
    (0..t.targets)
        .map(|j| seen.contains(&j).then(|| lam(j) - mean))
        .collect()
}

/// [`carry_over`] per target over every workload of the table: the geometric mean of the
/// workloads' estimates where estimable, as a fraction (+0.08: the cell after that target ran
/// 8 % higher than after the average target).
pub fn carry_over_by_target(t: &Table) -> Vec<Option<f64>> {
    let per: Vec<Vec<Option<f64>>> = (0..t.workloads).map(|w| carry_over(t, w)).collect();
    (0..t.targets)
        .map(|j| {
            let v: Vec<f64> = per.iter().filter_map(|p| p[j]).collect();
            (!v.is_empty()).then(|| (v.iter().sum::<f64>() / v.len() as f64).exp() - 1.0)
        })
        .collect()
}

/// The geometric mean of a pair's ratio over several workloads (a finding's average), with its
/// interval: the mean of the workloads' own contrasts (each from its workload's model, with
/// carry-over and slots removed there, where every compared target's cells pay for those
/// terms), its variance from the rounds as clusters. `compared` are the workloads' compared
/// targets.
///
/// Per round, the estimate's part of the residuals (each cell's residual times its weight in
/// its workload's contrast, rescaled for the degrees of freedom the fit took) summed over the
/// workloads and over the round's cells: whatever the round shares across workloads and
/// targets (a target slow in one round on every workload) stays in that sum, and the sums of
/// different rounds are independent. Their sum of squares is the cluster-robust variance
/// (Liang and Zeger, Biometrika 73 (1986) 13-22), `G/(G − 1)` times, on `G − 1` degrees of
/// freedom for `G` rounds (Bell and McCaffrey, Survey Methodology 28 (2002) 169-181), widened
/// for lag-1 autocorrelation of those sums in round order. It replaces a regression of the
/// per-round means of `ln(a/b)` on the means of the carry-over and slot regressors, which
/// spent a degree of freedom per column out of the rounds alone: with the demo's five
/// targets, ten rounds left it none, and its averages were unbounded (issue 40; the
/// averages are what the findings lead with).
///
/// Over one workload the average is that workload's question ([`judge_pair`]). A workload
/// on which the pair has no common round leaves the average unasked (`None`), as a missing
/// cell of every round did.
pub fn judge_summary(
    t: &Table,
    workloads: &[usize],
    compared: &[usize],
    a: usize,
    b: usize,
    mg: Margins,
) -> Option<Judged> {
    match workloads {
        [] => return None,
        [w] => return judge_pair(t, *w, compared, a, b, mg),
        _ => {}
    }
    let fits: Vec<PairFit> = workloads
        .iter()
        .map(|&w| fit_pair(t, w, compared, a, b))
        .collect::<Option<_>>()?;
    let wn = fits.len() as f64;
    let estimate = fits.iter().map(|f| f.estimate).sum::<f64>() / wn;
    let g = fits.iter().map(|f| f.rounds.len()).max().unwrap_or(0);
    if fits.iter().any(|f| f.resid_df <= 0.0) {
        return Some(unbounded(estimate, g));
    }
    // Per round (in order): the estimate's part of its residuals.
    let mut per_round: std::collections::BTreeMap<usize, f64> = Default::default();
    for f in &fits {
        let scale = 1.0 / (wn * f.shrink.sqrt());
        for ((&(r, _), e), wt) in f.cells.iter().zip(&f.fit.resid).zip(&f.fit.last_weights) {
            *per_round.entry(r).or_default() += wt * e * scale;
        }
    }
    let u: Vec<f64> = per_round.into_values().collect();
    let g = u.len();
    if g < 2 {
        return Some(unbounded(estimate, g));
    }
    let gf = g as f64;
    let var = gf / (gf - 1.0) * u.iter().map(|x| x * x).sum::<f64>();
    // The sums' own lag-1 estimate is as noisy as one question's (30 values at most); pooled
    // with the workloads' pairs' estimates (before flooring) it is steadier, and the larger
    // is used (with the sums' alone, AR(1) 0.5 missed in 0.090 of comparisons at 4 %,
    // against 0.062 for the questions).
    let diffs: Vec<Vec<f64>> = fits.iter().map(|f| f.pair_differences(a, b)).collect();
    let refs: Vec<&[f64]> = diffs.iter().map(|d| d.as_slice()).collect();
    let phi = lag1(&u).max(lag1_pooled(&refs));
    let fit = Fit {
        estimate,
        v1: 1.0,
        df_per_round: 1.0,
        df_lost: 1.0,
        ms: var * inflation(phi) * gf,
        n: g,
        bias: fits.iter().map(|f| f.bias).sum::<f64>() / wn,
    };
    let hw = fit.half_width_at(g, fit.ms, mg.alpha);
    Some(Judged {
        lag1: phi,
        ..fit.judge(mg, hw)
    })
}

#[cfg(test)]
#[path = "analysis_tests.rs"]
mod tests;
