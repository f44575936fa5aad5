//! One (worker, target) stream: keeps `qd` I/Os in flight on its own [`Queue`] and records
//! every completion inside the window.
//!
//! Timing: the clock is read twice per loop iteration. Once when a batch is built and stamped,
//! just before it is handed to the queue (its I/Os' submission time: latency excludes the
//! generator's own work on the batch, as fio's `clat` does), and once right after `reap` returns
//! (the completion time of the whole batch reaped). Only I/Os that complete inside the measured
//! window `[start + ramp, start + ramp + time)` are counted.
//!
//! Data: every tag owns one slot of the arena, used by its read or its write (one I/O per tag at
//! a time, so no two in-flight I/Os share bytes); writes are filled by the stream's
//! [`Stamper`] from a random pool at the arena's end just before submission; a queue that
//! moves the bytes itself ([`Queue::fuses_data`], `mem:`) gets the stamper instead and writes
//! the stamped data straight to the target, and checks verified reads while it copies them
//! (run/fused.rs).
//!
//! Verification (`--verify`): each I/O locks its granules in the target's generation map when
//! it is drawn (a draw that collides with an in-flight I/O of the run is redrawn, so the depth
//! stays), a write stamps the granules' next generations, and every completion is settled in
//! [`StreamState::settle`]: a write stores its generations (EITHER when it failed), a read is
//! checked against the cells it locked. Completions outside the window are settled too.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use sanbench_io::params::{LAST_FAILURE, TRIM_READS_ZEROS};

use super::ahead::{make_ahead, Ahead};
use super::clock::Clock;
use super::layout::Layout;
use super::shared::OutliveWindow;
use super::state::{Fill, StreamCtx, StreamState};
use super::stream_verify::StreamVerify;
use super::{RunError, StreamOut};
use crate::arena::Arena;
use crate::engine::{Queue, QueueConfig};
use crate::error::EngineError;
use crate::gen::Generator;
use crate::stamp::{fill_pool, Stamper};

/// Pins the calling thread to `cpu` (nothing for `None`).
fn pin(cpu: Option<usize>) -> Result<(), EngineError> {
    let Some(cpu) = cpu else { return Ok(()) };
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    rustix::thread::sched_setaffinity(None, &set)
        .map_err(|e| EngineError::Invalid(format!("cannot run a stream on CPU {cpu}: {e}")))
}

pub(super) fn stream(ctx: StreamCtx<'_>) -> Option<StreamOut> {
    // Declared first, dropped last: after the queue is closed, on every return path.
    let _outlive = OutliveWindow(ctx.shared.clone());
    let w = ctx.workload;
    let depth = w.qd;
    // Writes made ahead need spare slots, allocated with the arena before the queue opens.
    let ahead = super::ahead::applies(w, ctx.verify.is_some(), ctx.replay.is_some());
    let lay = Layout::of(w, depth);
    let spares = if ahead { lay.ahead_spares(depth) } else { 0 };
    let lay = lay.with_spares(spares);
    let arena = Arc::new(Arena::new(lay.total));
    arena.fill_random(ctx.seed ^ ((ctx.worker as u64) << 20) ^ ctx.target_idx as u64 ^ ctx.run_id);
    // The write pool is the run's (the same in every stream): a reader recomputes any unit's
    // payload from its stamp and the run id alone.
    // SAFETY: the arena is not shared with any engine yet.
    fill_pool(
        unsafe { arena.slice_mut(lay.pool_base, lay.pool_len) },
        ctx.run_id,
    );
    let info = ctx.target.info();
    let uri = info.uri.clone();
    let fail = |e: EngineError| {
        ctx.shared.fail(RunError {
            target: uri.clone(),
            worker: ctx.worker,
            error: e,
        })
    };
    let cfg = QueueConfig {
        worker: ctx.worker,
        depth,
        max_len: w.max_bs() as u32,
        arena: arena.clone(),
        io_timeout: ctx.io_timeout,
        socket_ring: None,
    };
    // A queue that fails to open is reported before the first barrier, so the coordinator
    // knows at the barrier (and tells the other processes of a synchronized run). A pinned
    // stream moves to its CPU first: what the queue starts (io-wq workers) inherits it.
    let queue = pin(ctx.cpu)
        .and_then(|()| ctx.target.open_queue(&cfg))
        .map_err(&fail);
    // The rest of the stream's state is made before the clock starts too: its statistics
    // alone (twelve latency histograms) take 1-1.5 ms, which the window's first I/Os waited
    // for when they were made after (an open loop's first arrivals that late).
    let mut gen = Generator::new(
        w,
        ctx.span,
        info.block_size as u64,
        ctx.worker as u32,
        ctx.seed ^ ((ctx.target_idx as u64) << 48),
    );
    let mut stamper = Stamper::new(&ctx.data, ctx.run_id, ctx.worker as u32);
    let mut s = StreamState::new(depth, w.time, !super::snapshot::Seconds::fit(ctx.iv_ns));
    s.iv_next = ctx.ramp_ns.saturating_add(ctx.iv_ns);
    s.flush_every = w.flush_every;
    if w.has_trims() || w.has_write_zeroes() {
        s.discards = Some(Box::default());
    }
    s.apart = w.flush_every > 0 || s.discards.is_some();
    s.presize_paths(super::interval::path_count(info));
    if ctx.raw_latencies {
        s.raw = Some(Vec::new());
    }
    if let Some(v) = &ctx.verify {
        stamper = stamper.with_unit(v.unit as usize);
        let mut sv = StreamVerify::new(v, depth, w.flush_every);
        sv.trim_zeros = info.params.get(TRIM_READS_ZEROS) == Some(&serde_json::Value::Bool(true));
        s.verify = Some(sv);
    }
    // A replay's trace opens before the clock starts too, and an error in it fails the run
    // as a queue that does not open does.
    let mut feed = match (ctx.replay, &queue) {
        (Some(r), Ok(_)) => super::replay::Feed::open(r, ctx.span, info.block_size as u64, depth)
            .map(Some)
            .map_err(&fail),
        _ => Ok(None),
    };
    ctx.barrier.wait();
    ctx.barrier.wait();
    let Ok(mut queue) = queue else {
        return None;
    };
    if feed.is_err() {
        return None;
    }
    if ctx.shared.abort.load(Ordering::Relaxed) {
        return None;
    }
    let t0 = *ctx.shared.start.get()?;
    let clock = ctx.shared.clock.get()?.clone();
    // A queue over several paths says which carried each completion (asked once here: it
    // answers for any tag of its depth).
    s.per_path = queue.completed_on(0).is_some();
    let mut fill = Fill {
        stamper: &mut stamper,
        lay: &lay,
        arena: &arena,
        // A fused engine checks reads in its copy, which knows no discard states: not when
        // this workload discards, nor when an earlier one of the verifier did (a comparison
        // keeps one verifier per target across its cells).
        fused: queue.fuses_data()
            && !ctx
                .verify
                .as_ref()
                .is_some_and(|v| w.has_trims() || w.has_write_zeroes() || v.map.has_discards()),
    };
    let driven = match (feed.as_mut().ok().and_then(Option::as_mut), w.rate) {
        (Some(feed), None) => {
            super::replay::afap(&mut s, &mut *queue, feed, &mut fill, &ctx, &*clock)
        }
        (Some(feed), Some(_)) => {
            super::replay::timed(&mut s, &mut *queue, feed, &mut fill, &ctx, t0)
        }
        (None, None) => {
            // A fused queue stamps during its own copy: nothing to make ahead.
            let (q, g, f) = (&mut *queue, &mut gen, &mut fill);
            if ahead && !f.fused {
                drive(&mut s, q, g, f, &ctx, &*clock, &mut Ahead::new(&lay, depth))
            } else {
                drive(&mut s, q, g, f, &ctx, &*clock, &mut Drawn)
            }
        }
        (None, Some(rate)) => {
            super::open::drive(&mut s, &mut *queue, &mut gen, &mut fill, &ctx, t0, rate)
        }
    };
    if let Ok(below) = driven {
        ctx.shared.counted_below.fetch_max(below, Ordering::Relaxed);
    }
    let result = driven
        .and_then(|_| s.drain(&mut *queue, &lay, &arena))
        .and_then(|_| queue.close());
    if result.is_err() {
        s.abandon();
    }
    ctx.live.inflight.store(0, Ordering::Relaxed);
    // The last interval (the coordinator knows where the window ended).
    s.hand_over(&ctx, u64::MAX);
    if let Err(e) = result {
        // I/O may still be in flight on a failed queue and waiting for it could take another
        // timeout: keep its buffers alive for the rest of the process instead.
        std::mem::forget(arena);
        fail(with_device_detail(e, &queue.stats()));
        return None;
    }
    Some(StreamOut {
        target: ctx.target_idx,
        series: s.series,
        timeline: s.watch.tl,
        stats: queue.stats(),
        verify: s.verify.map(|v| v.rep),
        raw: s.raw,
        pacing_ns: s.pacing.ns,
        replay: feed.ok().flatten().map(|f| f.run),
    })
}

/// The closed loop: every free tag gets an I/O from `next` at once, then one reap waits for at
/// least one completion. Returns an instant just after the last batch counted (0: none).
fn drive<N: Next>(
    s: &mut StreamState,
    q: &mut dyn Queue,
    gen: &mut Generator,
    f: &mut Fill<'_>,
    ctx: &StreamCtx<'_>,
    clock: &dyn Clock,
    next: &mut N,
) -> Result<u64, EngineError> {
    let mut counted_below = 0;
    loop {
        s.batch.clear();
        next.batch(s, gen, f)?;
        s.send(q, ctx, f, clock.now_ns())?;
        next.sent(q, gen, f)?;
        s.done.clear();
        q.reap(1, &mut s.done)?;
        let now = clock.now_ns();
        s.reaped(ctx, q);
        if now >= ctx.shared.end_at.load(Ordering::Relaxed)
            || ctx.shared.abort.load(Ordering::Relaxed)
            || ctx.shared.stop.load(Ordering::Relaxed)
        {
            if now < ctx.shared.end_at.load(Ordering::Relaxed)
                && ctx.shared.stop.load(Ordering::Relaxed)
            {
                ctx.shared.stopped_at.fetch_max(now, Ordering::Relaxed);
            }
            // A span without completions that reaches the end ends there.
            s.watch.close(
                ctx.ramp_ns,
                now.min(ctx.shared.end_at.load(Ordering::Relaxed)),
            );
            // Completions at or after the end are outside the window.
            s.retire_uncounted(f.lay, f.arena)?;
            return Ok(counted_below);
        }
        s.count(now, ctx, f.lay, f.arena)?;
        counted_below = now + 1;
    }
}

/// Where the closed loop's I/Os come from: one loop, compiled once per source, so that the
/// plain source's loop is the one it was before writes were made ahead.
trait Next {
    /// Puts an I/O on every free tag.
    fn batch(
        &mut self,
        s: &mut StreamState,
        gen: &mut Generator,
        f: &mut Fill<'_>,
    ) -> Result<(), EngineError>;
    /// After the batch is sent (nothing, unless I/Os are made ahead).
    #[inline(always)]
    fn sent(
        &mut self,
        _q: &mut dyn Queue,
        _gen: &mut Generator,
        _f: &mut Fill<'_>,
    ) -> Result<(), EngineError> {
        Ok(())
    }
}

/// Each I/O drawn (and its write stamped) when its tag is free.
struct Drawn;

impl Next for Drawn {
    #[inline(always)]
    fn batch(
        &mut self,
        s: &mut StreamState,
        gen: &mut Generator,
        f: &mut Fill<'_>,
    ) -> Result<(), EngineError> {
        while let Some(tag) = s.free.pop() {
            s.prepare(tag, gen, f)?;
        }
        Ok(())
    }
}

/// The I/Os made ahead (run/ahead.rs): taken when a tag is free, the next ones made while
/// the batch is in flight.
impl Next for Ahead {
    #[inline(always)]
    fn batch(
        &mut self,
        s: &mut StreamState,
        gen: &mut Generator,
        f: &mut Fill<'_>,
    ) -> Result<(), EngineError> {
        while let Some(tag) = s.free.pop() {
            s.prepare_ahead(tag, self, gen, f);
        }
        Ok(())
    }

    #[inline(always)]
    fn sent(
        &mut self,
        q: &mut dyn Queue,
        gen: &mut Generator,
        f: &mut Fill<'_>,
    ) -> Result<(), EngineError> {
        make_ahead(self, q, gen, f)
    }
}

/// A failed I/O's error with what the device said of the queue's last failure, where the
/// engine kept it (a passthrough engine's decoded sense or NVMe status): the errno alone
/// does not tell an unrecovered read error from a target that refused the command.
fn with_device_detail(
    e: EngineError,
    stats: &std::collections::BTreeMap<String, serde_json::Value>,
) -> EngineError {
    match (e, stats.get(LAST_FAILURE).and_then(|v| v.as_str())) {
        (EngineError::Io { op, offset, source }, Some(why)) => EngineError::Io {
            op,
            offset,
            source: std::io::Error::new(
                source.kind(),
                format!("{source} (the device's last failure: {why})"),
            ),
        },
        (e, _) => e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_ios_error_quotes_the_devices_last_failure() {
        let io = || EngineError::Io {
            op: "read",
            offset: 4096,
            source: std::io::Error::from_raw_os_error(libc::EIO),
        };
        let mut stats = std::collections::BTreeMap::new();
        // Nothing kept: the error as it was.
        assert_eq!(
            with_device_detail(io(), &stats).to_string(),
            io().to_string()
        );
        stats.insert(
            LAST_FAILURE.to_string(),
            "read at offset 4096: CHECK CONDITION (0x02): MEDIUM ERROR".into(),
        );
        let e = with_device_detail(io(), &stats).to_string();
        assert!(
            e.starts_with("read at offset 4096 failed: ") && e.contains("MEDIUM ERROR"),
            "{e}"
        );
        // Other errors are not about one I/O.
        let t = EngineError::Timeout {
            peer: "sg".into(),
            secs: 1.0,
        };
        assert!(!with_device_detail(t, &stats).to_string().contains("MEDIUM"));
    }
}
