//! Running one plan in step with other processes (the ranks of an MPI job) without the engine
//! knowing how they talk: the caller passes a [`PhaseSync`] in the plan.
//!
//! The phases: every process opens its queues (connects, logs in); the coordinator then calls
//! [`PhaseSync::start`], which returns when every process has done so (a barrier); the run's
//! clock starts at its return, so ramp and window start at the barrier's exit on every
//! process, each on its own monotonic clock. The window ends when [`PhaseSync::end_now`] says
//! so: one process decides (its time is up or it was stopped) and tells the others, so all
//! windows end together instead of each on its own clock.

use crate::error::EngineError;

/// The hooks a synchronized run calls from its coordinating thread (the thread that called
/// [`super::run`]), never from a stream thread.
pub trait PhaseSync: Send + Sync {
    /// Every local queue is open; returns once every participant's are. An error ends the run
    /// before any I/O is counted.
    fn start(&self) -> Result<(), EngineError>;
    /// Polled by the coordinator (every 200 µs near the end): `due` says this process's own
    /// window is over (its time is up, or it was stopped). `Ok(true)`: the window ends now.
    fn end_now(&self, due: bool) -> Result<bool, EngineError>;
}
