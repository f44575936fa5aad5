//! `sanbench replay ARGS` as a [`ReplayConfig`]: the trace's format (as given, or told from
//! its first lines), its one scan (a bad trace is bad input before any target opens), the
//! settings checked (the engine's trace_file.rs, which a suite's trace workloads use too).

use sanbench_engine::replay::OffsetMap;
use sanbench_engine::trace_file::{open_replay, ReplaySettings};
use sanbench_session::error::{usage, CliError};
use sanbench_session::replay::ReplayConfig;

use crate::args::ReplayArgs;

/// The configuration of `sanbench replay ARGS`.
pub fn replay(a: ReplayArgs) -> Result<ReplayConfig, CliError> {
    let shown = a.trace.display().to_string();
    let map: OffsetMap = a.offset_map.parse().map_err(usage)?;
    if !(a.speed.is_finite() && a.speed > 0.0) {
        return Err(usage(format!(
            "--speed {} must be a positive number",
            a.speed
        )));
    }
    let settings = ReplaySettings {
        format: a.format.clone(),
        format_key: "--format",
        speed: a.speed,
        map,
        afap: a.afap,
    };
    let replay = open_replay(&a.trace, &shown, &settings).map_err(usage)?;
    Ok(ReplayConfig {
        replay,
        qd: a.qd,
        time_limit: a.time_limit.map(|d| d.0),
        files: super::run::file_options(&a.engine, a.size.map(|b| b.0), false)?,
        io_timeout: super::run::io_timeout(&a.engine)?,
        json: a.json,
        quiet: a.quiet,
        verify: a.verify,
        targets: a.targets,
    })
}
