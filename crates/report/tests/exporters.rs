//! Exporter output for the fixture comparison: Markdown and CSV against checked-in snapshots
//! (`UPDATE_SNAPSHOTS=1 cargo test -p sanbench-report` rewrites them after a deliberate
//! change), structural checks of the HTML and JSON, and render_dir.

use std::path::PathBuf;

use sanbench_report::export::CSV_HEADER;
use sanbench_report::{exporter, render_dir, Options, Report};
use sanbench_store::fixture::sample_comparison;

fn snapshot(name: &str, actual: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/snapshots")
        .join(name);
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (UPDATE_SNAPSHOTS=1 creates it)", path.display()));
    if expected != actual {
        let line = expected
            .lines()
            .zip(actual.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(expected.lines().count().min(actual.lines().count()));
        panic!(
            "{name} differs from its snapshot at line {}:\nexpected: {:?}\nactual:   {:?}",
            line + 1,
            expected.lines().nth(line),
            actual.lines().nth(line)
        );
    }
}

fn render(format: &str) -> String {
    let cmp = sample_comparison();
    let report = Report::new(&cmp, &Options::default());
    String::from_utf8(exporter(format).unwrap().render(&report).unwrap()).unwrap()
}

#[test]
fn markdown_matches_snapshot() {
    let md = render("markdown");
    assert!(md.contains("## Key findings"));
    // Modeled power makes no findings of its own (it restates CPU), and the method says so.
    assert!(md.contains("modeled power is not asked (the model restates CPU)"));
    assert!(md
        .lines()
        .all(|l| !(l.starts_with("- ") && l.contains("(modeled power)"))));
    // Every throughput question's verdict sits under its workload's table.
    let cmp = sample_comparison();
    let report = Report::new(&cmp, &Options::default());
    for q in report
        .judgement
        .questions
        .iter()
        .filter(|q| q.family == "primary")
    {
        let esc = sanbench_report::fmt::md_cell;
        let line = format!(
            "| {} / {} | {} {} | {} |",
            esc(&q.a),
            esc(&q.b),
            sanbench_report::fmt_ratio(q.ratio),
            sanbench_report::findings::fmt_interval(q.ci_low, q.ci_high),
            q.verdict
        );
        let at = md.find(&line).unwrap_or_else(|| panic!("{line}"));
        let title = &cmp
            .workloads
            .iter()
            .find(|w| w.id == q.workload)
            .unwrap()
            .title;
        let heading = md[..at].rfind("\n### ").unwrap();
        assert!(
            md[heading..].starts_with(&format!("\n### {title}\n")),
            "{line}"
        );
    }
    snapshot("report.md", &md);
}

#[test]
fn csv_matches_snapshot() {
    let csv = render("csv");
    let mut lines = csv.lines();
    assert_eq!(lines.next(), Some(CSV_HEADER));
    let cols = CSV_HEADER.split(',').count();
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), sample_comparison().cells.len());
    for row in &rows {
        // The fixture has no quoted fields, so commas count columns.
        assert_eq!(row.split(',').count(), cols, "{row}");
    }
    snapshot("results.csv", &csv);
}

/// Names with commas, quotes and line breaks are quoted (RFC 4180), and a CSV reader gets
/// them back whole.
#[test]
fn csv_quotes_what_needs_it() {
    let mut cmp = sample_comparison();
    let odd = "NBD, \"fast\"\nnode";
    let first = cmp.cells[0].target.clone();
    for c in cmp.cells.iter_mut().filter(|c| c.target == first) {
        c.target = odd.into();
    }
    let report = Report::new(&cmp, &Options::default());
    let csv = exporter("csv").unwrap().render(&report).unwrap();
    let text = String::from_utf8(csv.clone()).unwrap();
    assert!(text.contains("\"NBD, \"\"fast\"\"\nnode\""), "{text}");
    let mut r = csv::Reader::from_reader(&csv[..]);
    let targets: Vec<String> = r.records().map(|x| x.unwrap()[2].to_string()).collect();
    assert!(targets.iter().any(|t| t == odd), "{targets:?}");
}

#[test]
fn json_is_the_comparison_plus_findings() {
    let v: serde_json::Value = serde_json::from_str(&render("json")).unwrap();
    assert_eq!(v["schema"], sanbench_doc::COMPARE_SCHEMA);
    let findings = v["findings"].as_array().unwrap();
    assert!(!findings.is_empty());
    assert!(findings.iter().all(|f| {
        let t = f["text"].as_str().unwrap();
        t.contains(" shows ") || t.contains(" are within ")
    }));
    // Every question with its ratio, interval and verdict, and the design.
    let qs = v["questions"].as_array().unwrap();
    assert!(!qs.is_empty());
    for q in qs {
        for k in ["verdict", "ratio", "ci_low", "ci_high", "rounds"] {
            assert!(q.get(k).is_some(), "{k} in {q}");
        }
    }
    assert_eq!(v["design_assumed"]["rounds"], 3);
    // The document part still parses as a Comparison.
    // Figures are written to seven significant digits (doc::json::SIGNIFICANT): the same
    // document once both are written.
    let back: sanbench_doc::Comparison = serde_json::from_value(v).unwrap();
    assert_eq!(
        sanbench_doc::json::to_string(&back).unwrap(),
        sanbench_doc::json::to_string(&sample_comparison()).unwrap()
    );
}

#[test]
fn html_is_self_contained_and_complete() {
    let html = render("html");
    let cmp = sample_comparison();
    let report = Report::new(&cmp, &Options::default());
    // The steady-state verdict of every workload and target is in the results tables.
    assert_eq!(html.matches("<th>Steady</th>").count(), cmp.workloads.len());
    // Every finding is on the page (escaped; the headline ratio emphasised).
    let page = html
        .replace("<span class=\"ratio\">", "")
        .replace("</span>", "");
    for f in &report.findings {
        let esc = sanbench_report::fmt::html(&f.text);
        assert!(page.contains(&esc), "{}", f.text);
    }
    // Charts: 2 groups × (MB/s, IOPS) + 2 flavours × (CPU, power) + 4 percentile charts
    // + 1 queue-depth chart + 4 time series + 2 forest plots (primary, secondary) + one
    // timeline per cell.
    assert_eq!(
        html.matches("<svg").count(),
        4 + 4 + 4 + 1 + 4 + 2 + cmp.cells.len()
    );
    assert!(html.contains("id=\"report-card\""));
    for key in [
        "bandwidth",
        "iops",
        "latency",
        "cpu_efficiency",
        "power_efficiency",
    ] {
        assert!(html.contains(&format!("data-category=\"{key}\"")), "{key}");
    }
    assert!(html.contains("data-target=\"NBD &lt;ram&gt; &amp; co\""));
    // User strings never appear unescaped.
    assert!(!html.contains("NBD <ram>"));
    // Nothing is fetched: no external URLs in src/href, no link tags.
    assert!(!html.contains("src=\"http") && !html.contains("href=\"http"));
    assert!(!html.contains("<link"));
    assert!(html.contains("≥ 24"));
    assert!(html.contains("id=\"reproduce-command\""));
    assert!(html.contains("(modeled)"));
}

/// The value of attribute `name` in the first tag of `s` that has it.
fn attr(s: &str, name: &str) -> f64 {
    let at = s
        .find(&format!(" {name}=\""))
        .unwrap_or_else(|| panic!("{name} in {s}"))
        + name.len()
        + 3;
    s[at..at + s[at..].find('"').unwrap()].parse().unwrap()
}

#[test]
fn html_forest_plot_has_every_question_on_a_log_axis() {
    let html = render("html");
    let cmp = sample_comparison();
    let report = Report::new(&cmp, &Options::default());
    let esc = sanbench_report::fmt::html;
    for family in ["primary", "secondary"] {
        let start = html
            .find(&format!("id=\"forest-{family}\""))
            .unwrap_or_else(|| panic!("forest-{family}"));
        let svg = &html[start..start + html[start..].find("</svg>").unwrap()];
        let qs: Vec<_> = report
            .judgement
            .questions
            .iter()
            .filter(|q| q.family == family)
            .collect();
        assert!(!qs.is_empty());
        let rows: Vec<&str> = svg.split("<g class=\"q\"").skip(1).collect();
        assert_eq!(rows.len(), qs.len(), "{family}: one row per question");
        // Every question has its row: workload, pair, figure in the title, the verdict in words.
        for q in &qs {
            let title = &cmp
                .workloads
                .iter()
                .find(|w| w.id == q.workload)
                .unwrap()
                .title;
            let metric = sanbench_report::questions::metric_of(q).unwrap().label();
            let found = rows.iter().any(|r| {
                let tip = &r[r.find("<title>").unwrap()..r.find("</title>").unwrap()];
                let verdict = &r[r.find("class=\"verdict\"").unwrap()..];
                r.contains(&format!("data-verdict=\"{}\"", q.verdict))
                    && tip.contains(&esc(title))
                    && tip.contains(&format!("{} vs {}", esc(&q.a), esc(&q.b)))
                    && tip.contains(&esc(metric))
                    && verdict.contains(&format!(" {}", q.verdict))
            });
            assert!(found, "{family}: no row for {q:?}");
        }
        // A log axis: every tick where its value's log puts it (1 among them: the margin is
        // inside every axis), the ticks equally spaced, and every dot where its ratio's log
        // puts it. Which powers get a tick depends on how wide the intervals are.
        let ticks: Vec<(f64, f64)> = svg
            .split("class=\"tick-mark\"")
            .skip(1)
            .map(|t| (attr(t, "data-value"), attr(t, "x1")))
            .collect();
        assert!(ticks.len() >= 3, "{ticks:?}");
        let x1 = ticks.iter().find(|t| t.0 == 1.0).expect("a tick at 1").1;
        // Labels below 1 are rounded ("0.062"): the scale comes from the ticks at and above 1.
        let above: Vec<&(f64, f64)> = ticks.iter().filter(|t| t.0 >= 1.0).collect();
        assert!(above.len() >= 2, "{ticks:?}");
        let per_ln = (above[1].1 - above[0].1) / (above[1].0 / above[0].0).ln();
        assert!(per_ln > 0.0);
        for w in ticks.windows(2) {
            assert!(
                (w[1].1 - w[0].1 - (ticks[1].1 - ticks[0].1)).abs() < 0.02,
                "{ticks:?}"
            );
        }
        for &&(v, x) in &above {
            assert!((x - x1 - per_ln * v.ln()).abs() < 0.05, "{ticks:?}");
        }
        let x2 = x1 + per_ln * 2f64.ln();
        for r in &rows {
            let ratio = attr(r, "data-ratio");
            let dot = &r[r.find("class=\"ratio\"").unwrap()..];
            let x = if dot.contains(" cx=\"") {
                attr(dot, "cx")
            } else {
                attr(dot, "data-x")
            };
            let want = x1 + (x2 - x1) * ratio.log2();
            assert!((x - want).abs() < 0.05, "ratio {ratio} at {x}, want {want}");
        }
        // 1 and the margin are marked.
        assert!(svg.contains("class=\"one\"") && svg.contains("class=\"margin\""));
    }
}

#[test]
fn html_results_tables_carry_each_pairs_verdict() {
    let html = render("html");
    let cmp = sample_comparison();
    let report = Report::new(&cmp, &Options::default());
    let esc = sanbench_report::fmt::html;
    for w in &cmp.workloads {
        let start = html
            .find(&format!(
                "<table class=\"verdicts\" data-workload=\"{}\"",
                w.id
            ))
            .unwrap_or_else(|| panic!("verdicts of {}", w.id));
        let table = &html[start..start + html[start..].find("</table>").unwrap()];
        let qs: Vec<_> = report
            .judgement
            .questions
            .iter()
            .filter(|q| q.family == "primary" && q.workload == w.id)
            .collect();
        assert_eq!(table.matches("<tr><td").count(), qs.len(), "{}", w.id);
        for q in qs {
            let row = format!(
                "<tr><td class=\"name\">{} / {}</td><td>{} {}</td><td class=\"name\">{}</td></tr>",
                esc(&q.a),
                esc(&q.b),
                sanbench_report::fmt_ratio(q.ratio),
                sanbench_report::findings::fmt_interval(q.ci_low, q.ci_high),
                q.verdict
            );
            assert!(table.contains(&row), "{row}");
        }
    }
}

/// The demo's five target names, on a comparison with five targets.
fn five_targets() -> sanbench_doc::Comparison {
    let mut cmp = sample_comparison();
    let names = [
        "RAM (in-process)",
        "tmpfs file (io_uring)",
        "NBD (loopback)",
        "iSCSI (loopback)",
        "NVMe-TCP (loopback)",
    ];
    let (targets, cells) = (cmp.targets.clone(), cmp.cells.clone());
    cmp.targets.clear();
    cmp.cells.clear();
    for (i, name) in names.iter().enumerate() {
        let from = &targets[i % targets.len()];
        let mut t = from.clone();
        t.name = name.to_string();
        cmp.targets.push(t);
        for c in cells.iter().filter(|c| c.target == from.name) {
            let mut c = c.clone();
            c.target = name.to_string();
            cmp.cells.push(c);
        }
    }
    cmp
}

#[test]
fn every_legend_shows_every_name_in_full_inside_its_chart() {
    let cmp = five_targets();
    let report = Report::new(&cmp, &Options::default());
    let html = String::from_utf8(exporter("html").unwrap().render(&report).unwrap()).unwrap();
    let mut charts = 0;
    for svg in html.split("<svg class=\"chart ").skip(1) {
        if !(svg.starts_with("bars") || svg.starts_with("lines")) {
            continue;
        }
        charts += 1;
        let svg = &svg[..svg.find("</svg>").unwrap()];
        let view_box = &svg[svg.find("viewBox=\"").unwrap() + 9..];
        let width: f64 = view_box[..view_box.find('"').unwrap()]
            .split(' ')
            .nth(2)
            .unwrap()
            .parse()
            .unwrap();
        let legend: Vec<(f64, &str)> = svg
            .split("<text class=\"legend\"")
            .skip(1)
            .map(|t| {
                let text = &t[t.find('>').unwrap() + 1..t.find("</text>").unwrap()];
                (attr(t, "x"), text)
            })
            .collect();
        // In full: the name, and " (modeled)" on a power chart of a target without a meter.
        let names: Vec<&str> = legend
            .iter()
            .map(|(_, n)| n.strip_suffix(" (modeled)").unwrap_or(n))
            .collect();
        assert_eq!(
            names,
            cmp.targets
                .iter()
                .map(|t| t.name.as_str())
                .collect::<Vec<_>>()
        );
        for (x, name) in legend {
            assert!(x < width, "{name} starts at {x} of {width}");
            // Ends inside too, at a generous 6 px per character of the 11 px legend font.
            let end = x + 6.0 * name.chars().count() as f64;
            assert!(end <= width, "{name} ends at {end} of {width}");
        }
    }
    // Bars per group and metric, efficiency, percentiles, queue depth, time series.
    assert!(charts >= 10, "{charts}");
}

#[test]
fn earlier_runs_say_per_finding_whether_they_agreed() {
    use sanbench_report::{render_dir_with_earlier, EarlierRun};
    let cmp = sample_comparison();
    // Run 2: NBD's sequential reads a third of this run's (its bandwidth lead over FC turns).
    let mut turned = cmp.clone();
    for c in turned
        .cells
        .iter_mut()
        .filter(|c| c.workload == "seq-read-1m" && c.target == "NBD <ram> & co")
    {
        c.result.mb_per_s /= 3.0;
    }
    let earlier = [
        EarlierRun {
            run: "2".into(),
            cmp: turned,
        },
        EarlierRun {
            run: "1".into(),
            cmp: cmp.clone(),
        },
    ];
    let dir = tempfile::tempdir().unwrap();
    render_dir_with_earlier(&cmp, dir.path(), &Options::default(), &earlier).unwrap();
    let html = std::fs::read_to_string(dir.path().join("report.html")).unwrap();
    let start = html.find("<section id=\"earlier-runs\">").expect("section");
    let section = &html[start..start + html[start..].find("</section>").unwrap()];
    assert!(section.contains("data-run=\"2\"") && section.contains("data-run=\"1\""));
    let report = Report::new(&cmp, &Options::default());
    let rows: Vec<&str> = section.split("<tr class=\"finding\">").skip(1).collect();
    assert_eq!(rows.len(), report.findings.len());
    // Run 1 is this run again: every finding reproduced; run 2 reverses NBD's lead over FC.
    for row in &rows {
        let cells: Vec<&str> = row.split("<td class=\"name outcome-").skip(1).collect();
        assert_eq!(cells.len(), 2, "{row}");
        assert!(cells[1].starts_with("reproduced\""), "{row}");
    }
    let nbd_fc = rows
        .iter()
        .find(|r| r.contains("NBD &lt;ram&gt; &amp; co vs FC 8G: bandwidth"))
        .unwrap();
    assert!(nbd_fc.contains("outcome-reversed\""), "{nbd_fc}");
    // Without a store, no section.
    assert!(!render("html").contains("id=\"earlier-runs\""));
}

#[test]
fn render_dir_writes_every_format() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("new/report");
    let files = render_dir(&sample_comparison(), &out, &Options::default()).unwrap();
    let names: Vec<String> = files
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        ["report.html", "report.md", "results.json", "results.csv"]
    );
    assert!(files
        .iter()
        .all(|f| std::fs::metadata(f).unwrap().len() > 0));
    assert!(exporter("pdf").is_err());
}

#[test]
fn empty_and_odd_comparisons_render() {
    let mut cmp = sample_comparison();
    cmp.cells.clear();
    cmp.incomplete = true;
    let r = Report::new(&cmp, &Options::default());
    for f in ["html", "markdown", "json", "csv"] {
        let out = exporter(f).unwrap().render(&r).unwrap();
        assert!(!out.is_empty());
    }
    let mut cmp = sample_comparison();
    for c in &mut cmp.cells {
        c.result.iops = f64::NAN;
        c.result.mb_per_s = 0.0;
        c.result.latency_ms_buckets.clear();
        c.result.timeseries.clear();
    }
    cmp.targets.clear();
    let r = Report::new(&cmp, &Options::default());
    for f in ["html", "markdown", "csv"] {
        let out = String::from_utf8(exporter(f).unwrap().render(&r).unwrap()).unwrap();
        assert!(!out.contains("NaN"), "{f}");
    }
}
