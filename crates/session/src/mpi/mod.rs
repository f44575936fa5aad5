//! sanbench as the ranks of an MPI job (feature `mpi`, rsmpi): `mpirun -n N sanbench run ...`
//! or `srun ... sanbench run ...`. Every rank is one load generator with the same options;
//! rank 0 alone reports.
//!
//! * this module: joining the job (MPI_Init when a launcher started us), who we are (rank,
//!   size, host), the job as `run` and `compare` see it ([`Job`](crate::job::Job): targets per
//!   rank, phases in step, rank 0's decisions, the gather), and ending the whole job when one
//!   rank fails (MPI_Abort, so no rank waits for one that will never come);
//! * [`sync`]: the engine's [`PhaseSync`](sanbench_engine::run::sync::PhaseSync) over MPI (a
//!   barrier after every rank opened its targets; the window's end decided by rank 0 and sent
//!   to every rank);
//! * [`run`]: the gather of every rank's output (counters, HdrHistograms in their V2
//!   serialization, monitors) to rank 0, and the merged document;
//! * [`hist`]: every rank's `--hist-log` lines into rank 0's log, tagged by rank.
//!
//! MPI calls are made only from the main thread (the engine calls its sync hooks from the
//! thread that runs the plan), so MPI is initialized at `MPI_THREAD_FUNNELED`.

pub mod hist;
pub mod run;
pub mod sync;

use std::sync::Arc;

use mpi::environment::Universe;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use sanbench_engine::result::RunDoc;
use sanbench_engine::run::sync::PhaseSync;

use crate::error::{usage, CliError};
use crate::job::{Job, Part};
use run::RankReport;
use sync::MpiSync;

/// This process's place in the job, and the job joined (MPI is finalized when this is
/// dropped).
pub struct MpiJob {
    pub rank: u32,
    pub size: u32,
    pub host: String,
    pub launcher: &'static str,
    _universe: Universe,
}

/// Joins the job when a launcher started this process (its environment says so) and the
/// command is one that runs under MPI. Other commands under a launcher are refused (one line,
/// exit 2) rather than run N times.
pub fn start(command: crate::job::JobKind) -> Result<Option<MpiJob>, String> {
    let Some((_, n, who)) = crate::launcher::launched(&|k| std::env::var(k).ok()) else {
        return Ok(None);
    };
    use crate::job::JobKind;
    match command {
        JobKind::Run | JobKind::Compare => {}
        JobKind::CompareCurve => {
            return Err(format!(
                "started by {who} as one of {n} ranks: compare --curve does not run as an MPI \
                 job yet (each rank's load levels would need the merged maxima); drop --curve"
            ))
        }
        JobKind::Other => {
            return Err(format!(
                "started by {who} as one of {n} ranks: only `sanbench run` and `compare` run \
                 as an MPI job (serve and the others run once, without the launcher)"
            ))
        }
    }
    let Some((universe, _)) = mpi::initialize_with_threading(mpi::Threading::Funneled) else {
        return Err("MPI was already initialized".into());
    };
    let world = universe.world();
    let host = mpi::environment::processor_name()
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown-host".into());
    Ok(Some(MpiJob {
        rank: world.rank() as u32,
        size: world.size() as u32,
        host,
        launcher: who,
        _universe: universe,
    }))
}

impl Job for MpiJob {
    fn rank(&self) -> Option<u32> {
        Some(self.rank)
    }

    fn expand(&self, uri: &str) -> String {
        crate::ranks::expand(uri, self.rank, &self.host)
    }

    fn monitor_only(&self, list: Option<&str>) -> Result<bool, CliError> {
        Ok(match list {
            Some(list) => crate::ranks::parse_rank_list(list, self.size)
                .map_err(usage)?
                .contains(&self.rank),
            None => false,
        })
    }

    fn sync(&self) -> Option<Arc<dyn PhaseSync>> {
        Some(Arc::new(MpiSync {
            rank: self.rank,
            size: self.size,
        }))
    }

    fn raw_latencies(&self) -> bool {
        std::env::var_os(run::RAW_ENV).is_some()
    }

    fn go_on(&self, mine: bool) -> bool {
        let mut flag = u8::from(mine);
        SimpleCommunicator::world()
            .process_at_rank(0)
            .broadcast_into(&mut flag);
        flag != 0
    }

    fn gather(&self, part: Part<'_>) -> Result<Option<RunDoc>, CliError> {
        let mut output = part.output;
        if part.raw_latencies {
            run::write_raw(self, &mut output)?;
        }
        let mine = RankReport {
            bytes: 0,
            rank: self.rank,
            host: self.host.clone(),
            monitor_only: part.monitor_only,
            output,
            doc: part.doc,
        };
        match run::exchange(self, mine, part.watch)? {
            Some((all, gather_ms)) => {
                run::merged_doc(part.workload, part.templates, self, all, gather_ms).map(Some)
            }
            None => Ok(None),
        }
    }

    /// One line naming the rank and its host, then MPI_Abort, which makes the launcher stop
    /// every rank (exit code 1).
    fn abort(&self, message: &str) {
        eprintln!(
            "sanbench: rank {} of {} on {}: {message}",
            self.rank, self.size, self.host
        );
        SimpleCommunicator::world().abort(1)
    }
}
