//! The run's table: a row per target (and per op where several ran), its columns as wide as
//! their cells and fitted to the terminal. output.rs puts it in the run's summary.

use std::fmt::Write;

use sanbench_engine::result::TargetResult;
use sanbench_units::fmt::si;
use sanbench_units::fmt::us_column as lat;

/// One row of the run's table: a name, the figures, and what limited the window.
pub(crate) struct Row {
    pub(crate) name: String,
    pub(crate) figs: Vec<String>,
    pub(crate) limit: String,
}

const HEADERS: [&str; 9] = [
    "IOPS", "MB/s", "MiB/s", "mean", "p50", "p99", "p99.9", "max µs", "Little",
];
/// The column dropped first when the table is wider than the terminal.
const MIB_COLUMN: usize = 2;

/// A row's figures: rate, bandwidth in both units, the latency columns.
pub(crate) fn figs(
    iops: f64,
    mb: f64,
    mib: f64,
    l: &sanbench_engine::result::LatencyUs,
) -> Vec<String> {
    vec![
        si(iops),
        format!("{mb:.1}"),
        format!("{mib:.1}"),
        lat(l.mean),
        lat(l.p50),
        lat(l.p99),
        lat(l.p999),
        lat(l.max),
    ]
}

pub(crate) fn target_row(name: &str, r: &TargetResult) -> Row {
    let mut f = figs(r.iops, r.mb_per_s, r.mib_per_s, &r.latency_us);
    f.push(
        r.littles_law
            .deviation
            .map(|d| format!("{:.0}%", d * 100.0))
            .unwrap_or_else(|| "-".into()),
    );
    Row {
        name: name.into(),
        figs: f,
        limit: r
            .bottleneck
            .as_ref()
            .map_or("-", |b| b.verdict.short())
            .into(),
    }
}

/// The rows laid out in columns as wide as their widest cell; wider than `width`, the
/// MiB/s column goes first, then long names are cut from the left (`…` and their end).
pub(crate) fn table(rows: &[Row], width: usize) -> String {
    let count = |s: &str| s.chars().count();
    let mut keep: Vec<bool> = vec![true; HEADERS.len()];
    let fig_w: Vec<usize> = (0..HEADERS.len())
        .map(|i| {
            rows.iter()
                .filter_map(|r| r.figs.get(i))
                .map(|s| count(s))
                .chain([count(HEADERS[i])])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let limit_w = rows
        .iter()
        .map(|r| count(&r.limit))
        .chain([count("limit")])
        .max()
        .unwrap_or(0);
    let name_w = rows
        .iter()
        .map(|r| count(&r.name))
        .chain([count("target")])
        .max()
        .unwrap_or(0);
    let total = |keep: &[bool], name_w: usize| {
        name_w
            + fig_w
                .iter()
                .zip(keep)
                .filter(|(_, k)| **k)
                .map(|(w, _)| w + 1)
                .sum::<usize>()
            + 2
            + limit_w
    };
    if total(&keep, name_w) > width {
        keep[MIB_COLUMN] = false;
    }
    let name_w = name_w.min(width.saturating_sub(total(&keep, 0)).max(12));
    let cut = |s: &str| -> String {
        let n = count(s);
        if n <= name_w {
            s.to_string()
        } else {
            let tail: String = s.chars().skip(n - (name_w - 1)).collect();
            format!("…{tail}")
        }
    };
    let mut out = String::new();
    let header = Row {
        name: "target".into(),
        figs: HEADERS.iter().map(|h| h.to_string()).collect(),
        limit: "limit".into(),
    };
    for r in std::iter::once(&header).chain(rows) {
        let mut line = format!("{:<name_w$}", cut(&r.name));
        for (i, w) in fig_w.iter().enumerate().filter(|(i, _)| keep[*i]) {
            let _ = write!(line, " {:>w$}", r.figs.get(i).map_or("", |s| s.as_str()));
        }
        if !r.limit.is_empty() {
            let _ = write!(line, "  {}", r.limit);
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The run's table fits the width: as wide as its cells when they fit, MiB/s dropped
    /// first, then a long name cut from the left; every row's columns line up.
    #[test]
    fn the_run_table_fits_the_width() {
        let row = |name: &str, limit: &str| Row {
            name: name.into(),
            figs: vec![
                "1.53M".into(),
                "6286.1".into(),
                "5994.9".into(),
                "1.4".into(),
                "0.1".into(),
                "3.5".into(),
                "91.9".into(),
                "76520".into(),
                "3%".into(),
            ],
            limit: limit.into(),
        };
        let long = "/tmp/some/very/long/path/name/of/a/target/file.img";
        let rows = vec![row("mem:64M", "-"), row(long, "latency")];
        let wide = table(&rows, 200);
        assert!(wide.contains("MiB/s") && wide.contains(long), "{wide}");
        for width in [100, 80, 70] {
            let t = table(&rows, width);
            for l in t.lines() {
                assert!(l.chars().count() <= width, "{width}: {l:?}\n{t}");
            }
            assert!(!t.contains("MiB/s"), "{t}");
            assert!(t.contains("…") && t.contains("file.img"), "{t}");
            // Columns line up: every row's IOPS ends where the header's does.
            let end = |l: &str, what: &str| {
                l.find(what)
                    .map(|i| l[..i].chars().count() + what.chars().count())
            };
            let lines: Vec<&str> = t.lines().collect();
            assert_eq!(end(lines[0], "IOPS"), end(lines[1], "1.53M"), "{t}");
            assert_eq!(end(lines[1], "1.53M"), end(lines[2], "1.53M"), "{t}");
        }
    }
}
