//! sanbench's result documents as serde types, and nothing else: no I/O, no measurement.
//!
//! * [`run`]: `sanbench.run/1`, what `run --json` writes: a [`run::TargetResult`] per target
//!   with its blocks ([`efficiency`], [`interval`], [`verify`], [`multipath`], [`disruption`],
//!   [`bottleneck`], [`precondition`]), the aggregate, and the run's facts; [`hosts`] the
//!   per-rank rows of an MPI run; [`host`] the monitors' blocks (`cpu`, `net`, `power`,
//!   `host`).
//! * [`compare`]: `sanbench.compare/1`, what `compare` writes as `results.json` and the store
//!   keeps: targets, workloads, cells; [`from_run`] reads a run as a comparison of one cell
//!   per target.
//! * [`spec`]: the workload (access specification) both documents record; [`data`] what the
//!   written data looks like.
//!
//! The engine, the monitors, the CLI and MPI produce these; the store, the report and `diff`
//! read them, and depend on this crate, not on the engine. Field names are public interface:
//! extend, never rename. Both documents are at version 1 of their schema: a document written
//! by any earlier sanbench of that version loads (tests/fixtures/v1 holds files written by
//! main at 9a6bb39, before this crate existed).

pub mod bottleneck;
pub mod compare;
pub mod data;
pub mod disruption;
pub mod efficiency;
mod from_run;
pub mod host;
pub mod hosts;
pub mod interval;
pub mod latency;
pub mod manifest;
pub mod multipath;
pub mod precondition;
pub mod run;
pub mod spec;
pub mod verify;

pub use compare::{Cell, Comparison, Question, TargetEntry, WorkloadEntry, COMPARE_SCHEMA};
pub use efficiency::Efficiency;
pub use from_run::RUN_WORKLOAD;
pub use run::{RunDoc, TargetResult};
pub use spec::{Segment, Workload};
