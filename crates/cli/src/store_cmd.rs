//! The results store from the command line: `history`, `report RUN...`, `diff RUN_A RUN_B` (the
//! figures side by side, then whether B reproduced A's findings). The store side of `compare`
//! is the library's (store_io.rs).

use std::path::Path;

use anyhow::Context;
use sanbench_report::{render_dir, Options};
use sanbench_store::Comparison;

use crate::args::{DiffArgs, HistoryArgs, ReportArgs};
use crate::render::{print_findings, print_replication};
use sanbench_session::error::{usage, CliError};
use sanbench_session::store_io::{open, open_existing, path_of, run_id};

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
