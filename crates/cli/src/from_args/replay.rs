//! `sanbench replay ARGS` as a [`ReplayConfig`]: the trace's format (as given, or told from
//! its first lines), its one scan (a bad trace is bad input before any target opens), the
//! settings checked.

use std::io::{BufRead, BufReader};
use std::sync::Arc;

use sanbench_engine::replay::trace::{self as sanbench_trace, Format};
use sanbench_engine::replay::{OffsetMap, Replay};
use sanbench_session::error::{usage, CliError};
use sanbench_session::replay::{ReplayConfig, TraceFile};

use crate::args::ReplayArgs;

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

/// The configuration of `sanbench replay ARGS`.
pub fn replay(a: ReplayArgs) -> Result<ReplayConfig, CliError> {
    let shown = a.trace.display().to_string();
    let format = format_of(&a, &shown)?;
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
    let replay = Replay {
        source: Arc::new(source),
        summary,
        speed: a.speed,
        afap: a.afap,
        map,
        trace: shown,
        format: format.name().into(),
    };
    Ok(ReplayConfig {
        replay,
        qd: a.qd,
        time_limit: a.time_limit.map(|d| d.0),
        files: super::run::file_options(&a.engine, a.size.map(|b| b.0), false)?,
        io_timeout: super::run::io_timeout(&a.engine)?,
        json: a.json,
        quiet: a.quiet,
        targets: a.targets,
    })
}
