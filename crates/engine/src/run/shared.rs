//! State shared by the stream threads and the coordinating thread: each stream's live counts
//! ([`Live`]), the run's clock, stop and end, its first error, and the window's close, which
//! every stream thread outlives ([`OutliveWindow`]). The coordinator's loop is
//! run/coordinator.rs.

use crate::poison;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use super::RunError;

pub(super) struct Live {
    pub(super) ios: AtomicU64,
    pub(super) bytes: AtomicU64,
    /// I/Os submitted and not yet reaped (written by the stream only).
    pub(super) inflight: AtomicU64,
}

impl Live {
    pub(super) fn new() -> Arc<Live> {
        Arc::new(Live {
            ios: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            inflight: AtomicU64::new(0),
        })
    }
}

pub(super) struct Shared {
    pub(super) start: OnceLock<Instant>,
    /// The run's clock, set with `start` (the real one unless the plan brings its own).
    pub(super) clock: OnceLock<Arc<dyn super::clock::Clock>>,
    pub(super) abort: AtomicBool,
    pub(super) stop: Arc<AtomicBool>,
    /// Where the window ends (ns since the start): the plan's end, or, in a synchronized run,
    /// `u64::MAX` until the coordinator hears the end and sets it to that instant.
    pub(super) end_at: AtomicU64,
    /// When a stopped run's last stream saw the stop (ns since the start; 0: not stopped):
    /// every completion counted came before it, none after, so the window ends there and
    /// not where the drain that follows ends.
    pub(super) stopped_at: AtomicU64,
    /// Just after the last completion any stream counted (ns since the start; 0: none), set
    /// as each stream stops. A stream counts a completion when its clock reading is before
    /// `end_at` as it sees it; in a synchronized run the coordinator reads the clock, then
    /// publishes the end, so a stream may count past that instant before it sees it (the
    /// coordinator preempted in between): the window then reaches on to here.
    pub(super) counted_below: AtomicU64,
    pub(super) first_error: Mutex<Option<RunError>>,
    /// Set once the coordinator has closed the window (the observer took its end readings).
    pub(super) window_closed: Mutex<bool>,
    pub(super) window_closed_cv: Condvar,
    /// A replay: the streams still replaying; the last to finish its trace ends the window.
    pub(super) replaying: AtomicUsize,
}

impl Shared {
    pub(super) fn new(stop: Arc<AtomicBool>, end_at: u64) -> Arc<Shared> {
        Arc::new(Shared {
            start: OnceLock::new(),
            clock: OnceLock::new(),
            abort: AtomicBool::new(false),
            stop,
            end_at: AtomicU64::new(end_at),
            stopped_at: AtomicU64::new(0),
            counted_below: AtomicU64::new(0),
            first_error: Mutex::new(None),
            window_closed: Mutex::new(false),
            window_closed_cv: Condvar::new(),
            replaying: AtomicUsize::new(0),
        })
    }
}

/// Held by every stream thread and dropped last: the thread does not exit until the window's
/// end readings are taken. A thread that is gone by then takes its CPU time with it (the
/// kernel keeps per-thread run time only for live threads), and a monitor would report the
/// stream's time only up to its last periodic reading: under CPU contention the coordinator
/// wakes late and this was seen to halve a stream's reported CPU.
pub(super) struct OutliveWindow(pub(super) Arc<Shared>);

impl Drop for OutliveWindow {
    fn drop(&mut self) {
        let mut closed = lock(&self.0.window_closed);
        // The coordinator always closes the window; the bound only guards against a bug
        // turning into a hang.
        let give_up = Instant::now() + Duration::from_secs(30);
        while !*closed {
            let now = Instant::now();
            if now >= give_up {
                break;
            }
            closed = poison::wait_timeout(&self.0.window_closed_cv, closed, give_up - now);
        }
    }
}

pub(super) use crate::poison::lock;

impl Shared {
    pub(super) fn close_window(&self) {
        *lock(&self.window_closed) = true;
        self.window_closed_cv.notify_all();
    }

    /// A replaying stream has issued its whole trace and seen every completion at `now_ns`:
    /// the last one ends the window just after (every completion counted lies before it).
    pub(super) fn replay_done(&self, now_ns: u64) {
        if self.replaying.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.end_at.fetch_min(now_ns + 1, Ordering::Relaxed);
        }
    }

    pub(super) fn fail(&self, e: RunError) {
        let mut g = lock(&self.first_error);
        if g.is_none() {
            *g = Some(e);
        }
        self.abort.store(true, Ordering::Relaxed);
    }
}
