//! fio job files, both ways: read a job file into sanbench workloads (import), and write a
//! sanbench workload as the fio job that does the same I/O (export). docs/FIO.md lists what
//! maps and how.
//!
//! Reading is sans-I/O, like the wire codecs: [`ini::parse`] takes the text and a [`Host`]
//! that answers for the environment and `include`d files, so the parser is fuzzed
//! (fuzz/fuzz_targets/fio_job.rs) and tested without files. [`import::import`] then maps one
//! job section, naming every option it cannot take, one line each. [`FsHost`] is the `Host`
//! of a job file on disk (the filesystem and the process's environment), for the command line.
//!
//! [`json`] reads what fio writes back: its JSON output (`json+`: the joint p99 from its
//! latency histogram) as crosscheck's figures and as a result beside sanbench's own.

pub mod export;
pub mod host;
pub mod import;
pub mod ini;
mod job_opts;
pub mod json;
pub mod options;
pub mod sizes;
pub mod value;

pub use export::{export_section, FioTarget};
pub use host::FsHost;
pub use import::{import, ImportOptions, Imported};
pub use ini::{parse, Host, Opt, Section};

/// How a job's targets are opened and what its writes hold: what a fio job says beyond the
/// access specification, in the terms of sanbench's flags.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Setup {
    /// `io_uring` or `sync` (sanbench's `--engine`); `None`: sanbench's default.
    pub engine: Option<String>,
    /// `Some(true)`: O_DIRECT (`--direct`); `Some(false)`: the page cache (`--buffered`).
    pub direct: Option<bool>,
    /// fio's `invalidate=0` (`--no-invalidate`).
    pub keep_cache: bool,
    /// fio's `verify=...` (`--verify`).
    pub verify: bool,
    /// `buffer_compress_percentage` (`--compress`).
    pub compress: f64,
    /// `dedupe_percentage` (`--dedupe`).
    pub dedupe: f64,
    /// `cpus_allowed` as written (`--cpus`; the CLI checks it).
    pub cpus: Option<String>,
    /// `cpus_allowed_policy=split` (`--cpus-policy split`: one CPU per stream).
    pub cpus_split: bool,
}

/// A job file that cannot be read at all.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum FioError {
    #[error("{at}: {msg}")]
    Syntax { at: String, msg: String },
}

impl FioError {
    pub(crate) fn syntax(at: &str, msg: impl Into<String>) -> FioError {
        FioError::Syntax {
            at: at.to_string(),
            msg: msg.into(),
        }
    }
}

#[cfg(test)]
mod tests;
