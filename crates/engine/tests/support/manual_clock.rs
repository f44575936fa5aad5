//! Completions on a clock the test owns: the fake targets of `engines` and `intervals` keep
//! their I/O here, each due at a time of their choosing, and the run moves the clock by
//! reaping, so every figure the scheduler derives from it is exact.

use std::sync::Arc;

use sanbench_engine::run::clock::{Clock, Manual};
use sanbench_engine::Completion;

/// A fake queue's I/O in flight, each with the time (ns on `clock`) it completes.
pub struct Due {
    pub clock: Arc<Manual>,
    pending: Vec<(u64, u32)>,
}

impl Due {
    pub fn new(clock: Arc<Manual>) -> Self {
        Due {
            clock,
            pending: Vec::new(),
        }
    }

    pub fn now(&self) -> u64 {
        self.clock.now_ns()
    }

    /// I/O `tag` completes at `at`.
    pub fn push(&mut self, at: u64, tag: u32) {
        self.pending.push((at, tag));
    }

    /// Hands out every I/O due by now; asked to wait (`min` > 0), first moves the clock to
    /// the earliest completion, as a real queue would sleep until it.
    pub fn reap(&mut self, min: usize, out: &mut Vec<Completion>) {
        self.reap_holding(min, out, |_| {});
    }

    /// [`reap`](Self::reap), calling `hold` with the time the clock is about to move to
    /// before it moves.
    pub fn reap_holding(&mut self, min: usize, out: &mut Vec<Completion>, hold: impl FnOnce(u64)) {
        self.pending.sort();
        if let (true, Some(&(t, _))) = (min > 0, self.pending.first()) {
            hold(t);
            self.clock.advance_to(t);
        }
        let now = self.clock.now_ns();
        let due = self.pending.iter().take_while(|(t, _)| *t <= now).count();
        out.extend(
            self.pending
                .drain(..due)
                .map(|(_, tag)| Completion { tag, result: 0 }),
        );
    }
}
