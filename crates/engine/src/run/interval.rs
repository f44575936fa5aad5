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

use std::sync::Mutex;

use sanbench_stats::LatencyHistogram;

use super::DirStats;

/// The statistics of one interval of one stream, or of one target once merged.
#[derive(Clone, Debug, Default)]
pub struct Interval {
    pub read: DirStats,
    pub write: DirStats,
    pub flush: DirStats,
    pub fua: DirStats,
    /// Trims and write-zeroes, in a workload that has them (`None` otherwise, so that a run
    /// without them makes and walks no more histograms than before).
    pub discards: Option<Box<Discards>>,
    /// A multipath target: per path (by index), the reads and writes it completed. Empty for
    /// a single path; otherwise a slot for every path of the target from the first interval
    /// (made before the clock starts), zeros for a path that completed nothing.
    pub paths: Vec<PathStats>,
}

/// The ops that change a range without moving its data: counted apart from reads and
/// writes (their bytes are discarded or zeroed, not transferred).
#[derive(Clone, Debug, Default)]
pub struct Discards {
    pub trim: DirStats,
    pub write_zeroes: DirStats,
}

impl Discards {
    fn merge(&mut self, o: &Discards) {
        self.trim.merge(&o.trim);
        self.write_zeroes.merge(&o.write_zeroes);
    }
}

/// One path's reads and writes of one interval.
#[derive(Clone, Debug, Default)]
pub struct PathStats {
    pub read_ios: u64,
    pub write_ios: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    /// The interval's headline latency of the I/Os this path completed (as
    /// [`Interval::latency`]: response time in an open loop, service time otherwise),
    /// measured by the stream like every other latency.
    pub latency: LatencyHistogram,
}

impl PathStats {
    fn merge(&mut self, o: &PathStats) {
        self.read_ios += o.read_ios;
        self.write_ios += o.write_ios;
        self.read_bytes += o.read_bytes;
        self.write_bytes += o.write_bytes;
        self.latency.merge(&o.latency);
    }

    /// The counts of a summary (see [`super::summaries`]).
    pub(super) fn counts(&self) -> Counts {
        Counts {
            read_ios: self.read_ios,
            write_ios: self.write_ios,
            read_bytes: self.read_bytes,
            write_bytes: self.write_bytes,
            flush_ios: 0,
            errors: 0,
        }
    }
}

/// The counts of one interval of one series (a summary's, see [`super::summaries`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub read_ios: u64,
    pub write_ios: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub flush_ios: u64,
    pub errors: u64,
}

impl Counts {
    pub fn add(&mut self, o: &Counts) {
        self.read_ios += o.read_ios;
        self.write_ios += o.write_ios;
        self.read_bytes += o.read_bytes;
        self.write_bytes += o.write_bytes;
        self.flush_ios += o.flush_ios;
        self.errors += o.errors;
    }
}

impl Interval {
    pub fn merge(&mut self, o: &Interval) {
        self.read.merge(&o.read);
        self.write.merge(&o.write);
        self.flush.merge(&o.flush);
        self.fua.merge(&o.fua);
        if let Some(d) = &o.discards {
            self.discards.get_or_insert_with(Default::default).merge(d);
        }
        if self.paths.len() < o.paths.len() {
            self.paths.resize_with(o.paths.len(), PathStats::default);
        }
        for (a, b) in self.paths.iter_mut().zip(&o.paths) {
            a.merge(b);
        }
    }

    /// The counts of a summary (see [`super::summaries`]).
    pub fn counts(&self) -> Counts {
        Counts {
            read_ios: self.read.ios,
            write_ios: self.write.ios,
            read_bytes: self.read.bytes,
            write_bytes: self.write.bytes,
            flush_ios: self.flush.ios,
            errors: self.read.errors
                + self.write.errors
                + self.flush.errors
                + self
                    .discards
                    .as_ref()
                    .map_or(0, |d| d.trim.errors + d.write_zeroes.errors),
        }
    }

    fn reset(&mut self) {
        let d = self.discards.as_deref_mut();
        let (trim, zero) = match d {
            Some(d) => (Some(&mut d.trim), Some(&mut d.write_zeroes)),
            None => (None, None),
        };
        for d in [
            Some(&mut self.read),
            Some(&mut self.write),
            Some(&mut self.flush),
            Some(&mut self.fua),
            trim,
            zero,
        ]
        .into_iter()
        .flatten()
        {
            d.ios = 0;
            d.bytes = 0;
            d.errors = 0;
            d.hist.reset();
            d.response.reset();
            d.lag.reset();
        }
        // Kept at their length: a multipath stream's next interval has the same paths.
        for p in &mut self.paths {
            (p.read_ios, p.write_ios, p.read_bytes, p.write_bytes) = (0, 0, 0, 0);
            p.latency.reset();
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
    /// Per path of a multipath target: `stats.paths`, each with its own latency.
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

pub use sanbench_doc::interval::IntervalSummary;

/// A stream's interval, sent to the coordinator when the stream moves past it.
pub(super) struct Msg {
    pub(super) stream: usize,
    pub(super) index: u64,
    /// The interval the stream is in now (`u64::MAX`: it has finished).
    pub(super) next: u64,
    pub(super) stats: Interval,
}

/// Emptied intervals the streams take at an edge instead of allocating, a shelf per target.
///
/// Each shelf starts with one interval per stream of its target, made before the clock
/// starts, with a slot for each of the target's paths: an interval's statistics are twelve
/// latency histograms (and one more per path), about 1-1.5 ms to make, and a stream that made
/// its own at its first edge stopped for that long inside the window (an open loop's arrivals
/// then, late by it: seen as a 1-3 ms stall in the second interval of every run).
pub(super) struct Pool {
    shelves: Vec<Shelf>,
    /// The workload trims or writes zeroes: every interval has room for them.
    discards: bool,
}

struct Shelf {
    spare: Mutex<Vec<Interval>>,
    /// At most this many kept: four per stream (the interval a stream fills, those in the
    /// channel and those merged at the coordinator before they come back; the coordinator
    /// polls at least once per interval).
    cap: usize,
    /// The target's paths (0: one path without per-path figures).
    paths: usize,
}

/// The paths a target's streams count completions on: the multipath layer's (0 for a plain
/// target).
pub(super) fn path_count(info: &crate::engine::TargetInfo) -> usize {
    info.params
        .get(crate::multipath::PATHS)
        .and_then(|v| v.as_array())
        .map_or(0, |a| a.len())
}

/// An empty interval with a slot for each of `paths` paths (and the discards' statistics).
fn empty(paths: usize, discards: bool) -> Interval {
    let mut iv = Interval::default();
    iv.paths.resize_with(paths, PathStats::default);
    if discards {
        iv.discards = Some(Box::default());
    }
    iv
}

impl Pool {
    /// A pool for targets of `(streams, paths)` each.
    pub(super) fn new(targets: &[(usize, usize)]) -> Pool {
        let shelves = targets
            .iter()
            .map(|&(streams, paths)| Shelf {
                spare: Mutex::new((0..streams).map(|_| empty(paths, false)).collect()),
                cap: 4 * streams,
                paths,
            })
            .collect();
        Pool {
            shelves,
            discards: false,
        }
    }

    /// Every interval, the spares made now included, with room for trims and write-zeroes.
    pub(super) fn with_discards(mut self) -> Pool {
        self.discards = true;
        for sh in &mut self.shelves {
            for iv in crate::poison::lock(&sh.spare).iter_mut() {
                iv.discards = Some(Box::default());
            }
        }
        self
    }

    pub(super) fn take(&self, target: usize) -> Interval {
        let shelf = &self.shelves[target];
        let spare = crate::poison::lock(&shelf.spare).pop();
        spare.unwrap_or_else(|| empty(shelf.paths, self.discards))
    }

    pub(super) fn give(&self, target: usize, mut iv: Interval) {
        let shelf = &self.shelves[target];
        // Emptied before the lock: a reset walks every histogram (about 3 MiB), and a stream
        // at its edge waits on this lock to take its next interval.
        iv.reset();
        let mut g = crate::poison::lock(&shelf.spare);
        if g.len() < shelf.cap {
            g.push(iv);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Pool;

    fn spare(pool: &Pool, target: usize) -> usize {
        crate::poison::lock(&pool.shelves[target].spare).len()
    }

    #[test]
    fn every_stream_s_first_edge_takes_a_spare_made_before_the_clock_starts() {
        // Target 0: three streams, one path; target 1: two streams over two paths.
        let pool = Pool::new(&[(3, 0), (2, 2)]);
        assert_eq!(
            (spare(&pool, 0), spare(&pool, 1)),
            (3, 2),
            "one spare per stream"
        );
        let first: Vec<_> = (0..3).map(|_| pool.take(0)).collect();
        let paths: Vec<_> = (0..2).map(|_| pool.take(1)).collect();
        assert!(first.iter().all(|iv| iv.paths.is_empty()));
        assert!(
            paths.iter().all(|iv| iv.paths.len() == 2),
            "slots for both paths"
        );
        // An empty shelf makes one, with its target's path slots too.
        assert_eq!((spare(&pool, 0), spare(&pool, 1)), (0, 0));
        assert_eq!(pool.take(1).paths.len(), 2);
        // Given back (emptied), four per stream are kept, no more.
        first.into_iter().for_each(|iv| pool.give(0, iv));
        assert_eq!(spare(&pool, 0), 3);
        (0..10).for_each(|_| pool.give(0, Default::default()));
        assert_eq!(spare(&pool, 0), 12);
    }
}
