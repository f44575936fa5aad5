//! Disruption, measured: what a fault (a path cut on a schedule) or any stall did to a
//! target's I/O, from the run's fine timeline ([`crate::timeline`]), the multipath
//! queues' per-path bins and events, and the faults that were fired.
//!
//! Pure: the inputs are figures, the output is the result's `disruption`. Definitions (also in
//! docs/MEASURE.md, "Disruption"):
//! * **stall**: a span in which no stream of the target completed anything while I/O was in
//!   flight (the intersection of every stream's spans without a completion; precise to the
//!   clock, not to the 10 ms bins). A run without faults or path events reports its
//!   disruption only when its longest stall reaches [`stall_threshold_ns`]: 100 ms, or ten
//!   median latencies when those are longer.
//! * **cause**: `fault` when sanbench fired one (`--fault`, the lab); else `path` when a path
//!   failed, came back or changed its access state by itself in the window (a cable pulled);
//!   else `stall` when the longest stall reached the threshold. A path's failure is put where
//!   the path last completed an I/O before it was declared failed.
//! * **detected** / **failed over**: from the cause to the first path taken out (`failed`),
//!   and to the first completion of an I/O sent again from the failed path on another one
//!   (`failed_over`).
//! * **recovery**: the pre-fault level is the mean completion rate before the first fault
//!   (or the longest stall); throughput is back when a window of at least 100 ms (and at
//!   least 100 I/Os at the pre-fault rate, at most 1 s) has a mean within 10 % of it, the
//!   first such window after throughput first fell below 90 %. `recovered_ms` counts from
//!   the fault; `degraded_ratio` is the level held between the stall's end and recovery.
//! * **catch-up** (open loop): the I/Os whose response time includes the longest stall
//!   (arrived before it ended, not completed before it began), the peak completion rate in
//!   the second after it, and how long the backlog took to drain.

pub use sanbench_doc::disruption::*;

use sanbench_doc::multipath::MultipathReport;

use crate::timeline::{Timeline, BIN_NS};

const MS: f64 = 1e6;

/// A fault fired during the window (`--fault`), as the analysis needs it.
#[derive(Clone, Debug, PartialEq)]
pub struct Fault {
    /// Since the measured window started.
    pub offset_ms: f64,
    /// RFC 3339.
    pub at: String,
    pub link: String,
    pub action: String,
}

/// The shortest stall reported when no fault was fired: 100 ms, or ten median latencies.
pub fn stall_threshold_ns(median_ns: u64) -> u64 {
    (100 * MS as u64).max(median_ns.saturating_mul(10))
}

/// Most stalls listed.
const MAX_STALLS: usize = 20;

/// Everything the analysis reads (the engine takes it from a target's run:
/// `sanbench_engine::disruption::of_target`).
pub struct Input<'a> {
    pub timeline: &'a Timeline,
    pub multipath: Option<&'a MultipathReport>,
    pub faults: &'a [Fault],
    pub window_ns: u64,
    pub median_ns: u64,
    pub worst_ns: u64,
    /// Open loop: the asked rate on this target.
    pub offered_iops: Option<f64>,
    pub verify: Option<(u64, u64)>,
}

pub fn analyse(i: &Input<'_>) -> Option<Disruption> {
    let tl = i.timeline;
    let threshold = stall_threshold_ns(i.median_ns);
    let longest = tl.gaps.iter().copied().max_by_key(|(s, e)| e - s);
    let longest_ns = longest.map_or(0, |(s, e)| e - s);
    let mut events = events(i);
    events.sort_by(|a, b| a.offset_ms.total_cmp(&b.offset_ms));
    let first_fault = i.faults.iter().map(|f| f.offset_ms).reduce(f64::min);
    // Without a fault of sanbench's own, a path that failed, came back or changed its access
    // state by itself (a cable pulled, a relay opened: the way a SAN is tested) is the cause.
    let path = first_fault
        .is_none()
        .then(|| path_cause(i, &events))
        .flatten();
    let cause_ms = first_fault.or(path);
    if cause_ms.is_none() && longest_ns < threshold {
        return None;
    }
    let reference_ms = cause_ms.or(longest.map(|(s, _)| s as f64 / MS));
    let after = |what: &str| {
        let from = cause_ms?;
        events
            .iter()
            .find(|e| e.event == what && e.offset_ms >= from)
            .map(|e| e.offset_ms - from)
    };
    let mut stalls: Vec<Stall> = tl
        .gaps
        .iter()
        .filter(|(s, e)| e - s >= threshold || Some((*s, *e)) == longest)
        .map(|&(s, e)| Stall {
            start_ms: s as f64 / MS,
            ms: (e - s) as f64 / MS,
        })
        .collect();
    if stalls.len() > MAX_STALLS {
        stalls.sort_by(|a, b| b.ms.total_cmp(&a.ms));
        stalls.truncate(MAX_STALLS);
    }
    stalls.sort_by(|a, b| a.start_ms.total_cmp(&b.start_ms));
    let bin_ms = BIN_NS as f64 / MS;
    let rec = reference_ms.map(|r| recovery(&tl.done, r, longest, bin_ms));
    let (lo, hi) = shown_span(
        i.window_ns,
        &events,
        longest,
        rec.as_ref().and_then(|r| r.back_ms),
    );
    let (lo_bin, hi_bin) = ((lo / BIN_NS) as usize, hi.div_ceil(BIN_NS) as usize);
    let cut = |bins: &[u32], shift: usize| -> Vec<u32> {
        (lo_bin..hi_bin)
            .map(|k| bins.get(k + shift).copied().unwrap_or(0))
            .collect()
    };
    let paths = i.multipath.map_or_else(Vec::new, |m| {
        // The paths' bins count from the multipath target's epoch, before the window.
        let shift = tl.window_start_unix_ns.saturating_sub(m.epoch_unix_ns) / BIN_NS;
        m.paths
            .iter()
            .map(|p| cut(&p.bins_10ms, shift as usize))
            .collect()
    });
    let catch_up = match (i.offered_iops, longest) {
        (Some(offered), Some(gap)) if !tl.arrivals.is_empty() => {
            Some(catch_up(&tl.done, &tl.arrivals, gap, offered))
        }
        _ => None,
    };
    Some(Disruption {
        cause: if first_fault.is_some() {
            "fault"
        } else if path.is_some() {
            "path"
        } else {
            "stall"
        }
        .into(),
        bin_ms: bin_ms as u32,
        from_ms: lo as f64 / MS,
        completions: cut(&tl.done, 0),
        paths,
        arrivals: if tl.arrivals.is_empty() {
            Vec::new()
        } else {
            cut(&tl.arrivals, 0)
        },
        stall_ms: longest_ns as f64 / MS,
        stall_start_ms: longest.map_or(0.0, |(s, _)| s as f64 / MS),
        stalls,
        stall_threshold_ms: threshold as f64 / MS,
        worst_latency_ms: i.worst_ns as f64 / MS,
        reissued: i.multipath.map_or(0, |m| m.reissued),
        failed: i.multipath.map_or(0, |m| m.failed_no_path),
        detected_ms: after("failed"),
        failover_ms: after("failed_over"),
        pre_fault_iops: rec.as_ref().and_then(|r| r.pre_iops),
        recovered_ms: rec.as_ref().and_then(|r| r.back_ms.map(|b| b - r.from_ms)),
        degraded_ratio: rec.as_ref().and_then(|r| r.degraded),
        catch_up,
        verified_reads: i.verify.map(|v| v.0),
        bad_blocks: i.verify.map(|v| v.1),
        truncated: tl.truncated,
        events,
    })
}

/// The path events that are a disruption's cause when no fault was fired.
pub const PATH_CAUSES: [&str; 3] = ["failed", "reinstated", "access_state"];

/// When a path event in the window started a disruption (ms since the window started), or
/// `None` when there was none. A path taken out ("failed") went before it was declared: its
/// cause is put where the path last completed an I/O (the end of its last 10 ms bin with a
/// completion before the event), so that `detected_ms` is how long the failure went unnoticed
/// (at most the event itself; the event's time when the path never completed anything). A
/// path brought back or whose access state changed is its own cause.
fn path_cause(i: &Input<'_>, events: &[Event]) -> Option<f64> {
    let window_ms = i.window_ns as f64 / MS;
    let first = events.iter().find(|e| {
        e.path.is_some()
            && PATH_CAUSES.contains(&e.event.as_str())
            && (0.0..=window_ms).contains(&e.offset_ms)
    })?;
    if first.event != "failed" {
        return Some(first.offset_ms);
    }
    let silent_from = (|| {
        let m = i.multipath?;
        let bins = &m.paths.get(first.path?)?.bins_10ms;
        let bin_ms = BIN_NS as f64 / MS;
        // The path's bins count from the multipath target's epoch, before the window.
        let shift_ms = i
            .timeline
            .window_start_unix_ns
            .saturating_sub(m.epoch_unix_ns) as f64
            / MS;
        let event_bin = ((first.offset_ms + shift_ms) / bin_ms).floor().max(0.0) as usize;
        let last = (0..=event_bin.min(bins.len().checked_sub(1)?))
            .rev()
            .find(|&k| bins[k] > 0)?;
        Some((last + 1) as f64 * bin_ms - shift_ms)
    })();
    Some(
        silent_from
            .map_or(first.offset_ms, |s| s.min(first.offset_ms))
            .max(0.0),
    )
}

fn events(i: &Input<'_>) -> Vec<Event> {
    let mut out: Vec<Event> = i
        .faults
        .iter()
        .map(|f| Event {
            offset_ms: f.offset_ms,
            at: f.at.clone(),
            event: "fault".into(),
            link: Some(f.link.clone()),
            detail: Some(f.action.clone()),
            ..Event::default()
        })
        .collect();
    let start_ms = i.timeline.window_start_unix_ns as f64 / MS;
    if let Some(m) = i.multipath {
        out.extend(m.events.iter().map(|e| Event {
            offset_ms: e.at_unix_ms as f64 - start_ms,
            at: e.at.clone(),
            event: e.event.clone(),
            path: Some(e.path),
            worker: Some(e.worker),
            link: None,
            detail: e.reason.clone(),
        }));
    }
    out
}

/// The span of the window the timeline shows: all of a window up to two minutes, else from a
/// second before the first event or stall to two seconds after the last (or the recovery).
fn shown_span(
    window_ns: u64,
    events: &[Event],
    longest: Option<(u64, u64)>,
    back_ms: Option<f64>,
) -> (u64, u64) {
    if window_ns <= 120_000 * MS as u64 {
        return (0, window_ns);
    }
    let mut first = f64::INFINITY;
    let mut last = f64::NEG_INFINITY;
    for t in events
        .iter()
        .map(|e| e.offset_ms)
        .chain(
            longest
                .map(|(s, e)| [s as f64 / MS, e as f64 / MS])
                .into_iter()
                .flatten(),
        )
        .chain(back_ms)
    {
        first = first.min(t);
        last = last.max(t);
    }
    if !first.is_finite() {
        return (0, window_ns.min(120_000 * MS as u64));
    }
    let lo = ((first - 1000.0).max(0.0) * MS) as u64;
    let hi = (((last + 2000.0) * MS) as u64).min(window_ns);
    (lo.min(hi), hi)
}

struct Recovery {
    from_ms: f64,
    pre_iops: Option<f64>,
    back_ms: Option<f64>,
    degraded: Option<f64>,
}

/// Recovery after `from_ms` (the first fault, or the longest stall's start).
fn recovery(done: &[u32], from_ms: f64, longest: Option<(u64, u64)>, bin_ms: f64) -> Recovery {
    let from_bin = (from_ms / bin_ms).floor().max(0.0) as usize;
    let none = Recovery {
        from_ms,
        pre_iops: None,
        back_ms: None,
        degraded: None,
    };
    // At least 100 ms of level before the fault.
    if from_bin < 10 || from_bin > done.len() {
        return none;
    }
    let pre_per_bin = done[..from_bin].iter().map(|&c| c as f64).sum::<f64>() / from_bin as f64;
    if pre_per_bin <= 0.0 {
        return none;
    }
    let pre_iops = pre_per_bin * 1000.0 / bin_ms;
    // A window of 100 ms, longer where 100 ms holds fewer than 100 I/Os, at most 1 s.
    let w = ((100.0 / pre_per_bin).ceil() as usize).clamp(10, 100);
    let mean = |k: usize| -> Option<f64> {
        (k + w <= done.len())
            .then(|| done[k..k + w].iter().map(|&c| c as f64).sum::<f64>() / w as f64)
    };
    let Some(dip) =
        (from_bin..done.len()).find(|&k| mean(k).is_some_and(|m| m < 0.9 * pre_per_bin))
    else {
        return Recovery {
            pre_iops: Some(pre_iops),
            back_ms: Some(from_ms),
            ..none
        };
    };
    // The window starts with a completion (not in the stall's last empty bins).
    let back = (dip + 1..done.len())
        .find(|&k| done[k] > 0 && mean(k).is_some_and(|m| (m / pre_per_bin - 1.0).abs() < 0.1));
    // The level held from the end of the stall in the dip (or the dip's start) to recovery.
    let stall_end = longest
        .map(|(s, e)| (s, (e / BIN_NS) as usize))
        .filter(|&(s, _)| (s / BIN_NS) as usize <= back.unwrap_or(done.len()))
        .map_or(dip, |(_, e)| e.max(dip));
    let until = back.unwrap_or(done.len());
    let degraded = (until > stall_end + 1).then(|| {
        done[stall_end + 1..until]
            .iter()
            .map(|&c| c as f64)
            .sum::<f64>()
            / (until - stall_end - 1) as f64
            / pre_per_bin
    });
    Recovery {
        from_ms,
        pre_iops: Some(pre_iops),
        back_ms: back.map(|k| k as f64 * bin_ms),
        degraded,
    }
}

fn catch_up(done: &[u32], arrivals: &[u32], gap: (u64, u64), offered: f64) -> CatchUp {
    let sum = |b: &[u32], to: usize| b[..to.min(b.len())].iter().map(|&c| c as u64).sum::<u64>();
    let (s_bin, e_bin) = ((gap.0 / BIN_NS) as usize, gap.1.div_ceil(BIN_NS) as usize);
    let arrived = sum(arrivals, e_bin);
    let ios = arrived.saturating_sub(sum(done, s_bin));
    let bins_per_s = (1e9 / BIN_NS as f64) as usize;
    let peak = done
        .iter()
        .skip(e_bin)
        .take(bins_per_s)
        .copied()
        .max()
        .unwrap_or(0);
    let mut cum = sum(done, e_bin);
    let mut drained = None;
    for (k, &c) in done.iter().enumerate().skip(e_bin) {
        cum += c as u64;
        if cum >= arrived {
            drained = Some(((k + 1) as u64 * BIN_NS).saturating_sub(gap.1) as f64 / MS);
            break;
        }
    }
    CatchUp {
        ios,
        offered_iops: offered,
        peak_iops: peak as f64 * bins_per_s as f64,
        drained_ms: drained,
    }
}

#[cfg(test)]
#[path = "disruption_tests.rs"]
mod tests;
