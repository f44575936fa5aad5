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
//! [`Stamper`] from a random pool at the arena's end just before submission.
//!
//! Verification (`--verify`): each I/O locks its granules in the target's generation map when
//! it is drawn (a draw that collides with an in-flight I/O of the run is redrawn, so the depth
//! stays), a write stamps the granules' next generations, and every completion is settled in
//! [`StreamState::settle`]: a write stores its generations (EITHER when it failed), a read is
//! checked against the cells it locked. Completions outside the window are settled too.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use super::shared::{Live, OutliveWindow, Shared};
use super::{DirStats, RunError, Second, StreamOut};
use crate::arena::{Arena, ALIGN};
use crate::engine::{Completion, Io, Op, Queue, QueueConfig, Target};
use crate::error::EngineError;
use crate::gen::Generator;
use crate::spec::Workload;
use crate::stamp::{fill_pool, DataSpec, Stamper, POOL, UNIT};
use crate::verify::map::next_gen;
use crate::verify::{Checker, Verifier, VerifyReport};

pub(super) struct StreamCtx<'a> {
    pub(super) worker: usize,
    pub(super) target_idx: usize,
    pub(super) target: Arc<dyn Target>,
    pub(super) workload: &'a Workload,
    pub(super) data: DataSpec,
    pub(super) run_id: u64,
    pub(super) span: u64,
    pub(super) seed: u64,
    pub(super) io_timeout: Duration,
    pub(super) ramp_ns: u64,
    pub(super) end_ns: u64,
    pub(super) barrier: Arc<Barrier>,
    pub(super) shared: Arc<Shared>,
    pub(super) live: Arc<Live>,
    pub(super) verify: Option<Arc<Verifier>>,
}

/// Arena layout of one stream: a private slot per tag, then the random pool writes draw from.
pub(crate) struct Layout {
    pub(crate) slot: usize,
    pub(crate) pool_base: usize,
    pub(crate) pool_len: usize,
    pub(crate) total: usize,
}

impl Layout {
    pub(crate) fn new(max_read: u64, max_write: u64, depth: u32) -> Layout {
        let slot = (max_read.max(max_write) as usize).next_multiple_of(ALIGN);
        let pool_base = slot * depth as usize;
        let pool_len = if max_write > 0 { POOL + UNIT } else { 0 };
        Layout {
            slot,
            pool_base,
            pool_len,
            total: pool_base + pool_len,
        }
    }

    fn of(w: &Workload, depth: u32) -> Layout {
        let max = |read: bool| {
            w.segments
                .iter()
                .filter(|s| {
                    if read {
                        s.read_pct > 0.0
                    } else {
                        s.read_pct < 100.0
                    }
                })
                .map(|s| if read { s.read_bs } else { s.write_bs })
                .max()
                .unwrap_or(0)
        };
        Layout::new(max(true), max(false), depth)
    }
}

/// Fills the write slot of `tag` for a write of `len` bytes at `offset`.
///
/// # Safety
/// No I/O of `tag` may be in flight (the slot is the tag's alone) and the pool is only read.
pub(crate) unsafe fn stamp_slot(
    arena: &Arena,
    lay: &Layout,
    stamper: &mut Stamper,
    tag: usize,
    offset: u64,
    len: u32,
    gen: impl Fn(u64) -> u32,
) -> usize {
    let buf = tag * lay.slot;
    // SAFETY: the caller guarantees the slot is idle; the pool region is never written after
    // the arena was filled, so shared reads of it are sound.
    let (dst, pool) = unsafe {
        (
            arena.slice_mut(buf, len as usize),
            arena.slice(lay.pool_base, lay.pool_len),
        )
    };
    stamper.fill_gen(dst, offset, pool, gen);
    buf
}

pub(super) fn stream(ctx: StreamCtx<'_>) -> Option<StreamOut> {
    // Declared first, dropped last: after the queue is closed, on every return path.
    let _outlive = OutliveWindow(ctx.shared.clone());
    let w = ctx.workload;
    let depth = w.qd;
    let lay = Layout::of(w, depth);
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
    };
    let queue = ctx.target.open_queue(&cfg);
    ctx.barrier.wait();
    ctx.barrier.wait();
    let mut queue = match queue {
        Ok(q) => q,
        Err(e) => {
            fail(e);
            return None;
        }
    };
    if ctx.shared.abort.load(Ordering::Relaxed) {
        return None;
    }
    let t0 = *ctx.shared.start.get()?;
    let mut gen = Generator::new(
        w,
        ctx.span,
        info.block_size as u64,
        ctx.worker as u32,
        ctx.seed ^ ((ctx.target_idx as u64) << 48),
    );
    let mut stamper = Stamper::new(&ctx.data, ctx.run_id, ctx.worker as u32);
    let mut s = StreamState::new(depth, w.time);
    s.flush_every = w.flush_every;
    if let Some(v) = &ctx.verify {
        stamper = stamper.with_unit(v.unit as usize);
        s.verify = Some(StreamVerify {
            v: v.clone(),
            checker: v.checker(true),
            rep: VerifyReport::default(),
            cells: vec![Vec::new(); depth as usize],
            shift: v.granule().trailing_zeros(),
            track_durable: v.map.tracks_durable() && w.flush_every > 0,
            pending: Vec::new(),
            pending_gens: Vec::new(),
            covers: vec![(Vec::new(), Vec::new()); depth as usize],
        });
    }
    let result = s
        .drive(&mut *queue, &mut gen, &mut stamper, &ctx, t0, &lay, &arena)
        .and_then(|_| s.drain(&mut *queue, &lay, &arena))
        .and_then(|_| queue.close());
    if result.is_err() {
        s.abandon();
    }
    ctx.live.inflight.store(0, Ordering::Relaxed);
    if let Err(e) = result {
        // I/O may still be in flight on a failed queue and waiting for it could take another
        // timeout: keep its buffers alive for the rest of the process instead.
        std::mem::forget(arena);
        fail(e);
        return None;
    }
    Some(StreamOut {
        target: ctx.target_idx,
        read: s.read,
        write: s.write,
        flush: s.flush,
        series: s.series,
        stats: queue.stats(),
        verify: s.verify.map(|v| v.rep),
    })
}

/// A stream's share of the verification: its checker, what it found, and the map cells each
/// tag's I/O locked (for a write, the generations it writes).
struct StreamVerify {
    v: Arc<Verifier>,
    checker: Checker,
    rep: VerifyReport,
    cells: Vec<Vec<u8>>,
    shift: u32,
    /// With a state file and flushes: writes completed since the last flush was sent (range
    /// and where its generations start in `pending_gens`), and per flush tag what it covers.
    track_durable: bool,
    pending: Vec<Written>,
    pending_gens: Vec<u8>,
    covers: Vec<(Vec<Written>, Vec<u8>)>,
}

/// A completed write awaiting a flush: offset, length, and where its generations start.
type Written = (u64, u64, usize);

impl StreamVerify {
    /// A flush is being sent on tag `t`: it covers every write completed so far.
    fn flush_sent(&mut self, t: usize) {
        if self.track_durable {
            let c = &mut self.covers[t];
            c.0.clear();
            c.1.clear();
            std::mem::swap(&mut c.0, &mut self.pending);
            std::mem::swap(&mut c.1, &mut self.pending_gens);
        }
    }

    /// The flush on tag `t` completed: what it covered is durable (the checkpoint).
    fn flush_done(&mut self, t: usize, ok: bool) {
        if !self.track_durable || !ok {
            return;
        }
        let (ranges, gens) = &self.covers[t];
        for &(off, len, at) in ranges {
            self.v.map.set_durable(off, len, &gens[at..]);
        }
        self.v.map.sync_durable();
    }
}

struct StreamState {
    free: Vec<u32>,
    op: Vec<Op>,
    len: Vec<u32>,
    offset: Vec<u64>,
    submit_ns: Vec<u64>,
    batch: Vec<Io>,
    done: Vec<Completion>,
    inflight: usize,
    /// Of those, flushes.
    flushing: usize,
    read: DirStats,
    write: DirStats,
    flush: DirStats,
    /// A flush after every this many writes (0: none), and the writes since the last.
    flush_every: u32,
    writes_since_flush: u32,
    series: Vec<Second>,
    /// Tags with an I/O in flight (to settle them if the stream fails).
    busy: Vec<bool>,
    verify: Option<StreamVerify>,
}

/// Draws that may collide in a row before the span is deemed too small for the depth.
const MAX_REDRAWS: u32 = 1 << 20;

impl StreamState {
    fn new(depth: u32, time: Duration) -> StreamState {
        let d = depth as usize;
        StreamState {
            free: (0..depth).rev().collect(),
            op: vec![Op::Read; d],
            len: vec![0; d],
            offset: vec![0; d],
            submit_ns: vec![0; d],
            batch: Vec::with_capacity(d),
            done: Vec::with_capacity(d),
            inflight: 0,
            flushing: 0,
            read: DirStats::default(),
            write: DirStats::default(),
            flush: DirStats::default(),
            flush_every: 0,
            writes_since_flush: 0,
            series: vec![Second::default(); time.as_secs() as usize + 2],
            busy: vec![false; d],
            verify: None,
        }
    }

    /// Draws the next I/O; under verification, one that overlaps no in-flight I/O of the run,
    /// with its granules locked.
    #[inline]
    fn draw(
        &mut self,
        gen: &mut Generator,
        tag: usize,
    ) -> Result<crate::gen::Planned, EngineError> {
        let Some(sv) = &mut self.verify else {
            return Ok(gen.plan());
        };
        for _ in 0..MAX_REDRAWS {
            let p = gen.plan();
            if sv
                .v
                .map
                .try_lock(p.offset, p.len as u64, &mut sv.cells[tag])
            {
                if p.op == Op::Write {
                    for c in sv.cells[tag].iter_mut() {
                        *c = next_gen(*c);
                    }
                }
                return Ok(p);
            }
            sv.rep.redrawn += 1;
        }
        Err(EngineError::Invalid(format!(
            "--verify: {MAX_REDRAWS} draws in a row overlapped I/O in flight; the span is too small for this depth"
        )))
    }

    /// Settles a completion with the verification: a write's generations go into the map
    /// (EITHER when it failed), a read is checked against what it locked. Every completion
    /// passes here, counted or not.
    #[inline]
    fn settle(&mut self, c: Completion, lay: &Layout, arena: &Arena) {
        let t = c.tag as usize;
        self.busy[t] = false;
        let Some(sv) = &mut self.verify else { return };
        let (off, len) = (self.offset[t], self.len[t] as u64);
        match self.op[t] {
            // A flush locks no range.
            Op::Flush => sv.flush_done(t, c.result >= 0),
            Op::Write if c.result < 0 => {
                sv.rep.writes_unconfirmed += 1;
                sv.v.map.commit_either(off, len, &sv.cells[t]);
            }
            Op::Write => {
                sv.v.map.commit(off, len, &sv.cells[t]);
                if sv.track_durable {
                    sv.pending.push((off, len, sv.pending_gens.len()));
                    sv.pending_gens.extend_from_slice(&sv.cells[t]);
                }
            }
            Op::Read if c.result >= 0 => {
                // SAFETY: this tag's read has completed; its slot is not reused before the tag
                // goes back on the free list.
                let buf = unsafe { arena.slice(t * lay.slot, len as usize) };
                sv.checker.check(buf, off, &sv.cells[t], &mut sv.rep);
                sv.v.map.unlock(off, len);
            }
            _ => sv.v.map.unlock(off, len),
        }
    }

    /// After a failure: I/O still in flight has an unknown outcome (writes accept either
    /// generation from now on) and must not keep its granules locked.
    fn abandon(&mut self) {
        let Some(sv) = &mut self.verify else { return };
        for t in 0..self.busy.len() {
            if !self.busy[t] {
                continue;
            }
            self.busy[t] = false;
            let (off, len) = (self.offset[t], self.len[t] as u64);
            match self.op[t] {
                Op::Write => {
                    sv.rep.writes_unconfirmed += 1;
                    sv.v.map.commit_either(off, len, &sv.cells[t]);
                }
                Op::Flush => {}
                _ => sv.v.map.unlock(off, len),
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn drive(
        &mut self,
        q: &mut dyn Queue,
        gen: &mut Generator,
        stamper: &mut Stamper,
        ctx: &StreamCtx<'_>,
        t0: Instant,
        lay: &Layout,
        arena: &Arena,
    ) -> Result<(), EngineError> {
        loop {
            self.batch.clear();
            while let Some(tag) = self.free.pop() {
                let t = tag as usize;
                if self.flush_every > 0 && self.writes_since_flush >= self.flush_every {
                    self.writes_since_flush = 0;
                    if let Some(sv) = &mut self.verify {
                        sv.flush_sent(t);
                    }
                    self.busy[t] = true;
                    (self.op[t], self.len[t], self.offset[t]) = (Op::Flush, 0, 0);
                    self.batch.push(Io {
                        tag,
                        op: Op::Flush,
                        offset: 0,
                        len: 0,
                        buf: t * lay.slot,
                    });
                    continue;
                }
                let p = match self.draw(gen, t) {
                    Ok(p) => p,
                    Err(e) => {
                        self.free.push(tag);
                        return Err(e);
                    }
                };
                let buf = match (p.op, &self.verify) {
                    (Op::Write, None) => {
                        // SAFETY: the tag was free, so none of its I/O is in flight.
                        unsafe { stamp_slot(arena, lay, stamper, t, p.offset, p.len, |_| 0) }
                    }
                    (Op::Write, Some(sv)) => {
                        let (cells, first) = (&sv.cells[t], p.offset >> sv.shift);
                        let gen_of = |o: u64| cells[((o >> sv.shift) - first) as usize] as u32;
                        // SAFETY: as above.
                        unsafe { stamp_slot(arena, lay, stamper, t, p.offset, p.len, gen_of) }
                    }
                    _ => t * lay.slot,
                };
                self.busy[t] = true;
                self.writes_since_flush += u32::from(p.op == Op::Write);
                self.op[t] = p.op;
                self.len[t] = p.len;
                self.offset[t] = p.offset;
                self.batch.push(Io {
                    tag,
                    op: p.op,
                    offset: p.offset,
                    len: p.len,
                    buf,
                });
            }
            if !self.batch.is_empty() {
                // The batch's submission time: after the generator and the stamps, just before
                // the queue hands it to the kernel or the socket.
                let submitted = t0.elapsed().as_nanos() as u64;
                for io in &self.batch {
                    self.submit_ns[io.tag as usize] = submitted;
                }
                self.inflight += self.batch.len();
                self.flushing += self.batch.iter().filter(|io| io.op == Op::Flush).count();
                // Little's law is about reads and writes: flushes are counted apart.
                ctx.live
                    .inflight
                    .store((self.inflight - self.flushing) as u64, Ordering::Relaxed);
                q.submit(&self.batch)?;
            }
            self.done.clear();
            q.reap(1, &mut self.done)?;
            let now = t0.elapsed().as_nanos() as u64;
            self.inflight -= self.done.len();
            if self.flushing > 0 {
                let op = &self.op;
                self.flushing -= self
                    .done
                    .iter()
                    .filter(|c| op[c.tag as usize] == Op::Flush)
                    .count();
            }
            ctx.live
                .inflight
                .store((self.inflight - self.flushing) as u64, Ordering::Relaxed);
            if now >= ctx.end_ns
                || ctx.shared.abort.load(Ordering::Relaxed)
                || ctx.shared.stop.load(Ordering::Relaxed)
            {
                // Completions at or after the end are outside the window.
                self.retire_uncounted(lay, arena)?;
                return Ok(());
            }
            let in_window = now >= ctx.ramp_ns;
            let sec = if in_window {
                ((now - ctx.ramp_ns) / 1_000_000_000) as usize
            } else {
                0
            };
            let mut bytes = 0u64;
            for i in 0..self.done.len() {
                let c = self.done[i];
                let t = c.tag as usize;
                self.settle(c, lay, arena);
                if c.result < 0 {
                    return Err(self.io_error(c));
                }
                let len = self.len[t] as u64;
                bytes += len;
                if in_window && self.op[t] == Op::Flush {
                    self.flush.ios += 1;
                    self.flush
                        .hist
                        .record(now.saturating_sub(self.submit_ns[t]));
                } else if in_window {
                    let lat = now.saturating_sub(self.submit_ns[t]);
                    let last = self.series.len() - 1;
                    let b = &mut self.series[sec.min(last)];
                    b.lat_sum_ns += lat as u128;
                    let d = if self.op[t] == Op::Write {
                        b.write_ios += 1;
                        b.write_bytes += len;
                        &mut self.write
                    } else {
                        b.read_ios += 1;
                        b.read_bytes += len;
                        &mut self.read
                    };
                    d.ios += 1;
                    d.bytes += len;
                    d.hist.record(lat);
                }
                self.free.push(c.tag);
            }
            ctx.live
                .ios
                .fetch_add(self.done.len() as u64, Ordering::Relaxed);
            ctx.live.bytes.fetch_add(bytes, Ordering::Relaxed);
        }
    }

    fn io_error(&self, c: Completion) -> EngineError {
        let t = c.tag as usize;
        EngineError::Io {
            op: match self.op[t] {
                Op::Read => "read",
                Op::Write => "write",
                Op::Flush => "flush",
                Op::Trim => "trim",
            },
            offset: self.offset[t],
            source: std::io::Error::from_raw_os_error(-c.result),
        }
    }

    /// Frees the tags of the batch just reaped without counting it (the caller has already
    /// taken it off `inflight`).
    fn retire_uncounted(&mut self, lay: &Layout, arena: &Arena) -> Result<(), EngineError> {
        for i in 0..self.done.len() {
            let c = self.done[i];
            self.settle(c, lay, arena);
            if c.result < 0 {
                return Err(self.io_error(c));
            }
            self.free.push(c.tag);
        }
        self.done.clear();
        Ok(())
    }

    /// Waits for every I/O still in flight, so no engine writes into the arena after the run.
    fn drain(&mut self, q: &mut dyn Queue, lay: &Layout, arena: &Arena) -> Result<(), EngineError> {
        while self.inflight > 0 {
            self.done.clear();
            q.reap(1, &mut self.done)?;
            if self.done.is_empty() {
                continue;
            }
            self.inflight -= self.done.len();
            self.retire_uncounted(lay, arena)?;
        }
        Ok(())
    }
}
