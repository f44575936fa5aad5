//! The open loop (`--rate`): I/Os are issued at their intended times from a fixed schedule
//! ([`Pacer`]), whatever the target does; `qd` only caps what is outstanding, and an I/O held
//! back by the cap keeps its intended time, so the wait counts. Each completion is measured
//! three ways: response time from the intended time (the headline), service time from the
//! actual submission, and the issue lag between the two.
//!
//! Waiting (run/wait.rs, shared with a timed replay): until shortly before the next arrival
//! the stream sleeps, with I/O in flight in the engine's own wait (`Queue::reap_until`: a
//! ring's timed wait, a socket's poll), so that a completion wakes it at once and a server on
//! the same cores gets them; the last stretch before an arrival is spun, as long as the wake-ups this stream sees are late ([`Spin`](super::spin::Spin)).
//! The spin's time inside the window is counted ([`Pacing`]: `StreamState::pacing`, the
//! result's `pacing_cpu_s`), and the CPU efficiency figures leave it out.

use std::time::Instant;

use super::pacer::Pacer;
use super::state::{Fill, StreamCtx, StreamState};
use super::wait::{ends, start_paced, wait, Wait, Waited};
use crate::engine::Queue;
use crate::error::EngineError;
use crate::gen::Generator;

pub(super) fn drive(
    s: &mut StreamState,
    q: &mut dyn Queue,
    gen: &mut Generator,
    f: &mut Fill<'_>,
    ctx: &StreamCtx<'_>,
    t0: Instant,
    rate: f64,
) -> Result<u64, EngineError> {
    let w = ctx.workload;
    let per_stream = rate / w.workers as f64;
    // Worker k of n starts k/n of a gap late, so fixed arrivals of the workers interleave.
    let start = (1e9 / per_stream * ctx.worker as f64 / w.workers as f64) as u64;
    let seed = ctx.seed ^ ((ctx.worker as u64) << 32) ^ ((ctx.target_idx as u64) << 48);
    let mut pacer = Pacer::new(w.arrival, per_stream, start, seed);
    let mut spin = start_paced(s);
    // Just after the last batch counted (0: none), as the closed loop returns it.
    let mut counted_below = 0;
    loop {
        let now = t0.elapsed().as_nanos() as u64;
        s.pacing.start(now);
        let top = now;
        if ends(s, ctx, now) {
            return Ok(counted_below);
        }
        s.batch.clear();
        // Every arrival that is due, while the cap allows; late ones go at once.
        while pacer.next_ns() <= now {
            let Some(tag) = s.free.pop() else { break };
            if s.prepare(tag, gen, f)? {
                let at = pacer.take();
                s.intended[tag as usize] = at;
                s.watch.arrival(at, ctx.ramp_ns);
            }
        }
        let issued = !s.batch.is_empty();
        s.send(q, ctx, f, t0.elapsed().as_nanos() as u64)?;
        let next = pacer.next_ns().min(ctx.end_ns);
        let now = t0.elapsed().as_nanos() as u64;
        // Every slot busy and the next arrival (nearly) due: only a completion lets it go.
        let held = s.free.is_empty() && next <= now + spin.window_ns();
        let w = Wait {
            top,
            now,
            next,
            issued,
            held,
        };
        if let Waited::Counted(after) = wait(s, q, f, ctx, t0, &mut spin, w)? {
            counted_below = after + 1;
        }
    }
}
