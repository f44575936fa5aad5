//! A suite workload that replays a trace instead of an access specification:
//!
//! ```toml
//! [[workload]]
//! id = "oltp-trace"
//! trace = "traces/oltp.iolog"   # relative to the suite file
//! format = "auto"               # or fio, blkparse, blktrace, msr
//! speed = 2.0                   # time scaling, as `replay --speed`
//! offset_map = "scale"          # none, scale or modulo, as `replay --offset-map`
//! afap = false                  # true: as fast as possible, `qd` in flight
//! qd = 32                       # slots in flight (default 64, as `replay`)
//! time = "60s"                  # the longest a cell may last (default: as `replay`)
//! ```
//!
//! The trace is opened and scanned when the suite is loaded (crate::trace_file, as `sanbench
//! replay` reads it), so a missing, unreadable or malformed trace is bad input before any
//! target opens; the workload the run accounts with (its op shares, slots, rate) is the
//! replay's ([`Replay::workload`]). The suite's defaults (qd, time, ramp, workers, ...) are
//! for access specifications and do not reach a trace workload; keys that mean nothing for
//! a replay are refused by name.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::replay::Replay;
use crate::spec::Workload;
use crate::trace_file::{open_replay, ReplaySettings};

/// Slots in flight of a trace workload that gives no `qd` (`sanbench replay`'s default).
pub const DEFAULT_QD: u32 = 64;

/// A suite workload's trace and how it is replayed.
#[derive(Clone, Serialize, Deserialize)]
pub struct SuiteTrace {
    /// The trace as the suite names it.
    pub trace: String,
    /// Where it is (resolved against the suite file's directory).
    pub file: PathBuf,
    pub format: String,
    pub speed: f64,
    pub offset_map: String,
    pub afap: bool,
    /// The trace opened and scanned at load: what a cell's plan replays.
    #[serde(skip)]
    pub replay: Option<Replay>,
}

impl std::fmt::Debug for SuiteTrace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SuiteTrace")
            .field("trace", &self.trace)
            .field("file", &self.file)
            .field("format", &self.format)
            .field("speed", &self.speed)
            .field("offset_map", &self.offset_map)
            .field("afap", &self.afap)
            .finish()
    }
}

/// Two suite traces are the same replay of the same file (the scan follows from those).
impl PartialEq for SuiteTrace {
    fn eq(&self, o: &SuiteTrace) -> bool {
        (
            &self.trace,
            &self.file,
            &self.format,
            self.speed,
            &self.offset_map,
            self.afap,
        ) == (&o.trace, &o.file, &o.format, o.speed, &o.offset_map, o.afap)
    }
}

/// What a suite's `[[workload]]` says about a trace.
pub(crate) struct TraceKeys<'a> {
    pub trace: &'a str,
    pub format: Option<&'a str>,
    pub speed: Option<f64>,
    pub offset_map: Option<&'a str>,
    pub afap: Option<bool>,
    pub qd: Option<u32>,
    pub time: Option<Duration>,
}

/// The trace workload `id` (the suite file in `dir`, `None`: paths relative to the current
/// directory): its replay opened and scanned, and the workload it runs as.
pub(crate) fn load(
    id: &str,
    k: &TraceKeys<'_>,
    dir: Option<&Path>,
) -> Result<(Workload, SuiteTrace), String> {
    let err = |e: String| format!("workload {id}: {e}");
    if k.trace.is_empty() {
        return Err(err("trace = \"\" names no file".into()));
    }
    let file = match dir {
        Some(d) if Path::new(k.trace).is_relative() => d.join(k.trace),
        _ => PathBuf::from(k.trace),
    };
    let format = k.format.unwrap_or("auto").to_string();
    let offset_map = k.offset_map.unwrap_or("none").to_string();
    let settings = ReplaySettings {
        format: format.clone(),
        format_key: "format =",
        speed: k.speed.unwrap_or(1.0),
        map: offset_map.parse().map_err(|e: String| err(e))?,
        afap: k.afap.unwrap_or(false),
    };
    if k.afap == Some(true) && k.speed.is_some() {
        return Err(err(
            "speed scales a timed replay's times; afap = true ignores them (give one)".into(),
        ));
    }
    let shown = file.display().to_string();
    let replay = open_replay(&file, &shown, &settings).map_err(err)?;
    let qd = k.qd.unwrap_or(DEFAULT_QD);
    let mut w = replay.workload(qd, k.time).map_err(err)?;
    w.name = Some(id.to_string());
    let t = SuiteTrace {
        trace: k.trace.to_string(),
        file,
        format,
        speed: settings.speed,
        offset_map,
        afap: settings.afap,
        replay: Some(replay),
    };
    Ok((w, t))
}

/// The keys of a `[[workload]]` that a trace workload does not take, as given (a replay has
/// no ramp, one stream, the trace's own sizes and offsets).
pub(crate) fn refused_keys(given: &[(&'static str, bool)]) -> Vec<&'static str> {
    given.iter().filter(|(_, g)| *g).map(|(k, _)| *k).collect()
}
