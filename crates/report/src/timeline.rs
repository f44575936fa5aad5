//! Timelines (issue 25): per cell, throughput and latency (p50, p99, max) per interval of
//! `--log-interval`, from `results[].intervals`, with the run's events on the same clock: the
//! ramp before the window, preconditioning, the steady-state window, faults, path changes,
//! stalls, errors, and a curve point's asked rate. Pure: a cell in, the figures to draw out;
//! svg_timeline.rs draws them, the exporters lay them out.

use sanbench_doc::interval::IntervalSummary;
use sanbench_doc::run::TargetResult;
use sanbench_doc::{Cell, Comparison, WorkloadEntry};

use crate::analysis::{flavour, Flavour};
use sanbench_units::fmt::{num, short};

/// Most points a timeline draws; beyond, consecutive intervals are drawn as one ([`Point`]).
pub const MAX_POINTS: usize = 300;

/// What a workload's throughput is drawn in: the figure its questions ask.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    Iops,
    MbPerS,
}

impl Unit {
    pub fn of(w: &WorkloadEntry) -> Unit {
        match flavour(w) {
            Flavour::Bandwidth => Unit::MbPerS,
            Flavour::Io => Unit::Iops,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Unit::Iops => "IOPS",
            Unit::MbPerS => "MB/s",
        }
    }
}

/// One drawn point: an interval, or consecutive intervals taken together.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    /// Start and length, seconds into the measured window.
    pub t: f64,
    pub len: f64,
    /// Throughput over the point's span, in the timeline's unit.
    pub tput: f64,
    /// Latency in µs (0: no I/O completed). Taken together: p50 the median of the intervals'
    /// p50, p99 and max the highest (a tail event is never averaged away).
    pub p50_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
    pub errors: u64,
}

/// What a vertical mark stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Precondition,
    Fault,
    Path,
    Error,
}

impl Kind {
    /// The CSS class of its mark (tests find marks by it).
    pub fn class(self) -> &'static str {
        match self {
            Kind::Precondition => "tl-precondition",
            Kind::Fault => "tl-fault",
            Kind::Path => "tl-path",
            Kind::Error => "tl-error",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Mark {
    /// Seconds into the measured window (negative: before it).
    pub t: f64,
    pub kind: Kind,
    pub label: String,
}

/// A span of the window: a stall (no completion on any stream), seconds.
#[derive(Clone, Debug, PartialEq)]
pub struct Span {
    pub from: f64,
    pub to: f64,
    pub label: String,
}

/// One cell's timeline.
#[derive(Clone, Debug, PartialEq)]
pub struct Timeline {
    pub target: String,
    pub round: u32,
    /// A curve point: its share of the target's maximum.
    pub load_pct: Option<f64>,
    /// The cell was still running when the document was written.
    pub in_progress: bool,
    pub unit: Unit,
    pub points: Vec<Point>,
    /// Intervals in the result (before [`MAX_POINTS`] took any together) and their length.
    pub intervals: usize,
    pub interval_s: f64,
    /// The ramp before the window (not measured), and the window's length.
    pub ramp_s: f64,
    pub window_s: f64,
    /// The steady-state window (the last seconds the check judged) and its verdict.
    pub steady: Option<(f64, f64, bool)>,
    pub marks: Vec<Mark>,
    pub stalls: Vec<Span>,
    /// A curve point's asked rate, in the timeline's unit.
    pub asked: Option<f64>,
}

impl Timeline {
    /// A short title: the round, or the curve point's load.
    pub fn title(&self) -> String {
        let base = match self.load_pct {
            Some(p) => format!("{} % load, round {}", short(p), self.round + 1),
            None => format!("round {}", self.round + 1),
        };
        if self.in_progress {
            format!("{base} (running when written)")
        } else {
            base
        }
    }
}

/// Throughput of an interval's counts over `len` seconds.
fn tput(unit: Unit, ios: u64, bytes: u64, len: f64) -> f64 {
    if len <= 0.0 {
        return 0.0;
    }
    match unit {
        Unit::Iops => ios as f64 / len,
        Unit::MbPerS => bytes as f64 / len / 1e6,
    }
}

/// The result's intervals with their gaps filled: an interval in which nothing completed is
/// not in the result (no stream handed one in), so a gap is a span of zero throughput.
fn filled(iv: &[IntervalSummary]) -> Vec<IntervalSummary> {
    let mut out: Vec<IntervalSummary> = Vec::with_capacity(iv.len());
    for i in iv {
        if let Some(prev) = out.last() {
            let end = prev.t + prev.len;
            if i.t > end + prev.len * 0.5 {
                out.push(IntervalSummary {
                    t: end,
                    len: i.t - end,
                    ..IntervalSummary::default()
                });
            }
        }
        out.push(i.clone());
    }
    out
}

/// The result's intervals as points, consecutive ones taken together beyond [`MAX_POINTS`].
pub fn points(r: &TargetResult, unit: Unit) -> Vec<Point> {
    let iv = filled(&r.intervals);
    let g = iv.len().div_ceil(MAX_POINTS).max(1);
    iv.chunks(g)
        .map(|ch| {
            let len: f64 = ch.iter().map(|i| i.len).sum();
            let ios: u64 = ch.iter().map(|i| i.read_ios + i.write_ios).sum();
            let bytes: u64 = ch.iter().map(|i| i.read_bytes + i.write_bytes).sum();
            let mut p50: Vec<f64> = ch.iter().map(|i| i.p50_us).collect();
            p50.sort_by(f64::total_cmp);
            Point {
                t: ch[0].t,
                len,
                tput: tput(unit, ios, bytes, len),
                p50_us: p50[(p50.len() - 1) / 2],
                p99_us: ch.iter().map(|i| i.p99_us).fold(0.0, f64::max),
                max_us: ch.iter().map(|i| i.max_us).fold(0.0, f64::max),
                errors: ch.iter().map(|i| i.errors).sum(),
            }
        })
        .collect()
}

/// The events of a cell's window as marks and spans: a disruption's events and stalls when
/// the result has one (its events already hold the faults and path changes on the window's
/// clock), else the faults and the multipath events set against the window's start; errors
/// from the intervals.
fn events(r: &TargetResult, points: &[Point]) -> (Vec<Mark>, Vec<Span>) {
    let mut marks = Vec::new();
    let mut stalls = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    if let Some(d) = &r.disruption {
        for e in &d.events {
            // Each worker reports a path's change: one mark per kind of event and path.
            let key = (e.event.clone(), e.path, e.link.clone(), e.detail.clone());
            if e.event == "reconnect_failed" || !seen.insert(key) {
                continue;
            }
            let (kind, label) = match e.event.as_str() {
                "fault" => (
                    Kind::Fault,
                    format!(
                        "{} {}",
                        e.link.as_deref().unwrap_or("?"),
                        e.detail.as_deref().unwrap_or("")
                    )
                    .trim()
                    .to_string(),
                ),
                other => (
                    Kind::Path,
                    format!("path {} {}", e.path.unwrap_or(0), other.replace('_', " ")),
                ),
            };
            marks.push(Mark {
                t: e.offset_ms / 1000.0,
                kind,
                label,
            });
        }
        for s in &d.stalls {
            stalls.push(Span {
                from: s.start_ms / 1000.0,
                to: (s.start_ms + s.ms) / 1000.0,
                label: format!("stall: {} ms without a completion", num(s.ms)),
            });
        }
    } else {
        for f in r.faults.iter().filter(|f| f.error.is_none()) {
            marks.push(Mark {
                t: f.offset_ms / 1000.0,
                kind: Kind::Fault,
                label: format!("{} {}", f.link, f.action),
            });
        }
        if let (Some(m), Some(start)) = (&r.multipath, r.window_start_unix_ms) {
            for e in &m.events {
                if e.event == "reconnect_failed"
                    || !seen.insert((e.event.clone(), Some(e.path), None, None))
                {
                    continue;
                }
                marks.push(Mark {
                    t: (e.at_unix_ms as f64 - start as f64) / 1000.0,
                    kind: Kind::Path,
                    label: format!("path {} {}", e.path, e.event.replace('_', " ")),
                });
            }
        }
    }
    if let Some(p) = points.iter().find(|p| p.errors > 0) {
        marks.push(Mark {
            t: p.t,
            kind: Kind::Error,
            label: format!("{} failed I/O", p.errors),
        });
    }
    marks.sort_by(|a, b| a.t.total_cmp(&b.t).then(a.kind.cmp(&b.kind)));
    (marks, stalls)
}

/// A cell's timeline; `None` when its result has no intervals (documents older than
/// `--log-interval`). `first_of_target`: the target's first cell, which carries the mark of
/// its preconditioning (a comparison fills a target once, before its first cell).
pub fn of_cell(
    cell: &Cell,
    w: &WorkloadEntry,
    first_of_target: bool,
    in_progress: bool,
) -> Option<Timeline> {
    let r = &cell.result;
    if r.intervals.is_empty() {
        return None;
    }
    let unit = Unit::of(w);
    let points = points(r, unit);
    let (mut marks, stalls) = events(r, &points);
    let ramp_s = w.spec.ramp.as_secs_f64();
    if let Some(p) = r.precondition.as_ref().filter(|_| first_of_target) {
        let label = if p.preconditioned && p.bytes > 0 {
            format!(
                "preconditioned: {} written in {} s before the first cell",
                sanbench_units::format_size(p.bytes),
                num(p.seconds)
            )
        } else {
            format!("not preconditioned: {}", p.note)
        };
        marks.insert(
            0,
            Mark {
                t: -ramp_s,
                kind: Kind::Precondition,
                label,
            },
        );
    }
    let window_s = r
        .intervals
        .last()
        .map_or(r.seconds, |i| i.t + i.len)
        .max(r.seconds);
    let steady = cell.steady.map(|s| {
        // The check judges the last `window` seconds of the per-second series.
        let to = r.timeseries.len() as f64;
        ((to - s.window as f64).max(0.0), to, s.steady)
    });
    let asked = r.open_loop.as_ref().map(|o| match unit {
        Unit::Iops => o.asked_iops,
        Unit::MbPerS if r.ios > 0 => o.asked_iops * r.bytes as f64 / r.ios as f64 / 1e6,
        Unit::MbPerS => 0.0,
    });
    Some(Timeline {
        target: cell.target.clone(),
        round: cell.round.unwrap_or(cell.repeat),
        load_pct: cell.load_pct,
        in_progress,
        unit,
        intervals: r.intervals.len(),
        interval_s: r.intervals[0].len,
        points,
        ramp_s,
        window_s,
        steady,
        marks,
        stalls,
        asked,
    })
}

/// A workload's timelines, target by target (in the comparison's order), each target's
/// closed-loop rounds first, then its curve points by load; the cell that was running when
/// the document was written last.
/// Every workload that has timelines, with them, in the comparison's order (the HTML and
/// Markdown sections both start here).
pub fn by_workload(c: &Comparison) -> Vec<(&WorkloadEntry, Vec<Timeline>)> {
    c.workloads
        .iter()
        .map(|w| (w, of_workload(c, w)))
        .filter(|(_, ts)| !ts.is_empty())
        .collect()
}

pub fn of_workload(c: &Comparison, w: &WorkloadEntry) -> Vec<Timeline> {
    let mut out = Vec::new();
    for t in &c.targets {
        let first = c.cells.iter().position(|x| x.target == t.name);
        let mut cells: Vec<(usize, &Cell)> = c
            .cells
            .iter()
            .enumerate()
            .filter(|(_, x)| x.workload == w.id && x.target == t.name)
            .collect();
        cells.sort_by(|(_, a), (_, b)| {
            a.load_pct
                .unwrap_or(-1.0)
                .total_cmp(&b.load_pct.unwrap_or(-1.0))
                .then(
                    a.round
                        .unwrap_or(a.repeat)
                        .cmp(&b.round.unwrap_or(b.repeat)),
                )
        });
        out.extend(
            cells
                .into_iter()
                .filter_map(|(i, x)| of_cell(x, w, Some(i) == first, false)),
        );
        if let Some(x) = c
            .in_progress
            .as_deref()
            .filter(|x| x.workload == w.id && x.target == t.name)
        {
            out.extend(of_cell(x, w, first.is_none(), true));
        }
    }
    out
}

/// Axes shared by a workload's timelines, so that they compare by eye.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Scale {
    /// Seconds: from the longest ramp (negative) to the longest window.
    pub x0: f64,
    pub x1: f64,
    /// The throughput axis's top.
    pub tput_max: f64,
    /// The latency axis, µs: whole decades around every p50 and max drawn.
    pub lat_lo: f64,
    pub lat_hi: f64,
}

pub fn scale(ts: &[Timeline]) -> Scale {
    let x0 = -ts.iter().map(|t| t.ramp_s).fold(0.0, f64::max);
    let x1 = ts.iter().map(|t| t.window_s).fold(0.0, f64::max).max(1e-3);
    let tput_max = ts
        .iter()
        .flat_map(|t| t.points.iter().map(|p| p.tput).chain(t.asked))
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    let lats = || {
        ts.iter()
            .flat_map(|t| t.points.iter())
            .flat_map(|p| [p.p50_us, p.p99_us, p.max_us])
            .filter(|v| v.is_finite() && *v > 0.0)
    };
    let lo = lats().fold(f64::INFINITY, f64::min);
    let hi = lats().fold(0.0, f64::max);
    let (lat_lo, lat_hi) = if lo.is_finite() && hi > 0.0 {
        let lo = 10f64.powf(lo.log10().floor());
        let hi = 10f64.powf(hi.log10().ceil());
        (lo, if hi > lo { hi } else { lo * 10.0 })
    } else {
        (1.0, 1000.0)
    };
    Scale {
        x0,
        x1,
        tput_max,
        lat_lo,
        lat_hi,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iv(t: f64, ios: u64, p50: f64, p99: f64, max: f64) -> IntervalSummary {
        IntervalSummary {
            t,
            len: 1.0,
            read_ios: ios,
            read_bytes: ios * 4096,
            p50_us: p50,
            p99_us: p99,
            max_us: max,
            ..IntervalSummary::default()
        }
    }

    #[test]
    fn many_intervals_keep_the_tail_and_the_throughput() {
        // 1,000 intervals: one of them has a 50 ms tail.
        let mut r = TargetResult {
            intervals: (0..1000)
                .map(|i| {
                    let tail = if i == 617 { 50_000.0 } else { 300.0 };
                    iv(i as f64, 1000, 100.0, tail, tail * 2.0)
                })
                .collect(),
            ..TargetResult::default()
        };
        let p = points(&r, Unit::Iops);
        assert!(p.len() <= MAX_POINTS, "{}", p.len());
        assert!(p.iter().all(|p| (p.tput - 1000.0).abs() < 1e-9));
        assert_eq!(p.iter().map(|p| p.p99_us).fold(0.0, f64::max), 50_000.0);
        assert_eq!(p.iter().map(|p| p.max_us).fold(0.0, f64::max), 100_000.0);
        assert!(p.iter().all(|p| p.p50_us == 100.0));
        // Few intervals are drawn one by one, in MB/s for bandwidth.
        r.intervals.truncate(10);
        let p = points(&r, Unit::MbPerS);
        assert_eq!(p.len(), 10);
        assert!((p[0].tput - 4.096).abs() < 1e-9);
        // Intervals in which nothing completed are not in the result: drawn as zero.
        r.intervals.remove(3);
        r.intervals.remove(3);
        let p = points(&r, Unit::Iops);
        assert_eq!(p.len(), 9);
        assert_eq!(
            (p[3].t, p[3].len, p[3].tput, p[3].p99_us),
            (3.0, 2.0, 0.0, 0.0)
        );
        assert_eq!(p[4].t, 5.0);
    }

    #[test]
    fn the_scale_spans_whole_decades_and_the_longest_ramp() {
        let t = |ramp: f64, p50: f64, max: f64| Timeline {
            target: "a".into(),
            round: 0,
            load_pct: None,
            in_progress: false,
            unit: Unit::Iops,
            points: vec![Point {
                t: 0.0,
                len: 1.0,
                tput: 10.0,
                p50_us: p50,
                p99_us: max / 2.0,
                max_us: max,
                errors: 0,
            }],
            intervals: 1,
            interval_s: 1.0,
            ramp_s: ramp,
            window_s: 10.0,
            steady: None,
            marks: Vec::new(),
            stalls: Vec::new(),
            asked: Some(12.0),
        };
        let s = scale(&[t(2.0, 35.0, 900.0), t(5.0, 80.0, 20_000.0)]);
        assert_eq!((s.x0, s.x1), (-5.0, 10.0));
        assert_eq!(s.tput_max, 12.0, "the asked rate is on the axis");
        assert_eq!((s.lat_lo, s.lat_hi), (10.0, 100_000.0));
    }
}
