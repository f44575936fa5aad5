//! The table an analysis judges: one metric's log figures by workload, target and round, with
//! what the model needs of each cell besides its figure (its resolution, its slot, the target
//! that ran right before it).

/// Log figures of one metric: `[workload][target][round]`, `None` where a cell is missing.
#[derive(Clone, Debug, PartialEq)]
pub struct Table {
    pub(super) workloads: usize,
    pub(super) targets: usize,
    pub(super) rounds: usize,
    data: Vec<Option<f64>>,
    /// Per cell: the figure's relative resolution (1 / I/Os for a rate counted from I/Os),
    /// 0 when unknown.
    res: Vec<f64>,
    /// Per cell: the target of the cell that ran right before it (any workload), [`NO_PREV`]
    /// when unknown or the first: the carry-over term's regressor.
    prev: Vec<u32>,
    /// Per cell: its position in its workload's round (the cross-over's period), [`NO_PREV`]
    /// when unknown.
    slot: Vec<u32>,
}

const NO_PREV: u32 = u32::MAX;

impl Table {
    pub fn new(workloads: usize, targets: usize, rounds: usize) -> Table {
        Table {
            workloads,
            targets,
            rounds,
            data: vec![None; workloads * targets * rounds],
            res: vec![0.0; workloads * targets * rounds],
            prev: vec![NO_PREV; workloads * targets * rounds],
            slot: vec![NO_PREV; workloads * targets * rounds],
        }
    }

    pub fn rounds(&self) -> usize {
        self.rounds
    }

    fn idx(&self, w: usize, t: usize, r: usize) -> usize {
        (w * self.targets + t) * self.rounds + r
    }

    /// Records a figure (its logarithm is kept; a figure that is not positive and finite is
    /// left out). Rounds past the table's size grow it.
    pub fn set(&mut self, w: usize, t: usize, r: usize, figure: f64) {
        if w >= self.workloads || t >= self.targets {
            return;
        }
        self.grow(r);
        let i = self.idx(w, t, r);
        self.data[i] = (figure.is_finite() && figure > 0.0).then(|| figure.ln());
        self.res[i] = 0.0;
    }

    /// Makes room for round `r`.
    fn grow(&mut self, r: usize) {
        if r < self.rounds {
            return;
        }
        let mut grown = Table::new(self.workloads, self.targets, r + 1);
        for ww in 0..self.workloads {
            for tt in 0..self.targets {
                for rr in 0..self.rounds {
                    let (i, j) = (self.idx(ww, tt, rr), grown.idx(ww, tt, rr));
                    grown.data[j] = self.data[i];
                    grown.res[j] = self.res[i];
                    grown.prev[j] = self.prev[i];
                    grown.slot[j] = self.slot[i];
                }
            }
        }
        *self = grown;
    }

    /// Records which target's cell ran right before this one (whatever its workload): the
    /// carry-over term's regressor. Cells without one are modeled without carry-over.
    pub fn set_prev(&mut self, w: usize, t: usize, r: usize, prev: usize) {
        if w >= self.workloads || t >= self.targets || prev >= self.targets {
            return;
        }
        self.grow(r);
        let i = self.idx(w, t, r);
        self.prev[i] = prev as u32;
    }

    /// Records the cell's position in its workload's round: the model gives each position its
    /// own effect (warm-up: the cross-over's period effect).
    pub fn set_slot(&mut self, w: usize, t: usize, r: usize, slot: usize) {
        if w >= self.workloads || t >= self.targets {
            return;
        }
        self.grow(r);
        let i = self.idx(w, t, r);
        self.slot[i] = slot as u32;
    }

    pub(super) fn slot(&self, w: usize, t: usize, r: usize) -> Option<usize> {
        let p = self.slot[self.idx(w, t, r)];
        (p != NO_PREV).then_some(p as usize)
    }

    pub(super) fn prev(&self, w: usize, t: usize, r: usize) -> Option<usize> {
        let p = self.prev[self.idx(w, t, r)];
        (p != NO_PREV).then_some(p as usize)
    }

    /// [`Table::set`] for a figure counted from `ios` I/Os (IOPS, MB/s): its logarithm is known
    /// only to about ±1/ios, a bias every interval on it is widened by ([`Table::count_bias`];
    /// a few rounds of identical counts would otherwise give an interval of zero width around a
    /// quantized figure).
    pub fn set_counted(&mut self, w: usize, t: usize, r: usize, figure: f64, ios: u64) {
        self.set(w, t, r, figure);
        if w < self.workloads && t < self.targets && ios > 0 {
            let i = self.idx(w, t, r);
            self.res[i] = 1.0 / ios as f64;
        }
    }

    /// The largest error counting alone can leave in a cell's log figure: a window holds
    /// `N = ios` completions of a rate whose true count lies within one I/O of it (the window's
    /// two edges each cut an I/O), so `|ln N − ln(λT)| ≤ −ln(1 − 1/N)` (about `1/N`). When
    /// every round counts the same (a steady target, a server with a fixed delay) that error
    /// is the same in every round: a bias, not noise, and no number of rounds shrinks it
    /// (issue 40, point 4: the variance floor `1/(3N²)` it replaces shrank like `1/√n`, and
    /// intervals of 22- and 29-I/O cells covered far below their level). 0 when the figure was
    /// not counted; infinite for a single I/O.
    pub(super) fn count_bias(&self, w: usize, t: usize, r: usize) -> f64 {
        let q = self.res[self.idx(w, t, r)];
        if q >= 1.0 {
            f64::INFINITY
        } else {
            -(-q).ln_1p()
        }
    }

    pub fn get(&self, w: usize, t: usize, r: usize) -> Option<f64> {
        (w < self.workloads && t < self.targets && r < self.rounds)
            .then(|| self.data[self.idx(w, t, r)])
            .flatten()
    }

    /// The rounds in which every one of `targets` has workload `w`'s figure.
    pub(super) fn complete_rounds(&self, w: usize, targets: &[usize]) -> Vec<usize> {
        (0..self.rounds)
            .filter(|&r| targets.iter().all(|&t| self.get(w, t, r).is_some()))
            .collect()
    }
}
