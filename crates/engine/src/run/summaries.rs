//! The interval summaries a result keeps, bounded whatever the run's length: a long run with a
//! short `--log-interval` (24 h at 10 ms is 8.6 million intervals) keeps at most a cap of
//! summaries per series (a target, a path, all targets), so the result stays complete at a
//! coarser step, while the histogram log (cli/watch.rs) still gets every interval as it ends.
//!
//! * The step is chosen before the run from its planned length: the smallest whole number of
//!   intervals per summary that keeps the planned window within 7/8 of the cap. Those
//!   intervals are merged into one histogram before they are summarized, so every figure of
//!   a summary is exact at that step. One histogram per series is held for it.
//! * Should a window run longer than planned and the cap be reached, adjacent summaries are
//!   merged pairwise and the step doubles: counts and the maximum stay exact, p50 and p99 of
//!   a merged pair are the larger of its halves' (upper bounds: the quantile of a union lies
//!   between its parts'), and the summary says so (`merged`).
//!
//! Memory per series: the cap's summaries and one histogram, whatever the window's length.

use sanbench_stats::LatencyHistogram;

pub use super::interval::Counts;
use super::interval::IntervalSummary;

/// Most summaries kept per series by default (`RunPlan::max_intervals`).
pub const MAX_SUMMARIES: usize = 4096;

/// Intervals being merged into one summary: the summary's number (in steps) and its figures.
#[derive(Clone)]
struct Acc {
    c: u64,
    counts: Counts,
    hist: LatencyHistogram,
}

/// One series' summaries.
#[derive(Clone)]
pub struct Series {
    fine_ns: u64,
    /// Intervals per summary.
    step: u64,
    cap: usize,
    acc: Option<Acc>,
    /// An emptied histogram kept for the next `acc`.
    spare: Option<LatencyHistogram>,
    out: Vec<IntervalSummary>,
    /// Each summary's number, in steps.
    idx: Vec<u64>,
}

fn summary(t_ns: u64, len_ns: u64, c: &Counts, lat: &LatencyHistogram) -> IntervalSummary {
    let us = |ns: u64| ns as f64 / 1000.0;
    IntervalSummary {
        t: t_ns as f64 / 1e9,
        len: len_ns as f64 / 1e9,
        read_ios: c.read_ios,
        write_ios: c.write_ios,
        read_bytes: c.read_bytes,
        write_bytes: c.write_bytes,
        flush_ios: c.flush_ios,
        errors: c.errors,
        p50_us: us(lat.quantile(0.5)),
        p99_us: us(lat.quantile(0.99)),
        max_us: us(lat.max_ns()),
        merged: false,
    }
}

/// The intervals per summary that keep a planned window of `planned_ns` within 7/8 of
/// `cap` summaries (the rest is room for a window that runs a little long).
pub fn step_for(fine_ns: u64, planned_ns: u64, cap: usize) -> u64 {
    let fine = planned_ns.div_ceil(fine_ns.max(1)).max(1);
    let room = (cap - cap / 8).max(1) as u64;
    fine.div_ceil(room).max(1)
}

impl Series {
    /// `cap`: at least 2 (pairs are merged at it).
    pub fn new(fine_ns: u64, planned_ns: u64, cap: usize) -> Series {
        let cap = cap.max(2);
        Series {
            fine_ns,
            step: step_for(fine_ns, planned_ns, cap),
            cap,
            acc: None,
            spare: None,
            out: Vec::new(),
            idx: Vec::new(),
        }
    }

    /// The length each summary covers (the last may be shorter).
    pub fn step_ns(&self) -> u64 {
        self.step.saturating_mul(self.fine_ns)
    }

    /// Interval `k` (`start_ns`, `len_ns` into the window), in order of `k`.
    pub fn push(&mut self, k: u64, start_ns: u64, len_ns: u64, c: &Counts, lat: &LatencyHistogram) {
        if self.step == 1 {
            let s = summary(start_ns, len_ns, c, lat);
            self.put(k, s);
            return;
        }
        if self.acc.as_ref().is_some_and(|a| a.c != k / self.step) {
            self.flush(None);
        }
        // After a flush the step may have doubled: the number is taken now.
        let c_now = k / self.step;
        let acc = match &mut self.acc {
            Some(a) => a,
            None => {
                let mut hist = self.spare.take().unwrap_or_default();
                hist.reset();
                self.acc.insert(Acc {
                    c: c_now,
                    counts: Counts::default(),
                    hist,
                })
            }
        };
        acc.counts.add(c);
        acc.hist.merge(lat);
    }

    /// Summarizes the intervals being merged; `window_ns`: the window ended there (the last
    /// summary is as long as what is left of it).
    fn flush(&mut self, window_ns: Option<u64>) {
        let Some(a) = self.acc.take() else { return };
        let step_ns = self.step_ns();
        let t = a.c.saturating_mul(step_ns);
        let len = match window_ns {
            Some(w) => step_ns.min(w.saturating_sub(t)).max(1),
            None => step_ns,
        };
        let s = summary(t, len, &a.counts, &a.hist);
        self.spare = Some(a.hist);
        self.put(a.c, s);
    }

    /// Keeps summary number `c` (in steps), merging it into the last when they share it.
    fn put(&mut self, c: u64, s: IntervalSummary) {
        match (self.idx.last(), self.out.last_mut()) {
            (Some(&last), Some(l)) if last == c => merge_into(l, &s),
            _ => {
                self.out.push(s);
                self.idx.push(c);
            }
        }
        if self.out.len() >= self.cap {
            self.halve();
        }
    }

    /// Doubles the step: summaries that now share a number are merged, and each covers its
    /// whole step but the last, which ends where the last one kept ended (at the end of the
    /// window, with the window's length: the last pair's first half does not stretch it to
    /// the whole step).
    fn halve(&mut self) {
        self.step = self.step.saturating_mul(2);
        let step_s = self.step_ns() as f64 / 1e9;
        let (out, idx) = (std::mem::take(&mut self.out), std::mem::take(&mut self.idx));
        let end = out.last().map(|s| s.t + s.len);
        for (mut s, c) in out.into_iter().zip(idx) {
            let c = c / 2;
            (s.t, s.len) = (c as f64 * step_s, step_s);
            match (self.idx.last(), self.out.last_mut()) {
                (Some(&last), Some(l)) if last == c => merge_into(l, &s),
                _ => {
                    self.out.push(s);
                    self.idx.push(c);
                }
            }
        }
        if let (Some(end), Some(last)) = (end, self.out.last_mut()) {
            last.len = end - last.t;
        }
    }

    /// The summaries and the step they were kept at (ns); `window_ns`: the window's length.
    pub fn finish(mut self, window_ns: u64) -> (Vec<IntervalSummary>, u64) {
        self.flush(Some(window_ns));
        // What the streams hand over at the end starts where the window ended when the window
        // ended on an interval's edge (or never began: a run stopped during its ramp has a
        // window of 0). Such an interval holds no I/O and has no length: no summary.
        let end_s = window_ns as f64 / 1e9;
        while self
            .out
            .last()
            .is_some_and(|s| s.t >= end_s && s.read_ios + s.write_ios + s.flush_ios + s.errors == 0)
        {
            self.out.pop();
            self.idx.pop();
        }
        let step = self.step_ns();
        (self.out, step)
    }

    /// The summaries so far, the intervals being merged included, and the step: exactly what
    /// [`Series::finish`] would give were the window `window_ns` long now (a copy is
    /// finished: one histogram and the summaries, once per save part-way).
    pub fn snapshot(&self, window_ns: u64) -> (Vec<IntervalSummary>, u64) {
        self.clone().finish(window_ns)
    }

    /// Summaries kept so far (for tests and the bound).
    pub fn len(&self) -> usize {
        self.out.len()
    }

    pub fn is_empty(&self) -> bool {
        self.out.is_empty()
    }
}

/// Merges `b`, which follows `a`, into `a` (see the module's note on percentiles).
fn merge_into(a: &mut IntervalSummary, b: &IntervalSummary) {
    let end = (b.t + b.len).max(a.t + a.len);
    a.len = end - a.t;
    a.read_ios += b.read_ios;
    a.write_ios += b.write_ios;
    a.read_bytes += b.read_bytes;
    a.write_bytes += b.write_bytes;
    a.flush_ios += b.flush_ios;
    a.errors += b.errors;
    // An empty part (no reads or writes) has no say in the other's latency.
    let (na, nb) = (
        a.read_ios + a.write_ios - b.read_ios - b.write_ios,
        b.read_ios + b.write_ios,
    );
    if nb > 0 {
        if na == 0 {
            (a.p50_us, a.p99_us) = (b.p50_us, b.p99_us);
        } else {
            a.p50_us = a.p50_us.max(b.p50_us);
            a.p99_us = a.p99_us.max(b.p99_us);
        }
        a.max_us = a.max_us.max(b.max_us);
    }
    a.merged |= na > 0 && nb > 0;
}

#[cfg(test)]
#[path = "summaries_tests.rs"]
mod tests;
