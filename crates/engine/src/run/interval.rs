//! Interval statistics (`--log-interval`): every stream records into its current interval's
//! statistics (the same `DirStats` the window's totals are made of), and at the first
//! completion past an interval's edge hands them to the coordinator and takes an empty set
//! from a shared pool. The coordinator merges the streams' intervals per target, emits an
//! interval once every stream of its target has moved past it (to the plan's
//! [`IntervalSink`] and as a summary in [`TargetRun::intervals`]), merges it into the
//! target's totals and returns its histograms to the pool.
//!
//! So the window's histograms are, by construction, the merge of the intervals': the stream
//! records each completion once, and the only cost on its path is one comparison per reaped
//! batch. Memory stays flat over a long run: an interval's histograms live from its first
//! completion until every stream of its target has passed its end; the run keeps only the
//! summaries (p50, p99, max and counts per op).

use std::collections::BTreeMap;
use std::sync::mpsc::Receiver;
use std::sync::Mutex;

use sanbench_stats::LatencyHistogram;

use super::{DirStats, TargetRun};

/// The statistics of one interval of one stream, or of one target once merged.
#[derive(Clone, Debug, Default)]
pub struct Interval {
    pub read: DirStats,
    pub write: DirStats,
    pub flush: DirStats,
    pub fua: DirStats,
}

impl Interval {
    pub fn merge(&mut self, o: &Interval) {
        self.read.merge(&o.read);
        self.write.merge(&o.write);
        self.flush.merge(&o.flush);
        self.fua.merge(&o.fua);
    }

    fn reset(&mut self) {
        for d in [
            &mut self.read,
            &mut self.write,
            &mut self.flush,
            &mut self.fua,
        ] {
            d.ios = 0;
            d.bytes = 0;
            d.errors = 0;
            d.hist.reset();
            d.response.reset();
            d.lag.reset();
        }
    }

    /// The interval's headline latency, reads and writes together: response time in an open
    /// loop, service time otherwise (as `histogram_ns` of the result).
    pub fn latency(&self, open_loop: bool, into: &mut LatencyHistogram) {
        into.reset();
        let (r, w) = self.headline(open_loop);
        into.merge(r);
        into.merge(w);
    }

    /// [`Interval::latency`] without a copy when only reads or only writes completed (the
    /// common case: a merge walks the whole counts array, at every interval of a 10 ms log).
    pub fn latency_ref<'a>(
        &'a self,
        open_loop: bool,
        scratch: &'a mut LatencyHistogram,
    ) -> &'a LatencyHistogram {
        let (r, w) = self.headline(open_loop);
        if w.count() == 0 {
            r
        } else if r.count() == 0 {
            w
        } else {
            self.latency(open_loop, scratch);
            scratch
        }
    }

    fn headline(&self, open_loop: bool) -> (&LatencyHistogram, &LatencyHistogram) {
        if open_loop {
            (&self.read.response, &self.write.response)
        } else {
            (&self.read.hist, &self.write.hist)
        }
    }
}

/// One interval of one target, as the sink sees it.
pub struct IntervalRecord<'a> {
    pub target: usize,
    /// The interval's number: it covers `[index × length, (index + 1) × length)` of the window.
    pub index: u64,
    /// Its start (ns since the window's start) and length (the last one may be shorter).
    pub start_ns: u64,
    pub len_ns: u64,
    /// Wall-clock time of the window's start (`start_ns` counts from it).
    pub window_start: std::time::SystemTime,
    pub stats: &'a Interval,
    /// Reads and writes together (see [`Interval::latency`]).
    pub latency: &'a LatencyHistogram,
    /// I/Os in flight on the target when the interval was emitted (reads and writes).
    pub inflight: u64,
}

/// Where finished intervals go (a histogram log, a metrics endpoint). Called from the run's
/// coordinating thread, in order of `index` per target.
pub trait IntervalSink: Sync + Send {
    fn interval(&self, rec: &IntervalRecord<'_>);
}

/// The summary of one interval that the result keeps.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct IntervalSummary {
    /// Start and length in seconds (start since the window's start).
    pub t: f64,
    pub len: f64,
    pub read_ios: u64,
    pub write_ios: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub flush_ios: u64,
    /// Completions that failed (the run ends at the first, so at most one per run).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub errors: u64,
    /// Reads and writes together, in µs.
    pub p50_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A stream's interval, sent to the coordinator when the stream moves past it.
pub(super) struct Msg {
    pub(super) stream: usize,
    pub(super) index: u64,
    /// The interval the stream is in now (`u64::MAX`: it has finished).
    pub(super) next: u64,
    pub(super) stats: Interval,
}

/// Emptied intervals the streams take at an edge instead of allocating.
pub(super) struct Pool {
    spare: Mutex<Vec<Interval>>,
    cap: usize,
}

impl Pool {
    pub(super) fn new(cap: usize) -> Pool {
        Pool {
            spare: Mutex::new(Vec::new()),
            cap,
        }
    }

    pub(super) fn take(&self) -> Interval {
        crate::poison::lock(&self.spare).pop().unwrap_or_default()
    }

    fn give(&self, mut iv: Interval) {
        let mut g = crate::poison::lock(&self.spare);
        if g.len() < self.cap {
            iv.reset();
            g.push(iv);
        }
    }
}

/// The coordinator's side: merges per target, emits in order.
pub(super) struct Collector<'a> {
    pub(super) len_ns: u64,
    n_targets: usize,
    open_loop: bool,
    /// Per stream: every interval before this one has been received.
    done_below: Vec<u64>,
    pending: Vec<BTreeMap<u64, Interval>>,
    pub(super) totals: Vec<Interval>,
    pub(super) summaries: Vec<Vec<IntervalSummary>>,
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
        len_ns: u64,
        n_targets: usize,
        open_loop: bool,
        sink: Option<&'a dyn IntervalSink>,
        rx: Receiver<Msg>,
        pool: &'a Pool,
        lives: Vec<std::sync::Arc<super::shared::Live>>,
    ) -> Collector<'a> {
        Collector {
            len_ns,
            n_targets,
            open_loop,
            done_below: vec![0; lives.len()],
            pending: (0..n_targets).map(|_| BTreeMap::new()).collect(),
            totals: vec![Interval::default(); n_targets],
            summaries: vec![Vec::new(); n_targets],
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
        }
    }

    fn emit(&mut self, t: usize, k: u64, iv: Interval, window_ns: Option<u64>) {
        let start_ns = k * self.len_ns;
        let len_ns = match window_ns {
            Some(w) => self.len_ns.min(w.saturating_sub(start_ns)).max(1),
            None => self.len_ns,
        };
        let lat = iv.latency_ref(self.open_loop, &mut self.scratch);
        let errors = iv.read.errors + iv.write.errors + iv.flush.errors;
        let us = |ns: u64| ns as f64 / 1000.0;
        self.summaries[t].push(IntervalSummary {
            t: start_ns as f64 / 1e9,
            len: len_ns as f64 / 1e9,
            read_ios: iv.read.ios,
            write_ios: iv.write.ios,
            read_bytes: iv.read.bytes,
            write_bytes: iv.write.bytes,
            flush_ios: iv.flush.ios,
            errors,
            p50_us: us(lat.quantile(0.5)),
            p99_us: us(lat.quantile(0.99)),
            max_us: us(lat.max_ns()),
        });
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

    /// Moves the totals into the targets' results.
    pub(super) fn finish(self, targets: &mut [TargetRun]) {
        for ((t, tot), sums) in targets.iter_mut().zip(self.totals).zip(self.summaries) {
            t.read = tot.read;
            t.write = tot.write;
            t.flush = tot.flush;
            t.fua = tot.fua;
            t.intervals = sums;
        }
    }
}
