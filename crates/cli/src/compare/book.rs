//! What a comparison keeps as its cells complete: the document, the store and results.json,
//! rewritten after every cell so that a comparison killed halfway keeps what it measured.

use std::path::Path;

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
    pub(crate) manifest: Option<serde_json::Value>,
    pub(crate) hosts: Vec<sanbench_engine::hosts::HostResult>,
}

/// Where a cell sits in the comparison.
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
    pub(crate) recorder: Option<crate::store_cmd::Recorder>,
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
        if cmp.manifest.is_null() {
            cmp.manifest = host.unwrap_or_default();
        }
        if cmp.targets[ti].baseline.is_none() {
            cmp.targets[ti].baseline =
                self.baselines[ti].and_then(|b| serde_json::to_value(b).ok());
        }
        if cmp.targets[ti].manifest.is_null() {
            if let Some(info) = &r.info {
                cmp.targets[ti].manifest = serde_json::to_value(info).unwrap_or_default();
            }
        }
        let iops: Vec<f64> = r.timeseries.iter().map(|s| s.iops).collect();
        if !self.quiet {
            eprintln!(
                "    {:>10} IOPS {:>9.1} MB/s  mean {:.1} µs  p99 {:.1} µs{}",
                crate::output::si(r.iops),
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
                eprintln!("      {}", crate::output::bad_block_line(b));
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

pub(crate) fn write_results(cmp: &Comparison, dir: &Path) -> Result<(), CliError> {
    let path = dir.join("results.json");
    let tmp = dir.join("results.json.tmp");
    let text = serde_json::to_string_pretty(cmp).context("serializing results")?;
    std::fs::write(&tmp, text)
        .and_then(|_| std::fs::rename(&tmp, &path))
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}
