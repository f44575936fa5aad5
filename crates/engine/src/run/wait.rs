//! What the open loop (run/open.rs) and a timed replay (run/replay.rs) do between issuing
//! arrivals, in one place: whether the stream must stop, and the wait for a completion or
//! the next arrival. With I/O in flight the stream waits in the engine's own wait
//! (`Queue::reap_until`: a ring's timed wait, a socket's poll), so that a completion wakes
//! it at once; with none it sleeps; either way it stops [`Spin::window_ns`] before the
//! arrival and spins the rest. A reaped batch is counted (or, reaped at or after the
//! window's end, retired uncounted, as in the closed loop).

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::spin::{Pass, Spin};
use super::state::{Fill, StreamCtx, StreamState};
use crate::engine::Queue;
use crate::error::EngineError;

/// Whether the stream must stop at `now` (the window's end, a failure elsewhere, a stop),
/// noting a stop's instant as the other loops do, and closing the stream's timeline.
pub(super) fn ends(s: &mut StreamState, ctx: &StreamCtx<'_>, now: u64) -> bool {
    let end_at = ctx.shared.end_at.load(Ordering::Relaxed);
    if now >= end_at
        || ctx.shared.abort.load(Ordering::Relaxed)
        || ctx.shared.stop.load(Ordering::Relaxed)
    {
        if now < end_at && ctx.shared.stop.load(Ordering::Relaxed) {
            ctx.shared.stopped_at.fetch_max(now, Ordering::Relaxed);
        }
        s.watch.close(ctx.ramp_ns, now.min(end_at));
        return true;
    }
    false
}

/// The set-up of a paced stream (the open loop, a timed replay), before its first pass: the
/// intended times cleared and a fresh spin. The kernel may defer a sleeping thread's wake-up
/// by its timer slack (50 µs by default) to batch timers: a paced stream wants its arrivals
/// on time, so its slack is set to 1 ns.
pub(super) fn start_paced(s: &mut StreamState) -> Spin {
    s.intended = vec![0; s.op.len()];
    // SAFETY: prctl with an integer argument changes only this thread's timer slack.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
    Spin::default()
}

/// One pass's wait, after the pass issued what was due.
pub(super) struct Wait {
    /// When the pass started and when it sent what it issued (ns on the run's clock).
    pub(super) top: u64,
    pub(super) now: u64,
    /// The next arrival (or the window's end).
    pub(super) next: u64,
    pub(super) issued: bool,
    /// An arrival is due and cannot go until an I/O completes (every slot busy, or an
    /// overlapping I/O in flight): wait a little past now, not on a deadline that has
    /// passed. Such a wait would never enter the kernel, and a ring that defers its
    /// completions' work (DEFER_TASKRUN) posts none without that: the stream spun at 0 IOPS.
    /// A socket's wait spins through the 50 µs.
    pub(super) held: bool,
}

/// How a wait ended.
pub(super) enum Waited {
    /// A batch completed and was counted at this instant.
    Counted(u64),
    /// A batch completed at or after the window's end (at this instant), retired uncounted.
    Retired(u64),
    /// Nothing completed; the wait ended at this instant.
    Idle(u64),
}

impl Waited {
    /// When the wait ended.
    pub(super) fn at(&self) -> u64 {
        match *self {
            Waited::Counted(t) | Waited::Retired(t) | Waited::Idle(t) => t,
        }
    }
}

/// How long past now a held arrival waits for a completion (then the pass comes round).
const HELD_WAIT_NS: u64 = 50_000;

/// Waits for a completion, or until shortly before the next arrival, whichever comes first;
/// counts what completed. A pass that reaped nothing ends here (its pacing judged).
pub(super) fn wait(
    s: &mut StreamState,
    q: &mut dyn Queue,
    f: &mut Fill<'_>,
    ctx: &StreamCtx<'_>,
    t0: Instant,
    spin: &mut Spin,
    w: Wait,
) -> Result<Waited, EngineError> {
    let wake_ns = w.next.saturating_sub(spin.window_ns());
    let waits = wake_ns > w.now;
    let mut ended = w.now;
    if s.inflight > 0 {
        s.done.clear();
        let until = if w.held {
            w.now + HELD_WAIT_NS
        } else {
            wake_ns.max(w.now)
        };
        q.reap_until(t0 + Duration::from_nanos(until), &mut s.done)?;
        let after = t0.elapsed().as_nanos() as u64;
        if !s.done.is_empty() {
            s.reaped(ctx, &*q);
            if after >= ctx.shared.end_at.load(Ordering::Relaxed) {
                // Reaped at or after the window's end (the wait returned late): outside the
                // window, as in the closed loop; the loop's top ends the stream.
                s.retire_uncounted(f.lay, f.arena)?;
                return Ok(Waited::Retired(after));
            }
            s.count(after, ctx, f.lay, f.arena)?;
            return Ok(Waited::Counted(after));
        }
        if waits {
            spin.observe(wake_ns, after);
        }
        ended = after;
    } else if waits {
        std::thread::sleep(Duration::from_nanos(wake_ns - w.now));
        ended = t0.elapsed().as_nanos() as u64;
        spin.observe(wake_ns, ended);
    }
    let pass = Pass {
        top: w.top,
        now: w.now,
        next: w.next,
        waits,
        issued: w.issued,
    };
    s.pacing.end(pass, ctx.ramp_ns);
    std::hint::spin_loop();
    Ok(Waited::Idle(ended))
}
