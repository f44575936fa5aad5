//! State shared by the stream threads and the coordinating thread, and the coordinator itself:
//! it opens and closes the measured window for the observer, reports progress once a second, and
//! samples every stream's in-flight count at random instants (Poisson, at the rate
//! [`InflightSampler`] chooses), so that the mean outstanding I/Os of the Little's-law check is a
//! time average measured independently of the latency timestamps (PASTA: Poisson arrivals see
//! time averages).

use crate::poison;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

pub(super) use super::inflight::InflightSampler;
use super::sync::PhaseSync;
use super::{Observer, Progress, RunError};

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

    pub(super) fn fail(&self, e: RunError) {
        let mut g = lock(&self.first_error);
        if g.is_none() {
            *g = Some(e);
        }
        self.abort.store(true, Ordering::Relaxed);
    }
}

/// How often a synchronized run asks whether the window has ended, once its own end is near
/// (the delay between the deciding process's end and this one's).
const SYNC_POLL_NS: u64 = 200_000;

/// `window`: the ramp's end and the window's end (ns since the start).
pub(super) fn coordinate(
    (ramp_ns, end_ns): (u64, u64),
    shared: &Shared,
    lives: &[Arc<Live>],
    observer: &dyn Observer,
    seed: u64,
    sync: Option<&dyn PhaseSync>,
    intervals: &mut super::collect::Collector<'_>,
) -> InflightSampler {
    let Some(clock) = shared.clock.get() else {
        return InflightSampler::new(0, lives.len(), 0, 1);
    };
    // The ramp's samples teach the schedule how much the counts move; the window's count.
    let mut samples = InflightSampler::new(
        seed ^ 0x5a3b1e,
        lives.len(),
        0,
        end_ns.saturating_sub(ramp_ns),
    );
    let mut in_window = ramp_ns == 0;
    if in_window {
        observer.window_started();
    }
    let mut last_tick = 0u64;
    let (mut last_ios, mut last_bytes) = (0u64, 0u64);
    loop {
        let now = clock.now_ns();
        if shared.abort.load(Ordering::Relaxed) {
            break;
        }
        let stopped = shared.stop.load(Ordering::Relaxed);
        if !in_window && now >= ramp_ns && !stopped {
            in_window = true;
            observer.window_started();
        }
        match sync {
            None if stopped || now >= end_ns => break,
            None => {}
            Some(s) => match s.end_now(stopped || now >= end_ns) {
                Ok(true) => {
                    // The window ends here for every stream of this process.
                    shared.end_at.store(clock.now_ns(), Ordering::Relaxed);
                    break;
                }
                Ok(false) => {}
                Err(error) => {
                    shared.fail(RunError {
                        target: "synchronized run".into(),
                        worker: 0,
                        error,
                    });
                    break;
                }
            },
        }
        intervals.poll(None);
        if now >= samples.next_at() {
            let counts = lives.iter().map(|l| l.inflight.load(Ordering::Relaxed));
            samples.record(now, counts, in_window);
        }
        if now - last_tick >= 1_000_000_000 {
            let ios: u64 = lives.iter().map(|l| l.ios.load(Ordering::Relaxed)).sum();
            let bytes: u64 = lives.iter().map(|l| l.bytes.load(Ordering::Relaxed)).sum();
            let dt = (now - last_tick) as f64 / 1e9;
            observer.progress(&Progress {
                elapsed: Duration::from_nanos(now),
                ramping: now < ramp_ns,
                remaining: Duration::from_nanos(end_ns.saturating_sub(now)),
                iops: (ios - last_ios) as f64 / dt,
                bytes_per_s: (bytes - last_bytes) as f64 / dt,
            });
            last_tick = now;
            last_ios = ios;
            last_bytes = bytes;
        }
        let next_event = if in_window { end_ns } else { ramp_ns };
        // Short intervals are collected as often as they end, so few wait in the channel
        // and the pool hands the streams emptied ones instead of new allocations.
        let poll_ns = intervals.len_ns.clamp(1_000_000, 50_000_000);
        let max_sleep = match sync {
            // The deciding process may end a little before this one's own end: poll often
            // from shortly before it.
            Some(_) if now + 50_000_000 >= end_ns || stopped => SYNC_POLL_NS,
            _ => poll_ns,
        };
        let sleep_ns = next_event
            .saturating_sub(now)
            .min(last_tick + 1_000_000_000 - now.min(last_tick + 1_000_000_000))
            .min(samples.next_at().saturating_sub(now))
            .clamp(20_000.min(max_sleep), max_sleep);
        let sleep_ns = match sync {
            Some(_) if now >= end_ns || stopped => SYNC_POLL_NS,
            _ => sleep_ns,
        };
        thread::sleep(Duration::from_nanos(sleep_ns));
    }
    if in_window {
        observer.window_ended();
    }
    samples
}
