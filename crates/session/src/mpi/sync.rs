//! The engine's phase hooks over MPI: the start barrier, and the window's end decided by
//! rank 0 (one message to every other rank, which polls for it without blocking).

use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use sanbench_engine::run::sync::PhaseSync;
use sanbench_engine::EngineError;

/// Tag of rank 0's "the window ends now".
pub const TAG_END: i32 = 0x5b01;
/// Tag of a rank's result sent to rank 0.
pub const TAG_RESULT: i32 = 0x5b02;

/// The job's ranks, in step. Holds no MPI handle: the world communicator is looked up at each
/// call (a constant handle), so the hooks are `Send + Sync` as the engine asks, and are
/// called from the main thread only.
pub struct MpiSync {
    pub rank: u32,
    pub size: u32,
}

impl PhaseSync for MpiSync {
    fn start(&self) -> Result<(), EngineError> {
        SimpleCommunicator::world().barrier();
        Ok(())
    }

    fn end_now(&self, due: bool) -> Result<bool, EngineError> {
        let world = SimpleCommunicator::world();
        if self.rank == 0 {
            if due {
                for r in 1..self.size {
                    world.process_at_rank(r as i32).send_with_tag(&1u8, TAG_END);
                }
            }
            return Ok(due);
        }
        let root = world.process_at_rank(0);
        if root.immediate_probe_with_tag(TAG_END).is_none() {
            return Ok(false);
        }
        let (_, _status): (u8, _) = root.receive_with_tag(TAG_END);
        Ok(true)
    }
}
