//! A run's document (`sanbench.run/1`) as a comparison of one workload, so that the report
//! (timelines, tables, disruption) renders a `run` as it renders a `compare`: one cell per
//! target, round 1. A run proves nothing by itself (one round), so the report draws and
//! tabulates it without findings.

use crate::run::RunDoc;
use sanbench_stats::steady_state;

use crate::compare::{Cell, Comparison, TargetEntry, WorkloadEntry, COMPARE_SCHEMA};

/// The workload id a run's cells carry.
pub const RUN_WORKLOAD: &str = "run";

impl Comparison {
    /// One cell per result of `doc` (the aggregate `all` is left out: the report sums
    /// targets itself where it needs to). The run's faults go into each cell, as a
    /// comparison's cells carry the faults of their own window; `complete` is the run's.
    pub fn from_run(doc: &RunDoc) -> Comparison {
        let mut names: Vec<String> = Vec::new();
        let mut cells = Vec::with_capacity(doc.results.len());
        for (i, r) in doc.results.iter().enumerate() {
            // Two copies of one URI are two targets of the run: keep them apart.
            let mut name = r.target.clone();
            if names.contains(&name) {
                name = format!("{name} #{}", i + 1);
            }
            names.push(name.clone());
            let mut result = r.clone();
            if result.faults.is_empty() {
                result.faults = doc.faults.clone();
            }
            let iops: Vec<f64> = r.timeseries.iter().map(|s| s.iops).collect();
            cells.push(Cell {
                workload: RUN_WORKLOAD.into(),
                target: name,
                repeat: 0,
                round: Some(0),
                slot: Some(i as u32),
                started_at: Some(doc.started_at.clone()),
                result,
                steady: steady_state(&iops, 5),
                load_pct: None,
                hosts: Vec::new(),
            });
        }
        let targets = doc
            .results
            .iter()
            .zip(&names)
            .map(|(r, name)| TargetEntry {
                name: name.clone(),
                uri: r.target.clone(),
                manifest: r.info.clone(),
                ..TargetEntry::default()
            })
            .collect();
        Comparison {
            schema: COMPARE_SCHEMA.into(),
            sanbench_version: doc.sanbench_version.clone(),
            started_at: doc.started_at.clone(),
            command: doc.command.clone(),
            suite: "run".into(),
            suite_description: doc.spec_description.clone(),
            repeat: 1,
            targets,
            workloads: vec![WorkloadEntry {
                id: RUN_WORKLOAD.into(),
                title: doc.spec_description.clone(),
                group: String::new(),
                spec: doc.spec.clone(),
                targets_at_once: None,
                paths: None,
            }],
            cells,
            manifest: doc.manifest.clone(),
            incomplete: doc.stopped_early,
            curve: Vec::new(),
            design: None,
            require_headroom: false,
            complete: doc.complete,
            in_progress: None,
        }
    }
}
