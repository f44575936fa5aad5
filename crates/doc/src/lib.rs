//! sanbench's result documents as serde types, and nothing else: no I/O, no measurement.
//!
//! * [`run`]: `sanbench.run/2`, what `run --json` writes: a [`run::TargetResult`] per target
//!   with its blocks ([`efficiency`], [`interval`], [`verify`], [`multipath`], [`disruption`],
//!   [`bottleneck`], [`precondition`]), the aggregate, and the run's facts; [`hosts`] the
//!   per-rank rows of an MPI run; [`host`] the monitors' blocks (`cpu`, `net`, `power`,
//!   `host`).
//! * [`compare`]: `sanbench.compare/3`, what `compare` writes as `results.json` and the store
//!   keeps: targets, workloads, cells; [`from_run`] reads a run as a comparison of one cell
//!   per target.
//! * [`spec`]: the workload (access specification) both documents record ([`spec_toml`] its
//!   TOML form); [`data`] what the
//!   written data looks like.
//!
//! The engine, the monitors, the CLI and MPI produce these; the store, the report and `diff`
//! read them, and depend on this crate, not on the engine. Field names are public interface:
//! extend, never rename.
//!
//! Versions (the `schema` field; every version loads, [`run::SCHEMAS`],
//! [`compare::COMPARE_SCHEMAS`]):
//! * **1**: written by sanbench before this crate existed (tests/fixtures/v1 holds files
//!   written by main at 9a6bb39) and until histograms were compacted.
//! * **2**: latency histograms as HdrHistogram's compressed encoding in base64
//!   ([`latency::Histogram`]: `histogram`, `service_histogram`, `issue_lag_histogram`, and
//!   `trim_histogram`, `write_zeroes_histogram` which came with version 2)
//!   instead of `[ns, count]` pairs (`histogram_ns`, `service_histogram_ns`,
//!   `issue_lag_histogram_ns`, which version 1 documents still load with); documents are
//!   written by [`json`], indented to the blocks and compact below them. Together a demo's
//!   results.json is ~1/8 of its version 1 size. Everything else is as in version 1.
//! * **3** (the comparison only; runs stay at 2): what every cell of a target repeats is
//!   written once, in the target's `shared` (`targets[].shared`: the target info, the
//!   precondition, and the parts of `cpu`, `power`, `net` and `efficiency` all its cells hold),
//!   and each cell's `result` as a JSON merge patch (RFC 7386) over it; the per-core and
//!   all-core CPU shares leave out zeros and keep a tenth of a clock tick's digits
//!   ([`shared`]). Loading expands a version 3 document into the same typed [`Comparison`] as
//!   a version 2 one (`Deserialize` for [`Comparison`] applies the patches and drops `shared`),
//!   so no reader sees where a field was written; `Serialize` writes the compact form for a
//!   version 3 document only, so an older document writes back as it was.

pub mod bottleneck;
pub mod compare;
pub mod crosscheck;
pub mod data;
pub mod disruption;
pub mod efficiency;
mod from_run;
pub mod host;
pub mod hosts;
pub mod interval;
pub mod json;
pub mod latency;
pub mod manifest;
pub mod multipath;
pub mod precondition;
pub mod replay;
pub mod run;
pub mod shared;
pub mod spec;
pub mod spec_toml;
pub mod verify;

pub use compare::{
    Cell, Comparison, Question, TargetEntry, WorkloadEntry, COMPARE_SCHEMA, COMPARE_SCHEMAS,
};
pub use efficiency::Efficiency;
pub use from_run::RUN_WORKLOAD;
pub use run::{RunDoc, TargetResult};
pub use spec::{Segment, Workload};
