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

use super::interval::{bartlett, inflation, lag1_pooled, unbounded, Fit};
pub use super::interval::{critical, lag1, t_quantile, verdict, Judged, Margins, Verdict};
use super::moderate::squeeze;
use super::pair_fit::{cells, center, columns, fit_pair, PairFit, Terms};
use super::pair_noise::{pair_noise, PairNoise};
pub use super::table::Table;

/// One question's answer: workload `workload`, targets `a` and `b` (indices into the table).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Answer {
    pub workload: usize,
    pub a: usize,
    pub b: usize,
    pub judged: Judged,
}

/// Every pair (a < b in `compared`' order) on workload `w` alone: [`judge_workloads`] over
/// `[w]`.
pub fn judge_workload(t: &Table, w: usize, compared: &[usize], mg: Margins) -> Vec<Answer> {
    judge_workloads(t, &[w], compared, mg)
}

/// Every pair (a < b in `compared`' order) on each of `workloads` (in that order, then by
/// pair), each from its own rounds and its own noise. Nothing for a pair without a common
/// round on a workload.
///
/// Per pair and workload, the rounds in which both targets have a figure (a missing cell
/// drops only the pairs it touches), the model of the module's docs, and the pair's own
/// variance (`pair_noise.rs`): a noisy target's pairs get wide intervals and a quiet pair is
/// not widened by it (one pooled σ for all of a workload's targets under-covered the noisy
/// pairs, issue 40).
///
/// **Persistence across rounds** is estimated per pair from all the workloads judged together:
/// the widening uses the larger of the question's own lag-1 estimate and the mean of the
/// pair's bias-corrected estimates over the workloads. From one workload's 30 rounds the
/// estimate's sd is about 0.16 at φ = 0.5, and the questions whose estimate came out low
/// (below 0.2 in 8 % of them) were the ones that missed: 13x their nominal rate at a family
/// error of 4 %, 0.072 of A/A comparisons with a missed interval against 4 % (issue 40). The
/// larger of the two never widens less than the question's own estimate did.
///
/// A target with no figure at all on a workload (a metric it does not have, such as power
/// efficiency where its power was modeled) leaves that workload's model; the others are
/// still compared.
pub fn judge_workloads(
    t: &Table,
    workloads: &[usize],
    compared: &[usize],
    mg: Margins,
) -> Vec<Answer> {
    let pairs: Vec<(usize, usize)> = compared
        .iter()
        .enumerate()
        .flat_map(|(i, &a)| compared[i + 1..].iter().map(move |&b| (a, b)))
        .collect();
    // [pair][workload]
    let noise: Vec<Vec<Option<PairNoise>>> = pairs
        .iter()
        .map(|&(a, b)| {
            let mut per: Vec<Option<PairNoise>> = workloads
                .iter()
                .map(|&w| pair_noise(t, w, compared, a, b))
                .collect();
            moderate(&mut per);
            per
        })
        .collect();
    let pooled: Vec<f64> = noise
        .iter()
        .map(|per| {
            let series: Vec<&[f64]> = per.iter().flatten().map(|p| p.lag.as_slice()).collect();
            lag1_pooled(&series)
        })
        .collect();
    let mut out = Vec::new();
    for (wi, &w) in workloads.iter().enumerate() {
        for (pi, &(a, b)) in pairs.iter().enumerate() {
            if let Some(p) = &noise[pi][wi] {
                let phi = lag1(&p.lag).max(pooled[pi]);
                out.push(Answer {
                    workload: w,
                    a,
                    b,
                    judged: p.judge(phi, pooled[pi], mg),
                });
            }
        }
    }
    out
}

/// A pair's variances on its workloads squeezed towards their common prior (Smyth 2004,
/// `moderate.rs`): each bounded interval's variance per round (`var · n`, the pair's noise
/// times the design's factor, about the same on every workload) and its degrees of freedom.
fn moderate(per: &mut [Option<PairNoise>]) {
    let bounded: Vec<&mut PairNoise> = per.iter_mut().flatten().filter(|p| p.df > 0.0).collect();
    let v: Vec<(f64, f64)> = bounded.iter().map(|p| (p.var * p.n as f64, p.df)).collect();
    for (p, (s2, df)) in bounded.into_iter().zip(squeeze(&v)) {
        p.var = s2 / p.n as f64;
        p.df = df;
    }
}

/// One pair's contrast on workload `w` alone (see [`judge_workloads`]): its own lag-1
/// estimate only, nothing borrowed from other workloads.
fn judge_pair(
    t: &Table,
    w: usize,
    compared: &[usize],
    a: usize,
    b: usize,
    mg: Margins,
) -> Option<Judged> {
    let p = pair_noise(t, w, compared, a, b)?;
    let phi = lag1(&p.lag);
    Some(p.judge(phi, phi, mg))
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
    let pooled = lag1_pooled(&refs);
    let phi = lag1(&u).max(pooled);
    let fit = Fit {
        estimate,
        v1: 1.0,
        // G − 1 degrees of freedom, cut as a question's are for persistence (by the pooled
        // estimate: the sums' own, from as few as six rounds, cut them for noise).
        df_per_round: bartlett(pooled),
        df_lost: bartlett(pooled),
        ms: var * inflation(phi) * gf,
        n: g,
        bias: fits.iter().map(|f| f.bias).sum::<f64>() / wn,
    };
    let hw = fit.half_width_at(g, fit.ms, mg);
    Some(Judged {
        lag1: phi,
        ..fit.judge(mg, hw)
    })
}

#[cfg(test)]
#[path = "analysis_tests.rs"]
mod tests;
