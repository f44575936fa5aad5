//! One pair's linear model on one workload, apart from what is judged from it: the cells, the
//! design matrix (rounds swept out; targets, slots and first-order carry-over), the least
//! squares fit with its fallbacks, and the largest counting bias the contrast can carry. The
//! analysis ([`super::analysis`]) judges a question from one such fit and a finding's average
//! from several; the module docs there give the model and its sources.

use super::lsq::Lsq;
use super::table::Table;

/// The cells of a workload's linear model: `(round, target)` of every compared target's
/// figure in the given rounds.
pub(super) fn cells(
    t: &Table,
    w: usize,
    compared: &[usize],
    rounds: &[usize],
) -> Vec<(usize, usize)> {
    rounds
        .iter()
        .flat_map(|&r| compared.iter().map(move |&c| (r, c)))
        .filter(|&(r, c)| t.get(w, c, r).is_some())
        .collect()
}

/// Which regressors a workload's model has besides the targets.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Terms {
    /// The slots (periods) and first-order carry-over.
    All,
    /// The slots alone.
    Slots,
    /// Neither: the two-way model of rounds and targets.
    Targets,
}

/// The design matrix of a workload's model over `cells`, the rounds' effects swept out (each
/// column and `y` centred within its round over the cells present: the projection that
/// removes one column per round, exactly, also where a round lacks a cell): one column per
/// target in `targets` (the others are the reference), per slot and per preceding target
/// (first-order carry-over) as `terms` says, and `last` at the end (the column whose
/// coefficient is wanted).
pub(super) fn columns(
    t: &Table,
    w: usize,
    cells: &[(usize, usize)],
    targets: &[usize],
    terms: Terms,
    last: usize,
) -> Vec<Vec<f64>> {
    let ind = |f: &dyn Fn(usize, usize) -> bool| -> Vec<f64> {
        let mut v: Vec<f64> = cells
            .iter()
            .map(|&(r, c)| f64::from(u8::from(f(r, c))))
            .collect();
        center(cells, &mut v);
        v
    };
    let mut cols: Vec<Vec<f64>> = targets.iter().map(|&tt| ind(&|_, c| c == tt)).collect();
    // The slots' (periods') effects: position 0 is the reference.
    if terms != Terms::Targets {
        cols.extend((1..t.targets).map(|p| ind(&|r, c| t.slot(w, c, r) == Some(p))));
    }
    if terms == Terms::All {
        cols.extend((0..t.targets).map(|j| ind(&|r, c| t.prev(w, c, r) == Some(j))));
    }
    cols.push(ind(&|_, c| c == last));
    cols
}

/// Subtracts from each value its round's mean over `cells` (grouped by round, in order).
pub(super) fn center(cells: &[(usize, usize)], v: &mut [f64]) {
    let mut i = 0;
    while i < cells.len() {
        let j = i + cells[i..].iter().take_while(|c| c.0 == cells[i].0).count();
        let m = v[i..j].iter().sum::<f64>() / (j - i) as f64;
        v[i..j].iter_mut().for_each(|x| *x -= m);
        i = j;
    }
}

/// A pair's fitted model on one workload: `τ_a − τ_b` and what its interval needs.
pub(super) struct PairFit {
    pub(super) estimate: f64,
    /// `(round, target)` of the model's cells, grouped by round.
    pub(super) cells: Vec<(usize, usize)>,
    pub(super) fit: Lsq,
    /// The rounds in which both a and b were measured.
    pub(super) rounds: Vec<usize>,
    /// The targets with cells, ascending.
    pub(super) targets: Vec<usize>,
    /// Residual degrees of freedom (cells less rounds less the fit's rank).
    pub(super) resid_df: f64,
    /// The residuals' variance over the noise's, about (`resid_df / (cells − rounds)`).
    pub(super) shrink: f64,
    /// The largest counting bias of the estimate (`Table::count_bias`).
    pub(super) bias: f64,
}

/// The two-way model with slots and first-order carry-over over every compared target's
/// cells in the rounds where both a and b were measured (with fallbacks where those terms
/// confound the contrast). `None` without a common round or an estimable contrast.
pub(super) fn fit_pair(
    t: &Table,
    w: usize,
    compared: &[usize],
    a: usize,
    b: usize,
) -> Option<PairFit> {
    let rounds: Vec<usize> = t.complete_rounds(w, &[a, b]);
    let n = rounds.len();
    if n == 0 {
        return None;
    }
    let cells = cells(t, w, compared, &rounds);
    let mut y: Vec<f64> = cells
        .iter()
        .map(|&(r, c)| t.get(w, c, r).unwrap_or(0.0))
        .collect();
    center(&cells, &mut y);
    // Target effects relative to b; a's column last, so its coefficient is τ_a − τ_b.
    let mut targets: Vec<usize> = cells.iter().map(|x| x.1).collect();
    targets.sort_unstable();
    targets.dedup();
    let others: Vec<usize> = targets
        .iter()
        .copied()
        .filter(|&c| c != a && c != b)
        .collect();
    // First-order carry-over (Jones and Kenward ch. 5): the cell after target j runs λ_j
    // higher. In a Williams design a target never follows itself within a workload, so λ_a
    // lands on every target but a and, unmodeled, biases the contrast by about (λ_b − λ_a)/T
    // (issue 40). The carry columns sum to the round columns where every cell has a
    // predecessor: only differences of λ are estimable, and lsq leaves the redundant one out.
    let mut fit = super::lsq::lsq(&columns(t, w, &cells, &others, Terms::All, a), &y);
    if fit.coef.last().copied().flatten().is_none() {
        // Carry-over confounded with the contrast (the rounds so far put the same predecessors
        // before a and b throughout, which a Williams order never does over a square but a
        // table built otherwise may): the model without carry-over, as before issue 40.
        fit = super::lsq::lsq(&columns(t, w, &cells, &others, Terms::Slots, a), &y);
    }
    if fit.coef.last().copied().flatten().is_none() {
        // The slots confounded too: too few rounds for each slot to hold both targets (two
        // rounds of two targets out of six, in slots 3 and 4, then 1 and 2: the lab's
        // failover suite, whose single-link targets skip). The plain two-way model.
        fit = super::lsq::lsq(&columns(t, w, &cells, &others, Terms::Targets, a), &y);
    }
    let estimate = fit.coef.last().copied().flatten()?;
    let n = rounds.len();
    let big_n = cells.len() as f64;
    let resid_df = big_n - n as f64 - fit.rank as f64;
    let shrink = resid_df / (big_n - n as f64);
    // Counting's bias (`Table::count_bias`), cell by cell through the estimate's weights: the
    // largest error it can leave in the contrast whatever its sign in each cell. Each cell
    // keeps its own count, so the pair's target with the fewest I/Os sets it (an average over
    // the targets diluted it).
    let bias: f64 = cells
        .iter()
        .zip(&fit.last_weights)
        .map(|(&(r, c), wt)| wt.abs() * t.count_bias(w, c, r))
        .sum();
    Some(PairFit {
        estimate,
        cells,
        fit,
        rounds,
        targets,
        resid_df,
        shrink,
        bias,
    })
}

impl PairFit {
    /// The residual of target `c`'s cell in round `r`, if it has one.
    pub(super) fn resid(&self, r: usize, c: usize) -> Option<f64> {
        self.cells
            .iter()
            .position(|&x| x == (r, c))
            .map(|i| self.fit.resid[i])
    }

    /// The pair's residual differences `e_a − e_b` in round order: where persistence across
    /// rounds shows (the lag-1 widening's series).
    pub(super) fn pair_differences(&self, a: usize, b: usize) -> Vec<f64> {
        self.rounds
            .iter()
            .filter_map(|&r| Some(self.resid(r, a)? - self.resid(r, b)?))
            .collect()
    }
}
