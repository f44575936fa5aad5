//! Rank 0's one result of a run (or of a comparison's cell) from every rank's part.
//!
//! Every rank opens its targets (`{rank}` and `{host}` expanded) and runs the plan in step
//! (`MpiSync`); ranks named by `--monitor-only-ranks` run a plan without targets, so they take
//! part in the phases and measure their host (run_cmd.rs, through `Job`). Each rank then sends
//! rank 0 one message: its run output (counters, per-second series, HdrHistograms in V2
//! serialization) and its own document (monitors, efficiency). Rank 0 merges the outputs
//! (histograms bucket by bucket: merged percentiles are exact), builds the totals from the
//! merge, adds `hosts[]` and `mpi`, and alone prints, writes and reports.

use std::time::{SystemTime, UNIX_EPOCH};

use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use sanbench_engine::hosts::{HostResult, MpiInfo};
use sanbench_engine::result::{ProcessCpu, RunDoc};
use sanbench_engine::run::wire;
use sanbench_engine::RunOutput;
use serde::{Deserialize, Serialize};

use super::sync::TAG_RESULT;
use super::MpiJob;
use crate::error::CliError;
use crate::watch::Watch;

/// Test hook: with this variable set to a directory, every rank keeps its raw latencies and
/// writes them to DIR/rank-N.txt (one value in ns per line), so a test can check the merged
/// percentiles against all of them (small runs only).
pub const RAW_ENV: &str = "SANBENCH_TEST_RAW_LATENCIES";

/// What one rank sends rank 0.
#[derive(Serialize, Deserialize)]
pub struct RankReport {
    /// Filled by rank 0 on receipt: the bytes this report took.
    #[serde(default)]
    pub bytes: u64,
    pub rank: u32,
    pub host: String,
    pub monitor_only: bool,
    pub output: RunOutput,
    pub doc: RunDoc,
}

/// The test hook ([`RAW_ENV`]): this rank's raw latencies to DIR/rank-N.txt, then left out
/// of what is sent.
pub fn write_raw(job: &MpiJob, output: &mut RunOutput) -> Result<(), CliError> {
    let Some(dir) = std::env::var_os(RAW_ENV).map(std::path::PathBuf::from) else {
        return Ok(());
    };
    let text: String = output
        .targets
        .iter()
        .flat_map(|t| &t.raw_ns)
        .map(|v| format!("{v}\n"))
        .collect();
    let path = dir.join(format!("rank-{}.txt", job.rank));
    std::fs::write(&path, text)
        .map_err(|e| CliError::Failed(anyhow::anyhow!("writing {}: {e}", path.display())))?;
    for t in &mut output.targets {
        t.raw_ns = Vec::new();
    }
    Ok(())
}

/// Every rank's reports, in rank order, and rank 0's time to receive and decode them (ms,
/// for `mpi.gather_ms`).
pub type Gathered = (Vec<RankReport>, f64);

/// Sends this rank's report to rank 0; on rank 0, returns every rank's. `watch`: the
/// context's, whose histogram log gathers every rank's lines after the results.
pub fn exchange(
    job: &MpiJob,
    mine: RankReport,
    watch: Option<&Watch>,
) -> Result<Option<Gathered>, CliError> {
    let world = SimpleCommunicator::world();
    let window_start = mine.output.clock_started_at + mine.doc.spec.ramp;
    let bytes = serde_json::to_vec(&mine)
        .map_err(|e| CliError::Failed(anyhow::anyhow!("serializing the result: {e}")))?;
    if job.rank != 0 {
        world
            .process_at_rank(0)
            .send_with_tag(&bytes[..], TAG_RESULT);
        super::hist::exchange(job, watch, window_start)?;
        return Ok(None);
    }
    let t0 = std::time::Instant::now();
    let mut mine = mine;
    mine.bytes = bytes.len() as u64;
    let mut all = vec![mine];
    for r in 1..job.size {
        let (bytes, _) = world
            .process_at_rank(r as i32)
            .receive_vec_with_tag::<u8>(TAG_RESULT);
        let mut rep: RankReport = serde_json::from_slice(&bytes).map_err(|e| {
            CliError::Failed(anyhow::anyhow!(
                "the result of rank {r} does not decode: {e}"
            ))
        })?;
        rep.bytes = bytes.len() as u64;
        all.push(rep);
    }
    let gather_ms = t0.elapsed().as_nanos() as u64 as f64 / 1e6;
    super::hist::exchange(job, watch, window_start)?;
    Ok(Some((all, gather_ms)))
}

fn unix_ns(t: SystemTime) -> i128 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_nanos() as i128,
        Err(e) => -(e.duration().as_nanos() as i128),
    }
}

/// Rank 0's one document: the totals from the merged outputs, each rank in `hosts[]`.
/// `templates`: the targets as given (named so in the totals when they differ per rank);
/// `gather_ms`: rank 0's time to gather them.
pub fn merged_doc(
    w: &sanbench_engine::Workload,
    templates: &[String],
    job: &MpiJob,
    ranks: Vec<RankReport>,
    gather_ms: f64,
) -> Result<RunDoc, CliError> {
    let t0 = std::time::Instant::now();
    let outputs: Vec<RunOutput> = ranks.iter().map(|r| r.output.clone()).collect();
    let merged = wire::merge(&outputs)
        .ok_or_else(|| CliError::Failed(anyhow::anyhow!("no rank sent a result")))?;
    let merge_ms = t0.elapsed().as_secs_f64() * 1e3;
    let first_exit = ranks
        .iter()
        .map(|r| unix_ns(r.output.clock_started_at))
        .min()
        .unwrap_or(0);
    let last_exit = ranks
        .iter()
        .map(|r| unix_ns(r.output.clock_started_at))
        .max()
        .unwrap_or(0);
    let windows: Vec<f64> = ranks
        .iter()
        .filter(|r| !r.monitor_only)
        .map(|r| r.output.window.as_secs_f64())
        .collect();
    let spread = |v: &[f64]| {
        v.iter().cloned().fold(f64::MIN, f64::max) - v.iter().cloned().fold(f64::MAX, f64::min)
    };
    let hosts: Vec<HostResult> = ranks
        .iter()
        .map(|r| {
            let mut h = HostResult::of(&r.doc, r.rank, &r.host, r.monitor_only);
            h.barrier_exit = sanbench_stats::time::rfc3339_millis(r.output.clock_started_at);
            h.barrier_exit_offset_us =
                (unix_ns(r.output.clock_started_at) - first_exit) as f64 / 1e3;
            h.gathered_bytes = r.bytes;
            h
        })
        .collect();
    let mpi_info = MpiInfo {
        ranks: job.size,
        launcher: job.launcher.into(),
        barrier_exit_spread_us: (last_exit - first_exit) as f64 / 1e3,
        window_spread_us: if windows.is_empty() {
            0.0
        } else {
            spread(&windows) * 1e6
        },
        decided_by: 0,
        gather_ms,
        merge_ms,
    };
    if let [only] = &ranks[..] {
        // One rank: its own document is the result, monitors and all.
        let mut doc = only.doc.clone();
        doc.hosts = hosts;
        doc.mpi = Some(mpi_info);
        return Ok(doc);
    }
    let base = ranks
        .iter()
        .find(|r| !r.monitor_only)
        .map(|r| &r.doc)
        .unwrap_or(&ranks[0].doc);
    let mut doc = crate::measure::build_doc(w, &base.data, &merged, None);
    // Targets that differ per rank are named by their template.
    if templates
        .iter()
        .any(|t| t.contains("{rank}") || t.contains("{host}"))
    {
        for (r, t) in doc.results.iter_mut().zip(templates) {
            r.target = t.clone();
        }
    }
    for (r, b) in doc.results.iter_mut().zip(&base.results) {
        r.precondition = b.precondition.clone();
    }
    doc.run_id = base.run_id.clone();
    doc.manifest = ranks[0].doc.manifest.clone();
    doc.peak_rss_bytes = ranks
        .iter()
        .map(|r| r.doc.peak_rss_bytes)
        .max()
        .unwrap_or(0);
    doc.process_cpu = sum_cpu(&ranks, doc.results.iter().map(|r| r.ios).sum());
    doc.hosts = hosts;
    doc.mpi = Some(mpi_info);
    Ok(doc)
}

/// The ranks' own CPU time added up (every rank's process, I/O or not).
fn sum_cpu(ranks: &[RankReport], total_ios: u64) -> Option<ProcessCpu> {
    let cpus: Vec<&ProcessCpu> = ranks
        .iter()
        .filter_map(|r| r.doc.process_cpu.as_ref())
        .collect();
    if cpus.len() != ranks.len() {
        return None;
    }
    let user_s: f64 = cpus.iter().map(|c| c.user_s).sum();
    let system_s: f64 = cpus.iter().map(|c| c.system_s).sum();
    Some(ProcessCpu::new(user_s, system_s, total_ios))
}
