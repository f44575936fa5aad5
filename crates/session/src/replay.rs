//! `sanbench replay` as a library function: a block trace (fio iolog, blkparse text, blktrace
//! binary, MSR Cambridge CSV: crates/trace) replayed on each target, timed (each I/O at its
//! trace time over the speed, open loop) or as fast as possible (`qd` in flight), into a run
//! document like `run`'s whose targets carry a `replay` block: what was replayed and how
//! faithfully (crates/doc replay.rs).
//!
//! The trace is read twice, never held: once before (crates/trace's scan, made when the
//! configuration is built: a trace's errors are bad input before any target opens; the
//! largest I/O sizes the slots; the extent fits the offset map), then by each target's stream
//! as it replays ([`TraceFile`]).

use std::path::PathBuf;
use std::time::Duration;

use sanbench_engine::file::FileOptions;
use sanbench_engine::replay::Replay;
use sanbench_engine::result::RunDoc;
/// The trace file each stream opens (in the engine, which a suite's trace workloads share).
pub use sanbench_engine::trace_file::TraceFile;

use crate::context::Context;
use crate::error::{usage, CliError};
use crate::measure::{execute_output, plan, Planned, Shared};
use crate::progress::ProgressMode;

/// Everything one replay needs, typed.
pub struct ReplayConfig {
    /// The trace, scanned, with its speed, mode and offset map.
    pub replay: Replay,
    pub targets: Vec<String>,
    /// Slots in flight.
    pub qd: u32,
    /// The longest the window may last.
    pub time_limit: Option<Duration>,
    /// How targets open; a new file is made as large as the trace reaches unless `size`
    /// says otherwise.
    pub files: FileOptions,
    pub io_timeout: Duration,
    /// Where the document goes (`-`: stdout): the progress line then stays off stdout.
    pub json: Option<PathBuf>,
    pub quiet: bool,
    /// `--verify`: every replayed write stamped with its blocks' generations and every read
    /// checked, as `run --verify` does (I/Os that overlap one in flight wait for it).
    pub verify: bool,
}

/// Replays the trace on every target and returns the document.
pub fn execute(cx: &Context, c: &ReplayConfig) -> Result<RunDoc, CliError> {
    let replay = &c.replay;
    let w = replay.workload(c.qd, c.time_limit).map_err(usage)?;
    if let Some(path) = &c.json {
        crate::outfile::check_writable("--json", path)?;
    }
    // A new file is made as large as the trace reaches (rounded up to 1 MiB).
    let files = FileOptions {
        size: c
            .files
            .size
            .or(Some(replay.summary.max_end.div_ceil(1 << 20) * (1 << 20))),
        writes: w.has_writes(),
        ..c.files.clone()
    };
    let targets = crate::targets::open_targets(cx, &c.targets, &files)?;
    for t in &targets {
        sanbench_engine::run::check_ops(&w, &**t)?;
    }
    // The verification a run makes, with no preconditioning: blocks the replay did not
    // write read as whatever they held (generation unknown).
    let data = crate::precondition::DataPlan {
        mode: sanbench_engine::precondition::Mode::None,
        spec: Default::default(),
        verify: c.verify,
        state: None,
    };
    let spans: Vec<u64> = targets.iter().map(|t| t.info().size).collect();
    let crate::precondition::Verifiers {
        run_id,
        per_target: verify,
    } = crate::precondition::verifiers(&data, &targets, &spans, std::iter::once(&w), &[replay])?;
    let json_to_stdout = c.json.as_deref().is_some_and(|p| p.as_os_str() == "-");
    let progress = cx.events(c.quiet, ProgressMode::Auto, json_to_stdout);
    let mut plan = plan(
        Planned {
            workload: w,
            targets,
            io_timeout: c.io_timeout,
            data: Default::default(),
            run_id,
            verify,
            sync: None,
            raw_latencies: false,
            rank: None,
        },
        &Shared {
            seed: crate::run_config::DEFAULT_SEED,
            log_interval: Duration::from_secs(1),
            cpus: None,
            cpus_policy: Default::default(),
        },
    );
    plan.replay = Some(replay.clone());
    let (doc, _, _) = execute_output(cx, &plan, &*progress, None, None, None)?;
    Ok(doc)
}
