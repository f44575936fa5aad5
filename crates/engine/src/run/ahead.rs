//! Writes made ahead (issue 43, item 5): the closed loop's next I/Os drawn, and their write
//! data stamped into spare slots, while the I/Os just sent are in flight, so that a tag that
//! completes is resubmitted at once with data made before it completed.
//!
//! Why: stamping a write (an XOR copy of its bytes from the pool, run/layout.rs) costs the
//! stream thread about what a memcpy of them costs: ~9,300 instructions for 64 KiB, three
//! quarters of the stream's work per I/O. Made between a completion and its tag's
//! resubmission, as the loop used to, it left that slot empty meanwhile, and the queue depth
//! asked for was not the depth kept (docs/BENCHMARKS.md, "Keeping the queue depth"). Made
//! ahead, it overlaps the I/O in flight: the stream first has the queue start what it was just
//! given ([`Queue::commit`]), then stamps.
//!
//! Slots: the arena holds `depth + spares` slots ([`Layout::spares`]). Tag t's slot is
//! `slot_of[t]`; each of the others is a spare or holds a ready write's data. Placing a ready
//! write on a tag swaps: the tag takes the write's slot, its old slot becomes a spare. Reads,
//! trims and write-zeroes use the tag's slot as before. At most `spares` I/Os are ready, so a
//! spare is free whenever a write is drawn ahead.
//!
//! Not used where there is nothing to make or it cannot be made ahead (see [`applies`]): reads
//! only (their path stays as it was), a verified run (its draws lock granules per tag), the open
//! loop (an arrival is drawn when it is due) and a replay (its records are read as they go).
//! A fused queue (`mem:`) stamps during its own copy: its stream makes nothing ahead either
//! (its spares, allocated before the queue said so, stay unused).

use std::collections::VecDeque;

use super::layout::{stamp_at, Layout};
use super::state::{Fill, StreamState};
use crate::engine::{Op, Queue};
use crate::error::EngineError;
use crate::gen::{Generator, Planned};
use crate::spec::Workload;

/// Whether a closed-loop stream of `w` makes its writes ahead (the queue may still turn out to
/// be fused; its spares then stay unused).
pub(crate) fn applies(w: &Workload, verified: bool, replay: bool) -> bool {
    w.rate.is_none() && !verified && !replay && w.segments.iter().any(|s| s.read_pct < 100.0)
}

/// The I/Os drawn ahead and the slots their data is in.
pub(super) struct Ahead {
    /// Drawn and not yet sent, oldest first, with the slot a write's data was stamped into
    /// (`None` for the other ops).
    ready: VecDeque<(Planned, Option<usize>)>,
    /// Slots (byte offsets in the arena) that no tag and no ready write holds.
    spare: Vec<usize>,
    /// Each tag's slot.
    slot_of: Vec<usize>,
    /// Most I/Os ready at once (the layout's spares).
    most: usize,
}

impl Ahead {
    pub(super) fn new(lay: &Layout, depth: u32) -> Ahead {
        let d = depth as usize;
        Ahead {
            ready: VecDeque::with_capacity(lay.spares),
            spare: (d..d + lay.spares).map(|k| k * lay.slot).collect(),
            slot_of: (0..d).map(|t| t * lay.slot).collect(),
            most: lay.spares,
        }
    }

    /// Fewer than the most are ready.
    #[inline]
    pub(super) fn short(&self) -> bool {
        self.ready.len() < self.most
    }

    /// Draws I/Os until the most are ready, stamping each write into a spare slot.
    pub(super) fn refill(&mut self, gen: &mut Generator, f: &mut Fill<'_>) {
        while self.ready.len() < self.most {
            let p = gen.plan();
            let slot = (p.op == Op::Write).then(|| {
                let buf = self.spare.pop().expect("a spare slot per I/O not ready");
                // SAFETY: a spare slot is no tag's, so no I/O uses it; the pool is only read.
                unsafe { stamp_at(f.arena, f.lay, f.stamper, buf, p.offset, p.len, |_| 0) };
                buf
            });
            self.ready.push_back((p, slot));
        }
    }

    /// The next I/O for the free `tag` and the slot it uses: the oldest ready one (a write's
    /// slot becomes the tag's), or, when none is ready, one drawn now (a write stamped into the
    /// tag's slot, as the loop without spares does).
    #[inline]
    fn next(&mut self, tag: usize, gen: &mut Generator, f: &mut Fill<'_>) -> (Planned, usize) {
        let own = self.slot_of[tag];
        match self.ready.pop_front() {
            Some((p, Some(buf))) => {
                self.spare.push(own);
                self.slot_of[tag] = buf;
                (p, buf)
            }
            Some((p, None)) => (p, own),
            None => {
                let p = gen.plan();
                if p.op == Op::Write {
                    // SAFETY: the tag is free, so none of its I/O uses its slot.
                    unsafe { stamp_at(f.arena, f.lay, f.stamper, own, p.offset, p.len, |_| 0) };
                }
                (p, own)
            }
        }
    }
}

impl StreamState {
    /// [`prepare`](StreamState::prepare) from the I/Os made ahead: a flush when one is due,
    /// else the next ready I/O (or one drawn now when none is).
    #[inline]
    pub(super) fn prepare_ahead(
        &mut self,
        tag: u32,
        ahead: &mut Ahead,
        gen: &mut Generator,
        f: &mut Fill<'_>,
    ) {
        if self.flush_due(tag, f) {
            return;
        }
        let (p, buf) = ahead.next(tag as usize, gen, f);
        self.put(tag, p, buf);
    }
}

/// After the batch is sent: when I/Os are to be made ahead, the queue starts the batch first
/// (the stamping overlaps it), then the ready I/Os are refilled.
#[inline]
pub(super) fn make_ahead(
    ahead: &mut Ahead,
    q: &mut dyn Queue,
    gen: &mut Generator,
    f: &mut Fill<'_>,
) -> Result<(), EngineError> {
    if !ahead.short() {
        return Ok(());
    }
    q.commit()?;
    ahead.refill(gen, f);
    Ok(())
}
