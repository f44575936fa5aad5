//! `--precondition`, `--dedupe`, `--compress`: what the targets hold before a measured window
//! and what writes put there (the engine's precondition and stamp modules do the work).

use std::time::Duration;

use sanbench_engine::precondition::{self, FillPlan, Filled, Mode, Report};
use sanbench_engine::stamp::DataSpec;
use sanbench_engine::Target;

use crate::args::DataArgs;
use crate::error::{usage, CliError};
use crate::progress::ProgressLine;

/// The data flags, parsed once.
#[derive(Clone, Copy, Debug)]
pub struct DataPlan {
    pub mode: Mode,
    pub spec: DataSpec,
}

impl DataPlan {
    pub fn from_args(a: &DataArgs) -> Result<DataPlan, CliError> {
        let mode: Mode = a
            .precondition
            .parse()
            .map_err(|e| usage(format!("--precondition: {e}")))?;
        let spec = DataSpec {
            dedupe_pct: a.dedupe,
            compress_pct: a.compress,
        };
        spec.validate().map_err(usage)?;
        Ok(DataPlan { mode, spec })
    }

    /// Whether targets must be opened for writing (and through the write-safety check) even
    /// when the workload only reads.
    pub fn writes(&self) -> bool {
        self.mode.writes_anything()
    }
}

/// How the span is written when it is: the suite's way ("pts": purge and 2x the span in
/// 128 KiB writes), else N passes of 1 MiB writes.
pub fn fill_plan(mode: Mode, suite_precondition: &str) -> FillPlan {
    match (suite_precondition, mode) {
        ("pts", _) => FillPlan::pts(),
        (_, Mode::Passes(n)) => FillPlan::fill(n),
        _ => FillPlan::fill(1),
    }
}

/// Preconditions one target (or reports why not), drawing progress and saying what was done.
#[allow(clippy::too_many_arguments)]
pub fn run(
    target: &dyn Target,
    name: &str,
    span: u64,
    plan: &DataPlan,
    fill_plan: FillPlan,
    reads: bool,
    io_timeout: Duration,
    progress: &ProgressLine,
    quiet: bool,
) -> Result<(Report, Option<Filled>), CliError> {
    let stop = crate::signals::stop_flag();
    let r = precondition::prepare(
        target,
        span,
        plan.mode,
        fill_plan,
        &plan.spec,
        io_timeout,
        &stop,
        &mut |done, total| progress.draw_fill(name, done, total),
    );
    progress.clear();
    let (rep, filled) =
        r.map_err(|e| CliError::Failed(anyhow::anyhow!("{name}: preconditioning failed: {e}")))?;
    if !quiet {
        if filled.is_some() {
            eprintln!("{name}: {}", rep.note);
        } else if let Some(w) = rep.warning(reads) {
            eprintln!("warning: {name}: {w}");
        }
    }
    Ok((rep, filled))
}
