//! sanbench's engine: the workload model, the one [`Engine`](engine) trait every transport
//! implements, the scheduler that drives it, and the local engines.
//!
//! * [`spec`]: Iometer-style access specifications ([`Workload`], [`Segment`]), from flags or TOML.
//! * [`engine`]: [`Target`] and [`Queue`], the plugin boundary (fio's `ioengine_ops`).
//! * [`gen`]: the per-I/O generator (offsets, sizes, directions), integer-only.
//! * local engines: [`null`], [`mem`], and files and block devices via io_uring or threads.

/// The I/O core's modules, at the paths they had when they lived here.
pub use sanbench_io::{arena, engine, error};
pub mod blkdev;
pub mod discard;
pub mod disruption;
pub mod file;
pub mod gen;
pub mod holes;
/// The per-rank rows of an MPI run: `sanbench_doc::hosts`, at its old path.
pub use sanbench_doc::hosts;
pub mod mem;
pub mod multipath;
pub mod null;
pub mod page_cache;
/// The one lock-poison helper; it lives in `sanbench-stats`, the crate below both the engine
/// and the monitor, and is re-exported here for the crates above the engine.
pub use sanbench_stats::poison;
pub mod precondition;
pub mod replay;
/// The workload model: `sanbench_doc::spec`, at its old path.
pub use sanbench_doc::spec;
pub mod stamp;
/// Sizes, durations, percentages and load levels as users write them; they live in
/// `sanbench-units` (below every crate) and are re-exported here under their old path.
pub use sanbench_units as units;
pub mod uri;
pub mod verify;

pub use arena::Arena;
pub use engine::{
    AccessState, Allocation, Completion, DataPath, Io, Op, Queue, QueueConfig, Readiness, Target,
    TargetInfo, PATH_ERROR,
};
pub use error::EngineError;
pub use spec::{Segment, Workload};
pub mod result;
pub mod run;
pub mod safety;
pub mod suite;
mod suite_trace;
mod sweep;
pub mod sync;
pub mod trace_file;
pub mod uring;
pub use run::{run, NoObserver, Observer, Progress, RunError, RunOutput, RunPlan, TargetRun};
