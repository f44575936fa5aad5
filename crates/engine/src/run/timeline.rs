//! A stream's fine timeline of the window: completions (and, in an open loop, arrivals) per
//! 10 ms, and the spans in which it had I/O in flight and saw no completion. It is what the
//! disruption analysis ([`crate::disruption`]) reads: a stall, a failover, the catch-up burst.
//! The data and its merging are `sanbench_analysis::timeline`'s; here is the recorder.
//!
//! Cost on the stream's path: one compare and one add per reaped batch (and per arrival in an
//! open loop); memory grows with the window at 4 bytes per 10 ms (400 B/s) up to
//! [`MAX_BINS`], after which the bins stop (the gaps go on: a stall late in a long run is
//! still found, its timeline is not drawn).
//!
//! Merging: bins add; gaps intersect. A span is a stall of the target only when *no* stream
//! of it completed anything, so the target's gaps are the spans inside a gap of every stream
//! (and, across the processes of an MPI run, of every process).

pub use sanbench_analysis::timeline::{intersect, Timeline, BIN_NS, GAP_NS, MAX_BINS, MAX_GAPS};

/// `last` while the stream has nothing in flight.
const IDLE: u64 = u64::MAX;

/// What a stream keeps besides its timeline: the time of its last completion (or of the
/// send that ended an idle spell).
#[derive(Debug)]
pub(super) struct Watch {
    pub(super) tl: Timeline,
    last: u64,
}

impl Default for Watch {
    fn default() -> Watch {
        Watch {
            tl: Timeline::default(),
            last: IDLE,
        }
    }
}

fn bump(bins: &mut Vec<u32>, at: u64, n: u32, truncated: &mut bool) {
    let i = (at / BIN_NS) as usize;
    if i >= MAX_BINS {
        *truncated = true;
        return;
    }
    if i >= bins.len() {
        bins.resize(i + 1, 0);
    }
    bins[i] = bins[i].saturating_add(n);
}

impl Watch {
    /// I/O was sent at `now` (ns since the run's clock started): an idle stream starts
    /// waiting from here.
    #[inline(always)]
    pub(super) fn sent(&mut self, now: u64) {
        if self.last == IDLE {
            self.last = now;
        }
    }

    /// `n` completions reaped at `now`; `ramp` is where the window starts (both ns since the
    /// run's clock started). Only called inside the window.
    #[inline(always)]
    pub(super) fn completed(&mut self, now: u64, ramp: u64, n: usize) {
        if self.last != IDLE && now.saturating_sub(self.last) >= GAP_NS {
            self.gap(self.last.max(ramp) - ramp, now - ramp);
        }
        self.last = now;
        bump(
            &mut self.tl.done,
            now - ramp,
            n as u32,
            &mut self.tl.truncated,
        );
    }

    /// A batch was reaped outside the window (ramp, or after the end): only the time of the
    /// last completion moves.
    #[inline(always)]
    pub(super) fn reaped_outside(&mut self, now: u64) {
        self.last = now;
    }

    /// Nothing is in flight any more.
    #[inline(always)]
    pub(super) fn idle(&mut self) {
        self.last = IDLE;
    }

    /// An open loop's arrival, intended at `at` (ns since the run's clock started).
    #[inline(always)]
    pub(super) fn arrival(&mut self, at: u64, ramp: u64) {
        if at >= ramp {
            bump(&mut self.tl.arrivals, at - ramp, 1, &mut self.tl.truncated);
        }
    }

    /// The window ended at `end` (ns since the run's clock started) with I/O in flight since
    /// the last completion: a gap reaching the end is recorded up to it.
    pub(super) fn close(&mut self, ramp: u64, end: u64) {
        if self.last != IDLE && self.last < end && end - self.last >= GAP_NS {
            self.gap(self.last.max(ramp) - ramp, end.saturating_sub(ramp));
        }
        self.last = IDLE;
    }

    #[cold]
    fn gap(&mut self, start: u64, end: u64) {
        if end <= start {
            return;
        }
        let gaps = &mut self.tl.gaps;
        if gaps.len() >= MAX_GAPS {
            // Keep the longest: drop the shortest recorded (rare: a stream stalling for
            // 10 ms over 16,000 times).
            self.tl.truncated = true;
            let (i, &(s, e)) = gaps
                .iter()
                .enumerate()
                .min_by_key(|(_, (s, e))| e - s)
                .expect("gaps is full");
            if e - s >= end - start {
                return;
            }
            gaps.remove(i);
        }
        gaps.push((start, end));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn a_gap_is_recorded_only_with_io_in_flight() {
        let mut w = Watch::default();
        let ramp = 100 * MS;
        w.sent(90 * MS);
        w.reaped_outside(95 * MS);
        w.completed(101 * MS, ramp, 1);
        // 50 ms without a completion, I/O in flight: a gap.
        w.completed(151 * MS, ramp, 2);
        // Idle for 100 ms, then sent and done within 5 ms: no gap.
        w.idle();
        w.sent(251 * MS);
        w.completed(256 * MS, ramp, 1);
        assert_eq!(w.tl.gaps, vec![(MS, 51 * MS)]);
        assert_eq!(w.tl.done[0], 1);
        assert_eq!(w.tl.done[5], 2);
        assert_eq!(w.tl.done[15], 1);
        assert_eq!(w.tl.done.iter().sum::<u32>(), 4);
    }

    #[test]
    fn a_gap_before_the_window_starts_at_the_window() {
        let mut w = Watch::default();
        let ramp = 100 * MS;
        w.sent(50 * MS);
        w.completed(130 * MS, ramp, 1);
        assert_eq!(w.tl.gaps, vec![(0, 30 * MS)]);
    }

    #[test]
    fn a_gap_open_at_the_end_is_closed_there() {
        let mut w = Watch::default();
        w.sent(0);
        w.completed(5 * MS, 0, 1);
        w.close(0, 500 * MS);
        assert_eq!(w.tl.gaps, vec![(5 * MS, 500 * MS)]);
        let mut w = Watch::default();
        w.sent(0);
        w.completed(5 * MS, 0, 1);
        w.idle();
        w.close(0, 500 * MS);
        assert!(w.tl.gaps.is_empty());
    }

    #[test]
    fn merged_gaps_are_where_no_stream_completed() {
        let a = Timeline {
            gaps: vec![(10, 50), (100, 200)],
            done: vec![1, 2],
            ..Timeline::default()
        };
        let b = Timeline {
            gaps: vec![(40, 120), (150, 160), (190, 300)],
            done: vec![3, 0, 5],
            ..Timeline::default()
        };
        let m = Timeline::merge_all([a, b].iter()).unwrap();
        assert_eq!(m.gaps, vec![(40, 50), (100, 120), (150, 160), (190, 200)]);
        assert_eq!(m.done, vec![4, 2, 5]);
        // A stream that never stalled: no stall of the target.
        let c = Timeline::default();
        assert!(Timeline::merge_all([m, c].iter()).unwrap().gaps.is_empty());
    }

    #[test]
    fn bins_stop_at_the_cap_and_say_so() {
        let mut w = Watch::default();
        w.sent(0);
        w.completed(BIN_NS * MAX_BINS as u64 + 1, 0, 1);
        assert!(w.tl.done.is_empty());
        assert!(w.tl.truncated);
    }

    #[test]
    fn past_the_gap_cap_the_longest_are_kept() {
        let mut w = Watch::default();
        let mut t = 0;
        w.sent(0);
        for i in 0..MAX_GAPS as u64 + 10 {
            t += GAP_NS + i;
            w.completed(t, 0, 1);
        }
        assert_eq!(w.tl.gaps.len(), MAX_GAPS);
        assert!(w.tl.truncated);
        let shortest = w.tl.gaps.iter().map(|(s, e)| e - s).min().unwrap();
        assert!(shortest >= GAP_NS + 10, "{shortest}");
    }
}
