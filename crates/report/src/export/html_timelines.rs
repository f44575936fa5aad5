//! The report's "Timelines" section: per workload, small multiples of every cell's timeline
//! (one row per target, one chart per round, then its curve points), on scales the workload's
//! charts share. The first workload is open, the others one click away, so that a comparison
//! of many cells stays readable.

use std::fmt::Write as _;

use crate::fmt::html as esc;
use crate::svg::colour;
use crate::svg_timeline::chart;
use crate::timeline::{by_workload, scale, MAX_POINTS};
use crate::Report;

/// The methods note: what is drawn and how many intervals become a point.
pub const METHOD: &str = "Per cell, per interval of --log-interval (docs/MEASURE.md, \
\"Intervals\"): on top, throughput (IOPS; MB/s for bandwidth workloads); below, latency on a \
log scale: p50 to p99 as the dark band, p99 to max as the light one (reads and writes \
together; response time in an open loop). Small multiples: one row per target, one chart per \
round and then per curve point, scales shared within a workload so that charts compare by \
eye. Shaded: the ramp before the window (grey, not measured), the steady-state window (green; \
red when the check found it not steady), stalls (red). Dashed: faults (orange), path \
changes (purple), failed I/O (red), the target's preconditioning (grey, on its first cell); a \
horizontal dashed line is a curve point's asked rate.";

pub fn timelines(r: &Report, s: &mut String) {
    let c = r.cmp;
    let per = by_workload(c);
    if per.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "<h2 id=\"timelines\">Timelines</h2>\n<p class=\"note\">{} A chart of more than {} \
         intervals draws consecutive intervals as one point: throughput over their span, p50 \
         the median of theirs, p99 and max the highest, so a tail event is never averaged \
         away.</p>",
        esc(METHOD),
        MAX_POINTS
    );
    for (i, (w, ts)) in per.iter().enumerate() {
        let sc = scale(ts);
        let _ = writeln!(
            s,
            "<details class=\"tl-workload\" data-workload=\"{}\"{}><summary>{} <span class=\"note\">({} \
             cell{}, {} per interval)</span></summary>",
            esc(&w.id),
            if i == 0 { " open" } else { "" },
            esc(&w.title),
            ts.len(),
            if ts.len() == 1 { "" } else { "s" },
            ts[0].unit.label()
        );
        for (ti, t) in c.targets.iter().enumerate() {
            let mine: Vec<_> = ts.iter().filter(|x| x.target == t.name).collect();
            if mine.is_empty() {
                continue;
            }
            let _ = write!(
                s,
                "<div class=\"tl-row\" data-target=\"{}\"><div class=\"tl-name\">{}</div>\
                 <div class=\"tl-cells\">",
                esc(&t.name),
                esc(&t.name)
            );
            for x in mine {
                s.push_str(&chart(x, &sc, colour(ti)));
            }
            s.push_str("</div></div>\n");
        }
        s.push_str("</details>\n");
    }
}
