//! The response-time curves of `compare --curve` in the HTML report: per workload, a chart of
//! response time against achieved IOPS (mean and p99 of every target) and the SPC-style table.

use std::fmt::Write as _;

use crate::svg::{colour, line_chart, LineSeries};
use crate::Report;

use crate::fmt::html as esc;

/// Response time vs IOPS per workload (`--curve`), mean and p99 of every target, then the
/// SPC-style table.
pub fn curves(r: &Report, s: &mut String) {
    let curves = crate::curve::curves(r.cmp);
    if curves.is_empty() {
        return;
    }
    s.push_str(
        "<section id=\"curves\"><h2>Response time under load</h2>\n<p class=\"note\">Open loop \
         at each share of the target's own closed-loop maximum; response time runs from each \
         I/O's intended issue time. ✗: rate missed by more than 2 % or issue lag p99 past its \
         bound.</p>\n",
    );
    for w in &r.cmp.workloads {
        let mine: Vec<_> = curves.iter().filter(|c| c.workload == w.id).collect();
        if mine.is_empty() {
            continue;
        }
        let mut series = Vec::new();
        for (i, c) in mine.iter().enumerate() {
            let ti = r
                .cmp
                .targets
                .iter()
                .position(|t| t.name == c.target)
                .unwrap_or(i);
            for (label, f) in [
                (
                    "mean",
                    (|p: &crate::curve::Point| p.mean_us) as fn(&crate::curve::Point) -> f64,
                ),
                ("p99", |p: &crate::curve::Point| p.p99_us),
            ] {
                series.push(LineSeries {
                    name: format!("{} {label}", c.target),
                    colour: colour(ti),
                    points: c.points.iter().map(|p| (p.achieved_iops, f(p))).collect(),
                });
            }
        }
        s.push_str(&line_chart(
            &format!("Response time vs IOPS: {}", w.title),
            "achieved IOPS",
            "response time µs",
            &series,
            false,
        ));
        s.push_str(
            "\n<table><thead><tr><th>Target</th><th>Load</th><th>Asked IOPS</th>\
             <th>Achieved IOPS</th><th>Mean µs</th><th>p99 µs</th></tr></thead><tbody>\n",
        );
        for c in &mine {
            for p in &c.points {
                let _ = writeln!(
                    s,
                    "<tr><td>{}</td><td>{}</td></tr>",
                    esc(&c.target),
                    p.cells().join("</td><td>")
                );
            }
        }
        s.push_str("</tbody></table>\n");
    }
    s.push_str("</section>\n");
}
