//! What a comparison keeps as its cells complete: the document, the store and results.json,
//! rewritten after every cell so that a comparison killed halfway keeps what it measured.

use std::path::{Path, PathBuf};

use anyhow::Context;
use sanbench_engine::precondition::Report;
use sanbench_engine::result::TargetResult;
use sanbench_monitor::sampler::Baseline;
use sanbench_stats::steady_state;
use sanbench_store::{Cell, Comparison};

use crate::error::CliError;

/// One cell's outcome: its result, the host manifest, and under MPI each rank's figures.
pub(crate) struct CellRun {
    pub(crate) result: TargetResult,
    pub(crate) manifest: Option<sanbench_doc::manifest::Manifest>,
    pub(crate) hosts: Vec<sanbench_engine::hosts::HostResult>,
}

/// Where a cell sits in the comparison.
#[derive(Clone)]
pub(crate) struct Place {
    /// The round (repetition).
    pub(crate) round: u32,
    /// Closed-loop cells: the position in the workload's Williams row, and when it started.
    pub(crate) slot: Option<u32>,
    pub(crate) started_at: Option<String>,
    /// Curve points: the share of the target's maximum.
    pub(crate) load_pct: Option<f64>,
}

impl Place {
    pub(crate) fn curve(round: u32, pct: f64) -> Place {
        Place {
            round,
            slot: None,
            started_at: None,
            load_pct: Some(pct),
        }
    }
}

/// What a comparison keeps as cells complete: the document, the store, per-target state.
pub(crate) struct Book<'a> {
    pub(crate) cmp: Comparison,
    pub(crate) recorder: Option<crate::store_io::Recorder>,
    pub(crate) out: &'a Path,
    pub(crate) quiet: bool,
    pub(crate) preconditions: Vec<Report>,
    pub(crate) baselines: Vec<Option<Baseline>>,
    pub(crate) bad_blocks: u64,
    /// Whether this process writes results.json (all but the non-zero ranks of an MPI job).
    pub(crate) writes: bool,
}

impl Book<'_> {
    /// Files one completed cell: into the document, the store and results.json at once (a
    /// crash keeps what ran), with its line on the terminal.
    pub(crate) fn record(
        &mut self,
        ti: usize,
        workload: &str,
        place: Place,
        cell: CellRun,
    ) -> Result<&TargetResult, CliError> {
        let CellRun {
            result: mut r,
            manifest: host,
            hosts,
        } = cell;
        let cmp = &mut self.cmp;
        r.precondition = Some(self.preconditions[ti].clone());
        if cmp.manifest.is_none() {
            cmp.manifest = host;
        }
        if cmp.targets[ti].baseline.is_none() {
            cmp.targets[ti].baseline = self.baselines[ti];
        }
        if cmp.targets[ti].manifest.is_none() {
            cmp.targets[ti].manifest = r.info.clone();
        }
        let iops: Vec<f64> = r.timeseries.iter().map(|s| s.iops).collect();
        if !self.quiet {
            eprintln!(
                "    {:>10} IOPS {:>9.1} MB/s  mean {:.1} µs  p99 {:.1} µs{}",
                sanbench_units::fmt::si(r.iops),
                r.mb_per_s,
                r.latency_us.mean,
                r.latency_us.p99,
                match &r.open_loop {
                    Some(o) if !o.valid => format!("  (invalid point: {})", o.invalid.join("; ")),
                    _ => String::new(),
                }
            );
        }
        if let Some(v) = &r.verify {
            if !self.quiet || v.bad_total() > 0 {
                eprintln!("    {}", v.summary());
            }
            for b in v.bad_blocks.iter().take(3) {
                eprintln!("      {}", crate::verify_cmd::bad_block_line(b));
            }
            self.bad_blocks += v.bad_total();
        }
        let cell = Cell {
            workload: workload.to_string(),
            target: cmp.targets[ti].name.clone(),
            repeat: place.round,
            round: place.slot.map(|_| place.round),
            slot: place.slot,
            started_at: place.started_at,
            steady: steady_state(&iops, 5),
            load_pct: place.load_pct,
            result: r,
            hosts,
        };
        if let Some(rec) = self.recorder.as_mut() {
            rec.cell(&cell)?;
        }
        cmp.cells.push(cell);
        if self.writes {
            write_results(cmp, self.out)?;
        }
        Ok(&cmp.cells[cmp.cells.len() - 1].result)
    }
}

/// `--save-every` within one cell: the comparison as it stood when the cell began, where
/// the cell goes in it, and how it is filed (as `record` files it, but as `in_progress`).
pub(crate) struct CellSave {
    cmp: Comparison,
    dir: PathBuf,
    cell: Cell,
}

impl Book<'_> {
    /// What a cell's saves need; `None` when this process writes no results.json (MPI ranks
    /// other than 0; under MPI rank 0 has the ranks' figures only at the cell's end) or no
    /// save would come before the cell's window ends (`every` against `window`).
    pub(crate) fn cell_save(
        &self,
        (ti, workload): (usize, &str),
        place: &Place,
        mpi: bool,
        (every, window): (std::time::Duration, std::time::Duration),
    ) -> Option<CellSave> {
        if !self.writes || mpi || !crate::partial::saves(every, window) {
            return None;
        }
        let result = TargetResult {
            precondition: Some(self.preconditions[ti].clone()),
            ..TargetResult::default()
        };
        Some(CellSave {
            cmp: self.cmp.clone(),
            dir: self.out.to_path_buf(),
            cell: Cell {
                workload: workload.to_string(),
                target: self.cmp.targets[ti].name.clone(),
                repeat: place.round,
                round: place.slot.map(|_| place.round),
                slot: place.slot,
                started_at: place.started_at.clone(),
                steady: None,
                load_pct: place.load_pct,
                result,
                hosts: Vec::new(),
            },
        })
    }
}

impl CellSave {
    /// The cell's totals so far as `in_progress` of results.json (`n` copies of the target:
    /// their aggregate, as the finished cell's).
    pub(crate) fn writer(
        self,
        plan: &sanbench_engine::RunPlan,
        name: &str,
        n: usize,
    ) -> crate::partial::Write {
        let (w, data) = (plan.workload.clone(), plan.data);
        let name = name.to_string();
        Box::new(move |out| {
            let doc = crate::measure::build_doc(&w, &data, &out, None);
            let mut r = match (n, doc.all) {
                (1, _) | (_, None) => doc.results.into_iter().next().unwrap_or_default(),
                (_, Some(all)) => all,
            };
            r.target = name.clone();
            r.precondition = self.cell.result.precondition.clone();
            let iops: Vec<f64> = r.timeseries.iter().map(|s| s.iops).collect();
            let mut cmp = self.cmp.clone();
            cmp.in_progress = Some(Box::new(Cell {
                steady: steady_state(&iops, 5),
                result: r,
                ..self.cell.clone()
            }));
            cmp.complete = Some(false);
            write_results(&cmp, &self.dir)
        })
    }
}

pub(crate) fn write_results(cmp: &Comparison, dir: &Path) -> Result<(), CliError> {
    let path = dir.join("results.json");
    let tmp = dir.join("results.json.tmp");
    let text = sanbench_doc::json::to_string(cmp).context("serializing results")?;
    std::fs::write(&tmp, text)
        .and_then(|_| std::fs::rename(&tmp, &path))
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}
