//! The comparison document and the SQLite results store.

pub mod model;

pub use model::{Cell, Comparison, TargetEntry, WorkloadEntry, COMPARE_SCHEMA};
