//! report.md: the findings, the report card at the chosen weights and one table per workload,
//! for pasting into an issue, a wiki or a paper draft.

use std::fmt::Write as _;

use super::Exporter;
use crate::analysis::Metric;
use crate::fmt::{md_cell, mean_ci, shell_command};
use crate::{Report, ReportError};
use sanbench_units::fmt::short;

pub struct MarkdownExporter;

/// Columns of a workload table: (header, metric).
const COLUMNS: [(&str, Metric); 8] = [
    ("MB/s", Metric::MbPerS),
    ("IOPS", Metric::Iops),
    ("Mean latency µs", Metric::LatMeanUs),
    ("p99 µs", Metric::LatP99Us),
    ("IOPS per CPU %", Metric::IopsPerCpu),
    ("MB/s per CPU %", Metric::MbPerCpu),
    ("IOPS per W", Metric::IopsPerWatt),
    ("MB/s per W", Metric::MbPerWatt),
];

impl Exporter for MarkdownExporter {
    fn file_name(&self) -> &'static str {
        "report.md"
    }

    fn render(&self, r: &Report) -> Result<Vec<u8>, ReportError> {
        let c = r.cmp;
        let mut s = String::new();
        let _ = writeln!(s, "# sanbench comparison: {}\n", md_cell(&c.suite));
        if !c.suite_description.is_empty() {
            let _ = writeln!(s, "{}\n", md_cell(&c.suite_description));
        }
        let names: Vec<String> = c.targets.iter().map(|t| md_cell(&t.name)).collect();
        let _ = writeln!(
            s,
            "Run {} · sanbench {} · {} repetition{} · targets: {}\n",
            md_cell(&c.started_at),
            md_cell(&c.sanbench_version),
            c.repeat,
            if c.repeat == 1 { "" } else { "s" },
            names.join(", ")
        );
        if c.incomplete {
            s.push_str("> **Incomplete run**: it stopped before every cell ran.\n\n");
        }
        if let Some(text) = crate::unfinished(c) {
            let _ = writeln!(s, "> **Not finished**: {}\n", md_cell(&text));
        }
        s.push_str("## Key findings\n\n");
        if r.findings.is_empty() {
            let _ = writeln!(s, "{}", md_cell(&r.none_text()));
        }
        for f in &r.findings {
            let _ = writeln!(s, "- {}", md_cell(&f.text));
        }
        for c in &r.caveats {
            let _ = writeln!(s, "\n> **Warning**: {}", md_cell(c));
        }
        let _ = writeln!(
            s,
            "\n{}\n",
            md_cell(&format!(
                "{} {}",
                crate::findings::rounds_text(&r.design),
                crate::findings::method(r.design.min_effect)
            ))
        );
        s.push_str("## Report card\n\n| Rank | Target |");
        for cat in &r.card.categories {
            let _ = write!(s, " {} ({} %) |", cat.title, short(cat.weight));
        }
        s.push_str(" Total | Grade |\n|---:|---|");
        s.push_str(&"---:|".repeat(r.card.categories.len() + 2));
        s.push('\n');
        for (i, row) in r.card.rows.iter().enumerate() {
            let _ = write!(s, "| {} | {} |", i + 1, md_cell(&row.target));
            for cat in &r.card.categories {
                let v = row.scores.get(cat.key).map(|v| format!("{v:.0}"));
                let v = v.unwrap_or_else(|| "–".into());
                let _ = write!(s, " {}{} |", v, if cat.available { "" } else { " †" });
            }
            let _ = writeln!(s, " {:.0} | {} |", row.total, row.grade);
        }
        s.push_str(
            "\nScores: best target = 100 per category; total = weighted mean; \
             A ≥ 90, B ≥ 80, C ≥ 70, D ≥ 60, else F.",
        );
        if r.card.categories.iter().any(|c| !c.available) {
            s.push_str(" † not every target has this figure: left out of the total.");
        }
        s.push_str("\n\n## Results\n\nMean ± 95 % confidence interval over the repetitions; MB = 10^6 bytes. \
             Under each table: every pair's throughput ratio with its simultaneous interval \
             and the verdict for the pair's first target. Limited by: what limited the \
             cells (most rounds; 2/3 when not all agreed): init-cpu and host-cpu (the initiator \
             host's CPU) and queue (the generator) are not about the interconnect; link, \
             tgt-cpu, device and latency (the round trip) are.\n");
        let mut modeled = false;
        for w in &c.workloads {
            let _ = writeln!(
                s,
                "\n### {}\n\n`{}` · group {} · {}\n",
                md_cell(&w.title),
                md_cell(&w.id),
                md_cell(&w.group),
                md_cell(&w.spec.describe())
            );
            s.push_str("| Target |");
            for (h, _) in COLUMNS {
                let _ = write!(s, " {h} |");
            }
            s.push_str(" ≤ 1 ms | ≤ 2 ms | Limited by |\n|---|");
            s.push_str(&"---:|".repeat(COLUMNS.len() + 2));
            s.push_str("---|");
            s.push('\n');
            for t in &c.targets {
                let Some(st) = r.analysis.get(&w.id, &t.name) else {
                    let _ = writeln!(s, "| {} | not run |", md_cell(&t.name));
                    continue;
                };
                let _ = write!(s, "| {} |", md_cell(&t.name));
                for (_, m) in COLUMNS {
                    let mark = matches!(m, Metric::IopsPerWatt | Metric::MbPerWatt)
                        && st.modeled_power
                        && st.get(m).is_some();
                    modeled |= mark;
                    let _ = write!(
                        s,
                        " {}{} |",
                        mean_ci(st.get(m)),
                        if mark { "*" } else { "" }
                    );
                }
                let cum = |n: usize| -> String {
                    if st.ms_buckets.is_empty() {
                        "–".into()
                    } else {
                        format!("{:.1} %", st.ms_buckets.iter().take(n).sum::<f64>() * 100.0)
                    }
                };
                let limit = crate::headroom::cell_limit(c, &w.id, &t.name)
                    .map_or_else(|| "–".to_string(), |l| l.cell_text());
                let _ = writeln!(s, " {} | {} | {} |", cum(1), cum(2), limit);
            }
            verdicts(r, &w.id, &mut s);
        }
        if modeled {
            s.push_str("\n\\* modeled power (no meter): an estimate, not a measurement.\n");
        }
        block_layer(r, &mut s);
        curves(r, &mut s);
        super::markdown_timelines::timelines(r, &mut s);
        hosts(r, &mut s);
        verification(r, &mut s);
        let _ = writeln!(
            s,
            "\n## Reproduce\n\n```sh\n{}\n```",
            shell_command(&c.command)
        );
        Ok(s.into_bytes())
    }
}

/// Under a workload's table: each compared pair's throughput ratio, interval and verdict.
fn verdicts(r: &Report, workload: &str, s: &mut String) {
    let (figure, lines) = crate::questions::verdict_lines(&r.judgement, workload);
    if lines.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "\n| Pair A / B | {figure} ratio [simultaneous 90 % interval] | Verdict for A |\n|---|---:|---|"
    );
    for l in lines {
        let _ = writeln!(
            s,
            "| {} | {} | {} |",
            md_cell(&l.pair),
            md_cell(&l.ratio),
            md_cell(&l.verdict)
        );
    }
}

/// "## What the block layer cost": each block device against its passthrough device.
fn block_layer(r: &Report, s: &mut String) {
    if r.block_layer.is_empty() {
        return;
    }
    s.push_str(
        "\n## What the block layer cost\n\nA block device against its passthrough device (the \
         same transport and medium, around the kernel's block layer): the block device's figure \
         minus the passthrough device's, median of the rounds' differences (range).\n\n\
         | Workload | Block / passthrough | Mean latency | p50 | p99 | CPU per I/O | IOPS ratio | Rounds |\n\
         |---|---|---:|---:|---:|---:|---:|---:|\n",
    );
    use crate::block_layer::{fmt_ratio, fmt_us};
    for c in &r.block_layer {
        let _ = writeln!(
            s,
            "| {} | {} / {} | {} | {} | {} | {} | {} | {} |",
            md_cell(&c.workload),
            md_cell(&c.block),
            md_cell(&c.passthrough),
            fmt_us(&c.latency_mean_us),
            fmt_us(&c.latency_p50_us),
            fmt_us(&c.latency_p99_us),
            c.cpu_us_per_io.as_ref().map_or("–".into(), fmt_us),
            fmt_ratio(&c.iops_ratio),
            c.rounds
        );
    }
}

/// "## Per host": an MPI job's ranks, each with its own figures (the tables above are all
/// ranks merged).
fn hosts(r: &Report, s: &mut String) {
    let rows = crate::hosts::rows(r.cmp);
    if rows.is_empty() {
        return;
    }
    s.push_str(
        "\n## Per host\n\nEach MPI rank's own figures, mean over the repetitions (the tables \
         above merge all ranks: counts added, latency histograms merged).\n\n",
    );
    let _ = writeln!(s, "| {} |", crate::hosts::COLUMNS.join(" | "));
    s.push_str("|---|---|---:|---|---:|---:|---:|---:|---:|\n");
    for h in rows {
        let cells: Vec<String> = h.cells().iter().map(|c| md_cell(c)).collect();
        let _ = writeln!(s, "| {} |", cells.join(" | "));
    }
}

/// "## Data verification": per target, what was checked and what was bad.
fn verification(r: &Report, s: &mut String) {
    if r.verification.is_empty() {
        return;
    }
    s.push_str(
        "\n## Data verification\n\nEvery read checked against the generation of every \
         block written (`--verify`).\n\n| Target | Verified | Reads | Units | Bad units |\n\
         |---|---:|---:|---:|---|\n",
    );
    for t in &r.verification {
        let cells: Vec<String> = t.cells().iter().map(|c| md_cell(c)).collect();
        let _ = writeln!(s, "| {} |", cells.join(" | "));
    }
    for t in r
        .verification
        .iter()
        .filter(|t| !t.report.bad_blocks.is_empty())
    {
        let _ = writeln!(s, "\nFirst bad blocks of {}:\n", md_cell(&t.target));
        for b in &t.report.bad_blocks {
            let (expected, found) = crate::verification::expected_found(b);
            let _ = writeln!(
                s,
                "- `{:#x}` {}: expected {}, found {} (`{}`)",
                b.offset,
                b.class.label(),
                expected,
                found,
                b.excerpt
            );
        }
    }
}

/// "## Response time under load": the SPC-style table of every curve.
fn curves(r: &Report, s: &mut String) {
    let curves = crate::curve::curves(r.cmp);
    if curves.is_empty() {
        return;
    }
    s.push_str(
        "\n## Response time under load\n\nOpen loop at each share of the target's own \
         closed-loop maximum; response time runs from each I/O's intended issue time. \
         ✗ marks a point whose rate was missed by more than 2 % or whose issue lag p99 \
         passed its bound.\n",
    );
    for w in &r.cmp.workloads {
        let mine: Vec<_> = curves.iter().filter(|c| c.workload == w.id).collect();
        if mine.is_empty() {
            continue;
        }
        let _ = writeln!(
            s,
            "\n### {}\n\n| Target | Load | Asked IOPS | Achieved IOPS | Mean µs | p99 µs |\n\
             |---|---:|---:|---:|---:|---:|",
            md_cell(&w.title)
        );
        for c in &mine {
            for p in &c.points {
                let _ = writeln!(s, "| {} | {} |", md_cell(&c.target), p.cells().join(" | "));
            }
        }
        let least = crate::curve::least_response(&curves, &w.id);
        if !least.is_empty() {
            let parts: Vec<String> = least
                .iter()
                .map(|(t, us)| format!("{} {us:.1} µs", md_cell(t)))
                .collect();
            let _ = writeln!(
                s,
                "\nLeast response time (lowest level): {}.",
                parts.join(", ")
            );
        }
    }
}
