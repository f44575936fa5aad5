//! report.md's "Timelines": what the HTML draws, as one table per workload: per cell, the
//! spread of throughput over its intervals, when its worst p99 and its longest latency came,
//! and its events.

use std::fmt::Write as _;

use super::html_timelines::METHOD;
use crate::fmt::md_cell;
use crate::svg_timeline::us_label;
use crate::timeline::{by_workload, Timeline};
use crate::Report;
use sanbench_units::fmt::{num, short};

/// Events listed per cell (the rest counted).
const EVENTS: usize = 4;

fn spread(t: &Timeline) -> String {
    let mut v: Vec<f64> = t.points.iter().map(|p| p.tput).collect();
    if v.is_empty() {
        return "–".into();
    }
    v.sort_by(f64::total_cmp);
    format!(
        "{} / {} / {}",
        num(v[0]),
        num(v[(v.len() - 1) / 2]),
        num(v[v.len() - 1])
    )
}

fn worst(t: &Timeline, f: impl Fn(&crate::timeline::Point) -> f64) -> String {
    t.points
        .iter()
        .filter(|p| f(p) > 0.0)
        .max_by(|a, b| f(a).total_cmp(&f(b)))
        .map_or("–".into(), |p| {
            format!("{} at {} s", us_label(f(p)), num(p.t))
        })
}

fn events(t: &Timeline) -> String {
    let mut all: Vec<String> = t
        .marks
        .iter()
        .map(|m| format!("{} at {} s", m.label, num(m.t)))
        .collect();
    all.extend(
        t.stalls
            .iter()
            .map(|s| format!("stall of {} s at {} s", num(s.to - s.from), num(s.from))),
    );
    if let Some((from, to, steady)) = t.steady {
        all.push(format!(
            "{} over {}–{} s",
            if steady { "steady" } else { "not steady" },
            num(from),
            num(to)
        ));
    }
    if all.is_empty() {
        return "–".into();
    }
    let more = all.len().saturating_sub(EVENTS);
    let mut s = all.into_iter().take(EVENTS).collect::<Vec<_>>().join("; ");
    if more > 0 {
        let _ = write!(s, "; {more} more");
    }
    s
}

pub fn timelines(r: &Report, s: &mut String) {
    let c = r.cmp;
    let per = by_workload(c);
    if per.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "\n## Timelines\n\n{} report.html draws each cell; here, per cell: the lowest, median \
         and highest throughput of its intervals, its worst interval p99 and its longest \
         latency with when they came, and its events (seconds into the measured window).",
        md_cell(METHOD)
    );
    for (w, ts) in per {
        let _ = writeln!(
            s,
            "\n### {}\n\n| Target | Cell | Intervals | {} per interval (min / median / max) | Worst p99 | Max | Events |\n|---|---|---:|---:|---:|---:|---|",
            md_cell(&w.title),
            ts[0].unit.label()
        );
        for t in &ts {
            let _ = writeln!(
                s,
                "| {} | {} | {} × {} s | {} | {} | {} | {} |",
                md_cell(&t.target),
                md_cell(&t.title()),
                t.intervals,
                short(t.interval_s),
                spread(t),
                worst(t, |p| p.p99_us),
                worst(t, |p| p.max_us),
                md_cell(&events(t))
            );
        }
    }
}
