//! A trace on disk as a replay reads it: its format (as given, or told from its first bytes),
//! its one scan before the replay (a trace's errors are bad input before any target opens),
//! and the [`TraceFile`] each replaying stream opens afresh. Shared by `sanbench replay` and
//! a suite's `trace = "FILE"` workloads, so both read a trace the same way.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sanbench_trace::{self as trace, Format, OffsetMap};

use crate::error::EngineError;
use crate::replay::{Records, Replay, TraceSource};

/// How much of a trace file is buffered: the replay's read-ahead, whatever the trace's length.
const READ_AHEAD: usize = 256 << 10;

/// A trace file, opened afresh by each stream.
pub struct TraceFile {
    pub path: PathBuf,
    pub format: Format,
}

impl TraceFile {
    /// The file, buffered by the replay's read-ahead.
    pub fn reader(&self) -> std::io::Result<BufReader<std::fs::File>> {
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
        Ok(Box::new(trace::records(self.format, r)))
    }
}

/// The format of the trace at `path`: `given` ("auto" tells it from the first bytes).
/// `shown` names the trace in messages, `key` how the format is given (`--format`).
pub fn format_of(path: &Path, given: &str, shown: &str, key: &str) -> Result<Format, String> {
    if given != "auto" {
        return given.parse();
    }
    let f = std::fs::File::open(path).map_err(|e| format!("cannot open the trace {shown}: {e}"))?;
    let mut r = BufReader::with_capacity(64 << 10, f);
    let head = r
        .fill_buf()
        .map_err(|e| format!("cannot read the trace {shown}: {e}"))?;
    Format::detect(head).ok_or_else(|| {
        format!(
            "cannot tell the format of {shown} from its first lines: give {key} fio, blkparse, blktrace or msr"
        )
    })
}

/// How a trace is to be replayed, as a command or a suite gives it.
#[derive(Clone, Debug, PartialEq)]
pub struct ReplaySettings {
    /// "auto" or a format's name.
    pub format: String,
    /// How the format is given, for a message that asks for it (`--format`, `format =`).
    pub format_key: &'static str,
    pub speed: f64,
    pub map: OffsetMap,
    pub afap: bool,
}

/// The trace at `path` (named `shown` in messages and the result) opened and scanned once:
/// the replay a run performs. Errors are sentences naming the trace.
pub fn open_replay(path: &Path, shown: &str, s: &ReplaySettings) -> Result<Replay, String> {
    let format = format_of(path, &s.format, shown, s.format_key)?;
    if !(s.speed.is_finite() && s.speed > 0.0) {
        return Err(format!("speed {} must be a positive number", s.speed));
    }
    let source = TraceFile {
        path: path.to_path_buf(),
        format,
    };
    let r = source
        .reader()
        .map_err(|e| format!("cannot open the trace {shown}: {e}"))?;
    let summary = trace::scan(trace::records(format, r))
        .map_err(|e| format!("{shown}: {e} (read as {})", format.name()))?;
    Ok(Replay {
        source: Arc::new(source),
        summary,
        speed: s.speed,
        afap: s.afap,
        map: s.map,
        trace: shown.to_string(),
        format: format.name().into(),
    })
}
