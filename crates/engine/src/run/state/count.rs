//! Counting a reaped batch into the window's statistics: the common case inline (over several
//! paths, with the path's figures), flushes, trims, write-zeroes, FUA writes and open-loop
//! times out of line, the
//! per-second series when the stream keeps it, and the hand-over of each finished interval to
//! the coordinator.

use std::sync::atomic::Ordering;

use super::super::layout::Layout;
use super::{StreamCtx, StreamState, RAW_CAP};
use crate::arena::Arena;
use crate::engine::{Op, Queue};
use crate::error::EngineError;

impl StreamState {
    /// Counts a failed completion inside the window in its op's statistics.
    #[cold]
    #[inline(never)]
    fn count_error(&mut self, t: usize) {
        match (self.op[t], self.discards.as_deref_mut()) {
            (Op::Flush, _) => self.flush.errors += 1,
            (Op::Write, _) => self.write.errors += 1,
            (Op::Trim, Some(d)) => d.trim.errors += 1,
            (Op::WriteZeroes, Some(d)) => d.write_zeroes.errors += 1,
            _ => self.read.errors += 1,
        }
    }

    /// Counts a completion in second `sec` of the stream's own series (the last second past
    /// the planned window takes the rest).
    #[inline]
    fn second(&mut self, sec: usize, write: bool, len: u64, latency: u64) {
        let last = self.series.len() - 1;
        let b = &mut self.series[sec.min(last)];
        b.lat_sum_ns += latency as u128;
        if write {
            b.write_ios += 1;
            b.write_bytes += len;
        } else {
            b.read_ios += 1;
            b.read_bytes += len;
        }
    }

    /// Counts a read or a write in the window's totals (and in the stream's own per-second
    /// series, with `series_latency`), and returns its direction's statistics for the rest.
    #[inline(always)]
    fn tally(
        &mut self,
        write: bool,
        len: u64,
        service: u64,
        sec: usize,
        series_latency: u64,
    ) -> &mut super::super::DirStats {
        let d = self.tally_counts(write, len, sec, series_latency);
        d.hist.record(service);
        d
    }

    /// [`tally`](Self::tally) but for the latency histogram.
    #[inline(always)]
    fn tally_counts(
        &mut self,
        write: bool,
        len: u64,
        sec: usize,
        series_latency: u64,
    ) -> &mut super::super::DirStats {
        if self.own_series {
            self.second(sec, write, len, series_latency);
        }
        let d = if write {
            &mut self.write
        } else {
            &mut self.read
        };
        d.ios += 1;
        d.bytes += len;
        d
    }

    /// Counts a completion inside the window that is a flush, a trim, a write-zeroes, a FUA
    /// write, or part of an open loop (response time and issue lag beside the service time).
    /// Returns the bytes it did not move (a trim's or a write-zeroes' range).
    #[cold]
    #[inline(never)]
    fn count_extra(&mut self, i: usize, now: u64, service: u64, sec: usize, len: u64) -> u64 {
        let t = self.done[i].tag as usize;
        let op = self.op[t];
        if !op.moves_data() {
            let d = match (op, self.discards.as_deref_mut()) {
                (Op::Trim, Some(d)) => &mut d.trim,
                (Op::WriteZeroes, Some(d)) => &mut d.write_zeroes,
                _ => &mut self.flush,
            };
            d.ios += 1;
            d.bytes += len;
            d.hist.record(service);
            // A flush is no arrival of the open loop's schedule: it has no intended time.
            if op != Op::Flush && !self.intended.is_empty() {
                let it = self.intended[t];
                d.response.record(now.saturating_sub(it));
                d.lag.record(self.submit_ns[t].saturating_sub(it));
            }
            return len;
        }
        let open = !self.intended.is_empty();
        let (response, lag) = if open {
            let i = self.intended[t];
            (now.saturating_sub(i), self.submit_ns[t].saturating_sub(i))
        } else {
            (service, 0)
        };
        let d = self.tally(self.op[t] == Op::Write, len, service, sec, response);
        if open {
            d.response.record(response);
            d.lag.record(lag);
        }
        if let Some(raw) = self.raw.as_mut().filter(|r| r.len() < RAW_CAP) {
            raw.push(service);
        }
        if self.fua[t] && self.op[t] == Op::Write {
            self.fua_stats.ios += 1;
            self.fua_stats.bytes += len;
            self.fua_stats.hist.record(service);
        }
        if self.per_path {
            let p = self.count_on_path(i, self.op[t] == Op::Write, len);
            self.paths[p].latency.record(response);
        }
        0
    }

    /// Counts a closed loop's plain read or write over several paths: as [`tally`](Self::tally)
    /// and in its path's counts, its service time recorded once, in the path's histogram of its
    /// direction (`hand_over` adds those to both the direction's and the path's).
    #[inline(always)]
    fn tally_path(&mut self, i: usize, write: bool, len: u64, service: u64, sec: usize) {
        self.tally_counts(write, len, sec, service);
        let p = self.count_on_path(i, write, len);
        self.path_hist[p][usize::from(write)].record(service);
    }

    /// Counts the `i`-th completion of the batch on the path that carried it; returns the path.
    #[inline(always)]
    fn count_on_path(&mut self, i: usize, write: bool, len: u64) -> usize {
        let p = self.done_path.get(i).map_or(0, |&p| usize::from(p));
        if self.paths.len() <= p {
            self.grow_paths(p);
        }
        let ps = &mut self.paths[p];
        if write {
            ps.write_ios += 1;
            ps.write_bytes += len;
        } else {
            ps.read_ios += 1;
            ps.read_bytes += len;
        }
        p
    }

    /// Makes room for `n` paths' figures before the clock starts (a multipath target's
    /// paths, known from its info; nothing for a plain target): made at a path's first
    /// completion, each path's three histograms cost a stall inside the window.
    pub(in crate::run) fn presize_paths(&mut self, n: usize) {
        if n > 0 {
            self.grow_paths(n - 1);
        }
    }

    /// Makes room for path `p`'s figures.
    #[cold]
    #[inline(never)]
    fn grow_paths(&mut self, p: usize) {
        self.paths.resize_with(p + 1, Default::default);
        self.path_hist.resize_with(p + 1, Default::default);
    }

    /// Adds the paths' per-direction histograms of the interval (see
    /// [`tally_path`](Self::tally_path)) to the directions' and the paths' own, and empties
    /// them.
    fn fold_path_hist(&mut self) {
        for (ps, h) in self.paths.iter_mut().zip(&mut self.path_hist) {
            for (dir, hist) in [&mut self.read, &mut self.write]
                .into_iter()
                .zip(h.iter_mut())
            {
                dir.hist.merge(hist);
                ps.latency.merge(hist);
                hist.reset();
            }
        }
    }

    /// Hands the current interval's statistics to the coordinator and starts interval
    /// `next` (`u64::MAX`: the stream is done) with emptied ones from the pool.
    #[cold]
    #[inline(never)]
    pub(in crate::run) fn hand_over(&mut self, ctx: &StreamCtx<'_>, next: u64) {
        self.fold_path_hist();
        let mut fresh = ctx.pool.take(ctx.target_idx);
        std::mem::swap(&mut self.read, &mut fresh.read);
        std::mem::swap(&mut self.write, &mut fresh.write);
        std::mem::swap(&mut self.flush, &mut fresh.flush);
        std::mem::swap(&mut self.fua_stats, &mut fresh.fua);
        if self.discards.is_some() {
            std::mem::swap(&mut self.discards, &mut fresh.discards);
            // The pool makes intervals with room for them in such a run.
            self.discards.get_or_insert_with(Default::default);
        }
        std::mem::swap(&mut self.paths, &mut fresh.paths);
        // The coordinator outlives every stream (it joins them), so the send cannot fail.
        let _ = ctx.iv_tx.send(crate::run::interval::Msg {
            stream: ctx.stream_idx,
            index: self.iv_index,
            next,
            stats: fresh,
        });
        self.iv_index = next;
        self.iv_next = (next.saturating_add(1))
            .saturating_mul(ctx.iv_ns)
            .saturating_add(ctx.ramp_ns);
    }

    /// Takes the batch just reaped off the in-flight counts (and, over several paths, notes
    /// the path of each completion).
    pub(in crate::run) fn reaped(&mut self, ctx: &StreamCtx<'_>, q: &dyn Queue) {
        self.inflight -= self.done.len();
        if self.per_path {
            self.done_path.clear();
            q.paths_of(&self.done, &mut self.done_path);
        }
        if self.flushing > 0 {
            let op = &self.op;
            self.flushing -= self
                .done
                .iter()
                .filter(|c| !op[c.tag as usize].moves_data())
                .count();
        }
        ctx.live
            .inflight
            .store((self.inflight - self.flushing) as u64, Ordering::Relaxed);
    }

    /// Settles and counts the batch just reaped, completed at `now`: inside the window into
    /// the statistics (service time from submission; in an open-loop run also response time
    /// from the intended issue time and the issue lag), and frees its tags.
    #[inline(always)]
    pub(in crate::run) fn count(
        &mut self,
        now: u64,
        ctx: &StreamCtx<'_>,
        lay: &Layout,
        arena: &Arena,
    ) -> Result<(), EngineError> {
        let in_window = now >= ctx.ramp_ns;
        let sec = if in_window {
            ((now - ctx.ramp_ns) / 1_000_000_000) as usize
        } else {
            0
        };
        if in_window {
            if now >= self.iv_next {
                self.hand_over(ctx, (now - ctx.ramp_ns) / ctx.iv_ns);
            }
            self.watch.completed(now, ctx.ramp_ns, self.done.len());
        } else {
            self.watch.reaped_outside(now);
        }
        if self.inflight == 0 {
            self.watch.idle();
        }
        let open = !self.intended.is_empty();
        let mut bytes = 0u64;
        // Every completion goes out of line (open-loop times, the raw latencies' hook).
        let extra = open || self.raw.is_some();
        // Every completion leaves the plain path (that, or several paths): one test there.
        let special = extra || self.per_path;
        for i in 0..self.done.len() {
            let c = self.done[i];
            let t = c.tag as usize;
            if self.verify.is_some() {
                self.settle(c, lay, arena);
            }
            if c.result < 0 {
                if in_window {
                    self.count_error(t);
                }
                return Err(self.io_error(c));
            }
            let len = self.len[t] as u64;
            bytes += len;
            let service = now.saturating_sub(self.submit_ns[t]);
            if in_window {
                // The common case (closed loop, a read or a plain write) stays small enough
                // to be inlined whole; flushes, FUA writes and open-loop times go through
                // `count_extra`, kept out of line; over several paths, `tally_path`.
                let op = self.op[t];
                let odd = !op.moves_data() || self.fua[t];
                if odd || special {
                    if odd || extra {
                        bytes -= self.count_extra(i, now, service, sec, len);
                    } else {
                        self.tally_path(i, op == Op::Write, len, service, sec);
                    }
                } else {
                    self.tally(op == Op::Write, len, service, sec, service);
                }
            }
            self.free.push(c.tag);
        }
        ctx.live
            .ios
            .fetch_add(self.done.len() as u64, Ordering::Relaxed);
        ctx.live.bytes.fetch_add(bytes, Ordering::Relaxed);
        Ok(())
    }
}
