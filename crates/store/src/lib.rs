//! The comparison document (`sanbench.compare/1`) and the SQLite results store.
//!
//! [`model`] is the document `compare` writes (`Comparison::from_run` reads a `run`'s document
//! as one, for the report); [`Store`] keeps every run in one SQLite file,
//! cell by cell as they finish, so an interrupted run keeps what it measured and any run can be
//! rendered again later with identical figures.
//!
//! `fixture` (a small deterministic comparison) is test-only: it is compiled for this crate's
//! unit tests and behind the `fixture` feature, which only the dev-dependencies of the crates
//! whose tests and examples use it turn on (the store's own integration tests, the report's
//! tests and its `fixture_report` example). The `sanbench` binary does not carry it.

mod db;
#[cfg(any(test, feature = "fixture"))]
pub mod fixture;
mod from_run;
pub mod model;

pub use db::{default_path_from, RunId, RunSummary, Store, StoreError, SCHEMA_VERSION};
pub use from_run::RUN_WORKLOAD;
pub use model::{Cell, Comparison, Question, TargetEntry, WorkloadEntry, COMPARE_SCHEMA};
