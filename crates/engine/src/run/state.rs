//! A stream's context ([`StreamCtx`]) and state, and the steps both of its loops share: drawing an I/O (with the
//! verification's locks), sending a batch, counting a reaped batch into the window's
//! statistics, settling every completion with the verification, draining at the end.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Barrier};
use std::time::Duration;

use super::fused::StreamData;
use super::layout::{stamp_slot, Layout};
use super::shared::{Live, Shared};
use super::stream_verify::StreamVerify;
use super::{DirStats, Second};
use crate::arena::Arena;
use crate::engine::{Completion, Io, Op, Queue, Target};
use crate::error::EngineError;
use crate::gen::Generator;
use crate::spec::Workload;
use crate::stamp::{DataSpec, Stamper};
use crate::verify::map::{next_gen, TRIM_MAYBE, TRIM_ZEROS};
use crate::verify::Verifier;
use sanbench_stats::LatencyHistogram;

mod count;

/// What a stream thread is given: its target and workload, the run's shared state, its live
/// counts, and where its intervals go.
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
    pub(super) raw_latencies: bool,
    /// This stream's number (worker × targets + target), the interval length (ns), where
    /// finished intervals go and where emptied ones come from.
    pub(super) stream_idx: usize,
    /// The one CPU this stream runs on (`RunPlan::stream_cpus`), if pinned.
    pub(super) cpu: Option<usize>,
    pub(super) iv_ns: u64,
    pub(super) iv_tx: std::sync::mpsc::Sender<super::interval::Msg>,
    pub(super) pool: &'a super::interval::Pool,
    /// The trace this stream replays instead of drawing I/Os (crate::replay).
    pub(super) replay: Option<&'a crate::replay::Replay>,
}

pub(super) struct StreamState {
    pub(super) free: Vec<u32>,
    pub(super) op: Vec<Op>,
    pub(super) len: Vec<u32>,
    pub(super) offset: Vec<u64>,
    pub(super) submit_ns: Vec<u64>,
    /// Open loop: each tag's intended issue time (empty in a closed-loop run).
    pub(super) intended: Vec<u64>,
    pub(super) batch: Vec<Io>,
    pub(super) done: Vec<Completion>,
    pub(super) inflight: usize,
    /// Of those, flushes.
    pub(super) flushing: usize,
    pub(super) read: DirStats,
    pub(super) write: DirStats,
    pub(super) flush: DirStats,
    /// FUA writes (also counted as writes), and which tags carry one.
    pub(super) fua_stats: DirStats,
    pub(super) fua: Vec<bool>,
    /// Trims and write-zeroes, when the workload has them.
    pub(super) discards: Option<Box<super::interval::Discards>>,
    /// Ops counted apart from reads and writes (flushes, trims, write-zeroes) may be in
    /// flight: `flushing` counts them.
    pub(super) apart: bool,
    /// A flush after every this many writes (0: none), and the writes since the last.
    pub(super) flush_every: u32,
    pub(super) writes_since_flush: u32,
    /// The per-second series, when this stream keeps it (`own_series`); else empty.
    pub(super) series: Vec<Second>,
    pub(super) own_series: bool,
    /// Tags with an I/O in flight (to settle them if the stream fails).
    pub(super) busy: Vec<bool>,
    pub(super) verify: Option<StreamVerify>,
    /// Test hook (`RunPlan::raw_latencies`): every counted read and write latency, in ns.
    pub(super) raw: Option<Vec<u64>>,
    /// The interval `read`, `write`, `flush` and `fua_stats` hold now, and where it ends (ns
    /// since the start): the first completion at or after it hands them over.
    pub(super) iv_index: u64,
    pub(super) iv_next: u64,
    /// Completions per 10 ms and the spans without one (the disruption analysis' input).
    pub(super) watch: super::timeline::Watch,
    /// A queue over several paths (`Queue::completed_on`): the path of each completion just
    /// reaped, and the current interval's figures per path.
    pub(super) per_path: bool,
    pub(super) done_path: Vec<u16>,
    pub(super) paths: Vec<super::PathStats>,
    /// By path, the current interval's service times of the closed loop's plain reads and
    /// writes (`[reads, writes]`): each such I/O is recorded here only, and `hand_over` adds
    /// them to the directions' and the paths' histograms (one record per I/O, not two).
    pub(super) path_hist: Vec<[LatencyHistogram; 2]>,
    /// Open loop: the window's time this stream spent spinning for its next arrival.
    pub(super) pacing: super::spin::Pacing,
}

/// Most raw latencies one stream keeps for the test hook (small runs only).
pub(super) const RAW_CAP: usize = 1 << 22;

/// Draws that may collide in a row before the span is deemed too small for the depth.
const MAX_REDRAWS: u32 = 1 << 20;

impl StreamState {
    /// `own_series`: keep the per-second series here (the intervals do not fit whole seconds,
    /// so the coordinator cannot form it: run/snapshot.rs `Seconds`); otherwise none, and the
    /// completions' path does not touch one.
    pub(super) fn new(depth: u32, time: Duration, own_series: bool) -> StreamState {
        let d = depth as usize;
        StreamState {
            free: (0..depth).rev().collect(),
            op: vec![Op::Read; d],
            len: vec![0; d],
            offset: vec![0; d],
            submit_ns: vec![0; d],
            intended: Vec::new(),
            batch: Vec::with_capacity(d),
            done: Vec::with_capacity(d),
            inflight: 0,
            flushing: 0,
            read: DirStats::default(),
            write: DirStats::default(),
            flush: DirStats::default(),
            fua_stats: DirStats::default(),
            fua: vec![false; d],
            discards: None,
            apart: false,
            flush_every: 0,
            writes_since_flush: 0,
            series: if own_series {
                vec![Second::default(); time.as_secs() as usize + 2]
            } else {
                Vec::new()
            },
            own_series,
            busy: vec![false; d],
            verify: None,
            raw: None,
            iv_index: 0,
            iv_next: u64::MAX,
            watch: Default::default(),
            per_path: false,
            done_path: Vec::with_capacity(d),
            paths: Vec::new(),
            path_hist: Vec::new(),
            pacing: Default::default(),
        }
    }

    /// Draws the next I/O; under verification, one that overlaps no in-flight I/O of the run,
    /// with its granules locked.
    #[inline(always)]
    pub(super) fn draw(
        &mut self,
        gen: &mut Generator,
        tag: usize,
    ) -> Result<crate::gen::Planned, EngineError> {
        if self.verify.is_none() {
            return Ok(gen.plan());
        }
        self.draw_verified(gen, tag)
    }

    /// [`draw`](Self::draw) under verification: out of line, so the plain path stays small.
    #[inline(never)]
    fn draw_verified(
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

    /// Under verification, locks a replayed record's granules for `tag` (a write's next
    /// generations); false when it overlaps I/O in flight, which it must wait for (a trace
    /// is replayed in order, never redrawn).
    #[inline]
    pub(super) fn lock_replayed(&mut self, tag: u32, p: &crate::gen::Planned) -> bool {
        let Some(sv) = &mut self.verify else {
            return true;
        };
        let cells = &mut sv.cells[tag as usize];
        if !sv.v.map.try_lock(p.offset, p.len as u64, cells) {
            return false;
        }
        if p.op == Op::Write {
            for c in cells.iter_mut() {
                *c = next_gen(*c);
            }
        }
        true
    }

    /// Settles a completion with the verification: a write's generations go into the map
    /// (EITHER when it failed), a read is checked against what it locked. Every completion
    /// passes here, counted or not.
    #[inline]
    pub(super) fn settle(&mut self, c: Completion, lay: &Layout, arena: &Arena) {
        let Some(sv) = &mut self.verify else { return };
        let t = c.tag as usize;
        self.busy[t] = false;
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
            Op::Read if sv.checked[t] => {
                sv.checked[t] = false;
                sv.v.map.unlock(off, len);
            }
            Op::Read if c.result >= 0 => {
                // SAFETY: this tag's read has completed; its slot is not reused before the tag
                // goes back on the free list.
                let buf = unsafe { arena.slice(t * lay.slot, len as usize) };
                if sv.v.map.any_trimmed(off, len) {
                    let map = &sv.v.map;
                    sv.checker
                        .check_discarded(buf, off, &sv.cells[t], map, &mut sv.rep);
                } else {
                    sv.checker.check(buf, off, &sv.cells[t], &mut sv.rep);
                }
                sv.v.map.unlock(off, len);
            }
            // Zeros where the target promises them (write-zeroes always; a trim where it says
            // so), else zeros or the data before.
            Op::WriteZeroes if c.result >= 0 => sv.v.map.discard(off, len, TRIM_ZEROS),
            Op::Trim if c.result >= 0 && sv.trim_zeros => sv.v.map.discard(off, len, TRIM_ZEROS),
            Op::Trim | Op::WriteZeroes => sv.v.map.discard(off, len, TRIM_MAYBE),
            _ => sv.v.map.unlock(off, len),
        }
    }

    /// After a failure: I/O still in flight has an unknown outcome (writes accept either
    /// generation from now on) and must not keep its granules locked.
    pub(super) fn abandon(&mut self) {
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
                Op::Trim | Op::WriteZeroes => sv.v.map.discard(off, len, TRIM_MAYBE),
                _ => sv.v.map.unlock(off, len),
            }
        }
    }

    pub(super) fn io_error(&self, c: Completion) -> EngineError {
        let t = c.tag as usize;
        EngineError::Io {
            op: self.op[t].name(),
            offset: self.offset[t],
            source: std::io::Error::from_raw_os_error(-c.result),
        }
    }

    /// Frees the tags of the batch just reaped without counting it (the caller has already
    /// taken it off `inflight`).
    pub(super) fn retire_uncounted(
        &mut self,
        lay: &Layout,
        arena: &Arena,
    ) -> Result<(), EngineError> {
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
    pub(super) fn drain(
        &mut self,
        q: &mut dyn Queue,
        lay: &Layout,
        arena: &Arena,
    ) -> Result<(), EngineError> {
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

/// What a stream needs to fill a write's buffer.
pub(super) struct Fill<'a> {
    pub(super) stamper: &'a mut Stamper,
    pub(super) lay: &'a Layout,
    pub(super) arena: &'a Arena,
    /// The queue produces write data and checks reads during its own copy
    /// ([`Queue::fuses_data`]): writes are not stamped into the arena here.
    pub(super) fused: bool,
}

impl StreamState {
    /// Prepares the next I/O on the free `tag` (a flush when one is due, else a drawn read or
    /// write with its write data stamped) and adds it to the batch; false for a flush (not an
    /// arrival of an open-loop schedule).
    #[inline(always)]
    pub(super) fn prepare(
        &mut self,
        tag: u32,
        gen: &mut Generator,
        f: &mut Fill<'_>,
    ) -> Result<bool, EngineError> {
        if self.flush_due(tag, f) {
            return Ok(false);
        }
        let p = match self.draw(gen, tag as usize) {
            Ok(p) => p,
            Err(e) => {
                self.free.push(tag);
                return Err(e);
            }
        };
        self.place(tag, p, f);
        Ok(true)
    }

    /// Puts a flush on the free `tag` when one is due (`flush_every` writes since the last),
    /// adding it to the batch; false when none is.
    #[inline(always)]
    pub(super) fn flush_due(&mut self, tag: u32, f: &Fill<'_>) -> bool {
        let t = tag as usize;
        if self.flush_every > 0 && self.writes_since_flush >= self.flush_every {
            self.writes_since_flush = 0;
            if let Some(sv) = &mut self.verify {
                sv.flush_sent(t);
            }
            if self.verify.is_some() {
                self.busy[t] = true;
            }
            (self.op[t], self.len[t], self.offset[t]) = (Op::Flush, 0, 0);
            self.fua[t] = false;
            self.batch.push(Io {
                fua: false,
                tag,
                op: Op::Flush,
                offset: 0,
                len: 0,
                buf: t * f.lay.slot,
            });
            return true;
        }
        false
    }

    /// Puts the planned I/O `p` on the free `tag` (its write data stamped) and adds it to the
    /// batch: the drawn I/O of [`prepare`](Self::prepare), or a replayed trace's record.
    #[inline(always)]
    pub(super) fn place(&mut self, tag: u32, p: crate::gen::Planned, f: &mut Fill<'_>) {
        let t = tag as usize;
        let (lay, arena) = (f.lay, f.arena);
        let buf = match (p.op, &self.verify) {
            (Op::Write, _) if f.fused => t * lay.slot,
            (Op::Write, None) => {
                // SAFETY: the tag was free, so none of its I/O is in flight.
                unsafe { stamp_slot(arena, lay, f.stamper, t, p.offset, p.len, |_| 0) }
            }
            (Op::Write, Some(sv)) => stamp_verified(sv, f, t, p.offset, p.len),
            _ => t * lay.slot,
        };
        self.put(tag, p, buf);
    }

    /// Adds the planned I/O `p` on the free `tag`, its data at byte `buf` of the arena, to the
    /// batch.
    #[inline(always)]
    pub(super) fn put(&mut self, tag: u32, p: crate::gen::Planned, buf: usize) {
        let t = tag as usize;
        if self.verify.is_some() {
            self.busy[t] = true;
        }
        self.writes_since_flush += u32::from(p.op == Op::Write);
        self.op[t] = p.op;
        self.fua[t] = p.fua;
        self.len[t] = p.len;
        self.offset[t] = p.offset;
        self.batch.push(Io {
            fua: p.fua,
            tag,
            op: p.op,
            offset: p.offset,
            len: p.len,
            buf,
        });
    }

    /// Hands the batch to the queue; `submitted`, its submission time, is read by the caller
    /// just before (after the generator and the stamps, so latency is the target's and the
    /// engine's; on a fused queue the stamps and checks are part of the engine's copy, so of
    /// its latency).
    #[inline]
    pub(super) fn send(
        &mut self,
        q: &mut dyn Queue,
        ctx: &StreamCtx<'_>,
        f: &mut Fill<'_>,
        submitted: u64,
    ) -> Result<(), EngineError> {
        if self.batch.is_empty() {
            return Ok(());
        }
        for io in &self.batch {
            self.submit_ns[io.tag as usize] = submitted;
        }
        self.watch.sent(submitted);
        self.inflight += self.batch.len();
        if self.apart {
            self.flushing += self.batch.iter().filter(|io| !io.op.moves_data()).count();
        }
        // Little's law is about reads and writes: flushes, trims and write-zeroes are counted
        // apart.
        ctx.live
            .inflight
            .store((self.inflight - self.flushing) as u64, Ordering::Relaxed);
        if !f.fused {
            return q.submit(&self.batch);
        }
        // SAFETY: the pool region is never written after the arena was filled.
        let pool = unsafe { f.arena.slice(f.lay.pool_base, f.lay.pool_len) };
        let mut data = StreamData {
            stamper: f.stamper,
            pool,
            verify: self.verify.as_mut(),
        };
        let sent = q.submit_fused(&self.batch, &mut data);
        // The fills' non-temporal stores are done before any completion is settled.
        crate::stamp::store_fence();
        sent
    }
}

/// Stamps a verified write with its granules' next generations (out of line: the plain path
/// stays small enough for the compiler to keep its hot calls inline).
#[inline(never)]
fn stamp_verified(sv: &StreamVerify, f: &mut Fill<'_>, t: usize, offset: u64, len: u32) -> usize {
    let (cells, first) = (&sv.cells[t], offset >> sv.shift);
    let gen_of = |o: u64| cells[((o >> sv.shift) - first) as usize] as u32;
    // SAFETY: the tag was free, so none of its I/O is in flight.
    unsafe { stamp_slot(f.arena, f.lay, f.stamper, t, offset, len, gen_of) }
}
