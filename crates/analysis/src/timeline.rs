//! A target's fine timeline of the measured window, as the run loop records it and the
//! disruption analysis ([`crate::disruption`]) reads it: completions (and, in an open loop,
//! arrivals) per 10 ms, and the spans in which I/O was in flight and nothing completed.
//! The engine's streams record one each (`sanbench_engine::run::timeline`, which also says
//! what the recording costs); this is the data and how timelines merge.
//!
//! Merging: bins add; gaps intersect. A span is a stall of the target only when *no* stream
//! of it completed anything, so the target's gaps are the spans inside a gap of every stream
//! (and, across the processes of an MPI run, of every process).

use serde::{Deserialize, Serialize};

/// The bins' width.
pub const BIN_NS: u64 = 10_000_000;
/// Most bins kept (2.9 h of window).
pub const MAX_BINS: usize = 1 << 20;
/// The shortest span without a completion a stream records.
pub const GAP_NS: u64 = 10_000_000;
/// Most gaps a stream keeps (the longest kept when there are more).
pub const MAX_GAPS: usize = 1 << 14;

/// One stream's (or, merged, one target's) timeline of the window. Times are ns since the
/// window started.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Timeline {
    /// Completions counted in the window, per [`BIN_NS`].
    #[serde(default)]
    pub done: Vec<u32>,
    /// Open loop: I/Os by their intended issue time, per [`BIN_NS`] (empty in a closed loop).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub arrivals: Vec<u32>,
    /// Spans (start, end) of at least [`GAP_NS`] with I/O in flight and no completion; merged:
    /// the spans in which no stream of the target completed anything. Sorted, disjoint.
    #[serde(default)]
    pub gaps: Vec<(u64, u64)>,
    /// The window's start, ns since the Unix epoch (set on the merged timeline: per-path
    /// timelines of a multipath target are aligned by it).
    #[serde(default)]
    pub window_start_unix_ns: u64,
    /// Bins stopped at [`MAX_BINS`], or gaps past [`MAX_GAPS`] were dropped.
    #[serde(default)]
    pub truncated: bool,
}

impl Timeline {
    /// Adds another stream's (or process's) timeline of the same target: bins add, gaps
    /// intersect.
    pub fn merge(&mut self, o: &Timeline) {
        add_bins(&mut self.done, &o.done);
        add_bins(&mut self.arrivals, &o.arrivals);
        self.gaps = intersect(&self.gaps, &o.gaps);
        self.truncated |= o.truncated;
        if self.window_start_unix_ns == 0 {
            self.window_start_unix_ns = o.window_start_unix_ns;
        }
    }

    /// Merges the timelines of all the streams of one target (`None`: there were none).
    pub fn merge_all<'a>(mut all: impl Iterator<Item = &'a Timeline>) -> Option<Timeline> {
        let mut t = all.next()?.clone();
        for o in all {
            t.merge(o);
        }
        Some(t)
    }
}

use sanbench_doc::multipath::add_bins;

/// The spans inside both sets (each sorted and disjoint, or sortable: sorted here).
pub fn intersect(a: &[(u64, u64)], b: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut a = a.to_vec();
    let mut b = b.to_vec();
    a.sort_unstable();
    b.sort_unstable();
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < a.len() && j < b.len() {
        let s = a[i].0.max(b[j].0);
        let e = a[i].1.min(b[j].1);
        if s < e {
            out.push((s, e));
        }
        if a[i].1 < b[j].1 {
            i += 1;
        } else {
            j += 1;
        }
    }
    out
}
