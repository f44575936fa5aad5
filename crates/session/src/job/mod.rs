//! How this process takes part in `run` and `compare`: alone ([`Local`]) or as one rank of an
//! MPI job (mpi/, feature `mpi`), chosen once at start-up ([`select`]) and kept in the
//! command's context. Everything that depends on the rank goes through [`Job`]: which targets
//! this process drives (`{rank}`, `{host}` expanded; `--monitor-only-ranks`), who
//! preconditions targets every rank shares, the phase hooks that run each plan in step with
//! the other ranks, rank 0's decision to go on, and the gather of every rank's result into
//! rank 0's one document. Only [`select`] and mpi/ know MPI.

pub mod select;

use std::sync::Arc;

use sanbench_engine::result::RunDoc;
use sanbench_engine::run::sync::PhaseSync;
use sanbench_engine::{RunOutput, Workload};

use crate::error::{usage, CliError};
use crate::watch::Watch;

/// One process's part of a run (or of one cell of a comparison), for [`Job::gather`].
// Alone, the part is its document: the rest is read by the MPI job only.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub struct Part<'a> {
    /// The workload that ran.
    pub workload: &'a Workload,
    /// The targets as given (`{rank}`, `{host}` unexpanded), by index.
    pub templates: &'a [String],
    /// This process's document and its run's output (what is merged).
    pub doc: RunDoc,
    pub output: RunOutput,
    /// Whether this process only measured its host (`--monitor-only-ranks`).
    pub monitor_only: bool,
    /// Whether the run kept its raw latencies ([`Job::raw_latencies`]).
    pub raw_latencies: bool,
    /// The command's watch, whose histogram log gathers every rank's lines.
    pub watch: Option<&'a Watch>,
}

/// How this process takes part in a run: alone, or one rank of several in step.
pub trait Job {
    /// This process's rank in a job of several processes (`None`: it runs alone).
    fn rank(&self) -> Option<u32>;

    /// Whether this process is one rank of a job.
    fn in_job(&self) -> bool {
        self.rank().is_some()
    }

    /// Whether this process reports (prints, writes files, touches the store, preconditions
    /// the targets every rank shares): alone, or rank 0.
    fn reports(&self) -> bool {
        self.rank().is_none_or(|r| r == 0)
    }

    /// A target URI as this process drives it (a rank's `{rank}` and `{host}` expanded).
    fn expand(&self, uri: &str) -> String;

    /// Whether this process only measures its host: `--monitor-only-ranks LIST` names it.
    fn monitor_only(&self, list: Option<&str>) -> Result<bool, CliError>;

    /// The phase hooks that run a plan in step with the other ranks (`None`: alone).
    fn sync(&self) -> Option<Arc<dyn PhaseSync>>;

    /// Whether `run` keeps its raw latencies (a test hook of MPI runs).
    fn raw_latencies(&self) -> bool {
        false
    }

    /// Whether to go on: rank 0 decides (`mine`: its own view) and every rank gets its
    /// decision, so all reach the next barrier or none.
    fn go_on(&self, mine: bool) -> bool;

    /// Every rank's part to rank 0: the merged document there, `None` on the other ranks
    /// (alone: the part's own document).
    fn gather(&self, part: Part<'_>) -> Result<Option<RunDoc>, CliError>;

    /// Ends what this process is part of after it failed with `message` (a job: every rank,
    /// so none waits for this one; alone, nothing: the process exits as it would).
    fn abort(&self, message: &str);
}

/// A process that runs alone.
pub struct Local;

impl Job for Local {
    fn rank(&self) -> Option<u32> {
        None
    }

    fn expand(&self, uri: &str) -> String {
        uri.to_string()
    }

    fn monitor_only(&self, list: Option<&str>) -> Result<bool, CliError> {
        match list {
            None => Ok(false),
            Some(_) => Err(usage(
                "--monitor-only-ranks needs a run under mpirun or srun by a sanbench built with \
                 --features mpi",
            )),
        }
    }

    fn sync(&self) -> Option<Arc<dyn PhaseSync>> {
        None
    }

    fn go_on(&self, mine: bool) -> bool {
        mine
    }

    fn gather(&self, part: Part<'_>) -> Result<Option<RunDoc>, CliError> {
        Ok(Some(part.doc))
    }

    fn abort(&self, _message: &str) {}
}

/// What the command about to run is, as far as the choice of job goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobKind {
    /// `run`: runs as an MPI job.
    Run,
    /// `compare` without `--curve`: runs as an MPI job.
    Compare,
    /// `compare --curve`: not as an MPI job yet.
    CompareCurve,
    /// Every other command: runs once, never as a rank.
    Other,
}
