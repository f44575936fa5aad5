//! sanbench's report: what a comparison shows, in the form the interconnect studies used.
//!
//! [`analysis`] summarises repetitions (mean ± 95 % CI) and derives the "Key Findings"
//! ("A shows 3.9x greater bandwidth power efficiency than B (average over 6 tests; maximum 7.1x
//! in single-port random read)"), only where a difference is outside the noise. [`card`] scores
//! targets per category like Network Computing's interactive report card. [`diff`] compares two
//! runs figure by figure; [`replication`] says whether one run's findings held up in another. The exporters in [`export`] (one file per format behind one [`Exporter`] trait, as in
//! hyperfine) turn a [`Report`] into `report.html`, `report.md`, `results.json` and
//! `results.csv`; [`render_dir`] writes them all.

pub mod analysis;
pub mod block_layer;
pub mod card;
pub mod curve;
pub mod diff;
pub mod export;
pub mod findings;
pub mod fmt;
pub mod forest;
pub mod headroom;
pub mod hosts;
pub mod questions;
pub mod replication;
pub mod svg;
pub mod svg_timeline;
pub mod timeline;
pub mod verification;

use std::path::{Path, PathBuf};

use sanbench_doc::Comparison;

pub use analysis::{Analysis, Category, Metric};
pub use card::{Card, DEFAULT_WEIGHTS};
pub use diff::{diff, render_text as render_diff_text, Diff};
pub use export::{exporter, exporters, Exporter};
pub use findings::{findings, Finding};
pub use fmt::fmt_ratio;

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot serialise the report: {0}")]
    Json(#[from] serde_json::Error),
    #[error("unknown report format {0:?} (known: html, markdown, json, csv)")]
    UnknownFormat(String),
    #[error("cannot write the CSV: {0}")]
    Csv(String),
}

/// How to judge and render.
#[derive(Clone, Debug, PartialEq)]
pub struct Options {
    /// Smallest relative difference that may count as a finding (default 0.10: this machine's
    /// run-to-run noise is 10-20 %).
    pub min_rel: f64,
    /// Report card weights, in [`Category::ALL`] order.
    pub weights: [f64; 5],
    /// Workload whose per-second series is shown first (default: the first).
    pub timeseries_workload: Option<String>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            min_rel: 0.10,
            weights: DEFAULT_WEIGHTS,
            timeseries_workload: None,
        }
    }
}

/// A comparison with everything derived from it, ready for the exporters.
pub struct Report<'a> {
    pub cmp: &'a Comparison,
    pub options: Options,
    pub analysis: Analysis,
    pub findings: Vec<Finding>,
    /// Why there are no findings at all, when it is for want of rounds
    /// ([`findings::withheld`]).
    pub withheld: Option<String>,
    /// The design the comparison ran (recorded, or reconstructed for older documents).
    pub design: sanbench_stats::design::plan::Design,
    /// Every question with its ratio, interval and verdict.
    pub judgement: questions::Judgement,
    /// Warnings a reader needs before trusting the figures ([`analysis::caveats`]).
    pub caveats: Vec<String>,
    pub card: Card,
    /// Per verified target (`--verify`): what checking every read found.
    pub verification: Vec<verification::TargetVerification>,
    /// What the block layer cost, where a block device ran beside its passthrough device.
    pub block_layer: Vec<block_layer::Cost>,
    /// Earlier runs of the same suite and targets, and whether they agreed with this one's
    /// findings (empty unless rendered with a store: [`render_dir_with_earlier`]).
    pub earlier: Vec<replication::Earlier>,
}

impl<'a> Report<'a> {
    pub fn new(cmp: &'a Comparison, options: &Options) -> Report<'a> {
        let analysis = Analysis::new(cmp);
        let design = questions::design_of(cmp);
        let judgement = questions::judge(cmp);
        let withheld = findings::withheld(cmp, design.rounds);
        let mut findings = if withheld.is_some() {
            Vec::new()
        } else {
            findings::findings(cmp, &judgement, design.min_effect)
        };
        // What limited each side: a note on findings not about the interconnect or target.
        headroom::annotate(cmp, &mut findings);
        findings.extend(curve::findings(cmp, design.min_effect));
        let card = card::card(cmp, &analysis, &options.weights);
        let verification = verification::verification(cmp);
        let block_layer = block_layer::costs(cmp);
        let mut caveats: Vec<String> = headroom::warning(cmp).into_iter().collect();
        caveats.extend(verification::caveats(&verification));
        caveats.extend(analysis::caveats(cmp));
        caveats.extend(questions::carry_over(cmp).1);
        caveats.extend(questions::autocorrelation(&judgement));
        Report {
            cmp,
            options: options.clone(),
            withheld,
            design,
            judgement,
            analysis,
            findings,
            caveats,
            card,
            verification,
            block_layer,
            earlier: Vec::new(),
        }
    }
}

impl Report<'_> {
    /// The sentence where there are no findings.
    pub fn none_text(&self) -> String {
        findings::none_text(self.withheld.as_deref(), &self.judgement)
    }
}

/// What to say about a document written while its run was still going (`"complete": false`):
/// the run was killed, failed, or still runs, and the figures cover only what had finished.
/// `None` for a finished document.
pub fn unfinished(c: &Comparison) -> Option<String> {
    if c.complete != Some(false) {
        return None;
    }
    let secs = |cell: &sanbench_doc::Cell| {
        cell.result
            .intervals
            .last()
            .map_or(cell.result.seconds, |i| i.t + i.len)
    };
    let covered = if c.workloads.len() == 1 && c.workloads[0].id == sanbench_doc::RUN_WORKLOAD {
        let s = c.cells.iter().map(secs).fold(0.0, f64::max);
        format!(
            "its figures cover the first {} s of the {} s window",
            sanbench_units::fmt::num(s),
            sanbench_units::fmt::num(c.workloads[0].spec.time.as_secs_f64())
        )
    } else {
        let mut t = format!(
            "its figures cover the {} cell{} that had finished",
            c.cells.len(),
            if c.cells.len() == 1 { "" } else { "s" }
        );
        if let Some(cell) = c.in_progress.as_deref() {
            t.push_str(&format!(
                ", and the first {} s of {} on {}, which was running (shown in the timelines, \
                 not in any table or finding)",
                sanbench_units::fmt::num(secs(cell)),
                cell.workload,
                cell.target
            ));
        }
        t
    };
    Some(format!(
        "This document was written while the run was still going (\"complete\": false): the \
         run was killed, failed, or is still running; {covered}."
    ))
}

/// Writes report.html, report.md, results.json and results.csv into `dir` (created if needed);
/// returns the files written.
pub fn render_dir(
    cmp: &Comparison,
    dir: &Path,
    options: &Options,
) -> Result<Vec<PathBuf>, ReportError> {
    render_dir_with_earlier(cmp, dir, options, &[])
}

/// An earlier run from the results store: its id, as the store names it, and its document.
pub struct EarlierRun {
    pub run: String,
    pub cmp: Comparison,
}

/// [`render_dir`], with earlier runs of the same suite and targets beside this one: report.html
/// says per finding whether each agreed ([`replication`]).
pub fn render_dir_with_earlier(
    cmp: &Comparison,
    dir: &Path,
    options: &Options,
    earlier: &[EarlierRun],
) -> Result<Vec<PathBuf>, ReportError> {
    std::fs::create_dir_all(dir).map_err(|source| ReportError::Write {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut report = Report::new(cmp, options);
    report.earlier = earlier
        .iter()
        .map(|e| replication::Earlier {
            run: e.run.clone(),
            started_at: e.cmp.started_at.clone(),
            replication: replication::replicate(&report, &Report::new(&e.cmp, options)),
        })
        .collect();
    let mut written = Vec::new();
    for e in exporters() {
        let path = dir.join(e.file_name());
        let bytes = e.render(&report)?;
        std::fs::write(&path, bytes).map_err(|source| ReportError::Write {
            path: path.clone(),
            source,
        })?;
        written.push(path);
    }
    Ok(written)
}
