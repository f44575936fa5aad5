//! The chart sections of report.html: bars per workload group, latency percentiles, the
//! Demartek 1 ms bucket table, queue-depth scaling and the per-second series.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use sanbench_doc::run::LatencyUs;
use sanbench_doc::{Comparison, WorkloadEntry};
use sanbench_stats::mean_ci95;

use crate::analysis::{flavour, Flavour, Metric};
use crate::fmt::html as esc;
use crate::svg::{bar_chart, colour, line_chart, BarSeries, LineSeries};
use crate::Report;

/// Workload groups in order of first appearance.
fn groups(c: &Comparison) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for w in &c.workloads {
        if !out.contains(&w.group.as_str()) {
            out.push(&w.group);
        }
    }
    out
}

/// A bar chart of one metric over some workloads, or `None` when no target has the figure.
fn metric_chart(r: &Report, title: &str, ws: &[&WorkloadEntry], m: Metric) -> Option<String> {
    let c = r.cmp;
    let power = matches!(m, Metric::IopsPerWatt | Metric::MbPerWatt);
    let mut any = false;
    let series: Vec<BarSeries> = c
        .targets
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let mut modeled = false;
            let values = ws
                .iter()
                .map(|w| {
                    let st = r.analysis.get(&w.id, &t.name)?;
                    let v = st.get(m)?;
                    modeled |= power && st.modeled_power;
                    any = true;
                    Some((v.mean, v.ci95))
                })
                .collect();
            BarSeries {
                name: if modeled {
                    format!("{} (modeled)", series_name(t))
                } else {
                    series_name(t)
                },
                colour: colour(i),
                values,
            }
        })
        .collect();
    let labels: Vec<String> = ws.iter().map(|w| w.title.clone()).collect();
    any.then(|| bar_chart(title, m.label(), &labels, &series))
}

/// Throughput and efficiency bars.
pub fn throughput(r: &Report, s: &mut String) {
    let c = r.cmp;
    s.push_str("<h2 id=\"charts\">Throughput and efficiency</h2>\n");
    s.push_str(
        "<p class=\"note\">Bars are means over the repetitions; whiskers are 95 % confidence \
         intervals. MB = 10<sup>6</sup> bytes.</p>\n<div class=\"charts\">\n",
    );
    for g in groups(c) {
        let ws: Vec<&WorkloadEntry> = c.workloads.iter().filter(|w| w.group == g).collect();
        for (m, what) in [(Metric::MbPerS, "Bandwidth"), (Metric::Iops, "IOPS")] {
            if let Some(svg) = metric_chart(r, &format!("{what}: {g} tests"), &ws, m) {
                s.push_str(&svg);
                s.push('\n');
            }
        }
    }
    let mut notes = Vec::new();
    for (fl, name) in [(Flavour::Bandwidth, "bandwidth"), (Flavour::Io, "I/O-rate")] {
        let ws: Vec<&WorkloadEntry> = c.workloads.iter().filter(|w| flavour(w) == fl).collect();
        if ws.is_empty() {
            continue;
        }
        let (cpu, watt) = match fl {
            Flavour::Bandwidth => (Metric::MbPerCpu, Metric::MbPerWatt),
            Flavour::Io => (Metric::IopsPerCpu, Metric::IopsPerWatt),
        };
        let label = if fl == Flavour::Io && ws.iter().all(|w| w.group == "database") {
            "Database"
        } else if fl == Flavour::Io {
            "IOPS"
        } else {
            "Bandwidth"
        };
        for (m, what) in [(cpu, "CPU efficiency"), (watt, "power efficiency")] {
            match metric_chart(r, &format!("{label} {what}"), &ws, m) {
                Some(svg) => {
                    s.push_str(&svg);
                    s.push('\n');
                }
                None => notes.push(format!("No {what} figures for the {name} tests.")),
            }
        }
    }
    s.push_str("</div>\n");
    for n in notes {
        let _ = writeln!(s, "<p class=\"note\">{}</p>", esc(&n));
    }
}

/// Mean ± CI of each percentile over the repetitions of a cell.
fn percentiles(c: &Comparison, w: &str, t: &str) -> Vec<Option<(f64, f64)>> {
    let lats: Vec<&LatencyUs> = c
        .cells_of(w, t)
        .filter(|c| c.result.ios > 0)
        .map(|c| &c.result.latency_us)
        .collect();
    let pick: [fn(&LatencyUs) -> f64; 4] = [|l| l.p50, |l| l.p90, |l| l.p99, |l| l.p999];
    pick.iter()
        .map(|f| {
            let xs: Vec<f64> = lats
                .iter()
                .map(|l| f(l))
                .filter(|x| x.is_finite())
                .collect();
            (!xs.is_empty()).then(|| {
                let m = mean_ci95(&xs);
                (m.mean, m.ci95)
            })
        })
        .collect()
}

/// Percentile charts and the 1 ms bucket table per workload.
pub fn latency(r: &Report, s: &mut String) {
    let c = r.cmp;
    s.push_str("<h2 id=\"latency\">Latency</h2>\n<div class=\"charts\">\n");
    let labels: Vec<String> = ["p50", "p90", "p99", "p99.9"].map(String::from).to_vec();
    for w in &c.workloads {
        let series: Vec<BarSeries> = c
            .targets
            .iter()
            .enumerate()
            .map(|(i, t)| BarSeries {
                name: series_name(t),
                colour: colour(i),
                values: percentiles(c, &w.id, &t.name),
            })
            .collect();
        if series.iter().any(|x| x.values.iter().any(Option::is_some)) {
            s.push_str(&bar_chart(
                &format!("Latency percentiles: {}", w.title),
                "µs",
                &labels,
                &series,
            ));
            s.push('\n');
        }
    }
    s.push_str("</div>\n<h3>Share of I/Os per 1 ms latency bucket</h3>\n");
    s.push_str(
        "<p class=\"note\">As in the Demartek study: percent of I/Os completing in each 1 ms \
         bucket from 0 to 23 ms and at or beyond 24 ms, with the cumulative share within 1 and \
         2 ms (mean over repetitions).</p>\n",
    );
    for w in &c.workloads {
        let _ = write!(
            s,
            "<h3>{}</h3>\n<div class=\"scroll\"><table class=\"buckets\"><thead><tr><th>Target</th><th>≤ 1 ms</th><th>≤ 2 ms</th>",
            esc(&w.title)
        );
        for k in 0..24 {
            let _ = write!(s, "<th>{k}–{}</th>", k + 1);
        }
        s.push_str("<th>≥ 24</th></tr></thead><tbody>\n");
        for t in &c.targets {
            let Some(st) = r.analysis.get(&w.id, &t.name) else {
                continue;
            };
            let b = &st.ms_buckets;
            let _ = write!(s, "<tr><td class=\"name\">{}</td>", esc(&t.name));
            if b.is_empty() {
                s.push_str("<td colspan=\"27\" class=\"zero\">no histogram</td></tr>\n");
                continue;
            }
            for n in [1, 2] {
                let _ = write!(
                    s,
                    "<td><b>{:.1}</b></td>",
                    b.iter().take(n).sum::<f64>() * 100.0
                );
            }
            for k in 0..25 {
                let v = b.get(k).copied().unwrap_or(0.0) * 100.0;
                if v == 0.0 {
                    s.push_str("<td class=\"zero\">0</td>");
                } else {
                    let _ = write!(s, "<td>{v:.1}</td>");
                }
            }
            s.push_str("</tr>\n");
        }
        s.push_str("</tbody></table></div>\n");
    }
}

/// Workloads equal except for their queue depth, with at least two depths: IOPS vs QD.
pub fn qd_groups(c: &Comparison) -> Vec<Vec<&WorkloadEntry>> {
    let mut by_key: BTreeMap<String, Vec<&WorkloadEntry>> = BTreeMap::new();
    let mut order = Vec::new();
    for w in &c.workloads {
        let mut spec = w.spec.clone();
        spec.qd = 0;
        spec.name = None;
        let key = serde_json::to_string(&(spec, w.targets_at_once)).unwrap_or_default();
        if !by_key.contains_key(&key) {
            order.push(key.clone());
        }
        by_key.entry(key).or_default().push(w);
    }
    order
        .into_iter()
        .filter_map(|k| by_key.remove(&k))
        .filter(|ws| {
            let mut qds: Vec<u32> = ws.iter().map(|w| w.spec.qd).collect();
            qds.sort_unstable();
            qds.dedup();
            qds.len() >= 2
        })
        .collect()
}

pub fn scaling(r: &Report, s: &mut String) {
    let c = r.cmp;
    let groups = qd_groups(c);
    if groups.is_empty() {
        return;
    }
    s.push_str("<h2 id=\"qd-scaling\">Queue-depth scaling</h2>\n<div class=\"charts\">\n");
    for ws in groups {
        let series: Vec<LineSeries> = c
            .targets
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let mut points: Vec<(f64, f64)> = ws
                    .iter()
                    .filter_map(|w| {
                        let m = r.analysis.metric(&w.id, &t.name, Metric::Iops)?;
                        Some((w.spec.qd as f64, m.mean))
                    })
                    .collect();
                points.sort_by(|a, b| a.0.total_cmp(&b.0));
                LineSeries {
                    name: series_name(t),
                    colour: colour(i),
                    points,
                }
            })
            .collect();
        let ids: Vec<&str> = ws.iter().map(|w| w.id.as_str()).collect();
        s.push_str(&line_chart(
            &format!("IOPS vs queue depth: {}", ids.join(", ")),
            "outstanding I/Os per target per worker",
            "IOPS",
            &series,
            true,
        ));
        s.push('\n');
    }
    s.push_str("</div>\n");
}

/// Per-second IOPS of the first repetition, one chart per workload, one shown at a time.
pub fn timeseries(r: &Report, s: &mut String) {
    let c = r.cmp;
    if c.cells.iter().all(|c| c.result.timeseries.is_empty()) {
        return;
    }
    let chosen = r
        .options
        .timeseries_workload
        .clone()
        .filter(|id| c.workloads.iter().any(|w| &w.id == id))
        .or_else(|| c.workloads.first().map(|w| w.id.clone()))
        .unwrap_or_default();
    s.push_str(
        "<h2 id=\"timeseries\">IOPS over time</h2>\n<p><label>Workload: <select id=\"ts-select\">",
    );
    for w in &c.workloads {
        let _ = write!(
            s,
            "<option value=\"{}\"{}>{}</option>",
            esc(&w.id),
            if w.id == chosen { " selected" } else { "" },
            esc(&w.title)
        );
    }
    s.push_str("</select></label> <span class=\"note\">first repetition, one point per second of the measured window</span></p>\n");
    for w in &c.workloads {
        let series: Vec<LineSeries> = c
            .targets
            .iter()
            .enumerate()
            .map(|(i, t)| LineSeries {
                name: series_name(t),
                colour: colour(i),
                points: c
                    .cells_of(&w.id, &t.name)
                    .min_by_key(|c| c.repeat)
                    .map(|cell| {
                        cell.result
                            .timeseries
                            .iter()
                            .map(|p| (p.t as f64, p.iops))
                            .collect()
                    })
                    .unwrap_or_default(),
            })
            .collect();
        let _ = writeln!(
            s,
            "<div class=\"ts-chart\" data-workload=\"{}\"{}>{}</div>",
            esc(&w.id),
            if w.id == chosen { "" } else { " hidden" },
            line_chart(
                &format!("IOPS per second: {}", w.title),
                "seconds into the measured window",
                "IOPS",
                &series,
                false
            )
        );
    }
}

/// The forest plots: one per family of questions (throughput; then tail latency and
/// efficiency), so that what the findings rest on, and what they leave undecided, is seen.
pub fn forest(r: &Report, s: &mut String) {
    let qs = &r.judgement.questions;
    if qs.is_empty() {
        return;
    }
    let pct = sanbench_units::fmt::short(r.design.min_effect * 100.0);
    let _ = writeln!(
        s,
        "<h2 id=\"questions\">Every question</h2>\n<p class=\"note\">Each row is one workload \
         and pair A / B: the geometric-mean ratio (dot) and its simultaneous interval \
         (line) on a log scale, oriented so that right of 1 favours A (for p99 latency B's \
         latency over A's). The shaded band is ± {pct} %: a whole interval beyond it is a \
         difference (filled dot, green when A is better, red when B is), a whole interval \
         inside it equivalence (diamond); anything else is inconclusive (hollow dot). An arrow \
         at the edge marks an interval that runs off the axis or is unbounded (too few \
         rounds).</p>"
    );
    for (family, title, axis) in [
        (
            "primary",
            "Throughput (primary questions)",
            "A / B, MB/s or IOPS",
        ),
        (
            "secondary",
            "p99 latency and efficiency (secondary questions)",
            "A's advantage over B",
        ),
        (
            "failover",
            "Failover stall (cells with faults)",
            "B's stall over A's",
        ),
    ] {
        let rows = crate::forest::rows(r.cmp, family, qs);
        if rows.is_empty() {
            continue;
        }
        let _ = writeln!(
            s,
            "<div class=\"scroll\" id=\"forest-{family}\">{}</div>",
            crate::forest::forest_plot(title, axis, &rows, r.design.min_effect)
        );
    }
}

/// A target's label in chart legends: its name, and the lab link it sits behind (rate, MTU,
/// offloads, switched) so that "1 Gb vs 10 Gb" reads from the chart itself.
pub(crate) fn series_name(t: &sanbench_doc::TargetEntry) -> String {
    let Some(l) = &t.link else {
        return t.name.clone();
    };
    let mut parts = Vec::new();
    parts.push(sanbench_units::fmt::bit_rate(l.rate_bits as f64));
    parts.push(format!("MTU {}", l.mtu));
    if !l.offload {
        parts.push("offloads off".into());
    }
    if l.switched {
        parts.push("switched".into());
    }
    if parts.is_empty() {
        t.name.clone()
    } else {
        format!("{} [{}]", t.name, parts.join(", "))
    }
}

#[cfg(test)]
mod link_tests {
    use super::series_name;
    use sanbench_doc::TargetEntry;

    #[test]
    fn legends_name_the_lab_link() {
        let mut t = TargetEntry {
            name: "nbd@one".into(),
            ..TargetEntry::default()
        };
        assert_eq!(series_name(&t), "nbd@one");
        let link = |rate_bits: u64, mtu: u32, offload: bool, switched: bool| {
            Some(sanbench_doc::compare::LinkInfo {
                name: "one".into(),
                rate_bits,
                mtu,
                offload,
                switched,
            })
        };
        t.link = link(1_000_000_000, 9000, false, true);
        assert_eq!(
            series_name(&t),
            "nbd@one [1 Gbit/s, MTU 9000, offloads off, switched]"
        );
        t.link = link(100_000_000, 1500, true, false);
        assert_eq!(series_name(&t), "nbd@one [100 Mbit/s, MTU 1500]");
    }
}
