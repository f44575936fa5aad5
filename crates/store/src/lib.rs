//! The SQLite results store of comparison documents (`sanbench.compare/3`, earlier versions load; typed in
//! `sanbench_doc::compare` and re-exported here as [`model`]). [`Store`] keeps every run in one SQLite file,
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
/// The comparison document, at its old path: it is `sanbench_doc::compare`.
pub use sanbench_doc::compare as model;

pub use db::{default_path_from, RunId, RunSummary, Store, StoreError, SCHEMA_VERSION};
pub use sanbench_doc::RUN_WORKLOAD;
pub use sanbench_doc::{Cell, Comparison, Question, TargetEntry, WorkloadEntry, COMPARE_SCHEMA};
