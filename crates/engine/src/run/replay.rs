//! A replaying stream's two loops (crate::replay): timed, each record issued at its trace
//! time over `speed` with the open loop's accounting (run/open.rs: the intended time kept
//! when the I/O is late or held by the depth, response time and issue lag measured from
//! it), and as fast as possible, `qd` in flight as the closed loop keeps them. Both end when
//! the trace is done and its last I/O has completed; the last stream to end ends the window
//! there (`Shared::replay_done`), so a replay's window is the replay, not the time limit.

use std::sync::atomic::Ordering;
use std::time::Instant;

use sanbench_trace::map::Mapping;

use super::clock::Clock;
use super::state::{Fill, StreamCtx, StreamState};
use super::wait::{ends, start_paced, wait, Wait, Waited};
use crate::engine::{Op, Queue};
use crate::error::EngineError;
use crate::gen::Planned;
use crate::replay::{
    digest_add, Records, Replay, ReplayRun, TraceOp, TraceRecord, LATE_HOST, LATE_NS, LATE_OVERLAP,
    LATE_QD,
};

/// One stream's reader of the trace: its records one at a time, placed and timed.
pub(super) struct Feed {
    recs: Records,
    map: Mapping,
    speed: f64,
    /// The first record's trace time (the replay's origin).
    origin: Option<u64>,
    next: Option<(TraceRecord, u64)>,
    /// The last intended time handed out: a record timed before its predecessor goes at
    /// the predecessor's time (the schedule never runs backwards).
    last_at: u64,
    /// The next record was already counted as held by the depth.
    held: bool,
    /// The next record was already counted as held by an overlapping I/O (verified).
    overlapped: bool,
    /// Records due before these times (ns) found every slot busy, or an overlapping I/O in
    /// flight, while the stream was running: what held them, if they are late (0: none yet).
    qd_until: u64,
    overlap_until: u64,
    done: bool,
    max_len: u32,
    pub(super) run: ReplayRun,
}

impl Feed {
    pub(super) fn open(r: &Replay, span: u64, block: u64, qd: u32) -> Result<Feed, EngineError> {
        let map = Mapping::new(r.map, &r.summary, span, block).map_err(EngineError::Invalid)?;
        Ok(Feed {
            recs: r.source.open()?,
            map,
            speed: r.speed,
            origin: None,
            next: None,
            last_at: 0,
            held: false,
            overlapped: false,
            qd_until: 0,
            overlap_until: 0,
            done: false,
            max_len: r.summary.max_len,
            run: ReplayRun::new(r, qd),
        })
    }

    /// The intended time (ns on the run's clock) of the next record; `None` once the trace
    /// is done.
    #[inline]
    pub(super) fn peek(&mut self) -> Result<Option<u64>, EngineError> {
        if let Some((_, at)) = self.next {
            return Ok(Some(at));
        }
        if self.done {
            return Ok(None);
        }
        let Some(rec) = self.recs.next() else {
            self.done = true;
            return Ok(None);
        };
        let rec =
            rec.map_err(|e| EngineError::Invalid(format!("trace {}: {e}", self.run.trace)))?;
        // The file changed since it was scanned: its slots were sized for the scan's largest.
        if rec.len > self.max_len {
            return Err(EngineError::Invalid(format!(
                "trace {}: an I/O of {} bytes, larger than the largest the scan before the replay found ({}): did the file change?",
                self.run.trace, rec.len, self.max_len
            )));
        }
        let origin = *self.origin.get_or_insert(rec.time_ns);
        let at = (rec.time_ns.saturating_sub(origin) as f64 / self.speed) as u64;
        let at = at.max(self.last_at);
        self.last_at = at;
        self.next = Some((rec, at));
        Ok(Some(at))
    }

    /// The I/O of the record [`peek`](Self::peek) saw, placed on the target, not yet taken.
    #[inline]
    fn planned(&self) -> Planned {
        let (rec, _) = self
            .next
            .as_ref()
            .expect("planned after a peek that found a record");
        let op = match rec.op {
            TraceOp::Read => Op::Read,
            TraceOp::Write => Op::Write,
            TraceOp::Trim => Op::Trim,
        };
        Planned {
            op,
            offset: self.map.apply(rec.offset, rec.len),
            len: rec.len,
            fua: false,
        }
    }

    /// Takes the record [`peek`](Self::peek) saw, placed on the target, and its intended time.
    #[inline]
    pub(super) fn take(&mut self) -> (Planned, u64) {
        let p = self.planned();
        let (rec, at) = self
            .next
            .take()
            .expect("take after a peek that found a record");
        self.held = false;
        self.overlapped = false;
        let i = rec.op.index();
        self.run.ops[i] += 1;
        self.run.bytes[i] += rec.len as u64;
        self.run.digest = digest_add(self.run.digest, rec.op, p.offset, rec.len);
        (p, at)
    }

    /// Under verification, takes the next record on the free `tag` if no I/O in flight
    /// overlaps it; else gives the tag back and counts the record as held (once).
    #[inline]
    fn take_locked(&mut self, s: &mut StreamState, tag: u32) -> Option<(Planned, u64)> {
        if !s.lock_replayed(tag, &self.planned()) {
            s.free.push(tag);
            if !self.overlapped {
                self.overlapped = true;
                self.run.held_by_overlap += 1;
            }
            return None;
        }
        Some(self.take())
    }

    /// A batch went to the queue at `at`.
    #[inline]
    fn sent(&mut self, at: u64) {
        self.run.first_submit_ns.get_or_insert(at);
        self.run.last_submit_ns = at;
    }

    /// Timed: the batch of `s` went to the queue at `at`; counts its late I/Os by what held
    /// them (an overlapping I/O, the slots, else this host).
    #[inline]
    fn sent_timed(&mut self, s: &StreamState, at: u64) {
        self.sent(at);
        for io in &s.batch {
            let due = s.intended[io.tag as usize];
            if at.saturating_sub(due) > LATE_NS {
                let cause = if due < self.overlap_until {
                    LATE_OVERLAP
                } else if due < self.qd_until {
                    LATE_QD
                } else {
                    LATE_HOST
                };
                self.run.late[cause] += 1;
            }
        }
    }

    /// The next record is due at `now` and every slot is busy.
    #[inline]
    fn hold(&mut self, now: u64) {
        self.qd_until = now + 1;
        if !self.held {
            self.held = true;
            self.run.held_by_qd += 1;
        }
    }

    /// A wait for a slot (`blocked`: for an overlapping I/O to complete) ended at `now`:
    /// whatever was due until then was held by it.
    #[inline]
    fn held_until(&mut self, blocked: bool, now: u64) {
        if blocked {
            self.overlap_until = now + 1;
        } else {
            self.qd_until = now + 1;
        }
    }
}

/// A record's granules stay locked with nothing of this stream in flight: another stream
/// holds them (the target's verifier is shared), which a replay cannot wait out.
fn stuck() -> EngineError {
    EngineError::Invalid(
        "--verify: a replayed I/O overlaps one that another stream of this target keeps in flight; \
         a verified replay needs the target to itself"
            .into(),
    )
}

/// The trace is done and nothing is in flight: this stream's replay is over at `now`.
fn finish(s: &mut StreamState, feed: &mut Feed, ctx: &StreamCtx<'_>, now: u64) {
    feed.run.complete = true;
    s.watch.close(
        ctx.ramp_ns,
        now.min(ctx.shared.end_at.load(Ordering::Relaxed)),
    );
    ctx.shared.replay_done(now);
}

/// As fast as possible: every free slot gets the next record, then one reap waits for a
/// completion. Returns an instant just after the last batch counted (0: none).
pub(super) fn afap(
    s: &mut StreamState,
    q: &mut dyn Queue,
    feed: &mut Feed,
    f: &mut Fill<'_>,
    ctx: &StreamCtx<'_>,
    clock: &dyn Clock,
) -> Result<u64, EngineError> {
    let mut counted_below = 0;
    loop {
        s.batch.clear();
        let mut blocked = false;
        while feed.peek()?.is_some() {
            let Some(tag) = s.free.pop() else { break };
            let Some((p, _)) = feed.take_locked(s, tag) else {
                blocked = true;
                break;
            };
            s.place(tag, p, f);
        }
        let now = clock.now_ns();
        if !s.batch.is_empty() {
            s.send(q, ctx, f, now)?;
            feed.sent(now);
        } else if s.inflight == 0 {
            if blocked {
                return Err(stuck());
            }
            finish(s, feed, ctx, now);
            return Ok(counted_below);
        }
        s.done.clear();
        q.reap(1, &mut s.done)?;
        let now = clock.now_ns();
        s.reaped(ctx, q);
        if ends(s, ctx, now) {
            s.retire_uncounted(f.lay, f.arena)?;
            return Ok(counted_below);
        }
        s.count(now, ctx, f.lay, f.arena)?;
        counted_below = now + 1;
    }
}

/// Timed: each record at its intended time, late ones at once, the depth only capping what
/// is in flight. Waits as the open loop does (run/wait.rs): in the engine's own wait while
/// I/O is in flight, spinning the last stretch before an arrival.
pub(super) fn timed(
    s: &mut StreamState,
    q: &mut dyn Queue,
    feed: &mut Feed,
    f: &mut Fill<'_>,
    ctx: &StreamCtx<'_>,
    t0: Instant,
) -> Result<u64, EngineError> {
    let mut spin = start_paced(s);
    let mut counted_below = 0;
    loop {
        let now = t0.elapsed().as_nanos() as u64;
        s.pacing.start(now);
        let top = now;
        if ends(s, ctx, now) {
            return Ok(counted_below);
        }
        s.batch.clear();
        let mut blocked = false;
        while let Some(at) = feed.peek()? {
            if at > now {
                break;
            }
            let Some(tag) = s.free.pop() else {
                feed.hold(now);
                break;
            };
            let Some((p, at)) = feed.take_locked(s, tag) else {
                feed.held_until(true, now);
                blocked = true;
                break;
            };
            s.place(tag, p, f);
            s.intended[tag as usize] = at;
            s.watch.arrival(at, ctx.ramp_ns);
        }
        let issued = !s.batch.is_empty();
        if issued {
            let at = t0.elapsed().as_nanos() as u64;
            s.send(q, ctx, f, at)?;
            feed.sent_timed(s, at);
        }
        let upcoming = feed.peek()?;
        if blocked && s.inflight == 0 {
            return Err(stuck());
        }
        if upcoming.is_none() && s.inflight == 0 {
            finish(s, feed, ctx, t0.elapsed().as_nanos() as u64);
            return Ok(counted_below);
        }
        let next = upcoming.unwrap_or(u64::MAX).min(ctx.end_ns);
        let now = t0.elapsed().as_nanos() as u64;
        // A record is due and every slot is busy, or it overlaps an I/O in flight
        // (verified): only a completion lets it go.
        let held = (s.free.is_empty() || blocked) && upcoming.is_some_and(|at| at <= now);
        let w = Wait {
            top,
            now,
            next,
            issued,
            held,
        };
        let waited = wait(s, q, f, ctx, t0, &mut spin, w)?;
        if held {
            feed.held_until(blocked, waited.at());
        }
        if let Waited::Counted(after) = waited {
            counted_below = after + 1;
        }
    }
}
