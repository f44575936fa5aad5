//! The comparison document (`sanbench.compare/1`) and the SQLite results store.
//!
//! [`model`] is the document `compare` writes; [`Store`] keeps every run in one SQLite file,
//! cell by cell as they finish, so an interrupted run keeps what it measured and any run can be
//! rendered again later with identical figures. [`fixture`] is a small deterministic comparison
//! for tests and demos.

mod db;
pub mod fixture;
pub mod model;

pub use db::{default_path_from, RunId, RunSummary, Store, StoreError, SCHEMA_VERSION};
pub use model::{Cell, Comparison, TargetEntry, WorkloadEntry, COMPARE_SCHEMA};
