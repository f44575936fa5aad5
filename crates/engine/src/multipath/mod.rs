//! Multipath: one logical unit reached over several portals, I/O spread over them by
//! dm-multipath's path selectors, and failover when a path fails.
//!
//! It lives in the engine crate, beside the trait it wraps, because it knows no transport: a
//! [`MultipathTarget`] is an [`Engine`](crate::engine) target built from one inner target per
//! portal, whatever opened them (`targets.rs` in the CLI maps the schemes), and its queues
//! are queues of queues. The scheduler sees one target.
//!
//! * [`selector`]: the pure policy (selectors, path states, groups, failback, no_path_retry).
//! * [`uri`]: splitting `scheme://H1,H2/...?policy=...` into one URI per portal and options.
//! * `paths`: what the target and its queues share: the paths' targets, opening a path again
//!   (reconnection).
//! * `target`: the [`Target`](crate::Target) over the paths: opening, the check that they lead
//!   to one logical unit.
//! * `queue`: the [`Queue`](crate::Queue) over the paths' queues: routing, the outstanding
//!   I/Os kept for reissue, failure, background reconnection.
//! * [`report`]: what each path carried and what happened to it, for the result.

mod paths;
mod queue;
pub mod report;
pub mod selector;
mod target;
pub mod uri;

#[cfg(test)]
mod queue_tests;
#[cfg(test)]
mod selector_tests;

pub use paths::{Opener, LU_ID};
pub use queue::WAIT_SLICE;
pub use report::{PathEvent, PathReport};
pub use selector::{Config, Failback, Group, Policy, Selector, State};
pub use target::{MultipathTarget, MULTI_CONN, PATHS};
pub use uri::{MultipathUri, Options};
