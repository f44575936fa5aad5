//! Block I/O traces read as streams of typed records, for `sanbench replay`.
//!
//! Every format is parsed sans-I/O over any [`BufRead`], one line at a time: memory stays flat
//! whatever the trace's length (a line is bounded, [`lines::MAX_LINE`]), and the parsers are
//! fuzzed alone (fuzz/fuzz_targets/trace_*.rs). Bad input is a [`TraceError`] naming the line,
//! never a panic; after an error a parser yields nothing more.
//!
//! * [`fio`]: fio's iolog, version 2 (`wait` actions in µs) and version 3 (a timestamp in µs
//!   since the start on every line), as fio's `write_iolog` writes them (fio's HOWTO, "Trace
//!   file format").
//! * [`blkparse`]: blkparse's default text output; the queue (`Q`) events are the I/Os, as the
//!   application asked for them, before the original host's scheduler merged or split them
//!   (dispatch, `D`, is that host's device-side view, which a replay on another host should
//!   not inherit).
//! * [`blktrace`]: blktrace's binary records (one file: per CPU, or blkparse's `-d` dump),
//!   the same queue events.
//! * [`msr`]: the SNIA IOTTA block CSV layout of the MSR Cambridge traces: `Timestamp` (Windows
//!   FILETIME, 100 ns ticks), `Hostname`, `DiskNumber`, `Type` (`Read`/`Write`), `Offset` and
//!   `Size` (bytes), `ResponseTime`.
//!
//! [`scan`] passes over a trace once for what a replay needs before it starts (its extent,
//! the largest I/O, the counts); [`map`] places a trace's offsets on a target's span.
//!
//! Why a crate of its own: the formats are not fio's alone (the fio crate is fio's job files),
//! the engine's replay reads records without knowing a format, and a crate without
//! dependencies builds and fuzzes in seconds.

use std::io::BufRead;

pub mod blkparse;
pub mod blktrace;
pub mod fio;
pub mod lines;
pub mod map;
pub mod msr;
pub mod scan;

pub use map::OffsetMap;
pub use scan::{scan, Summary};

/// What a trace record does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TraceOp {
    Read,
    Write,
    /// A discard (fio's `trim`, blkparse's `D` flag).
    Trim,
}

impl TraceOp {
    pub const ALL: [TraceOp; 3] = [TraceOp::Read, TraceOp::Write, TraceOp::Trim];

    pub fn name(self) -> &'static str {
        match self {
            TraceOp::Read => "read",
            TraceOp::Write => "write",
            TraceOp::Trim => "trim",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }
}

/// One I/O of a trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceRecord {
    /// When the I/O was issued, ns on the trace's own clock (its origin is the format's: fio's
    /// start, blkparse's first event, FILETIME's 1601); a replay measures from the first
    /// record.
    pub time_ns: u64,
    pub op: TraceOp,
    /// Bytes from the start of the traced device or file.
    pub offset: u64,
    /// Bytes, never 0.
    pub len: u32,
}

/// Bad input, at a line (or, in a binary trace, a record) of the trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceError {
    /// 1-based line number (0: before any line); a binary trace's record number.
    pub line: u64,
    pub what: String,
    /// `line` counts binary records, not lines.
    pub record: bool,
}

impl TraceError {
    pub fn new(line: u64, what: impl Into<String>) -> TraceError {
        TraceError {
            line,
            what: what.into(),
            record: false,
        }
    }

    /// An error at record `n` of a binary trace.
    pub fn record(n: u64, what: impl Into<String>) -> TraceError {
        TraceError {
            record: true,
            ..TraceError::new(n, what)
        }
    }
}

impl std::fmt::Display for TraceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let unit = if self.record { "record" } else { "line" };
        write!(f, "{unit} {}: {}", self.line, self.what)
    }
}

impl std::error::Error for TraceError {}

/// A trace's format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// fio iolog, version 2 or 3 (told by its first line).
    Fio,
    Blkparse,
    /// blktrace's binary records.
    Blktrace,
    Msr,
}

impl Format {
    pub fn name(self) -> &'static str {
        match self {
            Format::Fio => "fio",
            Format::Blkparse => "blkparse",
            Format::Blktrace => "blktrace",
            Format::Msr => "msr",
        }
    }

    /// The format of a trace from its first bytes (a line or more), `None` when none fits.
    pub fn detect(head: &[u8]) -> Option<Format> {
        if blktrace::looks_like(head) {
            return Some(Format::Blktrace);
        }
        let text = String::from_utf8_lossy(&head[..head.len().min(lines::MAX_LINE)]);
        let mut it = text.lines().map(str::trim).filter(|l| !l.is_empty());
        let first = it.next()?;
        if fio::version_of(first).is_some() {
            return Some(Format::Fio);
        }
        // An MSR file may open with a header row; judge the first data row.
        let data = if first.to_ascii_lowercase().starts_with("timestamp,") {
            it.next().unwrap_or(first)
        } else {
            first
        };
        if msr::looks_like(data) {
            return Some(Format::Msr);
        }
        if blkparse::looks_like(first) {
            return Some(Format::Blkparse);
        }
        None
    }
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Format, String> {
        match s {
            "fio" | "iolog" => Ok(Format::Fio),
            "blkparse" => Ok(Format::Blkparse),
            "blktrace" => Ok(Format::Blktrace),
            "msr" | "snia" => Ok(Format::Msr),
            _ => Err(format!(
                "unknown trace format {s:?} (auto, fio, blkparse, blktrace or msr)"
            )),
        }
    }
}

/// One format's parser: the next record, or an error, or `None` at the end of the input.
pub trait Parse: Sized {
    fn parse_next(&mut self) -> Option<Result<TraceRecord, TraceError>>;

    /// The records, ending at the first error.
    fn records(self) -> UntilError<Self> {
        UntilError {
            parser: self,
            failed: false,
        }
    }
}

/// A parser's records, nothing after its first error: bad input leaves a parser's place in
/// the input untrusted (inside a line, or a binary record read halfway), so every format
/// stops there in the same way.
pub struct UntilError<P> {
    parser: P,
    failed: bool,
}

impl<P: Parse> Iterator for UntilError<P> {
    type Item = Result<TraceRecord, TraceError>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let r = self.parser.parse_next();
        if matches!(r, Some(Err(_))) {
            self.failed = true;
        }
        r
    }
}

/// A trace's records in one of the formats.
pub enum Records<R> {
    Fio(UntilError<fio::Iolog<R>>),
    Blkparse(UntilError<blkparse::Blkparse<R>>),
    Blktrace(UntilError<blktrace::Blktrace<R>>),
    Msr(UntilError<msr::Msr<R>>),
}

/// The records of `r`, read as `format`.
pub fn records<R: BufRead>(format: Format, r: R) -> Records<R> {
    match format {
        Format::Fio => Records::Fio(fio::Iolog::new(r).records()),
        Format::Blkparse => Records::Blkparse(blkparse::Blkparse::new(r).records()),
        Format::Blktrace => Records::Blktrace(blktrace::Blktrace::new(r).records()),
        Format::Msr => Records::Msr(msr::Msr::new(r).records()),
    }
}

impl<R: BufRead> Iterator for Records<R> {
    type Item = Result<TraceRecord, TraceError>;
    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Records::Fio(p) => p.next(),
            Records::Blkparse(p) => p.next(),
            Records::Blktrace(p) => p.next(),
            Records::Msr(p) => p.next(),
        }
    }
}

/// The largest I/O a trace may hold: an I/O buffer of that size is kept per queue slot, so a
/// corrupt length must not become a huge allocation.
pub const MAX_LEN: u64 = 16 << 20;

/// Checks a record's length (bytes) against 1..=[`MAX_LEN`].
pub(crate) fn length(line: u64, len: u64) -> Result<u32, TraceError> {
    match len {
        0 => Err(TraceError::new(line, "an I/O of length 0")),
        l if l > MAX_LEN => Err(TraceError::new(
            line,
            format!("an I/O of {l} bytes, above the largest replayed ({MAX_LEN})"),
        )),
        l => Ok(l as u32),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_are_detected_from_their_first_lines() {
        assert_eq!(
            Format::detect(b"fio version 2 iolog\n/f add\n"),
            Some(Format::Fio)
        );
        assert_eq!(
            Format::detect(b"fio version 3 iolog\n0 /f add\n"),
            Some(Format::Fio)
        );
        assert_eq!(
            Format::detect(b"128166372003061629,hm,0,Read,3386322944,4096,15029\n"),
            Some(Format::Msr)
        );
        assert_eq!(
            Format::detect(
                b"Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime\n1,h,0,Write,0,512,1\n"
            ),
            Some(Format::Msr)
        );
        assert_eq!(
            Format::detect(
                b"  8,0    3        1     0.000000000   697  Q   W 223490 + 8 [kjournald]\n"
            ),
            Some(Format::Blkparse)
        );
        assert_eq!(
            Format::detect(&[0x07, 0x74, 0x61, 0x65, 0, 0, 0, 1]),
            Some(Format::Blktrace)
        );
        assert_eq!(Format::detect(b"hello\n"), None);
        assert_eq!(Format::detect(b""), None);
        assert_eq!(Format::detect(&[0xff; 40]), None);
    }

    #[test]
    fn lengths_are_bounded() {
        assert!(length(3, 0).is_err());
        assert!(length(3, MAX_LEN + 1).is_err());
        assert_eq!(length(3, 4096), Ok(4096));
    }
}
