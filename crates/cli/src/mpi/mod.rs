//! sanbench as the ranks of an MPI job (feature `mpi`, rsmpi): `mpirun -n N sanbench run ...`
//! or `srun ... sanbench run ...`. Every rank is one load generator with the same options;
//! rank 0 alone reports.
//!
//! * this module: joining the job (MPI_Init when a launcher started us), who we are (rank,
//!   size, host), and ending the whole job when one rank fails (MPI_Abort, so no rank waits
//!   for one that will never come);
//! * [`sync`]: the engine's [`PhaseSync`](sanbench_engine::run::sync::PhaseSync) over MPI (a
//!   barrier after every rank opened its targets; the window's end decided by rank 0 and sent
//!   to every rank);
//! * [`run`]: one rank's part of `sanbench run`, the gather of every rank's output (counters,
//!   HdrHistograms in their V2 serialization, monitors) to rank 0, and the merged document;
//! * [`hist`]: every rank's `--hist-log` lines into rank 0's log, tagged by rank.
//!
//! MPI calls are made only from the main thread (the engine calls its sync hooks from the
//! thread that runs the plan), so MPI is initialized at `MPI_THREAD_FUNNELED`.

pub mod compare;
pub mod hist;
pub mod run;
pub mod sync;

use mpi::environment::Universe;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;

/// This process's place in the job.
#[derive(Clone, Debug)]
pub struct Job {
    pub rank: u32,
    pub size: u32,
    pub host: String,
    pub launcher: &'static str,
}

/// Joins the job when a launcher started this process (its environment says so) and the
/// command is one that runs under MPI: this process's place in it (for the context), and the
/// universe, which finalizes MPI when dropped.
/// Other commands under a launcher are refused (one line, exit 2) rather than run N times.
pub fn start(command: &crate::args::Command) -> Result<Option<(Universe, Job)>, String> {
    let Some((_, n, who)) = crate::launcher::launched(&|k| std::env::var(k).ok()) else {
        return Ok(None);
    };
    match command {
        crate::args::Command::Run(_) => {}
        crate::args::Command::Compare(c) if c.curve.is_none() => {}
        crate::args::Command::Compare(_) => {
            return Err(format!(
                "started by {who} as one of {n} ranks: compare --curve does not run as an MPI \
                 job yet (each rank's load levels would need the merged maxima); drop --curve"
            ))
        }
        _ => {
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
    let job = Job {
        rank: world.rank() as u32,
        size: world.size() as u32,
        host,
        launcher: who,
    };
    Ok(Some((universe, job)))
}

/// Ends the whole job after this rank failed: one line naming the rank and its host, then
/// MPI_Abort, which makes the launcher stop every rank (exit code 1).
pub fn abort(job: &Job, message: &str) -> ! {
    eprintln!(
        "sanbench: rank {} of {} on {}: {message}",
        job.rank, job.size, job.host
    );
    SimpleCommunicator::world().abort(1)
}
