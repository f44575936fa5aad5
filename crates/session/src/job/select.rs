//! The one choice of how this process runs ([`super::Job`]), made at start-up: a rank of the
//! MPI job a launcher started (feature `mpi`), or alone.

use super::{Job, JobKind, Local};

/// How this process runs a command of `kind`: as one rank when a launcher started it
/// (joining the job: MPI is finalized when the job is dropped) or alone. Refused (one line,
/// exit 2) for a command that does not run under MPI, or under a launcher without the `mpi`
/// feature.
pub fn for_command(kind: JobKind) -> Result<Box<dyn Job>, String> {
    #[cfg(feature = "mpi")]
    if let Some(job) = crate::mpi::start(kind)? {
        return Ok(Box::new(job));
    }
    #[cfg(not(feature = "mpi"))]
    {
        let _ = kind;
        if let Some(msg) = crate::launcher::refuse_without_mpi() {
            return Err(msg);
        }
    }
    Ok(Box::new(Local))
}
