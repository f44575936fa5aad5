//! `sanbench replay TRACE TARGET...`: a block trace (fio iolog, blkparse text, blktrace
//! binary, MSR Cambridge CSV: crates/trace) replayed on each target, timed (each I/O at its trace time over
//! `--speed`, open loop) or as fast as possible (`--afap`, `--qd` in flight), into a run
//! document like `run`'s whose targets carry a `replay` block: what was replayed and how
//! faithfully (crates/doc replay.rs).
//!
//! The trace is read twice, never held: once here (crates/trace's scan: its formats' errors
//! are bad input, exit 2, before any target opens; the largest I/O sizes the slots; the
//! extent fits the offset map), then by each target's stream as it replays.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use sanbench_engine::replay::trace::{self as sanbench_trace, Format};
use sanbench_engine::replay::{OffsetMap, Records, Replay, TraceSource};
use sanbench_engine::result::RunDoc;
use sanbench_engine::EngineError;

use crate::args::ReplayArgs;
use crate::context::Context;
use crate::error::{usage, CliError};
use crate::measure::{execute_output, plan, write_json, Planned, Shared};
use crate::progress::ProgressLine;

/// How much of a trace file is buffered: the replay's read-ahead, whatever the trace's length.
const READ_AHEAD: usize = 256 << 10;

/// A trace file, opened afresh by each stream.
struct TraceFile {
    path: PathBuf,
    format: Format,
}

impl TraceFile {
    fn reader(&self) -> std::io::Result<BufReader<std::fs::File>> {
        Ok(BufReader::with_capacity(
            READ_AHEAD,
            std::fs::File::open(&self.path)?,
        ))
    }
}

impl TraceSource for TraceFile {
    fn open(&self) -> Result<Records, EngineError> {
        let r = self.reader().map_err(|e| {
            EngineError::sys(format!("cannot open the trace {}", self.path.display()), e)
        })?;
        Ok(Box::new(sanbench_trace::records(self.format, r)))
    }
}

/// The trace's format: as given, or told from its first lines.
fn format_of(a: &ReplayArgs, shown: &str) -> Result<Format, CliError> {
    if a.format != "auto" {
        return a.format.parse().map_err(usage);
    }
    let f = std::fs::File::open(&a.trace)
        .map_err(|e| usage(format!("cannot open the trace {shown}: {e}")))?;
    let mut r = BufReader::with_capacity(64 << 10, f);
    let head = r
        .fill_buf()
        .map_err(|e| usage(format!("cannot read the trace {shown}: {e}")))?;
    Format::detect(head).ok_or_else(|| {
        usage(format!(
            "cannot tell the format of {shown} from its first lines: give --format fio, blkparse, blktrace or msr"
        ))
    })
}

/// Builds the replay from the arguments: the format, the scan, the settings checked.
pub fn prepare(a: &ReplayArgs) -> Result<Replay, CliError> {
    let shown = a.trace.display().to_string();
    let format = format_of(a, &shown)?;
    let map: OffsetMap = a.offset_map.parse().map_err(usage)?;
    if !(a.speed.is_finite() && a.speed > 0.0) {
        return Err(usage(format!(
            "--speed {} must be a positive number",
            a.speed
        )));
    }
    let source = TraceFile {
        path: a.trace.clone(),
        format,
    };
    let r = source
        .reader()
        .map_err(|e| usage(format!("cannot open the trace {shown}: {e}")))?;
    let summary = sanbench_trace::scan(sanbench_trace::records(format, r))
        .map_err(|e| usage(format!("{shown}: {e} (read as {})", format.name())))?;
    Ok(Replay {
        source: Arc::new(source),
        summary,
        speed: a.speed,
        afap: a.afap,
        map,
        trace: shown,
        format: format.name().into(),
    })
}

/// Replays the trace on every target and returns the document.
pub fn execute(cx: &Context, a: &ReplayArgs) -> Result<RunDoc, CliError> {
    let replay = prepare(a)?;
    let w = replay
        .workload(a.qd, a.time_limit.map(|d| d.0))
        .map_err(usage)?;
    if let Some(path) = &a.json {
        crate::outfile::check_writable("--json", path)?;
    }
    // A new file is made as large as the trace reaches (rounded up to 1 MiB).
    let size = a
        .size
        .map(|b| b.0)
        .or(Some(replay.summary.max_end.div_ceil(1 << 20) * (1 << 20)));
    let opts = crate::run_config::file_options(&a.engine, size, w.has_writes())?;
    let targets = crate::targets::open_targets(cx, &a.targets, &opts)?;
    for t in &targets {
        sanbench_engine::run::check_ops(&w, &**t)?;
    }
    let json_to_stdout = a.json.as_deref().is_some_and(|p| p.as_os_str() == "-");
    let progress = ProgressLine::with_mode(a.quiet, Default::default(), json_to_stdout);
    let mut plan = plan(
        Planned {
            workload: w,
            targets,
            io_timeout: a.engine.io_timeout.0,
            data: Default::default(),
            run_id: None,
            verify: Vec::new(),
            sync: None,
            raw_latencies: false,
            rank: None,
        },
        &Shared {
            seed: crate::args::DEFAULT_SEED,
            log_interval: Duration::from_secs(1),
            cpus: None,
            cpus_policy: Default::default(),
        },
    );
    plan.replay = Some(replay);
    let (doc, _, _) = execute_output(cx, &plan, &progress, None, None, None)?;
    Ok(doc)
}

/// The replay block of each target, in lines.
pub fn fidelity(doc: &RunDoc) -> String {
    let mut s = String::new();
    for r in &doc.results {
        let Some(p) = &r.replay else { continue };
        let n = sanbench_engine::units::fmt::num;
        s += &format!(
            "replay of {} ({}, {}{}, offset map {}) on {}\n",
            p.trace,
            p.format,
            p.mode,
            if p.mode == "timed" {
                format!(" x{}", p.speed)
            } else {
                String::new()
            },
            p.offset_map,
            r.target
        );
        s += &format!(
            "  ops     read {} write {} trim {} of {} in the trace{}\n",
            p.replayed_ops.read,
            p.replayed_ops.write,
            p.replayed_ops.trim,
            p.trace_ops.total(),
            if p.complete { "" } else { " (not complete)" }
        );
        let rate = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{}/s", n(v)));
        s += &format!(
            "  rate    recorded {}  asked {}  achieved {}{}\n",
            rate(p.recorded_iops),
            rate(p.target_iops),
            rate(p.achieved_iops),
            p.rate_ratio
                .map_or(String::new(), |x| format!(" ({:.2} %)", x * 100.0))
        );
        if let Some(l) = &p.issue_lag_us {
            s += &format!(
                "  lag     p50 {:.1} µs  p99 {:.1} µs  max {:.1} µs (goal p99 <= {} µs)\n",
                l.p50, l.p99, l.max, p.issue_lag_goal_us
            );
        }
        if let Some(note) = &p.note {
            s += &format!("  note    {note}\n");
        }
    }
    s
}

/// `sanbench replay ARGS`.
pub fn run(cx: &Context, a: ReplayArgs) -> Result<(), CliError> {
    let doc = execute(cx, &a)?;
    if let Some(path) = &a.json {
        write_json(&doc, path)?;
    }
    if !a.quiet {
        let width = crate::fit::width();
        let text = crate::fit::prose(
            &(crate::output::summary(&doc, width) + &fidelity(&doc)),
            width,
        );
        if a.json.as_deref().is_some_and(|p| p.as_os_str() == "-") {
            eprint!("{text}");
        } else {
            out!("{text}");
        }
    }
    Ok(())
}
