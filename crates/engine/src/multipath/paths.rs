//! What a multipath target shares with its queues: each path's target and how to open it
//! again ([`Opener`]), the logical unit the paths lead to ([`LU_ID`]), and the reconnection of
//! a failed path (`reconnect`), which the queues run and which checks that logical unit.

use std::sync::{Arc, Mutex};

use super::uri::Options;
use crate::engine::{Queue, QueueConfig, Target};
use crate::error::EngineError;
use crate::poison::lock;

pub use sanbench_io::params::LU_ID;

/// Opens one path's target afresh: a reconnection needs it when the path's session went down
/// with the link (an NVMe controller lives as long as its admin queue's connection).
pub type Opener = Arc<dyn Fn() -> Result<Arc<dyn Target>, EngineError> + Send + Sync>;

/// What the target and every queue opened from it share.
pub(super) struct Shared {
    /// Each path's target, replaced when a reconnection had to open it again.
    pub(super) paths: Vec<Mutex<Arc<dyn Target>>>,
    pub(super) openers: Vec<Opener>,
    /// The logical unit every path leads to.
    pub(super) lu: String,
    /// The paths' URIs, secrets masked.
    pub(super) uris: Vec<String>,
    pub(super) options: Options,
    /// Where the paths' 10 ms completion bins start (the same for every queue).
    pub(super) epoch: std::time::Instant,
    pub(super) epoch_unix_ns: u64,
}

/// A failed path's new queue: from its target, or, when that cannot open one, from the target
/// opened again (checked to be the same logical unit). One reconnection per path opens it
/// again at a time; the others then use what it opened. The target's access state is read
/// again first (a path taken out by a path-related status comes back in the state it is now
/// in, which may carry no I/O).
pub(super) fn reconnect(
    sh: &Shared,
    p: usize,
    cfg: &QueueConfig,
) -> Result<Box<dyn Queue>, EngineError> {
    let t = lock(&sh.paths[p]).clone();
    let first = match t.refresh_access_state().and_then(|_| t.open_queue(cfg)) {
        Ok(q) => return Ok(q),
        Err(e) => e,
    };
    let mut current = lock(&sh.paths[p]);
    if !Arc::ptr_eq(&current, &t) {
        let t = current.clone();
        drop(current);
        return t
            .refresh_access_state()
            .and_then(|_| t.open_queue(cfg))
            .map_err(|_| first);
    }
    let fresh = (sh.openers[p])()?;
    let lu = fresh.info().params.get(LU_ID).and_then(|v| v.as_str());
    if lu != Some(sh.lu.as_str()) {
        return Err(EngineError::Invalid(format!(
            "{} now leads to another logical unit ({}, was {})",
            sh.uris[p],
            lu.unwrap_or("unnamed"),
            sh.lu
        )));
    }
    fresh.refresh_access_state()?;
    let q = fresh.open_queue(cfg)?;
    *current = fresh;
    Ok(q)
}
