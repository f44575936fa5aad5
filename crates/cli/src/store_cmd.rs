//! The results store from the command line: `history`, `report RUN...`, `diff RUN_A RUN_B` (the
//! figures side by side, then whether B reproduced A's findings), and
//! the store side of `compare` (a run opened before the first cell, every cell committed as it
//! finishes, so a run killed halfway keeps what it measured).

use std::path::{Path, PathBuf};

use anyhow::Context;
use sanbench_report::{render_dir, EarlierRun, Options, Report};
use sanbench_store::{Cell, Comparison, RunId, Store};

use crate::args::{DiffArgs, HistoryArgs, ReportArgs};
use crate::error::{usage, CliError};

/// The store's path: `--db`, or the default.
fn path_of(db: Option<&Path>) -> Result<PathBuf, CliError> {
    match db {
        Some(p) => Ok(p.to_path_buf()),
        None => Store::default_path().map_err(|e| usage(e.to_string())),
    }
}

/// Opens the store to record in, created (with its directories) when missing.
pub fn open(db: Option<&Path>) -> Result<(Store, PathBuf), CliError> {
    let path = path_of(db)?;
    let store = Store::open(&path).with_context(|| format!("results store {}", path.display()))?;
    Ok((store, path))
}

/// Opens the store to read from: one that is not there is bad input (a mistyped `--db`), and
/// is not created.
fn open_existing(db: Option<&Path>) -> Result<(Store, PathBuf), CliError> {
    let path = path_of(db)?;
    if !path.exists() {
        return Err(usage(format!(
            "no results store at {} (nothing has been recorded there)",
            path.display()
        )));
    }
    open(Some(&path))
}

/// Records a comparison as it runs.
pub struct Recorder {
    store: Store,
    pub run: RunId,
    pub path: PathBuf,
}

impl Recorder {
    pub fn begin(db: Option<&Path>, cmp: &Comparison) -> Result<Recorder, CliError> {
        let (mut store, path) = open(db)?;
        let run = store.begin_run(cmp).context("recording the run")?;
        Ok(Recorder { store, run, path })
    }

    pub fn cell(&mut self, c: &Cell) -> Result<(), CliError> {
        self.store
            .add_cell(self.run, c)
            .context("recording a result")?;
        Ok(())
    }

    /// Closes the run with the comparison as it ended (its design's rounds and stop reason
    /// replace those recorded at the start).
    pub fn finish(&mut self, cmp: &Comparison) -> Result<(), CliError> {
        self.store
            .finish_run_with(self.run, cmp)
            .context("closing the run")?;
        Ok(())
    }

    /// Earlier complete runs of the same suite with the same target names, newest first, for
    /// the report's "Earlier runs". A run that cannot be read is left out: the comparison just
    /// measured matters more than its history.
    pub fn earlier_runs(&self, cmp: &Comparison) -> Vec<EarlierRun> {
        let mut names: Vec<&str> = cmp.targets.iter().map(|t| t.name.as_str()).collect();
        names.sort_unstable();
        let Ok(runs) = self.store.list() else {
            return Vec::new();
        };
        runs.into_iter()
            .rev()
            .filter(|r| r.id < self.run && !r.incomplete && r.suite == cmp.suite)
            .filter(|r| {
                let mut theirs: Vec<&str> = r.targets.iter().map(String::as_str).collect();
                theirs.sort_unstable();
                theirs == names
            })
            .take(EARLIER_RUNS)
            .filter_map(|r| {
                Some(EarlierRun {
                    run: r.id.to_string(),
                    cmp: self.store.load(r.id).ok()?,
                })
            })
            .collect()
    }
}

/// How many earlier runs the report shows beside this one.
const EARLIER_RUNS: usize = 5;

/// A stored run by the id the user typed; an unknown id is bad input.
pub fn load(db: Option<&Path>, run: &str) -> Result<Comparison, CliError> {
    let (store, _) = open_existing(db)?;
    store.load(run_id(run)?).map_err(|e| usage(e.to_string()))
}

/// The replication table: each finding (and decided throughput question) of `a`, and what `b`
/// says about it.
pub fn print_replication(a: &Comparison, a_name: &str, b: &Comparison, b_name: &str) {
    let options = Options::default();
    let (ra, rb) = (Report::new(a, &options), Report::new(b, &options));
    let r = sanbench_report::replication::replicate(&ra, &rb);
    outln!("Findings of {a_name} in {b_name}:");
    out!(
        "{}",
        sanbench_report::replication::render_text(&r, a_name, b_name)
    );
}

fn run_id(s: &str) -> Result<RunId, CliError> {
    s.parse()
        .map_err(|_| usage(format!("'{s}' is not a run id (see 'sanbench history')")))
}

pub fn history(a: HistoryArgs) -> Result<(), CliError> {
    let path = path_of(a.db.as_deref())?;
    if !path.exists() {
        // Nothing recorded yet: said, and no empty store left behind.
        outln!(
            "no runs recorded in {} (no store there yet)",
            path.display()
        );
        return Ok(());
    }
    let (store, path) = open(Some(&path))?;
    let runs = store.list().context("listing runs")?;
    if runs.is_empty() {
        outln!("no runs recorded in {}", path.display());
        return Ok(());
    }
    outln!(
        "{:>5}  {:<24} {:<18} {:>5}  targets",
        "run",
        "started (UTC)",
        "suite",
        "cells"
    );
    for r in runs {
        outln!(
            "{:>5}  {:<24} {:<18} {:>5}  {}{}",
            r.id.to_string(),
            r.started_at,
            r.suite,
            r.cells,
            r.targets.join(", "),
            if r.incomplete { "  (incomplete)" } else { "" }
        );
    }
    Ok(())
}

/// Loads one or more runs; several are merged into one comparison (their targets side by side,
/// workloads matched by id), so last month's run can be re-rendered beside today's.
pub fn report(a: ReportArgs) -> Result<(), CliError> {
    let mut store = None;
    let mut runs = Vec::new();
    for id in &a.runs {
        let cmp = if Path::new(id).is_file() {
            load_file(Path::new(id))?
        } else {
            if store.is_none() {
                store = Some(open_existing(a.db.as_deref())?.0);
            }
            let s = store.as_ref().expect("opened above");
            let run = run_id(id).map_err(|e| {
                // `report` takes RUN|FILE: what looks like a path is named as a missing file.
                if id.contains('/') || id.ends_with(".json") {
                    usage(format!(
                        "'{id}' is neither a result file (no such file) nor a run id (see \
                         'sanbench history')"
                    ))
                } else {
                    e
                }
            })?;
            s.load(run).map_err(|e| usage(e.to_string()))?
        };
        if let Some(text) = sanbench_report::unfinished(&cmp) {
            outln!("warning: {id} is incomplete. {text}");
        }
        runs.push(cmp);
    }
    let cmp = merge_runs(runs, &a.runs);
    let files = render_dir(&cmp, &a.out, &Options::default()).context("writing the report")?;
    print_findings(&cmp);
    for f in files {
        outln!("wrote {}", f.display());
    }
    Ok(())
}

/// A result file as a comparison: a comparison's results.json as it is, a run's document
/// (`--json FILE`) as one cell per target. Anything else is bad input.
fn load_file(path: &Path) -> Result<Comparison, CliError> {
    let bad = |why: String| usage(format!("{}: {why}", path.display()));
    let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| bad(format!("not JSON: {e}")))?;
    let schema = v.get("schema").and_then(|s| s.as_str());
    match schema {
        Some(s) if sanbench_doc::COMPARE_SCHEMAS.contains(&s) => {
            serde_json::from_value(v).map_err(|e| bad(format!("not a sanbench comparison: {e}")))
        }
        Some(s) if sanbench_doc::run::SCHEMAS.contains(&s) => {
            let doc: sanbench_engine::result::RunDoc = serde_json::from_value(v)
                .map_err(|e| bad(format!("not a sanbench run's result: {e}")))?;
            Ok(Comparison::from_run(&doc))
        }
        other => Err(bad(format!(
            "not a sanbench result (schema {}; expected one of {})",
            other.map_or("missing".into(), |s| format!("{s:?}")),
            sanbench_doc::run::SCHEMAS
                .iter()
                .chain(&sanbench_doc::COMPARE_SCHEMAS)
                .copied()
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

fn merge_runs(mut runs: Vec<Comparison>, ids: &[String]) -> Comparison {
    if runs.len() == 1 {
        return runs.pop().expect("one run");
    }
    let mut out = runs[0].clone();
    out.targets.clear();
    out.cells.clear();
    for (run, id) in runs.into_iter().zip(ids) {
        for mut t in run.targets {
            let old = t.name.clone();
            t.name = format!("{old} (run {id})");
            out.targets.push(t);
            for mut c in run.cells.iter().filter(|c| c.target == old).cloned() {
                c.target = format!("{old} (run {id})");
                out.cells.push(c);
            }
        }
        for w in run.workloads {
            if !out.workloads.iter().any(|x| x.id == w.id) {
                out.workloads.push(w);
            }
        }
        out.incomplete |= run.incomplete;
    }
    out
}

pub fn diff(a: DiffArgs) -> Result<(), CliError> {
    let (store, _) = open_existing(a.db.as_deref())?;
    let ra = store
        .load(run_id(&a.run_a)?)
        .map_err(|e| usage(e.to_string()))?;
    let rb = store
        .load(run_id(&a.run_b)?)
        .map_err(|e| usage(e.to_string()))?;
    let d = sanbench_report::diff(&ra, &rb, a.min_rel);
    out!("{}", sanbench_report::render_diff_text(&d));
    outln!();
    print_replication(
        &ra,
        &format!("run {}", a.run_a),
        &rb,
        &format!("run {}", a.run_b),
    );
    Ok(())
}

/// The Key Findings, as the studies printed them: the strongest two of each kind on the
/// terminal (the report's first two of each label), every one of them in the report.
pub fn print_findings(cmp: &Comparison) {
    let report = Report::new(cmp, &Options::default());
    let width = crate::fit::width();
    for c in &report.caveats {
        outln!(
            "{}",
            crate::fit::wrap(&format!("warning: {c}"), width, "", "  ")
        );
    }
    if report.findings.is_empty() {
        let none = format!("Key Findings: {}", report.none_text());
        outln!("{}", crate::fit::wrap(&none, width, "", "  "));
        return;
    }
    outln!("Key Findings:");
    let head = sanbench_report::findings::headline(&report.findings, 2);
    let shown: Vec<crate::findings_out::Shown> = head
        .iter()
        .map(|f| crate::findings_out::Shown {
            text: f.text.clone(),
            note: sanbench_report::headroom::finding_note(cmp, f),
        })
        .collect();
    out!("{}", crate::findings_out::render(&shown, width));
    let shown = head.len();
    if shown < report.findings.len() {
        outln!(
            "  ({} more in report.html and report.md)",
            report.findings.len() - shown
        );
    }
}
