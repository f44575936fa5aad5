//! The report's timelines: every cell of a comparison drawn from its intervals with its bands
//! and events, the cell that was running when the document was written, and a `run`'s
//! document (read as a comparison) that says it is not finished.

use sanbench_doc::multipath::{MultipathReport, PathEvent};
use sanbench_doc::precondition::Report as Pre;
use sanbench_doc::run::{FaultRecord, OpenLoop, RunDoc};
use sanbench_doc::Comparison;
use sanbench_report::{exporter, Options, Report};
use sanbench_stats::SteadyState;
use sanbench_store::fixture::sample_comparison;

fn render(cmp: &Comparison, format: &str) -> String {
    let report = Report::new(cmp, &Options::default());
    String::from_utf8(exporter(format).unwrap().render(&report).unwrap()).unwrap()
}

/// The timelines section of a page, and its charts.
fn charts(html: &str) -> Vec<&str> {
    let at = html.find("id=\"timelines\"").expect("a timelines section");
    let end = html[at..].find("<h2").map_or(html.len(), |e| at + e);
    html[at..end]
        .split("<svg class=\"chart timeline\"")
        .skip(1)
        .map(|s| &s[..s.find("</svg>").unwrap()])
        .collect()
}

/// The chart titled `target: title`.
fn chart_of<'a>(charts: &[&'a str], target: &str, title: &str) -> &'a str {
    let want = format!(
        "<title>{}: {title}</title>",
        sanbench_report::fmt::html(target)
    );
    charts
        .iter()
        .find(|c| c.contains(&want))
        .unwrap_or_else(|| panic!("no chart {want}"))
}

/// The fixture with events: a fault and a precondition on FC 8G's first cell, a steady-state
/// verdict on its second, path changes on iSCSI 10G's first, a curve point, and a cell that
/// was running when the document was written.
fn with_events() -> Comparison {
    let mut cmp = sample_comparison();
    let w0 = cmp.workloads[0].id.clone();
    let first = |cmp: &Comparison, target: &str, round: u32| {
        cmp.cells
            .iter()
            .position(|c| c.workload == w0 && c.target == target && c.repeat == round)
            .unwrap()
    };
    let fc = first(&cmp, "FC 8G", 0);
    cmp.cells[fc].result.faults = vec![FaultRecord {
        offset_ms: 3300.0,
        link: "b".into(),
        action: "down".into(),
        ..FaultRecord::default()
    }];
    for c in cmp.cells.iter_mut() {
        c.result.precondition = Some(Pre {
            preconditioned: true,
            bytes: 512 << 20,
            seconds: 3.1,
            ..Pre::default()
        });
    }
    let fc2 = first(&cmp, "FC 8G", 1);
    cmp.cells[fc2].steady = Some(SteadyState {
        steady: false,
        range_ratio: 0.3,
        slope_ratio: 0.2,
        window: 5,
    });
    let is = first(&cmp, "iSCSI 10G", 0);
    cmp.cells[is].result.window_start_unix_ms = Some(1_000_000);
    cmp.cells[is].result.multipath = Some(MultipathReport {
        events: ["failed", "failed", "reinstated"]
            .iter()
            .enumerate()
            .map(|(i, e)| PathEvent {
                at_unix_ms: 1_004_000 + 1000 * i as u64,
                path: 1,
                worker: i,
                event: e.to_string(),
                ..PathEvent::default()
            })
            .collect(),
        ..MultipathReport::default()
    });
    let mut curve = cmp.cells[is].clone();
    curve.load_pct = Some(50.0);
    curve.result.multipath = None;
    curve.result.open_loop = Some(OpenLoop {
        asked_iops: curve.result.iops / 2.0,
        ..OpenLoop::default()
    });
    cmp.cells.push(curve);
    let mut running = cmp.cells[first(&cmp, "NBD <ram> & co", 2)].clone();
    running.repeat = 3;
    running.result.intervals.truncate(4);
    cmp.in_progress = Some(Box::new(running));
    cmp.complete = Some(false);
    cmp
}

#[test]
fn every_cell_is_drawn_with_its_bands_and_its_events() {
    let cmp = with_events();
    let html = render(&cmp, "html");
    let cs = charts(&html);
    // Every cell, the curve point among them, and the running cell.
    assert_eq!(cs.len(), cmp.cells.len() + 1);
    for c in &cs {
        for class in [
            "tl-tput",
            "tl-band tl-band-p50-p99",
            "tl-band tl-band-p99-max",
            "tl-p50",
            "tl-p99",
            "tl-ramp",
        ] {
            assert!(c.contains(&format!("class=\"{class}\"")), "{class} in {c}");
        }
    }
    let fc = chart_of(&cs, "FC 8G", "round 1");
    assert!(fc.contains("tl-mark tl-fault") && fc.contains("b down at 3.30 s"));
    // The target's preconditioning is marked on its first cell only.
    assert!(fc.contains("tl-mark tl-precondition"));
    assert!(!chart_of(&cs, "FC 8G", "round 2").contains("tl-precondition"));
    assert!(chart_of(&cs, "FC 8G", "round 2").contains("class=\"tl-steady tl-unsteady\""));
    let is = chart_of(&cs, "iSCSI 10G", "round 1");
    // Each worker reported path 1's failure: one mark, then its reinstatement.
    assert_eq!(is.matches("tl-mark tl-path").count(), 2, "{is}");
    assert!(is.contains("path 1 failed at 4.00 s") && is.contains("path 1 reinstated at 6.00 s"));
    let curve = chart_of(&cs, "iSCSI 10G", "50 % load, round 1");
    assert!(curve.contains("class=\"tl-asked\""));
    let running = chart_of(&cs, "NBD <ram> & co", "round 4 (running when written)");
    assert!(running.contains(">4 intervals of 1 s<"));
    // Nothing else has a fault, a curve line or a path change.
    assert_eq!(html.matches("tl-mark tl-fault").count(), 1);
    assert_eq!(html.matches("class=\"tl-asked\"").count(), 1);
    // One group per workload, the first open; the methods note says how it is laid out.
    assert_eq!(
        html.matches("<details class=\"tl-workload\"").count(),
        cmp.workloads.len()
    );
    assert_eq!(html.matches("<details class=\"tl-workload\"").count(), 4);
    assert!(html.contains(&format!("data-workload=\"{}\" open>", cmp.workloads[0].id)));
    assert!(html.contains("Small multiples: one row per target"));
    // Not finished: said at the top, with the running cell named.
    assert!(html.contains("id=\"unfinished\""));
    assert!(html.contains("and the first 4.00 s of"));
    let md = render(&cmp, "markdown");
    assert!(md.contains("> **Not finished**"));
    assert!(md.contains("b down at 3.30 s"));
    assert!(md.contains("| round 4 (running when written) | 4 × 1 s |"));
    // The running cell is in no table and no finding: the results are the finished cells'.
    let json: serde_json::Value = serde_json::from_str(&render(&cmp, "json")).unwrap();
    assert_eq!(json["complete"], false);
}

#[test]
fn a_finished_comparison_without_intervals_has_no_timelines() {
    let mut cmp = sample_comparison();
    let html = render(&cmp, "html");
    assert!(!html.contains("id=\"unfinished\""));
    assert!(html.contains("id=\"timelines\""));
    for c in cmp.cells.iter_mut() {
        c.result.intervals.clear();
    }
    let html = render(&cmp, "html");
    assert!(!html.contains("id=\"timelines\""));
    assert!(!render(&cmp, "markdown").contains("## Timelines"));
}

#[test]
fn a_run_reads_as_a_comparison_of_one_cell_per_target() {
    let cmp = sample_comparison();
    let results: Vec<_> = cmp.cells[..2].iter().map(|c| c.result.clone()).collect();
    let mut doc = RunDoc {
        schema: sanbench_doc::run::SCHEMA.into(),
        sanbench_version: "0.1.0".into(),
        started_at: cmp.started_at.clone(),
        command: vec!["sanbench".into(), "run".into()],
        spec: cmp.workloads[0].spec.clone(),
        spec_description: "1 MiB sequential read".into(),
        seconds: 4.0,
        stopped_early: false,
        run_id: String::new(),
        data: Default::default(),
        results,
        all: None,
        peak_rss_bytes: 0,
        process_cpu: None,
        manifest: None,
        host: None,
        hosts: Vec::new(),
        mpi: None,
        faults: vec![FaultRecord {
            offset_ms: 2000.0,
            link: "a".into(),
            action: "loss=5%".into(),
            ..FaultRecord::default()
        }],
        complete: Some(false),
    };
    for r in doc.results.iter_mut() {
        r.intervals.truncate(4);
    }
    let run = Comparison::from_run(&doc);
    assert_eq!(run.cells.len(), 2);
    assert_eq!(run.complete, Some(false));
    let html = render(&run, "html");
    let cs = charts(&html);
    assert_eq!(cs.len(), 2);
    // The run's faults are marked on every target's timeline.
    assert!(cs.iter().all(|c| c.contains("a loss=5% at 2.00 s")));
    assert!(html.contains("its figures cover the first 4.00 s of the 10.0 s window"));
    doc.complete = None;
    assert!(!render(&Comparison::from_run(&doc), "html").contains("id=\"unfinished\""));
}
