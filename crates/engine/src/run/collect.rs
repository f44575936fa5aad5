//! The coordinator's side of the intervals: merges the streams' intervals per target, emits
//! each once every stream of its target is past it (in order, to the plan's
//! [`IntervalSink`]), keeps its summaries (per target, per path of a multipath target, and
//! for all targets together when there are several: run/summaries.rs bounds them), merges it
//! into the target's totals and returns its histograms to the pool.

use std::collections::BTreeMap;
use std::sync::mpsc::Receiver;

use sanbench_stats::LatencyHistogram;

use super::interval::{Interval, IntervalRecord, IntervalSink, Msg, Pool};
use super::summaries::{Counts, Series};
use super::TargetRun;

/// All targets together: each interval waits until every target has emitted it (or is past
/// it), then is summarized once.
struct All {
    pending: BTreeMap<u64, (Counts, LatencyHistogram)>,
    /// Per target: every interval below this one has been emitted.
    emitted_below: Vec<u64>,
    series: Series,
    /// Emptied histograms for the next pending intervals.
    spare: Vec<LatencyHistogram>,
}

/// How the window is cut and how many summaries a series keeps.
pub(super) struct Cut {
    /// The interval's length.
    pub(super) len_ns: u64,
    /// The window's planned length (the summaries' step is chosen from it).
    pub(super) planned_ns: u64,
    /// Most summaries per series.
    pub(super) cap: usize,
}

pub(super) struct Collector<'a> {
    pub(super) len_ns: u64,
    cut: (u64, usize),
    n_targets: usize,
    open_loop: bool,
    /// Per stream: every interval before this one has been received.
    done_below: Vec<u64>,
    pending: Vec<BTreeMap<u64, Interval>>,
    pub(super) totals: Vec<Interval>,
    series: Vec<Series>,
    /// Per target, per path (multipath targets; grown as paths show up).
    paths: Vec<Vec<Series>>,
    all: Option<All>,
    scratch: LatencyHistogram,
    sink: Option<&'a dyn IntervalSink>,
    rx: Receiver<Msg>,
    pool: &'a Pool,
    /// Wall-clock time of the window's start, set when the run's clock starts.
    pub(super) window_start: std::time::SystemTime,
    /// The streams' live counts (for the in-flight figure of each record).
    lives: Vec<std::sync::Arc<super::shared::Live>>,
}

impl<'a> Collector<'a> {
    pub(super) fn new(
        cut: Cut,
        n_targets: usize,
        open_loop: bool,
        sink: Option<&'a dyn IntervalSink>,
        rx: Receiver<Msg>,
        pool: &'a Pool,
        lives: Vec<std::sync::Arc<super::shared::Live>>,
    ) -> Collector<'a> {
        let series = || Series::new(cut.len_ns, cut.planned_ns, cut.cap);
        Collector {
            len_ns: cut.len_ns,
            cut: (cut.planned_ns, cut.cap),
            n_targets,
            open_loop,
            done_below: vec![0; lives.len()],
            pending: (0..n_targets).map(|_| BTreeMap::new()).collect(),
            totals: vec![Interval::default(); n_targets],
            series: (0..n_targets).map(|_| series()).collect(),
            paths: (0..n_targets).map(|_| Vec::new()).collect(),
            all: (n_targets > 1).then(|| All {
                pending: BTreeMap::new(),
                emitted_below: vec![0; n_targets],
                series: series(),
                spare: Vec::new(),
            }),
            scratch: LatencyHistogram::new(),
            sink,
            rx,
            pool,
            window_start: std::time::SystemTime::UNIX_EPOCH,
            lives,
        }
    }

    /// Takes what the streams sent and emits every interval all streams of its target are
    /// past. `window_ns`: the window is over and this long; everything left is emitted.
    pub(super) fn poll(&mut self, window_ns: Option<u64>) {
        while let Ok(m) = self.rx.try_recv() {
            // Stream i drives target i % targets (see the spawn loop in run/mod.rs).
            let t = m.stream % self.n_targets;
            self.done_below[m.stream] = m.next;
            match self.pending[t].get_mut(&m.index) {
                Some(acc) => {
                    acc.merge(&m.stats);
                    self.pool.give(m.stats);
                }
                None => {
                    self.pending[t].insert(m.index, m.stats);
                }
            }
        }
        for t in 0..self.n_targets {
            let below = match window_ns {
                Some(_) => u64::MAX,
                None => (t..self.done_below.len())
                    .step_by(self.n_targets)
                    .map(|s| self.done_below[s])
                    .min()
                    .unwrap_or(0),
            };
            while let Some(e) = self.pending[t].first_entry() {
                if *e.key() >= below {
                    break;
                }
                let (k, iv) = e.remove_entry();
                self.emit(t, k, iv, window_ns);
            }
            if let Some(all) = &mut self.all {
                all.emitted_below[t] = below;
            }
        }
        self.emit_all(window_ns);
    }

    fn bounds(&self, k: u64, window_ns: Option<u64>) -> (u64, u64) {
        let start_ns = k * self.len_ns;
        let len_ns = match window_ns {
            Some(w) => self.len_ns.min(w.saturating_sub(start_ns)).max(1),
            None => self.len_ns,
        };
        (start_ns, len_ns)
    }

    fn emit(&mut self, t: usize, k: u64, iv: Interval, window_ns: Option<u64>) {
        let (start_ns, len_ns) = self.bounds(k, window_ns);
        // Without a copy when only reads or only writes completed (the common case).
        let lat = iv.latency_ref(self.open_loop, &mut self.scratch);
        let counts = iv.counts();
        self.series[t].push(k, start_ns, len_ns, &counts, lat);
        let (planned, cap) = self.cut;
        let paths = &mut self.paths[t];
        while paths.len() < iv.paths.len() {
            paths.push(Series::new(self.len_ns, planned, cap));
        }
        for (s, p) in paths.iter_mut().zip(&iv.paths) {
            s.push(k, start_ns, len_ns, &p.counts(), &p.latency);
        }
        if let Some(all) = &mut self.all {
            let (c, h) = all.pending.entry(k).or_insert_with(|| {
                let mut h = all.spare.pop().unwrap_or_default();
                h.reset();
                (Counts::default(), h)
            });
            c.add(&counts);
            h.merge(lat);
        }
        if let Some(sink) = self.sink {
            let inflight = (t..self.lives.len())
                .step_by(self.n_targets)
                .map(|s| {
                    self.lives[s]
                        .inflight
                        .load(std::sync::atomic::Ordering::Relaxed)
                })
                .sum();
            sink.interval(&IntervalRecord {
                inflight,
                target: t,
                index: k,
                start_ns,
                len_ns,
                window_start: self.window_start,
                stats: &iv,
                latency: lat,
            });
        }
        self.totals[t].merge(&iv);
        self.pool.give(iv);
    }

    /// Summarizes every interval all targets have emitted.
    fn emit_all(&mut self, window_ns: Option<u64>) {
        let len_ns = self.len_ns;
        let Some(all) = &mut self.all else { return };
        let below = all.emitted_below.iter().copied().min().unwrap_or(0);
        while let Some(e) = all.pending.first_entry() {
            if *e.key() >= below {
                break;
            }
            let (k, (c, h)) = e.remove_entry();
            let start_ns = k * len_ns;
            let len = match window_ns {
                Some(w) => len_ns.min(w.saturating_sub(start_ns)).max(1),
                None => len_ns,
            };
            all.series.push(k, start_ns, len, &c, &h);
            all.spare.push(h);
        }
    }

    /// Moves the totals and the summaries into the targets' results; returns the summaries of
    /// all targets together (empty with one target) and their step (ns).
    pub(super) fn finish(
        self,
        targets: &mut [TargetRun],
        window_ns: u64,
    ) -> (Vec<super::IntervalSummary>, u64) {
        let parts = self.totals.into_iter().zip(self.series).zip(self.paths);
        for (t, ((tot, series), paths)) in targets.iter_mut().zip(parts) {
            t.read = tot.read;
            t.write = tot.write;
            t.flush = tot.flush;
            t.fua = tot.fua;
            let (sums, step) = series.finish(window_ns);
            t.intervals = sums;
            t.intervals_step_ns = step;
            t.path_intervals = paths.into_iter().map(|s| s.finish(window_ns).0).collect();
        }
        match self.all {
            Some(all) => all.series.finish(window_ns),
            None => (Vec::new(), 0),
        }
    }
}
