//! The run order of a comparison: for every workload, the targets of each round follow a row of
//! a Williams design (E. J. Williams, "Experimental designs balanced for the estimation of
//! residual effects of treatments", Australian Journal of Scientific Research A 2 (1949)
//! 149-168; Jones and Kenward, *Design and Analysis of Cross-Over Trials*, ch. 4).
//!
//! A Williams square for `t` targets is a Latin square whose rows are the cyclic shifts of
//! `0, 1, t-1, 2, t-2, ...`: over `t` rounds every target runs in every slot once, and for even
//! `t` every target runs right after every other target exactly once. For odd `t` no `t`-row
//! square can do the latter (row-complete Latin squares of odd order are rare and do not exist
//! for 3, 5 or 7), so blocks alternate between the square and its mirror image (rows reversed):
//! each block is still a Latin square, and every two blocks (`2t` rounds) balance first-order
//! carry-over. The slot and carry-over effects (warm-up, the previous cell's writes, the page
//! cache, the CPU's clock) then fall on every target alike instead of on whichever target
//! always ran in that slot.
//!
//! Randomization, seeded and so reproducible: each workload maps the square's symbols to the
//! targets by its own permutation, and each block visits its rows in its own order.

use super::rng::{derive, Rng};

/// The rows of a Williams square of order `t` (`t` rows, each a permutation of `0..t`).
pub fn williams_square(t: usize) -> Vec<Vec<usize>> {
    if t == 0 {
        return Vec::new();
    }
    // 0, 1, t-1, 2, t-2, ...
    let mut first = Vec::with_capacity(t);
    let (mut lo, mut hi) = (1usize, t - 1);
    first.push(0);
    for k in 1..t {
        if k % 2 == 1 {
            first.push(lo);
            lo += 1;
        } else {
            first.push(hi);
            hi -= 1;
        }
    }
    (0..t)
        .map(|i| first.iter().map(|s| (s + i) % t).collect())
        .collect()
}

/// The run order of one comparison: `workloads` x `targets`, round after round, for as many
/// rounds as are asked for (the order of round `r` never depends on how many follow it, so an
/// adaptive comparison and a fixed one with the same seed run the same cells in the same order).
#[derive(Clone, Debug)]
pub struct Order {
    targets: usize,
    workloads: usize,
    seed: u64,
    square: Vec<Vec<usize>>,
    /// Per workload: square symbol -> target index.
    relabel: Vec<Vec<usize>>,
}

/// One cell of the order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    pub round: u32,
    pub workload: usize,
    /// 0-based position of the target within its workload's round.
    pub slot: usize,
    pub target: usize,
}

impl Order {
    pub fn new(workloads: usize, targets: usize, seed: u64) -> Order {
        let relabel = (0..workloads)
            .map(|w| {
                let mut p: Vec<usize> = (0..targets).collect();
                Rng::new(derive(seed, w as u64)).shuffle(&mut p);
                p
            })
            .collect();
        Order {
            targets,
            workloads,
            seed,
            square: williams_square(targets),
            relabel,
        }
    }

    /// Rounds after which every target has run in every slot equally often (a Latin square).
    pub fn square_len(&self) -> u32 {
        self.targets.max(1) as u32
    }

    /// Rounds after which first-order carry-over is balanced as well: `t` for even `t`, `2t`
    /// for odd `t` (a square and its mirror).
    pub fn balance_len(&self) -> u32 {
        let t = self.targets.max(1) as u32;
        if t.is_multiple_of(2) || t == 1 {
            t
        } else {
            2 * t
        }
    }

    /// The targets of workload `w` in round `round`, in the order they run.
    pub fn sequence(&self, round: u32, w: usize) -> Vec<usize> {
        let t = self.targets;
        if t == 0 {
            return Vec::new();
        }
        let block = round / t as u32;
        let pos = (round % t as u32) as usize;
        let mut rows: Vec<usize> = (0..t).collect();
        let label = ((w as u64) << 32) ^ (u64::from(block) + 1);
        Rng::new(derive(self.seed ^ 0xB10C, label)).shuffle(&mut rows);
        let mut row = self.square[rows[pos]].clone();
        if t % 2 == 1 && block % 2 == 1 {
            row.reverse();
        }
        row.into_iter().map(|s| self.relabel[w][s]).collect()
    }

    /// Every cell of one round, workload by workload, in run order.
    pub fn round(&self, round: u32) -> Vec<Slot> {
        let mut v = Vec::with_capacity(self.workloads * self.targets);
        for w in 0..self.workloads {
            for (slot, target) in self.sequence(round, w).into_iter().enumerate() {
                v.push(Slot {
                    round,
                    workload: w,
                    slot,
                    target,
                });
            }
        }
        v
    }

    /// The first `rounds` rounds.
    pub fn rounds(&self, rounds: u32) -> Vec<Slot> {
        (0..rounds).flat_map(|r| self.round(r)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn square_of_four_is_the_textbook_one() {
        assert_eq!(
            williams_square(4),
            vec![
                vec![0, 1, 3, 2],
                vec![1, 2, 0, 3],
                vec![2, 3, 1, 0],
                vec![3, 0, 2, 1]
            ]
        );
        assert_eq!(williams_square(1), vec![vec![0]]);
        assert_eq!(williams_square(2), vec![vec![0, 1], vec![1, 0]]);
    }

    /// Per workload over `rounds` rounds: how often each target ran in each slot, and how often
    /// each target ran right after each other target.
    fn counts(o: &Order, w: usize, t: usize, rounds: u32) -> (Vec<Vec<u32>>, Vec<Vec<u32>>) {
        let mut slot = vec![vec![0u32; t]; t];
        let mut after = vec![vec![0u32; t]; t];
        for r in 0..rounds {
            let s = o.sequence(r, w);
            let mut sorted = s.clone();
            sorted.sort();
            assert_eq!(
                sorted,
                (0..t).collect::<Vec<_>>(),
                "round {r} is a permutation"
            );
            for (i, &x) in s.iter().enumerate() {
                slot[x][i] += 1;
                if i > 0 {
                    after[s[i - 1]][x] += 1;
                }
            }
        }
        (slot, after)
    }

    proptest! {
        #[test]
        fn every_slot_and_every_predecessor_equally_often(
            w in 1usize..7, t in 1usize..9, blocks in 1u32..4, seed in any::<u64>()
        ) {
            let o = Order::new(w, t, seed);
            // Slots: balanced over every multiple of t rounds.
            let rounds = blocks * o.square_len();
            for wi in 0..w {
                let (slot, _) = counts(&o, wi, t, rounds);
                for row in &slot {
                    prop_assert!(row.iter().all(|&c| c == blocks), "slots {slot:?}");
                }
            }
            // Carry-over: balanced over every multiple of t (even) or 2t (odd) rounds.
            let rounds = blocks * o.balance_len();
            for wi in 0..w {
                let (slot, after) = counts(&o, wi, t, rounds);
                let per_slot = rounds / t as u32;
                prop_assert!(slot.iter().flatten().all(|&c| c == per_slot));
                let each = rounds / t as u32;
                for (a, row) in after.iter().enumerate() {
                    for (b, &c) in row.iter().enumerate() {
                        let want = if a == b || t == 1 { 0 } else { each };
                        prop_assert_eq!(c, want, "{} after {} (t {}): {:?}", b, a, t, after);
                    }
                }
            }
        }
    }

    #[test]
    fn the_same_seed_gives_the_same_order_and_rounds_do_not_depend_on_the_total() {
        let a = Order::new(5, 5, 42).rounds(7);
        let b = Order::new(5, 5, 42).rounds(12);
        assert_eq!(a[..], b[..a.len()]);
        assert_ne!(a, Order::new(5, 5, 43).rounds(7));
    }

    #[test]
    fn five_by_five_no_longer_pins_a_target_to_a_slot() {
        // The demo's shape (W = T = 5) that the old rotation pinned: every target now takes
        // every slot of every workload within five rounds.
        let o = Order::new(5, 5, 1);
        for w in 0..5 {
            let (slot, _) = counts(&o, w, 5, 5);
            assert!(slot.iter().flatten().all(|&c| c == 1), "{slot:?}");
        }
    }
}
