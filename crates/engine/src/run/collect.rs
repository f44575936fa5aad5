//! The coordinator's side of the intervals: merges the streams' intervals per target, emits
//! each once every stream of its target is past it (in order, to the plan's
//! [`IntervalSink`]), keeps its summaries (per target, per path of a multipath target, and
//! for all targets together when there are several: run/summaries.rs bounds them), merges it
//! into the target's totals and returns its histograms to the pool.
//!
//! It is the run's only aggregation: the final result and every save part-way
//! (`--save-every`, run/snapshot.rs) are formed from its totals and summaries by the same
//! constructor. A save is due at the first interval edge past the next `every` of window
//! time. Each target's part of it is formed when that target gets there (before its first
//! interval past the edge is merged, or once its streams are past the edge), and the summary
//! of all targets likewise; once all are there the result is handed to the plan's
//! [`SaveSink`]. So every part covers the same instant, and no target waits for another:
//! the sink still gets each interval as soon as its own target is past it. A save whose edge
//! a target passed before the last save was taken is skipped (a target more than `every`
//! ahead of another).

use std::collections::BTreeMap;
use std::sync::mpsc::Receiver;

use sanbench_stats::LatencyHistogram;

use super::interval::{Counts, Interval, IntervalRecord, IntervalSink, Msg, Pool};
use super::shared::Live;
use super::snapshot::{Base, SaveSink, Saves, Seconds};
use super::summaries::Series;
use super::{IntervalSummary, RunOutput, TargetRun};

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
    lives: Vec<std::sync::Arc<Live>>,
    base: Base,
    save: Option<Save<'a>>,
    /// The per-second series, formed here when the intervals fit whole seconds.
    seconds: Option<Seconds>,
}

/// Saves part-way: where they go, when the next is due, the seconds they carry and the
/// parts of the next formed so far.
struct Save<'a> {
    every_ns: u64,
    due_ns: u64,
    /// The interval edge the next save is taken at (the first at or past `due_ns`).
    due_k: u64,
    to: &'a dyn SaveSink,
    /// Per target, its result at `due_k`.
    parts: Vec<Option<TargetRun>>,
    /// All targets together at `due_k` (several targets only).
    all: Option<(Vec<IntervalSummary>, u64)>,
}

/// Where the collector's intervals come from and go to besides the result.
pub(super) struct Io<'a> {
    pub(super) sink: Option<&'a dyn IntervalSink>,
    pub(super) saves: Option<&'a Saves>,
    pub(super) rx: Receiver<Msg>,
    pub(super) pool: &'a Pool,
    /// The streams' live counts.
    pub(super) lives: Vec<std::sync::Arc<Live>>,
}

impl<'a> Collector<'a> {
    pub(super) fn new(cut: Cut, base: Base, open_loop: bool, io: Io<'a>) -> Collector<'a> {
        let Io {
            sink,
            saves,
            rx,
            pool,
            lives,
        } = io;
        let n_targets = base.infos.len();
        let series = || Series::new(cut.len_ns, cut.planned_ns, cut.cap);
        let save = saves.filter(|s| !s.every.is_zero()).map(|s| {
            let every_ns = s.every.as_nanos().min(u64::MAX as u128) as u64;
            Save {
                every_ns,
                due_ns: every_ns,
                due_k: every_ns.div_ceil(cut.len_ns.max(1)),
                to: &*s.to,
                parts: vec![None; n_targets],
                all: None,
            }
        });
        Collector {
            seconds: Seconds::new(cut.len_ns, n_targets, open_loop, cut.planned_ns),
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
            base,
            save,
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
                    self.pool.give(t, m.stats);
                }
                None => {
                    self.pending[t].insert(m.index, m.stats);
                }
            }
        }
        let belows: Vec<u64> = (0..self.n_targets)
            .map(|t| match window_ns {
                Some(_) => u64::MAX,
                None => (t..self.done_below.len())
                    .step_by(self.n_targets)
                    .map(|s| self.done_below[s])
                    .min()
                    .unwrap_or(0),
            })
            .collect();
        self.emit_below(&belows, window_ns);
        if window_ns.is_none() {
            self.save_if_formed(&belows);
        }
    }

    /// Emits, per target, every interval below `belows[t]`; forms each target's part of a
    /// save once it gets to the save's edge (the final poll, `window_ns`, forms none).
    fn emit_below(&mut self, belows: &[u64], window_ns: Option<u64>) {
        let saving = window_ns.is_none();
        for (t, &below) in belows.iter().enumerate() {
            while let Some(e) = self.pending[t].first_entry() {
                if *e.key() >= below {
                    break;
                }
                let (k, iv) = e.remove_entry();
                if saving {
                    self.form_part(t, k);
                }
                self.emit(t, k, iv, window_ns);
            }
            if saving {
                self.form_part(t, below);
            }
            if let Some(all) = &mut self.all {
                all.emitted_below[t] = below;
            }
        }
        self.emit_all(window_ns);
    }

    /// Target `t` is about to merge interval `k` (or has every interval below it): its part
    /// of the next save is formed now if `k` is at or past the save's edge.
    fn form_part(&mut self, t: usize, k: u64) {
        let Some(s) = &self.save else { return };
        if k < s.due_k || s.parts[t].is_some() {
            return;
        }
        let part = self.target_at(t, s.due_k * self.len_ns);
        if let Some(s) = &mut self.save {
            s.parts[t] = Some(part);
        }
    }

    /// Target `t`'s result over the window's first `at_ns`: every interval below it merged,
    /// none past it.
    fn target_at(&self, t: usize, at_ns: u64) -> TargetRun {
        let seconds = self.seconds.as_ref();
        self.base.target_run(
            t,
            self.totals[t].clone(),
            self.series[t].snapshot(at_ns),
            self.paths[t].iter().map(|s| s.snapshot(at_ns).0).collect(),
            seconds.map_or_else(Vec::new, |s| s.of(t, at_ns)),
        )
    }

    /// Hands the save on once all of its parts are formed; the next is due at the first
    /// edge of `every` that no target has passed yet (`belows`: where each is).
    fn save_if_formed(&mut self, belows: &[u64]) {
        let (len_ns, several) = (self.len_ns, self.all.is_some());
        let Some(s) = &mut self.save else { return };
        if s.parts.iter().any(Option::is_none) || (several && s.all.is_none()) {
            return;
        }
        let at_ns = s.due_k * len_ns;
        let targets = s.parts.iter_mut().filter_map(Option::take).collect();
        let all = s.all.take().unwrap_or_default();
        let out = self.base.output(self.window_start, at_ns, targets, all);
        s.to.save(out);
        let ahead = belows.iter().copied().max().unwrap_or(0);
        if ahead == u64::MAX {
            // A stream has finished: the window is ending, the final result comes next.
            self.save = None;
            return;
        }
        let next_k = ahead.max(s.due_k + 1);
        while s.due_k < next_k {
            s.due_ns = s.due_ns.saturating_add(s.every_ns);
            s.due_k = s.due_ns.div_ceil(len_ns);
        }
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
        if let Some(sec) = self.seconds.as_mut() {
            sec.push(t, start_ns, &iv);
        }
        self.totals[t].merge(&iv);
        self.pool.give(t, iv);
    }

    /// Summarizes every interval all targets have emitted.
    fn emit_all(&mut self, window_ns: Option<u64>) {
        let len_ns = self.len_ns;
        let Some(all) = &mut self.all else { return };
        // The part of the next save, formed before the first interval past its edge.
        let mut save = self.save.as_mut().filter(|_| window_ns.is_none());
        let mut form = |all: &All, k: u64| {
            if let Some(s) = save.as_mut().filter(|s| k >= s.due_k && s.all.is_none()) {
                s.all = Some(all.series.snapshot(s.due_k * len_ns));
            }
        };
        let below = all.emitted_below.iter().copied().min().unwrap_or(0);
        while let Some(e) = all.pending.first_entry() {
            if *e.key() >= below {
                break;
            }
            let (k, (c, h)) = e.remove_entry();
            form(all, k);
            let start_ns = k * len_ns;
            let len = match window_ns {
                Some(w) => len_ns.min(w.saturating_sub(start_ns)).max(1),
                None => len_ns,
            };
            all.series.push(k, start_ns, len, &c, &h);
            all.spare.push(h);
        }
        form(all, below);
    }

    /// The window's result, `window_ns` long, from the totals and the summaries; the caller
    /// adds what only the end knows.
    pub(super) fn finish(self, window_ns: u64) -> RunOutput {
        let parts = self.totals.into_iter().zip(self.series).zip(self.paths);
        let seconds = self.seconds;
        let targets = parts
            .enumerate()
            .map(|(t, ((tot, series), paths))| {
                self.base.target_run(
                    t,
                    tot,
                    series.finish(window_ns),
                    paths.into_iter().map(|s| s.finish(window_ns).0).collect(),
                    seconds
                        .as_ref()
                        .map_or_else(Vec::new, |s| s.of(t, window_ns)),
                )
            })
            .collect();
        let all = self
            .all
            .map_or((Vec::new(), 0), |a| a.series.finish(window_ns));
        self.base.output(self.window_start, window_ns, targets, all)
    }
}

#[cfg(test)]
#[path = "collect_tests.rs"]
mod tests;
