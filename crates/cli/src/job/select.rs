//! The one choice of how this process runs ([`super::Job`]), made at start-up: a rank of the
//! MPI job a launcher started (feature `mpi`), or alone.

use super::{Job, Local};
use crate::args::Command;

/// How this process runs `command`: as one rank when a launcher started it (joining the job:
/// MPI is finalized when the job is dropped) or alone. Refused (one line, exit 2) for a
/// command that does not run under MPI, or under a launcher without the `mpi` feature.
pub fn for_command(command: &Command) -> Result<Box<dyn Job>, String> {
    #[cfg(feature = "mpi")]
    if let Some(job) = crate::mpi::start(command)? {
        return Ok(Box::new(job));
    }
    #[cfg(not(feature = "mpi"))]
    {
        let _ = command;
        if let Some(msg) = crate::launcher::refuse_without_mpi() {
            return Err(msg);
        }
    }
    Ok(Box::new(Local))
}
