//! The run's clock: nanoseconds since the measured run started. The scheduler reads time only
//! through it, so a test can drive a run with a clock it controls (a fake target advancing
//! time by exactly its service time) and check the figures exactly, as hyperfine's executor
//! takes its timer from outside.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

pub trait Clock: Send + Sync {
    /// Nanoseconds since the run started.
    fn now_ns(&self) -> u64;
}

/// The real clock (CLOCK_MONOTONIC through `Instant`).
pub struct Monotonic(pub Instant);

impl Clock for Monotonic {
    #[inline]
    fn now_ns(&self) -> u64 {
        self.0.elapsed().as_nanos() as u64
    }
}

/// A clock that moves only when told: for tests of the scheduler with a fake target.
#[derive(Default)]
pub struct Manual(AtomicU64);

impl Manual {
    pub fn new() -> Manual {
        Manual(AtomicU64::new(0))
    }

    /// Moves the clock to `ns`, never backwards.
    pub fn advance_to(&self, ns: u64) {
        self.0.fetch_max(ns, Ordering::SeqCst);
    }
}

impl Clock for Manual {
    fn now_ns(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}
