//! The report's "Disruption" section: per workload whose cells saw a fault or a stall, a
//! table of what each cell's disruption measured, and for each target the first such cell's
//! timeline (completions per 10 ms as IOPS, all paths and each path) with its events marked.

use std::fmt::Write as _;

use sanbench_doc::disruption::Disruption;
use sanbench_doc::Cell;

use super::html_charts::series_name;
use crate::fmt::html as esc;
use crate::svg::{colour, line_chart_marked, LineSeries, Mark};
use crate::Report;
use sanbench_units::fmt::num;

/// Most points a timeline chart draws (10 ms bins are averaged in groups beyond it).
const MAX_POINTS: usize = 3000;

fn ms(v: Option<f64>) -> String {
    match v {
        None => "-".into(),
        Some(v) if v >= 1000.0 => format!("{:.2} s", v / 1000.0),
        Some(v) => format!("{v:.0} ms"),
    }
}

pub fn disruption(r: &Report, s: &mut String) {
    let c = r.cmp;
    if c.cells.iter().all(|c| c.result.disruption.is_none()) {
        return;
    }
    s.push_str(
        "<h2 id=\"disruption\">Disruption</h2>\n<p class=\"note\">Cells in which a fault was \
         fired or I/O stalled. <em>Stall</em>: the longest span with I/O in flight and no \
         completion on any stream; <em>detected</em> and <em>failed over</em>: from the first \
         fault to the first path taken out and to the first reissued I/O completed on another \
         path; <em>back</em>: until throughput was again within 10 % of its pre-fault level \
         (<em>held</em>: the fraction kept meanwhile). Where cells fired faults, each cell's \
         longest stall is a failover question (lower is better), judged with half of what \
         the secondary family has. Definitions: docs/MEASURE.md, \"Disruption\".</p>\n",
    );
    for w in &c.workloads {
        let cells: Vec<&Cell> = c
            .cells
            .iter()
            .filter(|x| x.workload == w.id && x.result.disruption.is_some())
            .collect();
        if cells.is_empty() {
            continue;
        }
        let _ = writeln!(s, "<h3>{}</h3>", esc(&w.title));
        table(&cells, s);
        for (ti, t) in c.targets.iter().enumerate() {
            let Some(cell) = cells
                .iter()
                .filter(|x| x.target == t.name)
                .min_by_key(|x| (x.round.unwrap_or(x.repeat), x.load_pct.is_some()))
            else {
                continue;
            };
            if let Some(d) = &cell.result.disruption {
                let title = format!(
                    "{}: {} (round {})",
                    series_name(t),
                    w.title,
                    cell.round.unwrap_or(cell.repeat) + 1
                );
                let _ = writeln!(
                    s,
                    "<div class=\"disruption-chart\">{}</div>",
                    chart(&title, d, ti)
                );
            }
        }
    }
}

fn table(cells: &[&Cell], s: &mut String) {
    s.push_str(
        "<table>\n<thead><tr><th>Target</th><th>Round</th><th>Load</th><th>Cause</th>\
         <th>Stall</th><th>Detected</th><th>Failed over</th><th>Back</th><th>Held</th>\
         <th>Reissued</th><th>Failed</th><th>Worst latency</th><th>Catch-up I/Os</th>\
         <th>Bad blocks</th></tr></thead>\n<tbody>\n",
    );
    for cell in cells {
        let Some(d) = &cell.result.disruption else {
            continue;
        };
        let back = match (d.pre_fault_iops, d.recovered_ms) {
            (Some(_), None) => "not in the window".into(),
            (_, v) => ms(v),
        };
        let _ = writeln!(
            s,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&cell.target),
            cell.round.unwrap_or(cell.repeat) + 1,
            cell.load_pct
                .map_or("closed loop".into(), |p| format!("{p:.0} % open loop")),
            esc(&d.cause),
            ms(Some(d.stall_ms)),
            ms(d.detected_ms),
            ms(d.failover_ms),
            back,
            d.degraded_ratio.map_or("-".into(), |v| format!("{v:.2}x")),
            d.reissued,
            d.failed,
            ms(Some(d.worst_latency_ms)),
            d.catch_up
                .as_ref()
                .map_or("-".into(), |c| c.ios.to_string()),
            d.bad_blocks.map_or("-".into(), |v| v.to_string()),
        );
    }
    s.push_str("</tbody>\n</table>\n");
}

/// IOPS per bin (averaged over groups of bins when there are many), as (seconds, IOPS).
fn points(bins: &[u32], d: &Disruption) -> Vec<(f64, f64)> {
    let g = bins.len().div_ceil(MAX_POINTS).max(1);
    let bin_s = d.bin_ms as f64 / 1000.0;
    bins.chunks(g)
        .enumerate()
        .map(|(i, ch)| {
            let mean = ch.iter().map(|&c| c as f64).sum::<f64>() / ch.len() as f64;
            (d.from_ms / 1000.0 + (i * g) as f64 * bin_s, mean / bin_s)
        })
        .collect()
}

pub(crate) fn chart(title: &str, d: &Disruption, target_index: usize) -> String {
    let mut series = vec![LineSeries {
        name: "all paths".into(),
        colour: colour(target_index),
        points: points(&d.completions, d),
    }];
    for (i, p) in d.paths.iter().enumerate() {
        series.push(LineSeries {
            name: format!("path {i}"),
            colour: colour(target_index + 1 + i),
            points: points(p, d),
        });
    }
    // One mark per kind of event and path (each worker reports its own).
    let mut marks: Vec<Mark> = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for e in &d.events {
        let key = (e.event.clone(), e.path, e.link.clone(), e.detail.clone());
        if e.event == "reconnect_failed" || !seen.insert(key) {
            continue;
        }
        let label = match e.event.as_str() {
            "fault" => format!(
                "{} {}",
                e.link.as_deref().unwrap_or("?"),
                e.detail.as_deref().unwrap_or("")
            ),
            other => format!("path {} {}", e.path.unwrap_or(0), other.replace('_', " ")),
        };
        let colour = match e.event.as_str() {
            "fault" => "#d55e00",
            "failed" => "#cc79a7",
            "failed_over" => "#009e73",
            _ => "#0072b2",
        };
        marks.push(Mark {
            x: e.offset_ms / 1000.0,
            label,
            colour,
        });
    }
    if d.stall_ms > 0.0 {
        marks.push(Mark {
            x: (d.stall_start_ms + d.stall_ms) / 1000.0,
            label: format!("stall {} ms ends", num(d.stall_ms)),
            colour: "#555555",
        });
    }
    line_chart_marked(
        title,
        "seconds into the measured window",
        "IOPS (per 10 ms)",
        &series,
        false,
        &marks,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use sanbench_doc::disruption::Event;

    #[test]
    fn the_chart_marks_each_event_once_and_scales_bins_to_iops() {
        let d = Disruption {
            cause: "fault".into(),
            bin_ms: 10,
            from_ms: 0.0,
            completions: vec![20, 20, 0, 0, 10, 10],
            paths: vec![vec![10, 10, 0, 0, 10, 10], vec![10, 10, 0, 0, 0, 0]],
            events: ["fault", "failed", "failed", "failed_over"]
                .iter()
                .enumerate()
                .map(|(i, e)| Event {
                    offset_ms: 20.0 + i as f64,
                    event: e.to_string(),
                    path: (*e != "fault").then_some(1),
                    worker: Some(i),
                    link: (*e == "fault").then(|| "b".to_string()),
                    detail: (*e == "fault").then(|| "down".to_string()),
                    ..Event::default()
                })
                .collect(),
            stall_ms: 20.0,
            stall_start_ms: 20.0,
            ..Disruption::default()
        };
        let svg = chart("<t>", &d, 0);
        assert_eq!(svg.matches("class=\"mark\"").count(), 4, "{svg}");
        assert!(svg.contains("b down"));
        assert!(svg.contains("path 1 failed over"));
        assert!(!svg.contains("<t>"));
        // 20 completions in 10 ms: 2,000 IOPS at the top of the axis.
        assert_eq!(points(&d.completions, &d)[0], (0.0, 2000.0));
        let long = vec![1u32; 7000];
        assert!(points(&long, &d).len() <= MAX_POINTS);
    }
}
