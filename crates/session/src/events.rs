//! What a command reports while it works, typed: the window's progress each second, its
//! finished intervals, the bytes a fill or a verification pass has covered, and the end of a
//! run. The library emits these and draws nothing itself: the [`crate::context::Context`]
//! hands them to the observer a program installed ([`crate::context::Context::set_events`]),
//! or, when none was, to the terminal's live line ([`crate::progress::ProgressLine`], what the
//! binary shows).

use std::sync::Arc;

use sanbench_engine::run::{IntervalRecord, IntervalSink, Progress};

/// One thing a running command reports.
pub enum Event<'a> {
    /// Once a second while a window (or its ramp) runs: time spent and left, the last
    /// second's IOPS and bytes per second over all targets.
    Progress(&'a Progress),
    /// A finished interval of the window, per target (`--log-interval` long; its latency
    /// histogram gives the live p99).
    Interval(&'a IntervalRecord<'a>),
    /// Preconditioning or a verification pass on `target`: `done` of `total` bytes.
    Fill {
        target: &'a str,
        done: u64,
        total: u64,
    },
    /// A run, a fill or a comparison's cell ended: whatever stands for it goes, and the next
    /// one starts afresh.
    Ended,
}

/// Where a command's events go. Called from the run's coordinating thread (and the
/// precondition's), so it must be cheap and never block for long.
pub trait Events: Send + Sync {
    fn event(&self, e: &Event<'_>);

    /// Whether it wants [`Event::Interval`]s: a run whose observer does not want them does
    /// not pay for sending them.
    fn wants_intervals(&self) -> bool {
        true
    }
}

/// The interval sink of a run whose intervals go to `events` (`None`: they are not wanted).
pub fn interval_sink(events: &Arc<dyn Events>) -> Option<Arc<dyn IntervalSink>> {
    events
        .wants_intervals()
        .then(|| Arc::new(Forward(events.clone())) as Arc<dyn IntervalSink>)
}

struct Forward(Arc<dyn Events>);

impl IntervalSink for Forward {
    fn interval(&self, rec: &IntervalRecord<'_>) {
        self.0.event(&Event::Interval(rec));
    }
}
